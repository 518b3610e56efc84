"""Full size, end to end, once: NOT part of the default run (minutes and ~3 GB per process on
2 CPU cores); run it with ``G2G_FULL_SIZE=1 .venv/bin/python -m pytest
test/test_paper_full_size.py -s``.

A full-size MapAnything V1 with random weights is written in the release's layout
(``map-anything-model/config.json`` with MapAnything's constructor arguments for the V1 large
model + a 2 GB ``model.safetensors``), a random paper-preset (W = 5) G2G-only ``.pth`` in the
official format is converted, ``g2g-map build`` encodes a simulated traversal with them, and
the ``relocalize`` node (real process, real DDS) localizes a query traversal against that map.
Prints wall times and peak memory; the figures are in benchmarks/RESULTS_paper_cpu.md.
"""

import json
import os
import pathlib
import resource
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.skipif(os.environ.get("G2G_FULL_SIZE") != "1",
                                 reason="full size takes minutes: set G2G_FULL_SIZE=1"),
              pytest.mark.timeout(1800)]

ROOT = pathlib.Path(__file__).resolve().parents[1]
V1_LARGE_INIT_KWARGS = {  # what MapAnything.from_pretrained's config.json holds for V1
    "name": "mapanything",
    "encoder_config": {"encoder_str": "dinov2", "size": "large", "with_registers": False,
                       "uses_torch_hub": True, "data_norm_type": "dinov2"},
    "info_sharing_config": {"model_type": "alternating_attention",
                            "model_return_type": "intermediate_features",
                            "module_args": {"depth": 24, "dim": 768, "num_heads": 12,
                                            "indices": [11, 17],
                                            "distinguish_ref_and_non_ref_views": True}},
    "geometric_input_config": {
        "ray_dirs_encoder_config": {"intermediate_dims": [588, 768, 1024]},
        "cam_rot_encoder_config": {"intermediate_dims": [128, 256, 512]},
        "overall_prob": 1, "dropout_prob": 0, "ray_dirs_prob": 1, "cam_prob": 1,
        "pose_scale_norm_all_prob": 0},
}


def _peak_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def test_full_size_release_through_map_build_and_relocalize(tmp_path):
    from safetensors.torch import save_file

    from benchmarks.bench_backbones import random_backbone
    from g2g_model.backbones.mapanything.config import preset
    from g2g_model.model.checkpoint import convert_official
    from g2g_model.model.config import preset as g2g_preset
    from g2g_model.model.g2g import G2GModel
    from sim_fixtures import tiny_trajectories

    figures = {}
    folder = tmp_path / "map-anything-model"
    folder.mkdir()
    start = time.perf_counter()
    backbone = random_backbone(preset("full"))
    save_file({k: v.contiguous() for k, v in backbone.state_dict().items()},
              str(folder / "model.safetensors"))
    del backbone
    (folder / "config.json").write_text(json.dumps(V1_LARGE_INIT_KWARGS))
    state = {"_img_mean": torch.tensor([0.485, 0.456, 0.406]).view(1, 1, 3, 1, 1),
             "_img_std": torch.tensor([0.229, 0.224, 0.225]).view(1, 1, 3, 1, 1)}
    state.update(G2GModel(g2g_preset("paper", max_frames=5)).state_dict())
    torch.save(state, tmp_path / "HM3D-Reloc.pth")
    checkpoint = tmp_path / "HM3D-Reloc.safetensors"
    convert_official(str(tmp_path / "HM3D-Reloc.pth"), str(checkpoint), max_frames=5)
    figures["write_release_s"] = time.perf_counter() - start

    map_traj, query_traj = tiny_trajectories(tmp_path / "sim", seed=20006, frames=24,
                                             traversals=2)
    map_path = tmp_path / "scene.g2gmap"
    start = time.perf_counter()
    build = subprocess.run(
        [sys.executable, "-m", "g2g_model.maps.cli", "build", str(map_traj), str(map_path),
         "--cameras", "cam0", "--checkpoint", str(checkpoint), "--backbone-weights",
         str(folder)], capture_output=True, text=True, timeout=1200)
    figures["map_build_s"] = time.perf_counter() - start
    figures["map_build_peak_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert build.returncode == 0, build.stderr[-3000:]
    figures["map_build"] = build.stdout.strip().splitlines()[-1]

    import rclpy  # noqa: F401  (the ROS part: only now, after the heavy model work)
    from g2g_msgs.msg import EstimatorStatus
    from g2g_msgs.srv import Localize
    from g2g_model.data.format import TrajectoryReader
    from g2g_ros.conversions import matrix_to_pose
    from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all

    query = TrajectoryReader(query_traj)
    listener = Listener()
    statuses = listener.collect(EstimatorStatus, "relocalize/status")
    params = {"use_sim_time": True, "map_path": str(map_path), "consistency_count": 1,
              "fix_needs_geometry": False, "max_fusion_spread_m": 1000.0,
              "max_jump_translation_m": 1000.0,
              "max_jump_rotation_deg": 180.0, "localize_period_s": 0.0,
              "min_translation_m": 0.05, "sensor_qos_reliability": "reliable",
              "checkpoint": str(checkpoint), "backbone_weights": str(folder),
              "window_scorer": "image", "precision": "fp32"}
    start = time.perf_counter()
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", params, str(ROOT / "config" / "sim.yaml")),
                tmp_path / "reloc.log")
    player = None
    try:
        assert listener.spin_until(
            lambda: statuses and "unconfigured" not in statuses[-1].message, 600), \
            node.output()[-3000:]
        figures["node_configured_s"] = time.perf_counter() - start
        player = Proc(player_cmd(query_traj, "--clock", "--rate", "5", "--count", "12",
                                 "--exit-when-done"), tmp_path / "player.log")
        assert listener.spin_until(lambda: player.proc.poll() is not None, 600)
        request = Localize.Request(use_hint=True)
        matrix_to_pose(query.world_T_body[6], request.hint.pose.pose)
        start = time.perf_counter()
        reply = listener.call(Localize, "/relocalize/localize", request, timeout=900)
        figures["localize_s"] = time.perf_counter() - start
        assert reply.success, reply.message + node.output()[-3000:]
        t = reply.map_to_odom.transform.translation
        assert np.isfinite([t.x, t.y, t.z]).all()
        figures["node_peak_mib"] = _peak_mib(node.proc.pid)
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]
    print("\nFULL-SIZE FIGURES " + json.dumps(figures, indent=1))

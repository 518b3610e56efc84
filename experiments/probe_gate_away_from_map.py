"""Diagnostic: what the relocalization gate accepts when the robot is not where the map is.

For each held-out scene a map is built from its first traversal (the shipped relocalization
default) and three queries are fed to the ROS-free engine
(:class:`g2g_model.localization.relocalizer.Relocalizer`) with every parameter at the relocalize
node's default (the same configuration functions the node calls): the scene's second traversal
(mapped), the second traversal of the next scene (not in the map), and the mapped traversal's
poses with noise images. Relocalization runs on ``cam0``; as the node by default, the map holds
every camera of the rig and the verification sees every camera at the query's instants
(``--reloc-camera-only``: ``cam0`` alone, in the map and in the verification). The query's
odometry is the ground truth behind a fixed map->odom, so the correction's error is exact.
Printed per query, for the gate with and without ``fix_needs_geometry``: localizations run, the
first accepted one, how many ended with a correction in place, and the median / max / last
error of that correction.

    python experiments/probe_gate_away_from_map.py --root data/sim_test
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch

from g2g_model.data.format import TrajectoryReader
from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.localization.correction import QueryFrame
from g2g_model.localization.relocalizer import Relocalizer
from g2g_model.localization.rig_views import RigView, RigViews
from g2g_model.localization.verification import StructureVerifier
from g2g_model.localization.window_selector import WindowSelector
from g2g_model.maps.building import build_map_from_trajectory
from g2g_model.covisibility.sim_data import scene_dirs
from g2g_ros.nodes.relocalize_params import RelocalizeParams, gate_config, selector_config
from g2g_ros.nodes.verify_params import verifier_config

MAP_T_ODOM = make_pose(axis_angle_to_matrix([0.0, 0.0, 0.3]), [1.0, -2.0, 0.1])


def run_query(pipeline, gmap, params, traj, noise: bool, localizations: int, cam: str,
              views: bool):
    """``(runs, first accepted run or None, errors of the correction after each run)``."""
    query = TrajectoryReader(traj)
    others = [c for c in query.rig.names if c != cam] if views else []
    engine = Relocalizer(pipeline, WindowSelector.from_config(selector_config(params), pipeline),
                         gate_config(params), params["min_translation_m"],
                         params["min_rotation_deg"], StructureVerifier(verifier_config(params)),
                         RigViews() if others else None)
    engine.use_map(gmap)
    world_T_cam = query.world_T_cam(cam)
    rng = np.random.default_rng(0)

    def image(c, i):
        rgb = query.image(c, i)
        return rng.integers(0, 256, rgb.shape, dtype=np.uint8) if noise else rgb

    runs, first, errors = 0, None, []
    for i in range(query.num_frames):
        stamp = int(query.timestamps_ns[i])
        for c in others:  # as the node: every view arrives, the buffer keeps those it needs
            engine.views.add(stamp, RigView(c, image(c, i), query.rig[c].K, invert_pose(
                query.rig[cam].T_body_cam) @ query.rig[c].T_body_cam))
        frame = QueryFrame(stamp, image(cam, i), query.rig[cam].K,
                           invert_pose(MAP_T_ODOM) @ world_T_cam[i])
        if not engine.add_frame(frame) or not engine.ready():
            continue
        result = engine.localize(engine.tracking_hint())
        runs += 1
        if result.accepted and first is None:
            first = runs
        if engine.current is not None:
            errors.append(float(np.linalg.norm((engine.current @ invert_pose(MAP_T_ODOM))[:3, 3])))
        if runs >= localizations:
            break
    return runs, first, errors


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="held-out scene root (scene_*/traj_00, traj_01)")
    p.add_argument("--scenes", type=int, default=0, help="the first N scenes (0: all)")
    p.add_argument("--localizations", type=int, default=25)
    p.add_argument("--camera", default="cam0")
    p.add_argument("--reloc-camera-only", action="store_true",
                   help="map and verify with the relocalization camera alone")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    scenes = scene_dirs(args.root, args.scenes or None)
    pipeline = G2GPipeline.default("relocalization")
    print("| map | query | fix_needs_geometry | localizations | first fix at | with a "
          "correction | correction error median / max / last (m) |\n|---|---|---|---|---|---|---|")
    for k, scene in enumerate(scenes):
        cams = ([args.camera] if args.reloc_camera_only
                else TrajectoryReader(scene / "traj_00").rig.names)
        gmap = build_map_from_trajectory(scene / "traj_00", pipeline, cams, progress=False)
        other = scenes[(k + 1) % len(scenes)]
        for fix_needs_geometry in (True, False):
            params = dataclasses.asdict(RelocalizeParams())
            params["fix_needs_geometry"] = fix_needs_geometry
            for label, traj, noise in (("mapped", scene / "traj_01", False),
                                       (f"not mapped ({other.name})", other / "traj_01", False),
                                       ("noise images", scene / "traj_01", True)):
                runs, first, errors = run_query(pipeline, gmap, params, traj, noise,
                                                args.localizations, args.camera,
                                                not args.reloc_camera_only)
                stats = (np.median(errors), max(errors), errors[-1]) if errors else ()
                err = " / ".join(f"{v:.2f}" for v in stats) or "-"
                print(f"| {scene.name} | {label} | {str(fix_needs_geometry).lower()} | {runs} | "
                      f"{first or '-'} | {len(errors)} | {err} |", flush=True)


if __name__ == "__main__":
    main()

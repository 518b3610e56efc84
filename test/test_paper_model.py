"""The paper's released model in the pipeline: a converted official checkpoint + backbone weights.

A tiny official-format G2G ``.pth`` is converted with ``g2g-convert`` and run on the golden tiny
MapAnything V1 in the release's folder layout (``map-anything-model/config.json`` +
``model.safetensors``). Wrong pairs are refused with the reason: a checkpoint for other feature
widths, backbone weights for a checkpoint that includes its backbone, a giant backbone.
"""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from g2g_model.backbones.mapanything.config import MapAnythingV1Config
from g2g_model.backbones.mapanything_v1 import MapAnythingV1Backbone
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint
from g2g_model.model.cli import convert_main
from paper_fixtures import TINY_FEATURE_DIM, tiny_backbone_folder, tiny_official_pth

FIXTURES_G2G = __import__("pathlib").Path(__file__).resolve().parent / "fixtures" / "g2g_official"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    backbone = tiny_backbone_folder(root)
    pth = tiny_official_pth(root / "NCLT-Reloc.pth", frames=5)
    converted = root / "NCLT-Reloc.safetensors"
    assert convert_main([str(pth), str(converted), "--frames", "5"]) == 0
    return {"backbone": backbone, "checkpoint": converted, "root": root}


def _group(n, seed):
    rng = np.random.default_rng(seed)
    poses = np.tile(np.eye(4), (n, 1, 1))
    poses[:, 0, 3] = np.arange(n) * 0.3
    k = np.array([[100.0, 0, 112], [0, 100.0, 112], [0, 0, 1]])
    return {"images": rng.integers(0, 255, (n, 224, 224, 3), dtype=np.uint8),
            "intrinsics": np.broadcast_to(k, (n, 3, 3)).copy(), "cam_to_world": poses}


def test_converted_release_runs_on_the_backbone_folder(release):
    pipe = G2GPipeline.from_checkpoint(release["checkpoint"],
                                       backbone_weights=release["backbone"])
    assert pipe.backbone.name == "mapanything_v1"
    assert pipe.backbone.feature_dim == TINY_FEATURE_DIM  # sizes from the folder's config.json
    assert pipe.max_frames == 5 and not pipe.untrained
    pred = pipe.predict(_group(5, 0), _group(5, 1))
    assert pred.features_a.shape == (1, 5, 256, TINY_FEATURE_DIM)
    assert np.isfinite(pred.poses_b).all() and pred.poses_b.shape == (5, 4, 4)
    # The weights really came from the folder: same tokens as the golden module loaded directly.
    direct = MapAnythingV1Backbone.from_weights(str(release["backbone"]))
    for name, tensor in direct.state_dict().items():
        torch.testing.assert_close(pipe.backbone.state_dict()[name], tensor, rtol=0, atol=0)


def test_the_nodes_loader_passes_backbone_weights(release):
    from g2g_ros.model_loading import load_pipeline

    pipe = load_pipeline(str(release["checkpoint"]), "cpu", "relocalization", "fp32",
                         str(release["backbone"]))
    assert pipe.backbone.feature_dim == TINY_FEATURE_DIM and pipe.bf16 is False
    with pytest.raises(ValueError, match="pass backbone_weights"):
        load_pipeline(str(release["checkpoint"]), "cpu", "relocalization")
    with pytest.raises(ValueError, match="needs a checkpoint for that backbone"):
        load_pipeline("", "cpu", "relocalization", backbone_weights=str(release["backbone"]))


def test_mismatched_checkpoint_and_backbone_are_refused(release, tmp_path):
    # The golden tiny G2G takes 64-dim features; the tiny MapAnything gives 32.
    other = tmp_path / "tiny64.safetensors"
    assert convert_main([str(FIXTURES_G2G / "tiny_state_dict.safetensors"), str(other),
                         "--heads", "4"]) == 0
    with pytest.raises(ValueError, match="takes 64-dim features.*give 32-dim features"):
        G2GPipeline.from_checkpoint(other, backbone_weights=release["backbone"])
    # A checkpoint that includes its backbone takes no backbone_weights.
    with pytest.raises(ValueError, match="includes the weights of its backbone 'compact'"):
        G2GPipeline.from_checkpoint(default_checkpoint("relocalization"),
                                    backbone_weights=release["backbone"])
    # A folder without weights, a truncated weights file.
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no weights file"):
        G2GPipeline.from_checkpoint(release["checkpoint"], backbone_weights=empty)
    broken = tiny_backbone_folder(tmp_path / "broken")
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        G2GPipeline.from_checkpoint(release["checkpoint"], backbone_weights=broken)


GIANT_INIT_KWARGS = {  # today's default facebook/map-anything: MapAnything's constructor args
    "encoder_config": {"encoder_str": "dinov2", "size": "giant", "with_registers": False},
    "info_sharing_config": {"model_type": "alternating_attention",
                            "module_args": {"depth": 16, "dim": 1536, "num_heads": 24}},
    "geometric_input_config": {},
}


@pytest.mark.parametrize("variant", ["size giant", "registers", "tensor widths"])
def test_a_giant_backbone_is_refused_saying_so(release, tmp_path, variant):
    folder = tmp_path / "map-anything"
    folder.mkdir()
    kwargs = json.loads(json.dumps(GIANT_INIT_KWARGS))
    if variant == "registers":
        kwargs["encoder_config"].update(size="large", with_registers=True)
        kwargs["use_register_tokens_from_encoder"] = True
    if variant == "tensor widths":
        save_file({"encoder.model.cls_token": torch.zeros(1, 1, 1536)},
                  str(folder / "model.safetensors"))
        path = folder / "model.safetensors"
    else:
        save_file({"scale_token": torch.zeros(1536)}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(json.dumps(kwargs))
        path = folder
    with pytest.raises(ValueError) as info:
        G2GPipeline.from_checkpoint(release["checkpoint"], backbone_weights=path)
    message = str(info.value)
    assert "giant" in message and "1536" in message
    assert "v1.0.1" in message and "DINOv2-large / 1024-dim" in message
    with pytest.raises(ValueError, match="giant"):
        MapAnythingV1Config(encoder_dim=1536, encoder_heads=24)


V1_INIT_KWARGS = {  # the V1 (large) layout as MapAnything's constructor arguments
    "encoder_config": {"encoder_str": "dinov2", "size": "large", "with_registers": False},
    "info_sharing_config": {"model_type": "alternating_attention", "module_args": {}},
}


def test_geometric_input_probabilities_of_config_json_are_reported(tmp_path, caplog):
    # The official G2G code calls MapAnything.forward directly, which draws the geometric
    # inputs with the config.json's probabilities; mapanything_v1 always feeds all of them.
    from g2g_model.backbones.mapanything.checkpoint import (
        ALWAYS_GEOMETRY,
        geometric_input_note,
        load_mapanything_v1,
    )

    def config(**probs):
        return MapAnythingV1Config.from_init_kwargs(
            dict(V1_INIT_KWARGS, geometric_input_config=probs))

    assert geometric_input_note(config(**ALWAYS_GEOMETRY), "x") is None
    assert geometric_input_note(config(), "x") is None  # nothing stated
    training = {"overall_prob": 0.9, "dropout_prob": 0.05, "ray_dirs_prob": 0.5,
                "cam_prob": 0.5, "pose_scale_norm_all_prob": 0.05}
    note = geometric_input_note(config(**training), "cfg")
    assert "'cam_prob': 0.5" in note and "'overall_prob': 0.9" in note
    images_only = {"overall_prob": 0, "dropout_prob": 1, "ray_dirs_prob": 0, "cam_prob": 0}
    assert "'cam_prob': 0" in geometric_input_note(config(**images_only), "cfg")
    # Loading a folder whose config.json has them says so (here before the weights, which
    # are not a real V1 checkpoint and are refused).
    folder = tmp_path / "map-anything-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(V1_INIT_KWARGS,
                                                        geometric_input_config=training)))
    save_file({"scale_token": torch.zeros(1024)}, str(folder / "model.safetensors"))
    with caplog.at_level("WARNING"), pytest.raises(ValueError, match="missing keys"):
        load_mapanything_v1(folder)
    assert "geometric_input_config" in caplog.text and "'cam_prob': 0.5" in caplog.text


def test_g2g_map_builds_and_verifies_with_the_release(release, tmp_path, capsys):
    from g2g_model.maps.cli import main as map_main
    from sim_fixtures import tiny_trajectories

    traj = tiny_trajectories(tmp_path / "sim", seed=20005, frames=6)[0]
    out = tmp_path / "scene.g2gmap"
    model = ["--checkpoint", str(release["checkpoint"])]
    weights = ["--backbone-weights", str(release["backbone"])]
    assert map_main(["build", str(traj), str(out), "--cameras", "cam0",
                     "--min-translation", "0.0", *model, *weights]) == 0
    assert map_main(["verify", str(out), *model, *weights]) == 0
    assert "backbone matches" in capsys.readouterr().out
    # Without the weights the checkpoint cannot be used; the embedded model's encoder differs.
    assert map_main(["verify", str(out), *model]) == 2
    assert map_main(["verify", str(out), "--checkpoint",
                     str(default_checkpoint("relocalization"))]) == 2
    assert "pass backbone_weights" in capsys.readouterr().err

"""Tiny stand-ins for the official G2G release, in its layout, for tests.

* :func:`tiny_official_pth`: a G2G-only ``.pth`` exactly as the official
  ``extract_g2g_weights.py`` writes it (a flat ``{name: tensor}`` dict with the ``_img_mean`` /
  ``_img_std`` buffers), of a tiny configuration: hidden 64, 8 heads as released, W frames,
  input 32 (the tiny MapAnything's width) so that ``embed_proj`` exists.
* :func:`tiny_backbone_folder`: ``map-anything-model/`` with ``config.json`` and
  ``model.safetensors`` holding the golden tiny MapAnything V1 weights (test/fixtures). Its
  config.json uses our flat field names: MapAnything's own constructor arguments (what the
  release's config.json holds, parsed by ``MapAnythingV1Config.from_init_kwargs``) can only
  name DINOv2 sizes small..giant, not a 64-wide encoder.
* :func:`tiny_release`: the ten ``.pth`` files with their released W plus the backbone folder.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import torch

from g2g_model.backbones.mapanything.config import MapAnythingV1Config
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel
from g2g_model.release.prepare import RELEASED

ROOT = pathlib.Path(__file__).resolve().parent
MA_FIXTURES = ROOT / "fixtures" / "mapanything_v1"
TINY_FEATURE_DIM = 32  # info_sharing dim of the golden tiny MapAnything


def tiny_official_state(frames: int, input_dim: int = TINY_FEATURE_DIM, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = G2GModel(preset("tiny", num_heads=8, max_frames=frames, input_dim=input_dim))
    state = {"_img_mean": torch.tensor([0.485, 0.456, 0.406]).view(1, 1, 3, 1, 1),
             "_img_std": torch.tensor([0.229, 0.224, 0.225]).view(1, 1, 3, 1, 1)}
    state.update(model.state_dict())
    return state


def tiny_official_pth(path, frames: int, input_dim: int = TINY_FEATURE_DIM,
                      seed: int = 0) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(tiny_official_state(frames, input_dim, seed), path)
    return path


def tiny_backbone_config() -> MapAnythingV1Config:
    return MapAnythingV1Config.from_fixture_config(
        json.loads((MA_FIXTURES / "tiny_config.json").read_text()))


def tiny_backbone_folder(parent) -> pathlib.Path:
    folder = pathlib.Path(parent) / "map-anything-model"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MA_FIXTURES / "tiny_state_dict.safetensors", folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(tiny_backbone_config().to_dict()))
    return folder


def tiny_release(root) -> pathlib.Path:
    root = pathlib.Path(root)
    for seed, weights in enumerate(RELEASED.values()):
        tiny_official_pth(root / "release_weights" / weights.file, weights.frames, seed=seed)
    tiny_backbone_folder(root)
    return root

"""The optional ``mapanything_upstream`` adapter (Meta's ``mapanything`` package).

Tests marked ``needs_upstream`` run only where ``mapanything`` and ``uniception`` are importable
and a local facebookresearch/dinov2 checkout is found (argument-free lookup: ``$G2G_DINOV2_REPO``
or the torch hub cache); elsewhere they skip with the reason. The other tests always run: the
adapter module imports without the package, and building the adapter without it fails with a
message that says what to install.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from g2g_model.backbones.base import backbone_class, registered_backbones
from g2g_model.backbones.mapanything.checkpoint import load_mapanything_v1
from g2g_model.backbones.mapanything.config import MapAnythingV1Config, preset
from g2g_model.backbones.mapanything.upstream_build import (
    DINOV2_REPO_ENV,
    resolve_dinov2_repo,
    upstream_init_kwargs,
)
from g2g_model.backbones.upstream_mapanything import (
    UpstreamMapAnythingBackbone,
    load_upstream_mapanything,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "test" / "fixtures" / "mapanything_v1"
TOL = 1e-4  # the fixture README's suggested tolerance


def _upstream_missing_reason():
    for package in ("mapanything", "uniception"):
        if importlib.util.find_spec(package) is None:
            return f"the optional upstream package {package!r} is not installed"
    try:
        resolve_dinov2_repo()
    except FileNotFoundError:
        return (f"no local facebookresearch/dinov2 checkout (set {DINOV2_REPO_ENV} or populate "
                "the torch hub cache)")
    return None


UPSTREAM_MISSING = _upstream_missing_reason()
needs_upstream = pytest.mark.skipif(UPSTREAM_MISSING is not None,
                                    reason=str(UPSTREAM_MISSING))


def _max_diff(a, b):
    return (a - b).abs().max().item()


# -- always run -----------------------------------------------------------------------------------
def test_registered_without_importing_the_package():
    assert "mapanything_upstream" in registered_backbones()
    assert backbone_class("mapanything_upstream") is UpstreamMapAnythingBackbone


_BUILD_WITHOUT_PACKAGE = """
import sys
for name in ("mapanything", "uniception"):
    sys.modules[name] = None  # Python's own way to make "import name" fail
from g2g_model.backbones.base import build_backbone
try:
    build_backbone("mapanything_upstream", None)
except ImportError as exc:
    print(exc)
else:
    raise SystemExit("built without the package")
"""


def test_building_without_the_package_says_what_to_install(tmp_path):
    if importlib.util.find_spec("mapanything") is None:
        with pytest.raises(ImportError) as info:
            UpstreamMapAnythingBackbone("full")
        message = str(info.value)
    else:  # installed here: build in a child process in which the import is blocked
        result = subprocess.run([sys.executable, "-c", _BUILD_WITHOUT_PACKAGE], cwd=REPO,
                                capture_output=True, text=True, timeout=120, check=True)
        message = result.stdout
    assert "mapanything_upstream" in message
    assert "facebookresearch/map-anything" in message
    assert "uniception==0.1.7" in message
    assert "'mapanything_v1'" in message


def test_dinov2_checkout_lookup(tmp_path, monkeypatch):
    monkeypatch.delenv(DINOV2_REPO_ENV, raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    with pytest.raises(FileNotFoundError, match="never downloads.*dinov2_repo"):
        resolve_dinov2_repo()
    with pytest.raises(FileNotFoundError, match="no local facebookresearch/dinov2"):
        resolve_dinov2_repo(tmp_path)
    checkout = tmp_path / "dinov2"
    checkout.mkdir()
    (checkout / "hubconf.py").write_text("dependencies = ['torch']\n")
    assert resolve_dinov2_repo(checkout) == checkout
    monkeypatch.setenv(DINOV2_REPO_ENV, str(checkout))
    assert resolve_dinov2_repo() == checkout
    monkeypatch.delenv(DINOV2_REPO_ENV)
    cached = tmp_path / "torch_home" / "hub" / "facebookresearch_dinov2_main"
    cached.mkdir(parents=True)
    (cached / "hubconf.py").write_text("dependencies = ['torch']\n")
    assert resolve_dinov2_repo() == cached


def test_init_kwargs_for_v1_and_for_test_sizes():
    full = upstream_init_kwargs(preset("full"))
    assert full["encoder_config"]["size"] == "large"
    assert full["encoder_config"]["vit_kwargs"] is None  # the hub's dinov2_vitl14
    assert full["encoder_config"]["uses_torch_hub"] is False
    assert full["pretrained_checkpoint_path"] is None
    module = full["info_sharing_config"]["module_args"]
    assert (module["depth"], module["dim"], module["num_heads"]) == (24, 768, 12)
    assert module["indices"] == [11, 17]  # V1's intermediate layers
    geometry = full["geometric_input_config"]
    assert geometry["ray_dirs_encoder_config"]["intermediate_dims"] == [588, 768, 1024]
    assert geometry["cam_rot_encoder_config"]["intermediate_dims"] == [128, 256, 512]

    fixture = json.loads((FIXTURES / "tiny_config.json").read_text())
    tiny = upstream_init_kwargs(MapAnythingV1Config.from_fixture_config(fixture))
    vit = tiny["encoder_config"]["vit_kwargs"]
    expected = {k: v for k, v in fixture["image_encoder"]["dinov2_kwargs"].items()
                if k in vit}
    assert vit == expected and len(vit) == 12
    tiny_module = tiny["info_sharing_config"]["module_args"]
    assert tiny_module["indices"] == fixture["info_sharing"]["intermediate_indices"]


# -- with the upstream package --------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_config():
    return MapAnythingV1Config.from_fixture_config(
        json.loads((FIXTURES / "tiny_config.json").read_text()))


@pytest.fixture(scope="module")
def tiny_inputs():
    raw = load_file(str(FIXTURES / "tiny_inputs.safetensors"))
    images = (raw["img_uint8"].float() / 255).permute(0, 1, 4, 2, 3).contiguous()
    return images, raw


@pytest.fixture(scope="module")
def upstream_tiny(tiny_config):
    return load_upstream_mapanything(FIXTURES / "tiny_state_dict.safetensors", tiny_config)


@pytest.fixture(scope="module")
def upstream_tiny_output(upstream_tiny, tiny_inputs):
    images, raw = tiny_inputs
    with torch.no_grad():
        return upstream_tiny.forward_features(images, raw["intrinsics"], raw["camera_poses"],
                                              raw["is_metric_scale"])


@needs_upstream
def test_upstream_tiny_matches_golden(upstream_tiny_output):
    golden = load_file(str(FIXTURES / "tiny_features.safetensors"))
    assert upstream_tiny_output.features.shape == golden["features"].shape == (2, 3, 256, 32)
    assert _max_diff(upstream_tiny_output.features, golden["features"]) < TOL
    assert _max_diff(upstream_tiny_output.scale_token, golden["scale_token_features"]) < TOL


@needs_upstream
def test_upstream_equals_ours_on_the_same_weights(upstream_tiny, tiny_config, tiny_inputs,
                                                  upstream_tiny_output):
    ours = load_mapanything_v1(FIXTURES / "tiny_state_dict.safetensors", config=tiny_config)
    images, raw = tiny_inputs
    rng_before = torch.random.get_rng_state()
    with torch.no_grad():
        mine = ours.forward_features(images, raw["intrinsics"], raw["camera_poses"],
                                     raw["is_metric_scale"])
        # A different input: not metric, one group, through the Backbone interface.
        flags = torch.zeros(1, 3, dtype=torch.bool)
        theirs_nm = upstream_tiny(images[:1], raw["intrinsics"][:1], raw["camera_poses"][:1],
                                  is_metric_scale=flags)
        mine_nm = ours(images[:1], raw["intrinsics"][:1], raw["camera_poses"][:1],
                       is_metric_scale=flags)
    assert torch.equal(torch.random.get_rng_state(), rng_before)  # caller's RNG untouched
    assert _max_diff(upstream_tiny_output.features, mine.features) < TOL
    assert _max_diff(upstream_tiny_output.scale_token, mine.scale_token) < TOL
    assert _max_diff(theirs_nm, mine_nm) < TOL
    assert _max_diff(theirs_nm, mine.features[:1]) > 0.1  # the flag mattered


@needs_upstream
def test_upstream_full_size_builds_exactly_the_v1_keys():
    feature_keys = json.loads((FIXTURES / "mapanything_v1_feature_keys.json").read_text())
    with torch.device("meta"):
        backbone = UpstreamMapAnythingBackbone("full")
    built = {k: list(v.shape) for k, v in backbone.model.state_dict().items()}
    released = {e["key"]: e["shape"] for group in (
        "feature_path_keys", "feature_path_zero_contribution_keys_depth_inputs",
        "head_keys_not_needed") for e in feature_keys[group]}
    assert len(released) == 686 + 28 + 166
    assert built == released
    assert backbone.feature_dim == 768 and backbone.num_patches(224, 224) == 256


@needs_upstream
def test_upstream_loading_is_strict(tmp_path, tiny_config):
    state = load_file(str(FIXTURES / "tiny_state_dict.safetensors"))
    extra = tmp_path / "extra.safetensors"
    save_file({**state, "encoder.model.mask_token": torch.zeros(1, 64)}, str(extra))
    with pytest.raises(ValueError, match="unexpected keys.*encoder.model.mask_token"):
        load_upstream_mapanything(extra, tiny_config)
    incomplete = tmp_path / "incomplete.safetensors"
    save_file({k: v for k, v in state.items() if k != "scale_token"}, str(incomplete))
    with pytest.raises(ValueError, match="missing keys.*'scale_token'"):
        load_upstream_mapanything(incomplete, tiny_config)

"""Our checkpoint format: round trip, header, expectations, corrupt files, load_any."""

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from g2g_model.model.checkpoint import (
    FORMAT_VERSION,
    HEADER_KEY,
    load_any,
    load_checkpoint,
    load_checkpoint_into,
    read_header,
    save_checkpoint,
    tensors_digest,
)
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel


def _features(frames, dim=48, seed=1):
    return torch.randn(1, frames, 5, dim, generator=torch.Generator().manual_seed(seed))


@pytest.fixture()
def saved(tmp_path):
    torch.manual_seed(3)
    model = G2GModel(preset("tiny", input_dim=48)).eval()
    path = tmp_path / "g2g.safetensors"
    backbone = {"encoder.weight": torch.arange(6.0).reshape(2, 3)}
    save_checkpoint(path, model, backbone_name="compact", backbone_config={"depth": 2},
                    training={"steps": 120, "dataset": "sim"}, backbone_state_dict=backbone)
    return model, path


def test_round_trip_gives_identical_weights_and_outputs(saved):
    model, path = saved
    loaded = load_checkpoint(path, expected_config=preset("tiny", input_dim=48),
                             expected_backbone="compact")
    assert loaded.model.config == model.config
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[key], value), key
    assert torch.equal(loaded.backbone_state_dict["encoder.weight"],
                       torch.arange(6.0).reshape(2, 3))
    loaded.model.eval()
    with torch.no_grad():
        assert torch.equal(loaded.model(_features(3), _features(2))["poses"],
                           model(_features(3), _features(2))["poses"])


def test_header_content(saved):
    _, path = saved
    header = read_header(path)
    assert header["format"] == "g2g-checkpoint"
    assert header["format_version"] == FORMAT_VERSION
    assert header["preset"] == "tiny"
    assert header["config"] == preset("tiny", input_dim=48).to_dict()
    assert header["backbone"] == {"name": "compact", "config": {"depth": 2},
                                  "weights_included": True}
    assert header["training"] == {"steps": 120, "dataset": "sim"}
    assert header["tensors"]["backbone"] == 1


def test_config_mismatch_names_every_field(saved):
    model, path = saved
    expected = preset("tiny", input_dim=48, max_frames=5, num_heads=8)
    with pytest.raises(ValueError) as info:
        load_checkpoint(path, expected_config=expected)
    message = str(info.value)
    assert "config.max_frames: checkpoint 3, expected 5" in message
    assert "config.num_heads: checkpoint 4, expected 8" in message
    assert "hidden_dim" not in message
    with pytest.raises(ValueError, match="backbone.name: checkpoint 'compact'"):
        load_checkpoint(path, expected_backbone="mapanything_v1")


def test_load_into_existing_model_is_all_or_nothing(saved):
    model, path = saved
    other = G2GModel(preset("tiny", input_dim=48, max_frames=4))
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ValueError, match="config.max_frames: checkpoint 3, expected 4"):
        load_checkpoint_into(other, path)
    assert all(torch.equal(v, before[k]) for k, v in other.state_dict().items())
    same = G2GModel(preset("tiny", input_dim=48))
    load_checkpoint_into(same, path)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in same.state_dict().items())


def _rewrite(path, out, header=None, drop=None):
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        tensors = {k: handle.get_tensor(k) for k in handle.keys() if k != drop}
        meta = handle.metadata()
    header = header if header is not None else json.loads(meta[HEADER_KEY])
    header["tensors"]["sha256"] = tensors_digest(tensors)  # a consistent, well-formed file
    save_file(tensors, str(out), metadata={HEADER_KEY: json.dumps(header)})


def test_version_mismatch(saved, tmp_path):
    _, path = saved
    header = read_header(path)
    header["format_version"] = FORMAT_VERSION + 1
    newer = tmp_path / "newer.safetensors"
    _rewrite(path, newer, header=header)
    with pytest.raises(ValueError, match=f"format_version: checkpoint {FORMAT_VERSION + 1}, "
                                         f"expected {FORMAT_VERSION}"):
        load_checkpoint(newer)


def test_bad_header_config_and_missing_tensor(saved, tmp_path):
    _, path = saved
    header = read_header(path)
    header["config"]["latent_count"] = 3
    bad = tmp_path / "bad.safetensors"
    _rewrite(path, bad, header=header)
    with pytest.raises(ValueError, match="latent_count"):
        load_checkpoint(bad)
    partial = tmp_path / "partial.safetensors"
    _rewrite(path, partial, drop="bridge.group_embed")
    with pytest.raises(ValueError, match="missing keys.*bridge.group_embed"):
        load_checkpoint(partial)


def test_corrupt_truncated_and_foreign_files(saved, tmp_path):
    _, path = saved
    data = path.read_bytes()
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_checkpoint(truncated)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        read_header(garbage)
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="not a readable"):
        load_checkpoint(empty)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"x": torch.zeros(2)}, str(foreign))
    with pytest.raises(ValueError, match="not a G2G checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(ValueError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.safetensors")


def test_save_is_atomic_and_rejects_non_json_metadata(saved, tmp_path):
    model, path = saved
    before = path.read_bytes()
    with pytest.raises(ValueError, match="JSON"):
        save_checkpoint(path, model, training={"when": object()})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g2g.safetensors"]


def test_load_any_reads_ours_and_official(saved, tmp_path):
    model, path = saved
    assert load_any(path).header["format"] == "g2g-checkpoint"
    with pytest.raises(ValueError, match="max_frames=3, expected 5"):
        load_any(path, max_frames=5)
    official = {"_img_mean": torch.zeros(1, 1, 3, 1, 1), "_img_std": torch.ones(1, 1, 3, 1, 1),
                **model.state_dict()}
    pth = tmp_path / "official.pth"
    torch.save(official, pth)
    loaded = load_any(pth, num_heads=4)
    assert loaded.header["format"] == "official"
    assert loaded.model.config == model.config
    assert all(torch.equal(v, model.state_dict()[k])
               for k, v in loaded.model.state_dict().items())


def test_flipped_weight_byte_is_detected(saved, tmp_path):
    _, path = saved
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # inside the last tensor's bytes, header untouched
    flipped = tmp_path / "flipped.safetensors"
    flipped.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_checkpoint(flipped)


def test_load_any_sniffs_the_format_not_the_extension(saved, tmp_path):
    _, path = saved
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(path.read_bytes())
    assert load_any(renamed).header["format"] == "g2g-checkpoint"
    with pytest.raises(ValueError, match="does not exist"):
        load_any(tmp_path / "missing.bin")

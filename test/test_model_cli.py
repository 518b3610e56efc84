"""g2g-model info / g2g-convert, called in-process through main(argv)."""

import json

import pytest
import torch

from g2g_model.model.checkpoint import load_checkpoint, read_header, save_checkpoint
from g2g_model.model.cli import convert_main, main
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel


def test_info_paper_prints_the_count(capsys):
    assert main(["info", "--preset", "paper", "--frames", "5"]) == 0
    out = capsys.readouterr().out
    assert "32,110,601" in out
    assert "14,229,504" in out and "14,184,192" in out and "3,696,905" in out
    assert "max_frames: 5" in out


def test_info_json_small(capsys):
    assert main(["info", "--preset", "small", "--frames", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"] == preset("small", max_frames=3).to_dict()
    model = G2GModel(preset("small", max_frames=3))
    assert data["parameters"]["total"] == sum(p.numel() for p in model.parameters())


def test_info_rejects_bad_values(capsys):
    assert main(["info", "--preset", "tiny", "--frames", "0"]) == 2
    assert "max_frames" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["info", "--preset", "enormous"])


@pytest.fixture()
def official_pth(tmp_path):
    torch.manual_seed(0)
    model = G2GModel(preset("tiny", input_dim=48))
    state = {"_img_mean": torch.zeros(1, 1, 3, 1, 1), "_img_std": torch.ones(1, 1, 3, 1, 1),
             **model.state_dict()}
    path = tmp_path / "g2g_official.pth"
    torch.save(state, path)
    return model, path


def test_convert_then_info(official_pth, tmp_path, capsys):
    model, pth = official_pth
    out = tmp_path / "converted.safetensors"
    assert convert_main([str(pth), str(out), "--frames", "3", "--heads", "4"]) == 0
    assert "max_frames 3" in capsys.readouterr().out
    header = read_header(out)
    assert header["backbone"]["name"] == "mapanything_v1"
    assert header["training"]["source"] == "official"
    assert len(header["training"]["source_sha256"]) == 64
    loaded = load_checkpoint(out, expected_config=preset("tiny", input_dim=48))
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[key], value), key

    assert main(["info", "--checkpoint", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{sum(p.numel() for p in model.parameters()):,}" in printed
    assert "g2g-checkpoint" in printed and "mapanything_v1" in printed


def test_convert_errors(official_pth, tmp_path, capsys):
    _, pth = official_pth
    out = tmp_path / "converted.safetensors"
    assert convert_main([str(pth), str(out), "--frames", "5", "--heads", "4"]) == 2
    assert "max_frames=3" in capsys.readouterr().err
    assert not out.exists()
    out.write_bytes(b"keep me")
    assert convert_main([str(pth), str(out), "--heads", "4"]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"
    assert convert_main([str(pth), str(out), "--heads", "4", "--force"]) == 0
    ours = tmp_path / "ours.safetensors"
    save_checkpoint(ours, G2GModel(preset("tiny")))
    assert convert_main([str(ours), str(tmp_path / "again.safetensors")]) == 2
    assert "already a G2G checkpoint" in capsys.readouterr().err

"""Bad input stops g2g-train with a clear error before any work starts."""

import json

import pytest

from g2g_model.model.checkpoint import save_checkpoint
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel
from g2g_model.training.cli import main as train_main
from g2g_model.training.config import load_config, validate
from g2g_model.training.smoke_data import make_smoke_collection, smoke_config
from g2g_model.training.trainer import Trainer


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")


def _write_yaml(path, config):
    import yaml

    path.write_text(yaml.safe_dump(config.to_dict()))
    return path


def test_named_presets_load_and_validate_fields():
    cfg = load_config("reloc_compact", ["data.root=.", "data.index=setup.py",
                                        "model.backbone_weights=setup.py",
                                        "optim.max_steps=7"])
    assert cfg.task == "reloc" and cfg.optim.max_steps == 7 and cfg.cache.enabled
    with pytest.raises(ValueError, match="unknown training preset 'no_such'"):
        load_config("no_such")
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['lr_typo'\]"):
        load_config("reloc_compact", ["optim.lr_typo=1"])


def test_preset_base_is_merged_section_by_section(tmp_path):
    import yaml

    from g2g_model.training.config import read_preset

    # The shipped derived presets resolve through their base: stated values win, the rest is kept.
    mixed, ft = read_preset("rig_odom_mnv2_mixed"), read_preset("rig_odom_mnv2_ft")
    assert "base" not in mixed and mixed["optim"]["lr"] == 1.5e-4
    assert mixed["optim"]["batch_size"] == ft["optim"]["batch_size"] == 16
    assert mixed["data"]["index"] == ft["data"]["index"]
    assert mixed["data"]["root"] == "data/sim_train96"
    # A mapping value is replaced whole: rig_odom_mnv2_ft drops feature_norm_patches of its base.
    assert "feature_norm_patches" in read_preset("rig_odom_mnv2")["model"]["g2g_overrides"]
    assert "feature_norm_patches" not in ft["model"]["g2g_overrides"]
    # A base given as a path is relative to the preset's folder; overrides apply on top.
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "parent.yaml").write_text(yaml.safe_dump(
        {"base": "reloc_compact", "optim": {"lr": 1.0e-3}}))
    (tmp_path / "child.yaml").write_text(yaml.safe_dump(
        {"base": "sub/parent.yaml", "optim": {"batch_size": 3}}))
    cfg = load_config(str(tmp_path / "child.yaml"),
                      ["data.root=.", "data.index=setup.py", "model.backbone_weights=setup.py",
                       "optim.warmup_steps=1"])
    assert (cfg.optim.lr, cfg.optim.batch_size, cfg.optim.warmup_steps) == (1.0e-3, 3, 1)
    assert cfg.curriculum.enabled and cfg.task == "reloc"  # from reloc_compact
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ValueError, match="cycle"):
        load_config(str(tmp_path / "a.yaml"))
    (tmp_path / "c.yaml").write_text("base: no_such_preset\n")
    with pytest.raises(ValueError, match="c.yaml: base 'no_such_preset': unknown training preset"):
        load_config(str(tmp_path / "c.yaml"))


@pytest.mark.parametrize("change, message", [
    ({"model": {"backbone": "resnet"}}, "unknown backbone 'resnet'"),
    ({"model": {"g2g_preset": "huge"}}, "unknown G2G preset 'huge'"),
    ({"model": {"backbone_preset": "compact_q"}}, "unknown compact preset 'compact_q'"),
    ({"data": {"root": "/no/such/dir"}}, "dataset path '/no/such/dir'"),
    ({"data": {"index": "missing.json"}}, "missing.json"),
    ({"task": "segmentation"}, "task must be one of"),
    ({"model": {"init_from": "/no/model.safetensors"}}, "init_from"),
    ({"model": {"backbone_weights": ""}}, "backbone_weights is required"),
    ({"num_workers": -1}, "num_workers must be >= 0"),
    ({"optim": {"lr": "fast"}}, "optim.lr: expected a number, got 'fast'"),
    ({"optim": {"batch_size": 2.5}}, "optim.batch_size: expected an integer"),
])
def test_bad_config_is_refused_before_work(smoke, tmp_path, change, message, capsys):
    cfg = smoke_config(smoke, tmp_path / "out")
    values = cfg.to_dict()
    for key, value in change.items():
        if isinstance(value, dict):
            values[key].update(value)
        else:
            values[key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(values))
    assert train_main([str(path), "-q"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing was written


def test_empty_index_and_foreign_checkpoint(smoke, tmp_path):
    (tmp_path / "empty.json").write_text("[]")
    cfg = smoke_config(smoke, tmp_path / "out", data={"index": "../" + tmp_path.name +
                                                      "/empty.json"})
    with pytest.raises(ValueError, match="is empty"):
        Trainer(validate(cfg), progress=False)
    # a checkpoint of another G2G configuration (other width) cannot initialise this run
    other = G2GModel(preset("tiny", hidden_dim=32, input_dim=32, max_frames=4))
    ckpt = tmp_path / "other.safetensors"
    save_checkpoint(ckpt, other)
    cfg = smoke_config(smoke, tmp_path / "out2", model={
        "backbone": "compact", "backbone_preset": "compact_xs", "g2g_preset": "tiny",
        "g2g_overrides": {"max_frames": 4}, "freeze": ["backbone"], "init_from": str(ckpt)})
    with pytest.raises(ValueError, match="config.hidden_dim: checkpoint 32, expected 64"):
        Trainer(validate(cfg), progress=False)
    assert not (tmp_path / "out2" / "train_log.csv").exists()


def test_exponent_without_dot_is_a_number_and_print_config_trains_nothing(
        smoke, tmp_path, capsys):
    """YAML 1.1 reads ``1e-4`` as text (an optimizer error deep in torch before); and
    ``--print-config`` prints the resolved config, then exits without training."""
    cfg = smoke_config(smoke, tmp_path / "out")
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(cfg.to_dict()))
    assert train_main([str(path), "--set", "optim.lr=1e-4", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["optim"]["lr"] == 1e-4 and isinstance(printed["optim"]["lr"], float)
    assert not (tmp_path / "out").exists()  # nothing was trained or written

"""A killed and resumed run ends with the weights of an uninterrupted run (cached features)."""

import numpy as np
import pytest
import torch

from g2g_model.data.format import TrajectoryReader
from g2g_model.estimation.pipeline import G2GPipeline

from g2g_model.model.checkpoint import load_checkpoint, sha256_of
from g2g_model.training.logs import CsvLog
from g2g_model.training.smoke_data import make_smoke_collection, smoke_config
from g2g_model.training.run_files import LOG_FILE, MODEL_FILE, STATE_FILE
from g2g_model.training.trainer import Trainer


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")


def _config(root, out, cache):
    return smoke_config(root, out, cache={"enabled": True, "dir": str(cache)},
                        data={"max_pairs": 12})


def _run(config, **kwargs):
    trainer = Trainer(config, progress=False, **kwargs)
    try:
        summary = trainer.run()
        return summary, {k: v.clone() for k, v in trainer.g2g.state_dict().items()}
    finally:
        trainer.close()


def test_killed_and_resumed_run_matches_uninterrupted(smoke, tmp_path):
    cache = tmp_path / "cache"
    full_summary, full = _run(_config(smoke, tmp_path / "full", cache))
    assert full_summary["phase"] == "done" and full_summary["end_step"] == 10

    cfg = _config(smoke, tmp_path / "killed", cache)
    killed, _ = _run(cfg, stop_after=6)  # last checkpoint at step 4; steps 5-6 are lost
    assert killed["interrupted"] and (tmp_path / "killed" / STATE_FILE).is_file()
    resumed_summary, resumed = _run(cfg)
    assert resumed_summary["start_step"] == 4 and resumed_summary["end_step"] == 10
    for key, value in full.items():
        torch.testing.assert_close(resumed[key], value, rtol=1e-5, atol=1e-6, msg=key)

    # the logs describe one run: same steps, same losses
    rows_full = CsvLog(tmp_path / "full" / LOG_FILE).read()
    rows_resumed = CsvLog(tmp_path / "killed" / LOG_FILE).read()
    assert [r["step"] for r in rows_resumed] == [str(s) for s in range(1, 11)]
    assert [r["threshold"] for r in rows_resumed] == [r["threshold"] for r in rows_full]
    for a, b in zip(rows_full, rows_resumed):
        assert float(a["loss"]) == pytest.approx(float(b["loss"]), rel=1e-4)
    assert (tmp_path / "killed" / "training.png").stat().st_size > 1000

    # the exported model is our checkpoint format with the compact backbone inside
    loaded = load_checkpoint(tmp_path / "killed" / MODEL_FILE)
    assert loaded.backbone_state_dict and loaded.header["backbone"]["name"] == "compact"
    assert loaded.header["training"]["steps"] == 10
    for key, value in full.items():
        torch.testing.assert_close(loaded.model.state_dict()[key], value, rtol=1e-5, atol=1e-6)
    # ... and the inference pipeline runs it on user groups
    reader = TrajectoryReader(smoke / "scene_00000" / "traj_00")
    poses = reader.world_T_cam("cam0")
    group = {"images": [reader.image("cam0", i) for i in range(3)],
             "intrinsics": reader.rig["cam0"].K, "cam_to_world": poses[:3]}
    pred = G2GPipeline.from_checkpoint(tmp_path / "killed" / MODEL_FILE).predict(group, group)
    assert np.all(np.isfinite(pred.poses_b)) and not pred.untrained


def test_resume_refuses_another_configuration(smoke, tmp_path):
    cfg = _config(smoke, tmp_path / "run", tmp_path / "cache")
    _run(cfg, stop_after=4)
    other = _config(smoke, tmp_path / "run", tmp_path / "cache")
    other.optim.batch_size = 3
    with pytest.raises(ValueError, match="another configuration: optim.batch_size"):
        _run(other)


def test_resume_across_a_configuration_field_added_since(smoke, tmp_path):
    # A state written before a field existed (here data.reverse_fraction) resumes when the
    # field keeps its default, and is refused when it does not.
    cfg = _config(smoke, tmp_path / "run", tmp_path / "cache")
    _run(cfg, stop_after=4)
    state_path = tmp_path / "run" / "state.pt"
    state = torch.load(state_path, weights_only=False)
    del state["config"]["data"]["reverse_fraction"]
    torch.save(state, state_path)
    changed = _config(smoke, tmp_path / "run", tmp_path / "cache")
    changed.data.reverse_fraction = 0.5
    with pytest.raises(ValueError, match="another configuration: data"):
        _run(changed)
    _run(_config(smoke, tmp_path / "run", tmp_path / "cache"))
    assert [r["step"] for r in CsvLog(tmp_path / "run" / LOG_FILE).read()][-1] == "10"


def test_resume_refuses_a_backbone_file_with_other_bytes(smoke, tmp_path):
    # The same backbone_weights path, re-exported with other weights (a longer stage 1): the
    # saved state was trained on the old file, so resuming is refused and says why.
    cfg = _config(smoke, tmp_path / "run", tmp_path / "cache")
    _run(cfg, stop_after=4)
    state = torch.load(tmp_path / "run" / STATE_FILE, weights_only=False)
    weights = cfg.model.backbone_weights
    assert set(state["inputs"]) == {"backbone_weights"}
    assert state["inputs"]["backbone_weights"] == sha256_of(weights)
    from g2g_model.backbones.compact import CompactBackbone
    from g2g_model.backbones.compact_checkpoint import save_compact_checkpoint

    torch.manual_seed(1)
    save_compact_checkpoint(CompactBackbone("compact_xs"), weights)
    with pytest.raises(ValueError, match="other weight files: model.backbone_weights"):
        _run(_config(smoke, tmp_path / "run", tmp_path / "cache"))
    summary, _ = _run(_config(smoke, tmp_path / "run", tmp_path / "cache"), resume=False)
    assert summary["inputs_sha256"]["backbone_weights"] == sha256_of(weights)

"""tools/train_mnv2_cpu.sh keeps a finished stage only if it was trained on today's stage-1
backbone (run on a copy of the script with a stand-in trainer that logs its calls)."""

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "train_mnv2_cpu.sh"


def _finished(folder: Path, export: str, step: int, inputs=None) -> None:
    folder.mkdir(parents=True)
    (folder / export).write_bytes(b"weights")
    (folder / "train_log.csv").write_text(f"step,loss\n{step},1.0\n")
    summary = {"end_step": step, "interrupted": False, "inputs_sha256": inputs or {}}
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))


@pytest.fixture
def chain(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy(SCRIPT, tmp_path / "tools")
    fake = tmp_path / "fake_python"   # logs its arguments, then fails: the chain stops there
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/calls\nexit 3\n")
    fake.chmod(0o755)
    _finished(tmp_path / "outputs" / "compact_mnv2_pretrain", "backbone.safetensors", 700)
    sha = hashlib.sha256(b"weights").hexdigest()
    return tmp_path, sha


def _run(root: Path, **env):
    return subprocess.run(["bash", str(root / "tools" / "train_mnv2_cpu.sh")], cwd=root,
                          env={"PATH": "/usr/bin:/bin", "PY": str(root / "fake_python"), **env},
                          capture_output=True, text=True, timeout=60)


def test_stage_on_another_backbone_is_refused(chain):
    root, _ = chain
    _finished(root / "outputs" / "reloc_mnv2", "model.safetensors", 500,
              {"backbone_weights": "0" * 64})
    proc = _run(root)
    assert proc.returncode == 1
    assert "trained on another stage-1 backbone" in proc.stderr and "reloc_mnv2" in proc.stderr
    assert not (root / "calls").exists()


def test_stage_on_todays_backbone_is_skipped(chain):
    root, sha = chain
    _finished(root / "outputs" / "reloc_mnv2", "model.safetensors", 500,
              {"backbone_weights": sha})
    proc = _run(root)
    assert proc.returncode == 3   # the stand-in trainer's exit: the next stage ran
    log = (root / "outputs" / "mnv2_stretches.log").read_text()
    assert "compact_mnv2_pretrain: finished earlier" in log
    assert "reloc_mnv2: finished earlier, skipped" in log
    assert (root / "calls").read_text().split()[2] == "rig_odom_mnv2_ft"


def test_longer_stage1_is_resumed(chain):
    root, _ = chain
    proc = _run(root, STAGE1_STEPS="3000")
    assert proc.returncode == 3
    call = (root / "calls").read_text()
    assert "compact_mnv2_pretrain" in call and "optim.max_steps=3000" in call

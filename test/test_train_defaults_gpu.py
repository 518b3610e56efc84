"""Dry run of the GPU recipe of the default models (tools/train_defaults_gpu.sh) on the CPU at
its tiny scale: every stage runs for real (rendering, labels, stage 1, both G2G models side by
side, evaluation) and leaves loadable checkpoints, logs and evaluation tables."""

import csv
import os
import subprocess
import sys
from pathlib import Path

from g2g_model.inference import G2GPipeline

ROOT = Path(__file__).resolve().parents[1]


def test_recipe_runs_end_to_end_at_tiny_scale(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, TINY="1", DEVICE="cpu", WORKERS="2", WORK=str(tmp_path / "work"),
               PYTHON=sys.executable)
    run = subprocess.run([str(ROOT / "tools" / "train_defaults_gpu.sh"), str(out)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    log = (out / "recipe.log").read_text()
    for stage in ("rendering", "labelling", "compact_mnv2_pretrain:", "reloc_mnv2:",
                  "rig_odom_mnv2:", "evaluating", "done"):
        assert stage in log
    for name in ("g2g_reloc_mnv2", "g2g_rig_mnv2"):
        pipe = G2GPipeline.from_checkpoint(str(out / f"{name}.safetensors"))
        assert pipe.backbone.config.stem == "mobilenetv2"
    for task, name in (("reloc", "g2g_reloc_mnv2"), ("rig", "g2g_rig_mnv2")):
        with open(out / f"eval_{task}" / "comparison.csv") as handle:
            methods = [row[0] for row in csv.reader(handle)][1:]
        assert "identity" in methods and name in methods
    total = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    assert total < 64 * 2 ** 20  # what the GPU machine may return

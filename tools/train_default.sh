#!/usr/bin/env bash
# Train the embedded relocalization default, g2g_reloc_compact (docs/TRAINING.md; the rig
# default comes from tools/train_mnv2_cpu.sh). Every stage resumes where it stopped:
# re-run the script after an interruption (a finished stage only re-exports its model). Run from
# the repository root after tools/make_default_data.sh.
set -euo pipefail
PY=${PY:-python}
TRAIN="$PY -m g2g_model.training.cli"

# Stage 1: compact backbone pretraining (depth + hidden relative poses), 190 + 400 steps.
$TRAIN compact_pretrain -q
$TRAIN compact_pretrain_long -q
# Stage 2: relocalization G2G on cached frozen features, overlap curriculum.
$TRAIN reloc_compact -q --threads 1
# Rig odometry (consecutive keyframes of one traversal), starting from the relocalization model.
$TRAIN rig_odom_compact -q --threads 1

mkdir -p g2g_model/assets
install -m 644 outputs/reloc_compact/model.safetensors \
  g2g_model/assets/g2g_reloc_compact.safetensors
# The rig-odometry default is no longer this chain's rig_odom_compact (left in outputs/ for
# comparison) but g2g_rig_mnv2, from tools/train_mnv2_cpu.sh.
echo "relocalization default written to g2g_model/assets/"

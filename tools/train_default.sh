#!/usr/bin/env bash
# Train the first compact-encoder models, g2g_reloc_compact and rig_odom_compact (docs/TRAINING.md).
# Neither is shipped any more: both defaults come from tools/train_mnv2_cpu.sh; this chain stays
# for comparison and writes its models under outputs/ only. Every stage resumes where it stopped:
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

echo "models in outputs/reloc_compact and outputs/rig_odom_compact (not installed)"

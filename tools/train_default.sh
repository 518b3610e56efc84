#!/usr/bin/env bash
# Train the embedded default models (docs/TRAINING.md). Every stage resumes where it stopped:
# re-run the script after an interruption (a finished stage only re-exports its model). Run from
# the repository root after tools/make_default_data.sh (the stages wait for its pair indices).
set -euo pipefail
PY=${PY:-python}
TRAIN="$PY -m g2g_model.training.cli"
wait_for() { while [ ! -f "$1" ]; do echo "waiting for $1"; sleep 20; done; }
# A stage started by an earlier invocation may still run: wait for it instead of racing it.
wait_pid() { while [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; do sleep 10; done; }
wait_pid "${WAIT_PID:-}"

# Stage 1: compact backbone pretraining (depth + hidden relative poses).
$TRAIN compact_pretrain -q
# Stage 2: relocalization G2G on cached frozen features, overlap curriculum.
wait_for data/sim_train/pairs_w5.json
$TRAIN reloc_compact -q --threads 1
# Rig odometry, starting from the relocalization model.
wait_for data/sim_train/rig_pairs.csv
$TRAIN rig_compact -q --threads 1

mkdir -p g2g_model/assets
cp outputs/reloc_compact/model.safetensors g2g_model/assets/g2g_reloc_compact.safetensors
cp outputs/rig_compact/model.safetensors g2g_model/assets/g2g_rig_compact.safetensors
echo "default models written to g2g_model/assets/"

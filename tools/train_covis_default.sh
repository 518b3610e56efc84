#!/usr/bin/env bash
# Train the default covisibility front-end (g2g_model/assets/covis_mnv2.safetensors) on
# simulator scenes with tokens of the embedded default backbone, then evaluate it on the held-out
# test scenes. See docs/COVISIBILITY.md for the measured numbers.
#
# Usage: tools/train_covis_default.sh [SIM_ROOT] [OUT_DIR]
#   SIM_ROOT  directory with sim_train/, sim_val/, sim_test/ (g2g-sim output with depth);
#             default: data
#   OUT_DIR   run directory (samples, token cache, log, checkpoints); default: outputs/covis_default
# Environment: PIPELINE (G2G checkpoint whose backbone encodes; default: the embedded
#   relocalization default), STEPS and BATCH (override the recipe's 3000 and 64), TRAIN_SCENES
#   (all), INSTALL=1 copies the result to g2g_model/assets/covis_mnv2.safetensors.
# The training settings are the named recipe decoder_default (g2g_model/covisibility/recipes.py).
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_ROOT=${1:-data}
OUT=${2:-outputs/covis_default}
PIPELINE=${PIPELINE:-g2g_model/assets/g2g_reloc_mnv2.safetensors}
PY=${PYTHON:-python}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
COVIS=("$PY" -m g2g_model.covisibility.cli -v)
SCENES=()
if [[ -n "${TRAIN_SCENES:-}" ]]; then SCENES=(--scenes "$TRAIN_SCENES"); fi
OVERRIDES=()
if [[ -n "${STEPS:-}" ]]; then OVERRIDES+=(--steps "$STEPS"); fi
if [[ -n "${BATCH:-}" ]]; then OVERRIDES+=(--batch-size "$BATCH"); fi

mkdir -p "$OUT"
# 1. Encode every 4th frame of every traversal/camera (cached per scene and encoder), label
#    5000 balanced ordered pairs per training scene from depth.
"${COVIS[@]}" sim-samples --root "$SIM_ROOT/sim_train" --pipeline "$PIPELINE" \
    --out "$OUT/train.safetensors" "${SCENES[@]}" --stride 4 --pairs-per-scene 5000 \
    --cache "$OUT/token_cache" --seed 0
"${COVIS[@]}" sim-samples --root "$SIM_ROOT/sim_val" --pipeline "$PIPELINE" \
    --out "$OUT/val.safetensors" --stride 4 --pairs-per-scene 2000 \
    --cache "$OUT/token_cache" --seed 1
# 2. Train the cpu_fast decoder over the backbone's 7x7 token grid (fp32, CPU): recipe
#    decoder_default (pool 1, dense subdiv 2, input norm, cpu_short, MSE ratios, lr 5e-4,
#    3000 steps of 64).
"${COVIS[@]}" train --recipe decoder_default --train "$OUT/train.safetensors" \
    --val "$OUT/val.safetensors" --out "$OUT/run" "${OVERRIDES[@]}" --quiet
# 3. Held-out test scenes (seeds 20000+): pair metrics, frame retrieval, window selection (also
#    with a 2 m position hint), for the decoder, map-whitened similarity and the descriptor.
"${COVIS[@]}" sim-eval --root "$SIM_ROOT/sim_test" --pipeline "$PIPELINE" \
    --checkpoint "$OUT/run/covisibility.safetensors" --stride 2 --pairs-per-scene 2000 \
    --window 4 --hint-radius 2 --hint-sigma 0.5 --cache "$OUT/token_cache" \
    --json "$OUT/test_metrics.json"
if [[ "${INSTALL:-0}" == 1 ]]; then
    cp "$OUT/run/covisibility.safetensors" g2g_model/assets/covis_mnv2.safetensors
    echo "installed g2g_model/assets/covis_mnv2.safetensors"
fi

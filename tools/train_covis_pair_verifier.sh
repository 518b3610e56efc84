#!/usr/bin/env bash
# Train a pair verifier (it re-ranks the relocalize node's 8 best map windows) on a CPU: the
# 72 simulator training scenes, 4,000 steps of 128 pairs, re-ranking weight 0.5 (the recipe of
# the first shipped verifier; the shipped one now comes from the longer GPU recipe,
# tools/train_covis_pair_verifier_gpu.sh), then evaluate every window scorer, re-ranked or
# not, on the held-out test scenes. docs/COVISIBILITY.md has the measured numbers of both.
#
# Usage: tools/train_covis_pair_verifier.sh [SIM_ROOT] [OUT_DIR]
#   SIM_ROOT  with sim_train/, sim_train_more/ and sim_test/ (tools/make_default_data.sh);
#             default: data
#   OUT_DIR   run directory (images, evaluation token cache, verifier, metrics); default:
#             outputs/covis_pair_verifier
# Environment: PYTHON, PIPELINE (as train_covis_image_embedding.sh), WORKERS (processes reading
#   the scenes, default 2), INSTALL=1 copies the result into g2g_model/assets/ (replacing the
#   better GPU-trained default). About 45 min on 2 CPU cores (images and labels 12 min,
#   training 4,000 steps 30 min, evaluation 5 min). Training saves every 500 steps; run it
#   again after an interruption and it continues from the last save (remove OUT_DIR/*.state.pt
#   to start afresh).
set -euo pipefail
cd "$(dirname "$0")/.."
SIM_ROOT=${1:-data}
OUT=${2:-outputs/covis_pair_verifier}
PIPELINE=${PIPELINE:-g2g_model/assets/g2g_reloc_mnv2.safetensors}
COVIS=("${PYTHON:-python}" -m g2g_model.covisibility.cli -v)
ASSETS=g2g_model/assets

mkdir -p "$OUT"
# 1. Every 2nd frame of the 72 training scenes, 64 px, with the overlap of every pair; recipe
#    pair_verifier_cpu: 4,000 steps of 128 cross-traversal pairs, equally many from each
#    overlap bin, stored re-ranking weight 0.5.
"${COVIS[@]}" train-pair-verifier --recipe pair_verifier_cpu \
    --root "$SIM_ROOT/sim_train" "$SIM_ROOT/sim_train_more" --workers "${WORKERS:-2}" \
    --data "$OUT/train_images.pt" --out "$OUT/pair_verifier.safetensors"
# 2. The held-out test scenes: every scorer, and the default's windows re-ranked.
"${COVIS[@]}" sim-eval --root "$SIM_ROOT/sim_test" --pipeline "$PIPELINE" \
    --checkpoint "$ASSETS/covis_mnv2.safetensors" \
    --embedding "$ASSETS/covis_embedding_mnv2.safetensors" \
    --image-embedding "$ASSETS/covis_image_embedding.safetensors" \
    --pair-verifier "$OUT/pair_verifier.safetensors" \
    --window 4 --cache "$OUT/token_cache" --json "$OUT/test_metrics.json"
if [[ "${INSTALL:-0}" == 1 ]]; then
    cp "$OUT/pair_verifier.safetensors" "$ASSETS/covis_pair_verifier.safetensors"
fi

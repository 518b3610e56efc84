#!/usr/bin/env bash
# Train the default image covisibility embedding
# (g2g_model/assets/covis_image_embedding.safetensors; with the token embedding it makes the
# relocalize node's default window scorer, window_scorer: combined) on the simulator training
# scenes, then evaluate every window scorer on the held-out test scenes.
# See docs/COVISIBILITY.md for the measured numbers.
#
# Usage: tools/train_covis_image_embedding.sh [SIM_ROOT] [OUT_DIR]
#   SIM_ROOT  directory with sim_train/ and sim_test/ (g2g-sim output with depth); default: data
#   OUT_DIR   run directory (images, token cache, embedding, metrics); default:
#             outputs/covis_image_embedding
# Environment: PIPELINE (G2G checkpoint whose backbone encodes; default: the embedded
#   relocalization default), INSTALL=1 copies the result to
#   g2g_model/assets/covis_image_embedding.safetensors. About 60 min on 2 CPU cores (images and
#   labels 7 min, training 50 min, evaluation 2 min). Training saves every 500 steps and an
#   interrupted run continues from the last save when started again.
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_ROOT=${1:-data}
OUT=${2:-outputs/covis_image_embedding}
PIPELINE=${PIPELINE:-g2g_model/assets/g2g_reloc_mnv2.safetensors}
PY=${PYTHON:-python}
COVIS=("$PY" -m g2g_model.covisibility.cli -v)

mkdir -p "$OUT"
# 1. Every 2nd frame of every traversal/camera of the training scenes, shrunk to 64 px, with the
#    overlap of every pair of a scene; recipe image_embedding_default: 3000 steps of 128
#    pairs (half covisible).
"${COVIS[@]}" train-image-embedding --recipe image_embedding_default --root "$SIM_ROOT/sim_train" --workers "${WORKERS:-2}" \
    --data "$OUT/train_images.pt" --out "$OUT/image_embedding.safetensors"
# 2. Every window scorer on the held-out test scenes.
"${COVIS[@]}" sim-eval --root "$SIM_ROOT/sim_test" --pipeline "$PIPELINE" \
    --checkpoint g2g_model/assets/covis_mnv2.safetensors \
    --embedding g2g_model/assets/covis_embedding_mnv2.safetensors \
    --image-embedding "$OUT/image_embedding.safetensors" \
    --window 4 --hint-radius 2 --hint-sigma 0.5 --cache "$OUT/token_cache" \
    --json "$OUT/test_metrics.json"
if [[ "${INSTALL:-0}" == 1 ]]; then
    cp "$OUT/image_embedding.safetensors" g2g_model/assets/covis_image_embedding.safetensors
fi

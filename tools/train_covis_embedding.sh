#!/usr/bin/env bash
# Train the default covisibility embedding (g2g_model/assets/covis_embedding_mnv2.safetensors,
# the relocalize node's default window scorer) on simulator scenes with tokens of the embedded
# default backbone, then evaluate every window scorer on the held-out test scenes.
# See docs/COVISIBILITY.md for the measured numbers.
#
# Usage: tools/train_covis_embedding.sh [SIM_ROOT] [OUT_DIR]
#   SIM_ROOT  directory with sim_train/ and sim_test/ (g2g-sim output with depth); default: data
#   OUT_DIR   run directory (samples, token cache, embedding, metrics); default:
#             outputs/covis_embedding
# Environment: PIPELINE (G2G checkpoint whose backbone encodes; default: the embedded
#   relocalization default), DECODER (covisibility decoder of the same encoder, evaluated
#   beside it; default: the embedded one), INSTALL=1 copies the result to
#   g2g_model/assets/covis_embedding_mnv2.safetensors. About 6 min on 2 CPU cores (samples
#   5 min, training 10 s, evaluation 1 min).
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_ROOT=${1:-data}
OUT=${2:-outputs/covis_embedding}
PIPELINE=${PIPELINE:-g2g_model/assets/g2g_reloc_mnv2.safetensors}
DECODER=${DECODER:-g2g_model/assets/covis_mnv2.safetensors}
PY=${PYTHON:-python}
COVIS=("$PY" -m g2g_model.covisibility.cli -v)

mkdir -p "$OUT"
# 1. Every 2nd frame of every traversal/camera of the 24 training scenes; 10000 balanced ordered
#    pairs per scene labelled from depth.
if [[ ! -f "$OUT/train.safetensors" ]]; then
    "${COVIS[@]}" sim-samples --root "$SIM_ROOT/sim_train" --pipeline "$PIPELINE" \
        --out "$OUT/train.safetensors" --stride 2 --pairs-per-scene 10000 \
        --cache "$OUT/token_cache" --seed 0
fi
# 2. Recipe embedding_default: per-scene standardisation, PCA whitening to 256, a 64 x 256
#    head (cosine -> overlap, MSE).
"${COVIS[@]}" train-embedding --recipe embedding_default --train "$OUT/train.safetensors" \
    --out "$OUT/covis_embedding.safetensors" --quiet
# 3. Held-out test scenes (seeds 20000+): every scorer, also with a 2 m position hint.
"${COVIS[@]}" sim-eval --root "$SIM_ROOT/sim_test" --pipeline "$PIPELINE" \
    --checkpoint "$DECODER" \
    --embedding "$OUT/covis_embedding.safetensors" --stride 2 --pairs-per-scene 2000 \
    --window 4 --hint-radius 2 --hint-sigma 0.5 --cache "$OUT/token_cache" \
    --json "$OUT/test_metrics.json"
if [[ "${INSTALL:-0}" == 1 ]]; then
    cp "$OUT/covis_embedding.safetensors" g2g_model/assets/covis_embedding_mnv2.safetensors
    echo "installed g2g_model/assets/covis_embedding_mnv2.safetensors"
fi

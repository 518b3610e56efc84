#!/usr/bin/env bash
# Fine-tune a trained pair verifier on the look-alike places it has to order (the second step
# of the shipped verifier's recipe; the first is tools/train_covis_pair_verifier_gpu.sh), on a
# CPU: every frame's 16 most similar frames of other traversals by the shipped image embedding
# give triplets (the frame, a better and a worse look-alike, overlaps >= 0.1 apart); 1,500
# steps of 128 binned pairs + 64 triplets, MSE plus a margin ranking term, batch norm frozen,
# lr 3e-4; the file stores re-ranking weight 5 (chosen on the validation scenes,
# docs/COVISIBILITY.md). These are the named recipe pair_verifier_finetune. Then evaluate every window scorer on the held-out test scenes.
# About 25 min on 2 CPU cores (finding the look-alikes 2 min, 1,500 steps 22 min), plus the
# image data when OUT_DIR/train_images.pt does not exist yet (12 min) and the evaluation (6 min).
#
# Usage: tools/finetune_covis_pair_verifier.sh INIT [SIM_ROOT] [OUT_DIR]
#   INIT      the verifier to start from (the GPU recipe's OUT_DIR/pair_verifier_64.safetensors)
#   SIM_ROOT  with sim_train/, sim_train_more/ and sim_test/ (tools/make_default_data.sh);
#             default: data
#   OUT_DIR   run directory; default: outputs/covis_pair_verifier_ft
# Environment: PYTHON, PIPELINE (as train_covis_pair_verifier.sh), WORKERS (processes reading
#   the scenes, default 2), INSTALL=1 copies the result to
#   g2g_model/assets/covis_pair_verifier.safetensors. An interrupted run continues from its
#   last save (every 500 steps) when started again.
set -euo pipefail
cd "$(dirname "$0")/.."
INIT=${1:?usage: $0 INIT [SIM_ROOT] [OUT_DIR]}
SIM_ROOT=${2:-data}
OUT=${3:-outputs/covis_pair_verifier_ft}
PIPELINE=${PIPELINE:-g2g_model/assets/g2g_reloc_mnv2.safetensors}
COVIS=("${PYTHON:-python}" -m g2g_model.covisibility.cli -v)
ASSETS=g2g_model/assets

mkdir -p "$OUT"
"${COVIS[@]}" finetune-pair-verifier --recipe pair_verifier_finetune \
    --root "$SIM_ROOT/sim_train" "$SIM_ROOT/sim_train_more" --workers "${WORKERS:-2}" \
    --data "$OUT/train_images.pt" --init "$INIT" \
    --image-embedding "$ASSETS/covis_image_embedding.safetensors" \
    --out "$OUT/pair_verifier.safetensors"
"${COVIS[@]}" sim-eval --root "$SIM_ROOT/sim_test" --pipeline "$PIPELINE" \
    --checkpoint "$ASSETS/covis_mnv2.safetensors" \
    --embedding "$ASSETS/covis_embedding_mnv2.safetensors" \
    --image-embedding "$ASSETS/covis_image_embedding.safetensors" \
    --pair-verifier "$OUT/pair_verifier.safetensors" \
    --window 4 --cache "$OUT/token_cache" --json "$OUT/test_metrics.json"
if [[ "${INSTALL:-0}" == 1 ]]; then
    cp "$OUT/pair_verifier.safetensors" "$ASSETS/covis_pair_verifier.safetensors"
fi

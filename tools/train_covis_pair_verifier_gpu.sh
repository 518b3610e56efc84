#!/usr/bin/env bash
# Train pair verifiers on a GPU machine from nothing: render the simulator training scenes,
# build their shrunk images and overlaps, and train one verifier per image size, all sizes at
# once. The CPU recipe (72 scenes, 4,000 steps of 128 pairs) is tools/train_covis_pair_verifier.sh;
# this one draws on more scenes and many more steps. Evaluate the results on the validation
# scenes before shipping one (docs/COVISIBILITY.md says how the shipped one was chosen).
#
# Usage: tools/train_covis_pair_verifier_gpu.sh OUT_DIR
# Environment (defaults in brackets):
#   SCENES [96]         training-split scenes to render (seeds 0..SCENES-1, 3 traversals, as
#                       tools/make_default_data.sh renders sim_train and sim_train_more)
#   SIZES ["64 96"]     image sizes; one verifier OUT_DIR/pair_verifier_<size>.safetensors each
#   STEPS [20000]       training steps of BATCH pairs each, or, with TRAIN_SECONDS set, as
#                       many steps as fit in that many seconds (timed on 50 steps first)
#   DEADLINE            with TRAIN_SECONDS: the training also ends by DEADLINE seconds after
#                       this script started (less TRAIN_SECONDS when rendering took long)
#   BATCH [256]         pairs per step
#   WORKERS [nproc]     processes rendering and reading scenes
#   DEVICE [cuda]       where the networks train
#   WORK [/tmp/g2g_pv]  rendered scenes and image data (large; not in OUT_DIR)
#   PYTHON [python3]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: $0 OUT_DIR}
SCENES=${SCENES:-96}
SIZES=${SIZES:-64 96}
STEPS=${STEPS:-20000}
BATCH=${BATCH:-256}
WORKERS=${WORKERS:-$(nproc)}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-/tmp/g2g_pv}
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
nsizes=$(wc -w <<<"$SIZES")
per_size=$(( WORKERS / nsizes > 0 ? WORKERS / nsizes : 1 ))

stamp "rendering $SCENES training scenes with $WORKERS workers"
"$PY" -m g2g_model.data.sim.cli --out "$WORK/sim" --split train --num-scenes "$SCENES" \
    --traversals 3 --scene-preset small --rig-preset ring4 --frames 100 --workers "$WORKERS" \
    > "$WORK/sim.log" 2>&1
stamp "building the image data of sizes $SIZES ($per_size workers each)"
for size in $SIZES; do
    "$PY" -m g2g_model.covisibility.cli train-pair-verifier --root "$WORK/sim" --size "$size" \
        --workers "$per_size" --data "$WORK/images_$size.pt" --out "$WORK/calib_$size.safetensors" \
        --steps 50 --batch-size "$BATCH" --device "$DEVICE" --no-resume -q \
        > "$WORK/calib_$size.log" 2>&1 &
done
wait
seconds=${TRAIN_SECONDS:-}
if [[ -n "$seconds" && -n "${DEADLINE:-}" ]]; then
    left=$(( DEADLINE - ($(date +%s) - start) - 30 ))
    seconds=$(( left < seconds ? left : seconds ))
fi
for size in $SIZES; do
    steps=$STEPS
    if [[ -n "$seconds" ]]; then
        steps=$("$PY" - "$WORK/calib_$size.safetensors" "$seconds" <<'EOF'
import sys
from g2g_model.covisibility.pair_verifier import load_pair_verifier
seconds = load_pair_verifier(sys.argv[1])[1]["training"]["seconds"] / 50
print(max(100, int(float(sys.argv[2]) / seconds) // 100 * 100))
EOF
)
    fi
    stamp "size $size: $steps steps of $BATCH pairs on $DEVICE"
    "$PY" -m g2g_model.covisibility.cli -v train-pair-verifier --root "$WORK/sim" --size "$size" \
        --data "$WORK/images_$size.pt" --out "$OUT/pair_verifier_$size.safetensors" \
        --steps "$steps" --batch-size "$BATCH" --device "$DEVICE" --no-resume -q \
        > "$OUT/train_$size.log" 2>&1 &
done
wait
stamp "done"

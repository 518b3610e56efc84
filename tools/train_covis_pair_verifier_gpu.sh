#!/usr/bin/env bash
# Train the default pair verifier (g2g_model/assets/covis_pair_verifier.safetensors) from
# nothing, on a GPU machine: render the simulator training scenes, build their shrunk images and
# overlaps, and train one verifier per image size (all sizes at once). With the defaults this is
# the shipped file's recipe: 96 scenes, 64 px, 8,500 steps of 256 pairs; on an NVIDIA H200 with
# 16 CPU cores it took 7 min (rendering 2.6 min, image data 1.9 min, training 2.5 min). It runs
# on a CPU too (DEVICE=cpu), in several hours. tools/train_covis_pair_verifier.sh is the shorter
# CPU recipe (72 scenes, 4,000 steps of 128 pairs; less accurate, see docs/COVISIBILITY.md).
# Evaluate a result on the validation scenes before shipping it. The training settings are the
# named recipe pair_verifier_gpu (g2g_model/covisibility/recipes.py); STEPS, BATCH and DEVICE
# override its values.
#
# Usage: tools/train_covis_pair_verifier_gpu.sh OUT_DIR
# Environment (defaults in brackets):
#   SCENES [96]         training-split scenes to render (seeds 0..SCENES-1, 3 traversals, as
#                       tools/make_default_data.sh renders sim_train and sim_train_more)
#   SIZES [64]          image sizes; one verifier OUT_DIR/pair_verifier_<size>.safetensors each
#   STEPS [8500]        training steps of BATCH pairs each, or, with TRAIN_SECONDS set, as
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
SIZES=${SIZES:-64}
WORKERS=${WORKERS:-$(nproc)}
WORK=${WORK:-/tmp/g2g_pv}
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
nsizes=$(wc -w <<<"$SIZES")
per_size=$(( WORKERS / nsizes > 0 ? WORKERS / nsizes : 1 ))
TRAIN=(train-pair-verifier --recipe pair_verifier_gpu)
if [[ -n "${BATCH:-}" ]]; then TRAIN+=(--batch-size "$BATCH"); fi
if [[ -n "${DEVICE:-}" ]]; then TRAIN+=(--device "$DEVICE"); fi

stamp "rendering $SCENES training scenes with $WORKERS workers"
"$PY" -m g2g_model.data.sim.cli --out "$WORK/sim" --split train --num-scenes "$SCENES" \
    --traversals 3 --scene-preset small --rig-preset ring4 --frames 100 --workers "$WORKERS" \
    > "$WORK/sim.log" 2>&1
stamp "building the image data of sizes $SIZES ($per_size workers each)"
for size in $SIZES; do
    "$PY" -m g2g_model.covisibility.cli "${TRAIN[@]}" --root "$WORK/sim" --size "$size" \
        --workers "$per_size" --data "$WORK/images_$size.pt" --out "$WORK/calib_$size.safetensors" \
        --steps 50 --no-resume -q \
        > "$WORK/calib_$size.log" 2>&1 &
done
wait
seconds=${TRAIN_SECONDS:-}
if [[ -n "$seconds" && -n "${DEADLINE:-}" ]]; then
    left=$(( DEADLINE - ($(date +%s) - start) - 30 ))
    seconds=$(( left < seconds ? left : seconds ))
fi
for size in $SIZES; do
    steps=${STEPS:-}
    if [[ -n "$seconds" ]]; then
        steps=$("$PY" - "$WORK/calib_$size.safetensors" "$seconds" <<'EOF'
import sys
from g2g_model.covisibility.pair_verifier import load_pair_verifier
seconds = load_pair_verifier(sys.argv[1])[1]["training"]["seconds"] / 50
print(max(100, int(float(sys.argv[2]) / seconds) // 100 * 100))
EOF
)
    fi
    steps_arg=()
    if [[ -n "$steps" ]]; then steps_arg=(--steps "$steps"); fi
    stamp "size $size: ${TRAIN[*]:1} ${steps_arg[*]}"
    "$PY" -m g2g_model.covisibility.cli -v "${TRAIN[@]}" --root "$WORK/sim" --size "$size" \
        --data "$WORK/images_$size.pt" --out "$OUT/pair_verifier_$size.safetensors" \
        "${steps_arg[@]}" --no-resume -q \
        > "$OUT/train_$size.log" 2>&1 &
done
wait
stamp "done"

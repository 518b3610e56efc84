#!/usr/bin/env bash
# Train the compact_mnv2 (or, with BACKBONE_PRESET, compact_aliked) default models from nothing
# on one GPU machine, within a time budget:
# render the simulator training and test scenes in parallel, label them (rig pairs, same-camera
# overlaps, mined window pairs), train stage 1 (compact_mnv2_pretrain) in bf16, then the
# relocalization and rig-odometry G2G models side by side on the same GPU, evaluate both on the
# held-out test scenes against "no motion", and leave checkpoints, logs and evaluations in
# OUT_DIR (a few MB). Each training stage gets a share of the budget: it first times a few steps
# (which also builds its feature cache), then sets its schedule (warm-up + cosine decay) to the
# steps that fit before its deadline. With HEDGE_BACKBONE, a third run trains rig odometry on that
# given stage-1 backbone from the start, beside the others (g2g_rig_mnv2_hedge.safetensors).
# With BACKBONE, stage 1 is skipped and both G2G models train on that backbone; with INIT_RELOC /
# INIT_RIG they start from those checkpoints (same configuration; fine-tuning at half the
# learning rate). With RING5_SCENES, 5-camera rig scenes join the rig-odometry training set.
# Runs on a CPU too (DEVICE=cpu), and at a tiny scale in seconds (TINY=1;
# test/test_train_defaults_gpu.py runs it that way).
#
# Usage: tools/train_defaults_gpu.sh OUT_DIR
# Environment (defaults in brackets):
#   BUDGET [480]        seconds for the whole script; rendering and labelling take what they
#                       take, stage 1 gets half of what is left, then the two G2G models share
#                       the GPU for the other half; 40 s are kept for evaluation
#   SCENES [48]         training-split scenes (100 frames, ring4 rig)
#   OFFSET [0]          index of the first training scene (to skip scenes a model to be
#                       fine-tuned has seen: the CPU chain renders 0-71, and 72-95 with ring5)
#   TRAVERSALS [3]      traversals per training scene
#   TEST_SCENES [4]     test-split scenes (2 traversals): the held-out split of docs/TRAINING.md
#   LABEL_SCENES [24]   training scenes that get overlap labels (relocalization pairs)
#   BATCH [32]          groups (stage 1) and pairs (G2G) per step
#   BACKBONE_PRESET [compact_mnv2]  the stage-1 backbone: compact_mnv2 (frozen MobileNetV2
#                       features) or compact_aliked (frozen ALIKED-t16 descriptors, about 3x
#                       the encoder cost); the files are named after it (g2g_reloc_<name>, ...)
#   IMAGE_SIZE [112]    square input side in pixels (multiple of 16): 112 gives 7 x 7 tokens
#                       per frame, 224 gives 14 x 14 (a stage-1 backbone trained at another
#                       size still loads: its patch position table is interpolated)
#   RIG_PAIRS [100000]  rig-odometry training pairs at most (keyframes 0-3 frames apart: a
#                       quarter are standstills, the rig twice at one frame, before RIG_STILL)
#   RIG_STILL [3]       each standstill training pair written this many times (3: half the
#                       rows, as the default's last stretch; 1: as they come)
#   RIG_REVERSE [0.5]   share of the rig pairs trained with A and B exchanged (> 0: the model
#                       runs both ways, as the default does; 0: forwards only)
#   HEDGE_BACKBONE      a stage-1 backbone.safetensors for the third run (none: no third run)
#   BACKBONE            a stage-1 backbone.safetensors for both models (none: stage 1 trains)
#   INIT_RELOC, INIT_RIG  G2G checkpoints the two models start from (none: from nothing)
#   RING5_SCENES [0]    extra 5-camera (ring5) training scenes for rig odometry
#   WORKERS [nproc]     rendering / labelling processes; image-loading threads per training
#   DEVICE [cuda]       where the networks train
#   WORK [/tmp/g2g_defaults]  rendered data and feature caches (large; not in OUT_DIR)
#   TINY                1: 2 + 1 scenes of 12 frames at 64 px, STEPS steps per stage (a dry run)
#   STEPS [2]           with TINY, the steps of each stage (instead of timing them)
#   PYTHON [python3]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: $0 OUT_DIR}
BUDGET=${BUDGET:-480}
SCENES=${SCENES:-48}
TRAVERSALS=${TRAVERSALS:-3}
RIG_PAIRS=${RIG_PAIRS:-100000}
RIG_STILL=${RIG_STILL:-3}
RIG_REVERSE=${RIG_REVERSE:-0.5}
HEDGE=${HEDGE_BACKBONE:-}
BACKBONE=${BACKBONE:-}
INIT_RELOC=${INIT_RELOC:-}
INIT_RIG=${INIT_RIG:-}
RING5=${RING5_SCENES:-0}
OFFSET=${OFFSET:-0}
TEST_SCENES=${TEST_SCENES:-4}
LABEL_SCENES=${LABEL_SCENES:-24}
BATCH=${BATCH:-32}
WORKERS=${WORKERS:-$(nproc)}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-/tmp/g2g_defaults}
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
stamp() { echo "[$(elapsed) s] $*" | tee -a "$OUT/recipe.log"; }

SIM_ARGS=(--scene-preset small --frames 100)
SIZE=${IMAGE_SIZE:-112}
if (( SIZE % 16 )); then echo "IMAGE_SIZE must be a multiple of 16, got $SIZE" >&2; exit 2; fi
PRESET=${BACKBONE_PRESET:-compact_mnv2}
case $PRESET in
    compact_mnv2|compact_aliked) ;;
    *) echo "BACKBONE_PRESET must be compact_mnv2 or compact_aliked, got $PRESET" >&2; exit 2 ;;
esac
NAME=${PRESET#compact_}   # mnv2 or aliked: in the names of the files it writes
if [[ "${TINY:-0}" == 1 ]]; then
    SCENES=2; TEST_SCENES=1; LABEL_SCENES=2; BATCH=2
    [[ $RING5 -gt 0 ]] && RING5=1
    SIM_ARGS=(--scene-preset small --frames 12 --image-size 64)
    SIZE=${IMAGE_SIZE:-64}
fi
SIM="$PY -m g2g_model.data.sim.cli"
DATA="$PY -m g2g_model.data.cli"
TRAIN="$PY -m g2g_model.training.cli"

stamp "rendering $SCENES training and $TEST_SCENES test scenes with $WORKERS workers"
$SIM --out "$WORK/sim_train" --split train --offset "$OFFSET" --num-scenes "$SCENES" \
    --traversals "$TRAVERSALS" --rig-preset ring4 "${SIM_ARGS[@]}" --workers "$WORKERS" > "$WORK/sim.log" 2>&1
$SIM --out "$WORK/sim_test" --split test --num-scenes "$TEST_SCENES" --traversals 2 \
    --rig-preset ring4 "${SIM_ARGS[@]}" --workers "$WORKERS" >> "$WORK/sim.log" 2>&1
if [[ $RING5 -gt 0 ]]; then
    stamp "rendering $RING5 five-camera training scenes"
    $SIM --out "$WORK/sim_train5" --split train --offset $(( OFFSET + SCENES )) \
        --num-scenes "$RING5" --traversals "$TRAVERSALS" --rig-preset ring5 "${SIM_ARGS[@]}" --workers "$WORKERS" \
        >> "$WORK/sim.log" 2>&1
fi

stamp "labelling (rig pairs, overlaps of $LABEL_SCENES scenes, mined windows)"
for split in train test; do
    root="$WORK/sim_$split"
    # Held-out: consecutive keyframes 1-3 frames apart (docs/TRAINING.md); training: 0-3, so the
    # model also sees the rig standing still (it must answer the identity when B = A).
    gap=1 still=1; [[ $split == train ]] && gap=0 still=$RIG_STILL
    $DATA rig-pairs "$root" --max-distance 3 --min-frame-gap $gap --max-frame-gap 3 \
        --max-pairs 400 --standstill-repeat "$still" --out "$root/rig_odom_pairs.csv" \
        >> "$WORK/labels.log" 2>&1
    stamp "  $split: rig pairs written"
    ls -d "$root"/scene_* | head -n "$LABEL_SCENES" | xargs -P "$WORKERS" -I{} \
        $DATA overlap {} --cam-pairs same --size 28 >> "$WORK/labels.log" 2>&1
    stamp "  $split: overlaps computed"
    $DATA mine "$root" --window 5 --top-k 10 --min-score 0.1 >> "$WORK/labels.log" 2>&1
    stamp "  $split: windows mined"
done
RIG_ROOT=$WORK/sim_train
if [[ $RING5 -gt 0 ]]; then
    $DATA rig-pairs "$WORK/sim_train5" --max-distance 3 --min-frame-gap 0 --max-frame-gap 3 \
        --max-pairs 400 --standstill-repeat "$RIG_STILL" \
        --out "$WORK/sim_train5/rig_odom_pairs.csv" >> "$WORK/labels.log" 2>&1
    rm -rf "$WORK/sim_rig"
    $DATA merge "$WORK/sim_train" "$WORK/sim_train5" --out "$WORK/sim_rig" \
        --index rig_odom_pairs.csv >> "$WORK/labels.log" 2>&1
    RIG_ROOT=$WORK/sim_rig
    stamp "  five-camera rig pairs merged into $RIG_ROOT"
fi

# train NAME OUT DEADLINE [--set ...]: time 5 steps (building the feature cache, if any), then
# run the schedule that ends by DEADLINE (seconds since the start of this script).
train() {
    local name=$1 dir=$2 deadline=$3 seconds tag=${2##*/}; shift 3
    local common=(--set device="$DEVICE" --set bf16=auto --set "data.root=$WORK/sim_train"
                  --set optim.batch_size="$BATCH" --set checkpoint_every=100000
                  --set num_workers="$WORKERS"
                  --set "model.backbone_overrides={image_size: [$SIZE, $SIZE]}"
                  --set model.backbone_preset="$PRESET" "$@")
    local steps=${STEPS:-2}
    [[ "${TINY:-0}" == 1 ]] && common+=(--set log_every=1)
    if [[ "${TINY:-0}" != 1 ]]; then
        $TRAIN "$name" --out "$WORK/timing_$tag" "${common[@]}" --set optim.max_steps=6 \
            --set log_every=1 --set optim.warmup_steps=1 --set optim.decay_steps=5 -q \
            > "$WORK/timing_$tag.log" 2>&1
        seconds=$(( deadline - $(elapsed) ))
        steps=$($PY - "$WORK/timing_$tag/train_log.csv" "$seconds" <<'PYEOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
per_step = statistics.median(float(r["sec_per_step"]) for r in rows[-3:])
print(max(20, int(0.8 * float(sys.argv[2]) / per_step)))
PYEOF
)
    fi
    local warmup=$(( steps / 10 > 1 ? steps / 10 : 1 ))
    local decay=$(( steps - warmup )) extra=()
    if [[ "$name" == reloc_mnv2 ]]; then
        # The curriculum's 9 plateau levels (0.50 -> 0.10) take at most 9 x level steps, 45 % of
        # the run, and the decay starts after them: it is sized for that worst case so that the
        # learning rate always reaches 0 by max_steps (a decay cut off at max_steps left the
        # ALIKED GPU model of 2026-11-27 at a quarter of its peak rate). If the plateaus pass their gates
        # sooner, the run ends early.
        local level=$(( steps / 20 + 1 ))
        decay=$(( steps - warmup - 9 * level > 1 ? steps - warmup - 9 * level : 1 ))
        extra=(--set curriculum.max_steps_per_level=$level)
    fi
    stamp "$name: $steps steps until $deadline s"
    $TRAIN "$name" --out "$dir" "${common[@]}" --set optim.warmup_steps="$warmup" \
        --set optim.decay_steps=$decay --set optim.max_steps="$steps" \
        "${extra[@]}" -q > "$OUT/$tag.log" 2>&1
    cp "$dir/train_log.csv" "$OUT/${tag}_train_log.csv"
    for png in "$dir"/*.png; do [[ -f $png ]] && cp "$png" "$OUT/${tag}_${png##*/}"; done
    return 0
}

end=$(( BUDGET - 40 ))
rig_sets=(--set data.max_pairs="$RIG_PAIRS" --set data.reverse_fraction="$RIG_REVERSE"
          --set model.g2g_overrides.feature_norm_patches=$(( (SIZE / 16) ** 2 )))
reloc_init=() rig_init=()
# init_from needs the checkpoint's configuration: the shipped mnv2 models keep
# feature_norm_patches at 0, as reloc_mnv2 does.
[[ -n $INIT_RELOC ]] && reloc_init=(--set "model.init_from=$INIT_RELOC" --set optim.lr=1.5e-4)
[[ -n $INIT_RIG ]] && rig_init=(--set "model.init_from=$INIT_RIG" --set optim.lr=1.5e-4
                                --set model.g2g_overrides.feature_norm_patches=0)
if [[ -n $HEDGE ]]; then
    train rig_odom_mnv2 "$WORK/rig_hedge" "$end" --set "model.backbone_weights=$HEDGE" \
        --set "cache.dir=$WORK/cache_rig_hedge" "${rig_sets[@]}" &
fi
if [[ -n $BACKBONE ]]; then
    stamp "stage 1 skipped: backbone $BACKBONE"
    weights=(--set "model.backbone_weights=$BACKBONE")
else
    train compact_mnv2_pretrain "$WORK/stage1" $(( $(elapsed) + (end - $(elapsed)) / 2 ))
    cp "$WORK/stage1/backbone.safetensors" "$OUT/compact_${NAME}_backbone.safetensors"
    weights=(--set "model.backbone_weights=$WORK/stage1/backbone.safetensors")
fi
train reloc_mnv2 "$WORK/reloc" "$end" "${weights[@]}" --set "cache.dir=$WORK/cache_reloc" \
    "${reloc_init[@]}" &
train rig_odom_mnv2 "$WORK/rig" "$end" "${weights[@]}" --set "cache.dir=$WORK/cache_rig" \
    "${rig_sets[@]}" "${rig_init[@]}" --set "data.root=$RIG_ROOT" &
wait
cp "$WORK/reloc/model.safetensors" "$OUT/g2g_reloc_$NAME.safetensors"
cp "$WORK/rig/model.safetensors" "$OUT/g2g_rig_$NAME.safetensors"
if [[ -n $HEDGE ]] && ! cp "$WORK/rig_hedge/model.safetensors" "$OUT/g2g_rig_${NAME}_hedge.safetensors"
then
    stamp "the run on HEDGE_BACKBONE failed (rig_hedge.log)"; HEDGE=
fi

stamp "evaluating on the held-out test scenes"
# The evaluations are independent: they run side by side (one thread each on a CPU), and any
# that fails fails the recipe, naming its log.
evaluate() {  # evaluate TAG ARGS...: eval_cli into OUT/TAG, logged to OUT/TAG.log
    local tag=$1; shift
    $PY -m g2g_model.training.eval_cli "$@" --device "$DEVICE" --out "$OUT/$tag" -q \
        > "$OUT/$tag.log" 2>&1 || { stamp "evaluation $tag failed ($OUT/$tag.log)"; return 1; }
}
evals=()
evaluate eval_reloc --task reloc --root "$WORK/sim_test" --index pairs_w5.json \
    --checkpoint "$OUT/g2g_reloc_$NAME.safetensors" --identity --ablation --max-pairs 100 &
evals+=($!)
evaluate eval_rig --task rig --root "$WORK/sim_test" --index rig_odom_pairs.csv \
    --checkpoint "$OUT/g2g_rig_$NAME.safetensors" --identity --max-pairs 100 &
evals+=($!)
evaluate eval_rig_backwards --task rig --root "$WORK/sim_test" --index rig_odom_pairs.csv \
    --checkpoint "$OUT/g2g_rig_$NAME.safetensors" --reverse-fraction 1 --max-pairs 100 &
evals+=($!)
if [[ -n $HEDGE ]]; then
    evaluate eval_rig_hedge --task rig --root "$WORK/sim_test" --index rig_odom_pairs.csv \
        --checkpoint "$OUT/g2g_rig_${NAME}_hedge.safetensors" --max-pairs 100 &
    evals+=($!)
fi
failed=0
for pid in "${evals[@]}"; do wait "$pid" || failed=1; done
(( failed == 0 )) || exit 1
stamp "done; results in $OUT"

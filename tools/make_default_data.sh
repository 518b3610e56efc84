#!/usr/bin/env bash
# Simulator data of the embedded default model (docs/TRAINING.md). Resumable: re-running skips
# every finished trajectory / matrix. Run from the repository root.
# Overlap labels are computed for the first LABEL_SCENES training scenes only, same camera,
# depth subsampled to 28 x 28 (the full all-camera labelling takes hours on 2 CPU cores); the
# backbone pretraining uses all scenes, the relocalization pairs come from the labelled ones.
set -euo pipefail
PY=${PY:-python}
DATA=${DATA:-data}
LABEL_SCENES=${LABEL_SCENES:-10}
SIM="$PY -m g2g_model.data.sim.cli"
G2GDATA="$PY -m g2g_model.data.cli"
COMMON="--scene-preset small --rig-preset ring4 --frames 100"
$SIM --out "$DATA/sim_train" --split train --num-scenes 24 --traversals 3 $COMMON
$SIM --out "$DATA/sim_test" --split test --num-scenes 4 --traversals 2 $COMMON
$SIM --out "$DATA/sim_val" --split val --num-scenes 2 --traversals 2 $COMMON
# 48 more training-split scenes (seeds 24-71) for the image models of the covisibility front-end
# (tools/train_covis_pair_verifier.sh); nothing else uses them.
$SIM --out "$DATA/sim_train_more" --split train --offset 24 --num-scenes 48 --traversals 3 $COMMON
for split in train test; do
  root="$DATA/sim_$split"
  $G2GDATA rig-pairs "$root" --max-distance 1.0 --min-frame-gap 1 --max-pairs 400
  # Odometry pairs: the same traversal, keyframes 1-3 frames apart (what rig_odometry sees).
  $G2GDATA rig-pairs "$root" --max-distance 3 --max-frame-gap 3 --max-pairs 400 \
    --out "$root/rig_odom_pairs.csv"
  n=0
  for scene in "$root"/scene_*; do
    if [ "$split" = train ] && [ "$n" -ge "$LABEL_SCENES" ]; then break; fi
    $G2GDATA overlap "$scene" --cam-pairs same --size 28
    n=$((n + 1))
  done
  $G2GDATA mine "$root" --window 5 --top-k 10 --min-score 0.1
done
# The compact_mnv2 chain (tools/train_mnv2_cpu.sh): every scene of both training splits
# labelled and mined (pairs_w5_all.json: the relocalization default trains on the window pairs
# of all 72 scenes), rig-odometry pairs 0-3 frames apart (a quarter are standstills), merged
# into one root of 72 scenes (data/sim_train72).
label_all() {  # label_all ROOT: every scene labelled, the window pairs of all mined
  for scene in "$1"/scene_*; do
    $G2GDATA overlap "$scene" --cam-pairs same --size 28
  done
  $G2GDATA mine "$1" --window 5 --top-k 10 --min-score 0.1 --out "$1/pairs_w5_all.json"
}
for split in train train_more; do
  label_all "$DATA/sim_$split"
  $G2GDATA rig-pairs "$DATA/sim_$split" --max-distance 3 --min-frame-gap 0 --max-frame-gap 3 \
    --max-pairs 500 --out "$DATA/sim_$split/rig_odom_pairs0.csv"
done
rm -rf "$DATA/sim_train72"
$G2GDATA merge "$DATA/sim_train" "$DATA/sim_train_more" --out "$DATA/sim_train72" \
  --index rig_odom_pairs0.csv --index pairs_w5_all.json
# 24 five-camera (ring5) training scenes, seeds 72-95: with the 72 four-camera ones they are the
# rig-odometry default's training set (rig_odom_mnv2_mixed, data/sim_train96).
$SIM --out "$DATA/sim_train_ring5" --split train --offset 72 --num-scenes 24 --traversals 3 \
  --scene-preset small --rig-preset ring5 --frames 100
$G2GDATA rig-pairs "$DATA/sim_train_ring5" --max-distance 3 --min-frame-gap 0 \
  --max-frame-gap 3 --max-pairs 500 --out "$DATA/sim_train_ring5/rig_odom_pairs0.csv"
rm -rf "$DATA/sim_train96"
$G2GDATA merge "$DATA/sim_train72" "$DATA/sim_train_ring5" --out "$DATA/sim_train96" \
  --index rig_odom_pairs0.csv
# The same keyframe pairs with every standstill written three times (half the rows): the last
# stretch of the rig-odometry default (rig_odom_mnv2_sym3). Same rows as rig_odom_pairs0.csv.
$G2GDATA rig-pairs "$DATA/sim_train96" --max-distance 3 --min-frame-gap 0 --max-frame-gap 3 \
  --max-pairs 500 --standstill-repeat 3 --out "$DATA/sim_train96/rig_odom_pairs0_still3.csv"
# 72 more four-camera training scenes (seeds 96-167); with every scene above, labelled and mined,
# they are the relocalization default's training set (reloc_mnv2_168: the window pairs of 168
# scenes, data/sim_train168/pairs_w5_all.json, 20,880 pairs).
$SIM --out "$DATA/sim_train_x72" --split train --offset 96 --num-scenes 72 --traversals 3 $COMMON
label_all "$DATA/sim_train_ring5"
label_all "$DATA/sim_train_x72"
rm -rf "$DATA/sim_train168"
$G2GDATA merge "$DATA/sim_train" "$DATA/sim_train_more" "$DATA/sim_train_ring5" \
  "$DATA/sim_train_x72" --out "$DATA/sim_train168" --index pairs_w5_all.json

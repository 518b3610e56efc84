#!/usr/bin/env bash
# Simulator data towards real images (docs/TRAINING.md, "Real-world data"): real speeds (standing
# still to 3 m per frame), real rig layouts with varied cameras (car, stereo, Ladybug-like,
# ZJH-like; aspect ratios, fields of view, principal points per scene), photographs as surface
# textures, random lighting and per-camera exposure, indoors and in street / courtyard scenes.
# Resumable like tools/make_default_data.sh (re-running skips every finished trajectory and
# matrix); every scene seed is fixed, so the set is the same on every machine. Run from the
# repository root, after tools/make_default_data.sh when MIX_DEFAULT=1 (the default): the
# training root data/sim_rw_all then holds the default data's 168 scenes as well.
#
#   SCENES    scenes per group (7 groups; 12: 84 scenes)      FRAMES  frames per traversal (100)
#   SIZE      image side, ~sqrt(w*h) when not square (224)   TEST_SCENES  held-out scenes (4)
#
# Measured on the 2-core development machine (2026-11-29, shared): 45-70 camera-frames/s
# rendered and written at 224 px, so one group of 12 scenes takes 5-8 min, all of them with
# labels about 1.5 h.
set -euo pipefail
PY=${PY:-python}
DATA=${DATA:-data}
SCENES=${SCENES:-12}
FRAMES=${FRAMES:-100}
SIZE=${SIZE:-224}
TEST_SCENES=${TEST_SCENES:-4}
MIX_DEFAULT=${MIX_DEFAULT:-1}
SIM="$PY -m g2g_model.data.sim.cli"
G2GDATA="$PY -m g2g_model.data.cli"
LOOKS="--textures photo --lighting random --exposure jitter"

label() {  # label ROOT: overlap of every scene, window pairs, keyframe pairs 0-3 frames apart
  for scene in "$1"/scene_*; do
    $G2GDATA overlap "$scene" --cam-pairs same --size 28
  done
  $G2GDATA mine "$1" --window 5 --top-k 10 --min-score 0.1 --out "$1/pairs_w5_all.json"
  $G2GDATA rig-pairs "$1" --max-distance 3 --min-frame-gap 0 --max-frame-gap 3 \
    --max-pairs 500 --out "$1/rig_odom_pairs0.csv"
}

# group          scene      rig       motion   (training seeds from 200 on: the default data
#                                               uses 0-167)
GROUPS_TABLE="
rw_ring4       small      ring4     stop_go
rw_zjh4        small      zjh4      stop_go
rw_ladybug6    default    ladybug6  stop_go
rw_stereo      default    stereo    stop_go
rw_hall_car5   hall       car5      car
rw_street_car6 street     car6      car
rw_court_car3  courtyard  car3      car
"
roots=()
i=0
while read -r name scene rig motion; do
  [ -z "$name" ] && continue
  root="$DATA/sim_$name"
  $SIM --out "$root" --split train --offset $((200 + i * SCENES)) --num-scenes "$SCENES" \
    --traversals 3 --frames "$FRAMES" --image-size "$SIZE" --scene-preset "$scene" \
    --rig-preset "$rig" --motion "$motion" $LOOKS
  label "$root"
  roots+=("$root")
  i=$((i + 1))
done <<< "$GROUPS_TABLE"

rm -rf "$DATA/sim_rw_train"
$G2GDATA merge "${roots[@]}" --out "$DATA/sim_rw_train" --index pairs_w5_all.json \
  --index rig_odom_pairs0.csv
if [ "$MIX_DEFAULT" = 1 ]; then
  # The default data (tools/make_default_data.sh) plus the new groups: what a retrain reads.
  for root in sim_train sim_train_more sim_train_ring5 sim_train_x72; do
    if [ ! -d "$DATA/$root" ]; then
      echo "error: $DATA/$root missing: run tools/make_default_data.sh first or set" \
        "MIX_DEFAULT=0" >&2
      exit 1
    fi
    if [ ! -f "$DATA/$root/rig_odom_pairs0.csv" ]; then
      $G2GDATA rig-pairs "$DATA/$root" --max-distance 3 --min-frame-gap 0 --max-frame-gap 3 \
        --max-pairs 500 --out "$DATA/$root/rig_odom_pairs0.csv"
    fi
  done
  rm -rf "$DATA/sim_rw_all"
  $G2GDATA merge "$DATA/sim_train" "$DATA/sim_train_more" "$DATA/sim_train_ring5" \
    "$DATA/sim_train_x72" "${roots[@]}" --out "$DATA/sim_rw_all" \
    --index pairs_w5_all.json --index rig_odom_pairs0.csv
fi

# Held out (test split): car rigs at car speed in a street and a hall, and a Ladybug-like ring
# indoors; keyframe pairs 1-3 m apart for the car-scale goal, window pairs for relocalization.
for spec in "street car6 car 0" "hall car5 car $TEST_SCENES" \
    "default ladybug6 stop_go $((2 * TEST_SCENES))"; do
  read -r scene rig motion offset <<< "$spec"
  root="$DATA/sim_rw_test_${scene}_$rig"
  $SIM --out "$root" --split test --offset $((100 + offset)) --num-scenes "$TEST_SCENES" \
    --traversals 2 --frames "$FRAMES" --image-size "$SIZE" --scene-preset "$scene" \
    --rig-preset "$rig" --motion "$motion" $LOOKS
  label "$root"
  $G2GDATA rig-pairs "$root" --min-distance 1 --max-distance 3 --min-frame-gap 1 \
    --max-frame-gap 3 --max-pairs 400 --out "$root/rig_car_steps.csv"
done

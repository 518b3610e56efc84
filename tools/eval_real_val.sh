#!/usr/bin/env bash
# Evaluate relocalization checkpoints on the REAL validation set (docs/TRAINING.md, "Real images
# (validation set)"): every window pair of data/real_val/pairs_w3.json and pairs_w5.json, with the
# "no motion" reference, the classical baseline, each checkpoint with G2G's own pose where the
# pipeline would match it (+no_rotation_matching) and (VERIFY=1, the default) G2G + geometric
# verification and the verification alone. Build the set first with tools/make_real_val.py.
#
#   tools/eval_real_val.sh                              # the shipped g2g_reloc_mnv2
#   tools/eval_real_val.sh outputs/new/model.safetensors [more checkpoints ...]
#
# Environment: PY (python, default .venv/bin/python), ROOT (default data/real_val),
# OUT (default outputs/eval_real_val; tables in $OUT/w3/comparison.md, $OUT/w5/comparison.md),
# VERIFY (1 / 0), WINDOWS (default "3 5"), RELATIVE_FALLBACK (1: where the map window's
# structure gives no pose, verification also tries the query's anchor frame's 2D-3D and 2D-2D
# matches, then the relative pose between the windows; default 0), MAX_PAIRS (a seeded subset
# of each index, default 0: all). The cabinet set: ROOT=data/real_val_cabinet (built by
# tools/make_real_val.py --cubeslam-repo CLONE).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ROOT=${ROOT:-data/real_val}
OUT=${OUT:-outputs/eval_real_val}
VERIFY=${VERIFY:-1}
RELATIVE_FALLBACK=${RELATIVE_FALLBACK:-0}
WINDOWS=${WINDOWS:-3 5}
MAX_PAIRS=${MAX_PAIRS:-0}
for w in $WINDOWS; do
  if [ ! -f "$ROOT/pairs_w$w.json" ]; then
    echo "eval_real_val: no $ROOT/pairs_w$w.json; build the set first:" >&2
    echo "  $PY tools/make_real_val.py --superglue-repo CLONE --edgeicp-repo CLONE" >&2
    exit 2
  fi
done
ckpts=("$@")
if [ ${#ckpts[@]} -eq 0 ]; then ckpts=(g2g_model/assets/g2g_reloc_mnv2.safetensors); fi
args=()
for c in "${ckpts[@]}"; do args+=(--checkpoint "$c"); done
extra=()
if [ "$VERIFY" = 1 ]; then extra+=(--verify); fi
if [ "$RELATIVE_FALLBACK" = 1 ]; then extra+=(--relative-fallback); fi
for w in $WINDOWS; do
  nice -n 5 "$PY" -m g2g_model.training.eval_cli --task reloc --root "$ROOT" \
    --index "pairs_w$w.json" "${args[@]}" --identity --classical --no-rotation-matching \
    --max-pairs "$MAX_PAIRS" "${extra[@]}" -q \
    --out "$OUT/w$w"
done

#!/usr/bin/env bash
# Evaluate the embedded default models on the held-out test scenes (seeds 20000-20003) against
# the classical baseline and the no-cross-group-attention switch, on the same pairs.
# Results: outputs/eval_*/comparison.md (tables quoted in docs/TRAINING.md); the *_verify stages
# add geometric verification (verification.md, quoted in docs/VERIFICATION.md).
set -euo pipefail
PY=${PY:-python}
EVAL="$PY -m g2g_model.training.eval_cli"
RELOC=${RELOC:-g2g_model/assets/g2g_reloc_mnv2.safetensors}
RIG=${RIG:-g2g_model/assets/g2g_rig_mnv2.safetensors}
N=${N:-100}
N_EXTRA=${N_EXTRA:-60}
STAGES=${STAGES:-"reloc_clean rig_odom_clean rig_clean reloc_noisy reloc_verify rig_odom_verify"}
for stage in $STAGES; do
  case $stage in
    reloc_clean) $EVAL --task reloc --root data/sim_test --index pairs_w5.json \
      --checkpoint "$RELOC" --classical --ablation --identity --max-pairs "$N" \
      --out outputs/eval_reloc_clean -q ;;
    reloc_noisy) $EVAL --task reloc --root data/sim_test --index pairs_w5.json \
      --checkpoint "$RELOC" --classical --ablation --identity --max-pairs "$N_EXTRA" --mode noisy \
      --out outputs/eval_reloc_noisy -q ;;
    rig_odom_clean) $EVAL --task rig --root data/sim_test --index rig_odom_pairs.csv \
      --checkpoint "$RIG" --classical --ablation --identity --max-pairs "$N" \
      --out outputs/eval_rig_odom_clean -q ;;
    rig_clean) $EVAL --task rig --root data/sim_test --index rig_pairs.csv \
      --checkpoint "$RIG" --classical --ablation --identity --max-pairs "$N_EXTRA" \
      --out outputs/eval_rig_clean -q ;;
    reloc_verify) $EVAL --task reloc --root data/sim_test --index pairs_w5.json \
      --checkpoint "$RELOC" --classical --identity --verify --max-pairs "$N" \
      --out outputs/eval_reloc_verify -q ;;
    rig_odom_verify) $EVAL --task rig --root data/sim_test --index rig_odom_pairs.csv \
      --checkpoint "$RIG" --classical --identity --verify --max-pairs "$N" \
      --out outputs/eval_rig_odom_verify -q ;;
  esac
done

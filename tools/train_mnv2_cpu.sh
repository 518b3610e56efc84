#!/usr/bin/env bash
# The long, resumable CPU run of the compact_mnv2 default models (docs/TRAINING.md, "Encoders"):
# stage 1 (compact_mnv2_pretrain, STAGE1_STEPS of its 3,000-step schedule, 700 for the shipped
# defaults); relocalization on the 24 labelled sim_train scenes (reloc_mnv2), rig odometry
# started from it (rig_odom_mnv2_ft), then fine-tuned on 4- and 5-camera rigs
# (rig_odom_mnv2_mixed), then on both orders of the pairs (rig_odom_mnv2_sym, _sym2) and with
# standstills weighted (rig_odom_mnv2_sym3: the shipped g2g_rig_mnv2, run both ways);
# relocalization on the window pairs of 168 scenes (reloc_mnv2_168: the shipped
# g2g_reloc_mnv2; reloc_mnv2_72, the previous default on 72 scenes, is no longer a stage).
# Stop it at any time (Ctrl-C, kill, a closed terminal); re-running the same command continues
# every stage from its state.pt, and a finished stage is skipped if it was trained on today's
# stage-1 backbone (a longer STAGE1_STEPS re-exports that file; a later stage trained on the
# old one is then refused with a message, here and by g2g-train on resume). Each stretch
# appends one line per stage to outputs/mnv2_stretches.log: when it ran and from which step to
# which step it got. Data:
# tools/make_default_data.sh. Run from the repository root, in the background on a shared
# machine:
#
#   nohup nice -n 19 tools/train_mnv2_cpu.sh > outputs/mnv2_cpu.out 2>&1 &
#
# The covisibility models read the same encoder's tokens: tools/train_covis_default.sh and
# tools/train_covis_embedding.sh with PIPELINE=g2g_model/assets/g2g_reloc_mnv2.safetensors
# (docs/COVISIBILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
LOG=outputs/mnv2_stretches.log
mkdir -p outputs

last_step() {  # last logged step of a run directory (0 if none)
    local csv=$1/train_log.csv
    [[ -f "$csv" ]] && tail -n 1 "$csv" | cut -d, -f1 | grep -E '^[0-9]+$' || echo 0
}

stopped() {  # stopped PRESET OUT_DIR: the stretch line of a stage that did not finish
    echo "$(date -u +%FT%TZ) $1: stopped, logged up to step $(last_step "$2")" \
        "(resumes from its last checkpoint)" >> "$LOG"
}

BACKBONE=outputs/compact_mnv2_pretrain/backbone.safetensors

stage() {  # stage PRESET OUT_DIR EXPORT_FILE STEPS [--set ...] (STEPS: the stage's last step,
    # empty for the preset's own); stages after the first start from $BACKBONE
    local preset=$1 dir=$2 export_file=$3 steps=$4; shift 4
    if [[ -f "$dir/$export_file" && -f "$dir/summary.json" ]] \
        && grep -q '"interrupted": false' "$dir/summary.json" \
        && [[ -z "$steps" || $(last_step "$dir") -ge $steps ]]; then
        # A finished stage is kept only if it was trained on today's stage-1 backbone (its
        # sha256 is in the summary); an unfinished one is checked by g2g-train on resume.
        if [[ $preset != compact_mnv2_pretrain ]] \
            && ! grep -q "$(sha256sum "$BACKBONE" | cut -c1-64)" "$dir/summary.json"; then
            echo "error: $dir was trained on another stage-1 backbone than $BACKBONE (or" \
                "before backbones were recorded): move $dir away to retrain it" >&2
            exit 1
        fi
        echo "$(date -u +%FT%TZ) $preset: finished earlier, skipped" >> "$LOG"
        return
    fi
    local from
    from=$(last_step "$dir")
    echo "$(date -u +%FT%TZ) $preset: stretch starts after step $from" >> "$LOG"
    # Values expanded now: the trap runs after this function's locals are gone.
    trap "stopped $preset $dir" EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    $PY -m g2g_model.training.cli "$preset" -q --threads "${THREADS:-2}" "$@"
    trap - EXIT
    echo "$(date -u +%FT%TZ) $preset: finished at step $(last_step "$dir")" >> "$LOG"
}

stage compact_mnv2_pretrain outputs/compact_mnv2_pretrain backbone.safetensors \
    "${STAGE1_STEPS:-700}" --set optim.max_steps="${STAGE1_STEPS:-700}"
stage reloc_mnv2 outputs/reloc_mnv2 model.safetensors "" --set data.index=pairs_w5_all.json
stage rig_odom_mnv2_ft outputs/rig_odom_mnv2_ft model.safetensors ""
stage rig_odom_mnv2_mixed outputs/rig_odom_mnv2_mixed model.safetensors ""
stage rig_odom_mnv2_sym outputs/rig_odom_mnv2_sym model.safetensors ""
stage rig_odom_mnv2_sym2 outputs/rig_odom_mnv2_sym2 model.safetensors ""
stage rig_odom_mnv2_sym3 outputs/rig_odom_mnv2_sym3 model.safetensors ""
stage reloc_mnv2_168 outputs/reloc_mnv2_168 model.safetensors ""
install -m 644 outputs/rig_odom_mnv2_sym3/model.safetensors \
    g2g_model/assets/g2g_rig_mnv2.safetensors
install -m 644 outputs/reloc_mnv2_168/model.safetensors \
    g2g_model/assets/g2g_reloc_mnv2.safetensors
echo "defaults written to g2g_model/assets/g2g_rig_mnv2.safetensors and g2g_reloc_mnv2.safetensors"

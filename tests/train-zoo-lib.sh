# SPDX-License-Identifier: MIT
# shellcheck shell=sh
# tests/train-zoo-lib.sh - sourced by tests/train-zoo*.sh: a few training
# steps of a zoo model on the embedded Fashion-MNIST subset, resized so the
# model takes it. Sets $tmp (removed on exit).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

[ -x "$TANDEM" ] || skip_all "tandem is not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-train-zoo-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"

# train_smoke MODEL SIZE: 3 steps of batch 2 at SIZE x SIZE pixels; the run
# succeeds, its summary names the model and the images, and every step
# logged a finite loss.
train_smoke() {
    model=$1 size=$2
    if "$TANDEM" train --model "$model" --limit 6 --batch-size 2 --transforms "resize $size" \
            --no-eval --lr 0.01 --quiet --log-file "$tmp/$model.json" \
            >"$tmp/$model.out" 2>"$tmp/$model.err"; then
        ok "$model trains 3 steps at $size px"
    else
        fail "$model trains 3 steps at $size px" "$(cat "$tmp/$model.err")"
        return
    fi
    case $(grep '^summary: ' "$tmp/$model.out") in
    "summary: model $model, 1 epoch, 6 images,"*) ok "$model: summary line" ;;
    *) fail "$model: summary line" "$(cat "$tmp/$model.out")" ;;
    esac
    losses=$(sed -n 's/^{"event":"step",.*"loss":\([^,]*\),.*/\1/p' "$tmp/$model.json")
    if [ "$(printf '%s\n' "$losses" | grep -cE '^[0-9]+\.[0-9]+(e[-+]?[0-9]+)?$')" -eq 3 ]; then
        ok "$model: 3 finite losses: $(printf '%s\n' "$losses" | tr '\n' ' ')"
    else
        fail "$model: 3 finite losses" "$(cat "$tmp/$model.json")"
    fi
}

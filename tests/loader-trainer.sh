#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/loader-trainer.sh - the trainer's data-wait reporting: every step's
# JSON log line carries data_wait_s and every epoch line data_wait_frac; when
# the loader cannot keep up (made slow here with the test hook
# TDM_LOADER_JITTER_US, which sleeps up to that many microseconds after each
# batch; a build without the hooks, configure --enable-test-hooks, skips
# these checks) `tandem train` warns once per epoch and suggests more
# workers; with workers that keep up there is no warning, and the same seed
# gives the same loss curve with 0 and 2 workers. A test split whose images
# are of another size than the training split's is evaluated resized to the
# training size and normalised like it, and `tandem eval` evaluates as the
# training did.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-loader-trainer-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
common="--model mlp --dataset fashion-mnist --limit 640 --batch-size 32 --device ref --no-eval -q"

# --- a slow loader: warned once per epoch -----------------------------------
if have_test_hooks; then
    if TDM_LOADER_JITTER_US=80000 "$TANDEM" train $common --epochs 2 --workers 0 \
            --log-file "$tmp/slow.json" >"$tmp/out" 2>"$tmp/err"; then
        ok "train with a slow loader"
    else
        fail "train with a slow loader" "$(cat "$tmp/err")"
    fi
    n=$(grep -c '^warning: waited for data [0-9]*% of the step time; try --workers 1$' "$tmp/err")
    if [ "$n" -eq 2 ]; then
        ok "one data-wait warning per epoch"
    else
        fail "one data-wait warning per epoch" "$n warnings: $(cat "$tmp/err")"
    fi
    steps=$(grep -c '^{"event":"step",.*"data_wait_s":[0-9.eE+-]*,' "$tmp/slow.json")
    if [ "$steps" -eq 40 ]; then
        ok "data_wait_s on every step line"
    else
        fail "data_wait_s on every step line" "$steps of 40: $(head -3 "$tmp/slow.json")"
    fi
    frac=$(sed -n 's/^{"event":"epoch",.*"data_wait_frac":\([0-9.eE+-]*\).*/\1/p' "$tmp/slow.json" | head -1)
    if [ -n "$frac" ] && awk -v f="$frac" 'BEGIN { exit !(f > 0.10 && f <= 1.0) }'; then
        ok "epoch data_wait_frac $frac > 0.10"
    else
        fail "epoch data_wait_frac > 0.10" "$(grep '"epoch"' "$tmp/slow.json")"
    fi
else
    for name in "train with a slow loader" "one data-wait warning per epoch" \
            "data_wait_s on every step line" "epoch data_wait_frac > 0.10"; do
        skip "$name" "$TEST_HOOKS_WHY"
    done
fi

# --- workers that keep up: same numbers, no warning ----------------------------
for w in 0 2; do
    if "$TANDEM" train $common --workers $w --log-file "$tmp/w$w.json" >"$tmp/out$w" \
            2>"$tmp/err$w"; then
        ok "train with $w workers"
    else
        fail "train with $w workers" "$(cat "$tmp/err$w")"
    fi
    sed -n 's/.*"step":\([0-9]*\),.*"loss":\([0-9.e+-]*\),.*/\1 \2/p' "$tmp/w$w.json" \
        >"$tmp/loss$w"
done
if [ -s "$tmp/loss0" ] && cmp -s "$tmp/loss0" "$tmp/loss2"; then
    ok "same loss curve with 0 and 2 workers"
else
    fail "same loss curve with 0 and 2 workers" "$(paste "$tmp/loss0" "$tmp/loss2" | head)"
fi
if grep -q 'waited for data' "$tmp/err2"; then
    fail "no data-wait warning with 2 workers" "$(cat "$tmp/err2")"
else
    ok "no data-wait warning with 2 workers"
fi
# --- a test split of another image size ---------------------------------------
# The embedded test images averaged down to 14x14: without a training
# pipeline the evaluation resizes them back to 28x28 and normalises them with
# the training split's constants (unnormalised they score about 0.15 lower).
mkdir "$tmp/small"
cp "$TDM_TOP_SRCDIR/data/fashion-mnist/train-"* "$TDM_TOP_SRCDIR/data/fashion-mnist/t10k-labels"* \
    "$tmp/small/"
${TORCH_PYTHON:-python3} - "$TDM_TOP_SRCDIR/data/fashion-mnist/t10k-images-idx3-ubyte.gz" \
    "$tmp/small/t10k-images-idx3-ubyte" <<'PY'
import gzip, struct, sys
raw = gzip.open(sys.argv[1]).read()
n = struct.unpack(">I", raw[4:8])[0]
out = bytearray(b"\0\0\x08\x03" + struct.pack(">III", n, 14, 14))
for i in range(n):
    img = raw[16 + i * 784: 16 + (i + 1) * 784]
    for y in range(14):
        for x in range(14):
            p = 56 * y + 2 * x
            out.append((img[p] + img[p + 1] + img[p + 28] + img[p + 29] + 2) // 4)
open(sys.argv[2], "wb").write(out)
PY
small="--model mlp --limit 2000 --batch-size 32 --device ref"
if "$TANDEM" train $small -q --dataset "idx:$tmp/small" --save "$tmp/small.safetensors" \
        >"$tmp/out" 2>"$tmp/err"; then
    acc=$(sed -n 's/^summary:.*test accuracy \([0-9.]*\).*/\1/p' "$tmp/out")
    if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.6) }'; then
        ok "14x14 test images evaluated at 28x28 (accuracy $acc)"
    else
        fail "14x14 test images evaluated at 28x28" "accuracy '$acc' < 0.6: $(cat "$tmp/out")"
    fi
else
    fail "14x14 test images evaluated at 28x28" "$(cat "$tmp/err")"
fi

# `tandem eval` evaluates as the training's own evaluation did: the same
# accuracy and loss, here for the resized test split above and for a
# pipeline whose normalize takes the dataset's constants.
# same_eval NAME DATASET TRANSFORMS: train and save, then eval the weights
# with the same --dataset and --transforms.
same_eval() {
    if ! "$TANDEM" train $small -q --dataset "$2" --transforms "$3" \
            --save "$tmp/e.safetensors" >"$tmp/out" 2>"$tmp/err"; then
        fail "$1" "train: $(cat "$tmp/err")"
        return
    fi
    want=$(sed -n 's/^summary:.*\(test accuracy [0-9.]* (loss [0-9.]*)\).*/\1/p' "$tmp/out")
    got=$("$TANDEM" eval --model mlp --device ref --init "$tmp/e.safetensors" --dataset "$2" \
        --transforms "$3" 2>&1)
    case $got in
        *"$want"*) [ -n "$want" ] && ok "$1: $want" || fail "$1" "no summary: $(cat "$tmp/out")" ;;
        *) fail "$1" "train: $want; eval: $got" ;;
    esac
}
same_eval "eval of 14x14 test images as in training" "idx:$tmp/small" ""
same_eval "eval with an argument-less normalize as in training" fashion-mnist \
    "random-crop 28 pad=2 | normalize"
done_testing

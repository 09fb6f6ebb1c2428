#!/bin/sh
# tests/loader-trainer.sh - the trainer's data-wait reporting: every step's
# JSON log line carries data_wait_s and every epoch line data_wait_frac; when
# the loader cannot keep up (made slow here with the test-only
# TDM_LOADER_JITTER_US knob, which sleeps up to that many microseconds after
# each batch) `tandem train` warns once per epoch and suggests more workers;
# with workers that keep up there is no warning, and the same seed gives
# the same loss curve with 0 and 2 workers.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-loader-trainer-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
common="--model mlp --dataset fashion-mnist --limit 640 --batch-size 32 --device ref --no-eval -q"

# --- a slow loader: warned once per epoch -----------------------------------
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
steps=$(grep -c '^{"event":"step",.*"data_wait_s":[0-9.]*,' "$tmp/slow.json")
if [ "$steps" -eq 40 ]; then
    ok "data_wait_s on every step line"
else
    fail "data_wait_s on every step line" "$steps of 40: $(head -3 "$tmp/slow.json")"
fi
frac=$(sed -n 's/^{"event":"epoch",.*"data_wait_frac":\([0-9.]*\).*/\1/p' "$tmp/slow.json" | head -1)
if [ -n "$frac" ] && awk -v f="$frac" 'BEGIN { exit !(f > 0.10 && f <= 1.0) }'; then
    ok "epoch data_wait_frac $frac > 0.10"
else
    fail "epoch data_wait_frac > 0.10" "$(grep '"epoch"' "$tmp/slow.json")"
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
done_testing

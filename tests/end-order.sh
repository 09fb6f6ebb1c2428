# SPDX-License-Identifier: MIT
# tests/end-order.sh - the strategy's end of training comes before the final
# evaluation: a strategy that changes the weights there (an EMA or SWA
# swapping its average in; here tests/fixtures/end-swap.c zeroes them) has
# the final accuracy reported for the weights --save writes, while the
# epochs before are evaluated on the trained ones; after an early stop the
# trainer evaluates again. Prints TAP.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-end-order-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"

build_fixture_plugin tests/fixtures/end-swap.c "$tmp/libtdm-end-swap.so" ||
    bail "the end-swap fixture does not build: $(cat "$tmp/libtdm-end-swap.so.log")"
export TDM_PLUGIN_PATH=$tmp

# accuracies FILE: the "eval" events' accuracies, one per line
accuracies() { sed -n 's/.*"event": *"eval".*"accuracy": *\([0-9.]*\).*/\1/p' "$1"; }
# same A B: within the 4 decimals `tandem eval` prints (lt: tap.sh)
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'; }

common="--device ref --threads 1 --limit 2048 --batch-size 64 --quiet --seed 3"
if "$TANDEM" train $common --epochs 2 --strategy end-swap --save "$tmp/w.st" \
        --log-file "$tmp/log.jsonl" >"$tmp/out" 2>&1; then
    first=$(accuracies "$tmp/log.jsonl" | sed -n 1p)
    last=$(accuracies "$tmp/log.jsonl" | sed -n 2p)
    "$TANDEM" eval --device ref --init "$tmp/w.st" >"$tmp/eval.out" 2>&1
    saved=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$tmp/eval.out" | head -n 1)
    if [ -n "$first" ] && [ -n "$last" ] && [ -n "$saved" ] && lt 0.4 "$first" &&
        lt "$last" 0.2 && same "$last" "$saved"; then
        ok "the last epoch is evaluated after the end of training ($first, then $last = the saved weights' $saved)"
    else
        fail "the last epoch is evaluated after the end of training" "epochs: '$first' '$last', saved: '$saved'
$(cat "$tmp/out" "$tmp/eval.out")"
    fi
else
    fail "train with the end-swap strategy" "$(cat "$tmp/out")"
fi

# an early stop (patience 1 and a learning rate of 0: no improvement) ends
# after its evaluation: the trainer evaluates again
if "$TANDEM" train $common --epochs 4 --lr 0 --early-stop-patience 1 --strategy end-swap \
        --log-file "$tmp/stop.jsonl" >"$tmp/out" 2>&1; then
    n=$(accuracies "$tmp/stop.jsonl" | wc -l)
    final=$(accuracies "$tmp/stop.jsonl" | tail -n 1)
    summary=$(sed -n 's/.*"event": *"summary".*"test_accuracy": *\([0-9.]*\).*/\1/p' "$tmp/stop.jsonl")
    if [ "$n" -ge 2 ] && [ "$n" -lt 5 ] && [ "$final" = "$summary" ]; then
        ok "after an early stop the weights are evaluated again ($n evaluations, summary $summary)"
    else
        fail "after an early stop the weights are evaluated again" "$n evaluations, final '$final', summary '$summary'
$(cat "$tmp/out")"
    fi
else
    fail "train with early stopping and end-swap" "$(cat "$tmp/out")"
fi
done_testing

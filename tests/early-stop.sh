#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/early-stop.sh - --early-stop-patience N ends a run whose test
# accuracy has not improved for N evaluations: at learning rate 0 the
# accuracy never changes, so with patience 2 a 10-epoch run stops after
# epoch 3 (the first evaluation sets the mark, two more fail to beat it),
# saying so on stderr and in the JSON log (an early_stop event, no epoch 4),
# and still saves its weights. In a ddp job of 2 ranks only rank 0
# evaluates; the other learns the decision and stops with it, so the job
# ends at once instead of rank 1 waiting for a rank 0 that left (it would
# fail after --timeout). Without evaluation the flag is refused.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
tmp=$work
run="--model mlp --limit 128 --epochs 10 --lr 0 --seed 3 --threads 1 --early-stop-patience 2"

"$TANDEM" train $run -b 64 --log-file "$work/one.jsonl" --save "$work/one.st" \
    >"$work/one.out" 2>"$work/one.err"
status=$?
if [ $status -eq 0 ] && [ -s "$work/one.st" ]; then
    ok "the run ends normally and saves its weights"
else
    fail "the run ends normally and saves its weights" "status $status: $(cat "$work/one.err")"
fi
if grep -q '^early stop after epoch 3/10: the test accuracy has not improved for 2 evaluations (best 0\.[0-9]*, epoch 1)$' \
        "$work/one.err"; then
    ok "stderr says why it stopped"
else
    fail "stderr says why it stopped" "$(cat "$work/one.err")"
fi
if grep -q '"event":"early_stop","epoch":3,"patience":2,"best_accuracy":0\.[0-9]*,"best_epoch":1' \
        "$work/one.jsonl" && [ "$(grep -c '"event":"eval"' "$work/one.jsonl")" -eq 3 ] &&
   ! grep -q '"event":"epoch","epoch":4' "$work/one.jsonl"; then
    ok "the log has the early_stop event and three epochs"
else
    fail "the log has the early_stop event and three epochs" "$(cat "$work/one.jsonl")"
fi

# patience larger than the run: all 10 epochs
"$TANDEM" train $run -b 64 --early-stop-patience 20 --quiet >/dev/null 2>"$work/all.err" \
    --log-file "$work/all.jsonl"
if [ "$(grep -c '"event":"eval"' "$work/all.jsonl")" -eq 10 ] && ! grep -q early "$work/all.err"; then
    ok "patience 20: every epoch runs"
else
    fail "patience 20: every epoch runs" "$(cat "$work/all.err")"
fi

expect_error "--no-eval refuses it" "early_stop_patience" "needs the evaluation" -- \
    "$TANDEM" train $run --no-eval

if has_feature collective shm; then
    start=$(now)
    "$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train $run -b 32 --strategy ddp --timeout 30 \
        --log-file "$work/ddp.jsonl" >"$work/ddp.out" 2>&1
    status=$?
    dt=$(elapsed "$start")
    if [ $status -eq 0 ] && grep -q '"event":"early_stop","epoch":3' "$work/ddp.jsonl" &&
       grep -q "early stop after epoch 3/10" "$work/ddp.out"; then
        ok "ddp, 2 ranks: both stop after epoch 3"
    else
        fail "ddp, 2 ranks: both stop after epoch 3" "status $status: $(cat "$work/ddp.out")"
    fi
    ended_within "ddp, 2 ranks: no rank waits for the timeout" 25 "$dt"
else
    skip "ddp, 2 ranks" "no shm collective"
fi
done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/strategies-faults.sh - distributed training fails fast and says who:
# a rank killed with SIGKILL in the middle of ddp training ends the whole
# job within 10 s with a message naming the rank; a rank that skips a
# gradient all-reduce (test hook TDM_TEST_SKIP_COLLECTIVE) is named under
# TDM_DEBUG=collectives instead of hanging (with the default buckets, and
# with --strategy "ddp bucket-mb=0.1", whose buckets the message shows), and
# in a build without the test hooks the variable changes nothing; a
# one-process strategy in a multi-process job is refused.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"
has_feature collective shm || skip_all "the shm collective is not available"

# children PID: the pids whose parent is PID, from /proc
children() {
    for s in /proc/[0-9]*/stat; do
        awk -v p="$1" '$4 == p { print $1 }' "$s" 2>/dev/null
    done
}
# rank_pid LAUNCHER RANK: the worker of RANK (its TDM_RANK) among LAUNCHER's children
rank_pid() {
    for c in $(children "$1"); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "TDM_RANK=$2"; then
            echo "$c"
            return
        fi
    done
}

# ---- kill -9 of rank 1 after a second of training ----
"$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train --model lenet --limit 0 --epochs 5 \
    --no-eval --threads 1 --progress 1 --strategy ddp >"$work/kill.out" 2>"$work/kill.err" &
launcher=$!
launchers="$launcher"
i=0
while ! grep -q "step 1/" "$work/kill.err" 2>/dev/null && [ $i -lt 200 ]; do
    sleep 0.1; i=$((i + 1))
done
sleep 1
victim=$(rank_pid "$launcher" 1)
all="$victim $(rank_pid "$launcher" 0)"
if [ -n "$victim" ] && grep -q "step 1/" "$work/kill.err"; then
    t0=$(now)
    kill -9 "$victim"
    wait $launcher
    rc=$?
    dt=$(elapsed "$t0")
    if [ $rc -ne 0 ]; then ok "killed rank: tandem run exits non-zero ($rc)"; else fail "killed rank: tandem run exits non-zero" "exit 0"; fi
    if grep -qF "rank 1 (pid $victim) was killed by signal SIGKILL" "$work/kill.err"; then
        ok "the message names the rank"
    else
        fail "the message names the rank" "$(tail -3 "$work/kill.err")"
    fi
    ended_within "the job ended within 10 s" 10 "$dt"
    left=
    for p in $all; do
        ps -o stat= -p "$p" 2>/dev/null | grep -q '^[^Z]' && left="$left $p"
    done
    if [ -z "$left" ]; then ok "every training process is gone"; else fail "every training process is gone" "alive:$left"; fi
else
    fail "training started under tandem run" "$(tail -5 "$work/kill.err")"
    kill -9 $launcher 2>/dev/null
    wait $launcher 2>/dev/null
fi

# ---- a rank skips a collective ----
# mlp's gradients make two buckets (fc3, fc2 and fc1.bias, then
# fc1.weight), so the skipped one makes rank 1 issue the second bucket where
# rank 0 issues the first.
# Without the test hooks (configure --enable-test-hooks) the variable must
# change nothing: the same job trains to the end.
if have_test_hooks; then
    t0=$(now)
    TDM_TEST_SKIP_COLLECTIVE=1:3 TDM_DEBUG=collectives \
        "$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train $common --model mlp -b 32 \
        --strategy ddp --timeout 20 >"$work/skip.out" 2>"$work/skip.err"
    rc=$?
    dt=$(elapsed "$t0")
    exits_nonzero "skipped collective: the job fails" $rc
    if grep -q "collective mismatch at #[0-9]*: rank 0 called allreduce(134410 x f32, avg), rank 1 called allreduce(401408 x f32, avg)" "$work/skip.err"; then
        ok "the message names rank 1 and both calls"
    else
        fail "the message names rank 1 and both calls" "$(cat "$work/skip.err")"
    fi
    ended_within "it stopped before the timeout" 20 "$dt"

    # ---- the bucket size from --strategy "ddp bucket-mb=..." ----
    # At 0.1 MiB a bucket holds 26,214 floats: fc3 and fc2.bias (2,826) make the
    # first, fc2.weight (131,072) the second, so the skipped first bucket now
    # shows as those two sizes instead of the default buckets' above.
    TDM_TEST_SKIP_COLLECTIVE=1:3 TDM_DEBUG=collectives \
        "$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train $common --model mlp -b 32 \
        --strategy "ddp bucket-mb=0.1" --timeout 20 >"$work/bucket.out" 2>"$work/bucket.err"
    if grep -q "rank 0 called allreduce(2826 x f32, avg), rank 1 called allreduce(131072 x f32, avg)" "$work/bucket.err"; then
        ok "--strategy \"ddp bucket-mb=0.1\" sets the bucket size"
    else
        fail "--strategy \"ddp bucket-mb=0.1\" sets the bucket size" "$(cat "$work/bucket.err")"
    fi
else
    TDM_TEST_SKIP_COLLECTIVE=1:3 TDM_DEBUG=collectives \
        "$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train $common --model mlp -b 32 \
        --strategy ddp --timeout 20 >"$work/skip.out" 2>"$work/skip.err"
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q "TDM_TEST_SKIP_COLLECTIVE" "$work/skip.err"; then
        ok "without test hooks TDM_TEST_SKIP_COLLECTIVE changes nothing"
    else
        fail "without test hooks TDM_TEST_SKIP_COLLECTIVE changes nothing" \
            "exit $rc: $(cat "$work/skip.err")"
    fi
    for name in "the message names rank 1 and both calls" "it stopped before the timeout" \
            "--strategy \"ddp bucket-mb=0.1\" sets the bucket size"; do
        skip "$name" "$TEST_HOOKS_WHY"
    done
fi

# ---- a one-process strategy in a job of two ----
"$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train $common --model mlp --strategy single \
    >"$work/single.out" 2>"$work/single.err"
if [ $? -ne 0 ] && grep -q "strategy 'single' runs in one process, but this is rank [01] of a job of 2" "$work/single.err"; then
    ok "strategy single under tandem run --nproc-per-node 2 is refused"
else
    fail "strategy single under tandem run --nproc-per-node 2 is refused" "$(cat "$work/single.err")"
fi

done_testing

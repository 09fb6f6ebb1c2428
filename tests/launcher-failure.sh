#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/launcher-failure.sh - a worker that fails ends the whole job
# within 10 s, with a message naming the rank and its status, even when the
# other workers ignore SIGTERM; nothing is left running.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/launcher-lib.sh"

# failing_job NPROC SCRIPT WHAT ENDED: runs SCRIPT as NPROC workers (each
# writes its pid to $W/pid.RANK) and checks that tandem run fails (WHAT),
# that the job ends within 10 s (ENDED) and that no worker is left. The
# message is in $work/err for the caller.
failing_job() {
    rm -f "$work"/pid.*
    t0=$(now)
    "$TANDEM" run --nproc-per-node "$1" -- sh -c "$2" >"$work/out" 2>"$work/err"
    rc=$?
    dt=$(elapsed "$t0")
    exits_nonzero "$3: tandem run fails" $rc
    ended_within "$4 within 10 s" 10 "$dt"
    none_left "no worker process left"
}

failing_job 3 \
    'echo $$ > "$W/pid.$TDM_RANK"; if [ $TDM_RANK = 1 ]; then sleep 0.5; exit 3; fi; while :; do sleep 0.2; done' \
    "exit 3 of a worker" "the job ended"
has "the message names the rank and the status" "tandem run: rank 1 (pid $(cat "$work/pid.1")) exited with status 3" "$work/err"

# workers that ignore SIGTERM get SIGKILL after the grace period
failing_job 2 \
    'trap "" TERM; echo $$ > "$W/pid.$TDM_RANK"; if [ $TDM_RANK = 0 ]; then sleep 0.3; kill -SEGV $$; fi; while :; do sleep 0.2; done' \
    "a worker killed by a signal" "SIGTERM-deaf workers end"
has "the message names the signal" "rank 0 (pid $(cat "$work/pid.0")) was killed by signal SIGSEGV" "$work/err"

# success: every worker exits 0, so does tandem run
"$TANDEM" run --nproc-per-node 2 -- sh -c 'exit 0' >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 0 ]; then ok "all workers succeed: exit 0"; else fail "all workers succeed: exit 0" "exit $rc: $(cat "$work/err")"; fi

done_testing

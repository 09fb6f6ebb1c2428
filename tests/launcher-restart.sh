#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/launcher-restart.sh - `--max-restarts N` restarts every worker after
# a failure, with TDM_RESTART_COUNT counting the attempts, and gives up
# after N restarts.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/launcher-lib.sh"

# rank 1 fails in the first attempt only (once rank 0 is surely running)
"$TANDEM" run --nproc-per-node 2 --max-restarts 1 -- sh -c \
    'touch "$W/start.$TDM_RANK.$TDM_RESTART_COUNT"
     if [ $TDM_RANK = 1 ] && [ $TDM_RESTART_COUNT = 0 ]; then
         while [ ! -f "$W/start.0.0" ]; do sleep 0.05; done; exit 7
     fi
     [ $TDM_RANK = 0 ] && sleep 0.5; exit 0' \
    >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 0 ]; then ok "a job that succeeds on its restart exits 0"; else fail "a job that succeeds on its restart exits 0" "exit $rc: $(cat "$work/err")"; fi
has "the failure is reported" "rank 1 (pid" "$work/err"
has "the restart is announced" "restarting all workers (restart 1 of 1)" "$work/err"
got=$(cd "$work" && ls start.* | sort | tr '\n' ' ')
if [ "$got" = "start.0.0 start.0.1 start.1.0 start.1.1 " ]; then ok "every worker started twice, TDM_RESTART_COUNT 0 then 1"; else fail "every worker started twice, TDM_RESTART_COUNT 0 then 1" "got $got"; fi

# a job that always fails gives up after its restarts
rm -f "$work"/starts.*
"$TANDEM" run --nproc-per-node 2 --max-restarts 1 -- sh -c \
    'echo x >> "$W/starts.$TDM_RANK"; [ $TDM_RANK = 0 ] && exit 2; sleep 30' \
    >"$work/out" 2>"$work/err"
rc=$?
exits_nonzero "a job that keeps failing exits non-zero" $rc
has "it says it gave up" "the job failed after 1 restart" "$work/err"
n0=$(wc -l < "$work/starts.0")
if [ "$n0" -eq 2 ]; then ok "one restart only"; else fail "one restart only" "rank 0 started $n0 times"; fi

done_testing

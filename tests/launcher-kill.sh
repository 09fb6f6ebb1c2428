#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/launcher-kill.sh - `kill -9` of one worker mid-run ends the job with
# a message naming the rank within 10 s, and killing the launcher (SIGTERM
# or SIGKILL) takes its workers with it.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/launcher-lib.sh"

"$TANDEM" run --nproc-per-node 3 -- sh -c "$loop_worker" >"$work/out" 2>"$work/err" &
launcher=$!
if wait_files 3 'pid.*'; then
    victim=$(cat "$work/pid.2")
    t0=$(now)
    kill -9 "$victim"
    wait $launcher
    rc=$?
    dt=$(elapsed "$t0")
    exits_nonzero "kill -9 of a worker: tandem run fails" $rc
    has "the message names the rank" "tandem run: rank 2 (pid $victim) was killed by signal SIGKILL" "$work/err"
    ended_within "the job ended within 10 s" 10 "$dt"
    none_left "every worker process is gone"
else
    fail "workers started" "$(cat "$work/err")"
    kill $launcher
fi

# SIGTERM to the launcher ends the job
rm -f "$work"/pid.*
"$TANDEM" run --nproc-per-node 2 -- sh -c "$loop_worker" >"$work/out" 2>"$work/err" &
launcher=$!
wait_files 2 'pid.*'
t0=$(now)
kill -TERM $launcher
wait $launcher
rc=$?
dt=$(elapsed "$t0")
if [ $rc -eq 143 ]; then ok "SIGTERM to tandem run: exit 143"; else fail "SIGTERM to tandem run: exit 143" "exit $rc"; fi
has "it says why" "received SIGTERM" "$work/err"
ended_within "within 10 s" 10 "$dt"
none_left "its workers are gone"

# SIGKILL to the launcher: the workers die with it (PR_SET_PDEATHSIG)
rm -f "$work"/pid.*
"$TANDEM" run --nproc-per-node 2 -- sh -c "$loop_worker" >/dev/null 2>&1 &
launcher=$!
wait_files 2 'pid.*'
kill -9 $launcher
wait $launcher 2>/dev/null
i=0
while [ $i -lt 50 ]; do
    gone=yes
    for r in 0 1; do alive "$(cat "$work/pid.$r")" && gone=no; done
    [ $gone = yes ] && break
    sleep 0.1; i=$((i + 1))
done
if [ $gone = yes ]; then ok "kill -9 of tandem run kills its workers"; else fail "kill -9 of tandem run kills its workers"; fi

done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/launcher-multinode.sh - two launchers on loopback, as two nodes of
# one job: they rendezvous through node 0's store and number the ranks
# 0..3; a failure on one node ends the other node's workers too.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/launcher-lib.sh"
export TDM_STORE_TOKEN=multinode-test-token

port=$(free_port)
common="--nnodes 2 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $port --timeout 20"
job='echo "$TDM_RANK $TDM_LOCAL_RANK $TDM_NODE_RANK $TDM_WORLD_SIZE" > "$W/rank.$TDM_RANK"'
# node 1 starts first: it waits for node 0's store
"$TANDEM" run $common --node-rank 1 -- sh -c "$job" >"$work/out1" 2>"$work/err1" &
n1=$!
sleep 0.3
"$TANDEM" run $common --node-rank 0 -- sh -c "$job" >"$work/out0" 2>"$work/err0"
rc0=$?
wait $n1
rc1=$?
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]; then ok "both launchers exit 0"; else fail "both launchers exit 0" "node 0: $rc0 $(cat "$work/err0"); node 1: $rc1 $(cat "$work/err1")"; fi
got=$(cat "$work"/rank.* 2>/dev/null | sort | tr '\n' ';')
want="0 0 0 4;1 1 0 4;2 0 1 4;3 1 1 4;"
if [ "$got" = "$want" ]; then ok "ranks 0..3 with the right local and node ranks"; else fail "ranks 0..3 with the right local and node ranks" "got '$got'"; fi

# a wrong token is refused
port=$(free_port)
"$TANDEM" run --nnodes 2 --node-rank 0 --master-port $port --timeout 5 -- true >"$work/out0" 2>"$work/err0" &
n0=$!
"$TANDEM" run --nnodes 2 --node-rank 1 --master-port $port --timeout 5 --token wrong -- true >"$work/out1" 2>"$work/err1"
rc1=$?
kill $n0 2>/dev/null; wait $n0 2>/dev/null
[ $rc1 -ne 0 ] && has "a node with the wrong token is refused" "wrong store token" "$work/err1" ||
    fail "a node with the wrong token is refused" "exit $rc1"

# failure on node 1 ends node 0's workers
rm -f "$work"/pid.*
port=$(free_port)
common="--nnodes 2 --nproc-per-node 2 --master-port $port --timeout 20"
"$TANDEM" run $common --node-rank 1 -- sh -c \
    'echo $$ > "$W/pid.$TDM_RANK"; if [ $TDM_RANK = 3 ]; then sleep 1; exit 4; fi; while :; do sleep 0.2; done' \
    >"$work/out1" 2>"$work/err1" &
n1=$!
t0=$(now)
"$TANDEM" run $common --node-rank 0 -- sh -c "$loop_worker" >"$work/out0" 2>"$work/err0"
rc0=$?
wait $n1
rc1=$?
dt=$(elapsed "$t0")
if [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ]; then ok "both launchers fail"; else fail "both launchers fail" "node 0: $rc0, node 1: $rc1"; fi
has "node 1 names its rank" "rank 3 (pid" "$work/err1"
has "node 0 names the failed rank and node" "exited with status 4 on node 1" "$work/err0"
ended_within "the job ended within 10 s" 10 "$dt"
none_left "no worker left on either node"

done_testing

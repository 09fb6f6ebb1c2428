#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/launcher-env.sh - `tandem run` gives each worker the right
# environment, prefixes its output lines with the rank, and rejects bad
# usage with a clear message.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/launcher-lib.sh"

dump='for v in TDM_RANK RANK TDM_LOCAL_RANK LOCAL_RANK TDM_WORLD_SIZE WORLD_SIZE TDM_LOCAL_WORLD_SIZE LOCAL_WORLD_SIZE TDM_NODE_RANK GROUP_RANK TDM_NNODES TDM_MASTER_ADDR MASTER_ADDR TDM_MASTER_PORT MASTER_PORT TDM_STORE_TOKEN TDM_RESTART_COUNT; do eval "echo $v=\$$v"; done > "$W/env.$TDM_RANK"'

for n in 2 3; do
    rm -f "$work"/env.*
    "$TANDEM" run --nproc-per-node $n -- sh -c "$dump" >"$work/out" 2>"$work/err"
    rc=$?
    if [ $rc -eq 0 ]; then ok "$n workers: exit 0"; else fail "$n workers: exit 0" "exit $rc: $(cat "$work/err")"; fi
    port=$(sed -n 's/^TDM_MASTER_PORT=//p' "$work/env.0")
    token=$(sed -n 's/^TDM_STORE_TOKEN=//p' "$work/env.0")
    bad=""
    r=0
    while [ $r -lt $n ]; do
        f="$work/env.$r"
        for want in "TDM_RANK=$r" "RANK=$r" "TDM_LOCAL_RANK=$r" "LOCAL_RANK=$r" \
            "TDM_WORLD_SIZE=$n" "WORLD_SIZE=$n" "TDM_LOCAL_WORLD_SIZE=$n" "LOCAL_WORLD_SIZE=$n" \
            "TDM_NODE_RANK=0" "GROUP_RANK=0" "TDM_NNODES=1" "TDM_MASTER_ADDR=127.0.0.1" \
            "MASTER_ADDR=127.0.0.1" "TDM_MASTER_PORT=$port" "MASTER_PORT=$port" \
            "TDM_STORE_TOKEN=$token" "TDM_RESTART_COUNT=0"; do
            grep -qx -- "$want" "$f" 2>/dev/null || bad="$bad rank $r lacks $want;"
        done
        r=$((r + 1))
    done
    if [ -z "$bad" ]; then ok "$n workers: every variable right"; else fail "$n workers: every variable right" "$bad"; fi
    if [ "$port" -gt 0 ] 2>/dev/null && [ ${#token} -eq 64 ]; then
        ok "$n workers: a real port and a 64-hex-digit token"
    else
        fail "$n workers: a real port and a 64-hex-digit token" "port '$port' token '$token'"
    fi
done

# output: whole lines, prefixed with the rank, on the stream they were written to
"$TANDEM" run --nproc-per-node 2 -- sh -c 'echo "out of $TDM_RANK"; echo "err of $TDM_RANK" >&2; printf "no newline $TDM_RANK"' \
    >"$work/out" 2>"$work/err"
has "stdout of rank 0 prefixed" "[rank 0] out of 0" "$work/out"
has "stdout of rank 1 prefixed" "[rank 1] out of 1" "$work/out"
has "stderr of rank 1 prefixed" "[rank 1] err of 1" "$work/err"
has "a last line without newline is kept" "[rank 1] no newline 1" "$work/out"
if grep -v '^\[rank [01]\] ' "$work/out" | grep -q .; then
    fail "every output line carries a prefix" "$(cat "$work/out")"
else
    ok "every output line carries a prefix"
fi

# --master-port 0: the port the workers get is the one being served
if command -v bash >/dev/null; then
    "$TANDEM" run --master-port 0 --nproc-per-node 1 -- bash -c \
        '[ "$MASTER_PORT" -gt 0 ] && exec 3<>/dev/tcp/127.0.0.1/$MASTER_PORT' >"$work/out" 2>"$work/err"
    rc=$?
    if [ $rc -eq 0 ]; then ok "--master-port 0 passes the served port"; else fail "--master-port 0 passes the served port" "$(cat "$work/err")"; fi
else
    ok "--master-port 0 passes the served port # SKIP no bash"
fi

# bad usage
"$TANDEM" run --nproc-per-node 2 >"$work/out" 2>"$work/err"; rc=$?
if [ $rc -eq 2 ]; then ok "no command: usage error"; else fail "no command: usage error" "exit $rc"; fi
"$TANDEM" run --nnodes 2 --node-rank 2 -- true >"$work/out" 2>"$work/err"; rc=$?
[ $rc -eq 2 ] && has "--node-rank out of range is named" "--node-rank 2 is not below --nnodes 2" "$work/err" ||
    fail "--node-rank out of range is named" "exit $rc"
env -u TDM_STORE_TOKEN "$TANDEM" run --nnodes 2 -- true >"$work/out" 2>"$work/err"; rc=$?
[ $rc -eq 2 ] && has "multi-node without a token is refused" "--token" "$work/err" ||
    fail "multi-node without a token is refused" "exit $rc"
"$TANDEM" run -- /nonexistent/program >"$work/out" 2>"$work/err"; rc=$?
[ $rc -ne 0 ] && has "a command that cannot run is reported" "rank 0 (pid" "$work/err" ||
    fail "a command that cannot run is reported" "exit $rc"
has "  ... with its exit status 127" "exited with status 127" "$work/err"

done_testing

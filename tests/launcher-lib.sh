# SPDX-License-Identifier: MIT
# tests/launcher-lib.sh - helpers for the `tandem run` tests (source it
# after tests/tap.sh). Every test works in its own temporary directory,
# removed at exit together with any process a failed test left behind.
[ -x "$TANDEM" ] || skip_all "tandem is not built"
work=$(mktemp -d)
cleanup() {
    for f in "$work"/pid.*; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT

# has NAME PATTERN FILE: a TAP result for a fixed-string match
has() {
    if grep -qF -- "$2" "$3"; then ok "$1"; else fail "$1" "'$2' not in: $(cat "$3")"; fi
}
# wait_files N PATTERN: wait (at most 10 s) until N files match $work/PATTERN
wait_files() {
    i=0
    while [ "$(ls "$work"/$2 2>/dev/null | wc -l)" -lt "$1" ] && [ $i -lt 100 ]; do
        sleep 0.1; i=$((i + 1))
    done
    [ "$(ls "$work"/$2 2>/dev/null | wc -l)" -ge "$1" ]
}
# alive_in_sessions: live (not zombie: this sandbox's init may not reap)
# processes that are workers whose pids are in $work/pid.*, or in their
# sessions (a worker leads its own session)
alive_in_sessions() {
    for f in "$work"/pid.*; do
        [ -f "$f" ] || continue
        ps -eo pid=,sid=,stat=,args= | awk -v s="$(cat "$f")" '($1 == s || $2 == s) && $3 !~ /^Z/'
    done
}
# none_left NAME: a TAP result for "alive_in_sessions finds nothing"
none_left() {
    left=$(alive_in_sessions)
    if [ -z "$left" ]; then ok "$1"; else fail "$1" "alive: $left"; fi
}
# a port for a multi-node test: free at the time of the call
free_port() {
    "$TORCH_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + $$ % 20000))
}
# a worker script: records its pid, then loops in `sleep` until killed
loop_worker='echo $$ > "$W/pid.$TDM_RANK"; while :; do sleep 0.2; done'
export W="$work"
# alive PID: is PID a live process (not a zombie)?
alive() { ps -o stat= -p "$1" 2>/dev/null | grep -q '^[^Z]'; }

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh - `make fuzz-run`: each libFuzzer target over its seed
# corpus for a bounded time, FUZZ_JOBS targets at a time.
#
#   run.sh SRC_FUZZ_DIR BUILD_FUZZ_DIR TARGET...
#
# The seeds (SRC_FUZZ_DIR/corpus/<target>/) are read, never written (the
# source tree may be read-only): what a run adds goes to a temporary
# corpus, removed afterwards. A crash, leak, timeout or failed assertion
# fails the run: its log is shown, and the input that did it is kept as
# BUILD_FUZZ_DIR/<kind>-<target>-<hash> for `./fuzz-<target> FILE`.
# Environment: FUZZ_SECONDS (per target, default 20), FUZZ_JOBS (default 2).
set -e
# One target per process, started by xargs below: run.sh --one TARGET
# with src, build, seconds and tmp in the environment.
if [ "$1" != --one ]; then
    src=$1
    build=$2
    shift 2
    seconds=${FUZZ_SECONDS:-20}
    jobs=${FUZZ_JOBS:-2}
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-fuzz.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
fi

# One target: exit status 0 when libFuzzer ran its time out cleanly.
run_one() {
    t=$1
    mkdir -p "$tmp/$t"
    set -- "$build/fuzz-$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/" "$tmp/$t" "$src/corpus/$t"
    case $t in
    plot-log)
        set -- "$@" -dict="$src/plot-log.dict"
        export LSAN_OPTIONS="suppressions=$src/plot-log.lsan"
        ;;
    esac
    start=$(date +%s)
    if "$@" >"$tmp/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$t.log")
        echo "fuzz-run: $t: ok, ${runs:-?} inputs in $(($(date +%s) - start)) s"
        return 0
    fi
    echo "fuzz-run: $t: FAILED; the end of its log:"
    tail -n 40 "$tmp/$t.log" | sed 's/^/    /'
    return 1
}

if [ "$1" = --one ]; then
    run_one "$2"
    exit
fi

for t in "$@"; do
    [ -x "$build/fuzz-$t" ] || { echo "fuzz-run: $build/fuzz-$t missing (make fuzz)" >&2; exit 1; }
    [ -d "$src/corpus/$t" ] || { echo "fuzz-run: no seed corpus $src/corpus/$t" >&2; exit 1; }
done
export src build seconds tmp
status=0
printf '%s\n' "$@" | xargs -P "$jobs" -n 1 sh "$0" --one || status=1
if [ $status -eq 0 ]; then
    echo "fuzz-run: $# targets, $seconds s each, $jobs at a time: no crash"
else
    echo "fuzz-run: a target failed (its input is in $build/)" >&2
fi
exit $status

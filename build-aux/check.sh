#!/bin/sh
# The README's second command (and CI's): install dependencies, build, run the
# whole test suite, and end with a line "N passed, N failed".
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/build-aux/install-deps.sh" --tests
# The suite runs with the test hooks compiled in (configure
# --enable-test-hooks): a build directory configured without them, by
# build.sh or by hand, is configured again with its own options plus that one.
export CONFIGURE_FLAGS="${CONFIGURE_FLAGS:-} --enable-test-hooks"
if [ -f "$top/build/config.status" ] &&
        ! grep -q '^#define TDM_ENABLE_TEST_HOOKS 1' "$top/build/config.h" 2>/dev/null; then
    (cd "$top/build" && eval "../configure $(./config.status --config) --enable-test-hooks")
fi
"$top/build-aux/build.sh"
cd "$top/build"
status=0
make -j"$(nproc)" check || status=$?
log=test-suite.log
count() { sed -n "s/^# $1: *//p" "$log" | head -n 1; }
pass=$(count PASS); fail=$(count FAIL); err=$(count ERROR); xpass=$(count XPASS); skip=$(count SKIP)
failed=$(( ${fail:-0} + ${err:-0} + ${xpass:-0} ))
[ "$failed" -eq 0 ] || grep -E '^(FAIL|ERROR|XPASS):' "$log" || true
echo "${skip:-0} skipped"
echo "${pass:-0} passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]

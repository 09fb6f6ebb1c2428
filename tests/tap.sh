# SPDX-License-Identifier: MIT
# tests/tap.sh - tiny TAP helpers for shell tests (source it).
#   plan N; ok "name"; fail "name" "why"; skip "name" "why"; check "name" cmd args...;
#   skip_all "why"; have_test_hooks (configure --enable-test-hooks; TDM_TEST_HOOKS
#   comes from tests/Makefile.inc); expect_error "name" LINE PATTERN... -- cmd args...;
#   run_logged "name" LOG cmd args...; bail "why"
#   timing: now; elapsed START; lt A B; ended_within "name" LIMIT DT;
#   exits_nonzero "name" STATUS
tap_n=0
tap_failed=0
plan() { echo "1..$1"; }
ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1"; }
fail() {
    tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1))
    echo "not ok $tap_n - $1"
    [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/# /'
    return 0
}
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1 # SKIP $2"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else fail "$name" "command failed: $*"; fi; }
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
done_testing() { echo "1..$tap_n"; [ "$tap_failed" -eq 0 ]; }
have_test_hooks() { [ "${TDM_TEST_HOOKS:-no}" = yes ]; }
TEST_HOOKS_WHY="built without the test hooks (configure --enable-test-hooks)"

# expect_error NAME LINE PATTERN... -- COMMAND...: COMMAND fails cleanly
# (status 1 or 2, not a crash), its stderr has a line matching the grep
# regular expression LINE and contains every PATTERN (a fixed string).
# The caller's $tmp holds the command's output (out, err).
expect_error() {
    name=$1; line=$2; shift 2
    patterns=
    while [ "$1" != "--" ]; do patterns="$patterns
$1"; shift; done
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ $status -ne 1 ] && [ $status -ne 2 ]; then
        fail "$name" "exit status $status (expected 1 or 2); stderr: $(cat "$tmp/err")"
        return
    fi
    if ! grep -q "$line" "$tmp/err"; then
        fail "$name" "no error line matching '$line'; stderr: $(cat "$tmp/err")"
        return
    fi
    missing=
    old_ifs=$IFS; IFS='
'
    for p in $patterns; do
        grep -qF -- "$p" "$tmp/err" || missing="$missing '$p'"
    done
    IFS=$old_ifs
    if [ -n "$missing" ]; then
        fail "$name" "stderr lacks$missing: $(cat "$tmp/err")"
    else
        ok "$name"
    fi
}

# now: a time stamp; elapsed START: seconds since START, as a decimal;
# lt A B: is A < B (decimals)?
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# ended_within NAME LIMIT DT: a TAP result for "DT seconds < LIMIT"
ended_within() {
    if lt "$3" "$2"; then ok "$1 ($3 s)"; else fail "$1" "$3 s"; fi
}
# exits_nonzero NAME STATUS: a TAP result for "the command failed"
exits_nonzero() {
    if [ "$2" -ne 0 ]; then ok "$1"; else fail "$1" "exit 0"; fi
}

# run_logged NAME LOG COMMAND...: one test, passed when COMMAND succeeds;
# its output goes to $tmp/LOG (the caller's temp directory), whose tail
# the failure shows.
run_logged() {
    name=$1; log=$tmp/$2; shift 2
    if "$@" >"$log" 2>&1; then
        ok "$name"
        return 0
    fi
    fail "$name" "$(printf 'command failed: %s\n' "$*"; tail -n 25 "$log")"
    return 1
}

# build_fixture_plugin SRC OUT: compiles plugin source SRC (under the
# source tree) against this build's headers and library into OUT; the
# compiler's output goes to OUT.log.
build_fixture_plugin() {
    # shellcheck disable=SC2046 # word splitting of flags is intended
    "${CC:-cc}" -std=gnu11 -Wall -Werror -fPIC -shared -fvisibility=hidden \
        -DTDM_PLUGIN_VERSION='"1.0"' -I"$TDM_TOP_SRCDIR/include" -I"$TDM_TOP_BUILDDIR" \
        $("${PKG_CONFIG:-pkg-config}" --cflags glib-2.0) -o "$2" "$TDM_TOP_SRCDIR/$1" \
        -L"$TDM_TOP_BUILDDIR/core/.libs" -ltandem-1 \
        $("${PKG_CONFIG:-pkg-config}" --libs glib-2.0) >"$2.log" 2>&1
}

# bail WHY: stop the whole test file (TAP "Bail out!").
bail() {
    echo "Bail out! $1"
    exit 1
}

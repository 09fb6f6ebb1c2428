# tests/tap.sh - tiny TAP helpers for shell tests (source it).
#   plan N; ok "name"; fail "name" "why"; skip "name" "why"; check "name" cmd args...;
#   skip_all "why"; have_test_hooks (configure --enable-test-hooks; TDM_TEST_HOOKS
#   comes from tests/Makefile.inc)
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

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check-plugin.sh - `tandem check-plugin FILE`: it passes on the
# built-in plugins of each kind it checks (a backend, two collectives,
# every strategy, the transforms; a reader is listed as skipped), and
# fails, with a FAIL line per broken feature and exit status 1, on
# tests/fixtures/broken-kit.c, which this test builds against the tree's
# headers and library (a strategy that ignores accumulation, a transform
# that is not deterministic, one that makes a shape it does not declare).
# A file that does not load and a usage error are reported too. The
# examples of examples/plugins/ are checked by tests/install-plugins.sh,
# from a staged install.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
plugins=$TDM_TOP_BUILDDIR/plugins/.libs
[ -x "$TANDEM" ] || skip_all "tandem is not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# passes NAME: check-plugin on the built plugin libtdm-NAME.so exits 0
# with no FAIL line and at least one PASS for a feature.
passes() {
    "$TANDEM" check-plugin --timeout 60 "$plugins/libtdm-$1.so" >"$tmp/$1.log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q '^FAIL' "$tmp/$1.log" &&
        grep -Eq "^PASS (backend|collective|strategy|transform) " "$tmp/$1.log"; then
        ok "check-plugin passes on $1 ($(tail -n 1 "$tmp/$1.log" | sed 's/.*: //'))"
    else
        fail "check-plugin passes on $1" "exit $rc: $(cat "$tmp/$1.log")"
    fi
}
passes ref
passes shm
[ -f "$plugins/libtdm-gloo.so" ] && passes gloo
for s in single dp ddp zero1; do
    passes "$s"
done
passes transforms
if "$TANDEM" check-plugin "$plugins/libtdm-idx.so" >"$tmp/idx.log" 2>&1 &&
    grep -q '^SKIP dataset idx: no conformance check' "$tmp/idx.log"; then
    ok "a dataset reader is listed as skipped"
else
    fail "a dataset reader is listed as skipped" "$(cat "$tmp/idx.log")"
fi

# ---- a plugin that breaks the rules ------------------------------------------
if build_fixture_plugin tests/fixtures/broken-kit.c "$tmp/libtdm-broken-kit.so"; then
    ok "the broken plugin builds"
else
    fail "the broken plugin builds" "$(cat "$tmp/libtdm-broken-kit.so.log")"
fi
"$TANDEM" check-plugin "$tmp/libtdm-broken-kit.so" >"$tmp/broken.log" 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then
    ok "check-plugin on the broken plugin exits 1"
else
    fail "check-plugin on the broken plugin exits 1" "exit $rc: $(cat "$tmp/broken.log")"
fi
has_line() {
    if grep -q "^$2" "$tmp/broken.log"; then
        ok "$1"
    else
        fail "$1" "$(cat "$tmp/broken.log")"
    fi
}
has_line "a strategy that ignores do_update fails: not as single alone" \
    "FAIL strategy broken-step: alone it trains otherwise than single"
has_line "a transform that draws from a global generator fails: not deterministic" \
    "FAIL transform broken-random: .*two runs give different images"
has_line "a transform that makes another shape than it declares fails" \
    "FAIL transform broken-shape: .*made 3x40x24, but output_shape says 3x40x48"
has_line "a strategy that leaves the ranks apart passes alone" \
    "PASS strategy broken-ranks: alone it trains as single"
has_line "... but fails on 2 ranks, naming the rank and the difference" \
    "FAIL strategy broken-ranks, 2 ranks: on 2 ranks (shm) the ranks end with different weights: rank 1 differs from rank 0 by"
has_line "the summary counts the lines" "check-plugin .*: 2 passed, 4 failed, 0 skipped"

# --strategy gives a strategy its parameters for both checks.
"$TANDEM" check-plugin --strategy "broken-ranks average=true" "$tmp/libtdm-broken-kit.so" \
    >"$tmp/broken.log" 2>&1
has_line "--strategy's parameters make it pass alone" \
    'PASS strategy "broken-ranks average=true": alone it trains as single'
has_line "... and on 2 ranks" \
    "PASS strategy \"broken-ranks average=true\", 2 ranks: on 2 ranks .* every rank ends with rank 0's weights"
has_line "the other strategy keeps its defaults" "FAIL strategy broken-step: alone"
"$TANDEM" check-plugin --strategy "broken-ranks average=maybe" "$tmp/libtdm-broken-kit.so" \
    >"$tmp/broken.log" 2>&1
has_line "a bad --strategy parameter fails, naming it" \
    'FAIL strategy "broken-ranks average=maybe": training alone: broken-ranks: average=maybe: expected true or false'
"$TANDEM" check-plugin --strategy "nope x=1" "$tmp/libtdm-broken-kit.so" >"$tmp/usage.log" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "no strategy of that name (its strategies: broken-step, broken-ranks)" "$tmp/usage.log"; then
    ok "--strategy naming a strategy the file lacks is a usage error"
else
    fail "--strategy naming a strategy the file lacks is a usage error" "exit $rc: $(cat "$tmp/usage.log")"
fi

# ---- files that do not load, usage ---------------------------------------------
printf 'not a plugin' >"$tmp/libtdm-junk.so"
out=$("$TANDEM" check-plugin "$tmp/libtdm-junk.so" 2>&1)
rc=$?
case $rc:$out in
1:"FAIL load: "*"libtdm-junk.so: cannot open"*) ok "a file that does not load is a FAIL, exit 1" ;;
*) fail "a file that does not load is a FAIL, exit 1" "exit $rc: $out" ;;
esac
# usage NAME ARGS...: check-plugin ARGS exits 2
usage() {
    name=$1; shift
    "$TANDEM" check-plugin "$@" >/dev/null 2>&1
    rc=$?
    if [ "$rc" -eq 2 ]; then ok "$name"; else fail "$name" "exit $rc, expected 2"; fi
}
usage "check-plugin without FILE is a usage error"
usage "check-plugin --max-world 9 is a usage error" --max-world 9 "$plugins/libtdm-shm.so"
out=$("$TANDEM" check-plugin --help)
case $out in
*"Usage: tandem check-plugin"*"Exit status"*) ok "check-plugin --help shows the usage" ;;
*) fail "check-plugin --help shows the usage" "$out" ;;
esac

done_testing

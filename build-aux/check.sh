#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's second command (and CI's): install dependencies, build, run the
# whole test suite, then beside it the fuzz targets over their seed corpus
# (make fuzz-run, when clang has libFuzzer), the API reference (make doc,
# with gtk-doc), the SPDX lines (build-aux/spdx.sh), make distcheck and
# the Debian packages (build-aux/build-deb.sh, tests/deb-install.sh), and
# end with a line "N passed, N failed" (each of those steps counts as
# one).
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
pass=${pass:-0}

# step NAME COMMAND...: one more pass or failure, with its time.
step() {
    name=$1; shift
    start=$(date +%s)
    if "$@"; then
        pass=$((pass + 1)); echo "$name: ok ($(($(date +%s) - start)) s)"
    else
        failed=$((failed + 1)); status=1; echo "FAIL: $name ($(($(date +%s) - start)) s)"
    fi
}
# Every source file carries its SPDX-License-Identifier line.
step "SPDX lines" sh "$top/build-aux/spdx.sh" --check "$top"
# The fuzz targets, each over its seeds for FUZZ_SECONDS (tests/fuzz.mk).
if grep -q '^TDM_HAVE_FUZZ = yes' Makefile; then
    step "make fuzz-run" make fuzz-run
else
    skip=$(( ${skip:-0} + 1 )); echo "SKIP: make fuzz-run ($(sed -n 's/^TDM_FUZZ_WHY = //p' Makefile))"
fi
# The API reference builds and documents every public symbol (gtk-doc;
# a few seconds; docs/reference/README.md).
if grep -q '^TDM_HAVE_GTKDOC = yes' Makefile; then
    step "make doc" make doc
else
    skip=$(( ${skip:-0} + 1 )); echo "SKIP: make doc ($(sed -n 's/^TDM_GTKDOC_WHY = //p' Makefile))"
fi
# The tarball: it must hold everything to build every plugin this tree
# builds (each asked for with --with-..., so a missing file is an error,
# not a plugin quietly left out), install, uninstall and clean. Its test
# run is the tests that read files of the tarball (the suite itself has
# just run on this tree).
with=
for p in cpu:onednn cuda:cuda nccl:nccl gloo:gloo imagefolder:images; do
    [ -f "plugins/libtdm-${p%%:*}.la" ] && with="$with --with-${p#*:}"
done
grep -q '^#define HAVE_CAIRO 1' config.h && with="$with --with-cairo"
step "make distcheck" make -j"$(nproc)" distcheck DISTCHECK_CONFIGURE_FLAGS="$with" \
    TESTS="tests/install-example.sh tests/abi-lists.sh tests/test-abi-layout tests/inspect.sh tests/train-smoke.sh"
# The Debian packages: build-aux/build-deb.sh builds them (without the
# suite, which has just run: nocheck; with the cuda and nccl plugins when
# /usr/local/cuda has nvcc and NCCL) in a copy of the tree, and lintian
# checks them; tests/deb-install.sh then installs them into the system,
# checks them and purges them. Both work in one temporary directory outside
# the tree, so nothing is written in or beside it. Root only: the install
# check installs system packages (it purges them again, even on a failure).
deb_check() {
    debs=$(mktemp -d "${TMPDIR:-/tmp}/tandem-debs.XXXXXX") || return 1
    deb_status=0
    sh "$top/build-aux/build-deb.sh" "$debs" >"$debs/build-deb.out" 2>&1 || deb_status=$?
    grep -E '^(build-deb|[EW]):' "$debs/build-deb.out"
    if [ "$deb_status" -ne 0 ]; then
        tail -n 40 "$debs/build-deb.out"
    else
        sh "$top/tests/deb-install.sh" "$debs" >"$debs/deb-install.out" 2>&1 || deb_status=$?
        grep -E '^not ok|^#|^Bail out|# SKIP' "$debs/deb-install.out"
        echo "deb-install: $(grep -c '^ok' "$debs/deb-install.out") ok, $(grep -c '^not ok' "$debs/deb-install.out") not ok"
    fi
    rm -rf "$debs"
    return "$deb_status"
}
if [ "$(id -u)" = 0 ]; then
    step "Debian packages (build-deb.sh, lintian, deb-install.sh)" deb_check
else
    skip=$(( ${skip:-0} + 1 )); echo "SKIP: Debian packages (not root: tests/deb-install.sh installs packages)"
fi

echo "${skip:-0} skipped"
echo "$pass passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]

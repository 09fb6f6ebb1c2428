#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-hooks.sh - the test hooks are compiled in exactly when configure
# ran with --enable-test-hooks: configure offers the switch, config.h and the
# test environment agree, and the library and the plugins that read a hook's
# environment variable contain its name in that case only. A distribution
# build (without the switch) therefore ignores a stray TDM_LOADER_JITTER_US,
# TDM_REF_COPY_DELAY_US, TDM_TEST_SKIP_COLLECTIVE or TDM_TEST_SAVE_DELAY_MS (strategies-faults.sh
# shows it for one of them by running the job).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

if "$TDM_TOP_SRCDIR/configure" --help | grep -q -- '--enable-test-hooks'; then
    ok "configure --help offers --enable-test-hooks"
else
    fail "configure --help offers --enable-test-hooks"
fi

if grep -q '^#define TDM_ENABLE_TEST_HOOKS 1' "$TDM_TOP_BUILDDIR/config.h"; then
    in_config=yes
else
    in_config=no
fi
if [ "$in_config" = "${TDM_TEST_HOOKS:-}" ]; then
    ok "config.h and the test environment agree (test hooks: $in_config)"
else
    fail "config.h and the test environment agree" \
        "config.h: $in_config, TDM_TEST_HOOKS: '${TDM_TEST_HOOKS:-}'"
fi

# hook FILE VARIABLE: FILE holds VARIABLE's name exactly when hooks are on.
hook() {
    if [ ! -f "$TDM_TOP_BUILDDIR/$1" ]; then
        skip "$2 in $1" "$1 is not built"
        return
    fi
    if grep -q -a -F "$2" "$TDM_TOP_BUILDDIR/$1"; then has=yes; else has=no; fi
    if [ "$has" = "$in_config" ]; then
        ok "$1 reads $2: $has"
    else
        fail "$1 reads $2 exactly when the hooks are on" "hooks $in_config, name present: $has"
    fi
}
hook core/.libs/libtandem-1.so TDM_LOADER_JITTER_US
hook plugins/.libs/libtdm-ref.so TDM_REF_COPY_DELAY_US
hook plugins/.libs/libtdm-ddp.so TDM_TEST_SKIP_COLLECTIVE
hook core/.libs/libtandem-1.so TDM_TEST_SAVE_DELAY_MS
done_testing

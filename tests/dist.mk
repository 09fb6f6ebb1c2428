# SPDX-License-Identifier: MIT
# tests: dist (see tests/Makefile.inc) - the rendezvous store, the
# distributed environment and the launcher `tandem run`, with real
# processes on loopback. The store's fuzz target (tests/fuzz/fuzz-store.c)
# is built by hand with clang; see the comment at its top.
check_PROGRAMS += tests/test-store
TDM_LAUNCHER_TESTS = \
	tests/launcher-env.sh \
	tests/launcher-failure.sh \
	tests/launcher-gpu.sh \
	tests/launcher-kill.sh \
	tests/launcher-multinode.sh \
	tests/launcher-restart.sh
TESTS += tests/test-store $(TDM_LAUNCHER_TESTS)
EXTRA_DIST += $(TDM_LAUNCHER_TESTS) tests/launcher-lib.sh tests/fuzz/fuzz-store.c

# SPDX-License-Identifier: MIT
# tests: the configure switch --enable-test-hooks (see tests/Makefile.inc):
# hooks compiled in exactly when it is given.
TESTS += tests/test-hooks.sh
EXTRA_DIST += tests/test-hooks.sh

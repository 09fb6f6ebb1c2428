# SPDX-License-Identifier: MIT
# tests: the man pages written from --help (man/Makefile.inc).
TESTS += tests/man-pages.sh
EXTRA_DIST += tests/man-pages.sh

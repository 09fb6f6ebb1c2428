# SPDX-License-Identifier: MIT
# tests: pth (see tests/Makefile.inc)
#
# PyTorch .pth files: tests/test-pth.c reads and writes them in C (round
# trip, hostile pickles, and a fuzz-style pass of truncated and flipped
# bytes); tests/pth-torch.sh checks them against torch itself (files made
# by torch.save, read by Tandem; files written by `tandem export`, read by
# torch.load(weights_only=True)). The libFuzzer target
# tests/fuzz/fuzz-pth.c is built by hand (see the file).
check_PROGRAMS += tests/test-pth
TESTS += tests/test-pth tests/pth-torch.sh
tests_test_pth_CFLAGS = $(TDMTEST_CFLAGS) $(LIBZIP_CFLAGS)
tests_test_pth_LDADD = $(TDMTEST_LIBS) $(LIBZIP_LIBS)
EXTRA_DIST += tests/pth-torch.sh tests/pth-make.py tests/pth-check.py tests/fuzz/fuzz-pth.c

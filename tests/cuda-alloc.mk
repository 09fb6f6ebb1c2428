# SPDX-License-Identifier: MIT
# tests: the cuda plugin's caching allocator (see tests/Makefile.inc). The
# allocator's core knows nothing of CUDA, so the test compiles
# plugins/cuda/cuda-alloc.c into itself over a fake raw allocator and runs
# on every machine, whether or not the cuda plugin is built.
check_PROGRAMS += tests/test-cuda-alloc
TESTS += tests/test-cuda-alloc
tests_test_cuda_alloc_SOURCES = tests/test-cuda-alloc.c plugins/cuda/cuda-alloc.c \
	plugins/cuda/cuda-alloc.h
tests_test_cuda_alloc_CFLAGS = $(TDMTEST_CFLAGS) -I$(top_srcdir)/plugins/cuda
tests_test_cuda_alloc_LDADD = $(TDMTEST_LIBS)

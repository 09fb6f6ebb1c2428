# SPDX-License-Identifier: MIT
# tests: cuda-elem (see tests/Makefile.inc)
# test-cuda-elem applies the cuda kernels' per-element arithmetic
# (plugins/cuda/cuda-elem.h, which the .cu kernels call per thread) over
# random inputs on the CPU and compares it with the ref backend's ops:
# relu, add, dropout and casts bit for bit, SGD/AdamW to 1e-6, softmax
# cross-entropy row by row to 1e-5. It needs neither a GPU nor the CUDA
# toolkit, so it runs on every machine.
check_PROGRAMS += tests/test-cuda-elem
TESTS += tests/test-cuda-elem
tests_test_cuda_elem_SOURCES = tests/test-cuda-elem.c plugins/cuda/cuda-elem.h
tests_test_cuda_elem_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_cuda_elem_LDADD = $(TDMTEST_LIBS)

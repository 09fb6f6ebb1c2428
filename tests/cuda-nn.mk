# SPDX-License-Identifier: MIT
# tests: cuda-nn (see tests/Makefile.inc) - the GPU-free arithmetic of the
# cuda backend's batch norm, pooling and bias_grad kernels
# (plugins/cuda/cuda-nn-elem.h) against ref. Plain C: it is built and run on
# every machine, with or without CUDA.
check_PROGRAMS += tests/test-cuda-nn-elem
TESTS += tests/test-cuda-nn-elem

tests_test_cuda_nn_elem_SOURCES = tests/test-cuda-nn-elem.c plugins/cuda/cuda-nn-elem.h
tests_test_cuda_nn_elem_CFLAGS = $(TDMTEST_CFLAGS) -I$(top_srcdir)/plugins/cuda
tests_test_cuda_nn_elem_LDADD = $(TDMTEST_LIBS)

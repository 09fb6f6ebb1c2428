# SPDX-License-Identifier: MIT
# tests: the cuda backend's gemm argument mapping (see tests/Makefile.inc).
# test-cuda-gemm-map drives a plain column-major gemm through
# plugins/cuda/cuda-blas-map.h (row-major Tandem gemm -> cuBLASLt's
# column-major call) and compares it with ref's gemm, for every trans
# combination and odd shapes. Pure C, no GPU and no CUDA toolkit needed:
# it runs on every machine, whether or not the cuda plugin is built.
check_PROGRAMS += tests/test-cuda-gemm-map
TESTS += tests/test-cuda-gemm-map
tests_test_cuda_gemm_map_SOURCES = tests/test-cuda-gemm-map.c plugins/cuda/cuda-blas-map.h
tests_test_cuda_gemm_map_CPPFLAGS = -I$(top_srcdir)/plugins/cuda

# SPDX-License-Identifier: MIT
# tests: cuda (see tests/Makefile.inc). On a machine without an NVIDIA
# driver or GPU (CI, the build machine) the cuda plugin must load, say why
# it is unavailable, and leave every other backend working; the script
# skips where the plugin is not built (no toolkit: configure's reason) and
# where a GPU is usable (the GPU checks are tests/gpu's).
# cuda-lazy-blas.sh: the plugin does not link cuBLAS (it loads it when a
# device opens); inspect-rss.sh: `tandem inspect` with every built plugin
# stays under 100 MiB of peak RSS (linking cuBLAS cost 210 MiB).
TESTS += tests/cuda-unavailable.sh tests/cuda-lazy-blas.sh tests/inspect-rss.sh
EXTRA_DIST += tests/cuda-unavailable.sh tests/cuda-lazy-blas.sh tests/inspect-rss.sh
AM_TESTS_ENVIRONMENT += \
	export TDM_CUDA_BUILT='$(TDM_CUDA_BUILT)'; \
	export TDM_CUDA_WHY='$(TDM_CUDA_WHY)';

# test-cuda-blas-lib: the plugin's run-time loading of cuBLAS and cuBLASLt
# (plugins/cuda/cuda-blas-lib.c, compiled in), which needs the libraries
# but no GPU: it runs wherever the cuda plugin is built.
if TDM_BUILD_CUDA
check_PROGRAMS += tests/test-cuda-blas-lib
TESTS += tests/test-cuda-blas-lib
endif
tests_test_cuda_blas_lib_SOURCES = tests/test-cuda-blas-lib.c plugins/cuda/cuda-blas-lib.c \
	plugins/cuda/cuda-blas-lib.h
tests_test_cuda_blas_lib_CFLAGS = $(TDMTEST_CFLAGS) $(CUDA_CPPFLAGS) -I$(top_srcdir)/plugins/cuda
tests_test_cuda_blas_lib_LDADD = $(TDMTEST_LIBS) -ldl

# SPDX-License-Identifier: MIT
# tests: nccl (see tests/Makefile.inc). test-nccl-rdzv runs the plugin's
# rendezvous (plugins/nccl/nccl-rdzv.c, free of CUDA and NCCL) between real
# processes over a real store on every machine, whether or not the plugin
# is built. nccl-unavailable.sh checks, where the plugin is built but no
# GPU is usable, that `tandem inspect` lists nccl as unavailable with the
# reason and that `--collective nccl` fails clearly on cpu; it skips where
# the plugin is not built (configure's reason).
check_PROGRAMS += tests/test-nccl-rdzv
TESTS += tests/test-nccl-rdzv tests/nccl-unavailable.sh
tests_test_nccl_rdzv_SOURCES = tests/test-nccl-rdzv.c plugins/nccl/nccl-rdzv.c \
	plugins/nccl/nccl-rdzv.h
tests_test_nccl_rdzv_CFLAGS = $(TDMTEST_CFLAGS) -I$(top_srcdir)/plugins/nccl
tests_test_nccl_rdzv_LDADD = $(TDMTEST_LIBS)
EXTRA_DIST += tests/nccl-unavailable.sh tests/unavailable.sh
AM_TESTS_ENVIRONMENT += \
	export TDM_NCCL_BUILT='$(TDM_NCCL_BUILT)'; \
	export TDM_NCCL_WHY='$(TDM_NCCL_WHY)';

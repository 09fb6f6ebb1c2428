# SPDX-License-Identifier: MIT
# tests: comm (see tests/Makefile.inc) - every collective on 2, 3 and 4
# real processes, and the failure messages (mismatch, skipped call, timeout,
# dead rank), for every collective plugin built (TDM_TEST_COLLECTIVES=shm,gloo
# picks some).
check_PROGRAMS += tests/test-collectives
TESTS += tests/test-collectives
tests_test_collectives_SOURCES = tests/test-collectives.c tests/collectives-jobs.c \
	tests/collectives-jobs.h tests/rank-env.h

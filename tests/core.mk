# SPDX-License-Identifier: MIT
# tests: core (see tests/Makefile.inc) - op front ends, modules, model, zoo,
# loss, optimizers and schedules, on the ref backend (test-ops also
# compares cpu's fused and unfused ops when cpu is built).
# zoo-dump prints a zoo model's names and shapes for tests/test-zoo-names.py.
# tests/core-test-util.h is the helpers header of several tests here and in
# strategies.mk; tests/test-util.h, of tests of any part.
check_PROGRAMS += tests/test-ops tests/test-gradcheck tests/test-modules tests/test-optim \
	tests/zoo-dump
TESTS += tests/test-ops tests/test-gradcheck tests/test-modules tests/test-optim \
	tests/test-zoo-names.py
EXTRA_DIST += tests/test-zoo-names.py tests/core-test-util.h tests/test-util.h

# A steady-state training step allocates nothing (cpu and ref): the program
# counts allocator calls by defining malloc & co., so its symbols must be
# visible to the plugins it loads.
check_PROGRAMS += tests/test-steady-alloc
TESTS += tests/test-steady-alloc
tests_test_steady_alloc_LDFLAGS = -export-dynamic

# The auto recompute policy's choice (core/recompute-choice.c, built in:
# plain arithmetic, no library).
check_PROGRAMS += tests/test-recompute-choice
tests_test_recompute_choice_SOURCES = tests/test-recompute-choice.c core/recompute-choice.c \
	core/recompute-choice.h
tests_test_recompute_choice_LDADD = $(GLIB_LIBS)
TESTS += tests/test-recompute-choice

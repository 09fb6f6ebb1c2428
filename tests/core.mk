# tests: core (see tests/Makefile.inc) - op front ends, modules, model, zoo,
# loss, optimizers and schedules, on the ref backend (test-ops also
# compares cpu's fused and unfused ops when cpu is built).
check_PROGRAMS += tests/test-ops tests/test-gradcheck tests/test-modules tests/test-optim \
	tests/zoo-dump
TESTS += tests/test-ops tests/test-gradcheck tests/test-modules tests/test-optim \
	tests/test-zoo-names.py
EXTRA_DIST += tests/test-zoo-names.py

tests_test_ops_SOURCES = tests/test-ops.c
tests_test_ops_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_ops_LDADD = $(TDMTEST_LIBS)

tests_test_gradcheck_SOURCES = tests/test-gradcheck.c tests/core-test-util.h
tests_test_gradcheck_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_gradcheck_LDADD = $(TDMTEST_LIBS)

tests_test_modules_SOURCES = tests/test-modules.c tests/core-test-util.h
tests_test_modules_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_modules_LDADD = $(TDMTEST_LIBS)

tests_test_optim_SOURCES = tests/test-optim.c tests/core-test-util.h
tests_test_optim_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_optim_LDADD = $(TDMTEST_LIBS)

# Prints a zoo model's names and shapes for tests/test-zoo-names.py.
tests_zoo_dump_SOURCES = tests/zoo-dump.c
tests_zoo_dump_CFLAGS = $(TDMTEST_CFLAGS)
tests_zoo_dump_LDADD = $(TDMTEST_LIBS)

# A steady-state training step allocates nothing (cpu and ref): the program
# counts allocator calls by defining malloc & co., so its symbols must be
# visible to the plugins it loads.
check_PROGRAMS += tests/test-steady-alloc
TESTS += tests/test-steady-alloc
tests_test_steady_alloc_SOURCES = tests/test-steady-alloc.c tests/core-test-util.h
tests_test_steady_alloc_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_steady_alloc_LDFLAGS = -export-dynamic
tests_test_steady_alloc_LDADD = $(TDMTEST_LIBS)

# tests: backend (see tests/Makefile.inc)
# test-ref-ops checks the ref oracle on hand-computed cases; test-conformance
# checks every other available backend op by op against ref (it skips when
# there is none). Run one backend / one op:
#   TDM_CONFORMANCE_BACKEND=cpu tests/test-conformance -p /conformance/conv2d_forward
check_PROGRAMS += tests/test-ref-ops tests/test-conformance
TESTS += tests/test-ref-ops tests/test-conformance

tests_test_ref_ops_SOURCES = tests/test-ref-ops.c
tests_test_ref_ops_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_ref_ops_LDADD = $(TDMTEST_LIBS)

tests_test_conformance_SOURCES = \
	tests/test-conformance.c \
	tests/conformance-vector.c \
	tests/conformance-chain.c \
	tests/conformance-util.c \
	tests/conformance-util.h
tests_test_conformance_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_conformance_LDADD = $(TDMTEST_LIBS)

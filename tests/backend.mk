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

# test-device: device information and allocator counts, streams and events
# (ref's copy stream made slow with TDM_REF_COPY_DELAY_US), the loss
# statistics op against softmax_xent, and collective work holding its
# tensors (with the deferred fixture collective), on ref and cpu.
check_PROGRAMS += tests/test-device
TESTS += tests/test-device
tests_test_device_SOURCES = tests/test-device.c
tests_test_device_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_device_LDADD = $(TDMTEST_LIBS)

# test-device-run: what a run asks of its devices: precision (refused on
# ref and cpu), copies between devices (peer on ref, staged otherwise),
# the local rank's device.
check_PROGRAMS += tests/test-device-run
TESTS += tests/test-device-run
tests_test_device_run_SOURCES = tests/test-device-run.c
tests_test_device_run_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_device_run_LDADD = $(TDMTEST_LIBS)

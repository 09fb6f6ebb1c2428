# SPDX-License-Identifier: MIT
# tests: backend (see tests/Makefile.inc)
# test-ref-ops checks the ref oracle on hand-computed cases; test-conformance
# checks every other available backend op by op against ref (it skips when
# there is none). Run one backend / one op:
#   TDM_CONFORMANCE_BACKEND=cpu tests/test-conformance -p /conformance/conv2d_forward
check_PROGRAMS += tests/test-ref-ops tests/test-conformance
TESTS += tests/test-ref-ops tests/test-conformance

tests_test_conformance_SOURCES = \
	tests/test-conformance.c \
	tests/conformance-vector.c \
	tests/conformance-chain.c \
	tests/conformance-pool.c \
	tests/conformance-util.c \
	tests/conformance-util.h

# test-device: device information and allocator counts, streams and events
# (ref's copy stream made slow with TDM_REF_COPY_DELAY_US), the loss
# statistics op against softmax_xent, and collective work holding its
# tensors (with the deferred fixture collective), on ref and cpu.
check_PROGRAMS += tests/test-device
TESTS += tests/test-device

# test-device-run: what a run asks of its devices: precision (refused on
# ref and cpu), copies between devices (peer on ref, staged otherwise),
# the local rank's device.
check_PROGRAMS += tests/test-device-run
TESTS += tests/test-device-run

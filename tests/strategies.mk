# SPDX-License-Identifier: MIT
# tests: strategies (see tests/Makefile.inc) - dp, ddp and zero1.
#   test-ddp               unused / frozen parameters, a world of one (g_test)
#   equivalence.sh         ddp, zero1 (shm, gloo) and dp train the same model
#                          as one process with the global batch
#   strategies-faults.sh   a killed rank, a skipped collective, a misconfigured job
#   strategies-mpirun.sh   mpirun -np 2 tandem train --strategy ddp
#   staged-ddp.sh          ddp through host-staged shm/gloo (device memory
#                          not host memory) = unstaged = single
#   dp-copies.sh           dp copies peer to peer on ref, through the host
#                          between backends (TDM_PROFILE's counts)
#   save-ranks.sh          --save with {rank} on every rank; tandem compare
check_PROGRAMS += tests/test-ddp

TDM_STRATEGY_TESTS = \
	tests/equivalence.sh \
	tests/strategies-faults.sh \
	tests/strategies-mpirun.sh \
	tests/netns-two-hosts.sh \
	tests/staged-ddp.sh \
	tests/dp-copies.sh \
	tests/save-ranks.sh
TESTS += tests/test-ddp $(TDM_STRATEGY_TESTS)
EXTRA_DIST += $(TDM_STRATEGY_TESTS) tests/strategies-lib.sh tests/compare-weights.py

# SPDX-License-Identifier: MIT
# tests: checkpoints (see tests/Makefile.inc)
#   test-checkpoint        the file format: checksums, truncation, the
#                          directory (latest, best, keep-last), a checkpoint
#                          of another model refused (g_test)
#   checkpoint-resume.sh   stopped and resumed runs equal uninterrupted ones
#                          bit for bit (single, ddp, zero1), and across
#                          world sizes 2 -> 1 -> 2 within 1e-6
#   checkpoint-keep.sh     --keep-last, --keep-best, bad combinations of flags
#   checkpoint-crash.sh    kill -9 in the middle of saves leaves the newest
#                          complete checkpoint loadable; tandem run
#                          --max-restarts resumes from the directory
check_PROGRAMS += tests/test-checkpoint
TDM_CHECKPOINT_TESTS = \
	tests/checkpoint-resume.sh \
	tests/checkpoint-keep.sh \
	tests/checkpoint-crash.sh
TESTS += tests/test-checkpoint $(TDM_CHECKPOINT_TESTS)
EXTRA_DIST += $(TDM_CHECKPOINT_TESTS) tests/fuzz/fuzz-checkpoint.c

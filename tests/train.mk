# SPDX-License-Identifier: MIT
# tests: train (see tests/Makefile.inc)
#
# Unit tests of data, I/O and config (GLib g_test), and end-to-end tests of
# `tandem train` / `tandem eval` (shell scripts printing TAP). The fuzz
# targets under tests/fuzz/ are built only by hand with clang (see each
# file's header), never by `make check`.
check_PROGRAMS += tests/test-io tests/test-data
TESTS += tests/test-io tests/test-data tests/bad-input.sh tests/train-smoke.sh tests/train-torch.sh \
	tests/ops-profile.sh tests/train-stats.sh tests/train-precision.sh \
	tests/train-zoo.sh tests/train-zoo-vgg.sh tests/finetune-torch.sh tests/early-stop.sh \
	tests/example-transfer.sh
EXTRA_DIST += tests/bad-input.sh tests/train-smoke.sh tests/train-torch.sh tests/ops-profile.sh \
	tests/train-stats.sh tests/train-precision.sh \
	tests/train-zoo.sh tests/train-zoo-vgg.sh tests/train-zoo-lib.sh \
	tests/finetune-torch.sh tests/finetune-reference.py tests/early-stop.sh \
	tests/fuzz/fuzz-idx.c tests/fuzz/fuzz-safetensors.c tests/fuzz/fuzz-config.c \
	tests/fuzz/fuzz-file.h tests/example-transfer.sh

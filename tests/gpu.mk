# SPDX-License-Identifier: MIT
# tests: the GPU check (see tests/Makefile.inc).
#   tests/gpu/run       the GPU check script (stages 0-6, 480 s on a GPU machine)
#   tests/gpu/bundle    builds the bundle of Tandem that the script runs there
#   gpu-dry-run.sh      tests/gpu/run --dry-run, stages 0, 2, 4 (and 6 with the
#                       test hooks), against
#                       cpu (or ref) and PyTorch on the CPU: keeps the script
#                       working between GPU runs (skips without torch)
TESTS += tests/gpu-dry-run.sh
EXTRA_DIST += tests/gpu-dry-run.sh tests/gpu/run tests/gpu/bundle

# SPDX-License-Identifier: MIT
# tests: loader (see tests/Makefile.inc) - the parallel loader and its
# samplers: identical batches for any worker count, ordered delivery under
# jittered workers, exact resumption (another worker count, another world
# size), equal steps per rank, reshuffling, errors naming the file, freeing
# mid-epoch; and the trainer's data-wait log and warning. Not a test: the
# loader benchmark, bench/loader.
check_PROGRAMS += tests/test-loader
TESTS += tests/test-loader tests/loader-trainer.sh
EXTRA_DIST += tests/loader-trainer.sh bench/loader bench/loader-driver.c bench/peer_loader.py

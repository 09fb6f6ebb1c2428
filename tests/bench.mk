# SPDX-License-Identifier: MIT
# tests: the measuring parts of the benchmarks (see tests/Makefile.inc):
# bench/fma-peak and bench/peer_folder.py's flop count. The benchmarks
# themselves are run by hand (bench/RESULTS.md).
TESTS += tests/bench-tools.sh
EXTRA_DIST += tests/bench-tools.sh

# SPDX-License-Identifier: MIT
# tests: data (see tests/Makefile.inc) - the cifar and imagefolder dataset
# readers, on fixtures that tests/make-fixtures.py makes at test time, and
# `tandem train` on them (tests/datasets-cli.sh); `tandem data preview`
# (tests/data-preview.sh). The fuzz targets
# tests/fuzz/fuzz-cifar.c and tests/fuzz/fuzz-png.c are built by hand (see
# their headers).
check_PROGRAMS += tests/test-datasets
TESTS += tests/test-datasets tests/datasets-cli.sh tests/data-preview.sh
EXTRA_DIST += tests/datasets-cli.sh tests/data-preview.sh tests/make-fixtures.py \
	tests/fuzz/fuzz-cifar.c tests/fuzz/fuzz-png.c tests/fuzz/fuzz-dataset.h

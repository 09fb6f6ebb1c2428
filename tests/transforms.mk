# SPDX-License-Identifier: MIT
# tests: transforms - the pipeline parser, shapes, determinism (test-transforms),
# and every transform against torchvision (transforms-oracle.py, which runs
# transform-apply on real Fashion-MNIST images and a random RGB image).
check_PROGRAMS += tests/test-transforms tests/transform-apply
TESTS += tests/test-transforms tests/transforms-oracle.py
EXTRA_DIST += tests/transforms-oracle.py tests/fuzz/fuzz-pipeline.c

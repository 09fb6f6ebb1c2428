# tests: transforms - the pipeline parser, shapes, determinism (test-transforms),
# and every transform against torchvision (transforms-oracle.py, which runs
# transform-apply on real Fashion-MNIST images and a random RGB image).
check_PROGRAMS += tests/test-transforms tests/transform-apply
tests_test_transforms_SOURCES = tests/test-transforms.c
tests_test_transforms_CFLAGS = $(TDMTEST_CFLAGS)
tests_test_transforms_LDADD = $(TDMTEST_LIBS)
tests_transform_apply_SOURCES = tests/transform-apply.c
tests_transform_apply_CFLAGS = $(TDMTEST_CFLAGS)
tests_transform_apply_LDADD = $(TDMTEST_LIBS)
TESTS += tests/test-transforms tests/transforms-oracle.py
EXTRA_DIST += tests/transforms-oracle.py tests/fuzz/fuzz-pipeline.c

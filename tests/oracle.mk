# SPDX-License-Identifier: MIT
# tests: oracle - whole models (forward, backward, 3 SGD steps) against PyTorch.
# run.sh computes the reference with $(TORCH_PYTHON) (skips without torch) and
# runs test-oracle on it. The torchvision-*.sh tests do the same for the
# ImageNet models (torchvision_reference.py, test-torchvision), one test per
# family so that each stays within seconds; oracle-util.c holds what the two
# programs share.
check_PROGRAMS += tests/oracle/test-oracle tests/oracle/test-torchvision
tests_oracle_test_oracle_SOURCES = tests/oracle/test-oracle.c tests/oracle/oracle-util.c \
	tests/oracle/oracle-util.h
tests_oracle_test_torchvision_SOURCES = tests/oracle/test-torchvision.c \
	tests/oracle/oracle-util.c tests/oracle/oracle-util.h
TORCHVISION_TESTS = tests/oracle/torchvision-resnet18.sh tests/oracle/torchvision-resnet50.sh tests/oracle/torchvision-vgg11.sh \
	tests/oracle/torchvision-vgg16.sh tests/oracle/torchvision-vgg16-bn.sh \
	tests/oracle/torchvision-alexnet.sh
TESTS += tests/oracle/run.sh $(TORCHVISION_TESTS)
EXTRA_DIST += tests/oracle/run.sh tests/oracle/make_reference.py tests/oracle/torch_zoo.py \
	tests/oracle/torchvision.sh tests/oracle/torchvision_reference.py $(TORCHVISION_TESTS)

# tests: oracle - whole models (forward, backward, 3 SGD steps) against PyTorch.
# run.sh computes the reference with $(TORCH_PYTHON) (skips without torch) and
# runs test-oracle on it.
check_PROGRAMS += tests/oracle/test-oracle
TESTS += tests/oracle/run.sh
EXTRA_DIST += tests/oracle/run.sh tests/oracle/make_reference.py tests/oracle/torch_zoo.py

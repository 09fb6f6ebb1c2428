# tests: install + examples (see tests/Makefile.inc).
# install-example.sh stages `make install` into a temporary DESTDIR, builds
# examples/train-mlp.c and the out-of-tree plugin in examples/plugin/ against
# it with pkg-config, and runs them; the examples are not built by this tree.
TESTS += tests/install-example.sh
EXTRA_DIST += \
	tests/install-example.sh \
	examples/README.md \
	examples/train-mlp.c \
	examples/plugin/Makefile \
	examples/plugin/README.md \
	examples/plugin/sign-sgd.c
# `make install` relinks the plugins in the build tree: libtool moves each
# one aside while it links the copy it installs, so a test loading plugins
# meanwhile finds none (seen as the oracle test's cpu cases skipped). The
# install test therefore starts once every other test has finished.
tests/install-example.log: $(TEST_LOGS:tests/install-example.log=)

# SPDX-License-Identifier: MIT
# tests: install + examples (see tests/Makefile.inc).
# install-example.sh stages `make install` into a temporary DESTDIR, builds
# examples/train-mlp.c and the out-of-tree plugin in examples/plugin/ against
# it with pkg-config, and runs them; the examples are not built by this tree.
# install-plugins.sh does the same for the plugin kit's examples in
# examples/plugins/ (a strategy, a transform, a dataset reader) and trains
# with them from the stage.
TESTS += tests/install-example.sh tests/install-plugins.sh
# (The examples they build reach the tarball as installed docs: docs/docs.mk.)
EXTRA_DIST += \
	tests/install-example.sh \
	tests/install-plugins.sh \
	tests/strategy-ranks.c
# `make install` relinks the plugins in the build tree: libtool moves each
# one aside while it links the copy it installs, so a test loading plugins
# meanwhile finds none (seen as the oracle test's cpu cases skipped). The
# install test therefore starts once every other test has finished.
# (Not on install-plugins.log, which waits for it: make would drop one of
# the two edges of that cycle, and the two installs could overlap.)
TDM_LOGS_NOT_EXAMPLE = $(TEST_LOGS:tests/install-example.log=)
tests/install-example.log: $(TDM_LOGS_NOT_EXAMPLE:tests/install-plugins.log=)
# The kit's test stages its own install, after install-example.sh's (two
# `make install` at once would relink the same plugins).
tests/install-plugins.log: tests/install-example.log

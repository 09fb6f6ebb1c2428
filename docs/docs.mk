# SPDX-License-Identifier: MIT
# docs/docs.mk: the documentation `make install` puts in $(docdir) (by
# default $(prefix)/share/doc/tandem), laid out as in the source tree, so
# that the guides' relative links (docs/plugins/strategy.md to
# examples/plugins/localsgd/) still work there: the README and the licence,
# the architecture and each plugin kind's guide (docs/), and the examples
# (examples/), each with its Makefile or README, to copy and build against
# the installed headers. `make uninstall` removes them again.
# tests/install-example.sh fails on a file of docs/ or examples/ that is
# not listed here; libtandem-1-dev takes them from $(docdir) (debian/).
nobase_dist_doc_DATA = \
	README.md \
	LICENSE \
	docs/README.md \
	docs/abi.md \
	docs/architecture.md \
	docs/testing.md \
	docs/plugins/README.md \
	docs/plugins/backend.md \
	docs/plugins/collective.md \
	docs/plugins/dataset.md \
	docs/plugins/optimizer.md \
	docs/plugins/strategy.md \
	docs/plugins/transform.md \
	docs/reference/README.md \
	examples/README.md \
	examples/fashion-mlp.ini \
	examples/train-mlp.c \
	examples/plugin/Makefile \
	examples/plugin/README.md \
	examples/plugin/sign-sgd.c \
	examples/plugins/README.md \
	examples/plugins/invert/Makefile \
	examples/plugins/invert/README.md \
	examples/plugins/invert/invert.c \
	examples/plugins/localsgd/Makefile \
	examples/plugins/localsgd/README.md \
	examples/plugins/localsgd/localsgd.c \
	examples/plugins/rawimg/Makefile \
	examples/plugins/rawimg/README.md \
	examples/plugins/rawimg/rawimg.c \
	examples/transfer-learning/README.md
# The transfer-learning example's scripts keep their execute bits (automake
# has no SCRIPTS in docdir itself).
tdmtransferdir = $(docdir)/examples/transfer-learning
dist_tdmtransfer_SCRIPTS = \
	examples/transfer-learning/run.sh \
	examples/transfer-learning/make_images.py

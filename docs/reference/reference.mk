# SPDX-License-Identifier: MIT
# docs/reference: the API reference, built by `make doc` with gtk-doc from
# the comments of the public headers (docs/reference/README.md). Not part
# of `make all`: gtk-doc is optional (docs/reference/configure.m4). Out of
# a build directory, into docs/api/ (html/index.html). It fails when a
# public symbol, field, parameter or value has no comment
# (docs/api/tandem-undocumented.txt, checked by check-coverage.sh) or when
# gtk-doc warns (docs/api/mkdb.log).
TDM_DOC_DIR = docs/api
EXTRA_DIST += docs/reference/configure.m4 docs/reference/reference.mk

doc:
	@if test "$(TDM_HAVE_GTKDOC)" != yes; then \
	    echo "make doc: $(TDM_GTKDOC_WHY)" >&2; exit 1; fi
	$(AM_V_at)rm -rf $(TDM_DOC_DIR) && $(MKDIR_P) $(TDM_DOC_DIR)/html
	$(AM_V_GEN)cd $(TDM_DOC_DIR) && \
	$(GTKDOC_SCAN) --module=tandem --source-dir='$(abs_top_srcdir)/include/tandem' \
	    --ignore-headers=tandem.h --ignore-decorators='TDM_API' --output-dir=. && \
	$(SHELL) '$(abs_top_srcdir)/docs/reference/scan-extra.sh' \
	    '$(abs_top_srcdir)/include/tandem' '$(CC)' && \
	cp '$(abs_top_srcdir)/docs/reference/tandem-docs.xml' . && \
	$(GTKDOC_MKDB) --module=tandem --output-format=xml \
	    --source-dir='$(abs_top_srcdir)/include/tandem' --main-sgml-file=tandem-docs.xml \
	    >mkdb.log 2>&1 && \
	cd html && $(GTKDOC_MKHTML) --path="$$(cd .. && pwd)" tandem ../tandem-docs.xml >../mkhtml.log 2>&1
	@sed -n '1,2p' $(TDM_DOC_DIR)/tandem-undocumented.txt | sed 's/^/make doc: /'
	@echo "make doc: $(TDM_DOC_DIR)/html/index.html (gtk-doc's warnings: $(TDM_DOC_DIR)/mkdb.log)"
	@$(SHELL) '$(abs_top_srcdir)/docs/reference/check-coverage.sh' $(TDM_DOC_DIR)

clean-local: clean-doc
clean-doc:
	-rm -rf $(TDM_DOC_DIR)

.PHONY: doc clean-doc

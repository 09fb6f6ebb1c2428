# SPDX-License-Identifier: MIT
# tests: ABI (see tests/Makefile.inc and docs/abi.md).
#
# tests/abi/symbols.txt lists every symbol libtandem-1.so exports and
# tests/abi/layout.txt the size and field offsets of every public struct,
# as built on x86_64. tests/abi-lists.sh fails on a symbol added or
# removed without the list; tests/test-abi-layout checks the layout with
# sizeof and offsetof, compiled from the list (tests/abi-layout.inc, made
# here by awk). After an intended change of the API, one command rewrites
# both lists in the source tree:
#     make abi-update
# and the diff of tests/abi/ then shows the change for review (and whether
# -version-info in configure.ac must change: docs/abi.md).
TESTS += tests/abi-lists.sh tests/test-abi-layout
check_PROGRAMS += tests/test-abi-layout
tests_test_abi_layout_SOURCES = tests/test-abi-layout.c
nodist_tests_test_abi_layout_SOURCES = tests/abi-layout.inc
# The test's object includes the generated list (no BUILT_SOURCES, which
# `make all` would make too).
tests/test-abi-layout.$(OBJEXT): tests/abi-layout.inc
CLEANFILES += tests/abi-layout.inc tests/abi-update.c tests/abi-update
EXTRA_DIST += tests/abi-lists.sh tests/abi/symbols.txt tests/abi/layout.txt \
	tests/abi/list-fields.py

# "Type - N" is sizeof(Type), "Type field N" offsetof(Type, field).
tests/abi-layout.inc: $(srcdir)/tests/abi/layout.txt
	$(AM_V_GEN)$(MKDIR_P) tests && \
	$(AWK) '/^#/ || NF == 0 { next } \
	    $$2 == "-" { printf "TDM_ABI_SIZE(%s, %s)\n", $$1, $$3; next } \
	    { printf "TDM_ABI_FIELD(%s, %s, %s)\n", $$1, $$2, $$3 }' \
	    $(srcdir)/tests/abi/layout.txt >$@.tmp && mv $@.tmp $@

# The Debian symbols file (a git checkout has debian/, a tarball does not):
# abi-update rewrites its list with the same symbols, each keeping the
# version it first appeared in, a new one getting this version.
TDM_DEB_SYMBOLS = $(srcdir)/debian/libtandem-1-0.symbols

# The exported symbols: defined, in the dynamic table (nm -D).
TDM_ABI_SYMBOLS = $(NM) -D --defined-only core/.libs/libtandem-1.so | \
	$(AWK) 'NF == 3 { print $$3 }' | LC_ALL=C sort

abi-update: core/libtandem-1.la
	@case '$(host_cpu)' in x86_64) ;; *) \
	    echo "abi-update: the lists are of x86_64; this build is for $(host_cpu)" >&2; exit 1 ;; esac
	$(AM_V_GEN){ \
	    echo '# Symbols libtandem-1.so exports (make abi-update writes this file;'; \
	    echo '# tests/abi-lists.sh checks it). See docs/abi.md.'; \
	    $(TDM_ABI_SYMBOLS); \
	} >$(srcdir)/tests/abi/symbols.txt.tmp && \
	mv $(srcdir)/tests/abi/symbols.txt.tmp $(srcdir)/tests/abi/symbols.txt
	$(AM_V_GEN)if test -f $(TDM_DEB_SYMBOLS); then \
	    $(TDM_ABI_SYMBOLS) | $(AWK) -v version='$(PACKAGE_VERSION)' \
	        'FNR == NR && /^ / { split($$1, s, "@"); since[s[1]] = $$2; next } \
	         FNR == NR { print; next } \
	         { printf " %s@Base %s\n", $$1, ($$1 in since) ? since[$$1] : version }' \
	        $(TDM_DEB_SYMBOLS) - >$(TDM_DEB_SYMBOLS).tmp && \
	    mv $(TDM_DEB_SYMBOLS).tmp $(TDM_DEB_SYMBOLS); fi
	$(AM_V_GEN)echo '#include <tandem/tandem.h>' | \
	    $(CPP) -I$(top_srcdir)/include -I$(top_builddir) $(GLIB_CFLAGS) - | \
	    python3 $(srcdir)/tests/abi/list-fields.py | \
	    $(AWK) 'BEGIN { print "#include <stddef.h>"; print "#include <stdio.h>"; \
	                    print "#include <tandem/tandem.h>"; print "int main(void)"; print "{"; } \
	        $$2 == "-" { printf "    printf(\"%s - %%zu\\n\", sizeof(%s));\n", $$1, $$1; next } \
	        { printf "    printf(\"%s %s %%zu\\n\", offsetof(%s, %s));\n", $$1, $$2, $$1, $$2 } \
	        END { print "    return 0;"; print "}" }' >tests/abi-update.c
	$(AM_V_CC)$(CC) $(TDM_CFLAGS) -Wno-error -o tests/abi-update tests/abi-update.c
	$(AM_V_GEN){ \
	    echo '# Size ("-") and field offsets of the public structs on x86_64 (make'; \
	    echo '# abi-update writes this file; tests/test-abi-layout checks it). See docs/abi.md.'; \
	    ./tests/abi-update; \
	} >$(srcdir)/tests/abi/layout.txt.tmp && \
	mv $(srcdir)/tests/abi/layout.txt.tmp $(srcdir)/tests/abi/layout.txt
	@echo "abi-update: rewrote tests/abi/symbols.txt, tests/abi/layout.txt and $(TDM_DEB_SYMBOLS); review with git diff tests/abi/ debian/"

.PHONY: abi-update

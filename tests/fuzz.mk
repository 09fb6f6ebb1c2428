# SPDX-License-Identifier: MIT
# tests: fuzz (see tests/Makefile.inc and docs/testing.md).
#
# `make fuzz` builds the libFuzzer targets of tests/fuzz/ with $(FUZZ_CC)
# (clang; configure checks that it links -fsanitize=fuzzer), each against
# the built libtandem-1.so. The parser a target aims at is compiled into it
# again, instrumented (TDM_FUZZ_SOURCES_<target>): those copies stand in
# for the library's, so libFuzzer sees their coverage and AddressSanitizer
# their memory accesses. `make fuzz-run` runs each target over its seed
# corpus (tests/fuzz/corpus/<target>/, from tests/fuzz/make-corpus.py) for
# FUZZ_SECONDS seconds, FUZZ_JOBS at a time, and fails on any crash,
# leak, timeout or failed assertion, leaving the input that did it in
# tests/fuzz/ (tests/fuzz/run.sh). The test command runs it
# (build-aux/check.sh).
TDM_FUZZ_TARGETS = checkpoint cifar config idx params pipeline png pth safetensors store
if TDM_BUILD_PLOT
TDM_FUZZ_TARGETS += plot-log
endif
if TDM_BUILD_CPU
TDM_FUZZ_TARGETS += cpu-tune
endif
FUZZ_SECONDS = 20
FUZZ_JOBS = 2
TDM_FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address -I$(top_srcdir)/include -I$(top_builddir) \
	-I$(top_srcdir)/core -DTDM_COMPILATION -DTDM_VERSION=\"fuzz\" $(GLIB_CFLAGS)
TDM_FUZZ_LIBS = -L$(top_builddir)/core/.libs -ltandem-1 \
	-Wl,-rpath,$(abs_top_builddir)/core/.libs $(GLIB_LIBS) -lm
TDM_FUZZ_ST = core/safetensors.c core/safetensors-header.c
TDM_FUZZ_SOURCES_checkpoint = core/checkpoint.c $(TDM_FUZZ_ST)
TDM_FUZZ_SOURCES_config = core/config.c core/param-spec.c
TDM_FUZZ_SOURCES_params = core/params.c core/param-spec.c
TDM_FUZZ_SOURCES_pth = core/pth-read.c core/pickle.c $(TDM_FUZZ_ST)
TDM_FUZZ_SOURCES_safetensors = $(TDM_FUZZ_ST)
TDM_FUZZ_SOURCES_plot_log = tools/plot-log.c tools/plot-axis.c tools/plot-draw.c
TDM_FUZZ_FLAGS_checkpoint = $(JSON_GLIB_CFLAGS) $(ZLIB_CFLAGS) $(JSON_GLIB_LIBS) $(ZLIB_LIBS)
TDM_FUZZ_FLAGS_safetensors = $(JSON_GLIB_CFLAGS) $(JSON_GLIB_LIBS)
TDM_FUZZ_FLAGS_pth = $(LIBZIP_CFLAGS) $(JSON_GLIB_CFLAGS) $(LIBZIP_LIBS) $(JSON_GLIB_LIBS)
TDM_FUZZ_SOURCES_cpu_tune = plugins/cpu/cpu-tune.c plugins/cpu/cpu-tune.h plugins/cpu/cpu.h \
	plugins/cpu/cpu-cache.h
TDM_FUZZ_FLAGS_cpu_tune = -I$(top_srcdir)/plugins/cpu
TDM_FUZZ_FLAGS_plot_log = -fsanitize=undefined -I$(top_srcdir)/tools $(JSON_GLIB_CFLAGS) \
	$(CAIRO_CFLAGS) $(JSON_GLIB_LIBS) $(CAIRO_LIBS)
EXTRA_DIST += tests/fuzz/configure.m4 tests/fuzz/run.sh tests/fuzz/make-corpus.py \
	tests/fuzz/corpus
CLEANFILES += tests/fuzz/fuzz-checkpoint tests/fuzz/fuzz-cifar tests/fuzz/fuzz-config \
	tests/fuzz/fuzz-idx tests/fuzz/fuzz-params tests/fuzz/fuzz-pipeline tests/fuzz/fuzz-png \
	tests/fuzz/fuzz-pth tests/fuzz/fuzz-safetensors tests/fuzz/fuzz-store tests/fuzz/fuzz-plot-log \
	tests/fuzz/fuzz-cpu-tune

# One compile per target; a target newer than its sources, the headers
# and the library is kept. cpu-tune compiles the cpu plugin's file into
# its own (`deps`: what it includes).
fuzz: core/libtandem-1.la
	@if test "$(TDM_HAVE_FUZZ)" != yes; then \
	    echo "make fuzz: no libFuzzer: $(TDM_FUZZ_WHY)" >&2; exit 1; fi
	@$(MKDIR_P) tests/fuzz
	@for t in $(TDM_FUZZ_TARGETS); do \
	    out=tests/fuzz/fuzz-$$t; deps=; \
	    case $$t in \
	    checkpoint) srcs='$(TDM_FUZZ_SOURCES_checkpoint)'; flags='$(TDM_FUZZ_FLAGS_checkpoint)' ;; \
	    config) srcs='$(TDM_FUZZ_SOURCES_config)'; flags= ;; \
	    params) srcs='$(TDM_FUZZ_SOURCES_params)'; flags= ;; \
	    pth) srcs='$(TDM_FUZZ_SOURCES_pth)'; flags='$(TDM_FUZZ_FLAGS_pth)' ;; \
	    safetensors) srcs='$(TDM_FUZZ_SOURCES_safetensors)'; flags='$(TDM_FUZZ_FLAGS_safetensors)' ;; \
	    plot-log) srcs='$(TDM_FUZZ_SOURCES_plot_log)'; flags='$(TDM_FUZZ_FLAGS_plot_log)' ;; \
	    cpu-tune) srcs=; deps='$(TDM_FUZZ_SOURCES_cpu_tune)'; flags='$(TDM_FUZZ_FLAGS_cpu_tune)' ;; \
	    *) srcs=; flags= ;; \
	    esac; \
	    paths="$(srcdir)/tests/fuzz/fuzz-$$t.c"; \
	    for s in $$srcs; do paths="$$paths $(srcdir)/$$s"; done; \
	    newer=$$paths; for d in $$deps; do newer="$$newer $(srcdir)/$$d"; done; \
	    if test -f $$out && test -z "$$(find $$newer $(srcdir)/tests/fuzz/*.h \
	            $(srcdir)/include/tandem $(srcdir)/core/*.h core/libtandem-1.la \
	            -newer $$out 2>/dev/null)"; then continue; fi; \
	    echo "  FUZZ     $$out"; \
	    $(FUZZ_CC) $(TDM_FUZZ_CFLAGS) -o $$out $$paths $$flags $(TDM_FUZZ_LIBS) || exit 1; \
	done

fuzz-run: fuzz all-am
	@FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_JOBS='$(FUZZ_JOBS)' \
	    TDM_PLUGIN_SYSTEM_PATH='$(abs_top_builddir)/plugins/.libs' TDM_PLUGIN_PATH= \
	    $(SHELL) $(srcdir)/tests/fuzz/run.sh '$(srcdir)/tests/fuzz' tests/fuzz $(TDM_FUZZ_TARGETS)

.PHONY: fuzz fuzz-run

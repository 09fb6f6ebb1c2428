# SPDX-License-Identifier: MIT
# tests: plot (see tests/Makefile.inc) - `tandem plot`. test-plot-axis
# checks the ticks, labels and smoothing (tools/plot-axis.c, built in; no
# cairo needed); tests/plot.sh plots the logs of short real training runs
# and reads the PNG back with tests/plot-pixels (cairo) to find each run's
# colour in the panels it belongs to, and feeds it bad logs and options.
# The fuzz target tests/fuzz/fuzz-plot-log.c is built by hand (see its
# header).
check_PROGRAMS += tests/test-plot-axis
tests_test_plot_axis_SOURCES = tests/test-plot-axis.c tools/plot-axis.c tools/plot.h
tests_test_plot_axis_LDADD = $(GLIB_LIBS) -lm
TESTS += tests/test-plot-axis tests/plot.sh
EXTRA_DIST += tests/plot.sh tests/fuzz/fuzz-plot-log.c tests/fuzz/plot-log.dict \
	tests/fuzz/plot-log.lsan
if TDM_BUILD_PLOT
check_PROGRAMS += tests/plot-pixels
tests_plot_pixels_CFLAGS = $(TDM_CFLAGS) $(CAIRO_CFLAGS)
tests_plot_pixels_LDADD = $(GLIB_LIBS) $(CAIRO_LIBS)
endif

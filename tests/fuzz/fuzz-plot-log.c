/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-plot-log.c - libFuzzer target for `tandem plot`'s log
 * reader and drawing.
 *
 * Not built by make; from a build directory configured with cairo:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I../include -I. -I../tools \
 *     $(pkg-config --cflags glib-2.0 json-glib-1.0 cairo) ../tests/fuzz/fuzz-plot-log.c \
 *     ../tools/plot-log.c ../tools/plot-axis.c ../tools/plot-draw.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0 json-glib-1.0 cairo) -lm \
 *     -o fuzz-plot-log
 *   LD_LIBRARY_PATH=core/.libs LSAN_OPTIONS=suppressions=../tests/fuzz/plot-log.lsan \
 *     ./fuzz-plot-log -dict=../tests/fuzz/plot-log.dict corpus/
 * (a corpus: a few `tandem train --log-file` logs). Each input is read as
 * a log: it either reads, with no error, or fails with an error naming
 * the file. A log that reads is drawn into a small PNG, its losses on a
 * log scale when the input's first byte is odd, so the axes meet every
 * value a log can hold (null, 1e-300, 1e300, negative, one point).
 */
#include <glib/gstdio.h>

#include <tandem/tandem.h>

#include "fuzz-file.h"
#include "plot.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    const char *path = fuzz_input_file("fuzz-plot-log-XXXXXX.jsonl", data, size);
    if (path == NULL) {
        return 0;
    }
    static char *png;
    if (png == NULL) {
        png = g_strconcat(path, ".png", NULL);
    }
    GError *error = NULL;
    PlotRun *run = plot_run_read(path, &error);
    if (run == NULL) {
        g_assert(error != NULL);
        g_assert(g_str_has_prefix(error->message, path));
        g_error_free(error);
        return 0;
    }
    g_assert(error == NULL);
    run->label = g_strdup("fuzz");
    PlotOptions opt = {300, 200, size > 0 && (data[0] & 1), -1};
    gboolean empty[PLOT_N_PANELS];
    PlotRun *runs[] = {run, run};
    g_assert(plot_draw_png(runs, 1 + (size > 1 && (data[1] & 1)), &opt, png, empty, NULL));
    plot_run_free(run);
    return 0;
}

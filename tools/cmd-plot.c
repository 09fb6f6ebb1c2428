/* SPDX-License-Identifier: MIT */
/* tools/cmd-plot.c - `tandem plot`: training curves from JSON-lines logs.
 *
 * Reads every log named on the command line (`tandem train --log-file`),
 * each in its own colour, and draws them into one PNG (plot-draw.c): so
 * runs with other learning rates, models or world sizes compare side by
 * side. Each log must read in full; the first bad one stops the command
 * with its file and line, before anything is written. A panel that no log
 * has figures for is drawn saying "no data", and named on stdout. The
 * command exists in every build; one without cairo says so and fails, so a
 * script that calls it learns why instead of finding no command.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"
#ifdef HAVE_CAIRO
#include "plot.h"
#endif

#define EXIT_USAGE 2

typedef struct {
    char **labels;
    char *out;
    gboolean log_loss;
    double smooth;
    int width, height;
} PlotArgs;

#ifdef HAVE_CAIRO
static int plot(char **logs, int n_logs, const PlotArgs *args)
{
    GPtrArray *runs = g_ptr_array_new_with_free_func((GDestroyNotify)plot_run_free);
    guint n_labels = args->labels != NULL ? g_strv_length(args->labels) : 0;
    int status = 0;
    GError *error = NULL;
    for (int i = 0; i < n_logs; i++) {
        PlotRun *run = plot_run_read(logs[i], &error);
        if (run == NULL) {
            fprintf(stderr, "tandem plot: %s\n", error->message);
            g_error_free(error);
            status = 1;
            goto out;
        }
        run->label = g_strdup((guint)i < n_labels ? args->labels[i] : logs[i]);
        if (run->records == 0) {
            fprintf(stderr, "tandem plot: warning: %s has no records (a run that has not "
                            "started yet?): its panels are empty\n", logs[i]);
        }
        g_ptr_array_add(runs, run);
    }
    PlotOptions opt = {args->width, args->height, args->log_loss, args->smooth};
    gboolean empty[PLOT_N_PANELS];
    if (!plot_draw_png((PlotRun *const *)runs->pdata, runs->len, &opt, args->out, empty,
                       &error)) {
        fprintf(stderr, "tandem plot: %s\n", error->message);
        g_error_free(error);
        status = 1;
        goto out;
    }
    printf("wrote %s, %dx%d, from %u log%s\n", args->out, args->width, args->height, runs->len,
           runs->len == 1 ? "" : "s");
    for (guint i = 0; i < runs->len; i++) {
        const PlotRun *run = g_ptr_array_index(runs, i);
        printf("  #%06x %s: %" G_GINT64_FORMAT " records, %u step events, %u epochs, %u "
               "evaluations\n", plot_run_colour(i), run->label, run->records,
               run->train_loss->len, run->train_loss_epoch->len, run->test_loss->len);
    }
    for (int p = 0; p < PLOT_N_PANELS; p++) {
        if (empty[p]) {
            printf("no data: %s\n", plot_panel_title(p));
        }
    }
out:
    g_ptr_array_unref(runs);
    return status;
}
#endif

int tdm_cmd_plot(int argc, char **argv)
{
    PlotArgs args = {NULL, NULL, FALSE, -1.0, 1200, 750};
    GOptionEntry entries[] = {
        {"out", 'o', 0, G_OPTION_ARG_FILENAME, &args.out, "PNG file to write", "FILE"},
        {"label", 'L', 0, G_OPTION_ARG_STRING_ARRAY, &args.labels,
         "Legend name of the next log, in order (repeatable; default: the file name)", "NAME"},
        {"log-loss", 0, 0, G_OPTION_ARG_NONE, &args.log_loss,
         "Draw the training and test loss on a log scale", NULL},
        {"smooth", 0, 0, G_OPTION_ARG_DOUBLE, &args.smooth,
         "Weight of the training loss's moving average, 0 (none) to 0.999; default: an "
         "average over about 1/20 of the points",
         "W"},
        {"width", 0, 0, G_OPTION_ARG_INT, &args.width, "Image width in pixels (1200)", "PX"},
        {"height", 0, 0, G_OPTION_ARG_INT, &args.height, "Image height in pixels (750)", "PX"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_set_prgname("tandem plot"); /* --help's "Usage: tandem plot [OPTION...]" */
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("LOG.jsonl [LOG2.jsonl...] - draw training curves into a PNG");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_description(
        ctx, "Panels: training loss per step (each logged step, light, and a smoothed line),\n"
             "test loss and test accuracy per epoch (training's dashed), learning rate per\n"
             "step, images per second per step (epoch means as dots). Each log has its own\n"
             "colour; a panel without figures in any log says \"no data\".\n"
             "\n"
             "Example:\n"
             "  tandem train --lr 0.05 --epochs 5 --log-file a.jsonl\n"
             "  tandem train --lr 0.1 --epochs 5 --log-file b.jsonl\n"
             "  tandem plot a.jsonl b.jsonl --label 'lr 0.05' --label 'lr 0.1' --out curves.png\n");
    GError *error = NULL;
    int status = EXIT_USAGE;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "tandem plot: %s\n", error->message);
        g_error_free(error);
        goto out;
    }
    const int n_logs = argc - 1;
    const guint n_labels = args.labels != NULL ? g_strv_length(args.labels) : 0;
    if (n_logs < 1 || args.out == NULL) {
        fprintf(stderr, "tandem plot: %s\n",
                n_logs < 1 ? "no log to plot: give one or more LOG.jsonl files"
                           : "--out FILE.png is required");
        fprintf(stderr, "Run 'tandem plot --help' for the options.\n");
        goto out;
    }
    if (n_labels > (guint)n_logs) {
        fprintf(stderr, "tandem plot: %u --label for %d log%s: one per log at most\n", n_labels,
                n_logs, n_logs == 1 ? "" : "s");
        goto out;
    }
    if (args.width < 300 || args.width > 16000 || args.height < 200 || args.height > 16000) {
        fprintf(stderr, "tandem plot: --width %d --height %d: the width must be 300..16000 and "
                        "the height 200..16000 pixels\n", args.width, args.height);
        goto out;
    }
    if (args.smooth != -1.0 && !(args.smooth >= 0 && args.smooth < 1)) {
        fprintf(stderr, "tandem plot: --smooth %g is outside 0..0.999 (0: no smoothing)\n",
                args.smooth);
        goto out;
    }
    if (g_file_test(args.out, G_FILE_TEST_IS_DIR)) {
        fprintf(stderr, "tandem plot: --out %s is a directory, not a PNG file\n", args.out);
        goto out;
    }
#ifdef HAVE_CAIRO
    status = plot(argv + 1, n_logs, &args);
#else
    fprintf(stderr, "tandem plot: this tandem was built without cairo, which draws the "
                    "curves (apt-get install libcairo2-dev, then configure and build again)\n");
    status = 1;
#endif
out:
    g_strfreev(args.labels);
    g_free(args.out);
    return status;
}

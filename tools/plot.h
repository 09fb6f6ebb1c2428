/* SPDX-License-Identifier: MIT */
/* tools/plot.h - what `tandem plot` reads from a training log and draws.
 *
 * plot-log.c turns one JSON-lines log (`tandem train --log-file`) into a
 * PlotRun: one array of points per curve, x being the global step or the
 * epoch. plot-draw.c draws any number of runs into one PNG with cairo, and
 * cmd-plot.c holds the command line. A value the log wrote as null (a
 * diverged loss) is kept as NAN, which breaks the line there; so does an x
 * that goes back (a run resumed from an earlier checkpoint that appends to
 * the same log), so no stroke joins the two attempts.
 */
#ifndef TDM_TOOLS_PLOT_H
#define TDM_TOOLS_PLOT_H

#include <glib.h>

typedef struct {
    double x, y;
} PlotPoint;

/* The curves of one log. Every array holds PlotPoint. */
typedef struct {
    char *path;  /* the log, as given */
    char *label; /* what the legend says: --label, else the path */
    char *model; /* the start event's, NULL when there is none */
    gint64 batch_size, world_size;
    gint64 records; /* JSON objects read */
    /* per step event, x = global_step */
    GArray *train_loss; /* the mean loss of the event's steps */
    GArray *lr;
    GArray *step_rate; /* images/s over the event's wall time */
    /* per epoch, x = epoch (1-based) */
    GArray *test_loss, *test_accuracy; /* eval events; accuracy in % */
    GArray *train_loss_epoch, *train_accuracy_epoch; /* epoch events; % */
    /* per epoch, x = the global step that ended it: the epoch's img_per_s */
    GArray *epoch_rate;
} PlotRun;

/* Reads a log (transfer full). Errors name the file and, for a line that
 * is not a JSON object or a field of the wrong type, the line number. */
PlotRun *plot_run_read(const char *path, GError **error);
void plot_run_free(PlotRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlotRun, plot_run_free)

typedef struct {
    int width, height;
    gboolean log_loss; /* the two loss panels on a log scale */
    double smooth;     /* EMA weight of the smoothed loss; < 0: chosen from the points */
} PlotOptions;

/* The panels, in the order they are laid out: a grid of PLOT_COLUMNS x
 * PLOT_ROWS equal cells over the whole image, row by row; the last cell
 * holds the legend. */
enum {
    PLOT_PANEL_TRAIN_LOSS,
    PLOT_PANEL_TEST_LOSS,
    PLOT_PANEL_TEST_ACCURACY,
    PLOT_PANEL_LR,
    PLOT_PANEL_RATE,
    PLOT_N_PANELS
};
#define PLOT_COLUMNS 3
#define PLOT_ROWS 2

/* ---- plot-axis.c ---- */

#define PLOT_MAX_TICKS 40

typedef struct {
    double lo, hi;           /* the first and the last tick */
    double view_lo, view_hi; /* what a panel shows (log10 units on a log axis) */
    gboolean log;
    double ticks[PLOT_MAX_TICKS];
    int n_ticks;
    double step; /* a linear axis's tick step */
} PlotAxis;

/* Ticks over the data's [lo, hi], at most max_ticks of them (at least 3
 * are allowed); `integer`: steps of 1 or more (steps, epochs). One value
 * (lo == hi) gets a range around it. */
void plot_axis_linear(PlotAxis *a, double lo, double hi, int max_ticks, gboolean integer);
/* The same on a log scale: lo and hi must be > 0. */
void plot_axis_log(PlotAxis *a, double lo, double hi, int max_ticks);
/* A tick's label, e.g. "0.5", "20k", "1e-5". */
void plot_axis_format_tick(const PlotAxis *a, double v, char *buf, gsize size);
/* Where v lies on a panel that spans `length` pixels from `from` (a
 * negative length for a y axis that grows upwards). */
double plot_axis_map(const PlotAxis *a, double v, double from, double length);

/* The smoothed line's weight: `asked` when >= 0, else one for n points. */
double plot_smooth_weight(guint n, double asked);
/* The debiased exponential moving average of PlotPoints (transfer full):
 * a NAN stays a gap, and a step back in x starts the average afresh. */
GArray *plot_smooth(const GArray *in, double w);

/* ---- plot-draw.c ---- */

/* The colour of the i-th run (0xRRGGBB); runs past the palette reuse it. */
guint32 plot_run_colour(guint i);

/* Draws the runs into a PNG at `out`, written to a temporary file that is
 * renamed into place. `empty` (may be NULL) gets, for each panel, TRUE when
 * no run had a point for it (the panel then says "no data"). */
gboolean plot_draw_png(PlotRun *const *runs, guint n_runs, const PlotOptions *opt,
                       const char *out, gboolean empty[PLOT_N_PANELS], GError **error);

/* The panels' titles, for messages. */
const char *plot_panel_title(int panel);

#endif /* TDM_TOOLS_PLOT_H */

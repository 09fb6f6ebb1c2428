/* SPDX-License-Identifier: MIT */
/* tools/plot-draw.c - draws the curves of training logs into one PNG.
 *
 * The image is a grid of PLOT_COLUMNS x PLOT_ROWS equal cells: five panels
 * (training loss per step, test loss and test accuracy per epoch, learning
 * rate per step, images per second per step) and the legend. Every run has
 * one colour in every panel. The training loss is drawn twice: each logged
 * point as a thin, light line, and over it a moving average (plot_smooth)
 * that shows the trend through the noise of single batches; the images per
 * second the same way, with each epoch's mean as a dot. The epoch panels
 * draw the test figures solid with a dot per epoch and the training
 * figures of the same epochs dashed, so that overfitting shows as the two
 * lines parting. A line keeps only a few points per pixel column, so a
 * long log draws fast and looks the same. Axes tick at round values
 * (plot-axis.c), as many as the panel has room for. A panel that no run has a point for
 * says "no data" and why, rather than failing: a run without evaluation
 * still plots its training curves.
 */
#include "config.h"

#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <tandem/tandem.h>

#include "plot.h"

/* Distinct on white and for the common colour blindnesses, in this order
 * (matplotlib's "tab10"). */
static const guint32 palette[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd,
                                  0x8c564b, 0xe377c2, 0x17becf, 0x7f7f7f, 0xbcbd22};

guint32 plot_run_colour(guint i)
{
    return palette[i % G_N_ELEMENTS(palette)];
}

typedef struct {
    double x, y, w, h;
} Rect;

typedef enum {
    STYLE_LINE,   /* solid, full colour */
    STYLE_LIGHT,  /* thin and faint: the raw points under a smoothed line */
    STYLE_DASHED, /* the training figure beside a test figure */
    STYLE_DOTS,   /* a dot per point, no line */
} Style;

typedef struct {
    GArray *points; /* PlotPoint */
    guint32 colour;
    Style style;
    gboolean dots; /* a dot on each point as well */
} Series;

typedef struct {
    const char *title, *xlabel, *ylabel;
    const char *empty_why; /* what "no data" means here */
    gboolean log_y, integer_x;
} PanelSpec;

/* The drawing's state: the cairo context and the text size everything
 * scales with. */
typedef struct {
    cairo_t *cr;
    double font; /* pixels */
} Canvas;

static const char *const panel_titles[PLOT_N_PANELS] = {
    [PLOT_PANEL_TRAIN_LOSS] = "Training loss",
    [PLOT_PANEL_TEST_LOSS] = "Test loss",
    [PLOT_PANEL_TEST_ACCURACY] = "Test accuracy",
    [PLOT_PANEL_LR] = "Learning rate",
    [PLOT_PANEL_RATE] = "Images per second",
};

const char *plot_panel_title(int panel)
{
    return panel >= 0 && panel < PLOT_N_PANELS ? panel_titles[panel] : "?";
}

/* ---- text ------------------------------------------------------------------ */

static void set_rgb(cairo_t *cr, guint32 rgb, double alpha)
{
    cairo_set_source_rgba(cr, ((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0,
                          (rgb & 0xff) / 255.0, alpha);
}

static void set_font(Canvas *cv, double scale, gboolean bold)
{
    cairo_select_font_face(cv->cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cv->cr, cv->font * scale);
}

static double text_width(Canvas *cv, const char *text)
{
    cairo_text_extents_t ext;
    cairo_text_extents(cv->cr, text, &ext);
    return ext.x_advance;
}

/* Text whose reference point (0: left, 0.5: centre, 1: right of the
 * baseline's extent) is at x, its baseline at y. */
static void draw_text(Canvas *cv, const char *text, double x, double y, double align)
{
    cairo_move_to(cv->cr, x - align * text_width(cv, text), y);
    cairo_show_text(cv->cr, text);
}

/* The text, cut with "..." until it fits in `width` (transfer full): at
 * its start for a path, which keeps its file name; else at its end. */
static char *text_fit(Canvas *cv, const char *text, double width, gboolean cut_start)
{
    if (text_width(cv, text) <= width) {
        return g_strdup(text);
    }
    const glong n = g_utf8_strlen(text, -1);
    for (glong keep = n - 1; keep > 0; keep--) {
        const char *mid = g_utf8_offset_to_pointer(text, cut_start ? n - keep : keep);
        g_autofree char *head = cut_start ? NULL : g_strndup(text, mid - text);
        g_autofree char *cut =
            cut_start ? g_strconcat("...", mid, NULL) : g_strconcat(head, "...", NULL);
        if (text_width(cv, cut) <= width) {
            return g_steal_pointer(&cut);
        }
    }
    return g_strdup("...");
}

/* ---- a panel ----------------------------------------------------------------- */

/* A point the panel can show: finite, and not so far out (past 1e100, or
 * below 1e-100 on a log scale) that no training run has such a figure and
 * the axis arithmetic would overflow; such a point is a gap. */
static gboolean point_usable(const PlotPoint *p, gboolean log_y)
{
    return fabs(p->x) <= 1e100 && fabs(p->y) <= 1e100 && (!log_y || p->y >= 1e-100);
}

/* A line through many points, of which it keeps, per pixel column, only
 * the first, the lowest, the highest and the last: it looks the same, and
 * cairo strokes a few thousand points where a long log has millions. */
typedef struct {
    cairo_t *cr;
    gboolean open;      /* a line is under way */
    int n;              /* points of the pending column */
    double pt[4][2];    /* its first, lowest (greatest y), highest, last */
    gboolean low_first; /* the lowest came before the highest */
    int column;
} Polyline;

static void polyline_emit(Polyline *pl, const double *pt)
{
    if (pl->open) {
        cairo_line_to(pl->cr, pt[0], pt[1]);
    } else {
        cairo_move_to(pl->cr, pt[0], pt[1]);
        pl->open = TRUE;
    }
}

static void polyline_flush(Polyline *pl)
{
    if (pl->n == 0) {
        return;
    }
    polyline_emit(pl, pl->pt[0]);
    if (pl->n > 1) {
        polyline_emit(pl, pl->pt[pl->low_first ? 1 : 2]);
        polyline_emit(pl, pl->pt[pl->low_first ? 2 : 1]);
        polyline_emit(pl, pl->pt[3]);
    }
    pl->n = 0;
}

static void polyline_add(Polyline *pl, double x, double y)
{
    int column = (int)floor(x);
    if (pl->n > 0 && column != pl->column) {
        polyline_flush(pl);
    }
    if (pl->n == 0) {
        pl->column = column;
        for (int k = 0; k < 4; k++) {
            pl->pt[k][0] = x;
            pl->pt[k][1] = y;
        }
        pl->low_first = TRUE;
    } else {
        if (y > pl->pt[1][1]) {
            pl->pt[1][0] = x;
            pl->pt[1][1] = y;
            pl->low_first = FALSE; /* the newest of the two */
        }
        if (y < pl->pt[2][1]) {
            pl->pt[2][0] = x;
            pl->pt[2][1] = y;
            pl->low_first = TRUE;
        }
        pl->pt[3][0] = x;
        pl->pt[3][1] = y;
    }
    pl->n++;
}

/* Ends the line: the next point starts a new one. */
static void polyline_break(Polyline *pl)
{
    polyline_flush(pl);
    pl->open = FALSE;
}

static void draw_series(Canvas *cv, const Series *s, const PlotAxis *xa, const PlotAxis *ya,
                        const Rect *area)
{
    cairo_t *cr = cv->cr;
    const double u = cv->font / 12.0; /* one line-width unit */
    const PlotPoint *p = (const PlotPoint *)(void *)s->points->data;
    const guint n = s->points->len;
    cairo_save(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    set_rgb(cr, s->colour, s->style == STYLE_LIGHT ? 0.3 : 1.0);
    cairo_set_line_width(cr, s->style == STYLE_LIGHT  ? 1.0 * u
                             : s->style == STYLE_LINE ? 2.0 * u
                                                      : 1.5 * u);
    if (s->style == STYLE_DASHED) {
        double dash[] = {6 * u, 4 * u};
        cairo_set_dash(cr, dash, 2, 0);
    }
    if (s->style != STYLE_DOTS) {
        /* a gap at each unusable point and where x goes back */
        Polyline pl = {.cr = cr};
        double last_x = -INFINITY;
        for (guint i = 0; i < n; i++) {
            if (!point_usable(&p[i], ya->log)) {
                polyline_break(&pl);
                continue;
            }
            if (p[i].x < last_x) {
                polyline_break(&pl);
            }
            polyline_add(&pl, plot_axis_map(xa, p[i].x, area->x, area->w),
                         plot_axis_map(ya, p[i].y, area->y + area->h, -area->h));
            last_x = p[i].x;
        }
        polyline_break(&pl);
        cairo_stroke(cr);
    }
    if (s->dots) {
        for (guint i = 0; i < n; i++) {
            if (point_usable(&p[i], ya->log)) {
                cairo_new_sub_path(cr);
                cairo_arc(cr, plot_axis_map(xa, p[i].x, area->x, area->w),
                          plot_axis_map(ya, p[i].y, area->y + area->h, -area->h), 3.0 * u, 0,
                          2 * G_PI);
            }
        }
        cairo_fill(cr);
    }
    cairo_restore(cr);
}

/* Draws a panel in `cell`; FALSE when no series had a usable point (the
 * panel then says "no data"). */
static gboolean draw_panel(Canvas *cv, const Rect *cell, const PanelSpec *spec,
                           const Series *series, guint n_series)
{
    cairo_t *cr = cv->cr;
    const double f = cv->font;
    Rect area = {cell->x + 5.5 * f, cell->y + 2.6 * f, cell->w - 7.0 * f, cell->h - 5.8 * f};

    set_font(cv, 1.15, TRUE);
    set_rgb(cr, 0x222222, 1);
    g_autofree char *title = text_fit(cv, spec->title, cell->w - f, FALSE);
    draw_text(cv, title, cell->x + cell->w / 2, cell->y + 1.6 * f, 0.5);

    double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
    guint points = 0;
    for (guint s = 0; s < n_series; s++) {
        const PlotPoint *p = (const PlotPoint *)(void *)series[s].points->data;
        for (guint i = 0; i < series[s].points->len; i++) {
            points++;
            if (point_usable(&p[i], spec->log_y)) {
                x_lo = MIN(x_lo, p[i].x);
                x_hi = MAX(x_hi, p[i].x);
                y_lo = MIN(y_lo, p[i].y);
                y_hi = MAX(y_hi, p[i].y);
            }
        }
    }
    cairo_set_line_width(cr, 1);
    set_rgb(cr, 0xbbbbbb, 1);
    cairo_rectangle(cr, area.x + 0.5, area.y + 0.5, area.w, area.h);
    cairo_stroke(cr);
    if (!(x_hi >= x_lo)) {
        const char *why = points == 0 ? spec->empty_why
                          : spec->log_y ? "no value above 0 for a log scale"
                                        : "no finite value (all null, or beyond 1e100)";
        set_font(cv, 1.6, TRUE);
        set_rgb(cr, 0x999999, 1);
        draw_text(cv, "no data", area.x + area.w / 2, area.y + area.h / 2, 0.5);
        set_font(cv, 0.95, FALSE);
        g_autofree char *fitted = text_fit(cv, why, area.w - f, FALSE);
        draw_text(cv, fitted, area.x + area.w / 2, area.y + area.h / 2 + 1.8 * f, 0.5);
        return FALSE;
    }

    /* as many x ticks as their labels leave room for */
    PlotAxis xa, ya;
    set_font(cv, 0.9, FALSE);
    for (int room = (int)(area.w / (5.0 * f)) + 1;; room--) {
        plot_axis_linear(&xa, x_lo, x_hi, room, spec->integer_x);
        double widest = 0;
        for (int i = 0; i < xa.n_ticks; i++) {
            char label[48];
            plot_axis_format_tick(&xa, xa.ticks[i], label, sizeof(label));
            widest = MAX(widest, text_width(cv, label));
        }
        if (room <= 3 || xa.n_ticks * (widest + 1.5 * f) <= area.w) {
            break;
        }
    }
    if (spec->log_y) {
        plot_axis_log(&ya, y_lo, y_hi, (int)(area.h / (2.2 * f)) + 1);
    } else {
        plot_axis_linear(&ya, y_lo, y_hi, (int)(area.h / (3.0 * f)) + 1, FALSE);
    }

    /* grid and tick labels */
    set_font(cv, 0.9, FALSE);
    char label[48];
    for (int i = 0; i < xa.n_ticks; i++) {
        double px = round(plot_axis_map(&xa, xa.ticks[i], area.x, area.w)) + 0.5;
        set_rgb(cr, 0xe6e6e6, 1);
        cairo_move_to(cr, px, area.y + 1);
        cairo_line_to(cr, px, area.y + area.h);
        cairo_stroke(cr);
        set_rgb(cr, 0x444444, 1);
        plot_axis_format_tick(&xa, xa.ticks[i], label, sizeof(label));
        draw_text(cv, label, px, area.y + area.h + 1.3 * f, 0.5);
    }
    double labelled[PLOT_MAX_TICKS];
    int n_labelled = 0;
    for (int i = 0; i < ya.n_ticks; i++) {
        double py = round(plot_axis_map(&ya, ya.ticks[i], area.y + area.h, -area.h)) + 0.5;
        set_rgb(cr, 0xe6e6e6, 1);
        cairo_move_to(cr, area.x + 1, py);
        cairo_line_to(cr, area.x + area.w, py);
        cairo_stroke(cr);
    }
    /* a log axis crowds its ticks at the top of each decade: the powers of
     * ten are labelled first, then 2 and 5 times them, then the others,
     * each where it does not touch a label already there */
    set_rgb(cr, 0x444444, 1);
    for (int rank = 0; rank < 3; rank++) {
        for (int i = 0; i < ya.n_ticks; i++) {
            double m = round(ya.ticks[i] / pow(10.0, floor(log10(ya.ticks[i]) + 1e-9)));
            int tick_rank = !ya.log ? 0 : m == 1 ? 0 : m == 2 || m == 5 ? 1 : 2;
            double py = round(plot_axis_map(&ya, ya.ticks[i], area.y + area.h, -area.h)) + 0.5;
            gboolean room = tick_rank == rank;
            for (int k = 0; room && ya.log && k < n_labelled; k++) {
                room = fabs(labelled[k] - py) >= 1.1 * f;
            }
            if (room) {
                labelled[n_labelled++] = py;
                plot_axis_format_tick(&ya, ya.ticks[i], label, sizeof(label));
                draw_text(cv, label, area.x - 0.4 * f, py + 0.35 * f, 1.0);
            }
        }
    }
    set_rgb(cr, 0x888888, 1);
    cairo_rectangle(cr, area.x + 0.5, area.y + 0.5, area.w, area.h);
    cairo_stroke(cr);

    /* axis labels */
    set_font(cv, 1.0, FALSE);
    set_rgb(cr, 0x222222, 1);
    draw_text(cv, spec->xlabel, area.x + area.w / 2, area.y + area.h + 2.7 * f, 0.5);
    cairo_save(cr);
    cairo_translate(cr, cell->x + 1.2 * f, area.y + area.h / 2);
    cairo_rotate(cr, -G_PI / 2);
    g_autofree char *ylabel = g_strdup_printf("%s%s", spec->ylabel, spec->log_y ? " (log)" : "");
    draw_text(cv, ylabel, 0, 0, 0.5);
    cairo_restore(cr);

    cairo_save(cr);
    cairo_rectangle(cr, area.x, area.y, area.w + 1, area.h + 1);
    cairo_clip(cr);
    /* the faint lines first: no run's raw points hide another's trend */
    for (int pass = 0; pass < 2; pass++) {
        for (guint s = 0; s < n_series; s++) {
            if ((series[s].style == STYLE_LIGHT) == (pass == 0)) {
                draw_series(cv, &series[s], &xa, &ya, &area);
            }
        }
    }
    cairo_restore(cr);
    return TRUE;
}

/* ---- the legend ------------------------------------------------------------------ */

static void draw_legend(Canvas *cv, const Rect *cell, PlotRun *const *runs, guint n_runs,
                        const char *const *notes)
{
    cairo_t *cr = cv->cr;
    const double f = cv->font;
    double x = cell->x + 1.5 * f, y = cell->y + 1.6 * f;
    const double width = cell->w - 3 * f;
    set_font(cv, 1.15, TRUE);
    set_rgb(cr, 0x222222, 1);
    draw_text(cv, "Runs", cell->x + cell->w / 2, y, 0.5);
    y += 1.2 * f;
    const double row = 2.7 * f;
    guint n_notes = g_strv_length((char **)notes);
    const double note_row = 1.25 * f;
    const double bottom = cell->y + cell->h - (n_notes + 1.5) * note_row; /* room for notes */
    for (guint i = 0; i < n_runs; i++) {
        if (y + 2 * row > bottom && i + 1 < n_runs) {
            set_font(cv, 1.0, FALSE);
            set_rgb(cr, 0x444444, 1);
            g_autofree char *more = g_strdup_printf("... and %u more", n_runs - i);
            draw_text(cv, more, x, y + f, 0);
            break;
        }
        const PlotRun *run = runs[i];
        set_rgb(cr, plot_run_colour(i), 1);
        cairo_rectangle(cr, x, y + 0.2 * f, 2.2 * f, 0.9 * f);
        cairo_fill(cr);
        set_font(cv, 1.05, FALSE);
        set_rgb(cr, 0x222222, 1);
        g_autofree char *label = text_fit(cv, run->label, width - 3 * f, TRUE);
        draw_text(cv, label, x + 3 * f, y + f, 0);

        GString *info = g_string_new(run->model);
        if (run->batch_size > 0) {
            g_string_append_printf(info, "%sbatch %" G_GINT64_FORMAT, info->len ? ", " : "",
                                   run->batch_size);
        }
        if (run->world_size > 1) {
            g_string_append_printf(info, " x %" G_GINT64_FORMAT " ranks", run->world_size);
        }
        const GArray *loss = run->train_loss;
        if (loss->len > 0) {
            g_string_append_printf(info, "%s%.0f steps", info->len ? ", " : "",
                                   g_array_index(loss, PlotPoint, loss->len - 1).x);
        }
        const GArray *acc = run->test_accuracy;
        if (acc->len > 0 && isfinite(g_array_index(acc, PlotPoint, acc->len - 1).y)) {
            g_string_append_printf(info, "%stest accuracy %.2f%%", info->len ? ", " : "",
                                   g_array_index(acc, PlotPoint, acc->len - 1).y);
        }
        set_font(cv, 0.9, FALSE);
        set_rgb(cr, 0x666666, 1);
        g_autofree char *fitted = text_fit(cv, info->str, width - 3 * f, FALSE);
        draw_text(cv, fitted, x + 3 * f, y + 2.1 * f, 0);
        g_string_free(info, TRUE);
        y += row;
    }
    set_font(cv, 0.85, FALSE);
    set_rgb(cr, 0x666666, 1);
    for (guint i = 0; i < n_notes; i++) {
        g_autofree char *fitted = text_fit(cv, notes[i], width, FALSE);
        draw_text(cv, fitted, x, bottom + (i + 1.5) * note_row, 0);
    }
}

/* ---- the picture ------------------------------------------------------------------ */

static cairo_status_t write_to_file(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS
                                                : CAIRO_STATUS_WRITE_ERROR;
}

/* Writes the surface to `path` through a temporary file renamed into
 * place, so a failure leaves no half-written image. */
static gboolean write_png(cairo_surface_t *surface, const char *path, GError **error)
{
    g_autofree char *tmp = g_strdup_printf("%s.tmp-%d", path, (int)getpid());
    FILE *f = g_fopen(tmp, "wb");
    if (f == NULL) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot create %s: %s", tmp, g_strerror(e));
        return FALSE;
    }
    cairo_status_t st = cairo_surface_write_to_png_stream(surface, write_to_file, f);
    int e = errno;
    gboolean ok = st == CAIRO_STATUS_SUCCESS;
    if (!ok) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot write %s: %s", tmp,
                    st == CAIRO_STATUS_WRITE_ERROR ? g_strerror(e) : cairo_status_to_string(st));
    }
    if (fclose(f) != 0 && ok) {
        e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot write %s: %s", tmp, g_strerror(e));
        ok = FALSE;
    }
    if (ok && g_rename(tmp, path) != 0) {
        e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot rename %s to %s: %s", tmp, path,
                    g_strerror(e));
        ok = FALSE;
    }
    if (!ok) {
        g_unlink(tmp);
    }
    return ok;
}

/* The series of a noisy per-step curve: each point, light, under its
 * smoothed line; or just the points where there is nothing to smooth.
 * Returns how many series it set (1 or 2); the smoothed points go into
 * `keep`, and the largest weight used into *weight_shown. */
static guint add_smoothed(Series *out, GArray *points, guint32 colour, double asked,
                          GPtrArray *keep, double *weight_shown)
{
    double w = plot_smooth_weight(points->len, asked);
    *weight_shown = MAX(*weight_shown, w);
    if (w <= 0) {
        out[0] = (Series){points, colour, STYLE_LINE, points->len < 2};
        return 1;
    }
    GArray *avg = plot_smooth(points, w);
    g_ptr_array_add(keep, avg);
    out[0] = (Series){points, colour, STYLE_LIGHT, FALSE};
    out[1] = (Series){avg, colour, STYLE_LINE, points->len < 2};
    return 2;
}

gboolean plot_draw_png(PlotRun *const *runs, guint n_runs, const PlotOptions *opt,
                       const char *out, gboolean empty[PLOT_N_PANELS], GError **error)
{
    cairo_surface_t *surface =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, opt->width, opt->height);
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "cairo: a %dx%d image: %s", opt->width,
                    opt->height, cairo_status_to_string(cairo_surface_status(surface)));
        cairo_surface_destroy(surface);
        return FALSE;
    }
    Canvas cv = {cairo_create(surface), 0};
    cv.font = 12.0 * CLAMP(MIN(opt->width / 1200.0, opt->height / 750.0), 0.75, 4.0);
    cairo_set_source_rgb(cv.cr, 1, 1, 1);
    cairo_paint(cv.cr);

    const char *no_steps = "no step events in the log";
    const PanelSpec specs[PLOT_N_PANELS] = {
        [PLOT_PANEL_TRAIN_LOSS] = {panel_titles[0], "step", "loss", no_steps, opt->log_loss,
                                   TRUE},
        [PLOT_PANEL_TEST_LOSS] = {panel_titles[1], "epoch", "loss",
                                  "no eval events (trained with --no-eval?)", opt->log_loss,
                                  TRUE},
        [PLOT_PANEL_TEST_ACCURACY] = {panel_titles[2], "epoch", "accuracy (%)",
                                      "no eval events (trained with --no-eval?)", FALSE, TRUE},
        [PLOT_PANEL_LR] = {panel_titles[3], "step", "learning rate", no_steps, FALSE, TRUE},
        [PLOT_PANEL_RATE] = {panel_titles[4], "step", "images/s", no_steps, FALSE, TRUE},
    };
    /* at most 3 series per run in a panel */
    g_autofree Series *series = g_new0(Series, 3 * (gsize)MAX(n_runs, 1));
    GPtrArray *smoothed = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    double weight_shown = -1;
    const double cell_w = opt->width / (double)PLOT_COLUMNS;
    const double cell_h = opt->height / (double)PLOT_ROWS;
    for (int panel = 0; panel < PLOT_N_PANELS; panel++) {
        guint n = 0;
        for (guint r = 0; r < n_runs; r++) {
            const PlotRun *run = runs[r];
            const guint32 c = plot_run_colour(r);
            switch (panel) {
            case PLOT_PANEL_TRAIN_LOSS:
                n += add_smoothed(&series[n], run->train_loss, c, opt->smooth, smoothed,
                                  &weight_shown);
                break;
            case PLOT_PANEL_TEST_LOSS:
                series[n++] = (Series){run->train_loss_epoch, c, STYLE_DASHED, FALSE};
                series[n++] = (Series){run->test_loss, c, STYLE_LINE, TRUE};
                break;
            case PLOT_PANEL_TEST_ACCURACY:
                series[n++] = (Series){run->train_accuracy_epoch, c, STYLE_DASHED, FALSE};
                series[n++] = (Series){run->test_accuracy, c, STYLE_LINE, TRUE};
                break;
            case PLOT_PANEL_LR:
                series[n++] = (Series){run->lr, c, STYLE_LINE, run->lr->len < 2};
                break;
            default:
                n += add_smoothed(&series[n], run->step_rate, c, opt->smooth, smoothed,
                                  &weight_shown);
                series[n++] = (Series){run->epoch_rate, c, STYLE_DOTS, TRUE};
                break;
            }
        }
        /* the training figures of an epoch panel do not make it non-empty:
         * without evaluation it says so */
        const Series *shown = series;
        guint n_shown = n;
        Rect cell = {(panel % PLOT_COLUMNS) * cell_w, (panel / PLOT_COLUMNS) * cell_h, cell_w,
                     cell_h};
        gboolean test_only = panel == PLOT_PANEL_TEST_LOSS || panel == PLOT_PANEL_TEST_ACCURACY;
        gboolean any_test = FALSE;
        for (guint s = 0; test_only && s < n; s++) {
            any_test = any_test || (series[s].style == STYLE_LINE && series[s].points->len > 0);
        }
        if (test_only && !any_test) {
            n_shown = 0;
        }
        gboolean drawn = draw_panel(&cv, &cell, &specs[panel], shown, n_shown);
        if (empty != NULL) {
            empty[panel] = !drawn;
        }
    }
    g_autofree char *smoothed_note =
        weight_shown > 0 ? g_strdup_printf("    solid, smoothed (moving average, weight %.3g).",
                                           weight_shown)
                         : g_strdup("    not smoothed.");
    const char *notes[] = {"Training loss, images/s: light, each logged step;", smoothed_note,
                           "Epoch panels: test solid, training dashed.",
                           "Images/s: dots are epoch means.", NULL};
    Rect legend = {(PLOT_N_PANELS % PLOT_COLUMNS) * cell_w,
                   (PLOT_N_PANELS / PLOT_COLUMNS) * cell_h, cell_w, cell_h};
    draw_legend(&cv, &legend, runs, n_runs, notes);
    g_ptr_array_unref(smoothed);

    gboolean ok = TRUE;
    cairo_status_t st = cairo_status(cv.cr);
    if (st != CAIRO_STATUS_SUCCESS) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "cairo: drawing failed: %s",
                    cairo_status_to_string(st));
        ok = FALSE;
    }
    cairo_destroy(cv.cr);
    cairo_surface_flush(surface);
    ok = ok && write_png(surface, out, error);
    cairo_surface_destroy(surface);
    return ok;
}

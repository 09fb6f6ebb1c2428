/* SPDX-License-Identifier: MIT */
/* tools/plot-axis.c - axis ticks, tick labels and smoothing for `tandem plot`.
 *
 * Ticks take "nice" values, 1, 2 or 5 times a power of ten (Heckbert's
 * method, Graphics Gems I): as many as fit the panel, the axis running from
 * the last tick at or below the data to the first at or above it, and the
 * panel showing 2% more on each side so that no line runs along its frame.
 * A log axis ticks at 1..9 or 1-2-5 per decade, or at every k-th decade
 * when there are many. Labels have as few digits as the tick step needs,
 * "k" and "M" on an axis that reaches thousands or millions, and
 * scientific notation for tiny values (a learning rate of 1e-5). The
 * training loss's smoothed line is a debiased exponential moving average,
 * as TensorBoard's smoothing, so that its first points are not pulled
 * towards zero. Nothing here draws: tests/test-plot-axis.c checks it in
 * builds without cairo too.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot.h"

/* A number of 1, 2, 5 or 10 times a power of ten near x: the nearest when
 * rounding, else the smallest not below x. */
static double nice_number(double x, gboolean round)
{
    double e = floor(log10(x));
    double f = x / pow(10.0, e);
    double nf;
    if (round) {
        nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    } else {
        nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    }
    return nf * pow(10.0, e);
}

/* The next nice step above `step`: 1 -> 2 -> 5 -> 10. */
static double nice_step_up(double step)
{
    double e = pow(10.0, floor(log10(step) + 1e-9));
    double m = step / e;
    return (m < 1.5 ? 2 : m < 3.5 ? 5 : 10) * e;
}

/* What the panel shows: the ticks' range and 2% more on each side (in
 * log10 units on a log axis). */
static void axis_set_view(PlotAxis *a)
{
    double lo = a->log ? log10(a->lo) : a->lo, hi = a->log ? log10(a->hi) : a->hi;
    double margin = 0.02 * (hi - lo);
    a->view_lo = lo - margin;
    a->view_hi = hi + margin;
}

void plot_axis_linear(PlotAxis *a, double lo, double hi, int max_ticks, gboolean integer)
{
    if (!(hi - lo > 1e-9 * MAX(fabs(lo), fabs(hi)))) {
        /* one value, or values too close for ticks apart: a range around it */
        double d = lo != 0 ? fabs(lo) * 0.1 : 1.0;
        if (integer) {
            d = MAX(d, 1.0);
        }
        lo -= d;
        hi += d;
    }
    max_ticks = CLAMP(max_ticks, 3, PLOT_MAX_TICKS);
    double step = nice_number(nice_number(hi - lo, FALSE) / (max_ticks - 1), TRUE);
    if (integer && step < 1) {
        step = 1;
    }
    double first = floor(lo / step + 1e-9), last = ceil(hi / step - 1e-9);
    /* rounding may give a step too small for the room: the next one up */
    while (last - first + 1 > max_ticks) {
        step = nice_step_up(step);
        first = floor(lo / step + 1e-9);
        last = ceil(hi / step - 1e-9);
    }
    a->log = FALSE;
    a->step = step;
    a->lo = first * step;
    a->hi = last * step;
    /* counted, not stepped: k++ does not move a k past 2^53 */
    a->n_ticks = (int)(last - first + 0.5) + 1;
    for (int i = 0; i < a->n_ticks; i++) {
        a->ticks[i] = (first + i) * step;
    }
    axis_set_view(a);
}

/* Ticks of a log axis over [lo, hi] (both > 0): m x 10^e for m in the
 * richest mantissa set that keeps to max_ticks, else every k-th decade. */
void plot_axis_log(PlotAxis *a, double lo, double hi, int max_ticks)
{
    static const double sets[][10] = {
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 0},
        {1, 2, 5, 0},
        {1, 0},
    };
    if (!(hi > lo)) {
        lo /= 2;
        hi *= 2;
    }
    max_ticks = CLAMP(max_ticks, 3, PLOT_MAX_TICKS - 1);
    a->log = TRUE;
    a->step = 0;
    const int e_lo = (int)floor(log10(lo) + 1e-9), e_hi = (int)ceil(log10(hi) - 1e-9);
    for (gsize s = 0; s < G_N_ELEMENTS(sets); s++) {
        /* candidates from the decade below lo to the one above hi; keep
         * the last one at or below lo up to the first one at or above hi */
        int n = 0;
        double ticks[PLOT_MAX_TICKS + 2];
        gboolean too_many = FALSE;
        for (int e = e_lo - 1; e <= e_hi && !too_many; e++) {
            for (int m = 0; sets[s][m] != 0; m++) {
                double v = sets[s][m] * pow(10.0, e);
                if (v <= lo * (1 + 1e-9)) {
                    n = 0; /* the newest at or below lo starts the list */
                } else if (n > 0 && ticks[n - 1] >= hi * (1 - 1e-9)) {
                    break;
                }
                if (n >= PLOT_MAX_TICKS + 1) {
                    too_many = TRUE;
                    break;
                }
                ticks[n++] = v;
            }
        }
        if (!too_many && n <= max_ticks && n >= 2) {
            memcpy(a->ticks, ticks, (gsize)n * sizeof(double));
            a->n_ticks = n;
            a->lo = ticks[0];
            a->hi = ticks[n - 1];
            axis_set_view(a);
            return;
        }
    }
    /* many decades: every k-th power of ten */
    int k = 1, first, last;
    for (;; k++) {
        first = (int)floor((double)e_lo / k) * k;
        last = (int)ceil((double)e_hi / k) * k;
        if ((last - first) / k + 1 <= max_ticks) {
            break;
        }
    }
    a->n_ticks = 0;
    for (int e = first; a->n_ticks < PLOT_MAX_TICKS; e += k) {
        a->ticks[a->n_ticks++] = pow(10.0, e);
        if (e >= last) {
            break;
        }
    }
    a->lo = a->ticks[0];
    a->hi = a->ticks[a->n_ticks - 1];
    axis_set_view(a);
}

/* "1e-05" -> "1e-5", "2.5e+06" -> "2.5e6". */
static void tidy_exponent(char *buf)
{
    char *e = strchr(buf, 'e');
    if (e == NULL) {
        return;
    }
    char *src = e + 1, *dst = e + 1;
    if (*src == '+') {
        src++;
    } else if (*src == '-') {
        *dst++ = *src++;
    }
    while (*src == '0' && src[1] != '\0') {
        src++;
    }
    memmove(dst, src, strlen(src) + 1);
}

/* A tick's label: as few digits as the tick step needs, thousands as "k"
 * and millions as "M" on an axis that reaches them, tiny values in
 * scientific notation. */
void plot_axis_format_tick(const PlotAxis *a, double v, char *buf, gsize size)
{
    if (a->log) {
        g_snprintf(buf, size, v >= 1e-3 && v < 1e5 ? "%g" : "%.0e", v);
        tidy_exponent(buf);
        return;
    }
    double step = a->step;
    if (fabs(v) < step * 1e-6) {
        v = 0;
    }
    double reach = MAX(fabs(a->lo), fabs(a->hi));
    const char *suffix = "";
    if (reach >= 1e6 && step >= 1e5) {
        v /= 1e6;
        step /= 1e6;
        suffix = "M";
    } else if (reach >= 1e4 && step >= 100) {
        v /= 1e3;
        step /= 1e3;
        suffix = "k";
    }
    int decimals = MAX(0, (int)-floor(log10(step) + 1e-9));
    if (v == 0) {
        g_snprintf(buf, size, "0");
    } else if (decimals <= 4) {
        g_snprintf(buf, size, "%.*f%s", decimals, v, suffix);
    } else {
        int digits = MAX(0, (int)floor(log10(fabs(v)) + 1e-9) - (int)floor(log10(step) + 1e-9));
        g_snprintf(buf, size, "%.*e", digits, v);
        /* "1.0e-04" -> "1e-4": the step asked for a digit this tick has not */
        char *e = strchr(buf, 'e'), *end = e;
        while (end > buf && end[-1] == '0') {
            end--;
        }
        if (end > buf && end[-1] == '.') {
            end--;
        }
        memmove(end, e, strlen(e) + 1);
        tidy_exponent(buf);
    }
}

double plot_axis_map(const PlotAxis *a, double v, double from, double length)
{
    double t = ((a->log ? log10(v) : v) - a->view_lo) / (a->view_hi - a->view_lo);
    return from + t * length;
}

/* The weight an unset --smooth gets: an average over about 1/20 of the
 * points (none for 20 points or fewer). */
double plot_smooth_weight(guint n, double asked)
{
    if (asked >= 0) {
        return asked;
    }
    return n > 20 ? MIN(0.995, 1.0 - 20.0 / n) : 0.0;
}

/* The debiased exponential moving average of the points (transfer full):
 * NAN stays a gap, and a step back in x (a resumed run) starts afresh. */
GArray *plot_smooth(const GArray *in, double w)
{
    GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(PlotPoint), in->len);
    const PlotPoint *p = (const PlotPoint *)(void *)in->data;
    double avg = 0, weight = 0, last_x = -INFINITY;
    for (guint i = 0; i < in->len; i++) {
        if (p[i].x < last_x) {
            avg = 0;
            weight = 0;
        }
        last_x = isfinite(p[i].x) ? p[i].x : last_x;
        PlotPoint q = p[i];
        if (isfinite(p[i].y)) {
            avg = w * avg + (1 - w) * p[i].y;
            weight = w * weight + (1 - w);
            q.y = avg / weight;
        }
        g_array_append_val(out, q);
    }
    return out;
}

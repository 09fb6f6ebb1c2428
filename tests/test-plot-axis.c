/* SPDX-License-Identifier: MIT */
/* tests/test-plot-axis.c - the axes and the smoothing of `tandem plot`.
 *
 * tools/plot-axis.c is built into this program directly (it draws
 * nothing, so this runs in builds without cairo too). Linear axes over
 * many random ranges: every tick a whole multiple of a step of 1, 2 or 5
 * times a power of ten, the ticks covering the data, no more of them than
 * asked for and at least two; log axes the same with ticks m x 10^e; the
 * labels a reader sees for typical ranges (a loss, step counts in the
 * thousands, learning rates of 1e-5); the smoothed loss line starting at
 * the first point, keeping gaps and starting afresh where x goes back.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib.h>

#include "../tools/plot.h"

/* Is s 1, 2 or 5 times a power of ten? */
static gboolean is_nice_step(double s)
{
    double m = s / pow(10.0, floor(log10(s) + 1e-9));
    return fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6;
}

static void check_linear(double lo, double hi, int max_ticks, gboolean integer)
{
    PlotAxis a;
    plot_axis_linear(&a, lo, hi, max_ticks, integer);
    g_assert_false(a.log);
    g_assert_cmpint(a.n_ticks, >=, 2);
    g_assert_cmpint(a.n_ticks, <=, MAX(max_ticks, 3));
    g_assert_true(is_nice_step(a.step));
    if (integer) {
        g_assert_cmpfloat(a.step, >=, 1);
    }
    g_assert_cmpfloat(a.ticks[0], <=, lo + 1e-9 * fabs(lo));
    g_assert_cmpfloat(a.ticks[a.n_ticks - 1], >=, hi - 1e-9 * fabs(hi));
    g_assert_cmpfloat(a.lo, ==, a.ticks[0]);
    g_assert_cmpfloat(a.hi, ==, a.ticks[a.n_ticks - 1]);
    for (int i = 0; i < a.n_ticks; i++) {
        double k = a.ticks[i] / a.step;
        g_assert_cmpfloat(fabs(k - round(k)), <, 1e-6);
        if (i > 0) {
            g_assert_cmpfloat(fabs(a.ticks[i] - a.ticks[i - 1] - a.step), <, 1e-9 * a.step);
        }
    }
    /* the panel shows the ticks and a margin: no data on the frame */
    g_assert_cmpfloat(plot_axis_map(&a, a.lo, 0, 100), >, 0.5);
    g_assert_cmpfloat(plot_axis_map(&a, a.hi, 0, 100), <, 99.5);
}

static void test_linear_random(void)
{
    GRand *rand = g_rand_new_with_seed(15);
    for (int i = 0; i < 5000; i++) {
        double scale = pow(10.0, g_rand_double_range(rand, -7, 7));
        double lo = g_rand_double_range(rand, -1, 1) * scale;
        double hi = lo + g_rand_double_range(rand, 1e-3, 3) * scale;
        check_linear(lo, hi, g_rand_int_range(rand, 2, 30), FALSE);
        double first = floor(g_rand_double_range(rand, 0, 100));
        check_linear(first, first + floor(g_rand_double_range(rand, 0, 100000)),
                     g_rand_int_range(rand, 2, 30), TRUE);
    }
    g_rand_free(rand);
}

static void test_linear_cases(void)
{
    PlotAxis a;
    /* a loss from 2.31 down to 0.62, room for 6 ticks */
    plot_axis_linear(&a, 0.62, 2.31, 6, FALSE);
    g_assert_cmpfloat(a.step, ==, 0.5);
    g_assert_cmpfloat(a.lo, ==, 0.5);
    g_assert_cmpfloat(a.hi, ==, 2.5);
    /* steps 1..30: 0, 10, 20, 30 */
    plot_axis_linear(&a, 1, 30, 6, TRUE);
    g_assert_cmpint(a.n_ticks, ==, 4);
    g_assert_cmpfloat(a.ticks[3], ==, 30);
    /* one epoch: a range around it, whole numbers */
    plot_axis_linear(&a, 1, 1, 6, TRUE);
    g_assert_cmpfloat(a.lo, <=, 0);
    g_assert_cmpfloat(a.hi, >=, 2);
    g_assert_cmpfloat(a.step, >=, 1);
    /* one learning rate: a range around it, not a zero step */
    plot_axis_linear(&a, 0.05, 0.05, 6, FALSE);
    g_assert_cmpfloat(a.lo, <, 0.05);
    g_assert_cmpfloat(a.hi, >, 0.05);
}

static void check_labels(double lo, double hi, int max_ticks, const char *want)
{
    PlotAxis a;
    plot_axis_linear(&a, lo, hi, max_ticks, FALSE);
    GString *got = g_string_new(NULL);
    for (int i = 0; i < a.n_ticks; i++) {
        char label[48];
        plot_axis_format_tick(&a, a.ticks[i], label, sizeof(label));
        g_string_append_printf(got, "%s%s", i ? " " : "", label);
    }
    g_assert_cmpstr(got->str, ==, want);
    g_string_free(got, TRUE);
}

static void test_labels(void)
{
    check_labels(0.62, 2.31, 6, "0.5 1.0 1.5 2.0 2.5");
    check_labels(0, 30000, 10, "0 5k 10k 15k 20k 25k 30k");
    check_labels(0, 30000, 6, "0 10k 20k 30k");
    check_labels(0, 4.2e6, 6, "0 1M 2M 3M 4M 5M");
    check_labels(0, 1.9e6, 5, "0 0.5M 1.0M 1.5M 2.0M");
    check_labels(1e-5, 1e-4, 6, "0 2e-5 4e-5 6e-5 8e-5 1e-4");
    check_labels(-1, 1, 5, "-1.0 -0.5 0 0.5 1.0");
    check_labels(40.5, 71.9, 5, "40 50 60 70 80");
    check_labels(0.001, 0.0042, 5, "0.001 0.002 0.003 0.004 0.005");
}

static void check_log(double lo, double hi, int max_ticks)
{
    PlotAxis a;
    plot_axis_log(&a, lo, hi, max_ticks);
    g_assert_true(a.log);
    g_assert_cmpint(a.n_ticks, >=, 2);
    g_assert_cmpint(a.n_ticks, <=, MAX(max_ticks, 3));
    g_assert_cmpfloat(a.ticks[0], <=, lo * (1 + 1e-9));
    g_assert_cmpfloat(a.ticks[a.n_ticks - 1], >=, hi * (1 - 1e-9));
    for (int i = 0; i < a.n_ticks; i++) {
        double m = a.ticks[i] / pow(10.0, floor(log10(a.ticks[i]) + 1e-9));
        g_assert_cmpfloat(fabs(m - round(m)), <, 1e-6);
        if (i > 0) {
            g_assert_cmpfloat(a.ticks[i], >, a.ticks[i - 1]);
        }
    }
}

static void test_log(void)
{
    GRand *rand = g_rand_new_with_seed(16);
    for (int i = 0; i < 5000; i++) {
        double lo = pow(10.0, g_rand_double_range(rand, -12, 6));
        double hi = lo * pow(10.0, g_rand_double_range(rand, 0.01, 20));
        check_log(lo, hi, g_rand_int_range(rand, 2, 30));
    }
    g_rand_free(rand);
    /* a loss from 2.3 to 0.3 with room for 10: 1..9 per decade; 1-2-5 with
     * room for 5; powers of ten with room for 4 */
    PlotAxis a;
    plot_axis_log(&a, 0.3, 2.3, 10);
    g_assert_cmpint(a.n_ticks, ==, 10); /* 0.3 .. 0.9, 1, 2, 3 */
    g_assert_cmpfloat(fabs(a.ticks[0] - 0.3), <, 1e-12);
    g_assert_cmpfloat(fabs(a.ticks[9] - 3), <, 1e-12);
    char label[48];
    plot_axis_format_tick(&a, a.ticks[0], label, sizeof(label));
    g_assert_cmpstr(label, ==, "0.3");
    plot_axis_format_tick(&a, a.ticks[8], label, sizeof(label));
    g_assert_cmpstr(label, ==, "2");
    plot_axis_log(&a, 0.3, 2.3, 5);
    g_assert_cmpint(a.n_ticks, ==, 5); /* 0.2 0.5 1 2 5 */
    g_assert_cmpfloat(fabs(a.ticks[4] - 5), <, 1e-12);
    plot_axis_log(&a, 0.3, 2.3, 4);
    g_assert_cmpint(a.n_ticks, ==, 3); /* 0.1 1 10 */
    g_assert_cmpfloat(fabs(a.ticks[2] - 10), <, 1e-12);
    /* 12 decades with room for 5: every third */
    plot_axis_log(&a, 1e-9, 1e3, 5);
    g_assert_cmpint(a.n_ticks, ==, 5);
    plot_axis_format_tick(&a, a.ticks[0], label, sizeof(label));
    g_assert_cmpstr(label, ==, "1e-9");
    plot_axis_format_tick(&a, a.ticks[4], label, sizeof(label));
    g_assert_cmpstr(label, ==, "1000");
}

static GArray *points(const double *xy, int n)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(PlotPoint));
    for (int i = 0; i < n; i++) {
        PlotPoint p = {xy[2 * i], xy[2 * i + 1]};
        g_array_append_val(a, p);
    }
    return a;
}

static void test_smooth(void)
{
    const double xy[] = {1, 4, 2, 4, 3, NAN, 4, 4, 5, 2, 2, 10, 3, 6};
    GArray *in = points(xy, 7);
    GArray *out = plot_smooth(in, 0.9);
    g_assert_cmpuint(out->len, ==, 7);
    const PlotPoint *p = (const PlotPoint *)(void *)out->data;
    /* debiased: a constant stays itself from the first point on */
    g_assert_cmpfloat(fabs(p[0].y - 4), <, 1e-12);
    g_assert_cmpfloat(fabs(p[1].y - 4), <, 1e-12);
    g_assert_true(isnan(p[2].y)); /* a gap stays a gap */
    g_assert_cmpfloat(fabs(p[3].y - 4), <, 1e-12);
    g_assert_cmpfloat(p[4].y, <, 4);
    g_assert_cmpfloat(p[4].y, >, 2);
    /* x went back: the average starts afresh at the new point */
    g_assert_cmpfloat(fabs(p[5].y - 10), <, 1e-12);
    g_assert_cmpfloat(p[6].y, <, 10);
    g_assert_cmpfloat(p[6].y, >, 6);
    g_array_unref(out);
    out = plot_smooth(in, 0.0); /* no smoothing: the points themselves */
    for (guint i = 0; i < in->len; i++) {
        const PlotPoint *a = &g_array_index(in, PlotPoint, i);
        const PlotPoint *b = &g_array_index(out, PlotPoint, i);
        g_assert_true(a->x == b->x && (a->y == b->y || (isnan(a->y) && isnan(b->y))));
    }
    g_array_unref(out);
    g_array_unref(in);
    g_assert_cmpfloat(plot_smooth_weight(10, -1), ==, 0);
    g_assert_cmpfloat(plot_smooth_weight(1000, -1), >, 0.9);
    g_assert_cmpfloat(plot_smooth_weight(1000000, -1), <, 1);
    g_assert_cmpfloat(plot_smooth_weight(1000, 0.5), ==, 0.5);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/plot-axis/linear/random", test_linear_random);
    g_test_add_func("/plot-axis/linear/cases", test_linear_cases);
    g_test_add_func("/plot-axis/labels", test_labels);
    g_test_add_func("/plot-axis/log", test_log);
    g_test_add_func("/plot-axis/smooth", test_smooth);
    return g_test_run();
}

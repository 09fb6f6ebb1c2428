/* SPDX-License-Identifier: MIT */
/* tests/test-recompute-choice.c - the auto recompute policy's choice
 * (core/recompute-choice.c, built in): which convolution outputs a step
 * of a given memory and work computes again. The figures are a ResNet's
 * candidates as the formula sees them (bytes of an output, multiply-adds of
 * its forward) and made-up ones at the edges; tests/test-modules.c runs
 * the policy on a model.
 */
#include "config.h"

#include <glib.h>

#include "../core/recompute-choice.h"

#define MIB (1024.0 * 1024.0)

/* memory x work^2 after the choice */
static double cost_after(const TdmRecomputeCandidate *c, guint n, double memory, double work)
{
    for (guint i = 0; i < n; i++) {
        if (c[i].chosen) {
            memory -= c[i].bytes;
            work += c[i].work;
        }
    }
    return memory * work * work;
}

/* A candidate is worth it when it frees at least twice as many bytes per
 * multiply-add as the step holds per multiply-add of its work
 * (b / f > 2 M / W, to first order), not when it frees as many or a bit
 * more. */
static void test_threshold(void)
{
    /* M / W = 1e-3 bytes per multiply-add */
    TdmRecomputeCandidate c[] = {
        {.bytes = 10.0 * MIB, .work = 1e9},  /* 1.05e-2: chosen */
        {.bytes = 0.5 * MIB, .work = 1e9},   /* 5.2e-4: not */
        {.bytes = 1.0 * MIB, .work = 1.5e8}, /* 7e-3: chosen */
        {.bytes = 1.5 * MIB, .work = 1e9},   /* 1.6e-3: frees more than it costs, not twice */
    };
    double memory = 1000.0 * MIB, work = memory / 1e-3;
    g_assert_cmpuint(tdm_recompute_choose(c, 4, memory, work), ==, 2);
    g_assert_true(c[0].chosen);
    g_assert_false(c[1].chosen);
    g_assert_true(c[2].chosen);
    g_assert_false(c[3].chosen);
    g_assert_cmpfloat(cost_after(c, 4, memory, work), <, memory * work * work);

    /* exactly even, (M - b)(W + f)^2 == M W^2, (9 - 5)(2 + 1)^2 == 9 x 2^2:
     * kept; a little more freed: chosen */
    TdmRecomputeCandidate even = {.bytes = 5.0, .work = 1.0};
    g_assert_cmpuint(tdm_recompute_choose(&even, 1, 9.0, 2.0), ==, 0);
    TdmRecomputeCandidate more = {.bytes = 5.5, .work = 1.0};
    g_assert_cmpuint(tdm_recompute_choose(&more, 1, 9.0, 2.0), ==, 1);
    /* the whole memory: never */
    TdmRecomputeCandidate all = {.bytes = 8.0, .work = 1.0};
    g_assert_cmpuint(tdm_recompute_choose(&all, 1, 8.0, 1e9), ==, 0);
}

/* No figures, no choice: a device without a peak (memory 0), a step
 * without convolution work, candidates of nothing. `chosen` is reset. */
static void test_nothing_to_go_on(void)
{
    TdmRecomputeCandidate c[] = {{.bytes = 1e6, .work = 1.0, .chosen = TRUE},
                                 {.bytes = 0.0, .work = 1.0, .chosen = TRUE},
                                 {.bytes = 1e6, .work = 0.0, .chosen = TRUE}};
    g_assert_cmpuint(tdm_recompute_choose(c, 3, 0.0, 1e9), ==, 0);
    g_assert_false(c[0].chosen);
    g_assert_cmpuint(tdm_recompute_choose(c, 3, 1e9, 0.0), ==, 0);
    g_assert_cmpuint(tdm_recompute_choose(c, 3, -1.0, 1e9), ==, 0);
    g_assert_cmpuint(tdm_recompute_choose(c, 3, 1e9, 1e9), ==, 1);
    g_assert_true(c[0].chosen);
    g_assert_false(c[1].chosen);
    g_assert_false(c[2].chosen);
    g_assert_cmpuint(tdm_recompute_choose(NULL, 0, 1e9, 1e9), ==, 0);
}

/* The best trade goes first, whatever the order given: a choice lowers
 * M / W and makes the ones after it easier to take, so a candidate looked
 * at before a better one could be passed over that would be taken after
 * it. */
static void test_best_first(void)
{
    /* M 100, W 50: A (5 bytes per multiply-add) is taken alone, B (3.3)
     * is not (80 x 56^2 > 100 x 50^2) but is after A (70 x 58^2 <
     * 90 x 52^2). */
    for (int flip = 0; flip < 2; flip++) {
        TdmRecomputeCandidate c[2] = {{.bytes = 10.0, .work = 2.0}, {.bytes = 20.0, .work = 6.0}};
        if (flip) {
            TdmRecomputeCandidate t = c[0];
            c[0] = c[1];
            c[1] = t;
        }
        g_assert_cmpuint(tdm_recompute_choose(c, 2, 100.0, 50.0), ==, 2);
        TdmRecomputeCandidate *b = flip ? &c[0] : &c[1];
        g_assert_cmpuint(tdm_recompute_choose(b, 1, 100.0, 50.0), ==, 0);
    }
}

/* A bottleneck stage of a ResNet, batch 32: per block conv1 (1x1, 4C to
 * C), conv2 (3x3, C to C), conv3 (1x1, C to 4C). Bytes per multiply-add:
 * 4 / (input channels x kernel area) whatever the map's size, conv3's
 * 4 / C the best, conv2's 4 / 9C the worst. The larger the maps, the
 * larger the activations' share of the step's memory and the more is
 * chosen; a step whose memory is the parameters' (small maps) chooses
 * nothing, and even a step of activations alone keeps the 3x3 output. */
static guint stage(double hw, double params_bytes, gboolean *conv3_chosen, gboolean *conv2_chosen)
{
    const double n = 32.0, ch = 64.0;
    TdmRecomputeCandidate c[3] = {
        {.bytes = 4.0 * n * ch * hw, .work = n * ch * hw * 4.0 * ch},
        {.bytes = 4.0 * n * ch * hw, .work = n * ch * hw * 9.0 * ch},
        {.bytes = 4.0 * n * 4.0 * ch * hw, .work = n * 4.0 * ch * hw * ch},
    };
    double kept = 0.0, work = 0.0;
    for (int i = 0; i < 3; i++) {
        kept += c[i].bytes + 4.0 * n * 4.0 * ch * hw / 3.0; /* and the block's output */
        work += 3.0 * c[i].work;                            /* forward and backward */
    }
    guint k = tdm_recompute_choose(c, 3, params_bytes + kept, work);
    *conv3_chosen = c[2].chosen;
    *conv2_chosen = c[1].chosen;
    return k;
}

static void test_resnet_stage(void)
{
    gboolean c3, c2;
    g_assert_cmpuint(stage(2.0 * 2.0, 300.0 * MIB, &c3, &c2), ==, 0);
    g_assert_cmpuint(stage(56.0 * 56.0, 300.0 * MIB, &c3, &c2), >=, 1);
    g_assert_true(c3);
    g_assert_false(c2);
    guint small = stage(16.0 * 16.0, 300.0 * MIB, &c3, &c2);
    guint large = stage(112.0 * 112.0, 0.0, &c3, &c2);
    g_test_message("chosen of 3: 16x16 maps %u, 112x112 maps without parameters %u", small, large);
    g_assert_cmpuint(small, <=, large);
    g_assert_cmpuint(large, ==, 2); /* a step of activations alone: both 1x1 outputs */
    g_assert_true(c3);
    g_assert_false(c2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/recompute-choice/threshold", test_threshold);
    g_test_add_func("/recompute-choice/nothing-to-go-on", test_nothing_to_go_on);
    g_test_add_func("/recompute-choice/best-first", test_best_first);
    g_test_add_func("/recompute-choice/resnet-stage", test_resnet_stage);
    return g_test_run();
}

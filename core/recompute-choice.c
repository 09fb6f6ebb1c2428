/* SPDX-License-Identifier: MIT */
/* core/recompute-choice.c - the "auto" recompute policy's choice
 * (recompute-choice.h).
 *
 * Recomputing a convolution's output saves its bytes b for the step's
 * duration and costs its forward's multiply-adds f once more. A step of
 * memory M and work W is worth recomputing for when
 * (M - b)(W + f)^2 < M W^2: memory times time squared goes down, time
 * counted twice. To first order that is b / M > 2 f / W: the candidate
 * frees a share of the step's memory at least twice the share of work it
 * adds. Time counts twice because every step of the run pays it, while
 * memory only has to stay within what the machine has; the plain product
 * (M - b)(W + f) < M W, the bill of a machine held for the run, took every
 * output that broke even, and cost resnet50 10-14% of its images/s at 128
 * and 224 px for the last 10-15% of its memory (bench/RESULTS.md, issue
 * 16). The candidates are looked at once each, in the order of b / f, the
 * best trade first, and each is chosen when the product, with the ones
 * chosen before it, goes down. A choice lowers M / W and so makes the next
 * ones easier to take, which is why the order matters.
 *
 * What comes out on a ResNet: the outputs of the convolutions with few
 * input channels per output byte (a bottleneck's 1x1 expansion, the stem)
 * come first, a late 3x3 convolution (many channels, small maps) last;
 * the larger the images, the larger the activations' share of M and the
 * more is chosen. The estimate counts convolution work only, not the time
 * of the kernels (a recomputed 1x1 convolution may run at a lower fraction
 * of the peak than the step) nor the pointwise ops: a guide, not a
 * measurement, which is why `none`, `pointwise` and `all` stay selectable.
 */
#include "config.h"

#include <stdlib.h>

#include "recompute-choice.h"

/* By bytes per multiply-add, highest first; the earlier candidate (the
 * lower address in the caller's array) first on a tie, so that the choice
 * does not depend on qsort's order. */
static int by_ratio_desc(const void *pa, const void *pb)
{
    const TdmRecomputeCandidate *a = *(TdmRecomputeCandidate *const *)pa;
    const TdmRecomputeCandidate *b = *(TdmRecomputeCandidate *const *)pb;
    double ra = a->bytes * b->work, rb = b->bytes * a->work;
    if (ra != rb) {
        return ra > rb ? -1 : 1;
    }
    return a < b ? -1 : a > b;
}

guint tdm_recompute_choose(TdmRecomputeCandidate *c, guint n, double memory, double work)
{
    for (guint i = 0; i < n; i++) {
        c[i].chosen = FALSE;
    }
    if (!(memory > 0.0) || !(work > 0.0) || n == 0) {
        return 0;
    }
    TdmRecomputeCandidate **order = g_new(TdmRecomputeCandidate *, n);
    guint m = 0;
    for (guint i = 0; i < n; i++) {
        if (c[i].bytes > 0.0 && c[i].work > 0.0) {
            order[m++] = &c[i];
        }
    }
    qsort(order, m, sizeof *order, by_ratio_desc);
    guint chosen = 0;
    for (guint k = 0; k < m; k++) {
        TdmRecomputeCandidate *x = order[k];
        const double after = work + x->work;
        if (x->bytes < memory && (memory - x->bytes) * after * after < memory * work * work) {
            x->chosen = TRUE;
            memory -= x->bytes;
            work += x->work;
            chosen++;
        }
    }
    g_free(order);
    return chosen;
}

/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-bwf8.c - the cpu backend's own backward-weights
 * loops for convolutions whose input and output gradient are both in the
 * nChw8c layout (what oneDNN picks on AVX2 machines).
 *
 * On AVX2, oneDNN 2.6's backward-weights kernel reaches a third of the
 * FMA peak on ResNet-sized layers (16 to 64 channels, 7x7 to 28x28 planes)
 * and was the largest part of a resnet8 step. Here the weight gradient is a
 * sum of outer products: for each window tap (kh, kw) and output pixel, the
 * 8 output channels of dy (one vector, as the layout stores them) times each
 * input channel of x at the tapped pixel (a broadcast scalar). A register
 * tile holds 16 output channels x 4 input channels (8 vector accumulators)
 * for one tap over a few output rows, so the inner loop does 2 vector
 * loads, 4 broadcasts and 8 FMAs per pixel; the rows are few enough that
 * what they read stays in L1 while all the taps pass over them (a pass over
 * a whole 28x28 plane per tap was bound by L2 bandwidth). Columns
 * whose tapped pixel falls in the padding are skipped by computing, per
 * tap, the range of valid output columns (no bounds checks inside).
 *
 * Images are split over the OpenMP pool in contiguous ranges; each thread
 * sums into its own [kh][kw][ic][oc] partial, and the partials are added in
 * thread order into the plain gradient (the op accumulates: dw += ...), so
 * a given thread count always gives the same bits. The bias gradient, when
 * asked for, is the sum of dy over the images and pixels.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-own.h"
#include "cpu-simd.h"

#define ROUND16(n) (((n) + 15) / 16 * 16)

gboolean cpu_bwf8_geom(const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *dymd,
                       const int64_t *wshape, const TdmConv2dParams *p, CpuBwf8Geom *g)
{
    CpuPlanes xo, yo;
    if (!cpu_planes(xmd, &xo) || !cpu_planes(dymd, &yo) || xo.b != 8 || yo.b != 8 ||
        xo.tag != dnnl_aBcd8b || yo.tag != dnnl_aBcd8b || p->groups > 1 || p->dilation_h > 1 ||
        p->dilation_w > 1 || p->stride_h < 1 || p->stride_w < 1 || wshape[2] * wshape[3] < 2) {
        /* 1x1 convolutions stay with oneDNN: a plain GEMM, which its
         * kernel does as fast or faster (measured on resnet8's shortcuts) */
        return FALSE;
    }
    *g = (CpuBwf8Geom){
        .n = xmd->dims[0], .ic = xmd->dims[1], .icp = xmd->padded_dims[1], .h = xmd->dims[2],
        .w = xmd->dims[3], .oc = dymd->dims[1], .ocp = dymd->padded_dims[1],
        .oh = dymd->dims[2], .ow = dymd->dims[3], .kh = wshape[2], .kw = wshape[3],
        .sh = p->stride_h, .sw = p->stride_w, .ph = p->pad_h, .pw = p->pad_w,
        .threads = MAX(1, omp_get_max_threads()),
    };
    return dymd->dims[0] == g->n && wshape[0] == g->oc && wshape[1] == g->ic;
}

static size_t partial_floats(const CpuBwf8Geom *g)
{
    return ROUND16((size_t)(g->kh * g->kw * g->icp * g->ocp + g->ocp));
}

size_t cpu_bwf8_work_bytes(const CpuBwf8Geom *g)
{
    return sizeof(float) * partial_floats(g) * (size_t)g->threads;
}

/* Output columns [lo, hi) whose tapped input column ow * s + k - pad lies
 * in [0, size). */
static void valid_range(int64_t out, int64_t size, int64_t s, int64_t k, int64_t pad,
                        int64_t *lo, int64_t *hi)
{
    int64_t off = k - pad;
    *lo = off >= 0 ? 0 : (-off + s - 1) / s;
    *hi = size - 1 - off < 0 ? 0 : MIN(out, (size - 1 - off) / s + 1);
    if (*hi < *lo) {
        *hi = *lo;
    }
}

/* One tap, NO output-channel vectors (1 or 2) x NI input channels, over
 * output rows [oh0, oh1) of one image: acc[o][i] += dy[o](pixel) *
 * x[i](tapped pixel), starting from and stored back to part[i][oc 8*o ..]
 * (rows of ocp floats). */
CPU_INLINE void tile(const CpuBwf8Geom *g, const float *dyo, const float *xi, int64_t oh0,
                      int64_t oh1, int64_t kh, int64_t kw, float *part, const int NO,
                      const int NI, const int64_t sw)
{
    const int64_t plane = g->oh * g->ow * 8;
    int64_t lo, hi;
    valid_range(g->ow, g->w, sw, kw, g->pw, &lo, &hi);
    if (hi <= lo) {
        return;
    }
    v8 acc[2][8];
#pragma GCC unroll 2
    for (int o = 0; o < NO; o++) {
#pragma GCC unroll 8
        for (int i = 0; i < NI; i++) {
            acc[o][i] = ld8(part + i * g->ocp + o * 8);
        }
    }
    for (int64_t oh = oh0; oh < oh1; oh++) {
        const int64_t ih = oh * g->sh + kh - g->ph;
        if (ih < 0 || ih >= g->h) {
            continue;
        }
        const float *d = dyo + oh * g->ow * 8;
        const float *xr = xi + (ih * g->w + kw - g->pw) * 8;
        for (int64_t ow = lo; ow < hi; ow++) {
            const float *xv = xr + ow * sw * 8;
            v8 dv[2];
#pragma GCC unroll 2
            for (int o = 0; o < NO; o++) {
                dv[o] = ld8(d + o * plane + ow * 8);
            }
#pragma GCC unroll 8
            for (int i = 0; i < NI; i++) {
                const float xs = xv[i];
#pragma GCC unroll 2
                for (int o = 0; o < NO; o++) {
                    acc[o][i] += dv[o] * xs;
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int o = 0; o < NO; o++) {
#pragma GCC unroll 8
        for (int i = 0; i < NI; i++) {
            st8(part + i * g->ocp + o * 8, acc[o][i]);
        }
    }
}

/* Output rows per pass: the rows of dy and x a pass reads stay in L1 while
 * every tap and input-channel quad of the block pair sums over them. */
static int64_t rows_per_pass(const CpuBwf8Geom *g)
{
    const int64_t row_bytes = g->ow * 32 * 3 * g->sh;
    return MAX(1, MIN(g->oh, 12288 / MAX(1, row_bytes)));
}

CPU_INLINE void bwf8_image(const CpuBwf8Geom *g, const float *x, const float *dy, float *part,
                            int64_t n, const int64_t sw)
{
    const int64_t ob_n = g->ocp / 8, ib_n = g->icp / 8, rows = rows_per_pass(g);
    for (int64_t ob = 0; ob < ob_n; ob += 2) {
        const int pair = ob + 1 < ob_n;
        const float *dyo = dy + (n * ob_n + ob) * g->oh * g->ow * 8;
        for (int64_t ib = 0; ib < ib_n; ib++) {
            const float *xb = x + (n * ib_n + ib) * g->h * g->w * 8;
            for (int64_t oh0 = 0; oh0 < g->oh; oh0 += rows) {
                const int64_t oh1 = MIN(g->oh, oh0 + rows);
                for (int64_t kh = 0; kh < g->kh; kh++) {
                    for (int64_t kw = 0; kw < g->kw; kw++) {
                        float *pt =
                            part + ((kh * g->kw + kw) * g->icp + ib * 8) * g->ocp + ob * 8;
                        if (pair) {
                            tile(g, dyo, xb, oh0, oh1, kh, kw, pt, 2, 4, sw);
                            tile(g, dyo, xb + 4, oh0, oh1, kh, kw, pt + 4 * g->ocp, 2, 4, sw);
                        } else {
                            tile(g, dyo, xb, oh0, oh1, kh, kw, pt, 1, 8, sw);
                        }
                    }
                }
            }
        }
    }
}

#define BWF8_BODY                                                                           \
    {                                                                                       \
        if (g->sw == 1) {                                                                   \
            bwf8_image(g, x, dy, part, n, 1);                                               \
        } else if (g->sw == 2) {                                                            \
            bwf8_image(g, x, dy, part, n, 2);                                               \
        } else {                                                                            \
            bwf8_image(g, x, dy, part, n, g->sw);                                           \
        }                                                                                   \
    }
#define BWF8_ARGS (const CpuBwf8Geom *g, const float *x, const float *dy, float *part, int64_t n)

CPU_BASE_CLONE static void k_bwf8_base BWF8_ARGS BWF8_BODY
#ifdef CPU_HAVE_FMA_CLONE
CPU_FMA_CLONE static void k_bwf8_fma BWF8_ARGS BWF8_BODY
#endif

static void k_bwf8(const CpuBwf8Geom *g, const float *x, const float *dy, float *part, int64_t n)
{
#ifdef CPU_HAVE_FMA_CLONE
    if (cpu_have_avx2_fma()) {
        k_bwf8_fma(g, x, dy, part, n);
        return;
    }
#endif
    k_bwf8_base(g, x, dy, part, n);
}

static void bias_sum(const CpuBwf8Geom *g, const float *dy, int64_t n, float *pb)
{
    const int64_t ob_n = g->ocp / 8, pix = g->oh * g->ow;
    for (int64_t ob = 0; ob < ob_n; ob++) {
        const float *d = dy + (n * ob_n + ob) * pix * 8;
        v8 s = {0};
        for (int64_t i = 0; i < pix; i++) {
            s += ld8(d + i * 8);
        }
        st8(pb + ob * 8, ld8(pb + ob * 8) + s);
    }
}

void cpu_bwf8_run(const CpuBwf8Geom *g, const float *x, const float *dy, float *dw, float *db,
                  void *work)
{
    const size_t pf = partial_floats(g), taps = (size_t)(g->kh * g->kw);
    const size_t wf = taps * (size_t)(g->icp * g->ocp);
    int nt = (int)MIN(g->threads, g->n), used = 1;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), tn = omp_get_num_threads();
        float *part = (float *)work + (size_t)t * pf;
        int64_t per = g->n / tn, extra = g->n % tn;
        int64_t n0 = t * per + MIN(t, extra), n1 = n0 + per + (t < extra);
        memset(part, 0, sizeof(float) * pf);
        for (int64_t n = n0; n < n1; n++) {
            k_bwf8(g, x, dy, part, n);
            if (db != NULL) {
                bias_sum(g, dy, n, part + wf);
            }
        }
        if (t == 0) {
            used = tn;
        }
    }
    float *sum = work;
    for (int t = 1; t < used; t++) {
        const float *part = (const float *)work + (size_t)t * pf;
        for (size_t i = 0; i < wf + (size_t)g->ocp; i++) {
            sum[i] += part[i];
        }
    }
    /* [kh][kw][ic][oc] -> dw[oc][ic][kh][kw] += */
    for (int64_t o = 0; o < g->oc; o++) {
        for (int64_t i = 0; i < g->ic; i++) {
            float *d = dw + (o * g->ic + i) * (int64_t)taps;
            for (size_t k = 0; k < taps; k++) {
                d[k] += sum[(k * (size_t)g->icp + (size_t)i) * (size_t)g->ocp + (size_t)o];
            }
        }
    }
    if (db != NULL) {
        for (int64_t o = 0; o < g->oc; o++) {
            db[o] += sum[wf + (size_t)o];
        }
    }
}

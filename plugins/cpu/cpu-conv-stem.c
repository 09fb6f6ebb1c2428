/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-stem.c - the cpu backend's own loops for a network's
 * first convolution: a plain NCHW input with very few channels (an image)
 * into the blocked output layout (nChw8c / nChw16c) oneDNN picks for the
 * layers after it.
 *
 * oneDNN's direct kernels are written for many channels: with 1 input
 * channel its backward-weights kernel runs at a few GFLOP/s (lenet's first
 * layer took 1.5 ms of a 5.5 ms step on AVX2) and it first pads the input to
 * 8 or 16 channels with a reorder. Here the output channels are the vector
 * lanes instead: eight output channels of one pixel are one 8-float vector,
 * which is exactly how the blocked layouts store them, and every input
 * value is a broadcast scalar.
 *
 * Forward: for each image, its planes are copied into a zero-bordered
 * buffer (no bounds checks in the loops), then each group of 8 output
 * channels is computed for 8 pixels of an output row at a time (8 vector
 * accumulators, one weight vector per tap), with the bias as the initial
 * value and ReLU fused. Output channels past C_out (the layout pads them to
 * the block) get zero weights and bias, so they hold zeros as oneDNN
 * expects. Backward weights: per thread partial sums, one vector (8 output
 * channels) per input channel and tap, accumulated for a row of taps (kw)
 * at a time against each output pixel's gradient vector; the threads'
 * partials are then added in thread order and into dw / db (the op
 * accumulates, as the backend contract says). Images are split over the
 * OpenMP pool in contiguous ranges, so a given thread count always sums in
 * the same order.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-own.h"
#include "cpu-simd.h"

CPU_INLINE v8 relu8(v8 v)
{
    v8i keep = v > (v8){0};
    return (v8)((v8i)v & keep);
}

#define ROUND16(n) (((n) + 15) / 16 * 16)

gboolean cpu_stem_geom(const TdmTensor *x, const TdmTensor *w, const TdmConv2dParams *p,
                       const dnnl_memory_desc_t *ymd, CpuStemGeom *g)
{
    CpuPlanes yo;
    if (x->layout != NULL || !tdm_tensor_is_contiguous(x) || x->shape[1] > CPU_STEM_MAX_C ||
        w->layout != NULL || !tdm_tensor_is_contiguous(w) || (p->groups > 1) ||
        p->dilation_h > 1 || p->dilation_w > 1 || p->stride_h < 1 || p->stride_w < 1 ||
        w->shape[2] > CPU_STEM_MAX_K || w->shape[3] > CPU_STEM_MAX_K || !cpu_planes(ymd, &yo) ||
        (yo.b != 8 && yo.b != 16)) {
        return FALSE;
    }
    const dnnl_dim_t *yd = ymd->dims;
    *g = (CpuStemGeom){
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .oc = w->shape[0], .ocp = ymd->padded_dims[1], .oh = yd[2], .ow = yd[3],
        .kh = w->shape[2], .kw = w->shape[3], .sh = p->stride_h, .sw = p->stride_w,
        .ph = p->pad_h, .pw = p->pad_w, .b = yo.b,
    };
    if (yd[0] != g->n || yd[1] != g->oc || g->ocp % g->b != 0 || w->shape[1] != g->c) {
        return FALSE;
    }
    /* Room for every row and column a window reads, and for the input. */
    g->hp = MAX((g->oh - 1) * g->sh + g->kh, g->ph + g->h);
    g->wp = MAX((g->ow - 1) * g->sw + g->kw, g->pw + g->w);
    g->threads = MAX(1, omp_get_max_threads());
    return TRUE;
}

/* Work buffer: transposed weights [ocp/8][c][kh][kw][8], bias [ocp], then
 * per thread a padded image [c][hp][wp] and (backward) partial sums
 * [ocp/8][c][kh][kw][8] + [ocp]. */
static size_t taps(const CpuStemGeom *g)
{
    return (size_t)(g->ocp * g->c * g->kh * g->kw);
}

static size_t per_thread(const CpuStemGeom *g, gboolean backward)
{
    size_t n = ROUND16((size_t)(g->c * g->hp * g->wp));
    return backward ? n + ROUND16(taps(g) + (size_t)g->ocp) : n;
}

size_t cpu_stem_work_bytes(const CpuStemGeom *g, gboolean backward)
{
    return sizeof(float) *
           (ROUND16(taps(g)) + ROUND16((size_t)g->ocp) + (size_t)g->threads * per_thread(g, backward));
}

/* Copies image n's planes into the zero-bordered buffer (borders are zeroed
 * once per call and never written). */
static void pad_image(const CpuStemGeom *g, const float *x, int64_t n, float *xp)
{
    int64_t rows = MIN(g->h, g->hp - g->ph), cols = MIN(g->w, g->wp - g->pw);
    for (int64_t c = 0; c < g->c; c++) {
        const float *src = x + (n * g->c + c) * g->h * g->w;
        float *dst = xp + c * g->hp * g->wp + g->ph * g->wp + g->pw;
        for (int64_t r = 0; r < rows; r++) {
            memcpy(dst + r * g->wp, src + r * g->w, sizeof(float) * (size_t)cols);
        }
    }
}

/* Where output channel group gi (channels 8*gi .. 8*gi+7) of image n starts. */
static int64_t group_offset(const CpuStemGeom *g, int64_t n, int64_t gi)
{
    int64_t blocks = g->ocp / g->b, c0 = gi * 8;
    return ((n * blocks + c0 / g->b) * g->oh * g->ow) * g->b + c0 % g->b;
}

/* ---- forward ---- */

CPU_INLINE void fwd_row8(const CpuStemGeom *g, const float *xrow, const float *wg, v8 bias,
                          int relu, float *yrow, const int64_t sw)
{
    v8 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        acc[j] = bias;
    }
    for (int64_t c = 0; c < g->c; c++) {
        for (int64_t kh = 0; kh < g->kh; kh++) {
            const float *r = xrow + (c * g->hp + kh) * g->wp;
            const float *wk = wg + (c * g->kh + kh) * g->kw * 8;
            for (int64_t kw = 0; kw < g->kw; kw++) {
                v8 wv = ld8(wk + kw * 8);
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    acc[j] += wv * r[j * sw + kw];
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        st8(yrow + j * g->b, relu ? relu8(acc[j]) : acc[j]);
    }
}

CPU_INLINE void fwd_pixel(const CpuStemGeom *g, const float *xrow, const float *wg, v8 bias,
                           int relu, float *yp)
{
    v8 acc = bias;
    for (int64_t c = 0; c < g->c; c++) {
        for (int64_t kh = 0; kh < g->kh; kh++) {
            const float *r = xrow + (c * g->hp + kh) * g->wp;
            const float *wk = wg + (c * g->kh + kh) * g->kw * 8;
            for (int64_t kw = 0; kw < g->kw; kw++) {
                acc += ld8(wk + kw * 8) * r[kw];
            }
        }
    }
    st8(yp, relu ? relu8(acc) : acc);
}

CPU_INLINE void fwd_image(const CpuStemGeom *g, const float *xp, const float *wt,
                           const float *bias, int relu, float *y, int64_t n, const int64_t sw)
{
    for (int64_t gi = 0; gi < g->ocp / 8; gi++) {
        const float *wg = wt + gi * g->c * g->kh * g->kw * 8;
        v8 bv = ld8(bias + gi * 8);
        float *yg = y + group_offset(g, n, gi);
        for (int64_t oh = 0; oh < g->oh; oh++) {
            const float *xrow = xp + oh * g->sh * g->wp;
            float *yrow = yg + oh * g->ow * g->b;
            int64_t ow = 0;
            for (; ow + 8 <= g->ow; ow += 8) {
                fwd_row8(g, xrow + ow * sw, wg, bv, relu, yrow + ow * g->b, sw);
            }
            for (; ow < g->ow; ow++) {
                fwd_pixel(g, xrow + ow * sw, wg, bv, relu, yrow + ow * g->b);
            }
        }
    }
}

#define STEM_FWD_BODY                                                                       \
    {                                                                                       \
        if (g->sw == 1) {                                                                   \
            fwd_image(g, xp, wt, bias, relu, y, n, 1);                                      \
        } else if (g->sw == 2) {                                                            \
            fwd_image(g, xp, wt, bias, relu, y, n, 2);                                      \
        } else {                                                                            \
            fwd_image(g, xp, wt, bias, relu, y, n, g->sw);                                  \
        }                                                                                   \
    }
#define STEM_FWD_ARGS                                                                       \
    (const CpuStemGeom *g, const float *xp, const float *wt, const float *bias, int relu,   \
     float *y, int64_t n)

CPU_BASE_CLONE static void k_stem_fwd_base STEM_FWD_ARGS STEM_FWD_BODY
#ifdef CPU_HAVE_FMA_CLONE
CPU_FMA_CLONE static void k_stem_fwd_fma STEM_FWD_ARGS STEM_FWD_BODY
#endif

static void k_stem_fwd(const CpuStemGeom *g, const float *xp, const float *wt, const float *bias,
                       int relu, float *y, int64_t n)
{
#ifdef CPU_HAVE_FMA_CLONE
    if (cpu_have_avx2_fma()) {
        k_stem_fwd_fma(g, xp, wt, bias, relu, y, n);
        return;
    }
#endif
    k_stem_fwd_base(g, xp, wt, bias, relu, y, n);
}

/* Weights [oc][c][kh][kw] -> [ocp/8][c][kh][kw][8], zeros past oc. */
static void transpose_weights(const CpuStemGeom *g, const float *w, float *wt)
{
    int64_t t = g->c * g->kh * g->kw;
    memset(wt, 0, sizeof(float) * taps(g));
    for (int64_t o = 0; o < g->oc; o++) {
        for (int64_t i = 0; i < t; i++) {
            wt[((o / 8) * t + i) * 8 + o % 8] = w[o * t + i];
        }
    }
}

/* Contiguous image range [n0, n1) of thread t of nt. */
static void image_range(const CpuStemGeom *g, int t, int nt, int64_t *n0, int64_t *n1)
{
    int64_t per = g->n / nt, extra = g->n % nt;
    *n0 = t * per + MIN(t, extra);
    *n1 = *n0 + per + (t < extra);
}

void cpu_stem_forward(const CpuStemGeom *g, const float *x, const float *w, const float *bias,
                      gboolean relu, float *y, void *work)
{
    float *wt = work, *bv = wt + ROUND16(taps(g));
    float *pads = bv + ROUND16((size_t)g->ocp);
    transpose_weights(g, w, wt);
    memset(bv, 0, sizeof(float) * (size_t)g->ocp);
    if (bias != NULL) {
        memcpy(bv, bias, sizeof(float) * (size_t)g->oc);
    }
    int nt = (int)MIN(g->threads, g->n);
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num();
        float *xp = pads + (size_t)t * per_thread(g, FALSE);
        int64_t n0, n1;
        image_range(g, t, omp_get_num_threads(), &n0, &n1);
        memset(xp, 0, sizeof(float) * (size_t)(g->c * g->hp * g->wp));
        for (int64_t n = n0; n < n1; n++) {
            pad_image(g, x, n, xp);
            k_stem_fwd(g, xp, wt, bv, relu != FALSE, y, n);
        }
    }
}

/* ---- backward weights ---- */

/* acc_out[k][8] += sum over output pixels of dy(pixel) * x(window tap k),
 * for KN taps kw0 .. kw0+KN-1 of one input row offset. */
CPU_INLINE void bwf_taps(const CpuStemGeom *g, const float *dyg, const float *xr, float *acc_out,
                          const int KN, const int64_t sw)
{
    v8 acc[8];
#pragma GCC unroll 8
    for (int k = 0; k < KN; k++) {
        acc[k] = (v8){0};
    }
    for (int64_t oh = 0; oh < g->oh; oh++) {
        const float *r = xr + oh * g->sh * g->wp;
        const float *d = dyg + oh * g->ow * g->b;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            v8 dv = ld8(d + ow * g->b);
            const float *rw = r + ow * sw;
#pragma GCC unroll 8
            for (int k = 0; k < KN; k++) {
                acc[k] += dv * rw[k];
            }
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < KN; k++) {
        st8(acc_out + k * 8, ld8(acc_out + k * 8) + acc[k]);
    }
}

CPU_INLINE void bwf_image(const CpuStemGeom *g, const float *xp, const float *dy, float *pw,
                           float *pb, int64_t n, const int64_t sw)
{
    for (int64_t gi = 0; gi < g->ocp / 8; gi++) {
        const float *dyg = dy + group_offset(g, n, gi);
        v8 sb = {0};
        for (int64_t i = 0; i < g->oh * g->ow; i++) {
            sb += ld8(dyg + i * g->b);
        }
        st8(pb + gi * 8, ld8(pb + gi * 8) + sb);
        for (int64_t c = 0; c < g->c; c++) {
            for (int64_t kh = 0; kh < g->kh; kh++) {
                const float *xr = xp + (c * g->hp + kh) * g->wp;
                float *acc = pw + ((gi * g->c + c) * g->kh + kh) * g->kw * 8;
                for (int64_t kw0 = 0; kw0 < g->kw; kw0 += 8) {
                    switch (MIN(8, g->kw - kw0)) {
                    case 1: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 1, sw); break;
                    case 2: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 2, sw); break;
                    case 3: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 3, sw); break;
                    case 4: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 4, sw); break;
                    case 5: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 5, sw); break;
                    case 6: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 6, sw); break;
                    case 7: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 7, sw); break;
                    default: bwf_taps(g, dyg, xr + kw0, acc + kw0 * 8, 8, sw); break;
                    }
                }
            }
        }
    }
}

#define STEM_BWF_BODY                                                                       \
    {                                                                                       \
        if (g->sw == 1) {                                                                   \
            bwf_image(g, xp, dy, pw, pb, n, 1);                                             \
        } else if (g->sw == 2) {                                                            \
            bwf_image(g, xp, dy, pw, pb, n, 2);                                             \
        } else {                                                                            \
            bwf_image(g, xp, dy, pw, pb, n, g->sw);                                         \
        }                                                                                   \
    }
#define STEM_BWF_ARGS                                                                       \
    (const CpuStemGeom *g, const float *xp, const float *dy, float *pw, float *pb, int64_t n)

CPU_BASE_CLONE static void k_stem_bwf_base STEM_BWF_ARGS STEM_BWF_BODY
#ifdef CPU_HAVE_FMA_CLONE
CPU_FMA_CLONE static void k_stem_bwf_fma STEM_BWF_ARGS STEM_BWF_BODY
#endif

static void k_stem_bwf(const CpuStemGeom *g, const float *xp, const float *dy, float *pw,
                       float *pb, int64_t n)
{
#ifdef CPU_HAVE_FMA_CLONE
    if (cpu_have_avx2_fma()) {
        k_stem_bwf_fma(g, xp, dy, pw, pb, n);
        return;
    }
#endif
    k_stem_bwf_base(g, xp, dy, pw, pb, n);
}

void cpu_stem_backward_filter(const CpuStemGeom *g, const float *x, const float *dy, float *dw,
                              float *db, void *work)
{
    float *base = (float *)work + ROUND16(taps(g)) + ROUND16((size_t)g->ocp);
    size_t stride = per_thread(g, TRUE), pad_floats = ROUND16((size_t)(g->c * g->hp * g->wp));
    int nt = (int)MIN(g->threads, g->n);
    int used = 1;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num();
        float *xp = base + (size_t)t * stride, *pw = xp + pad_floats, *pb = pw + taps(g);
        int64_t n0, n1;
        image_range(g, t, omp_get_num_threads(), &n0, &n1);
        memset(xp, 0, sizeof(float) * (size_t)(g->c * g->hp * g->wp));
        memset(pw, 0, sizeof(float) * (taps(g) + (size_t)g->ocp));
        for (int64_t n = n0; n < n1; n++) {
            pad_image(g, x, n, xp);
            k_stem_bwf(g, xp, dy, pw, pb, n);
        }
        if (t == 0) {
            used = omp_get_num_threads();
        }
    }
    /* Threads' partials in thread order, then into the plain gradients. */
    float *sum = base + pad_floats;
    for (int t = 1; t < used; t++) {
        const float *part = base + (size_t)t * stride + pad_floats;
        for (size_t i = 0; i < taps(g) + (size_t)g->ocp; i++) {
            sum[i] += part[i];
        }
    }
    int64_t tp = g->c * g->kh * g->kw;
    for (int64_t o = 0; o < g->oc; o++) {
        for (int64_t i = 0; i < tp; i++) {
            dw[o * tp + i] += sum[((o / 8) * tp + i) * 8 + o % 8];
        }
    }
    if (db != NULL) {
        const float *sb = sum + taps(g);
        for (int64_t o = 0; o < g->oc; o++) {
            db[o] += sb[o];
        }
    }
}

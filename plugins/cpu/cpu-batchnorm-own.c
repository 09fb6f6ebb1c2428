/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-batchnorm-own.c - batch norm's own loops on nChw8c / nChw16c.
 *
 * Batch norm is memory-bound: it reads the activation a few times and
 * writes one tensor, and in training a step's activations do not fit in
 * the cache. These loops keep the sweeps over memory to the minimum (two
 * forward, two backward) and take about 13% less time than oneDNN 2.6's
 * bnorm_jit:avx2 over a resnet8 step (TDM_CPU_OWN_BN=0 to compare). They
 * run for 4-D tensors in a channel-blocked layout (what the convolutions
 * hand over); everything else stays on oneDNN.
 *
 * A blocked tensor is a run of planes (one per image and channel block) of
 * [pixels][b] floats, b = 8 or 16 channels side by side. Each loop walks
 * whole planes, split over the OpenMP threads, and works on the b lanes of
 * a pixel at once with AVX-512 when b = 16, else 8 at a time (16 is two
 * groups) with AVX2 (several accumulators, FMA), plain C loops elsewhere.
 * A lane's arithmetic is the same with AVX-512 and AVX2, so the two give
 * the same bits. Planes of at most BN_CHUNK pixels
 * (resnet's 2x2 to 16x16 layers) skip the double-precision bookkeeping,
 * which then adds nothing but time (see moments8_small_avx2).
 *
 * Forward, training: one sweep computes each plane's per-lane mean and sum
 * of squared deviations (the plane is re-read from L1/L2, not memory); the
 * per-channel statistics are combined from the planes exactly (Chan's
 * parallel formula, in double); a second sweep writes y = x a + s, and with
 * ReLU fused max(y, 0) plus a bit mask of y > 0 in the workspace (one byte
 * per 8 lanes of a pixel). Backward: one sweep for the per-plane sums of dy
 * and dy (x - mean) (dy masked by the workspace when ReLU was fused),
 * combined per channel in double, and one sweep writing dx = k dy + p x + q.
 * Padded lanes (C not a multiple of b) get zero coefficients, so they stay
 * zero. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define BN_HAVE_AVX2 1
#include <immintrin.h>
#define BN_AVX2 static __attribute__((target("avx2,fma"), noinline))
#endif

/* pixels summed in float before a partial sum moves to double */
#define BN_CHUNK 256

gboolean cpu_bn_geom(const dnnl_memory_desc_t *md, int64_t c, CpuBnGeom *g)
{
    CpuPlanes p;
    if (!cpu_planes(md, &p) || (p.b != 8 && p.b != 16)) {
        return FALSE;
    }
    g->b = p.b;
    g->s = p.h * p.w;
    g->cb = md->padded_dims[1] / p.b;
    g->n = md->dims[0];
    g->c = c;
    return g->s > 0 && g->n > 0 && g->cb > 0;
}

size_t cpu_bn_work_bytes(const CpuBnGeom *g)
{
    /* two per-plane lane vectors, three per-channel coefficient vectors */
    return sizeof(float) * (size_t)(2 * g->n * g->cb * g->b + 3 * g->cb * g->b);
}

size_t cpu_bn_mask_bytes(const CpuBnGeom *g)
{
    return (size_t)(g->n * g->cb * g->s * g->b / 8);
}

static gboolean bn_parallel(const CpuBnGeom *g)
{
    return g->n * g->cb * g->s * g->b > CPU_PAR_MIN;
}

/* Whether the 16-lane kernels write the output with non-temporal stores:
 * outputs of CPU_BN_STREAM_MIN bytes and more (64-byte aligned, as the
 * stores need). Written through the cache, their lines are first read in
 * (the write-allocate) only to be evicted before the next op reads them;
 * streamed, resnet50 at 128 px trained 2-4% faster (33.0 -> 34.1 img/s,
 * medians of 5-7 alternating runs), resnet18 at 64 and 128 px the same.
 * The AVX2 kernels were not measured with it and store as before. */
#define CPU_BN_STREAM_MIN ((size_t)1 << 20)

static gboolean bn_stream(const CpuBnGeom *g, const float *out)
{
    return g->b == 16 && ((uintptr_t)out & 63) == 0 &&
           sizeof(float) * (size_t)(g->n * g->cb * g->s * g->b) >= CPU_BN_STREAM_MIN;
}

/* the per-channel combining loops: over the threads from 64 blocks of
 * planes' sums (about 1024 channels x 32 images) */
static gboolean bn_combine_parallel(const CpuBnGeom *g)
{
    return g->n * g->cb >= 2048;
}

/* ---- the plane kernels: 8 lanes at x, pixel stride st floats; a mask
 * holds one byte per pixel (bit l = lane l), pixel stride st / 8 ---- */

/* per-lane mean and sum of squared deviations */
static void moments8_c(const float *x, int64_t s, int64_t st, float *mean, float *m2)
{
    double tot[8] = {0}, q[8] = {0};
    for (int64_t i = 0; i < s; i++) {
        for (int l = 0; l < 8; l++) {
            tot[l] += x[i * st + l];
        }
    }
    float mu[8];
    for (int l = 0; l < 8; l++) {
        mu[l] = (float)(tot[l] / (double)s);
    }
    for (int64_t i = 0; i < s; i++) {
        for (int l = 0; l < 8; l++) {
            float d = x[i * st + l] - mu[l];
            q[l] += (double)d * d;
        }
    }
    for (int l = 0; l < 8; l++) {
        mean[l] = mu[l];
        m2[l] = (float)q[l];
    }
}

/* y = x a + sh, then with relu max(y, 0) and the mask of y > 0 (if mask) */
static void affine8_c(const float *x, int64_t s, int64_t st, const float *a, const float *sh,
                      gboolean relu, float *y, guint8 *mask, gboolean stream)
{
    (void)stream; /* AVX-512 only (bn_stream) */
    for (int64_t i = 0; i < s; i++) {
        unsigned bits = 0;
        for (int l = 0; l < 8; l++) {
            float v = x[i * st + l] * a[l] + sh[l];
            if (relu) {
                bits |= (unsigned)(v > 0.0f) << l;
                v = v > 0.0f ? v : 0.0f;
            }
            y[i * st + l] = v;
        }
        if (mask != NULL) {
            mask[i * (st / 8)] = (guint8)bits;
        }
    }
}

static inline float masked(float g, const guint8 *mask, int64_t i, int64_t st, int l)
{
    return mask == NULL || ((mask[i * (st / 8)] >> l) & 1) ? g : 0.0f;
}

/* per-lane sums of g and g (x - mean), g = dy masked */
static void grad_sums8_c(const float *x, const float *dy, const guint8 *mask, int64_t s, int64_t st,
                         const float *mean, float *sdy, float *sdx)
{
    double t0[8] = {0}, t1[8] = {0};
    for (int64_t i = 0; i < s; i++) {
        for (int l = 0; l < 8; l++) {
            float g = masked(dy[i * st + l], mask, i, st, l);
            t0[l] += g;
            t1[l] += (double)g * (x[i * st + l] - mean[l]);
        }
    }
    for (int l = 0; l < 8; l++) {
        sdy[l] = (float)t0[l];
        sdx[l] = (float)t1[l];
    }
}

/* dx = k g + p x + q, g = dy masked */
static void grad_apply8_c(const float *x, const float *dy, const guint8 *mask, int64_t s,
                          int64_t st, const float *k, const float *p, const float *q, float *dx,
                          gboolean stream)
{
    (void)stream; /* AVX-512 only (bn_stream) */
    for (int64_t i = 0; i < s; i++) {
        for (int l = 0; l < 8; l++) {
            float g = masked(dy[i * st + l], mask, i, st, l);
            dx[i * st + l] = k[l] * g + p[l] * x[i * st + l] + q[l];
        }
    }
}

#ifdef BN_HAVE_AVX2
/* The vector helpers are always inlined into the avx2 kernels. */
#pragma GCC diagnostic ignored "-Wpsabi"
#define BN_V static inline __attribute__((always_inline, target("avx2,fma")))

/* add the 8 float lanes of v into the double totals t[0..7] */
BN_V void add_to_double(double *t, __m256 v)
{
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    _mm256_storeu_pd(t, _mm256_add_pd(_mm256_loadu_pd(t), lo));
    _mm256_storeu_pd(t + 4, _mm256_add_pd(_mm256_loadu_pd(t + 4), hi));
}

/* lanes whose bit is set in `bits` all ones, the others zero */
BN_V __m256 mask_lanes(unsigned bits)
{
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i v = _mm256_and_si256(_mm256_set1_epi32((int)bits), sel);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(v, sel));
}

/* The sum of a plane's lanes over its pixels, four accumulators as in
 * the chunked loops below. */
BN_V __m256 sum8(const float *x, int64_t s, int64_t st)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 <= s; i += 4) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i * st));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + (i + 1) * st));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + (i + 2) * st));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + (i + 3) * st));
    }
    for (; i < s; i++) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i * st));
    }
    return _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
}

/* A plane of at most BN_CHUNK pixels is one chunk: the double totals
 * are 0 + one float sum, which the float sum 0 + v equals exactly (the
 * + 0 turns -0 into +0, as the double sum does), so the statistics are
 * those of the chunked loop without its per-plane double bookkeeping,
 * which dominates on small planes (resnet's 2x2 to 8x8 layers). */
BN_AVX2 void moments8_small_avx2(const float *x, int64_t s, int64_t st, float *mean, float *m2)
{
    const __m256 zero = _mm256_setzero_ps();
    __m256 tot = _mm256_add_ps(zero, sum8(x, s, st));
    __m256d ds = _mm256_set1_pd((double)s);
    __m256 vm = _mm256_set_m128(
        _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(tot, 1)), ds)),
        _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(tot)), ds)));
    __m256 a0 = zero, a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 <= s; i += 4) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i * st), vm);
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + (i + 1) * st), vm);
        __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + (i + 2) * st), vm);
        __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + (i + 3) * st), vm);
        a0 = _mm256_fmadd_ps(d0, d0, a0);
        a1 = _mm256_fmadd_ps(d1, d1, a1);
        a2 = _mm256_fmadd_ps(d2, d2, a2);
        a3 = _mm256_fmadd_ps(d3, d3, a3);
    }
    for (; i < s; i++) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i * st), vm);
        a0 = _mm256_fmadd_ps(d, d, a0);
    }
    _mm256_storeu_ps(mean, vm);
    _mm256_storeu_ps(
        m2, _mm256_add_ps(zero, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))));
}

BN_AVX2 void moments8_avx2(const float *x, int64_t s, int64_t st, float *mean, float *m2)
{
    if (s <= BN_CHUNK) {
        moments8_small_avx2(x, s, st, mean, m2);
        return;
    }
    double tot[8] = {0}, q[8] = {0};
    for (int64_t i0 = 0; i0 < s; i0 += BN_CHUNK) {
        int64_t i1 = MIN(s, i0 + BN_CHUNK), i = i0;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 4 <= i1; i += 4) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i * st));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + (i + 1) * st));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + (i + 2) * st));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + (i + 3) * st));
        }
        for (; i < i1; i++) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i * st));
        }
        add_to_double(tot, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
    float mu[8];
    for (int l = 0; l < 8; l++) {
        mu[l] = (float)(tot[l] / (double)s);
    }
    __m256 vm = _mm256_loadu_ps(mu);
    for (int64_t i0 = 0; i0 < s; i0 += BN_CHUNK) {
        int64_t i1 = MIN(s, i0 + BN_CHUNK), i = i0;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 4 <= i1; i += 4) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i * st), vm);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + (i + 1) * st), vm);
            __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + (i + 2) * st), vm);
            __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + (i + 3) * st), vm);
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
            a2 = _mm256_fmadd_ps(d2, d2, a2);
            a3 = _mm256_fmadd_ps(d3, d3, a3);
        }
        for (; i < i1; i++) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i * st), vm);
            a0 = _mm256_fmadd_ps(d, d, a0);
        }
        add_to_double(q, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
    for (int l = 0; l < 8; l++) {
        mean[l] = mu[l];
        m2[l] = (float)q[l];
    }
}

BN_AVX2 void affine8_avx2(const float *x, int64_t s, int64_t st, const float *a, const float *sh,
                          gboolean relu, float *y, guint8 *mask, gboolean stream)
{
    (void)stream; /* AVX-512 only (bn_stream) */
    __m256 va = _mm256_loadu_ps(a), vs = _mm256_loadu_ps(sh), zero = _mm256_setzero_ps();
    for (int64_t i = 0; i < s; i++) {
        __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * st), va, vs);
        if (relu) {
            __m256 pos = _mm256_cmp_ps(v, zero, _CMP_GT_OQ);
            if (mask != NULL) {
                mask[i * (st / 8)] = (guint8)_mm256_movemask_ps(pos);
            }
            v = _mm256_and_ps(v, pos);
        }
        _mm256_storeu_ps(y + i * st, v);
    }
}

BN_AVX2 void grad_sums8_avx2(const float *x, const float *dy, const guint8 *mask, int64_t s,
                             int64_t st, const float *mean, float *sdy, float *sdx)
{
    double t0[8] = {0}, t1[8] = {0};
    __m256 vm = _mm256_loadu_ps(mean);
    /* one chunk: 0 + the float sums, exactly (see moments8_small_avx2) */
    const gboolean small = s <= BN_CHUNK;
    for (int64_t i0 = 0; i0 < s; i0 += BN_CHUNK) {
        int64_t i1 = MIN(s, i0 + BN_CHUNK), i = i0;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (; i + 2 <= i1; i += 2) {
            __m256 g0 = _mm256_loadu_ps(dy + i * st), g1 = _mm256_loadu_ps(dy + (i + 1) * st);
            if (mask != NULL) {
                g0 = _mm256_and_ps(g0, mask_lanes(mask[i * (st / 8)]));
                g1 = _mm256_and_ps(g1, mask_lanes(mask[(i + 1) * (st / 8)]));
            }
            a0 = _mm256_add_ps(a0, g0);
            a1 = _mm256_add_ps(a1, g1);
            b0 = _mm256_fmadd_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + i * st), vm), b0);
            b1 = _mm256_fmadd_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + (i + 1) * st), vm), b1);
        }
        for (; i < i1; i++) {
            __m256 g = _mm256_loadu_ps(dy + i * st);
            if (mask != NULL) {
                g = _mm256_and_ps(g, mask_lanes(mask[i * (st / 8)]));
            }
            a0 = _mm256_add_ps(a0, g);
            b0 = _mm256_fmadd_ps(g, _mm256_sub_ps(_mm256_loadu_ps(x + i * st), vm), b0);
        }
        if (small) {
            const __m256 zero = _mm256_setzero_ps();
            _mm256_storeu_ps(sdy, _mm256_add_ps(zero, _mm256_add_ps(a0, a1)));
            _mm256_storeu_ps(sdx, _mm256_add_ps(zero, _mm256_add_ps(b0, b1)));
            return;
        }
        add_to_double(t0, _mm256_add_ps(a0, a1));
        add_to_double(t1, _mm256_add_ps(b0, b1));
    }
    for (int l = 0; l < 8; l++) {
        sdy[l] = (float)t0[l];
        sdx[l] = (float)t1[l];
    }
}

BN_AVX2 void grad_apply8_avx2(const float *x, const float *dy, const guint8 *mask, int64_t s,
                              int64_t st, const float *k, const float *p, const float *q, float *dx,
                              gboolean stream)
{
    (void)stream; /* AVX-512 only (bn_stream) */
    __m256 vk = _mm256_loadu_ps(k), vp = _mm256_loadu_ps(p), vq = _mm256_loadu_ps(q);
    for (int64_t i = 0; i < s; i++) {
        __m256 g = _mm256_loadu_ps(dy + i * st);
        if (mask != NULL) {
            g = _mm256_and_ps(g, mask_lanes(mask[i * (st / 8)]));
        }
        __m256 v = _mm256_fmadd_ps(vp, _mm256_loadu_ps(x + i * st), vq);
        _mm256_storeu_ps(dx + i * st, _mm256_fmadd_ps(vk, g, v));
    }
}
#endif

#ifdef BN_HAVE_AVX2
/* The same four kernels on AVX-512, for b = 16: one pass over a plane for
 * all 16 lanes instead of two 8-lane passes that each read half of every
 * cache line. Each lane's arithmetic is the AVX2 kernels' (the same
 * accumulators over the same pixels, the same chunks, the same fused
 * multiply-adds), so the results are the same bits whichever runs. The
 * mask of a pixel is its two bytes, lanes 0-7 then 8-15. */
#define BN_V512 static inline __attribute__((always_inline, target("avx512f")))
#define BN_AVX512 static __attribute__((target("avx512f"), noinline))

BN_V512 void add_to_double16(double *t, __m512 v)
{
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    _mm512_storeu_pd(t, _mm512_add_pd(_mm512_loadu_pd(t), lo));
    _mm512_storeu_pd(t + 8, _mm512_add_pd(_mm512_loadu_pd(t + 8), hi));
}

BN_V512 __mmask16 load_mask16(const guint8 *mask, int64_t i)
{
    return (__mmask16)(mask[2 * i] | (unsigned)mask[2 * i + 1] << 8);
}

BN_V512 __m512 sum16(const float *x, int64_t s)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 <= s; i += 4) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i * 16));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + (i + 1) * 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + (i + 2) * 16));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + (i + 3) * 16));
    }
    for (; i < s; i++) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i * 16));
    }
    return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/* see moments8_small_avx2 */
BN_AVX512 void moments16_small_avx512(const float *x, int64_t s, float *mean, float *m2)
{
    const __m512 zero = _mm512_setzero_ps();
    __m512 tot = _mm512_add_ps(zero, sum16(x, s));
    __m512d ds = _mm512_set1_pd((double)s);
    __m256 lo = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(tot)), ds));
    __m256 hi = _mm512_cvtpd_ps(_mm512_div_pd(
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(tot), 1))), ds));
    __m512 vm = _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
    __m512 a0 = zero, a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 <= s; i += 4) {
        __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i * 16), vm);
        __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + (i + 1) * 16), vm);
        __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + (i + 2) * 16), vm);
        __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(x + (i + 3) * 16), vm);
        a0 = _mm512_fmadd_ps(d0, d0, a0);
        a1 = _mm512_fmadd_ps(d1, d1, a1);
        a2 = _mm512_fmadd_ps(d2, d2, a2);
        a3 = _mm512_fmadd_ps(d3, d3, a3);
    }
    for (; i < s; i++) {
        __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i * 16), vm);
        a0 = _mm512_fmadd_ps(d, d, a0);
    }
    _mm512_storeu_ps(mean, vm);
    _mm512_storeu_ps(
        m2, _mm512_add_ps(zero, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))));
}

BN_AVX512 void moments16_avx512(const float *x, int64_t s, int64_t st, float *mean, float *m2)
{
    double tot[16] = {0}, q[16] = {0};
    (void)st;
    if (s <= BN_CHUNK) {
        moments16_small_avx512(x, s, mean, m2);
        return;
    }
    for (int64_t i0 = 0; i0 < s; i0 += BN_CHUNK) {
        int64_t i1 = MIN(s, i0 + BN_CHUNK), i = i0;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 4 <= i1; i += 4) {
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i * 16));
            a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + (i + 1) * 16));
            a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + (i + 2) * 16));
            a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + (i + 3) * 16));
        }
        for (; i < i1; i++) {
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i * 16));
        }
        add_to_double16(tot, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
    float mu[16];
    for (int l = 0; l < 16; l++) {
        mu[l] = (float)(tot[l] / (double)s);
    }
    __m512 vm = _mm512_loadu_ps(mu);
    for (int64_t i0 = 0; i0 < s; i0 += BN_CHUNK) {
        int64_t i1 = MIN(s, i0 + BN_CHUNK), i = i0;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 4 <= i1; i += 4) {
            __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i * 16), vm);
            __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + (i + 1) * 16), vm);
            __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + (i + 2) * 16), vm);
            __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(x + (i + 3) * 16), vm);
            a0 = _mm512_fmadd_ps(d0, d0, a0);
            a1 = _mm512_fmadd_ps(d1, d1, a1);
            a2 = _mm512_fmadd_ps(d2, d2, a2);
            a3 = _mm512_fmadd_ps(d3, d3, a3);
        }
        for (; i < i1; i++) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i * 16), vm);
            a0 = _mm512_fmadd_ps(d, d, a0);
        }
        add_to_double16(q, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
    for (int l = 0; l < 16; l++) {
        mean[l] = mu[l];
        m2[l] = (float)q[l];
    }
}

BN_AVX512 void affine16_avx512(const float *x, int64_t s, int64_t st, const float *a,
                               const float *sh, gboolean relu, float *y, guint8 *mask,
                               gboolean stream)
{
    __m512 va = _mm512_loadu_ps(a), vs = _mm512_loadu_ps(sh), zero = _mm512_setzero_ps();
    (void)st;
    for (int64_t i = 0; i < s; i++) {
        __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * 16), va, vs);
        if (relu) {
            __mmask16 pos = _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ);
            if (mask != NULL) {
                mask[2 * i] = (guint8)pos;
                mask[2 * i + 1] = (guint8)(pos >> 8);
            }
            v = _mm512_maskz_mov_ps(pos, v);
        }
        if (stream) {
            _mm512_stream_ps(y + i * 16, v);
        } else {
            _mm512_storeu_ps(y + i * 16, v);
        }
    }
    if (stream) {
        _mm_sfence(); /* the stores are seen before the threads' barrier */
    }
}

BN_AVX512 void grad_sums16_avx512(const float *x, const float *dy, const guint8 *mask, int64_t s,
                                  int64_t st, const float *mean, float *sdy, float *sdx)
{
    double t0[16] = {0}, t1[16] = {0};
    __m512 vm = _mm512_loadu_ps(mean);
    (void)st;
    /* one chunk: 0 + the float sums, exactly (see moments8_small_avx2) */
    const gboolean small = s <= BN_CHUNK;
    for (int64_t i0 = 0; i0 < s; i0 += BN_CHUNK) {
        int64_t i1 = MIN(s, i0 + BN_CHUNK), i = i0;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (; i + 2 <= i1; i += 2) {
            __m512 g0 = _mm512_loadu_ps(dy + i * 16), g1 = _mm512_loadu_ps(dy + (i + 1) * 16);
            if (mask != NULL) {
                g0 = _mm512_maskz_mov_ps(load_mask16(mask, i), g0);
                g1 = _mm512_maskz_mov_ps(load_mask16(mask, i + 1), g1);
            }
            a0 = _mm512_add_ps(a0, g0);
            a1 = _mm512_add_ps(a1, g1);
            b0 = _mm512_fmadd_ps(g0, _mm512_sub_ps(_mm512_loadu_ps(x + i * 16), vm), b0);
            b1 = _mm512_fmadd_ps(g1, _mm512_sub_ps(_mm512_loadu_ps(x + (i + 1) * 16), vm), b1);
        }
        for (; i < i1; i++) {
            __m512 g = _mm512_loadu_ps(dy + i * 16);
            if (mask != NULL) {
                g = _mm512_maskz_mov_ps(load_mask16(mask, i), g);
            }
            a0 = _mm512_add_ps(a0, g);
            b0 = _mm512_fmadd_ps(g, _mm512_sub_ps(_mm512_loadu_ps(x + i * 16), vm), b0);
        }
        if (small) {
            const __m512 zero = _mm512_setzero_ps();
            _mm512_storeu_ps(sdy, _mm512_add_ps(zero, _mm512_add_ps(a0, a1)));
            _mm512_storeu_ps(sdx, _mm512_add_ps(zero, _mm512_add_ps(b0, b1)));
            return;
        }
        add_to_double16(t0, _mm512_add_ps(a0, a1));
        add_to_double16(t1, _mm512_add_ps(b0, b1));
    }
    for (int l = 0; l < 16; l++) {
        sdy[l] = (float)t0[l];
        sdx[l] = (float)t1[l];
    }
}

BN_AVX512 void grad_apply16_avx512(const float *x, const float *dy, const guint8 *mask, int64_t s,
                                   int64_t st, const float *k, const float *p, const float *q,
                                   float *dx, gboolean stream)
{
    __m512 vk = _mm512_loadu_ps(k), vp = _mm512_loadu_ps(p), vq = _mm512_loadu_ps(q);
    (void)st;
    for (int64_t i = 0; i < s; i++) {
        __m512 g = _mm512_loadu_ps(dy + i * 16);
        if (mask != NULL) {
            g = _mm512_maskz_mov_ps(load_mask16(mask, i), g);
        }
        __m512 v = _mm512_fmadd_ps(vp, _mm512_loadu_ps(x + i * 16), vq);
        if (stream) {
            _mm512_stream_ps(dx + i * 16, _mm512_fmadd_ps(vk, g, v));
        } else {
            _mm512_storeu_ps(dx + i * 16, _mm512_fmadd_ps(vk, g, v));
        }
    }
    if (stream) {
        _mm_sfence();
    }
}
#endif

typedef struct {
    void (*moments)(const float *, int64_t, int64_t, float *, float *);
    void (*affine)(const float *, int64_t, int64_t, const float *, const float *, gboolean, float *,
                   guint8 *, gboolean);
    void (*grad_sums)(const float *, const float *, const guint8 *, int64_t, int64_t, const float *,
                      float *, float *);
    void (*grad_apply)(const float *, const float *, const guint8 *, int64_t, int64_t,
                       const float *, const float *, const float *, float *, gboolean);
    int64_t lanes; /* how many lanes of a pixel one call covers: 8 or 16 */
} BnKernels;

/* The kernels for planes of b lanes: 16 lanes at once on AVX-512, 8 at
 * a time on AVX2, plain C elsewhere. */
static const BnKernels *bn_kernels(int64_t b)
{
    static const BnKernels plain = {moments8_c, affine8_c, grad_sums8_c, grad_apply8_c, 8};
#ifdef BN_HAVE_AVX2
    static const BnKernels avx2 = {moments8_avx2, affine8_avx2, grad_sums8_avx2, grad_apply8_avx2,
                                   8};
    static const BnKernels avx512 = {moments16_avx512, affine16_avx512, grad_sums16_avx512,
                                     grad_apply16_avx512, 16};
    static int have = -1, have512 = -1;
    if (have < 0) {
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        have512 = __builtin_cpu_supports("avx512f");
    }
    if (b == 16 && have512) {
        return &avx512;
    }
    if (have) {
        return &avx2;
    }
#endif
    return &plain;
}

/* Lane vectors of the work buffer. */
typedef struct {
    float *pa, *pb;      /* per plane and lane */
    float *ca, *cb, *cc; /* per channel (padded) */
} BnWork;

static BnWork bn_work(const CpuBnGeom *g, void *work)
{
    int64_t pl = g->n * g->cb * g->b, ch = g->cb * g->b;
    float *f = work;
    return (BnWork){f, f + pl, f + 2 * pl, f + 2 * pl + ch, f + 2 * pl + 2 * ch};
}

/* y = BN(x): training computes the batch statistics into mean/var (biased
 * variance), inference reads them; gamma/beta may be NULL (1 and 0). With
 * relu, y = max(y, 0) and, when mask is given, its bit mask (training). */
void cpu_bn_forward(const CpuBnGeom *g, const float *x, const float *gamma, const float *beta,
                    float eps, gboolean training, float *mean, float *var, gboolean relu, float *y,
                    guint8 *mask, void *work)
{
    const BnKernels *k = bn_kernels(g->b);
    BnWork w = bn_work(g, work);
    int64_t planes = g->n * g->cb, b = g->b, s = g->s, plane = s * b;
    const gboolean stream = bn_stream(g, y);
    if (training) {
#pragma omp parallel for schedule(static) if (bn_parallel(g))
        for (int64_t p = 0; p < planes; p++) {
            for (int64_t l0 = 0; l0 < b; l0 += k->lanes) {
                k->moments(x + p * plane + l0, s, b, w.pa + p * b + l0, w.pb + p * b + l0);
            }
        }
        /* combine the planes of each channel: the mean of the plane means;
         * the planes' squared deviations plus s (plane mean - mean)^2 each.
         * A block's lanes side by side (the planes' order for each), and
         * the blocks over the threads where there are many (resnet's 2048
         * channels x 32 images): each channel's sums are the same. */
#pragma omp parallel for schedule(static) if (bn_combine_parallel(g))
        for (int64_t cb = 0; cb < g->cb; cb++) {
            double m[16] = {0}, q[16] = {0};
            for (int64_t n = 0; n < g->n; n++) {
                const float *pa = w.pa + (n * g->cb + cb) * b;
                for (int64_t l = 0; l < b; l++) {
                    m[l] += pa[l];
                }
            }
            for (int64_t l = 0; l < b; l++) {
                m[l] /= (double)g->n;
            }
            for (int64_t n = 0; n < g->n; n++) {
                const float *pa = w.pa + (n * g->cb + cb) * b, *pb = w.pb + (n * g->cb + cb) * b;
                for (int64_t l = 0; l < b; l++) {
                    double d = pa[l] - m[l];
                    q[l] += pb[l] + (double)s * d * d;
                }
            }
            for (int64_t l = 0; l < b && cb * b + l < g->c; l++) {
                mean[cb * b + l] = (float)m[l];
                var[cb * b + l] = (float)(q[l] / (double)(g->n * s));
            }
        }
    }
    for (int64_t ch = 0; ch < g->cb * b; ch++) {
        float a = 0.0f, sh = 0.0f;
        if (ch < g->c) {
            float inv = 1.0f / sqrtf(var[ch] + eps);
            a = (gamma != NULL ? gamma[ch] : 1.0f) * inv;
            sh = (beta != NULL ? beta[ch] : 0.0f) - mean[ch] * a;
        }
        w.ca[ch] = a;
        w.cb[ch] = sh;
    }
#pragma omp parallel for schedule(static) if (bn_parallel(g))
    for (int64_t p = 0; p < planes; p++) {
        int64_t cb = p % g->cb;
        for (int64_t l0 = 0; l0 < b; l0 += k->lanes) {
            int64_t o = p * plane + l0;
            k->affine(x + o, s, b, w.ca + cb * b + l0, w.cb + cb * b + l0, relu, y + o,
                      relu && mask != NULL ? mask + o / 8 : NULL, stream);
        }
    }
}

/* dx = BN backward of dy (masked by the forward's bit mask when mask is
 * given); dgamma/dbeta are written (not accumulated). */
void cpu_bn_backward(const CpuBnGeom *g, const float *x, const float *dy, const guint8 *mask,
                     const float *gamma, const float *mean, const float *var, float eps, float *dx,
                     float *dgamma, float *dbeta, void *work)
{
    const BnKernels *k = bn_kernels(g->b);
    BnWork w = bn_work(g, work);
    int64_t planes = g->n * g->cb, b = g->b, s = g->s, plane = s * b;
    const gboolean stream = bn_stream(g, dx);
    /* the channel means laid out per lane (padded lanes 0) */
    for (int64_t ch = 0; ch < g->cb * b; ch++) {
        w.cc[ch] = ch < g->c ? mean[ch] : 0.0f;
    }
#pragma omp parallel for schedule(static) if (bn_parallel(g))
    for (int64_t p = 0; p < planes; p++) {
        int64_t cb = p % g->cb;
        for (int64_t l0 = 0; l0 < b; l0 += k->lanes) {
            int64_t o = p * plane + l0;
            k->grad_sums(x + o, dy + o, mask != NULL ? mask + o / 8 : NULL, s, b,
                         w.cc + cb * b + l0, w.pa + p * b + l0, w.pb + p * b + l0);
        }
    }
    double count = (double)(g->n * s);
    /* per channel: its planes' sums in their order, a block's lanes side
     * by side, the blocks over the threads where there are many */
#pragma omp parallel for schedule(static) if (bn_combine_parallel(g))
    for (int64_t cb = 0; cb < g->cb; cb++) {
        double sdy[16] = {0}, sdx[16] = {0};
        for (int64_t n = 0; n < g->n; n++) {
            const float *pa = w.pa + (n * g->cb + cb) * b, *pb = w.pb + (n * g->cb + cb) * b;
            for (int64_t l = 0; l < b; l++) {
                sdy[l] += pa[l];
                sdx[l] += pb[l];
            }
        }
        for (int64_t l = 0; l < b; l++) {
            const int64_t ch = cb * b + l;
            float kk = 0.0f, pp = 0.0f, qq = 0.0f;
            if (ch < g->c) {
                double inv = 1.0 / sqrt((double)var[ch] + (double)eps);
                double gm = gamma != NULL ? gamma[ch] : 1.0;
                dbeta[ch] = (float)sdy[l];
                dgamma[ch] = (float)(sdx[l] * inv);
                /* dx = gm inv (g - sdy / count - (x - mean) inv^2 sdx / count) */
                double kd = gm * inv, r = inv * inv * sdx[l] / count;
                kk = (float)kd;
                pp = (float)(-kd * r);
                qq = (float)(kd * (r * mean[ch] - sdy[l] / count));
            }
            w.ca[ch] = kk;
            w.cb[ch] = pp;
            w.cc[ch] = qq;
        }
    }
#pragma omp parallel for schedule(static) if (bn_parallel(g))
    for (int64_t p = 0; p < planes; p++) {
        int64_t cb = p % g->cb;
        for (int64_t l0 = 0; l0 < b; l0 += k->lanes) {
            int64_t o = p * plane + l0;
            k->grad_apply(x + o, dy + o, mask != NULL ? mask + o / 8 : NULL, s, b,
                          w.ca + cb * b + l0, w.cb + cb * b + l0, w.cc + cb * b + l0, dx + o,
                          stream);
        }
    }
}

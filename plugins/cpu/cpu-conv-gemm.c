/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-gemm.c - convolution as oneDNN sgemms over
 * pixel-major copies of the tensors ([y][x][image][channel] rows, gathered
 * from nChw16c, nChw8c, NCHW or NHWC into the device's scratchpad): one
 * sgemm per filter tap and run of output pixels, so that the taps falling
 * into the padding are never multiplied. Forward and backward data use
 * tap-major copies of the weights; backward weights sums per tap into
 * tiles of output channels, then adds them into the plain gradient.
 *
 * For layers with few pixels and many channels (resnet's last stages:
 * 2x2 to 8x8 planes, 256 or 512 channels) oneDNN 2.6's kernels are slow:
 * a 3x3 filter over a 2x2 plane reads only 16 of its 36 window positions,
 * and its backward-weights primitive splits the images over the threads,
 * each with its own copy of the weight gradient (9 MiB per thread for a
 * 512-channel 3x3 layer), then sums the copies and reorders the result
 * into the plain gradient: it is bound by memory traffic, not arithmetic.
 * Here no thread keeps a copy. Where these lose (large planes, few
 * channels), the tuner keeps oneDNN's kernels; the scratchpad they need is
 * bounded by TDM_CPU_WORKSPACE_LIMIT like oneDNN's Winograd kernels'.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-own.h"

gboolean cpu_gemm_bwf_geom(const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *dymd,
                           const int64_t *wshape, const TdmConv2dParams *p, CpuGemmGeom *g)
{
    CpuPlanes xo, yo;
    if (!cpu_planes(xmd, &xo) || !cpu_planes(dymd, &yo) || p->groups > 1 || p->dilation_h > 1 ||
        p->dilation_w > 1 || p->stride_h < 1 || p->stride_w < 1) {
        return FALSE;
    }
    *g = (CpuGemmGeom){
        .n = xmd->dims[0],
        .c = xmd->dims[1],
        .h = xmd->dims[2],
        .w = xmd->dims[3],
        .xb = xo.b,
        .xplanes = xo.planes / xmd->dims[0],
        .o = dymd->dims[1],
        .oh = dymd->dims[2],
        .ow = dymd->dims[3],
        .yb = yo.b,
        .yplanes = yo.planes / dymd->dims[0],
        .kh = wshape[2],
        .kw = wshape[3],
        .sh = p->stride_h,
        .sw = p->stride_w,
        .ph = p->pad_h,
        .pw = p->pad_w,
        .threads = MAX(1, omp_get_max_threads()),
    };
    return dymd->dims[0] == g->n && wshape[0] == g->o && wshape[1] == g->c;
}

/* A tensor seen as planes of [h][w][b] floats (cpu_planes): NCHW has
 * b = 1, NHWC one plane per image with b = C, nChw8c / nChw16c one plane
 * per image and channel block. Channel c of image n is lane c % b of
 * plane n * planes_per_image + c / b; pixel (y, x) is (y * w + x) * b
 * into it. The loops below walk blocks and lanes instead of dividing. */

/* The ch channels of pixel pix of image img, from a tensor seen as planes
 * (ppi planes per image of [hw][b] floats), into row (ch floats): block by
 * block, no division per element. */
static inline void pixel_to_row(const float *t, int64_t ppi, int64_t b, int64_t hw, int64_t ch,
                                int64_t img, int64_t pix, float *row)
{
    for (int64_t cb = 0; cb < ppi; cb++) {
        const float *src = t + ((img * ppi + cb) * hw + pix) * b;
        const int64_t c0 = cb * b, n = MIN(b, ch - c0);
        for (int64_t l = 0; l < n; l++) {
            row[c0 + l] = src[l];
        }
    }
}

/* ---- pixel rows ----
 *
 * The activations are copied pixel-major: one row of C floats per image
 * and pixel, the images of a pixel next to each other. The output side (y,
 * dy) is in plain order [oy][ox][image]; the input side (x, dx) in stride
 * phase order [y % sh][x % sw][y / sh][x / sw][image] (plain order at
 * stride 1). Then one tap of the filter moves a run of output pixels
 * against a run of consecutive input rows: for tap (ky, kx) and output row
 * oy, the outputs ox whose input ix = ox * sw - pw + kx is inside the
 * image read the input pixels (iy, ix) of one phase, iy = oy * sh - ph +
 * ky; and where the run is a whole row of both copies, the runs of
 * consecutive output rows follow each other in both, so it is one sgemm
 * for all of them (a 1x1 filter: one sgemm for the whole pass). Taps that
 * fall into the padding are never multiplied: on the small planes of
 * resnet's last stages (a 3x3 filter over a 2x2 image reads only 16 of its
 * 36 window positions) this is less than half the arithmetic of a direct
 * kernel, which is why the tuner may prefer it there. */

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Rows of the input side's copy: sh x sw phases of ceil(h / sh) x
 * ceil(w / sw) pixels (a few unused when the stride does not divide). */
static int64_t in_rows(const CpuGemmGeom *g)
{
    return g->sh * g->sw * ceil_div(g->h, g->sh) * ceil_div(g->w, g->sw) * g->n;
}

static int64_t out_rows(const CpuGemmGeom *g)
{
    return g->oh * g->ow * g->n;
}

/* The row of image 0 at pixel (y, x) of a copy in phase order of stride
 * (sh, sw) over an h x w plane of n images. */
static int64_t row_of(int64_t y, int64_t x, int64_t h, int64_t w, int64_t sh, int64_t sw, int64_t n)
{
    return ((((y % sh) * sw + x % sw) * ceil_div(h, sh) + y / sh) * ceil_div(w, sw) + x / sw) * n;
}

static int64_t in_row(const CpuGemmGeom *g, int64_t y, int64_t x)
{
    return row_of(y, x, g->h, g->w, g->sh, g->sw, g->n);
}

size_t cpu_gemm_rows_work_bytes(const CpuGemmGeom *g)
{
    return sizeof(float) * (size_t)(in_rows(g) * g->c + out_rows(g) * g->o);
}

/* rows of a tensor of `ch` channels seen as planes (ppi planes per image
 * of [h][w][b] floats), in phase order of stride (sh, sw) */
static void to_rows(const float *t, int64_t ppi, int64_t b, int64_t n, int64_t ch, int64_t h,
                    int64_t w, int64_t sh, int64_t sw, float *rows)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n * h * w; r++) {
        const int64_t pix = r / n, img = r % n;
        const int64_t row = row_of(pix / w, pix % w, h, w, sh, sw, n) + img;
        pixel_to_row(t, ppi, b, h * w, ch, img, pix, rows + row * ch);
    }
}

/* the rows back into the planes, every channel of the layout (a block's
 * padding gets zeros), plus bias and then ReLU when given */
static void from_rows(const float *rows, int64_t ppi, int64_t b, int64_t n, int64_t ch, int64_t h,
                      int64_t w, int64_t sh, int64_t sw, const float *bias, gboolean relu, float *t)
{
    const int64_t hw = h * w;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n * hw; r++) {
        const int64_t pix = r / n, img = r % n;
        const float *src = rows + (row_of(pix / w, pix % w, h, w, sh, sw, n) + img) * ch;
        for (int64_t cb = 0; cb < ppi; cb++) {
            float *dst = t + ((img * ppi + cb) * hw + pix) * b;
            for (int64_t l = 0; l < b; l++) {
                const int64_t c = cb * b + l;
                float v = 0.0f;
                if (c < ch) {
                    v = src[c] + (bias != NULL ? bias[c] : 0.0f);
                    v = relu && !(v > 0.0f) ? 0.0f : v;
                }
                dst[l] = v;
            }
        }
    }
}

/* The outputs [*lo, *hi) of n_out along one axis whose input o * s - p + k
 * is inside [0, n_in). */
static void tap_range(int64_t n_out, int64_t s, int64_t p, int64_t k, int64_t n_in, int64_t *lo,
                      int64_t *hi)
{
    int64_t a = 0, z = n_out;
    while (a < z && a * s - p + k < 0) {
        a++;
    }
    while (z > a && (z - 1) * s - p + k >= n_in) {
        z--;
    }
    *lo = a;
    *hi = z;
}

/* One sgemm's share of a tap: the tap (ky * kw + kx), the first rows of
 * the input and output copies, and how many rows. */
typedef struct {
    int64_t tap, in, out, rows;
} TapBlock;

typedef gboolean (*TapBlockFn)(const CpuGemmGeom *g, const TapBlock *b, void *ctx);

/* Calls fn for each block of each tap: the output pixels of a row whose
 * input is inside the image, one output row at a time, or all the tap's
 * rows at once where a run is a whole row of both copies. A tap that
 * reads only padding has none. FALSE as soon as fn returns FALSE. */
static gboolean each_tap_block(const CpuGemmGeom *g, TapBlockFn fn, void *ctx)
{
    for (int64_t ky = 0; ky < g->kh; ky++) {
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t x0, x1, y0, y1;
            tap_range(g->ow, g->sw, g->pw, kx, g->w, &x0, &x1);
            tap_range(g->oh, g->sh, g->ph, ky, g->h, &y0, &y1);
            const int64_t run = x1 - x0;
            const int64_t ystep = run == g->ow && run == ceil_div(g->w, g->sw) ? y1 - y0 : 1;
            for (int64_t oy = y0; run > 0 && oy < y1; oy += ystep) {
                const TapBlock b = {
                    .tap = ky * g->kw + kx,
                    .in = in_row(g, oy * g->sh - g->ph + ky, x0 * g->sw - g->pw + kx),
                    .out = (oy * g->ow + x0) * g->n,
                    .rows = ystep * run * g->n,
                };
                if (!fn(g, &b, ctx)) {
                    return FALSE;
                }
            }
        }
    }
    return TRUE;
}

/* ---- the weights tap-major: [T][C][O] for the forward (out_o), [T][O][C]
 * for backward data (T = KH x KW taps), from the plain [O][C][T] ----
 *
 * Each pass runs before every call (the weights change every step), so it
 * must cost no more than oneDNN's own reorder into its blocked layout;
 * oneDNN's generic reorder into these orders took 0.7-1.8 ms for a
 * 512x512x3x3 filter, about as long as the sgemms. Here tiles of 16 x 16
 * (o, c) pairs, whose 16 x 16 x T source floats stay in L1, are
 * transposed with 16-lane gathers on AVX-512, one destination line per
 * gather; the plain loop handles partial tiles and other machines. */

static void by_tap_tile_plain(const float *w, int64_t O, int64_t C, int64_t T, int64_t o0,
                              int64_t o1, int64_t c0, int64_t c1, gboolean out_o, float *wt)
{
    for (int64_t t = 0; t < T; t++) {
        if (out_o) {
            for (int64_t c = c0; c < c1; c++) {
                for (int64_t o = o0; o < o1; o++) {
                    wt[(t * C + c) * O + o] = w[(o * C + c) * T + t];
                }
            }
        } else {
            for (int64_t o = o0; o < o1; o++) {
                for (int64_t c = c0; c < c1; c++) {
                    wt[(t * O + o) * C + c] = w[(o * C + c) * T + t];
                }
            }
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BY_TAP_GATHER 1
/* a full tile: 16 o from o0, 16 c from c0 */
static __attribute__((target("avx512f"), noinline)) void
by_tap_tile_avx512(const float *w, int64_t O, int64_t C, int64_t T, int64_t o0, int64_t c0,
                   gboolean out_o, float *wt)
{
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* lanes over o (stride C T floats) or over c (stride T) */
    const __m512i idx = _mm512_mullo_epi32(lanes, _mm512_set1_epi32((int)(out_o ? C * T : T)));
    for (int64_t t = 0; t < T; t++) {
        for (int64_t k = 0; k < 16; k++) {
            if (out_o) {
                const float *src = w + (o0 * C + c0 + k) * T + t;
                _mm512_storeu_ps(wt + (t * C + c0 + k) * O + o0,
                                 _mm512_i32gather_ps(idx, src, 4));
            } else {
                const float *src = w + ((o0 + k) * C + c0) * T + t;
                _mm512_storeu_ps(wt + (t * O + o0 + k) * C + c0,
                                 _mm512_i32gather_ps(idx, src, 4));
            }
        }
    }
}
#endif

void cpu_gemm_weights_by_tap(const CpuGemmGeom *g, const float *w, gboolean out_o, float *wt)
{
    const int64_t O = g->o, C = g->c, T = g->kh * g->kw;
    const int64_t ot = (O + 15) / 16, ct = (C + 15) / 16;
#ifdef BY_TAP_GATHER
    /* int32 gather offsets: 16 rows of C x T floats */
    const gboolean gather = __builtin_cpu_supports("avx512f") && 16 * C * T < G_MAXINT32;
#else
    const gboolean gather = FALSE;
#endif
#pragma omp parallel for schedule(static)
    for (int64_t tile = 0; tile < ot * ct; tile++) {
        const int64_t o0 = tile / ct * 16, c0 = tile % ct * 16;
        const int64_t o1 = MIN(O, o0 + 16), c1 = MIN(C, c0 + 16);
#ifdef BY_TAP_GATHER
        if (gather && o1 - o0 == 16 && c1 - c0 == 16) {
            by_tap_tile_avx512(w, O, C, T, o0, c0, out_o, wt);
            continue;
        }
#endif
        by_tap_tile_plain(w, O, C, T, o0, o1, c0, c1, out_o, wt);
    }
}

/* out rows += in rows x wt over every tap: forward (in = x, out = y, wt
 * [T][C][O]) or backward data (in = dy, out = dx, wt [T][O][C]) */
typedef struct {
    gboolean forward;
    const float *in, *wt;
    float *out;
} TapGemms;

static gboolean tap_gemm(const CpuGemmGeom *g, const TapBlock *b, void *ctx)
{
    const TapGemms *p = ctx;
    const int64_t kin = p->forward ? g->c : g->o, kout = p->forward ? g->o : g->c;
    const int64_t arow = p->forward ? b->in : b->out, crow = p->forward ? b->out : b->in;
    return dnnl_sgemm('N', 'N', b->rows, kout, kin, 1.0f, p->in + arow * kin, kin,
                      p->wt + b->tap * g->c * g->o, kout, 1.0f, p->out + crow * kout,
                      kout) == dnnl_success;
}

static gboolean tap_gemms(const CpuGemmGeom *g, gboolean forward, const float *in, const float *wt,
                          float *out)
{
    TapGemms p = {forward, in, wt, out};
    return each_tap_block(g, tap_gemm, &p);
}

/* (oneDNN 2.6's sgemm with B transposed ran at 30-70% of its speed
 * without: a 1x1 filter's forward copies its weights transposed too.) */
gboolean cpu_gemm_fwd_run(const CpuGemmGeom *g, const float *x, const float *w, float *wt,
                          const float *bias, gboolean relu, float *y, void *work)
{
    float *xg = work, *yg = xg + in_rows(g) * g->c;
    cpu_gemm_weights_by_tap(g, w, TRUE, wt);
    to_rows(x, g->xplanes, g->xb, g->n, g->c, g->h, g->w, g->sh, g->sw, xg);
    memset(yg, 0, sizeof(float) * (size_t)(out_rows(g) * g->o));
    if (!tap_gemms(g, TRUE, xg, wt, yg)) {
        return FALSE;
    }
    from_rows(yg, g->yplanes, g->yb, g->n, g->o, g->oh, g->ow, 1, 1, bias, relu, y);
    return TRUE;
}

gboolean cpu_gemm_bwd_data_run(const CpuGemmGeom *g, const float *dy, const float *w, float *wt,
                               float *dx, void *work)
{
    float *dxg = work, *dyg = dxg + in_rows(g) * g->c;
    /* a 1x1 filter's [O][C] is its only tap as it is */
    const gboolean one = g->kh * g->kw == 1;
    if (!one) {
        cpu_gemm_weights_by_tap(g, w, FALSE, wt);
    }
    to_rows(dy, g->yplanes, g->yb, g->n, g->o, g->oh, g->ow, 1, 1, dyg);
    memset(dxg, 0, sizeof(float) * (size_t)(in_rows(g) * g->c));
    if (!tap_gemms(g, FALSE, dyg, one ? w : wt, dxg)) {
        return FALSE;
    }
    from_rows(dxg, g->xplanes, g->xb, g->n, g->c, g->h, g->w, g->sh, g->sw, NULL, FALSE, dx);
    return TRUE;
}

/* ---- backward weights: per tap, sgemms over pixel rows ----
 *
 * dw[o][c][tap] += sum over the output pixels p whose input p + tap is
 * inside the image of dy[p][o] x[p + tap][c]: for each tap, the runs of
 * pixels of the forward, one sgemm each, dy^T [O][rows] x x [rows][C],
 * into a tap-major [T][O][C] block. Taps that fall into the padding are
 * never multiplied (16 of 36 window positions on a 2x2 plane: one sgemm
 * over im2col columns multiplies all of them, mostly by zero).
 *
 * The output channels are split into tiles of CPU_GEMM_BWF_TILE_O, one
 * per thread at a time, each with its own [T][tile][C] block (under 1 MiB
 * for 512 channels: it stays in the core's cache) that is then added into
 * the plain gradient's [tile][C][T] rows. No thread keeps a copy of the
 * whole gradient, the gradient is read and written once, and a tile's sums
 * are made in the same order whatever the thread count (sgemm runs on one
 * thread inside the loop): the same bits on any number of threads. A 1x1
 * filter's gradient is its tap-major block: its sgemms run straight into
 * it, on every thread. */

/* kernels of up to this many taps go through bwf_tile_add's buffer */
#define CPU_GEMM_BWF_ADD_TAPS 128

/* Floats from one tap's [on][C] block of a tile to the next: 16 more
 * than the block, so that the T rows bwf_tile_add reads together do not
 * fall on one cache set (on x C floats is a power of two on resnets). */
static int64_t bwf_tap_stride(const CpuGemmGeom *g, int64_t on)
{
    return on * g->c + 16;
}

static int64_t bwf_tile_floats(const CpuGemmGeom *g)
{
    return g->kh * g->kw * bwf_tap_stride(g, MIN(g->o, CPU_GEMM_BWF_TILE_O));
}

size_t cpu_gemm_bwf_work_bytes(const CpuGemmGeom *g)
{
    return cpu_gemm_rows_work_bytes(g) + sizeof(float) * (size_t)(g->threads * bwf_tile_floats(g));
}

/* acc [T][on][C] (one tile of on output channels from o0; a tap's block
 * ld floats from the last) += dy^T x x over every tap's blocks */
typedef struct {
    const float *xr, *yr;
    int64_t o0, on, ld;
    float *acc;
} BwfTile;

static gboolean bwf_gemm(const CpuGemmGeom *g, const TapBlock *b, void *ctx)
{
    const BwfTile *p = ctx;
    return dnnl_sgemm('T', 'N', p->on, g->c, b->rows, 1.0f, p->yr + b->out * g->o + p->o0, g->o,
                      p->xr + b->in * g->c, g->c, 1.0f, p->acc + b->tap * p->ld,
                      g->c) == dnnl_success;
}

static gboolean bwf_tile(const CpuGemmGeom *g, const float *xr, const float *yr, int64_t o0,
                         int64_t on, int64_t ld, float *acc)
{
    BwfTile p = {xr, yr, o0, on, ld, acc};
    return each_tap_block(g, bwf_gemm, &p);
}

/* dw [o0 + o][c][t] += acc [t][o][c]: for each output channel, C x T
 * contiguous floats of dw from T rows of the tile, n <= 16 channels at a
 * time through a buffer that stays in L1 (one loop transposes T rows of n
 * floats into it, the other adds it to dw). Inlined with n = 16 and T = 9
 * (3x3 kernels) constant, the compiler unrolls and vectorizes both loops:
 * twice the speed of the same loops with n and T variables. */
static inline __attribute__((always_inline)) void bwf_add_block(const float *a, int64_t ld,
                                                                int64_t n, int64_t T, float *d)
{
    float buf[16 * CPU_GEMM_BWF_ADD_TAPS];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t l = 0; l < n; l++) {
            buf[l * T + t] = a[t * ld + l];
        }
    }
    for (int64_t j = 0; j < n * T; j++) {
        d[j] += buf[j];
    }
}

static void bwf_tile_add(const CpuGemmGeom *g, const float *acc, int64_t o0, int64_t on, float *dw)
{
    const int64_t C = g->c, T = g->kh * g->kw, ld = bwf_tap_stride(g, on);
    for (int64_t o = 0; o < on; o++) {
        float *d = dw + (o0 + o) * C * T;
        const float *a = acc + o * C;
        if (T > CPU_GEMM_BWF_ADD_TAPS) { /* straight */
            for (int64_t c = 0; c < C; c++) {
                for (int64_t t = 0; t < T; t++) {
                    d[c * T + t] += a[t * ld + c];
                }
            }
            continue;
        }
        for (int64_t c0 = 0; c0 < C; c0 += 16) {
            const int64_t n = MIN(16, C - c0);
            if (n == 16 && T == 9) {
                bwf_add_block(a + c0, ld, 16, 9, d + c0 * T);
            } else {
                bwf_add_block(a + c0, ld, n, T, d + c0 * T);
            }
        }
    }
}

gboolean cpu_gemm_bwf_run(const CpuGemmGeom *g, const float *x, const float *dy, float *dw,
                          float *db, void *work)
{
    const int64_t O = g->o, yrows = out_rows(g);
    float *xr = work, *yr = xr + in_rows(g) * g->c, *tiles = yr + yrows * O;
    to_rows(x, g->xplanes, g->xb, g->n, g->c, g->h, g->w, g->sh, g->sw, xr);
    to_rows(dy, g->yplanes, g->yb, g->n, O, g->oh, g->ow, 1, 1, yr);
    if (db != NULL) {
        /* in row order, whatever the thread count: the same bits */
        for (int64_t r = 0; r < yrows; r++) {
            for (int64_t o = 0; o < O; o++) {
                db[o] += yr[r * O + o];
            }
        }
    }
    if (g->kh * g->kw == 1) {
        return bwf_tile(g, xr, yr, 0, O, 0, dw);
    }
    const int64_t tile_o = MIN(O, CPU_GEMM_BWF_TILE_O), ntiles = (O + tile_o - 1) / tile_o;
    gboolean failed = FALSE;
#pragma omp parallel for schedule(static) num_threads(g->threads)
    for (int64_t i = 0; i < ntiles; i++) {
        float *acc = tiles + omp_get_thread_num() * bwf_tile_floats(g);
        const int64_t o0 = i * tile_o, on = MIN(tile_o, O - o0), ld = bwf_tap_stride(g, on);
        memset(acc, 0, sizeof(float) * (size_t)(g->kh * g->kw * ld));
        if (bwf_tile(g, xr, yr, o0, on, ld, acc)) {
            bwf_tile_add(g, acc, o0, on, dw);
        } else {
#pragma omp atomic write
            failed = TRUE;
        }
    }
    return !failed;
}

/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-maxpool.c - max pooling, on the backend's own loops
 * where they apply and on oneDNN (cpu-pool.c) elsewhere.
 *
 * oneDNN's max pooling is slow on the small, channel-padded images of a
 * LeNet-sized network (hundreds of microseconds for a 64x6x28x28 batch). A
 * layout whose every (image, channel block) is a dense [H][W][b] plane
 * (plain NCHW: b = 1; nChw8c / nChw16c: b = 8 / 16; NHWC: one plane per
 * image, b = C) pools with a straight loop instead, plane by plane over the
 * OpenMP pool. The forward of 16-lane blocks on AVX-512 and of 8-lane ones
 * on AVX2 keeps each output's running maximum and choice in vector
 * registers over its window, with no bounds checks where the window lies
 * inside the image (cpu-maxpool-vec.h): on ResNet's stem pool (3x3, stride
 * 2, padding 1) it costs about what reading the input costs, 3-4x less
 * than the general loops, which do the rest (the backward included). The
 * result keeps the input's layout; channels in a block's padding pool like
 * any other (zeros in, zeros out). The workspace is the window position
 * (kh * KW + kw) of each output's choice, one byte each in the
 * destination's physical order; choice and backward order are the ref
 * backend's (first maximum, a NaN wins; gradients added in output order).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu.h"

/* Whether the own loops pool x (its desc in xmd); *ymd gets the output's
 * desc, the input's layout at the pooled size. */
static gboolean own_maxpool_usable(const dnnl_memory_desc_t *xmd, const TdmPool2dParams *p,
                                   const CpuPoolGeom *g, CpuPlanes *xo, dnnl_memory_desc_t *ymd)
{
    CpuPlanes yo;
    if (p->kernel_h * p->kernel_w > 255 || !cpu_planes(xmd, xo)) {
        return FALSE;
    }
    dnnl_dims_t dims = {g->y_shape[0], g->y_shape[1], g->y_shape[2], g->y_shape[3]};
    return dnnl_memory_desc_init_by_tag(ymd, 4, dims, dnnl_f32, xo->tag) == dnnl_success &&
           cpu_planes(ymd, &yo) && yo.planes == xo->planes && yo.b == xo->b;
}

/* The general loops: one plane's, written for a block width known at
 * compile time (the inline bodies below are instantiated for 16, 8 and 1,
 * and once for any width) so that the channel loop becomes vector compares
 * and blends; the clones pick AVX-512 or AVX2 at load time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define POOL_KERNEL __attribute__((target_clones("avx512f", "avx2", "default"), noinline))
#else
#define POOL_KERNEL __attribute__((noinline))
#endif

typedef struct {
    int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw;
} PlaneGeom;

/* A float's bits, allowed to alias the float (GCC's may_alias). */
typedef guint32 __attribute__((may_alias)) PoolBits;

static inline __attribute__((always_inline)) void
plane_fwd(const float *restrict xp, float *restrict yp, guint8 *restrict wp, const PlaneGeom *g,
          const int64_t B)
{
    for (int64_t oh = 0; oh < g->oh; oh++) {
        const int64_t h0 = oh * g->sh - g->ph;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            const int64_t w0 = ow * g->sw - g->pw;
            float *yo = yp + (oh * g->ow + ow) * B;
            guint8 *wo = wp + (oh * g->ow + ow) * B;
            gboolean first = TRUE;
            for (int64_t kh = 0; kh < g->kh; kh++) {
                const int64_t ih = h0 + kh;
                if (ih < 0 || ih >= g->h) {
                    continue;
                }
                for (int64_t kw = 0; kw < g->kw; kw++) {
                    const int64_t iw = w0 + kw;
                    if (iw < 0 || iw >= g->w) {
                        continue;
                    }
                    const float *v = xp + (ih * g->w + iw) * B;
                    const guint8 k = (guint8)(kh * g->kw + kw);
                    if (first) {
#pragma omp simd
                        for (int64_t c = 0; c < B; c++) {
                            yo[c] = v[c];
                            wo[c] = k;
                        }
                        first = FALSE;
                        continue;
                    }
#pragma omp simd
                    for (int64_t c = 0; c < B; c++) {
                        const gboolean take = (v[c] > yo[c]) | (v[c] != v[c]);
                        yo[c] = take ? v[c] : yo[c];
                        wo[c] = take ? k : wo[c];
                    }
                }
            }
        }
    }
}

static inline __attribute__((always_inline)) void
plane_bwd(const float *restrict dyp, const guint8 *restrict wp, float *restrict dxp,
          const PlaneGeom *g, const int64_t B)
{
    memset(dxp, 0, sizeof(float) * (size_t)(g->h * g->w * B));
    /* Each window position adds the outputs that chose it (and +0 for the
     * others, which changes nothing), in output order as the ref does. */
    for (int64_t oh = 0; oh < g->oh; oh++) {
        const int64_t h0 = oh * g->sh - g->ph;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            const int64_t w0 = ow * g->sw - g->pw;
            const float *yo = dyp + (oh * g->ow + ow) * B;
            const guint8 *wo = wp + (oh * g->ow + ow) * B;
            for (int64_t kh = 0; kh < g->kh; kh++) {
                const int64_t ih = h0 + kh;
                if (ih < 0 || ih >= g->h) {
                    continue;
                }
                for (int64_t kw = 0; kw < g->kw; kw++) {
                    const int64_t iw = w0 + kw;
                    if (iw < 0 || iw >= g->w) {
                        continue;
                    }
                    float *d = dxp + (ih * g->w + iw) * B;
                    const guint8 k = (guint8)(kh * g->kw + kw);
                    const PoolBits *yb = (const PoolBits *)yo;
#pragma omp simd
                    for (int64_t c = 0; c < B; c++) {
                        /* dy or +0. GCC vectorises the float select on a
                         * byte compare for 16 lanes (with AVX-512's masks)
                         * but not for 8 or 1; there dy's bits under an
                         * integer mask (as in plane_bwd_tiled) are 4x
                         * faster (3% slower on 16). Same values added. */
                        const union {
                            guint32 bits;
                            float f;
                        } add = {.bits = yb[c] & (0u - (guint32)(wo[c] == k))};
                        d[c] += B == 16 ? (wo[c] == k ? yo[c] : 0.0f) : add.f;
                    }
                }
            }
        }
    }
}

/* Windows that tile the plane (stride = window, no padding: every pooling
 * layer of lenet and VGG-style nets) need no bounds checks, and in the
 * backward each input position belongs to at most one window, so dx is
 * written once instead of cleared and accumulated. Same choices and sums as
 * the general loops. */

static inline __attribute__((always_inline)) void
plane_fwd_tiled(const float *restrict xp, float *restrict yp, guint8 *restrict wp,
                const PlaneGeom *g, const int64_t KH, const int64_t KW, const int64_t B)
{
    for (int64_t oh = 0; oh < g->oh; oh++) {
        for (int64_t ow = 0; ow < g->ow; ow++) {
            const float *v0 = xp + (oh * KH * g->w + ow * KW) * B;
            float *yo = yp + (oh * g->ow + ow) * B;
            guint8 *wo = wp + (oh * g->ow + ow) * B;
#pragma omp simd
            for (int64_t c = 0; c < B; c++) {
                float best = v0[c];
                guint8 at = 0;
                for (int64_t kh = 0; kh < KH; kh++) {
                    for (int64_t kw = (kh == 0); kw < KW; kw++) {
                        const float v = v0[(kh * g->w + kw) * B + c];
                        const gboolean take = (v > best) | (v != v);
                        best = take ? v : best;
                        at = take ? (guint8)(kh * KW + kw) : at;
                    }
                }
                yo[c] = best;
                wo[c] = at;
            }
        }
    }
}

static inline __attribute__((always_inline)) void
plane_bwd_tiled(const float *restrict dyp, const guint8 *restrict wp, float *restrict dxp,
                const PlaneGeom *g, const int64_t KH, const int64_t KW, const int64_t B)
{
    const int64_t covered_h = g->oh * KH, covered_w = g->ow * KW;
    for (int64_t oh = 0; oh < g->oh; oh++) {
        for (int64_t kh = 0; kh < KH; kh++) {
            float *d = dxp + (oh * KH + kh) * g->w * B;
            for (int64_t ow = 0; ow < g->ow; ow++) {
                const float *yo = dyp + (oh * g->ow + ow) * B;
                const guint8 *wo = wp + (oh * g->ow + ow) * B;
                for (int64_t kw = 0; kw < KW; kw++) {
                    const guint8 k = (guint8)(kh * KW + kw);
                    /* dy's bits where this position was chosen, else +0: an
                     * integer mask, which vectorises (a float select on a
                     * byte compare does not) */
                    PoolBits *dd = (PoolBits *)(d + (ow * KW + kw) * B);
                    const PoolBits *yb = (const PoolBits *)yo;
#pragma omp simd
                    for (int64_t c = 0; c < B; c++) {
                        dd[c] = yb[c] & (0u - (guint32)(wo[c] == k));
                    }
                }
            }
            if (covered_w < g->w) {
                memset(d + covered_w * B, 0, sizeof(float) * (size_t)((g->w - covered_w) * B));
            }
        }
    }
    if (covered_h < g->h) {
        memset(dxp + covered_h * g->w * B, 0, sizeof(float) * (size_t)((g->h - covered_h) * g->w * B));
    }
}

/* The forward for blocks of 16 lanes on AVX-512 and of 8 on AVX2, the
 * layouts oneDNN's convolutions give there (cpu-maxpool-vec.h): each
 * output's running maximum and window position stay in vector registers
 * over its taps and are stored once, where plane_fwd stores and reloads
 * both at every tap (that chain through memory, not the compares, was its
 * cost: 1.7 ms a call on ResNet's stem pool at 64 px, now 0.5). A plane's
 * outputs split into those whose window lies inside the image (all of them
 * when the windows tile it), which need no bounds, and the rest, around
 * the edges, whose window is clipped to the image. Same choices, bit for
 * bit, as plane_fwd and plane_fwd_tiled. */

/* GCC 12 for __builtin_shufflevector (AVX2's narrowing of the positions). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__) &&           \
    defined(__linux__)
#define POOL_VEC 1

/* The outputs [*lo, *hi) along one axis whose windows (k taps from
 * o * s - pad) lie inside the n inputs. */
static void pool_inside_range(int64_t n, int64_t k, int64_t s, int64_t pad, int64_t outs,
                              int64_t *lo, int64_t *hi)
{
    *lo = MIN((pad + s - 1) / s, outs);
    *hi = n + pad - k >= 0 ? MIN((n + pad - k) / s + 1, outs) : 0;
    *hi = MAX(*hi, *lo);
}

/* Whether the window is k x k at stride s. */
static gboolean pool_window_is(const PlaneGeom *g, int64_t k, int64_t s)
{
    return g->kh == k && g->kw == k && g->sh == s && g->sw == s;
}

/* A block's floats, its per-lane integers (what a comparison gives) and its
 * workspace bytes; unaligned (a pixel's block is only float-aligned). */
typedef float __attribute__((vector_size(64), aligned(4), may_alias)) PoolF16;
typedef gint32 __attribute__((vector_size(64))) PoolI16;
typedef guint8 __attribute__((vector_size(16), aligned(1), may_alias)) PoolU16;
typedef float __attribute__((vector_size(32), aligned(4), may_alias)) PoolF8;
typedef gint32 __attribute__((vector_size(32))) PoolI8;
typedef guint8 __attribute__((vector_size(8), aligned(1), may_alias)) PoolU8;

#pragma GCC push_options
#pragma GCC target("avx512f")
#define POOL_VEC_ISA avx512_
#define POOL_VEC_B 16
#include "cpu-maxpool-vec.h"
#undef POOL_VEC_B
#undef POOL_VEC_ISA
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
#define POOL_VEC_ISA avx2_
#define POOL_VEC_B 8
#include "cpu-maxpool-vec.h"
#undef POOL_VEC_B
#undef POOL_VEC_ISA
#pragma GCC pop_options

/* 2: AVX-512F, 1: AVX2, 0: neither. */
static int pool_vec_isa(void)
{
    static int isa = -1;
    if (isa < 0) {
        __builtin_cpu_init();
        isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return isa;
}
#endif

static gboolean plane_tiled(const PlaneGeom *g)
{
    return g->kh == g->sh && g->kw == g->sw && g->ph == 0 && g->pw == 0;
}

POOL_KERNEL
static void k_pool_fwd_loops(const float *xp, float *yp, guint8 *wp, const PlaneGeom *g,
                             int64_t B)
{
    if (plane_tiled(g) && g->kh == 2 && g->kw == 2 && (B == 8 || B == 16)) {
        if (B == 8) {
            plane_fwd_tiled(xp, yp, wp, g, 2, 2, 8);
        } else {
            plane_fwd_tiled(xp, yp, wp, g, 2, 2, 16);
        }
    } else if (plane_tiled(g)) {
        plane_fwd_tiled(xp, yp, wp, g, g->kh, g->kw, B);
    } else if (B == 16) {
        plane_fwd(xp, yp, wp, g, 16);
    } else if (B == 8) {
        plane_fwd(xp, yp, wp, g, 8);
    } else if (B == 1) {
        plane_fwd(xp, yp, wp, g, 1);
    } else {
        plane_fwd(xp, yp, wp, g, B);
    }
}

static void k_pool_fwd(const float *xp, float *yp, guint8 *wp, const PlaneGeom *g, int64_t B)
{
#ifdef POOL_VEC
    if (B == 16 && pool_vec_isa() == 2) {
        k_pool_fwd_vec_avx512_16(xp, yp, wp, g);
        return;
    }
    if (B == 8 && pool_vec_isa() >= 1) {
        k_pool_fwd_vec_avx2_8(xp, yp, wp, g);
        return;
    }
#endif
    k_pool_fwd_loops(xp, yp, wp, g, B);
}

POOL_KERNEL
static void k_pool_bwd(const float *dyp, const guint8 *wp, float *dxp, const PlaneGeom *g,
                       int64_t B)
{
    if (plane_tiled(g) && g->kh == 2 && g->kw == 2 && (B == 8 || B == 16)) {
        if (B == 8) {
            plane_bwd_tiled(dyp, wp, dxp, g, 2, 2, 8);
        } else {
            plane_bwd_tiled(dyp, wp, dxp, g, 2, 2, 16);
        }
    } else if (plane_tiled(g)) {
        plane_bwd_tiled(dyp, wp, dxp, g, g->kh, g->kw, B);
    } else if (B == 16) {
        plane_bwd(dyp, wp, dxp, g, 16);
    } else if (B == 8) {
        plane_bwd(dyp, wp, dxp, g, 8);
    } else if (B == 1) {
        plane_bwd(dyp, wp, dxp, g, 1);
    } else {
        plane_bwd(dyp, wp, dxp, g, B);
    }
}

static PlaneGeom plane_geom(const CpuPlanes *xo, const CpuPoolGeom *g, const TdmPool2dParams *p)
{
    return (PlaneGeom){.h = xo->h, .w = xo->w, .oh = g->y_shape[2], .ow = g->y_shape[3],
                       .kh = p->kernel_h, .kw = p->kernel_w, .sh = p->stride_h,
                       .sw = p->stride_w, .ph = p->pad_h, .pw = p->pad_w};
}

static void own_maxpool_fwd(const float *x, float *y, guint8 *ws, const CpuPlanes *xo,
                            const CpuPoolGeom *g, const TdmPool2dParams *p)
{
    const PlaneGeom pg = plane_geom(xo, g, p);
    const int64_t in = pg.h * pg.w * xo->b, out = pg.oh * pg.ow * xo->b;
#pragma omp parallel for schedule(static) if (xo->planes * in > 32768)
    for (int64_t pl = 0; pl < xo->planes; pl++) {
        k_pool_fwd(x + pl * in, y + pl * out, ws + pl * out, &pg, xo->b);
    }
}

static void own_maxpool_bwd(const float *dy, const guint8 *ws, float *dx, const CpuPlanes *xo,
                            const CpuPoolGeom *g, const TdmPool2dParams *p)
{
    const PlaneGeom pg = plane_geom(xo, g, p);
    const int64_t in = pg.h * pg.w * xo->b, out = pg.oh * pg.ow * xo->b;
#pragma omp parallel for schedule(static) if (xo->planes * in > 32768)
    for (int64_t pl = 0; pl < xo->planes; pl++) {
        k_pool_bwd(dy + pl * out, ws + pl * out, dx + pl * in, &pg, xo->b);
    }
}

/* The own loops' entries share the op kinds with cpu-pool.c's oneDNN
 * entries; this value in their keys tells them apart. */
#define OWN_KEY_MARK (-2)

/* Forward on the own loops: *done is FALSE (and nothing happens) when the
 * layout or window does not suit them. */
static gboolean own_maxpool_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                    const CpuPoolGeom *g, TdmTensor *x, TdmTensor *y,
                                    TdmTensor *ws, gboolean *done, GError **error)
{
    *done = FALSE;
    CpuKey key;
    cpu_pool_key_init(&key, CPU_OP_MAXPOOL_FWD, p, dnnl_pooling_max);
    cpu_key_add(&key, OWN_KEY_MARK);
    cpu_key_add_tensor(&key, x);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_MAXPOOL_FWD, &key);
    if (e == NULL) {
        dnnl_memory_desc_t xmd, ymd;
        CpuPlanes xo;
        if (!cpu_tensor_md(x, &xmd, NULL) || !own_maxpool_usable(&xmd, p, g, &xo, &ymd)) {
            return TRUE;
        }
        e = cpu_entry_new(CPU_OP_MAXPOOL_FWD, &key);
        cpu_entry_set_output(dev, e, 0, &ymd, TDM_DTYPE_F32);
        e->maxpool_own.planes = xo;
        e->maxpool_own.workspace_bytes = (int64_t)(e->nbytes[0] / sizeof(float));
        cpu_cache_insert(cache, e);
    }
    *done = TRUE;
    CpuMaxpoolOwnOp *op = &e->maxpool_own;
    int64_t ws_len = op->workspace_bytes;
    gboolean ok = cpu_entry_ensure_output(e, 0, y, 4, g->y_shape, error);
    guint8 *wsp = NULL;
    if (ok && ws != NULL) {
        ok = tdm_tensor_ensure(ws, TDM_DTYPE_U8, 1, &ws_len, NULL, 0, error);
        wsp = ok ? tdm_tensor_data(ws) : NULL;
    } else if (ok) {
        if (op->workspace_buf == NULL) {
            op->workspace_buf = cpu_entry_buf(e, (size_t)ws_len);
        }
        wsp = op->workspace_buf;
        ok = wsp != NULL;
    }
    if (ok) {
        own_maxpool_fwd(tdm_tensor_data(x), tdm_tensor_data(y), wsp, &op->planes, g, p);
    }
    cpu_entry_release(cache, e);
    return ok;
}

static gboolean own_maxpool_backward(TdmDevice *dev, TdmOpCache **cache,
                                     const TdmPool2dParams *p, const CpuPoolGeom *g, TdmTensor *dy,
                                     TdmTensor *ws, const TdmTensor *x_like, TdmTensor *dx,
                                     gboolean *done, GError **error)
{
    *done = FALSE;
    CpuKey key;
    cpu_pool_key_init(&key, CPU_OP_MAXPOOL_BWD, p, dnnl_pooling_max);
    cpu_key_add(&key, OWN_KEY_MARK);
    cpu_key_add_tensors(&key, 2, dy, x_like);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_MAXPOOL_BWD, &key);
    if (e == NULL) {
        dnnl_memory_desc_t xmd, ymd, dymd;
        CpuPlanes xo;
        if (!cpu_tensor_md(x_like, &xmd, NULL) || !own_maxpool_usable(&xmd, p, g, &xo, &ymd)) {
            return TRUE;
        }
        e = cpu_entry_new(CPU_OP_MAXPOOL_BWD, &key);
        gboolean ok = cpu_tensor_md(dy, &dymd, error) &&
                      cpu_convert_init(dev, e, &e->maxpool_own.dy_in, &dymd, &ymd, error);
        if (ok) {
            cpu_entry_set_output(dev, e, 0, &xmd, TDM_DTYPE_F32);
            e->maxpool_own.planes = xo;
            e->maxpool_own.workspace_bytes =
                (int64_t)(dnnl_memory_desc_get_size(&ymd) / sizeof(float));
        }
        if ((e = cpu_entry_setup_end(cache, e, NULL, ok)) == NULL) {
            return FALSE;
        }
    }
    *done = TRUE;
    CpuMaxpoolOwnOp *op = &e->maxpool_own;
    if (ws->dtype != TDM_DTYPE_U8 || tdm_tensor_nbytes(ws) < (size_t)op->workspace_bytes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu maxpool backward: workspace of %zu %s bytes, expected %" G_GINT64_FORMAT
                    " u8 (from this backend's forward)", tdm_tensor_nbytes(ws),
                    tdm_dtype_name(ws->dtype), op->workspace_bytes);
        cpu_entry_release(cache, e);
        return FALSE;
    }
    const float *dys = cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error);
    gboolean ok = dys != NULL && cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
    if (ok) {
        own_maxpool_bwd(dys, tdm_tensor_data(ws), tdm_tensor_data(dx), &op->planes, g, p);
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error)
{
    CpuPoolGeom g;
    gboolean done = FALSE;
    cpu_pool_geom(p, x->shape, &g);
    if (!own_maxpool_forward(dev, cache, p, &g, x, y, workspace, &done, error)) {
        return FALSE;
    }
    if (done) {
        return TRUE;
    }
    return cpu_pool_forward(dev, cache, CPU_OP_MAXPOOL_FWD, dnnl_pooling_max, p, x, y, workspace,
                            error);
}

gboolean cpu_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                TdmTensor *dx, GError **error)
{
    CpuPoolGeom g;
    gboolean done = FALSE;
    cpu_pool_geom(p, x_like->shape, &g);
    if (!own_maxpool_backward(dev, cache, p, &g, dy, workspace, x_like, dx, &done, error)) {
        return FALSE;
    }
    if (done) {
        return TRUE;
    }
    return cpu_pool_backward(dev, cache, CPU_OP_MAXPOOL_BWD, dnnl_pooling_max, p, dy, workspace,
                             x_like, dx, error);
}

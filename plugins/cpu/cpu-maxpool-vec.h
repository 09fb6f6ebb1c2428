/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-maxpool-vec.h - max pooling's forward on a plane of
 * blocks of POOL_VEC_B lanes (16 or 8), each block one GCC vector.
 *
 * cpu-maxpool.c includes this file once per instruction set and block
 * width, inside a `#pragma GCC target`, with POOL_VEC_B and POOL_VEC_ISA (a
 * suffix for the names) defined: GCC types a vector comparison by the
 * target of the function it is parsed in, so the vector code has to be
 * compiled under the target it runs on, helpers included. The entry is
 * k_pool_fwd_vec_<isa>_<b>, e.g. k_pool_fwd_vec_avx512_16 (cpu-maxpool.c
 * says what it computes and when it runs).
 */
#define POOL_VEC_CAT_(a, b) a##b
#define POOL_VEC_CAT(a, b) POOL_VEC_CAT_(a, b)
#define POOL_VEC_FN(name) POOL_VEC_CAT(POOL_VEC_CAT(name, POOL_VEC_ISA), POOL_VEC_B)
#define POOL_VEC_F POOL_VEC_CAT(PoolF, POOL_VEC_B)
#define POOL_VEC_I POOL_VEC_CAT(PoolI, POOL_VEC_B)
#define POOL_VEC_U POOL_VEC_CAT(PoolU, POOL_VEC_B)

/* One output: the taps [kh0, kh1) x [kw0, kw1) of the window whose tap
 * (0, 0) is v0, in a plane w pixels wide (the caller leaves out the taps
 * outside the image). The running maximum starts at -inf with the first
 * tap's position, which a tap replaces when it is larger or a NaN: the
 * first tap itself unless it is -inf, which leaves both as they are, so
 * the choice is the first maximum in window order (the last NaN if there
 * are any), as in plane_fwd. */
static inline __attribute__((always_inline)) void
POOL_VEC_FN(window_fwd_)(const float *v0, int64_t w, int64_t kh0, int64_t kh1, int64_t kw0,
                         int64_t kw1, const int64_t KW, float *yo, guint8 *wo)
{
    POOL_VEC_F best = (POOL_VEC_F){0} - INFINITY;
    POOL_VEC_I at = (POOL_VEC_I){0} + (gint32)(kh0 * KW + kw0);
    /* unrolled fully for the constant 3x3 and 2x2 windows (-O2 does not) */
#pragma GCC unroll 4
    for (int64_t kh = kh0; kh < kh1; kh++) {
#pragma GCC unroll 4
        for (int64_t kw = kw0; kw < kw1; kw++) {
            const POOL_VEC_F v = *(const POOL_VEC_F *)(v0 + (kh * w + kw) * POOL_VEC_B);
            const POOL_VEC_I take = (v > best) | (v != v);
            best = (POOL_VEC_F)((take & (POOL_VEC_I)v) | (~take & (POOL_VEC_I)best));
            at = (take & (gint32)(kh * KW + kw)) | (~take & at);
        }
    }
    *(POOL_VEC_F *)yo = best;
#if POOL_VEC_B == 8
    /* each lane's low byte: GCC narrows an AVX2 vector one lane at a time,
     * but shuffles bytes with two vpshufb */
    typedef guint8 __attribute__((vector_size(32))) Bytes32;
    const Bytes32 bytes = (Bytes32)at;
    *(POOL_VEC_U *)wo = __builtin_shufflevector(bytes, bytes, 0, 4, 8, 12, 16, 20, 24, 28);
#else
    *(POOL_VEC_U *)wo = __builtin_convertvector(at, POOL_VEC_U);
#endif
}

/* Output (oh, ow), its window clipped to the image along the axes where it
 * is not inside (inside_h, inside_w: known in the caller's loops, so the
 * window of most outputs keeps constant bounds). */
static inline __attribute__((always_inline)) void
POOL_VEC_FN(out_fwd_)(const float *xp, float *yp, guint8 *wp, const PlaneGeom *g, int64_t oh,
                      int64_t ow, gboolean inside_h, gboolean inside_w, const int64_t KH,
                      const int64_t KW, const int64_t SH, const int64_t SW)
{
    const int64_t h0 = oh * SH - g->ph, w0 = ow * SW - g->pw;
    const int64_t kh0 = inside_h ? 0 : MAX(-h0, 0), kh1 = inside_h ? KH : MIN(KH, g->h - h0);
    const int64_t kw0 = inside_w ? 0 : MAX(-w0, 0), kw1 = inside_w ? KW : MIN(KW, g->w - w0);
    const int64_t o = (oh * g->ow + ow) * POOL_VEC_B;
    POOL_VEC_FN(window_fwd_)(xp + (h0 * g->w + w0) * POOL_VEC_B, g->w, kh0, kh1, kw0, kw1, KW,
                             yp + o, wp + o);
}

/* A plane, row by row: the outputs whose window lies inside the image
 * (pool_inside_range) with no clipping, the others around them clipped. */
static inline __attribute__((always_inline)) void
POOL_VEC_FN(plane_fwd_)(const float *xp, float *yp, guint8 *wp, const PlaneGeom *g,
                        const int64_t KH, const int64_t KW, const int64_t SH, const int64_t SW)
{
    int64_t oh0, oh1, ow0, ow1;
    pool_inside_range(g->h, KH, SH, g->ph, g->oh, &oh0, &oh1);
    pool_inside_range(g->w, KW, SW, g->pw, g->ow, &ow0, &ow1);
    for (int64_t oh = 0; oh < g->oh; oh++) {
        const gboolean in_h = oh >= oh0 && oh < oh1;
        const int64_t left = in_h ? ow0 : g->ow;
        for (int64_t ow = 0; ow < left; ow++) {
            POOL_VEC_FN(out_fwd_)(xp, yp, wp, g, oh, ow, in_h, FALSE, KH, KW, SH, SW);
        }
        if (!in_h) {
            continue;
        }
        for (int64_t ow = ow0; ow < ow1; ow++) {
            POOL_VEC_FN(out_fwd_)(xp, yp, wp, g, oh, ow, TRUE, TRUE, KH, KW, SH, SW);
        }
        for (int64_t ow = ow1; ow < g->ow; ow++) {
            POOL_VEC_FN(out_fwd_)(xp, yp, wp, g, oh, ow, TRUE, FALSE, KH, KW, SH, SW);
        }
    }
}

/* The windows of ResNet's stem (3x3, stride 2) and of lenet and VGG (2x2,
 * stride 2) get their sizes as constants, so that their taps unroll. */
static __attribute__((noinline)) void POOL_VEC_FN(k_pool_fwd_vec_)(const float *xp, float *yp,
                                                                   guint8 *wp, const PlaneGeom *g)
{
    if (pool_window_is(g, 3, 2)) {
        POOL_VEC_FN(plane_fwd_)(xp, yp, wp, g, 3, 3, 2, 2);
    } else if (pool_window_is(g, 2, 2)) {
        POOL_VEC_FN(plane_fwd_)(xp, yp, wp, g, 2, 2, 2, 2);
    } else {
        POOL_VEC_FN(plane_fwd_)(xp, yp, wp, g, g->kh, g->kw, g->sh, g->sw);
    }
}

#undef POOL_VEC_U
#undef POOL_VEC_I
#undef POOL_VEC_F
#undef POOL_VEC_FN
#undef POOL_VEC_CAT
#undef POOL_VEC_CAT_

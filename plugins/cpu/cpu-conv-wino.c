/* plugins/cpu/cpu-conv-wino.c - the cpu backend's own Winograd loops for
 * 3x3 convolutions of stride 1 and padding 1 whose input and output are both
 * in the nChw8c layout (what oneDNN picks on AVX2 machines): the forward
 * (bias and ReLU fused) and the backward data, which is the same
 * convolution of the output gradient with the weights transposed and
 * turned by 180 degrees.
 *
 * oneDNN 2.6 has Winograd kernels for AVX-512 only; its AVX2 direct kernels
 * spend 9 multiply-adds per output and input channel. F(4x4, 3x3) spends
 * 36 per 16 outputs (2.25 per output, 4x fewer) plus the transforms:
 *
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A
 *
 * for each 6x6 input tile d (a 4x4 output tile with its 1-pixel border),
 * 3x3 filter g and the interpolation points 0, 1, -1, 2, -2 (the standard
 * matrices of Lavin and Gray, "Fast Algorithms for Convolutional Neural
 * Networks", 2016). The elementwise product summed over input channels is,
 * for each of the 36 tile positions, a matrix product [tiles x ci] x
 * [ci x co]. Error against a direct convolution: about 1e-6 relative.
 *
 * Tiles are processed in chunks (about 24): a chunk's input transforms
 * (V: [36][tile][ci]), 36 matrix products with the transformed weights
 * (U: [36][ci][co], made once per call) into M: [36][tile][co], and the
 * output transforms; V and M stay in L2. Chunks are split over the OpenMP
 * pool in contiguous ranges, each output written by one thread, so the
 * result does not depend on the thread count.
 *
 * The matrix product's register tile is 6 tiles x 16 output channels (12
 * vector accumulators; 2 vector loads and 6 broadcasts per 12 FMAs), like
 * cpu-conv-bwf8.c's.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-own.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define WINO_HAVE_FMA_CLONE 1
#define WINO_FMA __attribute__((target("avx2,fma"), noinline))
#endif
#define WINO_BASE __attribute__((noinline))
#define WINO_INLINE static inline __attribute__((always_inline))

/* The helpers pass 32-byte vectors by value; always inlined, so no call
 * ever uses the vector ABI. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v8 __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

#define WINO_CHUNK 24 /* tiles per chunk, before balancing over threads */
#define WINO_ROWS 6   /* tiles per register tile of the matrix product */
#define WINO_P 36     /* positions of a 6x6 transformed tile */

WINO_INLINE v8 ld8(const float *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

WINO_INLINE void st8(float *p, v8 v)
{
    memcpy(p, &v, sizeof v);
}

gboolean cpu_wino_geom(const dnnl_memory_desc_t *inmd, const dnnl_memory_desc_t *outmd,
                       const int64_t *wshape, const TdmConv2dParams *p, gboolean backward_data,
                       CpuWinoGeom *g)
{
    CpuPlanes io, oo;
    if (p->groups > 1 || p->dilation_h > 1 || p->dilation_w > 1 || p->stride_h != 1 ||
        p->stride_w != 1 || p->pad_h != 1 || p->pad_w != 1 || wshape[2] != 3 || wshape[3] != 3 ||
        !cpu_planes(inmd, &io) || !cpu_planes(outmd, &oo) || io.tag != dnnl_aBcd8b ||
        oo.tag != dnnl_aBcd8b) {
        return FALSE;
    }
    const int64_t n = inmd->dims[0], ci = inmd->dims[1], co = outmd->dims[1];
    const int64_t h = inmd->dims[2], w = inmd->dims[3];
    /* Channels a multiple of the block (no padded lanes to keep at zero);
     * up to 64, the sizes measured against oneDNN (ResNet-8/20's). Planes
     * of at least 4x4: on smaller ones most of a tile is border. */
    if (ci % 8 != 0 || co % 8 != 0 || ci > CPU_WINO_MAX_C || co > CPU_WINO_MAX_C || h < 4 ||
        w < 4 || outmd->dims[0] != n || outmd->dims[2] != h || outmd->dims[3] != w ||
        wshape[0] != (backward_data ? ci : co) || wshape[1] != (backward_data ? co : ci)) {
        return FALSE;
    }
    const int threads = MAX(1, omp_get_max_threads());
    const int64_t th = (h + 3) / 4, tw = (w + 3) / 4, tiles = n * th * tw;
    /* a whole number of chunks per thread, each of about WINO_CHUNK tiles */
    int64_t chunks = (tiles + WINO_CHUNK - 1) / WINO_CHUNK;
    chunks = (chunks + threads - 1) / threads * threads;
    const int64_t per = (tiles + chunks - 1) / chunks;
    *g = (CpuWinoGeom){
        .n = n, .ci = ci, .co = co, .h = h, .w = w, .th = th, .tw = tw,
        .chunk = per, .stride = (per + WINO_ROWS - 1) / WINO_ROWS * WINO_ROWS,
        .threads = threads, .flip = backward_data,
    };
    return TRUE;
}

/* Floats of U, then of one thread's V and M. */
static size_t u_floats(const CpuWinoGeom *g)
{
    return (size_t)WINO_P * (size_t)(g->ci * g->co);
}

static size_t vm_floats(const CpuWinoGeom *g)
{
    return (size_t)WINO_P * (size_t)g->stride * (size_t)(g->ci + g->co);
}

size_t cpu_wino_work_bytes(const CpuWinoGeom *g)
{
    return sizeof(float) * (u_floats(g) + vm_floats(g) * (size_t)g->threads);
}

/* ---- the three 1-D transforms ---- */

/* B^T d: 6 values of an input tile's row or column. */
WINO_INLINE void bt6(v8 d0, v8 d1, v8 d2, v8 d3, v8 d4, v8 d5, v8 *r)
{
    const v8 t1 = d4 - 4.0f * d2, t2 = d3 - 4.0f * d1;
    const v8 t3 = d4 - d2, t4 = 2.0f * (d3 - d1);
    r[0] = 4.0f * d0 - 5.0f * d2 + d4;
    r[1] = t1 + t2;
    r[2] = t1 - t2;
    r[3] = t3 + t4;
    r[4] = t3 - t4;
    r[5] = 4.0f * d1 - 5.0f * d3 + d5;
}

/* A^T m: 6 values to 4 outputs. */
WINO_INLINE void at6(v8 m0, v8 m1, v8 m2, v8 m3, v8 m4, v8 m5, v8 *o)
{
    const v8 s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
    o[0] = m0 + s12 + s34;
    o[1] = d12 + 2.0f * d34;
    o[2] = s12 + 4.0f * s34;
    o[3] = d12 + 8.0f * d34 + m5;
}

/* G g: 3 filter taps to 6. */
WINO_INLINE void g3(v8 a, v8 b, v8 c, v8 *u)
{
    const float q = 1.0f / 4, s = 1.0f / 6, t = 1.0f / 12, e = 1.0f / 24;
    u[0] = q * a;
    u[1] = -s * (a + b + c);
    u[2] = -s * (a - b + c);
    u[3] = e * a + t * b + s * c;
    u[4] = e * a - t * b + s * c;
    u[5] = c;
}

/* U[p][i][o .. o+8] for input channels [i0, i1): the 3x3 filter of (i, o)
 * is w[o][i] (forward) or w[i][o] turned by 180 degrees (backward data). */
WINO_INLINE void weights(const CpuWinoGeom *g, const float *w, float *u, int64_t i0, int64_t i1)
{
    const int64_t ci = g->ci, co = g->co;
    for (int64_t i = i0; i < i1; i++) {
        for (int64_t o = 0; o < co; o += 8) {
            v8 f[3][3];
            for (int l = 0; l < 8; l++) {
                const float *src = g->flip ? w + (i * co + o + l) * 9 : w + ((o + l) * ci + i) * 9;
                for (int k = 0; k < 9; k++) {
                    f[k / 3][k % 3][l] = g->flip ? src[8 - k] : src[k];
                }
            }
            v8 t[6][3], r[6];
            for (int j = 0; j < 3; j++) {
                g3(f[0][j], f[1][j], f[2][j], r);
                for (int a = 0; a < 6; a++) {
                    t[a][j] = r[a];
                }
            }
            for (int a = 0; a < 6; a++) {
                g3(t[a][0], t[a][1], t[a][2], r);
                for (int b = 0; b < 6; b++) {
                    st8(u + ((size_t)(a * 6 + b) * (size_t)ci + (size_t)i) * (size_t)co +
                            (size_t)o,
                        r[b]);
                }
            }
        }
    }
}

/* ---- one chunk ---- */

/* Tile t of the input into row slot s of V: [36][stride][ci]. Pixels
 * outside the plane read as zero (a row test, and for columns a load from
 * a valid column masked to zero). */
WINO_INLINE void input_tile(const CpuWinoGeom *g, const float *in, int64_t t, float *v, int64_t s)
{
    const int64_t per = g->th * g->tw, n = t / per, r = t % per;
    const int64_t h0 = r / g->tw * 4 - 1, w0 = r % g->tw * 4 - 1;
    const int64_t plane = g->h * g->w * 8, cb_n = g->ci / 8;
    const size_t ps = (size_t)g->stride * (size_t)g->ci;
    int64_t col[6];
    v8i mask[6];
    for (int j = 0; j < 6; j++) {
        const int ok = w0 + j >= 0 && w0 + j < g->w;
        col[j] = ok ? (w0 + j) * 8 : 0;
        mask[j] = (v8i){0} - ok;
    }
    for (int64_t cb = 0; cb < cb_n; cb++) {
        const float *x = in + (n * cb_n + cb) * plane;
        v8 e[6][6];
        for (int i = 0; i < 6; i++) {
            const int64_t hh = h0 + i;
            if (hh < 0 || hh >= g->h) {
                for (int j = 0; j < 6; j++) {
                    e[i][j] = (v8){0};
                }
                continue;
            }
            const float *row = x + hh * g->w * 8;
            v8 d[6];
            for (int j = 0; j < 6; j++) {
                d[j] = (v8)((v8i)ld8(row + col[j]) & mask[j]);
            }
            bt6(d[0], d[1], d[2], d[3], d[4], d[5], e[i]);
        }
        float *vp = v + (size_t)s * (size_t)g->ci + (size_t)cb * 8;
        for (int j = 0; j < 6; j++) {
            v8 o[6];
            bt6(e[0][j], e[1][j], e[2][j], e[3][j], e[4][j], e[5][j], o);
            for (int a = 0; a < 6; a++) {
                st8(vp + (size_t)(a * 6 + j) * ps, o[a]);
            }
        }
    }
}

/* Row slot s of M into output tile t, plus bias, then ReLU when relu. */
WINO_INLINE void output_tile(const CpuWinoGeom *g, const float *m, int64_t t, int64_t s,
                             const float *bias, gboolean relu, float *out)
{
    const int64_t per = g->th * g->tw, n = t / per, r = t % per;
    const int64_t h0 = r / g->tw * 4, w0 = r % g->tw * 4;
    const int64_t nh = MIN(4, g->h - h0), nw = MIN(4, g->w - w0);
    const int64_t plane = g->h * g->w * 8, ob_n = g->co / 8;
    const size_t ps = (size_t)g->stride * (size_t)g->co;
    for (int64_t ob = 0; ob < ob_n; ob++) {
        const float *mp = m + (size_t)s * (size_t)g->co + (size_t)ob * 8;
        float *y = out + (n * ob_n + ob) * plane;
        const v8 b = bias != NULL ? ld8(bias + ob * 8) : (v8){0};
        v8 e[4][6];
        for (int j = 0; j < 6; j++) {
            v8 o[4];
            at6(ld8(mp + (size_t)j * ps), ld8(mp + (size_t)(6 + j) * ps),
                ld8(mp + (size_t)(12 + j) * ps), ld8(mp + (size_t)(18 + j) * ps),
                ld8(mp + (size_t)(24 + j) * ps), ld8(mp + (size_t)(30 + j) * ps), o);
            for (int i = 0; i < 4; i++) {
                e[i][j] = o[i];
            }
        }
        for (int64_t i = 0; i < nh; i++) {
            v8 o[4];
            at6(e[i][0], e[i][1], e[i][2], e[i][3], e[i][4], e[i][5], o);
            float *row = y + ((h0 + i) * g->w + w0) * 8;
            for (int64_t j = 0; j < nw; j++) {
                v8 x = o[j] + b;
                if (relu) {
                    x = (v8)((v8i)x & (x > 0.0f));
                }
                st8(row + j * 8, x);
            }
        }
    }
}

/* m[r][o .. o + 8 NO] = sum over c of v[r][c] u[c][o ..], r < WINO_ROWS. */
WINO_INLINE void product_tile(const float *v, const float *u, float *m, int64_t ci, int64_t co,
                              const int NO)
{
    v8 acc[WINO_ROWS][2];
#pragma GCC unroll 6
    for (int r = 0; r < WINO_ROWS; r++) {
        acc[r][0] = (v8){0};
        acc[r][1] = (v8){0};
    }
    for (int64_t c = 0; c < ci; c++) {
        v8 b[2];
#pragma GCC unroll 2
        for (int o = 0; o < NO; o++) {
            b[o] = ld8(u + c * co + o * 8);
        }
#pragma GCC unroll 6
        for (int r = 0; r < WINO_ROWS; r++) {
            const float a = v[r * ci + c];
#pragma GCC unroll 2
            for (int o = 0; o < NO; o++) {
                acc[r][o] += a * b[o];
            }
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < WINO_ROWS; r++) {
#pragma GCC unroll 2
        for (int o = 0; o < NO; o++) {
            st8(m + r * co + o * 8, acc[r][o]);
        }
    }
}

/* Tiles [t0, t0 + nt) through V and M. Rows of the last register tile past
 * nt compute on stale (finite) rows of V and are never read. */
WINO_INLINE void chunk(const CpuWinoGeom *g, const float *in, const float *u, const float *bias,
                       gboolean relu, float *out, float *v, float *m, int64_t t0, int64_t nt)
{
    const int64_t ci = g->ci, co = g->co, st = g->stride;
    for (int64_t s = 0; s < nt; s++) {
        input_tile(g, in, t0 + s, v, s);
    }
    for (int p = 0; p < WINO_P; p++) {
        const float *vp = v + (size_t)p * (size_t)(st * ci);
        const float *up = u + (size_t)p * (size_t)(ci * co);
        float *mp = m + (size_t)p * (size_t)(st * co);
        for (int64_t r = 0; r < nt; r += WINO_ROWS) {
            int64_t o = 0;
            for (; o + 16 <= co; o += 16) {
                product_tile(vp + r * ci, up + o, mp + r * co + o, ci, co, 2);
            }
            if (o < co) {
                product_tile(vp + r * ci, up + o, mp + r * co + o, ci, co, 1);
            }
        }
    }
    for (int64_t s = 0; s < nt; s++) {
        output_tile(g, m, t0 + s, s, bias, relu, out);
    }
}

#define WINO_ARGS                                                                           \
    (const CpuWinoGeom *g, const float *in, const float *w, const float *u_in, float *u,    \
     const float *bias, gboolean relu, float *out, float *v, float *m, int64_t a0, int64_t a1)
/* Weights for input channels [a0, a1) when u != NULL, else chunks [a0, a1). */
#define WINO_BODY                                                                           \
    {                                                                                       \
        if (u != NULL) {                                                                    \
            weights(g, w, u, a0, a1);                                                       \
            return;                                                                         \
        }                                                                                   \
        const int64_t tiles = g->n * g->th * g->tw;                                         \
        for (int64_t c = a0; c < a1; c++) {                                                 \
            const int64_t t0 = c * g->chunk;                                                \
            chunk(g, in, u_in, bias, relu, out, v, m, t0, MIN(g->chunk, tiles - t0));       \
        }                                                                                   \
    }

WINO_BASE static void k_wino_base WINO_ARGS WINO_BODY
#ifdef WINO_HAVE_FMA_CLONE
WINO_FMA static void k_wino_fma WINO_ARGS WINO_BODY
#endif

static void k_wino(const CpuWinoGeom *g, const float *in, const float *w, const float *u_in,
                   float *u, const float *bias, gboolean relu, float *out, float *v, float *m,
                   int64_t a0, int64_t a1)
{
#ifdef WINO_HAVE_FMA_CLONE
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    if (have) {
        k_wino_fma(g, in, w, u_in, u, bias, relu, out, v, m, a0, a1);
        return;
    }
#endif
    k_wino_base(g, in, w, u_in, u, bias, relu, out, v, m, a0, a1);
}

void cpu_wino_run(const CpuWinoGeom *g, const float *in, const float *w, const float *bias,
                  gboolean relu, float *out, void *work)
{
    float *u = work;
    const int64_t tiles = g->n * g->th * g->tw, chunks = (tiles + g->chunk - 1) / g->chunk;
#pragma omp parallel num_threads(g->threads)
    {
        const int t = omp_get_thread_num(), tn = omp_get_num_threads();
        float *v = u + u_floats(g) + vm_floats(g) * (size_t)t;
        float *m = v + (size_t)WINO_P * (size_t)(g->stride * g->ci);
        /* the weights' transform, input channels split over the threads */
        int64_t per = g->ci / tn, extra = g->ci % tn;
        int64_t a0 = t * per + MIN(t, extra), a1 = a0 + per + (t < extra);
        if (a1 > a0) {
            k_wino(g, in, w, NULL, u, NULL, FALSE, out, v, m, a0, a1);
        }
#pragma omp barrier
        per = chunks / tn;
        extra = chunks % tn;
        a0 = t * per + MIN(t, extra);
        a1 = a0 + per + (t < extra);
        k_wino(g, in, w, u, NULL, bias, relu, out, v, m, a0, a1);
    }
}

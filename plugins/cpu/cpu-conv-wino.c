/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-wino.c - the cpu backend's own Winograd loops for
 * 3x3 convolutions of stride 1 and padding 1 whose input and output are both
 * in the nChw8c layout (what oneDNN picks on AVX2 machines): the forward
 * (bias and ReLU fused); the backward data, which is the same convolution
 * of the output gradient with the weights transposed and turned by 180
 * degrees; and the backward weights.
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
 * Tiles are processed in chunks (12 to 24 tiles; 64 for the weights): a
 * chunk's input transforms (V: [36][tile][ci]), 36 matrix products with the
 * transformed weights (U: [36][ci][co], made once per call) into M:
 * [36][tile][co], and the output transforms. V and M stay in L2; they live
 * in the device's shared scratchpad, like oneDNN's primitives' work. Chunks
 * are split over the OpenMP pool in contiguous ranges, each output written
 * by one thread, so the result does not depend on the thread count (the
 * weight gradient's per-thread partial sums are added in thread order).
 *
 * The matrix product's register tile is 6 tiles x 16 output channels (12
 * vector accumulators; 2 vector loads and 6 broadcasts per 12 FMAs), like
 * cpu-conv-bwf8.c's. On 2 threads of an AVX2 machine, ResNet-8's layers
 * (16 to 64 channels, 7x7 to 28x28) take about half of oneDNN's time; see
 * bench/RESULTS.md.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-own.h"
#include "cpu-simd.h"

#define WINO_CHUNK_BYTES 114688 /* V and M of a forward chunk: about 112 KiB */
#define WINO_CHUNK_GRAD 64      /* tiles per chunk of the weight gradient */
#define WINO_ROWS 6             /* tiles per register tile of the matrix product */
#define WINO_P 36               /* positions of a 6x6 transformed tile */

/* A tile: its image and the top-left pixel of its 4x4 outputs. The tiles
 * of a chunk are walked in order (image, row, column), without divisions. */
typedef struct {
    int64_t n, h0, w0;
} Tile;

CPU_INLINE Tile tile_at(const CpuWinoGeom *g, int64_t t)
{
    const int64_t per = g->th * g->tw, r = t % per;
    return (Tile){t / per, r / g->tw * 4, r % g->tw * 4};
}

CPU_INLINE void tile_next(const CpuWinoGeom *g, Tile *t)
{
    t->w0 += 4;
    if (t->w0 >= g->w) {
        t->w0 = 0;
        t->h0 += 4;
        if (t->h0 >= g->h) {
            t->h0 = 0;
            t->n++;
        }
    }
}

gboolean cpu_wino_geom(const dnnl_memory_desc_t *inmd, const dnnl_memory_desc_t *outmd,
                       const int64_t *wshape, const TdmConv2dParams *p, CpuWinoPass pass,
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
        wshape[0] != (pass == CPU_WINO_BACKWARD_DATA ? ci : co) ||
        wshape[1] != (pass == CPU_WINO_BACKWARD_DATA ? co : ci)) {
        return FALSE;
    }
    const int threads = MAX(1, omp_get_max_threads());
    const int64_t th = (h + 3) / 4, tw = (w + 3) / 4, tiles = n * th * tw;
    /* Tiles per chunk, measured on ResNet-8's layers: the forward's V and M
     * about WINO_CHUNK_BYTES, 12 to 24 tiles; the weight gradient's larger
     * chunks spread loading and storing its partial sums over more tiles.
     * Then a whole number of chunks per thread. */
    const int64_t tile_bytes = WINO_P * (ci + co) * (int64_t)sizeof(float);
    const int64_t want = pass == CPU_WINO_BACKWARD_WEIGHTS
                             ? WINO_CHUNK_GRAD
                             : CLAMP(WINO_CHUNK_BYTES / tile_bytes, 12, 24);
    int64_t chunks = (tiles + want - 1) / want;
    chunks = (chunks + threads - 1) / threads * threads;
    const int64_t per = (tiles + chunks - 1) / chunks;
    *g = (CpuWinoGeom){
        .n = n,
        .ci = ci,
        .co = co,
        .h = h,
        .w = w,
        .th = th,
        .tw = tw,
        .chunk = per,
        .stride = (per + WINO_ROWS - 1) / WINO_ROWS * WINO_ROWS,
        .threads = threads,
        .pass = pass,
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

/* The weight gradient's thread part (defined with it below). */
static size_t grad_thread_floats(const CpuWinoGeom *g);

size_t cpu_wino_work_bytes(const CpuWinoGeom *g)
{
    if (g->pass == CPU_WINO_BACKWARD_WEIGHTS) {
        return sizeof(float) * grad_thread_floats(g) * (size_t)g->threads;
    }
    return sizeof(float) * (u_floats(g) + vm_floats(g) * (size_t)g->threads);
}

/* ---- the three 1-D transforms ---- */

/* B^T d: 6 values of an input tile's row or column. */
CPU_INLINE void bt6(v8 d0, v8 d1, v8 d2, v8 d3, v8 d4, v8 d5, v8 *r)
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
CPU_INLINE void at6(v8 m0, v8 m1, v8 m2, v8 m3, v8 m4, v8 m5, v8 *o)
{
    const v8 s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
    o[0] = m0 + s12 + s34;
    o[1] = d12 + 2.0f * d34;
    o[2] = s12 + 4.0f * s34;
    o[3] = d12 + 8.0f * d34 + m5;
}

/* G g: 3 filter taps to 6. */
CPU_INLINE void g3(v8 a, v8 b, v8 c, v8 *u)
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
CPU_INLINE void weights(const CpuWinoGeom *g, const float *w, float *u, int64_t i0, int64_t i1)
{
    const int64_t ci = g->ci, co = g->co;
    const gboolean flip = g->pass == CPU_WINO_BACKWARD_DATA;
    for (int64_t i = i0; i < i1; i++) {
        for (int64_t o = 0; o < co; o += 8) {
            float taps[9][8];
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) {
                const float *src = flip ? w + (i * co + o + l) * 9 : w + ((o + l) * ci + i) * 9;
#pragma GCC unroll 9
                for (int k = 0; k < 9; k++) {
                    taps[k][l] = flip ? src[8 - k] : src[k];
                }
            }
            v8 f[3][3];
#pragma GCC unroll 9
            for (int k = 0; k < 9; k++) {
                f[k / 3][k % 3] = ld8(taps[k]);
            }
            v8 t[6][3], r[6];
#pragma GCC unroll 3
            for (int j = 0; j < 3; j++) {
                g3(f[0][j], f[1][j], f[2][j], r);
#pragma GCC unroll 6
                for (int a = 0; a < 6; a++) {
                    t[a][j] = r[a];
                }
            }
#pragma GCC unroll 6
            for (int a = 0; a < 6; a++) {
                g3(t[a][0], t[a][1], t[a][2], r);
#pragma GCC unroll 6
                for (int b = 0; b < 6; b++) {
                    st8(u + ((size_t)(a * 6 + b) * (size_t)ci + (size_t)i) * (size_t)co + (size_t)o,
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
CPU_INLINE void input_tile(const CpuWinoGeom *g, const float *in, Tile t, float *v, int64_t s)
{
    const int64_t n = t.n, h0 = t.h0 - 1, w0 = t.w0 - 1;
    const int64_t plane = g->h * g->w * 8, cb_n = g->ci / 8;
    const size_t ps = (size_t)g->stride * (size_t)g->ci;
    int64_t col[6];
    v8i mask[6];
#pragma GCC unroll 6
    for (int j = 0; j < 6; j++) {
        const int ok = w0 + j >= 0 && w0 + j < g->w;
        col[j] = ok ? (w0 + j) * 8 : 0;
        mask[j] = (v8i){0} - ok;
    }
    for (int64_t cb = 0; cb < cb_n; cb++) {
        const float *x = in + (n * cb_n + cb) * plane;
        v8 e[6][6];
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            const int64_t hh = h0 + i;
            if (hh < 0 || hh >= g->h) {
#pragma GCC unroll 6
                for (int j = 0; j < 6; j++) {
                    e[i][j] = (v8){0};
                }
                continue;
            }
            const float *row = x + hh * g->w * 8;
            v8 d[6];
#pragma GCC unroll 6
            for (int j = 0; j < 6; j++) {
                d[j] = (v8)((v8i)ld8(row + col[j]) & mask[j]);
            }
            bt6(d[0], d[1], d[2], d[3], d[4], d[5], e[i]);
        }
        float *vp = v + (size_t)s * (size_t)g->ci + (size_t)cb * 8;
#pragma GCC unroll 6
        for (int j = 0; j < 6; j++) {
            v8 o[6];
            bt6(e[0][j], e[1][j], e[2][j], e[3][j], e[4][j], e[5][j], o);
#pragma GCC unroll 6
            for (int a = 0; a < 6; a++) {
                st8(vp + (size_t)(a * 6 + j) * ps, o[a]);
            }
        }
    }
}

/* One row of an output tile: A^T e, plus b, then ReLU when RELU; the
 * first nw pixels stored at row. */
CPU_INLINE void output_row(const v8 *e, v8 b, const int RELU, float *row, int64_t nw)
{
    v8 o[4];
    at6(e[0], e[1], e[2], e[3], e[4], e[5], o);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        if (j < nw) {
            v8 x = o[j] + b;
            if (RELU) {
                x = (v8)((v8i)x & (x > 0.0f));
            }
            st8(row + j * 8, x);
        }
    }
}

/* Row slot s of M into output tile t, plus bias, then ReLU when RELU. */
CPU_INLINE void output_tile(const CpuWinoGeom *g, const float *m, Tile t, int64_t s,
                            const float *bias, const int RELU, float *out)
{
    const int64_t n = t.n, h0 = t.h0, w0 = t.w0;
    const int64_t nh = MIN(4, g->h - h0), nw = MIN(4, g->w - w0);
    const int64_t plane = g->h * g->w * 8, ob_n = g->co / 8;
    const size_t ps = (size_t)g->stride * (size_t)g->co;
    for (int64_t ob = 0; ob < ob_n; ob++) {
        const float *mp = m + (size_t)s * (size_t)g->co + (size_t)ob * 8;
        float *y = out + (n * ob_n + ob) * plane;
        const v8 b = bias != NULL ? ld8(bias + ob * 8) : (v8){0};
        v8 e[4][6];
#pragma GCC unroll 6
        for (int j = 0; j < 6; j++) {
            v8 o[4];
            at6(ld8(mp + (size_t)j * ps), ld8(mp + (size_t)(6 + j) * ps),
                ld8(mp + (size_t)(12 + j) * ps), ld8(mp + (size_t)(18 + j) * ps),
                ld8(mp + (size_t)(24 + j) * ps), ld8(mp + (size_t)(30 + j) * ps), o);
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                e[i][j] = o[i];
            }
        }
        if (nh == 4 && nw == 4) {
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                output_row(e[i], b, RELU, y + ((h0 + i) * g->w + w0) * 8, 4);
            }
        } else {
            for (int64_t i = 0; i < nh; i++) {
                output_row(e[i], b, RELU, y + ((h0 + i) * g->w + w0) * 8, nw);
            }
        }
    }
}

/* The register tile of both matrix products: for rows r < NR (at most
 * WINO_ROWS),
 *   c[r][o .. o + 8 NO] (=, or += when ACC) sum over k < nk of
 *   a[r * ar + k * ak] * b[k * ldb + o ..]
 * (c's rows ldc floats apart). The forward's product reads a row of V per
 * tile (ak = 1); the weight gradient's reads a column of V (ar = 1) and
 * sums over the chunk's tiles into the partial dL/dU. */
CPU_INLINE void tile_product(const float *a, int64_t ar, int64_t ak, const float *b, int64_t ldb,
                             float *c, int64_t ldc, int64_t nk, const int NR, const int ACC,
                             const int NO)
{
    v8 acc[WINO_ROWS][2];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
#pragma GCC unroll 2
        for (int o = 0; o < NO; o++) {
            acc[r][o] = ACC ? ld8(c + r * ldc + o * 8) : (v8){0};
        }
    }
    for (int64_t k = 0; k < nk; k++) {
        v8 bv[2];
#pragma GCC unroll 2
        for (int o = 0; o < NO; o++) {
            bv[o] = ld8(b + k * ldb + o * 8);
        }
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            const float x = a[r * ar + k * ak];
#pragma GCC unroll 2
            for (int o = 0; o < NO; o++) {
                acc[r][o] += x * bv[o];
            }
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
#pragma GCC unroll 2
        for (int o = 0; o < NO; o++) {
            st8(c + r * ldc + o * 8, acc[r][o]);
        }
    }
}

/* dy's tile t (4x4, zero outside the plane) into row slot s of D:
 * [36][stride][co], as A dy A^T; its sum per channel into db when db. */
CPU_INLINE void grad_tile_in(const CpuWinoGeom *g, const float *dy, Tile t, float *d, int64_t s,
                             float *db)
{
    const int64_t n = t.n, h0 = t.h0, w0 = t.w0;
    const int64_t nh = MIN(4, g->h - h0), nw = MIN(4, g->w - w0);
    const int64_t plane = g->h * g->w * 8, ob_n = g->co / 8;
    const size_t ps = (size_t)g->stride * (size_t)g->co;
    for (int64_t ob = 0; ob < ob_n; ob++) {
        const float *y = dy + (n * ob_n + ob) * plane;
        v8 e[6][4], sum = {0};
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            v8 c[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                c[i] = i < nh && j < nw ? ld8(y + ((h0 + i) * g->w + w0 + j) * 8) : (v8){0};
                sum += c[i];
            }
            const v8 s02 = c[0] + c[2], s13 = c[1] + c[3];
            const v8 t02 = c[0] + 4.0f * c[2], t13 = 2.0f * c[1] + 8.0f * c[3];
            e[0][j] = c[0];
            e[1][j] = s02 + s13;
            e[2][j] = s02 - s13;
            e[3][j] = t02 + t13;
            e[4][j] = t02 - t13;
            e[5][j] = c[3];
        }
        if (db != NULL) {
            st8(db + ob * 8, ld8(db + ob * 8) + sum);
        }
        float *dp = d + (size_t)s * (size_t)g->co + (size_t)ob * 8;
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            const v8 *c = e[i];
            const v8 s02 = c[0] + c[2], s13 = c[1] + c[3];
            const v8 t02 = c[0] + 4.0f * c[2], t13 = 2.0f * c[1] + 8.0f * c[3];
            st8(dp + (size_t)(i * 6 + 0) * ps, c[0]);
            st8(dp + (size_t)(i * 6 + 1) * ps, s02 + s13);
            st8(dp + (size_t)(i * 6 + 2) * ps, s02 - s13);
            st8(dp + (size_t)(i * 6 + 3) * ps, t02 + t13);
            st8(dp + (size_t)(i * 6 + 4) * ps, t02 - t13);
            st8(dp + (size_t)(i * 6 + 5) * ps, c[3]);
        }
    }
}

/* What a thread's share of one call does. */
typedef enum { JOB_WEIGHTS, JOB_CONV, JOB_GRAD } JobKind;

typedef struct {
    const CpuWinoGeom *g;
    JobKind kind;
    const float *in, *w, *bias, *dy;
    gboolean relu;
    float *u;       /* U: JOB_WEIGHTS writes it, JOB_CONV reads it */
    float *out;     /* JOB_CONV's output */
    float *v, *m;   /* the thread's V and M (JOB_GRAD: D) */
    float *du, *db; /* JOB_GRAD: the thread's partial gradients (U's shape; co) */
} Job;

/* Rows [r, r + NR) of one position's dL/dU += V^T D: v, d and du start at
 * that position (and v, du at row r). */
CPU_INLINE void grad_rows(const float *v, const float *d, float *du, int64_t ci, int64_t co,
                          int64_t nt, const int NR)
{
    int64_t o = 0;
    for (; o + 16 <= co; o += 16) {
        tile_product(v, 1, ci, d + o, co, du + o, co, nt, NR, 1, 2);
    }
    if (o < co) {
        tile_product(v, 1, ci, d + o, co, du + o, co, nt, NR, 1, 1);
    }
}

/* Tiles [t0, t0 + nt): the forward through V and M, or the weight gradient
 * through V and D. In the forward, the rows of the last register tile past
 * nt are zeroed in V and never read from M. */
CPU_INLINE void chunk(const Job *j, int64_t t0, int64_t nt)
{
    const CpuWinoGeom *g = j->g;
    const int64_t ci = g->ci, co = g->co, st = g->stride;
    const Tile first = tile_at(g, t0);
    Tile t = first;
    for (int64_t s = 0; s < nt; s++, tile_next(g, &t)) {
        input_tile(g, j->in, t, j->v, s);
    }
    if (j->kind == JOB_GRAD) {
        t = first;
        for (int64_t s = 0; s < nt; s++, tile_next(g, &t)) {
            grad_tile_in(g, j->dy, t, j->m, s, j->db);
        }
        /* dL/dU[p][ci][co] += V[p]^T D[p], in blocks of WINO_ROWS input
         * channels; ci is a multiple of 8, so the last block has 6, 4 or 2 */
        for (int p = 0; p < WINO_P; p++) {
            const float *vp = j->v + (size_t)p * (size_t)(st * ci);
            const float *dp = j->m + (size_t)p * (size_t)(st * co);
            float *up = j->du + (size_t)p * (size_t)(ci * co);
            int64_t r = 0;
            for (; r + WINO_ROWS <= ci; r += WINO_ROWS) {
                grad_rows(vp + r, dp, up + r * co, ci, co, nt, WINO_ROWS);
            }
            if (ci - r == 4) {
                grad_rows(vp + r, dp, up + r * co, ci, co, nt, 4);
            } else if (ci - r == 2) {
                grad_rows(vp + r, dp, up + r * co, ci, co, nt, 2);
            }
        }
        return;
    }
    const int64_t nr = (nt + WINO_ROWS - 1) / WINO_ROWS * WINO_ROWS;
    if (nr > nt) {
        for (int p = 0; p < WINO_P; p++) {
            memset(j->v + (size_t)p * (size_t)(st * ci) + (size_t)(nt * ci), 0,
                   sizeof(float) * (size_t)((nr - nt) * ci));
        }
    }
    for (int p = 0; p < WINO_P; p++) {
        const float *vp = j->v + (size_t)p * (size_t)(st * ci);
        const float *up = j->u + (size_t)p * (size_t)(ci * co);
        float *mp = j->m + (size_t)p * (size_t)(st * co);
        for (int64_t r = 0; r < nt; r += WINO_ROWS) {
            int64_t o = 0;
            for (; o + 16 <= co; o += 16) {
                tile_product(vp + r * ci, ci, 1, up + o, co, mp + r * co + o, co, ci, WINO_ROWS, 0,
                             2);
            }
            if (o < co) {
                tile_product(vp + r * ci, ci, 1, up + o, co, mp + r * co + o, co, ci, WINO_ROWS, 0,
                             1);
            }
        }
    }
    t = first;
    for (int64_t s = 0; s < nt; s++, tile_next(g, &t)) {
        if (j->relu) {
            output_tile(g, j->m, t, s, j->bias, 1, j->out);
        } else {
            output_tile(g, j->m, t, s, j->bias, 0, j->out);
        }
    }
}

/* JOB_WEIGHTS: input channels [a0, a1); else chunks [a0, a1). */
CPU_INLINE void job(const Job *j, int64_t a0, int64_t a1)
{
    if (j->kind == JOB_WEIGHTS) {
        weights(j->g, j->w, j->u, a0, a1);
        return;
    }
    const int64_t tiles = j->g->n * j->g->th * j->g->tw;
    for (int64_t c = a0; c < a1; c++) {
        const int64_t t0 = c * j->g->chunk;
        chunk(j, t0, MIN(j->g->chunk, tiles - t0));
    }
}

CPU_BASE_CLONE static void k_job_base(const Job *j, int64_t a0, int64_t a1)
{
    job(j, a0, a1);
}

#ifdef CPU_HAVE_FMA_CLONE
CPU_FMA_CLONE static void k_job_fma(const Job *j, int64_t a0, int64_t a1)
{
    job(j, a0, a1);
}
#endif

static void k_job(const Job *j, int64_t a0, int64_t a1)
{
#ifdef CPU_HAVE_FMA_CLONE
    if (cpu_have_avx2_fma()) {
        k_job_fma(j, a0, a1);
        return;
    }
#endif
    k_job_base(j, a0, a1);
}

/* Thread t's share [a0, a1) of count items. */
static void share(int64_t count, int t, int tn, int64_t *a0, int64_t *a1)
{
    const int64_t per = count / tn, extra = count % tn;
    *a0 = t * per + MIN(t, extra);
    *a1 = *a0 + per + (t < extra);
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
        Job j = {.g = g,
                 .kind = JOB_WEIGHTS,
                 .in = in,
                 .w = w,
                 .bias = bias,
                 .relu = relu,
                 .u = u,
                 .out = out,
                 .v = v,
                 .m = v + (size_t)WINO_P * (size_t)(g->stride * g->ci)};
        int64_t a0, a1;
        /* the weights' transform, input channels split over the threads */
        share(g->ci, t, tn, &a0, &a1);
        if (a1 > a0) {
            k_job(&j, a0, a1);
        }
#pragma omp barrier
        j.kind = JOB_CONV;
        share(chunks, t, tn, &a0, &a1);
        k_job(&j, a0, a1);
    }
}

/* G^T x: 6 values to the 3 taps. */
CPU_INLINE void g3t(v8 x0, v8 x1, v8 x2, v8 x3, v8 x4, v8 x5, v8 *a, v8 *b, v8 *c, float q,
                    float s6, float s12, float s24)
{
    *a = q * x0 - s6 * (x1 + x2) + s24 * (x3 + x4);
    *b = s6 * (x2 - x1) + s12 * (x3 - x4);
    *c = s6 * (x3 + x4 - x1 - x2) + x5;
}

/* ---- the weight gradient ----
 *
 * With M = U . V for a tile, y = A^T M A gives dL/dM = A dy A^T, and
 * dL/dU = sum over tiles of V . dL/dM: per position, a product [ci x
 * tiles] x [tiles x co] that each thread sums over its chunks; then
 * dL/dg = G^T dL/dU G. */

/* A thread's part of the work: V and D, then the partials. */
static size_t grad_thread_floats(const CpuWinoGeom *g)
{
    return vm_floats(g) + (size_t)WINO_P * (size_t)(g->ci * g->co) + (size_t)g->co;
}

void cpu_wino_backward_filter(const CpuWinoGeom *g, const float *x, const float *dy, float *dw,
                              float *db, void *work)
{
    const int64_t tiles = g->n * g->th * g->tw, chunks = (tiles + g->chunk - 1) / g->chunk;
    const int64_t co = g->co, ci = g->ci;
    const size_t tf = grad_thread_floats(g);
    const size_t uf = (size_t)WINO_P * (size_t)(ci * co) + (size_t)co;
    int used = 1;
#pragma omp parallel num_threads(g->threads)
    {
        const int t = omp_get_thread_num(), tn = omp_get_num_threads();
        float *v = (float *)work + tf * (size_t)t;
        float *d = v + (size_t)WINO_P * (size_t)(g->stride * ci);
        float *du = d + (size_t)WINO_P * (size_t)(g->stride * co);
        memset(du, 0, sizeof(float) * uf);
        Job j = {.g = g,
                 .kind = JOB_GRAD,
                 .in = x,
                 .dy = dy,
                 .v = v,
                 .m = d,
                 .du = du,
                 .db = db != NULL ? du + uf - co : NULL};
        int64_t a0, a1;
        share(chunks, t, tn, &a0, &a1);
        k_job(&j, a0, a1);
        if (t == 0) {
            used = tn;
        }
    }
    /* the partials summed in thread order: the same bits for a thread count */
    float *sum = (float *)work + (tf - uf);
    for (int t = 1; t < used; t++) {
        const float *part = (const float *)work + tf * (size_t)t + (tf - uf);
        for (size_t i = 0; i < uf; i++) {
            sum[i] += part[i];
        }
    }
    /* dw[o][i] += G^T dU[.][i][o] G, 8 output channels at a time */
    const float q = 1.0f / 4, s6 = 1.0f / 6, s12 = 1.0f / 12, s24 = 1.0f / 24;
    for (int64_t i = 0; i < ci; i++) {
        for (int64_t o = 0; o < co; o += 8) {
            v8 m[WINO_P], t6[3][6];
            for (int k = 0; k < WINO_P; k++) {
                m[k] = ld8(sum + ((size_t)k * (size_t)ci + (size_t)i) * (size_t)co + (size_t)o);
            }
            for (int b = 0; b < 6; b++) {
                g3t(m[b], m[6 + b], m[12 + b], m[18 + b], m[24 + b], m[30 + b], t6[0] + b,
                    t6[1] + b, t6[2] + b, q, s6, s12, s24);
            }
            for (int a = 0; a < 3; a++) {
                v8 r[3];
                g3t(t6[a][0], t6[a][1], t6[a][2], t6[a][3], t6[a][4], t6[a][5], r, r + 1, r + 2, q,
                    s6, s12, s24);
                for (int l = 0; l < 8; l++) {
                    float *out = dw + ((o + l) * ci + i) * 9 + a * 3;
                    out[0] += r[0][l];
                    out[1] += r[1][l];
                    out[2] += r[2][l];
                }
            }
        }
    }
    if (db != NULL) {
        const float *sb = sum + uf - co;
        for (int64_t o = 0; o < co; o++) {
            db[o] += sb[o];
        }
    }
}

/* SPDX-License-Identifier: MIT */
/* tests/test-cuda-nn-elem.c - the GPU-free arithmetic of the cuda backend's
 * batch norm, pooling and bias-gradient kernels, checked against ref.
 *
 * plugins/cuda/cuda-nn-elem.h holds what the kernels of cuda-norm.cu and
 * cuda-pool.cu compute per thread: pooling output sizes, windows and
 * divisors, the outputs an input feeds (the gather backward), max pooling's
 * choice, the batch norm moments, per-element formulas and running-stat
 * update, the split of a channel among blocks and the index walk. This test
 * runs on every machine (no GPU, no CUDA): it calls those functions in CPU
 * loops laid out as the kernels are (per output, per input, per part and
 * thread of a channel, the warp-shuffle merge order included) and compares
 * the results with the ref backend through the op front ends: pooling
 * bit for bit, batch norm within float rounding. What it cannot check is
 * the kernels' own indexing of threads and blocks, shared memory and the
 * launches: that needs a GPU (tests/gpu/run's conformance stage).
 */
#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "cuda-nn-elem.h"
#include "test-util.h"

static TdmDevice *dev;
static GRand *rng;

/* ---- helpers ---- */

static TdmTensor *mk(int ndim, const int64_t *shape, const float *vals)
{
    return test_tensor_with(dev, TDM_DTYPE_F32, ndim, shape, vals);
}

static TdmTensor *slot(TdmDType dtype)
{
    return tdm_tensor_new_empty(dev, dtype);
}

/* The error of the last op called with &op_err: each call is wrapped in
 * op_ok(), which asserts it succeeded. */
static GError *op_err;

static void op_ok(gboolean ok)
{
    g_assert_no_error(op_err);
    g_assert_true(ok);
}

static void *read_all(TdmTensor *t, size_t elem)
{
    void *host = g_malloc(elem * (size_t)tdm_tensor_numel(t));
    op_ok(tdm_tensor_read(t, host, &op_err));
    return host;
}

static float *rand_floats(int64_t n, double lo, double hi)
{
    float *v = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)g_rand_double_range(rng, lo, hi);
    }
    return v;
}

/* got[i] matches ref's want[i]: bit for bit (NaN matching NaN) when rel is
 * 0, else within rel of max(|want|, scale). */
static gboolean matches(float got, float want, double rel, double scale)
{
    if (rel == 0.0) {
        return (isnan(got) && isnan(want)) || memcmp(&got, &want, sizeof(float)) == 0;
    }
    return fabs((double)got - want) <= rel * MAX(fabs((double)want), scale);
}

static void expect_close(const float *got, const float *want, int64_t n, double rel, double scale,
                         const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        if (!matches(got[i], want[i], rel, scale)) {
            g_error("%s[%" G_GINT64_FORMAT "]: got %.9g, ref %.9g", what, i, got[i], want[i]);
        }
    }
}

static void expect_same(const float *got, const float *want, int64_t n, const char *what)
{
    expect_close(got, want, n, 0.0, 0.0, what);
}

/* ---- index walk, splits, grid ---- */

static void test_walk(void)
{
    for (int trial = 0; trial < 2000; trial++) {
        int64_t C = g_rand_int_range(rng, 1, 70), S = g_rand_int_range(rng, 1, 300);
        if (trial % 4 == 0) {
            C = 1; /* the per-channel walk of the reductions */
        }
        int64_t step = g_rand_int_range(rng, 1, 5000);
        int64_t i = g_rand_int_range(rng, 0, 5000);
        CudaNnWalk w = cuda_nn_walk_start(i, step, C, S);
        for (int k = 0; k < 50; k++, i += step, cuda_nn_walk_next(&w)) {
            g_assert_cmpint(w.s, ==, i % S);
            g_assert_cmpint(w.c, ==, (i / S) % C);
            g_assert_cmpint(w.n, ==, i / S / C);
        }
    }
}

static void test_splits(void)
{
    const int64_t Ls[] = {1, 2, 7, 4095, 4096, 4097, 100000, 3211264, 1 << 30};
    const int64_t bases[] = {1, 3, 16, 64, 512, 4096};
    for (size_t a = 0; a < G_N_ELEMENTS(Ls); a++) {
        for (size_t b = 0; b < G_N_ELEMENTS(bases); b++) {
            int splits = cuda_nn_splits(Ls[a], bases[b], 132);
            g_assert_cmpint(splits, >=, 1);
            g_assert_cmpint(splits, <=, CUDA_NN_MAX_SPLITS);
            /* Parts are never smaller than needed to be worth a block... */
            g_assert_true(splits == 1 || Ls[a] / splits >= CUDA_NN_MIN_PER_SPLIT / 2);
            /* ...and tile [0, L) in order, sizes within one of each other. */
            int64_t prev_end = 0, lo = G_MAXINT64, hi = 0;
            for (int p = 0; p < splits; p++) {
                int64_t s, e;
                cuda_nn_split_range(Ls[a], splits, p, &s, &e);
                g_assert_cmpint(s, ==, prev_end);
                lo = MIN(lo, e - s);
                hi = MAX(hi, e - s);
                prev_end = e;
            }
            g_assert_cmpint(prev_end, ==, Ls[a]);
            g_assert_cmpint(hi - lo, <=, 1);
        }
    }
    /* [N, C] parts hold at least CUDA_NN_COL_Y rows; a small channel
     * count spreads over the multiprocessors. */
    g_assert_cmpint(cuda_nn_chan_splits(8192, 512, 1, 132), ==, 33);
    for (int64_t N = 1; N < 100000; N = N * 3 + 1) {
        int splits = cuda_nn_chan_splits(N, 3, 1, 4096);
        g_assert_true(splits == 1 || N / splits >= CUDA_NN_COL_Y);
    }
    g_assert_cmpint(cuda_nn_chan_splits(7, 3, 1, 132), ==, 1);
    g_assert_cmpint(cuda_nn_chan_splits(256, 64, 12544, 132), ==, 9);
    g_assert_cmpint(cuda_nn_splits(3211264, 64, 132), ==, 9);
    g_assert_cmpint(cuda_nn_grid_blocks(1, 256), ==, 1);
    g_assert_cmpint(cuda_nn_grid_blocks(257, 256), ==, 2);
    g_assert_cmpint(cuda_nn_grid_blocks((int64_t)1 << 40, 256), ==, CUDA_NN_MAX_BLOCKS);
}

/* ---- pooling ---- */

static CudaPoolGeom rand_geom(gboolean count_include_pad)
{
    int kh = g_rand_int_range(rng, 1, 6), kw = g_rand_int_range(rng, 1, 6);
    int ph = g_rand_int_range(rng, 0, kh / 2 + 1), pw = g_rand_int_range(rng, 0, kw / 2 + 1);
    int sh = g_rand_int_range(rng, 1, 4), sw = g_rand_int_range(rng, 1, 4);
    int64_t H = MAX(kh - 2 * ph, 1) + g_rand_int_range(rng, 0, 9);
    int64_t W = MAX(kw - 2 * pw, 1) + g_rand_int_range(rng, 0, 9);
    return cuda_nn_pool_geom(g_rand_int_range(rng, 1, 3), g_rand_int_range(rng, 1, 4), H, W, kh, kw,
                             sh, sw, ph, pw, count_include_pad);
}

static TdmPool2dParams params_of(const CudaPoolGeom *g)
{
    TdmPool2dParams p = {g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->count_include_pad};
    return p;
}

static void test_pool_outputs_of(void)
{
    for (int trial = 0; trial < 500; trial++) {
        CudaPoolGeom g = rand_geom(TRUE);
        for (int64_t i = 0; i < g.H; i++) {
            int64_t o0, o1;
            cuda_nn_pool_outputs_of(i, g.kh, g.sh, g.ph, g.OH, &o0, &o1);
            for (int64_t o = 0; o < g.OH; o++) {
                /* o feeds from i iff i is in o's clipped window. */
                int64_t h0, h1, w0, w1;
                cuda_nn_pool_window(&g, o, 0, &h0, &h1, &w0, &w1);
                gboolean inside = i >= h0 && i < h1;
                g_assert_cmpint(inside, ==, o >= o0 && o < o1);
            }
        }
    }
}

/* A pooling forward as its kernel computes it, one output at a time: max
 * pooling (ws non-NULL gets the choices) or average pooling. */
static void emu_pool_forward(const CudaPoolGeom *g, const float *x, float *y, gint32 *ws)
{
    for (int64_t o = 0; o < g->N * g->C * g->OH * g->OW; o++) {
        int64_t ow = o % g->OW, oh = o / g->OW % g->OH, plane = o / g->OW / g->OH;
        int64_t h0, h1, w0, w1;
        int64_t div = cuda_nn_pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
        g_assert_true(h0 < h1 && w0 < w1);
        const float *in = x + plane * g->H * g->W;
        float best = -INFINITY;
        int64_t best_i = -1;
        double acc = 0.0;
        for (int64_t ih = h0; ih < h1; ih++) {
            for (int64_t iw = w0; iw < w1; iw++) {
                float v = in[ih * g->W + iw];
                acc += v;
                if (cuda_nn_max_takes(v, best, best_i >= 0)) {
                    best = v;
                    best_i = ih * g->W + iw;
                }
            }
        }
        y[o] = ws != NULL ? best : (float)(acc / (double)div);
        if (ws != NULL) {
            ws[o] = (gint32)best_i;
        }
    }
}

/* A pooling backward as its kernel computes it, one input at a time,
 * gathering from its outputs in ascending order: max pooling (from the
 * outputs whose ws chose it, summed in f32) or average pooling (dy over
 * the divisor, summed in double). */
static void emu_pool_backward(const CudaPoolGeom *g, const float *dy, const gint32 *ws, float *dx)
{
    for (int64_t i = 0; i < g->N * g->C * g->H * g->W; i++) {
        CudaNnPoolSources src = cuda_nn_pool_sources(g, i);
        gint32 me = (gint32)(src.ih * g->W + src.iw);
        float chosen = 0.0f;
        double shares = 0.0;
        for (int64_t oh = src.oh0; oh < src.oh1; oh++) {
            for (int64_t ow = src.ow0; ow < src.ow1; ow++) {
                int64_t o = src.out_base + oh * g->OW + ow, h0, h1, w0, w1;
                if (ws != NULL && ws[o] == me) {
                    chosen += dy[o];
                }
                shares += dy[o] / (double)cuda_nn_pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
            }
        }
        dx[i] = ws != NULL ? chosen : (float)shares;
    }
}

/* Max or average pooling, forward and backward, emulated and through ref:
 * bit for bit the same. Max pooling on values with ties and NaNs. */
static void check_pool(const CudaPoolGeom *g, gboolean max, gboolean with_nan)
{
    int64_t xs[4] = {g->N, g->C, g->H, g->W}, nx = g->N * g->C * g->H * g->W;
    int64_t ny = g->N * g->C * g->OH * g->OW;
    float *xv = rand_floats(nx, -2, 2);
    for (int64_t i = 0; max && i < nx; i++) {
        /* Few distinct values, so that windows hold ties. */
        xv[i] = with_nan && g_rand_int_range(rng, 0, 20) == 0 ? NAN
                                                              : (float)g_rand_int_range(rng, -3, 3);
    }
    TdmPool2dParams p = params_of(g);
    TdmTensor *x = mk(4, xs, xv), *y = slot(TDM_DTYPE_F32), *ws = slot(TDM_DTYPE_I32);
    op_ok(max ? tdm_op_maxpool2d_forward(dev, NULL, &p, x, y, ws, &op_err)
              : tdm_op_avgpool2d_forward(dev, NULL, &p, x, y, &op_err));
    float *ry = read_all(y, 4), *my = g_new(float, ny);
    gint32 *rws = max ? read_all(ws, 4) : NULL, *mws = max ? g_new(gint32, ny) : NULL;
    emu_pool_forward(g, xv, my, mws);
    expect_same(my, ry, ny, max ? "maxpool y" : "avgpool y");
    if (max) {
        g_assert_cmpmem(mws, ny * 4, rws, ny * 4);
    }

    /* Backward: ref scatters in output order; the kernels gather. */
    float *dyv = rand_floats(ny, -1, 1);
    TdmTensor *dy = mk(4, y->shape, dyv), *dx = slot(TDM_DTYPE_F32);
    op_ok(max ? tdm_op_maxpool2d_backward(dev, NULL, &p, dy, ws, x, dx, &op_err)
              : tdm_op_avgpool2d_backward(dev, NULL, &p, dy, x, dx, &op_err));
    float *rdx = read_all(dx, 4), *mdx = g_new(float, nx);
    emu_pool_backward(g, dyv, mws, mdx);
    expect_same(mdx, rdx, nx, max ? "maxpool dx" : "avgpool dx");
    g_free(xv), g_free(ry), g_free(my), g_free(rws), g_free(mws), g_free(dyv), g_free(rdx);
    g_free(mdx);
    tdm_tensor_unref(x), tdm_tensor_unref(y), tdm_tensor_unref(ws);
    tdm_tensor_unref(dy), tdm_tensor_unref(dx);
}

static void test_maxpool(void)
{
    for (int trial = 0; trial < 60; trial++) {
        CudaPoolGeom g = rand_geom(TRUE);
        check_pool(&g, TRUE, trial % 3 == 0);
    }
}

static void test_avgpool(void)
{
    for (int trial = 0; trial < 80; trial++) {
        CudaPoolGeom g = rand_geom(trial % 2);
        check_pool(&g, FALSE, FALSE);
    }
}

/* PyTorch's divisors on cases worked by hand. 3x3 input, kernel 3, stride
 * 2, padding 1: with the padding every window counts 9 cells, without it a
 * corner window counts its 4 real ones. */
static void test_avgpool_divisors(void)
{
    CudaPoolGeom g = cuda_nn_pool_geom(1, 1, 3, 3, 3, 3, 2, 2, 1, 1, 1);
    g_assert_cmpint(g.OH, ==, 2);
    int64_t h0, h1, w0, w1;
    g_assert_cmpint(cuda_nn_pool_window(&g, 0, 0, &h0, &h1, &w0, &w1), ==, 9);
    g_assert_cmpint(h0, ==, 0);
    g_assert_cmpint(h1, ==, 2);
    g.count_include_pad = 0;
    g_assert_cmpint(cuda_nn_pool_window(&g, 1, 1, &h0, &h1, &w0, &w1), ==, 4);
    /* 4x4, kernel 3, stride 3, padding 1: the last window is rows 2, 3 and
     * the padding row 4: 3 x 3 with the padding, 2 x 2 without. */
    g = cuda_nn_pool_geom(1, 1, 4, 4, 3, 3, 3, 3, 1, 1, 1);
    g_assert_cmpint(g.OH, ==, 2);
    g_assert_cmpint(cuda_nn_pool_window(&g, 1, 1, &h0, &h1, &w0, &w1), ==, 9);
    g_assert_cmpint(h0, ==, 2);
    g_assert_cmpint(h1, ==, 4);
    g.count_include_pad = 0;
    g_assert_cmpint(cuda_nn_pool_window(&g, 1, 1, &h0, &h1, &w0, &w1), ==, 4);
}

static void test_global_avgpool(void)
{
    int64_t xs[4] = {3, 5, 7, 6}, NC = 15, S = 42;
    float *xv = rand_floats(NC * S, -3, 3);
    TdmTensor *x = mk(4, xs, xv), *y = slot(TDM_DTYPE_F32);
    op_ok(tdm_op_global_avgpool_forward(dev, NULL, x, y, &op_err));
    float *ry = read_all(y, 4), my[15];
    for (int64_t r = 0; r < NC; r++) {
        double acc = 0.0;
        for (int64_t s = 0; s < S; s++) {
            acc += xv[r * S + s];
        }
        my[r] = cuda_nn_gap_y(acc, S);
    }
    expect_same(my, ry, NC, "global_avgpool y");
    float *dyv = rand_floats(NC, -1, 1);
    TdmTensor *dy = mk(2, xs, dyv), *dx = slot(TDM_DTYPE_F32);
    op_ok(tdm_op_global_avgpool_backward(dev, NULL, dy, x, dx, &op_err));
    float *rdx = read_all(dx, 4), *mdx = g_new(float, NC *S);
    CudaNnWalk w = cuda_nn_walk_start(0, 1, 1, S);
    for (int64_t i = 0; i < NC * S; i++, cuda_nn_walk_next(&w)) {
        mdx[i] = cuda_nn_gap_dx(dyv[w.n], S);
    }
    expect_same(mdx, rdx, NC * S, "global_avgpool dx");
    g_free(xv), g_free(ry), g_free(dyv), g_free(rdx), g_free(mdx);
    tdm_tensor_unref(x), tdm_tensor_unref(y), tdm_tensor_unref(dy), tdm_tensor_unref(dx);
}

/* ---- per-channel reductions, as the kernels do them ---- */

enum { EMU_STATS, EMU_GRAD, EMU_SUM };

/* Merge as tri_merge in cuda-norm.cu. */
static CudaNnMoments emu_merge(int mode, CudaNnMoments a, CudaNnMoments b)
{
    if (mode == EMU_STATS) {
        return cuda_nn_moments_merge(a, b);
    }
    a.n += b.n, a.mean += b.mean, a.m2 += b.m2;
    return a;
}

/* One thread of a part: its values are j = first, first + stride, ... <
 * end; STATS gives moments, GRAD (sum dy, sum dy * (x - mean)), SUM (sum dy). */
static CudaNnMoments emu_thread(int mode, const float *x, const float *dy, const float *yr,
                                double mean, int64_t C, int64_t S, int64_t c, int64_t first,
                                int64_t stride, int64_t end, gboolean cols)
{
    double n = 0, k = 0, s = 0, q = 0;
    CudaNnWalk w = cuda_nn_walk_start(first, stride, 1, S);
    for (int64_t j = first; j < end; j += stride, cuda_nn_walk_next(&w)) {
        int64_t i = cols ? j * C + c : (w.n * C + c) * S + w.s;
        if (mode == EMU_STATS) {
            double v = x[i];
            k = n == 0 ? v : k;
            s += v - k, q += (v - k) * (v - k), n += 1;
        } else {
            float g = yr != NULL ? cuda_nn_relu_mask(yr[i], dy[i]) : dy[i];
            s += g;
            q += mode == EMU_GRAD ? (double)g * ((double)x[i] - mean) : 0.0;
        }
    }
    if (mode == EMU_STATS) {
        return cuda_nn_moments_shifted(n, k, s, q);
    }
    CudaNnMoments r = {0, s, q};
    return r;
}

/* Channel c of [N, C, S] reduced as chan_reduce_plane (256 threads, warp
 * shuffle tree, warps in order) or chan_reduce_cols (S == 1: 8 rows, in
 * order), then the parts in order (merge_parts). */
static CudaNnMoments emu_channel(int mode, const float *x, const float *dy, const float *yr,
                                 double mean, int64_t N, int64_t C, int64_t S, int64_t c,
                                 int sm_count)
{
    gboolean cols = S == 1;
    int splits = cuda_nn_chan_splits(N, C, S, sm_count);
    CudaNnMoments total = {0, 0, 0};
    for (int p = 0; p < splits; p++) {
        int64_t start, end;
        cuda_nn_split_range(N * S, splits, p, &start, &end);
        CudaNnMoments part;
        if (cols) {
            part = emu_thread(mode, x, dy, yr, mean, C, S, c, start, 8, end, TRUE);
            for (int r = 1; r < 8; r++) {
                part =
                    emu_merge(mode, part,
                              emu_thread(mode, x, dy, yr, mean, C, S, c, start + r, 8, end, TRUE));
            }
        } else {
            CudaNnMoments t[256], warp[8];
            for (int th = 0; th < 256; th++) {
                t[th] = emu_thread(mode, x, dy, yr, mean, C, S, c, start + th, 256, end, FALSE);
            }
            for (int wp = 0; wp < 8; wp++) {
                CudaNnMoments *l = t + 32 * wp;
                for (int off = 16; off > 0; off >>= 1) {
                    for (int lane = 0; lane + off < 32; lane++) {
                        l[lane] = emu_merge(mode, l[lane], l[lane + off]);
                    }
                }
                warp[wp] = l[0];
            }
            part = warp[0];
            for (int wp = 1; wp < 8; wp++) {
                part = emu_merge(mode, part, warp[wp]);
            }
        }
        total = p == 0 ? part : emu_merge(mode, total, part);
    }
    return total;
}

/* Batch norm forward (training then eval, plain and with ReLU) and
 * backward on x [N, C, S...], against ref. */
static void check_batchnorm(int ndim, const int64_t *xs, double offset, int sm_count)
{
    int64_t N = xs[0], C = xs[1], S = ndim == 4 ? xs[2] * xs[3] : 1, n = N * C * S;
    float momentum = 0.1f, eps = 1e-5f;
    float *xv = rand_floats(n, offset - 1.5, offset + 2.5);
    float *gv = rand_floats(C, 0.5, 1.5), *bv = rand_floats(C, -0.5, 0.5);
    float *rmv = rand_floats(C, -0.2, 0.2), *rvv = rand_floats(C, 0.8, 1.2);
    TdmTensor *x = mk(ndim, xs, xv), *gamma = mk(1, &C, gv), *beta = mk(1, &C, bv);
    TdmTensor *rm = mk(1, &C, rmv), *rv = mk(1, &C, rvv);
    TdmTensor *sm = slot(TDM_DTYPE_F32), *sv = slot(TDM_DTYPE_F32), *y = slot(TDM_DTYPE_F32);
    op_ok(tdm_op_batchnorm_forward(dev, NULL, x, gamma, beta, rm, rv, momentum, eps, TRUE, sm, sv,
                                   y, &op_err));
    float *rsm = read_all(sm, 4), *rsv = read_all(sv, 4), *ry = read_all(y, 4);
    float *rrm = read_all(rm, 4), *rrv = read_all(rv, 4);
    float *msm = g_new(float, C), *msv = g_new(float, C), *my = g_new(float, n);
    float *mrm = g_new(float, C), *mrv = g_new(float, C), *myr = g_new(float, n);
    CudaNnBnApply *ap = g_new(CudaNnBnApply, C);
    for (int64_t c = 0; c < C; c++) {
        /* bn_finalize_train */
        CudaNnMoments m = emu_channel(EMU_STATS, xv, NULL, NULL, 0, N, C, S, c, sm_count);
        g_assert_cmpfloat(m.n, ==, (double)(N * S));
        double var = m.m2 / m.n;
        msm[c] = (float)m.mean;
        msv[c] = (float)var;
        mrm[c] = cuda_nn_bn_running(rmv[c], momentum, m.mean);
        mrv[c] = cuda_nn_bn_running(rvv[c], momentum, m.m2 / (m.n - 1.0));
        CudaNnBnApply a = {m.mean, cuda_nn_bn_invstd(var, eps), gv[c], bv[c]};
        ap[c] = a;
    }
    CudaNnWalk w = cuda_nn_walk_start(0, 1, C, S);
    for (int64_t i = 0; i < n; i++, cuda_nn_walk_next(&w)) {
        my[i] = cuda_nn_bn_y(xv[i], &ap[w.c]);
        myr[i] = cuda_nn_bn_relu_y(xv[i], &ap[w.c]);
    }
    expect_close(msm, rsm, C, 1e-6, 1e-3, "save_mean");
    expect_close(msv, rsv, C, 1e-6, 0.0, "save_var");
    expect_close(mrm, rrm, C, 1e-6, 1e-3, "running_mean");
    expect_close(mrv, rrv, C, 1e-6, 0.0, "running_var");
    expect_close(my, ry, n, 1e-5, 1e-2, "batchnorm y");

    /* The fused forward (fresh running stats, same batch statistics). */
    TdmTensor *rm2 = mk(1, &C, rmv), *rv2 = mk(1, &C, rvv), *yr = slot(TDM_DTYPE_F32);
    TdmTensor *ws = slot(TDM_DTYPE_F32);
    op_ok(tdm_op_batchnorm_relu_forward(dev, NULL, x, gamma, beta, rm2, rv2, momentum, eps, TRUE,
                                        sm, sv, ws, yr, &op_err));
    float *ryr = read_all(yr, 4);
    expect_close(myr, ryr, n, 1e-5, 1e-2, "batchnorm_relu y");

    /* Eval mode: the records from the running stats, the same formula. */
    TdmTensor *ye = slot(TDM_DTYPE_F32);
    op_ok(tdm_op_batchnorm_forward(dev, NULL, x, gamma, beta, rm, rv, momentum, eps, FALSE, NULL,
                                   NULL, ye, &op_err));
    float *rye = read_all(ye, 4);
    w = cuda_nn_walk_start(0, 1, C, S);
    for (int64_t i = 0; i < n; i++, cuda_nn_walk_next(&w)) {
        CudaNnBnApply a = {rrm[w.c], cuda_nn_bn_invstd(rrv[w.c], eps), gv[w.c], bv[w.c]};
        my[i] = cuda_nn_bn_y(xv[i], &a);
    }
    expect_same(my, rye, n, "batchnorm y (eval)");

    /* Backward, plain and masked by the fused forward's output. */
    for (int masked = 0; masked < 2; masked++) {
        float *dyv = rand_floats(n, -1, 1), *dgv = rand_floats(C, -1, 1);
        float *dbv = rand_floats(C, -1, 1);
        TdmTensor *dy = mk(ndim, xs, dyv), *dx = slot(TDM_DTYPE_F32);
        TdmTensor *dg = mk(1, &C, dgv), *db = mk(1, &C, dbv);
        if (masked) {
            op_ok(tdm_op_batchnorm_relu_backward(dev, NULL, x, yr, ws, dy, gamma, sm, sv, eps, dx,
                                                 dg, db, &op_err));
        } else {
            op_ok(tdm_op_batchnorm_backward(dev, NULL, x, dy, gamma, sm, sv, eps, dx, dg, db,
                                            &op_err));
        }
        float *rdx = read_all(dx, 4), *rdg = read_all(dg, 4), *rdb = read_all(db, 4);
        float *mdx = g_new(float, n), *mdg = g_new(float, C), *mdb = g_new(float, C);
        CudaNnBnGrad *gr = g_new(CudaNnBnGrad, C);
        double m = (double)(N * S);
        for (int64_t c = 0; c < C; c++) {
            /* bn_finalize_grad */
            CudaNnMoments t =
                emu_channel(EMU_GRAD, xv, dyv, masked ? ryr : NULL, rsm[c], N, C, S, c, sm_count);
            CudaNnBnGrad g;
            g.mean = rsm[c];
            g.invstd = cuda_nn_bn_invstd(rsv[c], eps);
            g.sum_dy = t.mean;
            g.sum_dy_xhat = t.m2 * g.invstd;
            g.k = gv[c] * g.invstd / m;
            mdg[c] = (float)(dgv[c] + g.sum_dy_xhat);
            mdb[c] = (float)(dbv[c] + g.sum_dy);
            gr[c] = g;
        }
        w = cuda_nn_walk_start(0, 1, C, S);
        for (int64_t i = 0; i < n; i++, cuda_nn_walk_next(&w)) {
            float d = masked ? cuda_nn_relu_mask(ryr[i], dyv[i]) : dyv[i];
            mdx[i] = cuda_nn_bn_dx(xv[i], d, m, &gr[w.c]);
        }
        expect_close(mdx, rdx, n, 1e-5, 1e-3, masked ? "batchnorm_relu dx" : "batchnorm dx");
        expect_close(mdg, rdg, C, 1e-5, 1e-2, "dgamma");
        expect_close(mdb, rdb, C, 1e-5, 1e-2, "dbeta");
        g_free(dyv), g_free(dgv), g_free(dbv), g_free(rdx), g_free(rdg), g_free(rdb);
        g_free(mdx), g_free(mdg), g_free(mdb), g_free(gr);
        tdm_tensor_unref(dy), tdm_tensor_unref(dx), tdm_tensor_unref(dg), tdm_tensor_unref(db);
    }
    g_free(xv), g_free(gv), g_free(bv), g_free(rmv), g_free(rvv), g_free(rsm), g_free(rsv);
    g_free(ry), g_free(rrm), g_free(rrv), g_free(msm), g_free(msv), g_free(my), g_free(mrm);
    g_free(mrv), g_free(myr), g_free(ap), g_free(ryr), g_free(rye);
    TdmTensor *all[] = {x, gamma, beta, rm, rv, sm, sv, y, rm2, rv2, yr, ws, ye};
    for (size_t i = 0; i < G_N_ELEMENTS(all); i++) {
        tdm_tensor_unref(all[i]);
    }
}

static void test_batchnorm_image(void)
{
    const int64_t small[4] = {3, 4, 5, 7}, wide[4] = {8, 3, 33, 40};
    check_batchnorm(4, small, 0.0, 132);
    /* Several parts per channel (sm_count large), a mean far from zero. */
    check_batchnorm(4, wide, 1000.0, 4096);
}

static void test_batchnorm_rows(void)
{
    const int64_t rows[2] = {37, 70}, many[2] = {9000, 5};
    check_batchnorm(2, rows, 0.0, 132);
    check_batchnorm(2, many, -300.0, 4096);
}

/* A mean much larger than the spread: shifted sums and Chan's merge keep
 * the variance; E[x^2] - E[x]^2 in double would not. */
static void test_moments_far_mean(void)
{
    const int n = 10000;
    CudaNnMoments parts[4];
    for (int p = 0; p < 4; p++) {
        double k = 0, s = 0, q = 0;
        for (int i = 0; i < n / 4; i++) {
            double v = 1e8 + ((p * (n / 4) + i) % 2 ? 1.0 : -1.0);
            k = i == 0 ? v : k;
            s += v - k, q += (v - k) * (v - k);
        }
        parts[p] = cuda_nn_moments_shifted(n / 4, k, s, q);
    }
    CudaNnMoments m = parts[0];
    for (int p = 1; p < 4; p++) {
        m = cuda_nn_moments_merge(m, parts[p]);
    }
    g_assert_cmpfloat(m.n, ==, n);
    g_assert_cmpfloat(fabs(m.mean - 1e8), <, 1e-6);
    g_assert_cmpfloat(fabs(m.m2 / m.n - 1.0), <, 1e-9);
}

static void test_bias_grad(void)
{
    const int64_t shapes[][4] = {{5, 7, 3, 4}, {300, 33, 1, 1}};
    for (int k = 0; k < 2; k++) {
        int ndim = k == 0 ? 4 : 2;
        int64_t N = shapes[k][0], C = shapes[k][1], S = shapes[k][2] * shapes[k][3];
        float *dyv = rand_floats(N * C * S, -1, 1), *dbv = rand_floats(C, -1, 1);
        TdmTensor *dy = mk(ndim, shapes[k], dyv), *db = mk(1, &C, dbv);
        op_ok(tdm_op_bias_grad(dev, NULL, dy, db, &op_err));
        float *rdb = read_all(db, 4), *mdb = g_new(float, C);
        for (int64_t c = 0; c < C; c++) {
            /* bias_finalize */
            CudaNnMoments t = emu_channel(EMU_SUM, NULL, dyv, NULL, 0, N, C, S, c, 132);
            mdb[c] = (float)(dbv[c] + t.mean);
        }
        expect_close(mdb, rdb, C, 1e-6, 1e-3, "bias_grad");
        g_free(dyv), g_free(dbv), g_free(rdb), g_free(mdb);
        tdm_tensor_unref(dy), tdm_tensor_unref(db);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    GError *err = NULL;
    dev = tdm_device_get("ref", &err);
    g_assert_no_error(err);
    g_autoptr(GRand) seeded = g_rand_new_with_seed(20261203);
    rng = seeded;

    /* The index arithmetic every kernel shares. */
    g_test_add_func("/cuda-nn-elem/walk", test_walk);
    g_test_add_func("/cuda-nn-elem/splits", test_splits);
    /* Pooling: windows, divisors and the gather, against ref. */
    g_test_add_func("/cuda-nn-elem/pool/outputs_of", test_pool_outputs_of);
    g_test_add_func("/cuda-nn-elem/pool/avg_divisors", test_avgpool_divisors);
    g_test_add_func("/cuda-nn-elem/pool/max_vs_ref", test_maxpool);
    g_test_add_func("/cuda-nn-elem/pool/avg_vs_ref", test_avgpool);
    g_test_add_func("/cuda-nn-elem/pool/global_vs_ref", test_global_avgpool);
    /* Batch norm and bias_grad: moments, formulas, reductions, against ref. */
    g_test_add_func("/cuda-nn-elem/batchnorm/moments_far_mean", test_moments_far_mean);
    g_test_add_func("/cuda-nn-elem/batchnorm/image_vs_ref", test_batchnorm_image);
    g_test_add_func("/cuda-nn-elem/batchnorm/rows_vs_ref", test_batchnorm_rows);
    g_test_add_func("/cuda-nn-elem/bias_grad/vs_ref", test_bias_grad);
    return g_test_run();
}

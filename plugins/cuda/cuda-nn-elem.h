/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-nn-elem.h - the arithmetic of the batch norm, pooling
 * and bias-gradient kernels that does not depend on the GPU: pooling output
 * sizes, windows and divisors, the outputs a given input feeds, the batch
 * norm per-element formulas and statistics merges, and the index walk the
 * per-channel kernels use instead of a division per element.
 *
 * The functions are static inline and marked __host__ __device__ under nvcc
 * (CUDA_NN_HD), so that cuda-norm.cu and cuda-pool.cu call them per thread
 * while tests/test-cuda-nn-elem.c, plain C compiled on every machine, calls
 * the very same functions in CPU loops and compares the results with the
 * ref backend (plugins/ref/ref-ops.c, ref-pool.c), whose formulas they copy
 * operation for operation (double where ref uses double). This header
 * includes nothing of CUDA, GLib or Tandem: only <stdint.h> (and <math.h>
 * outside nvcc, which provides sqrt itself).
 */
#ifndef TDM_CUDA_NN_ELEM_H
#define TDM_CUDA_NN_ELEM_H

#include <stdint.h>

#ifdef __CUDACC__
#define CUDA_NN_HD __host__ __device__
#else
#include <math.h>
#define CUDA_NN_HD
#endif

/* ---- pooling geometry ---- */

/* A 2-D pooling problem, as plain numbers (the kernels get it by value). */
typedef struct {
    int64_t N, C, H, W;    /* input */
    int64_t OH, OW;        /* output */
    int kh, kw;            /* kernel */
    int sh, sw;            /* stride */
    int ph, pw;            /* padding (at most half the kernel: the front end checks) */
    int count_include_pad; /* avg pool only */
} CudaPoolGeom;

/* PyTorch's output size (floor division, no ceil mode). */
CUDA_NN_HD static inline int64_t cuda_nn_pool_out(int64_t in, int k, int stride, int pad)
{
    return (in + 2 * (int64_t)pad - k) / stride + 1;
}

CUDA_NN_HD static inline CudaPoolGeom cuda_nn_pool_geom(int64_t N, int64_t C, int64_t H, int64_t W,
                                                        int kh, int kw, int sh, int sw, int ph,
                                                        int pw, int count_include_pad)
{
    CudaPoolGeom g;
    g.N = N;
    g.C = C;
    g.H = H;
    g.W = W;
    g.kh = kh;
    g.kw = kw;
    g.sh = sh;
    g.sw = sw;
    g.ph = ph;
    g.pw = pw;
    g.count_include_pad = count_include_pad;
    g.OH = cuda_nn_pool_out(H, kh, sh, ph);
    g.OW = cuda_nn_pool_out(W, kw, sw, pw);
    return g;
}

/* The window of output (oh, ow) clipped to the input, [*h0, *h1) x [*w0,
 * *w1), and PyTorch's average divisor: with count_include_pad the window
 * clipped to the padded input (padding cells count, the part beyond the
 * padding does not), else the real cells. The clipped window is never
 * empty because the padding is at most half the kernel. */
CUDA_NN_HD static inline int64_t cuda_nn_pool_window(const CudaPoolGeom *g, int64_t oh, int64_t ow,
                                                     int64_t *h0, int64_t *h1, int64_t *w0,
                                                     int64_t *w1)
{
    int64_t hs = oh * g->sh - g->ph, ws = ow * g->sw - g->pw;
    int64_t he = hs + g->kh < g->H + g->ph ? hs + g->kh : g->H + g->ph;
    int64_t we = ws + g->kw < g->W + g->pw ? ws + g->kw : g->W + g->pw;
    *h0 = hs > 0 ? hs : 0;
    *w0 = ws > 0 ? ws : 0;
    *h1 = he < g->H ? he : g->H;
    *w1 = we < g->W ? we : g->W;
    return g->count_include_pad ? (he - hs) * (we - ws) : (*h1 - *h0) * (*w1 - *w0);
}

/* The outputs [*o0, *o1) along one axis whose window (o * stride - pad,
 * kernel k long) contains input position i: the gather form of the pooling
 * backward ops (each input sums what its outputs send it). */
CUDA_NN_HD static inline void cuda_nn_pool_outputs_of(int64_t i, int k, int stride, int pad,
                                                      int64_t out, int64_t *o0, int64_t *o1)
{
    /* o * stride - pad <= i  and  o * stride - pad + k > i; i + pad >= 0. */
    int64_t lo = i + pad - k; /* o * stride > lo */
    *o0 = lo < 0 ? 0 : lo / stride + 1;
    int64_t hi = (i + pad) / stride + 1;
    *o1 = hi < out ? hi : out;
}

/* Input i of [N, C, H, W] in a pooling backward: its plane (n * C + c),
 * its position in the plane, and the outputs that may send it gradient,
 * [oh0, oh1) x [ow0, ow1) of the plane's outputs starting at `out_base`. */
typedef struct {
    int64_t plane, ih, iw;
    int64_t out_base, oh0, oh1, ow0, ow1;
} CudaNnPoolSources;

CUDA_NN_HD static inline CudaNnPoolSources cuda_nn_pool_sources(const CudaPoolGeom *g, int64_t i)
{
    CudaNnPoolSources r;
    r.iw = i % g->W;
    r.ih = i / g->W % g->H;
    r.plane = i / g->W / g->H;
    r.out_base = r.plane * g->OH * g->OW;
    cuda_nn_pool_outputs_of(r.ih, g->kh, g->sh, g->ph, g->OH, &r.oh0, &r.oh1);
    cuda_nn_pool_outputs_of(r.iw, g->kw, g->sw, g->pw, g->OW, &r.ow0, &r.ow1);
    return r;
}

/* Max pooling's choice, as ref: the first maximum of the window in row-major
 * order, except that a NaN always wins (the last NaN then), as PyTorch.
 * `have` is 0 before the first cell. v != v is the NaN test (no isnan, so
 * that C, host C++ and device code read the same). */
CUDA_NN_HD static inline int cuda_nn_max_takes(float v, float best, int have)
{
    return !have || v > best || v != v;
}

/* ---- batch norm ---- */

/* Moments of a set of values: count, mean and the sum of squared deviations
 * (M2); merged pairwise with Chan et al.'s formula, which stays accurate
 * whatever the mean's size (no sum-of-squares cancellation). */
typedef struct {
    double n, mean, m2;
} CudaNnMoments;

/* The moments of values whose sums, shifted by k (one of the values, so
 * that the shifted values are of the order of the spread), are s = sum(x -
 * k) and q = sum((x - k)^2), over n values. */
CUDA_NN_HD static inline CudaNnMoments cuda_nn_moments_shifted(double n, double k, double s,
                                                               double q)
{
    CudaNnMoments r;
    r.n = n;
    if (n <= 0.0) {
        r.mean = 0.0;
        r.m2 = 0.0;
        return r;
    }
    double d = s / n;
    r.mean = k + d;
    r.m2 = q - s * d;
    if (r.m2 < 0.0) {
        r.m2 = 0.0;
    }
    return r;
}

CUDA_NN_HD static inline CudaNnMoments cuda_nn_moments_merge(CudaNnMoments a, CudaNnMoments b)
{
    if (b.n <= 0.0) {
        return a;
    }
    if (a.n <= 0.0) {
        return b;
    }
    CudaNnMoments r;
    double n = a.n + b.n, delta = b.mean - a.mean;
    r.n = n;
    r.mean = a.mean + delta * (b.n / n);
    r.m2 = a.m2 + b.m2 + delta * delta * (a.n * (b.n / n));
    return r;
}

/* 1 / sqrt(var + eps), as ref. */
CUDA_NN_HD static inline double cuda_nn_bn_invstd(double var, float eps)
{
    return 1.0 / sqrt(var + (double)eps);
}

/* What one channel's elements need: y = (x - mean) * invstd * gamma + beta,
 * in double as ref (gamma 1, beta 0 when absent). */
typedef struct {
    double mean, invstd, gamma, beta;
} CudaNnBnApply;

CUDA_NN_HD static inline float cuda_nn_bn_y(float x, const CudaNnBnApply *a)
{
    return (float)(((double)x - a->mean) * a->invstd * a->gamma + a->beta);
}

/* The fused BN + ReLU output: ref's relu (y > 0 ? y : 0) of the BN output. */
CUDA_NN_HD static inline float cuda_nn_bn_relu_y(float x, const CudaNnBnApply *a)
{
    float y = cuda_nn_bn_y(x, a);
    return y > 0.0f ? y : 0.0f;
}

/* A running statistic after one training step: (1 - m) r + m stat, as ref
 * (stat is the mean, or the unbiased variance for running_var). */
CUDA_NN_HD static inline float cuda_nn_bn_running(float r, float momentum, double stat)
{
    return (float)((1.0 - momentum) * r + momentum * stat);
}

/* What one channel's dx needs (ref_batchnorm_backward): the saved mean,
 * invstd from the saved variance, k = gamma * invstd / m, and the channel
 * sums of dy and dy * xhat. */
typedef struct {
    double mean, invstd, k, sum_dy, sum_dy_xhat;
} CudaNnBnGrad;

CUDA_NN_HD static inline float cuda_nn_bn_dx(float x, float dy, double m, const CudaNnBnGrad *g)
{
    double xhat = ((double)x - g->mean) * g->invstd;
    return (float)(g->k * (m * dy - g->sum_dy - xhat * g->sum_dy_xhat));
}

/* The gradient BN+ReLU's backward feeds to the BN backward: dy where the
 * forward output y is positive (ref's relu_backward). */
CUDA_NN_HD static inline float cuda_nn_relu_mask(float y, float dy)
{
    return y > 0.0f ? dy : 0.0f;
}

/* ---- index walks ----
 * Element i of a [N, C, S] tensor is (n, c, s) with i = (n * C + c) * S + s.
 * A grid-stride loop advances i by a fixed step; the walk keeps (n, c, s) up
 * to date with additions only: one division per thread at the start instead
 * of two per element. (A walk over one channel's N * S values is the same
 * with C = 1.) */
typedef struct {
    int64_t n, c, s;    /* where the walk is */
    int64_t dn, dc, ds; /* the step, decomposed the same way */
    int64_t C, S;
} CudaNnWalk;

CUDA_NN_HD static inline CudaNnWalk cuda_nn_walk_start(int64_t i, int64_t step, int64_t C,
                                                       int64_t S)
{
    CudaNnWalk w;
    w.C = C;
    w.S = S;
    w.s = i % S;
    w.c = (i / S) % C;
    w.n = i / S / C;
    w.ds = step % S;
    w.dc = (step / S) % C;
    w.dn = step / S / C;
    return w;
}

CUDA_NN_HD static inline void cuda_nn_walk_next(CudaNnWalk *w)
{
    /* Each digit is below its base, so a carry is at most 1. */
    w->s += w->ds;
    int64_t carry = w->s >= w->S;
    w->s -= carry ? w->S : 0;
    w->c += w->dc + carry;
    carry = w->c >= w->C;
    w->c -= carry ? w->C : 0;
    w->n += w->dn + carry;
}

/* ---- per-channel reductions ----
 * The kernels that sum per channel (batch norm statistics and gradients,
 * bias_grad) split each channel's L = N * S values into `splits` parts,
 * one block each, then merge the parts in a fixed order: deterministic for
 * a given shape and GPU. `base_blocks` is the number of blocks one split
 * takes over all channels; the split count aims at a few blocks per
 * multiprocessor while keeping at least CUDA_NN_MIN_PER_SPLIT values in each
 * part. */
#define CUDA_NN_MIN_PER_SPLIT 4096
#define CUDA_NN_MAX_SPLITS 256

CUDA_NN_HD static inline int cuda_nn_splits(int64_t L, int64_t base_blocks, int sm_count)
{
    int64_t want = (4 * (int64_t)(sm_count > 0 ? sm_count : 1) + base_blocks - 1) /
                   (base_blocks > 0 ? base_blocks : 1);
    int64_t by_size = (L + CUDA_NN_MIN_PER_SPLIT - 1) / CUDA_NN_MIN_PER_SPLIT;
    int64_t p = want < by_size ? want : by_size;
    p = p < CUDA_NN_MAX_SPLITS ? p : CUDA_NN_MAX_SPLITS;
    return p < 1 ? 1 : (int)p;
}

/* The parts of each channel of [N, C, S], as the kernels cut them: S > 1
 * ("plane" kernel) one block per part of a channel; S == 1 ([N, C], the
 * "cols" kernel) one block per part of the rows for CUDA_NN_COL_X
 * neighbouring channels, read CUDA_NN_COL_Y rows at a time, so a part is
 * counted in the values of all its channels and holds at least
 * CUDA_NN_COL_Y rows. */
#define CUDA_NN_COL_X 32
#define CUDA_NN_COL_Y 8

CUDA_NN_HD static inline int cuda_nn_chan_splits(int64_t N, int64_t C, int64_t S, int sm_count)
{
    if (S != 1) {
        return cuda_nn_splits(N * S, C, sm_count);
    }
    int splits =
        cuda_nn_splits(N * CUDA_NN_COL_X, (C + CUDA_NN_COL_X - 1) / CUDA_NN_COL_X, sm_count);
    int64_t most = N / CUDA_NN_COL_Y;
    return most < 1 ? 1 : (splits < most ? splits : (int)most);
}

/* Part p of `splits` parts of [0, L): [start, end). */
CUDA_NN_HD static inline void cuda_nn_split_range(int64_t L, int splits, int p, int64_t *start,
                                                  int64_t *end)
{
    *start = L / splits * p + (L % splits) * p / splits;
    *end = L / splits * (p + 1) + (L % splits) * (p + 1) / splits;
}

/* Blocks of `threads` for a grid-stride loop over `total` items: one item
 * per thread up to CUDA_NN_MAX_BLOCKS blocks, more per thread beyond. */
#define CUDA_NN_MAX_BLOCKS ((int64_t)1 << 22)

CUDA_NN_HD static inline unsigned int cuda_nn_grid_blocks(int64_t total, int threads)
{
    int64_t b = (total + threads - 1) / threads;
    return (unsigned int)(b < CUDA_NN_MAX_BLOCKS ? (b > 0 ? b : 1) : CUDA_NN_MAX_BLOCKS);
}

/* ---- global average pooling ---- */

CUDA_NN_HD static inline float cuda_nn_gap_y(double sum, int64_t S)
{
    return (float)(sum / (double)S);
}

CUDA_NN_HD static inline float cuda_nn_gap_dx(float dy, int64_t S)
{
    return (float)((double)dy / (double)S);
}

#endif /* TDM_CUDA_NN_ELEM_H */

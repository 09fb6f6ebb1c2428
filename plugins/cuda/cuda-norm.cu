/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-norm.cu - batch norm forward and backward (with the
 * fused ReLU variants) and bias_grad: the per-channel kernels of the cuda
 * backend.
 *
 * All of them start with a reduction per channel of a [N, C, S] tensor:
 * each channel's N * S values are split into parts, one block per part
 * (cuda_nn_splits), each block reduces its part in double, and a finalize
 * kernel (one thread per channel) merges the parts in a fixed order, so the
 * results are deterministic for a shape and a GPU. Two reduction kernels
 * share the work: "plane" for S > 1 (a block walks a run of one channel,
 * reading contiguous rows of S), "cols" for S == 1 ([N, C]: a block reads 32
 * neighbouring channels of each row, so that a warp's loads are coalesced).
 *
 * The batch statistics are moments merged with Chan's formula (each thread
 * accumulates sums shifted by its own first value, cuda_nn_moments_shifted),
 * accurate whatever the mean's size; the mean and the BIASED variance go to
 * save_mean/save_var, the unbiased one to running_var, as ref. The
 * elementwise passes (normalise; dx) then apply the formulas of
 * cuda-nn-elem.h, in double as ref does, with the channel found by an index
 * walk instead of divisions. Scratch: the parts, then one record per
 * channel for the elementwise pass (layout in ChanPlan).
 */
#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda-nn-kernels.h"

#define NN_THREADS 256         /* block size of the plane, apply and finalize kernels */
#define NN_COL_X CUDA_NN_COL_X /* cols kernel: channels per block */
#define NN_COL_Y CUDA_NN_COL_Y /* cols kernel: rows read at once */
#define NN_COL_THREADS (NN_COL_X * NN_COL_Y)

/* Everything but the launchers has internal linkage: the plugin's other
 * .cu files may use the same names. */
namespace
{

enum { RED_STATS = 0, RED_GRAD = 1, RED_SUM = 2 };

/* A part's result: STATS (count, mean, M2); GRAD (unused, sum dy, sum dy *
 * (x - mean)); SUM (unused, sum dy, unused). */
struct Triple {
    double n, a, b;
};

template <int MODE> __device__ __forceinline__ Triple tri_merge(Triple x, Triple y)
{
    if (MODE == RED_STATS) {
        CudaNnMoments p = {x.n, x.a, x.b}, q = {y.n, y.a, y.b};
        CudaNnMoments r = cuda_nn_moments_merge(p, q);
        Triple t = {r.n, r.mean, r.m2};
        return t;
    }
    x.n += y.n;
    x.a += y.a;
    x.b += y.b;
    return x;
}

__device__ __forceinline__ Triple tri_shfl_down(Triple t, int offset)
{
    t.n = __shfl_down_sync(0xffffffffu, t.n, offset);
    t.a = __shfl_down_sync(0xffffffffu, t.a, offset);
    t.b = __shfl_down_sync(0xffffffffu, t.b, offset);
    return t;
}

/* The merge of every thread's value, in thread 0 (a fixed order: warps by
 * shuffles, then the warps' results in warp order). Every thread of the
 * block must call it; blockDim.x is a multiple of 32. */
template <int MODE> __device__ Triple block_merge(Triple t)
{
    __shared__ Triple warp_part[32];
    for (int offset = 16; offset > 0; offset >>= 1) {
        t = tri_merge<MODE>(t, tri_shfl_down(t, offset));
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_part[warp] = t;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int nwarps = blockDim.x >> 5;
        for (int i = 1; i < nwarps; i++) {
            t = tri_merge<MODE>(t, warp_part[i]);
        }
    }
    return t;
}

/* One thread's accumulation over its values of one channel. */
template <int MODE> struct Acc {
    double n, k, s, q;
    double mean;         /* GRAD: the channel's saved mean */
    const float *y_relu; /* GRAD: BN+ReLU mask source, or NULL */

    __device__ void init(double channel_mean, const float *yr)
    {
        n = k = s = q = 0.0;
        mean = channel_mean;
        y_relu = yr;
    }
    __device__ __forceinline__ void push(const float *x, const float *dy, int64_t i)
    {
        if (MODE == RED_STATS) {
            double v = x[i];
            if (n == 0.0) {
                k = v;
            }
            double d = v - k;
            s += d;
            q += d * d;
            n += 1.0;
        } else if (MODE == RED_GRAD) {
            float g = dy[i];
            if (y_relu != NULL) {
                g = cuda_nn_relu_mask(y_relu[i], g);
            }
            s += g;
            q += (double)g * ((double)x[i] - mean);
        } else {
            s += dy[i];
        }
    }
    __device__ Triple result() const
    {
        if (MODE == RED_STATS) {
            CudaNnMoments m = cuda_nn_moments_shifted(n, k, s, q);
            Triple t = {m.n, m.mean, m.m2};
            return t;
        }
        Triple t = {0.0, s, q};
        return t;
    }
};

/* S > 1: block (c, p) reduces part p of channel c; parts[c * splits + p]. */
template <int MODE>
__global__ void __launch_bounds__(NN_THREADS)
    chan_reduce_plane(const float *x, const float *dy, const float *y_relu, const float *mean,
                      int64_t N, int64_t C, int64_t S, int splits, Triple *parts)
{
    int64_t c = blockIdx.x / splits;
    int p = (int)(blockIdx.x % splits);
    int64_t start, end;
    cuda_nn_split_range(N * S, splits, p, &start, &end);
    Acc<MODE> acc;
    acc.init(MODE == RED_GRAD ? (double)mean[c] : 0.0, y_relu);
    /* j runs over the channel's values n * S + s; the walk (C = 1) keeps n
     * and s. */
    int64_t j = start + threadIdx.x;
    CudaNnWalk w = cuda_nn_walk_start(j, blockDim.x, 1, S);
    for (; j < end; j += blockDim.x, cuda_nn_walk_next(&w)) {
        acc.push(x, dy, (w.n * C + c) * S + w.s);
    }
    Triple t = block_merge<MODE>(acc.result());
    if (threadIdx.x == 0) {
        parts[c * splits + p] = t;
    }
}

/* S == 1: block (b, p) reduces part p of the rows for channels
 * [32 b, 32 b + 32); a (32, 8) block, threadIdx.x the channel. */
template <int MODE>
__global__ void __launch_bounds__(NN_COL_THREADS)
    chan_reduce_cols(const float *x, const float *dy, const float *y_relu, const float *mean,
                     int64_t N, int64_t C, int splits, Triple *parts)
{
    __shared__ Triple rows[NN_COL_Y][NN_COL_X];
    int64_t c = (int64_t)(blockIdx.x / splits) * NN_COL_X + threadIdx.x;
    int p = (int)(blockIdx.x % splits);
    int64_t start, end;
    cuda_nn_split_range(N, splits, p, &start, &end);
    Acc<MODE> acc;
    acc.init(MODE == RED_GRAD && c < C ? (double)mean[c] : 0.0, y_relu);
    if (c < C) {
        for (int64_t n = start + threadIdx.y; n < end; n += NN_COL_Y) {
            acc.push(x, dy, n * C + c);
        }
    }
    rows[threadIdx.y][threadIdx.x] = acc.result();
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        Triple t = rows[0][threadIdx.x];
        for (int r = 1; r < NN_COL_Y; r++) {
            t = tri_merge<MODE>(t, rows[r][threadIdx.x]);
        }
        parts[c * splits + p] = t;
    }
}

template <int MODE> __device__ Triple merge_parts(const Triple *parts, int64_t c, int splits)
{
    Triple t = parts[c * splits];
    for (int p = 1; p < splits; p++) {
        t = tri_merge<MODE>(t, parts[c * splits + p]);
    }
    return t;
}

/* Training forward, per channel: statistics, saved and running stats, and
 * the record the normalisation reads. */
__global__ void bn_finalize_train(const Triple *parts, int splits, int64_t C, const float *gamma,
                                  const float *beta, float *running_mean, float *running_var,
                                  float momentum, float eps, float *save_mean, float *save_var,
                                  CudaNnBnApply *apply)
{
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    Triple t = merge_parts<RED_STATS>(parts, c, splits);
    double m = t.n, mean = t.a, var = t.b / m;
    if (save_mean != NULL) {
        save_mean[c] = (float)mean;
    }
    if (save_var != NULL) {
        save_var[c] = (float)var;
    }
    if (running_mean != NULL) {
        running_mean[c] = cuda_nn_bn_running(running_mean[c], momentum, mean);
    }
    if (running_var != NULL) {
        running_var[c] = cuda_nn_bn_running(running_var[c], momentum, t.b / (m - 1.0));
    }
    CudaNnBnApply a;
    a.mean = mean;
    a.invstd = cuda_nn_bn_invstd(var, eps);
    a.gamma = gamma != NULL ? (double)gamma[c] : 1.0;
    a.beta = beta != NULL ? (double)beta[c] : 0.0;
    apply[c] = a;
}

/* Eval forward, per channel: the record from the running stats. */
__global__ void bn_finalize_eval(int64_t C, const float *gamma, const float *beta,
                                 const float *running_mean, const float *running_var, float eps,
                                 CudaNnBnApply *apply)
{
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    CudaNnBnApply a;
    a.mean = running_mean[c];
    a.invstd = cuda_nn_bn_invstd(running_var[c], eps);
    a.gamma = gamma != NULL ? (double)gamma[c] : 1.0;
    a.beta = beta != NULL ? (double)beta[c] : 0.0;
    apply[c] = a;
}

/* Backward, per channel: dgamma/dbeta accumulated, the record dx reads. */
__global__ void bn_finalize_grad(const Triple *parts, int splits, int64_t C, double m,
                                 const float *gamma, const float *save_mean, const float *save_var,
                                 float eps, float *dgamma, float *dbeta, CudaNnBnGrad *grad)
{
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    Triple t = merge_parts<RED_GRAD>(parts, c, splits);
    CudaNnBnGrad g;
    g.mean = save_mean[c];
    g.invstd = cuda_nn_bn_invstd(save_var[c], eps);
    g.sum_dy = t.a;
    g.sum_dy_xhat = t.b * g.invstd;
    g.k = (gamma != NULL ? (double)gamma[c] : 1.0) * g.invstd / m;
    if (dgamma != NULL) {
        dgamma[c] = (float)(dgamma[c] + g.sum_dy_xhat);
    }
    if (dbeta != NULL) {
        dbeta[c] = (float)(dbeta[c] + g.sum_dy);
    }
    grad[c] = g;
}

__global__ void bias_finalize(const Triple *parts, int splits, int64_t C, float *db)
{
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    Triple t = merge_parts<RED_SUM>(parts, c, splits);
    db[c] = (float)(db[c] + t.a);
}

/* y = BN(x) (relu: max(BN(x), 0)) over every element; y may be x. */
template <int RELU>
__global__ void __launch_bounds__(NN_THREADS)
    bn_apply(const float *x, float *y, int64_t total, int64_t C, int64_t S,
             const CudaNnBnApply *apply)
{
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    CudaNnWalk w = cuda_nn_walk_start(i, step, C, S);
    for (; i < total; i += step, cuda_nn_walk_next(&w)) {
        CudaNnBnApply a = apply[w.c];
        y[i] = RELU ? cuda_nn_bn_relu_y(x[i], &a) : cuda_nn_bn_y(x[i], &a);
    }
}

/* dx from x, dy (masked by y_relu > 0 when given) and the channel records;
 * dx may be dy. */
__global__ void __launch_bounds__(NN_THREADS)
    bn_dx(const float *x, const float *dy, const float *y_relu, float *dx, int64_t total, int64_t C,
          int64_t S, double m, const CudaNnBnGrad *grad)
{
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    CudaNnWalk w = cuda_nn_walk_start(i, step, C, S);
    for (; i < total; i += step, cuda_nn_walk_next(&w)) {
        CudaNnBnGrad g = grad[w.c];
        float d = dy[i];
        if (y_relu != NULL) {
            d = cuda_nn_relu_mask(y_relu[i], d);
        }
        dx[i] = cuda_nn_bn_dx(x[i], d, m, &g);
    }
}

/* ---- host side ---- */

int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* A per-channel op over [N, C, S] and its scratch: the parts [C][splits]
 * at 0, then one record per channel (CudaNnBnApply or CudaNnBnGrad) at a
 * 256-byte boundary. The cut is cuda_nn_chan_splits', the one place that
 * decides, so that the scratch size and the launches agree. */
struct ChanPlan {
    int64_t N, C, S;
    int splits;
    size_t records_offset, bytes;
    Triple *parts;
    void *records;
};

static ChanPlan chan_plan(void *scratch, int64_t N, int64_t C, int64_t S, int sm_count)
{
    ChanPlan pl;
    pl.N = N;
    pl.C = C;
    pl.S = S;
    pl.splits = cuda_nn_chan_splits(N, C, S, sm_count);
    size_t parts = (size_t)C * (size_t)pl.splits * sizeof(Triple);
    size_t record =
        sizeof(CudaNnBnApply) > sizeof(CudaNnBnGrad) ? sizeof(CudaNnBnApply) : sizeof(CudaNnBnGrad);
    pl.records_offset = (parts + 255) & ~(size_t)255;
    pl.bytes = pl.records_offset + (size_t)C * record;
    pl.parts = (Triple *)scratch;
    pl.records = scratch != NULL ? (char *)scratch + pl.records_offset : NULL;
    return pl;
}

/* Enqueue the reduction of every channel into the parts. */
template <int MODE>
cudaError_t chan_reduce(cudaStream_t stream, const ChanPlan &pl, const float *x, const float *dy,
                        const float *y_relu, const float *mean)
{
    if (pl.S == 1) {
        dim3 block(NN_COL_X, NN_COL_Y);
        unsigned int grid = (unsigned int)(ceil_div(pl.C, NN_COL_X) * pl.splits);
        chan_reduce_cols<MODE>
            <<<grid, block, 0, stream>>>(x, dy, y_relu, mean, pl.N, pl.C, pl.splits, pl.parts);
    } else {
        unsigned int grid = (unsigned int)(pl.C * pl.splits);
        chan_reduce_plane<MODE><<<grid, NN_THREADS, 0, stream>>>(x, dy, y_relu, mean, pl.N, pl.C,
                                                                 pl.S, pl.splits, pl.parts);
    }
    return cudaGetLastError();
}

/* Blocks of the finalize kernels: one thread per channel. */
unsigned int chan_blocks(const ChanPlan &pl)
{
    return (unsigned int)ceil_div(pl.C, NN_THREADS);
}

} /* namespace */

extern "C" size_t cuda_k_chan_scratch_bytes(int64_t N, int64_t C, int64_t S, int sm_count)
{
    return chan_plan(NULL, N, C, S, sm_count).bytes;
}

extern "C" cudaError_t cuda_k_bn_forward(cudaStream_t stream, const float *x, float *y, int64_t N,
                                         int64_t C, int64_t S, const float *gamma,
                                         const float *beta, float *running_mean, float *running_var,
                                         float momentum, float eps, int training, float *save_mean,
                                         float *save_var, int relu, void *scratch, int sm_count)
{
    int64_t total = N * C * S;
    if (total == 0) {
        return cudaSuccess;
    }
    ChanPlan pl = chan_plan(scratch, N, C, S, sm_count);
    CudaNnBnApply *apply = (CudaNnBnApply *)pl.records;
    cudaError_t rc = cudaSuccess;
    if (training) {
        rc = chan_reduce<RED_STATS>(stream, pl, x, NULL, NULL, NULL);
        if (rc != cudaSuccess) {
            return rc;
        }
        bn_finalize_train<<<chan_blocks(pl), NN_THREADS, 0, stream>>>(
            pl.parts, pl.splits, C, gamma, beta, running_mean, running_var, momentum, eps,
            save_mean, save_var, apply);
    } else {
        bn_finalize_eval<<<chan_blocks(pl), NN_THREADS, 0, stream>>>(C, gamma, beta, running_mean,
                                                                     running_var, eps, apply);
    }
    rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        return rc;
    }
    unsigned int blocks = cuda_nn_grid_blocks(total, NN_THREADS);
    if (relu) {
        bn_apply<1><<<blocks, NN_THREADS, 0, stream>>>(x, y, total, C, S, apply);
    } else {
        bn_apply<0><<<blocks, NN_THREADS, 0, stream>>>(x, y, total, C, S, apply);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_bn_backward(cudaStream_t stream, const float *x, const float *dy,
                                          const float *y_relu, int64_t N, int64_t C, int64_t S,
                                          const float *gamma, const float *save_mean,
                                          const float *save_var, float eps, float *dx,
                                          float *dgamma, float *dbeta, void *scratch, int sm_count)
{
    int64_t total = N * C * S;
    if (total == 0) {
        return cudaSuccess;
    }
    ChanPlan pl = chan_plan(scratch, N, C, S, sm_count);
    CudaNnBnGrad *grad = (CudaNnBnGrad *)pl.records;
    cudaError_t rc = chan_reduce<RED_GRAD>(stream, pl, x, dy, y_relu, save_mean);
    if (rc != cudaSuccess) {
        return rc;
    }
    double m = (double)(N * S);
    bn_finalize_grad<<<chan_blocks(pl), NN_THREADS, 0, stream>>>(
        pl.parts, pl.splits, C, m, gamma, save_mean, save_var, eps, dgamma, dbeta, grad);
    rc = cudaGetLastError();
    if (rc != cudaSuccess || dx == NULL) {
        return rc;
    }
    unsigned int blocks = cuda_nn_grid_blocks(total, NN_THREADS);
    bn_dx<<<blocks, NN_THREADS, 0, stream>>>(x, dy, y_relu, dx, total, C, S, m, grad);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_bias_grad(cudaStream_t stream, const float *dy, int64_t N, int64_t C,
                                        int64_t S, float *db, void *scratch, int sm_count)
{
    if (N * C * S == 0) {
        return cudaSuccess; /* nothing to add */
    }
    ChanPlan pl = chan_plan(scratch, N, C, S, sm_count);
    cudaError_t rc = chan_reduce<RED_SUM>(stream, pl, NULL, dy, NULL, NULL);
    if (rc != cudaSuccess) {
        return rc;
    }
    bias_finalize<<<chan_blocks(pl), NN_THREADS, 0, stream>>>(pl.parts, pl.splits, C, db);
    return cudaGetLastError();
}

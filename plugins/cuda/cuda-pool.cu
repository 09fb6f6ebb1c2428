/* plugins/cuda/cuda-pool.cu - max, average and global average pooling,
 * forward and backward: the pooling kernels of the cuda backend.
 *
 * Forward kernels run one thread per output over its window (bounds and
 * divisor from cuda-nn-elem.h, the same functions the CPU test checks
 * against ref). Backward kernels gather instead of scattering: one thread
 * per input sums what the outputs whose window holds it send, in ascending
 * output order, which is the order ref adds them in. So no atomics, every dx
 * element is written (no zero-fill), and the results are deterministic and
 * equal to ref's: max pooling adds in f32 exactly as ref, average pooling
 * in double as ref. The max pool workspace is ref's: i32 [N, C, OH, OW],
 * the h * W + w index of the chosen input in its plane; the backward only
 * compares entries with positions, so a corrupt entry loses its gradient
 * but never makes a kernel read or write out of bounds.
 */
#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda-nn-kernels.h"

#define POOL_THREADS 256

/* Everything but the launchers has internal linkage: the plugin's other
 * .cu files may use the same names. */
namespace
{

/* Output o of [N, C, OH, OW] (or input of [N, C, H, W]) as plane, row,
 * column. */
__device__ __forceinline__ void split_index(int64_t o, int64_t rows, int64_t cols, int64_t *plane,
                                            int64_t *r, int64_t *c)
{
    *c = o % cols;
    int64_t t = o / cols;
    *r = t % rows;
    *plane = t / rows;
}

__global__ void __launch_bounds__(POOL_THREADS)
    maxpool_forward(const float *x, float *y, int32_t *ws, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.OH * g.OW;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
        int64_t nc, oh, ow, h0, h1, w0, w1;
        split_index(o, g.OH, g.OW, &nc, &oh, &ow);
        cuda_nn_pool_window(&g, oh, ow, &h0, &h1, &w0, &w1);
        const float *plane = x + nc * g.H * g.W;
        float best = __int_as_float(0xff800000); /* -inf, as ref (never kept: no window is empty) */
        int64_t best_i = -1;
        for (int64_t ih = h0; ih < h1; ih++) {
            for (int64_t iw = w0; iw < w1; iw++) {
                float v = plane[ih * g.W + iw];
                if (cuda_nn_max_takes(v, best, best_i >= 0)) {
                    best = v;
                    best_i = ih * g.W + iw;
                }
            }
        }
        y[o] = best;
        ws[o] = (int32_t)best_i;
    }
}

__global__ void __launch_bounds__(POOL_THREADS)
    maxpool_backward(const float *dy, const int32_t *ws, float *dx, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.H * g.W;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        int64_t nc, ih, iw, oh0, oh1, ow0, ow1;
        split_index(i, g.H, g.W, &nc, &ih, &iw);
        cuda_nn_pool_outputs_of(ih, g.kh, g.sh, g.ph, g.OH, &oh0, &oh1);
        cuda_nn_pool_outputs_of(iw, g.kw, g.sw, g.pw, g.OW, &ow0, &ow1);
        int32_t me = (int32_t)(ih * g.W + iw);
        const int64_t base = nc * g.OH * g.OW;
        float acc = 0.0f;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t o = base + oh * g.OW + ow;
                if (ws[o] == me) {
                    acc += dy[o];
                }
            }
        }
        dx[i] = acc;
    }
}

__global__ void __launch_bounds__(POOL_THREADS)
    avgpool_forward(const float *x, float *y, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.OH * g.OW;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
        int64_t nc, oh, ow, h0, h1, w0, w1;
        split_index(o, g.OH, g.OW, &nc, &oh, &ow);
        int64_t div = cuda_nn_pool_window(&g, oh, ow, &h0, &h1, &w0, &w1);
        const float *plane = x + nc * g.H * g.W;
        double acc = 0.0;
        for (int64_t ih = h0; ih < h1; ih++) {
            for (int64_t iw = w0; iw < w1; iw++) {
                acc += plane[ih * g.W + iw];
            }
        }
        y[o] = (float)(acc / (double)div);
    }
}

__global__ void __launch_bounds__(POOL_THREADS)
    avgpool_backward(const float *dy, float *dx, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.H * g.W;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        int64_t nc, ih, iw, oh0, oh1, ow0, ow1;
        split_index(i, g.H, g.W, &nc, &ih, &iw);
        cuda_nn_pool_outputs_of(ih, g.kh, g.sh, g.ph, g.OH, &oh0, &oh1);
        cuda_nn_pool_outputs_of(iw, g.kw, g.sw, g.pw, g.OW, &ow0, &ow1);
        const int64_t base = nc * g.OH * g.OW;
        double acc = 0.0;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t h0, h1, w0, w1;
                int64_t div = cuda_nn_pool_window(&g, oh, ow, &h0, &h1, &w0, &w1);
                acc += dy[base + oh * g.OW + ow] / (double)div;
            }
        }
        dx[i] = (float)acc;
    }
}

/* One warp per row of S values: their mean. */
__global__ void __launch_bounds__(POOL_THREADS)
    global_avgpool_forward(const float *x, float *y, int64_t NC, int64_t S)
{
    int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    int lane = threadIdx.x & 31;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < NC; r += warps) {
        const float *row = x + r * S;
        double acc = 0.0;
        for (int64_t s = lane; s < S; s += 32) {
            acc += row[s];
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            acc += __shfl_down_sync(0xffffffffu, acc, offset);
        }
        if (lane == 0) {
            y[r] = cuda_nn_gap_y(acc, S);
        }
    }
}

__global__ void __launch_bounds__(POOL_THREADS)
    global_avgpool_backward(const float *dy, float *dx, int64_t total, int64_t S)
{
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    /* The walk with C = 1 keeps the row (n) of i without a division. */
    CudaNnWalk w = cuda_nn_walk_start(i, step, 1, S);
    for (; i < total; i += step, cuda_nn_walk_next(&w)) {
        dx[i] = cuda_nn_gap_dx(dy[w.n], S);
    }
}

} /* namespace */

extern "C" cudaError_t cuda_k_maxpool_forward(cudaStream_t stream, const float *x, float *y,
                                              int32_t *ws, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.OH * g.OW;
    if (total == 0) {
        return cudaSuccess;
    }
    maxpool_forward<<<cuda_nn_grid_blocks(total, POOL_THREADS), POOL_THREADS, 0, stream>>>(x, y, ws,
                                                                                           g);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_maxpool_backward(cudaStream_t stream, const float *dy,
                                               const int32_t *ws, float *dx, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.H * g.W;
    if (total == 0) {
        return cudaSuccess;
    }
    maxpool_backward<<<cuda_nn_grid_blocks(total, POOL_THREADS), POOL_THREADS, 0, stream>>>(dy, ws,
                                                                                            dx, g);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_avgpool_forward(cudaStream_t stream, const float *x, float *y,
                                              CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.OH * g.OW;
    if (total == 0) {
        return cudaSuccess;
    }
    avgpool_forward<<<cuda_nn_grid_blocks(total, POOL_THREADS), POOL_THREADS, 0, stream>>>(x, y, g);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_avgpool_backward(cudaStream_t stream, const float *dy, float *dx,
                                               CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.H * g.W;
    if (total == 0) {
        return cudaSuccess;
    }
    avgpool_backward<<<cuda_nn_grid_blocks(total, POOL_THREADS), POOL_THREADS, 0, stream>>>(dy, dx,
                                                                                            g);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_global_avgpool_forward(cudaStream_t stream, const float *x, float *y,
                                                     int64_t NC, int64_t S)
{
    if (NC == 0) {
        return cudaSuccess;
    }
    /* An empty plane (S == 0) gives 0 / 0 = NaN, as in ref. */
    global_avgpool_forward<<<cuda_nn_grid_blocks(NC * 32, POOL_THREADS), POOL_THREADS, 0, stream>>>(
        x, y, NC, S);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_global_avgpool_backward(cudaStream_t stream, const float *dy,
                                                      float *dx, int64_t NC, int64_t S)
{
    int64_t total = NC * S;
    if (total == 0) {
        return cudaSuccess;
    }
    global_avgpool_backward<<<cuda_nn_grid_blocks(total, POOL_THREADS), POOL_THREADS, 0, stream>>>(
        dy, dx, total, S);
    return cudaGetLastError();
}

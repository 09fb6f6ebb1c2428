/* SPDX-License-Identifier: MIT */
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

/* Output o of [N, C, OH, OW] as plane, row, column. */
__device__ __forceinline__ void split_output(int64_t o, const CudaPoolGeom &g, int64_t *plane,
                                             int64_t *oh, int64_t *ow)
{
    *ow = o % g.OW;
    int64_t t = o / g.OW;
    *oh = t % g.OH;
    *plane = t / g.OH;
}

/* A grid-stride kernel over `total` items: nothing to launch when empty. */
template <typename... Params, typename... Args>
cudaError_t launch_over(cudaStream_t stream, int64_t total, void (*kernel)(Params...), Args... args)
{
    if (total == 0) {
        return cudaSuccess;
    }
    kernel<<<cuda_nn_grid_blocks(total, POOL_THREADS), POOL_THREADS, 0, stream>>>(args...);
    return cudaGetLastError();
}

__global__ void __launch_bounds__(POOL_THREADS)
    maxpool_forward(const float *x, float *y, int32_t *ws, CudaPoolGeom g)
{
    int64_t total = g.N * g.C * g.OH * g.OW;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
        int64_t nc, oh, ow, h0, h1, w0, w1;
        split_output(o, g, &nc, &oh, &ow);
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
        CudaNnPoolSources src = cuda_nn_pool_sources(&g, i);
        int32_t me = (int32_t)(src.ih * g.W + src.iw);
        float acc = 0.0f;
        for (int64_t oh = src.oh0; oh < src.oh1; oh++) {
            for (int64_t ow = src.ow0; ow < src.ow1; ow++) {
                int64_t o = src.out_base + oh * g.OW + ow;
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
        split_output(o, g, &nc, &oh, &ow);
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
        CudaNnPoolSources src = cuda_nn_pool_sources(&g, i);
        double acc = 0.0;
        for (int64_t oh = src.oh0; oh < src.oh1; oh++) {
            for (int64_t ow = src.ow0; ow < src.ow1; ow++) {
                int64_t h0, h1, w0, w1;
                int64_t div = cuda_nn_pool_window(&g, oh, ow, &h0, &h1, &w0, &w1);
                acc += dy[src.out_base + oh * g.OW + ow] / (double)div;
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
    return launch_over(stream, g.N * g.C * g.OH * g.OW, maxpool_forward, x, y, ws, g);
}

extern "C" cudaError_t cuda_k_maxpool_backward(cudaStream_t stream, const float *dy,
                                               const int32_t *ws, float *dx, CudaPoolGeom g)
{
    return launch_over(stream, g.N * g.C * g.H * g.W, maxpool_backward, dy, ws, dx, g);
}

extern "C" cudaError_t cuda_k_avgpool_forward(cudaStream_t stream, const float *x, float *y,
                                              CudaPoolGeom g)
{
    return launch_over(stream, g.N * g.C * g.OH * g.OW, avgpool_forward, x, y, g);
}

extern "C" cudaError_t cuda_k_avgpool_backward(cudaStream_t stream, const float *dy, float *dx,
                                               CudaPoolGeom g)
{
    return launch_over(stream, g.N * g.C * g.H * g.W, avgpool_backward, dy, dx, g);
}

/* One warp per row; an empty plane (S == 0) gives 0 / 0 = NaN, as in ref. */
extern "C" cudaError_t cuda_k_global_avgpool_forward(cudaStream_t stream, const float *x, float *y,
                                                     int64_t NC, int64_t S)
{
    return launch_over(stream, NC * 32, global_avgpool_forward, x, y, NC, S);
}

extern "C" cudaError_t cuda_k_global_avgpool_backward(cudaStream_t stream, const float *dy,
                                                      float *dx, int64_t NC, int64_t S)
{
    return launch_over(stream, NC * S, global_avgpool_backward, dy, dx, NC * S, S);
}

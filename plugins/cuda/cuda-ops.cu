/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-ops.cu - the elementwise, cast, dropout, optimizer
 * and sum-of-squares kernels of the cuda backend.
 *
 * Each elementwise kernel is a grid-stride loop calling one function of
 * cuda-elem.h per element, so the arithmetic is the one the CPU test
 * checks against ref; the grid is capped (kMaxBlocks) and every thread
 * walks the rest, which keeps the launch valid for any n and the indices
 * 64-bit. The sum of squares reduces in double in two passes with a fixed
 * shape for a given n (no atomics), so the same tensor always gives the
 * same bits. Every launcher enqueues on the stream it is given and returns
 * cudaGetLastError(); none waits for the device.
 */
#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda-kernels.h"

static const int kThreads = 256;
static const int64_t kMaxBlocks = 65536;

static unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + kThreads - 1) / kThreads;
    return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

static __device__ inline int64_t first_index()
{
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ inline int64_t index_step()
{
    return (int64_t)gridDim.x * blockDim.x;
}

/* One grid-stride launch over n elements; nothing to launch for n <= 0. */
template <typename... P, typename... A>
static cudaError_t launch(cudaStream_t s, int64_t n, void (*kernel)(P...), A... args)
{
    if (n <= 0) {
        return cudaSuccess;
    }
    kernel<<<grid_for(n), kThreads, 0, s>>>(args...);
    return cudaGetLastError();
}

/* ---- elementwise ---- */

static __global__ void relu_kernel(const float *x, float *y, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        y[i] = cuda_elem_relu(x[i]);
    }
}

static __global__ void relu_backward_kernel(const float *y, const float *dy, float *dx, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        dx[i] = cuda_elem_relu_backward(y[i], dy[i]);
    }
}

static __global__ void add_kernel(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        y[i] = cuda_elem_add(a[i], b[i]);
    }
}

static __global__ void add_relu_kernel(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        y[i] = cuda_elem_add_relu(a[i], b[i]);
    }
}

static __global__ void fill_kernel(float *x, float value, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        x[i] = value;
    }
}

static __global__ void scale_kernel(float *x, float alpha, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        x[i] *= alpha;
    }
}

/* (float)((double)y + (double)alpha * x): the product of two floats is
 * exact in double, so a contracted multiply-add rounds as ref does. */
static __global__ void axpy_kernel(float alpha, const float *x, float *y, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        y[i] = (float)cuda_elem_dadd((double)y[i], cuda_elem_dmul((double)alpha, (double)x[i]));
    }
}

/* ---- cast ---- */

/* The pair is the same for every thread: the switches inside
 * cuda_elem_cast never diverge. */
static __global__ void cast_kernel(const void *src, int st, void *dst, int dt, int64_t n,
                                   int normalize)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        cuda_elem_cast(src, st, dst, dt, i, normalize);
    }
}

static __global__ void f32_to_bf16_kernel(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        dst[i] = cuda_elem_f32_to_bf16(src[i]);
    }
}

static __global__ void bf16_to_f32_kernel(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        dst[i] = cuda_elem_bf16_to_f32(src[i]);
    }
}

/* ---- dropout ---- */

static __global__ void dropout_forward_kernel(const float *x, uint8_t *mask, float *y, int64_t n,
                                              float p, float scale, uint64_t seed)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        uint8_t keep = (uint8_t)cuda_elem_dropout_keep(seed, (uint64_t)i, p);
        mask[i] = keep;
        y[i] = cuda_elem_dropout_apply(keep, x[i], scale);
    }
}

static __global__ void dropout_backward_kernel(const uint8_t *mask, const float *dy, float *dx,
                                               int64_t n, float scale)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        dx[i] = cuda_elem_dropout_apply(mask[i], dy[i], scale);
    }
}

/* ---- optimizer updates: each element read once, written once ---- */

static __global__ void sgd_kernel(CudaElemSgd hp, float *param, float *grad, float *buf, int64_t n,
                                  int zero_grad)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        float p = param[i];
        float b = hp.use_buf ? buf[i] : 0.0f;
        cuda_elem_sgd(&hp, &p, grad[i], &b);
        param[i] = p;
        if (hp.use_buf) {
            buf[i] = b;
        }
        if (zero_grad) {
            grad[i] = 0.0f;
        }
    }
}

static __global__ void adamw_kernel(CudaElemAdamW hp, float *param, float *grad, float *m, float *v,
                                    int64_t n, int zero_grad)
{
    for (int64_t i = first_index(); i < n; i += index_step()) {
        float p = param[i], mm = m[i], vv = v[i];
        cuda_elem_adamw(&hp, &p, grad[i], &mm, &vv);
        param[i] = p;
        m[i] = mm;
        v[i] = vv;
        if (zero_grad) {
            grad[i] = 0.0f;
        }
    }
}

/* ---- sum of squares ---- */

static const int kSumThreads = 256;     /* a power of two: the tree below halves it */
static const int64_t kSumPerThread = 8; /* elements per thread before another block pays */
static const int kSumMaxBlocks = 1024;

/* The block's threads' values summed in a fixed tree order; the result
 * in thread 0. */
static __device__ double block_sum(double v)
{
    __shared__ double part[kSumThreads];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int width = kSumThreads / 2; width > 0; width /= 2) {
        if ((int)threadIdx.x < width) {
            part[threadIdx.x] = cuda_elem_dadd(part[threadIdx.x], part[threadIdx.x + width]);
        }
        __syncthreads();
    }
    return part[0];
}

static __global__ void sum_squares_partial_kernel(const float *x, int64_t n, double *partials)
{
    double acc = 0.0;
    for (int64_t i = first_index(); i < n; i += index_step()) {
        double v = (double)x[i];
        acc = cuda_elem_dadd(acc, cuda_elem_dmul(v, v));
    }
    double total = block_sum(acc);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = total;
    }
}

static __global__ void sum_squares_final_kernel(const double *partials, int nparts, double *result)
{
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) {
        acc = cuda_elem_dadd(acc, partials[i]);
    }
    double total = block_sum(acc);
    if (threadIdx.x == 0) {
        *result = total;
    }
}

extern "C" {

cudaError_t cuda_k_relu(cudaStream_t s, const float *x, float *y, int64_t n)
{
    return launch(s, n, relu_kernel, x, y, n);
}

cudaError_t cuda_k_relu_backward(cudaStream_t s, const float *y, const float *dy, float *dx,
                                 int64_t n)
{
    return launch(s, n, relu_backward_kernel, y, dy, dx, n);
}

cudaError_t cuda_k_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n)
{
    return launch(s, n, add_kernel, a, b, y, n);
}

cudaError_t cuda_k_add_relu(cudaStream_t s, const float *a, const float *b, float *y, int64_t n)
{
    return launch(s, n, add_relu_kernel, a, b, y, n);
}

cudaError_t cuda_k_fill(cudaStream_t s, float *x, float value, int64_t n)
{
    return launch(s, n, fill_kernel, x, value, n);
}

cudaError_t cuda_k_scale(cudaStream_t s, float *x, float alpha, int64_t n)
{
    return launch(s, n, scale_kernel, x, alpha, n);
}

cudaError_t cuda_k_axpy(cudaStream_t s, float alpha, const float *x, float *y, int64_t n)
{
    return launch(s, n, axpy_kernel, alpha, x, y, n);
}

cudaError_t cuda_k_cast(cudaStream_t s, const void *src, int src_dtype, void *dst, int dst_dtype,
                        int64_t n, int normalize_u8)
{
    return launch(s, n, cast_kernel, src, src_dtype, dst, dst_dtype, n, normalize_u8);
}

cudaError_t cuda_k_f32_to_bf16(cudaStream_t s, const float *src, void *dst, int64_t n)
{
    return launch(s, n, f32_to_bf16_kernel, src, (uint16_t *)dst, n);
}

cudaError_t cuda_k_bf16_to_f32(cudaStream_t s, const void *src, float *dst, int64_t n)
{
    return launch(s, n, bf16_to_f32_kernel, (const uint16_t *)src, dst, n);
}

cudaError_t cuda_k_dropout_forward(cudaStream_t s, const float *x, uint8_t *mask, float *y,
                                   int64_t n, float p, uint64_t seed)
{
    return launch(s, n, dropout_forward_kernel, x, mask, y, n, p, cuda_elem_dropout_scale(p), seed);
}

cudaError_t cuda_k_dropout_backward(cudaStream_t s, const uint8_t *mask, const float *dy, float *dx,
                                    int64_t n, float p)
{
    return launch(s, n, dropout_backward_kernel, mask, dy, dx, n, cuda_elem_dropout_scale(p));
}

cudaError_t cuda_k_sgd(cudaStream_t s, const CudaElemSgd *hp, float *param, float *grad, float *buf,
                       int64_t n, int zero_grad)
{
    return launch(s, n, sgd_kernel, *hp, param, grad, buf, n, zero_grad);
}

cudaError_t cuda_k_adamw(cudaStream_t s, const CudaElemAdamW *hp, float *param, float *grad,
                         float *exp_avg, float *exp_avg_sq, int64_t n, int zero_grad)
{
    return launch(s, n, adamw_kernel, *hp, param, grad, exp_avg, exp_avg_sq, n, zero_grad);
}

int cuda_k_sum_squares_blocks(int64_t n)
{
    int64_t per_block = (int64_t)kSumThreads * kSumPerThread;
    int64_t blocks = (n + per_block - 1) / per_block;
    return blocks < 1 ? 1 : blocks > kSumMaxBlocks ? kSumMaxBlocks : (int)blocks;
}

/* Both passes run even for n == 0, so *result is always written. */
cudaError_t cuda_k_sum_squares(cudaStream_t s, const float *x, int64_t n, double *partials,
                               double *result)
{
    int blocks = cuda_k_sum_squares_blocks(n);
    sum_squares_partial_kernel<<<blocks, kSumThreads, 0, s>>>(x, n, partials);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        return rc;
    }
    sum_squares_final_kernel<<<1, kSumThreads, 0, s>>>(partials, blocks, result);
    return cudaGetLastError();
}

} /* extern "C" */

/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-nn-kernels.h - the extern "C" launchers of the batch
 * norm (cuda-norm.cu), pooling and bias-gradient (cuda-pool.cu) kernels,
 * called by cuda-nn.c.
 *
 * Launchers take raw device pointers, sizes as int64_t and the stream to
 * enqueue on (the device's compute stream), and return the cudaGetLastError
 * of their launches (the first that failed): they never synchronise. Tensors
 * are plain row-major f32 ([N, C, S] for the per-channel ops, S the product
 * of the dims after C; NCHW for pooling). Optional pointers may be NULL where
 * the op table allows a NULL tensor.
 *
 * The per-channel reductions (batch norm, bias_grad) need device scratch
 * memory of cuda_k_chan_scratch_bytes() bytes, 256-byte aligned, used only
 * by the work they enqueue (stream order makes reuse by the next op safe).
 * `sm_count` is the GPU's multiprocessor count: it picks how many blocks
 * share a channel, so results are deterministic for a shape and a GPU.
 */
#ifndef TDM_CUDA_NN_KERNELS_H
#define TDM_CUDA_NN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda-nn-elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch bytes for a per-channel op over [N, C, S] (cuda-norm.cu). */
size_t cuda_k_chan_scratch_bytes(int64_t N, int64_t C, int64_t S, int sm_count);

/* Batch norm forward. training: batch statistics (save_mean/save_var get
 * the mean and the biased variance, running_mean/running_var the update
 * with the unbiased variance; each may be NULL); else running_mean and
 * running_var normalise. gamma/beta NULL mean 1 and 0. relu != 0 applies
 * max(., 0) to y. y may be x. */
cudaError_t cuda_k_bn_forward(cudaStream_t stream, const float *x, float *y, int64_t N, int64_t C,
                              int64_t S, const float *gamma, const float *beta, float *running_mean,
                              float *running_var, float momentum, float eps, int training,
                              float *save_mean, float *save_var, int relu, void *scratch,
                              int sm_count);

/* Batch norm backward (training mode): dx (may be NULL) = the gradient
 * w.r.t. x; dgamma/dbeta (may be NULL) += the gradients w.r.t. gamma and
 * beta. y_relu non-NULL: the BN+ReLU backward, dy masked by y_relu > 0. */
cudaError_t cuda_k_bn_backward(cudaStream_t stream, const float *x, const float *dy,
                               const float *y_relu, int64_t N, int64_t C, int64_t S,
                               const float *gamma, const float *save_mean, const float *save_var,
                               float eps, float *dx, float *dgamma, float *dbeta, void *scratch,
                               int sm_count);

/* db[c] += sum of dy[n, c, s] over n and s (cuda-norm.cu: the batch norm
 * reduction kernels serve it). */
cudaError_t cuda_k_bias_grad(cudaStream_t stream, const float *dy, int64_t N, int64_t C, int64_t S,
                             float *db, void *scratch, int sm_count);

/* Max pooling (cuda-pool.cu): y [N, C, OH, OW] and ws (i32, same shape)
 * the h * W + w index of the chosen input in its plane, as ref. */
cudaError_t cuda_k_maxpool_forward(cudaStream_t stream, const float *x, float *y, int32_t *ws,
                                   CudaPoolGeom g);
/* dx [N, C, H, W] = the sum of the dy that chose each input (every dx
 * element written: no zero-fill needed). */
cudaError_t cuda_k_maxpool_backward(cudaStream_t stream, const float *dy, const int32_t *ws,
                                    float *dx, CudaPoolGeom g);
cudaError_t cuda_k_avgpool_forward(cudaStream_t stream, const float *x, float *y, CudaPoolGeom g);
cudaError_t cuda_k_avgpool_backward(cudaStream_t stream, const float *dy, float *dx,
                                    CudaPoolGeom g);
/* y[r] = mean of x[r, 0..S) over NC rows; dx[r, s] = dy[r] / S. */
cudaError_t cuda_k_global_avgpool_forward(cudaStream_t stream, const float *x, float *y, int64_t NC,
                                          int64_t S);
cudaError_t cuda_k_global_avgpool_backward(cudaStream_t stream, const float *dy, float *dx,
                                           int64_t NC, int64_t S);

#ifdef __cplusplus
}
#endif

#endif /* TDM_CUDA_NN_KERNELS_H */

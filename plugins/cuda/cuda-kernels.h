/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-kernels.h - the launchers of cuda-ops.cu and
 * cuda-loss.cu, callable from C.
 *
 * The .cu files see no GLib and no tandem header: each launcher takes the
 * stream to launch on (always a device's compute stream, never the legacy
 * default stream), raw device pointers and int64_t sizes, enqueues its
 * kernels without waiting, and returns the cudaGetLastError() of the
 * launches (cudaSuccess when there was nothing to do). The C files
 * (cuda-vector.c, and cuda-blas.c / cuda-conv.c for the bf16 conversions)
 * check the tensors and turn a failed status into a GError. Element types
 * are the CUDA_ELEM_* codes of cuda-elem.h, numbered as TdmDType.
 */
#ifndef TDM_CUDA_KERNELS_H
#define TDM_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda-elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise (cuda-ops.cu); n elements, y may be x, a or b ---- */
cudaError_t cuda_k_relu(cudaStream_t s, const float *x, float *y, int64_t n);
cudaError_t cuda_k_relu_backward(cudaStream_t s, const float *y, const float *dy, float *dx,
                                 int64_t n);
cudaError_t cuda_k_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n);
cudaError_t cuda_k_add_relu(cudaStream_t s, const float *a, const float *b, float *y, int64_t n);
cudaError_t cuda_k_fill(cudaStream_t s, float *x, float value, int64_t n);
cudaError_t cuda_k_scale(cudaStream_t s, float *x, float alpha, int64_t n);
/* y += alpha x, in double as ref */
cudaError_t cuda_k_axpy(cudaStream_t s, float alpha, const float *x, float *y, int64_t n);

/* dst = src converted from src_dtype to dst_dtype (CUDA_ELEM_*), as ref's
 * cast; u8 -> floats divided by 255 when normalize_u8. */
cudaError_t cuda_k_cast(cudaStream_t s, const void *src, int src_dtype, void *dst, int dst_dtype,
                        int64_t n, int normalize_u8);
/* The bf16 conversions of GEMM and convolution under TDM_PRECISION_BF16
 * (round to nearest even, NaN kept): dst holds n uint16_t. */
cudaError_t cuda_k_f32_to_bf16(cudaStream_t s, const float *src, void *dst, int64_t n);
cudaError_t cuda_k_bf16_to_f32(cudaStream_t s, const void *src, float *dst, int64_t n);

/* ---- dropout (cuda-ops.cu): the mask of backend.h's rule ---- */
cudaError_t cuda_k_dropout_forward(cudaStream_t s, const float *x, uint8_t *mask, float *y,
                                   int64_t n, float p, uint64_t seed);
cudaError_t cuda_k_dropout_backward(cudaStream_t s, const uint8_t *mask, const float *dy, float *dx,
                                    int64_t n, float p);

/* ---- optimizer updates (cuda-ops.cu), grad zeroed after use when
 * zero_grad; buf may be NULL when hp->use_buf is 0 ---- */
cudaError_t cuda_k_sgd(cudaStream_t s, const CudaElemSgd *hp, float *param, float *grad, float *buf,
                       int64_t n, int zero_grad);
cudaError_t cuda_k_adamw(cudaStream_t s, const CudaElemAdamW *hp, float *param, float *grad,
                         float *exp_avg, float *exp_avg_sq, int64_t n, int zero_grad);

/* ---- sum of squares (cuda-ops.cu): two passes in double, each block's
 * partial into `partials` (cuda_k_sum_squares_blocks(n) doubles), then one
 * block sums them in a fixed order into *result (device memory), so the
 * result depends only on n and x. ---- */
int cuda_k_sum_squares_blocks(int64_t n);
cudaError_t cuda_k_sum_squares(cudaStream_t s, const float *x, int64_t n, double *partials,
                               double *result);

/* ---- softmax cross-entropy (cuda-loss.cu) ---- */

/* One per device, in device memory, every byte 0xff at creation (then
 * every row field reads "none"). The loss kernel records the first bad
 * label's row of the call in flight in batch_bad_row (atomicMin); the
 * finishing kernel resets it after reading it, so each call starts clean. */
typedef struct {
    unsigned long long batch_bad_row; /* ~0: none */
    /* softmax_xent: the call's result */
    long long bad_row;   /* first row whose label is outside [0, K); -1: none */
    long long bad_label; /* its label */
    long long hits;      /* rows whose first maximum is the label */
    double total;        /* sum of the rows' losses */
    /* softmax_xent_stats: the first bad label of any call, kept until the
     * C side has reported it (it clears the three fields to -1) */
    long long first_bad_row;
    long long first_bad_label;
    long long first_bad_classes; /* K of that call */
} CudaXentState;

/* Bytes of per-row scratch the loss needs for n rows (8-byte aligned). */
int64_t cuda_k_softmax_xent_scratch(int64_t n);

/* logits [n, k] f32; labels [n] i64 when labels_i64 else i32; dlogits
 * [n, k] or NULL. stats NULL: the call's loss total, hits and first bad
 * label go to state (softmax_xent, which then copies state to the host).
 * stats non-NULL (f32 [2] on the device): a batch without a bad label adds
 * its loss sum (ref's mean times n, in f32) and hit count to stats; a
 * batch with one leaves stats untouched and records the label in state's
 * first_bad_* unless an earlier one is still there (softmax_xent_stats).
 * scratch: cuda_k_softmax_xent_scratch(n) bytes of device memory. */
cudaError_t cuda_k_softmax_xent(cudaStream_t s, const float *logits, const void *labels,
                                int labels_i64, int64_t n, int64_t k, float label_smoothing,
                                float *dlogits, void *scratch, CudaXentState *state, float *stats);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
/* ---- not launchers: the C side of the loss state (cuda-vector.c), for
 * cuda-backend.c. Declared here, with GLib's types spelt as their struct
 * tags, so that cuda.h's contract stays as it is. ---- */
struct _TdmDevice;
struct _GError;
/* Reports (TDM_ERROR_INVALID_ARG, FALSE) a bad label that
 * softmax_xent_stats found on the device and has not reported yet; waits
 * only for the last small copy of the loss state, so call it where the
 * device is synchronised anyway (synchronize). TRUE when there is none. */
int cuda_vector_check_deferred(struct _TdmDevice *dev, struct _GError **error);
/* Releases the device's loss state and scratch (device_close; the core
 * never closes a device before the process ends). */
void cuda_vector_close(struct _TdmDevice *dev);
#endif

#endif /* TDM_CUDA_KERNELS_H */

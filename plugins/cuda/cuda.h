/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda.h - what the files of the cuda backend share.
 *
 * The cuda backend runs every op of the op table on an NVIDIA GPU: GEMM
 * through cuBLASLt, convolutions through cuDNN, everything else in the
 * plugin's own kernels (.cu files). Tensors are plain row-major f32 (NCHW
 * for images) in device memory; the backend has no private layout.
 *
 * Work runs asynchronously on the device's COMPUTE stream; host-to-device
 * copies of the loader may run on its COPY stream. Both are created with
 * cudaStreamNonBlocking: nothing ever runs on the legacy default stream,
 * which would serialise everything. The cuBLAS, cuBLASLt and cuDNN handles
 * are bound to the compute stream.
 *
 * Logical devices: TDM_CUDA_DEVICES=N exposes N logical devices spread
 * round-robin over the physical GPUs (all on GPU 0 of a one-GPU machine), so
 * that multi-device code (`dp`) can be tested on one GPU. Each logical
 * device has its own streams, handles and allocator.
 *
 * Threads: `dp` drives each device from its own thread. Every op starts
 * with cuda_op_begin(), which makes the op's device current on the calling
 * thread (cudaSetDevice only when it changes) and refuses a device that a
 * sticky error has broken; cuda_op_end() checks the launch and, under
 * TDM_CUDA_SYNC=1, synchronises to locate an asynchronous fault.
 *
 * Files: cuda-backend.c (plugin, probe, devices, class table, errors),
 * cuda-transfer.c (memory, copies, read/write, streams and events, device
 * information), cuda-nvml.c (utilisation through NVML, loaded at run
 * time), cuda-alloc.c (the caching allocator), cuda-blas.c (gemm through
 * cuBLASLt), cuda-blas-lib.c (cuBLAS and cuBLASLt, loaded when the first
 * device opens: the plugin calls them only through its table), cuda-conv.c and cuda-conv-plan.c (cuDNN convolutions),
 * cuda-cache.c (what an op cache holds), cuda-vector.c and cuda-nn.c (the
 * C side of the hand-written kernels: argument checks and launches),
 * cuda-kernels.h and cuda-nn-kernels.h (the extern "C" launchers of the .cu
 * files), cuda-elem.h and cuda-nn-elem.h (arithmetic shared by the kernels
 * and the CPU tests), cuda-ops.cu, cuda-loss.cu, cuda-norm.cu, cuda-pool.cu
 * (the kernels).
 */
#ifndef TDM_CUDA_H
#define TDM_CUDA_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <tandem/tandem.h>

#include "cuda-alloc.h"

/* Per-device state (dev->priv). */
typedef struct {
    int index;   /* logical index: dev->index */
    int ordinal; /* the CUDA device it runs on (after CUDA_VISIBLE_DEVICES) */
    char *name;  /* "cuda:0" */
    cudaStream_t compute; /* every op, read and write */
    cudaStream_t copy;    /* the loader's host-to-device copies */
    cublasHandle_t cublas;
    cublasLtHandle_t lt;
    cudnnHandle_t cudnn;
    /* Scratch for cuBLASLt and cuDNN, grown on demand through the
     * allocator (only while shapes change: a steady step reuses it). */
    void *workspace;
    size_t workspace_bytes;
    CudaAlloc *alloc;       /* device memory (cuda-alloc.h) */
    CudaAlloc *host_alloc;  /* pinned host memory, same rules */
    GMutex lock;            /* handles and workspace, when threads share a device */
    TdmPrecision precision; /* GEMM and convolution (set_precision) */
    gboolean deterministic; /* TDM_CUDA_DETERMINISTIC=1: reproducible algorithms only */
    gboolean sync_each_op;  /* TDM_CUDA_SYNC=1 */
    /* A sticky error (illegal address...) leaves the CUDA context unusable:
     * every later op on the device fails with this message. */
    char *broken;
    struct {
        struct cudaDeviceProp prop;
        gboolean valid;
    } props;
} CudaDevice;

static inline CudaDevice *cuda_dev(TdmDevice *dev)
{
    return (CudaDevice *)dev->priv;
}

/* ---- errors (cuda-backend.c) ----
 * Each turns a failed status into a TDM_ERROR_BACKEND GError naming the op,
 * what was called, the device and the library's own message; FALSE then.
 * `op` is the op table's name ("conv2d_forward"), `what` the call
 * ("cudnnConvolutionForward [64, 16, 28, 28]"). A sticky CUDA error marks
 * the device broken. */
gboolean cuda_check(TdmDevice *dev, cudaError_t rc, const char *op, const char *what,
                    GError **error);
gboolean cuda_check_cublas(TdmDevice *dev, cublasStatus_t rc, const char *op, const char *what,
                           GError **error);
gboolean cuda_check_cudnn(TdmDevice *dev, cudnnStatus_t rc, const char *op, const char *what,
                          GError **error);

/* Every op opens with cuda_op_begin (device current on this thread, not
 * broken) and closes with cuda_op_end(dev, op, ok, error), which checks the
 * last launch and synchronises under TDM_CUDA_SYNC=1; it returns `ok`
 * && no error, so an op ends with `return cuda_op_end(dev, "relu", ok, error);`. */
gboolean cuda_op_begin(TdmDevice *dev, const char *op, GError **error);
gboolean cuda_op_end(TdmDevice *dev, const char *op, gboolean ok, GError **error);

/* The status of a kernel launcher; on failure a GError naming the op,
 * the kernel and the shape of `t` (built only then: success allocates
 * nothing). */
gboolean cuda_launched(TdmDevice *dev, cudaError_t rc, const char *op, const char *kernel,
                       const TdmTensor *t, GError **error);
/* The tensor is plain and dense (the only tensors the kernels index), in
 * `dtype`; `what` names it in the message. */
gboolean cuda_check_plain(const char *op, const char *what, const TdmTensor *t, GError **error);
/* An out slot shaped plain contiguous (tdm_tensor_ensure). */
gboolean cuda_ensure_out(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                         GError **error);

/* Scratch device memory of at least `nbytes` for the current op (the
 * device's workspace, grown when too small). Valid until the next call on
 * this device; callers hold dev's lock. NULL with error on failure. */
void *cuda_workspace(TdmDevice *dev, size_t nbytes, GError **error);
/* Gives the workspace back to the allocator (reused in stream order); the
 * next cuda_workspace allocates anew. Callers hold dev's lock. */
void cuda_workspace_drop(TdmDevice *dev);

static inline float *cuda_f32(const TdmTensor *t)
{
    return (float *)tdm_tensor_data(t);
}

/* ---- precision (cuda-backend.c) ---- */
/* With BF16, GEMM and convolution round their f32 inputs to bf16 in
 * scratch memory and accumulate in f32 into f32 outputs; with TF32 they
 * allow TF32 tensor-core math (TDM_CUDA_TF32=1 sets it at open). */
gboolean cuda_set_precision(TdmDevice *dev, TdmPrecision precision, GError **error);
gboolean cuda_copy_peer(TdmDevice *dst_dev, void *dst, TdmDevice *src_dev, const void *src,
                        size_t n, GError **error);

/* ---- memory, transfers, streams, device information (cuda-transfer.c) ---- */
TdmAllocFn cuda_alloc;
TdmFreeFn cuda_free;
void *cuda_host_alloc(TdmDevice *dev, size_t nbytes, GError **error);
void cuda_host_free(TdmDevice *dev, void *ptr);
gboolean cuda_copy_h2d(TdmDevice *dev, void *dst, const void *src, size_t n, gboolean async,
                       GError **error);
gboolean cuda_copy_d2h(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error);
gboolean cuda_copy_d2d(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error);
TdmReadFn cuda_read;
TdmWriteFn cuda_write;
TdmReorderFn cuda_reorder;
gboolean cuda_synchronize(TdmDevice *dev, GError **error);
extern const TdmStreamOps cuda_stream_ops;
TdmDeviceInfoFn cuda_device_info;

/* ---- dense algebra (cuda-blas.c) and convolution (cuda-conv.c) ---- */
TdmGemmFn cuda_gemm;
TdmConv2dForwardFn cuda_conv2d_forward;
TdmConv2dForwardFn cuda_conv2d_relu_forward;
TdmConv2dBackwardDataFn cuda_conv2d_backward_data;
TdmConv2dBackwardFilterFn cuda_conv2d_backward_filter;
/* Frees what cuda-blas.c and cuda-conv.c keep in an op cache. */
void cuda_cache_free(TdmDevice *dev, TdmOpCache *cache);

/* ---- hand-written kernels: cuda-nn.c (bias_grad, batch norm, pooling),
 * cuda-vector.c (the rest) ---- */
TdmBiasGradFn cuda_bias_grad;
TdmBatchnormForwardFn cuda_batchnorm_forward;
TdmBatchnormBackwardFn cuda_batchnorm_backward;
TdmBatchnormReluForwardFn cuda_batchnorm_relu_forward;
TdmBatchnormReluBackwardFn cuda_batchnorm_relu_backward;
TdmReluForwardFn cuda_relu_forward;
TdmReluBackwardFn cuda_relu_backward;
TdmAddFn cuda_add;
TdmAddFn cuda_add_relu;
TdmMaxpool2dForwardFn cuda_maxpool2d_forward;
TdmMaxpool2dBackwardFn cuda_maxpool2d_backward;
TdmAvgpool2dForwardFn cuda_avgpool2d_forward;
TdmAvgpool2dBackwardFn cuda_avgpool2d_backward;
TdmGlobalAvgpoolForwardFn cuda_global_avgpool_forward;
TdmGlobalAvgpoolBackwardFn cuda_global_avgpool_backward;
TdmSoftmaxXentFn cuda_softmax_xent;
TdmSoftmaxXentStatsFn cuda_softmax_xent_stats;
TdmDropoutForwardFn cuda_dropout_forward;
TdmDropoutBackwardFn cuda_dropout_backward;
TdmFillFn cuda_fill;
TdmCopyFn cuda_copy;
TdmScaleFn cuda_scale;
TdmAxpyFn cuda_axpy;
TdmSumSquaresFn cuda_sum_squares;
TdmCastFn cuda_cast;
TdmSgdUpdateFn cuda_sgd_update;
TdmAdamwUpdateFn cuda_adamw_update;
TdmSgdUpdateFn cuda_sgd_update_zero_grad;
TdmAdamwUpdateFn cuda_adamw_update_zero_grad;

#endif /* TDM_CUDA_H */

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
 * information), cuda-alloc.c (the caching allocator, cuda-alloc.h),
 * cuda-blas.c (gemm through cuBLASLt), cuda-conv.c (cuDNN convolutions),
 * cuda-ops.c (the C side of the hand-written kernels: argument checks and
 * launches), cuda-kernels.h (the extern "C" launchers of the .cu files),
 * cuda-elem.h (per-element arithmetic shared by the kernels and the CPU
 * tests), cuda-ops.cu, cuda-norm.cu, cuda-pool.cu, cuda-loss.cu (kernels).
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
void *cuda_alloc(TdmDevice *dev, size_t nbytes, GError **error);
void cuda_free(TdmDevice *dev, void *ptr, size_t nbytes);
void *cuda_host_alloc(TdmDevice *dev, size_t nbytes, GError **error);
void cuda_host_free(TdmDevice *dev, void *ptr);
gboolean cuda_copy_h2d(TdmDevice *dev, void *dst, const void *src, size_t n, gboolean async,
                       GError **error);
gboolean cuda_copy_d2h(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error);
gboolean cuda_copy_d2d(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error);
gboolean cuda_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
gboolean cuda_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
gboolean cuda_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src, const TdmTensor *like,
                      TdmTensor *dst, GError **error);
gboolean cuda_synchronize(TdmDevice *dev, GError **error);
extern const TdmStreamOps cuda_stream_ops;
gboolean cuda_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error);

/* ---- dense algebra (cuda-blas.c) and convolution (cuda-conv.c) ---- */
gboolean cuda_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                   float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                   TdmTensor *bias, GError **error);
gboolean cuda_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                             TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                             GError **error);
gboolean cuda_conv2d_relu_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                  GError **error);
gboolean cuda_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                   TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                   TdmTensor *dx, GError **error);
gboolean cuda_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                     TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                     GError **error);
/* Frees what cuda-blas.c and cuda-conv.c keep in an op cache. */
void cuda_cache_free(TdmDevice *dev, TdmOpCache *cache);

/* ---- hand-written kernels (cuda-ops.c) ---- */
gboolean cuda_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                        GError **error);
gboolean cuda_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                TdmTensor *running_var, float momentum, float eps,
                                gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                TdmTensor *y, GError **error);
gboolean cuda_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                 TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                 float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                 GError **error);
gboolean cuda_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                     TdmTensor *running_var, float momentum, float eps,
                                     gboolean training, TdmTensor *save_mean,
                                     TdmTensor *save_var, TdmTensor *workspace, TdmTensor *y,
                                     GError **error);
gboolean cuda_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                      TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                      TdmTensor *gamma, TdmTensor *save_mean,
                                      TdmTensor *save_var, float eps, TdmTensor *dx,
                                      TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
gboolean cuda_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                           GError **error);
gboolean cuda_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                            TdmTensor *dx, GError **error);
gboolean cuda_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                  GError **error);
gboolean cuda_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                       TdmTensor *y, GError **error);
gboolean cuda_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error);
gboolean cuda_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                 TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                 TdmTensor *dx, GError **error);
gboolean cuda_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *x, TdmTensor *y, GError **error);
gboolean cuda_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                 TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                 GError **error);
gboolean cuda_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *y, GError **error);
gboolean cuda_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                      const TdmTensor *x_like, TdmTensor *dx, GError **error);
gboolean cuda_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                           TdmTensor *labels, float label_smoothing, float *loss,
                           TdmTensor *dlogits, int64_t *correct, GError **error);
gboolean cuda_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                 TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                 TdmTensor *stats, GError **error);
gboolean cuda_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                              TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
gboolean cuda_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                               TdmTensor *dy, TdmTensor *dx, GError **error);
gboolean cuda_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error);
gboolean cuda_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
gboolean cuda_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
gboolean cuda_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error);
gboolean cuda_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
gboolean cuda_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                   GError **error);
gboolean cuda_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                         TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
gboolean cuda_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                           TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                           GError **error);
gboolean cuda_sgd_update_zero_grad(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                   TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
gboolean cuda_adamw_update_zero_grad(TdmDevice *dev, const TdmAdamWParams *hp,
                                     TdmTensor *param, TdmTensor *grad, TdmTensor *exp_avg,
                                     TdmTensor *exp_avg_sq, GError **error);

#endif /* TDM_CUDA_H */

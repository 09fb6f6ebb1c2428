/* SPDX-License-Identifier: MIT */
/**
 * SECTION:backend
 * @title: Backends
 * @short_description: the op table a compute backend fills
 * @include: tandem/tandem.h
 *
 * The compute backend class: memory and the op table.
 *
 * A backend plugin registers one TDM_FEATURE_BACKEND feature whose class is
 * a TdmBackendClass. The `ref` backend implements every op in plain C and is
 * the oracle; every other backend is checked op by op against it.
 *
 * Conventions for every op:
 *  - All tensors are f32 unless stated. Inputs may come in plain layout or in
 *    any layout this same backend produced; a backend converts what it must.
 *  - Outputs marked "(out)" are slots: the op shapes them with
 *    tdm_tensor_ensure() (choosing the layout it prefers) and overwrites them.
 *    Outputs marked "(acc)" already have their final shape and plain layout
 *    (parameter gradients in the arena) and are ACCUMULATED into (+=).
 *  - `cache` points to a slot owned by the call site (a module); the backend
 *    may keep primitives, layouts and scratch there, keyed by shape, and frees
 *    it through cache_free. It may be NULL (then nothing is cached).
 *  - Images are NCHW in logical order whatever the physical layout.
 *  - Ops may run asynchronously on the device's stream; tdm_tensor_read()
 *    and synchronize() wait for them.
 */
#ifndef TANDEM_BACKEND_H
#define TANDEM_BACKEND_H

#include <tandem/device.h>
#include <tandem/tensor.h>

G_BEGIN_DECLS

/* 1.1 and 1.2 gave reserved slots a meaning (see `since 1.x` in the class). */
#define TDM_BACKEND_IFACE_VERSION TDM_IFACE_VERSION(1, 2)
#define TDM_STREAM_OPS_IFACE_VERSION TDM_IFACE_VERSION(1, 0)

typedef struct {
    int stride_h, stride_w;
    int pad_h, pad_w;
    int dilation_h, dilation_w; /* 1 = none */
    int groups;                 /* 1 */
} TdmConv2dParams;

typedef struct {
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    gboolean count_include_pad; /* avg pool only; PyTorch's default is TRUE */
} TdmPool2dParams;

/* TdmPrecision (what GEMM and convolution compute in) is in
 * tandem/device.h, with tdm_device_set_precision. */

typedef struct {
    float lr, momentum, dampening, weight_decay;
    gboolean nesterov;
    gboolean first_step; /* momentum buffer is initialised to the gradient */
} TdmSgdParams;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* 1 on the first update (bias correction) */
} TdmAdamWParams;

/* A backend's event, defined by each backend (opaque to the core). */
typedef struct _TdmBackendEvent TdmBackendEvent;

/* Streams and events of a backend whose work may run asynchronously (see
 * tandem/device.h for the semantics the core exposes). Versioned apart from
 * the class (TDM_STREAM_OPS_IFACE_VERSION); every slot is required once the
 * table is offered, and the registry checks it with the class. The events
 * of one backend may be waited for on any of its devices. Timeouts as in
 * tandem/device.h. */
typedef struct {
    guint32 iface_version; /* TDM_STREAM_OPS_IFACE_VERSION */
    guint32 struct_size;   /* sizeof(TdmStreamOps) */
    TdmBackendEvent *(*event_new)(TdmDevice *dev, GError **error);
    /* May be called while the event is pending. */
    void (*event_free)(TdmDevice *dev, TdmBackendEvent *ev);
    gboolean (*event_record)(TdmDevice *dev, TdmBackendEvent *ev, TdmStream stream,
                             GError **error);
    /* Later work on `stream` of `dev` waits for `ev` (possibly of another
     * device of this backend); must not block the host where the device
     * runs asynchronously. */
    gboolean (*stream_wait_event)(TdmDevice *dev, TdmStream stream, TdmBackendEvent *ev,
                                  GError **error);
    /* TRUE when complete, FALSE while pending (error unset) or on failure. */
    gboolean (*event_query)(TdmDevice *dev, TdmBackendEvent *ev, GError **error);
    gboolean (*event_synchronize)(TdmDevice *dev, TdmBackendEvent *ev, double timeout_s,
                                  GError **error);
    /* Every stream of the device. */
    gboolean (*synchronize)(TdmDevice *dev, double timeout_s, GError **error);
    /* copy_h2d ordered on `stream` (always asynchronous for the host). */
    gboolean (*copy_h2d_on)(TdmDevice *dev, TdmStream stream, void *dst, const void *src,
                            size_t n, GError **error);
    /* The backend's handle of the stream (cudaStream_t), or NULL. */
    gpointer (*native_stream)(TdmDevice *dev, TdmStream stream);
    gpointer reserved[8];
} TdmStreamOps;

/* softmax_xent_stats's accumulator: f32 [TDM_XENT_STATS_LEN], plain. */
#define TDM_XENT_STATS_LOSS_SUM 0 /* sum over rows of each row's loss */
#define TDM_XENT_STATS_CORRECT 1  /* rows whose argmax is the label */
#define TDM_XENT_STATS_LEN 2

/* The function types of the class's memory and op slots, so that a
 * backend's header and the op front ends (tandem/ops.h) declare their
 * functions without writing each prototype again (`TdmGemmFn my_gemm;`);
 * definitions still spell the parameters out. Each slot of TdmBackendClass
 * below has exactly its type, so `.gemm = my_gemm` in a class table checks
 * the match. What each op does is said at its slot. */
typedef void *TdmAllocFn(TdmDevice *dev, size_t nbytes, GError **error);
typedef void TdmFreeFn(TdmDevice *dev, void *ptr, size_t nbytes);
typedef gboolean TdmReadFn(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
typedef gboolean TdmWriteFn(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
typedef gboolean TdmReorderFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src,
                              const TdmTensor *like, TdmTensor *dst, GError **error);
typedef const char *TdmLayoutNameFn(TdmDevice *dev, gconstpointer layout);
typedef gboolean TdmGemmFn(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                           float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                           TdmTensor *bias, GError **error);
typedef gboolean TdmBiasGradFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                               TdmTensor *bias_grad, GError **error);
/* conv2d_forward and conv2d_relu_forward */
typedef gboolean TdmConv2dForwardFn(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                    GError **error);
typedef gboolean TdmConv2dBackwardDataFn(TdmDevice *dev, TdmOpCache **cache,
                                         const TdmConv2dParams *p, TdmTensor *dy, TdmTensor *w,
                                         const TdmTensor *x_like, TdmTensor *dx, GError **error);
typedef gboolean TdmConv2dBackwardFilterFn(TdmDevice *dev, TdmOpCache **cache,
                                           const TdmConv2dParams *p, TdmTensor *x, TdmTensor *dy,
                                           TdmTensor *dw, TdmTensor *db, GError **error);
typedef gboolean TdmBatchnormForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                       TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                       TdmTensor *running_var, float momentum, float eps,
                                       gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                       TdmTensor *y, GError **error);
typedef gboolean TdmBatchnormBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                        TdmTensor *dy, TdmTensor *gamma, TdmTensor *save_mean,
                                        TdmTensor *save_var, float eps, TdmTensor *dx,
                                        TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
typedef gboolean TdmBatchnormReluForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                           TdmTensor *gamma, TdmTensor *beta,
                                           TdmTensor *running_mean, TdmTensor *running_var,
                                           float momentum, float eps, gboolean training,
                                           TdmTensor *save_mean, TdmTensor *save_var,
                                           TdmTensor *workspace, TdmTensor *y, GError **error);
typedef gboolean TdmBatchnormReluBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                            TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                            TdmTensor *gamma, TdmTensor *save_mean,
                                            TdmTensor *save_var, float eps, TdmTensor *dx,
                                            TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
typedef gboolean TdmReluForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                                  GError **error);
typedef gboolean TdmReluBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                                   TdmTensor *dx, GError **error);
/* add and add_relu */
typedef gboolean TdmAddFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                          TdmTensor *y, GError **error);
typedef gboolean TdmMaxpool2dForwardFn(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                       TdmTensor *x, TdmTensor *y, TdmTensor *workspace,
                                       GError **error);
typedef gboolean TdmMaxpool2dBackwardFn(TdmDevice *dev, TdmOpCache **cache,
                                        const TdmPool2dParams *p, TdmTensor *dy,
                                        TdmTensor *workspace, const TdmTensor *x_like,
                                        TdmTensor *dx, GError **error);
typedef gboolean TdmAvgpool2dForwardFn(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                       TdmTensor *x, TdmTensor *y, GError **error);
typedef gboolean TdmAvgpool2dBackwardFn(TdmDevice *dev, TdmOpCache **cache,
                                        const TdmPool2dParams *p, TdmTensor *dy,
                                        const TdmTensor *x_like, TdmTensor *dx, GError **error);
typedef gboolean TdmGlobalAvgpoolForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                           TdmTensor *y, GError **error);
typedef gboolean TdmGlobalAvgpoolBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                            const TdmTensor *x_like, TdmTensor *dx, GError **error);
typedef gboolean TdmSoftmaxXentFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                  TdmTensor *labels, float label_smoothing, float *loss,
                                  TdmTensor *dlogits, int64_t *correct, GError **error);
typedef gboolean TdmSoftmaxXentStatsFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                       TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                       TdmTensor *stats, GError **error);
typedef gboolean TdmDropoutForwardFn(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                                     TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
typedef gboolean TdmDropoutBackwardFn(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                                      TdmTensor *dy, TdmTensor *dx, GError **error);
typedef gboolean TdmFillFn(TdmDevice *dev, TdmTensor *x, float value, GError **error);
typedef gboolean TdmCopyFn(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
typedef gboolean TdmScaleFn(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
typedef gboolean TdmAxpyFn(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error);
typedef gboolean TdmSumSquaresFn(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
typedef gboolean TdmCastFn(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                           GError **error);
/* sgd_update and sgd_update_zero_grad */
typedef gboolean TdmSgdUpdateFn(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
/* adamw_update and adamw_update_zero_grad */
typedef gboolean TdmAdamwUpdateFn(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                  TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                  GError **error);
typedef gboolean TdmDeviceInfoFn(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses a backend with a NULL required slot. */
struct _TdmBackendClass {
    guint32 iface_version;   /* TDM_BACKEND_IFACE_VERSION */
    guint32 struct_size;     /* sizeof(TdmBackendClass) */
    const char *device_type; /* device spec prefix: "ref", "cpu", "cuda" */

    /* ---- devices ---- */
    /* (optional: NULL means one device) */
    int (*device_count)(void);
    /* Fill dev->priv. Called once per device index.
     * (optional: NULL means there is nothing to open) */
    gboolean (*device_open)(TdmDevice *dev, GError **error);
    /* (optional: NULL means there is nothing to release) */
    void (*device_close)(TdmDevice *dev);
    /* (optional: NULL means every op has finished when it returns) */
    gboolean (*synchronize)(TdmDevice *dev, GError **error);
    /* Set the number of compute threads (0 = backend default).
     * (optional: NULL means the backend chooses its thread count itself) */
    void (*set_num_threads)(TdmDevice *dev, int n);

    /* ---- memory ---- */
    void *(*alloc)(TdmDevice *dev, size_t nbytes, GError **error); /* zero-filled */
    void (*free)(TdmDevice *dev, void *ptr, size_t nbytes);
    /* Page-locked host memory for fast transfers.
     * (optional: NULL means no pinned memory: the loader uses g_malloc; the
     * two come together: host_free is required when host_alloc is set) */
    void *(*host_alloc)(TdmDevice *dev, size_t nbytes, GError **error);
    void (*host_free)(TdmDevice *dev, void *ptr);
    /* Raw byte copies; `async` copies are ordered on the device stream.
     * (optional: NULL means the loader writes each batch through `write`) */
    gboolean (*copy_h2d)(TdmDevice *dev, void *dst, const void *src, size_t n, gboolean async, GError **error);
    /* (optional: NULL means not offered: the core reads tensors through `read`) */
    gboolean (*copy_d2h)(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error);
    /* (optional: NULL means not offered: the core copies tensors through `copy`) */
    gboolean (*copy_d2d)(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error);
    /* Plain-order host transfers for tensors of any layout this backend made. */
    gboolean (*read)(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
    gboolean (*write)(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
    /* dst (out) = src (same logical shape) in the layout of `like`, or plain
     * contiguous when like == NULL. Used by Flatten and at boundaries. */
    gboolean (*reorder)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src, const TdmTensor *like,
                        TdmTensor *dst, GError **error);
    /* A short human name for a layout handle ("plain", "nChw16c"). */
    const char *(*layout_name)(TdmDevice *dev, gconstpointer layout);
    /* (optional: NULL means the backend keeps nothing in op caches) */
    void (*cache_free)(TdmDevice *dev, TdmOpCache *cache);

    /* ---- dense algebra ---- */
    /* c = alpha * op(a) @ op(b) + beta * c (+ bias broadcast over rows when
     * bias != NULL). a, b, c plain 2-D; op(x) = x^T when trans_x. c must have
     * its final shape (it is not an out slot), except when beta == 0 and c is
     * empty: then it is shaped [M, N]. */
    gboolean (*gemm)(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                     float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                     TdmTensor *bias, GError **error);
    /* bias_grad (acc) [C] += sum of dy over every dim but 1 (dy [N, C] or [N, C, H, W]). */
    gboolean (*bias_grad)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                          GError **error);

    /* ---- convolution: x [N,C,H,W], w [O,C/g,KH,KW] plain, bias [O] or NULL ---- */
    gboolean (*conv2d_forward)(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                               TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                               GError **error);
    /* dx (out) = gradient w.r.t. x, shaped like x. */
    gboolean (*conv2d_backward_data)(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                     TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                     TdmTensor *dx, GError **error);
    /* dw (acc) += gradient w.r.t. w; db (acc, may be NULL) += sum of dy. */
    gboolean (*conv2d_backward_filter)(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                       TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                       GError **error);

    /* ---- batch norm over [N,C,H,W] (or [N,C]) per channel ----
     * training: normalise with batch statistics, save_mean/save_var (out, [C],
     * plain; save_var is the biased variance) get them, and running stats are
     * updated in place: r = (1-momentum) r + momentum * stat, with the
     * UNBIASED variance for running_var (as PyTorch).
     * eval: normalise with running stats; save_* untouched. */
    gboolean (*batchnorm_forward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                  TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                  TdmTensor *running_var, float momentum, float eps,
                                  gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                  TdmTensor *y, GError **error);
    /* Training-mode backward: dx (out), dgamma/dbeta (acc). */
    gboolean (*batchnorm_backward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                   TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                   float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                   GError **error);

    /* ---- elementwise ---- */
    /* y (out) = max(x, 0); y may be x (in place). */
    gboolean (*relu_forward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                             GError **error);
    /* dx (out) = dy where y > 0 else 0 (y = the forward output). */
    gboolean (*relu_backward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                              TdmTensor *dx, GError **error);
    /* y (out) = a + b, same logical shape; y may be a or b (in place). */
    gboolean (*add)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                    GError **error);

    /* ---- pooling ---- */
    /* workspace (out): whatever backward needs (ref: i32 [N,C,OH,OW] index
     * h*W+w of the first maximum in its plane). Padding must be <= kernel/2
     * (PyTorch's rule), else TDM_ERROR_INVALID_ARG. */
    gboolean (*maxpool2d_forward)(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                  TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error);
    gboolean (*maxpool2d_backward)(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                   TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                   TdmTensor *dx, GError **error);
    gboolean (*avgpool2d_forward)(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                  TdmTensor *x, TdmTensor *y, GError **error);
    gboolean (*avgpool2d_backward)(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                   TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                   GError **error);
    /* y (out) [N,C] plain = mean over H, W; backward spreads dy / (H*W). */
    gboolean (*global_avgpool_forward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                       TdmTensor *y, GError **error);
    gboolean (*global_avgpool_backward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                        const TdmTensor *x_like, TdmTensor *dx, GError **error);

    /* ---- loss ----
     * Mean softmax cross-entropy of logits [N, K] (plain) against labels [N]
     * (i32 or i64), with label smoothing eps (0 = none, PyTorch's formula).
     * *loss (host) gets the mean loss; dlogits (out, may be NULL) the gradient
     * of the mean loss; *correct (may be NULL) the number of rows whose argmax
     * (first maximum) equals the label. A label outside [0, K) is an error
     * naming the row and the label. */
    gboolean (*softmax_xent)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                             TdmTensor *labels, float label_smoothing, float *loss,
                             TdmTensor *dlogits, int64_t *correct, GError **error);

    /* ---- dropout: keep with prob 1-p, scale kept by 1/(1-p); mask (out, u8)
     * is derived from (seed, element index i) only, identically on every
     * backend: h = splitmix64_mix(seed + (i + 1) * 0x9e3779b97f4a7c15);
     * keep element i iff (h >> 40) * 2^-24 >= p. ---- */
    gboolean (*dropout_forward)(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                                TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
    gboolean (*dropout_backward)(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                                 TdmTensor *dy, TdmTensor *dx, GError **error);

    /* ---- vector ops on plain contiguous tensors (any shape, numel n) ---- */
    gboolean (*fill)(TdmDevice *dev, TdmTensor *x, float value, GError **error);
    gboolean (*copy)(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error); /* same numel */
    gboolean (*scale)(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);     /* x *= alpha */
    gboolean (*axpy)(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error); /* y += alpha x */
    gboolean (*sum_squares)(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
    /* dst (same shape, plain) = src converted from src's dtype to dst's dtype;
     * u8 -> f32 maps 0..255 to 0..1 when `normalize_u8`. dst may also be an
     * empty slot: it is then shaped like src, in its own dtype. */
    gboolean (*cast)(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                     GError **error);

    /* ---- fused optimizer updates over flat f32 arenas (same numel) ---- */
    /* PyTorch's SGD: g' = g + wd p; buf = momentum buf + (1-dampening) g'
     * (buf = g' on the first step); d = nesterov ? g' + momentum buf : buf;
     * p -= lr d. momentum_buf may be NULL when momentum == 0. */
    gboolean (*sgd_update)(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                           TdmTensor *momentum_buf, GError **error);
    /* PyTorch's AdamW (decoupled weight decay, bias-corrected). */
    gboolean (*adamw_update)(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                             TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                             GError **error);

    /* ---- fused ops (added in place of reserved slots; a backend may leave
     * any of them NULL, and the core then runs the unfused ops above) ---- */
    /* Batch norm followed by ReLU. Exactly batchnorm_forward (same arguments,
     * same save_mean/save_var, same running-stat update in training, same
     * eval behaviour) except that y (out) = max(BN(x), 0). workspace (out, u8
     * or any dtype the backend picks; may be NULL in eval mode) receives
     * whatever batchnorm_relu_backward needs besides y: the ref backend
     * leaves it untouched, the cpu backend stores oneDNN's ReLU bit mask.
     * (optional: NULL means batchnorm_forward then relu_forward; the two
     * batchnorm_relu slots come together, both set or both NULL) */
    gboolean (*batchnorm_relu_forward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                       TdmTensor *gamma, TdmTensor *beta,
                                       TdmTensor *running_mean, TdmTensor *running_var,
                                       float momentum, float eps, gboolean training,
                                       TdmTensor *save_mean, TdmTensor *save_var,
                                       TdmTensor *workspace, TdmTensor *y, GError **error);
    /* Backward of batchnorm_relu_forward in training mode: exactly
     * batchnorm_backward applied to dy * (y > 0), where y and workspace are
     * what the training-mode forward on x produced. dx (out), dgamma/dbeta
     * (acc, may be NULL). (optional: NULL means relu_backward then
     * batchnorm_backward; set when batchnorm_relu_forward is) */
    gboolean (*batchnorm_relu_backward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                        TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                        TdmTensor *gamma, TdmTensor *save_mean,
                                        TdmTensor *save_var, float eps, TdmTensor *dx,
                                        TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
    /* y (out) = max(a + b, 0), same logical shape; y may be a or b (in place).
     * The residual join of a ResNet block; its backward is relu_backward on y.
     * (optional: NULL means add then relu_forward) */
    gboolean (*add_relu)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                         TdmTensor *y, GError **error);
    /* Exactly sgd_update / adamw_update followed by fill(grad, 0): the
     * update zeroes each gradient element once it has read it, sparing the
     * separate pass of zero_grad when the caller zeroes right after.
     * (optional: NULL means sgd_update, then fill(grad, 0)) */
    gboolean (*sgd_update_zero_grad)(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                     TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
    /* (optional: NULL means adamw_update, then fill(grad, 0)) */
    gboolean (*adamw_update_zero_grad)(TdmDevice *dev, const TdmAdamWParams *hp,
                                       TdmTensor *param, TdmTensor *grad, TdmTensor *exp_avg,
                                       TdmTensor *exp_avg_sq, GError **error);
    /* Convolution followed by ReLU: exactly conv2d_forward, then
     * y = max(y, 0). Its backward is relu_backward on y, then the conv2d
     * backward ops on that gradient.
     * (optional: NULL means conv2d_forward then relu_forward) */
    gboolean (*conv2d_relu_forward)(TdmDevice *dev, TdmOpCache **cache,
                                    const TdmConv2dParams *p, TdmTensor *x, TdmTensor *w,
                                    TdmTensor *bias, TdmTensor *y, GError **error);

    /* since 1.1: stream_ops, device_info, softmax_xent_stats */
    /* Streams and events (optional: NULL means the device runs everything
     * in order on one stream; the core then falls back to copy_h2d and
     * synchronize, see tandem/device.h). */
    const TdmStreamOps *stream_ops;
    /* Fill what the backend knows of `info` (optional: NULL means the core
     * reports the device's name and its own allocator counts only). The
     * core has filled every field before the call: unknown figures are -1,
     * allocated/peak/reserved bytes are the core's counts of tensor
     * storage; a backend with its own allocator overwrites them. */
    gboolean (*device_info)(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
    /* softmax_xent without a host result (optional: NULL means callers use
     * softmax_xent): the same loss and dlogits (out, may be NULL; the
     * gradient of the MEAN loss as there), but the batch's loss SUM over
     * rows and its correct count are ADDED to stats (acc, f32
     * [TDM_XENT_STATS_LEN] on dev, see TDM_XENT_STATS_*), so that a step
     * never waits for the device; the caller reads and clears stats once
     * per logging interval. Labels out of range are an error as there. */
    gboolean (*softmax_xent_stats)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                   TdmTensor *labels, float label_smoothing,
                                   TdmTensor *dlogits, TdmTensor *stats, GError **error);

    /* since 1.2: set_precision, copy_peer */
    /* Make GEMM and convolution on `dev` compute in `precision` from now on
     * (optional: NULL means FP32 only: the core refuses any other). FALSE
     * with TDM_ERROR_UNSUPPORTED when the device cannot. */
    gboolean (*set_precision)(TdmDevice *dev, TdmPrecision precision, GError **error);
    /* Copy n bytes from src on src_dev to dst on dst_dev, two devices of
     * this backend: after the work queued so far on src_dev's compute
     * stream, and before the work queued later on dst_dev's (neither host
     * waits). Callers (dp) also reuse both buffers right after the call
     * without a wait: the copy must come after the work queued so far on
     * dst_dev too and before the work queued later on src_dev (say, dst's
     * compute stream waits an event of src's, the copy runs on it, and
     * src's compute stream waits an event recorded after the copy).
     * (optional: NULL means the core stages through host memory) */
    gboolean (*copy_peer)(TdmDevice *dst_dev, void *dst, TdmDevice *src_dev, const void *src,
                          size_t n, GError **error);

    gpointer reserved[5];
};

/**
 * tdm_op_cache_clear:
 * @dev: the device the cache belongs to
 * @cache: (inout) (nullable): an op's cache slot
 *
 * Frees an op cache slot (a no-op on NULL) through the backend and resets
 * it to NULL.
 */
TDM_API void tdm_op_cache_clear(TdmDevice *dev, TdmOpCache **cache);

G_END_DECLS

#endif /* TANDEM_BACKEND_H */

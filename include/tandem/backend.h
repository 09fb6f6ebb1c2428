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

/**
 * TDM_BACKEND_IFACE_VERSION:
 *
 * The interface version of #TdmBackendClass this header describes (see
 * TDM_IFACE_VERSION()): a backend puts it in iface_version. 1.1 and 1.2
 * gave reserved slots a meaning (see `since 1.x` in the class); 1.3 lets
 * the batch-norm and ReLU backwards run in place (dx the same tensor as dy)
 * and adds batchnorm_relu_backward_ws.
 */
/**
 * TDM_STREAM_OPS_IFACE_VERSION:
 *
 * The interface version of #TdmStreamOps, versioned apart from the class:
 * a backend puts it in the table's iface_version.
 */
/* 1.1 and 1.2 gave reserved slots a meaning (see `since 1.x` in the class);
 * 1.3: batchnorm_backward, batchnorm_relu_backward and relu_backward take
 * dx == dy, and batchnorm_relu_backward_ws. */
#define TDM_BACKEND_IFACE_VERSION TDM_IFACE_VERSION(1, 3)
#define TDM_STREAM_OPS_IFACE_VERSION TDM_IFACE_VERSION(1, 0)

/**
 * TdmConv2dParams:
 * @stride_h: the vertical stride, >= 1
 * @stride_w: the horizontal stride, >= 1
 * @pad_h: zero rows added above and below, >= 0
 * @pad_w: zero columns added left and right, >= 0
 * @dilation_h: the vertical spacing of kernel taps; 1 = none
 * @dilation_w: the horizontal spacing of kernel taps; 1 = none
 * @groups: the number of channel groups (1: a plain convolution; C: a
 *   depthwise one); C and O must be multiples of it
 *
 * The geometry of a 2-D convolution, as PyTorch's Conv2d takes it. The
 * caller owns it; ops only read it during the call. The output is
 * [N, O, (H + 2 pad_h - dilation_h (KH - 1) - 1) / stride_h + 1, ...].
 */
typedef struct {
    int stride_h, stride_w;
    int pad_h, pad_w;
    int dilation_h, dilation_w; /* 1 = none */
    int groups;                 /* 1 */
} TdmConv2dParams;

/**
 * TdmPool2dParams:
 * @kernel_h: the window's height, >= 1
 * @kernel_w: the window's width, >= 1
 * @stride_h: the vertical stride, >= 1
 * @stride_w: the horizontal stride, >= 1
 * @pad_h: padding above and below, at most @kernel_h / 2
 * @pad_w: padding left and right, at most @kernel_w / 2
 * @count_include_pad: average pooling only: divide by the whole window,
 *   padding included (PyTorch's default, TRUE), else by the cells inside
 *   the image
 *
 * The geometry of a 2-D max or average pooling (no dilation, floor mode).
 * The caller owns it; ops only read it during the call. Padding larger
 * than half the kernel is refused with %TDM_ERROR_INVALID_ARG, as PyTorch
 * refuses it.
 */
typedef struct {
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    gboolean count_include_pad; /* avg pool only; PyTorch's default is TRUE */
} TdmPool2dParams;

/* TdmPrecision (what GEMM and convolution compute in) is in
 * tandem/device.h, with tdm_device_set_precision. */

/**
 * TdmSgdParams:
 * @lr: the learning rate
 * @momentum: the momentum factor; 0 = plain SGD (no buffer needed)
 * @dampening: the dampening of the momentum buffer's update
 * @weight_decay: L2 penalty added to the gradient (g + wd p)
 * @nesterov: Nesterov momentum (the sgd optimizer requires momentum > 0
 *   and dampening 0 for it)
 * @first_step: TRUE on the first update: the momentum buffer is set to the
 *   gradient instead of decayed into
 *
 * The hyper-parameters of one SGD update (sgd_update, tdm_op_sgd_update()),
 * PyTorch's formula. Read during the call only.
 */
typedef struct {
    float lr, momentum, dampening, weight_decay;
    gboolean nesterov;
    gboolean first_step; /* momentum buffer is initialised to the gradient */
} TdmSgdParams;

/**
 * TdmAdamWParams:
 * @lr: the learning rate
 * @beta1: the decay of the first moment (exp_avg)
 * @beta2: the decay of the second moment (exp_avg_sq)
 * @eps: added to the denominator
 * @weight_decay: the decoupled weight decay: p -= lr wd p
 * @step: the update's number, 1 on the first (bias correction); the front
 *   end refuses < 1 with %TDM_ERROR_INVALID_ARG
 *
 * The hyper-parameters of one AdamW update (adamw_update,
 * tdm_op_adamw_update()), PyTorch's formula. Read during the call only.
 */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* 1 on the first update (bias correction) */
} TdmAdamWParams;

/**
 * TdmBackendEvent:
 *
 * A backend's event (opaque to the core, defined by each backend that
 * offers #TdmStreamOps): made by its event_new, freed by its event_free.
 * The core wraps it in a #TdmEvent (tandem/device.h).
 */
/* A backend's event, defined by each backend (opaque to the core). */
typedef struct _TdmBackendEvent TdmBackendEvent;

/**
 * TdmStreamOps:
 * @iface_version: %TDM_STREAM_OPS_IFACE_VERSION
 * @struct_size: sizeof(TdmStreamOps)
 * @event_new: makes an event, not yet recorded: (transfer full), freed with
 *   @event_free; NULL with @error set when the device cannot
 * @event_free: frees an event; may be called while it is pending
 * @event_record: places @ev after the work queued so far on @stream of @dev
 * @stream_wait_event: later work on @stream of @dev waits for @ev (possibly
 *   recorded on another device of this backend); must not block the host
 *   where the device runs asynchronously
 * @event_query: TRUE when @ev has completed; FALSE while it is pending
 *   (error unset) or on failure (error set)
 * @event_synchronize: the host waits for @ev, @timeout_s as in
 *   tandem/device.h (FALSE with %TDM_ERROR_TIMEOUT past it)
 * @synchronize: the host waits for every stream of @dev, with a timeout
 * @copy_h2d_on: copies @n bytes of host memory to the device, ordered on
 *   @stream; always asynchronous for the host, so @src must stay valid
 *   until the stream has run the copy (pinned memory from host_alloc)
 * @native_stream: the backend's own handle of @stream (a cudaStream_t), or
 *   NULL; (transfer none), valid while the device is open
 * @reserved: NULL
 *
 * Streams and events of a backend whose work may run asynchronously (see
 * tandem/device.h for the semantics the core exposes), given in the class's
 * stream_ops. Versioned apart from the class; every slot is required once
 * the table is offered, and the registry checks it with the class
 * (%TDM_ERROR_PLUGIN naming the slot). The events of one backend may be
 * waited for on any of its devices. Each slot that takes @error returns
 * FALSE (NULL) with it set on failure, naming the device.
 */
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

/**
 * TDM_XENT_STATS_LOSS_SUM:
 *
 * The index in softmax_xent_stats's accumulator of the sum over rows of
 * each row's loss.
 */
/**
 * TDM_XENT_STATS_CORRECT:
 *
 * The index in softmax_xent_stats's accumulator of the number of rows
 * whose argmax (first maximum) is the label.
 */
/**
 * TDM_XENT_STATS_LEN:
 *
 * The length of softmax_xent_stats's accumulator: an f32 tensor
 * [TDM_XENT_STATS_LEN], plain, on the op's device, that the caller makes,
 * zeroes, reads and clears (tdm_op_softmax_xent_stats()).
 */
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
/**
 * TdmAllocFn:
 * @dev: the device
 * @nbytes: the size, > 0 (the core asks for 1 byte for an empty storage)
 * @error: return location for a #GError, or NULL
 *
 * The type of the alloc slot: device memory for a tensor storage,
 * ZERO-FILLED. The core counts the bytes and frees the block with the
 * free slot.
 *
 * Returns: (transfer full): the block (a device pointer), or NULL with
 * @error set (out of memory, naming the device and the size)
 */
typedef void *TdmAllocFn(TdmDevice *dev, size_t nbytes, GError **error);
/**
 * TdmFreeFn:
 * @dev: the device
 * @ptr: a block alloc returned on @dev
 * @nbytes: the storage's size: what alloc was asked for, except that the
 *   block of an empty storage, asked for as 1 byte, comes back with 0
 *
 * The type of the free slot: gives a block back. Work queued on the device
 * may still use it; the backend orders the release after that work (or
 * synchronises first).
 */
typedef void TdmFreeFn(TdmDevice *dev, void *ptr, size_t nbytes);
/**
 * TdmReadFn:
 * @dev: the device
 * @t: a tensor on @dev with storage, in any layout this backend made
 * @host: (out caller-allocates): tdm_tensor_nbytes() of plain data
 * @error: return location for a #GError, or NULL
 *
 * The type of the read slot: copies @t to host memory in plain row-major
 * order, waiting for the work queued before it.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmReadFn(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
/**
 * TdmWriteFn:
 * @dev: the device
 * @t: a tensor on @dev with storage, in any layout this backend made
 * @host: plain row-major data, tdm_tensor_nbytes() of it; the caller
 *   keeps it and may reuse it once the call returns
 * @error: return location for a #GError, or NULL
 *
 * The type of the write slot: overwrites @t from host memory, converting
 * to its layout.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmWriteFn(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
/**
 * TdmReorderFn:
 * @dev: the device
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @src: the tensor to convert
 * @like: (nullable): a tensor whose layout to take, or NULL for plain
 *   contiguous
 * @dst: (out): a slot: shaped like @src, in the layout of @like
 * @error: return location for a #GError, or NULL
 *
 * The type of the reorder slot: @dst = @src (same logical shape, same
 * values) in another layout. Flatten and the boundaries between ops that
 * want different layouts use it.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_UNSUPPORTED for a
 * layout the backend cannot make)
 */
typedef gboolean TdmReorderFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src,
                              const TdmTensor *like, TdmTensor *dst, GError **error);
/**
 * TdmLayoutNameFn:
 * @dev: the device
 * @layout: (nullable): a layout handle of this backend, NULL for plain
 *
 * The type of the layout_name slot: a short human name of a layout, for
 * messages and `tandem inspect`.
 *
 * Returns: (transfer none): "plain", "nChw16c"...; a static or interned
 * string
 */
typedef const char *TdmLayoutNameFn(TdmDevice *dev, gconstpointer layout);
/**
 * TdmGemmFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @trans_a: use a transposed (op(a) = a^T)
 * @trans_b: use b transposed
 * @alpha: the product's factor
 * @a: plain 2-D f32, [M, K] (or [K, M] with @trans_a)
 * @b: plain 2-D f32, [K, N] (or [N, K] with @trans_b)
 * @beta: the factor of c's old value; 0 ignores it (NaN included)
 * @c: plain 2-D f32 [M, N] with storage; or, when @beta is 0, an empty
 *   slot that the op shapes [M, N]
 * @bias: (nullable): f32 [N], added to every row, or NULL
 * @error: return location for a #GError, or NULL
 *
 * The type of the gemm slot and of tdm_op_gemm(): c = alpha op(a) @ op(b)
 * + beta c (+ bias broadcast over the rows).
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_SHAPE when the inner
 * dimensions or c's shape do not fit, naming the shapes)
 */
typedef gboolean TdmGemmFn(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                           float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                           TdmTensor *bias, GError **error);
/**
 * TdmBiasGradFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @dy: the output gradient, [N, C] or [N, C, ...]
 * @bias_grad: (inout): f32 [C], plain: accumulated into
 * @error: return location for a #GError, or NULL
 *
 * The type of the bias_grad slot and of tdm_op_bias_grad(): bias_grad +=
 * the sum of @dy over every dimension but 1.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmBiasGradFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                               TdmTensor *bias_grad, GError **error);
/**
 * TdmConv2dForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the convolution's geometry
 * @x: the input, f32 [N, C, H, W]
 * @w: the filter, f32 [O, C / groups, KH, KW], plain
 * @bias: (nullable): f32 [O], or NULL
 * @y: (out): a slot: [N, O, OH, OW], in the layout the backend prefers
 * @error: return location for a #GError, or NULL
 *
 * The type of the conv2d_forward and conv2d_relu_forward slots (and front
 * ends): y = conv2d(x, w) + bias, PyTorch's cross-correlation; the relu
 * form then takes max(y, 0).
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_SHAPE for channels
 * that do not match the filter or an input smaller than the kernel,
 * naming the shapes)
 */
/* conv2d_forward and conv2d_relu_forward */
typedef gboolean TdmConv2dForwardFn(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                    GError **error);
/**
 * TdmConv2dBackwardDataFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the forward's geometry
 * @dy: the output gradient, [N, O, OH, OW]
 * @w: the filter, [O, C / groups, KH, KW]
 * @x_like: the forward's input, or any tensor of its shape, device and
 *   layout: only those are read
 * @dx: (out): a slot: the input gradient, shaped like @x_like
 * @error: return location for a #GError, or NULL
 *
 * The type of the conv2d_backward_data slot and of
 * tdm_op_conv2d_backward_data(): the gradient with respect to the input.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmConv2dBackwardDataFn(TdmDevice *dev, TdmOpCache **cache,
                                         const TdmConv2dParams *p, TdmTensor *dy, TdmTensor *w,
                                         const TdmTensor *x_like, TdmTensor *dx, GError **error);
/**
 * TdmConv2dBackwardFilterFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the forward's geometry
 * @x: the forward's input
 * @dy: the output gradient
 * @dw: (inout): f32 [O, C / groups, KH, KW], plain: accumulated into
 * @db: (inout) (nullable): f32 [O], plain: += the sum of @dy per output
 *   channel; or NULL
 * @error: return location for a #GError, or NULL
 *
 * The type of the conv2d_backward_filter slot and of
 * tdm_op_conv2d_backward_filter(): the gradients of the filter and bias,
 * ADDED to @dw and @db.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmConv2dBackwardFilterFn(TdmDevice *dev, TdmOpCache **cache,
                                           const TdmConv2dParams *p, TdmTensor *x, TdmTensor *dy,
                                           TdmTensor *dw, TdmTensor *db, GError **error);
/**
 * TdmBatchnormForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @x: the input, [N, C] or [N, C, H, W]
 * @gamma: (nullable): f32 [C] scale, or NULL for 1
 * @beta: (nullable): f32 [C] shift, or NULL for 0
 * @running_mean: (inout) (nullable): f32 [C]; updated in training, read in
 *   eval; may be NULL in training only (no running statistics)
 * @running_var: (inout) (nullable): f32 [C], as @running_mean
 * @momentum: the running statistics' update factor: r = (1 - momentum) r +
 *   momentum stat
 * @eps: added to the variance
 * @training: TRUE: normalise with the batch's statistics; FALSE: with the
 *   running ones
 * @save_mean: (out) (nullable): training: a slot that gets the batch mean
 *   [C], plain; untouched in eval
 * @save_var: (out) (nullable): training: a slot that gets the batch's
 *   biased variance [C]; untouched in eval
 * @y: (out): a slot shaped like @x
 * @error: return location for a #GError, or NULL
 *
 * The type of the batchnorm_forward slot and of tdm_op_batchnorm_forward():
 * batch normalisation per channel, as PyTorch's BatchNorm: running_var is
 * updated with the UNBIASED variance, save_var holds the biased one.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmBatchnormForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                       TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                       TdmTensor *running_var, float momentum, float eps,
                                       gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                       TdmTensor *y, GError **error);
/**
 * TdmBatchnormBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @x: the forward's input
 * @dy: the output gradient, shaped like @x
 * @gamma: (nullable): the forward's scale, or NULL for 1
 * @save_mean: the training-mode forward's save_mean
 * @save_var: the training-mode forward's save_var
 * @eps: the forward's eps
 * @dx: (out) (nullable): a slot: the input gradient; or NULL; or @dy
 *   itself when @dy has @x's layout (in place, since interface 1.3)
 * @dgamma: (inout) (nullable): f32 [C], accumulated into; or NULL
 * @dbeta: (inout) (nullable): f32 [C], accumulated into; or NULL
 * @error: return location for a #GError, or NULL
 *
 * The type of the batchnorm_backward slot and of
 * tdm_op_batchnorm_backward(): the training-mode backward (batch
 * statistics). In place, every element of @dy is read before the element
 * of @dx over it is written: the backend finishes the per-channel sums
 * before it writes any of the channel's @dx.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmBatchnormBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                        TdmTensor *dy, TdmTensor *gamma, TdmTensor *save_mean,
                                        TdmTensor *save_var, float eps, TdmTensor *dx,
                                        TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
/**
 * TdmBatchnormReluForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @x: as for #TdmBatchnormForwardFn
 * @gamma: (nullable): as there
 * @beta: (nullable): as there
 * @running_mean: (inout) (nullable): as there
 * @running_var: (inout) (nullable): as there
 * @momentum: as there
 * @eps: as there
 * @training: as there
 * @save_mean: (out) (nullable): as there
 * @save_var: (out) (nullable): as there
 * @workspace: (out) (nullable): a slot for what the backward needs besides
 *   the output (any dtype and shape the backend picks: ref leaves it
 *   untouched, cpu stores oneDNN's ReLU bit mask); may be NULL in eval
 *   mode only
 * @y: (out): a slot shaped like @x: max(BN(x), 0)
 * @error: return location for a #GError, or NULL
 *
 * The type of the batchnorm_relu_forward slot and of
 * tdm_op_batchnorm_relu_forward(): exactly #TdmBatchnormForwardFn, then
 * ReLU. Keep @y and @workspace for the backward.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmBatchnormReluForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                           TdmTensor *gamma, TdmTensor *beta,
                                           TdmTensor *running_mean, TdmTensor *running_var,
                                           float momentum, float eps, gboolean training,
                                           TdmTensor *save_mean, TdmTensor *save_var,
                                           TdmTensor *workspace, TdmTensor *y, GError **error);
/**
 * TdmBatchnormReluBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @x: the forward's input
 * @y: (nullable): the forward's output; the backend's slot always gets it,
 *   tdm_op_batchnorm_relu_backward() takes NULL where the backend has
 *   batchnorm_relu_backward_ws
 * @workspace: the forward's workspace (not NULL); the unfused path
 *   overwrites it with the masked gradient
 * @dy: the output gradient
 * @gamma: (nullable): the forward's scale, or NULL for 1
 * @save_mean: the training-mode forward's save_mean
 * @save_var: the training-mode forward's save_var
 * @eps: the forward's eps
 * @dx: (out) (nullable): a slot: the input gradient; or NULL; or @dy
 * @dgamma: (inout) (nullable): f32 [C], accumulated into; or NULL
 * @dbeta: (inout) (nullable): f32 [C], accumulated into; or NULL
 * @error: return location for a #GError, or NULL
 *
 * The type of the batchnorm_relu_backward slot and of
 * tdm_op_batchnorm_relu_backward(): #TdmBatchnormBackwardFn applied to
 * dy * (y > 0), for @y and @workspace from the training-mode
 * batchnorm_relu_forward on @x. @dx may be @dy itself as there (since
 * interface 1.3).
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmBatchnormReluBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                            TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                            TdmTensor *gamma, TdmTensor *save_mean,
                                            TdmTensor *save_var, float eps, TdmTensor *dx,
                                            TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
/**
 * TdmReluForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @x: the input, f32
 * @y: (out): a slot shaped like @x; may be @x (in place)
 * @error: return location for a #GError, or NULL
 *
 * The type of the relu_forward slot and of tdm_op_relu_forward(): y =
 * max(x, 0).
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmReluForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                                  GError **error);
/**
 * TdmReluBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @y: the forward's OUTPUT
 * @dy: the output gradient, shaped like @y
 * @dx: (out): a slot: dy where y > 0, else 0; or @dy itself when @dy has
 *   @y's layout (in place, since interface 1.3)
 * @error: return location for a #GError, or NULL
 *
 * The type of the relu_backward slot and of tdm_op_relu_backward(); also
 * the backward of add_relu and conv2d_relu_forward.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmReluBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                                   TdmTensor *dx, GError **error);
/**
 * TdmAddFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @a: f32
 * @b: f32, the same logical shape as @a
 * @y: (out): a slot: a + b (add) or max(a + b, 0) (add_relu); may be @a
 *   or @b (in place)
 * @error: return location for a #GError, or NULL
 *
 * The type of the add and add_relu slots and front ends.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_SHAPE when the
 * shapes differ)
 */
/* add and add_relu */
typedef gboolean TdmAddFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                          TdmTensor *y, GError **error);
/**
 * TdmMaxpool2dForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the window's geometry
 * @x: the input, f32 [N, C, H, W]
 * @y: (out): a slot: [N, C, OH, OW], each window's maximum
 * @workspace: (out): a slot for what the backward needs (ref: i32
 *   [N, C, OH, OW], the index h * W + w of each window's first maximum)
 * @error: return location for a #GError, or NULL
 *
 * The type of the maxpool2d_forward slot and of
 * tdm_op_maxpool2d_forward(). Keep @workspace for the backward.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_INVALID_ARG for
 * padding over half the kernel)
 */
typedef gboolean TdmMaxpool2dForwardFn(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                       TdmTensor *x, TdmTensor *y, TdmTensor *workspace,
                                       GError **error);
/**
 * TdmMaxpool2dBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the forward's geometry
 * @dy: the output gradient, [N, C, OH, OW]
 * @workspace: the forward's workspace
 * @x_like: the forward's input, or any tensor of its shape, device and
 *   layout
 * @dx: (out): a slot shaped like @x_like: each dy goes to its window's
 *   maximum
 * @error: return location for a #GError, or NULL
 *
 * The type of the maxpool2d_backward slot and of
 * tdm_op_maxpool2d_backward().
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmMaxpool2dBackwardFn(TdmDevice *dev, TdmOpCache **cache,
                                        const TdmPool2dParams *p, TdmTensor *dy,
                                        TdmTensor *workspace, const TdmTensor *x_like,
                                        TdmTensor *dx, GError **error);
/**
 * TdmAvgpool2dForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the window's geometry (count_include_pad applies)
 * @x: the input, f32 [N, C, H, W]
 * @y: (out): a slot: [N, C, OH, OW], each window's mean
 * @error: return location for a #GError, or NULL
 *
 * The type of the avgpool2d_forward slot and of tdm_op_avgpool2d_forward().
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_INVALID_ARG for
 * padding over half the kernel)
 */
typedef gboolean TdmAvgpool2dForwardFn(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                       TdmTensor *x, TdmTensor *y, GError **error);
/**
 * TdmAvgpool2dBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the forward's geometry
 * @dy: the output gradient, [N, C, OH, OW]
 * @x_like: the forward's input, or any tensor of its shape, device and
 *   layout
 * @dx: (out): a slot shaped like @x_like
 * @error: return location for a #GError, or NULL
 *
 * The type of the avgpool2d_backward slot and of
 * tdm_op_avgpool2d_backward(): spreads each dy over its window.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmAvgpool2dBackwardFn(TdmDevice *dev, TdmOpCache **cache,
                                        const TdmPool2dParams *p, TdmTensor *dy,
                                        const TdmTensor *x_like, TdmTensor *dx, GError **error);
/**
 * TdmGlobalAvgpoolForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @x: the input, f32 [N, C, H, W]
 * @y: (out): a slot: [N, C], plain: the mean over H and W
 * @error: return location for a #GError, or NULL
 *
 * The type of the global_avgpool_forward slot and of
 * tdm_op_global_avgpool_forward().
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmGlobalAvgpoolForwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                           TdmTensor *y, GError **error);
/**
 * TdmGlobalAvgpoolBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @dy: the output gradient, [N, C] or [N, C, 1, 1]
 * @x_like: the forward's input, or any tensor of its shape, device and
 *   layout
 * @dx: (out): a slot shaped like @x_like: dy / (H W) everywhere
 * @error: return location for a #GError, or NULL
 *
 * The type of the global_avgpool_backward slot and of
 * tdm_op_global_avgpool_backward().
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmGlobalAvgpoolBackwardFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                            const TdmTensor *x_like, TdmTensor *dx, GError **error);
/**
 * TdmSoftmaxXentFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @logits: f32 [N, K], N and K >= 1
 * @labels: i32 or i64 [N], each in [0, K)
 * @label_smoothing: in [0, 1]; 0 = none (PyTorch's formula)
 * @loss: (out) (optional): the host's float that gets the mean loss, or NULL
 * @dlogits: (out) (nullable): a slot: the gradient of the MEAN loss,
 *   [N, K]; or NULL
 * @correct: (out) (optional): the number of rows whose argmax (first
 *   maximum) is the label, or NULL
 * @error: return location for a #GError, or NULL
 *
 * The type of the softmax_xent slot and of tdm_op_softmax_xent(): the mean
 * softmax cross-entropy. Filling @loss or @correct waits for the device.
 *
 * Returns: TRUE, or FALSE with @error set (a label outside [0, K) names
 * the row and the label)
 */
typedef gboolean TdmSoftmaxXentFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                  TdmTensor *labels, float label_smoothing, float *loss,
                                  TdmTensor *dlogits, int64_t *correct, GError **error);
/**
 * TdmSoftmaxXentStatsFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @logits: f32 [N, K], N and K >= 1
 * @labels: i32 or i64 [N], each in [0, K)
 * @label_smoothing: in [0, 1]
 * @dlogits: (out) (nullable): a slot: the gradient of the MEAN loss; or
 *   NULL
 * @stats: (inout): f32 [%TDM_XENT_STATS_LEN], plain, on @dev: the batch's
 *   loss SUM over rows is added at %TDM_XENT_STATS_LOSS_SUM and its correct
 *   count at %TDM_XENT_STATS_CORRECT
 * @error: return location for a #GError, or NULL
 *
 * The type of the softmax_xent_stats slot and of
 * tdm_op_softmax_xent_stats(): #TdmSoftmaxXentFn without a host result, so
 * that a training step never waits for the device; the caller reads and
 * clears @stats once per logging interval.
 *
 * Returns: TRUE, or FALSE with @error set (labels out of range as for
 * #TdmSoftmaxXentFn, when the backend checks them on the device)
 */
typedef gboolean TdmSoftmaxXentStatsFn(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                       TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                       TdmTensor *stats, GError **error);
/**
 * TdmDropoutForwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the probability of dropping an element, in [0, 1]
 * @seed: the mask's seed: the same seed gives the same mask on every
 *   backend
 * @x: the input, f32
 * @mask: (out): a slot: u8, shaped like @x, 1 where kept
 * @y: (out): a slot: x / (1 - p) where kept, else 0
 * @error: return location for a #GError, or NULL
 *
 * The type of the dropout_forward slot and of tdm_op_dropout_forward(). The
 * mask depends on (@seed, element index i) only: h = splitmix64_mix(seed +
 * (i + 1) * 0x9e3779b97f4a7c15), element i kept iff (h >> 40) * 2^-24 >= p.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_INVALID_ARG for @p
 * outside [0, 1])
 */
typedef gboolean TdmDropoutForwardFn(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                                     TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
/**
 * TdmDropoutBackwardFn:
 * @dev: the device the op runs on; every tensor is on it
 * @cache: (nullable): the call site's op cache slot, or NULL
 * @p: the forward's probability
 * @mask: the forward's mask, u8
 * @dy: the output gradient, shaped like @mask
 * @dx: (out): a slot: dy / (1 - p) where kept, else 0
 * @error: return location for a #GError, or NULL
 *
 * The type of the dropout_backward slot and of tdm_op_dropout_backward().
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmDropoutBackwardFn(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                                      TdmTensor *dy, TdmTensor *dx, GError **error);
/**
 * TdmFillFn:
 * @dev: the device the op runs on
 * @x: f32, plain contiguous, with storage
 * @value: the value
 * @error: return location for a #GError, or NULL
 *
 * The type of the fill slot and of tdm_op_fill(): every element of @x =
 * @value.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmFillFn(TdmDevice *dev, TdmTensor *x, float value, GError **error);
/**
 * TdmCopyFn:
 * @dev: the device the op runs on
 * @src: plain contiguous, any dtype
 * @dst: plain contiguous, @src's dtype and number of elements (the shapes
 *   may differ)
 * @error: return location for a #GError, or NULL
 *
 * The type of the copy slot and of tdm_op_copy(): @dst = @src, element by
 * element, on one device (tdm_tensor_copy() copies between devices).
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmCopyFn(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
/**
 * TdmScaleFn:
 * @dev: the device the op runs on
 * @x: (inout): f32, plain contiguous
 * @alpha: the factor
 * @error: return location for a #GError, or NULL
 *
 * The type of the scale slot and of tdm_op_scale(): x *= alpha.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmScaleFn(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
/**
 * TdmAxpyFn:
 * @dev: the device the op runs on
 * @alpha: the factor
 * @x: f32, plain contiguous
 * @y: (inout): f32, plain contiguous, @x's number of elements
 * @error: return location for a #GError, or NULL
 *
 * The type of the axpy slot and of tdm_op_axpy(): y += alpha x.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmAxpyFn(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error);
/**
 * TdmSumSquaresFn:
 * @dev: the device the op runs on
 * @x: f32, plain contiguous
 * @result: (out): the host's double that gets the sum of x squared
 * @error: return location for a #GError, or NULL
 *
 * The type of the sum_squares slot and of tdm_op_sum_squares(); waits for
 * the device.
 *
 * Returns: TRUE, or FALSE with @error set
 */
typedef gboolean TdmSumSquaresFn(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
/**
 * TdmCastFn:
 * @dev: the device the op runs on
 * @src: plain contiguous, any dtype
 * @dst: plain contiguous with @src's shape, in the dtype to convert to; or
 *   an empty slot of that dtype, which the op shapes like @src
 * @normalize_u8: u8 to a floating type maps 0..255 to 0..1 (else to
 *   0.0..255.0)
 * @error: return location for a #GError, or NULL
 *
 * The type of the cast slot and of tdm_op_cast(): @dst = @src converted to
 * @dst's dtype.
 *
 * Returns: TRUE, or FALSE with @error set (a backend may refuse a pair of
 * dtypes it does not convert with %TDM_ERROR_UNSUPPORTED; ref converts
 * every pair)
 */
typedef gboolean TdmCastFn(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                           GError **error);
/**
 * TdmSgdUpdateFn:
 * @dev: the device the op runs on
 * @hp: the hyper-parameters
 * @param: (inout): f32, plain contiguous: updated in place
 * @grad: f32, @param's number of elements (zeroed after the update by the
 *   _zero_grad form)
 * @momentum_buf: (inout) (nullable): f32, @param's number of elements; may
 *   be NULL only when @hp's momentum is 0
 * @error: return location for a #GError, or NULL
 *
 * The type of the sgd_update and sgd_update_zero_grad slots and front
 * ends: PyTorch's SGD. g' = g + wd p; buf = momentum buf + (1 - dampening)
 * g' (buf = g' on the first step); d = nesterov ? g' + momentum buf : buf;
 * p -= lr d.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_INVALID_ARG for a
 * missing @hp or momentum buffer)
 */
/* sgd_update and sgd_update_zero_grad */
typedef gboolean TdmSgdUpdateFn(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
/**
 * TdmAdamwUpdateFn:
 * @dev: the device the op runs on
 * @hp: the hyper-parameters (step >= 1)
 * @param: (inout): f32, plain contiguous: updated in place
 * @grad: f32, @param's number of elements (zeroed after the update by the
 *   _zero_grad form)
 * @exp_avg: (inout): f32, the first moment, @param's number of elements
 * @exp_avg_sq: (inout): f32, the second moment, as @exp_avg
 * @error: return location for a #GError, or NULL
 *
 * The type of the adamw_update and adamw_update_zero_grad slots and front
 * ends: PyTorch's AdamW (decoupled weight decay, bias-corrected).
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_INVALID_ARG for a
 * step < 1)
 */
/* adamw_update and adamw_update_zero_grad */
typedef gboolean TdmAdamwUpdateFn(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                  TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                  GError **error);
/**
 * TdmDeviceInfoFn:
 * @dev: the device
 * @info: (inout): filled by the core already (unknown figures -1, the
 *   core's allocation counts); the backend overwrites what it knows
 * @error: return location for a #GError, or NULL
 *
 * The type of the device_info slot, behind tdm_device_info().
 *
 * Returns: TRUE, or FALSE with @error set when the device cannot be queried
 */
typedef gboolean TdmDeviceInfoFn(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
/**
 * TdmBackendClass:
 * @iface_version: %TDM_BACKEND_IFACE_VERSION
 * @struct_size: sizeof(TdmBackendClass)
 * @device_type: the device spec's prefix: "ref", "cpu", "cuda"; a static
 *   string
 * @device_count: how many devices the backend has now (optional: NULL
 *   means one)
 * @device_open: prepares device @dev->index and sets @dev->priv; called
 *   once per device, on first use; FALSE with the error set makes
 *   tdm_device_get() fail (the error prefixed with the device's name),
 *   and then frees what it made: device_close is not called (optional:
 *   NULL means nothing to open)
 * @device_close: releases @dev->priv. The core does not call it at
 *   present: devices live until the process ends (optional: NULL means
 *   nothing to release)
 * @synchronize: waits until every op queued on @dev has finished (optional:
 *   NULL means every op has finished when it returns)
 * @set_num_threads: sets the number of compute threads, 0 = the backend's
 *   default (optional: NULL means the backend chooses alone)
 * @alloc: a #TdmAllocFn: zero-filled device memory
 * @free: a #TdmFreeFn
 * @host_alloc: page-locked host memory for fast transfers, (transfer full),
 *   freed with @host_free; NULL with the error set on failure (optional:
 *   NULL means no pinned memory, the loader uses g_malloc(); set together
 *   with @host_free)
 * @host_free: frees a block of @host_alloc
 * @copy_h2d: copies @n raw bytes from the host to the device; an @async
 *   copy is ordered on the device's stream and the host buffer must outlive
 *   it (optional: NULL means the loader writes each batch through @write)
 * @copy_d2h: copies @n raw bytes from the device to the host, waiting for
 *   the work queued before (optional: NULL means the core reads tensors
 *   through @read)
 * @copy_d2d: copies @n raw bytes within the device (optional: NULL means
 *   the core copies tensors through @copy)
 * @read: a #TdmReadFn: a tensor of any layout of this backend to plain host
 *   data
 * @write: a #TdmWriteFn: plain host data into a tensor of any layout
 * @reorder: a #TdmReorderFn: a tensor in another layout (Flatten, op
 *   boundaries)
 * @layout_name: a #TdmLayoutNameFn: "plain", "nChw16c"...
 * @cache_free: frees what the backend keeps in a #TdmOpCache (optional:
 *   NULL means the backend keeps nothing in op caches)
 * @gemm: a #TdmGemmFn: c = alpha op(a) @ op(b) + beta c (+ bias)
 * @bias_grad: a #TdmBiasGradFn: bias_grad (acc) += the sum of dy over every
 *   dimension but 1
 * @conv2d_forward: a #TdmConv2dForwardFn: y = conv2d(x, w) + bias
 * @conv2d_backward_data: a #TdmConv2dBackwardDataFn: dx (out)
 * @conv2d_backward_filter: a #TdmConv2dBackwardFilterFn: dw, db (acc)
 * @batchnorm_forward: a #TdmBatchnormForwardFn: batch normalisation,
 *   training or eval
 * @batchnorm_backward: a #TdmBatchnormBackwardFn: training-mode backward,
 *   dx (out), dgamma and dbeta (acc)
 * @relu_forward: a #TdmReluForwardFn: y = max(x, 0), in place allowed
 * @relu_backward: a #TdmReluBackwardFn: dx = dy where y > 0
 * @add: a #TdmAddFn: y = a + b, in place allowed
 * @maxpool2d_forward: a #TdmMaxpool2dForwardFn (padding at most half the
 *   kernel, else %TDM_ERROR_INVALID_ARG)
 * @maxpool2d_backward: a #TdmMaxpool2dBackwardFn
 * @avgpool2d_forward: a #TdmAvgpool2dForwardFn
 * @avgpool2d_backward: a #TdmAvgpool2dBackwardFn
 * @global_avgpool_forward: a #TdmGlobalAvgpoolForwardFn: y [N, C] = the
 *   mean over H and W
 * @global_avgpool_backward: a #TdmGlobalAvgpoolBackwardFn: spreads
 *   dy / (H W)
 * @softmax_xent: a #TdmSoftmaxXentFn: mean softmax cross-entropy, with the
 *   host's loss and correct count
 * @dropout_forward: a #TdmDropoutForwardFn: the same mask on every backend
 *   for one seed
 * @dropout_backward: a #TdmDropoutBackwardFn
 * @fill: a #TdmFillFn: x = value
 * @copy: a #TdmCopyFn: dst = src, same number of elements
 * @scale: a #TdmScaleFn: x *= alpha
 * @axpy: a #TdmAxpyFn: y += alpha x
 * @sum_squares: a #TdmSumSquaresFn: the host's sum of x squared
 * @cast: a #TdmCastFn: dst = src in dst's dtype
 * @sgd_update: a #TdmSgdUpdateFn: PyTorch's SGD over flat f32 arenas
 * @adamw_update: a #TdmAdamwUpdateFn: PyTorch's AdamW over flat f32 arenas
 * @batchnorm_relu_forward: a #TdmBatchnormReluForwardFn: batchnorm_forward
 *   then ReLU (optional: NULL means batchnorm_forward then relu_forward;
 *   set together with @batchnorm_relu_backward)
 * @batchnorm_relu_backward: a #TdmBatchnormReluBackwardFn (optional: NULL
 *   means relu_backward then batchnorm_backward; set together with
 *   @batchnorm_relu_forward)
 * @add_relu: a #TdmAddFn: y = max(a + b, 0), the residual join of a ResNet
 *   block; its backward is relu_backward on y (optional: NULL means add
 *   then relu_forward)
 * @sgd_update_zero_grad: a #TdmSgdUpdateFn: sgd_update, zeroing each
 *   gradient element once read (optional: NULL means sgd_update, then
 *   fill(grad, 0))
 * @adamw_update_zero_grad: a #TdmAdamwUpdateFn: adamw_update, zeroing the
 *   gradient (optional: NULL means adamw_update, then fill(grad, 0))
 * @conv2d_relu_forward: a #TdmConv2dForwardFn: conv2d_forward then
 *   y = max(y, 0); its backward is relu_backward on y, then the conv2d
 *   backward ops (optional: NULL means conv2d_forward then relu_forward)
 * @stream_ops: (nullable): the backend's streams and events, a static
 *   table (since 1.1; optional: NULL means the device runs everything in
 *   order on one stream, and the core falls back to copy_h2d and
 *   synchronize, see tandem/device.h)
 * @device_info: a #TdmDeviceInfoFn (since 1.1; optional: NULL means the
 *   core reports the device's name and its own allocator counts only)
 * @softmax_xent_stats: a #TdmSoftmaxXentStatsFn: softmax_xent whose loss
 *   sum and correct count stay on the device (since 1.1; optional: NULL
 *   means the front end runs softmax_xent and updates the stats through the
 *   host)
 * @set_precision: makes GEMM and convolution on @dev compute in
 *   @precision from now on; FALSE with %TDM_ERROR_UNSUPPORTED when the
 *   device cannot (since 1.2; optional: NULL means FP32 only: the core
 *   refuses any other)
 * @copy_peer: copies @n bytes from @src on @src_dev to @dst on @dst_dev,
 *   two devices of this backend, after the work queued so far on both and
 *   before the work queued later on both, without the host waiting (dp
 *   reuses both buffers right after the call) (since 1.2; optional: NULL
 *   means the core stages through host memory)
 * @batchnorm_relu_backward_ws: batchnorm_relu_backward with @y NULL: the
 *   ReLU's mask taken from the workspace alone, which the backend's
 *   training-mode batchnorm_relu_forward filled (since 1.3; optional: NULL
 *   means callers keep y for batchnorm_relu_backward; set only with the
 *   batchnorm_relu pair)
 * @reserved: NULL
 *
 * The class of a TDM_FEATURE_BACKEND feature: device management, memory
 * and the op table. A backend fills a static const one with
 * TDM_CLASS_HEADER() and gives it to tdm_plugin_add_feature(); the
 * registry keeps the pointer for the life of the process.
 *
 * Every slot is required unless it says "optional"; the registry refuses a
 * backend with a NULL required slot, or with only one of a pair that comes
 * together (%TDM_ERROR_PLUGIN naming the slot). Callers do not call the op
 * slots directly: the front ends of tandem/ops.h check the arguments first
 * (so a backend sees only tensors on its device, of the right dtypes and
 * fitting shapes) and run the unfused sequence where an optional fused slot
 * is NULL. Each slot that takes a #GError returns FALSE (NULL) with it set
 * on failure; a backend names the op and the device in the message, and
 * reports what it cannot do (a layout, a dtype) with
 * %TDM_ERROR_UNSUPPORTED and a failed library call with
 * %TDM_ERROR_BACKEND.
 */
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
    /* Training-mode backward: dx (out), dgamma/dbeta (acc). Since 1.3, dx
     * may be dy itself when dy has x's layout (in place). */
    gboolean (*batchnorm_backward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                   TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                   float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                   GError **error);

    /* ---- elementwise ---- */
    /* y (out) = max(x, 0); y may be x (in place). */
    gboolean (*relu_forward)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                             GError **error);
    /* dx (out) = dy where y > 0 else 0 (y = the forward output). Since 1.3,
     * dx may be dy itself when dy has y's layout (in place). */
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
     * (acc, may be NULL); dx may be dy as for batchnorm_backward. (optional:
     * NULL means relu_backward then batchnorm_backward; set when
     * batchnorm_relu_forward is) */
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

    /* since 1.3: batchnorm_relu_backward_ws */
    /* batchnorm_relu_backward without y: the mask (y > 0) comes from the
     * workspace alone, which the backend's training-mode
     * batchnorm_relu_forward filled, so that a caller need not keep y
     * (or compute it again) for the backward. dx may be dy as there.
     * (optional: NULL means callers pass y to batchnorm_relu_backward; set
     * only with the batchnorm_relu pair) */
    gboolean (*batchnorm_relu_backward_ws)(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                           TdmTensor *workspace, TdmTensor *dy, TdmTensor *gamma,
                                           TdmTensor *save_mean, TdmTensor *save_var, float eps,
                                           TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                           GError **error);

    gpointer reserved[4];
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

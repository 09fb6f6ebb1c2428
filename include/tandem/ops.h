/* SPDX-License-Identifier: MIT */
/**
 * SECTION:ops
 * @title: Op front ends
 * @short_description: the one way the core, strategies and tools run a
 *   backend op
 * @include: tandem/tandem.h
 *
 * The op front ends: the one way the core, strategies and tools run a
 * backend op.
 *
 * There is one tdm_op_* function per op of TdmBackendClass, declared with
 * the type of its slot (backend.h: TdmGemmFn for gemm...), so its
 * arguments are the backend op's; backend.h says what each op computes.
 * A front end:
 *  - checks its arguments once, before the backend sees them: every tensor
 *    given is on `dev`, inputs have storage, dtypes are those the op takes
 *    and shapes fit together. A failure is a GError whose message starts
 *    with the op's name and names the shapes involved ("gemm: a [64, 784]
 *    and b [512, 700]: inner dimensions differ"): TDM_ERROR_SHAPE for
 *    shapes, TDM_ERROR_INVALID_ARG for anything else. Limits of one backend
 *    (a layout it cannot read, say) are still that backend's to report.
 *  - picks the fused op when the backend has it and runs the unfused
 *    sequence otherwise (batchnorm_relu_*, conv2d_relu_forward, add_relu,
 *    *_update_zero_grad, softmax_xent_stats), so callers never look at the
 *    backend table.
 *    In an unfused sequence the first op gets `cache` and the ReLU or the
 *    fill that completes it runs without one.
 *  - with TDM_PROFILE=1 in the environment (read when the library loads),
 *    synchronizes the device before and after the op and adds the time to a
 *    per-op table printed on stderr when the process exits. Without it the
 *    cost is one branch per call.
 *
 * `cache` is a slot owned by the caller (see backend.h; may be NULL).
 * A NULL `dev` is a programming error: a critical warning and FALSE,
 * with no error set (g_return_val_if_fail()).
 * Outputs marked (out) are shaped by the op; (acc) outputs have their final
 * shape and are accumulated into. Tensors that may be NULL say so.
 */
#ifndef TANDEM_OPS_H
#define TANDEM_OPS_H

#include <tandem/backend.h>

G_BEGIN_DECLS

/* ---- dense algebra ---- */

/**
 * tdm_op_gemm:
 *
 * c = alpha op(a) @ op(b) + beta c (+ bias [N] per row). a, b and c are
 * plain 2-D f32; c is [M, N] already, or an empty slot when beta == 0 (then
 * it is shaped).
 *
 * Declared with the type #TdmGemmFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when a or b
 * is not 2-D, their inner dimensions differ ("gemm: a [64, 784] and b [512,
 * 700]: inner dimensions differ") or c or bias has another shape; anything
 * the backend reports.
 */
TDM_API TdmGemmFn tdm_op_gemm;
/**
 * tdm_op_bias_grad:
 *
 * bias_grad (acc, f32 [C]) += the sum of dy ([N, C] or [N, C, ...]) over
 * every dimension but 1.
 *
 * Declared with the type #TdmBiasGradFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when dy has
 * fewer than 2 dimensions or bias_grad is not [C]; anything the backend
 * reports.
 */
TDM_API TdmBiasGradFn tdm_op_bias_grad;

/* ---- convolution: x [N, C, H, W], w [O, C/groups, KH, KW], bias [O] or NULL ---- */

/**
 * tdm_op_conv2d_forward:
 *
 * y (out) = conv2d(x, w) + bias: x [N, C, H, W], w [O, C / groups, KH, KW],
 * bias [O] or NULL.
 *
 * Declared with the type #TdmConv2dForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for a
 * missing or invalid #TdmConv2dParams (stride, dilation or groups < 1,
 * padding < 0); %TDM_ERROR_SHAPE when x or w is not 4-D, the channels
 * differ or the input is smaller than the kernel; anything the backend
 * reports.
 */
TDM_API TdmConv2dForwardFn tdm_op_conv2d_forward;
/**
 * tdm_op_conv2d_relu_forward:
 *
 * tdm_op_conv2d_forward(), then y = max(y, 0): the backend's fused
 * conv2d_relu_forward when it has one, else the two ops (the ReLU in
 * place). The backward is tdm_op_relu_backward() on y, then the conv2d
 * backward ops.
 *
 * Declared with the type #TdmConv2dForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_conv2d_forward();
 * anything the backend reports.
 */
TDM_API TdmConv2dForwardFn tdm_op_conv2d_relu_forward;
/**
 * tdm_op_conv2d_backward_data:
 *
 * dx (out) = the gradient with respect to the input, shaped like x_like
 * (the f32 forward input; only its shape, device and layout are used).
 *
 * Declared with the type #TdmConv2dBackwardDataFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_conv2d_forward()
 * for the geometry; %TDM_ERROR_SHAPE when dy is not the forward's output
 * shape; anything the backend reports.
 */
TDM_API TdmConv2dBackwardDataFn tdm_op_conv2d_backward_data;
/**
 * tdm_op_conv2d_backward_filter:
 *
 * dw (acc, plain contiguous [O, C / groups, KH, KW]) += the filter's
 * gradient; db (acc, may be NULL, [O]) += the bias's.
 *
 * Declared with the type #TdmConv2dBackwardFilterFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as
 * tdm_op_conv2d_backward_data(); anything the backend reports.
 */
TDM_API TdmConv2dBackwardFilterFn tdm_op_conv2d_backward_filter;

/* ---- batch norm over x [N, C] or [N, C, H, W]; per-channel tensors are
 * f32 [C]. gamma, beta and (in training) the running stats may be NULL. ---- */

/**
 * tdm_op_batchnorm_forward:
 *
 * Batch normalisation of x ([N, C] or [N, C, H, W]) per channel; every
 * per-channel tensor is f32 [C]. gamma, beta and, in training, the running
 * statistics may be NULL; save_mean and save_var (out) may be NULL.
 *
 * Declared with the type #TdmBatchnormForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when x is
 * neither [N, C] nor [N, C, H, W], a per-channel tensor is not [C], or
 * training has one value per channel; %TDM_ERROR_INVALID_ARG when eval mode
 * has no running statistics; anything the backend reports.
 */
TDM_API TdmBatchnormForwardFn tdm_op_batchnorm_forward;
/**
 * tdm_op_batchnorm_backward:
 *
 * The training-mode backward: dx (out, may be NULL), dgamma and dbeta (acc,
 * may be NULL). dx may be dy itself when dy has x's layout: the gradient
 * is then computed in place (a backend older than interface 1.3 computes
 * it into a temporary the core copies over dy).
 *
 * Declared with the type #TdmBatchnormBackwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when dy is
 * not shaped like x or a per-channel tensor is not [C];
 * %TDM_ERROR_INVALID_ARG when dx is dy but dy's layout is not x's;
 * anything the backend reports.
 */
TDM_API TdmBatchnormBackwardFn tdm_op_batchnorm_backward;
/**
 * tdm_op_batchnorm_relu_forward:
 *
 * tdm_op_batchnorm_forward(), then y = max(y, 0). workspace (out; may be
 * NULL only in eval mode) is what the matching backward needs besides y:
 * keep it, and y, until then. The fused pair runs when the backend has both
 * halves; else batchnorm_forward and relu_forward (in place).
 *
 * Declared with the type #TdmBatchnormReluForwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as
 * tdm_op_batchnorm_forward(); %TDM_ERROR_INVALID_ARG for a NULL workspace
 * in training; anything the backend reports.
 */
TDM_API TdmBatchnormReluForwardFn tdm_op_batchnorm_relu_forward;
/**
 * tdm_op_batchnorm_relu_backward:
 *
 * batchnorm_backward of dy * (y > 0), for y and workspace (not NULL) from
 * the training-mode tdm_op_batchnorm_relu_forward() on x. Unfused, the
 * masked gradient is made in the workspace (relu_backward, then
 * batchnorm_backward). dx may be dy itself, as for
 * tdm_op_batchnorm_backward(). y may be NULL on a backend whose workspace
 * holds the whole mask (its batchnorm_relu_backward_ws slot: ref and cpu),
 * so that a caller need not keep y for the backward.
 *
 * Declared with the type #TdmBatchnormReluBackwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as
 * tdm_op_batchnorm_backward(); %TDM_ERROR_SHAPE when y is not shaped like
 * dy; %TDM_ERROR_UNSUPPORTED when y is NULL and the backend needs it;
 * anything the backend reports.
 */
TDM_API TdmBatchnormReluBackwardFn tdm_op_batchnorm_relu_backward;

/* ---- elementwise (f32, same logical shape) ---- */

/**
 * tdm_op_relu_forward:
 *
 * y (out) = max(x, 0) over f32; y may be x.
 *
 * Declared with the type #TdmReluForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for a
 * tensor on another device, without storage or not f32; anything the
 * backend reports.
 */
TDM_API TdmReluForwardFn tdm_op_relu_forward;
/**
 * tdm_op_relu_backward:
 *
 * dx (out) = dy where y > 0, else 0; y is the forward's output. dx may be
 * dy itself when dy has y's layout (in place; a backend older than
 * interface 1.3 computes it into a temporary the core copies over dy).
 *
 * Declared with the type #TdmReluBackwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when y and
 * dy differ in shape; %TDM_ERROR_INVALID_ARG when dx is dy but dy's layout
 * is not y's; anything the backend reports.
 */
TDM_API TdmReluBackwardFn tdm_op_relu_backward;
/**
 * tdm_op_add:
 *
 * y (out) = a + b, f32 of one logical shape; y may be a or b.
 *
 * Declared with the type #TdmAddFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when a and b
 * differ in shape; anything the backend reports.
 */
TDM_API TdmAddFn tdm_op_add;
/**
 * tdm_op_add_relu:
 *
 * y (out) = max(a + b, 0); y may be a or b. The backend's fused add_relu
 * when it has one, else add then relu_forward in place. The backward is
 * tdm_op_relu_backward() on y.
 *
 * Declared with the type #TdmAddFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_add(); anything the
 * backend reports.
 */
TDM_API TdmAddFn tdm_op_add_relu;

/* ---- pooling: x [N, C, H, W]; padding at most half the kernel ---- */

/**
 * tdm_op_maxpool2d_forward:
 *
 * Max pooling of x [N, C, H, W]; padding at most half the kernel. workspace
 * (out) is the backend's own (any dtype and shape): keep it for the
 * backward.
 *
 * Declared with the type #TdmMaxpool2dForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for
 * invalid #TdmPool2dParams (padding over half the kernel included);
 * %TDM_ERROR_SHAPE when x is not 4-D or smaller than the window; anything
 * the backend reports.
 */
TDM_API TdmMaxpool2dForwardFn tdm_op_maxpool2d_forward;
/**
 * tdm_op_maxpool2d_backward:
 *
 * dx (out, shaped like x_like) gets each dy at its window's maximum, from
 * the forward's workspace.
 *
 * Declared with the type #TdmMaxpool2dBackwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as
 * tdm_op_maxpool2d_forward(); %TDM_ERROR_SHAPE when dy is not the forward's
 * output shape; anything the backend reports.
 */
TDM_API TdmMaxpool2dBackwardFn tdm_op_maxpool2d_backward;
/**
 * tdm_op_avgpool2d_forward:
 *
 * Average pooling of x [N, C, H, W]; padding at most half the kernel;
 * count_include_pad as PyTorch.
 *
 * Declared with the type #TdmAvgpool2dForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as
 * tdm_op_maxpool2d_forward(); anything the backend reports.
 */
TDM_API TdmAvgpool2dForwardFn tdm_op_avgpool2d_forward;
/**
 * tdm_op_avgpool2d_backward:
 *
 * dx (out, shaped like x_like) gets each dy spread over its window.
 *
 * Declared with the type #TdmAvgpool2dBackwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as
 * tdm_op_maxpool2d_backward(); anything the backend reports.
 */
TDM_API TdmAvgpool2dBackwardFn tdm_op_avgpool2d_backward;
/**
 * tdm_op_global_avgpool_forward:
 *
 * y (out) [N, C] plain = the mean of x [N, C, H, W] over H and W.
 *
 * Declared with the type #TdmGlobalAvgpoolForwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when x is
 * not 4-D; anything the backend reports.
 */
TDM_API TdmGlobalAvgpoolForwardFn tdm_op_global_avgpool_forward;
/**
 * tdm_op_global_avgpool_backward:
 *
 * dx (out, shaped like x_like) = dy / (H W) everywhere; dy is [N, C] or [N,
 * C, 1, 1].
 *
 * Declared with the type #TdmGlobalAvgpoolBackwardFn: call it with the
 * arguments documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when dy is
 * not [N, C] of x_like; anything the backend reports.
 */
TDM_API TdmGlobalAvgpoolBackwardFn tdm_op_global_avgpool_backward;

/* ---- loss ---- */

/**
 * tdm_op_softmax_xent:
 *
 * Mean softmax cross-entropy of logits [N, K] f32 against labels [N] (i32
 * or i64), label smoothing in [0, 1]. *loss (host, may be NULL) gets the
 * mean loss, dlogits (out, may be NULL) its gradient, *correct (may be
 * NULL) the number of rows whose first argmax is the label.
 *
 * Declared with the type #TdmSoftmaxXentFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE for empty
 * logits or labels not [N]; %TDM_ERROR_INVALID_ARG for labels neither i32
 * nor i64 or a smoothing outside [0, 1]; a label outside [0, K) is found by
 * the backend, which names the row and the label; anything the backend
 * reports.
 */
TDM_API TdmSoftmaxXentFn tdm_op_softmax_xent;

/**
 * tdm_op_softmax_xent_stats:
 *
 * The same loss and dlogits as tdm_op_softmax_xent(), but the batch's loss
 * sum over rows and its correct count are added to stats (acc, f32
 * [%TDM_XENT_STATS_LEN], plain, see %TDM_XENT_STATS_LOSS_SUM) on the
 * device: no wait for the host where the backend has the op. Without it,
 * softmax_xent runs and stats is updated through the host (a read and a
 * write of stats per call).
 *
 * Declared with the type #TdmSoftmaxXentStatsFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_softmax_xent();
 * %TDM_ERROR_SHAPE when stats is not f32 [%TDM_XENT_STATS_LEN]; anything
 * the backend reports.
 */
TDM_API TdmSoftmaxXentStatsFn tdm_op_softmax_xent_stats;

/* ---- dropout: p in [0, 1]; mask (out, u8) ---- */

/**
 * tdm_op_dropout_forward:
 *
 * y (out) = x / (1 - p) where kept, else 0, with p in [0, 1]; mask (out,
 * u8) records which were kept, the same on every backend for one seed.
 *
 * Declared with the type #TdmDropoutForwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for p
 * outside [0, 1]; anything the backend reports.
 */
TDM_API TdmDropoutForwardFn tdm_op_dropout_forward;
/**
 * tdm_op_dropout_backward:
 *
 * dx (out) = dy / (1 - p) where mask (u8) kept, else 0.
 *
 * Declared with the type #TdmDropoutBackwardFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for p
 * outside [0, 1] or a mask not u8; %TDM_ERROR_SHAPE when mask and dy differ
 * in shape; anything the backend reports.
 */
TDM_API TdmDropoutBackwardFn tdm_op_dropout_backward;

/* ---- vector ops on plain contiguous tensors ---- */

/**
 * tdm_op_fill:
 *
 * x (f32, plain contiguous) = value.
 *
 * Declared with the type #TdmFillFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for a
 * tensor on another device, without storage, not f32 or not contiguous;
 * anything the backend reports.
 */
TDM_API TdmFillFn tdm_op_fill;
/**
 * tdm_op_copy:
 *
 * dst = src, on one device: plain contiguous, same dtype and number of
 * elements (tdm_tensor_copy() copies between devices).
 *
 * Declared with the type #TdmCopyFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for
 * another dtype; %TDM_ERROR_SHAPE for another number of elements; anything
 * the backend reports.
 */
TDM_API TdmCopyFn tdm_op_copy;
/**
 * tdm_op_scale:
 *
 * x (f32, plain contiguous) *= alpha.
 *
 * Declared with the type #TdmScaleFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_fill(); anything
 * the backend reports.
 */
TDM_API TdmScaleFn tdm_op_scale;
/**
 * tdm_op_axpy:
 *
 * y += alpha x: f32, plain contiguous, same number of elements.
 *
 * Declared with the type #TdmAxpyFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_fill();
 * %TDM_ERROR_SHAPE for another number of elements; anything the backend
 * reports.
 */
TDM_API TdmAxpyFn tdm_op_axpy;
/**
 * tdm_op_sum_squares:
 *
 * *result (host) = the sum of x (f32, plain contiguous) squared; waits for
 * the device.
 *
 * Declared with the type #TdmSumSquaresFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_fill(); anything
 * the backend reports.
 */
TDM_API TdmSumSquaresFn tdm_op_sum_squares;
/**
 * tdm_op_cast:
 *
 * dst = src converted to dst's dtype; dst has src's shape, or is an empty
 * slot (then it is shaped).
 *
 * Declared with the type #TdmCastFn: call it with the arguments documented
 * there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_SHAPE when dst has
 * storage and another shape; anything the backend reports.
 */
TDM_API TdmCastFn tdm_op_cast;

/* ---- optimizer updates over f32 tensors of one number of elements ---- */

/**
 * tdm_op_sgd_update:
 *
 * One SGD update of param (f32, plain contiguous) from grad, PyTorch's
 * formula; momentum_buf may be NULL when hp->momentum == 0.
 *
 * Declared with the type #TdmSgdUpdateFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for a
 * NULL @hp or a missing momentum buffer; %TDM_ERROR_SHAPE when the tensors
 * differ in number of elements; anything the backend reports.
 */
TDM_API TdmSgdUpdateFn tdm_op_sgd_update;
/**
 * tdm_op_adamw_update:
 *
 * One AdamW update of param from grad and the two moments; hp->step >= 1.
 *
 * Declared with the type #TdmAdamwUpdateFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: %TDM_ERROR_INVALID_ARG for a
 * NULL @hp or a step < 1; %TDM_ERROR_SHAPE when the tensors differ in
 * number of elements; anything the backend reports.
 */
TDM_API TdmAdamwUpdateFn tdm_op_adamw_update;
/**
 * tdm_op_sgd_update_zero_grad:
 *
 * tdm_op_sgd_update(), then grad = 0: the backend's fused
 * sgd_update_zero_grad when it has one, else the update then fill.
 *
 * Declared with the type #TdmSgdUpdateFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_sgd_update();
 * anything the backend reports.
 */
TDM_API TdmSgdUpdateFn tdm_op_sgd_update_zero_grad;
/**
 * tdm_op_adamw_update_zero_grad:
 *
 * tdm_op_adamw_update(), then grad = 0 (fused when the backend can).
 *
 * Declared with the type #TdmAdamwUpdateFn: call it with the arguments
 * documented there, which are checked before the backend runs.
 *
 * Returns: TRUE, or FALSE with the error set: as tdm_op_adamw_update();
 * anything the backend reports.
 */
TDM_API TdmAdamwUpdateFn tdm_op_adamw_update_zero_grad;

G_END_DECLS

#endif /* TANDEM_OPS_H */

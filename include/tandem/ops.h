/* SPDX-License-Identifier: MIT */
/* tandem/ops.h - the op front ends: the one way the core, strategies and
 * tools run a backend op.
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
 * Outputs marked (out) are shaped by the op; (acc) outputs have their final
 * shape and are accumulated into. Tensors that may be NULL say so.
 */
#ifndef TANDEM_OPS_H
#define TANDEM_OPS_H

#include <tandem/backend.h>

G_BEGIN_DECLS

/* ---- dense algebra ---- */

/* c = alpha * op(a) @ op(b) + beta * c (+ bias [N] per row, may be NULL).
 * a, b, c plain 2-D f32; c is [M, N] already, or an empty slot when
 * beta == 0 (then it is shaped). */
TDM_API TdmGemmFn tdm_op_gemm;
/* bias_grad (acc) [C] += sum of dy ([N, C] or [N, C, ...]) over every dim but 1. */
TDM_API TdmBiasGradFn tdm_op_bias_grad;

/* ---- convolution: x [N, C, H, W], w [O, C/groups, KH, KW], bias [O] or NULL ---- */

TDM_API TdmConv2dForwardFn tdm_op_conv2d_forward;
/* conv2d_forward then y = max(y, 0) (in place when unfused). */
TDM_API TdmConv2dForwardFn tdm_op_conv2d_relu_forward;
/* dx (out) shaped like x_like (the f32 forward input; only its shape,
 * device and layout are used). */
TDM_API TdmConv2dBackwardDataFn tdm_op_conv2d_backward_data;
/* dw (acc) [O, C/groups, KH, KW]; db (acc, may be NULL) [O]. */
TDM_API TdmConv2dBackwardFilterFn tdm_op_conv2d_backward_filter;

/* ---- batch norm over x [N, C] or [N, C, H, W]; per-channel tensors are
 * f32 [C]. gamma, beta and (in training) the running stats may be NULL. ---- */

TDM_API TdmBatchnormForwardFn tdm_op_batchnorm_forward;
/* dx (out, may be NULL), dgamma/dbeta (acc, may be NULL). */
TDM_API TdmBatchnormBackwardFn tdm_op_batchnorm_backward;
/* batchnorm_forward then y = max(y, 0). workspace (out; may be NULL only in
 * eval mode) is what the matching backward needs besides y; keep it, and
 * y, until then. The fused pair runs when the backend has both halves. */
TDM_API TdmBatchnormReluForwardFn tdm_op_batchnorm_relu_forward;
/* batchnorm_backward of dy * (y > 0), y and workspace (not NULL) from the
 * training-mode tdm_op_batchnorm_relu_forward on x. Unfused, the masked
 * gradient is made in the workspace. */
TDM_API TdmBatchnormReluBackwardFn tdm_op_batchnorm_relu_backward;

/* ---- elementwise (f32, same logical shape) ---- */

TDM_API TdmReluForwardFn tdm_op_relu_forward;
/* dx (out) = dy where y > 0, else 0. */
TDM_API TdmReluBackwardFn tdm_op_relu_backward;
/* y (out) = a + b; y may be a or b. */
TDM_API TdmAddFn tdm_op_add;
/* y (out) = max(a + b, 0); y may be a or b. */
TDM_API TdmAddFn tdm_op_add_relu;

/* ---- pooling: x [N, C, H, W]; padding at most half the kernel ---- */

/* workspace (out) is the backend's own (any dtype and shape); keep it for
 * the backward. */
TDM_API TdmMaxpool2dForwardFn tdm_op_maxpool2d_forward;
TDM_API TdmMaxpool2dBackwardFn tdm_op_maxpool2d_backward;
TDM_API TdmAvgpool2dForwardFn tdm_op_avgpool2d_forward;
TDM_API TdmAvgpool2dBackwardFn tdm_op_avgpool2d_backward;
/* y (out) [N, C] plain; dy is [N, C] or [N, C, 1, 1]. */
TDM_API TdmGlobalAvgpoolForwardFn tdm_op_global_avgpool_forward;
TDM_API TdmGlobalAvgpoolBackwardFn tdm_op_global_avgpool_backward;

/* ---- loss ---- */

/* Mean softmax cross-entropy of logits [N, K] f32 against labels [N] (i32
 * or i64), label smoothing in [0, 1]. *loss (host, may be NULL) gets the
 * mean loss, dlogits (out, may be NULL) its gradient, *correct (may be
 * NULL) the number of rows whose first argmax is the label. */
TDM_API TdmSoftmaxXentFn tdm_op_softmax_xent;

/* The same loss and dlogits, but the batch's loss sum over rows and its
 * correct count are added to stats (acc, f32 [TDM_XENT_STATS_LEN], plain,
 * see TDM_XENT_STATS_*) on the device: no wait for the host where the
 * backend has the op. Without it, softmax_xent runs and stats is updated
 * through the host. */
TDM_API TdmSoftmaxXentStatsFn tdm_op_softmax_xent_stats;

/* ---- dropout: p in [0, 1]; mask (out, u8) ---- */

TDM_API TdmDropoutForwardFn tdm_op_dropout_forward;
TDM_API TdmDropoutBackwardFn tdm_op_dropout_backward;

/* ---- vector ops on plain contiguous tensors ---- */

/* x (f32) = value. */
TDM_API TdmFillFn tdm_op_fill;
/* dst = src: same dtype and number of elements. */
TDM_API TdmCopyFn tdm_op_copy;
/* x (f32) *= alpha. */
TDM_API TdmScaleFn tdm_op_scale;
/* y += alpha x: f32, same number of elements. */
TDM_API TdmAxpyFn tdm_op_axpy;
/* *result (host) = sum of x (f32) squared. */
TDM_API TdmSumSquaresFn tdm_op_sum_squares;
/* dst = src converted to dst's dtype; dst has src's shape, or is an empty
 * slot (then it is shaped). */
TDM_API TdmCastFn tdm_op_cast;

/* ---- optimizer updates over f32 tensors of one number of elements ---- */

/* momentum_buf may be NULL when hp->momentum == 0. */
TDM_API TdmSgdUpdateFn tdm_op_sgd_update;
/* hp->step >= 1. */
TDM_API TdmAdamwUpdateFn tdm_op_adamw_update;
/* The update, then grad = 0 (fused when the backend can). */
TDM_API TdmSgdUpdateFn tdm_op_sgd_update_zero_grad;
TDM_API TdmAdamwUpdateFn tdm_op_adamw_update_zero_grad;

G_END_DECLS

#endif /* TANDEM_OPS_H */

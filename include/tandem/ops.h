/* tandem/ops.h - the op front ends: the one way the core, strategies and
 * tools run a backend op.
 *
 * There is one tdm_op_* function per op of TdmBackendClass (backend.h says
 * what each op computes; the arguments here are the same, in the same
 * order). A front end:
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
TDM_API gboolean tdm_op_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                             float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                             TdmTensor *bias, GError **error);
/* bias_grad (acc) [C] += sum of dy ([N, C] or [N, C, ...]) over every dim but 1. */
TDM_API gboolean tdm_op_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                  TdmTensor *bias_grad, GError **error);

/* ---- convolution: x [N, C, H, W], w [O, C/groups, KH, KW], bias [O] or NULL ---- */

TDM_API gboolean tdm_op_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                       TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                       GError **error);
/* conv2d_forward then y = max(y, 0) (in place when unfused). */
TDM_API gboolean tdm_op_conv2d_relu_forward(TdmDevice *dev, TdmOpCache **cache,
                                            const TdmConv2dParams *p, TdmTensor *x, TdmTensor *w,
                                            TdmTensor *bias, TdmTensor *y, GError **error);
/* dx (out) shaped like x_like (the f32 forward input; only its shape,
 * device and layout are used). */
TDM_API gboolean tdm_op_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache,
                                             const TdmConv2dParams *p, TdmTensor *dy, TdmTensor *w,
                                             const TdmTensor *x_like, TdmTensor *dx,
                                             GError **error);
/* dw (acc) [O, C/groups, KH, KW]; db (acc, may be NULL) [O]. */
TDM_API gboolean tdm_op_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache,
                                               const TdmConv2dParams *p, TdmTensor *x,
                                               TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                               GError **error);

/* ---- batch norm over x [N, C] or [N, C, H, W]; per-channel tensors are
 * f32 [C]. gamma, beta and (in training) the running stats may be NULL. ---- */

TDM_API gboolean tdm_op_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                          TdmTensor *gamma, TdmTensor *beta,
                                          TdmTensor *running_mean, TdmTensor *running_var,
                                          float momentum, float eps, gboolean training,
                                          TdmTensor *save_mean, TdmTensor *save_var, TdmTensor *y,
                                          GError **error);
/* dx (out, may be NULL), dgamma/dbeta (acc, may be NULL). */
TDM_API gboolean tdm_op_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                           TdmTensor *dy, TdmTensor *gamma, TdmTensor *save_mean,
                                           TdmTensor *save_var, float eps, TdmTensor *dx,
                                           TdmTensor *dgamma, TdmTensor *dbeta, GError **error);
/* batchnorm_forward then y = max(y, 0). workspace (out; may be NULL only in
 * eval mode) is what the matching backward needs besides y; keep it, and
 * y, until then. The fused pair runs when the backend has both halves. */
TDM_API gboolean tdm_op_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                               TdmTensor *gamma, TdmTensor *beta,
                                               TdmTensor *running_mean, TdmTensor *running_var,
                                               float momentum, float eps, gboolean training,
                                               TdmTensor *save_mean, TdmTensor *save_var,
                                               TdmTensor *workspace, TdmTensor *y, GError **error);
/* batchnorm_backward of dy * (y > 0), y and workspace (not NULL) from the
 * training-mode tdm_op_batchnorm_relu_forward on x. Unfused, the masked
 * gradient is made in the workspace. */
TDM_API gboolean tdm_op_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                                TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                                TdmTensor *gamma, TdmTensor *save_mean,
                                                TdmTensor *save_var, float eps, TdmTensor *dx,
                                                TdmTensor *dgamma, TdmTensor *dbeta,
                                                GError **error);

/* ---- elementwise (f32, same logical shape) ---- */

TDM_API gboolean tdm_op_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                                     GError **error);
/* dx (out) = dy where y > 0, else 0. */
TDM_API gboolean tdm_op_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y,
                                      TdmTensor *dy, TdmTensor *dx, GError **error);
/* y (out) = a + b; y may be a or b. */
TDM_API gboolean tdm_op_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                            TdmTensor *y, GError **error);
/* y (out) = max(a + b, 0); y may be a or b. */
TDM_API gboolean tdm_op_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                                 TdmTensor *y, GError **error);

/* ---- pooling: x [N, C, H, W]; padding at most half the kernel ---- */

/* workspace (out) is the backend's own (any dtype and shape); keep it for
 * the backward. */
TDM_API gboolean tdm_op_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache,
                                          const TdmPool2dParams *p, TdmTensor *x, TdmTensor *y,
                                          TdmTensor *workspace, GError **error);
TDM_API gboolean tdm_op_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache,
                                           const TdmPool2dParams *p, TdmTensor *dy,
                                           TdmTensor *workspace, const TdmTensor *x_like,
                                           TdmTensor *dx, GError **error);
TDM_API gboolean tdm_op_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache,
                                          const TdmPool2dParams *p, TdmTensor *x, TdmTensor *y,
                                          GError **error);
TDM_API gboolean tdm_op_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache,
                                           const TdmPool2dParams *p, TdmTensor *dy,
                                           const TdmTensor *x_like, TdmTensor *dx, GError **error);
/* y (out) [N, C] plain; dy is [N, C] or [N, C, 1, 1]. */
TDM_API gboolean tdm_op_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                               TdmTensor *y, GError **error);
TDM_API gboolean tdm_op_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                                const TdmTensor *x_like, TdmTensor *dx,
                                                GError **error);

/* ---- loss ---- */

/* Mean softmax cross-entropy of logits [N, K] f32 against labels [N] (i32
 * or i64), label smoothing in [0, 1]. *loss (host, may be NULL) gets the
 * mean loss, dlogits (out, may be NULL) its gradient, *correct (may be
 * NULL) the number of rows whose first argmax is the label. */
TDM_API gboolean tdm_op_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                     TdmTensor *labels, float label_smoothing, float *loss,
                                     TdmTensor *dlogits, int64_t *correct, GError **error);

/* The same loss and dlogits, but the batch's loss sum over rows and its
 * correct count are added to stats (acc, f32 [TDM_XENT_STATS_LEN], plain,
 * see TDM_XENT_STATS_*) on the device: no wait for the host where the
 * backend has the op. Without it, softmax_xent runs and stats is updated
 * through the host. */
TDM_API gboolean tdm_op_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                           TdmTensor *labels, float label_smoothing,
                                           TdmTensor *dlogits, TdmTensor *stats, GError **error);

/* ---- dropout: p in [0, 1]; mask (out, u8) ---- */

TDM_API gboolean tdm_op_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                                        TdmTensor *x, TdmTensor *mask, TdmTensor *y,
                                        GError **error);
TDM_API gboolean tdm_op_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p,
                                         TdmTensor *mask, TdmTensor *dy, TdmTensor *dx,
                                         GError **error);

/* ---- vector ops on plain contiguous tensors ---- */

/* x (f32) = value. */
TDM_API gboolean tdm_op_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error);
/* dst = src: same dtype and number of elements. */
TDM_API gboolean tdm_op_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
/* x (f32) *= alpha. */
TDM_API gboolean tdm_op_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
/* y += alpha x: f32, same number of elements. */
TDM_API gboolean tdm_op_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y,
                             GError **error);
/* *result (host) = sum of x (f32) squared. */
TDM_API gboolean tdm_op_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
/* dst = src converted to dst's dtype; dst has src's shape, or is an empty
 * slot (then it is shaped). */
TDM_API gboolean tdm_op_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                             GError **error);

/* ---- optimizer updates over f32 tensors of one number of elements ---- */

/* momentum_buf may be NULL when hp->momentum == 0. */
TDM_API gboolean tdm_op_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                   TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
/* hp->step >= 1. */
TDM_API gboolean tdm_op_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                     TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                     GError **error);
/* The update, then grad = 0 (fused when the backend can). */
TDM_API gboolean tdm_op_sgd_update_zero_grad(TdmDevice *dev, const TdmSgdParams *hp,
                                             TdmTensor *param, TdmTensor *grad,
                                             TdmTensor *momentum_buf, GError **error);
TDM_API gboolean tdm_op_adamw_update_zero_grad(TdmDevice *dev, const TdmAdamWParams *hp,
                                               TdmTensor *param, TdmTensor *grad,
                                               TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                               GError **error);

G_END_DECLS

#endif /* TANDEM_OPS_H */

/* plugins/ref/ref.h - what the files of the reference backend share.
 *
 * The ref backend is the oracle every other backend is checked against, so
 * it is written to be obviously correct rather than fast: plain loops over
 * plain row-major f32 tensors, sums accumulated in double. Arguments come
 * through the core's op front ends (tdm_op_*), which check devices,
 * dtypes and shapes; the ref backend checks only what is its own limit
 * (plain dense tensors) and what only it can see (label values, workspace
 * entries).
 * ref-backend.c holds the plugin, the devices, memory and host transfers;
 * ref-ops.c the layer ops (gemm, conv, batch norm, relu, add); ref-pool.c
 * the pooling ops; ref-vector.c the loss, dropout, vector ops, cast and
 * optimizer updates; ref-device.c the streams, events and device
 * information.
 */
#ifndef TDM_REF_H
#define TDM_REF_H

#include <tandem/tandem.h>

/* Per-device state (dev->priv). Each virtual device counts its own live
 * allocations so that multi-device code paths are visible in tests. */
typedef struct _RefCopyStream RefCopyStream;

typedef struct {
    int index;
    int num_threads;
    gint64 live_bytes;
    RefCopyStream *copy; /* the copy stream (ref-device.c) */
} RefDevice;

/* ---- what the ref backend cannot read (ref-backend.c) ---- */

/* `t` is in the plain layout and dense (a strided view is not): the only
 * tensors ref's loops index correctly. `what` names the argument in the
 * message ("x", "dy"...). */
gboolean ref_check_plain(const char *op, const char *what, const TdmTensor *t, GError **error);
/* An out slot shaped plain contiguous (tdm_tensor_ensure). */
gboolean ref_ensure_out(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                        GError **error);

static inline float *ref_f32(const TdmTensor *t)
{
    return (float *)tdm_tensor_data(t);
}

/* ---- ops (ref-ops.c, ref-pool.c) ---- */
gboolean ref_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                  float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                  TdmTensor *bias, GError **error);
gboolean ref_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                       GError **error);
gboolean ref_conv2d_relu_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                 TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                 GError **error);
gboolean ref_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                            GError **error);
gboolean ref_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                  TdmTensor *dx, GError **error);
gboolean ref_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                    GError **error);
gboolean ref_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                               TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                               float momentum, float eps, gboolean training, TdmTensor *save_mean,
                               TdmTensor *save_var, TdmTensor *y, GError **error);
gboolean ref_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                GError **error);
gboolean ref_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                          GError **error);
gboolean ref_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                           TdmTensor *dx, GError **error);
gboolean ref_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                 GError **error);
gboolean ref_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                    TdmTensor *running_var, float momentum, float eps,
                                    gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                    TdmTensor *workspace, TdmTensor *y, GError **error);
gboolean ref_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                     TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                     float eps, TdmTensor *dx, TdmTensor *dgamma,
                                     TdmTensor *dbeta, GError **error);
gboolean ref_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                      GError **error);
gboolean ref_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error);
gboolean ref_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                TdmTensor *dx, GError **error);
gboolean ref_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, GError **error);
gboolean ref_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                GError **error);
gboolean ref_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                                    GError **error);
gboolean ref_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                     const TdmTensor *x_like, TdmTensor *dx, GError **error);

/* ---- streams, events and device information (ref-device.c) ---- */
extern const TdmStreamOps ref_stream_ops;
/* The device's copy stream: made idle at open, its thread joined at close. */
void ref_stream_open(TdmDevice *dev, RefDevice *rd);
void ref_stream_close(RefDevice *rd);
/* Wait for every copy queued so far (ref compute never has work pending). */
gboolean ref_stream_drain(TdmDevice *dev, double timeout_s, GError **error);
gboolean ref_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error);

/* ---- loss, dropout, vector ops, cast, optimizers (ref-vector.c) ---- */
gboolean ref_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits, TdmTensor *labels,
                          float label_smoothing, float *loss, TdmTensor *dlogits, int64_t *correct,
                          GError **error);
gboolean ref_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                TdmTensor *stats, GError **error);
/* The dropout keep decision for element `index` under `seed`: a uniform
 * number in [0, 1) made from (seed, index) by a counter-based hash, kept when
 * it is >= p. Every backend must make the same decision. */
gboolean ref_dropout_keep(guint64 seed, guint64 index, float p);
gboolean ref_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                             TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
gboolean ref_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                              TdmTensor *dy, TdmTensor *dx, GError **error);
gboolean ref_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error);
gboolean ref_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
gboolean ref_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
gboolean ref_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error);
gboolean ref_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
gboolean ref_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                  GError **error);
gboolean ref_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                        TdmTensor *momentum_buf, GError **error);
gboolean ref_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          GError **error);
gboolean ref_sgd_update_zero_grad(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                  TdmTensor *grad, TdmTensor *momentum_buf, GError **error);
gboolean ref_adamw_update_zero_grad(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                    TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                    GError **error);

#endif /* TDM_REF_H */

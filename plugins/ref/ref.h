/* SPDX-License-Identifier: MIT */
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
TdmGemmFn ref_gemm;
TdmBiasGradFn ref_bias_grad;
TdmConv2dForwardFn ref_conv2d_relu_forward;
TdmConv2dForwardFn ref_conv2d_forward;
TdmConv2dBackwardDataFn ref_conv2d_backward_data;
TdmConv2dBackwardFilterFn ref_conv2d_backward_filter;
TdmBatchnormForwardFn ref_batchnorm_forward;
TdmBatchnormBackwardFn ref_batchnorm_backward;
TdmReluForwardFn ref_relu_forward;
TdmReluBackwardFn ref_relu_backward;
TdmAddFn ref_add;
TdmBatchnormReluForwardFn ref_batchnorm_relu_forward;
TdmBatchnormReluBackwardFn ref_batchnorm_relu_backward;
gboolean ref_batchnorm_relu_backward_ws(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                        TdmTensor *workspace, TdmTensor *dy, TdmTensor *gamma,
                                        TdmTensor *save_mean, TdmTensor *save_var, float eps,
                                        TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                        GError **error);
TdmAddFn ref_add_relu;
TdmMaxpool2dForwardFn ref_maxpool2d_forward;
TdmMaxpool2dBackwardFn ref_maxpool2d_backward;
TdmAvgpool2dForwardFn ref_avgpool2d_forward;
TdmAvgpool2dBackwardFn ref_avgpool2d_backward;
TdmGlobalAvgpoolForwardFn ref_global_avgpool_forward;
TdmGlobalAvgpoolBackwardFn ref_global_avgpool_backward;

/* ---- streams, events and device information (ref-device.c) ---- */
extern const TdmStreamOps ref_stream_ops;
/* The device's copy stream: made idle at open, its thread joined at close. */
void ref_stream_open(TdmDevice *dev, RefDevice *rd);
void ref_stream_close(RefDevice *rd);
/* Wait for every copy queued so far (ref compute never has work pending). */
gboolean ref_stream_drain(TdmDevice *dev, double timeout_s, GError **error);
TdmDeviceInfoFn ref_device_info;

/* ---- loss, dropout, vector ops, cast, optimizers (ref-vector.c) ---- */
TdmSoftmaxXentFn ref_softmax_xent;
TdmSoftmaxXentStatsFn ref_softmax_xent_stats;
/* The dropout keep decision for element `index` under `seed`: a uniform
 * number in [0, 1) made from (seed, index) by a counter-based hash, kept when
 * it is >= p. Every backend must make the same decision. */
gboolean ref_dropout_keep(guint64 seed, guint64 index, float p);
TdmDropoutForwardFn ref_dropout_forward;
TdmDropoutBackwardFn ref_dropout_backward;
TdmFillFn ref_fill;
TdmCopyFn ref_copy;
TdmScaleFn ref_scale;
TdmAxpyFn ref_axpy;
TdmSumSquaresFn ref_sum_squares;
TdmCastFn ref_cast;
TdmSgdUpdateFn ref_sgd_update;
TdmAdamwUpdateFn ref_adamw_update;
TdmSgdUpdateFn ref_sgd_update_zero_grad;
TdmAdamwUpdateFn ref_adamw_update_zero_grad;

#endif /* TDM_REF_H */

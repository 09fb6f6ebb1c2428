/* SPDX-License-Identifier: MIT */
/* core/ops-vector.c - the op front ends that treat tensors as vectors or
 * rows: the softmax cross-entropy loss, dropout, the vector ops (fill,
 * copy, scale, axpy, sum of squares, cast) and the optimizer updates, with
 * the update-and-zero-grad forms.
 *
 * Vector ops and updates take plain contiguous tensors (the arenas and
 * their views); the loss and dropout take any layout the backend made, as
 * the layer ops do. A label outside [0, K) is found by the backend, which
 * is the one that reads the labels. softmax_xent_stats without the
 * backend's slot goes through the host (see xent_stats_run). The update-and-zero forms run the
 * backend's fused op when it has one, else the update and then fill(0).
 */
#include "config.h"

#include "ops-private.h"

/* ---- loss ---- */

/* The checks softmax_xent and softmax_xent_stats share. */
static gboolean check_xent(TdmDevice *dev, const char *op, TdmTensor *logits, TdmTensor *labels,
                           float label_smoothing, TdmTensor *dlogits, GError **error)
{
    if (!tdm_ops_check_input(dev, op, "logits", logits, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_input(dev, op, "labels", labels, -1, error)) {
        return FALSE;
    }
    if (logits->ndim != 2 || logits->shape[0] < 1 || logits->shape[1] < 1) {
        g_autofree char *sg = tdm_tensor_shape_string(logits);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: logits %s must be a non-empty [N, classes]", op, sg);
        return FALSE;
    }
    if (labels->dtype != TDM_DTYPE_I32 && labels->dtype != TDM_DTYPE_I64) {
        g_autofree char *sl = tdm_tensor_shape_string(labels);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: labels %s are %s, expected i32 or i64", op, sl,
                    tdm_dtype_name(labels->dtype));
        return FALSE;
    }
    if (labels->ndim != 1 || labels->shape[0] != logits->shape[0]) {
        g_autofree char *sg = tdm_tensor_shape_string(logits);
        g_autofree char *sl = tdm_tensor_shape_string(labels);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: labels %s do not match logits %s: expected [%" G_GINT64_FORMAT "]", op, sl,
                    sg, logits->shape[0]);
        return FALSE;
    }
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: label smoothing %g is outside [0, 1]", op, label_smoothing);
        return FALSE;
    }
    return dlogits == NULL || tdm_ops_check_out(dev, op, "dlogits", dlogits, error);
}

gboolean tdm_op_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                             TdmTensor *labels, float label_smoothing, float *loss,
                             TdmTensor *dlogits, int64_t *correct, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_xent(dev, "softmax_xent", logits, labels, label_smoothing, dlogits, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_SOFTMAX_XENT, dev, error,
               dev->backend->softmax_xent(dev, cache, logits, labels, label_smoothing, loss,
                                          dlogits, correct, error));
}

/* Without the backend's slot, softmax_xent's host figures are added to
 * stats through the host: correct, but a wait per call, which the slot
 * exists to avoid. The sum is the mean times the rows, as ref makes it. */
static gboolean xent_stats_run(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                               TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                               TdmTensor *stats, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (be->softmax_xent_stats != NULL) {
        return be->softmax_xent_stats(dev, cache, logits, labels, label_smoothing, dlogits, stats,
                                      error);
    }
    float mean = 0.0f, acc[TDM_XENT_STATS_LEN];
    int64_t hits = 0;
    if (!be->softmax_xent(dev, cache, logits, labels, label_smoothing, &mean, dlogits, &hits,
                          error) ||
        !tdm_tensor_read(stats, acc, error)) {
        return FALSE;
    }
    acc[TDM_XENT_STATS_LOSS_SUM] += (float)((double)mean * (double)logits->shape[0]);
    acc[TDM_XENT_STATS_CORRECT] += (float)hits;
    return tdm_tensor_write(stats, acc, error);
}

gboolean tdm_op_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                   TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                   TdmTensor *stats, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "softmax_xent_stats";
    if (!check_xent(dev, op, logits, labels, label_smoothing, dlogits, error) ||
        !tdm_ops_check_f32_vector(dev, op, "stats", stats, TDM_XENT_STATS_LEN, FALSE, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_SOFTMAX_XENT_STATS, dev, error,
               xent_stats_run(dev, cache, logits, labels, label_smoothing, dlogits, stats, error));
}

/* ---- dropout ---- */

static gboolean check_dropout_p(const char *op, float p, GError **error)
{
    if (!(p >= 0.0f && p <= 1.0f)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: p = %g is outside [0, 1]", op, p);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_op_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                                TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "dropout_forward";
    if (!check_dropout_p(op, p, error) ||
        !tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_out(dev, op, "mask", mask, error) ||
        !tdm_ops_check_out(dev, op, "y", y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_DROPOUT_FORWARD, dev, error,
               dev->backend->dropout_forward(dev, cache, p, seed, x, mask, y, error));
}

gboolean tdm_op_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                                 TdmTensor *dy, TdmTensor *dx, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "dropout_backward";
    if (!check_dropout_p(op, p, error) ||
        !tdm_ops_check_input(dev, op, "mask", mask, TDM_DTYPE_U8, error) ||
        !tdm_ops_check_input(dev, op, "dy", dy, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_same_shape(op, "mask", mask, "dy", dy, error) ||
        !tdm_ops_check_out(dev, op, "dx", dx, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_DROPOUT_BACKWARD, dev, error,
               dev->backend->dropout_backward(dev, cache, p, mask, dy, dx, error));
}

/* ---- vector ops ---- */

/* A plain contiguous input of dtype `dtype` (-1: any). */
static gboolean check_vector(TdmDevice *dev, const char *op, const char *what, const TdmTensor *t,
                             int dtype, GError **error)
{
    return tdm_ops_check_input(dev, op, what, t, dtype, error) &&
           tdm_ops_check_contiguous(op, what, t, error);
}

/* Two plain contiguous f32 vectors of one length. */
static gboolean check_f32_pair(TdmDevice *dev, const char *op, const char *what_a,
                               const TdmTensor *a, const char *what_b, const TdmTensor *b,
                               GError **error)
{
    return check_vector(dev, op, what_a, a, TDM_DTYPE_F32, error) &&
           check_vector(dev, op, what_b, b, TDM_DTYPE_F32, error) &&
           tdm_ops_check_same_numel(op, what_a, a, what_b, b, error);
}

gboolean tdm_op_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_vector(dev, "fill", "x", x, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_FILL, dev, error, dev->backend->fill(dev, x, value, error));
}

gboolean tdm_op_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "copy";
    if (!check_vector(dev, op, "src", src, -1, error) ||
        !check_vector(dev, op, "dst", dst, src->dtype, error) ||
        !tdm_ops_check_same_numel(op, "src", src, "dst", dst, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_COPY, dev, error, dev->backend->copy(dev, src, dst, error));
}

gboolean tdm_op_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_vector(dev, "scale", "x", x, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_SCALE, dev, error, dev->backend->scale(dev, x, alpha, error));
}

gboolean tdm_op_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_f32_pair(dev, "axpy", "x", x, "y", y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_AXPY, dev, error, dev->backend->axpy(dev, alpha, x, y, error));
}

gboolean tdm_op_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_vector(dev, "sum_squares", "x", x, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_SUM_SQUARES, dev, error, dev->backend->sum_squares(dev, x, result, error));
}

gboolean tdm_op_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                     GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "cast";
    if (!check_vector(dev, op, "src", src, -1, error)) {
        return FALSE;
    }
    /* An empty slot is shaped like src, in its own dtype. */
    if (dst != NULL && dst->storage == NULL) {
        if (!tdm_ops_check_out(dev, op, "dst", dst, error)) {
            return FALSE;
        }
    } else if (!check_vector(dev, op, "dst", dst, -1, error) ||
               !tdm_ops_check_same_shape(op, "src", src, "dst", dst, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_CAST, dev, error, dev->backend->cast(dev, src, dst, normalize_u8, error));
}

/* ---- optimizer updates ---- */

static gboolean check_sgd(TdmDevice *dev, const char *op, const TdmSgdParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *buf, GError **error)
{
    if (hp == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: no hyper-parameters", op);
        return FALSE;
    }
    if (!check_f32_pair(dev, op, "param", param, "grad", grad, error)) {
        return FALSE;
    }
    if (hp->momentum == 0.0f) {
        return TRUE;
    }
    if (buf == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: momentum %g needs a momentum buffer", op, hp->momentum);
        return FALSE;
    }
    return check_f32_pair(dev, op, "param", param, "momentum_buf", buf, error);
}

/* The update, then grad = 0 when `zero`: the backend's fused op when it
 * has one, else the update and a fill. */
static gboolean sgd_run(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                        TdmTensor *buf, gboolean zero, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (zero && be->sgd_update_zero_grad != NULL) {
        return be->sgd_update_zero_grad(dev, hp, param, grad, buf, error);
    }
    return be->sgd_update(dev, hp, param, grad, buf, error) &&
           (!zero || be->fill(dev, grad, 0.0f, error));
}

static gboolean sgd_front(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                          TdmTensor *buf, gboolean zero, GError **error)
{
    if (!check_sgd(dev, zero ? "sgd_update_zero_grad" : "sgd_update", hp, param, grad, buf,
                   error)) {
        return FALSE;
    }
    TDM_OP_RUN(zero ? TDM_OPID_SGD_UPDATE_ZERO_GRAD : TDM_OPID_SGD_UPDATE, dev, error,
               sgd_run(dev, hp, param, grad, buf, zero, error));
}

gboolean tdm_op_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                           TdmTensor *grad, TdmTensor *momentum_buf, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    return sgd_front(dev, hp, param, grad, momentum_buf, FALSE, error);
}

gboolean tdm_op_sgd_update_zero_grad(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                     TdmTensor *grad, TdmTensor *momentum_buf, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    return sgd_front(dev, hp, param, grad, momentum_buf, TRUE, error);
}

static gboolean adamw_run(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *m, TdmTensor *v, gboolean zero,
                          GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (zero && be->adamw_update_zero_grad != NULL) {
        return be->adamw_update_zero_grad(dev, hp, param, grad, m, v, error);
    }
    return be->adamw_update(dev, hp, param, grad, m, v, error) &&
           (!zero || be->fill(dev, grad, 0.0f, error));
}

static gboolean adamw_front(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                            TdmTensor *grad, TdmTensor *m, TdmTensor *v, gboolean zero,
                            GError **error)
{
    const char *op = zero ? "adamw_update_zero_grad" : "adamw_update";
    if (hp == NULL || hp->step < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: step must be >= 1 (got %" G_GINT64_FORMAT ")", op,
                    hp != NULL ? hp->step : (int64_t)0);
        return FALSE;
    }
    if (!check_f32_pair(dev, op, "param", param, "grad", grad, error) ||
        !check_f32_pair(dev, op, "param", param, "exp_avg", m, error) ||
        !check_f32_pair(dev, op, "param", param, "exp_avg_sq", v, error)) {
        return FALSE;
    }
    TDM_OP_RUN(zero ? TDM_OPID_ADAMW_UPDATE_ZERO_GRAD : TDM_OPID_ADAMW_UPDATE, dev, error,
               adamw_run(dev, hp, param, grad, m, v, zero, error));
}

gboolean tdm_op_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                             TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                             GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    return adamw_front(dev, hp, param, grad, exp_avg, exp_avg_sq, FALSE, error);
}

gboolean tdm_op_adamw_update_zero_grad(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                       TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                       GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    return adamw_front(dev, hp, param, grad, exp_avg, exp_avg_sq, TRUE, error);
}

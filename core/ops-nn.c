/* SPDX-License-Identifier: MIT */
/* core/ops-nn.c - the op front ends of the layers: gemm and bias gradient,
 * convolution, batch norm, ReLU and add, with their fused forms.
 *
 * Each front end checks its arguments against the contract of backend.h
 * (ops-check.c) and then runs the backend's op through TDM_OP_RUN, which
 * times it under TDM_PROFILE. The fused forms (conv2d_relu_forward,
 * batchnorm_relu_*, add_relu) are the one place that decides between the
 * backend's fused op and the unfused sequence: the layers always ask for
 * the fused form and get the same numbers either way. Batch norm + ReLU is
 * fused only when the backend has both halves, because the fused backward
 * reads a workspace only the fused forward writes; unfused, the forward
 * rectifies y in place and the backward makes the masked gradient in the
 * workspace, which the fused forward of another backend would have used.
 */
#include "config.h"

#include "ops-private.h"

/* ---- gemm and bias gradient ---- */

gboolean tdm_op_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                     float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                     TdmTensor *bias, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "gemm";
    if (!tdm_ops_check_input(dev, op, "a", a, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_input(dev, op, "b", b, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    if (a->ndim != 2 || b->ndim != 2) {
        g_autofree char *sa = tdm_tensor_shape_string(a);
        g_autofree char *sb = tdm_tensor_shape_string(b);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "gemm: a %s and b %s must be 2-D", sa, sb);
        return FALSE;
    }
    int64_t m = trans_a ? a->shape[1] : a->shape[0], k = trans_a ? a->shape[0] : a->shape[1];
    int64_t kb = trans_b ? b->shape[1] : b->shape[0], n = trans_b ? b->shape[0] : b->shape[1];
    if (k != kb) {
        g_autofree char *sa = tdm_tensor_shape_string(a);
        g_autofree char *sb = tdm_tensor_shape_string(b);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "gemm: a %s%s and b %s%s: inner dimensions differ (%" G_GINT64_FORMAT
                    " and %" G_GINT64_FORMAT ")",
                    sa, trans_a ? " (transposed)" : "", sb, trans_b ? " (transposed)" : "", k, kb);
        return FALSE;
    }
    int64_t cshape[2] = {m, n};
    if (c != NULL && c->storage == NULL && beta == 0.0f) {
        if (!tdm_ops_check_out(dev, op, "c", c, error)) {
            return FALSE;
        }
    } else if (!tdm_ops_check_f32_shaped(dev, op, "c", c, 2, cshape, FALSE, error) ||
               !tdm_ops_check_plain(op, "c", c, error)) {
        return FALSE;
    }
    if (!tdm_ops_check_f32_vector(dev, op, "bias", bias, n, TRUE, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_GEMM, dev, error,
               dev->backend->gemm(dev, cache, trans_a, trans_b, alpha, a, b, beta, c, bias, error));
}

gboolean tdm_op_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                          GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "bias_grad";
    if (!tdm_ops_check_input(dev, op, "dy", dy, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    if (dy->ndim < 2) {
        g_autofree char *s = tdm_tensor_shape_string(dy);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "bias_grad: dy %s needs at least 2 dims", s);
        return FALSE;
    }
    if (!tdm_ops_check_f32_vector(dev, op, "bias_grad", bias_grad, dy->shape[1], FALSE, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_BIAS_GRAD, dev, error,
               dev->backend->bias_grad(dev, cache, dy, bias_grad, error));
}

/* ---- convolution ---- */

typedef struct {
    int64_t N, C, H, W; /* input */
    int64_t O;          /* output channels */
    int64_t OH, OW;     /* output size */
} ConvGeom;

/* The geometry of x (or x_like) convolved with a filter shaped like w (or
 * dw), every parameter and shape checked. */
static gboolean conv_geometry(const char *op, const TdmConv2dParams *p, const TdmTensor *x,
                              const char *wname, const TdmTensor *w, ConvGeom *g, GError **error)
{
    if (p == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: no parameters", op);
        return FALSE;
    }
    if (p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 || p->dilation_h < 1 ||
        p->dilation_w < 1 || p->groups < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: invalid parameters (stride %d,%d padding %d,%d dilation %d,%d groups %d)",
                    op, p->stride_h, p->stride_w, p->pad_h, p->pad_w, p->dilation_h, p->dilation_w,
                    p->groups);
        return FALSE;
    }
    const char *why = NULL;
    int64_t eff_h = 0, eff_w = 0;
    if (x->ndim != 4 || w->ndim != 4) {
        why = "must be 4-D";
    } else if (w->shape[0] % p->groups != 0 || w->shape[1] * p->groups != x->shape[1]) {
        why = "channels differ";
    } else {
        eff_h = (int64_t)p->dilation_h * (w->shape[2] - 1) + 1;
        eff_w = (int64_t)p->dilation_w * (w->shape[3] - 1) + 1;
        if (x->shape[2] + 2 * p->pad_h < eff_h || x->shape[3] + 2 * p->pad_w < eff_w) {
            why = "the input is smaller than the kernel";
        }
    }
    if (why != NULL) {
        g_autofree char *sx = tdm_tensor_shape_string(x);
        g_autofree char *sw = tdm_tensor_shape_string(w);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: x %s and %s %s: %s (groups %d, padding %d,%d, dilation %d,%d)", op, sx,
                    wname, sw, why, p->groups, p->pad_h, p->pad_w, p->dilation_h, p->dilation_w);
        return FALSE;
    }
    g->N = x->shape[0];
    g->C = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->O = w->shape[0];
    g->OH = (g->H + 2 * p->pad_h - eff_h) / p->stride_h + 1;
    g->OW = (g->W + 2 * p->pad_w - eff_w) / p->stride_w + 1;
    return TRUE;
}

static gboolean conv2d_forward_run(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                   TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                                   TdmTensor *y, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (!relu) {
        return be->conv2d_forward(dev, cache, p, x, w, bias, y, error);
    }
    if (be->conv2d_relu_forward != NULL) {
        return be->conv2d_relu_forward(dev, cache, p, x, w, bias, y, error);
    }
    return be->conv2d_forward(dev, cache, p, x, w, bias, y, error) &&
           be->relu_forward(dev, NULL, y, y, error);
}

/* The front end of conv2d_forward (relu FALSE) and conv2d_relu_forward. */
static gboolean conv2d_forward_front(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                     TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                                     TdmTensor *y, GError **error)
{
    const char *op = relu ? "conv2d_relu_forward" : "conv2d_forward";
    ConvGeom g;
    if (!tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_input(dev, op, "w", w, TDM_DTYPE_F32, error) ||
        !conv_geometry(op, p, x, "w", w, &g, error) ||
        !tdm_ops_check_f32_vector(dev, op, "bias", bias, g.O, TRUE, error) ||
        !tdm_ops_check_out(dev, op, "y", y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(relu ? TDM_OPID_CONV2D_RELU_FORWARD : TDM_OPID_CONV2D_FORWARD, dev, error,
               conv2d_forward_run(dev, cache, p, x, w, bias, relu, y, error));
}

gboolean tdm_op_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                               TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                               GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    return conv2d_forward_front(dev, cache, p, x, w, bias, FALSE, y, error);
}

gboolean tdm_op_conv2d_relu_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                    GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    return conv2d_forward_front(dev, cache, p, x, w, bias, TRUE, y, error);
}

gboolean tdm_op_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                     TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                     TdmTensor *dx, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "conv2d_backward_data";
    ConvGeom g;
    if (!tdm_ops_check_like(dev, op, x_like, error) ||
        !tdm_ops_check_input(dev, op, "w", w, TDM_DTYPE_F32, error) ||
        !conv_geometry(op, p, x_like, "w", w, &g, error)) {
        return FALSE;
    }
    int64_t yshape[4] = {g.N, g.O, g.OH, g.OW};
    if (!tdm_ops_check_f32_shaped(dev, op, "dy", dy, 4, yshape, FALSE, error) ||
        !tdm_ops_check_out(dev, op, "dx", dx, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_CONV2D_BACKWARD_DATA, dev, error,
               dev->backend->conv2d_backward_data(dev, cache, p, dy, w, x_like, dx, error));
}

gboolean tdm_op_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                       TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                       GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "conv2d_backward_filter";
    ConvGeom g;
    if (!tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_input(dev, op, "dw", dw, TDM_DTYPE_F32, error) ||
        !conv_geometry(op, p, x, "dw", dw, &g, error)) {
        return FALSE;
    }
    int64_t yshape[4] = {g.N, g.O, g.OH, g.OW};
    if (!tdm_ops_check_f32_shaped(dev, op, "dy", dy, 4, yshape, FALSE, error) ||
        !tdm_ops_check_contiguous(op, "dw", dw, error) ||
        !tdm_ops_check_f32_vector(dev, op, "db", db, g.O, TRUE, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_CONV2D_BACKWARD_FILTER, dev, error,
               dev->backend->conv2d_backward_filter(dev, cache, p, x, dy, dw, db, error));
}

/* ---- batch norm ---- */

/* x is f32 [N, C] or [N, C, H, W]; *C gets its channels. */
static gboolean bn_check_x(TdmDevice *dev, const char *op, const TdmTensor *x, int64_t *C,
                           GError **error)
{
    if (!tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    if (x->ndim != 2 && x->ndim != 4) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "%s: x %s must be [N, C] or [N, C, H, W]",
                    op, s);
        return FALSE;
    }
    *C = x->shape[1];
    return TRUE;
}

static gboolean check_bn_forward(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *gamma,
                                 TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                                 gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                 TdmTensor *y, GError **error)
{
    int64_t C;
    if (!bn_check_x(dev, op, x, &C, error) ||
        !tdm_ops_check_f32_vector(dev, op, "gamma", gamma, C, TRUE, error) ||
        !tdm_ops_check_f32_vector(dev, op, "beta", beta, C, TRUE, error) ||
        !tdm_ops_check_f32_vector(dev, op, "running_mean", running_mean, C, TRUE, error) ||
        !tdm_ops_check_f32_vector(dev, op, "running_var", running_var, C, TRUE, error)) {
        return FALSE;
    }
    int64_t per_channel = tdm_tensor_numel(x) / MAX(C, 1);
    if (training && per_channel < 2) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: training needs more than one value per channel, x is %s", op, s);
        return FALSE;
    }
    if (!training && (running_mean == NULL || running_var == NULL)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: eval mode needs running_mean and running_var", op);
        return FALSE;
    }
    return (save_mean == NULL || tdm_ops_check_out(dev, op, "save_mean", save_mean, error)) &&
           (save_var == NULL || tdm_ops_check_out(dev, op, "save_var", save_var, error)) &&
           tdm_ops_check_out(dev, op, "y", y, error);
}

/* Whether dy has x's layout, the one the backend gives dx (x: the batch
 * norm's input, the ReLU's output): dx may then be dy itself. */
static gboolean layout_of(const TdmTensor *dy, const TdmTensor *x)
{
    return dy->layout == x->layout && (dy->layout != NULL || tdm_tensor_is_contiguous(dy));
}

/* Whether the backend runs the in-place backwards itself (interface 1.3);
 * an older one goes through a temporary. */
static gboolean backend_in_place(const TdmDevice *dev)
{
    return TDM_IFACE_VERSION_MINOR(dev->backend->iface_version) >= 3;
}

gboolean tdm_ops_can_write_over(const TdmDevice *dev, const TdmTensor *dy, const TdmTensor *x)
{
    return backend_in_place(dev) && layout_of(dy, x);
}

/* dx may be dy itself (in place) only when dy has x's layout. */
static gboolean check_in_place(const char *op, const char *xname, const TdmTensor *x,
                               const TdmTensor *dy, const TdmTensor *dx, GError **error)
{
    if (dx != dy || layout_of(dy, x)) {
        return TRUE;
    }
    g_autofree char *s = tdm_tensor_shape_string(dy);
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                "%s: dx is dy %s (in place), but dy's layout is not %s's", op, s, xname);
    return FALSE;
}

static gboolean check_bn_backward(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *dy,
                                  TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                  TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                  GError **error)
{
    int64_t C;
    return bn_check_x(dev, op, x, &C, error) &&
           tdm_ops_check_input(dev, op, "dy", dy, TDM_DTYPE_F32, error) &&
           tdm_ops_check_same_shape(op, "x", x, "dy", dy, error) &&
           check_in_place(op, "x", x, dy, dx, error) &&
           tdm_ops_check_f32_vector(dev, op, "gamma", gamma, C, TRUE, error) &&
           tdm_ops_check_f32_vector(dev, op, "save_mean", save_mean, C, FALSE, error) &&
           tdm_ops_check_f32_vector(dev, op, "save_var", save_var, C, FALSE, error) &&
           tdm_ops_check_f32_vector(dev, op, "dgamma", dgamma, C, TRUE, error) &&
           tdm_ops_check_f32_vector(dev, op, "dbeta", dbeta, C, TRUE, error) &&
           (dx == NULL || tdm_ops_check_out(dev, op, "dx", dx, error));
}

gboolean tdm_op_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                  TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                  TdmTensor *running_var, float momentum, float eps,
                                  gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                  TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_bn_forward(dev, "batchnorm_forward", x, gamma, beta, running_mean, running_var,
                          training, save_mean, save_var, y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_BATCHNORM_FORWARD, dev, error,
               dev->backend->batchnorm_forward(dev, cache, x, gamma, beta, running_mean,
                                               running_var, momentum, eps, training, save_mean,
                                               save_var, y, error));
}

static gboolean bn_relu_fused(const TdmBackendClass *be)
{
    return be->batchnorm_relu_forward != NULL && be->batchnorm_relu_backward != NULL;
}

gboolean tdm_ops_bn_relu_mask_in_workspace(const TdmDevice *dev)
{
    return backend_in_place(dev) && bn_relu_fused(dev->backend) &&
           dev->backend->batchnorm_relu_backward_ws != NULL;
}

/* The backend's batchnorm_backward, or with `relu` its fused
 * batchnorm_relu backward: with y, or without (the mask in the workspace:
 * batchnorm_relu_backward_ws); where it has none, relu_backward into the
 * workspace, then batchnorm_backward (the unfused forward wrote nothing
 * into the workspace). */
static gboolean bn_backward_call(TdmDevice *dev, TdmOpCache **cache, gboolean relu, TdmTensor *x,
                                 TdmTensor *y, TdmTensor *ws, TdmTensor *dy, TdmTensor *gamma,
                                 TdmTensor *sm, TdmTensor *sv, float eps, TdmTensor *dx,
                                 TdmTensor *dgamma, TdmTensor *dbeta, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (!relu) {
        return be->batchnorm_backward(dev, cache, x, dy, gamma, sm, sv, eps, dx, dgamma, dbeta,
                                      error);
    }
    if (y == NULL) {
        return be->batchnorm_relu_backward_ws(dev, cache, x, ws, dy, gamma, sm, sv, eps, dx, dgamma,
                                              dbeta, error);
    }
    if (bn_relu_fused(be)) {
        return be->batchnorm_relu_backward(dev, cache, x, y, ws, dy, gamma, sm, sv, eps, dx, dgamma,
                                           dbeta, error);
    }
    return be->relu_backward(dev, NULL, y, dy, ws, error) &&
           be->batchnorm_backward(dev, cache, x, ws, gamma, sm, sv, eps, dx, dgamma, dbeta, error);
}

/* bn_backward_call, in place (dx == dy) through a temporary for a backend
 * older than interface 1.3, which may write dx before it has read dy. */
static gboolean bn_backward_run(TdmDevice *dev, TdmOpCache **cache, gboolean relu, TdmTensor *x,
                                TdmTensor *y, TdmTensor *ws, TdmTensor *dy, TdmTensor *gamma,
                                TdmTensor *sm, TdmTensor *sv, float eps, TdmTensor *dx,
                                TdmTensor *dgamma, TdmTensor *dbeta, GError **error)
{
    if (dx != dy || backend_in_place(dev)) {
        return bn_backward_call(dev, cache, relu, x, y, ws, dy, gamma, sm, sv, eps, dx, dgamma,
                                dbeta, error);
    }
    g_autoptr(TdmTensor) tmp = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    return tmp != NULL &&
           bn_backward_call(dev, cache, relu, x, y, ws, dy, gamma, sm, sv, eps, tmp, dgamma, dbeta,
                            error) &&
           tdm_tensor_reorder(tmp, x, dx, NULL, error);
}

gboolean tdm_op_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                   TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                   float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                   GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_bn_backward(dev, "batchnorm_backward", x, dy, gamma, save_mean, save_var, dx, dgamma,
                           dbeta, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_BATCHNORM_BACKWARD, dev, error,
               bn_backward_run(dev, cache, FALSE, x, NULL, NULL, dy, gamma, save_mean, save_var,
                               eps, dx, dgamma, dbeta, error));
}

static gboolean bn_relu_forward_run(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *gamma, TdmTensor *beta, TdmTensor *rm, TdmTensor *rv,
                                    float momentum, float eps, gboolean training, TdmTensor *sm,
                                    TdmTensor *sv, TdmTensor *ws, TdmTensor *y, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (bn_relu_fused(be)) {
        return be->batchnorm_relu_forward(dev, cache, x, gamma, beta, rm, rv, momentum, eps,
                                          training, sm, sv, ws, y, error);
    }
    return be->batchnorm_forward(dev, cache, x, gamma, beta, rm, rv, momentum, eps, training, sm,
                                 sv, y, error) &&
           be->relu_forward(dev, NULL, y, y, error);
}

gboolean tdm_op_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                       TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                       TdmTensor *running_var, float momentum, float eps,
                                       gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                       TdmTensor *workspace, TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "batchnorm_relu_forward";
    if (!check_bn_forward(dev, op, x, gamma, beta, running_mean, running_var, training, save_mean,
                          save_var, y, error)) {
        return FALSE;
    }
    if (training
            ? !tdm_ops_check_out(dev, op, "workspace", workspace, error)
            : workspace != NULL && !tdm_ops_check_out(dev, op, "workspace", workspace, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_BATCHNORM_RELU_FORWARD, dev, error,
               bn_relu_forward_run(dev, cache, x, gamma, beta, running_mean, running_var, momentum,
                                   eps, training, save_mean, save_var, workspace, y, error));
}

gboolean tdm_op_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                        TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                        TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                        float eps, TdmTensor *dx, TdmTensor *dgamma,
                                        TdmTensor *dbeta, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "batchnorm_relu_backward";
    if (!check_bn_backward(dev, op, x, dy, gamma, save_mean, save_var, dx, dgamma, dbeta, error) ||
        (y != NULL && (!tdm_ops_check_input(dev, op, "y", y, TDM_DTYPE_F32, error) ||
                       !tdm_ops_check_same_shape(op, "y", y, "dy", dy, error))) ||
        !tdm_ops_check_out(dev, op, "workspace", workspace, error)) {
        return FALSE;
    }
    if (y == NULL && !tdm_ops_bn_relu_mask_in_workspace(dev)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: y is NULL, but the %s backend of device %s takes the mask from y "
                    "(it has no batchnorm_relu_backward_ws)",
                    op, dev->backend->device_type, dev->name);
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_BATCHNORM_RELU_BACKWARD, dev, error,
               bn_backward_run(dev, cache, TRUE, x, y, workspace, dy, gamma, save_mean, save_var,
                               eps, dx, dgamma, dbeta, error));
}

/* ---- ReLU and add ---- */

gboolean tdm_op_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                             GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!tdm_ops_check_input(dev, "relu_forward", "x", x, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_out(dev, "relu_forward", "y", y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_RELU_FORWARD, dev, error,
               dev->backend->relu_forward(dev, cache, x, y, error));
}

/* The backend's relu_backward; in place through a temporary on a backend
 * older than interface 1.3. */
static gboolean relu_backward_run(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                                  TdmTensor *dx, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (dx != dy || backend_in_place(dev)) {
        return be->relu_backward(dev, cache, y, dy, dx, error);
    }
    g_autoptr(TdmTensor) tmp = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    return tmp != NULL && be->relu_backward(dev, cache, y, dy, tmp, error) &&
           tdm_tensor_reorder(tmp, y, dx, NULL, error);
}

gboolean tdm_op_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                              TdmTensor *dx, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "relu_backward";
    if (!tdm_ops_check_input(dev, op, "y", y, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_input(dev, op, "dy", dy, TDM_DTYPE_F32, error) ||
        !tdm_ops_check_same_shape(op, "y", y, "dy", dy, error) ||
        !tdm_ops_check_out(dev, op, "dx", dx, error) || !check_in_place(op, "y", y, dy, dx, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_RELU_BACKWARD, dev, error,
               relu_backward_run(dev, cache, y, dy, dx, error));
}

static gboolean check_add(TdmDevice *dev, const char *op, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                          GError **error)
{
    return tdm_ops_check_input(dev, op, "a", a, TDM_DTYPE_F32, error) &&
           tdm_ops_check_input(dev, op, "b", b, TDM_DTYPE_F32, error) &&
           tdm_ops_check_same_shape(op, "a", a, "b", b, error) &&
           tdm_ops_check_out(dev, op, "y", y, error);
}

gboolean tdm_op_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                    GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_add(dev, "add", a, b, y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_ADD, dev, error, dev->backend->add(dev, cache, a, b, y, error));
}

static gboolean add_relu_run(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                             TdmTensor *y, GError **error)
{
    const TdmBackendClass *be = dev->backend;
    if (be->add_relu != NULL) {
        return be->add_relu(dev, cache, a, b, y, error);
    }
    return be->add(dev, cache, a, b, y, error) && be->relu_forward(dev, NULL, y, y, error);
}

gboolean tdm_op_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b,
                         TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_add(dev, "add_relu", a, b, y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_ADD_RELU, dev, error, add_relu_run(dev, cache, a, b, y, error));
}

/* SPDX-License-Identifier: MIT */
/* core/ops-pool.c - the op front ends of pooling: max, average and global
 * average pooling, forward and backward.
 *
 * The geometry (output size from kernel, stride and padding, floor
 * division as PyTorch) is derived and checked here once for every backend,
 * PyTorch's padding rule included: at most half the kernel, so that every
 * window holds a real input. Backward ops take the forward input only as
 * x_like (its shape, device and layout; f32 like any input, as a backend
 * may describe dx by it), and the max pool workspace is the backend's
 * own, so its dtype and shape are not checked.
 */
#include "config.h"

#include "ops-private.h"

/* Checks x ([N, C, H, W]) and the parameters; yshape gets the output's
 * shape [N, C, OH, OW]. */
static gboolean pool_geometry(const char *op, const TdmPool2dParams *p, const char *xname,
                              const TdmTensor *x, int64_t yshape[4], GError **error)
{
    if (p == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: no parameters", op);
        return FALSE;
    }
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 ||
        p->pad_w < 0 || p->pad_h > p->kernel_h / 2 || p->pad_w > p->kernel_w / 2) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: invalid parameters (kernel %d,%d stride %d,%d padding %d,%d; padding "
                    "must be at most half the kernel)",
                    op, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
        return FALSE;
    }
    if (x->ndim != 4 || x->shape[2] + 2 * p->pad_h < p->kernel_h ||
        x->shape[3] + 2 * p->pad_w < p->kernel_w) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: %s %s must be [N, C, H, W] and at least the kernel %dx%d (with padding "
                    "%d,%d)",
                    op, xname, s, p->kernel_h, p->kernel_w, p->pad_h, p->pad_w);
        return FALSE;
    }
    yshape[0] = x->shape[0];
    yshape[1] = x->shape[1];
    yshape[2] = (x->shape[2] + 2 * p->pad_h - p->kernel_h) / p->stride_h + 1;
    yshape[3] = (x->shape[3] + 2 * p->pad_w - p->kernel_w) / p->stride_w + 1;
    return TRUE;
}

/* The checks of a backward op: x_like on the device and pooled to dy. */
static gboolean check_pool_backward(TdmDevice *dev, const char *op, const TdmPool2dParams *p,
                                    TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                    GError **error)
{
    int64_t yshape[4];
    if (!tdm_ops_check_like(dev, op, x_like, error) ||
        !pool_geometry(op, p, "x_like", x_like, yshape, error)) {
        return FALSE;
    }
    return tdm_ops_check_f32_shaped(dev, op, "dy", dy, 4, yshape, FALSE, error) &&
           tdm_ops_check_out(dev, op, "dx", dx, error);
}

gboolean tdm_op_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                  TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "maxpool2d_forward";
    int64_t yshape[4];
    if (!tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error) ||
        !pool_geometry(op, p, "x", x, yshape, error) ||
        !tdm_ops_check_out(dev, op, "y", y, error) ||
        !tdm_ops_check_out(dev, op, "workspace", workspace, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_MAXPOOL2D_FORWARD, dev, error,
               dev->backend->maxpool2d_forward(dev, cache, p, x, y, workspace, error));
}

gboolean tdm_op_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                   TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                   TdmTensor *dx, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "maxpool2d_backward";
    if (!check_pool_backward(dev, op, p, dy, x_like, dx, error) ||
        !tdm_ops_check_input(dev, op, "workspace", workspace, -1, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_MAXPOOL2D_BACKWARD, dev, error,
               dev->backend->maxpool2d_backward(dev, cache, p, dy, workspace, x_like, dx, error));
}

gboolean tdm_op_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                  TdmTensor *x, TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "avgpool2d_forward";
    int64_t yshape[4];
    if (!tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error) ||
        !pool_geometry(op, p, "x", x, yshape, error) ||
        !tdm_ops_check_out(dev, op, "y", y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_AVGPOOL2D_FORWARD, dev, error,
               dev->backend->avgpool2d_forward(dev, cache, p, x, y, error));
}

gboolean tdm_op_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                   TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                   GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_pool_backward(dev, "avgpool2d_backward", p, dy, x_like, dx, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_AVGPOOL2D_BACKWARD, dev, error,
               dev->backend->avgpool2d_backward(dev, cache, p, dy, x_like, dx, error));
}

static gboolean check_image(const char *op, const char *what, const TdmTensor *x, GError **error)
{
    if (x->ndim != 4) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "%s: %s %s must be [N, C, H, W]", op, what,
                    s);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_op_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                       TdmTensor *y, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "global_avgpool_forward";
    if (!tdm_ops_check_input(dev, op, "x", x, TDM_DTYPE_F32, error) ||
        !check_image(op, "x", x, error) || !tdm_ops_check_out(dev, op, "y", y, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_GLOBAL_AVGPOOL_FORWARD, dev, error,
               dev->backend->global_avgpool_forward(dev, cache, x, y, error));
}

gboolean tdm_op_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                        const TdmTensor *x_like, TdmTensor *dx, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    const char *op = "global_avgpool_backward";
    if (!tdm_ops_check_like(dev, op, x_like, error) ||
        !check_image(op, "x_like", x_like, error) ||
        !tdm_ops_check_input(dev, op, "dy", dy, TDM_DTYPE_F32, error)) {
        return FALSE;
    }
    /* dy is [N, C]; [N, C, 1, 1] (the same numbers) is accepted too. */
    int64_t dshape[4] = {x_like->shape[0], x_like->shape[1], 1, 1};
    if (!tdm_ops_check_shape(op, "dy", dy, dy->ndim == 4 ? 4 : 2, dshape, error) ||
        !tdm_ops_check_out(dev, op, "dx", dx, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_GLOBAL_AVGPOOL_BACKWARD, dev, error,
               dev->backend->global_avgpool_backward(dev, cache, dy, x_like, dx, error));
}

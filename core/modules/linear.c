/* SPDX-License-Identifier: MIT */
/* core/modules/linear.c - Linear (fully connected) layer: y = x W^T + b,
 * as PyTorch's nn.Linear (weight [out, in], bias [out]). Forward and
 * backward are GEMMs (tdm_op_gemm); the bias is fused into the
 * forward GEMM and its gradient comes from the backend's bias_grad. The
 * input must be [N, in] (models put a Flatten in front of 4-D inputs); a
 * non-plain input is reordered to plain first.
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

typedef struct {
    int in_features, out_features;
    gboolean has_bias;
    TdmOpCache *cache_fwd, *cache_dw, *cache_db, *cache_dx, *cache_rx, *cache_rdy;
    TdmTensor *y, *dx;          /* slots */
    TdmTensor *x_plain, *dy_plain; /* reorder slots, used only for non-plain inputs */
    TdmTensor *x;               /* forward input kept for backward */
} LinearPriv;

static gboolean linear_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    LinearPriv *lp = m->priv;
    TdmDevice *dev = m->device;
    if (x->ndim != 2 || x->shape[1] != lp->in_features) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "Linear(%d, %d): input %s, expected [N, %d] (add a Flatten before it)",
                    lp->in_features, lp->out_features, s, lp->in_features);
        return FALSE;
    }
    TdmTensor *xp = tdm_module_as_plain(m, &lp->cache_rx, x, &lp->x_plain, error);
    if (xp == NULL) {
        return FALSE;
    }
    TdmParam *w = g_ptr_array_index(m->params, 0);
    TdmParam *b = lp->has_bias ? g_ptr_array_index(m->params, 1) : NULL;
    TdmTensor *out = tdm_module_slot(m, &lp->y, TDM_DTYPE_F32);
    int64_t shape[2] = {x->shape[0], lp->out_features};
    if (!tdm_tensor_ensure(out, TDM_DTYPE_F32, 2, shape, NULL, 0, error)) {
        return FALSE;
    }
    if (!tdm_op_gemm(dev, &lp->cache_fwd, FALSE, TRUE, 1.0f, xp, w->value, 0.0f, out,
                     b != NULL ? b->value : NULL, error)) {
        return FALSE;
    }
    tdm_module_keep(&lp->x, xp);
    *y = out;
    return TRUE;
}

static gboolean linear_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                GError **error)
{
    LinearPriv *lp = m->priv;
    TdmDevice *dev = m->device;
    TdmParam *w = g_ptr_array_index(m->params, 0);
    TdmParam *b = lp->has_bias ? g_ptr_array_index(m->params, 1) : NULL;
    gboolean w_tr = w->requires_grad;
    gboolean b_tr = b != NULL && b->requires_grad;
    if (!need_dx && !w_tr && !b_tr) {
        return TRUE;
    }
    if (lp->x == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "Linear(%d, %d): backward before forward",
                    lp->in_features, lp->out_features);
        return FALSE;
    }
    if (dy->ndim != 2 || dy->shape[0] != lp->x->shape[0] || dy->shape[1] != lp->out_features) {
        g_autofree char *s = tdm_tensor_shape_string(dy);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "Linear(%d, %d): output gradient %s, expected [%" G_GINT64_FORMAT ", %d]",
                    lp->in_features, lp->out_features, s, lp->x->shape[0], lp->out_features);
        return FALSE;
    }
    TdmTensor *dyp = tdm_module_as_plain(m, &lp->cache_rdy, dy, &lp->dy_plain, error);
    if (dyp == NULL) {
        return FALSE;
    }
    if (b_tr && !tdm_op_bias_grad(dev, &lp->cache_db, dyp, b->grad, error)) {
        return FALSE;
    }
    /* dW += dy^T x */
    if (w_tr && !tdm_op_gemm(dev, &lp->cache_dw, TRUE, FALSE, 1.0f, dyp, lp->x, 1.0f, w->grad,
                             NULL, error)) {
        return FALSE;
    }
    if (b_tr) {
        tdm_module_grad_ready(m, b);
    }
    if (w_tr) {
        tdm_module_grad_ready(m, w);
    }
    if (need_dx) {
        TdmTensor *g = tdm_module_grad_slot(m, &lp->dx, lp->x);
        if (!tdm_tensor_ensure(g, TDM_DTYPE_F32, 2, lp->x->shape, NULL, 0, error)) {
            return FALSE;
        }
        /* dx = dy W */
        if (!tdm_op_gemm(dev, &lp->cache_dx, FALSE, FALSE, 1.0f, dyp, w->value, 0.0f, g, NULL,
                         error)) {
            return FALSE;
        }
        *dx = g;
    }
    return TRUE;
}

static TdmModule *linear_clone(const TdmModule *self, GError **error)
{
    const LinearPriv *lp = self->priv;
    return tdm_linear_new(lp->in_features, lp->out_features, lp->has_bias);
}

static void linear_finalize(TdmModule *m)
{
    LinearPriv *lp = m->priv;
    TdmOpCache **caches[] = {&lp->cache_fwd, &lp->cache_dw,  &lp->cache_db, &lp->cache_dx,
                             &lp->cache_rx,  &lp->cache_rdy, NULL};
    TdmTensor **slots[] = {&lp->y, &lp->dx, &lp->x_plain, &lp->dy_plain, &lp->x, NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_linear_class = TDM_LAYER_CLASS("Linear", linear);

TdmModule *tdm_linear_new(int in_features, int out_features, gboolean bias)
{
    g_return_val_if_fail(in_features > 0 && out_features > 0, NULL);
    LinearPriv *lp = g_new0(LinearPriv, 1);
    lp->in_features = in_features;
    lp->out_features = out_features;
    lp->has_bias = bias;
    TdmModule *m = tdm_module_new(&tdm_linear_class, lp);
    int64_t wshape[2] = {out_features, in_features};
    tdm_module_add_param(m, "weight", 2, wshape, FALSE);
    if (bias) {
        int64_t bshape[1] = {out_features};
        tdm_module_add_param(m, "bias", 1, bshape, FALSE);
    }
    return m;
}

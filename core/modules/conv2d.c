/* SPDX-License-Identifier: MIT */
/* core/modules/conv2d.c - Conv2d layer, as PyTorch's nn.Conv2d with square
 * kernel, stride and padding, no dilation, one group (weight [O, C, K, K],
 * optional bias [O]). The three passes are the conv2d op front ends; when
 * the weight is frozen but the bias is not, the bias gradient comes from
 * bias_grad alone. A ReLU that follows in a Sequential is applied by the
 * forward (tdm_op_conv2d_relu_forward); the ReLU module masks in backward.
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

typedef struct {
    int in_channels, out_channels, kernel, stride, padding;
    gboolean has_bias;
    TdmConv2dParams cp;
    TdmOpCache *cache_fwd, *cache_bwd_data, *cache_bwd_filter, *cache_db;
    TdmTensor *y, *dx; /* slots */
    TdmTensor *x;      /* forward input kept for backward */
    gboolean relu_next; /* apply the following ReLU in the next forward */
    gboolean fwd_relu;  /* the last forward did */
    TdmLentOutput lend; /* y lent by the model's gradient pool (module-private.h) */
    gboolean recomputed; /* the auto recompute policy chose this one */
} Conv2dPriv;

void tdm_conv2d_request_relu(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_conv2d_class);
    Conv2dPriv *cp = m->priv;
    cp->relu_next = TRUE;
}

gboolean tdm_conv2d_applied_relu(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_conv2d_class, FALSE);
    const Conv2dPriv *cp = m->priv;
    return cp->fwd_relu;
}

void tdm_conv2d_lend_output(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_conv2d_class);
    Conv2dPriv *cp = m->priv;
    cp->lend.next = TRUE;
}

void tdm_conv2d_drop_output(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_conv2d_class);
    Conv2dPriv *cp = m->priv;
    tdm_lent_output_drop(&cp->lend, m, cp->y);
}

int tdm_conv2d_kernel(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_conv2d_class, 0);
    const Conv2dPriv *cp = m->priv;
    return cp->kernel;
}

void tdm_conv2d_set_recomputed(TdmModule *m, gboolean recompute)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_conv2d_class);
    Conv2dPriv *cp = m->priv;
    cp->recomputed = recompute;
}

gboolean tdm_conv2d_recomputed(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_conv2d_class, FALSE);
    const Conv2dPriv *cp = m->priv;
    return cp->recomputed;
}

/* Multiply-adds of one pass over y (forward, backward data and backward
 * weights each have as many). */
static double conv2d_macs(const Conv2dPriv *cp, const TdmTensor *y)
{
    return (double)tdm_tensor_numel(y) * cp->in_channels * cp->kernel * cp->kernel;
}

gboolean tdm_conv2d_output_dropped(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_conv2d_class, FALSE);
    const Conv2dPriv *cp = m->priv;
    return cp->lend.dropped;
}

/* The forward of x into out, with the ReLU when asked for. */
static gboolean conv2d_run(TdmModule *m, TdmTensor *x, gboolean relu, TdmTensor *out,
                           GError **error)
{
    Conv2dPriv *cp = m->priv;
    TdmParam *w = g_ptr_array_index(m->params, 0);
    TdmParam *b = cp->has_bias ? g_ptr_array_index(m->params, 1) : NULL;
    return (relu ? tdm_op_conv2d_relu_forward : tdm_op_conv2d_forward)(
        m->device, &cp->cache_fwd, &cp->cp, x, w->value, b != NULL ? b->value : NULL, out, error);
}

/* A lent output's slot with a pooled storage of the output's size (taken
 * before the op, which would otherwise allocate its own the first time). */
static TdmTensor *conv2d_lent_slot(TdmModule *m, const TdmTensor *x)
{
    Conv2dPriv *cp = m->priv;
    TdmTensor like = {.dtype = TDM_DTYPE_F32, .ndim = 4};
    like.shape[0] = x->shape[0];
    like.shape[1] = cp->out_channels;
    like.shape[2] = (x->shape[2] + 2 * cp->padding - cp->kernel) / cp->stride + 1;
    like.shape[3] = (x->shape[3] + 2 * cp->padding - cp->kernel) / cp->stride + 1;
    return tdm_module_lent_slot(m, &cp->y, &like);
}

gboolean tdm_conv2d_restore_output(TdmModule *m, GError **error)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_conv2d_class, FALSE);
    Conv2dPriv *cp = m->priv;
    if (!cp->lend.dropped) {
        return TRUE;
    }
    if (cp->x == NULL || cp->x->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "Conv2d(%d, %d): computing the output again: the input is gone",
                    cp->in_channels, cp->out_channels);
        return FALSE;
    }
    TdmTensor *out = conv2d_lent_slot(m, cp->x);
    if (!conv2d_run(m, cp->x, cp->fwd_relu, out, error)) {
        g_prefix_error(error, "Conv2d(%d, %d): computing the output again: ", cp->in_channels,
                       cp->out_channels);
        return FALSE;
    }
    cp->lend.dropped = FALSE;
    return TRUE;
}

static gboolean conv2d_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    Conv2dPriv *cp = m->priv;
    const gboolean lent = tdm_lent_output_begin(&cp->lend, m);
    if (x->ndim != 4 || x->shape[1] != cp->in_channels ||
        x->shape[2] + 2 * cp->padding < cp->kernel || x->shape[3] + 2 * cp->padding < cp->kernel) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "Conv2d(%d, %d, kernel %d, padding %d): input %s, expected [N, %d, H, W] "
                    "with H, W >= %d",
                    cp->in_channels, cp->out_channels, cp->kernel, cp->padding, s,
                    cp->in_channels, cp->kernel - 2 * cp->padding);
        return FALSE;
    }
    TdmTensor *out = lent ? conv2d_lent_slot(m, x) : tdm_module_slot(m, &cp->y, TDM_DTYPE_F32);
    gboolean relu = cp->relu_next;
    cp->relu_next = FALSE;
    cp->fwd_relu = FALSE;
    if (!conv2d_run(m, x, relu, out, error)) {
        return FALSE;
    }
    cp->fwd_relu = relu;
    tdm_module_keep(&cp->x, x);
    if (m->model != NULL && m->training) {
        /* a recompute candidate: lent, and named by the policy (in the
         * auto policy's trial: every lent one) */
        tdm_model_note_conv_work(m->model, m, out, conv2d_macs(cp, out),
                                 lent && tdm_model_recomputes(m->model, m));
    }
    *y = out;
    return TRUE;
}

static gboolean conv2d_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                GError **error)
{
    Conv2dPriv *cp = m->priv;
    TdmDevice *dev = m->device;
    TdmParam *w = g_ptr_array_index(m->params, 0);
    TdmParam *b = cp->has_bias ? g_ptr_array_index(m->params, 1) : NULL;
    gboolean w_tr = w->requires_grad;
    gboolean b_tr = b != NULL && b->requires_grad;
    if (!need_dx && !w_tr && !b_tr) {
        return TRUE;
    }
    if (cp->x == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "Conv2d(%d, %d): backward before forward",
                    cp->in_channels, cp->out_channels);
        return FALSE;
    }
    if (m->model != NULL) {
        double macs = conv2d_macs(cp, dy);
        tdm_model_note_conv_work(m->model, m, NULL, macs * ((w_tr ? 1 : 0) + (need_dx ? 1 : 0)),
                                 FALSE);
    }
    if (w_tr) {
        if (!tdm_op_conv2d_backward_filter(dev, &cp->cache_bwd_filter, &cp->cp, cp->x, dy,
                                           w->grad, b_tr ? b->grad : NULL, error)) {
            return FALSE;
        }
    } else if (b_tr) {
        if (!tdm_op_bias_grad(dev, &cp->cache_db, dy, b->grad, error)) {
            return FALSE;
        }
    }
    if (b_tr) {
        tdm_module_grad_ready(m, b);
    }
    if (w_tr) {
        tdm_module_grad_ready(m, w);
    }
    if (need_dx) {
        TdmTensor *g = tdm_module_grad_slot(m, &cp->dx, cp->x);
        if (!tdm_op_conv2d_backward_data(dev, &cp->cache_bwd_data, &cp->cp, dy, w->value, cp->x,
                                         g, error)) {
            return FALSE;
        }
        *dx = g;
    }
    return TRUE;
}

static TdmModule *conv2d_clone(const TdmModule *self, GError **error)
{
    const Conv2dPriv *cp = self->priv;
    return tdm_conv2d_new(cp->in_channels, cp->out_channels, cp->kernel, cp->stride, cp->padding,
                          cp->has_bias);
}

static void conv2d_finalize(TdmModule *m)
{
    Conv2dPriv *cp = m->priv;
    TdmOpCache **caches[] = {&cp->cache_fwd, &cp->cache_bwd_data, &cp->cache_bwd_filter,
                             &cp->cache_db, NULL};
    TdmTensor **slots[] = {&cp->y, &cp->dx, &cp->x, NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_conv2d_class = TDM_LAYER_CLASS("Conv2d", conv2d);

TdmModule *tdm_conv2d_new(int in_channels, int out_channels, int kernel, int stride, int padding,
                          gboolean bias)
{
    g_return_val_if_fail(in_channels > 0 && out_channels > 0 && kernel > 0, NULL);
    g_return_val_if_fail(stride > 0 && padding >= 0, NULL);
    Conv2dPriv *cp = g_new0(Conv2dPriv, 1);
    cp->in_channels = in_channels;
    cp->out_channels = out_channels;
    cp->kernel = kernel;
    cp->stride = stride;
    cp->padding = padding;
    cp->has_bias = bias;
    cp->cp = (TdmConv2dParams){
        .stride_h = stride,
        .stride_w = stride,
        .pad_h = padding,
        .pad_w = padding,
        .dilation_h = 1,
        .dilation_w = 1,
        .groups = 1,
    };
    TdmModule *m = tdm_module_new(&tdm_conv2d_class, cp);
    int64_t wshape[4] = {out_channels, in_channels, kernel, kernel};
    tdm_module_add_param(m, "weight", 4, wshape, FALSE);
    if (bias) {
        int64_t bshape[1] = {out_channels};
        tdm_module_add_param(m, "bias", 1, bshape, FALSE);
    }
    return m;
}

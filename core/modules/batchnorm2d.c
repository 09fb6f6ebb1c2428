/* SPDX-License-Identifier: MIT */
/* core/modules/batchnorm2d.c - BatchNorm2d, as PyTorch's nn.BatchNorm2d with
 * affine weights and tracked running statistics: parameters `weight`,
 * `bias`, buffers `running_mean`, `running_var` (torchvision's names). In
 * training mode the batch statistics normalise and update the running ones
 * (the backend does both); in eval mode the running ones normalise. Backward
 * is the training-mode formula, so it needs a training-mode forward.
 * A batch norm whose weight and bias are both frozen (model.freeze) runs
 * in eval mode even while the model trains: it normalises with its
 * running statistics and leaves them as they are, as fine-tuning in
 * PyTorch puts frozen batch norms in eval() (the statistics of a small new
 * dataset would otherwise overwrite the pretrained ones that the frozen
 * weights were learnt with). Its backward, needed only when something
 * before it trains, is then the eval-mode one: dx = dy * gamma /
 * sqrt(running_var + eps), computed by the eval forward itself on dy with
 * a zero mean and bias.
 * When a Sequential asks (a ReLU follows), forward computes max(BN(x), 0)
 * and backward masks the gradient before the batch norm's own backward:
 * tdm_op_batchnorm_relu_*, one pass each where the backend has the fused
 * ops.
 * When a container lends its output (tdm_batchnorm_lend_output: a
 * convolution that follows reads it, or a residual sum), y comes from the
 * model's gradient pool and goes back to it as soon as its reader is done
 * with it; tdm_batchnorm_restore_output() computes it again for the reader's
 * backward from the kept input and the statistics the forward normalised
 * with (an eval-mode forward: one elementwise pass), and the batch norm's own
 * backward gives it back once more.
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

typedef struct {
    int num_features;
    float eps, momentum;
    gboolean fwd_training; /* mode of the last forward */
    TdmOpCache *cache_fwd, *cache_bwd;
    TdmTensor *y, *dx, *save_mean, *save_var; /* slots */
    TdmTensor *scratch_dgamma, *scratch_dbeta; /* sinks for frozen weight/bias */
    TdmTensor *x;
    gboolean relu_next; /* apply the following ReLU in the next forward */
    gboolean fwd_relu;  /* the last forward did: backward needs y and ws */
    TdmTensor *ws;      /* the batchnorm_relu workspace (slot) */
    /* the eval-mode backward of a frozen batch norm (made on first use) */
    TdmOpCache *cache_eval_bwd, *cache_relu_bwd;
    TdmTensor *zeros;   /* [C] of 0: the mean and bias of dx's affine map */
    TdmTensor *dmasked; /* dy through the ReLU this batch norm applied */
    TdmLentOutput lend; /* y lent by the model's gradient pool */
    TdmOpCache *cache_restore;
    gboolean dy_disposable; /* the next backward may write dx over dy */
} BatchNormPriv;

/* Both affine parameters frozen: the layer keeps eval mode in training. */
static gboolean batchnorm_frozen(const TdmModule *m)
{
    const TdmParam *gamma = g_ptr_array_index(m->params, 0);
    const TdmParam *beta = g_ptr_array_index(m->params, 1);
    return !gamma->requires_grad && !beta->requires_grad;
}

void tdm_batchnorm_request_relu(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class);
    BatchNormPriv *bp = m->priv;
    bp->relu_next = TRUE;
}

gboolean tdm_batchnorm_applied_relu(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class, FALSE);
    const BatchNormPriv *bp = m->priv;
    return bp->fwd_relu;
}

void tdm_batchnorm_lend_output(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class);
    BatchNormPriv *bp = m->priv;
    bp->lend.next = TRUE;
}

void tdm_batchnorm_drop_output(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class);
    BatchNormPriv *bp = m->priv;
    tdm_lent_output_drop(&bp->lend, m, bp->y);
}

/* Whether the backward reads y: for the ReLU's mask, unless the forward
 * ran in training and the backend keeps the whole mask in the workspace
 * (tdm_op_batchnorm_relu_backward without y). */
static gboolean batchnorm_backward_reads_y(const TdmModule *m)
{
    const BatchNormPriv *bp = m->priv;
    return bp->fwd_relu && !(bp->fwd_training && tdm_ops_bn_relu_mask_in_workspace(m->device));
}

void tdm_batchnorm_reader_done(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class);
    if (!batchnorm_backward_reads_y(m)) {
        tdm_batchnorm_drop_output(m);
    }
}

void tdm_batchnorm_allow_in_place(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class);
    BatchNormPriv *bp = m->priv;
    bp->dy_disposable = TRUE;
}

/* Whether the training-mode backward writes dx over dy: the caller allowed
 * it and the op can (tdm_ops_can_write_over). */
static gboolean batchnorm_in_place(const TdmModule *m, const TdmTensor *dy)
{
    const BatchNormPriv *bp = m->priv;
    return bp->dy_disposable && tdm_ops_can_write_over(m->device, dy, bp->x);
}

gboolean tdm_batchnorm_output_dropped(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class, FALSE);
    const BatchNormPriv *bp = m->priv;
    return bp->lend.dropped;
}

gboolean tdm_batchnorm_restore_output(TdmModule *m, GError **error)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_batchnorm2d_class, FALSE);
    BatchNormPriv *bp = m->priv;
    if (!bp->lend.dropped) {
        return TRUE;
    }
    if (bp->x == NULL || bp->x->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "BatchNorm2d(%d): computing the output again: the input is gone",
                    bp->num_features);
        return FALSE;
    }
    TdmDevice *dev = m->device;
    TdmParam *gamma = g_ptr_array_index(m->params, 0);
    TdmParam *beta = g_ptr_array_index(m->params, 1);
    /* The statistics the forward normalised with: the batch's (kept for the
     * backward) in training, else the running ones, which an eval-mode
     * forward leaves as they were. */
    TdmTensor *mean = bp->fwd_training ? bp->save_mean
                                       : ((TdmParam *)g_ptr_array_index(m->params, 2))->value;
    TdmTensor *var = bp->fwd_training ? bp->save_var
                                      : ((TdmParam *)g_ptr_array_index(m->params, 3))->value;
    TdmTensor *y = tdm_module_lent_slot(m, &bp->y, bp->x);
    gboolean ok =
        bp->fwd_relu
            ? tdm_op_batchnorm_relu_forward(dev, &bp->cache_restore, bp->x, gamma->value,
                                            beta->value, mean, var, bp->momentum, bp->eps, FALSE,
                                            NULL, NULL, NULL, y, error)
            : tdm_op_batchnorm_forward(dev, &bp->cache_restore, bp->x, gamma->value, beta->value,
                                       mean, var, bp->momentum, bp->eps, FALSE, NULL, NULL, y,
                                       error);
    if (!ok) {
        g_prefix_error(error, "BatchNorm2d(%d): computing the output again: ", bp->num_features);
        return FALSE;
    }
    bp->lend.dropped = FALSE;
    return TRUE;
}

static gboolean batchnorm_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    BatchNormPriv *bp = m->priv;
    TdmDevice *dev = m->device;
    gboolean relu = bp->relu_next;
    bp->relu_next = FALSE;
    bp->fwd_relu = FALSE;
    const gboolean lent = tdm_lent_output_begin(&bp->lend, m);
    if ((x->ndim != 4 && x->ndim != 2) || x->shape[1] != bp->num_features) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "BatchNorm2d(%d): input %s, expected [N, %d, H, W]", bp->num_features, s,
                    bp->num_features);
        return FALSE;
    }
    TdmTensor *out =
        lent ? tdm_module_lent_slot(m, &bp->y, x) : tdm_module_slot(m, &bp->y, TDM_DTYPE_F32);
    TdmTensor *sm = tdm_module_slot(m, &bp->save_mean, TDM_DTYPE_F32);
    TdmTensor *sv = tdm_module_slot(m, &bp->save_var, TDM_DTYPE_F32);
    TdmParam *gamma = g_ptr_array_index(m->params, 0);
    TdmParam *beta = g_ptr_array_index(m->params, 1);
    TdmParam *rmean = g_ptr_array_index(m->params, 2);
    TdmParam *rvar = g_ptr_array_index(m->params, 3);
    const gboolean training = m->training && !batchnorm_frozen(m);
    if (relu) {
        TdmTensor *ws = tdm_module_slot(m, &bp->ws, TDM_DTYPE_U8);
        if (!tdm_op_batchnorm_relu_forward(dev, &bp->cache_fwd, x, gamma->value, beta->value,
                                           rmean->value, rvar->value, bp->momentum, bp->eps,
                                           training, sm, sv, ws, out, error)) {
            return FALSE;
        }
    } else if (!tdm_op_batchnorm_forward(dev, &bp->cache_fwd, x, gamma->value, beta->value,
                                         rmean->value, rvar->value, bp->momentum, bp->eps,
                                         training, sm, sv, out, error)) {
        return FALSE;
    }
    bp->fwd_relu = relu;
    bp->fwd_training = training;
    tdm_module_keep(&bp->x, x);
    *y = out;
    return TRUE;
}

/* The backend's dgamma/dbeta are accumulated outputs of final shape; a
 * frozen parameter gets a private sink instead of its (absent) gradient. */
static TdmTensor *grad_or_sink(TdmModule *m, TdmParam *p, TdmTensor **sink, GError **error)
{
    if (p->requires_grad) {
        return p->grad;
    }
    if (*sink == NULL) {
        *sink = tdm_tensor_new(m->device, TDM_DTYPE_F32, p->ndim, p->shape, error);
    }
    return *sink;
}

/* The input gradient of an eval-mode forward into g: dy (masked by the
 * ReLU when the forward applied one) times gamma / sqrt(running_var +
 * eps), which is the eval forward of dy with mean and bias 0. */
static gboolean batchnorm_eval_backward(TdmModule *m, TdmTensor *dy, TdmTensor *g,
                                        GError **error)
{
    BatchNormPriv *bp = m->priv;
    TdmDevice *dev = m->device;
    TdmParam *gamma = g_ptr_array_index(m->params, 0);
    TdmParam *rvar = g_ptr_array_index(m->params, 3);
    if (bp->zeros == NULL) {
        bp->zeros = tdm_tensor_new(dev, TDM_DTYPE_F32, gamma->ndim, gamma->shape, error);
        if (bp->zeros == NULL || !tdm_op_fill(dev, bp->zeros, 0.0f, error)) {
            return FALSE;
        }
    }
    TdmTensor *src = dy;
    if (bp->fwd_relu) {
        src = tdm_module_slot(m, &bp->dmasked, TDM_DTYPE_F32);
        if (!tdm_op_relu_backward(dev, &bp->cache_relu_bwd, bp->y, dy, src, error)) {
            return FALSE;
        }
    }
    TdmTensor *sm = tdm_module_slot(m, &bp->save_mean, TDM_DTYPE_F32);
    TdmTensor *sv = tdm_module_slot(m, &bp->save_var, TDM_DTYPE_F32);
    return tdm_op_batchnorm_forward(dev, &bp->cache_eval_bwd, src, gamma->value, bp->zeros,
                                    bp->zeros, rvar->value, bp->momentum, bp->eps, FALSE, sm, sv,
                                    g, error);
}

/* The backward, with y restored when it was lent. */
static gboolean batchnorm_backward_body(TdmModule *m, TdmTensor *dy, gboolean need_dx,
                                        TdmTensor **dx, GError **error)
{
    BatchNormPriv *bp = m->priv;
    TdmDevice *dev = m->device;
    TdmParam *gamma = g_ptr_array_index(m->params, 0);
    TdmParam *beta = g_ptr_array_index(m->params, 1);
    if (!need_dx && !gamma->requires_grad && !beta->requires_grad) {
        return TRUE;
    }
    if (bp->x == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "BatchNorm2d(%d): backward before forward",
                    bp->num_features);
        return FALSE;
    }
    /* The ReLU's mask needs y where the workspace does not hold it: back
     * if it was lent (the reader that asked for it, a convolution's
     * backward, usually has it restored already). */
    if (batchnorm_backward_reads_y(m) && !tdm_batchnorm_restore_output(m, error)) {
        return FALSE;
    }
    if (!bp->fwd_training && batchnorm_frozen(m)) {
        TdmTensor *g = tdm_module_grad_slot(m, &bp->dx, bp->x);
        if (!batchnorm_eval_backward(m, dy, g, error)) {
            return FALSE;
        }
        *dx = g; /* need_dx: a frozen batch norm gets here only for it */
        return TRUE;
    }
    if (!bp->fwd_training) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "BatchNorm2d(%d): backward needs a training-mode forward (the last forward "
                    "ran in eval mode)",
                    bp->num_features);
        return FALSE;
    }
    TdmTensor *dgamma = grad_or_sink(m, gamma, &bp->scratch_dgamma, error);
    if (dgamma == NULL) {
        return FALSE;
    }
    TdmTensor *dbeta = grad_or_sink(m, beta, &bp->scratch_dbeta, error);
    if (dbeta == NULL) {
        return FALSE;
    }
    TdmTensor *g =
        need_dx && batchnorm_in_place(m, dy) ? dy : tdm_module_grad_slot(m, &bp->dx, bp->x);
    gboolean ok;
    if (bp->fwd_relu) {
        /* y given back and not needed: the mask comes from the workspace */
        TdmTensor *y = bp->y != NULL && bp->y->storage != NULL ? bp->y : NULL;
        ok = tdm_op_batchnorm_relu_backward(dev, &bp->cache_bwd, bp->x, y, bp->ws, dy, gamma->value,
                                            bp->save_mean, bp->save_var, bp->eps, g, dgamma, dbeta,
                                            error);
    } else {
        ok = tdm_op_batchnorm_backward(dev, &bp->cache_bwd, bp->x, dy, gamma->value,
                                       bp->save_mean, bp->save_var, bp->eps, g, dgamma, dbeta,
                                       error);
    }
    if (!ok) {
        return FALSE;
    }
    tdm_module_grad_ready(m, beta);
    tdm_module_grad_ready(m, gamma);
    if (need_dx) {
        *dx = g;
    } else {
        tdm_module_grad_release(m, g);
    }
    return TRUE;
}

static gboolean batchnorm_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                   GError **error)
{
    gboolean ok = batchnorm_backward_body(m, dy, need_dx, dx, error);
    ((BatchNormPriv *)m->priv)->dy_disposable = FALSE; /* for this call only */
    tdm_batchnorm_drop_output(m); /* lent: nothing reads it any more */
    return ok;
}

static TdmModule *batchnorm_clone(const TdmModule *self, GError **error)
{
    const BatchNormPriv *bp = self->priv;
    return tdm_batchnorm2d_new(bp->num_features, bp->eps, bp->momentum);
}

static void batchnorm_finalize(TdmModule *m)
{
    BatchNormPriv *bp = m->priv;
    TdmOpCache **caches[] = {&bp->cache_fwd,      &bp->cache_bwd,     &bp->cache_eval_bwd,
                             &bp->cache_relu_bwd, &bp->cache_restore, NULL};
    TdmTensor **slots[] = {&bp->y,
                           &bp->dx,
                           &bp->save_mean,
                           &bp->save_var,
                           &bp->scratch_dgamma,
                           &bp->scratch_dbeta,
                           &bp->x,
                           &bp->ws,
                           &bp->zeros,
                           &bp->dmasked,
                           NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_batchnorm2d_class = TDM_LAYER_CLASS("BatchNorm2d", batchnorm);

TdmModule *tdm_batchnorm2d_new(int num_features, float eps, float momentum)
{
    g_return_val_if_fail(num_features > 0 && eps > 0.0f, NULL);
    BatchNormPriv *bp = g_new0(BatchNormPriv, 1);
    bp->num_features = num_features;
    bp->eps = eps;
    bp->momentum = momentum;
    TdmModule *m = tdm_module_new(&tdm_batchnorm2d_class, bp);
    int64_t shape[1] = {num_features};
    tdm_module_add_param(m, "weight", 1, shape, FALSE);
    tdm_module_add_param(m, "bias", 1, shape, FALSE);
    tdm_module_add_param(m, "running_mean", 1, shape, TRUE);
    tdm_module_add_param(m, "running_var", 1, shape, TRUE);
    return m;
}

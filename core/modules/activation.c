/* SPDX-License-Identifier: MIT */
/* core/modules/activation.c - parameter-free elementwise layers: ReLU and
 * Dropout. Dropout's mask is derived by the backend from a seed and the
 * element index only; the seed of a forward mixes the module's own seed
 * (given by the model from its seed and the module's position) with a count
 * of training-mode forwards. So every forward draws a fresh mask, as in
 * PyTorch, and the k-th mask of a model depends only on the model's seed,
 * not on threads, devices or the backend. In eval mode, or with p = 0,
 * Dropout is the identity and hands its input through. A ReLU right after
 * a BatchNorm2d in a Sequential is applied by the batch norm (one fused op
 * where the backend has it) and is then the identity itself.
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

/* ---- ReLU ---- */

typedef struct {
    TdmOpCache *cache_fwd, *cache_bwd;
    TdmTensor *y, *dx;
    gboolean pass_next; /* the batch norm before applies this ReLU (next forward) */
    gboolean fwd_pass;  /* ... and did so in the last forward */
    gboolean mask_next; /* the conv before applies this ReLU; backward still masks */
    TdmTensor *rectified; /* that forward's (already rectified) input, kept */
} ReluPriv;

void tdm_relu_request_forward_passthrough(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_relu_class);
    ReluPriv *rp = m->priv;
    rp->mask_next = TRUE;
}

void tdm_relu_request_passthrough(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_relu_class);
    ReluPriv *rp = m->priv;
    rp->pass_next = TRUE;
}

static gboolean relu_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    ReluPriv *rp = m->priv;
    rp->fwd_pass = rp->pass_next;
    rp->pass_next = FALSE;
    gboolean masked = rp->mask_next;
    rp->mask_next = FALSE;
    if (rp->fwd_pass) {
        *y = x;
        return TRUE;
    }
    if (masked) {
        tdm_module_keep(&rp->rectified, x);
        *y = x;
        return TRUE;
    }
    tdm_module_keep(&rp->rectified, NULL);
    TdmTensor *out = tdm_module_slot(m, &rp->y, TDM_DTYPE_F32);
    if (!tdm_op_relu_forward(m->device, &rp->cache_fwd, x, out, error)) {
        return FALSE;
    }
    *y = out;
    return TRUE;
}

static gboolean relu_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                              GError **error)
{
    ReluPriv *rp = m->priv;
    if (!need_dx) {
        return TRUE;
    }
    if (rp->fwd_pass) {
        *dx = dy;
        return TRUE;
    }
    TdmTensor *y = rp->rectified != NULL ? rp->rectified : rp->y;
    if (y == NULL || y->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "ReLU: backward before forward");
        return FALSE;
    }
    TdmTensor *g = tdm_module_grad_slot(m, &rp->dx, y);
    if (!tdm_op_relu_backward(m->device, &rp->cache_bwd, y, dy, g, error)) {
        return FALSE;
    }
    *dx = g;
    return TRUE;
}

static TdmModule *relu_clone(const TdmModule *self, GError **error)
{
    return tdm_relu_new();
}

static void relu_finalize(TdmModule *m)
{
    ReluPriv *rp = m->priv;
    TdmOpCache **caches[] = {&rp->cache_fwd, &rp->cache_bwd, NULL};
    TdmTensor **slots[] = {&rp->y, &rp->dx, &rp->rectified, NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_relu_class = TDM_LAYER_CLASS("ReLU", relu);

TdmModule *tdm_relu_new(void)
{
    return tdm_module_new(&tdm_relu_class, g_new0(ReluPriv, 1));
}

/* ---- Dropout ---- */

typedef struct {
    float p;
    guint64 seed;
    guint64 pass;          /* training-mode forwards so far */
    gboolean passthrough;  /* last forward was the identity */
    TdmOpCache *cache_fwd, *cache_bwd;
    TdmTensor *y, *dx, *mask;
} DropoutPriv;

void tdm_dropout_set_seed(TdmModule *m, guint64 seed)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_dropout_class);
    DropoutPriv *dp = m->priv;
    dp->seed = seed;
    dp->pass = 0;
}

guint64 tdm_dropout_get_seed(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_dropout_class, 0);
    const DropoutPriv *dp = m->priv;
    return dp->seed;
}

guint64 tdm_dropout_get_pass(const TdmModule *m)
{
    g_return_val_if_fail(m != NULL && m->klass == &tdm_dropout_class, 0);
    const DropoutPriv *dp = m->priv;
    return dp->pass;
}

void tdm_dropout_set_pass(TdmModule *m, guint64 pass)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_dropout_class);
    DropoutPriv *dp = m->priv;
    dp->pass = pass;
}

static gboolean dropout_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    DropoutPriv *dp = m->priv;
    if (!m->training || dp->p == 0.0f) {
        dp->passthrough = TRUE;
        *y = x;
        return TRUE;
    }
    dp->passthrough = FALSE;
    TdmTensor *out = tdm_module_slot(m, &dp->y, TDM_DTYPE_F32);
    TdmTensor *mask = tdm_module_slot(m, &dp->mask, TDM_DTYPE_U8);
    guint64 seed = tdm_mix64(dp->seed ^ tdm_mix64(++dp->pass));
    if (!tdm_op_dropout_forward(m->device, &dp->cache_fwd, dp->p, seed, x, mask, out, error)) {
        return FALSE;
    }
    *y = out;
    return TRUE;
}

static gboolean dropout_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                 GError **error)
{
    DropoutPriv *dp = m->priv;
    if (dp->passthrough) {
        if (need_dx) {
            *dx = dy;
        }
        return TRUE;
    }
    if (!need_dx) {
        return TRUE;
    }
    TdmTensor *g = tdm_module_grad_slot(m, &dp->dx, dy);
    if (!tdm_op_dropout_backward(m->device, &dp->cache_bwd, dp->p, dp->mask, dy, g, error)) {
        return FALSE;
    }
    *dx = g;
    return TRUE;
}

static TdmModule *dropout_clone(const TdmModule *self, GError **error)
{
    const DropoutPriv *dp = self->priv;
    return tdm_dropout_new(dp->p);
}

static void dropout_finalize(TdmModule *m)
{
    DropoutPriv *dp = m->priv;
    TdmOpCache **caches[] = {&dp->cache_fwd, &dp->cache_bwd, NULL};
    TdmTensor **slots[] = {&dp->y, &dp->dx, &dp->mask, NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_dropout_class = TDM_LAYER_CLASS("Dropout", dropout);

TdmModule *tdm_dropout_new(float p)
{
    g_return_val_if_fail(p >= 0.0f && p < 1.0f, NULL);
    DropoutPriv *dp = g_new0(DropoutPriv, 1);
    dp->p = p;
    return tdm_module_new(&tdm_dropout_class, dp);
}

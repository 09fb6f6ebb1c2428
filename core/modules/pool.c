/* core/modules/pool.c - pooling layers: MaxPool2d, AvgPool2d (PyTorch's
 * defaults: stride = kernel when 0, floor mode, padding counted in the
 * average) and AdaptiveAvgPool2d. Adaptive pooling to (1, 1) is the
 * backend's global average pool, whose [N, C] result is shown as
 * [N, C, 1, 1] like PyTorch's; other output sizes are supported when they
 * divide the input (then it is an ordinary average pool).
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

typedef enum { POOL_MAX, POOL_AVG, POOL_ADAPTIVE } PoolKind;

typedef struct {
    PoolKind kind;
    int kernel, stride, padding; /* max / avg */
    int out_h, out_w;            /* adaptive */
    TdmPool2dParams pp;          /* of the last forward */
    gboolean global;             /* last adaptive forward was global */
    TdmOpCache *cache_fwd, *cache_bwd, *cache_rdy;
    TdmTensor *y, *dx, *workspace; /* slots */
    TdmTensor *y4, *dy2, *dy_plain; /* views / reorder slot of the global case */
    TdmTensor *x;
} PoolPriv;

static gboolean check_input(TdmModule *m, TdmTensor *x, GError **error)
{
    PoolPriv *pp = m->priv;
    int need = pp->kind == POOL_ADAPTIVE ? 1 : pp->kernel - 2 * pp->padding;
    if (x->ndim != 4 || x->shape[2] < need || x->shape[3] < need) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: input %s, expected [N, C, H, W] with H, W >= %d", m->klass->type_name, s,
                    need);
        return FALSE;
    }
    return TRUE;
}

static gboolean adaptive_params(TdmModule *m, TdmTensor *x, GError **error)
{
    PoolPriv *pp = m->priv;
    int64_t h = x->shape[2], w = x->shape[3];
    if (h % pp->out_h != 0 || w % pp->out_w != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "AdaptiveAvgPool2d(%d, %d): input %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                    " is not a multiple of the output size",
                    pp->out_h, pp->out_w, h, w);
        return FALSE;
    }
    int kh = (int)(h / pp->out_h), kw = (int)(w / pp->out_w);
    pp->pp = (TdmPool2dParams){kh, kw, kh, kw, 0, 0, TRUE};
    return TRUE;
}

static gboolean pool_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    PoolPriv *pp = m->priv;
    TdmDevice *dev = m->device;
    if (!check_input(m, x, error)) {
        return FALSE;
    }
    TdmTensor *out = tdm_module_slot(m, &pp->y, TDM_DTYPE_F32);
    tdm_module_keep(&pp->x, x);
    switch (pp->kind) {
    case POOL_MAX: {
        TdmTensor *ws = tdm_module_slot(m, &pp->workspace, TDM_DTYPE_I32);
        if (!tdm_op_maxpool2d_forward(dev, &pp->cache_fwd, &pp->pp, x, out, ws, error)) {
            return FALSE;
        }
        break;
    }
    case POOL_ADAPTIVE:
        pp->global = pp->out_h == 1 && pp->out_w == 1;
        if (pp->global) {
            if (!tdm_op_global_avgpool_forward(dev, &pp->cache_fwd, x, out, error)) {
                return FALSE;
            }
            int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
            TdmTensor *v = tdm_module_view(&pp->y4, out, 4, shape, error);
            if (v == NULL) {
                return FALSE;
            }
            *y = v;
            return TRUE;
        }
        if (!adaptive_params(m, x, error)) {
            return FALSE;
        }
        /* an ordinary average pool from here */
        __attribute__((fallthrough));
    case POOL_AVG:
        if (!tdm_op_avgpool2d_forward(dev, &pp->cache_fwd, &pp->pp, x, out, error)) {
            return FALSE;
        }
        break;
    }
    *y = out;
    return TRUE;
}

static gboolean pool_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                              GError **error)
{
    PoolPriv *pp = m->priv;
    TdmDevice *dev = m->device;
    if (!need_dx) {
        return TRUE;
    }
    if (pp->x == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "%s: backward before forward",
                    m->klass->type_name);
        return FALSE;
    }
    TdmTensor *g = tdm_module_grad_slot(m, &pp->dx, pp->x);
    gboolean ok = FALSE;
    if (pp->kind == POOL_MAX) {
        ok = tdm_op_maxpool2d_backward(dev, &pp->cache_bwd, &pp->pp, dy, pp->workspace, pp->x, g,
                                       error);
    } else if (pp->kind == POOL_ADAPTIVE && pp->global) {
        TdmTensor *dyp = tdm_module_as_plain(m, &pp->cache_rdy, dy, &pp->dy_plain, error);
        if (dyp == NULL) {
            return FALSE;
        }
        int64_t shape[2] = {pp->x->shape[0], pp->x->shape[1]};
        if (tdm_tensor_numel(dyp) != shape[0] * shape[1]) {
            g_autofree char *s = tdm_tensor_shape_string(dy);
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "AdaptiveAvgPool2d: output gradient %s, expected [%" G_GINT64_FORMAT
                        ", %" G_GINT64_FORMAT ", 1, 1]",
                        s, shape[0], shape[1]);
            return FALSE;
        }
        TdmTensor *dy2 = tdm_module_view(&pp->dy2, dyp, 2, shape, error);
        ok = dy2 != NULL &&
             tdm_op_global_avgpool_backward(dev, &pp->cache_bwd, dy2, pp->x, g, error);
        /* The view must not keep dy's (pooled) buffer busy until next step. */
        tdm_module_grad_release(m, dy2);
    } else {
        ok = tdm_op_avgpool2d_backward(dev, &pp->cache_bwd, &pp->pp, dy, pp->x, g, error);
    }
    if (!ok) {
        return FALSE;
    }
    *dx = g;
    return TRUE;
}

static TdmModule *pool_clone(const TdmModule *self, GError **error)
{
    const PoolPriv *pp = self->priv;
    switch (pp->kind) {
    case POOL_MAX:
        return tdm_maxpool2d_new(pp->kernel, pp->stride, pp->padding);
    case POOL_AVG:
        return tdm_avgpool2d_new(pp->kernel, pp->stride, pp->padding);
    case POOL_ADAPTIVE:
        break;
    }
    return tdm_adaptive_avgpool2d_new(pp->out_h, pp->out_w);
}

static void pool_finalize(TdmModule *m)
{
    PoolPriv *pp = m->priv;
    TdmOpCache **caches[] = {&pp->cache_fwd, &pp->cache_bwd, &pp->cache_rdy, NULL};
    TdmTensor **slots[] = {&pp->y4, &pp->dy2,       &pp->dy_plain, &pp->y,
                           &pp->dx, &pp->workspace, &pp->x,        NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_maxpool2d_class = TDM_LAYER_CLASS("MaxPool2d", pool);
const TdmModuleClass tdm_avgpool2d_class = TDM_LAYER_CLASS("AvgPool2d", pool);
const TdmModuleClass tdm_adaptive_avgpool2d_class = TDM_LAYER_CLASS("AdaptiveAvgPool2d", pool);

static TdmModule *pool_new(const TdmModuleClass *klass, PoolKind kind, int kernel, int stride,
                           int padding)
{
    g_return_val_if_fail(kernel > 0 && stride >= 0 && padding >= 0, NULL);
    /* PyTorch rejects padding above half the kernel too. */
    g_return_val_if_fail(2 * padding <= kernel, NULL);
    PoolPriv *pp = g_new0(PoolPriv, 1);
    pp->kind = kind;
    pp->kernel = kernel;
    pp->stride = stride > 0 ? stride : kernel;
    pp->padding = padding;
    pp->pp = (TdmPool2dParams){kernel, kernel, pp->stride, pp->stride, padding, padding, TRUE};
    return tdm_module_new(klass, pp);
}

TdmModule *tdm_maxpool2d_new(int kernel, int stride, int padding)
{
    return pool_new(&tdm_maxpool2d_class, POOL_MAX, kernel, stride, padding);
}

TdmModule *tdm_avgpool2d_new(int kernel, int stride, int padding)
{
    return pool_new(&tdm_avgpool2d_class, POOL_AVG, kernel, stride, padding);
}

TdmModule *tdm_adaptive_avgpool2d_new(int out_h, int out_w)
{
    g_return_val_if_fail(out_h > 0 && out_w > 0, NULL);
    PoolPriv *pp = g_new0(PoolPriv, 1);
    pp->kind = POOL_ADAPTIVE;
    pp->out_h = out_h;
    pp->out_w = out_w;
    return tdm_module_new(&tdm_adaptive_avgpool2d_class, pp);
}

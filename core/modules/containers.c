/* core/modules/containers.c - modules that route tensors rather than
 * compute: Sequential (children in order), Residual (body + shortcut,
 * summed, optionally followed by ReLU: torchvision's BasicBlock) and Flatten.
 *
 * Backward visits children in reverse and asks a child for its input
 * gradient only when something before it has a trainable parameter (or the
 * caller wants dx), so a frozen prefix of the network costs nothing. In a
 * Residual the shortcut is differentiated before the body: its parameters
 * come after the body's in definition order, so grad-ready hooks fire in
 * exact reverse order.
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

static TdmModule *child_at(TdmModule *m, guint i)
{
    return g_ptr_array_index(m->children, i);
}

/* Prefix a child's error with its name, so that a failure deep in a model
 * reads "layer2.0.bn1: BatchNorm2d(...): ...": containers already put
 * their own child's name in front, so they are joined with a dot. */
static void prefix_child_error(GError **error, const TdmModule *child)
{
    if (child->name[0] == '\0') {
        return;
    }
    gboolean container = child->klass == &tdm_sequential_class || child->klass == &tdm_residual_class;
    g_prefix_error(error, container ? "%s." : "%s: ", child->name);
}

/* ---- Sequential ---- */

static gboolean sequential_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    TdmTensor *cur = x;
    for (guint i = 0; i < m->children->len; i++) {
        TdmModule *c = child_at(m, i);
        TdmTensor *out = NULL;
        if (!tdm_module_forward(c, cur, &out, error)) {
            prefix_child_error(error, c);
            return FALSE;
        }
        cur = out;
    }
    *y = cur;
    return TRUE;
}

static gboolean sequential_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                    GError **error)
{
    guint n = m->children->len;
    /* upstream[i]: some child before i has a trainable parameter. */
    gboolean *upstream = g_newa(gboolean, n + 1);
    upstream[0] = FALSE;
    for (guint i = 0; i < n; i++) {
        upstream[i + 1] = upstream[i] || tdm_module_any_trainable(child_at(m, i));
    }
    TdmTensor *cur = dy;
    for (guint k = n; k-- > 0;) {
        TdmModule *c = child_at(m, k);
        gboolean child_need_dx = need_dx || upstream[k];
        if (!child_need_dx && !tdm_module_any_trainable(c)) {
            cur = NULL;
            break;
        }
        TdmTensor *g = NULL;
        if (!tdm_module_backward(c, cur, child_need_dx, &g, error)) {
            prefix_child_error(error, c);
            return FALSE;
        }
        cur = g;
        if (!child_need_dx) {
            break;
        }
    }
    if (need_dx) {
        *dx = cur;
    }
    return TRUE;
}

static TdmModule *sequential_clone(const TdmModule *self, GError **error)
{
    return tdm_sequential_new();
}

const TdmModuleClass tdm_sequential_class = {
    .iface_version = TDM_MODULE_IFACE_VERSION,
    .type_name = "Sequential",
    .forward = sequential_forward,
    .backward = sequential_backward,
    .clone = sequential_clone,
    .finalize = NULL, /* no priv */
};

TdmModule *tdm_sequential_new(void)
{
    return tdm_module_new(&tdm_sequential_class, NULL);
}

/* ---- Residual: children[0] = body (""), children[1] = shortcut ("downsample") ---- */

typedef struct {
    gboolean relu_after;
    TdmOpCache *cache_add, *cache_relu, *cache_relu_bwd, *cache_add_bwd;
    TdmTensor *sum, *out, *drelu, *dx; /* slots */
} ResidualPriv;

static gboolean residual_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    ResidualPriv *rp = m->priv;
    TdmDevice *dev = m->device;
    TdmModule *body = child_at(m, 0);
    TdmModule *shortcut = m->children->len > 1 ? child_at(m, 1) : NULL;
    TdmTensor *yb = NULL, *ys = x;
    if (!tdm_module_forward(body, x, &yb, error)) {
        return FALSE;
    }
    if (shortcut != NULL && !tdm_module_forward(shortcut, x, &ys, error)) {
        prefix_child_error(error, shortcut);
        return FALSE;
    }
    if (!tdm_tensor_same_shape(yb, ys)) {
        g_autofree char *sb = tdm_tensor_shape_string(yb);
        g_autofree char *ss = tdm_tensor_shape_string(ys);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "Residual: body output %s and shortcut output %s differ%s", sb, ss,
                    shortcut == NULL ? " (a downsample shortcut is needed)" : "");
        return FALSE;
    }
    TdmTensor *sum = tdm_module_slot(m, &rp->sum, TDM_DTYPE_F32);
    if (!dev->backend->add(dev, &rp->cache_add, yb, ys, sum, error)) {
        return FALSE;
    }
    if (!rp->relu_after) {
        *y = sum;
        return TRUE;
    }
    TdmTensor *out = tdm_module_slot(m, &rp->out, TDM_DTYPE_F32);
    if (!dev->backend->relu_forward(dev, &rp->cache_relu, sum, out, error)) {
        return FALSE;
    }
    *y = out;
    return TRUE;
}

static gboolean residual_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                  GError **error)
{
    ResidualPriv *rp = m->priv;
    TdmDevice *dev = m->device;
    TdmModule *body = child_at(m, 0);
    TdmModule *shortcut = m->children->len > 1 ? child_at(m, 1) : NULL;
    if (!need_dx && !tdm_module_any_trainable(m)) {
        return TRUE;
    }
    TdmTensor *d = dy;
    if (rp->relu_after) {
        if (rp->out == NULL || rp->out->storage == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "Residual: backward before forward");
            return FALSE;
        }
        d = tdm_module_slot(m, &rp->drelu, TDM_DTYPE_F32);
        if (!dev->backend->relu_backward(dev, &rp->cache_relu_bwd, rp->out, dy, d, error)) {
            return FALSE;
        }
    }
    TdmTensor *ds = d, *db = NULL;
    if (shortcut != NULL && !tdm_module_backward(shortcut, d, need_dx, &ds, error)) {
        prefix_child_error(error, shortcut);
        return FALSE;
    }
    if (!tdm_module_backward(body, d, need_dx, &db, error)) {
        return FALSE;
    }
    if (need_dx) {
        TdmTensor *g = tdm_module_slot(m, &rp->dx, TDM_DTYPE_F32);
        if (!dev->backend->add(dev, &rp->cache_add_bwd, db, ds, g, error)) {
            return FALSE;
        }
        *dx = g;
    }
    return TRUE;
}

static ResidualPriv *residual_priv_new(gboolean relu_after)
{
    ResidualPriv *rp = g_new0(ResidualPriv, 1);
    rp->relu_after = relu_after;
    return rp;
}

static TdmModule *residual_clone(const TdmModule *self, GError **error)
{
    const ResidualPriv *rp = self->priv;
    /* The core adds the cloned body and shortcut in the same order. */
    return tdm_module_new(&tdm_residual_class, residual_priv_new(rp->relu_after));
}

static void residual_finalize(TdmModule *m)
{
    ResidualPriv *rp = m->priv;
    if (rp == NULL) {
        return;
    }
    if (m->device != NULL) {
        tdm_op_cache_clear(m->device, &rp->cache_add);
        tdm_op_cache_clear(m->device, &rp->cache_relu);
        tdm_op_cache_clear(m->device, &rp->cache_relu_bwd);
        tdm_op_cache_clear(m->device, &rp->cache_add_bwd);
    }
    tdm_module_slot_clear(&rp->sum);
    tdm_module_slot_clear(&rp->out);
    tdm_module_slot_clear(&rp->drelu);
    tdm_module_slot_clear(&rp->dx);
    g_free(rp);
}

const TdmModuleClass tdm_residual_class = {
    .iface_version = TDM_MODULE_IFACE_VERSION,
    .type_name = "Residual",
    .forward = residual_forward,
    .backward = residual_backward,
    .clone = residual_clone,
    .finalize = residual_finalize,
};

TdmModule *tdm_residual_new(TdmModule *body, TdmModule *shortcut, gboolean relu_after)
{
    g_return_val_if_fail(body != NULL, NULL);
    TdmModule *m = tdm_module_new(&tdm_residual_class, residual_priv_new(relu_after));
    tdm_module_add_child(m, "", body);
    if (shortcut != NULL) {
        tdm_module_add_child(m, "downsample", shortcut);
    }
    return m;
}

/* ---- Flatten: [N, ...] -> [N, prod(...)] (PyTorch's start_dim = 1) ---- */

typedef struct {
    TdmOpCache *cache_fwd, *cache_bwd, *cache_rdy;
    TdmTensor *x_plain, *y_view;   /* forward: reorder slot, reshaped view */
    TdmTensor *dy_plain, *dy_view; /* backward: reorder slot, reshaped view */
    TdmTensor *dx;                 /* backward: dy in the input's layout */
    TdmTensor *x;
} FlattenPriv;

static gboolean flatten_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    FlattenPriv *fp = m->priv;
    if (x->ndim < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "Flatten: input has no dimensions");
        return FALSE;
    }
    TdmTensor *xp = tdm_module_as_plain(m, &fp->cache_fwd, x, &fp->x_plain, error);
    if (xp == NULL) {
        return FALSE;
    }
    int64_t shape[2] = {x->shape[0], x->shape[0] > 0 ? tdm_tensor_numel(x) / x->shape[0] : 0};
    TdmTensor *v = tdm_module_view(&fp->y_view, xp, 2, shape, error);
    if (v == NULL) {
        return FALSE;
    }
    tdm_module_keep(&fp->x, x);
    *y = v;
    return TRUE;
}

static gboolean flatten_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                 GError **error)
{
    FlattenPriv *fp = m->priv;
    if (!need_dx) {
        return TRUE;
    }
    if (fp->x == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "Flatten: backward before forward");
        return FALSE;
    }
    if (tdm_tensor_numel(dy) != tdm_tensor_numel(fp->x)) {
        g_autofree char *sd = tdm_tensor_shape_string(dy);
        g_autofree char *sx = tdm_tensor_shape_string(fp->x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "Flatten: output gradient %s does not match input %s", sd, sx);
        return FALSE;
    }
    TdmTensor *dyp = tdm_module_as_plain(m, &fp->cache_rdy, dy, &fp->dy_plain, error);
    if (dyp == NULL) {
        return FALSE;
    }
    TdmTensor *v = tdm_module_view(&fp->dy_view, dyp, fp->x->ndim, fp->x->shape, error);
    if (v == NULL) {
        return FALSE;
    }
    if (tdm_tensor_is_plain(fp->x)) {
        *dx = v;
        return TRUE;
    }
    TdmTensor *g = tdm_module_slot(m, &fp->dx, TDM_DTYPE_F32);
    if (!m->device->backend->reorder(m->device, &fp->cache_bwd, v, fp->x, g, error)) {
        return FALSE;
    }
    *dx = g;
    return TRUE;
}

static TdmModule *flatten_clone(const TdmModule *self, GError **error)
{
    return tdm_flatten_new();
}

static void flatten_finalize(TdmModule *m)
{
    FlattenPriv *fp = m->priv;
    if (fp == NULL) {
        return;
    }
    if (m->device != NULL) {
        tdm_op_cache_clear(m->device, &fp->cache_fwd);
        tdm_op_cache_clear(m->device, &fp->cache_bwd);
        tdm_op_cache_clear(m->device, &fp->cache_rdy);
    }
    tdm_module_slot_clear(&fp->y_view);
    tdm_module_slot_clear(&fp->x_plain);
    tdm_module_slot_clear(&fp->dy_view);
    tdm_module_slot_clear(&fp->dy_plain);
    tdm_module_slot_clear(&fp->dx);
    tdm_module_slot_clear(&fp->x);
    g_free(fp);
}

const TdmModuleClass tdm_flatten_class = {
    .iface_version = TDM_MODULE_IFACE_VERSION,
    .type_name = "Flatten",
    .forward = flatten_forward,
    .backward = flatten_backward,
    .clone = flatten_clone,
    .finalize = flatten_finalize,
};

TdmModule *tdm_flatten_new(void)
{
    return tdm_module_new(&tdm_flatten_class, g_new0(FlattenPriv, 1));
}

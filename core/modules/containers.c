/* SPDX-License-Identifier: MIT */
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
 *
 * Memory: a container releases each gradient a child returned once the
 * child before has consumed it (the model's gradient pool hands the buffer
 * out again); a Sequential lets a BatchNorm2d apply the ReLU after it; a
 * Residual writes max(body + shortcut, 0) over the body's output when that
 * output is not needed by backward (add_relu), and its input gradient over
 * a child's.
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

/* BatchNorm2d then ReLU: the batch norm applies the ReLU itself (fused
 * where the backend can), and the ReLU then passes its input through.
 * Conv2d then ReLU: the convolution applies it; the ReLU's forward passes
 * through, its backward still masks (the conv has no fused backward). */
static void sequential_fuse(TdmModule *m, guint i)
{
    TdmModule *c = child_at(m, i);
    TdmModule *prev = i > 0 ? child_at(m, i - 1) : NULL;
    gboolean relu_next = i + 1 < m->children->len && child_at(m, i + 1)->klass == &tdm_relu_class;
    const TdmModuleClass *prev_class = prev != NULL ? prev->klass : NULL;
    gboolean is_relu = c->klass == &tdm_relu_class;
    if (c->klass == &tdm_batchnorm2d_class && relu_next) {
        tdm_batchnorm_request_relu(c);
    } else if (c->klass == &tdm_conv2d_class && relu_next) {
        tdm_conv2d_request_relu(c);
    } else if (is_relu && prev_class == &tdm_batchnorm2d_class &&
               tdm_batchnorm_applied_relu(prev)) {
        tdm_relu_request_passthrough(c);
    } else if (is_relu && prev_class == &tdm_conv2d_class && tdm_conv2d_applied_relu(prev)) {
        tdm_relu_request_forward_passthrough(c);
    }
}

/* Whether m's forward lends batch norm outputs (module-private.h): in
 * training, unless TDM_DEBUG has "keep-outputs" (every output then stays,
 * as before lending existed: a comparison of memory and values). */
static gboolean lends_outputs(const TdmModule *m)
{
    return m->training && !tdm_debug_flag("keep-outputs");
}

/* Children i, i+1, i+2 are a batch norm, a ReLU and a convolution or a
 * max pool: after the forward the batch norm's output is read only by the
 * reader's backward (the ReLU passes it through, or keeps its own output),
 * so it is lent: dropped once the reader's forward has run, computed again
 * before a convolution's backward (sequential_restore; a max pool's reads
 * only the shape), dropped again after it. Every bn1 of a ResNet block
 * is such, and the stem's batch norm. The batch norm's own backward needs
 * the output again only on a backend that takes the ReLU's mask from y
 * (not ref, not cpu: tdm_batchnorm_reader_done). */
static gboolean lends_to_reader(TdmModule *m, guint i)
{
    if (i + 2 >= m->children->len || child_at(m, i)->klass != &tdm_batchnorm2d_class ||
        child_at(m, i + 1)->klass != &tdm_relu_class) {
        return FALSE;
    }
    const TdmModuleClass *reader = child_at(m, i + 2)->klass;
    return reader == &tdm_conv2d_class || reader == &tdm_maxpool2d_class;
}

/* Child i is a convolution read only by the batch norm after it (its
 * forward, and its backward, which needs its input): its output is lent
 * (module-private.h), so that it takes the gradient pool's memory only
 * until that backward, given back after it (sequential_backward). */
static gboolean conv_lends(TdmModule *m, guint i)
{
    return i + 1 < m->children->len && child_at(m, i)->klass == &tdm_conv2d_class &&
           child_at(m, i + 1)->klass == &tdm_batchnorm2d_class && m->model != NULL;
}

/* ... and the model's recompute policy names it: its output is also given
 * back after the batch norm's forward, and computed again for the batch
 * norm's backward (sequential_restore). */
static gboolean conv_recomputes(TdmModule *m, guint i)
{
    return conv_lends(m, i) && tdm_model_recomputes(m->model, child_at(m, i));
}

/* Child j's output is read by the next child's backward: compute it again
 * if it was lent and given back, its own input first when that went back
 * too (a recomputed convolution reads the batch norm output before it,
 * which reads the convolution before that). A ReLU passes the question on
 * to the layer before it, whose output it passed through. */
static gboolean sequential_restore(TdmModule *m, guint j, GError **error)
{
    TdmModule *c = child_at(m, j);
    gboolean bn = c->klass == &tdm_batchnorm2d_class && tdm_batchnorm_output_dropped(c);
    gboolean conv = c->klass == &tdm_conv2d_class && tdm_conv2d_output_dropped(c);
    if (c->klass == &tdm_relu_class) {
        return j == 0 || sequential_restore(m, j - 1, error);
    }
    if (!bn && !conv) {
        return TRUE;
    }
    if (j > 0 && !sequential_restore(m, j - 1, error)) {
        return FALSE;
    }
    if (!(bn ? tdm_batchnorm_restore_output(c, error) : tdm_conv2d_restore_output(c, error))) {
        prefix_child_error(error, c);
        return FALSE;
    }
    return TRUE;
}

/* Whether m's backward reads the values of its input: a convolution's
 * (the weight gradient) and a batch norm's do; a max pool's reads only its
 * shape (x_like), so a lent output before it stays given back until the
 * batch norm that made it needs it for its own backward. */
static gboolean reads_input(const TdmModule *m)
{
    return m->klass == &tdm_conv2d_class || m->klass == &tdm_batchnorm2d_class;
}

/* Gives back every lent output still held (a backward that stopped early
 * at a frozen prefix leaves some restored). */
static void sequential_drop_lent(TdmModule *m)
{
    for (guint i = 0; i < m->children->len; i++) {
        TdmModule *c = child_at(m, i);
        if (c->klass == &tdm_conv2d_class) {
            tdm_conv2d_drop_output(c);
        } else if (c->klass == &tdm_batchnorm2d_class) {
            tdm_batchnorm_drop_output(c);
        }
    }
}

static gboolean sequential_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    TdmTensor *cur = x;
    const gboolean lend = lends_outputs(m);
    for (guint i = 0; i < m->children->len; i++) {
        TdmModule *c = child_at(m, i);
        TdmTensor *out = NULL;
        sequential_fuse(m, i);
        if (lend && lends_to_reader(m, i)) {
            tdm_batchnorm_lend_output(c);
        }
        if (lend && conv_lends(m, i)) {
            tdm_conv2d_lend_output(c);
        }
        if (!tdm_module_forward(c, cur, &out, error)) {
            prefix_child_error(error, c);
            return FALSE;
        }
        if (lend && i >= 2 && lends_to_reader(m, i - 2)) {
            tdm_batchnorm_drop_output(child_at(m, i - 2));
        }
        if (lend && i >= 1 && conv_recomputes(m, i - 1)) {
            tdm_conv2d_drop_output(child_at(m, i - 1));
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
    /* A gradient a child returned is dead once the child before it has
     * consumed it (dy itself belongs to our caller). */
    TdmTensor *cur = dy;
    for (guint k = n; k-- > 0;) {
        TdmModule *c = child_at(m, k);
        gboolean child_need_dx = need_dx || upstream[k];
        if (!child_need_dx && !tdm_module_any_trainable(c)) {
            if (cur != dy) {
                tdm_module_grad_release(m, cur);
            }
            cur = NULL;
            break;
        }
        TdmTensor *g = NULL;
        if (k >= 1 && reads_input(c) && !sequential_restore(m, k - 1, error)) {
            return FALSE;
        }
        if (cur != dy && cur->storage != dy->storage) {
            /* cur is ours and dead after c (not a view of our caller's dy,
             * as a Flatten's gradient can be): c may write over it */
            if (c->klass == &tdm_batchnorm2d_class) {
                tdm_batchnorm_allow_in_place(c);
            } else if (c->klass == &tdm_residual_class) {
                tdm_residual_allow_in_place(c);
            }
        }
        if (!tdm_module_backward(c, cur, child_need_dx, &g, error)) {
            prefix_child_error(error, c);
            return FALSE;
        }
        if (k >= 1 && child_at(m, k - 1)->klass == &tdm_conv2d_class) {
            tdm_conv2d_drop_output(child_at(m, k - 1)); /* when lent: read by c only */
        }
        if (k >= 2 && lends_to_reader(m, k - 2)) {
            tdm_batchnorm_reader_done(child_at(m, k - 2)); /* c was its reader */
        }
        if (cur != dy && cur != g) {
            tdm_module_grad_release(m, cur);
        }
        cur = g;
        if (!child_need_dx) {
            if (cur != NULL && cur != dy) {
                tdm_module_grad_release(m, cur);
            }
            cur = NULL;
            break;
        }
    }
    sequential_drop_lent(m);
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
    TDM_CLASS_HEADER(TDM_MODULE_IFACE_VERSION, TdmModuleClass),
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
    TdmOpCache *cache_add, *cache_relu_bwd, *cache_add_bwd;
    TdmTensor *sum, *out, *drelu, *dx; /* slots */
    TdmTensor *y;                      /* the last output (ReLU backward needs it) */
    gboolean dy_disposable;            /* the next backward may write over dy */
} ResidualPriv;

void tdm_residual_allow_in_place(TdmModule *m)
{
    g_return_if_fail(m != NULL && m->klass == &tdm_residual_class);
    ResidualPriv *rp = m->priv;
    rp->dy_disposable = TRUE;
}

/* TRUE when m's forward output is a buffer of its own that its backward
 * does not read, so that the block may write its sum over it: a conv, a
 * linear layer or a batch norm that did not apply a ReLU, or a Sequential
 * ending in one. Anything else (a ReLU, a pass-through) may hand back its
 * input or need its output later. */
static gboolean output_disposable(const TdmModule *m)
{
    if (m->klass == &tdm_sequential_class) {
        return m->children->len > 0 &&
               output_disposable(g_ptr_array_index(m->children, m->children->len - 1));
    }
    if (m->klass == &tdm_batchnorm2d_class) {
        return !tdm_batchnorm_applied_relu(m);
    }
    if (m->klass == &tdm_conv2d_class) {
        return !tdm_conv2d_applied_relu(m);
    }
    return m->klass == &tdm_linear_class;
}

/* The batch norm whose output is m's output (m itself, or the last child
 * of a Sequential, recursively), or NULL. */
static TdmModule *trailing_batchnorm(TdmModule *m)
{
    while (m != NULL && m->klass == &tdm_sequential_class) {
        m = m->children->len > 0 ? child_at(m, m->children->len - 1) : NULL;
    }
    return m != NULL && m->klass == &tdm_batchnorm2d_class ? m : NULL;
}

static gboolean residual_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    ResidualPriv *rp = m->priv;
    TdmDevice *dev = m->device;
    TdmModule *body = child_at(m, 0);
    TdmModule *shortcut = m->children->len > 1 ? child_at(m, 1) : NULL;
    TdmTensor *yb = NULL, *ys = x;
    /* A body ending in a batch norm without ReLU: the sum goes over its
     * output, which then is the block's, read by the next block and by
     * this one's ReLU backward, nothing after: lent, so that it takes the
     * gradient pool's memory only until then (residual_backward_body). */
    TdmModule *body_bn =
        lends_outputs(m) && output_disposable(body) ? trailing_batchnorm(body) : NULL;
    if (body_bn != NULL) {
        tdm_batchnorm_lend_output(body_bn);
    }
    if (!tdm_module_forward(body, x, &yb, error)) {
        return FALSE;
    }
    /* A shortcut ending in a batch norm (a downsample): the sum is the
     * only reader of its output (neither the sum's backward nor the batch
     * norm's reads it), so the output is lent and given back after the sum. */
    TdmModule *lent = lends_outputs(m) ? trailing_batchnorm(shortcut) : NULL;
    if (lent != NULL) {
        tdm_batchnorm_lend_output(lent);
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
    /* The sum goes over the body's output when nothing needs that later:
     * a block then costs no activation buffer of its own. */
    gboolean over_body = output_disposable(body) && yb->storage != ys->storage;
    TdmTensor *out;
    if (rp->relu_after) {
        out = over_body ? yb : tdm_module_slot(m, &rp->out, TDM_DTYPE_F32);
        if (!tdm_op_add_relu(dev, &rp->cache_add, yb, ys, out, error)) {
            return FALSE;
        }
    } else {
        out = over_body ? yb : tdm_module_slot(m, &rp->sum, TDM_DTYPE_F32);
        if (!tdm_op_add(dev, &rp->cache_add, yb, ys, out, error)) {
            return FALSE;
        }
    }
    if (lent != NULL && out->storage != ys->storage) {
        tdm_batchnorm_drop_output(lent);
    }
    if (body_bn != NULL && out->storage != yb->storage) {
        tdm_batchnorm_drop_output(body_bn); /* the sum went elsewhere */
    }
    tdm_module_keep(&rp->y, out);
    *y = out;
    return TRUE;
}

/* Storage shared with one of the others (NULL-safe). */
static gboolean shares_storage(const TdmTensor *t, const TdmTensor *a, const TdmTensor *b,
                               const TdmTensor *c)
{
    return t->storage == NULL || (a != NULL && t->storage == a->storage) ||
           (b != NULL && t->storage == b->storage) || (c != NULL && t->storage == c->storage);
}

/* Gives the block's output back to the pool when it was lent: it is the
 * body's batch norm's output (residual_forward). Dropping an output that
 * was not lent, or is gone already, does nothing. */
static void residual_drop_output(TdmModule *m)
{
    TdmModule *body_bn = trailing_batchnorm(child_at(m, 0));
    if (body_bn != NULL) {
        tdm_batchnorm_drop_output(body_bn);
    }
}

static gboolean residual_backward_body(TdmModule *m, TdmTensor *dy, gboolean need_dx,
                                       TdmTensor **dx, GError **error)
{
    ResidualPriv *rp = m->priv;
    TdmDevice *dev = m->device;
    TdmModule *body = child_at(m, 0);
    TdmModule *shortcut = m->children->len > 1 ? child_at(m, 1) : NULL;
    if (!need_dx && !tdm_module_any_trainable(m)) {
        residual_drop_output(m);
        return TRUE;
    }
    TdmTensor *d = dy;
    if (rp->relu_after) {
        if (rp->y == NULL || rp->y->storage == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "Residual: backward before forward");
            return FALSE;
        }
        /* over dy where the caller allows it and the backend can: one
         * block output's worth of gradient less at this point */
        gboolean over_dy = rp->dy_disposable && tdm_ops_can_write_over(dev, dy, rp->y);
        d = over_dy ? dy : tdm_module_grad_slot(m, &rp->drelu, rp->y);
        if (!tdm_op_relu_backward(dev, &rp->cache_relu_bwd, rp->y, dy, d, error)) {
            return FALSE;
        }
    }
    residual_drop_output(m); /* the block's output has no reader left */
    TdmTensor *ds = d, *db = NULL;
    if (shortcut != NULL && !tdm_module_backward(shortcut, d, need_dx, &ds, error)) {
        prefix_child_error(error, shortcut);
        return FALSE;
    }
    if (!tdm_module_backward(body, d, need_dx, &db, error)) {
        return FALSE;
    }
    if (!need_dx) {
        if (d != dy) {
            tdm_module_grad_release(m, d);
        }
        return TRUE;
    }
    /* dx = db + ds, summed in place over a gradient a child handed over
     * when one is not shared with d or dy. */
    TdmTensor *g;
    if (db != d && db != dy && !shares_storage(db, d, dy, ds)) {
        g = db;
    } else if (ds != d && ds != dy && !shares_storage(ds, d, dy, db)) {
        g = ds;
    } else {
        g = tdm_module_grad_slot(m, &rp->dx, db);
    }
    if (!tdm_op_add(dev, &rp->cache_add_bwd, db, ds, g, error)) {
        return FALSE;
    }
    TdmTensor *dead[3] = {d, ds, db};
    for (int i = 0; i < 3; i++) {
        if (dead[i] != dy && dead[i] != g) {
            tdm_module_grad_release(m, dead[i]);
        }
    }
    *dx = g;
    return TRUE;
}

static gboolean residual_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                                  GError **error)
{
    gboolean ok = residual_backward_body(m, dy, need_dx, dx, error);
    ((ResidualPriv *)m->priv)->dy_disposable = FALSE; /* for this call only */
    return ok;
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
    TdmOpCache **caches[] = {&rp->cache_add, &rp->cache_relu_bwd, &rp->cache_add_bwd, NULL};
    TdmTensor **slots[] = {&rp->sum, &rp->out, &rp->drelu, &rp->dx, &rp->y, NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_residual_class = TDM_LAYER_CLASS("Residual", residual);

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
    TdmTensor *g = tdm_module_grad_slot(m, &fp->dx, fp->x);
    if (!tdm_tensor_reorder(v, fp->x, g, &fp->cache_bwd, error)) {
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
    TdmOpCache **caches[] = {&fp->cache_fwd, &fp->cache_bwd, &fp->cache_rdy, NULL};
    TdmTensor **slots[] = {&fp->y_view, &fp->x_plain, &fp->dy_view, &fp->dy_plain,
                           &fp->dx,     &fp->x,       NULL};
    tdm_module_release(m, caches, slots);
}

const TdmModuleClass tdm_flatten_class = TDM_LAYER_CLASS("Flatten", flatten);

TdmModule *tdm_flatten_new(void)
{
    return tdm_module_new(&tdm_flatten_class, g_new0(FlattenPriv, 1));
}

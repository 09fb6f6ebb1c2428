/* SPDX-License-Identifier: MIT */
/* core/modules/pool.c - pooling layers: MaxPool2d, AvgPool2d (PyTorch's
 * defaults: stride = kernel when 0, floor mode, padding counted in the
 * average) and AdaptiveAvgPool2d with torchvision's bins (output cell i of
 * n over an input of size s averages [floor(i*s/n), ceil((i+1)*s/n)), so a
 * smaller input is upsampled: vgg's (7, 7) at 32-64 px).
 *
 * AdaptiveAvgPool2d needs no op of its own, so every backend runs it:
 * (1, 1) is the backend's global average pool, whose [N, C] result is
 * shown as [N, C, 1, 1] like PyTorch's; an output the size of the input is
 * the identity; an input that the output divides is an ordinary average
 * pool; any other size is a GEMM of the input seen as [N*C, H*W] with a
 * constant [H*W, OH*OW] matrix of bin weights (built on the host once per
 * input size), and its backward the product with the transpose. A blocked
 * input is reordered to plain first and the gradient back to its layout,
 * as Flatten does.
 */
#include "config.h"

#include "../internal.h"
#include "module-private.h"

typedef enum { POOL_MAX, POOL_AVG, POOL_ADAPTIVE } PoolKind;

/* How the last adaptive forward ran (see the top of the file). */
typedef enum { ADAPT_GLOBAL, ADAPT_IDENTITY, ADAPT_POOL, ADAPT_MATRIX } AdaptiveMode;

typedef struct {
    PoolKind kind;
    int kernel, stride, padding; /* max / avg */
    int out_h, out_w;            /* adaptive */
    TdmPool2dParams pp;          /* of the last forward */
    AdaptiveMode mode;           /* of the last adaptive forward */
    TdmOpCache *cache_fwd, *cache_bwd, *cache_rdy;
    TdmTensor *y, *dx, *workspace; /* slots */
    TdmTensor *y4, *dy2, *dy_plain; /* views / reorder slot of the global and matrix cases */
    /* matrix case: bin weights for an input of mat_h x mat_w, plain copies
     * of a blocked input and of its gradient, 2-D views, caches */
    int64_t mat_h, mat_w;
    TdmTensor *mat, *x_plain, *x2, *dx_plain, *dx2;
    TdmOpCache *cache_mm_fwd, *cache_mm_bwd, *cache_rx, *cache_rdx;
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

static AdaptiveMode adaptive_mode(PoolPriv *pp, const TdmTensor *x)
{
    int64_t h = x->shape[2], w = x->shape[3];
    if (pp->out_h == 1 && pp->out_w == 1) {
        return ADAPT_GLOBAL;
    }
    if (h == pp->out_h && w == pp->out_w) {
        return ADAPT_IDENTITY;
    }
    if (h % pp->out_h == 0 && w % pp->out_w == 0) {
        int kh = (int)(h / pp->out_h), kw = (int)(w / pp->out_w);
        pp->pp = (TdmPool2dParams){kh, kw, kh, kw, 0, 0, TRUE};
        return ADAPT_POOL;
    }
    return ADAPT_MATRIX;
}

/* Weight of input row (or column) i in output cell o of n over size s:
 * 1 inside torchvision's bin [floor(o*s/n), ceil((o+1)*s/n)), else 0;
 * *count gets the bin's length. */
static gboolean in_bin(int64_t i, int64_t o, int64_t n, int64_t s, int64_t *count)
{
    int64_t start = o * s / n;
    int64_t end = ((o + 1) * s + n - 1) / n;
    *count = end - start;
    return i >= start && i < end;
}

/* pp->mat = the [H*W, OH*OW] bin-weight matrix of an H x W input, made
 * (and uploaded) only when the input size changes. */
static gboolean adaptive_matrix(TdmModule *m, int64_t h, int64_t w, GError **error)
{
    PoolPriv *pp = m->priv;
    if (pp->mat != NULL && pp->mat_h == h && pp->mat_w == w) {
        return TRUE;
    }
    int64_t oh = pp->out_h, ow = pp->out_w;
    int64_t shape[2] = {h * w, oh * ow};
    g_autofree float *host = g_new0(float, (gsize)(shape[0] * shape[1]));
    for (int64_t i = 0; i < h; i++) {
        for (int64_t j = 0; j < w; j++) {
            for (int64_t a = 0; a < oh; a++) {
                int64_t ch, cw;
                if (!in_bin(i, a, oh, h, &ch)) {
                    continue;
                }
                for (int64_t b = 0; b < ow; b++) {
                    if (in_bin(j, b, ow, w, &cw)) {
                        host[(i * w + j) * shape[1] + a * ow + b] = 1.0f / (float)(ch * cw);
                    }
                }
            }
        }
    }
    tdm_module_slot_clear(&pp->mat);
    pp->mat = tdm_tensor_new(m->device, TDM_DTYPE_F32, 2, shape, error);
    if (pp->mat == NULL || !tdm_tensor_write(pp->mat, host, error)) {
        tdm_module_slot_clear(&pp->mat);
        g_prefix_error(error, "AdaptiveAvgPool2d(%d, %d): ", pp->out_h, pp->out_w);
        return FALSE;
    }
    pp->mat_h = h;
    pp->mat_w = w;
    return TRUE;
}

/* y [N, C, OH, OW] = x [N*C, H*W] @ mat, through the plain layout. */
static gboolean adaptive_matrix_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    PoolPriv *pp = m->priv;
    int64_t n = x->shape[0], c = x->shape[1];
    if (!adaptive_matrix(m, x->shape[2], x->shape[3], error)) {
        return FALSE;
    }
    TdmTensor *xp = tdm_module_as_plain(m, &pp->cache_rx, x, &pp->x_plain, error);
    int64_t xshape[2] = {n * c, x->shape[2] * x->shape[3]};
    TdmTensor *x2 = xp != NULL ? tdm_module_view(&pp->x2, xp, 2, xshape, error) : NULL;
    if (x2 == NULL) {
        return FALSE;
    }
    TdmTensor *out = tdm_module_slot(m, &pp->y, TDM_DTYPE_F32);
    int64_t oshape[2] = {n * c, (int64_t)pp->out_h * pp->out_w};
    if (!tdm_tensor_ensure(out, TDM_DTYPE_F32, 2, oshape, NULL, 0, error) ||
        !tdm_op_gemm(m->device, &pp->cache_mm_fwd, FALSE, FALSE, 1.0f, x2, pp->mat, 0.0f, out, NULL,
                     error)) {
        return FALSE;
    }
    int64_t shape[4] = {n, c, pp->out_h, pp->out_w};
    TdmTensor *v = tdm_module_view(&pp->y4, out, 4, shape, error);
    if (v == NULL) {
        return FALSE;
    }
    *y = v;
    return TRUE;
}

/* dx [N*C, H*W] = dy [N*C, OH*OW] @ mat^T, in the input's layout. */
static gboolean adaptive_matrix_backward(TdmModule *m, TdmTensor *dy, TdmTensor **dx,
                                         GError **error)
{
    PoolPriv *pp = m->priv;
    TdmTensor *x = pp->x;
    int64_t nc = x->shape[0] * x->shape[1];
    int64_t dshape[2] = {nc, (int64_t)pp->out_h * pp->out_w};
    if (tdm_tensor_numel(dy) != dshape[0] * dshape[1]) {
        g_autofree char *s = tdm_tensor_shape_string(dy);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "AdaptiveAvgPool2d(%d, %d): output gradient %s, expected [%" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT ", %d, %d]",
                    pp->out_h, pp->out_w, s, x->shape[0], x->shape[1], pp->out_h, pp->out_w);
        return FALSE;
    }
    TdmTensor *dyp = tdm_module_as_plain(m, &pp->cache_rdy, dy, &pp->dy_plain, error);
    TdmTensor *dy2 = dyp != NULL ? tdm_module_view(&pp->dy2, dyp, 2, dshape, error) : NULL;
    if (dy2 == NULL) {
        return FALSE;
    }
    gboolean plain = tdm_tensor_is_plain(x);
    TdmTensor *g = plain ? tdm_module_grad_slot(m, &pp->dx, x)
                         : tdm_module_slot(m, &pp->dx_plain, TDM_DTYPE_F32);
    int64_t gshape[2] = {nc, x->shape[2] * x->shape[3]};
    TdmTensor *g2 = NULL;
    gboolean ok = tdm_tensor_ensure(g, TDM_DTYPE_F32, 4, x->shape, NULL, 0, error) &&
                  (g2 = tdm_module_view(&pp->dx2, g, 2, gshape, error)) != NULL &&
                  tdm_op_gemm(m->device, &pp->cache_mm_bwd, FALSE, TRUE, 1.0f, dy2, pp->mat, 0.0f,
                              g2, NULL, error);
    /* The views must not keep pooled gradient buffers busy until next step. */
    tdm_module_grad_release(m, dy2);
    tdm_module_grad_release(m, g2);
    if (!ok) {
        return FALSE;
    }
    if (!plain) {
        TdmTensor *blocked = tdm_module_grad_slot(m, &pp->dx, x);
        if (!tdm_tensor_reorder(g, x, blocked, &pp->cache_rdx, error)) {
            return FALSE;
        }
        g = blocked;
    }
    *dx = g;
    return TRUE;
}

/* AdaptiveAvgPool2d's forward: one of the four ways at the top of the file. */
static gboolean adaptive_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    PoolPriv *pp = m->priv;
    TdmDevice *dev = m->device;
    pp->mode = adaptive_mode(pp, x);
    switch (pp->mode) {
    case ADAPT_IDENTITY:
        *y = x;
        return TRUE;
    case ADAPT_MATRIX:
        return adaptive_matrix_forward(m, x, y, error);
    case ADAPT_POOL: {
        TdmTensor *out = tdm_module_slot(m, &pp->y, TDM_DTYPE_F32);
        if (!tdm_op_avgpool2d_forward(dev, &pp->cache_fwd, &pp->pp, x, out, error)) {
            return FALSE;
        }
        *y = out;
        return TRUE;
    }
    case ADAPT_GLOBAL:
        break;
    }
    TdmTensor *out = tdm_module_slot(m, &pp->y, TDM_DTYPE_F32);
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

static gboolean pool_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    PoolPriv *pp = m->priv;
    TdmDevice *dev = m->device;
    if (!check_input(m, x, error)) {
        return FALSE;
    }
    tdm_module_keep(&pp->x, x);
    if (pp->kind == POOL_ADAPTIVE) {
        return adaptive_forward(m, x, y, error);
    }
    TdmTensor *out = tdm_module_slot(m, &pp->y, TDM_DTYPE_F32);
    if (pp->kind == POOL_MAX) {
        TdmTensor *ws = tdm_module_slot(m, &pp->workspace, TDM_DTYPE_I32);
        if (!tdm_op_maxpool2d_forward(dev, &pp->cache_fwd, &pp->pp, x, out, ws, error)) {
            return FALSE;
        }
    } else if (!tdm_op_avgpool2d_forward(dev, &pp->cache_fwd, &pp->pp, x, out, error)) {
        return FALSE;
    }
    *y = out;
    return TRUE;
}

/* The global case's backward: dy [N, C, 1, 1] seen as [N, C]. */
static gboolean global_backward(TdmModule *m, TdmTensor *dy, TdmTensor *g, GError **error)
{
    PoolPriv *pp = m->priv;
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
    gboolean ok = dy2 != NULL &&
                  tdm_op_global_avgpool_backward(m->device, &pp->cache_bwd, dy2, pp->x, g, error);
    /* The view must not keep dy's (pooled) buffer busy until next step. */
    tdm_module_grad_release(m, dy2);
    return ok;
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
    gboolean adaptive = pp->kind == POOL_ADAPTIVE;
    if (adaptive && pp->mode == ADAPT_IDENTITY) {
        *dx = dy;
        return TRUE;
    }
    if (adaptive && pp->mode == ADAPT_MATRIX) {
        return adaptive_matrix_backward(m, dy, dx, error);
    }
    TdmTensor *g = tdm_module_grad_slot(m, &pp->dx, pp->x);
    gboolean ok = FALSE;
    if (pp->kind == POOL_MAX) {
        ok = tdm_op_maxpool2d_backward(dev, &pp->cache_bwd, &pp->pp, dy, pp->workspace, pp->x, g,
                                       error);
    } else if (adaptive && pp->mode == ADAPT_GLOBAL) {
        ok = global_backward(m, dy, g, error);
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
    TdmOpCache **caches[] = {&pp->cache_fwd,    &pp->cache_bwd, &pp->cache_rdy, &pp->cache_mm_fwd,
                             &pp->cache_mm_bwd, &pp->cache_rx,  &pp->cache_rdx, NULL};
    TdmTensor **slots[] = {&pp->y4,        &pp->dy2,     &pp->dy_plain, &pp->dx2, &pp->x2,
                           &pp->mat,       &pp->x_plain, &pp->y,        &pp->dx,  &pp->dx_plain,
                           &pp->workspace, &pp->x,       NULL};
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

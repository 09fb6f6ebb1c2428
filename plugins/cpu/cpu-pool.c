/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-pool.c - pooling on oneDNN: average and global average
 * pooling, and max pooling where cpu-maxpool.c's own loops do not apply.
 *
 * Pooling keeps its input's layout (its destination is created with format
 * `any`, which oneDNN resolves to the source's format). Max pooling's
 * workspace (the argmax oneDNN records in training mode) is the op's
 * workspace output, a u8 or s32 tensor in the destination's layout. Global
 * average pooling is an average pooling whose window is the whole image; its
 * [N, C, 1, 1] result is reordered into the plain [N, C] the classifier
 * reads, and its gradient comes back the same way. The geometry and the key
 * parameters are shared with cpu-maxpool.c.
 */
#include "config.h"

#include <string.h>

#include "cpu.h"

void cpu_pool_geom(const TdmPool2dParams *p, const int64_t *x, CpuPoolGeom *g)
{
    int64_t oh = (x[2] + 2 * p->pad_h - p->kernel_h) / p->stride_h + 1;
    int64_t ow = (x[3] + 2 * p->pad_w - p->kernel_w) / p->stride_w + 1;
    memset(g, 0, sizeof *g);
    g->strides[0] = p->stride_h;
    g->strides[1] = p->stride_w;
    g->kernel[0] = p->kernel_h;
    g->kernel[1] = p->kernel_w;
    g->pad_l[0] = p->pad_h;
    g->pad_l[1] = p->pad_w;
    g->pad_r[0] = cpu_pad_right(oh, p->stride_h, p->kernel_h, x[2], p->pad_h);
    g->pad_r[1] = cpu_pad_right(ow, p->stride_w, p->kernel_w, x[3], p->pad_w);
    g->y_shape[0] = x[0];
    g->y_shape[1] = x[1];
    g->y_shape[2] = oh;
    g->y_shape[3] = ow;
}

void cpu_pool_key_init(CpuKey *k, CpuOpKind kind, const TdmPool2dParams *p, dnnl_alg_kind_t alg)
{
    cpu_key_init(k, kind);
    cpu_key_add(k, alg);
    cpu_key_add(k, p->kernel_h);
    cpu_key_add(k, p->kernel_w);
    cpu_key_add(k, p->stride_h);
    cpu_key_add(k, p->stride_w);
    cpu_key_add(k, p->pad_h);
    cpu_key_add(k, p->pad_w);
}

static gboolean pool_fwd_pd(TdmDevice *dev, dnnl_alg_kind_t alg, const CpuPoolGeom *g,
                            const dnnl_memory_desc_t *src, gboolean user_scratch,
                            dnnl_primitive_desc_t *pd, GError **error)
{
    dnnl_memory_desc_t dst;
    dnnl_pooling_v2_desc_t d;
    dnnl_dims_t dims = {g->y_shape[0], g->y_shape[1], g->y_shape[2], g->y_shape[3]};
    if (!cpu_check(dnnl_memory_desc_init_by_tag(&dst, 4, dims, dnnl_f32, dnnl_format_tag_any),
                   "pooling desc", error) ||
        !cpu_check(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_training, alg, src, &dst,
                                                     g->strides, g->kernel, g->dilation, g->pad_l,
                                                     g->pad_r),
                   "pooling desc", error)) {
        return FALSE;
    }
    if (user_scratch) {
        return cpu_pd_create(dev, &d, NULL, pd, "pooling forward", error);
    }
    return cpu_check(dnnl_primitive_desc_create(pd, &d, NULL, CPU_DEV(dev)->engine, NULL),
                     "pooling forward", error);
}

static gboolean pool_bwd_pd(TdmDevice *dev, dnnl_alg_kind_t alg, const CpuPoolGeom *g,
                            const dnnl_memory_desc_t *src, dnnl_primitive_desc_t *pd,
                            GError **error)
{
    dnnl_primitive_desc_t fpd = NULL;
    if (!pool_fwd_pd(dev, alg, g, src, FALSE, &fpd, error)) {
        return FALSE;
    }
    const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
    dnnl_pooling_v2_desc_t d;
    gboolean ok =
        cpu_check(dnnl_pooling_v2_backward_desc_init(&d, alg, src, dst, g->strides, g->kernel,
                                                     g->dilation, g->pad_l, g->pad_r),
                  "pooling backward desc", error) &&
        cpu_pd_create(dev, &d, fpd, pd, "pooling backward", error);
    dnnl_primitive_desc_destroy(fpd);
    return ok;
}

/* ---- forward ---- */

/* The pooling primitive of a forward entry on x (*pd: its descriptor,
 * which the caller frees), with its source and destination memory. */
static gboolean pool_fwd_prim(TdmDevice *dev, CpuEntry *e, dnnl_alg_kind_t alg,
                              const CpuPoolGeom *g, const TdmTensor *x, dnnl_primitive_desc_t *pd,
                              int *prim, int *src, int *dst, GError **error)
{
    dnnl_memory_desc_t xmd;
    if (!cpu_tensor_md(x, &xmd, error) || !pool_fwd_pd(dev, alg, g, &xmd, TRUE, pd, error) ||
        !cpu_prim_create(dev, e, *pd, prim, error)) {
        return FALSE;
    }
    *src = cpu_entry_mem(dev, e, &xmd);
    *dst = cpu_entry_mem(dev, e, dnnl_primitive_desc_query_md(*pd, dnnl_query_dst_md, 0));
    return TRUE;
}

/* Max or average pooling: the primitive, its output and, for max pooling
 * in training, its workspace (output 1). */
static CpuEntry *pool_forward_setup(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                                    const CpuKey *key, dnnl_alg_kind_t alg, const CpuPoolGeom *g,
                                    const TdmTensor *x, GError **error)
{
    CpuEntry *e = cpu_entry_new(kind, key);
    CpuPoolFwdOp *op = &e->pool_fwd;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = pool_fwd_prim(dev, e, alg, g, x, &pd, &op->prim, &op->src, &op->dst, error);
    if (ok) {
        const dnnl_memory_desc_t *wmd =
            dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
        op->workspace = -1;
        cpu_entry_set_output(dev, e, 0, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                             TDM_DTYPE_F32);
        if (wmd != NULL && wmd->ndims > 0) {
            op->workspace = cpu_entry_mem(dev, e, wmd);
            op->workspace_ndims = wmd->ndims;
            for (int i = 0; i < wmd->ndims && i < 4; i++) {
                op->workspace_shape[i] = wmd->dims[i];
            }
            cpu_entry_set_output(dev, e, 1, wmd, (TdmDType)-1);
        }
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

gboolean cpu_pool_forward(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                          dnnl_alg_kind_t alg, const TdmPool2dParams *p, TdmTensor *x,
                          TdmTensor *y, TdmTensor *ws, GError **error)
{
    CpuPoolGeom g;
    cpu_pool_geom(p, x->shape, &g);
    CpuKey key;
    cpu_pool_key_init(&key, kind, p, alg);
    cpu_key_add_tensor(&key, x);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL && (e = pool_forward_setup(dev, cache, kind, &key, alg, &g, x, error)) == NULL) {
        return FALSE;
    }
    CpuPoolFwdOp *op = &e->pool_fwd;
    void *xp = tdm_tensor_data(x);
    gboolean ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
    if (ok && op->workspace >= 0 && ws != NULL) {
        ok = cpu_entry_ensure_output(e, 1, ws, op->workspace_ndims, op->workspace_shape, error);
    }
    if (ok && op->workspace >= 0 && ws == NULL && op->workspace_buf == NULL) {
        op->workspace_buf = cpu_entry_buf(e, e->nbytes[1]);
    }
    if (ok) {
        dnnl_exec_arg_t args[4];
        int n = 0;
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, op->src, xp)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, cpu_mem(e, op->dst, tdm_tensor_data(y))};
        if (op->workspace >= 0) {
            void *wp = ws != NULL ? tdm_tensor_data(ws) : op->workspace_buf;
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, cpu_mem(e, op->workspace, wp)};
        }
        ok = cpu_run(dev, e, op->prim, n, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* ---- backward ---- */

/* The backward's entry (max, average or global average pooling): the
 * primitive on x_like's layout and the reorder of dy (its desc dymd) into
 * the one it reads. */
static CpuEntry *pool_backward_setup(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                                     const CpuKey *key, dnnl_alg_kind_t alg, const CpuPoolGeom *g,
                                     const TdmTensor *x_like, const dnnl_memory_desc_t *dymd,
                                     GError **error)
{
    CpuEntry *e = cpu_entry_new(kind, key);
    CpuPoolBwdOp *op = &e->pool_bwd;
    dnnl_memory_desc_t xmd;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = cpu_tensor_md(x_like, &xmd, error) && pool_bwd_pd(dev, alg, g, &xmd, &pd, error);
    const dnnl_memory_desc_t *ddst =
        ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0) : NULL;
    ok = ok && cpu_convert_init(dev, e, &op->dy_in, dymd, ddst, error) &&
         cpu_prim_create(dev, e, pd, &op->prim, error);
    if (ok) {
        const dnnl_memory_desc_t *dsrc =
            dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
        const dnnl_memory_desc_t *wmd =
            dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
        op->diff_dst = cpu_entry_mem(dev, e, ddst);
        op->diff_src = cpu_entry_mem(dev, e, dsrc);
        op->workspace = wmd != NULL && wmd->ndims > 0 ? cpu_entry_mem(dev, e, wmd) : -1;
        op->workspace_bytes = wmd != NULL ? dnnl_memory_desc_get_size(wmd) : 0;
        cpu_entry_set_output(dev, e, 0, dsrc, TDM_DTYPE_F32);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

/* Runs a backward entry into dx; ws is max pooling's workspace (NULL for
 * average pooling). Releases e. */
static gboolean pool_backward_run(TdmDevice *dev, TdmOpCache **cache, CpuEntry *e, TdmTensor *dy,
                                  TdmTensor *ws, const TdmTensor *x_like, TdmTensor *dx,
                                  GError **error)
{
    CpuPoolBwdOp *op = &e->pool_bwd;
    gboolean ok = TRUE;
    if (op->workspace >= 0 && tdm_tensor_nbytes(ws) < op->workspace_bytes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu maxpool backward: workspace of %zu bytes, expected %zu",
                    tdm_tensor_nbytes(ws), op->workspace_bytes);
        ok = FALSE;
    }
    void *dys = ok ? cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error) : NULL;
    ok = dys != NULL && cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
    if (ok) {
        dnnl_exec_arg_t args[4];
        int n = 0;
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, cpu_mem(e, op->diff_dst, dys)};
        args[n++] =
            (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, cpu_mem(e, op->diff_src, tdm_tensor_data(dx))};
        if (op->workspace >= 0) {
            args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE,
                                          cpu_mem(e, op->workspace, tdm_tensor_data(ws))};
        }
        ok = cpu_run(dev, e, op->prim, n, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_pool_backward(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind, dnnl_alg_kind_t alg,
                           const TdmPool2dParams *p, TdmTensor *dy, TdmTensor *ws,
                           const TdmTensor *x_like, TdmTensor *dx, GError **error)
{
    CpuPoolGeom g;
    cpu_pool_geom(p, x_like->shape, &g);
    CpuKey key;
    cpu_pool_key_init(&key, kind, p, alg);
    cpu_key_add_tensors(&key, 2, dy, x_like);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL) {
        dnnl_memory_desc_t dymd;
        if (!cpu_tensor_md(dy, &dymd, error) ||
            (e = pool_backward_setup(dev, cache, kind, &key, alg, &g, x_like, &dymd, error)) ==
                NULL) {
            return FALSE;
        }
    }
    return pool_backward_run(dev, cache, e, dy, ws, x_like, dx, error);
}

/* ---- average pooling ---- */

static dnnl_alg_kind_t avg_alg(const TdmPool2dParams *p)
{
    return p->count_include_pad ? dnnl_pooling_avg_include_padding
                                : dnnl_pooling_avg_exclude_padding;
}

gboolean cpu_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, GError **error)
{
    return cpu_pool_forward(dev, cache, CPU_OP_AVGPOOL_FWD, avg_alg(p), p, x, y, NULL, error);
}

gboolean cpu_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                GError **error)
{
    return cpu_pool_backward(dev, cache, CPU_OP_AVGPOOL_BWD, avg_alg(p), p, dy, NULL, x_like, dx,
                             error);
}

/* ---- global average pooling: a window of the whole image ---- */

static void global_geom(const int64_t *shape, CpuPoolGeom *g)
{
    TdmPool2dParams p = {
        .kernel_h = (int)shape[2], .kernel_w = (int)shape[3], .stride_h = 1, .stride_w = 1};
    cpu_pool_geom(&p, shape, g);
}

/* The pooling into [N, C, 1, 1] (pooled, or y itself when the primitive's
 * output is plain) and its reorder into the plain [N, C] y. */
static CpuEntry *gap_forward_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                   const TdmTensor *x, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_GAP_FWD, key);
    CpuGapFwdOp *op = &e->gap_fwd;
    CpuPoolGeom g;
    global_geom(x->shape, &g);
    dnnl_memory_desc_t plain;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = cpu_plain_md(&plain, 4, g.y_shape, dnnl_f32, error) &&
                  pool_fwd_prim(dev, e, dnnl_pooling_avg_exclude_padding, &g, x, &pd, &op->prim,
                                &op->src, &op->dst, error);
    const dnnl_memory_desc_t *dst =
        ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0) : NULL;
    ok = ok && cpu_convert_init(dev, e, &op->to_plain, dst, &plain, error);
    if (ok && op->to_plain.prim >= 0) {
        op->pooled = cpu_entry_buf(e, dnnl_memory_desc_get_size(dst));
        ok = op->pooled != NULL;
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

gboolean cpu_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *y, GError **error)
{
    CpuKey key;
    cpu_key_init(&key, CPU_OP_GAP_FWD);
    cpu_key_add_tensor(&key, x);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_GAP_FWD, &key);
    if (e == NULL && (e = gap_forward_setup(dev, cache, &key, x, error)) == NULL) {
        return FALSE;
    }
    CpuGapFwdOp *op = &e->gap_fwd;
    CpuConvert *c = &op->to_plain;
    int64_t shape[2] = {x->shape[0], x->shape[1]};
    void *xp = tdm_tensor_data(x);
    gboolean ok = tdm_tensor_ensure(y, TDM_DTYPE_F32, 2, shape, NULL, 0, error);
    if (ok) {
        void *pooled = c->prim >= 0 ? op->pooled : tdm_tensor_data(y);
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, cpu_mem(e, op->src, xp)},
            {DNNL_ARG_DST, cpu_mem(e, op->dst, pooled)},
        };
        ok = cpu_run(dev, e, op->prim, 2, args, error);
        if (ok && c->prim >= 0) {
            dnnl_exec_arg_t rargs[3] = {
                {DNNL_ARG_FROM, cpu_mem(e, c->src, pooled)},
                {DNNL_ARG_TO, cpu_mem(e, c->dst, tdm_tensor_data(y))},
            };
            ok = cpu_run(dev, e, c->prim, 2, rargs, error);
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                     const TdmTensor *x_like, TdmTensor *dx, GError **error)
{
    /* tdm_op_global_avgpool_backward also takes dy as [N, C, 1, 1]; the
     * gradient desc below is made for a plain [N, C] */
    if (dy->ndim != 2 || dy->layout != NULL) {
        return cpu_refuse("global_avgpool_backward", "dy", dy, "must be a plain [N, C]", error);
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_GAP_BWD);
    cpu_key_add_tensors(&key, 2, dy, x_like);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_GAP_BWD, &key);
    if (e == NULL) {
        CpuPoolGeom g;
        global_geom(x_like->shape, &g);
        /* dy [N, C] seen as the [N, C, 1, 1] the pooling wrote */
        dnnl_memory_desc_t dymd;
        dnnl_dims_t dims = {dy->shape[0], dy->shape[1], 1, 1};
        dnnl_dims_t strides = {dy->stride[0], dy->stride[1], 1, 1};
        if (!cpu_check(dnnl_memory_desc_init_by_strides(&dymd, 4, dims, dnnl_f32, strides),
                       "gradient desc", error) ||
            (e = pool_backward_setup(dev, cache, CPU_OP_GAP_BWD, &key,
                                     dnnl_pooling_avg_exclude_padding, &g, x_like, &dymd, error)) ==
                NULL) {
            return FALSE;
        }
    }
    return pool_backward_run(dev, cache, e, dy, NULL, x_like, dx, error);
}

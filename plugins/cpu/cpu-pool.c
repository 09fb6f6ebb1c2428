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
    g->pad_r[0] = MAX(0, (oh - 1) * p->stride_h + p->kernel_h - x[2] - p->pad_h);
    g->pad_r[1] = MAX(0, (ow - 1) * p->stride_w + p->kernel_w - x[3] - p->pad_w);
    g->y_shape[0] = x[0];
    g->y_shape[1] = x[1];
    g->y_shape[2] = oh;
    g->y_shape[3] = ow;
}

void cpu_pool_key_add(CpuKey *k, const TdmPool2dParams *p, dnnl_alg_kind_t alg)
{
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
    dnnl_primitive_attr_t attr = user_scratch ? cpu_attr_new(0.0f, 1.0f) : NULL;
    dnnl_status_t s = dnnl_primitive_desc_create(pd, &d, attr, CPU_DEV(dev)->engine, NULL);
    if (attr != NULL) {
        dnnl_primitive_attr_destroy(attr);
    }
    return cpu_check(s, "pooling forward", error);
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
    dnnl_primitive_attr_t attr = cpu_attr_new(0.0f, 1.0f);
    gboolean ok = cpu_check(dnnl_pooling_v2_backward_desc_init(&d, alg, src, dst, g->strides,
                                                               g->kernel, g->dilation, g->pad_l,
                                                               g->pad_r),
                            "pooling backward desc", error) &&
                  cpu_check(dnnl_primitive_desc_create(pd, &d, attr, CPU_DEV(dev)->engine, fpd),
                            "pooling backward", error);
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_desc_destroy(fpd);
    return ok;
}

gboolean cpu_pool_forward(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                          dnnl_alg_kind_t alg, const TdmPool2dParams *p, TdmTensor *x,
                          TdmTensor *y, TdmTensor *ws, GError **error)
{
    CpuPoolGeom g;
    cpu_pool_geom(p, x->shape, &g);
    CpuKey key;
    cpu_key_init(&key, kind);
    cpu_pool_key_add(&key, p, alg);
    cpu_key_add_tensor(&key, x);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL) {
        e = cpu_entry_new(kind, &key);
        dnnl_memory_desc_t xmd;
        dnnl_primitive_desc_t pd = NULL;
        CpuPoolFwdOp *op = &e->pool_fwd;
        gboolean ok = cpu_tensor_md(x, &xmd, error) &&
                      pool_fwd_pd(dev, alg, &g, &xmd, TRUE, &pd, error) &&
                      cpu_prim_create(dev, e, pd, &op->prim, error);
        if (ok) {
            const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            const dnnl_memory_desc_t *wmd =
                dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
            op->src = cpu_entry_mem(dev, e, &xmd);
            op->dst = cpu_entry_mem(dev, e, dst);
            op->workspace = -1;
            cpu_entry_set_output(dev, e, 0, dst, TDM_DTYPE_F32);
            if (wmd != NULL && wmd->ndims > 0) {
                op->workspace = cpu_entry_mem(dev, e, wmd);
                op->workspace_ndims = wmd->ndims;
                for (int i = 0; i < wmd->ndims && i < 4; i++) {
                    op->workspace_shape[i] = wmd->dims[i];
                }
                cpu_entry_set_output(dev, e, 1, wmd, (TdmDType)-1);
            }
        }
        if (pd != NULL) {
            dnnl_primitive_desc_destroy(pd);
        }
        if (!ok) {
            cpu_entry_free(e);
            return FALSE;
        }
        cpu_cache_insert(cache, e);
    }
    CpuPoolFwdOp *op = &e->pool_fwd;
    void *xp = tdm_tensor_data(x);
    gboolean ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
    if (ok && op->workspace >= 0 && ws != NULL) {
        ok = cpu_entry_ensure_output(e, 1, ws, op->workspace_ndims, op->workspace_shape, error);
    }
    if (ok) {
        dnnl_exec_arg_t args[4];
        int n = 0;
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, op->src, xp)};
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, cpu_mem(e, op->dst, tdm_tensor_data(y))};
        if (op->workspace >= 0) {
            if (ws == NULL) {
                if (op->workspace_buf == NULL) {
                    op->workspace_buf = cpu_entry_buf(e, e->nbytes[1]);
                }
                args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE,
                                              cpu_mem(e, op->workspace, op->workspace_buf)};
            } else {
                args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE,
                                              cpu_mem(e, op->workspace, tdm_tensor_data(ws))};
            }
        }
        ok = cpu_run(dev, e, op->prim, n, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_pool_backward(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                           dnnl_alg_kind_t alg, const TdmPool2dParams *p, TdmTensor *dy,
                           TdmTensor *ws, const TdmTensor *x_like, TdmTensor *dx,
                           GError **error)
{
    CpuPoolGeom g;
    cpu_pool_geom(p, x_like->shape, &g);
    CpuKey key;
    cpu_key_init(&key, kind);
    cpu_pool_key_add(&key, p, alg);
    cpu_key_add_tensor(&key, dy);
    cpu_key_add_tensor(&key, x_like);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL) {
        e = cpu_entry_new(kind, &key);
        dnnl_memory_desc_t xmd, dymd;
        dnnl_primitive_desc_t pd = NULL;
        CpuPoolBwdOp *op = &e->pool_bwd;
        gboolean ok = cpu_tensor_md(x_like, &xmd, error) && cpu_tensor_md(dy, &dymd, error) &&
                      pool_bwd_pd(dev, alg, &g, &xmd, &pd, error);
        const dnnl_memory_desc_t *ddst =
            ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0) : NULL;
        ok = ok && cpu_convert_init(dev, e, &op->dy_in, &dymd, ddst, error) &&
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
        if (pd != NULL) {
            dnnl_primitive_desc_destroy(pd);
        }
        if (!ok) {
            cpu_entry_free(e);
            return FALSE;
        }
        cpu_cache_insert(cache, e);
    }
    CpuPoolBwdOp *op = &e->pool_bwd;
    if (op->workspace >= 0 && tdm_tensor_nbytes(ws) < op->workspace_bytes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu maxpool backward: workspace of %zu bytes, expected %zu",
                    tdm_tensor_nbytes(ws), op->workspace_bytes);
        cpu_entry_release(cache, e);
        return FALSE;
    }
    void *dys = cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error);
    gboolean ok = dys != NULL && cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
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

static TdmPool2dParams global_params(const int64_t *shape)
{
    return (TdmPool2dParams){.kernel_h = (int)shape[2], .kernel_w = (int)shape[3],
                             .stride_h = 1, .stride_w = 1};
}

gboolean cpu_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *y, GError **error)
{
    TdmPool2dParams p = global_params(x->shape);
    CpuPoolGeom g;
    cpu_pool_geom(&p, x->shape, &g);
    CpuKey key;
    cpu_key_init(&key, CPU_OP_GAP_FWD);
    cpu_key_add_tensor(&key, x);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_GAP_FWD, &key);
    if (e == NULL) {
        e = cpu_entry_new(CPU_OP_GAP_FWD, &key);
        dnnl_memory_desc_t xmd, plain;
        dnnl_primitive_desc_t pd = NULL;
        CpuGapFwdOp *op = &e->gap_fwd;
        gboolean ok = cpu_tensor_md(x, &xmd, error) &&
                      cpu_plain_md(&plain, 4, g.y_shape, dnnl_f32, error) &&
                      pool_fwd_pd(dev, dnnl_pooling_avg_exclude_padding, &g, &xmd, TRUE, &pd,
                                  error) &&
                      cpu_prim_create(dev, e, pd, &op->prim, error);
        if (ok) {
            const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
            op->src = cpu_entry_mem(dev, e, &xmd);
            op->dst = cpu_entry_mem(dev, e, dst);
            ok = cpu_convert_init(dev, e, &op->to_plain, dst, &plain, error);
            if (ok && op->to_plain.prim >= 0) {
                op->pooled = cpu_entry_buf(e, dnnl_memory_desc_get_size(dst));
                ok = op->pooled != NULL;
            }
        }
        if (pd != NULL) {
            dnnl_primitive_desc_destroy(pd);
        }
        if (!ok) {
            cpu_entry_free(e);
            return FALSE;
        }
        cpu_cache_insert(cache, e);
    }
    int64_t shape[2] = {x->shape[0], x->shape[1]};
    void *xp = tdm_tensor_data(x);
    gboolean ok = tdm_tensor_ensure(y, TDM_DTYPE_F32, 2, shape, NULL, 0, error);
    if (ok) {
        CpuGapFwdOp *op = &e->gap_fwd;
        CpuConvert *c = &op->to_plain;
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
        g_autofree char *s = tdm_tensor_shape_string(dy);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu global avgpool backward: gradient %s, expected plain [%" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT "]",
                    s, x_like->shape[0], x_like->shape[1]);
        return FALSE;
    }
    TdmPool2dParams p = global_params(x_like->shape);
    CpuPoolGeom g;
    cpu_pool_geom(&p, x_like->shape, &g);
    CpuKey key;
    cpu_key_init(&key, CPU_OP_GAP_BWD);
    cpu_key_add_tensor(&key, dy);
    cpu_key_add_tensor(&key, x_like);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_GAP_BWD, &key);
    if (e == NULL) {
        e = cpu_entry_new(CPU_OP_GAP_BWD, &key);
        dnnl_memory_desc_t xmd, dymd;
        dnnl_dims_t dims = {dy->shape[0], dy->shape[1], 1, 1};
        dnnl_dims_t strides = {dy->stride[0], dy->stride[1], 1, 1};
        dnnl_primitive_desc_t pd = NULL;
        CpuGapBwdOp *op = &e->gap_bwd;
        gboolean ok = cpu_tensor_md(x_like, &xmd, error) &&
                      cpu_check(dnnl_memory_desc_init_by_strides(&dymd, 4, dims, dnnl_f32, strides),
                                "gradient desc", error) &&
                      pool_bwd_pd(dev, dnnl_pooling_avg_exclude_padding, &g, &xmd, &pd, error);
        const dnnl_memory_desc_t *ddst =
            ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0) : NULL;
        ok = ok && cpu_convert_init(dev, e, &op->dy_in, &dymd, ddst, error) &&
             cpu_prim_create(dev, e, pd, &op->prim, error);
        if (ok) {
            const dnnl_memory_desc_t *dsrc =
                dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
            op->diff_dst = cpu_entry_mem(dev, e, ddst);
            op->diff_src = cpu_entry_mem(dev, e, dsrc);
            cpu_entry_set_output(dev, e, 0, dsrc, TDM_DTYPE_F32);
        }
        if (pd != NULL) {
            dnnl_primitive_desc_destroy(pd);
        }
        if (!ok) {
            cpu_entry_free(e);
            return FALSE;
        }
        cpu_cache_insert(cache, e);
    }
    CpuGapBwdOp *op = &e->gap_bwd;
    void *dys = cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error);
    gboolean ok = dys != NULL && cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
    if (ok) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_DIFF_DST, cpu_mem(e, op->diff_dst, dys)},
            {DNNL_ARG_DIFF_SRC, cpu_mem(e, op->diff_src, tdm_tensor_data(dx))},
        };
        ok = cpu_run(dev, e, op->prim, 2, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

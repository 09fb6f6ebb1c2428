/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-batchnorm.c - batch norm forward and backward, and
 * their forms with ReLU fused (oneDNN's fuse_norm_relu, with a bit-mask
 * workspace the backward reads).
 *
 * Batch norm keeps its input's layout: the output takes x's layout, so a
 * conv -> BN -> ReLU chain stays blocked without a reorder, and a gradient
 * that arrives in another layout is reordered into x's first (cached
 * buffer). On a channel-blocked 4-D tensor (what a convolution hands over)
 * the own loops of cpu-batchnorm-own.c run instead of oneDNN's kernel, with
 * their own bit mask in the same workspace; oneDNN's primitive is still
 * created (it names the output's layout) but not run. The per-channel
 * statistics and parameters are plain [C] vectors. The running statistics
 * are updated here from the batch statistics (biased variance) with
 * PyTorch's rule (unbiased running_var), and the parameter gradients, which
 * oneDNN or the own loops compute into the entry's buffers, are added into
 * the plain gradient arena.
 */
#include "config.h"

#include <string.h>

#include "cpu.h"

static gboolean vec_md(int64_t c, dnnl_memory_desc_t *md, GError **error)
{
    return cpu_plain_md(md, 1, &c, dnnl_f32, error);
}

static gboolean ensure_vec(TdmTensor *t, int64_t c, GError **error)
{
    return tdm_tensor_ensure(t, TDM_DTYPE_F32, 1, &c, NULL, 0, error);
}

/* Whether batch norm on x runs the own loops of cpu-batchnorm-own.c (blocked
 * 4-D layouts; TDM_CPU_OWN_BN=0 keeps oneDNN's kernels, to compare). The
 * answer depends only on x's layout, which is part of every cache key, so a
 * forward and its backward always agree. */
static gboolean bn_own(const TdmTensor *x, CpuBnGeom *g)
{
    static int enabled = -1;
    if (enabled < 0) {
        const char *v = g_getenv("TDM_CPU_OWN_BN");
        enabled = v == NULL || strcmp(v, "0") != 0;
    }
    return enabled && x->ndim == 4 && x->layout != NULL &&
           cpu_bn_geom((const dnnl_memory_desc_t *)x->layout, x->shape[1], g);
}

/* ---- forward ---- */

/* What the forward and backward entries share, once the primitive (pd)
 * is made: the op's output `out` (x's layout or the one oneDNN picks),
 * whether the own loops run (*own: x's layout suits them and out keeps
 * it), with their work in the device's scratchpad, grown for it here (one
 * op runs at a time: an entry of its own each, resnet50's 106 batch-norm
 * entries held 19 MiB), and oneDNN's ReLU bit mask when relu_ws
 * (*workspace, -1 when there is none). */
static gboolean bn_entry_finish(TdmDevice *dev, CpuEntry *e, const TdmTensor *x,
                                const dnnl_memory_desc_t *xmd, const_dnnl_primitive_desc_t pd,
                                const dnnl_memory_desc_t *out, gboolean relu_ws, gboolean *own,
                                int *workspace, int64_t *workspace_bytes, GError **error)
{
    CpuBnGeom bg;
    *own = bn_own(x, &bg) && dnnl_memory_desc_equal(out, xmd);
    if (*own && !cpu_scratch_reserve(dev, cpu_bn_work_bytes(&bg), error)) {
        return FALSE;
    }
    cpu_entry_set_output(dev, e, 0, out, TDM_DTYPE_F32);
    const dnnl_memory_desc_t *wmd =
        relu_ws ? dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0) : NULL;
    *workspace = -1;
    if (wmd != NULL && dnnl_memory_desc_get_size(wmd) > 0) {
        *workspace = cpu_entry_mem(dev, e, wmd);
        *workspace_bytes = (int64_t)dnnl_memory_desc_get_size(wmd);
    }
    return TRUE;
}

/* The forward's entry: oneDNN's primitive, which names the output's layout
 * and runs unless the own loops take the op (they get a work buffer when
 * x's layout suits them and the output keeps it). NULL on failure. */
static CpuEntry *bn_forward_setup(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                                  const CpuKey *key, const TdmTensor *x, gboolean scale,
                                  gboolean shift, float eps, gboolean training, gboolean relu,
                                  GError **error)
{
    int64_t c = x->shape[1];
    CpuEntry *e = cpu_entry_new(kind, key);
    CpuBnFwdOp *op = &e->bn_fwd;
    dnnl_memory_desc_t xmd, vmd;
    dnnl_batch_normalization_desc_t bd;
    dnnl_primitive_desc_t pd = NULL;
    unsigned flags = (scale ? dnnl_use_scale : 0) | (shift ? dnnl_use_shift : 0) |
                     (training ? 0 : dnnl_use_global_stats) | (relu ? dnnl_fuse_norm_relu : 0);
    gboolean ok = cpu_tensor_md(x, &xmd, error) && vec_md(c, &vmd, error) &&
                  cpu_check(dnnl_batch_normalization_forward_desc_init(
                                &bd, training ? dnnl_forward_training : dnnl_forward_inference,
                                &xmd, eps, flags),
                            "batch norm forward desc", error) &&
                  cpu_pd_create(dev, &bd, NULL, &pd, "batch norm forward", error) &&
                  cpu_prim_create(dev, e, pd, &op->prim, error);
    if (ok) {
        const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        op->src = cpu_entry_mem(dev, e, &xmd);
        op->dst = cpu_entry_mem(dev, e, dst);
        op->mean = cpu_entry_mem(dev, e, &vmd);
        op->variance = cpu_entry_mem(dev, e, &vmd);
        op->scale = cpu_entry_mem(dev, e, &vmd);
        op->shift = cpu_entry_mem(dev, e, &vmd);
        op->mean_buf = cpu_entry_buf(e, sizeof(float) * (size_t)c);
        op->var_buf = cpu_entry_buf(e, sizeof(float) * (size_t)c);
        ok = bn_entry_finish(dev, e, x, &xmd, pd, dst, relu && training, &op->own, &op->workspace,
                             &op->workspace_bytes, error);
        if (ok && op->workspace >= 0) {
            op->workspace_buf = cpu_entry_buf(e, (size_t)op->workspace_bytes);
        }
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

/* The forward on the own loops (geometry bg); with ReLU in training, their
 * bit mask goes into ws when the caller passes one. */
static gboolean bn_forward_own(const CpuBnGeom *bg, TdmDevice *dev, TdmTensor *x, TdmTensor *gamma,
                               TdmTensor *beta, float eps, gboolean training, float *mean,
                               float *var, gboolean relu, TdmTensor *ws, TdmTensor *y,
                               GError **error)
{
    guint8 *mask = NULL;
    if (relu && training && ws != NULL) {
        int64_t wn = (int64_t)cpu_bn_mask_bytes(bg);
        if (!tdm_tensor_ensure(ws, TDM_DTYPE_U8, 1, &wn, NULL, 0, error)) {
            return FALSE;
        }
        mask = tdm_tensor_data(ws);
    }
    cpu_bn_forward(bg, tdm_tensor_data(x), gamma ? tdm_tensor_data(gamma) : NULL,
                   beta ? tdm_tensor_data(beta) : NULL, eps, training, mean, var, relu,
                   tdm_tensor_data(y), mask, CPU_DEV(dev)->scratch);
    return TRUE;
}

/* The forward on oneDNN's primitive; its ReLU mask (training with ReLU)
 * goes into ws, or the entry's buffer when the caller passes none. */
static gboolean bn_forward_onednn(TdmDevice *dev, CpuEntry *e, TdmTensor *x, TdmTensor *gamma,
                                  TdmTensor *beta, float *mean, float *var, TdmTensor *ws,
                                  TdmTensor *y, GError **error)
{
    CpuBnFwdOp *op = &e->bn_fwd;
    dnnl_exec_arg_t args[8];
    int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, op->src, tdm_tensor_data(x))};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, cpu_mem(e, op->dst, tdm_tensor_data(y))};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_MEAN, cpu_mem(e, op->mean, mean)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_VARIANCE, cpu_mem(e, op->variance, var)};
    if (gamma != NULL) {
        args[n++] =
            (dnnl_exec_arg_t){DNNL_ARG_SCALE, cpu_mem(e, op->scale, tdm_tensor_data(gamma))};
    }
    if (beta != NULL) {
        args[n++] =
            (dnnl_exec_arg_t){DNNL_ARG_SHIFT, cpu_mem(e, op->shift, tdm_tensor_data(beta))};
    }
    if (op->workspace >= 0) {
        void *wp = op->workspace_buf;
        if (ws != NULL) {
            int64_t wn = op->workspace_bytes;
            if (!tdm_tensor_ensure(ws, TDM_DTYPE_U8, 1, &wn, NULL, 0, error)) {
                return FALSE;
            }
            wp = tdm_tensor_data(ws);
        }
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, cpu_mem(e, op->workspace, wp)};
    }
    return cpu_run(dev, e, op->prim, n, args, error);
}

/* Batch norm forward, followed by ReLU when `relu` (in training, a bit mask
 * in `ws` for the backward). */
static gboolean bn_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                           TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                           float momentum, float eps, gboolean training, TdmTensor *save_mean,
                           TdmTensor *save_var, gboolean relu, TdmTensor *ws, TdmTensor *y,
                           GError **error)
{
    CpuOpKind kind = relu ? CPU_OP_BN_RELU_FWD : CPU_OP_BN_FWD;
    int64_t c = x->shape[1];
    CpuKey key;
    cpu_key_init(&key, kind);
    cpu_key_add_tensor(&key, x);
    cpu_key_add(&key, gamma != NULL);
    cpu_key_add(&key, beta != NULL);
    cpu_key_add(&key, training);
    union { float f; gint32 i; } ue = {.f = eps};
    cpu_key_add(&key, ue.i);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL && (e = bn_forward_setup(dev, cache, kind, &key, x, gamma != NULL, beta != NULL,
                                           eps, training, relu, error)) == NULL) {
        return FALSE;
    }
    /* training writes the batch statistics into save_mean and save_var (the
     * entry's buffers when the caller keeps none); eval reads the running
     * ones */
    float *mean = e->bn_fwd.mean_buf, *var = e->bn_fwd.var_buf;
    gboolean ok = TRUE;
    if (training) {
        if (save_mean != NULL && (ok = ensure_vec(save_mean, c, error))) {
            mean = tdm_tensor_data(save_mean);
        }
        if (ok && save_var != NULL && (ok = ensure_vec(save_var, c, error))) {
            var = tdm_tensor_data(save_var);
        }
    } else {
        mean = tdm_tensor_data(running_mean);
        var = tdm_tensor_data(running_var);
    }
    ok = ok && cpu_entry_ensure_like(e, 0, y, x, error);
    CpuBnGeom bg;
    if (ok && e->bn_fwd.own && bn_own(x, &bg)) {
        ok = bn_forward_own(&bg, dev, x, gamma, beta, eps, training, mean, var, relu, ws, y, error);
    } else if (ok) {
        ok = bn_forward_onednn(dev, e, x, gamma, beta, mean, var, ws, y, error);
    }
    if (ok && training && running_mean != NULL && running_var != NULL) {
        int64_t count = tdm_tensor_numel(x) / c;
        float unbias = count > 1 ? (float)count / (float)(count - 1) : 1.0f;
        float *rm = tdm_tensor_data(running_mean), *rv = tdm_tensor_data(running_var);
        for (int64_t i = 0; i < c; i++) {
            rm[i] = (1.0f - momentum) * rm[i] + momentum * mean[i];
            rv[i] = (1.0f - momentum) * rv[i] + momentum * var[i] * unbias;
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                               TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                               float momentum, float eps, gboolean training,
                               TdmTensor *save_mean, TdmTensor *save_var, TdmTensor *y,
                               GError **error)
{
    return bn_forward(dev, cache, x, gamma, beta, running_mean, running_var, momentum, eps,
                      training, save_mean, save_var, FALSE, NULL, y, error);
}

gboolean cpu_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                    TdmTensor *running_var, float momentum, float eps,
                                    gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                    TdmTensor *workspace, TdmTensor *y, GError **error)
{
    return bn_forward(dev, cache, x, gamma, beta, running_mean, running_var, momentum, eps,
                      training, save_mean, save_var, TRUE, workspace, y, error);
}

/* ---- backward ---- */

/* The backward's entry: oneDNN's primitive (made with its forward as the
 * hint), the reorder of dy into x's layout, the buffers the parameter
 * gradients are computed into, and the own loops' work buffer when x's
 * layout suits them. NULL on failure. */
static CpuEntry *bn_backward_setup(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                                   const CpuKey *key, const TdmTensor *x, const TdmTensor *dy,
                                   float eps, gboolean relu, GError **error)
{
    int64_t c = x->shape[1];
    CpuEntry *e = cpu_entry_new(kind, key);
    CpuBnBwdOp *op = &e->bn_bwd;
    dnnl_memory_desc_t xmd, dymd, vmd;
    dnnl_batch_normalization_desc_t fd, bd;
    dnnl_primitive_desc_t pd = NULL;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (relu ? dnnl_fuse_norm_relu : 0);
    gboolean ok = cpu_tensor_md(x, &xmd, error) && cpu_tensor_md(dy, &dymd, error) &&
                  vec_md(c, &vmd, error) &&
                  cpu_check(dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training,
                                                                       &xmd, eps, flags),
                            "batch norm forward desc", error) &&
                  cpu_check(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &xmd,
                                                                        &xmd, eps, flags),
                            "batch norm backward desc", error) &&
                  cpu_pd_create_backward(dev, &fd, &bd, &pd, "batch norm backward", error) &&
                  cpu_convert_init(dev, e, &op->dy_in, &dymd, &xmd, error) &&
                  cpu_prim_create(dev, e, pd, &op->prim, error);
    if (ok) {
        const dnnl_memory_desc_t *dsrc =
            dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
        op->src = cpu_entry_mem(dev, e, &xmd);
        op->diff_dst = cpu_entry_mem(dev, e, &xmd);
        op->mean = cpu_entry_mem(dev, e, &vmd);
        op->variance = cpu_entry_mem(dev, e, &vmd);
        op->scale = cpu_entry_mem(dev, e, &vmd);
        op->diff_src = cpu_entry_mem(dev, e, dsrc);
        op->diff_scale = cpu_entry_mem(dev, e, &vmd);
        op->diff_shift = cpu_entry_mem(dev, e, &vmd);
        op->shift = cpu_entry_mem(dev, e, &vmd);
        op->dgamma_buf = cpu_entry_buf(e, sizeof(float) * (size_t)c);
        op->dbeta_buf = cpu_entry_buf(e, sizeof(float) * (size_t)c);
        op->ones = cpu_entry_buf(e, sizeof(float) * (size_t)c);
        ok = bn_entry_finish(dev, e, x, &xmd, pd, dsrc, relu, &op->own, &op->workspace,
                             &op->workspace_bytes, error);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

/* The backward on oneDNN's primitive, dy already in x's layout (dys). */
static gboolean bn_backward_onednn(TdmDevice *dev, CpuEntry *e, TdmTensor *x, void *dys,
                                   TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                   TdmTensor *ws, TdmTensor *dx, GError **error)
{
    CpuBnBwdOp *op = &e->bn_bwd;
    dnnl_exec_arg_t args[12] = {
        {DNNL_ARG_SRC, cpu_mem(e, op->src, tdm_tensor_data(x))},
        {DNNL_ARG_DIFF_DST, cpu_mem(e, op->diff_dst, dys)},
        {DNNL_ARG_MEAN, cpu_mem(e, op->mean, tdm_tensor_data(save_mean))},
        {DNNL_ARG_VARIANCE, cpu_mem(e, op->variance, tdm_tensor_data(save_var))},
        {DNNL_ARG_SCALE, cpu_mem(e, op->scale, gamma ? tdm_tensor_data(gamma) : op->ones)},
        {DNNL_ARG_DIFF_SRC, cpu_mem(e, op->diff_src, tdm_tensor_data(dx))},
        {DNNL_ARG_DIFF_SCALE, cpu_mem(e, op->diff_scale, op->dgamma_buf)},
        {DNNL_ARG_DIFF_SHIFT, cpu_mem(e, op->diff_shift, op->dbeta_buf)},
        {DNNL_ARG_SHIFT, cpu_mem(e, op->shift, op->dbeta_buf)},
    };
    int n = 9;
    if (op->workspace >= 0) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE,
                                      cpu_mem(e, op->workspace, tdm_tensor_data(ws))};
    }
    return cpu_run(dev, e, op->prim, n, args, error);
}

/* Batch norm backward; with `relu`, dy is first masked by the bit mask the
 * fused forward left in `ws` (inside the kernel, no extra pass). */
static gboolean bn_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                            TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var, float eps,
                            gboolean relu, TdmTensor *ws, TdmTensor *dx, TdmTensor *dgamma,
                            TdmTensor *dbeta, GError **error)
{
    CpuOpKind kind = relu ? CPU_OP_BN_RELU_BWD : CPU_OP_BN_BWD;
    int64_t c = x->shape[1];
    CpuKey key;
    cpu_key_init(&key, kind);
    cpu_key_add_tensors(&key, 2, x, dy);
    union { float f; gint32 i; } ue = {.f = eps};
    cpu_key_add(&key, ue.i);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL &&
        (e = bn_backward_setup(dev, cache, kind, &key, x, dy, eps, relu, error)) == NULL) {
        return FALSE;
    }
    CpuBnBwdOp *op = &e->bn_bwd;
    if (gamma == NULL) {
        for (int64_t i = 0; i < c; i++) {
            op->ones[i] = 1.0f;
        }
    }
    /* the own loops keep their bit mask in the workspace, oneDNN its own */
    CpuBnGeom bg;
    gboolean own = op->own && bn_own(x, &bg);
    gboolean need_ws = own ? relu : op->workspace >= 0;
    size_t need = own ? cpu_bn_mask_bytes(&bg) : (size_t)op->workspace_bytes;
    if (need_ws && (ws == NULL || ws->storage == NULL || tdm_tensor_nbytes(ws) < need)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu batchnorm_relu_backward: the workspace is missing or smaller than the "
                    "%zu bytes the training-mode forward leaves in it",
                    need);
        cpu_entry_release(cache, e);
        return FALSE;
    }
    void *dys = cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error);
    gboolean ok = dys != NULL && cpu_entry_ensure_like(e, 0, dx, x, error);
    if (ok && own) {
        cpu_bn_backward(&bg, tdm_tensor_data(x), dys, relu ? tdm_tensor_data(ws) : NULL,
                        gamma ? tdm_tensor_data(gamma) : NULL, tdm_tensor_data(save_mean),
                        tdm_tensor_data(save_var), eps, tdm_tensor_data(dx), op->dgamma_buf,
                        op->dbeta_buf, CPU_DEV(dev)->scratch);
    } else if (ok) {
        ok = bn_backward_onednn(dev, e, x, dys, gamma, save_mean, save_var, ws, dx, error);
    }
    /* the parameter gradients, computed into the entry's buffers */
    if (ok && dgamma != NULL) {
        cpu_accumulate(tdm_tensor_data(dgamma), op->dgamma_buf, c);
    }
    if (ok && dbeta != NULL) {
        cpu_accumulate(tdm_tensor_data(dbeta), op->dbeta_buf, c);
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                GError **error)
{
    return bn_backward(dev, cache, x, dy, gamma, save_mean, save_var, eps, FALSE, NULL, dx, dgamma,
                       dbeta, error);
}

gboolean cpu_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                     TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                     float eps, TdmTensor *dx, TdmTensor *dgamma,
                                     TdmTensor *dbeta, GError **error)
{
    /* y is not read: the mask in the workspace says the same (y > 0). */
    return bn_backward(dev, cache, x, dy, gamma, save_mean, save_var, eps, TRUE, workspace, dx,
                       dgamma, dbeta, error);
}

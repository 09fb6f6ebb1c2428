/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-gemm.c - dense algebra: gemm on oneDNN matmul, bias gradients.
 *
 * gemm runs one matmul primitive on the plain operands, transposes expressed
 * as swapped strides (no copies), bias fused, alpha as an output scale and
 * beta as a sum post-op, so Linear's forward, its data gradient and its
 * accumulated weight gradient (beta = 1) are each a single primitive. On
 * this machine matmul on plain [N, K] data runs as fast as the inner product
 * on blocked data, and keeps Linear's tensors plain. bias_grad is an OpenMP
 * column sum.
 */
#include "config.h"

#include <string.h>

#include "cpu.h"

/* desc of op(t) for a plain 2-D tensor with the given element strides */
static gboolean op_md(int64_t rows, int64_t cols, int64_t s0, int64_t s1, gboolean trans,
                      dnnl_memory_desc_t *md, GError **error)
{
    dnnl_dims_t dims = {trans ? cols : rows, trans ? rows : cols};
    dnnl_dims_t strides = {trans ? s1 : s0, trans ? s0 : s1};
    return cpu_check(dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides),
                     "gemm operand desc", error);
}

/* For an operand: its conversion to plain contiguous if it has a layout,
 * and the desc of op(operand). */
static gboolean operand_init(TdmDevice *dev, CpuEntry *e, CpuConvert *c, const TdmTensor *t,
                             gboolean trans, dnnl_memory_desc_t *md, GError **error)
{
    int64_t s0 = t->stride[0], s1 = t->stride[1];
    if (t->layout != NULL) {
        dnnl_memory_desc_t from, to;
        if (!cpu_tensor_md(t, &from, error) ||
            !cpu_plain_md(&to, 2, t->shape, dnnl_f32, error) ||
            !cpu_convert_init(dev, e, c, &from, &to, error)) {
            return FALSE;
        }
        s0 = t->shape[1];
        s1 = 1;
    } else {
        c->prim = -1;
    }
    return op_md(t->shape[0], t->shape[1], s0, s1, trans, md, error);
}

/* The matmul primitive of c = alpha op(a) op(b) + beta c (+ the bias
 * when fuse_bias), with the conversions of a and b to plain. */
static CpuEntry *gemm_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key, gboolean trans_a,
                            const TdmTensor *a, gboolean trans_b, const TdmTensor *b, float alpha,
                            float beta, const TdmTensor *c, gboolean fuse_bias, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_GEMM, key);
    CpuGemmOp *op = &e->gemm;
    dnnl_memory_desc_t amd, bmd, cmd, biasmd;
    dnnl_matmul_desc_t mmd;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = operand_init(dev, e, &op->a_in, a, trans_a, &amd, error) &&
                  operand_init(dev, e, &op->b_in, b, trans_b, &bmd, error) &&
                  cpu_tensor_md(c, &cmd, error);
    if (ok && fuse_bias) { /* [n] seen as a row [1, n] broadcast over c's rows */
        dnnl_dims_t bd = {1, c->shape[1]}, bs = {c->shape[1], 1};
        ok = cpu_check(dnnl_memory_desc_init_by_strides(&biasmd, 2, bd, dnnl_f32, bs), "bias desc",
                       error);
    }
    ok = ok && cpu_check(dnnl_matmul_desc_init(&mmd, &amd, &bmd, fuse_bias ? &biasmd : NULL, &cmd),
                         "matmul desc", error);
    if (ok) {
        dnnl_primitive_attr_t attr = cpu_attr_new(beta, alpha);
        dnnl_status_t s = dnnl_primitive_desc_create(&pd, &mmd, attr, CPU_DEV(dev)->engine, NULL);
        dnnl_primitive_attr_destroy(attr);
        ok = cpu_check(s, "matmul", error) && cpu_prim_create(dev, e, pd, &op->prim, error);
    }
    if (ok) {
        op->a = cpu_entry_mem(dev, e, &amd);
        op->b = cpu_entry_mem(dev, e, &bmd);
        op->c = cpu_entry_mem(dev, e, &cmd);
        op->bias = fuse_bias ? cpu_entry_mem(dev, e, &biasmd) : -1;
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

gboolean cpu_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                  float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                  TdmTensor *bias, GError **error)
{
    /* tdm_op_gemm has checked the operands: a and b 2-D f32 with matching
     * inner dimensions, c f32 [m, n] and plain unless it is an empty slot
     * with beta == 0, a bias of n plain f32. */
    int64_t m = trans_a ? a->shape[1] : a->shape[0];
    int64_t n = trans_b ? b->shape[0] : b->shape[1];
    if (c->storage == NULL) {
        int64_t shape[2] = {m, n};
        if (!tdm_tensor_ensure(c, TDM_DTYPE_F32, 2, shape, NULL, 0, error)) {
            return FALSE;
        }
    }
    if (m == 0 || n == 0) {
        return TRUE;
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_GEMM);
    cpu_key_add(&key, trans_a);
    cpu_key_add(&key, trans_b);
    union { float f; gint32 i; } ua = {.f = alpha}, ub = {.f = beta};
    cpu_key_add(&key, ua.i);
    cpu_key_add(&key, ub.i);
    cpu_key_add_tensors(&key, 4, a, b, c, bias);
    /* oneDNN scales (a b + bias) by its output scale: with alpha != 1 the
     * bias is added after the product instead of fused */
    gboolean fuse_bias = bias != NULL && alpha == 1.0f;
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_GEMM, &key);
    if (e == NULL && (e = gemm_setup(dev, cache, &key, trans_a, a, trans_b, b, alpha, beta, c,
                                     fuse_bias, error)) == NULL) {
        return FALSE;
    }
    CpuGemmOp *op = &e->gemm;
    void *ap = cpu_convert_run(dev, e, &op->a_in, tdm_tensor_data(a), error);
    void *bp = ap ? cpu_convert_run(dev, e, &op->b_in, tdm_tensor_data(b), error) : NULL;
    gboolean ok = bp != NULL;
    if (ok) {
        dnnl_exec_arg_t args[5];
        int na = 0;
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, op->a, ap)};
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, cpu_mem(e, op->b, bp)};
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, cpu_mem(e, op->c, tdm_tensor_data(c))};
        if (op->bias >= 0) {
            args[na++] =
                (dnnl_exec_arg_t){DNNL_ARG_BIAS, cpu_mem(e, op->bias, tdm_tensor_data(bias))};
        }
        ok = cpu_run(dev, e, op->prim, na, args, error);
    }
    if (ok && bias != NULL && !fuse_bias) {
        const float *bp = tdm_tensor_data(bias);
        float *cp = tdm_tensor_data(c);
        for (int64_t i = 0; i < m; i++) {
            float *row = cp + i * c->stride[0];
            for (int64_t j = 0; j < n; j++) {
                row[j * c->stride[1]] += bp[j];
            }
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                       GError **error)
{
    /* The own loops sum [N, C] or [N, C, H, W] (tdm_op_bias_grad has
     * checked dtypes and sizes). */
    if (dy->ndim != 2 && dy->ndim != 4) {
        return cpu_refuse("bias_grad", "dy", dy, "must be 2-D or 4-D", error);
    }
    const float *g;
    CpuEntry *e = NULL;
    if (!cpu_plain_input(dev, cache, CPU_OP_BIAS_GRAD, dy, &g, &e, error)) {
        return FALSE;
    }
    float *bg = tdm_tensor_data(bias_grad);
    int64_t rows = dy->shape[0], cols = dy->shape[1];
    int64_t hw = dy->ndim == 4 ? dy->shape[2] * dy->shape[3] : 1;
    if (hw == 1) {
        /* column sums: each thread owns a range of columns and walks the rows,
         * so the inner loop is contiguous and vectorises */
        int64_t chunk = 64;
        int64_t nchunks = (cols + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (rows * cols > 32768)
        for (int64_t ci = 0; ci < nchunks; ci++) {
            int64_t c0 = ci * chunk, c1 = MIN(cols, c0 + chunk);
            float acc[64] = {0};
            for (int64_t r = 0; r < rows; r++) {
                const float *row = g + r * cols;
#pragma omp simd
                for (int64_t c = c0; c < c1; c++) {
                    acc[c - c0] += row[c];
                }
            }
            for (int64_t c = c0; c < c1; c++) {
                bg[c] += acc[c - c0];
            }
        }
    } else {
#pragma omp parallel for schedule(static) if (rows * cols * hw > 32768)
        for (int64_t c = 0; c < cols; c++) {
            double s = 0;
            for (int64_t r = 0; r < rows; r++) {
                const float *p = g + (r * cols + c) * hw;
                float t = 0;
#pragma omp simd reduction(+ : t)
                for (int64_t i = 0; i < hw; i++) {
                    t += p[i];
                }
                s += t;
            }
            bg[c] += (float)s;
        }
    }
    cpu_entry_release(cache, e);
    return TRUE;
}

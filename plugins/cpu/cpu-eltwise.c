/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-eltwise.c - the elementwise ops: ReLU forward and
 * backward, add, and add + ReLU fused.
 *
 * These ops never change a tensor's layout: their output takes the layout
 * of their (first) input, so a conv -> BN -> ReLU -> add chain stays
 * blocked without a reorder. When the operands share one dense layout (the
 * common case, blocked or plain) the op does not need to know the layout
 * at all: a flat vectorised loop over the buffer (padding included, which
 * stays zero; cpu-kernel.h says how the loops are compiled and split over
 * threads), which is what oneDNN's eltwise does, without the primitive's
 * bookkeeping. Operands in different layouts (rare) go to oneDNN's eltwise
 * and binary primitives, the gradient or second operand first reordered
 * into the first's layout. cpu_accumulate, the in-place add, is also what
 * the other ops use to add a computed gradient into an accumulated one.
 */
#include "config.h"

#include <string.h>

#include "cpu-kernel.h"

/* ---- the flat loops ---- */

typedef enum { CPU_ELT_RELU, CPU_ELT_RELU_BWD, CPU_ELT_ADD, CPU_ELT_ADD_RELU } CpuEltKind;

/* What a range of a flat elementwise loop works on:
 * relu: out = max(a, 0); relu_bwd: out = a > 0 ? b : 0 (a = y, b = dy);
 * add: out = a + b; add_relu: out = max(a + b, 0). out may alias an input. */
typedef struct {
    float *out;
    const float *a, *b;
    CpuEltKind kind;
} EltCtx;

CPU_KERNEL static void k_accumulate(float *restrict y, const float *restrict x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] += x[i];
    }
}

CPU_KERNEL static void k_relu(float *restrict y, const float *restrict x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

CPU_KERNEL static void k_relu_bwd(float *restrict dx, const float *restrict y,
                                  const float *restrict dy, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

CPU_KERNEL static void k_add(float *restrict y, const float *restrict a, const float *restrict b,
                             int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = a[i] + b[i];
    }
}

CPU_KERNEL static void k_add_relu(float *restrict y, const float *restrict a,
                                  const float *restrict b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] + b[i];
        y[i] = s > 0.0f ? s : 0.0f;
    }
}

/* in-place variants: y may alias an input, so no restrict on them */
CPU_KERNEL static void k_add_relu_ip(float *y, const float *restrict b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float s = y[i] + b[i];
        y[i] = s > 0.0f ? s : 0.0f;
    }
}

CPU_KERNEL static void k_relu_ip(float *x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

CPU_KERNEL static void k_relu_bwd_ip(float *dy, const float *restrict y, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

static void r_accumulate(int64_t i0, int64_t i1, void *ctx)
{
    EltCtx *c = ctx;
    k_accumulate(c->out + i0, c->a + i0, i1 - i0);
}

void cpu_accumulate(float *dst, const float *src, int64_t n)
{
    EltCtx c = {.out = dst, .a = src, .kind = CPU_ELT_ADD};
    cpu_par_range(n, r_accumulate, &c);
}

static void r_elementwise(int64_t i0, int64_t i1, void *ctx)
{
    EltCtx *c = ctx;
    float *o = c->out + i0;
    const float *a = c->a + i0, *b = c->b ? c->b + i0 : NULL;
    int64_t n = i1 - i0;
    switch (c->kind) {
    case CPU_ELT_RELU:
        if (o == a) {
            k_relu_ip(o, n);
        } else {
            k_relu(o, a, n);
        }
        break;
    case CPU_ELT_RELU_BWD: /* a = y, b = dy */
        if (o == b) {
            k_relu_bwd_ip(o, a, n);
        } else if (o == a) {
            /* dx over y: read y before writing */
            for (int64_t i = 0; i < n; i++) {
                o[i] = a[i] > 0.0f ? b[i] : 0.0f;
            }
        } else {
            k_relu_bwd(o, a, b, n);
        }
        break;
    case CPU_ELT_ADD:
        if (o == a || o == b) {
            k_accumulate(o, o == a ? b : a, n);
        } else {
            k_add(o, a, b, n);
        }
        break;
    case CPU_ELT_ADD_RELU:
        if (o == a || o == b) {
            k_add_relu_ip(o, o == a ? b : a, n);
        } else {
            k_add_relu(o, a, b, n);
        }
        break;
    default:
        break;
    }
}

static void flat_elementwise(CpuEltKind kind, float *out, const float *a, const float *b,
                             int64_t n)
{
    EltCtx c = {.out = out, .a = a, .b = b, .kind = kind};
    cpu_par_range(n, r_elementwise, &c);
}

/* ---- the ops ---- */

/* The flat loops run unless TDM_CPU_ONEDNN_ELTWISE=1 (oneDNN's primitives
 * then run every elementwise op, to compare). */
static gboolean flat_enabled(void)
{
    static int on = -1;
    if (on < 0) {
        const char *s = g_getenv("TDM_CPU_ONEDNN_ELTWISE");
        on = !(s != NULL && s[0] != '\0' && strcmp(s, "0") != 0);
    }
    return on;
}

/* Number of floats to walk when t can be seen as a flat array, else -1. */
static int64_t flat_len(const TdmTensor *t)
{
    if (t->storage == NULL || t->dtype != TDM_DTYPE_F32 || !flat_enabled()) {
        return -1;
    }
    if (t->layout != NULL) {
        return (int64_t)(t->layout_nbytes / sizeof(float));
    }
    return tdm_tensor_is_contiguous(t) ? tdm_tensor_numel(t) : -1;
}

/* Shapes `out` like `like` (same layout), then runs the flat loop. */
static gboolean flat_run(CpuEltKind kind, const TdmTensor *like, TdmTensor *out, TdmTensor *a,
                         TdmTensor *b, int64_t n, GError **error)
{
    int64_t shape[TDM_MAX_DIMS];
    int ndim = like->ndim;
    memcpy(shape, like->shape, sizeof(int64_t) * (size_t)ndim);
    if (!tdm_tensor_ensure(out, TDM_DTYPE_F32, ndim, shape, like->layout, like->layout_nbytes,
                           error)) {
        return FALSE;
    }
    flat_elementwise(kind, tdm_tensor_data(out), tdm_tensor_data(a),
                     b != NULL ? tdm_tensor_data(b) : NULL, n);
    return TRUE;
}

/* ---- oneDNN's primitives, for operands the flat loops do not take ---- */

static CpuEntry *relu_forward_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                    const TdmTensor *x, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_RELU_FWD, key);
    CpuReluFwdOp *op = &e->relu_fwd;
    dnnl_memory_desc_t xmd;
    dnnl_eltwise_desc_t ed;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = cpu_tensor_md(x, &xmd, error) &&
                  cpu_check(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_training,
                                                           dnnl_eltwise_relu, &xmd, 0.0f, 0.0f),
                            "relu desc", error) &&
                  cpu_pd_create(dev, &ed, NULL, &pd, "relu", error) &&
                  cpu_prim_create(dev, e, pd, &op->prim, error);
    if (ok) {
        const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        op->src = cpu_entry_mem(dev, e, &xmd);
        op->dst = cpu_entry_mem(dev, e, dst);
        cpu_entry_set_output(dev, e, 0, dst, TDM_DTYPE_F32);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

gboolean cpu_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                          GError **error)
{
    int64_t nflat = flat_len(x);
    if (nflat >= 0) {
        return flat_run(CPU_ELT_RELU, x, y, x, NULL, nflat, error);
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_RELU_FWD);
    cpu_key_add_tensor(&key, x);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_RELU_FWD, &key);
    if (e == NULL && (e = relu_forward_setup(dev, cache, &key, x, error)) == NULL) {
        return FALSE;
    }
    CpuReluFwdOp *op = &e->relu_fwd;
    void *xp = tdm_tensor_data(x);
    gboolean ok = cpu_entry_ensure_like(e, 0, y, x, error);
    if (ok) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, cpu_mem(e, op->src, xp)},
            {DNNL_ARG_DST, cpu_mem(e, op->dst, tdm_tensor_data(y))},
        };
        ok = cpu_run(dev, e, op->prim, 2, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* oneDNN's ReLU backward reads y (relu_use_dst_for_bwd), with dy reordered
 * into y's layout. */
static CpuEntry *relu_backward_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                     const TdmTensor *y, const TdmTensor *dy, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_RELU_BWD, key);
    CpuReluBwdOp *op = &e->relu_bwd;
    dnnl_memory_desc_t ymd, dymd;
    dnnl_eltwise_desc_t fd, bd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_alg_kind_t alg = dnnl_eltwise_relu_use_dst_for_bwd;
    gboolean ok =
        cpu_tensor_md(y, &ymd, error) && cpu_tensor_md(dy, &dymd, error) &&
        cpu_check(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &ymd, 0.0f, 0.0f),
                  "relu desc", error) &&
        cpu_check(dnnl_eltwise_backward_desc_init(&bd, alg, &ymd, &ymd, 0.0f, 0.0f),
                  "relu backward desc", error) &&
        cpu_pd_create_backward(dev, &fd, &bd, &pd, "relu backward", error) &&
        cpu_convert_init(dev, e, &op->dy_in, &dymd, &ymd, error) &&
        cpu_prim_create(dev, e, pd, &op->prim, error);
    if (ok) {
        const dnnl_memory_desc_t *dsrc =
            dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
        op->dst = cpu_entry_mem(dev, e, &ymd);
        op->diff_dst = cpu_entry_mem(dev, e, &ymd);
        op->diff_src = cpu_entry_mem(dev, e, dsrc);
        cpu_entry_set_output(dev, e, 0, dsrc, TDM_DTYPE_F32);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

gboolean cpu_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                           TdmTensor *dx, GError **error)
{
    int64_t nflat = flat_len(y);
    if (nflat >= 0 && dy->layout == y->layout && flat_len(dy) == nflat) {
        return flat_run(CPU_ELT_RELU_BWD, y, dx, y, dy, nflat, error);
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_RELU_BWD);
    cpu_key_add_tensors(&key, 2, y, dy);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_RELU_BWD, &key);
    if (e == NULL && (e = relu_backward_setup(dev, cache, &key, y, dy, error)) == NULL) {
        return FALSE;
    }
    CpuReluBwdOp *op = &e->relu_bwd;
    void *dys = cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error);
    void *yp = tdm_tensor_data(y);
    gboolean ok = dys != NULL && cpu_entry_ensure_like(e, 0, dx, y, error);
    if (ok) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_DST, cpu_mem(e, op->dst, yp)},
            {DNNL_ARG_DIFF_DST, cpu_mem(e, op->diff_dst, dys)},
            {DNNL_ARG_DIFF_SRC, cpu_mem(e, op->diff_src, tdm_tensor_data(dx))},
        };
        ok = cpu_run(dev, e, op->prim, 3, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* oneDNN's binary add in the layout of whichever operand has one (plain
 * when neither), the other reordered into it. */
static CpuEntry *add_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                           const TdmTensor *a, const TdmTensor *b, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_ADD, key);
    CpuAddOp *op = &e->add;
    dnnl_memory_desc_t amd, bmd, target;
    dnnl_binary_desc_t bd;
    dnnl_primitive_desc_t pd = NULL;
    gboolean ok = cpu_tensor_md(a, &amd, error) && cpu_tensor_md(b, &bmd, error);
    if (ok && a->layout != NULL) {
        target = amd;
    } else if (ok && b->layout != NULL) {
        target = bmd;
    } else if (ok) {
        ok = cpu_plain_md(&target, a->ndim, a->shape, dnnl_f32, error);
    }
    ok = ok &&
         cpu_check(dnnl_binary_desc_init(&bd, dnnl_binary_add, &target, &target, &target),
                   "add desc", error) &&
         cpu_pd_create(dev, &bd, NULL, &pd, "add", error) &&
         cpu_convert_init(dev, e, &op->a_in, &amd, &target, error) &&
         cpu_convert_init(dev, e, &op->b_in, &bmd, &target, error) &&
         cpu_prim_create(dev, e, pd, &op->prim, error);
    if (ok) {
        op->src0 = cpu_entry_mem(dev, e, &target);
        op->src1 = cpu_entry_mem(dev, e, &target);
        op->dst = cpu_entry_mem(dev, e, &target);
        cpu_entry_set_output(dev, e, 0, &target, TDM_DTYPE_F32);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

gboolean cpu_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                 GError **error)
{
    int64_t nflat = flat_len(a);
    if (nflat >= 0 && a->layout == b->layout && flat_len(b) == nflat) {
        return flat_run(CPU_ELT_ADD, a, y, a, b, nflat, error);
    }
    if (y == b && y != a) { /* oneDNN computes in place over its first source */
        TdmTensor *t = a;
        a = b;
        b = t;
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_ADD);
    cpu_key_add_tensors(&key, 2, a, b);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_ADD, &key);
    if (e == NULL && (e = add_setup(dev, cache, &key, a, b, error)) == NULL) {
        return FALSE;
    }
    CpuAddOp *op = &e->add;
    void *ap = cpu_convert_run(dev, e, &op->a_in, tdm_tensor_data(a), error);
    void *bp = ap ? cpu_convert_run(dev, e, &op->b_in, tdm_tensor_data(b), error) : NULL;
    gboolean ok = bp != NULL && cpu_entry_ensure_like(e, 0, y, a, error);
    if (ok) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC_0, cpu_mem(e, op->src0, ap)},
            {DNNL_ARG_SRC_1, cpu_mem(e, op->src1, bp)},
            {DNNL_ARG_DST, cpu_mem(e, op->dst, tdm_tensor_data(y))},
        };
        ok = cpu_run(dev, e, op->prim, 3, args, error);
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                      GError **error)
{
    int64_t nflat = flat_len(a);
    if (nflat >= 0 && a->layout == b->layout && flat_len(b) == nflat) {
        return flat_run(CPU_ELT_ADD_RELU, a, y, a, b, nflat, error);
    }
    /* Mixed layouts (rare): the add converts, then ReLU runs over its output
     * in place. */
    return cpu_add(dev, cache, a, b, y, error) && cpu_relu_forward(dev, cache, y, y, error);
}

/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-transfer.c - host transfers and layout conversions.
 *
 * read/write move a tensor's data to and from plain host order: a strided
 * copy for plain tensors (any dtype), a reorder (kept in the layout handle)
 * for private layouts. reorder converts a tensor into another tensor's
 * layout, or into plain, with a cached reorder primitive; Flatten uses it at
 * the boundary between convolutional (blocked) and linear (plain) layers.
 * cpu_plain_input gives the own loops that read plain data (the loss,
 * dropout, bias gradients) an input that arrives in a private layout,
 * reordered to plain into a cached buffer.
 */
#include "config.h"

#include <string.h>

#include "cpu.h"

/* ---- host transfers and reorders ---- */

void cpu_strided_copy(void *dst, const int64_t *dst_stride, const void *src,
                      const int64_t *src_stride, const int64_t *shape, int ndim, size_t esize)
{
    /* Both sides dense (the common case: a batch written to the device):
     * one memcpy rather than one per innermost row. */
    int64_t dense = 1;
    int d = ndim - 1;
    while (d >= 0 && dst_stride[d] == dense && src_stride[d] == dense) {
        dense *= shape[d];
        d--;
    }
    if (d < 0) {
        memcpy(dst, src, esize * (size_t)dense);
        return;
    }
    if (ndim == 0) {
        memcpy(dst, src, esize);
        return;
    }
    if (ndim == 1) {
        if (dst_stride[0] == 1 && src_stride[0] == 1) {
            memcpy(dst, src, esize * (size_t)shape[0]);
            return;
        }
        for (int64_t i = 0; i < shape[0]; i++) {
            memcpy((char *)dst + (size_t)(i * dst_stride[0]) * esize,
                   (const char *)src + (size_t)(i * src_stride[0]) * esize, esize);
        }
        return;
    }
    for (int64_t i = 0; i < shape[0]; i++) {
        cpu_strided_copy((char *)dst + (size_t)(i * dst_stride[0]) * esize, dst_stride + 1,
                         (const char *)src + (size_t)(i * src_stride[0]) * esize, src_stride + 1,
                         shape + 1, ndim - 1, esize);
    }
}

static void contiguous_strides(const TdmTensor *t, int64_t *strides)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= t->shape[i];
    }
}

/* Runs a layout <-> plain reorder with memory objects around the given
 * pointers; the primitive is kept in the layout. */
static gboolean layout_transfer(TdmDevice *dev, CpuLayout *l, gboolean to_plain, void *from,
                                void *to, GError **error)
{
    CpuDevice *d = CPU_DEV(dev);
    dnnl_primitive_t *slot = to_plain ? &l->to_plain : &l->from_plain;
    const dnnl_memory_desc_t *src_md = to_plain ? &l->md : &l->plain_md;
    const dnnl_memory_desc_t *dst_md = to_plain ? &l->plain_md : &l->md;
    if (*slot == NULL) {
        dnnl_primitive_desc_t pd = NULL;
        if (!cpu_check(dnnl_reorder_primitive_desc_create(&pd, src_md, d->engine, dst_md,
                                                          d->engine, NULL),
                       "reorder creation", error)) {
            return FALSE;
        }
        dnnl_status_t s = dnnl_primitive_create(slot, pd);
        dnnl_primitive_desc_destroy(pd);
        if (!cpu_check(s, "reorder creation", error)) {
            *slot = NULL;
            return FALSE;
        }
    }
    dnnl_memory_t ms = NULL, md = NULL;
    gboolean ok = cpu_check(dnnl_memory_create(&ms, src_md, d->engine, from), "memory", error) &&
                  cpu_check(dnnl_memory_create(&md, dst_md, d->engine, to), "memory", error);
    if (ok) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
        ok = cpu_check(dnnl_primitive_execute(*slot, d->stream, 2, args), "reorder", error);
    }
    if (ms != NULL) {
        dnnl_memory_destroy(ms);
    }
    if (md != NULL) {
        dnnl_memory_destroy(md);
    }
    return ok;
}

gboolean cpu_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error)
{
    if (t->layout != NULL) {
        return layout_transfer(dev, (CpuLayout *)t->layout, TRUE, tdm_tensor_data(t), host, error);
    }
    int64_t strides[TDM_MAX_DIMS];
    contiguous_strides(t, strides);
    cpu_strided_copy(host, strides, tdm_tensor_data(t), t->stride, t->shape, t->ndim,
                     tdm_dtype_size(t->dtype));
    return TRUE;
}

gboolean cpu_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error)
{
    if (t->layout != NULL) {
        return layout_transfer(dev, (CpuLayout *)t->layout, FALSE, (void *)host, tdm_tensor_data(t),
                               error);
    }
    int64_t strides[TDM_MAX_DIMS];
    contiguous_strides(t, strides);
    cpu_strided_copy(tdm_tensor_data(t), t->stride, host, strides, t->shape, t->ndim,
                     tdm_dtype_size(t->dtype));
    return TRUE;
}

/* dst (out) = src in the layout of `like` (plain contiguous when like is
 * NULL or plain); tdm_tensor_reorder has checked that like has src's
 * shape. */
gboolean cpu_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src,
                     const TdmTensor *like, TdmTensor *dst, GError **error)
{
    int ndim = src->ndim;
    int64_t shape[TDM_MAX_DIMS];
    memcpy(shape, src->shape, sizeof(int64_t) * (size_t)ndim);
    gconstpointer target = like != NULL ? like->layout : NULL;
    if (src == dst) {
        if (src->layout == target && tdm_tensor_is_contiguous(src) == (target == NULL)) {
            return TRUE;
        }
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu reorder: source and destination are the same tensor");
        return FALSE;
    }
    if (src->layout == NULL && target == NULL) {
        /* plain to plain contiguous: a strided copy, any dtype */
        if (!tdm_tensor_ensure(dst, src->dtype, ndim, shape, NULL, 0, error)) {
            return FALSE;
        }
        cpu_strided_copy(tdm_tensor_data(dst), dst->stride, tdm_tensor_data(src), src->stride,
                         src->shape, src->ndim, tdm_dtype_size(src->dtype));
        return TRUE;
    }
    CpuKey key;
    cpu_key_init(&key, CPU_OP_REORDER);
    cpu_key_add_tensor(&key, src);
    cpu_key_add(&key, (int64_t)(intptr_t)target);
    for (int i = 0; i < ndim; i++) {
        cpu_key_add(&key, shape[i]);
    }
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_REORDER, &key);
    if (e == NULL) {
        e = cpu_entry_new(CPU_OP_REORDER, &key);
        dnnl_memory_desc_t from, to;
        dnnl_data_type_t dt;
        if (!cpu_tensor_md(src, &from, error)) {
            goto fail;
        }
        if (target != NULL) {
            to = *(const dnnl_memory_desc_t *)target;
        } else if (!cpu_dtype_to_dnnl(src->dtype, &dt) || !cpu_plain_md(&to, ndim, shape, dt, error)) {
            goto fail_dtype;
        }
        CpuReorderOp *op = &e->reorder;
        if (!cpu_reorder_prim(dev, e, &from, &to, FALSE, &op->prim, &op->from, &op->to, error)) {
            goto fail;
        }
        cpu_entry_set_output(dev, e, 0, &to, src->dtype);
        cpu_cache_insert(cache, e);
    }
    if (!cpu_entry_ensure_output(e, 0, dst, ndim, shape, error)) {
        cpu_entry_release(cache, e);
        return FALSE;
    }
    CpuReorderOp *op = &e->reorder;
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_FROM, cpu_mem(e, op->from, tdm_tensor_data(src))},
        {DNNL_ARG_TO, cpu_mem(e, op->to, tdm_tensor_data(dst))},
    };
    gboolean ok = cpu_run(dev, e, op->prim, 2, args, error);
    cpu_entry_release(cache, e);
    return ok;

fail_dtype:
    if (error != NULL && *error == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "cpu reorder: dtype %s cannot be reordered", tdm_dtype_name(src->dtype));
    }
fail:
    cpu_entry_free(e);
    return FALSE;
}

/* ---- inputs made plain for the own loops ---- */

gboolean cpu_plain_input(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind, TdmTensor *t,
                         const float **out, CpuEntry **entry, GError **error)
{
    *entry = NULL;
    if (tdm_tensor_is_contiguous(t)) {
        *out = tdm_tensor_data(t);
        return TRUE;
    }
    CpuKey key;
    cpu_key_init(&key, kind);
    cpu_key_add_tensor(&key, t);
    CpuEntry *e = cpu_cache_find(cache, kind, &key);
    if (e == NULL) {
        e = cpu_entry_new(kind, &key);
        dnnl_memory_desc_t from, to;
        dnnl_data_type_t dt;
        if (!cpu_dtype_to_dnnl(t->dtype, &dt) || !cpu_tensor_md(t, &from, error) ||
            !cpu_plain_md(&to, t->ndim, t->shape, dt, error) ||
            !cpu_convert_init(dev, e, &e->plain_input.to_plain, &from, &to, error)) {
            if (error != NULL && *error == NULL) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                            "cpu backend: cannot make a %s tensor plain", tdm_dtype_name(t->dtype));
            }
            cpu_entry_free(e);
            return FALSE;
        }
        cpu_cache_insert(cache, e);
    }
    *out = cpu_convert_run(dev, e, &e->plain_input.to_plain, tdm_tensor_data(t), error);
    *entry = e;
    if (*out == NULL) {
        cpu_entry_release(cache, e);
        *entry = NULL;
        return FALSE;
    }
    return TRUE;
}

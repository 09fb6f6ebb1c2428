/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-cache.c - memory descs, layout handles and op caches.
 *
 * A layout handle is the address of a dnnl_memory_desc_t interned in the
 * device (plain dense descs become NULL, so plain tensors have no layout);
 * its name ("nChw16c") is derived from the blocking. An op cache is a list of
 * entries (cpu-cache.h says what an entry holds), most recently used first,
 * a few per op kind. This file also makes what entries hold: primitives
 * (each using the device's single user scratchpad, grown as they are
 * created), their memory objects and the reorders that convert inputs, and
 * it holds the one rule for primitive descriptors that oneDNN would run on
 * its reference kernels (cpu_pd_create_fast).
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* ---- errors, dtypes, memory descs ---- */

gboolean cpu_check(dnnl_status_t s, const char *what, GError **error)
{
    if (s == dnnl_success) {
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, s == dnnl_unimplemented ? TDM_ERROR_UNSUPPORTED : TDM_ERROR_BACKEND,
                "cpu backend: oneDNN %s failed with status %d", what, (int)s);
    return FALSE;
}

gboolean cpu_refuse(const char *op, const char *what, const TdmTensor *t, const char *why,
                    GError **error)
{
    g_autofree char *s = tdm_tensor_shape_string(t);
    g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "cpu %s: %s %s %s", op, what, s, why);
    return FALSE;
}

gboolean cpu_dtype_to_dnnl(TdmDType dtype, dnnl_data_type_t *dt)
{
    switch (dtype) {
    case TDM_DTYPE_F32: *dt = dnnl_f32; return TRUE;
    case TDM_DTYPE_I32: *dt = dnnl_s32; return TRUE;
    case TDM_DTYPE_U8: *dt = dnnl_u8; return TRUE;
    case TDM_DTYPE_BF16: *dt = dnnl_bf16; return TRUE;
    case TDM_DTYPE_F16: *dt = dnnl_f16; return TRUE;
    default: return FALSE;
    }
}

gboolean cpu_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *shape, dnnl_data_type_t dt,
                      GError **error)
{
    dnnl_dims_t dims, strides;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        dims[i] = shape[i];
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
    return cpu_check(dnnl_memory_desc_init_by_strides(md, ndim, dims, dt, strides),
                     "plain memory desc", error);
}

gboolean cpu_tensor_md(const TdmTensor *t, dnnl_memory_desc_t *md, GError **error)
{
    if (t->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)t->layout;
        return TRUE;
    }
    dnnl_data_type_t dt;
    if (!cpu_dtype_to_dnnl(t->dtype, &dt)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "cpu backend: dtype %s has no oneDNN equivalent", tdm_dtype_name(t->dtype));
        return FALSE;
    }
    if (t->ndim == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "cpu backend: tensor has no shape");
        return FALSE;
    }
    dnnl_dims_t dims, strides;
    for (int i = 0; i < t->ndim; i++) {
        dims[i] = t->shape[i];
        strides[i] = t->stride[i];
    }
    return cpu_check(dnnl_memory_desc_init_by_strides(md, t->ndim, dims, dt, strides),
                     "tensor memory desc", error);
}

static void layout_make_name(CpuLayout *l)
{
    const dnnl_memory_desc_t *md = &l->md;
    const char *letters = md->ndims == 4 ? "nchw" : "abcdefghijkl";
    if (md->format_kind != dnnl_blocked) {
        g_snprintf(l->name, sizeof l->name, "opaque%dd", md->ndims);
        return;
    }
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int order[DNNL_MAX_NDIMS];
    for (int i = 0; i < md->ndims; i++) {
        order[i] = i;
    }
    /* outer dims by decreasing stride (stable for equal strides) */
    for (int i = 1; i < md->ndims; i++) {
        for (int j = i; j > 0 && b->strides[order[j]] > b->strides[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    }
    GString *s = g_string_new(NULL);
    for (int i = 0; i < md->ndims; i++) {
        gboolean blocked = FALSE;
        for (int k = 0; k < b->inner_nblks; k++) {
            blocked |= b->inner_idxs[k] == order[i];
        }
        char c = letters[order[i]];
        g_string_append_c(s, blocked ? g_ascii_toupper(c) : c);
    }
    for (int k = 0; k < b->inner_nblks; k++) {
        g_string_append_printf(s, "%d%c", (int)b->inner_blks[k], letters[b->inner_idxs[k]]);
    }
    g_strlcpy(l->name, s->str, sizeof l->name);
    g_string_free(s, TRUE);
}

gconstpointer cpu_layout_intern(TdmDevice *dev, const dnnl_memory_desc_t *md, size_t *nbytes)
{
    CpuDevice *d = CPU_DEV(dev);
    *nbytes = dnnl_memory_desc_get_size(md);
    dnnl_memory_desc_t plain;
    int64_t shape[DNNL_MAX_NDIMS];
    for (int i = 0; i < md->ndims; i++) {
        shape[i] = md->dims[i];
    }
    if (cpu_plain_md(&plain, md->ndims, shape, md->data_type, NULL) &&
        dnnl_memory_desc_equal(&plain, md)) {
        return NULL;
    }
    for (guint i = 0; i < d->layouts->len; i++) {
        CpuLayout *l = g_ptr_array_index(d->layouts, i);
        if (dnnl_memory_desc_equal(&l->md, md)) {
            return l;
        }
    }
    CpuLayout *l = g_new0(CpuLayout, 1);
    l->md = *md;
    l->plain_md = plain;
    layout_make_name(l);
    g_ptr_array_add(d->layouts, l);
    return l;
}

static TdmDType dnnl_to_tdm_dtype(dnnl_data_type_t dt)
{
    switch (dt) {
    case dnnl_s32: return TDM_DTYPE_I32;
    case dnnl_u8: case dnnl_s8: return TDM_DTYPE_U8;
    case dnnl_bf16: return TDM_DTYPE_BF16;
    case dnnl_f16: return TDM_DTYPE_F16;
    default: return TDM_DTYPE_F32;
    }
}

void cpu_entry_set_output(TdmDevice *dev, CpuEntry *e, int i, const dnnl_memory_desc_t *md,
                          TdmDType dtype)
{
    e->layout[i] = cpu_layout_intern(dev, md, &e->nbytes[i]);
    e->out_dtype[i] = dtype == (TdmDType)-1 ? dnnl_to_tdm_dtype(md->data_type) : dtype;
}

gboolean cpu_entry_ensure_output(CpuEntry *e, int i, TdmTensor *t, int ndim,
                                 const int64_t *shape, GError **error)
{
    return tdm_tensor_ensure(t, e->out_dtype[i], ndim, shape, e->layout[i], e->nbytes[i], error);
}

/* ---- op cache ---- */

void cpu_key_init(CpuKey *k, CpuOpKind kind)
{
    k->n = 0;
    cpu_key_add(k, kind);
}

void cpu_key_add(CpuKey *k, int64_t v)
{
    if (k->n < CPU_KEY_MAX) {
        k->v[k->n] = v;
    }
    k->n++;
}

void cpu_key_add_tensor(CpuKey *k, const TdmTensor *t)
{
    if (t == NULL) {
        cpu_key_add(k, -1);
        return;
    }
    cpu_key_add(k, t->dtype);
    cpu_key_add(k, t->ndim);
    cpu_key_add(k, (int64_t)(intptr_t)t->layout);
    for (int i = 0; i < t->ndim; i++) {
        cpu_key_add(k, t->shape[i]);
        if (t->layout == NULL) {
            cpu_key_add(k, t->stride[i]);
        }
    }
}

void cpu_key_add_tensors(CpuKey *k, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        cpu_key_add_tensor(k, va_arg(ap, const TdmTensor *));
    }
    va_end(ap);
}

static gboolean key_equal(const CpuKey *a, const CpuKey *b)
{
    return a->n == b->n && a->n <= CPU_KEY_MAX &&
           memcmp(a->v, b->v, sizeof(int64_t) * (size_t)a->n) == 0;
}

CpuEntry *cpu_cache_find(TdmOpCache **cache, CpuOpKind kind, const CpuKey *key)
{
    if (cache == NULL || *cache == NULL) {
        return NULL;
    }
    CpuEntry **link = &(*cache)->entries;
    for (CpuEntry *e = *link; e != NULL; link = &e->next, e = e->next) {
        if (e->kind == kind && key_equal(&e->key, key)) {
            if (link != &(*cache)->entries) { /* move to front: most recent first */
                *link = e->next;
                e->next = (*cache)->entries;
                (*cache)->entries = e;
            }
            return e;
        }
    }
    return NULL;
}

CpuEntry *cpu_entry_new(CpuOpKind kind, const CpuKey *key)
{
    CpuEntry *e = g_new0(CpuEntry, 1);
    e->kind = kind;
    e->key = *key;
    for (int i = 0; i < CPU_MAX_PRIMS; i++) {
        e->scratch[i] = -1;
    }
    return e;
}

void cpu_entry_free(CpuEntry *e)
{
    if (e == NULL) {
        return;
    }
    for (int i = 0; i < e->nprims; i++) {
        dnnl_primitive_destroy(e->prims[i]);
    }
    for (int i = 0; i < e->nmems; i++) {
        dnnl_memory_destroy(e->mems[i]);
    }
    for (int i = 0; i < e->nbufs; i++) {
        free(e->bufs[i]);
    }
    g_free(e);
}

void cpu_cache_insert(TdmOpCache **cache, CpuEntry *e)
{
    if (cache == NULL) {
        return;
    }
    if (*cache == NULL) {
        *cache = g_new0(TdmOpCache, 1);
    }
    e->next = (*cache)->entries;
    (*cache)->entries = e;
    /* keep a few shapes per kind (the last batch of an epoch is often
     * smaller); drop the least recently used beyond that */
    int n = 0;
    for (CpuEntry **link = &(*cache)->entries; *link != NULL;) {
        CpuEntry *x = *link;
        if (x->kind == e->kind && ++n > CPU_ENTRIES_PER_KIND) {
            *link = x->next;
            cpu_entry_free(x);
        } else {
            link = &x->next;
        }
    }
}

CpuEntry *cpu_entry_setup_end(TdmOpCache **cache, CpuEntry *e, dnnl_primitive_desc_t pd,
                              gboolean ok)
{
    if (pd != NULL) {
        dnnl_primitive_desc_destroy(pd);
    }
    if (!ok) {
        cpu_entry_free(e);
        return NULL;
    }
    cpu_cache_insert(cache, e);
    return e;
}

void cpu_entry_release(TdmOpCache **cache, CpuEntry *e)
{
    if (cache == NULL) {
        cpu_entry_free(e);
    }
}

void cpu_cache_free(TdmDevice *dev, TdmOpCache *cache)
{
    if (cache == NULL) {
        return;
    }
    CpuEntry *e = cache->entries;
    while (e != NULL) {
        CpuEntry *next = e->next;
        cpu_entry_free(e);
        e = next;
    }
    g_free(cache);
}

/* ---- primitives, memory objects, reorders ---- */

dnnl_primitive_attr_t cpu_attr_new(float sum_scale, float out_scale)
{
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) {
        return NULL;
    }
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (sum_scale != 0.0f) {
        dnnl_post_ops_t po = NULL;
        if (dnnl_post_ops_create(&po) == dnnl_success) {
            dnnl_post_ops_append_sum(po, sum_scale);
            dnnl_primitive_attr_set_post_ops(attr, po);
            dnnl_post_ops_destroy(po);
        }
    }
    if (out_scale != 1.0f) {
        dnnl_primitive_attr_set_output_scales(attr, 1, 0, &out_scale);
    }
    return attr;
}

gboolean cpu_pd_create(TdmDevice *dev, const_dnnl_op_desc_t desc, const_dnnl_primitive_desc_t hint,
                       dnnl_primitive_desc_t *pd, const char *what, GError **error)
{
    dnnl_primitive_attr_t attr = cpu_attr_new(0.0f, 1.0f);
    dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, attr, CPU_DEV(dev)->engine, hint);
    dnnl_primitive_attr_destroy(attr);
    return cpu_check(s, what, error);
}

gboolean cpu_pd_create_backward(TdmDevice *dev, const_dnnl_op_desc_t fwd, const_dnnl_op_desc_t bwd,
                                dnnl_primitive_desc_t *pd, const char *what, GError **error)
{
    dnnl_primitive_desc_t hint = NULL;
    dnnl_status_t s = dnnl_primitive_desc_create(&hint, fwd, NULL, CPU_DEV(dev)->engine, NULL);
    if (s != dnnl_success) {
        g_autofree char *w = g_strconcat(what, " (its forward)", NULL);
        return cpu_check(s, w, error);
    }
    gboolean ok = cpu_pd_create(dev, bwd, hint, pd, what, error);
    dnnl_primitive_desc_destroy(hint);
    return ok;
}

int cpu_entry_mem(TdmDevice *dev, CpuEntry *e, const dnnl_memory_desc_t *md)
{
    g_assert(e->nmems < CPU_MAX_MEMS);
    dnnl_memory_t m = NULL;
    if (dnnl_memory_create(&m, md, CPU_DEV(dev)->engine, DNNL_MEMORY_NONE) != dnnl_success) {
        return -1;
    }
    e->mems[e->nmems] = m;
    return e->nmems++;
}

void *cpu_entry_buf(CpuEntry *e, size_t nbytes)
{
    g_assert(e->nbufs < CPU_MAX_BUFS);
    size_t n = (nbytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    void *p = aligned_alloc(CPU_ALIGN, n ? n : CPU_ALIGN);
    if (p != NULL) {
        memset(p, 0, n);
        e->bufs[e->nbufs++] = p;
    }
    return p;
}

dnnl_memory_t cpu_mem(CpuEntry *e, int index, void *ptr)
{
    dnnl_memory_t m = e->mems[index];
    dnnl_memory_set_data_handle(m, ptr);
    return m;
}

/* Grows *buf (of *size bytes) to at least `bytes`, not keeping its
 * content: the scratchpad and the transient buffers. */
static gboolean grow_buffer(void **buf, size_t *size, size_t bytes, const char *what,
                            GError **error)
{
    if (bytes <= *size) {
        return TRUE;
    }
    free(*buf);
    size_t n = (bytes + 4095) / 4096 * 4096;
    *buf = aligned_alloc(4096, n);
    if (*buf == NULL) {
        *size = 0;
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "cpu backend: cannot allocate a %zu-byte %s",
                    n, what);
        return FALSE;
    }
    *size = n;
    return TRUE;
}

gboolean cpu_scratch_reserve(TdmDevice *dev, size_t bytes, GError **error)
{
    CpuDevice *d = CPU_DEV(dev);
    return grow_buffer(&d->scratch, &d->scratch_size, bytes, "scratchpad", error);
}

gboolean cpu_transient_reserve(TdmDevice *dev, int slot, size_t bytes, GError **error)
{
    CpuDevice *d = CPU_DEV(dev);
    g_assert(slot >= 0 && slot < CPU_TRANSIENT_N);
    return grow_buffer(&d->transient[slot], &d->transient_size[slot], bytes, "transient buffer",
                       error);
}

void *cpu_transient(TdmDevice *dev, int slot)
{
    return CPU_DEV(dev)->transient[slot];
}

static gboolean pd_is_reference(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           impl != NULL && strncmp(impl, "ref", 3) == 0;
}

gboolean cpu_pd_create_fast(TdmDevice *dev, CpuPdMake make, const void *spec,
                            dnnl_primitive_desc_t *pd, GError **error)
{
    GError *first = NULL;
    dnnl_primitive_desc_t made = NULL;
    if (!make(dev, spec, FALSE, &made, &first)) {
        made = NULL;
    } else if (!pd_is_reference(made)) {
        *pd = made;
        return TRUE;
    }
    dnnl_primitive_desc_t retry = NULL;
    if (make(dev, spec, TRUE, &retry, NULL)) {
        if (made != NULL) {
            dnnl_primitive_desc_destroy(made);
        }
        made = retry;
    }
    if (made == NULL) {
        g_propagate_error(error, first);
        return FALSE;
    }
    g_clear_error(&first);
    *pd = made;
    return TRUE;
}

gboolean cpu_prim_create(TdmDevice *dev, CpuEntry *e, const_dnnl_primitive_desc_t pd, int *index,
                         GError **error)
{
    g_assert(e->nprims < CPU_MAX_PRIMS);
    dnnl_primitive_t prim = NULL;
    if (!cpu_check(dnnl_primitive_create(&prim, pd), "primitive creation", error)) {
        return FALSE;
    }
    int i = e->nprims++;
    e->prims[i] = prim;
    *index = i;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t ssize = smd != NULL ? dnnl_memory_desc_get_size(smd) : 0;
    if (ssize > 0) {
        if (!cpu_scratch_reserve(dev, ssize, error)) {
            return FALSE;
        }
        e->scratch[i] = cpu_entry_mem(dev, e, smd);
    }
    return TRUE;
}

gboolean cpu_entry_ensure_like(CpuEntry *e, int i, TdmTensor *t, const TdmTensor *like,
                               GError **error)
{
    int64_t shape[TDM_MAX_DIMS];
    int ndim = like->ndim;
    memcpy(shape, like->shape, sizeof(int64_t) * (size_t)ndim);
    return cpu_entry_ensure_output(e, i, t, ndim, shape, error);
}

gboolean cpu_run(TdmDevice *dev, CpuEntry *e, int prim, int nargs, dnnl_exec_arg_t *args,
                 GError **error)
{
    if (e->scratch[prim] >= 0) {
        args[nargs].arg = DNNL_ARG_SCRATCHPAD;
        args[nargs].memory = cpu_mem(e, e->scratch[prim], CPU_DEV(dev)->scratch);
        nargs++;
    }
    return cpu_check(dnnl_primitive_execute(e->prims[prim], CPU_DEV(dev)->stream, nargs, args),
                     "primitive execution", error);
}

gboolean cpu_reorder_prim(TdmDevice *dev, CpuEntry *e, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to, gboolean sum, int *prim, int *msrc,
                          int *mdst, GError **error)
{
    CpuDevice *d = CPU_DEV(dev);
    dnnl_primitive_attr_t attr = cpu_attr_new(sum ? 1.0f : 0.0f, 1.0f);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, d->engine, to, d->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    if (!cpu_check(s, "reorder creation", error)) {
        return FALSE;
    }
    gboolean ok = cpu_prim_create(dev, e, pd, prim, error);
    dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        return FALSE;
    }
    *msrc = cpu_entry_mem(dev, e, from);
    *mdst = cpu_entry_mem(dev, e, to);
    return TRUE;
}

/* cpu_convert_init and cpu_convert_init_transient: slot -1 converts into
 * a buffer of the entry. */
static gboolean convert_init(TdmDevice *dev, CpuEntry *e, CpuConvert *c,
                             const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                             int slot, GError **error)
{
    memset(c, 0, sizeof *c);
    c->prim = -1;
    c->slot = slot;
    if (dnnl_memory_desc_equal(from, to)) {
        return TRUE;
    }
    if (!cpu_reorder_prim(dev, e, from, to, FALSE, &c->prim, &c->src, &c->dst, error)) {
        return FALSE;
    }
    c->bytes = dnnl_memory_desc_get_size(to);
    if (slot >= 0) {
        return cpu_transient_reserve(dev, slot, c->bytes, error);
    }
    c->buf = cpu_entry_buf(e, c->bytes);
    if (c->buf == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "cpu backend: out of memory");
        return FALSE;
    }
    return TRUE;
}

gboolean cpu_convert_init(TdmDevice *dev, CpuEntry *e, CpuConvert *c,
                          const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                          GError **error)
{
    return convert_init(dev, e, c, from, to, -1, error);
}

gboolean cpu_convert_init_transient(TdmDevice *dev, CpuEntry *e, CpuConvert *c,
                                    const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    int slot, GError **error)
{
    g_assert(slot >= 0 && slot < CPU_TRANSIENT_N);
    return convert_init(dev, e, c, from, to, slot, error);
}

void *cpu_convert_run(TdmDevice *dev, CpuEntry *e, CpuConvert *c, void *ptr, GError **error)
{
    if (c->prim < 0) {
        return ptr;
    }
    /* a transient buffer is looked up now: a later entry may have grown it */
    void *buf = c->slot >= 0 ? cpu_transient(dev, c->slot) : c->buf;
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_FROM, cpu_mem(e, c->src, ptr)},
        {DNNL_ARG_TO, cpu_mem(e, c->dst, buf)},
    };
    if (!cpu_run(dev, e, c->prim, 2, args, error)) {
        return NULL;
    }
    return buf;
}

/* ---- layouts as planes of [h][w][b] floats ---- */

gboolean cpu_planes(const dnnl_memory_desc_t *md, CpuPlanes *o)
{
    if (md->ndims != 4 || md->data_type != dnnl_f32 || md->format_kind != dnnl_blocked ||
        md->offset0 != 0 || md->extra.flags != 0) {
        return FALSE;
    }
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    const dnnl_dim_t *s = bd->strides, *d = md->padded_dims;
    int64_t n = d[0], c = d[1], h = d[2], w = d[3];
    o->h = h;
    o->w = w;
    if (bd->inner_nblks == 0 && s[3] == 1 && s[2] == w && s[1] == h * w && s[0] == c * h * w) {
        o->planes = n * c;
        o->b = 1;
        o->tag = dnnl_nchw;
        return TRUE;
    }
    if (bd->inner_nblks == 0 && s[1] == 1 && s[3] == c && s[2] == w * c && s[0] == h * w * c) {
        o->planes = n;
        o->b = c;
        o->tag = dnnl_nhwc;
        return TRUE;
    }
    if (bd->inner_nblks == 1 && bd->inner_idxs[0] == 1 &&
        (bd->inner_blks[0] == 8 || bd->inner_blks[0] == 16)) {
        int64_t b = bd->inner_blks[0];
        if (c % b == 0 && s[3] == b && s[2] == w * b && s[1] == h * w * b &&
            s[0] == c * h * w) {
            o->planes = n * (c / b);
            o->b = b;
            o->tag = b == 8 ? dnnl_aBcd8b : dnnl_aBcd16b;
            return TRUE;
        }
    }
    return FALSE;
}

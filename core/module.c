/* SPDX-License-Identifier: MIT */
/* core/module.c - the generic module object: reference counting, children,
 * parameter declarations, forward/backward dispatch through the class
 * vtable, and the grad-ready notification that the model forwards to its
 * hook. It also holds the small slot/view helpers every layer uses
 * (module-private.h), so that the layers stay about their one op each.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "modules/module-private.h"

static void param_free(gpointer data)
{
    TdmParam *p = data;
    if (p == NULL) {
        return;
    }
    g_free(p->name);
    g_free(p->full_name);
    if (p->value != NULL) {
        tdm_tensor_unref(p->value);
    }
    if (p->grad != NULL) {
        tdm_tensor_unref(p->grad);
    }
    g_free(p);
}

TdmModule *tdm_module_new(const TdmModuleClass *klass, gpointer priv)
{
    g_return_val_if_fail(klass != NULL, NULL);
    TdmModule *m = g_new0(TdmModule, 1);
    m->klass = klass;
    m->ref_count = 1;
    m->name = g_strdup("");
    m->children = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_module_unref);
    m->params = g_ptr_array_new_with_free_func(param_free);
    m->training = TRUE;
    m->priv = priv;
    return m;
}

TdmModule *tdm_module_ref(TdmModule *m)
{
    g_return_val_if_fail(m != NULL, NULL);
    g_atomic_int_inc(&m->ref_count);
    return m;
}

void tdm_module_unref(TdmModule *m)
{
    if (m == NULL || !g_atomic_int_dec_and_test(&m->ref_count)) {
        return;
    }
    /* The class frees its slots and priv; it may still need its params'
     * device, so params and children go after it. */
    if (m->klass->finalize != NULL) {
        m->klass->finalize(m);
    } else {
        g_free(m->priv);
    }
    m->priv = NULL;
    g_ptr_array_unref(m->children);
    g_ptr_array_unref(m->params);
    g_free(m->name);
    g_free(m);
}

void tdm_module_add_child(TdmModule *m, const char *name, TdmModule *child)
{
    g_return_if_fail(m != NULL && child != NULL);
    g_free(child->name);
    child->name = g_strdup(name != NULL ? name : "");
    g_ptr_array_add(m->children, child);
}

TdmParam *tdm_module_add_param(TdmModule *m, const char *name, int ndim, const int64_t *shape,
                               gboolean is_buffer)
{
    g_return_val_if_fail(m != NULL && name != NULL, NULL);
    g_return_val_if_fail(ndim >= 0 && ndim <= TDM_MAX_DIMS, NULL);
    TdmParam *p = g_new0(TdmParam, 1);
    p->name = g_strdup(name);
    p->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
    }
    p->is_buffer = is_buffer;
    p->requires_grad = !is_buffer;
    p->owner = m;
    g_ptr_array_add(m->params, p);
    return p;
}

TdmParam *tdm_module_find_param(TdmModule *m, const char *local_name)
{
    g_return_val_if_fail(m != NULL && local_name != NULL, NULL);
    for (guint i = 0; i < m->params->len; i++) {
        TdmParam *p = g_ptr_array_index(m->params, i);
        if (strcmp(p->name, local_name) == 0) {
            return p;
        }
    }
    return NULL;
}

gboolean tdm_module_check_placed(const TdmModule *m, GError **error)
{
    if (m->device == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "%s module '%s' is not placed on a device (create a TdmModel first)",
                    m->klass->type_name, m->name);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_module_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error)
{
    g_return_val_if_fail(m != NULL && x != NULL && y != NULL, FALSE);
    *y = NULL;
    if (!tdm_module_check_placed(m, error)) {
        return FALSE;
    }
    if (!m->klass->forward(m, x, y, error)) {
        return FALSE;
    }
    if (m->training && m->model != NULL && *y != NULL) {
        tdm_model_note_activation(m->model, *y);
    }
    return TRUE;
}

gboolean tdm_module_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                             GError **error)
{
    g_return_val_if_fail(m != NULL && dy != NULL, FALSE);
    TdmTensor *dummy = NULL;
    if (dx == NULL) {
        dx = &dummy;
        need_dx = FALSE;
    }
    *dx = NULL;
    if (!tdm_module_check_placed(m, error)) {
        return FALSE;
    }
    if (m->klass->backward == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED, "%s module '%s' has no backward",
                    m->klass->type_name, m->name);
        return FALSE;
    }
    return m->klass->backward(m, dy, need_dx, dx, error);
}

void tdm_module_grad_ready(TdmModule *m, TdmParam *p)
{
    g_return_if_fail(m != NULL && p != NULL);
    if (!p->requires_grad || p->is_buffer) {
        return;
    }
    TdmModel *model = m->model;
    if (model != NULL && model->grad_ready != NULL) {
        model->grad_ready(model, p, model->grad_ready_data);
    }
}

void tdm_module_set_training(TdmModule *m, gboolean training)
{
    g_return_if_fail(m != NULL);
    m->training = training;
    for (guint i = 0; i < m->children->len; i++) {
        tdm_module_set_training(g_ptr_array_index(m->children, i), training);
    }
}

/* ---- helpers for the layers (module-private.h) ---- */

gboolean tdm_module_own_trainable(const TdmModule *m)
{
    for (guint i = 0; i < m->params->len; i++) {
        const TdmParam *p = g_ptr_array_index(m->params, i);
        if (!p->is_buffer && p->requires_grad) {
            return TRUE;
        }
    }
    return FALSE;
}

gboolean tdm_module_any_trainable(const TdmModule *m)
{
    if (tdm_module_own_trainable(m)) {
        return TRUE;
    }
    for (guint i = 0; i < m->children->len; i++) {
        if (tdm_module_any_trainable(g_ptr_array_index(m->children, i))) {
            return TRUE;
        }
    }
    return FALSE;
}

TdmTensor *tdm_module_slot(TdmModule *m, TdmTensor **slot, TdmDType dtype)
{
    if (*slot == NULL) {
        *slot = tdm_tensor_new_empty(m->device, dtype);
    }
    return *slot;
}

void tdm_module_slot_clear(TdmTensor **slot)
{
    if (*slot != NULL) {
        tdm_tensor_unref(*slot);
        *slot = NULL;
    }
}

void tdm_module_release(TdmModule *m, TdmOpCache **const *caches, TdmTensor **const *slots)
{
    for (; m->device != NULL && *caches != NULL; caches++) {
        tdm_op_cache_clear(m->device, *caches);
    }
    for (; *slots != NULL; slots++) {
        tdm_module_slot_clear(*slots);
    }
    g_clear_pointer(&m->priv, g_free);
}

void tdm_module_keep(TdmTensor **keep, TdmTensor *t)
{
    if (*keep == t) {
        return;
    }
    if (t != NULL) {
        tdm_tensor_ref(t);
    }
    if (*keep != NULL) {
        tdm_tensor_unref(*keep);
    }
    *keep = t;
}

TdmTensor *tdm_module_as_plain(TdmModule *m, TdmOpCache **cache, TdmTensor *t, TdmTensor **slot,
                               GError **error)
{
    if (tdm_tensor_is_contiguous(t)) {
        return t;
    }
    TdmTensor *dst = tdm_module_slot(m, slot, t->dtype);
    if (!tdm_tensor_reorder(t, NULL, dst, cache, error)) {
        return NULL;
    }
    return dst;
}

TdmTensor *tdm_module_view(TdmTensor **view, TdmTensor *base, int ndim, const int64_t *shape,
                           GError **error)
{
    TdmTensor *v = *view;
    if (v != NULL && v->dtype == base->dtype && v->ndim == ndim) {
        gboolean same = TRUE;
        for (int i = 0; i < ndim; i++) {
            same = same && v->shape[i] == shape[i];
        }
        if (same && v->storage == base->storage && v->offset == base->offset) {
            return v;
        }
        /* Same shape over another buffer (pooled gradients move from step
         * to step): point the view there rather than allocate a new one. */
        if (same && v->ref_count == 1 && base->storage != NULL && tdm_tensor_is_contiguous(base) &&
            tdm_tensor_numel(base) == tdm_tensor_numel(v)) {
            TdmStorage *old = v->storage;
            v->storage = tdm_storage_ref(base->storage);
            v->offset = base->offset;
            tdm_storage_unref(old);
            return v;
        }
    }
    TdmTensor *nv = tdm_tensor_reshape(base, ndim, shape, error);
    if (nv == NULL) {
        return NULL;
    }
    tdm_module_slot_clear(view);
    *view = nv;
    return nv;
}

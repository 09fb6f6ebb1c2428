/* SPDX-License-Identifier: MIT */
/* core/tensor.c - storages and tensors.
 *
 * A storage is a reference-counted block of device memory obtained from the
 * device's backend. A tensor is a typed, shaped window onto a storage, plain
 * (row-major with element strides) or in a backend-private layout. Op outputs
 * are "slots": tensors that tdm_tensor_ensure() reshapes in place and that
 * keep their storage when it is large enough, so that a training step with
 * stable shapes allocates only during its first iteration. The core never
 * touches tensor memory itself; host transfers go through the backend's
 * read/write, which also undo private layouts.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

TdmStorage *tdm_storage_new(TdmDevice *dev, size_t nbytes, GError **error)
{
    g_return_val_if_fail(dev != NULL, NULL);
    void *data = tdm_device_alloc(dev, nbytes ? nbytes : 1, error);
    if (data == NULL) {
        return NULL;
    }
    TdmStorage *s = g_new0(TdmStorage, 1);
    s->ref_count = 1;
    s->device = dev;
    s->data = data;
    s->nbytes = nbytes;
    tdm_device_count_bytes(dev, (gint64)nbytes);
    return s;
}

TdmStorage *tdm_storage_ref(TdmStorage *storage)
{
    g_return_val_if_fail(storage != NULL, NULL);
    g_atomic_int_inc(&storage->ref_count);
    return storage;
}

void tdm_storage_unref(TdmStorage *storage)
{
    if (storage == NULL) {
        return;
    }
    if (g_atomic_int_dec_and_test(&storage->ref_count)) {
        TdmStorage *parent = storage->reserved[0];
        if (parent != NULL) {
            tdm_storage_unref(parent); /* a slice: the memory is its parent's */
        } else {
            tdm_device_free(storage->device, storage->data, storage->nbytes);
            tdm_device_count_bytes(storage->device, -(gint64)storage->nbytes);
        }
        g_free(storage);
    }
}

TdmStorage *tdm_storage_new_slice(TdmStorage *parent, size_t offset, size_t nbytes)
{
    g_return_val_if_fail(parent != NULL && parent->reserved[0] == NULL, NULL);
    g_return_val_if_fail(offset <= parent->nbytes && nbytes <= parent->nbytes - offset, NULL);
    TdmStorage *s = g_new0(TdmStorage, 1);
    s->ref_count = 1;
    s->device = parent->device;
    s->data = (char *)parent->data + offset;
    s->nbytes = nbytes;
    s->reserved[0] = tdm_storage_ref(parent);
    return s;
}

static int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
    }
    return n;
}

static void set_contiguous_strides(TdmTensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

static gboolean check_shape(int ndim, const int64_t *shape, GError **error)
{
    if (ndim < 0 || ndim > TDM_MAX_DIMS) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "tensor rank %d is outside 0..%d", ndim,
                    TDM_MAX_DIMS);
        return FALSE;
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "negative size %" G_GINT64_FORMAT
                        " in dimension %d", shape[i], i);
            return FALSE;
        }
    }
    return TRUE;
}

TdmTensor *tdm_tensor_new_empty(TdmDevice *dev, TdmDType dtype)
{
    g_return_val_if_fail(dev != NULL, NULL);
    TdmTensor *t = g_new0(TdmTensor, 1);
    t->ref_count = 1;
    t->dtype = dtype;
    t->device = dev;
    return t;
}

TdmTensor *tdm_tensor_new(TdmDevice *dev, TdmDType dtype, int ndim, const int64_t *shape,
                          GError **error)
{
    TdmTensor *t = tdm_tensor_new_empty(dev, dtype);
    if (!tdm_tensor_ensure(t, dtype, ndim, shape, NULL, 0, error)) {
        tdm_tensor_unref(t);
        return NULL;
    }
    return t;
}

TdmTensor *tdm_tensor_new_view(TdmTensor *base, size_t byte_offset, TdmDType dtype, int ndim,
                               const int64_t *shape, GError **error)
{
    g_return_val_if_fail(base != NULL && base->storage != NULL, NULL);
    if (!check_shape(ndim, shape, error)) {
        return NULL;
    }
    size_t need = (size_t)shape_numel(ndim, shape) * tdm_dtype_size(dtype);
    size_t start = base->offset + byte_offset;
    if (start + need > base->storage->nbytes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "view of %zu bytes at offset %zu does not fit in a storage of %zu bytes",
                    need, start, base->storage->nbytes);
        return NULL;
    }
    TdmTensor *t = tdm_tensor_new_empty(base->device, dtype);
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    set_contiguous_strides(t);
    t->storage = tdm_storage_ref(base->storage);
    t->offset = start;
    return t;
}

TdmTensor *tdm_tensor_reshape(TdmTensor *t, int ndim, const int64_t *shape, GError **error)
{
    g_return_val_if_fail(t != NULL, NULL);
    if (!tdm_tensor_is_contiguous(t) || t->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "reshape needs a plain contiguous tensor");
        return NULL;
    }
    if (!check_shape(ndim, shape, error)) {
        return NULL;
    }
    if (shape_numel(ndim, shape) != tdm_tensor_numel(t)) {
        g_autofree char *from = tdm_tensor_shape_string(t);
        TdmTensor tmp = {.ndim = ndim};
        memcpy(tmp.shape, shape, sizeof(int64_t) * (size_t)ndim);
        g_autofree char *to = tdm_tensor_shape_string(&tmp);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "cannot reshape %s to %s", from, to);
        return NULL;
    }
    TdmTensor *v = tdm_tensor_new_empty(t->device, t->dtype);
    v->ndim = ndim;
    memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
    set_contiguous_strides(v);
    v->storage = tdm_storage_ref(t->storage);
    v->offset = t->offset;
    return v;
}

TdmTensor *tdm_tensor_narrow(TdmTensor *t, int64_t start, int64_t len, GError **error)
{
    g_return_val_if_fail(t != NULL, NULL);
    if (!tdm_tensor_is_contiguous(t) || t->storage == NULL || t->ndim < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "narrow needs a plain contiguous tensor of rank >= 1");
        return NULL;
    }
    if (start < 0 || len < 0 || start + len > t->shape[0]) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "rows [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") are outside dimension 0 of size %"
                    G_GINT64_FORMAT, start, start + len, t->shape[0]);
        return NULL;
    }
    TdmTensor *v = tdm_tensor_new_empty(t->device, t->dtype);
    v->ndim = t->ndim;
    memcpy(v->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    v->shape[0] = len;
    set_contiguous_strides(v);
    v->storage = tdm_storage_ref(t->storage);
    v->offset = t->offset + (size_t)(start * t->stride[0]) * tdm_dtype_size(t->dtype);
    return v;
}

TdmTensor *tdm_tensor_ref(TdmTensor *t)
{
    g_return_val_if_fail(t != NULL, NULL);
    g_atomic_int_inc(&t->ref_count);
    return t;
}

void tdm_tensor_unref(TdmTensor *t)
{
    if (t == NULL) {
        return;
    }
    if (g_atomic_int_dec_and_test(&t->ref_count)) {
        tdm_storage_unref(t->storage);
        g_free(t);
    }
}

gboolean tdm_tensor_ensure(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                           gconstpointer layout, size_t layout_nbytes, GError **error)
{
    g_return_val_if_fail(t != NULL, FALSE);
    if (!check_shape(ndim, shape, error)) {
        return FALSE;
    }
    size_t need = layout != NULL ? layout_nbytes
                                 : (size_t)shape_numel(ndim, shape) * tdm_dtype_size(dtype);
    t->dtype = dtype;
    t->ndim = ndim;
    if (shape != &t->shape[0]) {
        memmove(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    }
    set_contiguous_strides(t);
    t->layout = layout;
    t->layout_nbytes = layout != NULL ? layout_nbytes : 0;
    if (t->storage != NULL && t->offset + need <= t->storage->nbytes) {
        return TRUE;
    }
    TdmStorage *s = tdm_storage_new(t->device, need, error);
    if (s == NULL) {
        return FALSE;
    }
    tdm_storage_unref(t->storage);
    t->storage = s;
    t->offset = 0;
    return TRUE;
}

int64_t tdm_tensor_numel(const TdmTensor *t)
{
    return shape_numel(t->ndim, t->shape);
}

size_t tdm_tensor_nbytes(const TdmTensor *t)
{
    if (t->layout != NULL) {
        return t->layout_nbytes;
    }
    return (size_t)tdm_tensor_numel(t) * tdm_dtype_size(t->dtype);
}

gboolean tdm_tensor_is_plain(const TdmTensor *t)
{
    return t->layout == NULL;
}

gboolean tdm_tensor_is_contiguous(const TdmTensor *t)
{
    if (t->layout != NULL) {
        return FALSE;
    }
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) {
            return FALSE;
        }
        s *= t->shape[i];
    }
    return TRUE;
}

gboolean tdm_tensor_same_shape(const TdmTensor *a, const TdmTensor *b)
{
    if (a->ndim != b->ndim) {
        return FALSE;
    }
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] != b->shape[i]) {
            return FALSE;
        }
    }
    return TRUE;
}

void *tdm_tensor_data(const TdmTensor *t)
{
    if (t->storage == NULL) {
        return NULL;
    }
    return (char *)t->storage->data + t->offset;
}

char *tdm_tensor_shape_string(const TdmTensor *t)
{
    GString *s = g_string_new("[");
    for (int i = 0; i < t->ndim; i++) {
        g_string_append_printf(s, i ? ", %" G_GINT64_FORMAT : "%" G_GINT64_FORMAT, t->shape[i]);
    }
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

gboolean tdm_tensor_read(TdmTensor *t, void *host, GError **error)
{
    g_return_val_if_fail(t != NULL && host != NULL, FALSE);
    if (tdm_tensor_numel(t) == 0) {
        return TRUE;
    }
    if (t->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "reading a tensor with no storage");
        return FALSE;
    }
    return tdm_device_read(t->device, t, host, error);
}

gboolean tdm_tensor_write(TdmTensor *t, const void *host, GError **error)
{
    g_return_val_if_fail(t != NULL && host != NULL, FALSE);
    if (tdm_tensor_numel(t) == 0) {
        return TRUE;
    }
    if (t->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "writing a tensor with no storage");
        return FALSE;
    }
    return tdm_device_write(t->device, t, host, error);
}

float *tdm_tensor_read_f32(TdmTensor *t, GError **error)
{
    g_return_val_if_fail(t != NULL, NULL);
    if (t->dtype != TDM_DTYPE_F32) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "expected an f32 tensor, got %s",
                    tdm_dtype_name(t->dtype));
        return NULL;
    }
    float *out = g_new(float, MAX(tdm_tensor_numel(t), 1));
    if (!tdm_tensor_read(t, out, error)) {
        g_free(out);
        return NULL;
    }
    return out;
}

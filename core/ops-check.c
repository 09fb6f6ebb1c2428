/* SPDX-License-Identifier: MIT */
/* core/ops-check.c - the argument checks of the op front ends.
 *
 * Every front end (ops-nn.c, ops-pool.c, ops-vector.c) checks its tensors
 * with these before the backend runs, so that every backend sees only
 * arguments that fit the op's contract and every error reads alike: the
 * op's name first, then the tensor, its shape and what is wrong with it.
 * Only what the contract in backend.h fixes is checked here (devices,
 * storage, dtypes, shapes); what one backend cannot handle (a layout, a
 * strided view) stays that backend's to report.
 */
#include "config.h"

#include "ops-private.h"

char *tdm_ops_shape_string(int ndim, const int64_t *shape)
{
    GString *s = g_string_new("[");
    for (int i = 0; i < ndim; i++) {
        g_string_append_printf(s, i ? ", %" G_GINT64_FORMAT : "%" G_GINT64_FORMAT, shape[i]);
    }
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

static gboolean check_on_device(TdmDevice *dev, const char *op, const char *what,
                                const TdmTensor *t, GError **error)
{
    if (t == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s is NULL", op, what);
        return FALSE;
    }
    if (t->device != dev) {
        g_autofree char *s = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: %s %s is on device %s but the op runs on %s", op, what, s,
                    t->device != NULL ? t->device->name : "(none)", dev->name);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_input(TdmDevice *dev, const char *op, const char *what, const TdmTensor *t,
                             int dtype, GError **error)
{
    if (!check_on_device(dev, op, what, t, error)) {
        return FALSE;
    }
    if (t->storage == NULL && tdm_tensor_numel(t) > 0) {
        g_autofree char *s = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: %s %s has no storage (an empty output slot used as an input)", op, what,
                    s);
        return FALSE;
    }
    if (dtype >= 0 && t->dtype != (TdmDType)dtype) {
        g_autofree char *s = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s %s is %s, expected %s", op,
                    what, s, tdm_dtype_name(t->dtype), tdm_dtype_name((TdmDType)dtype));
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_optional(TdmDevice *dev, const char *op, const char *what,
                                const TdmTensor *t, int dtype, GError **error)
{
    return t == NULL || tdm_ops_check_input(dev, op, what, t, dtype, error);
}

gboolean tdm_ops_check_out(TdmDevice *dev, const char *op, const char *what, const TdmTensor *t,
                           GError **error)
{
    return check_on_device(dev, op, what, t, error);
}

gboolean tdm_ops_check_like(TdmDevice *dev, const char *op, const TdmTensor *x_like,
                            GError **error)
{
    if (!check_on_device(dev, op, "x_like", x_like, error)) {
        return FALSE;
    }
    if (x_like->dtype != TDM_DTYPE_F32) {
        g_autofree char *s = tdm_tensor_shape_string(x_like);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: x_like %s is %s, expected f32",
                    op, s, tdm_dtype_name(x_like->dtype));
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_shape(const char *op, const char *what, const TdmTensor *t, int ndim,
                             const int64_t *shape, GError **error)
{
    gboolean same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) {
        same = t->shape[i] == shape[i];
    }
    if (!same) {
        g_autofree char *got = tdm_tensor_shape_string(t);
        g_autofree char *want = tdm_ops_shape_string(ndim, shape);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "%s: %s %s, expected %s", op, what, got,
                    want);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_f32_shaped(TdmDevice *dev, const char *op, const char *what,
                                  const TdmTensor *t, int ndim, const int64_t *shape,
                                  gboolean optional, GError **error)
{
    if (t == NULL && optional) {
        return TRUE;
    }
    return tdm_ops_check_input(dev, op, what, t, TDM_DTYPE_F32, error) &&
           tdm_ops_check_shape(op, what, t, ndim, shape, error);
}

gboolean tdm_ops_check_f32_vector(TdmDevice *dev, const char *op, const char *what,
                                  const TdmTensor *t, int64_t n, gboolean optional, GError **error)
{
    if (t == NULL && optional) {
        return TRUE;
    }
    return tdm_ops_check_f32_shaped(dev, op, what, t, 1, &n, FALSE, error) &&
           tdm_ops_check_contiguous(op, what, t, error);
}

gboolean tdm_ops_check_same_shape(const char *op, const char *what_a, const TdmTensor *a,
                                  const char *what_b, const TdmTensor *b, GError **error)
{
    if (!tdm_tensor_same_shape(a, b)) {
        g_autofree char *sa = tdm_tensor_shape_string(a);
        g_autofree char *sb = tdm_tensor_shape_string(b);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "%s: %s %s and %s %s differ in shape", op,
                    what_a, sa, what_b, sb);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_same_numel(const char *op, const char *what_a, const TdmTensor *a,
                                  const char *what_b, const TdmTensor *b, GError **error)
{
    if (tdm_tensor_numel(a) != tdm_tensor_numel(b)) {
        g_autofree char *sa = tdm_tensor_shape_string(a);
        g_autofree char *sb = tdm_tensor_shape_string(b);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: %s %s and %s %s differ in number of elements", op, what_a, sa, what_b, sb);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_plain(const char *op, const char *what, const TdmTensor *t, GError **error)
{
    if (t->layout != NULL) {
        g_autofree char *s = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: %s %s is in a backend layout; the op takes it plain", op, what, s);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_ops_check_contiguous(const char *op, const char *what, const TdmTensor *t,
                                  GError **error)
{
    if (!tdm_tensor_is_contiguous(t)) {
        g_autofree char *s = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: %s %s is not plain and contiguous (%s)", op, what, s,
                    t->layout != NULL ? "a backend layout" : "a strided view");
        return FALSE;
    }
    return TRUE;
}

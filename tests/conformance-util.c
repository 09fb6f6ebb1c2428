/* SPDX-License-Identifier: MIT */
/* tests/conformance-util.c - tensors on two devices and their comparison,
 * for the backend conformance suite (see conformance-util.h). */
#include <math.h>
#include <string.h>

#include "conformance-util.h"
#include "test-util.h"

TdmDevice *conf_ref;

gboolean conf_check_ok(gboolean ok, GError *err, const char *expr)
{
    if (ok && err == NULL) {
        return TRUE;
    }
    g_test_message("%s failed: %s", expr, err ? err->message : "(returned FALSE, no error set)");
    g_clear_error(&err);
    g_test_fail();
    return FALSE;
}

float *conf_random(int64_t n, double lo, double hi)
{
    float *v = g_new(float, n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)g_test_rand_double_range(lo, hi);
    }
    return v;
}

Pair conf_pair_from(TdmDevice *dev, TdmDType dtype, int ndim, const int64_t *shape,
                    const void *host)
{
    Pair p;
    p.r = test_tensor_with(conf_ref, dtype, ndim, shape, host);
    p.t = test_tensor_with(dev, dtype, ndim, shape, host);
    return p;
}

Pair conf_pair_random(TdmDevice *dev, int ndim, const int64_t *shape, double lo, double hi)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
    }
    float *v = conf_random(n, lo, hi);
    Pair p = conf_pair_from(dev, TDM_DTYPE_F32, ndim, shape, v);
    g_free(v);
    return p;
}

Pair conf_pair_empty(TdmDevice *dev, TdmDType dtype)
{
    Pair p;
    p.r = tdm_tensor_new_empty(conf_ref, dtype);
    p.t = tdm_tensor_new_empty(dev, dtype);
    return p;
}

void conf_pair_clear(Pair *p)
{
    g_clear_pointer(&p->r, tdm_tensor_unref);
    g_clear_pointer(&p->t, tdm_tensor_unref);
}

/* A 1x1 convolution is an op every backend has, and its output is in the
 * layout the backend keeps between layers. */
gboolean conf_pair_produced(TdmDevice *dev, const int64_t *s, double bias_lo, double bias_hi,
                            Pair *out)
{
    const int64_t ws[4] = {s[1], s[1], 1, 1};
    const TdmConv2dParams one = {1, 1, 0, 0, 1, 1, 1};
    Pair x0 = conf_pair_random(dev, 4, s, -1, 1), w = conf_pair_random(dev, 4, ws, -0.5, 0.5);
    Pair b = {NULL, NULL};
    gboolean ok = FALSE;
    if (bias_hi > bias_lo) {
        b = conf_pair_random(dev, 1, &s[1], bias_lo, bias_hi);
    }
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
#define T_(p) (side == 0 ? (p).r : (p).t)
        TRY(dv->backend->conv2d_forward(dv, NULL, &one, T_(x0), T_(w), T_(b), T_(*out), &err));
#undef T_
    }
    ok = TRUE;
out:
    conf_pair_clear(&x0);
    conf_pair_clear(&w);
    conf_pair_clear(&b);
    return ok;
}

float *conf_read_values(TdmTensor *t)
{
    int64_t n = tdm_tensor_numel(t);
    size_t es = tdm_dtype_size(t->dtype);
    guint8 *raw = g_malloc((size_t)(n > 0 ? n : 1) * es);
    GError *err = NULL;
    if (!conf_check_ok(tdm_tensor_read(t, raw, &err), err, "tdm_tensor_read")) {
        g_free(raw);
        return NULL;
    }
    float *v = g_new(float, n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case TDM_DTYPE_F32:
            v[i] = ((float *)raw)[i];
            break;
        case TDM_DTYPE_I32:
            v[i] = (float)((gint32 *)raw)[i];
            break;
        case TDM_DTYPE_I64:
            v[i] = (float)((gint64 *)raw)[i];
            break;
        case TDM_DTYPE_U8:
            v[i] = raw[i];
            break;
        case TDM_DTYPE_BF16:
        case TDM_DTYPE_F16:
            /* Compared as raw bit patterns: a conversion must round the same. */
            v[i] = (float)((guint16 *)raw)[i];
            break;
        }
    }
    g_free(raw);
    return v;
}

gboolean conf_compare_values(const char *what, const float *ref, const float *got, int64_t n,
                             double tol)
{
    double num = 0.0, den = 0.0, worst = -1.0;
    int64_t worst_i = 0, mismatched_nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(ref[i]) || isnan(got[i])) {
            mismatched_nan += isnan(ref[i]) != isnan(got[i]);
            continue;
        }
        double d = (double)got[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > worst) {
            worst = fabs(d);
            worst_i = i;
        }
    }
    double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    if (mismatched_nan > 0 || rel > tol || isnan(rel)) {
        g_test_message("%s: relative error %.3g > tolerance %.3g; %" G_GINT64_FORMAT
                       " NaN mismatches; worst element %" G_GINT64_FORMAT ": ref %.9g, got %.9g",
                       what, rel, tol, mismatched_nan, worst_i, n ? ref[worst_i] : 0.0,
                       n ? got[worst_i] : 0.0);
        g_test_fail();
        return FALSE;
    }
    return TRUE;
}

static gboolean conf_same_shape(const char *what, const TdmTensor *a, const TdmTensor *b)
{
    gboolean same = a->ndim == b->ndim && a->dtype == b->dtype;
    for (int i = 0; same && i < a->ndim; i++) {
        same = a->shape[i] == b->shape[i];
    }
    if (!same) {
        g_autofree char *sa = tdm_tensor_shape_string(a);
        g_autofree char *sb = tdm_tensor_shape_string(b);
        g_test_message("%s: ref gives %s %s, tested backend %s %s", what, tdm_dtype_name(a->dtype),
                       sa, tdm_dtype_name(b->dtype), sb);
        g_test_fail();
    }
    return same;
}

gboolean conf_compare(const char *what, const Pair *p, double tol)
{
    if (!conf_same_shape(what, p->r, p->t)) {
        return FALSE;
    }
    float *r = conf_read_values(p->r);
    float *t = conf_read_values(p->t);
    gboolean ok =
        r != NULL && t != NULL && conf_compare_values(what, r, t, tdm_tensor_numel(p->r), tol);
    g_free(r);
    g_free(t);
    return ok;
}

gboolean conf_compare_host(const char *what, TdmTensor *t, const float *expect, double tol)
{
    float *v = conf_read_values(t);
    gboolean ok = v != NULL && conf_compare_values(what, expect, v, tdm_tensor_numel(t), tol);
    g_free(v);
    return ok;
}

gboolean conf_relu_ambiguous(const Pair *p, double margin)
{
    float *r = conf_read_values(p->r);
    float *t = conf_read_values(p->t);
    int64_t n = tdm_tensor_numel(p->r), near = 0;
    gboolean other = FALSE;
    for (int64_t i = 0; r != NULL && t != NULL && i < n; i++) {
        if ((r[i] > 0) != (t[i] > 0)) {
            if (fabs(r[i]) < margin && fabs(t[i]) < margin) {
                near++;
            } else {
                other = TRUE; /* a real difference: the comparison reports it */
            }
        }
    }
    g_free(r);
    g_free(t);
    if (near > 0 && !other) {
        g_test_message("%" G_GINT64_FORMAT " ReLU input(s) within %g of 0 decide the mask by "
                       "rounding: inputs drawn again", near, margin);
        return TRUE;
    }
    return FALSE;
}

void conf_redrawing(gboolean (*once)(gconstpointer data, gboolean last), gconstpointer data)
{
    for (int i = 0; i < CONF_DRAWS; i++) {
        if (once(data, i == CONF_DRAWS - 1)) {
            return;
        }
    }
}

void conf_add(const char *group, const char *name, const char *suffix, TdmDevice *dev,
              gconstpointer tcase, GTestDataFunc fn)
{
    g_autofree char *path = g_strdup_printf("/conformance/%s/%s%s", group, name, suffix);
    ConfData *d = g_new0(ConfData, 1);
    d->dev = dev;
    d->tcase = tcase;
    g_test_add_data_func_full(path, d, fn, g_free);
}

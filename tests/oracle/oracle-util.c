/* SPDX-License-Identifier: MIT */
/* tests/oracle/oracle-util.c - what the oracle programs (test-oracle,
 * test-torchvision) share: TAP output, and "stages", sets of tensors
 * compared with PyTorch's by relative error ||ours - torch|| / ||torch||,
 * reported as one TAP line with the worst tensors as diagnostics.
 */
#include <tandem/tandem.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "oracle-util.h"

#define WORST_SHOWN 3

static int tap_count;
static int tap_failure_count;

int tap_failures(void)
{
    return tap_failure_count;
}

void tap_result(gboolean ok, const char *name, const char *diag)
{
    tap_count++;
    if (!ok) {
        tap_failure_count++;
    }
    printf("%s %d - %s\n", ok ? "ok" : "not ok", tap_count, name);
    if (diag != NULL && *diag != '\0') {
        gchar **lines = g_strsplit(diag, "\n", -1);
        for (int i = 0; lines[i] != NULL; i++) {
            if (*lines[i] != '\0') {
                printf("# %s\n", lines[i]);
            }
        }
        g_strfreev(lines);
    }
    fflush(stdout);
}

void tap_skip(const char *name, const char *why)
{
    tap_count++;
    printf("ok %d - %s # SKIP %s\n", tap_count, name, why);
}

/* One compared tensor, for sorting the worst ones. */
typedef struct {
    char *name;
    double rel;
} Comparison;

static gint comparison_worst_first(gconstpointer a, gconstpointer b)
{
    const Comparison *x = *(const Comparison *const *)a;
    const Comparison *y = *(const Comparison *const *)b;
    /* NaN sorts first: it is the worst possible result. */
    if (isnan(x->rel) || x->rel > y->rel) {
        return -1;
    }
    return (isnan(y->rel) || x->rel < y->rel) ? 1 : 0;
}

static void comparison_free(gpointer p)
{
    Comparison *c = p;
    g_free(c->name);
    g_free(c);
}

/* ||ours - ref|| / ||ref|| (the absolute norm when ref is all zeros). */
static double relative_error(const float *ours, const float *ref, size_t n)
{
    double diff = 0.0;
    double norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)ours[i] - (double)ref[i];
        diff += d * d;
        norm += (double)ref[i] * (double)ref[i];
    }
    if (norm == 0.0) {
        return sqrt(diff);
    }
    return sqrt(diff / norm);
}

void stage_init(Stage *s, double tolerance)
{
    s->cmp = g_ptr_array_new_with_free_func(comparison_free);
    s->problems = g_string_new(NULL);
    s->tolerance = tolerance;
}

void stage_finish(Stage *s, const char *label)
{
    GString *diag = g_string_new(s->problems->str);
    gboolean ok = s->problems->len == 0 && s->cmp->len > 0;
    guint bad = 0;

    if (s->cmp->len == 0 && s->problems->len == 0) {
        g_string_append(diag, "no tensor compared\n");
    }
    g_ptr_array_sort(s->cmp, comparison_worst_first);
    for (guint i = 0; i < s->cmp->len; i++) {
        const Comparison *c = g_ptr_array_index(s->cmp, i);
        gboolean good = c->rel < s->tolerance; /* FALSE for NaN */
        if (!good) {
            ok = FALSE;
            bad++;
        }
        if (!good || i < WORST_SHOWN) {
            g_string_append_printf(diag, "%s %-40s rel %.3e%s\n", good ? "  " : "!!", c->name,
                                   c->rel, good ? "" : " (over tolerance)");
        }
    }
    double worst = 0.0;
    if (s->cmp->len > 0) {
        worst = ((const Comparison *)g_ptr_array_index(s->cmp, 0))->rel;
    }
    char *name = g_strdup_printf("%s: %u tensors, rel error < %.0e (worst %.2e)%s", label,
                                 s->cmp->len, s->tolerance, worst, bad ? " (some over)" : "");
    tap_result(ok, name, diag->str);
    g_free(name);
    g_string_free(diag, TRUE);
    g_ptr_array_unref(s->cmp);
    g_string_free(s->problems, TRUE);
}

void stage_add(Stage *s, const char *name, const float *ours, const float *ref, size_t n)
{
    Comparison *c = g_new0(Comparison, 1);
    c->name = g_strdup(name);
    c->rel = relative_error(ours, ref, n);
    g_ptr_array_add(s->cmp, c);
}

/* Compare device tensor `t` with the f32 reference `key` of `expected`;
 * with `origin` (the initial value, same size) compare t - origin with
 * ref - origin instead. */
void stage_compare_from(Stage *s, const TdmSafeTensors *expected, const char *key, TdmTensor *t,
                        const TdmSafeTensor *origin)
{
    const TdmSafeTensor *ref = tdm_safetensors_get(expected, key);
    GError *error = NULL;

    if (ref == NULL) {
        g_string_append_printf(s->problems, "reference tensor %s is missing\n", key);
        return;
    }
    if (origin != NULL && (origin->dtype != TDM_DTYPE_F32 || origin->nbytes != ref->nbytes)) {
        g_string_append_printf(s->problems,
                               "initial value of %s has %zu bytes of %s, "
                               "expected %zu of f32\n",
                               key, origin->nbytes, tdm_dtype_name(origin->dtype), ref->nbytes);
        return;
    }
    if (t == NULL) {
        g_string_append_printf(s->problems, "%s: Tandem has no such tensor\n", key);
        return;
    }
    int64_t numel = tdm_tensor_numel(t);
    if (ref->dtype != TDM_DTYPE_F32 || (size_t)numel * sizeof(float) != ref->nbytes) {
        char *shape = tdm_tensor_shape_string(t);
        g_string_append_printf(s->problems,
                               "%s: Tandem's shape %s holds %" G_GINT64_FORMAT
                               " floats, reference has %zu bytes of %s\n",
                               key, shape, numel, ref->nbytes, tdm_dtype_name(ref->dtype));
        g_free(shape);
        return;
    }
    float *ours = g_new(float, numel > 0 ? numel : 1);
    if (!tdm_tensor_read(t, ours, &error)) {
        g_string_append_printf(s->problems, "%s: read failed: %s\n", key, error->message);
        g_clear_error(&error);
        g_free(ours);
        return;
    }
    if (origin == NULL) {
        stage_add(s, key, ours, ref->data, (size_t)numel);
    } else {
        Comparison *c = g_new0(Comparison, 1);
        const float *p0 = origin->data;
        float *want = g_new(float, numel > 0 ? numel : 1);
        for (int64_t i = 0; i < numel; i++) {
            ours[i] -= p0[i];
            want[i] = ((const float *)ref->data)[i] - p0[i];
        }
        c->name = g_strdup_printf("%s - init", key);
        c->rel = relative_error(ours, want, (size_t)numel);
        g_free(want);
        g_ptr_array_add(s->cmp, c);
    }
    g_free(ours);
}

void stage_compare(Stage *s, const TdmSafeTensors *expected, const char *key, TdmTensor *t)
{
    stage_compare_from(s, expected, key, t, NULL);
}

/* Device tensor holding a host safetensors entry (transfer full). */
TdmTensor *upload(TdmDevice *dev, const TdmSafeTensors *st, const char *key, GError **error)
{
    const TdmSafeTensor *src = tdm_safetensors_get(st, key);
    if (src == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND, "reference data has no tensor %s", key);
        return NULL;
    }
    TdmTensor *t = tdm_tensor_new(dev, src->dtype, src->ndim, src->shape, error);
    if (t == NULL) {
        return NULL;
    }
    if (!tdm_tensor_write(t, src->data, error)) {
        tdm_tensor_unref(t);
        return NULL;
    }
    return t;
}

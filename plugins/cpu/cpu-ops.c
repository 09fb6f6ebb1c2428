/* plugins/cpu/cpu-ops.c - the cpu backend's own loops for the loss and
 * dropout, and the conversion of privately laid out inputs to plain.
 *
 * Softmax cross-entropy works on plain [N, K] logits (a classifier's output
 * is plain); dropout draws its mask from (seed, element index) with the same
 * SplitMix64 rule as the ref backend, so both give the same mask bit for bit.
 * An input that arrives in a private layout is reordered to plain into a
 * cached buffer first (cpu_plain_input). Large loops use the OpenMP pool
 * oneDNN uses (never a second pool).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu.h"

gboolean cpu_plain_input(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind, TdmTensor *t,
                         const float **out, CpuEntry **entry, GError **error)
{
    *entry = NULL;
    if (t->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "cpu backend: input has no storage");
        return FALSE;
    }
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

/* ---- softmax cross-entropy ---- */

static int64_t label_at(const TdmTensor *labels, const void *data, int64_t i)
{
    int64_t s = labels->stride[0];
    return labels->dtype == TDM_DTYPE_I64 ? ((const int64_t *)data)[i * s]
                                          : ((const int32_t *)data)[i * s];
}

gboolean cpu_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                          TdmTensor *labels, float label_smoothing, float *loss,
                          TdmTensor *dlogits, int64_t *correct, GError **error)
{
    if (logits->ndim != 2 || logits->dtype != TDM_DTYPE_F32 || labels->ndim != 1 ||
        labels->shape[0] != logits->shape[0] || labels->layout != NULL ||
        (labels->dtype != TDM_DTYPE_I32 && labels->dtype != TDM_DTYPE_I64)) {
        g_autofree char *a = tdm_tensor_shape_string(logits);
        g_autofree char *b = tdm_tensor_shape_string(labels);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu softmax_xent: logits %s (f32 [N, K]) and labels %s (i32/i64 [N]) do not match",
                    a, b);
        return FALSE;
    }
    int64_t n = logits->shape[0], k = logits->shape[1];
    const void *lab = tdm_tensor_data(labels);
    for (int64_t i = 0; i < n; i++) {
        int64_t y = label_at(labels, lab, i);
        if (y < 0 || y >= k) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "cpu softmax_xent: label %" G_GINT64_FORMAT " of row %" G_GINT64_FORMAT
                        " is outside [0, %" G_GINT64_FORMAT ")",
                        y, i, k);
            return FALSE;
        }
    }
    const float *x;
    CpuEntry *e = NULL;
    if (!cpu_plain_input(dev, cache, CPU_OP_XENT, logits, &x, &e, error)) {
        return FALSE;
    }
    float *dx = NULL;
    if (dlogits != NULL) {
        if (!tdm_tensor_ensure(dlogits, TDM_DTYPE_F32, 2, logits->shape, NULL, 0, error)) {
            cpu_entry_release(cache, e);
            return FALSE;
        }
        dx = tdm_tensor_data(dlogits);
    }
    /* the gradient row holds exp(x - max) between the passes, unless it
     * is the logits row itself */
    const gboolean cache_exp = dx != NULL && dx != x;
    const float eps = label_smoothing, inv_n = n > 0 ? 1.0f / (float)n : 0.0f;
    const float off = eps / (float)k;
    double total = 0;
    int64_t hits = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, hits) if (n * k > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * k;
        int64_t y = label_at(labels, lab, i), arg = 0;
        float mx = row[0];
        for (int64_t j = 1; j < k; j++) {
            if (row[j] > mx) {
                mx = row[j];
                arg = j;
            }
        }
        float se = 0, sum = 0;
        if (cache_exp) { /* keep exp(x - max) in the gradient row: one expf each */
            float *drow = dx + i * k;
#pragma omp simd reduction(+ : se, sum)
            for (int64_t j = 0; j < k; j++) {
                float ej = expf(row[j] - mx);
                sum += row[j];
                se += ej;
                drow[j] = ej;
            }
        } else {
#pragma omp simd reduction(+ : se, sum)
            for (int64_t j = 0; j < k; j++) {
                se += expf(row[j] - mx);
                sum += row[j];
            }
        }
        float lse = mx + logf(se);
        /* -log p_y and the mean of -log p_j over classes */
        float nll = lse - row[y];
        float smooth = lse - sum / (float)k;
        total += (double)((1.0f - eps) * nll + eps * smooth);
        hits += arg == y;
        if (dx != NULL) {
            float *drow = dx + i * k;
            float inv_se = 1.0f / se;
#pragma omp simd
            for (int64_t j = 0; j < k; j++) {
                float ej = cache_exp ? drow[j] : expf(row[j] - mx);
                drow[j] = (ej * inv_se - off) * inv_n;
            }
            drow[y] -= (1.0f - eps) * inv_n;
        }
    }
    if (loss != NULL) {
        *loss = n > 0 ? (float)(total / (double)n) : 0.0f;
    }
    if (correct != NULL) {
        *correct = hits;
    }
    cpu_entry_release(cache, e);
    return TRUE;
}

/* ---- dropout ---- */

/* A uniform draw in [0, 1) from (seed, element index) alone (SplitMix64). */
static inline float dropout_uniform(guint64 seed, guint64 i)
{
    guint64 z = seed + (i + 1) * G_GUINT64_CONSTANT(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

gboolean cpu_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                             TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error)
{
    if (x->dtype != TDM_DTYPE_F32 || p < 0.0f || p > 1.0f) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu dropout: needs f32 input and 0 <= p <= 1 (p = %g)", p);
        return FALSE;
    }
    const float *xp;
    CpuEntry *e = NULL;
    int64_t shape[TDM_MAX_DIMS];
    int ndim = x->ndim;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)ndim);
    if (!cpu_plain_input(dev, cache, CPU_OP_DROPOUT_FWD, x, &xp, &e, error)) {
        return FALSE;
    }
    gboolean ok = tdm_tensor_ensure(mask, TDM_DTYPE_U8, ndim, shape, NULL, 0, error) &&
                  tdm_tensor_ensure(y, TDM_DTYPE_F32, ndim, shape, NULL, 0, error);
    if (ok) {
        if (e == NULL) {
            xp = tdm_tensor_data(x); /* y may be x: ensure kept its storage */
        }
        guint8 *m = tdm_tensor_data(mask);
        float *yp = tdm_tensor_data(y);
        int64_t n = tdm_tensor_numel(x);
        float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            guint8 keep = dropout_uniform(seed, (guint64)i) >= p;
            m[i] = keep;
            yp[i] = keep ? xp[i] * scale : 0.0f;
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                              TdmTensor *dy, TdmTensor *dx, GError **error)
{
    if (mask->dtype != TDM_DTYPE_U8 || tdm_tensor_numel(mask) != tdm_tensor_numel(dy) ||
        !tdm_tensor_is_contiguous(mask) || dy->dtype != TDM_DTYPE_F32) {
        g_autofree char *a = tdm_tensor_shape_string(mask);
        g_autofree char *b = tdm_tensor_shape_string(dy);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu dropout backward: mask %s (u8) does not match gradient %s", a, b);
        return FALSE;
    }
    const float *g;
    CpuEntry *e = NULL;
    int64_t shape[TDM_MAX_DIMS];
    int ndim = dy->ndim;
    memcpy(shape, dy->shape, sizeof(int64_t) * (size_t)ndim);
    if (!cpu_plain_input(dev, cache, CPU_OP_DROPOUT_BWD, dy, &g, &e, error)) {
        return FALSE;
    }
    gboolean ok = tdm_tensor_ensure(dx, TDM_DTYPE_F32, ndim, shape, NULL, 0, error);
    if (ok) {
        if (e == NULL) {
            g = tdm_tensor_data(dy);
        }
        const guint8 *m = tdm_tensor_data(mask);
        float *d = tdm_tensor_data(dx);
        int64_t n = tdm_tensor_numel(dy);
        float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            d[i] = m[i] ? g[i] * scale : 0.0f;
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

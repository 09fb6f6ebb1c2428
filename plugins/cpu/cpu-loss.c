/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-loss.c - softmax cross-entropy, the loss, on the cpu
 * backend's own loop.
 *
 * The logits are a classifier's plain [N, K] output (one arriving in a
 * private layout is made plain first, cpu_plain_input). One pass per row,
 * rows split over the OpenMP pool oneDNN uses: the row's maximum (also the
 * prediction counted in `correct`), exp(x - max) kept in the gradient row
 * so that each is computed once, the loss with label smoothing, and the
 * gradient (softmax - smoothed one-hot) / N.
 */
#include "config.h"

#include <math.h>

#include "cpu.h"

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
    /* labels are read through their stride, so in the plain layout (the
     * front end has checked dtypes and shapes) */
    if (labels->layout != NULL) {
        return cpu_refuse("softmax_xent", "labels", labels, "must be plain", error);
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

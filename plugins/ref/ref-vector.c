/* SPDX-License-Identifier: MIT */
/* plugins/ref/ref-vector.c - the reference loss, dropout, vector ops, cast
 * and optimizer updates.
 *
 * These are the ops that touch whole tensors as flat vectors (or a logits
 * matrix). The loss and the sum of squares accumulate in double; the
 * optimizer updates follow PyTorch's torch.optim.SGD and torch.optim.AdamW
 * formulas term by term so that a step can be checked by hand. The dropout
 * mask is a pure function of (seed, element index): SplitMix64's output
 * number index+1 for that seed, whose top 24 bits make a uniform number in
 * [0, 1); an element is kept when that number is >= p. Any backend that makes
 * the same decision produces the same mask bit for bit.
 */
#include <math.h>
#include <string.h>

#include "ref.h"

/* ---- loss ---- */

static int64_t ref_label_at(const TdmTensor *labels, int64_t i)
{
    if (labels->dtype == TDM_DTYPE_I32) {
        return ((const gint32 *)tdm_tensor_data(labels))[i];
    }
    return ((const gint64 *)tdm_tensor_data(labels))[i];
}

gboolean ref_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits, TdmTensor *labels,
                          float label_smoothing, float *loss, TdmTensor *dlogits, int64_t *correct,
                          GError **error)
{
    const char *op = "softmax_xent";
    if (!ref_check_plain(op, "logits", logits, error) ||
        !ref_check_plain(op, "labels", labels, error)) {
        return FALSE;
    }
    int64_t N = logits->shape[0], K = logits->shape[1];
    /* The values of the labels: only the backend reads them. */
    for (int64_t i = 0; i < N; i++) {
        int64_t y = ref_label_at(labels, i);
        if (y < 0 || y >= K) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "ref %s: label %" G_GINT64_FORMAT " of row %" G_GINT64_FORMAT
                        " is outside [0, %" G_GINT64_FORMAT ")",
                        op, y, i, K);
            return FALSE;
        }
    }
    if (dlogits != NULL && !ref_ensure_out(dlogits, TDM_DTYPE_F32, 2, logits->shape, error)) {
        return FALSE;
    }
    /* PyTorch's smoothing: the target is (1 - eps) on the label plus eps / K
     * on every class, so the loss is (1 - eps) * nll + eps * mean_k(-log p_k). */
    const double eps = label_smoothing;
    const float *X = ref_f32(logits);
    double total = 0.0;
    int64_t hits = 0;
    for (int64_t i = 0; i < N; i++) {
        const float *row = X + i * K;
        int64_t y = ref_label_at(labels, i);
        int64_t arg = 0;
        for (int64_t k = 1; k < K; k++) {
            if (row[k] > row[arg]) {
                arg = k;
            }
        }
        hits += arg == y;
        double mx = row[arg], sum = 0.0, sum_logp = 0.0;
        for (int64_t k = 0; k < K; k++) {
            sum += exp((double)row[k] - mx);
        }
        double lse = mx + log(sum);
        for (int64_t k = 0; k < K; k++) {
            sum_logp += (double)row[k] - lse;
        }
        double logp_y = (double)row[y] - lse;
        total += -(1.0 - eps) * logp_y - eps / (double)K * sum_logp;
        if (dlogits != NULL) {
            float *drow = ref_f32(dlogits) + i * K;
            for (int64_t k = 0; k < K; k++) {
                double target = eps / (double)K + (k == y ? 1.0 - eps : 0.0);
                drow[k] = (float)((exp((double)row[k] - lse) - target) / (double)N);
            }
        }
    }
    if (loss != NULL) {
        *loss = (float)(total / (double)N);
    }
    if (correct != NULL) {
        *correct = hits;
    }
    return TRUE;
}

gboolean ref_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                TdmTensor *stats, GError **error)
{
    if (!ref_check_plain("softmax_xent_stats", "stats", stats, error)) {
        return FALSE;
    }
    /* The same loss as softmax_xent by construction: its mean times the
     * rows is the sum (exact to float rounding, as stats is f32). */
    float mean = 0.0f;
    int64_t hits = 0;
    if (!ref_softmax_xent(dev, cache, logits, labels, label_smoothing, &mean, dlogits, &hits,
                          error)) {
        return FALSE;
    }
    float *acc = ref_f32(stats);
    acc[TDM_XENT_STATS_LOSS_SUM] += (float)((double)mean * (double)logits->shape[0]);
    acc[TDM_XENT_STATS_CORRECT] += (float)hits;
    return TRUE;
}

/* ---- dropout ---- */

static guint64 ref_splitmix64_mix(guint64 z)
{
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

gboolean ref_dropout_keep(guint64 seed, guint64 index, float p)
{
    guint64 h = ref_splitmix64_mix(seed + (index + 1) * G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    return u >= p;
}

gboolean ref_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                             TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error)
{
    if (!ref_check_plain("dropout_forward", "x", x, error) ||
        !ref_ensure_out(mask, TDM_DTYPE_U8, x->ndim, x->shape, error) ||
        !ref_ensure_out(y, TDM_DTYPE_F32, x->ndim, x->shape, error)) {
        return FALSE;
    }
    /* p == 1 drops everything; the scale is then never used. */
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    const float *X = ref_f32(x);
    guint8 *M = tdm_tensor_data(mask);
    float *Y = ref_f32(y);
    int64_t n = tdm_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        M[i] = ref_dropout_keep(seed, (guint64)i, p) ? 1 : 0;
        Y[i] = M[i] ? X[i] * scale : 0.0f;
    }
    return TRUE;
}

gboolean ref_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                              TdmTensor *dy, TdmTensor *dx, GError **error)
{
    const char *op = "dropout_backward";
    if (!ref_check_plain(op, "mask", mask, error) || !ref_check_plain(op, "dy", dy, error) ||
        !ref_ensure_out(dx, TDM_DTYPE_F32, dy->ndim, dy->shape, error)) {
        return FALSE;
    }
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    const guint8 *M = tdm_tensor_data(mask);
    const float *DY = ref_f32(dy);
    float *DX = ref_f32(dx);
    int64_t n = tdm_tensor_numel(dy);
    for (int64_t i = 0; i < n; i++) {
        DX[i] = M[i] ? DY[i] * scale : 0.0f;
    }
    return TRUE;
}

/* ---- vector ops: the front ends pass only plain contiguous tensors of
 * the right dtypes and lengths ---- */

gboolean ref_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error)
{
    float *X = ref_f32(x);
    int64_t n = tdm_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        X[i] = value;
    }
    return TRUE;
}

gboolean ref_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error)
{
    memmove(tdm_tensor_data(dst), tdm_tensor_data(src),
            (size_t)tdm_tensor_numel(src) * tdm_dtype_size(src->dtype));
    return TRUE;
}

gboolean ref_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error)
{
    float *X = ref_f32(x);
    int64_t n = tdm_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        X[i] *= alpha;
    }
    return TRUE;
}

gboolean ref_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    const float *X = ref_f32(x);
    float *Y = ref_f32(y);
    int64_t n = tdm_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        Y[i] = (float)((double)Y[i] + (double)alpha * X[i]);
    }
    return TRUE;
}

gboolean ref_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    const float *X = ref_f32(x);
    int64_t n = tdm_tensor_numel(x);
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        acc += (double)X[i] * X[i];
    }
    if (result != NULL) {
        *result = acc;
    }
    return TRUE;
}

/* ---- cast ---- */

static float ref_f16_to_f32(guint16 h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0) {
        v = ldexpf((float)mant, -24);
    } else if (exp == 31) {
        v = mant ? NAN : INFINITY;
    } else {
        v = ldexpf((float)(mant + 1024), exp - 25);
    }
    return (h & 0x8000) ? -v : v;
}

/* Round to nearest even, as every IEEE conversion does. */
static guint16 ref_f32_to_f16(float f)
{
    guint32 x;
    memcpy(&x, &f, sizeof(x));
    guint16 sign = (guint16)((x >> 16) & 0x8000);
    guint32 ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) { /* inf, nan */
        return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
    }
    if (ax >= 0x477ff000) { /* >= 65520 rounds to infinity */
        return sign | 0x7c00;
    }
    if (ax < 0x38800000) { /* below 2^-14: a subnormal half, in units of 2^-24 */
        float a;
        memcpy(&a, &ax, sizeof(a));
        return sign | (guint16)nearbyintf(a * 16777216.0f);
    }
    guint32 h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffff) >> 13));
    guint32 rest = ax & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) {
        h++; /* a carry into the exponent is the right result */
    }
    return sign | (guint16)h;
}

static float ref_bf16_to_f32(guint16 b)
{
    guint32 x = (guint32)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static guint16 ref_f32_to_bf16(float f)
{
    guint32 x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffff) > 0x7f800000) {
        return (guint16)((x >> 16) | 0x40); /* keep NaN a quiet NaN */
    }
    return (guint16)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static gboolean ref_dtype_is_int(TdmDType t)
{
    return t == TDM_DTYPE_I32 || t == TDM_DTYPE_I64 || t == TDM_DTYPE_U8;
}

static double ref_load(const void *base, TdmDType t, int64_t i)
{
    switch (t) {
    case TDM_DTYPE_F32:
        return ((const float *)base)[i];
    case TDM_DTYPE_I32:
        return ((const gint32 *)base)[i];
    case TDM_DTYPE_I64:
        return (double)((const gint64 *)base)[i];
    case TDM_DTYPE_U8:
        return ((const guint8 *)base)[i];
    case TDM_DTYPE_BF16:
        return ref_bf16_to_f32(((const guint16 *)base)[i]);
    case TDM_DTYPE_F16:
        return ref_f16_to_f32(((const guint16 *)base)[i]);
    }
    return 0.0;
}

static gint64 ref_load_int(const void *base, TdmDType t, int64_t i)
{
    switch (t) {
    case TDM_DTYPE_I32:
        return ((const gint32 *)base)[i];
    case TDM_DTYPE_I64:
        return ((const gint64 *)base)[i];
    default:
        return ((const guint8 *)base)[i];
    }
}

/* Float to integer: truncation toward zero (as C and PyTorch), saturated to
 * the target's range so that out-of-range values stay defined; NaN gives 0. */
static gint64 ref_to_int(double v, double lo, double hi)
{
    if (isnan(v)) {
        return 0;
    }
    v = trunc(v);
    return (gint64)(v < lo ? lo : v > hi ? hi : v);
}

static void ref_store(void *base, TdmDType t, int64_t i, double v)
{
    switch (t) {
    case TDM_DTYPE_F32:
        ((float *)base)[i] = (float)v;
        break;
    case TDM_DTYPE_I32:
        ((gint32 *)base)[i] = (gint32)ref_to_int(v, G_MININT32, G_MAXINT32);
        break;
    case TDM_DTYPE_I64:
        ((gint64 *)base)[i] = ref_to_int(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    case TDM_DTYPE_U8:
        ((guint8 *)base)[i] = (guint8)ref_to_int(v, 0, 255);
        break;
    case TDM_DTYPE_BF16:
        ((guint16 *)base)[i] = ref_f32_to_bf16((float)v);
        break;
    case TDM_DTYPE_F16:
        ((guint16 *)base)[i] = ref_f32_to_f16((float)v);
        break;
    }
}

static void ref_store_int(void *base, TdmDType t, int64_t i, gint64 v)
{
    switch (t) {
    case TDM_DTYPE_I32:
        ((gint32 *)base)[i] = (gint32)CLAMP(v, G_MININT32, G_MAXINT32);
        break;
    case TDM_DTYPE_I64:
        ((gint64 *)base)[i] = v;
        break;
    default:
        ((guint8 *)base)[i] = (guint8)CLAMP(v, 0, 255);
        break;
    }
}

gboolean ref_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                  GError **error)
{
    /* An empty slot is shaped like src, in its own dtype. */
    if (dst->storage == NULL && !ref_ensure_out(dst, dst->dtype, src->ndim, src->shape, error)) {
        return FALSE;
    }
    const void *s = tdm_tensor_data(src);
    void *d = tdm_tensor_data(dst);
    int64_t n = tdm_tensor_numel(src);
    gboolean norm = normalize_u8 && src->dtype == TDM_DTYPE_U8 && !ref_dtype_is_int(dst->dtype);
    gboolean ints = ref_dtype_is_int(src->dtype) && ref_dtype_is_int(dst->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (ints) {
            ref_store_int(d, dst->dtype, i, ref_load_int(s, src->dtype, i));
        } else {
            double v = ref_load(s, src->dtype, i);
            ref_store(d, dst->dtype, i, norm ? v / 255.0 : v);
        }
    }
    return TRUE;
}

/* ---- optimizer updates (arguments checked by the front ends) ---- */

gboolean ref_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param, TdmTensor *grad,
                        TdmTensor *momentum_buf, GError **error)
{
    gboolean use_buf = hp->momentum != 0.0f;
    float *P = ref_f32(param);
    const float *G = ref_f32(grad);
    float *BUF = use_buf ? ref_f32(momentum_buf) : NULL;
    int64_t n = tdm_tensor_numel(param);
    for (int64_t i = 0; i < n; i++) {
        double g = (double)G[i] + (double)hp->weight_decay * P[i];
        double d = g;
        if (use_buf) {
            double buf = hp->first_step
                             ? g
                             : (double)hp->momentum * BUF[i] + (1.0 - (double)hp->dampening) * g;
            BUF[i] = (float)buf;
            d = hp->nesterov ? g + (double)hp->momentum * buf : buf;
        }
        P[i] = (float)((double)P[i] - (double)hp->lr * d);
    }
    return TRUE;
}

gboolean ref_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          GError **error)
{
    const double b1 = hp->beta1, b2 = hp->beta2;
    const double bc1 = 1.0 - pow(b1, (double)hp->step);
    const double bc2 = 1.0 - pow(b2, (double)hp->step);
    const double step_size = (double)hp->lr / bc1;
    const double decay = 1.0 - (double)hp->lr * hp->weight_decay;
    float *P = ref_f32(param), *M = ref_f32(exp_avg), *V = ref_f32(exp_avg_sq);
    const float *G = ref_f32(grad);
    int64_t n = tdm_tensor_numel(param);
    for (int64_t i = 0; i < n; i++) {
        double g = G[i];
        double m = b1 * M[i] + (1.0 - b1) * g;
        double v = b2 * V[i] + (1.0 - b2) * g * g;
        double denom = sqrt(v) / sqrt(bc2) + (double)hp->eps;
        M[i] = (float)m;
        V[i] = (float)v;
        P[i] = (float)((double)P[i] * decay - step_size * m / denom);
    }
    return TRUE;
}

/* The fused update-and-zero ops, as their definition: update, then zero. */
gboolean ref_sgd_update_zero_grad(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                                  TdmTensor *grad, TdmTensor *momentum_buf, GError **error)
{
    return ref_sgd_update(dev, hp, param, grad, momentum_buf, error) &&
           ref_fill(dev, grad, 0.0f, error);
}

gboolean ref_adamw_update_zero_grad(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                                    TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                                    GError **error)
{
    return ref_adamw_update(dev, hp, param, grad, exp_avg, exp_avg_sq, error) &&
           ref_fill(dev, grad, 0.0f, error);
}

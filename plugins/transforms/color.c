/* SPDX-License-Identifier: MIT */
/* plugins/transforms/color.c - color-jitter, normalize and to-tensor.
 *
 * color-jitter is torchvision's ColorJitter on PIL images (hue left out):
 * each factor is drawn uniformly from [max(0, 1 - v), 1 + v] (or from a
 * given MIN,MAX; MIN=MAX pins it), and the adjustments run in a random
 * order, as torchvision's randperm does, drawn from the sample's stream:
 * first the order (a shuffle of brightness, contrast, saturation), then
 * the three factors in that fixed order. Each adjustment blends the image
 * with a degenerate one and clamps to the valid range, as PIL's
 * ImageEnhance does: black for brightness, the mean grey level for contrast,
 * the pixel's own grey level for saturation (grey = 0.299 R + 0.587 G +
 * 0.114 B, PIL's fixed-point weights). On the 0..255 scale the grey levels are rounded to integers
 * like PIL's convert("L") and its contrast mean; PIL truncates each blended
 * value, Tandem keeps the float (under one grey level apart). Saturation of
 * a 1-channel image changes nothing, as in torchvision.
 *
 * normalize maps x to (x / 255 - mean) / std per channel (torchvision's
 * ToTensor + Normalize). mean and std are required unless the pipeline's
 * user supplies the dataset's constants (the loader and `tandem data
 * preview` do): an argument-less `normalize` is then rewritten with them.
 */
#include <math.h>
#include <string.h>

#include "tf.h"

enum { JIT_BRIGHTNESS, JIT_CONTRAST, JIT_SATURATION, JIT_N };

typedef struct {
    gboolean on[JIT_N];
    double lo[JIT_N], hi[JIT_N];
} JitterPriv;

static const TdmParamSpec jitter_params[] = {
    TDM_PARAM_SPEC_FLOATS("brightness", TF_POSITIONAL, "0", 1, 2, 0, INFINITY,
                          "V (factor in [max(0, 1-V), 1+V]) or MIN,MAX"),
    TDM_PARAM_SPEC_FLOATS("contrast", TF_POSITIONAL, "0", 1, 2, 0, INFINITY,
                          "V or MIN,MAX, as brightness"),
    TDM_PARAM_SPEC_FLOATS("saturation", TF_POSITIONAL, "0", 1, 2, 0, INFINITY,
                          "V or MIN,MAX, as brightness (no effect on 1 channel)"),
    TDM_PARAM_SPEC_END,
};

static gboolean jitter_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                              GError **error)
{
    JitterPriv p = {{0}};
    for (int k = 0; k < JIT_N; k++) {
        const char *name = jitter_params[k].name;
        double v[2];
        int n = tdm_params_get_floats(t->params, name, v, 2);
        if (n == 1) {
            p.lo[k] = MAX(0.0, 1.0 - v[0]);
            p.hi[k] = 1.0 + v[0];
        } else {
            if (v[0] > v[1]) {
                tdm_params_set_error(t->params, name, error, "expected 0 <= MIN <= MAX");
                return FALSE;
            }
            p.lo[k] = v[0];
            p.hi[k] = v[1];
        }
        /* torchvision skips an adjustment whose range is exactly {1}. */
        p.on[k] = !(p.lo[k] == 1.0 && p.hi[k] == 1.0);
    }
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

/* The adjustments run block by block: each block of pixels (small enough to
 * stay in L1) goes through the sample's adjustments in their order before
 * the next block is read, so the image is swept once when contrast is off
 * and twice when it is on (contrast needs the mean grey level of the image
 * as the adjustments before it left it, summed in the same sweep). Per
 * element the arithmetic is that of the plain one-adjustment-at-a-time
 * loops; on the 0..255 scale the grey levels are integers, so their sum is
 * exact in any order. */
#define JIT_BLOCK 256

typedef struct {
    int which;
    float f;
} JitOp;

/* Grey level with PIL's convert("L") weights (19595, 38470 and 7471 /
 * 65536: 0.299, 0.587, 0.114 in 16-bit fixed point), before rounding. */
static inline double grey_rgb(float r, float g, float b)
{
    return (19595.0 * r + 38470.0 * g + 7471.0 * b) * (1.0 / 65536.0);
}

/* On the 0..255 scale grey levels are rounded, so that ties fall the same
 * way as in PIL. Values are >= 0 here, so truncating x + 0.5 rounds (and is
 * cheaper than floor(), a libm call without SSE4.1). */
static inline float grey_round(double g)
{
    return (float)(int)(g + 0.5);
}

TF_VECTORIZE
static void jit_brightness(float *d, int n, float f, float top)
{
    for (int i = 0; i < n; i++) {
        d[i] = CLAMP(d[i] * f, 0.0f, top);
    }
}

TF_VECTORIZE
static void jit_contrast(float *d, int n, float mean, float f, float top)
{
    for (int i = 0; i < n; i++) {
        d[i] = CLAMP(mean + f * (d[i] - mean), 0.0f, top);
    }
}

TF_VECTORIZE
static void jit_saturation(float *restrict r, float *restrict g, float *restrict b, int n,
                           float f, float top, gboolean normalized)
{
    if (normalized) {
        for (int i = 0; i < n; i++) {
            float y = (float)grey_rgb(r[i], g[i], b[i]);
            r[i] = CLAMP(y + f * (r[i] - y), 0.0f, top);
            g[i] = CLAMP(y + f * (g[i] - y), 0.0f, top);
            b[i] = CLAMP(y + f * (b[i] - y), 0.0f, top);
        }
    } else {
        for (int i = 0; i < n; i++) {
            float y = grey_round(grey_rgb(r[i], g[i], b[i]));
            r[i] = CLAMP(y + f * (r[i] - y), 0.0f, top);
            g[i] = CLAMP(y + f * (g[i] - y), 0.0f, top);
            b[i] = CLAMP(y + f * (b[i] - y), 0.0f, top);
        }
    }
}

/* Sum of the rounded grey levels of n pixels on the 0..255 scale (at most
 * 255 * JIT_BLOCK: fits an int). */
TF_VECTORIZE
static int jit_grey_sum_rgb(const float *restrict r, const float *restrict g,
                            const float *restrict b, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += (int)(grey_rgb(r[i], g[i], b[i]) + 0.5);
    }
    return s;
}

TF_VECTORIZE
static int jit_grey_sum_1(const float *d, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += (int)(d[i] + 0.5f);
    }
    return s;
}

/* Sum of the grey levels of a block, added to *sum in pixel order (on the
 * 0..1 scale the order matters for the last bits). */
static void jit_grey_sum(const float *d, size_t plane, int c, int n, gboolean normalized,
                         double *sum)
{
    if (!normalized) {
        *sum += c >= 3 ? jit_grey_sum_rgb(d, d + plane, d + 2 * plane, n) : jit_grey_sum_1(d, n);
        return;
    }
    for (int i = 0; i < n; i++) {
        *sum += c >= 3 ? (float)grey_rgb(d[i], d[i + plane], d[i + 2 * plane]) : d[i];
    }
}

/* ops[0 .. n_ops) on the block of n pixels at d (planes `plane` apart). */
static void jit_block(float *d, size_t plane, int c, int n, const JitOp *ops, int n_ops,
                      float top, gboolean normalized, float mean)
{
    for (int k = 0; k < n_ops; k++) {
        float f = ops[k].f;
        if (ops[k].which == JIT_BRIGHTNESS) {
            for (int ch = 0; ch < c; ch++) {
                jit_brightness(d + (size_t)ch * plane, n, f, top);
            }
        } else if (ops[k].which == JIT_CONTRAST) {
            for (int ch = 0; ch < c; ch++) {
                jit_contrast(d + (size_t)ch * plane, n, mean, f, top);
            }
        } else if (c >= 3) {
            jit_saturation(d, d + plane, d + 2 * plane, n, f, top, normalized);
        }
    }
}

/* dst = the adjustments ops[0 .. n_ops) of src, in that order. */
static void jitter_run(const TdmImage *src, TdmImage *dst, const JitOp *ops, int n_ops)
{
    const int c = src->c;
    const size_t plane = (size_t)src->h * src->w;
    const gboolean normalized = src->normalized;
    const float top = normalized ? 1.0f : 255.0f;
    tdm_image_reserve(dst, c, src->h, src->w);
    dst->normalized = normalized;
    int split = n_ops; /* contrast's place: the sweep before it sums the grey levels */
    for (int k = 0; k < n_ops; k++) {
        if (ops[k].which == JIT_CONTRAST) {
            split = k;
        }
    }
    double sum = 0.0;
    for (size_t i0 = 0; i0 < plane; i0 += JIT_BLOCK) {
        int n = (int)MIN((size_t)JIT_BLOCK, plane - i0);
        float *d = dst->data + i0;
        for (int ch = 0; ch < c; ch++) {
            memcpy(d + (size_t)ch * plane, src->data + (size_t)ch * plane + i0,
                   sizeof(float) * (size_t)n);
        }
        jit_block(d, plane, c, n, ops, split, top, normalized, 0.0f);
        if (split < n_ops) {
            jit_grey_sum(d, plane, c, n, normalized, &sum);
        }
    }
    if (split == n_ops) {
        return;
    }
    float mean = plane > 0 ? (float)(sum / (double)plane) : 0.0f;
    if (!normalized) {
        mean = (float)(int)(mean + 0.5f);
    }
    for (size_t i0 = 0; i0 < plane; i0 += JIT_BLOCK) {
        int n = (int)MIN((size_t)JIT_BLOCK, plane - i0);
        jit_block(dst->data + i0, plane, c, n, ops + split, n_ops - split, top, normalized, mean);
    }
}

static gboolean jitter_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                             GError **error)
{
    const JitterPriv *p = t->priv;
    if (src->c != 1 && src->c != 3 && (p->on[JIT_CONTRAST] || p->on[JIT_SATURATION])) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "color-jitter: contrast and saturation need 1 or 3 channels, got %d",
                    src->c);
        return FALSE;
    }
    int order[JIT_N] = {JIT_BRIGHTNESS, JIT_CONTRAST, JIT_SATURATION};
    for (int i = JIT_N - 1; i > 0; i--) {
        int j = (int)tdm_rng_below(rng, (guint64)i + 1);
        int tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    float factor[JIT_N];
    for (int k = 0; k < JIT_N; k++) {
        factor[k] = p->on[k] ? (float)tdm_rng_range(rng, p->lo[k], p->hi[k]) : 1.0f;
    }
    JitOp ops[JIT_N];
    int n_ops = 0;
    for (int i = 0; i < JIT_N; i++) {
        if (p->on[order[i]]) {
            ops[n_ops].which = order[i];
            ops[n_ops].f = factor[order[i]];
            n_ops++;
        }
    }
    jitter_run(src, dst, ops, n_ops);
    return TRUE;
}

static const TdmTransformClass jitter_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    jitter_create, tf_same_shape, jitter_apply, tf_priv_free, {0},
};

const TfInfo tf_color_jitter_info = {
    "color-jitter",
    "random brightness, contrast and saturation in random order (torchvision ColorJitter)",
    &jitter_class, jitter_params};

/* ---- normalize ---- */

typedef struct {
    int n;            /* 0: not given yet (the dataset's constants come later) */
    float mean[TDM_MAX_CHANNELS], inv_std[TDM_MAX_CHANNELS];
} NormalizePriv;

static const TdmParamSpec normalize_params[] = {
    TDM_PARAM_SPEC_FLOATS("mean", TF_POSITIONAL, NULL, 1, TDM_MAX_CHANNELS, 0, 0,
                          "per-channel mean of x / 255 (1 value = all channels); omitted with "
                          "std: the dataset's"),
    {.name = "std", .struct_size = sizeof(TdmParamSpec), .type = TDM_PARAM_FLOATS,
     .flags = TF_POSITIONAL | TDM_PARAM_MIN_EXCLUSIVE, .min = 0, .max = INFINITY,
     .min_count = 1, .max_count = TDM_MAX_CHANNELS,
     .description = "per-channel standard deviation"},
    TDM_PARAM_SPEC_END,
};

static gboolean normalize_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                                 GError **error)
{
    NormalizePriv p = {0};
    double mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS];
    int nm = tdm_params_get_floats(t->params, "mean", mean, TDM_MAX_CHANNELS);
    int ns = tdm_params_get_floats(t->params, "std", std, TDM_MAX_CHANNELS);
    if ((nm == 0) != (ns == 0)) {
        tdm_params_set_error(t->params, nm == 0 ? "std" : "mean", error,
                             "give both mean= and std=, or neither (then the dataset's are used)");
        return FALSE;
    }
    if (nm != ns && nm != 1 && ns != 1) {
        tdm_params_set_error(t->params, "std", error, "%d values for %d means", ns, nm);
        return FALSE;
    }
    p.n = MAX(nm, ns);
    for (int c = 0; c < p.n; c++) {
        p.mean[c] = (float)mean[nm == 1 ? 0 : c];
        p.inv_std[c] = (float)(1.0 / std[ns == 1 ? 0 : c]);
    }
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

static gboolean normalize_output_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh,
                                       int *ow, GError **error)
{
    const NormalizePriv *p = t->priv;
    if (p->n == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "normalize: no mean= and std= given, and no dataset constants to use "
                    "(e.g. 'normalize mean=0.5 std=0.25')");
        return FALSE;
    }
    if (c > 0 && p->n != 1 && p->n != c) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "normalize: %d mean/std values for an image of %d channels", p->n, c);
        return FALSE;
    }
    *oc = c;
    *oh = h;
    *ow = w;
    return TRUE;
}

TF_VECTORIZE
static void normalize_plane(float *restrict d, const float *restrict s, size_t n, float in_scale,
                            float m, float is)
{
    for (size_t i = 0; i < n; i++) {
        d[i] = (s[i] * in_scale - m) * is;
    }
}

static gboolean normalize_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                                GError **error)
{
    const NormalizePriv *p = t->priv;
    int oc, oh, ow;
    if (!normalize_output_shape(t, src->c, src->h, src->w, &oc, &oh, &ow, error)) {
        return FALSE;
    }
    tdm_image_reserve(dst, src->c, src->h, src->w);
    size_t plane = (size_t)src->h * src->w;
    float in_scale = src->normalized ? 1.0f : 1.0f / 255.0f;
    for (int ch = 0; ch < src->c; ch++) {
        int k = p->n == 1 ? 0 : ch;
        float m = p->mean[k], is = p->inv_std[k];
        normalize_plane(dst->data + ch * plane, src->data + ch * plane, plane, in_scale, m, is);
    }
    dst->normalized = TRUE;
    return TRUE;
}

static const TdmTransformClass normalize_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    normalize_create, normalize_output_shape, normalize_apply,
    tf_priv_free, {0},
};

const TfInfo tf_normalize_info = {"normalize",
                                  "(x / 255 - mean) / std per channel (torchvision ToTensor + "
                                  "Normalize)",
                                  &normalize_class, normalize_params};

/* ---- to-tensor ---- */

static const TdmParamSpec to_tensor_params[] = {TDM_PARAM_SPEC_END};

/* No parameters: the core refuses any argument before create() runs. */
static gboolean to_tensor_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                                 GError **error)
{
    return TRUE;
}

static gboolean to_tensor_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                                GError **error)
{
    tf_copy(src, dst);
    if (!src->normalized) {
        size_t n = (size_t)src->c * src->h * src->w;
        for (size_t i = 0; i < n; i++) {
            dst->data[i] *= 1.0f / 255.0f;
        }
    }
    dst->normalized = TRUE;
    return TRUE;
}

static const TdmTransformClass to_tensor_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    to_tensor_create, tf_same_shape, to_tensor_apply, NULL, {0},
};

const TfInfo tf_to_tensor_info = {"to-tensor",
                                  "x / 255 (torchvision ToTensor; implied at the end of every "
                                  "pipeline without normalize)",
                                  &to_tensor_class, to_tensor_params};

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
    {"brightness", "list", "0", "V (factor in [max(0, 1-V), 1+V]) or MIN,MAX"},
    {"contrast", "list", "0", "V or MIN,MAX, as brightness"},
    {"saturation", "list", "0", "V or MIN,MAX, as brightness (no effect on 1 channel)"},
    {NULL, NULL, NULL, NULL},
};

static gboolean jitter_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                              GError **error)
{
    TfArgs a;
    JitterPriv p = {{0}};
    if (!tf_args_bind(&a, t->name, jitter_params, 3, NULL, args, n_args, error)) {
        return FALSE;
    }
    for (int k = 0; k < JIT_N; k++) {
        const char *name = jitter_params[k].name;
        double v[2];
        int n = 0;
        if (!tf_args_doubles(&a, name, v, 1, 2, &n, error)) {
            return FALSE;
        }
        if (n == 1) {
            if (v[0] < 0.0) {
                tf_args_error(&a, name, error, "must not be negative");
                return FALSE;
            }
            p.lo[k] = MAX(0.0, 1.0 - v[0]);
            p.hi[k] = 1.0 + v[0];
        } else {
            if (v[0] < 0.0 || v[0] > v[1]) {
                tf_args_error(&a, name, error, "expected 0 <= MIN <= MAX");
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

/* Grey level of pixel i, with PIL's convert("L") weights (19595, 38470 and
 * 7471 / 65536: 0.299, 0.587, 0.114 in 16-bit fixed point) and, on the
 * 0..255 scale, its rounding, so that ties fall the same way as in PIL. */
static inline float grey_at(const TdmImage *img, size_t i, size_t plane)
{
    /* Values are >= 0 here, so truncating x + 0.5 rounds (and is cheaper
     * than floor(), a libm call without SSE4.1). */
    if (img->c < 3) {
        return img->normalized ? img->data[i] : (float)(int)(img->data[i] + 0.5f);
    }
    double g = (19595.0 * img->data[i] + 38470.0 * img->data[i + plane] +
                7471.0 * img->data[i + 2 * plane]) *
               (1.0 / 65536.0);
    return img->normalized ? (float)g : (float)(int)(g + 0.5);
}

static void adjust(TdmImage *img, int which, float f)
{
    size_t plane = (size_t)img->h * img->w, n = plane * img->c;
    float top = img->normalized ? 1.0f : 255.0f;
    float *d = img->data;
    if (which == JIT_BRIGHTNESS) {
        for (size_t i = 0; i < n; i++) {
            d[i] = CLAMP(d[i] * f, 0.0f, top);
        }
    } else if (which == JIT_CONTRAST) {
        double sum = 0.0;
        for (size_t i = 0; i < plane; i++) {
            sum += grey_at(img, i, plane);
        }
        float mean = plane > 0 ? (float)(sum / (double)plane) : 0.0f;
        if (!img->normalized) {
            mean = (float)(int)(mean + 0.5f);
        }
        for (size_t i = 0; i < n; i++) {
            d[i] = CLAMP(mean + f * (d[i] - mean), 0.0f, top);
        }
    } else if (img->c >= 3) {
        for (size_t i = 0; i < plane; i++) {
            float g = grey_at(img, i, plane);
            for (int ch = 0; ch < 3; ch++) {
                float *v = &d[i + ch * plane];
                *v = CLAMP(g + f * (*v - g), 0.0f, top);
            }
        }
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
    tf_copy(src, dst);
    for (int i = 0; i < JIT_N; i++) {
        if (p->on[order[i]]) {
            adjust(dst, order[i], factor[order[i]]);
        }
    }
    return TRUE;
}

static const TdmTransformClass jitter_class = {
    TDM_TRANSFORM_IFACE_VERSION, jitter_create, tf_same_shape, jitter_apply, tf_priv_free, {0},
};

const TfInfo tf_color_jitter_info = {
    "color-jitter",
    "random brightness, contrast and saturation in random order (torchvision ColorJitter)",
    &jitter_class, jitter_params};

/* ---- normalize ---- */

typedef struct {
    int n;            /* 0: not given yet (the dataset's constants come later) */
    float mean[4], inv_std[4];
} NormalizePriv;

static const TdmParamSpec normalize_params[] = {
    {"mean", "list", "none", "per-channel mean of x / 255 (1 value = all channels); "
                           "omitted with std: the dataset's"},
    {"std", "list", "none", "per-channel standard deviation, > 0"},
    {NULL, NULL, NULL, NULL},
};

static gboolean normalize_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                                 GError **error)
{
    TfArgs a;
    NormalizePriv p = {0};
    double mean[4], std[4];
    int nm = 0, ns = 0;
    if (!tf_args_bind(&a, t->name, normalize_params, 2, NULL, args, n_args, error) ||
        !tf_args_doubles(&a, "mean", mean, 1, 4, &nm, error) ||
        !tf_args_doubles(&a, "std", std, 1, 4, &ns, error)) {
        return FALSE;
    }
    if ((nm == 0) != (ns == 0)) {
        tf_args_error(&a, nm == 0 ? "std" : "mean", error, "give both mean= and std=, or neither "
                                                           "(then the dataset's are used)");
        return FALSE;
    }
    if (nm != ns && nm != 1 && ns != 1) {
        tf_args_error(&a, "std", error, "%d values for %d means", ns, nm);
        return FALSE;
    }
    p.n = MAX(nm, ns);
    for (int c = 0; c < p.n; c++) {
        double m = mean[nm == 1 ? 0 : c], s = std[ns == 1 ? 0 : c];
        if (!(s > 0.0)) {
            tf_args_error(&a, "std", error, "standard deviations must be > 0");
            return FALSE;
        }
        p.mean[c] = (float)m;
        p.inv_std[c] = (float)(1.0 / s);
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
        const float *s = src->data + ch * plane;
        float *d = dst->data + ch * plane;
        for (size_t i = 0; i < plane; i++) {
            d[i] = (s[i] * in_scale - m) * is;
        }
    }
    dst->normalized = TRUE;
    return TRUE;
}

static const TdmTransformClass normalize_class = {
    TDM_TRANSFORM_IFACE_VERSION, normalize_create, normalize_output_shape, normalize_apply,
    tf_priv_free, {0},
};

const TfInfo tf_normalize_info = {"normalize",
                                  "(x / 255 - mean) / std per channel (torchvision ToTensor + "
                                  "Normalize)",
                                  &normalize_class, normalize_params};

/* ---- to-tensor ---- */

static const TdmParamSpec to_tensor_params[] = {{NULL, NULL, NULL, NULL}};

static gboolean to_tensor_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                                 GError **error)
{
    TfArgs a;
    return tf_args_bind(&a, t->name, to_tensor_params, 0, NULL, args, n_args, error);
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
    TDM_TRANSFORM_IFACE_VERSION, to_tensor_create, tf_same_shape, to_tensor_apply, NULL, {0},
};

const TfInfo tf_to_tensor_info = {"to-tensor",
                                  "x / 255 (torchvision ToTensor; implied at the end of every "
                                  "pipeline without normalize)",
                                  &to_tensor_class, to_tensor_params};

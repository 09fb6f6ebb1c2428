/* SPDX-License-Identifier: MIT */
/* plugins/transforms/erasing.c - random-erasing (cutout).
 *
 * torchvision's RandomErasing: with probability p, up to ten tries at a box
 * of random area (scale, a fraction of the image) and aspect ratio (ratio,
 * h / w, drawn log-uniformly) that fits strictly inside the image; the box
 * is overwritten with `value`, or with standard normal noise for
 * value=random. If no try fits, the image is left as it is. torchvision
 * runs it on tensors, so `value` is on the tensor's scale: 0..1 before
 * normalize (Tandem multiplies it by 255 there, since its pixels are on the
 * 0..255 scale until then), normalised units after normalize.
 * `box=TOP,LEFT,HEIGHT,WIDTH` pins the box (with p=1, for tests).
 */
#include <math.h>
#include <string.h>

#include "tf.h"

typedef struct {
    double p;
    double scale[2], log_ratio[2];
    gboolean random;
    TfFill value;
    gboolean pinned;
    int box[4];
} ErasingPriv;

static const TdmParamSpec erasing_params[] = {
    TDM_PARAM_SPEC_FLOAT("p", TF_POSITIONAL, "0.5", 0, 1, "probability of erasing"),
    TDM_PARAM_SPEC_FLOATS("scale", 0, "0.02,0.33", 2, 2, 0, 1,
                          "range MIN,MAX of the erased area, as a fraction of the image's"),
    TDM_PARAM_SPEC_FLOATS("ratio", TDM_PARAM_MIN_EXCLUSIVE, "0.3,3.3", 2, 2, 0, INFINITY,
                          "range MIN,MAX of the box's aspect ratio (h / w)"),
    TDM_PARAM_SPEC_STRING("value", 0, "0",
                          "value(s) to write on the tensor scale (0..1 before normalize), one "
                          "per channel or one for all, or 'random' (normal noise)"),
    TDM_PARAM_SPEC_INTS("box", 0, NULL, 4, 4, 0, INFINITY,
                        "TOP,LEFT,HEIGHT,WIDTH: pin the box instead of drawing it"),
    TDM_PARAM_SPEC_END,
};

/* value=: 1 to TDM_MAX_CHANNELS numbers (the other choice, "random", is the
 * caller's). */
static gboolean erasing_read_value(const TdmParams *params, TfFill *fill, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(tdm_params_get_string(params, "value"), ",", -1);
    int n = (int)g_strv_length(parts);
    if (n < 1 || n > TDM_MAX_CHANNELS) {
        tdm_params_set_error(params, "value", error,
                             "expected 1 to %d numbers separated by commas, or random",
                             TDM_MAX_CHANNELS);
        return FALSE;
    }
    for (int i = 0; i < n; i++) {
        char *end = NULL;
        double v = g_ascii_strtod(parts[i], &end);
        if (end == parts[i] || *end != '\0' || !isfinite(v)) {
            tdm_params_set_error(params, "value", error,
                                 "'%s' is not a number (expected 1 to %d numbers, or random)",
                                 parts[i], TDM_MAX_CHANNELS);
            return FALSE;
        }
        fill->v[i] = (float)v;
    }
    for (int i = n; i < TDM_MAX_CHANNELS; i++) {
        fill->v[i] = fill->v[0];
    }
    fill->n = n;
    return TRUE;
}

static gboolean erasing_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                               GError **error)
{
    ErasingPriv p = {0};
    double ratio[2];
    p.p = tdm_params_get_float(t->params, "p");
    tdm_params_get_floats(t->params, "scale", p.scale, 2);
    tdm_params_get_floats(t->params, "ratio", ratio, 2);
    if (p.scale[0] > p.scale[1]) {
        tdm_params_set_error(t->params, "scale", error, "expected MIN <= MAX");
        return FALSE;
    }
    if (ratio[0] > ratio[1]) {
        tdm_params_set_error(t->params, "ratio", error, "expected MIN <= MAX");
        return FALSE;
    }
    p.log_ratio[0] = log(ratio[0]);
    p.log_ratio[1] = log(ratio[1]);
    if (g_strcmp0(tdm_params_get_string(t->params, "value"), "random") == 0) {
        p.random = TRUE;
    } else if (!erasing_read_value(t->params, &p.value, error)) {
        return FALSE;
    }
    p.pinned = tdm_params_get_ints(t->params, "box", p.box, 4) == 4;
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

/* Standard normal deviate (Box-Muller; one of the pair is enough here). */
static float normal_draw(TdmRng *rng)
{
    double u1 = 1.0 - tdm_rng_uniform(rng); /* (0, 1]: log() stays finite */
    double u2 = tdm_rng_uniform(rng);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2));
}

static gboolean erasing_draw(const ErasingPriv *p, int img_h, int img_w, TdmRng *rng, int box[4])
{
    double area = (double)img_h * img_w;
    for (int attempt = 0; attempt < 10; attempt++) {
        double erase_area = area * tdm_rng_range(rng, p->scale[0], p->scale[1]);
        double aspect = exp(tdm_rng_range(rng, p->log_ratio[0], p->log_ratio[1]));
        int h = tf_round_half_even(sqrt(erase_area * aspect));
        int w = tf_round_half_even(sqrt(erase_area / aspect));
        if (!(h < img_h && w < img_w)) {
            continue;
        }
        box[0] = (int)tdm_rng_below(rng, (guint64)(img_h - h + 1));
        box[1] = (int)tdm_rng_below(rng, (guint64)(img_w - w + 1));
        box[2] = h;
        box[3] = w;
        return TRUE;
    }
    return FALSE;
}

static gboolean erasing_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                              GError **error)
{
    const ErasingPriv *p = t->priv;
    tf_copy(src, dst);
    if (!(tdm_rng_uniform(rng) < p->p)) {
        return TRUE;
    }
    int box[4];
    if (p->pinned) {
        memcpy(box, p->box, sizeof(box));
        if (box[0] + box[2] > src->h || box[1] + box[3] > src->w) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "random-erasing: box=%d,%d,%d,%d reaches outside the %dx%d input", box[0],
                        box[1], box[2], box[3], src->h, src->w);
            return FALSE;
        }
    } else if (!erasing_draw(p, src->h, src->w, rng, box)) {
        return TRUE;
    }
    float scale = src->normalized ? 1.0f : 255.0f;
    for (int ch = 0; ch < src->c; ch++) {
        float v = p->value.n == 0 ? 0.0f : p->value.v[ch < p->value.n ? ch : 0] * scale;
        for (int y = box[0]; y < box[0] + box[2]; y++) {
            float *row = dst->data + ((size_t)ch * src->h + y) * src->w;
            for (int x = box[1]; x < box[1] + box[3]; x++) {
                row[x] = p->random ? normal_draw(rng) * scale : v;
            }
        }
    }
    return TRUE;
}

static const TdmTransformClass erasing_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    erasing_create, tf_same_shape, erasing_apply, tf_priv_free, {0},
};

const TfInfo tf_random_erasing_info = {"random-erasing",
                                       "overwrite a random box with a value or noise "
                                       "(torchvision RandomErasing)",
                                       &erasing_class, erasing_params};

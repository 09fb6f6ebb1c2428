/* SPDX-License-Identifier: MIT */
/* plugins/transforms/geometry.c - pad, random-crop, center-crop, hflip, vflip.
 *
 * All of them are one operation: copy a window of the input that may reach
 * outside it, the outside coming from a pad mode (constant fill, edge,
 * reflect, symmetric, as numpy.pad and torchvision's Pad define them). So
 * a padded random crop is one pass over the output, never a padded copy
 * followed by a crop. Semantics follow torchvision 0.14 (Pad, RandomCrop,
 * CenterCrop, RandomHorizontalFlip, RandomVerticalFlip); the random choices
 * come from the sample's stream, so they are reproducible but not the ones
 * torch's generator would make. `random-crop at=TOP,LEFT` pins the window
 * (in padded coordinates), which the oracle test and previews use.
 */
#include <math.h>
#include <string.h>

#include "tf.h"

/* ---- shared helpers ---- */

void tf_read_fill(const TdmParams *p, const char *name, TfFill *fill)
{
    double v[TDM_MAX_CHANNELS];
    int n = MIN(tdm_params_get_floats(p, name, v, TDM_MAX_CHANNELS), TDM_MAX_CHANNELS);
    fill->n = n;
    for (int i = 0; i < TDM_MAX_CHANNELS; i++) {
        fill->v[i] = n == 0 ? 0.0f : (float)v[i < n ? i : 0];
    }
}

TfPadMode tf_read_pad_mode(const TdmParams *p, const char *name)
{
    int mode = tdm_params_get_choice(p, name);
    return mode < 0 ? TF_PAD_CONSTANT : (TfPadMode)mode;
}

void tf_read_size(const TdmParams *p, const char *name, int *h, int *w)
{
    int v[2] = {1, 1};
    int n = CLAMP(tdm_params_get_ints(p, name, v, 2), 1, 2);
    *h = v[0];
    *w = v[n - 1];
}

int tf_round_half_even(double x)
{
    double r = floor(x + 0.5);
    /* A tie rounded up to an odd number goes to the even one below. */
    if (r - x == 0.5 && fmod(r, 2.0) != 0.0) {
        r -= 1.0;
    }
    return (int)r;
}

float tf_fill_value(const TfFill *fill, int c, gboolean normalized)
{
    float v = fill->n == 0 ? 0.0f : fill->v[c < fill->n ? c : 0];
    return normalized ? v / 255.0f : v;
}

/* Where index i (possibly outside [0, n)) reads from, or -1 for the fill. */
static inline int map_index(int i, int n, TfPadMode mode)
{
    if (i >= 0 && i < n) {
        return i;
    }
    switch (mode) {
    case TF_PAD_CONSTANT:
        return -1;
    case TF_PAD_EDGE:
        return i < 0 ? 0 : n - 1;
    case TF_PAD_REFLECT: {
        if (n == 1) {
            return 0;
        }
        int period = 2 * (n - 1);
        int m = i % period;
        if (m < 0) {
            m += period;
        }
        return m < n ? m : period - m;
    }
    case TF_PAD_SYMMETRIC: {
        int period = 2 * n;
        int m = i % period;
        if (m < 0) {
            m += period;
        }
        return m < n ? m : period - 1 - m;
    }
    }
    return -1;
}

void tf_crop_padded(const TdmImage *src, TdmImage *dst, int top, int left, int oh, int ow,
                    TfPadMode mode, const TfFill *fill)
{
    int c = src->c, h = src->h, w = src->w;
    tdm_image_reserve(dst, c, oh, ow);
    /* The columns that fall inside src: [x_in0, x_in1) of the output. */
    int x_in0 = CLAMP(-left, 0, ow), x_in1 = CLAMP(w - left, 0, ow);
    if (x_in1 < x_in0) {
        x_in1 = x_in0;
    }
    for (int ch = 0; ch < c; ch++) {
        float fv = tf_fill_value(fill, ch, src->normalized);
        const float *splane = src->data + (size_t)ch * h * w;
        float *dplane = dst->data + (size_t)ch * oh * ow;
        for (int y = 0; y < oh; y++) {
            float *drow = dplane + (size_t)y * ow;
            int sy = map_index(top + y, h, mode);
            if (sy < 0 || w == 0) {
                for (int x = 0; x < ow; x++) {
                    drow[x] = fv;
                }
                continue;
            }
            const float *srow = splane + (size_t)sy * w;
            for (int x = 0; x < x_in0; x++) {
                int sx = map_index(left + x, w, mode);
                drow[x] = sx < 0 ? fv : srow[sx];
            }
            if (x_in1 > x_in0) {
                memcpy(drow + x_in0, srow + left + x_in0, sizeof(float) * (size_t)(x_in1 - x_in0));
            }
            for (int x = x_in1; x < ow; x++) {
                int sx = map_index(left + x, w, mode);
                drow[x] = sx < 0 ? fv : srow[sx];
            }
        }
    }
}

void tf_copy(const TdmImage *src, TdmImage *dst)
{
    tdm_image_reserve(dst, src->c, src->h, src->w);
    memcpy(dst->data, src->data, sizeof(float) * (size_t)src->c * src->h * src->w);
}

void tf_priv_free(TdmTransform *t)
{
    g_free(t->priv);
    t->priv = NULL;
}

gboolean tf_same_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh, int *ow,
                       GError **error)
{
    *oc = c;
    *oh = h;
    *ow = w;
    return TRUE;
}

/* Padding as torchvision reads it: 1 value (all sides), 2 (left/right,
 * top/bottom) or 4 (left, top, right, bottom); none: 0. Stored as l, t, r,
 * b. */
static gboolean read_padding(const TdmParams *p, const char *name, int ltrb[4], GError **error)
{
    int v[4] = {0};
    int n = tdm_params_get_ints(p, name, v, 4);
    if (n == 3 || n > 4) {
        tdm_params_set_error(p, name, error, "expected 1, 2 or 4 integers");
        return FALSE;
    }
    if (n <= 1) {
        ltrb[0] = ltrb[1] = ltrb[2] = ltrb[3] = v[0];
    } else if (n == 2) {
        ltrb[0] = ltrb[2] = v[0];
        ltrb[1] = ltrb[3] = v[1];
    } else {
        memcpy(ltrb, v, sizeof(v));
    }
    return TRUE;
}

/* ---- pad ---- */

typedef struct {
    int ltrb[4];
    TfPadMode mode;
    TfFill fill;
} PadPriv;

static const TdmParamSpec pad_params[] = {
    TDM_PARAM_SPEC_INTS("padding", TF_REQUIRED | TF_POSITIONAL, NULL, 1, 4, 0, INFINITY,
                        "pixels to add: 1 value (all sides), 2 (left/right, top/bottom) or 4 "
                        "(left, top, right, bottom)"),
    TDM_PARAM_SPEC_FLOATS("fill", 0, "0", 1, TDM_MAX_CHANNELS, 0, 0,
                          "value of constant padding, 0..255 (one per channel or one for all)"),
    TF_PARAM_SPEC_PADDING_MODE,
    TDM_PARAM_SPEC_END,
};

static gboolean pad_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                           GError **error)
{
    PadPriv p = {{0}};
    if (!read_padding(t->params, "padding", p.ltrb, error)) {
        return FALSE;
    }
    tf_read_fill(t->params, "fill", &p.fill);
    p.mode = tf_read_pad_mode(t->params, "padding_mode");
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

static gboolean pad_output_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh, int *ow,
                                 GError **error)
{
    const PadPriv *p = t->priv;
    *oc = c;
    *oh = h > 0 ? h + p->ltrb[1] + p->ltrb[3] : 0;
    *ow = w > 0 ? w + p->ltrb[0] + p->ltrb[2] : 0;
    return TRUE;
}

static gboolean pad_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                          GError **error)
{
    const PadPriv *p = t->priv;
    if (p->mode == TF_PAD_REFLECT && (src->h < 2 || src->w < 2)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "pad: reflect padding needs an image of at least 2x2, got %dx%d", src->h,
                    src->w);
        return FALSE;
    }
    tf_crop_padded(src, dst, -p->ltrb[1], -p->ltrb[0], src->h + p->ltrb[1] + p->ltrb[3],
                   src->w + p->ltrb[0] + p->ltrb[2], p->mode, &p->fill);
    return TRUE;
}

static const TdmTransformClass pad_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    pad_create, pad_output_shape, pad_apply, tf_priv_free, {0},
};

const TfInfo tf_pad_info = {"pad", "pad the borders (torchvision Pad)", &pad_class, pad_params};

/* ---- random-crop ---- */

typedef struct {
    int th, tw;
    int ltrb[4];
    gboolean pad_if_needed;
    TfPadMode mode;
    TfFill fill;
    gboolean pinned;
    int at[2];
} RandomCropPriv;

static const TdmParamSpec random_crop_params[] = {
    TDM_PARAM_SPEC_INTS("size", TF_REQUIRED | TF_POSITIONAL, NULL, 1, 2, 1, INFINITY,
                        "output size: S (square) or H,W"),
    {.name = "padding", .struct_size = sizeof(TdmParamSpec), .type = TDM_PARAM_INTS,
     .default_value = "0", .min = 0, .max = INFINITY, .min_count = 1, .max_count = 4,
     .aliases = "pad", .description = "padding added first (as pad: 1, 2 or 4 values)"},
    TDM_PARAM_SPEC_BOOL("pad_if_needed", 0, "false",
                        "pad images smaller than size (torchvision's rule)"),
    TDM_PARAM_SPEC_FLOATS("fill", 0, "0", 1, TDM_MAX_CHANNELS, 0, 0,
                          "value of constant padding, 0..255"),
    TF_PARAM_SPEC_PADDING_MODE,
    TDM_PARAM_SPEC_INTS("at", 0, NULL, 2, 2, 0, INFINITY,
                        "TOP,LEFT: pin the window (in padded coordinates) instead of drawing it"),
    TDM_PARAM_SPEC_END,
};

static gboolean random_crop_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                                   GError **error)
{
    RandomCropPriv p = {0};
    tf_read_size(t->params, "size", &p.th, &p.tw);
    if (!read_padding(t->params, "padding", p.ltrb, error)) {
        return FALSE;
    }
    p.pad_if_needed = tdm_params_get_bool(t->params, "pad_if_needed");
    tf_read_fill(t->params, "fill", &p.fill);
    p.mode = tf_read_pad_mode(t->params, "padding_mode");
    p.pinned = tdm_params_get_ints(t->params, "at", p.at, 2) == 2;
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

/* The padded size torchvision crops from, pad_if_needed included: it pads
 * both sides by the whole shortfall (its rule, kept for equal results). */
static void random_crop_padding(const RandomCropPriv *p, int h, int w, int ltrb[4])
{
    memcpy(ltrb, p->ltrb, sizeof(int) * 4);
    int ph = h + ltrb[1] + ltrb[3], pw = w + ltrb[0] + ltrb[2];
    if (p->pad_if_needed && pw < p->tw) {
        ltrb[0] += p->tw - pw;
        ltrb[2] += p->tw - pw;
    }
    if (p->pad_if_needed && ph < p->th) {
        ltrb[1] += p->th - ph;
        ltrb[3] += p->th - ph;
    }
}

static gboolean random_crop_check(const RandomCropPriv *p, int h, int w, const int ltrb[4],
                                  GError **error)
{
    int ph = h + ltrb[1] + ltrb[3], pw = w + ltrb[0] + ltrb[2];
    if (ph < p->th || pw < p->tw) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "random-crop: size %dx%d is larger than the padded input %dx%d (input "
                    "%dx%d; add padding= or pad_if_needed=true)",
                    p->th, p->tw, ph, pw, h, w);
        return FALSE;
    }
    if (p->pinned && (p->at[0] + p->th > ph || p->at[1] + p->tw > pw)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "random-crop: at=%d,%d puts the %dx%d window outside the padded input %dx%d",
                    p->at[0], p->at[1], p->th, p->tw, ph, pw);
        return FALSE;
    }
    return TRUE;
}

static gboolean random_crop_output_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh,
                                         int *ow, GError **error)
{
    const RandomCropPriv *p = t->priv;
    int ltrb[4];
    if (h > 0 && w > 0) {
        random_crop_padding(p, h, w, ltrb);
        if (!random_crop_check(p, h, w, ltrb, error)) {
            return FALSE;
        }
    }
    *oc = c;
    *oh = p->th;
    *ow = p->tw;
    return TRUE;
}

static gboolean random_crop_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                                  GError **error)
{
    const RandomCropPriv *p = t->priv;
    int ltrb[4];
    random_crop_padding(p, src->h, src->w, ltrb);
    if (!random_crop_check(p, src->h, src->w, ltrb, error)) {
        return FALSE;
    }
    int ph = src->h + ltrb[1] + ltrb[3], pw = src->w + ltrb[0] + ltrb[2];
    int i, j;
    if (p->pinned) {
        i = p->at[0];
        j = p->at[1];
    } else {
        i = (int)tdm_rng_below(rng, (guint64)(ph - p->th + 1));
        j = (int)tdm_rng_below(rng, (guint64)(pw - p->tw + 1));
    }
    tf_crop_padded(src, dst, i - ltrb[1], j - ltrb[0], p->th, p->tw, p->mode, &p->fill);
    return TRUE;
}

static const TdmTransformClass random_crop_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    random_crop_create, random_crop_output_shape, random_crop_apply,
    tf_priv_free, {0},
};

const TfInfo tf_random_crop_info = {"random-crop",
                                    "crop a window at a random place (torchvision RandomCrop)",
                                    &random_crop_class, random_crop_params};

/* ---- center-crop ---- */

typedef struct {
    int th, tw;
} CenterCropPriv;

static const TdmParamSpec center_crop_params[] = {
    TDM_PARAM_SPEC_INTS("size", TF_REQUIRED | TF_POSITIONAL, NULL, 1, 2, 1, INFINITY,
                        "output size: S (square) or H,W; larger than the input pads with 0"),
    TDM_PARAM_SPEC_END,
};

static gboolean center_crop_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                                   GError **error)
{
    CenterCropPriv p;
    tf_read_size(t->params, "size", &p.th, &p.tw);
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

static gboolean center_crop_output_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh,
                                         int *ow, GError **error)
{
    const CenterCropPriv *p = t->priv;
    *oc = c;
    *oh = p->th;
    *ow = p->tw;
    return TRUE;
}

/* torchvision pads a too small side by (d // 2, (d + 1) // 2) and takes the
 * offset of a larger one as int(round(d / 2)), Python's round. */
static int center_offset(int in, int out)
{
    if (out > in) {
        return -((out - in) / 2);
    }
    return tf_round_half_even((in - out) / 2.0);
}

static gboolean center_crop_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                                  GError **error)
{
    const CenterCropPriv *p = t->priv;
    static const TfFill zero = {0, {0}};
    tf_crop_padded(src, dst, center_offset(src->h, p->th), center_offset(src->w, p->tw), p->th,
                   p->tw, TF_PAD_CONSTANT, &zero);
    return TRUE;
}

static const TdmTransformClass center_crop_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    center_crop_create, center_crop_output_shape, center_crop_apply,
    tf_priv_free, {0},
};

const TfInfo tf_center_crop_info = {"center-crop", "crop the centre (torchvision CenterCrop)",
                                    &center_crop_class, center_crop_params};

/* ---- hflip, vflip ---- */

typedef struct {
    double p;
} FlipPriv;

static const TdmParamSpec flip_params[] = {
    TDM_PARAM_SPEC_FLOAT("p", TF_POSITIONAL, "0.5", 0, 1, "probability of flipping"),
    TDM_PARAM_SPEC_END,
};

static gboolean flip_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                            GError **error)
{
    FlipPriv p = {tdm_params_get_float(t->params, "p")};
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

TF_VECTORIZE
static void row_reverse(float *restrict drow, const float *restrict srow, int w)
{
    for (int x = 0; x < w; x++) {
        drow[x] = srow[w - 1 - x];
    }
}

static gboolean flip_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                           gboolean horizontal)
{
    const FlipPriv *p = t->priv;
    int c = src->c, h = src->h, w = src->w;
    /* torchvision: flip when torch.rand(1) < p. */
    if (!(tdm_rng_uniform(rng) < p->p)) {
        tf_copy(src, dst);
        return TRUE;
    }
    tdm_image_reserve(dst, c, h, w);
    for (int ch = 0; ch < c; ch++) {
        for (int y = 0; y < h; y++) {
            const float *srow = src->data + ((size_t)ch * h + (horizontal ? y : h - 1 - y)) * w;
            float *drow = dst->data + ((size_t)ch * h + y) * w;
            if (horizontal) {
                row_reverse(drow, srow, w);
            } else {
                memcpy(drow, srow, sizeof(float) * (size_t)w);
            }
        }
    }
    return TRUE;
}

static gboolean hflip_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                            GError **error)
{
    return flip_apply(t, src, dst, rng, TRUE);
}

static gboolean vflip_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                            GError **error)
{
    return flip_apply(t, src, dst, rng, FALSE);
}

static const TdmTransformClass hflip_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    flip_create, tf_same_shape, hflip_apply, tf_priv_free, {0},
};

static const TdmTransformClass vflip_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    flip_create, tf_same_shape, vflip_apply, tf_priv_free, {0},
};

const TfInfo tf_hflip_info = {"hflip", "mirror left-right with probability p "
                                       "(torchvision RandomHorizontalFlip)",
                              &hflip_class, flip_params};
const TfInfo tf_vflip_info = {"vflip", "mirror top-bottom with probability p "
                                       "(torchvision RandomVerticalFlip)",
                              &vflip_class, flip_params};

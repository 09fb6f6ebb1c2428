/* SPDX-License-Identifier: MIT */
/* plugins/transforms/resize.c - resize and random-resized-crop.
 *
 * Both resample with PIL's bilinear filter, which is what torchvision uses
 * for u8 (PIL) images: a separable triangle filter whose support grows with
 * the shrink factor, so shrinking averages every input pixel (antialiased)
 * and enlarging is plain bilinear with pixel centres at +0.5. The
 * horizontal pass runs first, as in PIL. PIL rounds each pass to integers;
 * Tandem keeps floats, so the two differ by under one grey level. (The
 * tensor path of torchvision 0.14, antialias off, differs from both when
 * shrinking.) A crop followed by a resize clamps the filter at the crop's
 * edges, exactly like PIL's crop().resize().
 *
 * No allocation per sample: the filter coefficients and the intermediate
 * image live in the destination image's buffer, past the output pixels.
 */
#include <math.h>
#include <string.h>

#include "tf.h"

typedef struct {
    int *bounds;   /* per output pixel: first input index, count */
    float *k;      /* per output pixel: ksize weights */
    int ksize;
} Coeffs;

static int coeffs_ksize(int in_size, int out_size)
{
    double scale = (double)in_size / out_size;
    double support = scale < 1.0 ? 1.0 : scale;
    return (int)ceil(support) * 2 + 1;
}

/* PIL's precompute_coeffs for the bilinear filter on [0, in_size). */
static void coeffs_compute(Coeffs *cf, int in_size, int out_size)
{
    double scale = (double)in_size / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = filterscale; /* the triangle's support is 1 */
    double ss = 1.0 / filterscale;
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        xmin = MAX(xmin, 0);
        xmax = MIN(xmax, in_size) - xmin;
        float *k = cf->k + (size_t)xx * cf->ksize;
        double ww = 0.0;
        double wbuf[cf->ksize];
        for (int x = 0; x < xmax; x++) {
            double d = fabs((x + xmin - center + 0.5) * ss);
            wbuf[x] = d < 1.0 ? 1.0 - d : 0.0;
            ww += wbuf[x];
        }
        for (int x = 0; x < cf->ksize; x++) {
            k[x] = x < xmax ? (float)(ww != 0.0 ? wbuf[x] / ww : wbuf[x]) : 0.0f;
        }
        cf->bounds[2 * xx] = xmin;
        cf->bounds[2 * xx + 1] = xmax;
    }
}

/* Every output pixel of cf gets exactly ksize taps: windows that would run
 * past the input's end are moved left and their weights right, the new
 * taps weighing 0. Adding 0 * x leaves a sum unchanged, so the results stay
 * those of the clipped windows, and the fixed tap count lets the compiler
 * unroll the dot products. Needs ksize <= in_size. */
static void coeffs_pad(Coeffs *cf, int in_size, int out_size)
{
    const int K = cf->ksize;
    for (int xx = 0; xx < out_size; xx++) {
        int xmin = cf->bounds[2 * xx], n = cf->bounds[2 * xx + 1];
        int shift = MAX(0, xmin + K - in_size);
        float *k = cf->k + (size_t)xx * K;
        if (shift > 0) {
            memmove(k + shift, k, sizeof(float) * (size_t)n);
            for (int i = 0; i < shift; i++) {
                k[i] = 0.0f;
            }
        }
        for (int i = shift + n; i < K; i++) {
            k[i] = 0.0f;
        }
        cf->bounds[2 * xx] = xmin - shift;
        cf->bounds[2 * xx + 1] = K;
    }
}

/* The horizontal pass with K taps everywhere (coeffs_pad), for constant K. */
static inline void pass_horizontal_k(const float *in, size_t in_stride, int rows, const Coeffs *cf,
                                     int ow, float *out, const int K)
{
    for (int y = 0; y < rows; y++) {
        const float *row = in + (size_t)y * in_stride;
        float *orow = out + (size_t)y * ow;
        for (int x = 0; x < ow; x++) {
            const float *k = cf->k + (size_t)x * K;
            const float *p = row + cf->bounds[2 * x];
            float s = 0.0f;
            for (int i = 0; i < K; i++) {
                s += p[i] * k[i];
            }
            orow[x] = s;
        }
    }
}

static void pass_horizontal(const float *in, size_t in_stride, int rows, const Coeffs *cf,
                            int ow, float *out, gboolean padded)
{
    if (padded && cf->ksize == 3) {
        pass_horizontal_k(in, in_stride, rows, cf, ow, out, 3);
        return;
    }
    if (padded && cf->ksize == 5) {
        pass_horizontal_k(in, in_stride, rows, cf, ow, out, 5);
        return;
    }
    for (int y = 0; y < rows; y++) {
        const float *row = in + (size_t)y * in_stride;
        float *orow = out + (size_t)y * ow;
        for (int x = 0; x < ow; x++) {
            const float *k = cf->k + (size_t)x * cf->ksize;
            const float *p = row + cf->bounds[2 * x];
            int n = cf->bounds[2 * x + 1];
            float s = 0.0f;
            for (int i = 0; i < n; i++) {
                s += p[i] * k[i];
            }
            orow[x] = s;
        }
    }
}

/* out[x] += row[x] * wgt over a row: the vertical pass's inner loop. */
TF_VECTORIZE
static void row_axpy(float *restrict out, const float *restrict row, float wgt, int width)
{
    for (int x = 0; x < width; x++) {
        out[x] += row[x] * wgt;
    }
}

static void pass_vertical(const float *in, size_t in_stride, int width, const Coeffs *cf, int oh,
                          float *out)
{
    for (int y = 0; y < oh; y++) {
        const float *k = cf->k + (size_t)y * cf->ksize;
        const float *base = in + (size_t)cf->bounds[2 * y] * in_stride;
        int n = cf->bounds[2 * y + 1];
        float *orow = out + (size_t)y * width;
        memset(orow, 0, sizeof(float) * (size_t)width);
        for (int i = 0; i < n; i++) {
            row_axpy(orow, base + (size_t)i * in_stride, k[i], width);
        }
    }
}

void tf_resample_bilinear(const TdmImage *src, TdmImage *dst, int top, int left, int bh, int bw,
                          int oh, int ow)
{
    int c = src->c, h = src->h, w = src->w;
    gboolean need_h = bw != ow, need_v = bh != oh;
    int kx = coeffs_ksize(bw, ow), ky = coeffs_ksize(bh, oh);
    size_t out_n = (size_t)c * oh * ow;
    size_t tmp_n = need_h && need_v ? (size_t)bh * ow : 0;
    size_t work = out_n + tmp_n + (size_t)ow * kx + (size_t)oh * ky + 2 * (size_t)(ow + oh);
    /* Reserve the workspace as one long row, then set the real shape. */
    tdm_image_reserve(dst, 1, 1, (int)work);
    tdm_image_reserve(dst, c, oh, ow);
    float *tmp = dst->data + out_n;
    Coeffs cx = {(int *)(tmp + tmp_n + (size_t)ow * kx + (size_t)oh * ky), tmp + tmp_n, kx};
    Coeffs cy = {cx.bounds + 2 * ow, cx.k + (size_t)ow * kx, ky};
    gboolean padded = FALSE;
    if (need_h) {
        coeffs_compute(&cx, bw, ow);
        if (kx <= bw) {
            coeffs_pad(&cx, bw, ow);
            padded = TRUE;
        }
    }
    if (need_v) {
        coeffs_compute(&cy, bh, oh);
    }
    for (int ch = 0; ch < c; ch++) {
        const float *in = src->data + ((size_t)ch * h + top) * w + left;
        float *out = dst->data + (size_t)ch * oh * ow;
        if (need_h && need_v) {
            pass_horizontal(in, (size_t)w, bh, &cx, ow, tmp, padded);
            pass_vertical(tmp, (size_t)ow, ow, &cy, oh, out);
        } else if (need_h) {
            pass_horizontal(in, (size_t)w, bh, &cx, ow, out, padded);
        } else if (need_v) {
            pass_vertical(in, (size_t)w, ow, &cy, oh, out);
        } else {
            for (int y = 0; y < oh; y++) {
                memcpy(out + (size_t)y * ow, in + (size_t)y * w, sizeof(float) * (size_t)ow);
            }
        }
    }
}

/* ---- resize ---- */

typedef struct {
    int h, w;          /* both set: fixed size */
    int shorter;       /* else: the shorter side's new length */
} ResizePriv;

static const TdmParamSpec resize_params[] = {
    TDM_PARAM_SPEC_INTS("size", TF_REQUIRED | TF_POSITIONAL, NULL, 1, 2, 1, INFINITY,
                        "S (shorter side to S, aspect kept) or H,W"),
    TDM_PARAM_SPEC_CHOICE("interpolation", 0, "bilinear", "bilinear",
                          "PIL's bilinear, antialiased when shrinking (the only one)"),
    TDM_PARAM_SPEC_END,
};

static gboolean resize_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                              GError **error)
{
    ResizePriv p = {0};
    int v[2];
    if (tdm_params_get_ints(t->params, "size", v, 2) == 2) {
        p.h = v[0];
        p.w = v[1];
    } else {
        p.shorter = v[0];
    }
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

/* torchvision's _compute_resized_output_size for one requested size. */
static void resize_target(const ResizePriv *p, int h, int w, int *oh, int *ow)
{
    if (p->shorter == 0) {
        *oh = p->h;
        *ow = p->w;
        return;
    }
    int s = p->shorter;
    if (w <= h) {
        *ow = s;
        *oh = (int)((double)s * h / w);
    } else {
        *oh = s;
        *ow = (int)((double)s * w / h);
    }
}

static gboolean resize_output_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh,
                                    int *ow, GError **error)
{
    const ResizePriv *p = t->priv;
    *oc = c;
    if (p->shorter != 0 && (h <= 0 || w <= 0)) {
        *oh = *ow = 0; /* depends on each image's aspect ratio */
        return TRUE;
    }
    resize_target(p, h, w, oh, ow);
    return TRUE;
}

static gboolean resize_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                             GError **error)
{
    const ResizePriv *p = t->priv;
    int oh = 0, ow = 0;
    if (src->h >= 1 && src->w >= 1) {
        resize_target(p, src->h, src->w, &oh, &ow);
    }
    if (oh < 1 || ow < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "resize: cannot resize %dx%d to %dx%d",
                    src->h, src->w, oh, ow);
        return FALSE;
    }
    tf_resample_bilinear(src, dst, 0, 0, src->h, src->w, oh, ow);
    return TRUE;
}

static const TdmTransformClass resize_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    resize_create, resize_output_shape, resize_apply, tf_priv_free,
    {0},
};

const TfInfo tf_resize_info = {"resize", "resize, bilinear (torchvision Resize on PIL images)",
                               &resize_class, resize_params};

/* ---- random-resized-crop ---- */

typedef struct {
    int oh, ow;
    double scale[2], log_ratio[2], ratio[2];
    gboolean pinned;
    int box[4]; /* top, left, height, width */
} RrcPriv;

static const TdmParamSpec rrc_params[] = {
    TDM_PARAM_SPEC_INTS("size", TF_REQUIRED | TF_POSITIONAL, NULL, 1, 2, 1, INFINITY,
                        "output size: S (square) or H,W"),
    TDM_PARAM_SPEC_FLOATS("scale", 0, "0.08,1", 2, 2, 0, INFINITY,
                          "range MIN,MAX of the crop's area, as a fraction of the image's"),
    TDM_PARAM_SPEC_FLOATS("ratio", TDM_PARAM_MIN_EXCLUSIVE, "0.75,1.3333333333333333", 2, 2, 0,
                          INFINITY, "range MIN,MAX of the crop's aspect ratio (w / h)"),
    TDM_PARAM_SPEC_INTS("box", 0, NULL, 4, 4, 0, INFINITY,
                        "TOP,LEFT,HEIGHT,WIDTH: pin the crop instead of drawing it"),
    TDM_PARAM_SPEC_END,
};

static gboolean rrc_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                           GError **error)
{
    RrcPriv p = {0};
    tf_read_size(t->params, "size", &p.oh, &p.ow);
    tdm_params_get_floats(t->params, "scale", p.scale, 2);
    tdm_params_get_floats(t->params, "ratio", p.ratio, 2);
    if (p.scale[0] > p.scale[1]) {
        tdm_params_set_error(t->params, "scale", error, "expected MIN <= MAX");
        return FALSE;
    }
    if (p.ratio[0] > p.ratio[1]) {
        tdm_params_set_error(t->params, "ratio", error, "expected MIN <= MAX");
        return FALSE;
    }
    p.log_ratio[0] = log(p.ratio[0]);
    p.log_ratio[1] = log(p.ratio[1]);
    p.pinned = tdm_params_get_ints(t->params, "box", p.box, 4) == 4;
    if (p.pinned && (p.box[2] < 1 || p.box[3] < 1)) {
        tdm_params_set_error(t->params, "box", error, "expected HEIGHT,WIDTH >= 1");
        return FALSE;
    }
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

static gboolean rrc_output_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh, int *ow,
                                 GError **error)
{
    const RrcPriv *p = t->priv;
    *oc = c;
    *oh = p->oh;
    *ow = p->ow;
    return TRUE;
}

/* torchvision's RandomResizedCrop.get_params: ten tries at a box of random
 * area and aspect ratio, then the central crop of the nearest allowed
 * ratio. */
static void rrc_draw(const RrcPriv *p, int height, int width, TdmRng *rng, int box[4])
{
    double area = (double)height * width;
    for (int attempt = 0; attempt < 10; attempt++) {
        double target_area = area * tdm_rng_range(rng, p->scale[0], p->scale[1]);
        double aspect = exp(tdm_rng_range(rng, p->log_ratio[0], p->log_ratio[1]));
        int w = tf_round_half_even(sqrt(target_area * aspect));
        int h = tf_round_half_even(sqrt(target_area / aspect));
        if (0 < w && w <= width && 0 < h && h <= height) {
            box[0] = (int)tdm_rng_below(rng, (guint64)(height - h + 1));
            box[1] = (int)tdm_rng_below(rng, (guint64)(width - w + 1));
            box[2] = h;
            box[3] = w;
            return;
        }
    }
    double in_ratio = (double)width / height;
    int w, h;
    if (in_ratio < p->ratio[0]) {
        w = width;
        h = tf_round_half_even(w / p->ratio[0]);
    } else if (in_ratio > p->ratio[1]) {
        h = height;
        w = tf_round_half_even(h * p->ratio[1]);
    } else {
        w = width;
        h = height;
    }
    box[0] = (height - h) / 2;
    box[1] = (width - w) / 2;
    box[2] = h;
    box[3] = w;
}

static gboolean rrc_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                          GError **error)
{
    const RrcPriv *p = t->priv;
    int box[4];
    if (p->pinned) {
        memcpy(box, p->box, sizeof(box));
        if (box[0] + box[2] > src->h || box[1] + box[3] > src->w) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "random-resized-crop: box=%d,%d,%d,%d reaches outside the %dx%d input",
                        box[0], box[1], box[2], box[3], src->h, src->w);
            return FALSE;
        }
    } else {
        if (src->h < 1 || src->w < 1) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "random-resized-crop: empty input (%dx%d)", src->h, src->w);
            return FALSE;
        }
        rrc_draw(p, src->h, src->w, rng, box);
    }
    tf_resample_bilinear(src, dst, box[0], box[1], box[2], box[3], p->oh, p->ow);
    return TRUE;
}

static const TdmTransformClass rrc_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    rrc_create, rrc_output_shape, rrc_apply, tf_priv_free, {0},
};

const TfInfo tf_random_resized_crop_info = {
    "random-resized-crop",
    "crop a random area and aspect ratio, resize it, bilinear (torchvision RandomResizedCrop)",
    &rrc_class, rrc_params};

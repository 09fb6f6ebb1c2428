/* SPDX-License-Identifier: MIT */
/* plugins/transforms/rotate.c - rotation about the centre, bilinear.
 *
 * torchvision's RandomRotation(degrees, interpolation=BILINEAR,
 * expand=False, fill) on a PIL image, i.e. PIL's Image.rotate: the output
 * keeps the input's size; output pixel centre (x + 0.5, y + 0.5) maps back
 * through the inverse rotation about (w / 2, h / 2); a point that lands
 * outside [0, w) x [0, h) takes the fill value, one inside is interpolated
 * bilinearly from the four neighbours with indices clamped at the edges
 * (PIL clamps; torchvision's tensor path blends with the fill instead, which
 * is why the two differ along the border). Positive angles turn the image
 * counter-clockwise. PIL truncates the interpolated value to an integer;
 * Tandem keeps the float, so the two differ by less than one grey level.
 * The angle is drawn uniformly from [lo, hi]; `degrees=10,10` pins it.
 */
#include <math.h>

#include "tf.h"

typedef struct {
    double lo, hi;
    TfFill fill;
} RotatePriv;

static const TdmParamSpec rotate_params[] = {
    TDM_PARAM_SPEC_FLOATS("degrees", TF_REQUIRED | TF_POSITIONAL, NULL, 1, 2, 0, 0,
                          "D (angle drawn from [-D, D]) or LO,HI; LO=HI pins the angle"),
    TDM_PARAM_SPEC_FLOATS("fill", 0, "0", 1, TDM_MAX_CHANNELS, 0, 0,
                          "value of the area outside the rotated image, 0..255"),
    TDM_PARAM_SPEC_CHOICE("interpolation", 0, "bilinear", "bilinear", "the only one"),
    TDM_PARAM_SPEC_END,
};

static gboolean rotate_create(TdmTransform *t, const TdmTransformArg *args, int n_args,
                              GError **error)
{
    RotatePriv p;
    double d[2];
    int n = tdm_params_get_floats(t->params, "degrees", d, 2);
    tf_read_fill(t->params, "fill", &p.fill);
    if (n == 1) {
        if (d[0] < 0) {
            tdm_params_set_error(t->params, "degrees", error,
                                 "a single value must not be negative");
            return FALSE;
        }
        p.lo = -d[0];
        p.hi = d[0];
    } else {
        if (d[0] > d[1]) {
            tdm_params_set_error(t->params, "degrees", error, "LO must not exceed HI");
            return FALSE;
        }
        p.lo = d[0];
        p.hi = d[1];
    }
    t->priv = tf_memdup(&p, sizeof(p));
    return TRUE;
}

static gboolean rotate_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                             GError **error)
{
    const RotatePriv *p = t->priv;
    double angle = p->lo == p->hi ? p->lo : tdm_rng_range(rng, p->lo, p->hi);
    int c = src->c, h = src->h, w = src->w;
    tdm_image_reserve(dst, c, h, w);
    if (fmod(angle, 360.0) == 0.0) {
        tf_copy(src, dst);
        return TRUE;
    }
    /* The inverse map, as PIL builds it: input = M * (output - centre) +
     * centre, with M the rotation by -angle in image coordinates (y down). */
    double rad = -angle * G_PI / 180.0;
    double ca = cos(rad), sa = sin(rad);
    double cx = w / 2.0, cy = h / 2.0;
    double m0 = ca, m1 = sa, m3 = -sa, m4 = ca;
    double m2 = m0 * -cx + m1 * -cy + cx;
    double m5 = m3 * -cx + m4 * -cy + cy;
    for (int y = 0; y < h; y++) {
        double yo = y + 0.5;
        for (int x = 0; x < w; x++) {
            double xo = x + 0.5;
            double xin = m0 * xo + m1 * yo + m2;
            double yin = m3 * xo + m4 * yo + m5;
            size_t o = (size_t)y * w + x;
            if (xin < 0.0 || xin >= w || yin < 0.0 || yin >= h) {
                for (int ch = 0; ch < c; ch++) {
                    dst->data[(size_t)ch * h * w + o] = tf_fill_value(&p->fill, ch,
                                                                      src->normalized);
                }
                continue;
            }
            xin -= 0.5;
            yin -= 0.5;
            int x0 = (int)floor(xin), y0 = (int)floor(yin);
            float dx = (float)(xin - x0), dy = (float)(yin - y0);
            int xa = CLAMP(x0, 0, w - 1), xb = CLAMP(x0 + 1, 0, w - 1);
            int ya = CLAMP(y0, 0, h - 1);
            gboolean has_yb = y0 + 1 >= 0 && y0 + 1 < h;
            for (int ch = 0; ch < c; ch++) {
                const float *plane = src->data + (size_t)ch * h * w;
                const float *ra = plane + (size_t)ya * w;
                float v1 = ra[xa] + (ra[xb] - ra[xa]) * dx;
                float v2 = v1;
                if (has_yb) {
                    const float *rb = plane + (size_t)(y0 + 1) * w;
                    v2 = rb[xa] + (rb[xb] - rb[xa]) * dx;
                }
                dst->data[(size_t)ch * h * w + o] = v1 + (v2 - v1) * dy;
            }
        }
    }
    return TRUE;
}

static const TdmTransformClass rotate_class = {
    TDM_TRANSFORM_IFACE_VERSION, sizeof(TdmTransformClass),
    rotate_create, tf_same_shape, rotate_apply, tf_priv_free, {0},
};

const TfInfo tf_rotate_info = {"rotate",
                               "rotate about the centre by a random angle, bilinear, same size "
                               "(torchvision RandomRotation, expand=False)",
                               &rotate_class, rotate_params};

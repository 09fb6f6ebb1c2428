/* SPDX-License-Identifier: MIT */
/* invert.c - a transform plugin: "invert p=0.5" replaces each pixel value v
 * by 255 - v, with probability p per sample (torchvision's RandomInvert). */
#include <tandem/tandem.h>

typedef struct {
    double p;
} InvertPriv;

static gboolean invert_create(TdmTransform *t, const TdmTransformArg *args G_GNUC_UNUSED,
                              int n_args G_GNUC_UNUSED, GError **error G_GNUC_UNUSED)
{
    InvertPriv *priv = g_new0(InvertPriv, 1);
    priv->p = tdm_params_get_float(t->params, "p"); /* already checked against [0, 1] */
    t->priv = priv;
    return TRUE;
}

static gboolean invert_apply(TdmTransform *t, const TdmImage *src, TdmImage *dst, TdmRng *rng,
                             GError **error)
{
    const InvertPriv *priv = t->priv;
    size_t n = (size_t)src->c * src->h * src->w;
    if (src->normalized) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "invert (stage %d): the image is already normalised; put invert before "
                    "normalize", t->position + 1);
        return FALSE;
    }
    /* One draw per sample, always, so later draws do not depend on p. */
    gboolean flip = tdm_rng_uniform(rng) < priv->p;
    tdm_image_reserve(dst, src->c, src->h, src->w);
    for (size_t i = 0; i < n; i++) {
        dst->data[i] = flip ? 255.0f - src->data[i] : src->data[i];
    }
    return TRUE;
}

static void invert_finalize(TdmTransform *t)
{
    g_free(t->priv);
    t->priv = NULL;
}

static const TdmTransformClass invert_class = {
    TDM_CLASS_HEADER(TDM_TRANSFORM_IFACE_VERSION, TdmTransformClass),
    .create = invert_create,
    .apply = invert_apply,
    .finalize = invert_finalize,
};

static const TdmParamSpec invert_params[] = {
    TDM_PARAM_SPEC_FLOAT("p", TDM_PARAM_POSITIONAL, "0.5", 0, 1, "probability of inverting"),
    TDM_PARAM_SPEC_END,
};

TDM_PLUGIN_INIT_FEATURE(invert_init, TDM_FEATURE_TRANSFORM, "invert", 50, &invert_class,
                        "255 - v with probability p (torchvision's RandomInvert)", invert_params,
                        NULL)

TDM_PLUGIN_DEFINE(invert, "MIT", "The invert transform",
                  "examples/plugins/invert", invert_init)

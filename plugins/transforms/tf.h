/* SPDX-License-Identifier: MIT */
/* plugins/transforms/tf.h - what the transform plugin's files share.
 *
 * Each transform is a TdmTransformClass plus a TdmParamSpec list; the specs
 * are the single place where parameter names, types, ranges, positional
 * order and defaults live (the core checks a pipeline's arguments against
 * them and hands create() the values in t->params), so `tandem inspect
 * NAME` always shows what create() really accepts. Helpers for the pixel loops
 * that several transforms need (crop from a virtually padded image, fill
 * values) live in geometry.c.
 */
#ifndef TDM_PLUGINS_TRANSFORMS_TF_H
#define TDM_PLUGINS_TRANSFORMS_TF_H

#include <string.h>

#include <math.h>
#include <tandem/transform.h>

/* A transform as the plugin registers it. */
typedef struct {
    const char *name;
    const char *description;
    const TdmTransformClass *klass;
    const TdmParamSpec *params;
} TfInfo;

extern const TfInfo tf_pad_info, tf_random_crop_info, tf_center_crop_info, tf_hflip_info,
    tf_vflip_info, tf_rotate_info, tf_resize_info, tf_random_resized_crop_info,
    tf_color_jitter_info, tf_normalize_info, tf_to_tensor_info, tf_random_erasing_info;

/* ---- arguments (geometry.c) ----
 * The core binds a stage's arguments to the transform's specs before
 * create() runs, so t->params holds values of the right type, count and
 * range; these helpers only shape them. */

#define TF_REQUIRED TDM_PARAM_REQUIRED
#define TF_POSITIONAL TDM_PARAM_POSITIONAL
/* The pad modes, in TfPadMode's order. */
#define TF_PAD_MODES "constant|edge|reflect|symmetric"
/* The padding_mode parameter of the transforms that pad (read with
 * tf_read_pad_mode). */
#define TF_PARAM_SPEC_PADDING_MODE                                                                 \
    {.name = "padding_mode", .struct_size = sizeof(TdmParamSpec), .type = TDM_PARAM_CHOICE,        \
     .default_value = "constant", .choices = TF_PAD_MODES, .aliases = "mode",                      \
     .description = "how the border is filled"}

/* A size parameter (a list of 1 or 2 ints >= 1): S means S x S. */
void tf_read_size(const TdmParams *p, const char *name, int *h, int *w);

/* ---- pixels (geometry.c) ---- */

typedef enum {
    TF_PAD_CONSTANT,
    TF_PAD_EDGE,
    TF_PAD_REFLECT,
    TF_PAD_SYMMETRIC,
} TfPadMode;

/* Fill values per channel on the 0..255 scale (one value = all channels). */
typedef struct {
    int n;
    float v[TDM_MAX_CHANNELS];
} TfFill;

/* A fill parameter (a list of 1 to TDM_MAX_CHANNELS floats; none: 0). */
void tf_read_fill(const TdmParams *p, const char *name, TfFill *fill);
/* A pad mode parameter (a choice of TF_PAD_MODES). */
TfPadMode tf_read_pad_mode(const TdmParams *p, const char *name);
/* Fill value for channel c of an image (scaled to 0..1 once normalised). */
float tf_fill_value(const TfFill *fill, int c, gboolean normalized);
/* dst = the (oh x ow) window at (top, left) of src, which may reach outside
 * src: those pixels come from the pad mode. */
void tf_crop_padded(const TdmImage *src, TdmImage *dst, int top, int left, int oh, int ow,
                    TfPadMode mode, const TfFill *fill);
/* dst = src, all of it. */
void tf_copy(const TdmImage *src, TdmImage *dst);

/* ---- resampling (resize.c) ---- */

/* dst (oh x ow) = the box (top, left, bh, bw) of src resized with PIL's
 * bilinear filter (antialiased when shrinking), as PIL's crop + resize. */
void tf_resample_bilinear(const TdmImage *src, TdmImage *dst, int top, int left, int bh, int bw,
                          int oh, int ow);

/* For the per-pixel loops that every sample goes through: the default -O2
 * leaves them scalar, so they are built with the loop vectoriser on and, on
 * x86-64 Linux, also for AVX2 (chosen at load time). Only what the scalar
 * code computes is vectorised: no reassociation, no FMA ("avx2" does not
 * enable it), so results do not depend on the machine. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TF_VECTORIZE __attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define TF_VECTORIZE __attribute__((optimize("O3")))
#else
#define TF_VECTORIZE
#endif

/* A copy of a transform's private struct (g_memdup2 needs GLib 2.68). */
static inline gpointer tf_memdup(gconstpointer p, gsize n)
{
    gpointer q = g_malloc(n);
    memcpy(q, p, n);
    return q;
}

/* output_shape of the transforms that keep the shape. */
gboolean tf_same_shape(TdmTransform *t, int c, int h, int w, int *oc, int *oh, int *ow,
                       GError **error);
/* finalize of the transforms whose priv is one g_malloc'ed block. */
void tf_priv_free(TdmTransform *t);

/* Python's round(): to nearest, ties to even, as torchvision's int(round()). */
int tf_round_half_even(double x);

#endif /* TDM_PLUGINS_TRANSFORMS_TF_H */

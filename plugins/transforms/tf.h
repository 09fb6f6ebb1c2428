/* plugins/transforms/tf.h - what the transform plugin's files share.
 *
 * Each transform is a TdmTransformClass plus a TdmParamSpec list; the specs
 * are the single place where parameter names, positional order and default
 * values live (tf_args_bind() maps the parsed arguments onto them and the
 * getters fall back to the spec's default string), so `tandem inspect NAME`
 * always shows what create() really accepts. Helpers for the pixel loops
 * that several transforms need (crop from a virtually padded image, fill
 * values) live in geometry.c.
 */
#ifndef TDM_PLUGINS_TRANSFORMS_TF_H
#define TDM_PLUGINS_TRANSFORMS_TF_H

#include <string.h>

#include <tandem/transform.h>

#define TF_MAX_PARAMS 12

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

/* ---- arguments (tf-args.c) ---- */

/* Parsed arguments bound to a transform's parameter specs. */
typedef struct {
    const char *tname;
    const TdmParamSpec *specs;
    const TdmTransformArg *slot[TF_MAX_PARAMS]; /* NULL: not given */
} TfArgs;

/* Aliases accepted for a parameter ("pad" for "padding"); NULL-terminated
 * pairs {alias, name}. */
typedef struct {
    const char *alias;
    const char *name;
} TfAlias;

/* Bind args to specs: key=value by name (or alias), positional values to the
 * first `n_positional` specs in order. Errors name the token and column. */
gboolean tf_args_bind(TfArgs *a, const char *tname, const TdmParamSpec *specs, int n_positional,
                      const TfAlias *aliases, const TdmTransformArg *args, int n_args,
                      GError **error);
/* Index of parameter `name` in the specs (a programming error if absent). */
int tf_args_index(const TfArgs *a, const char *name);
/* Whether the user gave parameter `name`. */
gboolean tf_args_given(const TfArgs *a, const char *name);
/* Numbers of parameter `name` (given, else the spec's default): between
 * min_n and max_n of them. *n = 0 when neither given nor defaulted. */
gboolean tf_args_doubles(const TfArgs *a, const char *name, double *out, int min_n, int max_n,
                         int *n, GError **error);
/* Integers (no fraction), same rules. */
gboolean tf_args_ints(const TfArgs *a, const char *name, int *out, int min_n, int max_n, int *n,
                      GError **error);
gboolean tf_args_bool(const TfArgs *a, const char *name, gboolean *out, GError **error);
/* The raw string (given, else the default; may be NULL). */
const char *tf_args_string(const TfArgs *a, const char *name);
/* An error about parameter `name`'s value: "t: name=value (column C): msg". */
void tf_args_error(const TfArgs *a, const char *name, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
/* Size parameter: 1 value (square) or 2 (h, w), each >= 1. */
gboolean tf_args_size(const TfArgs *a, const char *name, int *h, int *w, GError **error);
/* A probability in [0, 1]. */
gboolean tf_args_probability(const TfArgs *a, const char *name, double *p, GError **error);

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
    float v[4];
} TfFill;

gboolean tf_parse_fill(const TfArgs *a, const char *name, TfFill *fill, GError **error);
gboolean tf_parse_pad_mode(const TfArgs *a, const char *name, TfPadMode *mode, GError **error);
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

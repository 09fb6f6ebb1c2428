/* SPDX-License-Identifier: MIT */
/* core/transform.c - per-sample random streams, images and transform pipelines.
 *
 * The random stream of a sample is counter based: its key is a hash of
 * (seed, epoch, sample index, stream) and each draw hashes the key with the
 * draw's number, so creating a stream costs a few multiplications, two
 * streams never share state, and the numbers are the same on every platform
 * and in every thread. The pipeline parser turns "name arg k=v | name ..."
 * into transforms found in the registry (kind TRANSFORM); each stage's
 * arguments are read by the parameter tokenizer (core/params.c) and bound
 * to the transform's specs here, before its create() runs, so types,
 * ranges and unknown keys are checked in one place, and every error names
 * the token and its 1-based column. A pipeline runs ping-pong between the
 * caller's image and its scratch image, transform i drawing from stream i,
 * and ends normalised: x / 255 when no normalize transform ran. A
 * `normalize` without mean= and std= takes the dataset's constants, given
 * later through tdm_transform_pipeline_set_normalization(); until then the
 * pipeline's output_shape() refuses it, which is where loaders look first.
 * Pipelines are reference counted and shared read-only between a loader's
 * worker threads: only their one owner may still set the normalisation
 * (a loader that must fill it in works on a copy, made by parsing the
 * pipeline's text again and replaying the normalisation set on it).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "internal.h"
#include "params-private.h"

/* ---- random streams ---------------------------------------------------- */

#define GOLDEN 0x9E3779B97F4A7C15ull

/* The finaliser of splitmix64 (Stafford's variant 13): a bijection on 64
 * bits with full avalanche. */
static inline guint64 mix64(guint64 z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void tdm_rng_init(TdmRng *rng, guint64 seed, guint64 epoch, guint64 index, guint64 stream)
{
    g_return_if_fail(rng != NULL);
    /* A chain of hashes, one word at a time, so that (seed, epoch, index,
     * stream) tuples differing in any word give unrelated keys. */
    guint64 h = mix64(seed + GOLDEN);
    h = mix64(h ^ (epoch + 2 * GOLDEN));
    h = mix64(h ^ (index + 3 * GOLDEN));
    guint64 k0 = mix64(h ^ (stream + 4 * GOLDEN));
    memset(rng, 0, sizeof(*rng));
    rng->key[0] = k0;
    rng->key[1] = mix64(k0 ^ 0xD1B54A32D192ED03ull) | 1;
    rng->counter = 0;
}

guint64 tdm_rng_next_u64(TdmRng *rng)
{
    guint64 n = rng->counter++;
    /* Two rounds keyed differently: draw n of one stream is unrelated to
     * draw n of a stream whose key differs in one bit. */
    guint64 z = mix64(rng->key[0] + n * GOLDEN);
    return mix64(z ^ (rng->key[1] * (n + 1)));
}

double tdm_rng_uniform(TdmRng *rng)
{
    return (double)(tdm_rng_next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

double tdm_rng_range(TdmRng *rng, double lo, double hi)
{
    return lo + (hi - lo) * tdm_rng_uniform(rng);
}

guint64 tdm_rng_below(TdmRng *rng, guint64 n)
{
    if (n <= 1) {
        return 0;
    }
    /* Rejection sampling keeps the result unbiased for any n. */
    guint64 limit = G_MAXUINT64 - (G_MAXUINT64 % n);
    guint64 x;
    do {
        x = tdm_rng_next_u64(rng);
    } while (x >= limit);
    return x % n;
}

/* ---- images ------------------------------------------------------------ */

void tdm_image_reserve(TdmImage *img, int c, int h, int w)
{
    g_return_if_fail(img != NULL && c >= 0 && h >= 0 && w >= 0);
    size_t n = (size_t)c * (size_t)h * (size_t)w;
    if (n > img->capacity) {
        g_free(img->data);
        img->data = g_new(float, n);
        img->capacity = n;
    }
    img->c = c;
    img->h = h;
    img->w = w;
}

void tdm_image_clear(TdmImage *img)
{
    g_return_if_fail(img != NULL);
    g_free(img->data);
    memset(img, 0, sizeof(*img));
}

void tdm_image_set_u8(TdmImage *img, const guint8 *chw, int c, int h, int w)
{
    g_return_if_fail(img != NULL && (chw != NULL || (size_t)c * h * w == 0));
    tdm_image_reserve(img, c, h, w);
    size_t n = (size_t)c * (size_t)h * (size_t)w;
    for (size_t i = 0; i < n; i++) {
        img->data[i] = (float)chw[i];
    }
    img->normalized = FALSE;
}

/* ---- pipelines ---------------------------------------------------------- */

typedef struct {
    TdmTransform t;
    int column;                 /* where its name starts */
    const TdmParamSpec *specs;  /* the feature's (NULL: create() parses alone) */
    GArray *args;               /* TdmParamToken, kept to re-create it with defaults */
} Stage;

struct _TdmTransformPipeline {
    gint ref_count;
    GPtrArray *stages; /* Stage * */
    char *spec;
    int n_norm;        /* defaults for an argument-less normalize (0: none set) */
    float norm_mean[TDM_MAX_CHANNELS], norm_std[TDM_MAX_CHANNELS];
};

static void stage_free(gpointer p)
{
    Stage *s = p;
    if (s->t.klass != NULL && s->t.klass->finalize != NULL) {
        s->t.klass->finalize(&s->t);
    }
    g_free(s->t.name);
    tdm_params_unref(s->t.params);
    if (s->args != NULL) {
        g_array_unref(s->args);
    }
    g_free(s);
}

TdmTransformPipeline *tdm_transform_pipeline_ref(TdmTransformPipeline *p)
{
    g_return_val_if_fail(p != NULL, NULL);
    g_atomic_int_inc(&p->ref_count);
    return p;
}

void tdm_transform_pipeline_unref(TdmTransformPipeline *p)
{
    if (p == NULL || !g_atomic_int_dec_and_test(&p->ref_count)) {
        return;
    }
    g_ptr_array_unref(p->stages);
    g_free(p->spec);
    g_free(p);
}

int tdm_transform_pipeline_length(const TdmTransformPipeline *p)
{
    g_return_val_if_fail(p != NULL, 0);
    return (int)p->stages->len;
}

static char *known_transform_names(void)
{
    GPtrArray *features = tdm_registry_list_features(TDM_FEATURE_TRANSFORM);
    GPtrArray *names = g_ptr_array_new();
    for (guint i = 0; i < features->len; i++) {
        g_ptr_array_add(names, (gpointer)tdm_feature_get_name(g_ptr_array_index(features, i)));
    }
    /* A handful of names: insertion sort, alphabetical for the reader. */
    for (guint i = 1; i < names->len; i++) {
        for (guint j = i; j > 0 && strcmp(names->pdata[j - 1], names->pdata[j]) > 0; j--) {
            gpointer tmp = names->pdata[j];
            names->pdata[j] = names->pdata[j - 1];
            names->pdata[j - 1] = tmp;
        }
    }
    g_ptr_array_add(names, NULL);
    char *joined = names->len > 1 ? g_strjoinv(", ", (char **)names->pdata) : g_strdup("(none)");
    g_ptr_array_unref(names);
    g_ptr_array_unref(features);
    return joined;
}

/* An error of stage `s` that does not say where: "name (column C): ..."
 * (a message "name: ..." gets the column after the name). */
static void stage_locate_error(const Stage *s, GError **error, GError *local)
{
    if (local == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s (column %d): invalid arguments", s->t.name, s->column);
        return;
    }
    if (strstr(local->message, "column") != NULL) {
        g_propagate_error(error, local);
        return;
    }
    const char *msg = local->message;
    gsize n = strlen(s->t.name);
    if (strncmp(msg, s->t.name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') {
        msg += n + 2;
    }
    g_set_error(error, local->domain, local->code, "%s (column %d): %s", s->t.name, s->column,
                msg);
    g_error_free(local);
}

/* Bind the stage's arguments to its specs, then run the class's create(). */
static gboolean stage_create(Stage *s, GError **error)
{
    GError *local = NULL;
    g_clear_pointer(&s->t.params, tdm_params_unref);
    if (s->specs != NULL) {
        s->t.params = tdm_params_new(s->t.name, s->specs, &local);
        if (s->t.params == NULL || !tdm_params_bind_tokens(s->t.params, s->args, TRUE, &local)) {
            stage_locate_error(s, error, local);
            return FALSE;
        }
    }
    guint n = s->args->len;
    TdmTransformArg *targs = g_new0(TdmTransformArg, n > 0 ? n : 1);
    for (guint i = 0; i < n; i++) {
        const TdmParamToken *a = &g_array_index(s->args, TdmParamToken, i);
        targs[i].key = a->key;
        targs[i].value = a->value;
        targs[i].column = a->column;
    }
    gboolean ok = s->t.klass->create(&s->t, targs, (int)n, &local);
    g_free(targs);
    if (!ok) {
        stage_locate_error(s, error, local);
    }
    return ok;
}

/* Parse one "name args..." stage starting at *pos (at a non-space). */
static Stage *parse_stage(const char *spec, const char **pos, int position, GError **error)
{
    const char *s = *pos;
    int column = (int)(s - spec) + 1;
    const char *name_start = s;
    while (tdm_param_is_key_char(*s)) {
        s++;
    }
    if (s == name_start) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "transform pipeline: expected a transform name at column %d, found '%c'",
                    column, *s);
        return NULL;
    }
    if (*s != '\0' && *s != '|' && !tdm_param_is_space(*s)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "transform pipeline: unexpected '%c' in transform name at column %d", *s,
                    (int)(s - spec) + 1);
        return NULL;
    }
    g_autofree char *name = g_strndup(name_start, (gsize)(s - name_start));
    GError *local = NULL;
    TdmFeature *feature = tdm_registry_find(TDM_FEATURE_TRANSFORM, name, &local);
    if (feature == NULL) {
        g_clear_error(&local);
        g_autofree char *known = known_transform_names();
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "transform pipeline: unknown transform '%s' at column %d (known: %s)", name,
                    column, known);
        return NULL;
    }
    const TdmTransformClass *klass = tdm_feature_get_class(feature);

    Stage *st = g_new0(Stage, 1);
    st->t.klass = klass;
    st->t.name = g_steal_pointer(&name);
    st->t.position = position;
    st->column = column;
    st->specs = tdm_feature_get_params(feature);
    st->args = tdm_param_tokens_new();
    if (!tdm_param_tokens_read(st->t.name, spec, &s, TRUE, TRUE, st->args, error)) {
        stage_free(st);
        return NULL;
    }
    *pos = s;
    if (!stage_create(st, error)) {
        stage_free(st);
        return NULL;
    }
    return st;
}

TdmTransformPipeline *tdm_transform_pipeline_parse(const char *spec, GError **error)
{
    g_return_val_if_fail(spec != NULL, NULL);
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    TdmTransformPipeline *p = g_new0(TdmTransformPipeline, 1);
    p->ref_count = 1;
    p->stages = g_ptr_array_new_with_free_func(stage_free);
    p->spec = g_strdup(spec);

    const char *s = tdm_param_skip_spaces(spec);
    if (*s == '\0') {
        return p;
    }
    for (;;) {
        s = tdm_param_skip_spaces(s);
        if (*s == '|' || *s == '\0') {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "transform pipeline: missing transform before %s at column %d",
                        *s == '|' ? "'|'" : "the end", (int)(s - spec) + 1);
            tdm_transform_pipeline_unref(p);
            return NULL;
        }
        Stage *st = parse_stage(spec, &s, (int)p->stages->len, error);
        if (st == NULL) {
            tdm_transform_pipeline_unref(p);
            return NULL;
        }
        g_ptr_array_add(p->stages, st);
        if (*s == '\0') {
            break;
        }
        s++; /* the '|' */
    }
    return p;
}

/* Beyond this a typo ("pad 40000") would ask for gigabytes per sample. */
#define MAX_SIDE 16384
#define MAX_PIXELS ((gint64)1 << 28)

static gboolean stage_shape(Stage *st, int c, int h, int w, int *oc, int *oh, int *ow,
                            GError **error)
{
    *oc = c;
    *oh = h;
    *ow = w;
    if (st->t.klass->output_shape != NULL &&
        !st->t.klass->output_shape(&st->t, c, h, w, oc, oh, ow, error)) {
        return FALSE;
    }
    if (*oh > MAX_SIDE || *ow > MAX_SIDE || (gint64)*oc * *oh * *ow > MAX_PIXELS) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s (column %d): its output of %dx%dx%d exceeds the limit of %d pixels a "
                    "side",
                    st->t.name, st->column, *oc, *oh, *ow, MAX_SIDE);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_transform_pipeline_output_shape(TdmTransformPipeline *p, int c, int h, int w,
                                             int *oc, int *oh, int *ow, GError **error)
{
    g_return_val_if_fail(p != NULL && oc != NULL && oh != NULL && ow != NULL, FALSE);
    for (guint i = 0; i < p->stages->len; i++) {
        Stage *st = g_ptr_array_index(p->stages, i);
        int nc, nh, nw;
        if (!stage_shape(st, c, h, w, &nc, &nh, &nw, error)) {
            return FALSE;
        }
        c = nc;
        h = nh;
        w = nw;
    }
    if (c <= 0 || h <= 0 || w <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "transform pipeline '%s': the output size varies from sample to sample "
                    "(end it with a transform of fixed size, e.g. center-crop or resize H,W)",
                    p->spec);
        return FALSE;
    }
    *oc = c;
    *oh = h;
    *ow = w;
    return TRUE;
}

gboolean tdm_transform_pipeline_apply(TdmTransformPipeline *p, TdmImage *img, TdmImage *scratch,
                                      guint64 seed, guint64 epoch, guint64 index, GError **error)
{
    g_return_val_if_fail(p != NULL && img != NULL && scratch != NULL, FALSE);
    TdmImage *src = img, *dst = scratch;
    for (guint i = 0; i < p->stages->len; i++) {
        Stage *st = g_ptr_array_index(p->stages, i);
        TdmRng rng;
        tdm_rng_init(&rng, seed, epoch, index, (guint64)st->t.position);
        int oc, oh, ow;
        if (!stage_shape(st, src->c, src->h, src->w, &oc, &oh, &ow, error)) {
            return FALSE;
        }
        dst->normalized = src->normalized;
        if (!st->t.klass->apply(&st->t, src, dst, &rng, error)) {
            return FALSE;
        }
        TdmImage *tmp = src;
        src = dst;
        dst = tmp;
    }
    if (src != img) {
        /* The result is in the scratch image: swap the buffers, both stay
         * owned by the caller. */
        TdmImage tmp = *img;
        *img = *scratch;
        *scratch = tmp;
    }
    if (!img->normalized) {
        size_t n = (size_t)img->c * img->h * img->w;
        for (size_t i = 0; i < n; i++) {
            img->data[i] *= 1.0f / 255.0f;
        }
        img->normalized = TRUE;
    }
    return TRUE;
}

static char *format_floats(int n, const float *v)
{
    GString *s = g_string_new(NULL);
    for (int i = 0; i < n; i++) {
        char buf[G_ASCII_DTOSTR_BUF_SIZE];
        g_string_append(s, g_ascii_dtostr(buf, sizeof(buf), (double)v[i]));
        if (i + 1 < n) {
            g_string_append_c(s, ',');
        }
    }
    return g_string_free(s, FALSE);
}

/* A `normalize` whose specs have mean and std (the transforms plugin's). */
static gboolean stage_is_normalize(const Stage *st)
{
    return strcmp(st->t.name, "normalize") == 0 && st->t.params != NULL &&
           tdm_params_has_key(st->t.params, "mean") && tdm_params_has_key(st->t.params, "std");
}

/* `normalize` takes mean= and std= (or two positional values); one given
 * without the other is the transform's own error. */
static gboolean stage_lacks_normalization(const Stage *st)
{
    return stage_is_normalize(st) && !tdm_params_is_set(st->t.params, "mean") &&
           !tdm_params_is_set(st->t.params, "std");
}

gboolean tdm_transform_pipeline_lacks_normalization(const TdmTransformPipeline *p)
{
    g_return_val_if_fail(p != NULL, FALSE);
    for (guint i = 0; i < p->stages->len; i++) {
        if (stage_lacks_normalization(g_ptr_array_index(p->stages, i))) {
            return TRUE;
        }
    }
    return FALSE;
}

TdmTransformPipeline *tdm_transform_pipeline_copy(const TdmTransformPipeline *p, GError **error)
{
    g_return_val_if_fail(p != NULL, NULL);
    /* Its stages' classes are registered still (the registry never drops
     * a feature), so the text parses as it did. */
    TdmTransformPipeline *copy = tdm_transform_pipeline_parse(p->spec, error);
    if (copy != NULL && p->n_norm > 0) {
        tdm_transform_pipeline_set_normalization(copy, p->n_norm, p->norm_mean, p->norm_std);
    }
    return copy;
}

void tdm_transform_pipeline_set_normalization(TdmTransformPipeline *p, int n, const float *mean,
                                              const float *std)
{
    g_return_if_fail(p != NULL && n >= 1 && n <= TDM_MAX_CHANNELS && mean != NULL &&
                     std != NULL);
    /* Stages are re-created here: a pipeline another holder may be running
     * (a loader's workers) must stay as it is. */
    g_return_if_fail(g_atomic_int_get(&p->ref_count) == 1);
    p->n_norm = n;
    memcpy(p->norm_mean, mean, sizeof(float) * (size_t)n);
    memcpy(p->norm_std, std, sizeof(float) * (size_t)n);
    for (guint i = 0; i < p->stages->len; i++) {
        Stage *st = g_ptr_array_index(p->stages, i);
        if (!stage_lacks_normalization(st)) {
            continue;
        }
        /* Re-create it with the defaults as if the user had written them. */
        TdmParamToken m = {g_strdup("mean"), format_floats(n, mean), st->column};
        TdmParamToken s = {g_strdup("std"), format_floats(n, std), st->column};
        g_array_append_val(st->args, m);
        g_array_append_val(st->args, s);
        if (st->t.klass->finalize != NULL) {
            st->t.klass->finalize(&st->t);
        }
        st->t.priv = NULL;
        GError *error = NULL;
        if (!stage_create(st, &error)) {
            /* Numbers formatted by us always parse; keep the transform
             * usable (it reports the missing values at output_shape). */
            g_warning("normalize: %s", error->message);
            g_clear_error(&error);
            g_array_set_size(st->args, st->args->len - 2);
            stage_create(st, NULL);
        }
    }
}

gboolean tdm_transform_pipeline_get_normalization(const TdmTransformPipeline *p, int *n,
                                                  float *mean, float *std)
{
    g_return_val_if_fail(p != NULL && n != NULL && mean != NULL && std != NULL, FALSE);
    for (guint i = p->stages->len; i-- > 0;) {
        const Stage *st = g_ptr_array_index(p->stages, i);
        if (strcmp(st->t.name, "normalize") != 0) {
            continue;
        }
        double m[TDM_MAX_CHANNELS], sd[TDM_MAX_CHANNELS];
        int nm = stage_is_normalize(st)
                     ? tdm_params_get_floats(st->t.params, "mean", m, TDM_MAX_CHANNELS)
                     : 0;
        int ns = stage_is_normalize(st)
                     ? tdm_params_get_floats(st->t.params, "std", sd, TDM_MAX_CHANNELS)
                     : 0;
        if (nm <= 0 || ns <= 0 || nm > TDM_MAX_CHANNELS || ns > TDM_MAX_CHANNELS) {
            return FALSE;
        }
        /* One value stands for every channel, as in the transform. */
        int count = MAX(nm, ns);
        for (int c = 0; c < count; c++) {
            mean[c] = (float)m[c < nm ? c : 0];
            std[c] = (float)sd[c < ns ? c : 0];
        }
        *n = count;
        return TRUE;
    }
    return FALSE;
}

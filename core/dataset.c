/* SPDX-License-Identifier: MIT */
/* core/dataset.c - opening datasets: which reader, which path, which
 * parameters.
 *
 * The reader itself is a DATASET feature found in the registry (the idx
 * plugin, say); this file decides which reader and binds its parameters
 * (<tandem/params.h>): "imagefolder path=DIR size=first", or the older
 * "imagefolder:DIR,size=first", whose trailing ",key=value" options become
 * the same parameters, so a reader never parses its path. `path` is every
 * reader's first parameter (positional and required), added here in front
 * of the reader's own specs. Known names resolve to the Debian packages'
 * copies under /usr/share/datasets, and "fashion-mnist" falls back to the
 * subset embedded in Tandem (installed under $(pkgdatadir), or in the
 * source tree when running uninstalled; the TDM_DATA_DIR environment
 * variable overrides both). The per-channel normalisation constants of
 * each known dataset live here too, next to the names, and are computed
 * from the first samples for any other dataset. A TdmDataset is allocated
 * inside a larger private struct that carries them, so the public struct
 * stays as it is. Datasets whose samples differ in size (height and width
 * 0, read with read_image: the image folder) are accepted when their
 * reader can decode samples one by one.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "internal.h"
#include "params-private.h"

#define DEBIAN_DATASETS_DIR "/usr/share/datasets"
#define NORM_SAMPLES 1000

typedef struct {
    TdmDataset pub;
    GMutex lock;
    gboolean norm_known;
    int n_norm;
    float mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS];
} DatasetImpl;

typedef struct {
    const char *name;
    const char *alias;   /* the directory name of the usual download, or NULL */
    gboolean installed;  /* a bare name resolves to a Debian package's IDX copy */
    gboolean embedded;   /* a subset ships with Tandem */
    int channels;
    float mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS];
} KnownDataset;

/* CIFAR has no Debian package: its names select a reader ("cifar10:DIR")
 * and its published constants, and nothing resolves a bare "cifar10". */
static const KnownDataset known_datasets[] = {
    {"fashion-mnist", NULL, TRUE, TRUE, 1, {0.2860f}, {0.3530f}},
    {"mnist", NULL, TRUE, FALSE, 1, {0.1307f}, {0.3081f}},
    {"cifar10", "cifar-10-batches-bin", FALSE, FALSE, 3, {0.4914f, 0.4822f, 0.4465f},
     {0.2470f, 0.2435f, 0.2616f}},
    {"cifar100", "cifar-100-binary", FALSE, FALSE, 3, {0.5071f, 0.4865f, 0.4409f},
     {0.2673f, 0.2564f, 0.2762f}},
};

static const KnownDataset *find_known(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(known_datasets); i++) {
        if (strcmp(known_datasets[i].name, name) == 0 ||
            g_strcmp0(known_datasets[i].alias, name) == 0) {
            return &known_datasets[i];
        }
    }
    return NULL;
}

static gboolean idx_dir_present(const char *dir)
{
    g_autofree char *raw = g_build_filename(dir, "train-images-idx3-ubyte", NULL);
    g_autofree char *gz = g_build_filename(dir, "train-images-idx3-ubyte.gz", NULL);
    return g_file_test(raw, G_FILE_TEST_IS_REGULAR) || g_file_test(gz, G_FILE_TEST_IS_REGULAR);
}

/* The text after the name when `spec` is "NAME key=value ..." (a reader
 * and its parameters), else NULL (a directory named "my data" is one). */
static const char *reader_args(const char *spec)
{
    if (g_file_test(spec, G_FILE_TEST_IS_DIR)) {
        return NULL;
    }
    const char *args = NULL;
    g_autofree char *name = tdm_params_split_name(spec, &args);
    return name != NULL && args[0] != '\0' ? args : NULL;
}

char *tdm_dataset_resolve(const char *spec, GError **error)
{
    g_return_val_if_fail(spec != NULL, NULL);
    if (reader_args(spec) != NULL) {
        return g_strdup(spec);
    }
    const char *colon = strchr(spec, ':');
    if (colon != NULL) {
        if (colon == spec || colon[1] == '\0') {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "bad dataset '%s': expected KIND:PATH or \"KIND path=PATH\" (e.g. "
                        "idx:/usr/share/datasets/fashion-mnist)", spec);
            return NULL;
        }
        return g_strdup(spec);
    }
    const KnownDataset *known = find_known(spec);
    if (known != NULL && !known->installed) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "dataset '%s' has no installed copy to resolve to: give its directory as "
                    "%s:PATH or \"%s path=PATH\" (e.g. %s:/data/%s)", spec, known->name,
                    known->name, known->name, known->alias);
        return NULL;
    }
    if (known == NULL) {
        if (g_file_test(spec, G_FILE_TEST_IS_DIR)) {
            return g_strconcat("idx:", spec, NULL);
        }
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "unknown dataset '%s': expected fashion-mnist, mnist, a directory of IDX "
                    "files, KIND:PATH or \"KIND path=PATH key=value ...\"", spec);
        return NULL;
    }

    g_autoptr(GPtrArray) tried = g_ptr_array_new_with_free_func(g_free);
    const char *env = g_getenv("TDM_DATA_DIR");
    if (env != NULL && env[0] != '\0') {
        g_ptr_array_add(tried, g_build_filename(env, spec, NULL));
    }
    g_ptr_array_add(tried, g_build_filename(DEBIAN_DATASETS_DIR, spec, NULL));
    if (known->embedded) {
        g_ptr_array_add(tried, g_build_filename(TDM_DATA_DIR, spec, NULL));
        g_ptr_array_add(tried, g_build_filename(TDM_SRC_DATA_DIR, spec, NULL));
    }
    for (guint i = 0; i < tried->len; i++) {
        if (idx_dir_present(tried->pdata[i])) {
            return g_strconcat("idx:", (char *)tried->pdata[i], NULL);
        }
    }
    g_ptr_array_add(tried, NULL);
    g_autofree char *where = g_strjoinv(", ", (char **)tried->pdata);
    g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                "dataset '%s' is not installed (looked in %s)", spec, where);
    return NULL;
}

static const TdmParamSpec common_params[] = {
    TDM_PARAM_SPEC_STRING("path", TDM_PARAM_REQUIRED | TDM_PARAM_POSITIONAL, NULL,
                          "the dataset's directory; every reader takes it"),
    TDM_PARAM_SPEC_END,
};

const TdmParamSpec *tdm_dataset_common_params(void)
{
    return common_params;
}

/* The specs a reader's parameters are bound to: the common ones first,
 * then the reader's own (less any it declares again). Free with g_free. */
static TdmParamSpec *dataset_specs(const TdmFeature *feature)
{
    const TdmParamSpec *own = tdm_feature_get_params(feature);
    guint n = 0;
    while (own != NULL && own[n].name != NULL) {
        n++;
    }
    TdmParamSpec *all = g_new0(TdmParamSpec, G_N_ELEMENTS(common_params) + n);
    guint k = 0;
    for (; common_params[k].name != NULL; k++) {
        all[k] = common_params[k];
    }
    for (guint i = 0; i < n; i++) {
        gboolean common = FALSE;
        for (guint c = 0; common_params[c].name != NULL; c++) {
            common = common || strcmp(own[i].name, common_params[c].name) == 0;
        }
        if (!common) {
            all[k++] = own[i];
        }
    }
    return all;
}

/* "PATH,key=value,key=value" as tokens: the path, then each trailing
 * ",word=value" without a slash (other commas belong to the path). */
static void peel_options(const char *path_and_options, GArray *tokens)
{
    g_autofree char *path = g_strdup(path_and_options);
    guint first_option = tokens->len;
    char *comma;
    while ((comma = strrchr(path, ',')) != NULL) {
        const char *opt = comma + 1;
        const char *eq = strchr(opt, '=');
        if (eq == NULL || eq == opt || strchr(opt, '/') != NULL ||
            strspn(opt, "abcdefghijklmnopqrstuvwxyz-_") != (size_t)(eq - opt)) {
            break;
        }
        TdmParamToken t = {g_strndup(opt, (gsize)(eq - opt)), g_strdup(eq + 1), 0};
        g_array_insert_val(tokens, first_option, t);
        *comma = '\0';
    }
    TdmParamToken p = {g_strdup("path"), g_steal_pointer(&path), 0};
    g_array_insert_val(tokens, first_option, p);
}

/* Whether `spec` is a reader's name alone ("imagefolder"), which then
 * lacks its path, rather than a known dataset or a directory. */
static gboolean is_bare_reader(const char *spec)
{
    return find_known(spec) == NULL && !g_file_test(spec, G_FILE_TEST_IS_DIR) &&
           tdm_registry_find(TDM_FEATURE_DATASET, spec, NULL) != NULL;
}

/* Which reader `spec` names and its parameters (transfer full). */
static TdmParams *dataset_params(const char *spec, TdmFeature **feature, GError **error)
{
    g_autoptr(GArray) tokens = tdm_param_tokens_new();
    g_autofree char *kind = NULL;
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    const char *args = reader_args(spec);
    if (args == NULL && is_bare_reader(spec)) {
        args = "";
    }
    if (args == NULL) {
        g_autofree char *resolved = tdm_dataset_resolve(spec, error);
        if (resolved == NULL) {
            return NULL;
        }
        char *colon = strchr(resolved, ':');
        kind = g_strndup(resolved, (gsize)(colon - resolved));
        peel_options(colon + 1, tokens);
    } else {
        kind = tdm_params_split_name(spec, NULL);
    }
    if ((*feature = tdm_registry_find(TDM_FEATURE_DATASET, kind, error)) == NULL) {
        return NULL;
    }
    g_autofree TdmParamSpec *specs = dataset_specs(*feature);
    g_autoptr(TdmParams) params = tdm_params_new(kind, specs, error);
    if (params == NULL ||
        (args != NULL && !tdm_param_tokens_read(kind, args, &args, FALSE, FALSE, tokens, error)) ||
        !tdm_params_bind_tokens(params, tokens, FALSE, error)) {
        return NULL;
    }
    return g_steal_pointer(&params);
}

TdmDataset *tdm_dataset_open(const char *spec, const char *split, GError **error)
{
    g_return_val_if_fail(spec != NULL && split != NULL, NULL);
    TdmFeature *feature = NULL;
    TdmParams *params = dataset_params(spec, &feature, error);
    if (params == NULL) {
        return NULL;
    }
    const char *kind = tdm_params_get_name(params);
    const char *path = tdm_params_get_string(params, "path");
    const TdmDatasetClass *klass = tdm_feature_get_class(feature);

    DatasetImpl *impl = g_new0(DatasetImpl, 1);
    g_mutex_init(&impl->lock);
    TdmDataset *ds = &impl->pub;
    ds->klass = klass;
    ds->kind = g_strdup(kind);
    ds->path = g_strdup(path);
    ds->split = g_strdup(split);
    ds->params = params;
    if (!klass->open(ds, path, split, error)) {
        tdm_dataset_close(ds);
        return NULL;
    }
    /* Size 0 x 0 means "varies": allowed when samples can be decoded one by one. */
    gboolean variable = ds->height == 0 && ds->width == 0 && klass->read_image != NULL;
    if (ds->length <= 0 || ds->channels < 1 || ds->channels > TDM_MAX_CHANNELS ||
        (!variable && (ds->height <= 0 || ds->width <= 0)) || ds->num_classes <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "dataset reader '%s' opened %s with an invalid description (%" G_GINT64_FORMAT
                    " samples of %dx%dx%d, %d classes)", kind, path, ds->length, ds->channels,
                    ds->height, ds->width, ds->num_classes);
        tdm_dataset_close(ds);
        return NULL;
    }

    /* Known datasets by name, reader or directory name, so that
     * "idx:/some/where/mnist" is normalised like "mnist" and
     * "cifar:/data/cifar-10-batches-bin" like "cifar10". */
    g_autofree char *base = g_path_get_basename(path);
    const KnownDataset *known = find_known(spec);
    if (known == NULL) {
        known = find_known(kind);
    }
    if (known == NULL) {
        known = find_known(base);
    }
    if (known != NULL && ds->channels == known->channels) {
        impl->norm_known = TRUE;
        impl->n_norm = known->channels;
        for (int ch = 0; ch < known->channels; ch++) {
            impl->mean[ch] = known->mean[ch];
            impl->std[ch] = known->std[ch];
        }
    }
    return ds;
}

gboolean tdm_dataset_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                          GError **error)
{
    g_return_val_if_fail(ds != NULL && image != NULL && label != NULL, FALSE);
    if (index < 0 || index >= ds->length) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: sample %" G_GINT64_FORMAT " out of range (0..%" G_GINT64_FORMAT ")",
                    ds->path, index, ds->length - 1);
        return FALSE;
    }
    return ds->klass->read(ds, index, image, label, error);
}

void tdm_dataset_close(TdmDataset *ds)
{
    if (ds == NULL) {
        return;
    }
    DatasetImpl *impl = (DatasetImpl *)ds;
    if (ds->priv != NULL && ds->klass->close != NULL) {
        ds->klass->close(ds);
    }
    g_free(ds->kind);
    g_free(ds->path);
    g_free(ds->split);
    tdm_params_unref(ds->params);
    g_mutex_clear(&impl->lock);
    g_free(impl);
}

/* Estimate from samples into impl (called with impl->lock held). Fixed-size
 * datasets use their first samples; variable-size ones (read one by one,
 * usually sorted by class) a spread of samples over the whole dataset. */
static gboolean estimate_normalization(TdmDataset *ds, GError **error)
{
    DatasetImpl *impl = (DatasetImpl *)ds;
    gboolean variable = ds->height <= 0 || ds->width <= 0;
    int c = ds->channels;
    size_t plane = (size_t)MAX(ds->height, 0) * (size_t)MAX(ds->width, 0);
    g_autofree guint8 *img = variable ? NULL : g_malloc(plane * (size_t)c);
    TdmImage decoded = {0};
    double sum[TDM_MAX_CHANNELS] = {0}, sq[TDM_MAX_CHANNELS] = {0}, total = 0;
    int64_t count = MIN(ds->length, NORM_SAMPLES);
    gboolean ok = TRUE;
    for (int64_t i = 0; ok && i < count; i++) {
        int32_t label;
        if (variable) {
            ok = ds->klass->read_image(ds, i * ds->length / count, &decoded, &label, error);
            plane = ok ? (size_t)decoded.h * (size_t)decoded.w : 0;
            ok = ok && decoded.c == c;
        } else {
            ok = tdm_dataset_read(ds, i, img, &label, error);
        }
        for (int ch = 0; ok && ch < c; ch++) {
            for (size_t k = 0; k < plane; k++) {
                double v = (variable ? decoded.data[(size_t)ch * plane + k]
                                     : img[(size_t)ch * plane + k]) / 255.0;
                sum[ch] += v;
                sq[ch] += v * v;
            }
        }
        total += (double)plane;
    }
    tdm_image_clear(&decoded);
    if (!ok) {
        if (error != NULL && *error == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                        "%s: the %s reader returned an image without %d channels", ds->path,
                        ds->kind, c);
        }
        return FALSE;
    }
    impl->n_norm = c;
    for (int ch = 0; ch < c; ch++) {
        double m = total > 0 ? sum[ch] / total : 0.0;
        double var = total > 0 ? sq[ch] / total - m * m : 0.0;
        impl->mean[ch] = (float)m;
        impl->std[ch] = (float)(var > 1e-12 ? sqrt(var) : 1.0);
    }
    impl->norm_known = TRUE;
    return TRUE;
}

/* Per-channel mean and std of the dataset's pixels in [0, 1]: the published
 * constants for known datasets, else estimated from the first samples
 * (once, then cached). */
gboolean tdm_dataset_get_normalization(TdmDataset *ds, int *n, float *mean, float *std,
                                       GError **error)
{
    g_return_val_if_fail(ds != NULL && n != NULL && mean != NULL && std != NULL, FALSE);
    DatasetImpl *impl = (DatasetImpl *)ds;
    gboolean ok = TRUE;
    g_mutex_lock(&impl->lock);
    if (!impl->norm_known) {
        ok = estimate_normalization(ds, error);
    }
    if (ok) {
        *n = impl->n_norm;
        for (int ch = 0; ch < impl->n_norm; ch++) {
            mean[ch] = impl->mean[ch];
            std[ch] = impl->std[ch];
        }
    }
    g_mutex_unlock(&impl->lock);
    return ok;
}

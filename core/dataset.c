/* core/dataset.c - opening datasets by name or by "KIND:PATH".
 *
 * The reader itself is a DATASET feature found in the registry (the idx
 * plugin, say); this file only decides which reader and which path. Known
 * names resolve to the Debian packages' copies under /usr/share/datasets,
 * and "fashion-mnist" falls back to the subset embedded in Tandem (installed
 * under $(pkgdatadir), or in the source tree when running uninstalled; the
 * TDM_DATA_DIR environment variable overrides both). The per-channel
 * normalisation constants of each known dataset live here too, next to the
 * names, and are computed from the first samples for any other dataset.
 * A TdmDataset is allocated inside a larger private struct that carries
 * them, so the public struct stays as it is. Datasets whose samples differ
 * in size (height and width 0, read with read_image: the image folder) are
 * accepted when their reader can decode samples one by one.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "internal.h"

#define DEBIAN_DATASETS_DIR "/usr/share/datasets"
#define NORM_SAMPLES 1000

typedef struct {
    TdmDataset pub;
    GMutex lock;
    gboolean norm_known;
    int n_norm;
    float mean[4], std[4];
} DatasetImpl;

typedef struct {
    const char *name;
    const char *alias;   /* the directory name of the usual download, or NULL */
    gboolean installed;  /* a bare name resolves to a Debian package's IDX copy */
    gboolean embedded;   /* a subset ships with Tandem */
    int channels;
    float mean[3], std[3];
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

char *tdm_dataset_resolve(const char *spec, GError **error)
{
    g_return_val_if_fail(spec != NULL, NULL);
    const char *colon = strchr(spec, ':');
    if (colon != NULL) {
        if (colon == spec || colon[1] == '\0') {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "bad dataset '%s': expected KIND:PATH (e.g. idx:/usr/share/datasets/"
                        "fashion-mnist)", spec);
            return NULL;
        }
        return g_strdup(spec);
    }
    const KnownDataset *known = find_known(spec);
    if (known != NULL && !known->installed) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "dataset '%s' has no installed copy to resolve to: give its directory as "
                    "%s:PATH (e.g. %s:/data/%s)", spec, known->name, known->name, known->alias);
        return NULL;
    }
    if (known == NULL) {
        if (g_file_test(spec, G_FILE_TEST_IS_DIR)) {
            return g_strconcat("idx:", spec, NULL);
        }
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "unknown dataset '%s': expected fashion-mnist, mnist, a directory of IDX "
                    "files or KIND:PATH", spec);
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

TdmDataset *tdm_dataset_open(const char *spec, const char *split, GError **error)
{
    g_return_val_if_fail(spec != NULL && split != NULL, NULL);
    g_autofree char *resolved = tdm_dataset_resolve(spec, error);
    if (resolved == NULL || !tdm_registry_init(error)) {
        return NULL;
    }
    char *colon = strchr(resolved, ':');
    *colon = '\0';
    const char *kind = resolved, *path = colon + 1;
    TdmFeature *feature = tdm_registry_find(TDM_FEATURE_DATASET, kind, error);
    if (feature == NULL) {
        return NULL;
    }
    const TdmDatasetClass *klass = tdm_feature_get_class(feature);

    DatasetImpl *impl = g_new0(DatasetImpl, 1);
    g_mutex_init(&impl->lock);
    TdmDataset *ds = &impl->pub;
    ds->klass = klass;
    ds->kind = g_strdup(kind);
    ds->path = g_strdup(path);
    ds->split = g_strdup(split);
    if (!klass->open(ds, path, split, error)) {
        tdm_dataset_close(ds);
        return NULL;
    }
    /* Size 0 x 0 means "varies": allowed when samples can be decoded one by one. */
    gboolean variable = ds->height == 0 && ds->width == 0 && klass->read_image != NULL;
    if (ds->length <= 0 || ds->channels < 1 || ds->channels > 4 ||
        (!variable && (ds->height <= 0 || ds->width <= 0)) || ds->num_classes <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "dataset reader '%s' opened %s with an invalid description (%" G_GINT64_FORMAT
                    " samples of %dx%dx%d, %d classes)", kind, path, ds->length, ds->channels,
                    ds->height, ds->width, ds->num_classes);
        tdm_dataset_close(ds);
        return NULL;
    }

    /* Known datasets by name, reader or directory name (without ",options"),
     * so that "idx:/some/where/mnist" is normalised like "mnist" and
     * "cifar:/data/cifar-10-batches-bin" like "cifar10". */
    g_autofree char *base = g_path_get_basename(path);
    base[strcspn(base, ",")] = '\0';
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
    double sum[4] = {0}, sq[4] = {0}, total = 0;
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

/* SPDX-License-Identifier: MIT */
/* plugins/datasets/cifar.c - the CIFAR-10 and CIFAR-100 binary readers.
 *
 * The binary distributions are flat files of fixed-size records: CIFAR-10
 * ("cifar-10-batches-bin": data_batch_1.bin .. data_batch_5.bin for train,
 * test_batch.bin for test) has 1 label byte + 3072 pixel bytes per record;
 * CIFAR-100 ("cifar-100-binary": train.bin, test.bin) has a coarse and a fine
 * label byte + 3072 pixel bytes. Pixels are already 3x32x32 CHW, so a read
 * is one memcpy out of a read-only memory map: reads need no lock and are
 * safe from any number of threads. Everything is checked at open (each file
 * a whole number of records, every label in range) and errors name the file,
 * the record and its byte offset, so a truncated download fails before
 * training starts.
 *
 * The same reader is registered three times: "cifar" detects the format from
 * the files present, "cifar10" and "cifar100" insist on one (and let the core
 * pick the published normalisation constants by name). The label=
 * parameter, "cifar100 /data/cifar-100-binary label=coarse" (or the older
 * "cifar100:/data/cifar-100-binary,label=coarse"), trains on the 20
 * superclasses instead of the 100 fine classes.
 */
#include <string.h>

#include <tandem/data.h>
#include <tandem/params.h>
#include <tandem/plugin.h>

#include "datasets-util.h"

#define CIFAR_PIXELS 3072
#define CIFAR10_TRAIN_BATCHES 5

typedef struct {
    char *path;
    GMappedFile *map;
    const guint8 *data;
    int64_t count; /* records in this file */
    int64_t first; /* index of its first record in the dataset */
} CifarFile;

typedef struct {
    CifarFile files[CIFAR10_TRAIN_BATCHES];
    int n_files;
    size_t record;   /* bytes per record */
    size_t label_at; /* offset of the label used, within a record */
} CifarDataset;

typedef enum { FORMAT_DETECT, FORMAT_CIFAR10, FORMAT_CIFAR100 } CifarFormat;

/* CIFAR-100's label= parameter (cifar and cifar100 take it; without
 * parameters, as when a caller runs open() itself: fine). */
static gboolean cifar_label_coarse(const TdmDataset *ds)
{
    return ds->params != NULL && tdm_params_has_key(ds->params, "label") &&
           tdm_params_get_choice(ds->params, "label") == 1;
}

static gboolean file_present(const char *dir, const char *name)
{
    g_autofree char *p = g_build_filename(dir, name, NULL);
    return g_file_test(p, G_FILE_TEST_IS_REGULAR);
}

static CifarFormat cifar_detect(const char *dir)
{
    if (file_present(dir, "data_batch_1.bin") || file_present(dir, "test_batch.bin")) {
        return FORMAT_CIFAR10;
    }
    if (file_present(dir, "train.bin") || file_present(dir, "test.bin")) {
        return FORMAT_CIFAR100;
    }
    return FORMAT_DETECT;
}

/* Map one file and check that it holds whole records with labels in range. */
static gboolean cifar_file_open(CifarFile *f, const char *dir, const char *name, size_t record,
                                CifarFormat format, GError **error)
{
    f->path = g_build_filename(dir, name, NULL);
    GError *local = NULL;
    f->map = g_mapped_file_new(f->path, FALSE, &local);
    if (f->map == NULL) {
        ds_fail(error, TDM_ERROR_IO, "%s", local->message);
        g_error_free(local);
        return FALSE;
    }
    size_t len = g_mapped_file_get_length(f->map);
    f->data = (const guint8 *)g_mapped_file_get_contents(f->map);
    if (len == 0) {
        return ds_fail(error, TDM_ERROR_CORRUPT, "%s: empty file (no %zu-byte records)", f->path,
                       record);
    }
    if (len % record != 0) {
        size_t whole = len / record;
        return ds_fail(error, TDM_ERROR_CORRUPT,
                       "%s: truncated record %zu at byte %zu: the file has %zu bytes, not a "
                       "whole number of %zu-byte records (%zu of %zu bytes present)",
                       f->path, whole, whole * record, len, record, len - whole * record, record);
    }
    f->count = (int64_t)(len / record);
    for (int64_t i = 0; i < f->count; i++) {
        size_t at = (size_t)i * record;
        const guint8 *r = f->data + at;
        if (format == FORMAT_CIFAR10 && r[0] >= 10) {
            return ds_fail(error, TDM_ERROR_CORRUPT,
                           "%s: record %" G_GINT64_FORMAT " at byte %zu has label %u (CIFAR-10 "
                           "labels are 0..9)",
                           f->path, i, at, r[0]);
        }
        if (format == FORMAT_CIFAR100 && (r[0] >= 20 || r[1] >= 100)) {
            gboolean coarse_bad = r[0] >= 20;
            return ds_fail(error, TDM_ERROR_CORRUPT,
                           "%s: record %" G_GINT64_FORMAT " at byte %zu has %s label %u "
                           "(CIFAR-100 %s labels are 0..%d)",
                           f->path, i, at + (coarse_bad ? 0 : 1), coarse_bad ? "coarse" : "fine",
                           coarse_bad ? r[0] : r[1], coarse_bad ? "coarse" : "fine",
                           coarse_bad ? 19 : 99);
        }
    }
    return TRUE;
}

static void cifar_close(TdmDataset *ds)
{
    CifarDataset *d = ds->priv;
    if (d == NULL) {
        return;
    }
    for (int i = 0; i < CIFAR10_TRAIN_BATCHES; i++) {
        if (d->files[i].map != NULL) {
            g_mapped_file_unref(d->files[i].map);
        }
        g_free(d->files[i].path);
    }
    g_free(d);
    ds->priv = NULL;
}

/* The file names of `split` for `format`, NULL-terminated (transfer full).
 * CIFAR-10's training batches must run 1..k without a gap. */
static char **cifar_split_files(const char *dir, CifarFormat format, const char *split,
                                GError **error)
{
    gboolean train = g_strcmp0(split, "train") == 0;
    if (!train && g_strcmp0(split, "test") != 0) {
        ds_fail(error, TDM_ERROR_INVALID_ARG, "cifar: unknown split '%s' (expected train or test)",
                split);
        return NULL;
    }
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    if (format == FORMAT_CIFAR100) {
        g_ptr_array_add(names, g_strdup(train ? "train.bin" : "test.bin"));
    } else if (!train) {
        g_ptr_array_add(names, g_strdup("test_batch.bin"));
    } else {
        int last = 0;
        for (int k = 1; k <= CIFAR10_TRAIN_BATCHES; k++) {
            g_autofree char *name = g_strdup_printf("data_batch_%d.bin", k);
            if (!file_present(dir, name)) {
                continue;
            }
            if (last != k - 1) {
                ds_fail(error, TDM_ERROR_IO,
                        "%s: has %s but no data_batch_%d.bin (an incomplete download?)", dir, name,
                        last + 1);
                return NULL;
            }
            last = k;
            g_ptr_array_add(names, g_steal_pointer(&name));
        }
        if (last == 0) {
            g_ptr_array_add(names, g_strdup("data_batch_1.bin"));
        }
    }
    for (guint i = 0; i < names->len; i++) {
        if (!file_present(dir, names->pdata[i])) {
            ds_fail(error, TDM_ERROR_IO, "%s: no %s in this directory (the %s %s split)", dir,
                    (char *)names->pdata[i], format == FORMAT_CIFAR100 ? "CIFAR-100" : "CIFAR-10",
                    split);
            return NULL;
        }
    }
    g_ptr_array_add(names, NULL);
    return (char **)g_ptr_array_free(g_steal_pointer(&names), FALSE);
}

static gboolean cifar_open_files(TdmDataset *ds, const char *dir, const char *split,
                                 GError **error)
{
    gboolean coarse = cifar_label_coarse(ds);
    CifarFormat want = FORMAT_DETECT;
    if (g_strcmp0(ds->kind, "cifar10") == 0) {
        want = FORMAT_CIFAR10;
    } else if (g_strcmp0(ds->kind, "cifar100") == 0) {
        want = FORMAT_CIFAR100;
    }
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        return ds_fail(error, TDM_ERROR_IO,
                       "%s: no such dataset directory (the cifar reader expects the binary "
                       "version: data_batch_1..5.bin and test_batch.bin for CIFAR-10, "
                       "train.bin and test.bin for CIFAR-100)",
                       dir);
    }
    CifarFormat format = cifar_detect(dir);
    if (format == FORMAT_DETECT) {
        return ds_fail(error, TDM_ERROR_IO,
                       "%s: no CIFAR files here (expected data_batch_1..5.bin and "
                       "test_batch.bin for CIFAR-10, or train.bin and test.bin for CIFAR-100)",
                       dir);
    }
    if (want != FORMAT_DETECT && want != format) {
        return ds_fail(error, TDM_ERROR_IO, "%s: holds %s files, not %s (use cifar:%s)", dir,
                       format == FORMAT_CIFAR10 ? "CIFAR-10" : "CIFAR-100",
                       want == FORMAT_CIFAR10 ? "CIFAR-10" : "CIFAR-100", dir);
    }
    if (coarse && format != FORMAT_CIFAR100) {
        return ds_fail(error, TDM_ERROR_INVALID_ARG, "%s: label=coarse applies to CIFAR-100 only",
                       dir);
    }
    g_auto(GStrv) names = cifar_split_files(dir, format, split, error);
    if (names == NULL) {
        return FALSE;
    }

    CifarDataset *d = g_new0(CifarDataset, 1);
    ds->priv = d;
    d->record = (format == FORMAT_CIFAR10 ? 1 : 2) + CIFAR_PIXELS;
    d->label_at = format == FORMAT_CIFAR100 && !coarse ? 1 : 0;
    int64_t total = 0;
    for (int i = 0; names[i] != NULL; i++) {
        CifarFile *f = &d->files[d->n_files++];
        if (!cifar_file_open(f, dir, names[i], d->record, format, error)) {
            return FALSE;
        }
        f->first = total;
        total += f->count;
    }
    ds->length = total;
    ds->channels = 3;
    ds->height = 32;
    ds->width = 32;
    ds->num_classes = format == FORMAT_CIFAR10 ? 10 : coarse ? 20 : 100;
    return TRUE;
}

static gboolean cifar_open(TdmDataset *ds, const char *path, const char *split, GError **error)
{
    if (!cifar_open_files(ds, path, split, error)) {
        cifar_close(ds);
        return FALSE;
    }
    return TRUE;
}

static gboolean cifar_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                           GError **error)
{
    CifarDataset *d = ds->priv;
    if (!ds_check_index(ds, index, "cifar", error)) {
        return FALSE;
    }
    int i = 0;
    while (index >= d->files[i].first + d->files[i].count) {
        i++;
    }
    const guint8 *r = d->files[i].data + (size_t)(index - d->files[i].first) * d->record;
    *label = r[d->label_at];
    memcpy(image, r + d->record - CIFAR_PIXELS, CIFAR_PIXELS);
    return TRUE;
}

static const TdmDatasetClass cifar_class = {
    TDM_CLASS_HEADER(TDM_DATASET_IFACE_VERSION, TdmDatasetClass),
    .open = cifar_open,
    .read = cifar_read,
    .close = cifar_close,
};

static const TdmParamSpec cifar_params[] = {
    TDM_PARAM_SPEC_CHOICE("label", 0, "fine", "fine|coarse",
                          "CIFAR-100: fine (100 classes) or coarse (20 superclasses), e.g. "
                          "\"cifar100 DIR label=coarse\""),
    TDM_PARAM_SPEC_END,
};

static gboolean cifar_init(TdmPlugin *plugin, GError **error)
{
    return tdm_plugin_add_feature(plugin, TDM_FEATURE_DATASET, "cifar", 50, &cifar_class,
                                  "CIFAR-10 or CIFAR-100 binary files (detected from the names)",
                                  cifar_params, NULL, error) != NULL &&
           tdm_plugin_add_feature(plugin, TDM_FEATURE_DATASET, "cifar10", 50, &cifar_class,
                                  "CIFAR-10 binary files (data_batch_1..5.bin, test_batch.bin)",
                                  NULL, NULL, error) != NULL &&
           tdm_plugin_add_feature(plugin, TDM_FEATURE_DATASET, "cifar100", 50, &cifar_class,
                                  "CIFAR-100 binary files (train.bin, test.bin)", cifar_params,
                                  NULL, error) != NULL;
}

TDM_PLUGIN_DEFINE(cifar, "MIT", "CIFAR-10 and CIFAR-100 binary dataset reader",
                  "tandem", cifar_init)

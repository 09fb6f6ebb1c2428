/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-dataset.h - what the dataset readers' fuzz targets
 * share: a scratch folder emptied of the target's files before each input,
 * and opening a dataset that may rightly refuse the input.
 */
#ifndef TDM_FUZZ_DATASET_H
#define TDM_FUZZ_DATASET_H

#include <glib/gstdio.h>

#include <tandem/tandem.h>

/* The target's scratch folder (made from `tmpl` on the first call) with
 * none of `names` left in it; NULL when it cannot be made. */
static const char *fuzz_dir_emptied(const char *tmpl, const char *const *names, size_t n_names)
{
    static char *dir;
    if (dir == NULL && (dir = g_dir_make_tmp(tmpl, NULL)) == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n_names; i++) {
        g_autofree char *p = g_build_filename(dir, names[i], NULL);
        g_unlink(p);
    }
    return dir;
}

/* The dataset `spec` opens, or NULL when the reader refused it, which it
 * must do with an error. */
static TdmDataset *fuzz_dataset_open(const char *spec, const char *split)
{
    GError *error = NULL;
    TdmDataset *ds = tdm_dataset_open(spec, split, &error);
    if (ds == NULL) {
        g_assert(error != NULL);
        g_error_free(error);
    }
    return ds;
}

#endif /* TDM_FUZZ_DATASET_H */

/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-idx.c - libFuzzer target for the idx dataset reader.
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-idx.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-idx
 *   TDM_PLUGIN_SYSTEM_PATH=plugins/.libs LD_LIBRARY_PATH=core/.libs ./fuzz-idx corpus/
 * The first input byte chooses which file the rest replaces (images or
 * labels, raw or gzip) in a directory whose other file is valid, and (bit 2)
 * whether the dataset is told first that every sample comes (prepare: the
 * whole-file inflate); every sample of a dataset that opens is then read.
 */
#include <string.h>
#include <unistd.h>

#include "fuzz-dataset.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static const char *const names[] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
};

static void write_valid(const char *dir, const char *name)
{
    /* 3 images of 2x2 and their labels. */
    static const guint8 images[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2,
                                    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    static const guint8 labels[] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3};
    g_autofree char *p = g_build_filename(dir, name, NULL);
    gboolean img = strstr(name, "images") != NULL;
    g_file_set_contents(p, img ? (const char *)images : (const char *)labels,
                        img ? sizeof(images) : sizeof(labels), NULL);
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    const char *dir = fuzz_dir_emptied("fuzz-idx-XXXXXX", names, G_N_ELEMENTS(names));
    if (dir == NULL || size < 1) {
        return 0;
    }
    unsigned which = data[0] % 4;
    /* The other kind of file, raw and valid. */
    write_valid(dir, which % 2 == 0 ? names[1] : names[0]);
    g_autofree char *p = g_build_filename(dir, names[which], NULL);
    g_file_set_contents(p, (const char *)data + 1, (gssize)(size - 1), NULL);

    g_autofree char *spec = g_strconcat("idx:", dir, NULL);
    TdmDataset *ds = fuzz_dataset_open(spec, "train");
    if (ds == NULL) {
        return 0;
    }
    GError *error = NULL;
    if ((data[0] & 4) && ds->klass->prepare != NULL) {
        ds->klass->prepare(ds, ds->length);
    }
    size_t sample = (size_t)ds->channels * ds->height * ds->width;
    guint8 *img = g_malloc(sample);
    int32_t label;
    for (int64_t i = 0; i < ds->length && i < 4096; i++) {
        if (!tdm_dataset_read(ds, i, img, &label, &error)) {
            g_clear_error(&error);
            break;
        }
        g_assert(label >= 0 && label < ds->num_classes);
    }
    g_free(img);
    tdm_dataset_close(ds);
    return 0;
}

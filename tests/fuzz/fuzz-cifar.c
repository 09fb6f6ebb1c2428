/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-cifar.c - libFuzzer target for the cifar dataset reader.
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-cifar.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-cifar
 *   TDM_PLUGIN_SYSTEM_PATH=plugins/.libs LD_LIBRARY_PATH=core/.libs ./fuzz-cifar corpus/
 * The first input byte chooses the file the rest becomes (a CIFAR-10 train
 * batch, the CIFAR-10 test batch, or CIFAR-100 train.bin, read as fine or
 * coarse labels); every sample of a dataset that opens is then read and its
 * label checked against the class count.
 */
#include <string.h>

#include "fuzz-dataset.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static const char *const names[] = {"data_batch_1.bin", "test_batch.bin", "train.bin"};

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    const char *dir = fuzz_dir_emptied("fuzz-cifar-XXXXXX", names, G_N_ELEMENTS(names));
    if (dir == NULL || size < 1) {
        return 0;
    }
    unsigned which = data[0] % 4;
    const char *name = names[MIN(which, 2u)];
    g_autofree char *p = g_build_filename(dir, name, NULL);
    g_file_set_contents(p, (const char *)data + 1, (gssize)(size - 1), NULL);

    g_autofree char *spec = g_strconcat("cifar:", dir, which == 3 ? ",label=coarse" : "", NULL);
    TdmDataset *ds = fuzz_dataset_open(spec, which == 1 ? "test" : "train");
    if (ds == NULL) {
        return 0;
    }
    guint8 img[3 * 32 * 32];
    int32_t label;
    for (int64_t i = 0; i < ds->length; i++) {
        g_assert(tdm_dataset_read(ds, i, img, &label, NULL));
        g_assert(label >= 0 && label < ds->num_classes);
    }
    tdm_dataset_close(ds);
    return 0;
}

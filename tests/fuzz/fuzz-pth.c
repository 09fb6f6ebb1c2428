/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-pth.c - libFuzzer target for the PyTorch .pth reader
 * (libzip archive, strict pickle reader, views against storages).
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-pth.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-pth
 *   LD_LIBRARY_PATH=core/.libs ./fuzz-pth corpus/
 * Seed the corpus with small torch.save files (tests/pth-make.py writes
 * some). An archive's CRCs stop most mutations before the pickle; for the
 * pickle reader itself, add -DFUZZ_PICKLE_ONLY: each input is then the
 * pickle, wrapped here into an archive with a 48-byte storage "0".
 * For coverage of the core, configure with CC=clang
 * CFLAGS="-fsanitize=fuzzer-no-link,address".
 */
#include <string.h>
#include <zip.h>

#include <tandem/tandem.h>

#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

#ifdef FUZZ_PICKLE_ONLY
static const char *pickle_archive(const guint8 *data, size_t size)
{
    static char *path;
    static const guint8 storage[48];
    if (path == NULL) {
        int fd = g_file_open_tmp("fuzz-pth-XXXXXX.pth", &path, NULL);
        if (fd < 0) {
            return NULL;
        }
        close(fd);
    }
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, NULL);
    if (za == NULL) {
        return NULL;
    }
    zip_source_t *a = zip_source_buffer(za, size > 0 ? (const void *)data : "", size, 0);
    zip_source_t *b = zip_source_buffer(za, storage, sizeof storage, 0);
    zip_int64_t ia = a != NULL ? zip_file_add(za, "f/data.pkl", a, 0) : -1;
    zip_int64_t ib = b != NULL ? zip_file_add(za, "f/data/0", b, 0) : -1;
    if (ia < 0 || ib < 0) {
        zip_discard(za);
        return NULL;
    }
    zip_set_file_compression(za, (zip_uint64_t)ia, ZIP_CM_STORE, 0);
    zip_set_file_compression(za, (zip_uint64_t)ib, ZIP_CM_STORE, 0);
    return zip_close(za) == 0 ? path : NULL;
}
#endif

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
#ifdef FUZZ_PICKLE_ONLY
    const char *path = pickle_archive(data, size);
#else
    const char *path = fuzz_input_file("fuzz-pth-XXXXXX.pth", data, size);
#endif
    if (path == NULL) {
        return 0;
    }
    GError *error = NULL;
    TdmSafeTensors *st = tdm_pth_load(path, &error);
    fuzz_check_weights(st, error, path);
    return 0;
}

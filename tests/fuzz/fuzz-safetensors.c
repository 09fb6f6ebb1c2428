/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-safetensors.c - libFuzzer target for the safetensors reader.
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-safetensors.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-safetensors
 *   LD_LIBRARY_PATH=core/.libs ./fuzz-safetensors corpus/
 * (for coverage of the core itself, configure with CC=clang
 * CFLAGS="-fsanitize=fuzzer-no-link,address"; or, for the reader alone,
 * add -DTDM_COMPILATION -DTDM_VERSION=\"fuzz\" -I../../core
 * $(pkg-config --cflags --libs json-glib-1.0) ../../core/safetensors.c
 * ../../core/safetensors-header.c to the line above, whose copies then
 * stand in for the library's).
 * The reader takes a path, so each input is written to a temporary file.
 */
#include <string.h>

#include <tandem/tandem.h>

#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    const char *path = fuzz_input_file("fuzz-st-XXXXXX.safetensors", data, size);
    if (path == NULL) {
        return 0;
    }
    GError *error = NULL;
    TdmSafeTensors *st = tdm_safetensors_load(path, &error);
    fuzz_check_weights(st, error, path);
    return 0;
}

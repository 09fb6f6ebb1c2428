/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-checkpoint.c - libFuzzer target for the checkpoint
 * reader: the safetensors file, then its "tandem-checkpoint" metadata
 * (format, version, the JSON of the per-tensor checksums) and every
 * tensor's CRC-32 against it.
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-checkpoint.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-checkpoint
 *   LD_LIBRARY_PATH=core/.libs ./fuzz-checkpoint corpus/
 * A corpus to start from: any checkpoint `tandem train --checkpoint-dir`
 * wrote (a small mlp one is 4 MiB; --max-steps 1 makes one fast).
 * The reader takes a path, so each input is written to a temporary file.
 */
#include <string.h>

#include <tandem/tandem.h>

#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    const char *path = fuzz_input_file("fuzz-ckpt-XXXXXX.safetensors", data, size);
    if (path == NULL) {
        return 0;
    }
    GError *error = NULL;
    TdmSafeTensors *st = tdm_checkpoint_load(path, &error);
    if (st != NULL) {
        /* a loaded checkpoint says what it is */
        g_assert(strcmp(tdm_safetensors_metadata(st, "format"), TDM_CHECKPOINT_FORMAT) == 0);
        tdm_safetensors_free(st);
    } else {
        /* every refusal names the file */
        g_assert(error != NULL && strstr(error->message, path) != NULL);
        g_error_free(error);
    }
    return 0;
}

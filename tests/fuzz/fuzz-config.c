/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-config.c - libFuzzer target for the INI configuration
 * loader and tdm_train_config_set().
 *
 * Not built by make; from a build directory:
 *   clang -g -O1 -fsanitize=fuzzer,address -I../../include -I. \
 *     $(pkg-config --cflags glib-2.0) ../../tests/fuzz/fuzz-config.c \
 *     -Lcore/.libs -ltandem-1 $(pkg-config --libs glib-2.0) -o fuzz-config
 *   LD_LIBRARY_PATH=core/.libs ./fuzz-config corpus/
 * Each input is tried as an INI file, and its first line as "key=value".
 */
#include <string.h>

#include <tandem/tandem.h>

#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
    const char *path = fuzz_input_file("fuzz-cfg-XXXXXX.ini", data, size);
    if (path == NULL) {
        return 0;
    }
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    GError *error = NULL;
    if (!tdm_train_config_load(&cfg, path, &error)) {
        g_assert(error != NULL);
        g_clear_error(&error);
    }
    char *text = g_strndup((const char *)data, size);
    char *nl = strchr(text, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    char *eq = strchr(text, '=');
    if (eq != NULL) {
        *eq = '\0';
        if (!tdm_train_config_set(&cfg, text, eq + 1, &error)) {
            g_assert(error != NULL && strstr(error->message, text) != NULL);
            g_clear_error(&error);
        }
    }
    g_free(text);
    tdm_train_config_clear(&cfg);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz-file.h - for the fuzz targets whose code under test
 * reads a path: each input is written to one temporary file.
 */
#ifndef TDM_FUZZ_FILE_H
#define TDM_FUZZ_FILE_H

#include <string.h>
#include <unistd.h>

#include <glib.h>

/* The target's temporary file (made from `tmpl` on the first call) now
 * holding `data`; NULL when it cannot be made or written. */
static const char *fuzz_input_file(const char *tmpl, const guint8 *data, size_t size)
{
    static char *path;
    if (path == NULL) {
        int fd = g_file_open_tmp(tmpl, &path, NULL);
        if (fd < 0) {
            return NULL;
        }
        close(fd);
    }
    if (!g_file_set_contents(path, (const char *)data, (gssize)size, NULL)) {
        return NULL;
    }
    return path;
}

#ifdef TANDEM_IO_H
/* The end of a weight-file target: a file that loaded has every byte the
 * reader claims valid touched (so a sanitizer sees a bad bound); one that
 * did not has an error naming `path`. Takes `st` and `error`. */
static inline void fuzz_check_weights(TdmSafeTensors *st, GError *error, const char *path)
{
    if (st != NULL) {
        volatile guint8 sink = 0;
        for (guint i = 0; i < tdm_safetensors_count(st); i++) {
            const TdmSafeTensor *t = tdm_safetensors_index(st, i);
            for (size_t k = 0; k < t->nbytes; k++) {
                sink ^= ((const guint8 *)t->data)[k];
            }
        }
        (void)sink;
        tdm_safetensors_free(st);
    } else {
        g_assert(error != NULL && strstr(error->message, path) != NULL);
        g_error_free(error);
    }
}
#endif

#endif /* TDM_FUZZ_FILE_H */

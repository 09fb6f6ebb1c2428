/* tests/fuzz/fuzz-file.h - for the fuzz targets whose code under test
 * reads a path: each input is written to one temporary file.
 */
#ifndef TDM_FUZZ_FILE_H
#define TDM_FUZZ_FILE_H

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

#endif /* TDM_FUZZ_FILE_H */

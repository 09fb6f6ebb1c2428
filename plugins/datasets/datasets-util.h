/* SPDX-License-Identifier: MIT */
/* plugins/datasets/datasets-util.h - what the dataset reader plugins share:
 * setting an error from a format string and checking a sample index.
 *
 * Each reader is its own plugin (libtdm-<name>.so), so these helpers are
 * static and compiled into each of them; nothing here is exported.
 */
#ifndef TDM_DATASETS_UTIL_H
#define TDM_DATASETS_UTIL_H

#include <stdarg.h>

#include <tandem/data.h>

/* Sets a TDM_ERROR `code` error and returns FALSE, so that a check can
 * `return ds_fail(...)`. */
static inline gboolean ds_failv(GError **error, int code, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
static inline gboolean ds_failv(GError **error, int code, const char *fmt, va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    g_set_error_literal(error, TDM_ERROR, code, msg);
    return FALSE;
}

static inline gboolean ds_fail(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static inline gboolean ds_fail(GError **error, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ds_failv(error, code, fmt, ap);
    va_end(ap);
    return FALSE;
}

/* An error naming the reader `who` unless 0 <= index < ds->length. */
static inline gboolean ds_check_index(const TdmDataset *ds, int64_t index, const char *who,
                                      GError **error)
{
    if (index < 0 || index >= ds->length) {
        return ds_fail(error, TDM_ERROR_INVALID_ARG,
                       "%s: sample %" G_GINT64_FORMAT " out of range (0..%" G_GINT64_FORMAT ")",
                       who, index, ds->length - 1);
    }
    return TRUE;
}

#endif /* TDM_DATASETS_UTIL_H */

/* SPDX-License-Identifier: MIT */
/* tests/test-util.h - checks and helpers that test programs of different
 * parts share.
 * Static functions only (each test is one program); a program includes it
 * after <tandem/tandem.h>.
 */
#ifndef TDM_TEST_UTIL_H
#define TDM_TEST_UTIL_H

#include <stdarg.h>
#include <string.h>

#include <tandem/tandem.h>

/* `error` (which this frees) is a TDM_ERROR_INVALID_ARG whose message
 * contains every one of the NULL-terminated strings in `words`: what a
 * parser must say about the bad text `input`. */
G_GNUC_UNUSED static void test_invalid_arg_mentions(GError *error, const char *input, va_list words)
{
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    for (const char *want = va_arg(words, const char *); want != NULL;
         want = va_arg(words, const char *)) {
        if (strstr(error->message, want) == NULL) {
            g_error("'%s': error '%s' does not mention '%s'", input, error->message, want);
        }
    }
    g_test_message("'%s' -> %s", input, error->message);
    g_error_free(error);
}

/* The device `spec` names, or NULL with the test skipped (saying why)
 * when its backend is absent. */
G_GNUC_UNUSED static TdmDevice *test_device_or_skip(const char *spec)
{
    g_autoptr(GError) error = NULL;
    TdmDevice *dev = tdm_device_get(spec, &error);
    if (dev == NULL) {
        g_autofree char *why = g_strdup_printf("%s: %s", spec, error->message);
        g_test_skip(why);
    }
    return dev;
}

/* A new tensor on `dev`, holding `values` (host, plain order) unless NULL. */
G_GNUC_UNUSED static TdmTensor *test_tensor_with(TdmDevice *dev, TdmDType dtype, int ndim,
                                                 const int64_t *shape, const void *values)
{
    g_autoptr(GError) error = NULL;
    TdmTensor *t = tdm_tensor_new(dev, dtype, ndim, shape, &error);
    g_assert_no_error(error);
    if (values != NULL) {
        g_assert_true(tdm_tensor_write(t, values, &error));
        g_assert_no_error(error);
    }
    return t;
}

#endif /* TDM_TEST_UTIL_H */

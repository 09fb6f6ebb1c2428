/* tests/test-util.h - checks that test programs of different parts share.
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

#endif /* TDM_TEST_UTIL_H */

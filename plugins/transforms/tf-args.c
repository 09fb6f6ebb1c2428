/* plugins/transforms/tf-args.c - binding and parsing transform arguments.
 *
 * The pipeline parser (core) hands each transform its arguments as strings
 * with their columns; here they are matched to the transform's parameter
 * specs and converted. Every message names the transform, the parameter,
 * the text the user wrote and its column, because the user sees the
 * message next to a long pipeline string and must find the token.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "tf.h"

gboolean tf_args_bind(TfArgs *a, const char *tname, const TdmParamSpec *specs, int n_positional,
                      const TfAlias *aliases, const TdmTransformArg *args, int n_args,
                      GError **error)
{
    memset(a, 0, sizeof(*a));
    a->tname = tname;
    a->specs = specs;
    int n_specs = 0;
    while (specs[n_specs].name != NULL) {
        n_specs++;
    }
    g_assert(n_specs <= TF_MAX_PARAMS);
    int next_positional = 0;
    for (int i = 0; i < n_args; i++) {
        const TdmTransformArg *arg = &args[i];
        int idx = -1;
        if (arg->key == NULL) {
            if (next_positional >= n_positional) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "%s: unexpected value '%s' (column %d): %s", tname, arg->value,
                            arg->column,
                            n_positional == 0 ? "it takes only key=value parameters"
                                              : "too many positional values");
                return FALSE;
            }
            idx = next_positional++;
        } else {
            const char *key = arg->key;
            for (int k = 0; aliases != NULL && aliases[k].alias != NULL; k++) {
                if (strcmp(aliases[k].alias, key) == 0) {
                    key = aliases[k].name;
                }
            }
            for (int k = 0; k < n_specs; k++) {
                if (strcmp(specs[k].name, key) == 0) {
                    idx = k;
                }
            }
            if (idx < 0) {
                GString *known = g_string_new(NULL);
                for (int k = 0; k < n_specs; k++) {
                    g_string_append_printf(known, "%s%s", k > 0 ? ", " : "", specs[k].name);
                }
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "%s: unknown parameter '%s' (column %d); known: %s", tname, arg->key,
                            arg->column, known->len > 0 ? known->str : "none");
                g_string_free(known, TRUE);
                return FALSE;
            }
        }
        if (a->slot[idx] != NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: %s given twice (columns %d and %d)", tname, specs[idx].name,
                        a->slot[idx]->column, arg->column);
            return FALSE;
        }
        a->slot[idx] = arg;
    }
    return TRUE;
}

int tf_args_index(const TfArgs *a, const char *name)
{
    for (int k = 0; a->specs[k].name != NULL; k++) {
        if (strcmp(a->specs[k].name, name) == 0) {
            return k;
        }
    }
    g_error("transform %s has no parameter spec '%s'", a->tname, name);
    return -1;
}

gboolean tf_args_given(const TfArgs *a, const char *name)
{
    return a->slot[tf_args_index(a, name)] != NULL;
}

const char *tf_args_string(const TfArgs *a, const char *name)
{
    int k = tf_args_index(a, name);
    return a->slot[k] != NULL ? a->slot[k]->value : a->specs[k].default_value;
}

void tf_args_error(const TfArgs *a, const char *name, GError **error, const char *fmt, ...)
{
    int k = tf_args_index(a, name);
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (a->slot[k] != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s=%s (column %d): %s", a->tname,
                    name, a->slot[k]->value, a->slot[k]->column, msg);
    } else {
        /* No token to point at: the pipeline adds the transform's column. */
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s", name, msg);
    }
}

static gboolean parse_list(const TfArgs *a, const char *name, double *out, int min_n, int max_n,
                           int *n, gboolean integers, GError **error)
{
    const char *text = tf_args_string(a, name);
    *n = 0;
    if (text == NULL || strcmp(text, "none") == 0) {
        return TRUE;
    }
    const char *what = integers ? "integer" : "number";
    char expect[64];
    if (min_n == max_n) {
        g_snprintf(expect, sizeof(expect), "%d %s%s", min_n, what, min_n > 1 ? "s" : "");
    } else {
        g_snprintf(expect, sizeof(expect), "%d %s %d %ss", min_n, max_n == min_n + 1 ? "or" : "to",
                   max_n, what);
    }
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);
    int count = (int)g_strv_length(parts);
    if (count < min_n || count > max_n) {
        tf_args_error(a, name, error, "expected %s separated by commas, got %d", expect, count);
        return FALSE;
    }
    for (int i = 0; i < count; i++) {
        char *end = NULL;
        const char *s = parts[i];
        double v = g_ascii_strtod(s, &end);
        if (end == s || *end != '\0' || !isfinite(v)) {
            tf_args_error(a, name, error, "'%s' is not a%s %s (expected %s)", s,
                          integers ? "n" : "", what, expect);
            return FALSE;
        }
        if (integers && (v != floor(v) || fabs(v) > 1e6)) {
            tf_args_error(a, name, error, "'%s' is not an integer", s);
            return FALSE;
        }
        out[i] = v;
    }
    *n = count;
    return TRUE;
}

gboolean tf_args_doubles(const TfArgs *a, const char *name, double *out, int min_n, int max_n,
                         int *n, GError **error)
{
    return parse_list(a, name, out, min_n, max_n, n, FALSE, error);
}

gboolean tf_args_ints(const TfArgs *a, const char *name, int *out, int min_n, int max_n, int *n,
                      GError **error)
{
    double tmp[8];
    g_assert(max_n <= 8);
    if (!parse_list(a, name, tmp, min_n, max_n, n, TRUE, error)) {
        return FALSE;
    }
    for (int i = 0; i < *n; i++) {
        out[i] = (int)tmp[i];
    }
    return TRUE;
}

gboolean tf_args_bool(const TfArgs *a, const char *name, gboolean *out, GError **error)
{
    const char *text = tf_args_string(a, name);
    if (text == NULL) {
        *out = FALSE;
        return TRUE;
    }
    if (g_ascii_strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0 ||
        g_ascii_strcasecmp(text, "yes") == 0) {
        *out = TRUE;
    } else if (g_ascii_strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0 ||
               g_ascii_strcasecmp(text, "no") == 0) {
        *out = FALSE;
    } else {
        tf_args_error(a, name, error, "expected true or false");
        return FALSE;
    }
    return TRUE;
}

gboolean tf_args_size(const TfArgs *a, const char *name, int *h, int *w, GError **error)
{
    int v[2], n = 0;
    if (!tf_args_ints(a, name, v, 1, 2, &n, error)) {
        return FALSE;
    }
    if (n == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "missing parameter %s (e.g. '%s 28' or '%s %s=32,24')", name, a->tname,
                    a->tname, name);
        return FALSE;
    }
    if (v[0] < 1 || v[n - 1] < 1) {
        tf_args_error(a, name, error, "sizes must be at least 1");
        return FALSE;
    }
    *h = v[0];
    *w = v[n - 1];
    return TRUE;
}

gboolean tf_args_probability(const TfArgs *a, const char *name, double *p, GError **error)
{
    int n = 0;
    if (!tf_args_doubles(a, name, p, 1, 1, &n, error)) {
        return FALSE;
    }
    if (*p < 0.0 || *p > 1.0) {
        tf_args_error(a, name, error, "a probability must be between 0 and 1");
        return FALSE;
    }
    return TRUE;
}

int tf_round_half_even(double x)
{
    double r = floor(x + 0.5);
    /* A tie rounded up to an odd number goes to the even one below. */
    if (r - x == 0.5 && fmod(r, 2.0) != 0.0) {
        r -= 1.0;
    }
    return (int)r;
}

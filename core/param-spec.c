/* SPDX-License-Identifier: MIT */
/* core/param-spec.c - parameter specs: reading a plugin's array in either
 * layout, checking it, parsing a value against one spec, and saying in
 * words what a spec accepts.
 *
 * A plugin's array is read once, when its feature registers, and copied
 * into the current layout (see TdmParamSpec in <tandem/plugin.h> for how
 * the 1.0 layout, four strings per entry, is told apart from the sized
 * ones); everything after that (the parser, `tandem inspect`) sees only
 * the copy. A sized array is checked strictly, since its author wrote
 * types and ranges against these rules: a default its own spec refuses, an
 * unknown type or a name given twice refuses the feature. A 1.0 array had
 * only type names as documentation, so it is taken as it is: a default
 * that does not parse as its type makes the parameter a string. The words
 * in messages come from here too, so an error and `tandem inspect` say
 * the same thing about a parameter.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "params-private.h"

/* Where an array with no terminator is taken for garbage. */
#define MAX_SPECS 1024
/* No string lives in the first page: a smaller value is a struct_size. */
#define FIRST_PAGE 4096

/* ---- words ---------------------------------------------------------------- */

static gboolean has_range(const TdmParamSpec *s)
{
    return !(s->min == 0.0 && s->max == 0.0);
}

static void append_number(GString *out, double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append(out, g_ascii_formatd(buf, sizeof buf, "%g", v));
}

/* " in [lo, hi]", " >= lo", " < hi" or nothing. */
static void append_range(GString *out, const TdmParamSpec *s)
{
    if (!has_range(s)) {
        return;
    }
    gboolean lo_open = (s->flags & TDM_PARAM_MIN_EXCLUSIVE) != 0;
    gboolean hi_open = (s->flags & TDM_PARAM_MAX_EXCLUSIVE) != 0;
    gboolean lo = isfinite(s->min), hi = isfinite(s->max);
    if (lo && hi) {
        g_string_append_printf(out, " in %c", lo_open ? '(' : '[');
        append_number(out, s->min);
        g_string_append(out, ", ");
        append_number(out, s->max);
        g_string_append_c(out, hi_open ? ')' : ']');
    } else if (lo) {
        g_string_append(out, lo_open ? " > " : " >= ");
        append_number(out, s->min);
    } else if (hi) {
        g_string_append(out, hi_open ? " < " : " <= ");
        append_number(out, s->max);
    }
}

static int count_min(const TdmParamSpec *s)
{
    return s->min_count > 0 ? s->min_count : 1;
}

/* 0 = no limit */
static int count_max(const TdmParamSpec *s)
{
    return s->max_count;
}

/* "2 ", "1 or 2 ", "1 to 4 ", "2 or more " or "" (one or more). */
static void append_count(GString *out, const TdmParamSpec *s)
{
    int lo = count_min(s), hi = count_max(s);
    if (hi == 0) {
        if (lo > 1) {
            g_string_append_printf(out, "%d or more ", lo);
        }
    } else if (lo == hi) {
        g_string_append_printf(out, "%d ", lo);
    } else {
        g_string_append_printf(out, "%d %s %d ", lo, hi == lo + 1 ? "or" : "to", hi);
    }
}

/* "a|b|c" as "a, b, c" (sep ", ") or as it is. */
static void append_choices(GString *out, const TdmParamSpec *s, const char *sep)
{
    g_auto(GStrv) parts = g_strsplit(s->choices != NULL ? s->choices : "", "|", -1);
    for (int i = 0; parts[i] != NULL; i++) {
        g_string_append_printf(out, "%s%s", i > 0 ? sep : "", parts[i]);
    }
}

/* The values `spec` takes, terse for listings ("int >= 1", "list of 2
 * floats", "one of a|b") or in prose for error messages ("an integer >= 1",
 * "2 numbers separated by commas", "one of a, b"). */
static char *spec_text(const TdmParamSpec *spec, gboolean prose)
{
    GString *out = g_string_new(NULL);
    gboolean ints = spec->type == TDM_PARAM_INT || spec->type == TDM_PARAM_INTS;
    switch (spec->type) {
    case TDM_PARAM_INT:
    case TDM_PARAM_FLOAT:
        g_string_append(out, prose ? (ints ? "an integer" : "a number") : (ints ? "int" : "float"));
        append_range(out, spec);
        break;
    case TDM_PARAM_BOOL:
        g_string_append(out, prose ? "true or false" : "bool");
        break;
    case TDM_PARAM_CHOICE:
        g_string_append(out, "one of ");
        append_choices(out, spec, prose ? ", " : "|");
        break;
    case TDM_PARAM_INTS:
    case TDM_PARAM_FLOATS: {
        gboolean one = count_min(spec) == 1 && count_max(spec) == 1;
        g_string_append(out, prose ? "" : "list of ");
        append_count(out, spec);
        if (prose) {
            g_string_append(out, ints ? "integer" : "number");
            g_string_append(out, one ? "" : "s");
        } else {
            g_string_append(out, ints ? "ints" : "floats");
        }
        append_range(out, spec);
        if (prose && !one) {
            g_string_append(out, " separated by commas");
        }
        break;
    }
    default:
        g_string_append(out, prose ? "text" : "string");
        break;
    }
    return g_string_free(out, FALSE);
}

char *tdm_param_spec_describe(const TdmParamSpec *spec)
{
    g_return_val_if_fail(spec != NULL, NULL);
    return spec_text(spec, FALSE);
}

char *tdm_param_spec_expected(const TdmParamSpec *spec)
{
    return spec_text(spec, TRUE);
}

/* ---- values ---------------------------------------------------------------- */

void tdm_param_value_clear(TdmParamValue *value)
{
    g_free(value->text);
    g_free(value->list);
    memset(value, 0, sizeof *value);
}

void tdm_param_value_copy(TdmParamValue *dst, const TdmParamValue *src)
{
    *dst = *src;
    dst->text = g_strdup(src->text);
    dst->list = NULL;
    if (src->list != NULL) {
        dst->list = g_new(double, src->n);
        memcpy(dst->list, src->list, sizeof(double) * (gsize)src->n);
    }
}

static gboolean in_range(const TdmParamSpec *s, double v)
{
    if (!has_range(s)) {
        return TRUE;
    }
    if (v < s->min || ((s->flags & TDM_PARAM_MIN_EXCLUSIVE) && v == s->min)) {
        return FALSE;
    }
    return !(v > s->max || ((s->flags & TDM_PARAM_MAX_EXCLUSIVE) && v == s->max));
}

gboolean tdm_parse_bool_word(const char *s, gboolean *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (gsize i = 0; i < G_N_ELEMENTS(yes); i++) {
        if (g_ascii_strcasecmp(s, yes[i]) == 0) {
            *out = TRUE;
            return TRUE;
        }
        if (g_ascii_strcasecmp(s, no[i]) == 0) {
            *out = FALSE;
            return TRUE;
        }
    }
    return FALSE;
}

/* A number (integral when `integer`); FALSE when `s` is not one. */
static gboolean parse_number(const char *s, gboolean integer, double *out)
{
    char *end = NULL;
    errno = 0;
    if (integer) {
        gint64 n = g_ascii_strtoll(s, &end, 10);
        if (s[0] == '\0' || *end != '\0' || errno != 0) {
            return FALSE;
        }
        *out = (double)n;
        return TRUE;
    }
    double v = g_ascii_strtod(s, &end);
    if (s[0] == '\0' || end == s || *end != '\0' || !isfinite(v)) {
        return FALSE;
    }
    *out = v;
    return TRUE;
}

static gboolean parse_list(const TdmParamSpec *spec, const char *text, TdmParamValue *value,
                           char **why)
{
    gboolean ints = spec->type == TDM_PARAM_INTS;
    g_autofree char *expected = tdm_param_spec_expected(spec);
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);
    int n = (int)g_strv_length(parts);
    if (n < count_min(spec) || (count_max(spec) > 0 && n > count_max(spec))) {
        *why = g_strdup_printf("expected %s, got %d", expected, n);
        return FALSE;
    }
    value->list = g_new(double, n);
    value->n = n;
    for (int i = 0; i < n; i++) {
        const char *s = g_strstrip(parts[i]);
        double v;
        if (!parse_number(s, FALSE, &v)) {
            *why = g_strdup_printf("'%s' is not a%s %s (expected %s)", s, ints ? "n" : "",
                                   ints ? "integer" : "number", expected);
            return FALSE;
        }
        if (ints && (v != floor(v) || fabs(v) > G_MAXINT)) {
            *why = g_strdup_printf("'%s' is not an integer (expected %s)", s, expected);
            return FALSE;
        }
        if (!in_range(spec, v)) {
            *why = g_strdup_printf("%s is out of range (expected %s)", s, expected);
            return FALSE;
        }
        value->list[i] = v;
    }
    return TRUE;
}

/* The index of `text` in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *text)
{
    g_auto(GStrv) parts = g_strsplit(choices != NULL ? choices : "", "|", -1);
    for (int i = 0; parts[i] != NULL; i++) {
        if (strcmp(parts[i], text) == 0) {
            return i;
        }
    }
    return -1;
}

gboolean tdm_param_value_parse(const TdmParamSpec *spec, const char *text, TdmParamValue *value,
                               char **why)
{
    tdm_param_value_clear(value);
    *why = NULL;
    if (text == NULL) {
        return TRUE;
    }
    g_autofree char *expected = tdm_param_spec_expected(spec);
    if (strcmp(text, "none") == 0 && spec->type != TDM_PARAM_STRING &&
        spec->type != TDM_PARAM_CHOICE) {
        /* "none" is no value. Where the spec has a default and did not ask
         * for "none", a getter would have nothing in range to return (a
         * feature reading sync-every=none as 0 never syncs), so the user
         * hears it instead. */
        if ((spec->flags & TDM_PARAM_REQUIRED) ||
            (spec->default_value != NULL && !(spec->flags & TDM_PARAM_ALLOW_NONE))) {
            *why = g_strdup_printf("expected %s ('none' is not accepted)", expected);
            return FALSE;
        }
        return TRUE;
    }
    switch (spec->type) {
    case TDM_PARAM_INT:
    case TDM_PARAM_FLOAT: {
        double v;
        if (!parse_number(text, spec->type == TDM_PARAM_INT, &v) || !in_range(spec, v)) {
            *why = g_strdup_printf("expected %s", expected);
            return FALSE;
        }
        value->f = v;
        value->i = spec->type == TDM_PARAM_INT ? g_ascii_strtoll(text, NULL, 10) : (gint64)v;
        value->list = g_new(double, 1);
        value->list[0] = v;
        value->n = 1;
        break;
    }
    case TDM_PARAM_BOOL: {
        gboolean b;
        if (!tdm_parse_bool_word(text, &b)) {
            *why = g_strdup_printf("expected %s", expected);
            return FALSE;
        }
        value->i = b;
        break;
    }
    case TDM_PARAM_CHOICE:
        value->choice = choice_index(spec->choices, text);
        if (value->choice < 0) {
            *why = g_strdup_printf("expected %s", expected);
            return FALSE;
        }
        break;
    case TDM_PARAM_INTS:
    case TDM_PARAM_FLOATS:
        if (!parse_list(spec, text, value, why)) {
            tdm_param_value_clear(value);
            return FALSE;
        }
        break;
    default:
        break;
    }
    value->has = TRUE;
    value->text = g_strdup(text);
    return TRUE;
}

/* ---- reading a plugin's array ------------------------------------------------ */

static gboolean key_is_valid(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        return FALSE;
    }
    for (const char *c = name; *c != '\0'; c++) {
        if (!g_ascii_isalnum(*c) && *c != '-' && *c != '_') {
            return FALSE;
        }
    }
    return TRUE;
}

/* The 1.0 layout: four strings per entry. */
typedef struct {
    const char *name;
    const char *type;
    const char *default_value;
    const char *description;
} ParamSpec10;

static TdmParamType type_from_name(const char *type)
{
    static const struct {
        const char *name;
        TdmParamType type;
    } types[] = {{"int", TDM_PARAM_INT},
                 {"float", TDM_PARAM_FLOAT},
                 {"bool", TDM_PARAM_BOOL},
                 {"string", TDM_PARAM_STRING}};
    for (gsize i = 0; type != NULL && i < G_N_ELEMENTS(types); i++) {
        if (strcmp(types[i].name, type) == 0) {
            return types[i].type;
        }
    }
    return TDM_PARAM_STRING; /* "list" and anything else: taken as text */
}

static TdmParamSpec from_1_0(const ParamSpec10 *old)
{
    TdmParamSpec s = {0};
    s.name = old->name;
    s.struct_size = sizeof(TdmParamSpec);
    s.type = type_from_name(old->type);
    /* 1.0 documented a NULL default as "required", and took "none" for
     * any parameter that was not. */
    s.flags = old->default_value == NULL ? TDM_PARAM_REQUIRED : TDM_PARAM_ALLOW_NONE;
    s.default_value = old->default_value;
    s.description = old->description;
    TdmParamValue v = {0};
    g_autofree char *why = NULL;
    if (!tdm_param_value_parse(&s, s.default_value, &v, &why)) {
        s.type = TDM_PARAM_STRING; /* a default like "kernel_size": keep it as text */
    }
    tdm_param_value_clear(&v);
    return s;
}

static gboolean spec_fail(GError **error, const char *feature, const char *param, const char *fmt,
                          ...) G_GNUC_PRINTF(4, 5);
static gboolean spec_fail(GError **error, const char *feature, const char *param, const char *fmt,
                          ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN, "feature '%s': parameter spec '%s': %s",
                feature, param != NULL ? param : "?", msg);
    return FALSE;
}

/* Whether `key` is the name or an alias of some spec in specs[0 .. n). */
static gboolean key_taken(const TdmParamSpec *specs, guint n, const char *key)
{
    for (guint i = 0; i < n; i++) {
        if (strcmp(specs[i].name, key) == 0) {
            return TRUE;
        }
        g_auto(GStrv) aliases = g_strsplit(specs[i].aliases != NULL ? specs[i].aliases : "", "|",
                                           -1);
        if (specs[i].aliases != NULL && g_strv_contains((const char *const *)aliases, key)) {
            return TRUE;
        }
    }
    return FALSE;
}

/* The checks a sized entry must pass (the entries before it in specs). */
static gboolean check_entry(const char *feature, const TdmParamSpec *specs, guint i,
                            GError **error)
{
    const TdmParamSpec *s = &specs[i];
    if (!key_is_valid(s->name)) {
        return spec_fail(error, feature, s->name, "invalid name (letters, digits, '-', '_')");
    }
    if (key_taken(specs, i, s->name)) {
        return spec_fail(error, feature, s->name, "name given twice");
    }
    g_auto(GStrv) aliases = g_strsplit(s->aliases != NULL ? s->aliases : "", "|", -1);
    for (int k = 0; s->aliases != NULL && aliases[k] != NULL; k++) {
        if (!key_is_valid(aliases[k]) || key_taken(specs, i, aliases[k])) {
            return spec_fail(error, feature, s->name, "alias '%s' is invalid or taken",
                             aliases[k]);
        }
    }
    if ((unsigned)s->type >= TDM_PARAM_N_TYPES) {
        return spec_fail(error, feature, s->name, "unknown type %d", (int)s->type);
    }
    if (s->type == TDM_PARAM_CHOICE && (s->choices == NULL || s->choices[0] == '\0')) {
        return spec_fail(error, feature, s->name, "a choice without choices");
    }
    if (s->min_count < 0 || s->max_count < 0 ||
        (s->max_count > 0 && s->max_count < count_min(s))) {
        return spec_fail(error, feature, s->name, "count range %d..%d makes no sense",
                         s->min_count, s->max_count);
    }
    if (isnan(s->min) || isnan(s->max) || (has_range(s) && s->min > s->max)) {
        return spec_fail(error, feature, s->name, "range [%g, %g] makes no sense", s->min,
                         s->max);
    }
    TdmParamValue v = {0};
    g_autofree char *why = NULL;
    gboolean ok = tdm_param_value_parse(s, s->default_value, &v, &why);
    tdm_param_value_clear(&v);
    if (!ok) {
        return spec_fail(error, feature, s->name, "default '%s': %s", s->default_value, why);
    }
    return TRUE;
}

TdmParamSpec *tdm_param_specs_copy(const char *feature, const TdmParamSpec *specs, guint *n_out,
                                   GError **error)
{
    g_autoptr(GArray) out = g_array_new(TRUE, TRUE, sizeof(TdmParamSpec));
    const char *base = (const char *)specs;
    /* The first two pointer-sized words of entry 0: its name, then 1.0's
     * type string or a sized layout's struct_size. */
    guintptr head[2] = {0, 0};
    if (specs != NULL) {
        memcpy(head, base, sizeof head);
    }
    gboolean old = head[0] != 0 && (head[1] == 0 || head[1] >= FIRST_PAGE);
    gsize stride = old ? sizeof(ParamSpec10) : (gsize)head[1];
    if (head[0] != 0 && !old && stride < TDM_PARAM_SPEC_MIN_SIZE) {
        spec_fail(error, feature, (const char *)head[0],
                  "struct_size %" G_GSIZE_FORMAT " is smaller than any TdmParamSpec layout",
                  stride);
        return NULL;
    }
    for (guint i = 0; head[0] != 0; i++) {
        const char *entry = base + (gsize)i * stride;
        const char *name;
        memcpy(&name, entry, sizeof name);
        if (name == NULL) {
            break;
        }
        if (i >= MAX_SPECS) {
            spec_fail(error, feature, NULL, "no terminating entry within %d entries", MAX_SPECS);
            return NULL;
        }
        TdmParamSpec s = {0};
        if (old) {
            ParamSpec10 o;
            memcpy(&o, entry, sizeof o);
            s = from_1_0(&o);
        } else {
            memcpy(&s, entry, MIN(stride, sizeof s));
            if (s.struct_size != stride) {
                spec_fail(error, feature, s.name,
                          "struct_size %" G_GSIZE_FORMAT " differs from the first entry's "
                          "%" G_GSIZE_FORMAT,
                          s.struct_size, stride);
                return NULL;
            }
            s.struct_size = sizeof(TdmParamSpec);
        }
        g_array_append_val(out, s);
        if (!old && !check_entry(feature, (const TdmParamSpec *)(void *)out->data, i, error)) {
            return NULL;
        }
    }
    if (n_out != NULL) {
        *n_out = out->len;
    }
    return (TdmParamSpec *)(void *)g_array_free(g_steal_pointer(&out), FALSE);
}

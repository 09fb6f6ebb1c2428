/* SPDX-License-Identifier: MIT */
/* core/params.c - the one parser for feature parameters: "name key=value
 * value ..." bound to a feature's specs, read back with typed getters.
 *
 * Text becomes tokens first (key or none, value, column), by the same
 * tokenizer for a whole --strategy string and for one stage of a transform
 * pipeline, where a '|' ends it; then each token is checked against the
 * spec it names (or the next positional one) and stored parsed, next to
 * the spec's default, so a getter is a lookup. Errors say what the user
 * wrote and what would be accepted, in the words param-spec.c has for the
 * spec, and give the column when the text is part of a longer line the
 * user must search (a pipeline). A TdmParams holds its own copy of the
 * specs, so it outlives nothing but the strings of a plugin, which stay
 * loaded for the life of the process.
 */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "params-private.h"

typedef struct {
    TdmParamValue value; /* what the user gave */
    TdmParamValue def;   /* the spec's default, or the caller's (set_default) */
    gboolean given;
    int column;
} Slot;

struct _TdmParams {
    gint ref;
    char *feature;
    TdmParamSpec *specs;
    guint n;
    Slot *slots;
    guint next_positional; /* positional values fill specs from here */
};

/* ---- the tokenizer ---------------------------------------------------------- */

gboolean tdm_param_is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

gboolean tdm_param_is_key_char(char ch)
{
    return g_ascii_isalnum(ch) || ch == '-' || ch == '_';
}

const char *tdm_param_skip_spaces(const char *s)
{
    while (tdm_param_is_space(*s)) {
        s++;
    }
    return s;
}

static gboolean at_end(const char *s, gboolean stop_at_bar)
{
    return *s == '\0' || (stop_at_bar && *s == '|');
}

static void token_clear(gpointer p)
{
    TdmParamToken *t = p;
    g_free(t->key);
    g_free(t->value);
}

GArray *tdm_param_tokens_new(void)
{
    GArray *tokens = g_array_new(FALSE, TRUE, sizeof(TdmParamToken));
    g_array_set_clear_func(tokens, token_clear);
    return tokens;
}

/* " (column N)" or "" */
static char *at_column(int column)
{
    return column > 0 ? g_strdup_printf(" (column %d)", column) : g_strdup("");
}

/* " at column N" or "" */
static char *at_column_words(int column)
{
    return column > 0 ? g_strdup_printf(" at column %d", column) : g_strdup("");
}

/* The value starting at *pos: up to whitespace (or '|'), continuing over
 * whitespace that follows a comma ("mean=0.5, 0.5, 0.5"); quoted parts
 * ('...' or "...") are taken as they are. *bare_eq tells whether an
 * unquoted '=' was in it. NULL with *pos at the quote when one is left
 * open. */
static char *read_value(const char **pos, gboolean stop_at_bar, gboolean *bare_eq)
{
    GString *v = g_string_new(NULL);
    const char *s = *pos;
    *bare_eq = FALSE;
    while (!at_end(s, stop_at_bar) && !tdm_param_is_space(*s)) {
        if (*s == '\'' || *s == '"') {
            const char *close = strchr(s + 1, *s);
            if (close == NULL) {
                *pos = s;
                g_string_free(v, TRUE);
                return NULL;
            }
            g_string_append_len(v, s + 1, close - s - 1);
            s = close + 1;
            continue;
        }
        *bare_eq = *bare_eq || *s == '=';
        g_string_append_c(v, *s);
        s = *s == ',' ? tdm_param_skip_spaces(s + 1) : s + 1;
    }
    *pos = s;
    return g_string_free(v, FALSE);
}

gboolean tdm_param_tokens_read(const char *feature, const char *origin, const char **pos,
                               gboolean stop_at_bar, gboolean columns, GArray *tokens,
                               GError **error)
{
    const char *s = *pos;
    for (;;) {
        s = tdm_param_skip_spaces(s);
        if (at_end(s, stop_at_bar)) {
            break;
        }
        TdmParamToken t = {NULL, NULL, (int)(s - origin) + 1};
        g_autofree char *col = at_column(columns ? t.column : 0);
        g_autofree char *at = at_column_words(columns ? t.column : 0);
        const char *tok = s;
        while (tdm_param_is_key_char(*s)) {
            s++;
        }
        const char *after = tdm_param_skip_spaces(s);
        if (s > tok && *after == '=') {
            t.key = g_strndup(tok, (gsize)(s - tok));
            s = tdm_param_skip_spaces(after + 1);
            if (at_end(s, stop_at_bar)) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s=%s: missing value",
                            feature, t.key, col);
                g_free(t.key);
                return FALSE;
            }
        } else if (*tok == '=') {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: '=' without a parameter name%s", feature, at);
            return FALSE;
        } else {
            s = tok;
        }
        gboolean bare_eq;
        t.value = read_value(&s, stop_at_bar, &bare_eq);
        if (t.value == NULL) {
            g_autofree char *qcol = at_column(columns ? (int)(s - origin) + 1 : 0);
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: unclosed quote%s",
                        feature, qcol);
            g_free(t.key);
            return FALSE;
        }
        if (bare_eq) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: malformed argument '%s'%s", feature, t.value, at);
            token_clear(&t);
            return FALSE;
        }
        g_array_append_val(tokens, t);
    }
    *pos = s;
    return TRUE;
}

/* ---- the object -------------------------------------------------------------- */

TdmParams *tdm_params_new(const char *feature, const TdmParamSpec *specs, GError **error)
{
    g_return_val_if_fail(feature != NULL, NULL);
    guint n = 0;
    TdmParamSpec *copy = tdm_param_specs_copy(feature, specs, &n, error);
    if (copy == NULL) {
        return NULL;
    }
    TdmParams *p = g_new0(TdmParams, 1);
    p->ref = 1;
    p->feature = g_strdup(feature);
    p->specs = copy;
    p->n = n;
    p->slots = g_new0(Slot, MAX(n, 1));
    for (guint i = 0; i < n; i++) {
        g_autofree char *why = NULL;
        /* tdm_param_specs_copy() checked every default */
        tdm_param_value_parse(&copy[i], copy[i].default_value, &p->slots[i].def, &why);
    }
    return p;
}

TdmParams *tdm_params_ref(TdmParams *params)
{
    g_return_val_if_fail(params != NULL, NULL);
    g_atomic_int_inc(&params->ref);
    return params;
}

void tdm_params_unref(TdmParams *params)
{
    if (params == NULL || !g_atomic_int_dec_and_test(&params->ref)) {
        return;
    }
    for (guint i = 0; i < params->n; i++) {
        tdm_param_value_clear(&params->slots[i].value);
        tdm_param_value_clear(&params->slots[i].def);
    }
    g_free(params->slots);
    g_free(params->specs);
    g_free(params->feature);
    g_free(params);
}

/* The spec named `key` (or with `key` among its aliases); -1 if none. */
static int find_spec(const TdmParams *p, const char *key)
{
    for (guint i = 0; i < p->n; i++) {
        if (strcmp(p->specs[i].name, key) == 0) {
            return (int)i;
        }
    }
    for (guint i = 0; i < p->n; i++) {
        if (p->specs[i].aliases == NULL) {
            continue;
        }
        g_auto(GStrv) aliases = g_strsplit(p->specs[i].aliases, "|", -1);
        if (g_strv_contains((const char *const *)aliases, key)) {
            return (int)i;
        }
    }
    return -1;
}

static char *known_keys(const TdmParams *p)
{
    GString *known = g_string_new(NULL);
    for (guint i = 0; i < p->n; i++) {
        g_string_append_printf(known, "%s%s", i > 0 ? ", " : "", p->specs[i].name);
    }
    if (known->len == 0) {
        g_string_append(known, "none");
    }
    return g_string_free(known, FALSE);
}

gboolean tdm_params_set(TdmParams *params, const char *key, const char *value, int column,
                        GError **error)
{
    g_return_val_if_fail(params != NULL && value != NULL, FALSE);
    TdmParams *p = params;
    g_autofree char *col = at_column(column);
    int idx = -1;
    if (key == NULL) {
        gboolean any = FALSE;
        for (guint i = 0; i < p->n; i++) {
            if (p->specs[i].flags & TDM_PARAM_POSITIONAL) {
                any = TRUE;
                if (idx < 0 && i >= p->next_positional) {
                    idx = (int)i;
                }
            }
        }
        if (idx < 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: unexpected value '%s'%s: %s",
                        p->feature, value, col,
                        any ? "too many positional values"
                            : "it takes only key=value parameters");
            return FALSE;
        }
        p->next_positional = (guint)idx + 1;
    } else if ((idx = find_spec(p, key)) < 0) {
        g_autofree char *known = known_keys(p);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: unknown parameter '%s'%s; known: %s", p->feature, key, col, known);
        return FALSE;
    }
    const TdmParamSpec *spec = &p->specs[idx];
    Slot *slot = &p->slots[idx];
    if (slot->given) {
        if (column > 0 && slot->column > 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: %s given twice (columns %d and %d)", p->feature, spec->name,
                        slot->column, column);
        } else {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s given twice",
                        p->feature, spec->name);
        }
        return FALSE;
    }
    g_autofree char *why = NULL;
    if (!tdm_param_value_parse(spec, value, &slot->value, &why)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s=%s%s: %s", p->feature,
                    spec->name, value, col, why);
        return FALSE;
    }
    slot->given = TRUE;
    slot->column = column;
    return TRUE;
}

gboolean tdm_params_set_default(TdmParams *params, const char *key, const char *value,
                                GError **error)
{
    g_return_val_if_fail(params != NULL && key != NULL, FALSE);
    int idx = find_spec(params, key);
    if (idx < 0) {
        g_autofree char *known = known_keys(params);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: unknown parameter '%s'; known: %s", params->feature, key, known);
        return FALSE;
    }
    TdmParamValue v = {0};
    g_autofree char *why = NULL;
    if (!tdm_param_value_parse(&params->specs[idx], value, &v, &why)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s=%s: %s", params->feature,
                    params->specs[idx].name, value != NULL ? value : "", why);
        return FALSE;
    }
    tdm_param_value_clear(&params->slots[idx].def);
    params->slots[idx].def = v;
    return TRUE;
}

static const TdmParamValue *current(const TdmParams *p, guint i)
{
    return p->slots[i].given ? &p->slots[i].value : &p->slots[i].def;
}

/* What a getter returns: the value, or the default when "none" was given,
 * so that a getter never hands out a number outside the spec's range when
 * the spec has a default. */
static const TdmParamValue *readable(const TdmParams *p, guint i)
{
    const TdmParamValue *v = current(p, i);
    return v->has ? v : &p->slots[i].def;
}

gboolean tdm_params_check_required(const TdmParams *params, GError **error)
{
    g_return_val_if_fail(params != NULL, FALSE);
    for (guint i = 0; i < params->n; i++) {
        const TdmParamSpec *s = &params->specs[i];
        if ((s->flags & TDM_PARAM_REQUIRED) && !current(params, i)->has) {
            g_autofree char *what = tdm_param_spec_describe(s);
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: missing parameter %s (%s%s%s)", params->feature, s->name, what,
                        s->description != NULL ? ": " : "",
                        s->description != NULL ? s->description : "");
            return FALSE;
        }
    }
    return TRUE;
}

gboolean tdm_params_bind_tokens(TdmParams *params, const GArray *tokens, gboolean columns,
                                GError **error)
{
    for (guint i = 0; i < tokens->len; i++) {
        const TdmParamToken *t = &g_array_index(tokens, TdmParamToken, i);
        if (!tdm_params_set(params, t->key, t->value, columns ? t->column : 0, error)) {
            return FALSE;
        }
    }
    return tdm_params_check_required(params, error);
}

TdmParams *tdm_params_parse_args(const char *feature, const TdmParamSpec *specs,
                                 const char *args, GError **error)
{
    g_return_val_if_fail(feature != NULL, NULL);
    g_autoptr(TdmParams) p = tdm_params_new(feature, specs, error);
    if (p == NULL) {
        return NULL;
    }
    const char *pos = args != NULL ? args : "";
    g_autoptr(GArray) tokens = tdm_param_tokens_new();
    if (!tdm_param_tokens_read(feature, pos, &pos, FALSE, FALSE, tokens, error) ||
        !tdm_params_bind_tokens(p, tokens, FALSE, error)) {
        return NULL;
    }
    return g_steal_pointer(&p);
}

char *tdm_params_split_name(const char *text, const char **args)
{
    g_return_val_if_fail(text != NULL, NULL);
    const char *s = tdm_param_skip_spaces(text), *start = s;
    while (tdm_param_is_key_char(*s) || *s == '.') {
        s++;
    }
    if (s == start || (*s != '\0' && !tdm_param_is_space(*s))) {
        return NULL;
    }
    if (args != NULL) {
        *args = tdm_param_skip_spaces(s);
    }
    return g_strndup(start, (gsize)(s - start));
}

TdmParams *tdm_params_parse(TdmFeatureKind kind, const char *text, GError **error)
{
    g_return_val_if_fail(text != NULL, NULL);
    g_return_val_if_fail((unsigned)kind < TDM_FEATURE_N_KINDS, NULL);
    const char *args = NULL;
    g_autofree char *name = tdm_params_split_name(text, &args);
    if (name == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "'%s': expected a %s name, then key=value parameters (e.g. \"name "
                    "key=value\")",
                    text, tdm_feature_kind_name(kind));
        return NULL;
    }
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    TdmFeature *f = tdm_registry_find(kind, name, error);
    if (f == NULL) {
        return NULL;
    }
    return tdm_params_parse_args(name, tdm_feature_get_params(f), args, error);
}

/* ---- reading values ------------------------------------------------------------ */

const char *tdm_params_get_name(const TdmParams *params)
{
    g_return_val_if_fail(params != NULL, NULL);
    return params->feature;
}

const TdmParamSpec *tdm_params_get_specs(const TdmParams *params)
{
    g_return_val_if_fail(params != NULL, NULL);
    return params->specs;
}

gboolean tdm_params_has_key(const TdmParams *params, const char *key)
{
    g_return_val_if_fail(params != NULL && key != NULL, FALSE);
    for (guint i = 0; i < params->n; i++) {
        if (strcmp(params->specs[i].name, key) == 0) {
            return TRUE;
        }
    }
    return FALSE;
}

/* The slot of `key`, whose type must be one of `types` (a bit mask of
 * 1 << TdmParamType); -1 (after a g_critical) otherwise. */
static int lookup(const TdmParams *p, const char *key, guint types, const char *getter)
{
    g_return_val_if_fail(p != NULL && key != NULL, -1);
    int idx = find_spec(p, key);
    if (idx < 0) {
        g_critical("%s: feature '%s' has no parameter '%s'", getter, p->feature, key);
        return -1;
    }
    if (!(types & (1u << p->specs[idx].type))) {
        g_autofree char *what = tdm_param_spec_describe(&p->specs[idx]);
        g_critical("%s: parameter '%s' of '%s' is a %s", getter, key, p->feature, what);
        return -1;
    }
    return idx;
}

#define ANY_TYPE ((1u << TDM_PARAM_N_TYPES) - 1)
#define T(type) (1u << (type))

gboolean tdm_params_is_set(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, ANY_TYPE, G_STRFUNC);
    return i >= 0 && params->slots[i].given;
}

gboolean tdm_params_has_value(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, ANY_TYPE, G_STRFUNC);
    return i >= 0 && current(params, (guint)i)->has;
}

gint64 tdm_params_get_int(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, T(TDM_PARAM_INT) | T(TDM_PARAM_BOOL), G_STRFUNC);
    return i >= 0 ? readable(params, (guint)i)->i : 0;
}

double tdm_params_get_float(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, T(TDM_PARAM_INT) | T(TDM_PARAM_FLOAT), G_STRFUNC);
    return i >= 0 ? readable(params, (guint)i)->f : 0.0;
}

gboolean tdm_params_get_bool(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, T(TDM_PARAM_BOOL), G_STRFUNC);
    return i >= 0 && readable(params, (guint)i)->i != 0;
}

const char *tdm_params_get_string(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, ANY_TYPE, G_STRFUNC);
    return i >= 0 ? readable(params, (guint)i)->text : NULL;
}

int tdm_params_get_choice(const TdmParams *params, const char *key)
{
    int i = lookup(params, key, T(TDM_PARAM_CHOICE), G_STRFUNC);
    if (i < 0 || !readable(params, (guint)i)->has) {
        return -1;
    }
    return readable(params, (guint)i)->choice;
}

int tdm_params_get_floats(const TdmParams *params, const char *key, double *out, int max)
{
    g_return_val_if_fail(out != NULL || max == 0, 0);
    guint types = T(TDM_PARAM_INT) | T(TDM_PARAM_FLOAT) | T(TDM_PARAM_INTS) | T(TDM_PARAM_FLOATS);
    int i = lookup(params, key, types, G_STRFUNC);
    if (i < 0) {
        return 0;
    }
    const TdmParamValue *v = readable(params, (guint)i);
    for (int k = 0; k < v->n && k < max; k++) {
        out[k] = v->list[k];
    }
    return v->n;
}

int tdm_params_get_ints(const TdmParams *params, const char *key, int *out, int max)
{
    g_return_val_if_fail(out != NULL || max == 0, 0);
    int i = lookup(params, key, T(TDM_PARAM_INT) | T(TDM_PARAM_INTS), G_STRFUNC);
    if (i < 0) {
        return 0;
    }
    const TdmParamValue *v = readable(params, (guint)i);
    for (int k = 0; k < v->n && k < max; k++) {
        out[k] = (int)v->list[k];
    }
    return v->n;
}

void tdm_params_set_error(const TdmParams *params, const char *key, GError **error,
                          const char *format, ...)
{
    g_return_if_fail(params != NULL && key != NULL && format != NULL);
    va_list ap;
    va_start(ap, format);
    g_autofree char *msg = g_strdup_vprintf(format, ap);
    va_end(ap);
    int i = find_spec(params, key);
    const Slot *slot = i >= 0 ? &params->slots[i] : NULL;
    if (slot != NULL && slot->given && slot->value.text != NULL) {
        g_autofree char *col = at_column(slot->column);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s=%s%s: %s", params->feature,
                    params->specs[i].name, slot->value.text, col, msg);
    } else {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: %s: %s", params->feature, key,
                    msg);
    }
}

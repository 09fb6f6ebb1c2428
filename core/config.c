/* SPDX-License-Identifier: MIT */
/* core/config.c - the training configuration: defaults, "section.key=value"
 * settings and INI files.
 *
 * Every key is one entry of TDM_TRAIN_CONFIG_KEYS (include/tandem/trainer.h),
 * expanded here into a table of specs (key, type, field offset, default,
 * range), so that the struct's fields, the defaults, validation, the INI
 * loader and the list of keys shown to users cannot drift apart; the
 * command line builds its flags from the same list (tools/cmd-train.c).
 * tdm_train_config_set() is the single entry point that parses and checks
 * a value; the defaults, the INI loader (GKeyFile) and the command line's
 * flags and --set all go through it, and errors always name the key and
 * the offending value (and the file, for INI files).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef enum {
    KEY_STRING, /* char *, "" allowed (means unset) */
    KEY_PATH,   /* char *, a file name: as KEY_STRING */
    KEY_NAME,   /* char *, must not be empty */
    KEY_INT,    /* int in its range */
    KEY_INT64,  /* int64_t in its range */
    KEY_UINT64, /* guint64 */
    KEY_FLOAT,  /* float in its range */
    KEY_BOOL,   /* gboolean */
} KeyType;

typedef struct {
    const char *key;
    KeyType type;
    size_t offset;
    const char *def;   /* the default's text, NULL = zero */
    const char *range; /* TDM_TRAIN_CONFIG_KEYS' range column */
} KeySpec;

#define KEY_SPEC(field, type, key, def, range, ...)                                            \
    {key, KEY_##type, offsetof(TdmTrainConfig, field), def, range},
#define NO_SPEC(...)
static const KeySpec key_specs[] = {TDM_TRAIN_CONFIG_KEYS(KEY_SPEC, NO_SPEC)};
#undef KEY_SPEC
#undef NO_SPEC

/* The structs' sizes are ABI (on 64-bit systems): a new key or figure
 * takes the room of a reserved slot. The fine-tuning keys (lr groups,
 * clipping, early stopping) and the six checkpoint keys outgrew the one
 * slot left and grew the config from 288 bytes, model.recompute grew it
 * again with four reserved slots: code built against older headers must be
 * rebuilt. */
G_STATIC_ASSERT(sizeof(gpointer) != 8 || sizeof(TdmTrainConfig) == 384);
G_STATIC_ASSERT(sizeof(gpointer) != 8 || sizeof(TdmTrainSummary) == 96);

/* "section.key" of every key, grouped by section in the order the
 * sections first appear (transfer none, NULL-terminated). */
static const char *const *key_names_get(void)
{
    static const char *names[G_N_ELEMENTS(key_specs) + 1];
    static gsize done = 0;
    if (g_once_init_enter(&done)) {
        size_t n = 0;
        for (size_t i = 0; i < G_N_ELEMENTS(key_specs); i++) {
            const char *dot = strchr(key_specs[i].key, '.');
            size_t section = (size_t)(dot - key_specs[i].key);
            gboolean seen = FALSE;
            for (size_t k = 0; k < n && !seen; k++) {
                seen = strncmp(names[k], key_specs[i].key, section + 1) == 0;
            }
            for (size_t j = i; !seen && j < G_N_ELEMENTS(key_specs); j++) {
                if (strncmp(key_specs[j].key, key_specs[i].key, section + 1) == 0) {
                    names[n++] = key_specs[j].key;
                }
            }
        }
        names[n] = NULL;
        g_once_init_leave(&done, 1);
    }
    return names;
}

const char *const *tdm_train_config_keys(void)
{
    return key_names_get();
}

void tdm_train_config_init(TdmTrainConfig *cfg)
{
    g_return_if_fail(cfg != NULL);
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < G_N_ELEMENTS(key_specs); i++) {
        g_autoptr(GError) error = NULL;
        if (key_specs[i].def != NULL &&
            !tdm_train_config_set(cfg, key_specs[i].key, key_specs[i].def, &error)) {
            g_critical("the default of %s: %s", key_specs[i].key, error->message);
        }
    }
}

void tdm_train_config_clear(TdmTrainConfig *cfg)
{
    if (cfg == NULL) {
        return;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(key_specs); i++) {
        KeyType t = key_specs[i].type;
        if (t == KEY_STRING || t == KEY_PATH || t == KEY_NAME) {
            char **field = (char **)((char *)cfg + key_specs[i].offset);
            g_clear_pointer(field, g_free);
        }
    }
}

static const KeySpec *find_key(const char *key)
{
    for (size_t i = 0; i < G_N_ELEMENTS(key_specs); i++) {
        if (strcmp(key_specs[i].key, key) == 0) {
            return &key_specs[i];
        }
    }
    return NULL;
}

/* A number's range from the range column: "[min, max]", "(min, max]"
 * (min excluded) or ">= min"; without one, [lo, hi]. */
static void range_bounds(const char *range, double lo, double hi, double *min, double *max,
                         gboolean *min_open)
{
    *min = lo;
    *max = hi;
    *min_open = FALSE;
    if (range == NULL) {
        return;
    }
    if (g_str_has_prefix(range, ">=")) {
        *min = g_ascii_strtod(range + 2, NULL);
        return;
    }
    char *end = NULL;
    *min_open = range[0] == '(';
    *min = g_ascii_strtod(range + 1, &end);
    *max = g_ascii_strtod(end + 1, NULL); /* past the comma */
}

static gboolean invalid(GError **error, const char *key, const char *value, const char *why)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "invalid value '%s' for %s: %s", value,
                key, why);
    return FALSE;
}

/* "strategy.KEY" = VALUE: "KEY=VALUE" into strategy.args, in place of an
 * earlier KEY. The strategy's own specs check the value when it is set up
 * (the strategy may be named later, by train.strategy). */
static gboolean set_strategy_param(TdmTrainConfig *cfg, const char *key, const char *value,
                                   GError **error)
{
    const char *name = key + strlen("strategy.");
    if (name[0] == '\0' || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_") != strlen(name)) {
        return invalid(error, key, value,
                       "expected strategy.KEY with a parameter name of letters, digits, '-', '_'");
    }
    g_autofree char *v = g_strstrip(g_strdup(value));
    if (v[0] == '\0' || strpbrk(v, " \t\n\"'=") != NULL) {
        return invalid(error, key, value, "expected a value without spaces, quotes or '='");
    }
    g_autoptr(GString) args = g_string_new(NULL);
    g_auto(GStrv) old = g_strsplit(cfg->strategy_args != NULL ? cfg->strategy_args : "", " ", -1);
    g_autofree char *prefix = g_strdup_printf("%s=", name);
    for (char **o = old; *o != NULL; o++) {
        if ((*o)[0] != '\0' && !g_str_has_prefix(*o, prefix)) {
            g_string_append_printf(args, "%s ", *o);
        }
    }
    g_string_append_printf(args, "%s=%s", name, v);
    g_free(cfg->strategy_args);
    cfg->strategy_args = g_string_free(g_steal_pointer(&args), FALSE);
    return TRUE;
}

gboolean tdm_train_config_set(TdmTrainConfig *cfg, const char *key, const char *value,
                              GError **error)
{
    g_return_val_if_fail(cfg != NULL && key != NULL, FALSE);
    if (value == NULL) {
        value = "";
    }
    const KeySpec *spec = find_key(key);
    if (spec == NULL && g_str_has_prefix(key, "strategy.")) {
        return set_strategy_param(cfg, key, value, error);
    }
    if (spec == NULL) {
        /* the same key name in another section is the likely meaning */
        const char *leaf = strrchr(key, '.');
        leaf = leaf != NULL ? leaf + 1 : key;
        const char *other = NULL;
        for (size_t i = 0; other == NULL && leaf[0] != '\0' && i < G_N_ELEMENTS(key_specs); i++) {
            const char *dot = strchr(key_specs[i].key, '.');
            if (dot != NULL && strcmp(dot + 1, leaf) == 0) {
                other = key_specs[i].key;
            }
        }
        g_autofree char *known = g_strjoinv(", ", (char **)key_names_get());
        g_autofree char *hint =
            other != NULL ? g_strdup_printf(" (did you mean '%s'?)", other) : g_strdup("");
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "unknown configuration key '%s' (value '%s')%s; known keys: %s", key, value,
                    hint, known);
        return FALSE;
    }
    void *field = (char *)cfg + spec->offset;
    g_autofree char *v = g_strstrip(g_strdup(value));

    switch (spec->type) {
    case KEY_STRING:
    case KEY_PATH:
    case KEY_NAME: {
        if (spec->type == KEY_NAME && v[0] == '\0') {
            return invalid(error, key, value, "must not be empty");
        }
        g_auto(GStrv) choices = spec->range != NULL ? g_strsplit(spec->range, "|", -1) : NULL;
        if (choices != NULL && !g_strv_contains((const char *const *)choices, v)) {
            g_autofree char *allowed = g_strjoinv(", ", choices);
            g_autofree char *why = g_strdup_printf("expected one of %s", allowed);
            return invalid(error, key, value, why);
        }
        char **s = field;
        g_free(*s);
        *s = v[0] != '\0' ? g_strdup(v) : NULL;
        return TRUE;
    }
    case KEY_BOOL: {
        gboolean b;
        if (!tdm_parse_bool_word(v, &b)) {
            return invalid(error, key, value, "expected true or false");
        }
        *(gboolean *)field = b;
        return TRUE;
    }
    case KEY_INT:
    case KEY_INT64: {
        char *end = NULL;
        errno = 0;
        gint64 n = g_ascii_strtoll(v, &end, 10);
        if (v[0] == '\0' || *end != '\0' || errno != 0) {
            return invalid(error, key, value, "expected an integer");
        }
        double min, max;
        gboolean min_open;
        if (spec->type == KEY_INT) {
            range_bounds(spec->range, G_MININT, G_MAXINT, &min, &max, &min_open);
        } else {
            range_bounds(spec->range, (double)G_MININT64, (double)G_MAXINT64, &min, &max,
                         &min_open);
        }
        if ((double)n < min || (double)n > max) {
            g_autofree char *why =
                spec->range == NULL ? g_strdup("expected an integer that fits an int")
                : spec->range[0] == '>' ? g_strdup_printf("expected an integer %s", spec->range)
                                        : g_strdup_printf("expected an integer in %s", spec->range);
            return invalid(error, key, value, why);
        }
        if (spec->type == KEY_INT) {
            *(int *)field = (int)n;
        } else {
            *(int64_t *)field = n;
        }
        return TRUE;
    }
    case KEY_UINT64: {
        char *end = NULL;
        errno = 0;
        guint64 n = g_ascii_strtoull(v, &end, 10);
        if (v[0] == '\0' || v[0] == '-' || *end != '\0' || errno != 0) {
            return invalid(error, key, value, "expected a non-negative integer");
        }
        *(guint64 *)field = n;
        return TRUE;
    }
    case KEY_FLOAT: {
        char *end = NULL;
        errno = 0;
        double d = g_ascii_strtod(v, &end);
        if (v[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(d)) {
            return invalid(error, key, value, "expected a number");
        }
        double min, max;
        gboolean min_open;
        range_bounds(spec->range, -G_MAXFLOAT, G_MAXFLOAT, &min, &max, &min_open);
        if (d < min || d > max || (min_open && d == min)) {
            g_autofree char *why = spec->range != NULL
                                       ? g_strdup_printf("expected a number in %s", spec->range)
                                       : g_strdup("expected a number that fits a float");
            return invalid(error, key, value, why);
        }
        *(float *)field = (float)d;
        return TRUE;
    }
    }
    return invalid(error, key, value, "unsupported key type");
}

gboolean tdm_train_config_load(TdmTrainConfig *cfg, const char *path, GError **error)
{
    g_return_val_if_fail(cfg != NULL && path != NULL, FALSE);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    GError *local = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &local)) {
        int code = local->domain == G_FILE_ERROR ? TDM_ERROR_IO : TDM_ERROR_INVALID_ARG;
        g_set_error(error, TDM_ERROR, code, "%s: %s", path, local->message);
        g_error_free(local);
        return FALSE;
    }
    g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
    for (char **g = groups; *g != NULL; g++) {
        g_auto(GStrv) keys = g_key_file_get_keys(kf, *g, NULL, NULL);
        for (char **k = keys; keys != NULL && *k != NULL; k++) {
            g_autofree char *full = g_strdup_printf("%s.%s", *g, *k);
            g_autofree char *value = g_key_file_get_string(kf, *g, *k, &local);
            if (value == NULL) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: key %s: %s", path, full,
                            local->message);
                g_error_free(local);
                return FALSE;
            }
            if (!tdm_train_config_set(cfg, full, value, &local)) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: [%s] %s", path, *g,
                            local->message);
                g_error_free(local);
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* core/config.c - the training configuration: defaults, "section.key=value"
 * settings and INI files.
 *
 * Every key lives in one table (name, type, field offset, range or allowed
 * values), so defaults, validation, the INI loader and the list of keys
 * shown to users cannot drift apart. tdm_train_config_set() is the single
 * entry point that parses and checks a value; the INI loader (GKeyFile) and
 * the command line's --set both go through it, and errors always name the
 * key and the offending value (and the file, for INI files).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef enum {
    KEY_STRING,   /* char *, "" allowed (means unset) */
    KEY_NAME,     /* char *, must not be empty */
    KEY_INT,      /* int in [min, max] */
    KEY_INT64,    /* int64_t in [min, max] */
    KEY_UINT64,   /* guint64 */
    KEY_FLOAT,    /* float in [min, max] (or (min, max] when min_open) */
    KEY_BOOL,     /* gboolean */
} KeyType;

typedef struct {
    const char *key;
    KeyType type;
    size_t offset;
    double min, max;
    gboolean min_open;          /* float: min itself is not allowed */
    const char *const *choices; /* KEY_NAME: allowed values, NULL = any */
} KeySpec;

static const char *const schedule_choices[] = {"constant", "step", "cosine", NULL};

#define F(field) offsetof(TdmTrainConfig, field)
static const KeySpec key_specs[] = {
    {"model.name", KEY_NAME, F(model), 0, 0, FALSE, NULL},
    {"model.in_channels", KEY_INT, F(in_channels), 0, 4, FALSE, NULL},
    {"model.num_classes", KEY_INT, F(num_classes), 0, 1000000, FALSE, NULL},
    {"model.init", KEY_STRING, F(init_path), 0, 0, FALSE, NULL},
    {"model.freeze", KEY_STRING, F(freeze), 0, 0, FALSE, NULL},
    {"model.init_skip", KEY_STRING, F(init_skip), 0, 0, FALSE, NULL},
    {"data.dataset", KEY_NAME, F(dataset), 0, 0, FALSE, NULL},
    {"data.limit", KEY_INT64, F(limit), 0, (double)G_MAXINT64, FALSE, NULL},
    {"data.batch_size", KEY_INT, F(batch_size), 1, 1 << 20, FALSE, NULL},
    {"data.workers", KEY_INT, F(workers), 0, 1024, FALSE, NULL},
    {"data.normalize", KEY_BOOL, F(normalize), 0, 0, FALSE, NULL},
    {"data.prefetch", KEY_INT, F(prefetch), 0, 1024, FALSE, NULL},
    {"data.transforms", KEY_STRING, F(transforms), 0, 0, FALSE, NULL},
    {"data.test_transforms", KEY_STRING, F(test_transforms), 0, 0, FALSE, NULL},
    {"data.pin_memory", KEY_BOOL, F(pin_memory), 0, 0, FALSE, NULL},
    {"optim.name", KEY_NAME, F(optimizer), 0, 0, FALSE, NULL},
    {"optim.lr", KEY_FLOAT, F(lr), 0, 1e6, FALSE, NULL},
    {"optim.momentum", KEY_FLOAT, F(momentum), 0, 1, FALSE, NULL},
    {"optim.nesterov", KEY_BOOL, F(nesterov), 0, 0, FALSE, NULL},
    {"optim.weight_decay", KEY_FLOAT, F(weight_decay), 0, 1e6, FALSE, NULL},
    {"optim.beta1", KEY_FLOAT, F(beta1), 0, 1, FALSE, NULL},
    {"optim.beta2", KEY_FLOAT, F(beta2), 0, 1, FALSE, NULL},
    {"optim.eps", KEY_FLOAT, F(eps), 0, 1, TRUE, NULL},
    {"optim.schedule", KEY_NAME, F(schedule), 0, 0, FALSE, schedule_choices},
    {"optim.warmup_steps", KEY_INT64, F(warmup_steps), 0, (double)G_MAXINT64, FALSE, NULL},
    {"optim.step_size", KEY_INT, F(step_size), 1, G_MAXINT, FALSE, NULL},
    {"optim.gamma", KEY_FLOAT, F(gamma), 0, 1e6, TRUE, NULL},
    {"optim.min_lr", KEY_FLOAT, F(min_lr), 0, 1e6, FALSE, NULL},
    {"optim.label_smoothing", KEY_FLOAT, F(label_smoothing), 0, 1, FALSE, NULL},
    {"train.epochs", KEY_INT, F(epochs), 1, 1000000, FALSE, NULL},
    {"train.seed", KEY_UINT64, F(seed), 0, 0, FALSE, NULL},
    {"train.threads", KEY_INT, F(threads), 0, 4096, FALSE, NULL},
    {"train.device", KEY_NAME, F(device), 0, 0, FALSE, NULL},
    {"train.strategy", KEY_NAME, F(strategy), 0, 0, FALSE, NULL},
    {"train.accumulate", KEY_INT, F(accumulate), 1, 1 << 20, FALSE, NULL},
    {"train.log_file", KEY_STRING, F(log_file), 0, 0, FALSE, NULL},
    {"train.save", KEY_STRING, F(save_path), 0, 0, FALSE, NULL},
    {"train.eval", KEY_BOOL, F(eval), 0, 0, FALSE, NULL},
    {"train.progress", KEY_INT, F(progress), 0, G_MAXINT, FALSE, NULL},
    {"train.collective", KEY_STRING, F(collective), 0, 0, FALSE, NULL},
    {"train.devices", KEY_STRING, F(devices), 0, 0, FALSE, NULL},
    {"train.timeout", KEY_INT, F(timeout), 0, 1000000000, FALSE, NULL},
};
#undef F

static const char *const key_names[] = {
    "model.name", "model.in_channels", "model.num_classes", "model.init", "model.freeze",
    "model.init_skip",
    "data.dataset", "data.limit", "data.batch_size", "data.workers", "data.normalize",
    "data.prefetch", "data.transforms", "data.test_transforms", "data.pin_memory",
    "optim.name", "optim.lr", "optim.momentum", "optim.nesterov", "optim.weight_decay",
    "optim.beta1", "optim.beta2", "optim.eps", "optim.schedule", "optim.warmup_steps",
    "optim.step_size", "optim.gamma", "optim.min_lr", "optim.label_smoothing",
    "train.epochs", "train.seed", "train.threads", "train.device", "train.strategy",
    "train.accumulate", "train.log_file", "train.save", "train.eval", "train.progress",
    "train.collective", "train.devices", "train.timeout",
    NULL,
};
G_STATIC_ASSERT(G_N_ELEMENTS(key_names) == G_N_ELEMENTS(key_specs) + 1);

const char *const *tdm_train_config_keys(void)
{
    return key_names;
}

void tdm_train_config_init(TdmTrainConfig *cfg)
{
    g_return_if_fail(cfg != NULL);
    memset(cfg, 0, sizeof(*cfg));
    cfg->model = g_strdup("mlp");
    cfg->dataset = g_strdup("fashion-mnist");
    cfg->batch_size = 64;
    cfg->normalize = TRUE;
    cfg->prefetch = 2;
    cfg->optimizer = g_strdup("sgd");
    cfg->lr = 0.05f;
    cfg->momentum = 0.9f;
    cfg->weight_decay = 5e-4f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.999f;
    cfg->eps = 1e-8f;
    cfg->schedule = g_strdup("constant");
    cfg->step_size = 30;
    cfg->gamma = 0.1f;
    cfg->epochs = 1;
    cfg->device = g_strdup("auto");
    cfg->strategy = g_strdup("single");
    cfg->accumulate = 1;
    cfg->eval = TRUE;
    cfg->progress = 50;
}

void tdm_train_config_clear(TdmTrainConfig *cfg)
{
    if (cfg == NULL) {
        return;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(key_specs); i++) {
        if (key_specs[i].type == KEY_STRING || key_specs[i].type == KEY_NAME) {
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

static gboolean parse_bool(const char *s, gboolean *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < G_N_ELEMENTS(yes); i++) {
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

static gboolean invalid(GError **error, const char *key, const char *value, const char *why)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "invalid value '%s' for %s: %s", value,
                key, why);
    return FALSE;
}

gboolean tdm_train_config_set(TdmTrainConfig *cfg, const char *key, const char *value,
                              GError **error)
{
    g_return_val_if_fail(cfg != NULL && key != NULL, FALSE);
    if (value == NULL) {
        value = "";
    }
    const KeySpec *spec = find_key(key);
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
        g_autofree char *known = g_strjoinv(", ", (char **)key_names);
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
    case KEY_NAME: {
        if (spec->type == KEY_NAME && v[0] == '\0') {
            return invalid(error, key, value, "must not be empty");
        }
        if (spec->choices != NULL && !g_strv_contains(spec->choices, v)) {
            g_autofree char *allowed = g_strjoinv(", ", (char **)spec->choices);
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
        if (!parse_bool(v, &b)) {
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
        if ((double)n < spec->min || (double)n > spec->max) {
            /* (double)G_MAXINT64 rounds up to 2^63: no upper bound to print */
            g_autofree char *why =
                spec->max >= (double)G_MAXINT64
                    ? g_strdup_printf("expected an integer >= %.0f", spec->min)
                    : g_strdup_printf("expected an integer in [%.0f, %.0f]", spec->min, spec->max);
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
        if (d < spec->min || d > spec->max || (spec->min_open && d == spec->min)) {
            g_autofree char *why = g_strdup_printf("expected a number in %c%g, %g]",
                                                   spec->min_open ? '(' : '[', spec->min,
                                                   spec->max);
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

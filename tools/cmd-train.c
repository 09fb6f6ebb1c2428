/* SPDX-License-Identifier: MIT */
/* tools/cmd-train.c - `tandem train` and `tandem eval`.
 *
 * Both commands build a TdmTrainConfig in three layers: the defaults, then
 * an INI file (--config), then the command line: the flags, each setting
 * its "section.key" in the order given, and finally every --set
 * section.key=value in the order given. The flags and their --help text
 * come from the same list as the keys themselves (TDM_TRAIN_CONFIG_KEYS in
 * <tandem/trainer.h>), so a key and its flag cannot drift apart. All values
 * go through tdm_train_config_set(), so a bad value is reported the same
 * way wherever it came from. `train` hands the config to tdm_trainer_run();
 * `eval` loads weights into a zoo model and reports accuracy and loss on
 * the test split, through the loader the training's own evaluation uses.
 * Errors are one line "tandem <command>: <message>" on stderr; the exit
 * status is 1 for a failure and 2 for a usage error.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"

#define EXIT_USAGE 2

/* One command-line flag: a key's own or an alias's (both are entries of
 * TDM_TRAIN_CONFIG_KEYS). */
typedef struct {
    const char *flag;   /* long name, NULL = the key has none */
    char short_name;
    const char *key;
    const char *type;   /* the key's TYPE ("BOOL", "PATH", ...); NULL for an alias */
    const char *value;  /* what an alias sets, NULL = it takes ARG */
    const char *arg;
    const char *def;    /* the key's default, for --help */
    gboolean eval_too;  /* `tandem eval` takes it as well */
    const char *help;
} Flag;

#define SCOPE_NONE FALSE
#define SCOPE_TRAIN FALSE
#define SCOPE_TRAIN_EVAL TRUE
#define KEY_FLAG(field, type, key, def, range, flag, short_name, arg, scope, help)               \
    {flag, short_name, key, #type, NULL, arg, def, SCOPE_##scope, help},
#define ALIAS_FLAG(flag, short_name, key, value, arg, scope, help)                               \
    {flag, short_name, key, NULL, value, arg, NULL, SCOPE_##scope, help},
static const Flag flags[] = {TDM_TRAIN_CONFIG_KEYS(KEY_FLAG, ALIAS_FLAG)};
#undef KEY_FLAG
#undef ALIAS_FLAG

/* The value a flag without an argument sets: a BOOL key's --name true and
 * --no-name false, an alias its own; NULL when the flag takes an argument. */
static const char *flag_switch_value(const Flag *f)
{
    if (f->type != NULL && strcmp(f->type, "BOOL") == 0) {
        return g_str_has_prefix(f->flag, "no-") ? "false" : "true";
    }
    return f->value;
}

/* "Batch size (data.batch_size, default 64)", "Skip evaluation
 * (train.eval=false)" (transfer full). */
static char *flag_help(const Flag *f)
{
    const char *set = flag_switch_value(f);
    g_autofree char *help = NULL;
    if (strcmp(f->key, "model.name") == 0) {
        /* the zoo's names, from the zoo itself so that the list stays true */
        g_autofree char *names = g_strjoinv(", ", (char **)tdm_model_zoo_names());
        help = g_strdup_printf("%s: %s", f->help, names);
    } else {
        help = g_strdup(f->help);
    }
    if (set != NULL) {
        return g_strdup_printf("%s (%s=%s)", help, f->key, set);
    }
    if (f->def != NULL) {
        return g_strdup_printf("%s (%s, default %s)", help, f->key, f->def);
    }
    return g_strdup_printf("%s (%s)", help, f->key);
}

/* A flag as the command line gave it: "--lr" or "-m". */
static const Flag *flag_find(const char *option_name)
{
    gboolean is_long = option_name[0] == '-' && option_name[1] == '-';
    for (size_t i = 0; i < G_N_ELEMENTS(flags); i++) {
        if (flags[i].flag != NULL &&
            (is_long ? strcmp(option_name + 2, flags[i].flag) == 0
                     : flags[i].short_name != 0 && option_name[1] == flags[i].short_name)) {
            return &flags[i];
        }
    }
    return NULL;
}

typedef struct {
    const char *key;
    char *value;
} Setting;

static void setting_clear(gpointer p)
{
    g_free(((Setting *)p)->value);
}

/* GOption calls this for every flag, in the order given: the settings are
 * applied after the INI file. */
static gboolean on_flag(const char *option_name, const char *value, gpointer data,
                        GError **error)
{
    const Flag *f = flag_find(option_name);
    if (f == NULL) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION, "unknown option %s",
                    option_name);
        return FALSE;
    }
    const char *set = flag_switch_value(f);
    Setting s = {f->key, g_strdup(set != NULL ? set : value)};
    g_array_append_val((GArray *)data, s);
    return TRUE;
}

/* Parse argv into `cfg`. Returns 0, or the exit status after printing the
 * error. */
static int parse_command_line(const char *command, gboolean is_eval, int argc, char **argv,
                              TdmTrainConfig *cfg)
{
    g_autofree char *config_file = NULL;
    g_auto(GStrv) sets = NULL;
    g_autoptr(GArray) settings = g_array_new(FALSE, FALSE, sizeof(Setting));
    g_array_set_clear_func(settings, setting_clear);
    g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) entries = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));
    const GOptionEntry fixed[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config_file, "INI configuration file",
         "FILE"},
        {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &sets,
         "Set a configuration key (repeatable, applied last)", "SECTION.KEY=VALUE"},
    };
    g_array_append_vals(entries, fixed, G_N_ELEMENTS(fixed));
    for (size_t i = 0; i < G_N_ELEMENTS(flags); i++) {
        const Flag *f = &flags[i];
        if (f->flag == NULL || (is_eval && !f->eval_too)) {
            continue;
        }
        gboolean is_path = f->type != NULL && strcmp(f->type, "PATH") == 0;
        GOptionEntry e = {f->flag, f->short_name,
                          (flag_switch_value(f) != NULL ? G_OPTION_FLAG_NO_ARG : 0) |
                              (is_path ? G_OPTION_FLAG_FILENAME : 0),
                          G_OPTION_ARG_CALLBACK, (gpointer)on_flag, flag_help(f), f->arg};
        g_ptr_array_add(texts, (gpointer)e.description);
        g_array_append_val(entries, e);
    }

    /* --help's "Usage: tandem train [OPTION...]", which the man pages show */
    g_autofree char *prgname = g_strdup_printf("tandem %s", command);
    g_set_prgname(prgname);
    g_autoptr(GOptionContext) ctx =
        g_option_context_new(is_eval ? "- evaluate saved weights on the test split"
                                     : "- train a model");
    GOptionGroup *group = g_option_group_new(command, "", "", settings, NULL);
    g_option_group_add_entries(group, (const GOptionEntry *)entries->data);
    g_option_context_set_main_group(ctx, group);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "tandem %s: %s\n", command, error->message);
        return EXIT_USAGE;
    }
    if (argc > 1) {
        fprintf(stderr, "tandem %s: unexpected argument '%s' (see --help)\n", command, argv[1]);
        return EXIT_USAGE;
    }

    if (config_file != NULL && !tdm_train_config_load(cfg, config_file, &error)) {
        fprintf(stderr, "tandem %s: %s\n", command, error->message);
        return 1;
    }
    for (guint i = 0; i < settings->len; i++) {
        const Setting *s = &g_array_index(settings, Setting, i);
        if (!tdm_train_config_set(cfg, s->key, s->value, &error)) {
            fprintf(stderr, "tandem %s: %s\n", command, error->message);
            return 1;
        }
    }
    for (char **s = sets; s != NULL && *s != NULL; s++) {
        const char *eq = strchr(*s, '=');
        if (eq == NULL || eq == *s) {
            fprintf(stderr, "tandem %s: --set expects SECTION.KEY=VALUE, got '%s'\n", command,
                    *s);
            return EXIT_USAGE;
        }
        g_autofree char *key = g_strstrip(g_strndup(*s, (gsize)(eq - *s)));
        if (!tdm_train_config_set(cfg, key, eq + 1, &error)) {
            fprintf(stderr, "tandem %s: %s\n", command, error->message);
            return 1;
        }
    }
    return 0;
}

int tdm_cmd_train(int argc, char **argv)
{
    const char *command = argc > 0 ? argv[0] : "train";
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    int status = parse_command_line(command, FALSE, argc, argv, &cfg);
    if (status == 0) {
        g_autoptr(GError) error = NULL;
        if (!tdm_trainer_run(&cfg, NULL, &error)) {
            fprintf(stderr, "tandem %s: %s\n", command, error->message);
            status = 1;
        }
    }
    tdm_train_config_clear(&cfg);
    return status;
}

static gboolean run_eval(const TdmTrainConfig *cfg, GError **error)
{
    if (cfg->init_path == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "no weights to evaluate: give --init FILE (model.init)");
        return FALSE;
    }
    TdmDevice *dev = tdm_device_get(cfg->device, error);
    if (dev == NULL) {
        return FALSE;
    }
    tdm_device_set_num_threads(dev, cfg->threads);
    TdmPrecision precision = TDM_PRECISION_FP32;
    if (!tdm_precision_from_name(cfg->precision, &precision, error) ||
        !tdm_device_set_precision(dev, precision, error)) {
        g_prefix_error(error, "train.precision: ");
        return FALSE;
    }
    gboolean ok = FALSE;
    TdmLoader *loader = NULL;
    TdmModel *model = NULL;
    TdmDataset *ds = tdm_dataset_open(cfg->dataset, "test", error);
    if (ds == NULL) {
        return FALSE;
    }
    if ((loader = tdm_trainer_open_test_loader(cfg, ds, dev, error)) == NULL) {
        goto out;
    }
    /* The model is sized by the samples the loader makes: the size it was
     * trained on. */
    TdmModelConfig mc = {0};
    int c, w;
    tdm_loader_sample_shape(loader, &c, &mc.image_size, &w);
    mc.in_channels = cfg->in_channels > 0 ? cfg->in_channels : c;
    mc.num_classes = cfg->num_classes > 0 ? cfg->num_classes : ds->num_classes;
    TdmModule *root = tdm_model_zoo_create(cfg->model, &mc, error);
    if (root == NULL || (model = tdm_model_new(root, dev, cfg->seed, error)) == NULL ||
        !tdm_model_load(model, cfg->init_path, TRUE, error)) {
        goto out;
    }
    double accuracy = 0.0, loss = 0.0;
    if (!tdm_model_evaluate(model, loader, &accuracy, &loss, error)) {
        goto out;
    }
    printf("eval: model %s, %" G_GINT64_FORMAT " test images of %s:%s, test accuracy %.4f (loss "
           "%.4f)\n", cfg->model, tdm_loader_num_samples(loader), ds->kind, ds->path, accuracy,
           loss);
    ok = TRUE;
out:
    tdm_model_free(model);
    tdm_loader_free(loader);
    tdm_dataset_close(ds);
    return ok;
}

int tdm_cmd_eval(int argc, char **argv)
{
    const char *command = argc > 0 ? argv[0] : "eval";
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    int status = parse_command_line(command, TRUE, argc, argv, &cfg);
    if (status == 0) {
        g_autoptr(GError) error = NULL;
        if (!run_eval(&cfg, &error)) {
            fprintf(stderr, "tandem %s: %s\n", command, error->message);
            status = 1;
        }
    }
    tdm_train_config_clear(&cfg);
    return status;
}

/* tools/cmd-train.c - `tandem train` and `tandem eval`.
 *
 * Both commands build a TdmTrainConfig in three layers: the defaults, then
 * an INI file (--config), then the command line: convenience flags such as
 * --lr, each mapped to its "section.key", and finally every --set
 * section.key=value in the order given. All values go through
 * tdm_train_config_set(), so a bad value is reported the same way wherever
 * it came from. `train` hands the config to tdm_trainer_run(); `eval` loads
 * weights into a zoo model and reports accuracy and loss on the test split.
 * Errors are one line "tandem <command>: <message>" on stderr; the exit
 * status is 1 for a failure and 2 for a usage error.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"

/* core/dataset.c (exported; to be declared in <tandem/data.h>). */
#define EXIT_USAGE 2

typedef struct {
    char *config_file;
    char **sets;
    /* Convenience flags, kept as text so that tdm_train_config_set()
     * validates them. */
    char *model, *dataset, *limit, *batch_size, *epochs, *optimizer, *lr, *momentum;
    char *weight_decay, *schedule, *warmup_steps, *seed, *threads, *device, *backend;
    char *strategy, *log_file, *save, *init, *freeze, *progress, *workers;
    char *accumulate, *collective, *devices, *timeout, *prefetch, *transforms;
    char *test_transforms, *init_skip;
    gboolean nesterov, no_eval, quiet, pin_memory;
} TrainArgs;

static void train_args_clear(TrainArgs *a)
{
    char **strings[] = {&a->config_file, &a->model, &a->dataset, &a->limit, &a->batch_size,
                        &a->epochs, &a->optimizer, &a->lr, &a->momentum, &a->weight_decay,
                        &a->schedule, &a->warmup_steps, &a->seed, &a->threads, &a->device,
                        &a->backend, &a->strategy, &a->log_file, &a->save, &a->init,
                        &a->freeze, &a->progress, &a->workers, &a->accumulate,
                        &a->collective, &a->devices, &a->timeout, &a->prefetch,
                        &a->transforms, &a->test_transforms, &a->init_skip};
    for (size_t i = 0; i < G_N_ELEMENTS(strings); i++) {
        g_clear_pointer(strings[i], g_free);
    }
    g_clear_pointer(&a->sets, g_strfreev);
}

/* Parse argv into `cfg`. Returns 0, or the exit status after printing the
 * error. */
static int parse_command_line(const char *command, gboolean is_eval, int argc, char **argv,
                              TdmTrainConfig *cfg)
{
    TrainArgs a = {0};
    GOptionEntry common[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &a.config_file, "INI configuration file",
         "FILE"},
        {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &a.sets,
         "Set a configuration key (repeatable, applied last)", "SECTION.KEY=VALUE"},
        {"model", 'm', 0, G_OPTION_ARG_STRING, &a.model, "Model from the zoo (model.name)", "NAME"},
        {"dataset", 'd', 0, G_OPTION_ARG_STRING, &a.dataset,
         "Dataset: fashion-mnist, mnist or KIND:PATH (data.dataset)", "SPEC"},
        {"batch-size", 'b', 0, G_OPTION_ARG_STRING, &a.batch_size, "Batch size (data.batch_size)",
         "N"},
        {"workers", 0, 0, G_OPTION_ARG_STRING, &a.workers, "Loader threads (data.workers)", "N"},
        {"prefetch", 0, 0, G_OPTION_ARG_STRING, &a.prefetch,
         "Batches each loader thread prepares ahead (data.prefetch)", "N"},
        {"pin-memory", 0, 0, G_OPTION_ARG_NONE, &a.pin_memory,
         "Stage batches in the backend's pinned host memory (data.pin_memory)", NULL},
        {"seed", 0, 0, G_OPTION_ARG_STRING, &a.seed, "Random seed (train.seed)", "N"},
        {"threads", 't', 0, G_OPTION_ARG_STRING, &a.threads,
         "Compute threads, 0 = all cores (train.threads)", "N"},
        {"device", 0, 0, G_OPTION_ARG_STRING, &a.device,
         "Device: auto, cpu, ref, cuda:1... (train.device)", "SPEC"},
        {"backend", 0, 0, G_OPTION_ARG_STRING, &a.backend, "Same as --device", "NAME"},
        {"init", 0, 0, G_OPTION_ARG_FILENAME, &a.init,
         "Start from these safetensors weights (model.init)", "FILE"},
        /* eval takes both so that it reads the test split exactly as the
         * training's own evaluation did (same normalisation, same sizes) */
        {"transforms", 0, 0, G_OPTION_ARG_STRING, &a.transforms,
         "Augmentation pipeline, e.g. \"random-crop 28 pad=2 | hflip\" (data.transforms)",
         "PIPELINE"},
        {"test-transforms", 0, 0, G_OPTION_ARG_STRING, &a.test_transforms,
         "Evaluation pipeline, e.g. \"resize 64 | center-crop 64\" (data.test_transforms)",
         "PIPELINE"},
        {NULL},
    };
    GOptionEntry train_only[] = {
        {"limit", 'n', 0, G_OPTION_ARG_STRING, &a.limit,
         "Use the first N training images (data.limit)", "N"},
        {"epochs", 'e', 0, G_OPTION_ARG_STRING, &a.epochs, "Epochs (train.epochs)", "N"},
        {"optimizer", 0, 0, G_OPTION_ARG_STRING, &a.optimizer, "sgd, adamw or a plugin's (optim.name)",
         "NAME"},
        {"lr", 0, 0, G_OPTION_ARG_STRING, &a.lr, "Learning rate (optim.lr)", "LR"},
        {"momentum", 0, 0, G_OPTION_ARG_STRING, &a.momentum, "SGD momentum (optim.momentum)",
         "M"},
        {"nesterov", 0, 0, G_OPTION_ARG_NONE, &a.nesterov, "Nesterov momentum (optim.nesterov)",
         NULL},
        {"weight-decay", 0, 0, G_OPTION_ARG_STRING, &a.weight_decay,
         "Weight decay (optim.weight_decay)", "WD"},
        {"schedule", 0, 0, G_OPTION_ARG_STRING, &a.schedule,
         "constant, step or cosine (optim.schedule)", "KIND"},
        {"warmup-steps", 0, 0, G_OPTION_ARG_STRING, &a.warmup_steps,
         "Linear warmup steps (optim.warmup_steps)", "N"},
        {"strategy", 0, 0, G_OPTION_ARG_STRING, &a.strategy,
         "single, dp, ddp, zero1 (train.strategy)", "NAME"},
        {"accumulate", 0, 0, G_OPTION_ARG_STRING, &a.accumulate,
         "Micro-batches per optimizer step (train.accumulate)", "N"},
        {"collective", 0, 0, G_OPTION_ARG_STRING, &a.collective,
         "Collective plugin for ddp/zero1: shm, gloo, ^gloo... (train.collective, TDM_COLLECTIVE; default "
         "automatic)", "SPEC"},
        {"devices", 0, 0, G_OPTION_ARG_STRING, &a.devices,
         "Devices of a dp run, e.g. ref:0,ref:1 (train.devices, TDM_DEVICES)", "LIST"},
        {"timeout", 0, 0, G_OPTION_ARG_STRING, &a.timeout,
         "Seconds before a collective or the rendezvous gives up (train.timeout, TDM_TIMEOUT, 300)", "S"},
        {"log-file", 'l', 0, G_OPTION_ARG_FILENAME, &a.log_file,
         "Write JSON lines here (train.log_file)", "FILE"},
        {"save", 'o', 0, G_OPTION_ARG_FILENAME, &a.save,
         "Save the final weights as safetensors (train.save)", "FILE"},
        {"freeze", 0, 0, G_OPTION_ARG_STRING, &a.freeze,
         "Freeze parameters with these comma-separated name prefixes (model.freeze)", "PREFIXES"},
        {"init-skip", 0, 0, G_OPTION_ARG_STRING, &a.init_skip,
         "Leave parameters with these name prefixes out of --init, e.g. fc for a new classifier "
         "(model.init_skip)", "PREFIXES"},
        {"no-eval", 0, 0, G_OPTION_ARG_NONE, &a.no_eval, "Skip evaluation (train.eval=false)",
         NULL},
        {"progress", 'p', 0, G_OPTION_ARG_STRING, &a.progress,
         "Progress line every N steps, 0 = never (train.progress)", "N"},
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &a.quiet, "No progress output (train.progress=0)",
         NULL},
        {NULL},
    };

    g_autoptr(GOptionContext) ctx =
        g_option_context_new(is_eval ? "- evaluate saved weights on the test split"
                                     : "- train a model");
    g_option_context_add_main_entries(ctx, common, NULL);
    if (!is_eval) {
        g_option_context_add_main_entries(ctx, train_only, NULL);
    }
    g_autoptr(GError) error = NULL;
    int status = 0;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "tandem %s: %s\n", command, error->message);
        status = EXIT_USAGE;
        goto out;
    }
    if (argc > 1) {
        fprintf(stderr, "tandem %s: unexpected argument '%s' (see --help)\n", command, argv[1]);
        status = EXIT_USAGE;
        goto out;
    }

    if (a.config_file != NULL && !tdm_train_config_load(cfg, a.config_file, &error)) {
        fprintf(stderr, "tandem %s: %s\n", command, error->message);
        status = 1;
        goto out;
    }
    const struct {
        const char *key;
        const char *value;
    } flags[] = {
        {"model.name", a.model},
        {"data.dataset", a.dataset},
        {"data.limit", a.limit},
        {"data.batch_size", a.batch_size},
        {"data.workers", a.workers},
        {"data.prefetch", a.prefetch},
        {"data.pin_memory", a.pin_memory ? "true" : NULL},
        {"data.transforms", a.transforms},
        {"data.test_transforms", a.test_transforms},
        {"train.epochs", a.epochs},
        {"optim.name", a.optimizer},
        {"optim.lr", a.lr},
        {"optim.momentum", a.momentum},
        {"optim.nesterov", a.nesterov ? "true" : NULL},
        {"optim.weight_decay", a.weight_decay},
        {"optim.schedule", a.schedule},
        {"optim.warmup_steps", a.warmup_steps},
        {"train.seed", a.seed},
        {"train.threads", a.threads},
        {"train.device", a.backend},
        {"train.device", a.device},
        {"train.strategy", a.strategy},
        {"train.accumulate", a.accumulate},
        {"train.collective", a.collective},
        {"train.devices", a.devices},
        {"train.timeout", a.timeout},
        {"train.log_file", a.log_file},
        {"train.save", a.save},
        {"model.init", a.init},
        {"model.freeze", a.freeze},
        {"model.init_skip", a.init_skip},
        {"train.eval", a.no_eval ? "false" : NULL},
        {"train.progress", a.progress},
        {"train.progress", a.quiet ? "0" : NULL},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(flags); i++) {
        if (flags[i].value != NULL && !tdm_train_config_set(cfg, flags[i].key, flags[i].value,
                                                            &error)) {
            fprintf(stderr, "tandem %s: %s\n", command, error->message);
            status = 1;
            goto out;
        }
    }
    for (char **s = a.sets; s != NULL && *s != NULL; s++) {
        const char *eq = strchr(*s, '=');
        if (eq == NULL || eq == *s) {
            fprintf(stderr, "tandem %s: --set expects SECTION.KEY=VALUE, got '%s'\n", command,
                    *s);
            status = EXIT_USAGE;
            goto out;
        }
        g_autofree char *key = g_strstrip(g_strndup(*s, (gsize)(eq - *s)));
        if (!tdm_train_config_set(cfg, key, eq + 1, &error)) {
            fprintf(stderr, "tandem %s: %s\n", command, error->message);
            status = 1;
            goto out;
        }
    }
out:
    train_args_clear(&a);
    return status;
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
    gboolean ok = FALSE;
    TdmLoader *loader = NULL;
    TdmModel *model = NULL;
    GPtrArray *pipelines = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_transform_pipeline_free);
    TdmDataset *ds = tdm_dataset_open(cfg->dataset, "test", error);
    if (ds == NULL) {
        g_ptr_array_unref(pipelines);
        return FALSE;
    }
    if ((loader = tdm_trainer_open_test_loader(cfg, ds, dev, pipelines, error)) == NULL) {
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
    if (!tdm_evaluate(model, loader, &accuracy, &loss, error)) {
        goto out;
    }
    printf("eval: model %s, %" G_GINT64_FORMAT " test images of %s:%s, test accuracy %.4f (loss "
           "%.4f)\n", cfg->model, tdm_loader_num_samples(loader), ds->kind, ds->path, accuracy,
           loss);
    ok = TRUE;
out:
    tdm_model_free(model);
    tdm_loader_free(loader);
    g_ptr_array_unref(pipelines);
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

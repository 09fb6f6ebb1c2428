/* SPDX-License-Identifier: MIT */
/* core/trainer-setup.c - setting up a training run, before its first step.
 *
 * tdm_trainer_run (core/trainer.c) calls these in order, each filling its
 * part of the TrainRun: the process (who it is in the job, its device or
 * devices, their compute threads and precision), the data (the training
 * pipeline, then this rank's share of the training split and, on rank 0,
 * the test split's evaluation loader), the model (from the zoo, sized by
 * the data, with weights to start from and frozen layers), the optimizer
 * and its learning-rate schedule, and the strategy that runs a step (with the
 * job's store and a communicator when it is distributed). Every check that
 * can fail before training fails here, so that a typo costs no training
 * time; the order of the steps is the order of those errors.
 *
 * In a distributed job (several processes, or a distributed strategy such
 * as ddp or zero1 even in a process started alone: a world of one) every
 * rank reads its own share of each epoch through the distributed sampler:
 * rank r of w gets samples r, r + w, r + 2w, ... of the same shuffled order
 * a single process would use, so at step k the ranks together hold exactly
 * the batch a single process with w times the batch size would take, and
 * all ranks run the same number of steps. The keys train.collective,
 * train.devices and train.timeout (flags --collective, --devices,
 * --timeout) win over TDM_COLLECTIVE, TDM_DEVICES and TDM_TIMEOUT.
 */
#include "config.h"

#include <string.h>

#include "trainer-private.h"

/* Whether the strategy spec ("ddp bucket-mb=25") names `name`. */
static gboolean strategy_is(const char *spec, const char *name)
{
    g_autofree char *first = spec != NULL ? tdm_params_split_name(spec, NULL) : NULL;
    return g_strcmp0(first, name) == 0;
}

/* Strategies that need a communicator. `single` and `dp` run in one
 * process. */
static gboolean strategy_is_distributed(const char *spec)
{
    g_autofree char *name = spec != NULL ? tdm_params_split_name(spec, NULL) : NULL;
    return name != NULL && strcmp(name, "single") != 0 && strcmp(name, "dp") != 0;
}

/* The devices of a dp run: "ref:0,ref:1" (transfer container). */
static GPtrArray *parse_devices(const char *list, GError **error)
{
    GPtrArray *devices = g_ptr_array_new();
    g_auto(GStrv) items = g_strsplit(list, ",", -1);
    for (char **item = items; *item != NULL; item++) {
        g_strstrip(*item);
        TdmDevice *dev = (*item)[0] != '\0' ? tdm_device_get(*item, error) : NULL;
        if (dev == NULL) {
            if ((*item)[0] == '\0') {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "--devices / TDM_DEVICES '%s': empty device name", list);
            } else {
                g_prefix_error(error, "--devices / TDM_DEVICES '%s': ", list);
            }
            g_ptr_array_unref(devices);
            return NULL;
        }
        g_ptr_array_add(devices, dev);
    }
    return devices;
}

/* The job's store (served by rank 0 when no launcher serves it) and the
 * communicator over it. */
static TdmComm *open_comm(const TdmTrainConfig *cfg, const TdmDistEnv *env, TdmDevice *dev,
                          TdmStore **store, TdmStoreServer **server, GError **error)
{
    *store = tdm_store_open_for_job(env, server, error);
    if (*store == NULL) {
        g_prefix_error(error, "rank %d of %d: opening the job's store: ", env->rank,
                       env->world_size);
        return NULL;
    }
    /* train.timeout, else TDM_TIMEOUT or 300 s (tdm_comm_options_init). */
    TdmCommOptions co;
    tdm_comm_options_init(&co);
    if (cfg->timeout > 0) {
        co.timeout_s = cfg->timeout;
        tdm_store_set_timeout(*store, cfg->timeout);
    }
    /* train.collective, else TDM_COLLECTIVE, else automatic. */
    TdmComm *comm = tdm_comm_new(cfg->collective, *store, env, dev, &co, error);
    if (comm == NULL) {
        g_prefix_error(error, "rank %d of %d: creating the communicator: ", env->rank,
                       env->world_size);
    }
    return comm;
}

/* Compute threads: processes sharing a node share its cores unless told
 * otherwise. More threads than cores leave them waiting for each other at
 * every barrier (lenet runs 2.4x slower with --threads 8 on 2 cores). */
static void set_threads(TrainRun *run)
{
    const TdmDistEnv *env = &run->env;
    int threads = run->cfg->threads;
    const int cores = (int)g_get_num_processors();
    if (threads == 0 && env->local_world_size > 1) {
        threads = MAX(1, cores / env->local_world_size);
    }
    const int local_procs = MAX(env->local_world_size, 1), share = MAX(1, cores / local_procs);
    if (env->local_rank == 0 && threads > share) {
        fprintf(stderr,
                "warning: %d compute thread%s x %d process%s on this node, but %d core%s: "
                "train.threads %d (or 0 for an even share) runs faster\n",
                threads, threads == 1 ? "" : "s", local_procs, local_procs == 1 ? "" : "es",
                cores, cores == 1 ? "" : "s", share);
    }
    for (guint i = 0; i < (run->devices != NULL ? run->devices->len : 1); i++) {
        TdmDevice *d = run->devices != NULL ? g_ptr_array_index(run->devices, i) : run->dev;
        tdm_device_set_num_threads(d, threads);
    }
}

/* train.precision on every device the run uses (each of dp's), before
 * anything is allocated: a backend that cannot fails here, not at the
 * first step. fp32 is set too, so that a device keeps no precision of an
 * earlier run in this process. */
static gboolean set_precision(TrainRun *run, GError **error)
{
    TdmPrecision precision = TDM_PRECISION_FP32;
    if (!tdm_precision_from_name(run->cfg->precision, &precision, error)) {
        g_prefix_error(error, "train.precision: ");
        return FALSE;
    }
    for (guint i = 0; i < (run->devices != NULL ? run->devices->len : 1); i++) {
        TdmDevice *d = run->devices != NULL ? g_ptr_array_index(run->devices, i) : run->dev;
        if (!tdm_device_set_precision(d, precision, error)) {
            g_prefix_error(error, "train.precision: ");
            return FALSE;
        }
    }
    return TRUE;
}

gboolean tdm_train_setup_process(TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    /* Who this process is in the job: rank 0 of 1 when started alone. */
    if (!tdm_dist_env_read(&run->env, error)) {
        return FALSE;
    }
    run->leader = run->env.rank == 0;
    if (run->env.world_size > 1 && !strategy_is_distributed(cfg->strategy)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "strategy '%s' runs in one process, but this is rank %d of a job of %d "
                    "(%s): every rank would train alone; use --strategy ddp or zero1",
                    cfg->strategy, run->env.rank, run->env.world_size, run->env.source);
        return FALSE;
    }
    /* dp takes its device list from TDM_DEVICES (--devices); the first one
     * holds the master model. */
    const char *device_list = cfg->devices != NULL ? cfg->devices : g_getenv("TDM_DEVICES");
    if (device_list != NULL && device_list[0] != '\0') {
        if (!strategy_is(cfg->strategy, "dp")) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "--devices (TDM_DEVICES=%s) is for --strategy dp, not '%s'", device_list,
                        cfg->strategy);
            return FALSE;
        }
        if ((run->devices = parse_devices(device_list, error)) == NULL) {
            return FALSE;
        }
        run->dev = g_ptr_array_index(run->devices, 0);
    } else if ((run->dev = tdm_device_get_local(cfg->device, run->env.local_rank, error)) == NULL) {
        /* with several processes on a node and a spec without an index
         * ("auto", "cuda"), the local rank picked one of the backend's
         * devices */
        return FALSE;
    }
    set_threads(run);
    return set_precision(run, error);
}

gboolean tdm_train_loader_options(const TdmTrainConfig *cfg, TdmDataset *norm_ds,
                                  TdmLoaderOptions *lo, GError **error)
{
    tdm_loader_options_init(lo);
    lo->shuffle = FALSE; /* the training loader's own choice */
    lo->batch_size = cfg->batch_size;
    lo->seed = cfg->seed;
    lo->workers = cfg->workers;
    lo->prefetch = cfg->prefetch;
    lo->pin_memory = cfg->pin_memory;
    return !cfg->normalize ||
           tdm_dataset_get_normalization(norm_ds, &lo->n_mean, lo->mean, lo->std, error);
}

gboolean tdm_train_setup_data(TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    if (cfg->early_stop_patience > 0 && !cfg->eval) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "train.early_stop_patience %d needs the evaluation it counts "
                    "(train.eval is off: --no-eval)", cfg->early_stop_patience);
        return FALSE;
    }
    /* Training augmentation: parsed before any data is opened, so that a
     * typo in the pipeline is the first error. */
    if (cfg->transforms != NULL && cfg->transforms[0] != '\0' &&
        (run->transforms = tdm_transform_pipeline_parse(cfg->transforms, error)) == NULL) {
        g_prefix_error(error, "data.transforms: ");
        return FALSE;
    }
    /* This rank's share of the training split: the first `limit` samples,
     * shuffled per epoch. */
    TdmLoaderOptions lo;
    if ((run->train_ds = tdm_dataset_open(cfg->dataset, "train", error)) == NULL ||
        !tdm_train_loader_options(cfg, run->train_ds, &lo, error)) {
        return FALSE;
    }
    lo.shuffle = TRUE;
    lo.limit = cfg->limit;
    lo.rank = run->env.rank;
    lo.world = run->env.world_size;
    /* An argument-less normalize takes the training split's constants, set
     * here on the trainer's own pipeline (the loader would set them on a
     * copy) so that the evaluation below normalises as the training does. */
    if (run->transforms != NULL && lo.n_mean > 0) {
        tdm_transform_pipeline_set_normalization(run->transforms, lo.n_mean, lo.mean, lo.std);
    }
    lo.transforms = run->transforms;
    if ((run->train_loader = tdm_loader_new(run->train_ds, run->dev, &lo, error)) == NULL) {
        return FALSE;
    }
    /* The test split, on rank 0, as `tandem eval` reads it. */
    if (!cfg->eval || !run->leader) {
        return TRUE;
    }
    run->test_ds = tdm_dataset_open(cfg->dataset, "test", error);
    run->test_loader = run->test_ds == NULL ? NULL
                       : tdm_train_eval_loader_new(cfg, run->train_ds, run->transforms,
                                                   run->test_ds, run->dev, error);
    return run->test_loader != NULL;
}

/* The model's input channels and classes, from the data unless configured:
 * a configured size the data cannot feed fails here, not in a layer or the
 * loss of the first step. More classes than the labels use is fine. */
static gboolean model_config(const TrainRun *run, TdmModelConfig *mc, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    const TdmDataset *ds = run->train_ds;
    int data_c, data_w;
    memset(mc, 0, sizeof(*mc));
    mc->num_classes = cfg->num_classes > 0 ? cfg->num_classes : ds->num_classes;
    /* sized by the samples the training loader makes, after its transforms */
    tdm_loader_sample_shape(run->train_loader, &data_c, &mc->image_size, &data_w);
    mc->in_channels = cfg->in_channels > 0 ? cfg->in_channels : data_c;
    if (mc->in_channels != data_c) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.in_channels is %d but the images of %s have %d channel%s%s",
                    mc->in_channels, ds->path, data_c, data_c == 1 ? "" : "s",
                    run->transforms != NULL ? " after data.transforms" : "");
        return FALSE;
    }
    if (mc->num_classes < ds->num_classes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.num_classes is %d but %s has %d classes (labels 0..%d)",
                    mc->num_classes, ds->path, ds->num_classes, ds->num_classes - 1);
        return FALSE;
    }
    return TRUE;
}

/* model.init, less model.init_skip's prefixes. */
static gboolean load_init(TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    if (cfg->init_skip != NULL && cfg->init_path == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.init_skip '%s' without model.init: nothing is loaded to skip from",
                    cfg->init_skip);
        return FALSE;
    }
    GError *init_error = NULL;
    if (cfg->init_path == NULL ||
        tdm_model_load_except(run->model, cfg->init_path, TRUE, cfg->init_skip, &init_error)) {
        return TRUE;
    }
    if (g_error_matches(init_error, TDM_ERROR, TDM_ERROR_SHAPE)) {
        /* most often a pretrained classifier for another class count */
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "model.init: %s (model.init_skip, --init-skip, with that parameter's "
                    "prefix keeps it freshly initialised: a new classifier)",
                    init_error->message);
        g_error_free(init_error);
    } else {
        g_propagate_error(error, init_error);
    }
    return FALSE;
}

gboolean tdm_train_setup_model(TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    TdmModelConfig mc;
    if (!model_config(run, &mc, error)) {
        return FALSE;
    }
    TdmModule *root = tdm_model_zoo_create(cfg->model, &mc, error);
    if (root == NULL || (run->model = tdm_model_new(root, run->dev, cfg->seed, error)) == NULL ||
        !load_init(run, error)) {
        return FALSE;
    }
    static const char *const recompute_names[] = {[TDM_RECOMPUTE_NONE] = "none",
                                                  [TDM_RECOMPUTE_POINTWISE] = "pointwise",
                                                  [TDM_RECOMPUTE_ALL] = "all",
                                                  [TDM_RECOMPUTE_AUTO] = "auto"};
    for (guint i = 0; i < G_N_ELEMENTS(recompute_names); i++) {
        if (g_str_equal(cfg->recompute, recompute_names[i])) {
            tdm_model_set_recompute(run->model, (TdmRecompute)i);
        }
    }
    if (cfg->freeze != NULL && tdm_model_freeze(run->model, cfg->freeze) == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "model.freeze: '%s' matches no parameter of %s", cfg->freeze, cfg->model);
        return FALSE;
    }
    if (cfg->freeze != NULL && tdm_model_num_parameters(run->model) == 0) {
        /* PyTorch's optimizers refuse an empty parameter list too */
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.freeze: '%s' freezes every parameter of %s: nothing left to train "
                    "(tandem eval evaluates a model as it is)", cfg->freeze, cfg->model);
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_train_setup_optimizer(TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    /* zero1 keeps the optimizer state of its own shard only: the optimizer
     * made here carries the settings and the schedule's lr but no
     * parameters, so no state for the whole model. */
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = cfg->lr;
    oo.momentum = cfg->momentum;
    oo.nesterov = cfg->nesterov;
    oo.weight_decay = cfg->weight_decay;
    oo.beta1 = cfg->beta1;
    oo.beta2 = cfg->beta2;
    oo.eps = cfg->eps;
    oo.max_grad_norm = cfg->clip_grad_norm;
    if (strategy_is(cfg->strategy, "zero1")) {
        run->no_params = g_ptr_array_new();
    }
    run->optimizer = tdm_optimizer_new(cfg->optimizer, run->model, run->no_params, &oo, error);
    if (run->optimizer == NULL) {
        return FALSE;
    }
    /* optim.lr_groups: checked against the model's parameters, which
     * zero1's optimizer made here does not hold. */
    if (!tdm_optimizer_set_lr_groups(run->optimizer, run->model, cfg->lr_groups, error)) {
        g_prefix_error(error, "optim.lr_groups (--lr-group): ");
        return FALSE;
    }
    /* The schedule counts optimizer updates, accumulate micro-batches each. */
    run->steps_per_epoch = tdm_loader_steps_per_epoch(run->train_loader);
    run->accumulate = MAX(cfg->accumulate, 1);
    const int64_t updates_per_epoch = (run->steps_per_epoch + run->accumulate - 1) /
                                      run->accumulate;
    TdmSchedule *s = &run->schedule;
    memset(s, 0, sizeof(*s));
    if (!tdm_schedule_kind_parse(cfg->schedule, &s->kind, error)) {
        return FALSE;
    }
    s->base_lr = run->optimizer->opts.lr; /* "sgd lr=0.1" may override optim.lr */
    s->min_lr = cfg->min_lr;
    s->gamma = cfg->gamma;
    s->step_size = cfg->step_size;
    s->warmup_steps = cfg->warmup_steps;
    s->steps_per_epoch = updates_per_epoch;
    s->total_steps = updates_per_epoch * cfg->epochs;
    return TRUE;
}

gboolean tdm_train_setup_strategy(TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    const gboolean distributed =
        run->env.world_size > 1 || strategy_is_distributed(cfg->strategy);
    if (distributed && (run->comm = open_comm(cfg, &run->env, run->dev, &run->store,
                                              &run->server, error)) == NULL) {
        return FALSE;
    }
    TdmStrategyOptions so = {0};
    so.label_smoothing = cfg->label_smoothing;
    so.accumulate = run->accumulate;
    so.devices = run->devices;
    so.comm = run->comm;
    so.steps_per_epoch = run->steps_per_epoch;
    so.total_steps = run->steps_per_epoch * cfg->epochs;
    if (cfg->max_steps > 0 && cfg->max_steps < so.total_steps) {
        so.total_steps = cfg->max_steps;
    }
    /* strategy.args (--set strategy.KEY=VALUE, a config's [strategy]) join
     * the parameters of train.strategy, through the same grammar: a key
     * given in both is refused as given twice, naming it. */
    g_autofree char *spec = cfg->strategy_args != NULL
                                ? g_strdup_printf("%s %s", cfg->strategy, cfg->strategy_args)
                                : g_strdup(cfg->strategy);
    run->strategy = tdm_strategy_new(spec, run->model, run->optimizer, &so, error);
    return run->strategy != NULL;
}

void tdm_train_run_clear(TrainRun *run)
{
    tdm_strategy_free(run->strategy);
    tdm_comm_free(run->comm);
    tdm_store_free(run->store);
    tdm_store_server_free(run->server);
    tdm_optimizer_free(run->optimizer);
    tdm_model_free(run->model);
    tdm_loader_free(run->test_loader);
    tdm_loader_free(run->train_loader);
    tdm_transform_pipeline_unref(run->transforms);
    tdm_dataset_close(run->test_ds);
    tdm_dataset_close(run->train_ds);
    if (run->devices != NULL) {
        g_ptr_array_unref(run->devices);
    }
    if (run->no_params != NULL) {
        g_ptr_array_unref(run->no_params);
    }
    tdm_dist_env_clear(&run->env);
    memset(run, 0, sizeof(*run));
}

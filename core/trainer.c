/* core/trainer.c - the training loop.
 *
 * tdm_trainer_run() reads top to bottom as one run: pick the device, open
 * the datasets and their loaders, build the model from the zoo (optionally
 * starting from saved weights and freezing some layers), create the
 * optimizer, the learning-rate schedule and the strategy, then loop over
 * epochs and steps (the strategy owns a step), printing a progress line to
 * stderr and writing JSON lines to the log, evaluate on the test split,
 * save the weights and print a one-line summary to stdout. The helpers
 * above it only format output or resolve settings, so the loop itself stays
 * in one place.
 *
 * In a distributed job (several processes, or a distributed strategy such
 * as ddp or zero1 even in a process started alone: a world of one) the run
 * also opens the job's store and a communicator for the strategy. Every
 * rank reads its own share of each epoch through the distributed sampler:
 * rank r of w gets samples r, r + w, r + 2w, ... of the same shuffled order
 * a single process would use, so at step k the ranks together hold exactly
 * the batch a single process with w times the batch size would take, and
 * all ranks run the same number of steps. Only rank 0 prints progress,
 * writes the log, evaluates and saves; the others wait for it at a final
 * barrier (rank 0 may serve the store under mpirun). The keys
 * train.collective, train.devices and train.timeout (flags --collective,
 * --devices, --timeout) win over TDM_COLLECTIVE, TDM_DEVICES and TDM_TIMEOUT.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

gboolean tdm_evaluate(TdmModel *model, TdmLoader *loader, double *accuracy, double *loss,
                      GError **error)
{
    g_return_val_if_fail(model != NULL && loader != NULL, FALSE);
    gboolean was_training = model->root->training;
    TdmOpCache *cache = NULL;
    double loss_sum = 0.0;
    int64_t correct = 0, count = 0;
    gboolean ok = tdm_loader_start_epoch(loader, 0, error);

    tdm_model_set_training(model, FALSE);
    GError *load_error = NULL;
    for (TdmBatch *batch; ok && (batch = tdm_loader_next(loader, &load_error)) != NULL;) {
        TdmTensor *logits = NULL;
        float batch_loss = 0.0f;
        int64_t batch_correct = 0;
        ok = tdm_model_forward(model, batch->images, &logits, error) &&
             tdm_cross_entropy(model->device, &cache, logits, batch->labels, 0.0f, &batch_loss,
                               NULL, &batch_correct, error);
        loss_sum += (double)batch_loss * (double)batch->size;
        correct += batch_correct;
        count += batch->size;
    }
    /* tdm_loader_next returns NULL with an error on failure. */
    if (load_error != NULL) {
        g_propagate_error(error, load_error);
        ok = FALSE;
    }
    tdm_op_cache_clear(model->device, &cache);
    tdm_model_set_training(model, was_training);
    if (!ok) {
        return FALSE;
    }
    if (accuracy != NULL) {
        *accuracy = count > 0 ? (double)correct / (double)count : 0.0;
    }
    if (loss != NULL) {
        *loss = count > 0 ? loss_sum / (double)count : 0.0;
    }
    return TRUE;
}

/* ---- output helpers ---- */

static char *json_string(const char *s)
{
    GString *out = g_string_new("\"");
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            g_string_append_c(out, '\\');
            g_string_append_c(out, (char)*c);
        } else if (*c < 0x20) {
            g_string_append_printf(out, "\\u%04x", *c);
        } else {
            g_string_append_c(out, (char)*c);
        }
    }
    g_string_append_c(out, '"');
    return g_string_free(out, FALSE);
}

/* printf writes a non-finite double as nan, -nan, inf or -inf, which JSON
 * does not have: outside strings those become null, so that a run whose
 * loss diverged still leaves a log every JSON reader takes. */
static void json_null_nonfinite(GString *s)
{
    gboolean in_string = FALSE;
    for (gsize i = 0; i < s->len; i++) {
        char ch = s->str[i];
        if (in_string) {
            if (ch == '\\') {
                i++; /* the escaped character */
            } else if (ch == '"') {
                in_string = FALSE;
            }
            continue;
        }
        if (ch == '"') {
            in_string = TRUE;
            continue;
        }
        gsize word = i + (ch == '-'), end = word;
        while (end < s->len && g_ascii_isalpha(s->str[end])) {
            end++;
        }
        if (end - word == 3 && (g_ascii_strncasecmp(s->str + word, "nan", 3) == 0 ||
                                g_ascii_strncasecmp(s->str + word, "inf", 3) == 0)) {
            g_string_erase(s, (gssize)i, (gssize)(end - i));
            g_string_insert(s, (gssize)i, "null");
            i += 3;
        } else if (end > i) {
            i = end - 1; /* past a literal such as true or null */
        }
    }
}

/* Writes one JSON object per line; `fields` is the text inside the braces
 * after the event name. */
G_GNUC_PRINTF(3, 4)
static void log_event(FILE *log, const char *event, const char *fmt, ...)
{
    if (log == NULL) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    GString *fields = g_string_new(NULL);
    g_string_vprintf(fields, fmt, ap);
    va_end(ap);
    json_null_nonfinite(fields);
    fprintf(log, "{\"event\":\"%s\",%s}\n", event, fields->str);
    g_string_free(fields, TRUE);
    /* Step lines go out with stdio's buffer (a write per few kB rather
     * than a system call per step); every other event is flushed. */
    if (strcmp(event, "step") != 0) {
        fflush(log);
    }
}

static void format_duration(char *buf, size_t size, double seconds)
{
    long s = seconds > 0 && isfinite(seconds) ? (long)(seconds + 0.5) : 0;
    if (s >= 3600) {
        g_snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    } else {
        g_snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
    }
}

static void print_progress(int epoch, int epochs, int64_t step, int64_t steps, double loss,
                           double img_per_s, double eta_s)
{
    char eta[32];
    format_duration(eta, sizeof(eta), eta_s);
    fprintf(stderr, "epoch %d/%d  step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "  loss %.4f  %.0f "
            "img/s  ETA %s\n", epoch, epochs, step, steps, loss, img_per_s, eta);
}

/* Strategies that need a communicator. `single` and `dp` run in one
 * process. */
static gboolean strategy_is_distributed(const char *name)
{
    return name != NULL && name[0] != '\0' && strcmp(name, "single") != 0 &&
           strcmp(name, "dp") != 0;
}

/* This rank's device: with several processes on a node and a spec without
 * an index ("auto", "cuda"), the local rank picks one of the backend's
 * devices. */
static TdmDevice *rank_device(const char *spec, const TdmDistEnv *env, GError **error)
{
    TdmDevice *dev = tdm_device_get(spec, error);
    if (dev == NULL || env->local_world_size <= 1 || (spec != NULL && strchr(spec, ':'))) {
        return dev;
    }
    int count = tdm_device_count(dev);
    if (count <= 1) {
        return dev;
    }
    g_autofree char *name =
        g_strdup_printf("%s:%d", tdm_device_type(dev), env->local_rank % count);
    return tdm_device_get(name, error);
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

/* Data wait of an epoch, for the warning: measured from the end of the
 * first step, whose batch nothing could prefetch (and which pays one-off
 * costs such as a lazily decompressed dataset). */
typedef struct {
    double since, wait;
    int64_t steps;
    gboolean warned;
} DataWait;

/* Warns once per epoch when the loader held the steps up for more than 10%
 * of their time. */
static void data_wait_step(DataWait *dw, double wait_s, double now, int workers)
{
    if (dw->steps++ == 0) {
        dw->since = now;
        return;
    }
    dw->wait += wait_s;
    double elapsed = now - dw->since;
    if (dw->warned || dw->steps < 5 || !(elapsed > 0) || dw->wait <= 0.10 * elapsed) {
        return;
    }
    dw->warned = TRUE;
    fprintf(stderr, "warning: waited for data %.0f%% of the step time; try --workers %d\n",
            100.0 * dw->wait / elapsed, workers == 0 ? 1 : 2 * workers);
}

/* A loader over `ds` running `transforms` (may be NULL), normalising with
 * the constants of `norm_ds` (the training split, for both splits). Without
 * transforms the evaluation loader normalises as `train_transforms` ends, so
 * that both splits reach the model on the same scale. */
static TdmLoader *open_loader(TdmDataset *ds, TdmDataset *norm_ds, TdmDevice *dev,
                              const TdmTrainConfig *cfg, gboolean train, const TdmDistEnv *env,
                              TdmTransformPipeline *transforms,
                              TdmTransformPipeline *train_transforms, GError **error)
{
    TdmLoaderOptions lo;
    tdm_loader_options_init(&lo);
    lo.batch_size = cfg->batch_size;
    lo.shuffle = train;
    lo.seed = cfg->seed;
    lo.limit = train ? cfg->limit : 0;
    lo.workers = cfg->workers;
    lo.prefetch = cfg->prefetch;
    lo.pin_memory = cfg->pin_memory;
    lo.transforms = transforms;
    if (train) {
        lo.rank = env->rank;
        lo.world = env->world_size;
    }
    if (cfg->normalize &&
        !tdm_dataset_get_normalization(norm_ds, &lo.n_mean, lo.mean, lo.std, error)) {
        return NULL;
    }
    if (transforms == NULL && train_transforms != NULL &&
        !tdm_transform_pipeline_get_normalization(train_transforms, &lo.n_mean, lo.mean, lo.std)) {
        lo.n_mean = 0; /* the training pipeline ends with x / 255 */
    }
    return tdm_loader_new(ds, dev, &lo, error);
}

/* The evaluation pipeline: data.test_transforms when given; else, when the
 * test images are not all of the size the model trains on (the training
 * pipeline's output, or the training images themselves without one: they
 * differ in size, or the pipeline crops or resizes), torchvision's usual
 * evaluation transform sized like that ("resize H | center-crop H,W", then
 * the training pipeline's normalize); else none. Test images with another
 * channel count than the model's input are an error naming both splits. */
static gboolean eval_transforms_new(const TdmTrainConfig *cfg, TdmTransformPipeline *train_tf,
                                    TdmDataset *train_ds, const TdmDataset *test_ds,
                                    TdmTransformPipeline **out, GError **error)
{
    *out = NULL;
    if (cfg->test_transforms != NULL && cfg->test_transforms[0] != '\0') {
        *out = tdm_transform_pipeline_parse(cfg->test_transforms, error);
        if (*out == NULL) {
            g_prefix_error(error, "data.test_transforms: ");
        }
        return *out != NULL;
    }
    int c = train_ds->channels, h = train_ds->height, w = train_ds->width;
    if (train_tf != NULL &&
        !tdm_transform_pipeline_output_shape(train_tf, train_ds->channels,
                                             MAX(train_ds->height, 0), MAX(train_ds->width, 0),
                                             &c, &h, &w, error)) {
        return FALSE;
    }
    if (test_ds->channels != c) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: the %s split's images have %d channels, the %s split's %d%s",
                    test_ds->path, test_ds->split, test_ds->channels, train_ds->split, c,
                    train_tf != NULL ? " after data.transforms" : "");
        return FALSE;
    }
    if (test_ds->height == h && test_ds->width == w) {
        return TRUE; /* already the size the model was trained on */
    }
    if (h <= 0 || w <= 0) {
        return TRUE; /* no fixed training size: the loader reports it */
    }
    /* normalised as the training loader does: by its pipeline's normalize,
     * or without a pipeline by the training split's constants */
    int n = 0;
    float mean[4], std[4];
    if (train_tf != NULL) {
        if (!tdm_transform_pipeline_get_normalization(train_tf, &n, mean, std)) {
            n = 0;
        }
    } else if (cfg->normalize && !tdm_dataset_get_normalization(train_ds, &n, mean, std, error)) {
        return FALSE;
    }
    GString *spec = g_string_new(NULL);
    g_string_printf(spec, "resize %d | center-crop %d,%d", MIN(h, w), h, w);
    if (n > 0) {
        g_string_append(spec, " | normalize mean=");
        for (int i = 0; i < n; i++) {
            g_string_append_printf(spec, i ? ",%.9g" : "%.9g", mean[i]);
        }
        g_string_append(spec, " std=");
        for (int i = 0; i < n; i++) {
            g_string_append_printf(spec, i ? ",%.9g" : "%.9g", std[i]);
        }
    }
    *out = tdm_transform_pipeline_parse(spec->str, error);
    if (*out == NULL) {
        g_prefix_error(error, "evaluation pipeline '%s': ", spec->str);
    }
    g_string_free(spec, TRUE);
    return *out != NULL;
}

TdmLoader *tdm_trainer_open_test_loader(const TdmTrainConfig *cfg, TdmDataset *test_ds,
                                        TdmDevice *dev, GPtrArray *keep, GError **error)
{
    g_return_val_if_fail(cfg != NULL && test_ds != NULL && dev != NULL && keep != NULL, NULL);
    TdmTransformPipeline *train_tf = NULL, *eval_tf = NULL;
    if (cfg->transforms != NULL && cfg->transforms[0] != '\0') {
        if ((train_tf = tdm_transform_pipeline_parse(cfg->transforms, error)) == NULL) {
            g_prefix_error(error, "data.transforms: ");
            return NULL;
        }
        g_ptr_array_add(keep, train_tf);
    }
    /* The training split, when it can be opened, gives what the training's
     * own evaluation took from it: the size the model trained on and the
     * normalisation constants (an argument-less normalize's among them);
     * without it the test split stands in. */
    TdmDataset *train_ds = tdm_dataset_open(cfg->dataset, "train", NULL);
    TdmDataset *ref = train_ds != NULL ? train_ds : test_ds;
    TdmLoader *loader = NULL;
    int n;
    float mean[4], std[4];
    if (train_tf != NULL && cfg->normalize) {
        if (!tdm_dataset_get_normalization(ref, &n, mean, std, error)) {
            goto out;
        }
        tdm_transform_pipeline_set_normalization(train_tf, n, mean, std);
    }
    if (!eval_transforms_new(cfg, train_tf, ref, test_ds, &eval_tf, error)) {
        goto out;
    }
    if (eval_tf != NULL) {
        g_ptr_array_add(keep, eval_tf);
    }
    TdmDistEnv env = {.rank = 0, .world_size = 1};
    loader = open_loader(test_ds, ref, dev, cfg, FALSE, &env, eval_tf, train_tf, error);
out:
    tdm_dataset_close(train_ds);
    return loader;
}

gboolean tdm_trainer_run(const TdmTrainConfig *cfg, TdmTrainSummary *summary, GError **error)
{
    g_return_val_if_fail(cfg != NULL, FALSE);
    TdmDataset *train_ds = NULL, *test_ds = NULL;
    TdmLoader *train_loader = NULL, *test_loader = NULL;
    TdmTransformPipeline *transforms = NULL, *eval_transforms = NULL;
    TdmModel *model = NULL;
    TdmOptimizer *optimizer = NULL;
    TdmStrategy *strategy = NULL;
    GPtrArray *devices = NULL, *no_params = NULL;
    TdmStoreServer *server = NULL;
    TdmStore *store = NULL;
    TdmComm *comm = NULL;
    FILE *log = NULL;
    g_autofree char *j_model = NULL, *j_device = NULL, *j_data = NULL, *j_strategy = NULL;
    g_autofree char *evaluation = NULL;
    gboolean ok = FALSE;
    TdmTrainSummary sum = {0};
    sum.test_accuracy = -1.0;
    sum.test_loss = -1.0;

    /* Who this process is in the job: rank 0 of 1 when started alone. */
    TdmDistEnv env = {0};
    if (!tdm_dist_env_read(&env, error)) {
        goto out;
    }
    const gboolean leader = env.rank == 0;
    const gboolean distributed = env.world_size > 1 || strategy_is_distributed(cfg->strategy);
    if (env.world_size > 1 && !strategy_is_distributed(cfg->strategy)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "strategy '%s' runs in one process, but this is rank %d of a job of %d "
                    "(%s): every rank would train alone; use --strategy ddp or zero1",
                    cfg->strategy, env.rank, env.world_size, env.source);
        goto out;
    }
    const int progress = leader ? cfg->progress : 0;

    /* Device(s) and compute threads: processes sharing a node share its
     * cores unless told otherwise. dp takes its device list from
     * TDM_DEVICES (--devices); the first one holds the master model. */
    const char *device_list = cfg->devices != NULL ? cfg->devices : g_getenv("TDM_DEVICES");
    TdmDevice *dev = NULL;
    if (device_list != NULL && device_list[0] != '\0') {
        if (g_strcmp0(cfg->strategy, "dp") != 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "--devices (TDM_DEVICES=%s) is for --strategy dp, not '%s'", device_list,
                        cfg->strategy);
            goto out;
        }
        if ((devices = parse_devices(device_list, error)) == NULL) {
            goto out;
        }
        dev = g_ptr_array_index(devices, 0);
    } else if ((dev = rank_device(cfg->device, &env, error)) == NULL) {
        goto out;
    }
    int threads = cfg->threads;
    const int cores = (int)g_get_num_processors();
    if (threads == 0 && env.local_world_size > 1) {
        threads = MAX(1, cores / env.local_world_size);
    }
    /* More compute threads than cores leaves them waiting for each other at
     * every barrier (lenet runs 2.4x slower with --threads 8 on 2 cores). */
    const int local_procs = MAX(env.local_world_size, 1), share = MAX(1, cores / local_procs);
    if (env.local_rank == 0 && threads > share) {
        fprintf(stderr,
                "warning: %d compute thread%s x %d process%s on this node, but %d core%s: "
                "train.threads %d (or 0 for an even share) runs faster\n",
                threads, threads == 1 ? "" : "s", local_procs, local_procs == 1 ? "" : "es",
                cores, cores == 1 ? "" : "s", share);
    }
    for (guint i = 0; i < (devices != NULL ? devices->len : 1); i++) {
        TdmDevice *d = devices != NULL ? g_ptr_array_index(devices, i) : dev;
        tdm_device_set_num_threads(d, threads);
    }

    /* Training augmentation: parsed before any data is opened, so that a
     * typo in the pipeline is the first error. */
    if (cfg->transforms != NULL && cfg->transforms[0] != '\0' &&
        (transforms = tdm_transform_pipeline_parse(cfg->transforms, error)) == NULL) {
        g_prefix_error(error, "data.transforms: ");
        goto out;
    }

    /* Data: this rank's share of the training split (first `limit`
     * samples, shuffled per epoch) and, on rank 0, the test split. */
    train_ds = tdm_dataset_open(cfg->dataset, "train", error);
    if (train_ds == NULL ||
        (train_loader = open_loader(train_ds, train_ds, dev, cfg, TRUE, &env, transforms, NULL,
                                    error)) == NULL) {
        goto out;
    }
    if (cfg->eval && leader &&
        ((test_ds = tdm_dataset_open(cfg->dataset, "test", error)) == NULL ||
         !eval_transforms_new(cfg, transforms, train_ds, test_ds, &eval_transforms, error) ||
         (test_loader = open_loader(test_ds, train_ds, dev, cfg, FALSE, &env, eval_transforms,
                                    transforms, error)) == NULL)) {
        goto out;
    }

    /* Model from the zoo, sized by the samples the training loader makes
     * (after its transforms) unless configured. */
    TdmModelConfig mc = {0};
    mc.num_classes = cfg->num_classes > 0 ? cfg->num_classes : train_ds->num_classes;
    int data_c, data_w;
    tdm_loader_sample_shape(train_loader, &data_c, &mc.image_size, &data_w);
    /* A configured size the data cannot feed fails here, not in a layer or
     * the loss of the first step. More classes than the labels use is fine. */
    mc.in_channels = cfg->in_channels > 0 ? cfg->in_channels : data_c;
    if (mc.in_channels != data_c) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.in_channels is %d but the images of %s have %d channel%s%s",
                    mc.in_channels, train_ds->path, data_c, data_c == 1 ? "" : "s",
                    transforms != NULL ? " after data.transforms" : "");
        goto out;
    }
    if (mc.num_classes < train_ds->num_classes) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.num_classes is %d but %s has %d classes (labels 0..%d)",
                    mc.num_classes, train_ds->path, train_ds->num_classes,
                    train_ds->num_classes - 1);
        goto out;
    }
    TdmModule *root = tdm_model_zoo_create(cfg->model, &mc, error);
    if (root == NULL || (model = tdm_model_new(root, dev, cfg->seed, error)) == NULL) {
        goto out;
    }
    if (cfg->init_skip != NULL && cfg->init_path == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.init_skip '%s' without model.init: nothing is loaded to skip from",
                    cfg->init_skip);
        goto out;
    }
    GError *init_error = NULL;
    if (cfg->init_path != NULL &&
        !tdm_model_load_except(model, cfg->init_path, TRUE, cfg->init_skip, &init_error)) {
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
        goto out;
    }
    if (cfg->freeze != NULL && tdm_model_freeze(model, cfg->freeze) == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "model.freeze: '%s' matches no parameter of %s", cfg->freeze, cfg->model);
        goto out;
    }
    if (cfg->freeze != NULL && tdm_model_num_parameters(model) == 0) {
        /* PyTorch's optimizers refuse an empty parameter list too */
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model.freeze: '%s' freezes every parameter of %s: nothing left to train "
                    "(tandem eval evaluates a model as it is)", cfg->freeze, cfg->model);
        goto out;
    }

    /* Optimizer, learning-rate schedule and the strategy that runs a step.
     * zero1 keeps the optimizer state of its own shard only: the
     * optimizer made here carries the settings and the schedule's lr but
     * no parameters, so no state for the whole model. */
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = cfg->lr;
    oo.momentum = cfg->momentum;
    oo.nesterov = cfg->nesterov;
    oo.weight_decay = cfg->weight_decay;
    oo.beta1 = cfg->beta1;
    oo.beta2 = cfg->beta2;
    oo.eps = cfg->eps;
    if (g_strcmp0(cfg->strategy, "zero1") == 0) {
        no_params = g_ptr_array_new();
    }
    optimizer = tdm_optimizer_new(cfg->optimizer, model, no_params, &oo, error);
    if (optimizer == NULL) {
        goto out;
    }
    const int64_t steps_per_epoch = tdm_loader_steps_per_epoch(train_loader);
    const int accumulate = MAX(cfg->accumulate, 1);
    const int64_t updates_per_epoch = (steps_per_epoch + accumulate - 1) / accumulate;
    TdmSchedule schedule = {0};
    if (!tdm_schedule_kind_parse(cfg->schedule, &schedule.kind, error)) {
        goto out;
    }
    schedule.base_lr = cfg->lr;
    schedule.min_lr = cfg->min_lr;
    schedule.gamma = cfg->gamma;
    schedule.step_size = cfg->step_size;
    schedule.warmup_steps = cfg->warmup_steps;
    schedule.steps_per_epoch = updates_per_epoch;
    schedule.total_steps = updates_per_epoch * cfg->epochs;
    if (distributed && (comm = open_comm(cfg, &env, dev, &store, &server, error)) == NULL) {
        goto out;
    }
    TdmStrategyOptions so = {0};
    so.label_smoothing = cfg->label_smoothing;
    so.accumulate = accumulate;
    so.devices = devices;
    so.comm = comm;
    strategy = tdm_strategy_new(cfg->strategy, model, optimizer, &so, error);
    if (strategy == NULL) {
        goto out;
    }

    if (leader && cfg->log_file != NULL && (log = fopen(cfg->log_file, "w")) == NULL) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot open the log file: %s",
                    cfg->log_file, g_strerror(e));
        goto out;
    }
    if (leader && cfg->save_path != NULL && !tdm_save_path_check(cfg->save_path, error)) {
        g_prefix_error(error, "train.save: ");
        goto out;
    }
    const int world = env.world_size;
    j_model = json_string(cfg->model);
    j_device = json_string(dev->name);
    j_data = json_string(train_ds->path);
    j_strategy = json_string(strategy->name);
    log_event(log, "start", "\"model\":%s,\"device\":%s,\"dataset\":%s,\"parameters\":%"
              G_GINT64_FORMAT ",\"train_images\":%" G_GINT64_FORMAT ",\"steps_per_epoch\":%"
              G_GINT64_FORMAT ",\"batch_size\":%d,\"epochs\":%d,\"seed\":%" G_GUINT64_FORMAT
              ",\"strategy\":%s,\"world_size\":%d,\"devices\":%u,\"accumulate\":%d",
              j_model, j_device, j_data, tdm_model_num_parameters(model),
              tdm_loader_num_samples(train_loader), steps_per_epoch, cfg->batch_size,
              cfg->epochs, cfg->seed, j_strategy, world, devices != NULL ? devices->len : 1,
              accumulate);
    if (progress > 0) {
        fprintf(stderr, "training %s (%" G_GINT64_FORMAT " parameters) on %s: %" G_GINT64_FORMAT
                " images of %s:%s, %" G_GINT64_FORMAT " steps per epoch\n", cfg->model,
                tdm_model_num_parameters(model), dev->name, tdm_loader_num_samples(train_loader),
                train_ds->kind, train_ds->path, steps_per_epoch);
        if (comm != NULL) {
            fprintf(stderr, "strategy %s over %d process%s, collective %s\n", strategy->name,
                    world, world == 1 ? "" : "es", tdm_feature_get_name(comm->feature));
        }
    }

    /* The loop: epochs x steps. Images and img/s count every rank's. */
    int64_t updates = 0;
    gboolean warned_nonfinite = FALSE;
    double comm_wait_total = 0.0, step_total = 0.0;
    for (int epoch = 0; epoch < cfg->epochs; epoch++) {
        if (!tdm_loader_start_epoch(train_loader, epoch, error)) {
            goto out;
        }
        tdm_model_set_training(model, TRUE);
        DataWait data_wait = {0};
        double epoch_loss = 0.0, epoch_wait = 0.0, epoch_comm = 0.0, epoch_step = 0.0;
        int64_t epoch_correct = 0, epoch_images = 0, step = 0;
        const double epoch_start = tdm_time_now();
        TdmBatch *batch;
        GError *load_error = NULL;
        while ((batch = tdm_loader_next(train_loader, &load_error)) != NULL) {
            if (sum.steps == 0) {
                sum.first_step_s = tdm_time_since_start();
            }
            gboolean do_update = (step + 1) % accumulate == 0 || step + 1 == steps_per_epoch;
            optimizer->lr = tdm_schedule_lr(&schedule, updates);
            TdmStepResult r = {0};
            const double step_start = tdm_time_now();
            if (!tdm_strategy_train_step(strategy, batch, do_update, &r, error)) {
                goto out;
            }
            const double step_s = tdm_time_now() - step_start, comm_s = r.comm_wait_s;
            updates += do_update ? 1 : 0;
            step++;
            sum.steps++;
            if (leader && !warned_nonfinite && !isfinite(r.loss)) {
                /* training goes on, as PyTorch's would, but say it once */
                warned_nonfinite = TRUE;
                fprintf(stderr, "warning: the loss is %s at step %" G_GINT64_FORMAT
                        " of epoch %d (learning rate %g): the weights no longer learn; a lower "
                        "optim.lr, or warmup, usually helps\n",
                        isnan(r.loss) ? "NaN" : "infinite", step, epoch + 1,
                        (double)optimizer->lr);
            }
            epoch_loss += (double)r.loss * (double)r.count;
            epoch_correct += r.correct;
            epoch_images += r.count * world;
            epoch_wait += batch->wait_s;
            if (leader) {
                data_wait_step(&data_wait, batch->wait_s, tdm_time_now(), cfg->workers);
            }
            epoch_comm += comm_s;
            epoch_step += step_s;

            double elapsed = tdm_time_now() - epoch_start;
            log_event(log, "step", "\"epoch\":%d,\"step\":%" G_GINT64_FORMAT ",\"global_step\":%"
                      G_GINT64_FORMAT ",\"loss\":%.9g,\"correct\":%" G_GINT64_FORMAT ",\"count\":%"
                      G_GINT64_FORMAT ",\"lr\":%.9g,\"wait_s\":%.6f,\"data_wait_s\":%.6f,"
                      "\"time_s\":%.6f,\"step_s\":%.6f,\"comm_wait_s\":%.6f", epoch + 1, step,
                      sum.steps, r.loss, r.correct, r.count, optimizer->lr, batch->wait_s,
                      batch->wait_s, elapsed, step_s, comm_s);
            if (progress > 0 && (step % progress == 0 || step == steps_per_epoch)) {
                double per_step = elapsed / (double)step;
                int64_t remaining = steps_per_epoch - step +
                                    (int64_t)(cfg->epochs - epoch - 1) * steps_per_epoch;
                print_progress(epoch + 1, cfg->epochs, step, steps_per_epoch,
                               epoch_loss * world / (double)epoch_images,
                               (double)epoch_images / elapsed, per_step * (double)remaining);
            }
        }
        if (load_error != NULL) {
            g_propagate_error(error, load_error);
            goto out;
        }
        double epoch_seconds = tdm_time_now() - epoch_start;
        sum.train_seconds += epoch_seconds;
        sum.images += epoch_images;
        /* Loss and accuracy of this rank's share. */
        const double local_images = (double)epoch_images / world;
        sum.final_loss = epoch_images > 0 ? (float)(epoch_loss / local_images) : 0.0f;
        comm_wait_total += epoch_comm;
        step_total += epoch_step;
        log_event(log, "epoch", "\"epoch\":%d,\"loss\":%.9g,\"accuracy\":%.6f,\"images\":%"
                  G_GINT64_FORMAT ",\"seconds\":%.3f,\"img_per_s\":%.1f,\"wait_s\":%.3f,"
                  "\"data_wait_frac\":%.4f,\"step_s\":%.3f,\"comm_wait_s\":%.3f,"
                  "\"comm_wait_frac\":%.4f", epoch + 1, sum.final_loss,
                  epoch_images > 0 ? (double)epoch_correct / local_images : 0.0,
                  epoch_images, epoch_seconds,
                  epoch_seconds > 0 ? (double)epoch_images / epoch_seconds : 0.0, epoch_wait,
                  epoch_seconds > 0 ? epoch_wait / epoch_seconds : 0.0, epoch_step, epoch_comm,
                  epoch_step > 0 ? epoch_comm / epoch_step : 0.0);

        /* Evaluation on the test split after each epoch (rank 0). */
        if (test_loader != NULL) {
            if (!tdm_evaluate(model, test_loader, &sum.test_accuracy, &sum.test_loss, error)) {
                goto out;
            }
            log_event(log, "eval", "\"epoch\":%d,\"accuracy\":%.6f,\"loss\":%.9g,\"images\":%"
                      G_GINT64_FORMAT, epoch + 1, sum.test_accuracy, sum.test_loss,
                      tdm_loader_num_samples(test_loader));
            if (progress > 0) {
                fprintf(stderr, "epoch %d/%d  test accuracy %.4f  loss %.4f\n", epoch + 1,
                        cfg->epochs, sum.test_accuracy, sum.test_loss);
            }
        }
    }

    if (leader && cfg->save_path != NULL && !tdm_model_save(model, cfg->save_path, error)) {
        goto out;
    }
    /* The others wait for rank 0's evaluation and save, and rank 0 keeps
     * serving the store until everyone is done with it. */
    if (comm != NULL && !tdm_comm_barrier(comm, error)) {
        goto out;
    }

    sum.images_per_s = sum.train_seconds > 0 ? (double)sum.images / sum.train_seconds : 0.0;
    log_event(log, "summary", "\"model\":%s,\"epochs\":%d,\"steps\":%" G_GINT64_FORMAT
              ",\"images\":%" G_GINT64_FORMAT ",\"train_seconds\":%.3f,\"img_per_s\":%.1f,"
              "\"first_step_s\":%.3f,\"final_loss\":%.9g,\"test_accuracy\":%.6f,"
              "\"test_loss\":%.9g,\"strategy\":%s,\"world_size\":%d,\"comm_wait_s\":%.3f,"
              "\"comm_wait_frac\":%.4f", j_model, cfg->epochs, sum.steps, sum.images,
              sum.train_seconds, sum.images_per_s, sum.first_step_s, sum.final_loss,
              sum.test_accuracy, sum.test_loss, j_strategy, world, comm_wait_total,
              step_total > 0 ? comm_wait_total / step_total : 0.0);
    evaluation =
        sum.test_accuracy >= 0 ? g_strdup_printf("test accuracy %.4f (loss %.4f)",
                                                 sum.test_accuracy, sum.test_loss)
                               : g_strdup("not evaluated");
    if (leader) {
        printf("summary: model %s, %d epoch%s, %" G_GINT64_FORMAT " images, %.0f img/s, %s, "
               "first step after %.2f s\n", cfg->model, cfg->epochs, cfg->epochs == 1 ? "" : "s",
               sum.images, sum.images_per_s, evaluation, sum.first_step_s);
        fflush(stdout);
    }
    if (summary != NULL) {
        *summary = sum;
    }
    ok = TRUE;

out:
    if (log != NULL) {
        fclose(log);
    }
    tdm_strategy_free(strategy);
    tdm_comm_free(comm);
    tdm_store_free(store);
    tdm_store_server_free(server);
    tdm_optimizer_free(optimizer);
    tdm_model_free(model);
    tdm_loader_free(test_loader);
    tdm_loader_free(train_loader);
    tdm_transform_pipeline_free(transforms);
    tdm_transform_pipeline_free(eval_transforms);
    tdm_dataset_close(test_ds);
    tdm_dataset_close(train_ds);
    if (devices != NULL) {
        g_ptr_array_unref(devices);
    }
    if (no_params != NULL) {
        g_ptr_array_unref(no_params);
    }
    tdm_dist_env_clear(&env);
    return ok;
}

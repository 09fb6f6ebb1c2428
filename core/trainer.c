/* core/trainer.c - the training loop.
 *
 * tdm_trainer_run() reads top to bottom as one run: pick the device, open
 * the datasets and their loaders, build the model from the zoo (optionally
 * starting from saved weights and freezing some layers), create the
 * optimizer, the learning-rate schedule and the strategy, then loop over
 * epochs and steps (the strategy owns a step), printing a progress line to
 * stderr and writing JSON lines to the log, evaluate on the test split,
 * save the weights and print a one-line summary to stdout. The helpers
 * below it only format output, so the loop itself stays in one place.
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
    g_autofree char *fields = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(log, "{\"event\":\"%s\",%s}\n", event, fields);
    fflush(log);
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

static TdmLoader *open_loader(TdmDataset *ds, TdmDevice *dev, const TdmTrainConfig *cfg,
                              gboolean train, GError **error)
{
    TdmLoaderOptions lo;
    tdm_loader_options_init(&lo);
    lo.batch_size = cfg->batch_size;
    lo.shuffle = train;
    lo.seed = cfg->seed;
    lo.limit = train ? cfg->limit : 0;
    lo.workers = cfg->workers;
    if (cfg->normalize && !tdm_dataset_get_normalization(ds, &lo.n_mean, lo.mean, lo.std, error)) {
        return NULL;
    }
    return tdm_loader_new(ds, dev, &lo, error);
}

gboolean tdm_trainer_run(const TdmTrainConfig *cfg, TdmTrainSummary *summary, GError **error)
{
    g_return_val_if_fail(cfg != NULL, FALSE);
    TdmDataset *train_ds = NULL, *test_ds = NULL;
    TdmLoader *train_loader = NULL, *test_loader = NULL;
    TdmModel *model = NULL;
    TdmOptimizer *optimizer = NULL;
    TdmStrategy *strategy = NULL;
    FILE *log = NULL;
    g_autofree char *j_model = NULL, *j_device = NULL, *j_data = NULL, *evaluation = NULL;
    gboolean ok = FALSE;
    TdmTrainSummary sum = {0};
    sum.test_accuracy = -1.0;
    sum.test_loss = -1.0;

    /* Device and compute threads. */
    TdmDevice *dev = tdm_device_get(cfg->device, error);
    if (dev == NULL) {
        goto out;
    }
    if (dev->backend->set_num_threads != NULL) {
        dev->backend->set_num_threads(dev, cfg->threads);
    }

    /* Data: the training split (first `limit` samples, shuffled per epoch)
     * and the test split for evaluation. */
    train_ds = tdm_dataset_open(cfg->dataset, "train", error);
    if (train_ds == NULL ||
        (train_loader = open_loader(train_ds, dev, cfg, TRUE, error)) == NULL) {
        goto out;
    }
    if (cfg->eval && ((test_ds = tdm_dataset_open(cfg->dataset, "test", error)) == NULL ||
                      (test_loader = open_loader(test_ds, dev, cfg, FALSE, error)) == NULL)) {
        goto out;
    }

    /* Model from the zoo, sized by the dataset unless configured. */
    TdmModelConfig mc = {0};
    mc.in_channels = cfg->in_channels > 0 ? cfg->in_channels : train_ds->channels;
    mc.num_classes = cfg->num_classes > 0 ? cfg->num_classes : train_ds->num_classes;
    mc.image_size = train_ds->height;
    TdmModule *root = tdm_model_zoo_create(cfg->model, &mc, error);
    if (root == NULL || (model = tdm_model_new(root, dev, cfg->seed, error)) == NULL) {
        goto out;
    }
    if (cfg->init_path != NULL && !tdm_model_load(model, cfg->init_path, TRUE, error)) {
        goto out;
    }
    if (cfg->freeze != NULL && tdm_model_freeze(model, cfg->freeze) == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "model.freeze: '%s' matches no parameter of %s", cfg->freeze, cfg->model);
        goto out;
    }

    /* Optimizer, learning-rate schedule and the strategy that runs a step. */
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = cfg->lr;
    oo.momentum = cfg->momentum;
    oo.nesterov = cfg->nesterov;
    oo.weight_decay = cfg->weight_decay;
    oo.beta1 = cfg->beta1;
    oo.beta2 = cfg->beta2;
    oo.eps = cfg->eps;
    optimizer = tdm_optimizer_new(cfg->optimizer, model, NULL, &oo, error);
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
    TdmStrategyOptions so = {0};
    so.label_smoothing = cfg->label_smoothing;
    so.accumulate = accumulate;
    strategy = tdm_strategy_new(cfg->strategy, model, optimizer, &so, error);
    if (strategy == NULL) {
        goto out;
    }

    if (cfg->log_file != NULL && (log = fopen(cfg->log_file, "w")) == NULL) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot open the log file: %s",
                    cfg->log_file, g_strerror(e));
        goto out;
    }
    j_model = json_string(cfg->model);
    j_device = json_string(dev->name);
    j_data = json_string(train_ds->path);
    log_event(log, "start", "\"model\":%s,\"device\":%s,\"dataset\":%s,\"parameters\":%"
              G_GINT64_FORMAT ",\"train_images\":%" G_GINT64_FORMAT ",\"steps_per_epoch\":%"
              G_GINT64_FORMAT ",\"batch_size\":%d,\"epochs\":%d,\"seed\":%" G_GUINT64_FORMAT,
              j_model, j_device, j_data, tdm_model_num_parameters(model),
              tdm_loader_num_samples(train_loader), steps_per_epoch, cfg->batch_size,
              cfg->epochs, cfg->seed);
    if (cfg->progress > 0) {
        fprintf(stderr, "training %s (%" G_GINT64_FORMAT " parameters) on %s: %" G_GINT64_FORMAT
                " images of %s:%s, %" G_GINT64_FORMAT " steps per epoch\n", cfg->model,
                tdm_model_num_parameters(model), dev->name, tdm_loader_num_samples(train_loader),
                train_ds->kind, train_ds->path, steps_per_epoch);
    }

    /* The loop: epochs x steps. */
    int64_t updates = 0;
    for (int epoch = 0; epoch < cfg->epochs; epoch++) {
        if (!tdm_loader_start_epoch(train_loader, epoch, error)) {
            goto out;
        }
        tdm_model_set_training(model, TRUE);
        double epoch_loss = 0.0, epoch_wait = 0.0;
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
            if (!tdm_strategy_train_step(strategy, batch, do_update, &r, error)) {
                goto out;
            }
            updates += do_update ? 1 : 0;
            step++;
            sum.steps++;
            epoch_loss += (double)r.loss * (double)r.count;
            epoch_correct += r.correct;
            epoch_images += r.count;
            epoch_wait += batch->wait_s;

            double elapsed = tdm_time_now() - epoch_start;
            log_event(log, "step", "\"epoch\":%d,\"step\":%" G_GINT64_FORMAT ",\"global_step\":%"
                      G_GINT64_FORMAT ",\"loss\":%.9g,\"correct\":%" G_GINT64_FORMAT ",\"count\":%"
                      G_GINT64_FORMAT ",\"lr\":%.9g,\"wait_s\":%.6f,\"time_s\":%.6f", epoch + 1,
                      step, sum.steps, r.loss, r.correct, r.count, optimizer->lr, batch->wait_s,
                      elapsed);
            if (cfg->progress > 0 && (step % cfg->progress == 0 || step == steps_per_epoch)) {
                double per_step = elapsed / (double)step;
                int64_t remaining = steps_per_epoch - step +
                                    (int64_t)(cfg->epochs - epoch - 1) * steps_per_epoch;
                print_progress(epoch + 1, cfg->epochs, step, steps_per_epoch,
                               epoch_loss / (double)epoch_images,
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
        sum.final_loss = epoch_images > 0 ? (float)(epoch_loss / (double)epoch_images) : 0.0f;
        log_event(log, "epoch", "\"epoch\":%d,\"loss\":%.9g,\"accuracy\":%.6f,\"images\":%"
                  G_GINT64_FORMAT ",\"seconds\":%.3f,\"img_per_s\":%.1f,\"wait_s\":%.3f",
                  epoch + 1, sum.final_loss,
                  epoch_images > 0 ? (double)epoch_correct / (double)epoch_images : 0.0,
                  epoch_images, epoch_seconds,
                  epoch_seconds > 0 ? (double)epoch_images / epoch_seconds : 0.0, epoch_wait);

        /* Evaluation on the test split after each epoch. */
        if (test_loader != NULL) {
            if (!tdm_evaluate(model, test_loader, &sum.test_accuracy, &sum.test_loss, error)) {
                goto out;
            }
            log_event(log, "eval", "\"epoch\":%d,\"accuracy\":%.6f,\"loss\":%.9g,\"images\":%"
                      G_GINT64_FORMAT, epoch + 1, sum.test_accuracy, sum.test_loss,
                      tdm_loader_num_samples(test_loader));
            if (cfg->progress > 0) {
                fprintf(stderr, "epoch %d/%d  test accuracy %.4f  loss %.4f\n", epoch + 1,
                        cfg->epochs, sum.test_accuracy, sum.test_loss);
            }
        }
    }

    if (cfg->save_path != NULL && !tdm_model_save(model, cfg->save_path, error)) {
        goto out;
    }

    sum.images_per_s = sum.train_seconds > 0 ? (double)sum.images / sum.train_seconds : 0.0;
    log_event(log, "summary", "\"model\":%s,\"epochs\":%d,\"steps\":%" G_GINT64_FORMAT
              ",\"images\":%" G_GINT64_FORMAT ",\"train_seconds\":%.3f,\"img_per_s\":%.1f,"
              "\"first_step_s\":%.3f,\"final_loss\":%.9g,\"test_accuracy\":%.6f,"
              "\"test_loss\":%.9g", j_model, cfg->epochs, sum.steps, sum.images,
              sum.train_seconds, sum.images_per_s, sum.first_step_s, sum.final_loss,
              sum.test_accuracy, sum.test_loss);
    evaluation =
        sum.test_accuracy >= 0 ? g_strdup_printf("test accuracy %.4f (loss %.4f)",
                                                 sum.test_accuracy, sum.test_loss)
                               : g_strdup("not evaluated");
    printf("summary: model %s, %d epoch%s, %" G_GINT64_FORMAT " images, %.0f img/s, %s, first "
           "step after %.2f s\n", cfg->model, cfg->epochs, cfg->epochs == 1 ? "" : "s",
           sum.images, sum.images_per_s, evaluation, sum.first_step_s);
    fflush(stdout);
    if (summary != NULL) {
        *summary = sum;
    }
    ok = TRUE;

out:
    if (log != NULL) {
        fclose(log);
    }
    tdm_strategy_free(strategy);
    tdm_optimizer_free(optimizer);
    tdm_model_free(model);
    tdm_loader_free(test_loader);
    tdm_loader_free(train_loader);
    tdm_dataset_close(test_ds);
    tdm_dataset_close(train_ds);
    return ok;
}

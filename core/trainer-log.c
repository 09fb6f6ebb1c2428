/* SPDX-License-Identifier: MIT */
/* core/trainer-log.c - what a training run reports, and where.
 *
 * Rank 0 reports; the other ranks stay silent. The JSON log
 * (train.log_file) gets one object per line: "start", then "step" every
 * train.log_every steps (1: every step) with the figures of the steps since
 * the previous one, "epoch" and "eval" after each epoch and "summary" at
 * the end, each built with json-glib's JsonBuilder and written by its
 * generator; a figure that is not finite (a diverged loss) is written as
 * null, so every JSON reader takes the log. stderr gets the "training ..."
 * lines, a progress line every train.progress steps, the evaluation after
 * each epoch and two warnings (a non-finite loss, once; a loader that
 * holds the steps up, once per epoch); stdout gets the one-line summary,
 * which ends with the run's peak memory (peak_memory_read: the process's
 * peak RSS and each training device's allocator peak, with its hardware
 * name, reserved bytes and utilisation). The epoch and summary events
 * carry the same device figures; tdm_device_info is asked for them once
 * per epoch and at the end, never per step.
 *
 * The loss and the right predictions stay on the device until the trainer
 * reads them, which it does only for a report that shows them
 * (tdm_train_log_wants_stats): a step event, a progress line, the epoch's
 * end. So the loss of a step event is the mean over the samples of its
 * steps, and a non-finite loss is found, and named with its steps, at the
 * first read after it.
 */
#include "config.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "trainer-private.h"

struct TrainLog {
    FILE *file; /* JSON lines; NULL = none */
    JsonBuilder *builder;
    JsonGenerator *generator;
    int progress; /* a progress line every N steps; 0 = none */
    int every;    /* a step event every N steps (with a file) */
    gboolean warned_nonfinite;
    double comm_s, step_s; /* the run's, for the summary */
    /* The next step event's figures: the steps since the last one. */
    struct {
        int64_t steps, correct, count;
        double loss_sum, wait_s, step_s, comm_s;
    } since;
};

TrainLog *tdm_train_log_new(const TrainRun *run, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    TrainLog *log = g_new0(TrainLog, 1);
    log->progress = run->leader ? cfg->progress : 0;
    log->every = MAX(cfg->log_every, 1);
    /* a resumed run adds to the log of the run it continues */
    if (run->leader && cfg->log_file != NULL &&
        (log->file = fopen(cfg->log_file, run->resumed ? "a" : "w")) == NULL) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot open the log file: %s",
                    cfg->log_file, g_strerror(e));
        tdm_train_log_free(log);
        return NULL;
    }
    g_autofree char *save = tdm_train_save_path(run);
    if (save != NULL && !tdm_save_path_check(save, error)) {
        g_prefix_error(error, "train.save: ");
        tdm_train_log_free(log);
        return NULL;
    }
    log->builder = json_builder_new_immutable();
    log->generator = json_generator_new();
    return log;
}

char *tdm_train_save_path(const TrainRun *run)
{
    const char *path = run->cfg->save_path;
    if (path == NULL || (!run->leader && strstr(path, "{rank}") == NULL)) {
        return NULL;
    }
    g_autofree char *rank = g_strdup_printf("%d", run->env.rank);
    g_auto(GStrv) parts = g_strsplit(path, "{rank}", -1);
    return g_strjoinv(rank, parts);
}

void tdm_train_log_free(TrainLog *log)
{
    if (log == NULL) {
        return;
    }
    if (log->file != NULL) {
        fclose(log->file);
    }
    g_clear_object(&log->builder);
    g_clear_object(&log->generator);
    g_free(log);
}

/* ---- JSON events ------------------------------------------------------ */

/* Starts an event's object; FALSE when there is no log to write. */
static gboolean event_begin(TrainLog *log, const char *event)
{
    if (log->file == NULL) {
        return FALSE;
    }
    json_builder_reset(log->builder);
    json_builder_begin_object(log->builder);
    json_builder_set_member_name(log->builder, "event");
    json_builder_add_string_value(log->builder, event);
    return TRUE;
}

static void add_int(TrainLog *log, const char *name, gint64 value)
{
    json_builder_set_member_name(log->builder, name);
    json_builder_add_int_value(log->builder, value);
}

/* A measured figure: null when it is not finite. */
static void add_number(TrainLog *log, const char *name, double value)
{
    json_builder_set_member_name(log->builder, name);
    if (isfinite(value)) {
        json_builder_add_double_value(log->builder, value);
    } else {
        json_builder_add_null_value(log->builder);
    }
}

static void add_string(TrainLog *log, const char *name, const char *value)
{
    json_builder_set_member_name(log->builder, name);
    json_builder_add_string_value(log->builder, value != NULL ? value : "");
}

/* Writes the event as one line. Step lines go out with stdio's buffer (a
 * write per few kB rather than a system call per step); every other event
 * is flushed. */
static void event_end(TrainLog *log, gboolean flush)
{
    json_builder_end_object(log->builder);
    g_autoptr(JsonNode) root = json_builder_get_root(log->builder);
    json_generator_set_root(log->generator, root);
    gsize len = 0;
    g_autofree char *text = json_generator_to_data(log->generator, &len);
    fwrite(text, 1, len, log->file);
    fputc('\n', log->file);
    if (flush) {
        fflush(log->file);
    }
}

/* ---- devices and peak memory ------------------------------------------ */

/* What a report says of one training device: tdm_device_info's figures,
 * read once per epoch and at the summary (never per step). */
typedef struct {
    const char *name;                       /* the device's, e.g. "cuda:0" */
    char hw_name[TDM_DEVICE_INFO_NAME_LEN]; /* the hardware's, "NVIDIA H200" */
    gint64 peak;                            /* its allocator's peak */
    gint64 reserved;                        /* held by its allocator (-1 unknown) */
    int util;                               /* percent busy lately (-1 unknown) */
} DeviceFigures;

/* The run's memory so far. */
typedef struct {
    guint64 rss_bytes;      /* the process's peak resident set */
    DeviceFigures *devices; /* the training devices whose peak is known */
    guint n_devices;
    gint64 device_bytes;   /* the largest peak of them */
    gint64 reserved_bytes; /* the largest reserved (-1 unknown) */
    int util;              /* the highest utilisation (-1 unknown) */
} PeakMemory;

static void peak_memory_read(const TrainRun *run, PeakMemory *out)
{
    struct rusage ru;
    memset(out, 0, sizeof(*out));
    out->reserved_bytes = -1;
    out->util = -1;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        out->rss_bytes = (guint64)ru.ru_maxrss * 1024; /* Linux counts KiB */
    }
    const guint n = run->devices != NULL ? run->devices->len : 1;
    out->devices = g_new0(DeviceFigures, n);
    for (guint i = 0; i < n; i++) {
        TdmDevice *dev = run->devices != NULL ? g_ptr_array_index(run->devices, i) : run->dev;
        TdmDeviceInfo info;
        /* a device that cannot say is left out of the report, not fatal */
        if (!tdm_device_info(dev, &info, NULL) || info.peak_bytes < 0) {
            continue;
        }
        DeviceFigures *d = &out->devices[out->n_devices++];
        d->name = dev->name;
        g_strlcpy(d->hw_name, info.name, sizeof(d->hw_name));
        d->peak = info.peak_bytes;
        d->reserved = info.reserved_bytes;
        d->util = info.utilization;
        out->device_bytes = MAX(out->device_bytes, d->peak);
        out->reserved_bytes = MAX(out->reserved_bytes, d->reserved);
        out->util = MAX(out->util, d->util);
    }
}

static void peak_memory_clear(PeakMemory *m)
{
    g_clear_pointer(&m->devices, g_free);
    m->n_devices = 0;
}

/* One device's figures as JSON members: device_name (the hardware's),
 * peak_device_bytes, reserved_device_bytes and device_util (-1 unknown). */
static void device_figures_add(TrainLog *log, const char *hw_name, gint64 peak, gint64 reserved,
                               int util)
{
    add_string(log, "device_name", hw_name);
    add_int(log, "peak_device_bytes", peak);
    add_int(log, "reserved_device_bytes", reserved);
    add_int(log, "device_util", util);
}

/* The devices' fields of the epoch and summary events: the figures above,
 * the largest over the training devices (device_name: the first's), and
 * with several devices each one's in per_device {"ref:0": {...}, ...};
 * the summary event keeps peak_device_bytes_per_device {"ref:0": N}. */
static void devices_add(TrainLog *log, const PeakMemory *m, gboolean summary)
{
    if (m->n_devices == 0) {
        return;
    }
    device_figures_add(log, m->devices[0].hw_name, m->device_bytes, m->reserved_bytes, m->util);
    if (m->n_devices < 2) {
        return;
    }
    json_builder_set_member_name(log->builder, "per_device");
    json_builder_begin_object(log->builder);
    for (guint i = 0; i < m->n_devices; i++) {
        const DeviceFigures *d = &m->devices[i];
        json_builder_set_member_name(log->builder, d->name);
        json_builder_begin_object(log->builder);
        device_figures_add(log, d->hw_name, d->peak, d->reserved, d->util);
        json_builder_end_object(log->builder);
    }
    json_builder_end_object(log->builder);
    if (summary) {
        json_builder_set_member_name(log->builder, "peak_device_bytes_per_device");
        json_builder_begin_object(log->builder);
        for (guint i = 0; i < m->n_devices; i++) {
            add_int(log, m->devices[i].name, m->devices[i].peak);
        }
        json_builder_end_object(log->builder);
    }
}

static void append_mib(GString *text, gint64 bytes)
{
    if (bytes >= 0) {
        g_string_append_printf(text, "%.0f MiB", (double)bytes / (1 << 20));
    } else {
        g_string_append(text, "-");
    }
}

/* Its words on the summary line: "peak RSS 46 MiB, peak cpu:0 12 MiB
 * (Intel Xeon, reserved 12 MiB, util -)", with ", ref:1 12 MiB (...)" for
 * each further device (transfer full). */
static char *peak_memory_text(const PeakMemory *m)
{
    GString *text = g_string_new(NULL);
    g_string_printf(text, "peak RSS %.0f MiB", (double)m->rss_bytes / (1 << 20));
    for (guint i = 0; i < m->n_devices; i++) {
        const DeviceFigures *d = &m->devices[i];
        g_string_append_printf(text, "%s %s ", i == 0 ? ", peak" : ",", d->name);
        append_mib(text, d->peak);
        g_string_append_printf(text, " (%s, reserved ", d->hw_name);
        append_mib(text, d->reserved);
        if (d->util >= 0) {
            g_string_append_printf(text, ", util %d%%)", d->util);
        } else {
            g_string_append(text, ", util -)");
        }
    }
    return g_string_free(text, FALSE);
}

/* ---- the events ------------------------------------------------------- */

static const char *strategy_name(const TrainRun *run)
{
    return run->strategy != NULL ? run->strategy->name : run->cfg->strategy;
}

void tdm_train_log_start(TrainLog *log, const TrainRun *run)
{
    const TdmTrainConfig *cfg = run->cfg;
    const int64_t params = tdm_model_num_parameters(run->model);
    const int64_t images = tdm_loader_num_samples(run->train_loader);
    if (event_begin(log, "start")) {
        add_string(log, "model", cfg->model);
        add_string(log, "device", run->dev->name);
        add_string(log, "dataset", run->train_ds->path);
        add_int(log, "parameters", params);
        add_int(log, "train_images", images);
        add_int(log, "steps_per_epoch", run->steps_per_epoch);
        add_int(log, "batch_size", cfg->batch_size);
        add_int(log, "epochs", cfg->epochs);
        /* json-glib's integers are signed: a seed past 2^63 - 1 keeps all
         * its digits as a string */
        if (cfg->seed <= G_MAXINT64) {
            add_int(log, "seed", (gint64)cfg->seed);
        } else {
            g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, cfg->seed);
            add_string(log, "seed", seed);
        }
        add_string(log, "strategy", strategy_name(run));
        add_int(log, "world_size", run->env.world_size);
        add_int(log, "devices", run->devices != NULL ? run->devices->len : 1);
        add_int(log, "accumulate", run->accumulate);
        add_string(log, "precision", tdm_precision_name(tdm_device_get_precision(run->dev)));
        event_end(log, TRUE);
    }
    if (log->progress > 0) {
        fprintf(stderr, "training %s (%" G_GINT64_FORMAT " parameters) on %s: %" G_GINT64_FORMAT
                " images of %s:%s, %" G_GINT64_FORMAT " steps per epoch\n", cfg->model, params,
                run->dev->name, images, run->train_ds->kind, run->train_ds->path,
                run->steps_per_epoch);
        if (run->comm != NULL) {
            int world = run->env.world_size;
            fprintf(stderr, "strategy %s over %d process%s, collective %s%s\n",
                    strategy_name(run), world, world == 1 ? "" : "es",
                    tdm_feature_get_name(run->comm->feature),
                    tdm_comm_is_staged(run->comm) ? " (staged through host memory)" : "");
        }
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

static gboolean step_event_due(const TrainLog *log, const TrainRun *run, const EpochStats *es)
{
    return log->file != NULL && (es->step % log->every == 0 || es->step == run->steps_per_epoch);
}

static gboolean progress_due(const TrainLog *log, const TrainRun *run, const EpochStats *es)
{
    return log->progress > 0 && (es->step % log->progress == 0 || es->step == run->steps_per_epoch);
}

gboolean tdm_train_log_wants_stats(const TrainLog *log, const TrainRun *run, const EpochStats *es)
{
    return step_event_due(log, run, es) || progress_due(log, run, es);
}

void tdm_train_log_stats(TrainLog *log, const TrainRun *run, const EpochStats *es,
                         const TdmStepStats *st)
{
    log->since.loss_sum += st->loss_sum;
    log->since.correct += st->correct;
    log->since.count += st->count;
    if (!run->leader || log->warned_nonfinite || isfinite(st->loss_sum)) {
        return;
    }
    /* training goes on, as PyTorch's would, but say it once */
    log->warned_nonfinite = TRUE;
    const int64_t first = es->step - MAX(st->steps, 1) + 1;
    g_autofree char *steps =
        first == es->step
            ? g_strdup_printf("at step %" G_GINT64_FORMAT, es->step)
            : g_strdup_printf("in steps %" G_GINT64_FORMAT "-%" G_GINT64_FORMAT, first, es->step);
    fprintf(stderr, "warning: the loss is %s %s of epoch %d (learning rate %g): the weights no "
            "longer learn; a lower optim.lr, or warmup, usually helps\n",
            isnan(st->loss_sum) ? "NaN" : "infinite", steps, es->epoch + 1,
            (double)run->optimizer->lr);
}

/* The step event of the steps since the last one, which ends at es->step:
 * loss is their samples' mean, the counts and seconds their sums. */
static void step_event(TrainLog *log, const TrainRun *run, const EpochStats *es,
                       int64_t global_step)
{
    if (log->since.steps == 0 || !event_begin(log, "step")) {
        return;
    }
    const float loss =
        log->since.count > 0 ? (float)(log->since.loss_sum / (double)log->since.count) : 0.0f;
    add_int(log, "epoch", es->epoch + 1);
    add_int(log, "step", es->step);
    add_int(log, "global_step", global_step);
    add_number(log, "loss", loss);
    add_int(log, "correct", log->since.correct);
    add_int(log, "count", log->since.count);
    add_number(log, "lr", run->optimizer->lr);
    add_number(log, "wait_s", log->since.wait_s);
    add_number(log, "data_wait_s", log->since.wait_s);
    add_number(log, "time_s", tdm_time_now() - es->start);
    add_number(log, "step_s", log->since.step_s);
    add_number(log, "comm_wait_s", log->since.comm_s);
    event_end(log, FALSE);
    memset(&log->since, 0, sizeof(log->since));
}

void tdm_train_log_step(TrainLog *log, const TrainRun *run, EpochStats *es,
                        const TdmBatch *batch, const TdmStepResult *r, double step_s,
                        int64_t global_step)
{
    const TdmTrainConfig *cfg = run->cfg;
    if (run->leader) {
        data_wait_step(&es->data_wait, batch->wait_s, tdm_time_now(), cfg->workers);
    }
    log->since.steps++;
    log->since.wait_s += batch->wait_s;
    log->since.step_s += step_s;
    log->since.comm_s += r->comm_wait_s;
    if (step_event_due(log, run, es)) {
        step_event(log, run, es, global_step);
    }
    if (progress_due(log, run, es)) {
        const double elapsed = tdm_time_now() - es->start;
        const int64_t remaining = run->steps_per_epoch - es->step +
                                  (int64_t)(cfg->epochs - es->epoch - 1) * run->steps_per_epoch;
        char eta[32];
        format_duration(eta, sizeof(eta), elapsed / (double)es->step * (double)remaining);
        fprintf(stderr, "epoch %d/%d  step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "  loss %.4f  "
                "%.0f img/s  ETA %s\n", es->epoch + 1, cfg->epochs, es->step,
                run->steps_per_epoch, es->loss_sum * run->env.world_size / (double)es->images,
                (double)es->images / elapsed, eta);
    }
}

void tdm_train_log_epoch(TrainLog *log, const TrainRun *run, const EpochStats *es,
                         const TdmTrainSummary *sum, double seconds)
{
    log->comm_s += es->comm_s;
    log->step_s += es->step_s;
    /* an epoch shorter than steps_per_epoch: its last steps' event */
    step_event(log, run, es, sum->steps);
    if (!event_begin(log, "epoch")) {
        return;
    }
    const double local_images = (double)es->images / run->env.world_size;
    add_int(log, "epoch", es->epoch + 1);
    add_number(log, "loss", sum->final_loss);
    add_number(log, "accuracy", es->images > 0 ? (double)es->correct / local_images : 0.0);
    add_int(log, "images", es->images);
    add_number(log, "seconds", seconds);
    add_number(log, "img_per_s", seconds > 0 ? (double)es->images / seconds : 0.0);
    add_number(log, "wait_s", es->wait_s);
    add_number(log, "data_wait_frac", seconds > 0 ? es->wait_s / seconds : 0.0);
    add_number(log, "step_s", es->step_s);
    add_number(log, "comm_wait_s", es->comm_s);
    add_number(log, "comm_wait_frac", es->step_s > 0 ? es->comm_s / es->step_s : 0.0);
    PeakMemory mem;
    peak_memory_read(run, &mem);
    devices_add(log, &mem, FALSE);
    peak_memory_clear(&mem);
    event_end(log, TRUE);
}

void tdm_train_log_eval(TrainLog *log, const TrainRun *run, int epoch, const TdmTrainSummary *sum)
{
    if (event_begin(log, "eval")) {
        add_int(log, "epoch", epoch + 1);
        add_number(log, "accuracy", sum->test_accuracy);
        add_number(log, "loss", sum->test_loss);
        add_int(log, "images", tdm_loader_num_samples(run->test_loader));
        event_end(log, TRUE);
    }
    if (log->progress > 0) {
        fprintf(stderr, "epoch %d/%d  test accuracy %.4f  loss %.4f\n", epoch + 1,
                run->cfg->epochs, sum->test_accuracy, sum->test_loss);
    }
}

void tdm_train_log_early_stop(TrainLog *log, const TrainRun *run, int epoch,
                              const EarlyStop *es)
{
    if (!run->leader) {
        return;
    }
    if (event_begin(log, "early_stop")) {
        add_int(log, "epoch", epoch + 1);
        add_int(log, "patience", es->patience);
        add_number(log, "best_accuracy", es->best_accuracy);
        add_int(log, "best_epoch", es->best_epoch + 1);
        event_end(log, TRUE);
    }
    /* said even with --quiet: it is why the run is shorter than asked */
    fprintf(stderr,
            "early stop after epoch %d/%d: the test accuracy has not improved for %d "
            "evaluation%s (best %.4f, epoch %d)\n",
            epoch + 1, run->cfg->epochs, es->since_best, es->since_best == 1 ? "" : "s",
            es->best_accuracy, es->best_epoch + 1);
}

void tdm_train_log_summary(TrainLog *log, const TrainRun *run, TdmTrainSummary *sum)
{
    const TdmTrainConfig *cfg = run->cfg;
    PeakMemory peak;
    peak_memory_read(run, &peak);
    sum->peak_rss_bytes = peak.rss_bytes;
    if (event_begin(log, "summary")) {
        add_string(log, "model", cfg->model);
        add_int(log, "epochs", cfg->epochs);
        add_int(log, "steps", sum->steps);
        add_int(log, "images", sum->images);
        add_number(log, "train_seconds", sum->train_seconds);
        add_number(log, "img_per_s", sum->images_per_s);
        add_number(log, "first_step_s", sum->first_step_s);
        add_number(log, "final_loss", sum->final_loss);
        add_number(log, "test_accuracy", sum->test_accuracy);
        add_number(log, "test_loss", sum->test_loss);
        add_string(log, "strategy", strategy_name(run));
        add_int(log, "world_size", run->env.world_size);
        add_number(log, "comm_wait_s", log->comm_s);
        add_number(log, "comm_wait_frac", log->step_s > 0 ? log->comm_s / log->step_s : 0.0);
        add_int(log, "peak_rss_bytes", (gint64)peak.rss_bytes);
        devices_add(log, &peak, TRUE);
        event_end(log, TRUE);
    }
    g_autofree char *memory = peak_memory_text(&peak);
    peak_memory_clear(&peak);
    if (!run->leader) {
        return;
    }
    g_autofree char *evaluation =
        sum->test_accuracy >= 0 ? g_strdup_printf("test accuracy %.4f (loss %.4f)",
                                                  sum->test_accuracy, sum->test_loss)
                                : g_strdup("not evaluated");
    printf("summary: model %s, %d epoch%s, %" G_GINT64_FORMAT " images, %.0f img/s, %s, "
           "first step after %.2f s, %s\n", cfg->model, cfg->epochs,
           cfg->epochs == 1 ? "" : "s", sum->images, sum->images_per_s, evaluation,
           sum->first_step_s, memory);
    fflush(stdout);
}

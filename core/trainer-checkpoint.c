/* SPDX-License-Identifier: MIT */
/* core/trainer-checkpoint.c - the training run's checkpoints, made so that
 * a run resumes from one exactly.
 *
 * A checkpoint (<tandem/checkpoint.h>) is everything the next step depends
 * on: the weights and buffers, the optimizer's state (full per parameter,
 * gathered from zero1's shards by the strategy's export_optimizer) and its
 * step count, the schedule's position (optimizer updates so far), where the
 * sampler stands in the epoch's global order (world-size independent: see
 * core/sampler.c), the epoch and step, and the random streams. Every
 * stream of a run is counter-based (initialisation by (seed, parameter,
 * element), shuffles by (seed, epoch), transforms by (seed, epoch, sample))
 * except Dropout's count of forwards, so the seed and those counts are the
 * whole RNG state. A resumed run therefore takes the very batches, masks and
 * learning rates the uninterrupted one would have, and its parameters are
 * bit-identical at the same world size (at another world size the same
 * global batch is summed in another order: equal within float rounding).
 * Checkpoints are written only where an optimizer update has just been
 * made (a due checkpoint waits for the end of an accumulation group), so
 * no gradient is ever pending in one.
 *
 * The metadata also keeps the configuration, the figures of the epoch so
 * far, the evaluations so far and the best, for the run's reports, for
 * train.keep_best and for the checks of a resume (core/trainer-resume.c,
 * which reads all this back).
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "modules/module-private.h"
#include "trainer-checkpoint.h"
#include <tandem/checkpoint.h>

/* ---- the configuration as JSON ---- */

static void cfg_text(JsonBuilder *b, const char *key, const char *text)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, text != NULL ? text : "");
}

#define CFG_STRING(b, key, v) cfg_text(b, key, v)
#define CFG_PATH(b, key, v) cfg_text(b, key, v)
#define CFG_NAME(b, key, v) cfg_text(b, key, v)
#define CFG_NUM(b, key, fmt, v)                                                                    \
    do {                                                                                           \
        g_autofree char *t_ = g_strdup_printf(fmt, v);                                             \
        cfg_text(b, key, t_);                                                                      \
    } while (0)
#define CFG_INT(b, key, v) CFG_NUM(b, key, "%d", v)
#define CFG_INT64(b, key, v) CFG_NUM(b, key, "%" G_GINT64_FORMAT, (gint64)(v))
#define CFG_UINT64(b, key, v) CFG_NUM(b, key, "%" G_GUINT64_FORMAT, (guint64)(v))
#define CFG_FLOAT(b, key, v) CFG_NUM(b, key, "%.9g", (double)(v))
#define CFG_BOOL(b, key, v) cfg_text(b, key, (v) ? "true" : "false")
#define CFG_KEY(field, type, key, ...) CFG_##type(b, key, cfg->field);
#define CFG_NO_ALIAS(...)

char *tdm_train_ckpt_config_json(const TdmTrainConfig *cfg)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    TDM_TRAIN_CONFIG_KEYS(CFG_KEY, CFG_NO_ALIAS)
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

/* ---- small JSON helpers ---- */

static void add_int(JsonBuilder *b, const char *name, gint64 v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

static void add_double(JsonBuilder *b, const char *name, double v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, v);
}

static void add_string(JsonBuilder *b, const char *name, const char *v)
{
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, v);
}

static char *builder_text(JsonBuilder *b)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

/* ---- Dropout's counters ---- */

/* Every Dropout of the tree under `m`, in forward order, with its full
 * name. */
void tdm_train_ckpt_dropouts(TdmModule *m, const char *prefix, GPtrArray *mods, GPtrArray *names)
{
    if (m->klass == &tdm_dropout_class) {
        g_ptr_array_add(mods, m);
        g_ptr_array_add(names, g_strdup(prefix));
    }
    for (guint i = 0; m->children != NULL && i < m->children->len; i++) {
        TdmModule *c = g_ptr_array_index(m->children, i);
        g_autofree char *name = c->name == NULL || c->name[0] == '\0' ? g_strdup(prefix)
                                : prefix[0] == '\0'                   ? g_strdup(c->name)
                                                    : g_strconcat(prefix, ".", c->name, NULL);
        tdm_train_ckpt_dropouts(c, name, mods, names);
    }
}

/* ---- writing ---- */

int64_t tdm_train_ckpt_epoch_samples(const TrainRun *run)
{
    const int64_t n = run->train_ds->length;
    return run->cfg->limit > 0 ? MIN(run->cfg->limit, n) : n;
}

/* Where the sampler stands, as a resume must set it. */
static void sampler_state(const TrainCkpt *ck, const TrainRun *run, TdmSamplerState *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (ck->pos.epoch_done) {
        ss->epoch = ck->pos.epoch + 1;
    } else if (ck->pos.step >= run->steps_per_epoch) {
        /* every batch trained, the epoch's report not made: nothing left */
        ss->epoch = ck->pos.epoch;
        ss->consumed = tdm_train_ckpt_epoch_samples(run);
    } else {
        tdm_loader_get_state(run->train_loader, ss);
    }
}

static void add_model(TdmSafeTensors *st, TrainRun *run, GError **error, gboolean *ok)
{
    TdmModel *model = run->model;
    for (guint i = 0; *ok && i < model->params->len; i++) {
        TdmParam *p = model->params->pdata[i];
        g_autofree float *buf = g_malloc(MAX((size_t)tdm_tensor_numel(p->value), 1) * 4);
        if (!(*ok = tdm_tensor_read(p->value, buf, error))) {
            return;
        }
        tdm_safetensors_add(st, p->full_name, TDM_DTYPE_F32, p->ndim, p->shape, buf);
        /* as tdm_model_save writes it: PyTorch's strict load wants it */
        if (p->is_buffer && strcmp(p->name, "running_mean") == 0) {
            size_t plen = strlen(p->full_name) - strlen("running_mean");
            g_autofree char *name =
                g_strdup_printf("%.*snum_batches_tracked", (int)plen, p->full_name);
            gint64 zero = 0;
            tdm_safetensors_add(st, name, TDM_DTYPE_I64, 0, NULL, &zero);
        }
    }
}

static char *trainer_json(const TrainCkpt *ck, const TrainRun *run)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    const Position *p = &ck->pos;
    json_builder_begin_object(b);
    add_int(b, "epoch", p->epoch);
    add_int(b, "step_in_epoch", p->step);
    json_builder_set_member_name(b, "epoch_done");
    json_builder_add_boolean_value(b, p->epoch_done);
    add_int(b, "steps_per_epoch", run->steps_per_epoch);
    add_int(b, "global_step", p->global_step);
    add_int(b, "updates", p->updates);
    json_builder_set_member_name(b, "epoch_figures");
    json_builder_begin_object(b);
    add_double(b, "loss_sum", p->loss_sum);
    add_int(b, "correct", p->correct);
    add_int(b, "images", p->images);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "metrics");
    json_builder_begin_array(b);
    for (guint i = 0; i < ck->evals->len; i++) {
        const EvalRecord *e = &g_array_index(ck->evals, EvalRecord, i);
        json_builder_begin_object(b);
        add_int(b, "epoch", e->epoch);
        add_int(b, "global_step", e->global_step);
        add_double(b, "train_loss", e->train_loss);
        if (e->test_accuracy >= 0.0) {
            add_double(b, "test_accuracy", e->test_accuracy);
            add_double(b, "test_loss", e->test_loss);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "best");
    if (ck->has_best) {
        json_builder_begin_object(b);
        add_string(b, "metric", "test_accuracy");
        add_double(b, "value", ck->best);
        add_int(b, "global_step", ck->best_step);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    json_builder_end_object(b);
    return builder_text(b);
}

static char *rng_json(const TrainRun *run)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, (guint64)run->cfg->seed);
    json_builder_begin_object(b);
    /* initialisation, shuffles and transforms are keyed by the seed and
     * counters the checkpoint has elsewhere (epoch, sample index) */
    add_string(b, "seed", seed);
    add_string(b, "model_init", "counter-based: (seed, parameter, element)");
    add_string(b, "sampler", "counter-based: (seed, epoch)");
    add_string(b, "transforms", "counter-based: (seed, epoch, sample index)");
    json_builder_set_member_name(b, "dropout");
    json_builder_begin_array(b);
    g_autoptr(GPtrArray) mods = g_ptr_array_new();
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    tdm_train_ckpt_dropouts(run->model->root, "", mods, names);
    for (guint i = 0; i < mods->len; i++) {
        g_autofree char *s =
            g_strdup_printf("%" G_GUINT64_FORMAT, tdm_dropout_get_seed(mods->pdata[i]));
        g_autofree char *n =
            g_strdup_printf("%" G_GUINT64_FORMAT, tdm_dropout_get_pass(mods->pdata[i]));
        json_builder_begin_object(b);
        add_string(b, "module", names->pdata[i]);
        add_string(b, "seed", s);
        add_string(b, "pass", n);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return builder_text(b);
}

static void set_metadata(TdmSafeTensors *st, TrainCkpt *ck, const TrainRun *run,
                         int64_t optim_steps)
{
    const TdmTrainConfig *cfg = run->cfg;
    tdm_safetensors_set_metadata(st, "format", TDM_CHECKPOINT_FORMAT);
    tdm_safetensors_set_metadata(st, "format_version", TDM_CHECKPOINT_FORMAT_VERSION);
    tdm_safetensors_set_metadata(st, "producer", "tandem " TDM_VERSION);
    tdm_safetensors_set_metadata(st, "model", cfg->model);
    g_autofree char *config = tdm_train_ckpt_config_json(cfg);
    tdm_safetensors_set_metadata(st, "config", config);
    g_autofree char *world = g_strdup_printf("%d", run->env.world_size);
    tdm_safetensors_set_metadata(st, "world_size", world);
    g_autofree char *trainer = trainer_json(ck, run);
    tdm_safetensors_set_metadata(st, "trainer", trainer);

    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    add_string(b, "name", tdm_params_get_name(run->optimizer->hparams));
    add_string(b, "spec", cfg->optimizer);
    add_int(b, "step_count", optim_steps);
    json_builder_end_object(b);
    g_autofree char *optim = builder_text(b);
    tdm_safetensors_set_metadata(st, "optimizer", optim);

    g_autoptr(JsonBuilder) s = json_builder_new_immutable();
    json_builder_begin_object(s);
    add_string(s, "kind", cfg->schedule);
    add_int(s, "updates", ck->pos.updates);
    add_double(s, "base_lr", run->schedule.base_lr);
    add_double(s, "lr", tdm_schedule_lr(&run->schedule, ck->pos.updates));
    json_builder_end_object(s);
    g_autofree char *sched = builder_text(s);
    tdm_safetensors_set_metadata(st, "schedule", sched);

    TdmSamplerState ss;
    sampler_state(ck, run, &ss);
    g_autoptr(JsonBuilder) d = json_builder_new_immutable();
    json_builder_begin_object(d);
    add_int(d, "epoch", ss.epoch);
    add_int(d, "consumed", ss.consumed);
    add_int(d, "samples_per_epoch", tdm_train_ckpt_epoch_samples(run));
    add_int(d, "global_batch", (gint64)cfg->batch_size * run->env.world_size);
    json_builder_end_object(d);
    g_autofree char *sampler = builder_text(d);
    tdm_safetensors_set_metadata(st, "sampler", sampler);

    g_autofree char *rng = rng_json(run);
    tdm_safetensors_set_metadata(st, "rng", rng);
}

/* Writes the checkpoint of where the run stands (with `best`, DIR/best
 * names it), then removes the old ones. Every rank calls it (the strategy
 * may gather the optimizer state); rank 0 writes. */
static gboolean ckpt_save(TrainCkpt *ck, TrainRun *run, gboolean best, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    g_autoptr(TdmSafeTensors) st = tdm_safetensors_new();
    gboolean ok = TRUE;
    int64_t optim_steps = 0;
    if (run->leader) {
        add_model(st, run, error, &ok);
    }
    if (ok && (run->leader || tdm_strategy_owns_optimizer_state(run->strategy))) {
        ok = tdm_strategy_export_optimizer(run->strategy, st, TDM_CHECKPOINT_OPTIM_PREFIX,
                                           &optim_steps, error);
    }
    if (!ok || !run->leader) {
        ck->saved_step = ck->pos.global_step;
        ck->saved_epoch_done = ck->pos.epoch_done;
        return ok;
    }
    set_metadata(st, ck, run, optim_steps);
    if (!tdm_checkpoint_save(st, cfg->checkpoint_dir, ck->pos.global_step, error) ||
        (best && !tdm_checkpoint_set_best(cfg->checkpoint_dir, ck->pos.global_step, error)) ||
        !tdm_checkpoint_prune(cfg->checkpoint_dir, cfg->keep_last, error)) {
        g_prefix_error(error, "train.checkpoint_dir: ");
        return FALSE;
    }
    ck->saved_step = ck->pos.global_step;
    ck->saved_epoch_done = ck->pos.epoch_done;
    if (cfg->progress > 0) {
        g_autofree char *path = tdm_checkpoint_path(cfg->checkpoint_dir, ck->pos.global_step);
        fprintf(stderr,
                "checkpoint %s (epoch %d, step %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT ")\n",
                path, ck->pos.epoch + 1, ck->pos.step, run->steps_per_epoch);
    }
    return TRUE;
}

/* ---- the loop's calls ---- */

int tdm_train_ckpt_first_epoch(const TrainCkpt *ck)
{
    return ck->pos.epoch_done ? ck->pos.epoch + 1 : ck->pos.epoch;
}

void tdm_train_ckpt_counters(const TrainCkpt *ck, TdmTrainSummary *sum, int64_t *updates)
{
    sum->steps = ck->pos.global_step;
    *updates = ck->pos.updates;
    if (ck->evals->len > 0) {
        const EvalRecord *e = &g_array_index(ck->evals, EvalRecord, ck->evals->len - 1);
        sum->test_accuracy = e->test_accuracy;
        sum->test_loss = e->test_loss;
    }
}

void tdm_train_ckpt_resume_epoch(TrainCkpt *ck, EpochStats *es)
{
    if (!ck->resume_epoch_pending || es->epoch != ck->pos.epoch) {
        return;
    }
    ck->resume_epoch_pending = FALSE;
    es->step = es->read_step = ck->pos.step;
    es->loss_sum = ck->pos.loss_sum;
    es->correct = ck->pos.correct;
    es->images = ck->pos.images;
}

gboolean tdm_train_ckpt_due(const TrainCkpt *ck, int64_t steps)
{
    const TdmTrainConfig *cfg = ck->cfg;
    /* a multiple of checkpoint_every passed since the last one (one that
     * waited for the end of an accumulation group is not moved along) */
    const int64_t every = cfg->checkpoint_every;
    return cfg->checkpoint_dir != NULL && steps > ck->saved_step &&
           ((every > 0 && steps / every > MAX(ck->saved_step, 0) / every) ||
            (cfg->max_steps > 0 && steps >= cfg->max_steps));
}

gboolean tdm_train_ckpt_after_step(TrainCkpt *ck, TrainRun *run, const EpochStats *es,
                                   const TdmTrainSummary *sum, int64_t updates, gboolean *stop,
                                   GError **error)
{
    Position *p = &ck->pos;
    p->epoch = es->epoch;
    p->step = es->step;
    p->epoch_done = FALSE;
    p->global_step = sum->steps;
    p->updates = updates;
    p->loss_sum = es->loss_sum;
    p->correct = es->correct;
    p->images = es->images;
    /* only right after an optimizer update: no gradient is pending */
    const gboolean updated = es->step % run->accumulate == 0 || es->step == run->steps_per_epoch;
    if (!updated) {
        return TRUE;
    }
    *stop = ck->cfg->max_steps > 0 && sum->steps >= ck->cfg->max_steps;
    if (tdm_train_ckpt_due(ck, sum->steps) && es->read_step == es->step) {
        return ckpt_save(ck, run, FALSE, error);
    }
    return TRUE;
}

/* Rank 0's *flag on every rank, where the strategy's checkpoint is a
 * collective. */
static gboolean share_flag(TrainRun *run, gboolean *flag, GError **error)
{
    if (run->comm == NULL || !tdm_strategy_owns_optimizer_state(run->strategy)) {
        return TRUE;
    }
    int64_t shape[1] = {1};
    g_autoptr(TdmTensor) t = tdm_tensor_new(run->dev, TDM_DTYPE_F32, 1, shape, error);
    float v = *flag ? 1.0f : 0.0f;
    if (t == NULL || !tdm_tensor_write(t, &v, error) ||
        !tdm_comm_broadcast(run->comm, t, 0, error) || !tdm_tensor_read(t, &v, error)) {
        return FALSE;
    }
    *flag = v != 0.0f;
    return TRUE;
}

gboolean tdm_train_ckpt_after_epoch(TrainCkpt *ck, TrainRun *run, const EpochStats *es,
                                    const TdmTrainSummary *sum, gboolean evaluated, GError **error)
{
    Position *p = &ck->pos;
    p->epoch = es->epoch;
    p->step = es->step;
    p->epoch_done = TRUE;
    p->loss_sum = 0.0;
    p->correct = p->images = 0;
    EvalRecord e = {
        .epoch = es->epoch,
        .global_step = p->global_step,
        .train_loss = sum->final_loss,
        .test_accuracy = evaluated ? sum->test_accuracy : -1.0,
        .test_loss = evaluated ? sum->test_loss : -1.0,
    };
    g_array_append_val(ck->evals, e);
    if (!ck->cfg->keep_best) {
        return TRUE;
    }
    /* rank 0 evaluates; a strategy that gathers the optimizer state for a
     * checkpoint needs every rank to know that one is written */
    gboolean better = evaluated && (!ck->has_best || e.test_accuracy > ck->best);
    if (!share_flag(run, &better, error)) {
        return FALSE;
    }
    if (!better) {
        return TRUE;
    }
    ck->has_best = TRUE;
    ck->best = e.test_accuracy;
    ck->best_step = p->global_step;
    return ckpt_save(ck, run, TRUE, error);
}

gboolean tdm_train_ckpt_finish(TrainCkpt *ck, TrainRun *run, GError **error)
{
    if (ck->cfg->checkpoint_dir == NULL ||
        (ck->saved_step == ck->pos.global_step && ck->saved_epoch_done == ck->pos.epoch_done)) {
        return TRUE;
    }
    return ckpt_save(ck, run, FALSE, error);
}

static gboolean check_keys(const TdmTrainConfig *cfg, GError **error)
{
    const char *need_dir = cfg->checkpoint_every > 0 ? "train.checkpoint_every"
                           : cfg->keep_best          ? "train.keep_best"
                                                     : NULL;
    if (need_dir != NULL && cfg->checkpoint_dir == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s needs train.checkpoint_dir (--checkpoint-dir DIR)", need_dir);
        return FALSE;
    }
    if (cfg->keep_best && !cfg->eval) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "train.keep_best keeps the checkpoint of the best test accuracy, but "
                    "train.eval is off (--no-eval): there is none");
        return FALSE;
    }
    return TRUE;
}

/* The cpu backend picks convolution kernels by timing them (TDM_CPU_TUNE),
 * and two kernels round differently: a resumed run is exact only if it
 * takes the choices its first part made. So a checkpointed run keeps this
 * rank's choices beside its checkpoints (DIR/cpu-tune-rank<R>.txt, which
 * the backend reads at its first convolution and rewrites at each new
 * choice), unless the user named a file. A directory given by --resume
 * FILE is the file's. */
static void keep_tune_choices(const TdmTrainConfig *cfg, const char *resume_path, int rank)
{
    const char *dir = cfg->checkpoint_dir;
    g_autofree char *resume_dir = NULL;
    if (dir == NULL && resume_path != NULL) {
        dir = resume_dir = g_path_get_dirname(resume_path);
    }
    const char *set = g_getenv("TDM_CPU_TUNE_CACHE");
    if (dir == NULL || (set != NULL && set[0] != '\0') || g_mkdir_with_parents(dir, 0755) != 0) {
        return;
    }
    g_autofree char *name = g_strdup_printf("cpu-tune-rank%d.txt", rank);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_setenv("TDM_CPU_TUNE_CACHE", path, TRUE);
}

TrainCkpt *tdm_train_ckpt_new(TrainRun *run, GError **error)
{
    TrainCkpt *ck = g_new0(TrainCkpt, 1);
    ck->cfg = run->cfg;
    ck->evals = g_array_new(FALSE, TRUE, sizeof(EvalRecord));
    ck->saved_step = -1;
    if (!check_keys(run->cfg, error) || !tdm_train_ckpt_resume_path(run, &ck->path, error) ||
        (ck->path != NULL && !tdm_train_ckpt_resume(ck, run, error))) {
        tdm_train_ckpt_free(ck);
        return NULL;
    }
    if (ck->path == NULL) {
        ck->saved_step = 0; /* every N steps from the start */
    }
    keep_tune_choices(run->cfg, ck->path, run->env.rank);
    return ck;
}

gboolean tdm_train_ckpt_restore_optimizer(TrainCkpt *ck, TrainRun *run, GError **error)
{
    if (ck->file == NULL) {
        return TRUE;
    }
    gboolean ok = tdm_strategy_import_optimizer(
        run->strategy, ck->file, TDM_CHECKPOINT_OPTIM_PREFIX, ck->path, ck->optim_steps, error);
    g_clear_pointer(&ck->file, tdm_safetensors_free);
    return ok;
}

void tdm_train_ckpt_free(TrainCkpt *ck)
{
    if (ck == NULL) {
        return;
    }
    tdm_safetensors_free(ck->file);
    g_free(ck->path);
    g_array_unref(ck->evals);
    g_free(ck);
}

/* core/trainer-checkpoint.c - the training run's checkpoints, and resuming
 * from one exactly.
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
 * far, the evaluations so far and the best, for the run's reports and for
 * train.keep_best. On resume the checkpoint is refused when it is of another
 * model or a configuration that cannot continue it (classes, channels,
 * optimizer, global batch, accumulation, seed, samples per epoch), the
 * message naming both values; shapes are checked parameter by parameter.
 *
 * `tandem run --max-restarts` sets TDM_RESTART_COUNT in the workers it
 * restarts: a restarted training with train.checkpoint_dir resumes from the
 * newest checkpoint there by itself, so the launcher need not know the
 * worker's command line. A first start into a directory that already holds
 * checkpoints is refused rather than mixing two runs' files.
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "modules/module-private.h"
#include "trainer-checkpoint.h"
#include <tandem/checkpoint.h>

/* Where the run stands after its last step. */
typedef struct {
    int epoch;
    int64_t step;          /* steps of `epoch` done */
    gboolean epoch_done;   /* its report and evaluation too: resume at epoch + 1 */
    int64_t global_step;   /* steps of the run */
    int64_t updates;       /* optimizer updates: the schedule's clock */
    double loss_sum;       /* the epoch's figures so far (EpochStats) */
    int64_t correct, images;
} Position;

/* One evaluation, for the metadata's list. */
typedef struct {
    int epoch;
    int64_t global_step;
    double train_loss, test_accuracy, test_loss;
} EvalRecord;

struct TrainCkpt {
    const TdmTrainConfig *cfg;
    Position pos;
    gboolean resume_epoch_pending; /* tdm_train_ckpt_resume_epoch has figures to give */
    TdmSafeTensors *file;          /* the checkpoint resumed from, until the optimizer's */
    char *path;
    int64_t optim_steps;           /* its optimizer step count */
    GArray *evals;                 /* EvalRecord */
    gboolean has_best;
    double best;
    int64_t best_step;
    int64_t saved_step;            /* global step of the last checkpoint, -1: none */
    gboolean saved_epoch_done;
};

/* ---- the configuration as JSON ---- */

static void cfg_text(JsonBuilder *b, const char *key, const char *text)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, text != NULL ? text : "");
}

#define CFG_STRING(b, key, v) cfg_text(b, key, v)
#define CFG_PATH(b, key, v) cfg_text(b, key, v)
#define CFG_NAME(b, key, v) cfg_text(b, key, v)
#define CFG_NUM(b, key, fmt, v)                                                                   \
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

static char *config_json(const TdmTrainConfig *cfg)
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

/* The metadata entry `key` of the checkpoint, parsed as a JSON object
 * (the parser, which owns it, goes into `keep`). */
static JsonObject *meta_object(const TrainCkpt *ck, const char *key, GPtrArray *keep,
                               GError **error)
{
    const char *text = tdm_safetensors_metadata(ck->file, key);
    JsonParser *parser = json_parser_new_immutable();
    g_ptr_array_add(keep, parser);
    if (text == NULL || !json_parser_load_from_data(parser, text, -1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: the checkpoint's metadata \"%s\" is %s", ck->path, key,
                    text == NULL ? "missing" : "not a JSON object");
        return NULL;
    }
    return json_node_get_object(json_parser_get_root(parser));
}

static gint64 obj_int(JsonObject *o, const char *name)
{
    return json_object_get_int_member_with_default(o, name, 0);
}

static double obj_double(JsonObject *o, const char *name, double def)
{
    JsonNode *n = json_object_get_member(o, name);
    return n != NULL && JSON_NODE_HOLDS_VALUE(n) ? json_node_get_double(n) : def;
}

static JsonArray *obj_array(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    return n != NULL && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

static const char *obj_string(JsonObject *o, const char *name)
{
    return json_object_get_string_member_with_default(o, name, NULL);
}

/* ---- Dropout's counters ---- */

/* Every Dropout of the tree under `m`, in forward order, with its full
 * name. */
static void collect_dropouts(TdmModule *m, const char *prefix, GPtrArray *mods, GPtrArray *names)
{
    if (m->klass == &tdm_dropout_class) {
        g_ptr_array_add(mods, m);
        g_ptr_array_add(names, g_strdup(prefix));
    }
    for (guint i = 0; m->children != NULL && i < m->children->len; i++) {
        TdmModule *c = g_ptr_array_index(m->children, i);
        g_autofree char *name =
            c->name == NULL || c->name[0] == '\0' ? g_strdup(prefix)
            : prefix[0] == '\0'                  ? g_strdup(c->name)
                                                 : g_strconcat(prefix, ".", c->name, NULL);
        collect_dropouts(c, name, mods, names);
    }
}

/* ---- writing ---- */

static int64_t epoch_samples(const TrainRun *run)
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
        ss->consumed = epoch_samples(run);
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
    collect_dropouts(run->model->root, "", mods, names);
    for (guint i = 0; i < mods->len; i++) {
        g_autofree char *s = g_strdup_printf("%" G_GUINT64_FORMAT,
                                             tdm_dropout_get_seed(mods->pdata[i]));
        g_autofree char *n = g_strdup_printf("%" G_GUINT64_FORMAT,
                                             tdm_dropout_get_pass(mods->pdata[i]));
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
    g_autofree char *config = config_json(cfg);
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
    add_int(d, "samples_per_epoch", epoch_samples(run));
    add_int(d, "global_batch", (gint64)cfg->batch_size * run->env.world_size);
    json_builder_end_object(d);
    g_autofree char *sampler = builder_text(d);
    tdm_safetensors_set_metadata(st, "sampler", sampler);

    g_autofree char *rng = rng_json(run);
    tdm_safetensors_set_metadata(st, "rng", rng);
}

/* Writes the checkpoint of where the run stands. Every rank calls it (the
 * strategy may gather the optimizer state); rank 0 writes. */
static gboolean ckpt_save(TrainCkpt *ck, TrainRun *run, GError **error)
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
        !tdm_checkpoint_prune(cfg->checkpoint_dir, cfg->keep_last, error)) {
        g_prefix_error(error, "train.checkpoint_dir: ");
        return FALSE;
    }
    ck->saved_step = ck->pos.global_step;
    ck->saved_epoch_done = ck->pos.epoch_done;
    if (cfg->progress > 0) {
        g_autofree char *path = tdm_checkpoint_path(cfg->checkpoint_dir, ck->pos.global_step);
        fprintf(stderr, "checkpoint %s (epoch %d, step %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                ")\n", path, ck->pos.epoch + 1, ck->pos.step, run->steps_per_epoch);
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
        return ckpt_save(ck, run, error);
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
                                    const TdmTrainSummary *sum, gboolean evaluated,
                                    GError **error)
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
    if (!ckpt_save(ck, run, error)) {
        return FALSE;
    }
    if (run->leader && !tdm_checkpoint_set_best(ck->cfg->checkpoint_dir, p->global_step, error)) {
        g_prefix_error(error, "train.keep_best: ");
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_train_ckpt_finish(TrainCkpt *ck, TrainRun *run, GError **error)
{
    if (ck->cfg->checkpoint_dir == NULL ||
        (ck->saved_step == ck->pos.global_step && ck->saved_epoch_done == ck->pos.epoch_done)) {
        return TRUE;
    }
    return ckpt_save(ck, run, error);
}

/* ---- resuming ---- */

/* The configuration of the checkpoint is one this run can continue. */
static gboolean check_compatible(TrainCkpt *ck, TrainRun *run, GPtrArray *keep, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    JsonObject *saved = meta_object(ck, "config", keep, error);
    JsonObject *sampler = saved != NULL ? meta_object(ck, "sampler", keep, error) : NULL;
    JsonObject *optim = sampler != NULL ? meta_object(ck, "optimizer", keep, error) : NULL;
    if (optim == NULL) {
        return FALSE;
    }
    g_autofree char *now_cfg = config_json(cfg);
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    json_parser_load_from_data(parser, now_cfg, -1, NULL);
    JsonObject *now = json_node_get_object(json_parser_get_root(parser));
    /* keys that must be equal, as text */
    static const char *const same[] = {"model.name", "model.num_classes", "model.in_channels",
                                       "train.accumulate", "train.seed"};
    for (gsize i = 0; i < G_N_ELEMENTS(same); i++) {
        const char *a = obj_string(saved, same[i]), *b = obj_string(now, same[i]);
        if (g_strcmp0(a, b) != 0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: the checkpoint has %s '%s', this run '%s': it cannot continue it",
                        ck->path, same[i], a != NULL ? a : "(none)", b);
            return FALSE;
        }
    }
    const char *opt_saved = obj_string(optim, "name");
    const char *opt_now = tdm_params_get_name(run->optimizer->hparams);
    if (g_strcmp0(opt_saved, opt_now) != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: the checkpoint's optimizer is '%s', this run's '%s'", ck->path,
                    opt_saved != NULL ? opt_saved : "(none)", opt_now);
        return FALSE;
    }
    const gint64 batch_saved = obj_int(sampler, "global_batch");
    const gint64 batch_now = (gint64)cfg->batch_size * run->env.world_size;
    if (batch_saved != batch_now) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: the checkpoint's global batch is %" G_GINT64_FORMAT
                    " (world size %s x batch size %s), this run's %" G_GINT64_FORMAT
                    " (%d x %d): keep batch size x ranks the same",
                    ck->path, batch_saved, tdm_safetensors_metadata(ck->file, "world_size"),
                    obj_string(saved, "data.batch_size"), batch_now, run->env.world_size,
                    cfg->batch_size);
        return FALSE;
    }
    const gint64 n_saved = obj_int(sampler, "samples_per_epoch"), n_now = epoch_samples(run);
    if (n_saved != n_now) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: the checkpoint's epochs have %" G_GINT64_FORMAT " samples, this run's %"
                    G_GINT64_FORMAT " (another data.dataset or data.limit?)",
                    ck->path, n_saved, n_now);
        return FALSE;
    }
    ck->optim_steps = obj_int(optim, "step_count");
    return TRUE;
}

static gboolean shape_equal(const TdmSafeTensor *t, const TdmParam *p)
{
    gboolean same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) {
        same = t->shape[d] == p->shape[d];
    }
    return same;
}

/* The model's parameters and buffers; every other tensor must be
 * Tandem's own or BN's num_batches_tracked. */
static gboolean restore_weights(TrainCkpt *ck, TdmModel *model, GError **error)
{
    for (guint i = 0; i < tdm_safetensors_count(ck->file); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(ck->file, i);
        if (!g_str_has_prefix(t->name, TDM_CHECKPOINT_PREFIX) &&
            !g_str_has_suffix(t->name, "num_batches_tracked") &&
            tdm_model_find_param(model, t->name) == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                        "%s: tensor '%s' is not a parameter or buffer of this %s model",
                        ck->path, t->name, ck->cfg->model);
            return FALSE;
        }
    }
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = model->params->pdata[i];
        const TdmSafeTensor *t = tdm_safetensors_get(ck->file, p->full_name);
        if (t == NULL || t->dtype != TDM_DTYPE_F32 || !shape_equal(t, p)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "%s: parameter '%s' is %s in the checkpoint, not f32 of this model's "
                        "shape (another model configuration?)",
                        ck->path, p->full_name, t == NULL ? "missing" : "of another shape");
            return FALSE;
        }
        g_autofree gpointer aligned = g_malloc(MAX(t->nbytes, 1));
        memcpy(aligned, t->data, t->nbytes);
        if (!tdm_tensor_write(p->value, aligned, error)) {
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean restore_dropout(TrainCkpt *ck, TdmModel *model, JsonObject *rng, GError **error)
{
    g_autoptr(GPtrArray) mods = g_ptr_array_new();
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    collect_dropouts(model->root, "", mods, names);
    JsonArray *saved = obj_array(rng, "dropout");
    const guint n = saved != NULL ? json_array_get_length(saved) : 0;
    if (n != mods->len) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: the checkpoint has %u Dropout states, the model %u Dropout layers",
                    ck->path, n, mods->len);
        return FALSE;
    }
    for (guint i = 0; i < n; i++) {
        JsonObject *o = json_array_get_object_element(saved, i);
        const char *seed = o != NULL ? obj_string(o, "seed") : NULL;
        const char *pass = o != NULL ? obj_string(o, "pass") : NULL;
        if (seed == NULL || pass == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                        "%s: Dropout state %u of the checkpoint lacks its seed or pass", ck->path,
                        i);
            return FALSE;
        }
        tdm_dropout_set_seed(mods->pdata[i], g_ascii_strtoull(seed, NULL, 10));
        tdm_dropout_set_pass(mods->pdata[i], g_ascii_strtoull(pass, NULL, 10));
    }
    return TRUE;
}

/* The evaluations so far and the best. */
static void restore_metrics(TrainCkpt *ck, JsonObject *trainer)
{
    JsonArray *metrics = obj_array(trainer, "metrics");
    for (guint i = 0; metrics != NULL && i < json_array_get_length(metrics); i++) {
        JsonObject *o = json_array_get_object_element(metrics, i);
        if (o == NULL) {
            continue;
        }
        EvalRecord e = {
            .epoch = (int)obj_int(o, "epoch"),
            .global_step = obj_int(o, "global_step"),
            .train_loss = obj_double(o, "train_loss", 0.0),
            .test_accuracy = obj_double(o, "test_accuracy", -1.0),
            .test_loss = obj_double(o, "test_loss", -1.0),
        };
        g_array_append_val(ck->evals, e);
    }
    JsonNode *best = json_object_get_member(trainer, "best");
    if (best != NULL && JSON_NODE_HOLDS_OBJECT(best)) {
        JsonObject *o = json_node_get_object(best);
        ck->has_best = TRUE;
        ck->best = obj_double(o, "value", 0.0);
        ck->best_step = obj_int(o, "global_step");
    }
}

static gboolean resume(TrainCkpt *ck, TrainRun *run, GError **error)
{
    if ((ck->file = tdm_checkpoint_load(ck->path, error)) == NULL) {
        return FALSE;
    }
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_object_unref);
    JsonObject *trainer = NULL, *sampler = NULL, *rng = NULL;
    if (!check_compatible(ck, run, keep, error) || !restore_weights(ck, run->model, error) ||
        (trainer = meta_object(ck, "trainer", keep, error)) == NULL ||
        (sampler = meta_object(ck, "sampler", keep, error)) == NULL ||
        (rng = meta_object(ck, "rng", keep, error)) == NULL ||
        !restore_dropout(ck, run->model, rng, error)) {
        return FALSE;
    }
    Position *p = &ck->pos;
    p->epoch = (int)obj_int(trainer, "epoch");
    p->step = obj_int(trainer, "step_in_epoch");
    p->epoch_done = json_object_get_boolean_member_with_default(trainer, "epoch_done", FALSE);
    p->global_step = obj_int(trainer, "global_step");
    p->updates = obj_int(trainer, "updates");
    JsonNode *fig_node = json_object_get_member(trainer, "epoch_figures");
    if (fig_node != NULL && JSON_NODE_HOLDS_OBJECT(fig_node)) {
        JsonObject *fig = json_node_get_object(fig_node);
        p->loss_sum = obj_double(fig, "loss_sum", 0.0);
        p->correct = obj_int(fig, "correct");
        p->images = obj_int(fig, "images");
    }
    restore_metrics(ck, trainer);
    TdmSamplerState ss = {.epoch = obj_int(sampler, "epoch"),
                          .consumed = obj_int(sampler, "consumed")};
    if (!tdm_loader_set_state(run->train_loader, &ss, error)) {
        g_prefix_error(error, "%s: ", ck->path);
        return FALSE;
    }
    ck->resume_epoch_pending = !p->epoch_done;
    run->resumed = TRUE;
    ck->saved_step = p->global_step;
    ck->saved_epoch_done = p->epoch_done;
    if (run->leader) {
        fprintf(stderr,
                "resuming from %s: epoch %d, %s%" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                " steps done, global step %" G_GINT64_FORMAT " (saved by %s rank%s)\n",
                ck->path, p->epoch + 1, p->epoch_done ? "all " : "", p->step,
                run->steps_per_epoch, p->global_step,
                tdm_safetensors_metadata(ck->file, "world_size"),
                g_strcmp0(tdm_safetensors_metadata(ck->file, "world_size"), "1") == 0 ? "" : "s");
    }
    return TRUE;
}

/* The checkpoint to resume from: train.resume, or after a restart by
 * `tandem run` the newest in train.checkpoint_dir; NULL for a fresh start. */
static gboolean resume_path(const TrainRun *run, char **path, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    *path = NULL;
    if (cfg->resume != NULL) {
        *path = tdm_checkpoint_find(cfg->resume, error);
        if (*path == NULL) {
            g_prefix_error(error, "train.resume: ");
        }
        return *path != NULL;
    }
    if (cfg->checkpoint_dir == NULL || !g_file_test(cfg->checkpoint_dir, G_FILE_TEST_IS_DIR)) {
        return TRUE;
    }
    g_autofree char *newest = tdm_checkpoint_find(cfg->checkpoint_dir, NULL);
    const char *restart = g_getenv("TDM_RESTART_COUNT");
    if (newest == NULL) {
        return TRUE;
    }
    if (restart != NULL && g_ascii_strtoll(restart, NULL, 10) > 0) {
        *path = g_steal_pointer(&newest);
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                "train.checkpoint_dir %s already holds checkpoints (newest %s): --resume %s "
                "continues from it; to start over, remove them or choose another directory",
                cfg->checkpoint_dir, newest, cfg->checkpoint_dir);
    return FALSE;
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

TrainCkpt *tdm_train_ckpt_new(TrainRun *run, GError **error)
{
    TrainCkpt *ck = g_new0(TrainCkpt, 1);
    ck->cfg = run->cfg;
    ck->evals = g_array_new(FALSE, TRUE, sizeof(EvalRecord));
    ck->saved_step = -1;
    if (!check_keys(run->cfg, error) || !resume_path(run, &ck->path, error) ||
        (ck->path != NULL && !resume(ck, run, error))) {
        tdm_train_ckpt_free(ck);
        return NULL;
    }
    if (ck->path == NULL) {
        ck->saved_step = 0; /* every N steps from the start */
    }
    return ck;
}

gboolean tdm_train_ckpt_restore_optimizer(TrainCkpt *ck, TrainRun *run, GError **error)
{
    if (ck->file == NULL) {
        return TRUE;
    }
    gboolean ok = tdm_strategy_import_optimizer(run->strategy, ck->file,
                                                TDM_CHECKPOINT_OPTIM_PREFIX, ck->path,
                                                ck->optim_steps, error);
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

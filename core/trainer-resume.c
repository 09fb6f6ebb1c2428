/* SPDX-License-Identifier: MIT */
/* core/trainer-resume.c - resuming a training run from a checkpoint.
 *
 * The checkpoint to resume from is train.resume (a file, or the newest of a
 * directory), or in a job `tandem run --max-restarts` restarted
 * (TDM_RESTART_COUNT > 0) the newest of train.checkpoint_dir, so that the
 * launcher need not know the worker's command line. A first start into a
 * directory that already holds checkpoints is refused rather than mixing
 * two runs' files. Every rank reads the file itself (on several machines
 * the directory must be shared). It is refused when it is of another
 * model or a configuration that cannot continue it (classes, channels,
 * optimizer, global batch, accumulation, seed, samples per epoch), the
 * message naming both values; the weights are then checked parameter by
 * parameter and set, as are Dropout's counters, the position in the data
 * (the sampler's global order, whatever the world size) and the trainer's
 * counters and figures. What a checkpoint holds and why that is enough
 * for an exact resume: core/trainer-checkpoint.c.
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "modules/module-private.h"
#include "trainer-checkpoint.h"
#include <tandem/checkpoint.h>

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
    g_autofree char *now_cfg = tdm_train_ckpt_config_json(cfg);
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
    const gint64 n_saved = obj_int(sampler, "samples_per_epoch"),
                 n_now = tdm_train_ckpt_epoch_samples(run);
    if (n_saved != n_now) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: the checkpoint's epochs have %" G_GINT64_FORMAT
                    " samples, this run's %" G_GINT64_FORMAT
                    " (another data.dataset or data.limit?)",
                    ck->path, n_saved, n_now);
        return FALSE;
    }
    ck->optim_steps = obj_int(optim, "step_count");
    return TRUE;
}

static char *shape_text(int ndim, const int64_t *shape)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++) {
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d > 0 ? ", " : "", shape[d]);
    }
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
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
                        "%s: tensor '%s' is not a parameter or buffer of this %s model", ck->path,
                        t->name, ck->cfg->model);
            return FALSE;
        }
    }
    for (guint i = 0; i < model->params->len; i++) {
        TdmParam *p = model->params->pdata[i];
        const TdmSafeTensor *t = tdm_safetensors_get(ck->file, p->full_name);
        if (t == NULL || t->dtype != TDM_DTYPE_F32 || !shape_equal(t, p)) {
            g_autofree char *want = shape_text(p->ndim, p->shape);
            g_autofree char *got = t != NULL ? shape_text(t->ndim, t->shape) : NULL;
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "%s: parameter '%s' has shape %s in this model but %s in the checkpoint "
                        "(another model configuration, such as model.num_classes?)",
                        ck->path, p->full_name, want,
                        t == NULL                   ? "is missing"
                        : t->dtype != TDM_DTYPE_F32 ? "is not f32"
                                                    : got);
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
    tdm_train_ckpt_dropouts(model->root, "", mods, names);
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

gboolean tdm_train_ckpt_resume(TrainCkpt *ck, TrainRun *run, GError **error)
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
                ck->path, p->epoch + 1, p->epoch_done ? "all " : "", p->step, run->steps_per_epoch,
                p->global_step, tdm_safetensors_metadata(ck->file, "world_size"),
                g_strcmp0(tdm_safetensors_metadata(ck->file, "world_size"), "1") == 0 ? "" : "s");
    }
    return TRUE;
}

/* The checkpoint to resume from: train.resume, or after a restart by
 * `tandem run` the newest in train.checkpoint_dir; NULL for a fresh start. */
gboolean tdm_train_ckpt_resume_path(const TrainRun *run, char **path, GError **error)
{
    const TdmTrainConfig *cfg = run->cfg;
    *path = NULL;
    g_autofree char *newest = NULL;
    if (cfg->checkpoint_dir != NULL && g_file_test(cfg->checkpoint_dir, G_FILE_TEST_IS_DIR)) {
        newest = tdm_checkpoint_find(cfg->checkpoint_dir, NULL);
    }
    /* a restart continues from what the failed attempt saved last, even
     * when the first attempt resumed from an older file */
    const char *restart = g_getenv("TDM_RESTART_COUNT");
    if (newest != NULL && restart != NULL && g_ascii_strtoll(restart, NULL, 10) > 0) {
        *path = g_steal_pointer(&newest);
        return TRUE;
    }
    if (cfg->resume != NULL) {
        *path = tdm_checkpoint_find(cfg->resume, error);
        if (*path == NULL) {
            g_prefix_error(error, "train.resume: ");
        }
        return *path != NULL;
    }
    if (newest == NULL) {
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                "train.checkpoint_dir %s already holds checkpoints (newest %s): --resume %s "
                "continues from it; to start over, remove them or choose another directory",
                cfg->checkpoint_dir, newest, cfg->checkpoint_dir);
    return FALSE;
}

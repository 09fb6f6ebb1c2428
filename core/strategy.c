/* SPDX-License-Identifier: MIT */
/* core/strategy.c - the front end of parallel strategies.
 *
 * A strategy (single, dp, ddp, zero1) owns one training step and is a
 * STRATEGY feature found in the registry by name (which checked its class
 * when it was registered). This file only selects it, binds its parameters
 * ("ddp bucket-mb=25", <tandem/params.h>), fills the public TdmStrategy and
 * forwards calls, so the trainer never knows which strategy it drives. It
 * also counts the steps and samples since the last read of the loss
 * statistics, and for a strategy without read_stats (the 1.0 contract)
 * adds up the loss and correct count each step reports, so that
 * tdm_strategy_read_stats() answers alike for both kinds.
 *
 * The helpers a strategy plugin calls (since 1.3) live here too, because
 * the default step keeps its loss state in the strategy's box: forward,
 * loss and backward of one replica, the `single` step, the broadcast and
 * average of the value arena and arena slices.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include <tandem/checkpoint.h>

/* A strategy's device adds its figures up in f32 (TDM_XENT_STATS_*): the
 * correct count is exact below 2^24 and the loss sum keeps about seven
 * digits. Folding them into the core's double sums every 2^16 samples
 * keeps the count exact and the loss sum's rounding that of sums of at most
 * 2^16 samples, however rarely the caller reads, at one wait for the
 * device per 2^16 samples. */
#define STRATEGY_FOLD_SAMPLES ((int64_t)1 << 16)

/* The public strategy and what the core adds up for it; tdm_strategy_new
 * hands out &box->pub. */
typedef struct {
    TdmStrategy pub;
    /* Since the last tdm_strategy_read_stats: count and steps; loss_sum and
     * correct as reported by a strategy without read_stats, or folded in
     * from the device's figures. */
    TdmStepStats pending;
    int64_t unfolded_steps, unfolded_samples; /* added up on the device since its last read */
    /* tdm_strategy_forward_backward's loss: the gradient w.r.t. the logits,
     * the loss op's cache and the statistics it adds up on the device
     * (f32 [TDM_XENT_STATS_LEN]); NULL until its first call. */
    TdmTensor *dlogits, *loss_stats;
    TdmOpCache *loss_cache;
} StrategyBox;

static StrategyBox *strategy_box(TdmStrategy *s)
{
    return (StrategyBox *)s;
}

/* The device's figures into pending: one wait for the device. */
static gboolean strategy_fold(StrategyBox *box, GError **error)
{
    TdmStrategy *s = &box->pub;
    if (box->unfolded_steps == 0) {
        return TRUE; /* the device's figures are zero: no need to wait for it */
    }
    TdmStepStats dev = {0};
    if (s->klass->read_stats != NULL && !s->klass->read_stats(s, &dev, error)) {
        g_prefix_error(error, "%s: reading the loss statistics: ", s->name);
        return FALSE;
    }
    if (box->loss_stats != NULL) {
        /* the count is a whole number in f32, exact below 2^24: folded
         * every 2^16 samples */
        float acc[TDM_XENT_STATS_LEN];
        if (!tdm_tensor_read(box->loss_stats, acc, error) ||
            !tdm_op_fill(box->loss_stats->device, box->loss_stats, 0.0f, error)) {
            g_prefix_error(error, "%s: reading the loss statistics: ", s->name);
            return FALSE;
        }
        dev.loss_sum += acc[TDM_XENT_STATS_LOSS_SUM];
        dev.correct += (int64_t)acc[TDM_XENT_STATS_CORRECT];
    }
    box->pending.loss_sum += dev.loss_sum;
    box->pending.correct += dev.correct;
    box->unfolded_steps = 0;
    box->unfolded_samples = 0;
    return TRUE;
}

/* The parameters of the strategy `name` ("ddp bucket-mb=25"), or the
 * caller's when it bound them itself (transfer full). */
static TdmParams *strategy_params(const char *name, const TdmStrategyOptions *opts,
                                  GError **error)
{
    if (opts != NULL && opts->params != NULL) {
        return tdm_params_ref(opts->params);
    }
    return tdm_params_parse(TDM_FEATURE_STRATEGY, name, error);
}

TdmStrategy *tdm_strategy_new(const char *spec, TdmModel *model, TdmOptimizer *optimizer,
                              const TdmStrategyOptions *opts, GError **error)
{
    g_return_val_if_fail(model != NULL && optimizer != NULL, NULL);
    if (spec == NULL || spec[0] == '\0') {
        spec = "single";
    }
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    g_autoptr(TdmParams) params = strategy_params(spec, opts, error);
    if (params == NULL) {
        return NULL;
    }
    const char *name = tdm_params_get_name(params);
    TdmFeature *feature = tdm_registry_find(TDM_FEATURE_STRATEGY, name, error);
    if (feature == NULL) {
        return NULL;
    }
    const char *reason = NULL;
    if (!tdm_feature_is_available(feature, &reason)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE, "strategy '%s' is unavailable: %s",
                    name, reason ? reason : "no reason given");
        return NULL;
    }
    const TdmStrategyClass *klass = tdm_feature_get_class(feature);
    StrategyBox *box = g_new0(StrategyBox, 1);
    TdmStrategy *s = &box->pub;
    s->klass = klass;
    s->name = g_strdup(name);
    s->model = model;
    s->optimizer = optimizer;
    s->params = g_steal_pointer(&params);
    if (opts != NULL) {
        s->opts = *opts;
    }
    s->opts.params = s->params;
    if (s->opts.accumulate < 1) {
        s->opts.accumulate = 1;
    }
    if (klass->setup != NULL && !klass->setup(s, error)) {
        /* setup failed: nothing of the strategy's to tear down. */
        tdm_params_unref(s->params);
        g_free(s->name);
        g_free(box);
        return NULL;
    }
    return s;
}

gboolean tdm_strategy_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                 TdmStepResult *result, GError **error)
{
    g_return_val_if_fail(s != NULL && batch != NULL, FALSE);
    TdmStepResult local = {0};
    TdmStepResult *r = result != NULL ? result : &local;
    if (!s->klass->train_step(s, batch, do_update, r, error)) {
        return FALSE;
    }
    StrategyBox *box = strategy_box(s);
    box->pending.steps++;
    box->pending.count += r->count;
    if (s->klass->read_stats == NULL) {
        box->pending.loss_sum += (double)r->loss * (double)r->count;
        box->pending.correct += r->correct;
        if (box->loss_stats == NULL) {
            return TRUE; /* nothing on the device */
        }
    }
    box->unfolded_steps++;
    box->unfolded_samples += r->count;
    return box->unfolded_samples < STRATEGY_FOLD_SAMPLES || strategy_fold(box, error);
}

gboolean tdm_strategy_read_stats(TdmStrategy *s, TdmStepStats *stats, GError **error)
{
    g_return_val_if_fail(s != NULL && stats != NULL, FALSE);
    StrategyBox *box = strategy_box(s);
    if ((s->klass->read_stats != NULL || box->loss_stats != NULL) && !strategy_fold(box, error)) {
        return FALSE;
    }
    *stats = box->pending;
    memset(&box->pending, 0, sizeof(box->pending));
    return TRUE;
}

gboolean tdm_strategy_owns_optimizer_state(const TdmStrategy *s)
{
    g_return_val_if_fail(s != NULL, FALSE);
    /* a class of 1.1 has reserved slots where these are: never read them */
    return TDM_IFACE_VERSION_MINOR(s->klass->iface_version) >= 2 &&
           s->klass->export_optimizer != NULL && s->klass->import_optimizer != NULL;
}

gboolean tdm_strategy_export_optimizer(TdmStrategy *s, TdmSafeTensors *out, const char *prefix,
                                       int64_t *step_count, GError **error)
{
    g_return_val_if_fail(s != NULL && out != NULL && prefix != NULL && step_count != NULL, FALSE);
    if (tdm_strategy_owns_optimizer_state(s)) {
        if (!s->klass->export_optimizer(s, out, prefix, step_count, error)) {
            g_prefix_error(error, "%s: saving the optimizer state: ", s->name);
            return FALSE;
        }
        return TRUE;
    }
    *step_count = s->optimizer->step_count;
    return tdm_optimizer_export_state(s->optimizer, out, prefix, error);
}

gboolean tdm_strategy_import_optimizer(TdmStrategy *s, const TdmSafeTensors *in,
                                       const char *prefix, const char *path, int64_t step_count,
                                       GError **error)
{
    g_return_val_if_fail(s != NULL && in != NULL && prefix != NULL && path != NULL, FALSE);
    if (tdm_strategy_owns_optimizer_state(s)) {
        if (!s->klass->import_optimizer(s, in, prefix, path, step_count, error)) {
            g_prefix_error(error, "%s: restoring the optimizer state: ", s->name);
            return FALSE;
        }
        return TRUE;
    }
    if (!tdm_optimizer_import_state(s->optimizer, in, prefix, path, error)) {
        return FALSE;
    }
    s->optimizer->step_count = step_count;
    return TRUE;
}

void tdm_strategy_free(TdmStrategy *s)
{
    if (s == NULL) {
        return;
    }
    if (s->klass->teardown != NULL) {
        s->klass->teardown(s);
    }
    StrategyBox *box = strategy_box(s);
    if (box->dlogits != NULL) {
        tdm_op_cache_clear(box->dlogits->device, &box->loss_cache);
    }
    g_clear_pointer(&box->dlogits, tdm_tensor_unref);
    g_clear_pointer(&box->loss_stats, tdm_tensor_unref);
    tdm_params_unref(s->params);
    g_free(s->name);
    g_free(strategy_box(s));
}

gboolean tdm_strategy_has_end(const TdmStrategy *s)
{
    /* a class of 1.2 or older has a reserved slot where end is */
    return TDM_IFACE_VERSION_MINOR(s->klass->iface_version) >= 3 && s->klass->end != NULL;
}

gboolean tdm_strategy_end(TdmStrategy *s, TdmStrategyEnd what, int epoch, GError **error)
{
    g_return_val_if_fail(s != NULL, FALSE);
    if (!tdm_strategy_has_end(s)) {
        return TRUE;
    }
    if (!s->klass->end(s, what, epoch, error)) {
        g_prefix_error(error, "%s: at the end of %s: ", s->name,
                       what == TDM_STRATEGY_END_EPOCH ? "an epoch" : "training");
        return FALSE;
    }
    return TRUE;
}

/* ---- helpers for strategy plugins ---------------------------------------- */

gboolean tdm_strategy_forward_backward(TdmStrategy *s, TdmBatch *batch, GError **error)
{
    g_return_val_if_fail(s != NULL && batch != NULL, FALSE);
    StrategyBox *box = strategy_box(s);
    TdmModel *model = s->model;
    TdmDevice *dev = model->device;
    if (box->loss_stats == NULL) {
        int64_t shape[1] = {TDM_XENT_STATS_LEN};
        TdmTensor *stats = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, shape, error);
        if (stats == NULL || !tdm_op_fill(dev, stats, 0.0f, error)) {
            g_clear_pointer(&stats, tdm_tensor_unref);
            return FALSE;
        }
        box->dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
        box->loss_stats = stats;
    }
    TdmTensor *logits = NULL;
    const float scale = 1.0f / (float)s->opts.accumulate;
    if (!tdm_model_forward(model, batch->images, &logits, error) ||
        !tdm_op_softmax_xent_stats(dev, &box->loss_cache, logits, batch->labels,
                                   s->opts.label_smoothing, box->dlogits, box->loss_stats,
                                   error)) {
        return FALSE;
    }
    if (scale != 1.0f && !tdm_op_scale(dev, box->dlogits, scale, error)) {
        return FALSE;
    }
    return tdm_model_backward(model, box->dlogits, error);
}

gboolean tdm_strategy_default_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                   TdmStepResult *result, GError **error)
{
    g_return_val_if_fail(s != NULL && batch != NULL && result != NULL, FALSE);
    if (!tdm_strategy_forward_backward(s, batch, error)) {
        return FALSE;
    }
    /* The gradients are zeroed right after the step, so the step may zero
     * them as it reads them. */
    if (do_update && !tdm_optimizer_step_zero_grad(s->optimizer, s->model, error)) {
        return FALSE;
    }
    result->count = batch->size;
    return TRUE;
}

TdmComm *tdm_strategy_get_comm(TdmStrategy *s, GError **error)
{
    g_return_val_if_fail(s != NULL, NULL);
    if (s->opts.comm == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s needs a communicator (TdmStrategyOptions.comm): start the job with "
                    "`tandem run`, mpirun or srun, or create one with tdm_comm_new()",
                    s->name);
    }
    return s->opts.comm;
}

TdmTensor *tdm_arena_slice(TdmTensor *arena, size_t start, size_t count, GError **error)
{
    g_return_val_if_fail(arena != NULL, NULL);
    int64_t shape[1] = {(int64_t)count};
    return tdm_tensor_new_view(arena, start * sizeof(float), TDM_DTYPE_F32, 1, shape, error);
}

size_t tdm_model_first_buffer(const TdmModel *model)
{
    g_return_val_if_fail(model != NULL, 0);
    for (guint i = 0; i < model->params->len; i++) {
        const TdmParam *p = g_ptr_array_index(model->params, i);
        if (p->is_buffer) {
            return p->arena_offset / sizeof(float);
        }
    }
    return model->n_values;
}

/* The whole value arena through one collective: `root` >= 0 broadcasts
 * from it, -1 averages. */
static gboolean strategy_values_collective(TdmStrategy *s, int root, GError **error)
{
    TdmComm *comm = s->opts.comm;
    TdmModel *model = s->model;
    if (comm == NULL || comm->world == 1 || model->n_values == 0) {
        return TRUE;
    }
    TdmTensor *all = tdm_arena_slice(model->value_arena, 0, model->n_values, error);
    gboolean ok = all != NULL && (root >= 0 ? tdm_comm_broadcast(comm, all, root, error)
                                            : tdm_comm_allreduce(comm, all, TDM_REDUCE_AVG, error));
    if (all != NULL) {
        tdm_tensor_unref(all);
    }
    if (!ok && root >= 0) {
        g_prefix_error(error, "%s: broadcasting the parameters from rank %d: ", s->name, root);
    } else if (!ok) {
        g_prefix_error(error, "%s: averaging the parameters over %d ranks: ", s->name,
                       comm->world);
    }
    return ok;
}

gboolean tdm_strategy_broadcast_values(TdmStrategy *s, int root, GError **error)
{
    g_return_val_if_fail(s != NULL && root >= 0, FALSE);
    return strategy_values_collective(s, root, error);
}

gboolean tdm_strategy_average_values(TdmStrategy *s, GError **error)
{
    g_return_val_if_fail(s != NULL, FALSE);
    return strategy_values_collective(s, -1, error);
}

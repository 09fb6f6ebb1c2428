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
    if (!s->klass->read_stats(s, &dev, error)) {
        g_prefix_error(error, "%s: reading the loss statistics: ", s->name);
        return FALSE;
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
        return TRUE;
    }
    box->unfolded_steps++;
    box->unfolded_samples += r->count;
    return box->unfolded_samples < STRATEGY_FOLD_SAMPLES || strategy_fold(box, error);
}

gboolean tdm_strategy_read_stats(TdmStrategy *s, TdmStepStats *stats, GError **error)
{
    g_return_val_if_fail(s != NULL && stats != NULL, FALSE);
    StrategyBox *box = strategy_box(s);
    if (s->klass->read_stats != NULL && !strategy_fold(box, error)) {
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
    tdm_params_unref(s->params);
    g_free(s->name);
    g_free(strategy_box(s));
}

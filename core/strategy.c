/* core/strategy.c - the front end of parallel strategies.
 *
 * A strategy (single, dp, ddp, zero1) owns one training step and is a
 * STRATEGY feature found in the registry by name (which checked its class
 * when it was registered). This file only selects it, binds its parameters
 * ("ddp bucket-mb=25", <tandem/params.h>), fills the public TdmStrategy and
 * forwards calls, so the trainer never knows which strategy it drives.
 */
#include "config.h"

#include "internal.h"

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
    TdmStrategy *s = g_new0(TdmStrategy, 1);
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
        g_free(s);
        return NULL;
    }
    return s;
}

gboolean tdm_strategy_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                 TdmStepResult *result, GError **error)
{
    g_return_val_if_fail(s != NULL && batch != NULL, FALSE);
    TdmStepResult local = {0};
    return s->klass->train_step(s, batch, do_update, result ? result : &local, error);
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
    g_free(s);
}

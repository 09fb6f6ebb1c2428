/* core/strategy.c - the front end of parallel strategies.
 *
 * A strategy (single, dp, ddp, zero1) owns one training step and is a
 * STRATEGY feature found in the registry by name (which checked its class
 * when it was registered). This file only selects it, fills the public
 * TdmStrategy and forwards calls, so the trainer never knows which strategy
 * it drives.
 */
#include "config.h"

#include "internal.h"

TdmStrategy *tdm_strategy_new(const char *name, TdmModel *model, TdmOptimizer *optimizer,
                              const TdmStrategyOptions *opts, GError **error)
{
    g_return_val_if_fail(model != NULL && optimizer != NULL, NULL);
    if (name == NULL || name[0] == '\0') {
        name = "single";
    }
    if (!tdm_registry_init(error)) {
        return NULL;
    }
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
    if (opts != NULL) {
        s->opts = *opts;
    }
    if (s->opts.accumulate < 1) {
        s->opts.accumulate = 1;
    }
    if (klass->setup != NULL && !klass->setup(s, error)) {
        /* setup failed: nothing of the strategy's to tear down. */
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
    g_free(s->name);
    g_free(s);
}

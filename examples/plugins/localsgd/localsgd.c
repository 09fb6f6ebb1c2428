/* SPDX-License-Identifier: MIT */
/* localsgd.c - a strategy plugin: Local SGD. Each rank runs the default
 * step (forward, loss, backward, optimizer step) on its own batches with no
 * communication; every `sync-every` optimizer updates, and at the end of
 * each epoch and of training, the ranks' parameters and buffers are
 * averaged, so every rank holds the same model when Tandem evaluates or
 * saves it. With sync-every=1 it trains as ddp does (up to rounding). */
#include <tandem/tandem.h>

typedef struct {
    int64_t sync_every; /* optimizer updates between two averages */
    int64_t updates;    /* optimizer updates since the last average */
    gboolean dirty;     /* a step ran since the last average */
} LocalSgd;

static gboolean localsgd_setup(TdmStrategy *s, GError **error)
{
    /* Every rank starts from rank 0's weights. */
    if (tdm_strategy_get_comm(s, error) == NULL || !tdm_strategy_broadcast_values(s, 0, error)) {
        return FALSE;
    }
    LocalSgd *priv = g_new0(LocalSgd, 1);
    priv->sync_every = tdm_params_get_int(s->params, "sync-every");
    s->priv = priv;
    g_debug("localsgd: %" G_GINT64_FORMAT " steps, an average every %" G_GINT64_FORMAT
            " updates", s->opts.total_steps, priv->sync_every);
    tdm_model_set_training(s->model, TRUE);
    return TRUE;
}

static gboolean localsgd_sync(TdmStrategy *s, LocalSgd *priv, GError **error)
{
    priv->updates = 0;
    priv->dirty = FALSE;
    return tdm_strategy_average_values(s, error);
}

static gboolean localsgd_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                    TdmStepResult *result, GError **error)
{
    LocalSgd *priv = s->priv;
    if (!tdm_strategy_default_step(s, batch, do_update, result, error)) {
        return FALSE;
    }
    priv->dirty = TRUE;
    if (do_update && ++priv->updates == priv->sync_every) {
        return localsgd_sync(s, priv, error);
    }
    return TRUE;
}

/* Before Tandem evaluates or saves: the ranks' models become one. */
static gboolean localsgd_end(TdmStrategy *s, TdmStrategyEnd what G_GNUC_UNUSED,
                             int epoch G_GNUC_UNUSED, GError **error)
{
    LocalSgd *priv = s->priv;
    return !priv->dirty || localsgd_sync(s, priv, error);
}

static void localsgd_teardown(TdmStrategy *s)
{
    g_free(s->priv);
    s->priv = NULL;
}

static const TdmStrategyClass localsgd_class = {
    TDM_CLASS_HEADER(TDM_STRATEGY_IFACE_VERSION, TdmStrategyClass),
    .setup = localsgd_setup,
    .train_step = localsgd_train_step,
    .teardown = localsgd_teardown,
    .end = localsgd_end,
};

static const TdmParamSpec localsgd_params[] = {
    TDM_PARAM_SPEC_INT("sync-every", TDM_PARAM_POSITIONAL, "8", 1, 1000000,
                       "optimizer updates between two averages of the parameters"),
    TDM_PARAM_SPEC_END,
};

TDM_PLUGIN_INIT_FEATURE(localsgd_init, TDM_FEATURE_STRATEGY, "localsgd", 50, &localsgd_class,
                        "Local SGD: ranks step alone, parameters averaged every K updates",
                        localsgd_params, NULL)

TDM_PLUGIN_DEFINE(localsgd, "MIT", "Local SGD training strategy", "examples/plugins/localsgd",
                  localsgd_init)

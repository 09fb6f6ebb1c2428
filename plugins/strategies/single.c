/* plugins/strategies/single.c - the one-device strategy.
 *
 * One training step on the model's own device: forward, softmax
 * cross-entropy (its fused gradient goes into a slot kept across steps),
 * backward, and when the caller says so the optimizer step followed by
 * zeroing the gradients. With gradient accumulation the loss gradient is
 * scaled by 1/accumulate so that the accumulated gradient is the mean over
 * all micro-batches, as with one large batch. The loss and the right
 * predictions are added up on the device and read when the trainer asks.
 */
#include "strategies-util.h"

typedef struct {
    SuLoss loss;
} SinglePriv;

static gboolean single_setup(TdmStrategy *s, GError **error)
{
    SinglePriv *priv = g_new0(SinglePriv, 1);
    if (!su_loss_init(&priv->loss, s->model->device, error)) {
        su_loss_clear(&priv->loss);
        g_free(priv);
        return FALSE;
    }
    s->priv = priv;
    tdm_model_set_training(s->model, TRUE);
    return TRUE;
}

static gboolean single_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                  TdmStepResult *result, GError **error)
{
    SinglePriv *priv = s->priv;
    TdmModel *model = s->model;

    if (!su_forward_backward_batch(s, &priv->loss, batch, error)) {
        return FALSE;
    }
    /* The gradients are zeroed right after the step, so the step may zero
     * them as it reads them. */
    if (do_update && !tdm_optimizer_step_zero_grad(s->optimizer, model, error)) {
        return FALSE;
    }
    result->count = batch->size;
    return TRUE;
}

static gboolean single_read_stats(TdmStrategy *s, TdmStepStats *stats, GError **error)
{
    SinglePriv *priv = s->priv;
    return su_stats_take(priv->loss.stats, stats, error);
}

static void single_teardown(TdmStrategy *s)
{
    SinglePriv *priv = s->priv;
    if (priv == NULL) {
        return;
    }
    su_loss_clear(&priv->loss);
    g_free(priv);
    s->priv = NULL;
}

static const TdmStrategyClass single_class = SU_STRATEGY_CLASS(single);

TDM_PLUGIN_INIT_FEATURE(single_init, TDM_FEATURE_STRATEGY, "single", 50, &single_class,
                        "one device: forward, loss, backward, optimizer step", NULL, NULL)

TDM_PLUGIN_DEFINE(single, "MIT", "Single-device training strategy", "tandem",
                  single_init)

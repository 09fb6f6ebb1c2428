/* plugins/strategies/single.c - the one-device strategy.
 *
 * One training step on the model's own device: forward, softmax
 * cross-entropy (its fused gradient goes into a slot kept across steps),
 * backward, and when the caller says so the optimizer step followed by
 * zeroing the gradients. With gradient accumulation the loss gradient is
 * scaled by 1/accumulate so that the accumulated gradient is the mean over
 * all micro-batches, as with one large batch.
 */
#include <tandem/ops.h>
#include <tandem/plugin.h>
#include <tandem/strategy.h>

typedef struct {
    TdmTensor *dlogits; /* gradient of the loss w.r.t. the logits (slot) */
    TdmOpCache *loss_cache;
} SinglePriv;

static gboolean single_setup(TdmStrategy *s, GError **error)
{
    SinglePriv *priv = g_new0(SinglePriv, 1);
    priv->dlogits = tdm_tensor_new_empty(s->model->device, TDM_DTYPE_F32);
    s->priv = priv;
    tdm_model_set_training(s->model, TRUE);
    return TRUE;
}

static gboolean single_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                  TdmStepResult *result, GError **error)
{
    SinglePriv *priv = s->priv;
    TdmModel *model = s->model;
    TdmDevice *dev = model->device;
    TdmTensor *logits = NULL;
    float loss = 0.0f;
    int64_t correct = 0;

    if (!tdm_model_forward(model, batch->images, &logits, error) ||
        !tdm_cross_entropy(dev, &priv->loss_cache, logits, batch->labels,
                           s->opts.label_smoothing, &loss, priv->dlogits, &correct, error)) {
        return FALSE;
    }
    if (s->opts.accumulate > 1 &&
        !tdm_op_scale(dev, priv->dlogits, 1.0f / (float)s->opts.accumulate, error)) {
        return FALSE;
    }
    if (!tdm_model_backward(model, priv->dlogits, error)) {
        return FALSE;
    }
    /* The gradients are zeroed right after the step, so the step may zero
     * them as it reads them. */
    if (do_update && !tdm_optimizer_step_zero_grad(s->optimizer, model, error)) {
        return FALSE;
    }
    result->loss = loss;
    result->correct = correct;
    result->count = batch->size;
    return TRUE;
}

static void single_teardown(TdmStrategy *s)
{
    SinglePriv *priv = s->priv;
    if (priv == NULL) {
        return;
    }
    tdm_op_cache_clear(s->model->device, &priv->loss_cache);
    g_clear_pointer(&priv->dlogits, tdm_tensor_unref);
    g_free(priv);
    s->priv = NULL;
}

static const TdmStrategyClass single_class = {
    .iface_version = TDM_STRATEGY_IFACE_VERSION,
    .struct_size = sizeof(TdmStrategyClass),
    .setup = single_setup,
    .train_step = single_train_step,
    .teardown = single_teardown,
};

static gboolean single_init(TdmPlugin *plugin, GError **error)
{
    return tdm_plugin_add_feature(plugin, TDM_FEATURE_STRATEGY, "single", 50, &single_class,
                                  "one device: forward, loss, backward, optimizer step", NULL,
                                  NULL, error) != NULL;
}

TDM_PLUGIN_DEFINE(single, "single", "0.1", "MIT", "Single-device training strategy", "tandem",
                  single_init)

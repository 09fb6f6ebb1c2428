/* SPDX-License-Identifier: MIT */
/* plugins/strategies/single.c - the one-device strategy.
 *
 * One training step on the model's own device: forward, softmax
 * cross-entropy, backward, and when the caller says so the optimizer step
 * followed by zeroing the gradients. That is the core's default step
 * (tdm_strategy_default_step, <tandem/strategy.h>), which third-party
 * strategies build on too: with gradient accumulation it scales the loss
 * gradient by 1/accumulate so that the accumulated gradient is the mean
 * over all micro-batches, as with one large batch, and it adds the loss
 * and the right predictions up on the device for the trainer to read.
 */
#include <tandem/plugin.h>
#include <tandem/strategy.h>

static gboolean single_setup(TdmStrategy *s, GError **error)
{
    tdm_model_set_training(s->model, TRUE);
    return TRUE;
}

static const TdmStrategyClass single_class = {
    TDM_CLASS_HEADER(TDM_STRATEGY_IFACE_VERSION, TdmStrategyClass),
    .setup = single_setup,
    .train_step = tdm_strategy_default_step,
};

TDM_PLUGIN_INIT_FEATURE(single_init, TDM_FEATURE_STRATEGY, "single", 50, &single_class,
                        "one device: forward, loss, backward, optimizer step", NULL, NULL)

TDM_PLUGIN_DEFINE(single, "MIT", "Single-device training strategy", "tandem",
                  single_init)

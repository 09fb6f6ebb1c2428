/* SPDX-License-Identifier: MIT */
/**
 * SECTION:strategy
 * @title: Strategies
 * @short_description: parallel strategies: who owns one training step
 * @include: tandem/tandem.h
 *
 * A strategy is a feature of kind TDM_FEATURE_STRATEGY whose class is a
 * TdmStrategyClass. The trainer hands it the model, the optimizer and a batch;
 * the strategy runs forward, loss, backward, gradient communication and the
 * optimizer step. `single` runs it on one device; `dp`, `ddp` and `zero1`
 * (other plugins) split the work over devices or processes.
 *
 * Loss statistics: a step's loss and right predictions are figures on the
 * device. A strategy with read_stats adds them up there (with
 * tdm_op_softmax_xent_stats) and hands them over only when the trainer
 * asks, once per logging interval, so that an accelerator never waits for
 * the host between steps. A strategy without it (the 1.0 contract) reports
 * each step's figures in TdmStepResult, and the core adds them up.
 * Callers read both kinds the same way, with tdm_strategy_read_stats().
 *
 * The optimizer step: a strategy calls tdm_optimizer_step (or
 * tdm_optimizer_step_zero_grad) on gradients that are final, i.e. already
 * averaged across ranks and devices. What the optimizer does before it
 * updates, gradient clipping (TdmOptimizerOptions.max_grad_norm: the total
 * norm over all trainable gradients, as PyTorch's clip_grad_norm_), then
 * needs nothing from the strategy: where every rank's optimizer holds all
 * the averaged gradients (single, dp, ddp) each rank computes the same
 * norm. A strategy whose ranks each hold a disjoint share of them (a ZeRO
 * shard) gives that optimizer its communicator with
 * tdm_optimizer_set_grad_norm_comm, so that the shares' squared norms are
 * summed over the ranks, and has every rank call the step, also one with
 * an empty share. Such a strategy also keeps the trainer's learning-rate
 * groups: tdm_optimizer_share_lr_groups, and each slice it hands its own
 * optimizer lies in one group (tdm_optimizer_set_param_lr_group).
 * s->optimizer->opts are the user's settings (--clip-grad-norm is
 * opts.max_grad_norm): a strategy reads them and never changes them. One
 * that clips by a rule of its own scales the final gradients itself
 * (tdm_op_sum_squares, tdm_op_scale) before the step; --clip-grad-norm,
 * when given, then still clips inside the step, after it.
 *
 * THE RULES A STRATEGY FOLLOWS (docs/plugins/strategy.md explains them
 * with a complete Local SGD strategy):
 *
 * - One train_step is one micro-batch. Its gradients are the gradient of
 *   the batch's mean loss scaled by 1/opts.accumulate, added into the grad
 *   arena, so that after `accumulate` steps the arena holds the mean over
 *   all of them, as one large batch would. When do_update is TRUE the step
 *   ends with the optimizer step and zeroed gradients; when FALSE it must
 *   leave the gradients in place. tdm_strategy_forward_backward() and
 *   tdm_strategy_default_step() do all of this for one device.
 * - Across ranks the optimizer steps on gradients averaged (not summed)
 *   over the ranks, or, as Local SGD does, each rank steps alone and the
 *   strategy brings the ranks' parameters together itself; whatever it
 *   does, every rank must hold the same parameters and buffers when the
 *   core evaluates or saves (after the end hook, below).
 * - Every strategy but `single` and `dp` is given a communicator
 *   (opts.comm), also in a job of one process: the core opens one for any
 *   other strategy name. Every rank calls setup, each train_step, end and
 *   the exporters in the same order, so collectives match up; a strategy
 *   must not skip a collective on some ranks (a rank without data for a
 *   step still takes part).
 * - Only rank 0 evaluates, logs and writes --save and checkpoints (every
 *   rank writes --save when its path has "{rank}"); the other ranks wait
 *   at a barrier. `tandem check-plugin` checks on 2 ranks that they end
 *   alike. A strategy writes no files and prints
 *   nothing but g_debug/g_warning.
 * - setup runs once, after the model's weights are loaded (from --init or
 *   a checkpoint) and before the first step: broadcast rank 0's parameters
 *   there (tdm_strategy_broadcast_values) so that all ranks start alike.
 *   Read the strategy's parameters there (s->params, <tandem/params.h>):
 *   they come from "--strategy 'name key=value'", `--set strategy.key=value`
 *   or a config file's [strategy] section, already checked against the
 *   specs the plugin registered. s->opts.total_steps and steps_per_epoch
 *   say how long the run is (0 when the caller did not say).
 * - end (since 1.3) is called on every rank after the last step of each
 *   epoch (before the evaluation and the epoch's checkpoint) and once after
 *   the last step of training (before the final checkpoint and --save).
 *   It may run collectives and change the parameters and buffers; it must
 *   not step the optimizer or touch the gradients. A strategy that
 *   synchronises every K steps synchronises there. A checkpoint taken
 *   every N steps (train.checkpoint_every) is rank 0's model as it stands.
 * - Threading: the core calls a strategy from one thread, the one that
 *   runs the training loop, never two calls at once. Data loader threads
 *   never see it. A strategy may use async collectives
 *   (tdm_comm_*_async) but must wait for each before the call that
 *   started it returns control of the data it touches, and before end,
 *   the exporters and teardown return.
 * - teardown must free what setup made, also after a failed step; it may
 *   not run collectives (another rank may have failed).
 * - Errors: a GError naming the strategy and what failed ("localsgd:
 *   averaging the parameters: ..."); the job then stops on every rank.
 */
#ifndef TANDEM_STRATEGY_H
#define TANDEM_STRATEGY_H

#include <tandem/optim.h>
#include <tandem/data.h>
#include <tandem/io.h>
#include <tandem/params.h>

G_BEGIN_DECLS

/**
 * TDM_STRATEGY_IFACE_VERSION:
 *
 * The interface version of #TdmStrategyClass this header describes (see
 * TDM_IFACE_VERSION()): a strategy puts it in iface_version.
 */
/* 1.1 gave reserved slots a meaning: params in TdmStrategy and
 * TdmStrategyOptions (a strategy that reads it needs a core that fills
 * it) and read_stats in the class (see `since 1.1`). 1.2 gave two more
 * class slots one: export_optimizer and import_optimizer, for checkpoints
 * (see `since 1.2`); the core calls them only in a class of 1.2 or later.
 * 1.3 gave the last reserved class slot a meaning: end, the hook at the
 * end of an epoch and of training; and two reserved slots of
 * TdmStrategyOptions: total_steps and steps_per_epoch. The core calls end
 * only in a class of 1.3 or later, so strategies built against older
 * headers keep loading and working. */
#define TDM_STRATEGY_IFACE_VERSION TDM_IFACE_VERSION(1, 3)

/**
 * TdmStrategyOptions:
 * @label_smoothing: the cross-entropy's label smoothing
 * @accumulate: micro-batches per optimizer step (1; below 1 counts as 1)
 * @devices: (element-type TdmDevice) (nullable): the devices, for dp; NULL:
 *   the model's device
 * @comm: (nullable): the collective communicator (distributed strategies;
 *   transfer none: it outlives the strategy)
 * @params: (nullable): since 1.1: the strategy's parameters bound to its
 *   specs (transfer none); NULL: tdm_strategy_new() binds those of its name
 * @total_steps: since 1.3: the train_step calls (micro-batches) of the
 *   whole run on this rank, from its first step (also when resumed from a
 *   checkpoint): epochs x @steps_per_epoch, or train.max_steps when that
 *   is fewer; 0: unknown (a caller that does not run the trainer)
 * @steps_per_epoch: since 1.3: the train_step calls of one epoch; 0:
 *   unknown
 * @reserved: zero
 *
 * What the trainer gives a strategy besides the model and the optimizer.
 */
typedef struct {
    float label_smoothing;
    int accumulate;       /* micro-batches per optimizer step (1) */
    GPtrArray *devices;   /* TdmDevice * for dp; NULL = the model's device */
    TdmComm *comm;        /* collective communicator (distributed strategies;
                           * transfer none: outlives the strategy) */
    /* since 1.1: params */
    /* The strategy's parameters bound to its specs (transfer none; NULL:
     * tdm_strategy_new() binds those of its `name`). */
    TdmParams *params;
    /* since 1.3: total_steps, steps_per_epoch */
    /* The train_step calls (micro-batches) of the whole run on this rank,
     * from its first step (also when resumed from a checkpoint): epochs x
     * steps_per_epoch, or train.max_steps when that is fewer; and those of
     * one epoch. 0: unknown (a caller that does not run the trainer). */
    int64_t total_steps;
    int64_t steps_per_epoch;
    gpointer reserved[5];
} TdmStrategyOptions;

/**
 * TdmStrategyEnd:
 * @TDM_STRATEGY_END_EPOCH: after an epoch's last step, before its
 *   evaluation and checkpoint
 * @TDM_STRATEGY_END_TRAINING: after the run's last step, before the final
 *   evaluation, checkpoint and --save (in the last epoch: right after its
 *   %TDM_STRATEGY_END_EPOCH call)
 *
 * Where tdm_strategy_end() is called (the class's end slot). The last
 * epoch gets both calls, EPOCH then TRAINING, both before its evaluation,
 * so that the accuracy reported is that of the weights saved. A run that
 * stops early gets TRAINING after its last evaluation; the trainer then
 * evaluates again when the strategy has an end hook.
 */
typedef enum {
    TDM_STRATEGY_END_EPOCH = 0, /* after an epoch's last step, before its evaluation */
    TDM_STRATEGY_END_TRAINING,  /* after the run's last step, before the final evaluation */
} TdmStrategyEnd;

/**
 * TdmStepResult:
 * @loss: the batch's mean loss (strategies without read_stats)
 * @correct: right predictions in the batch (the same)
 * @count: samples in the batch: always filled
 * @comm_wait_s: time the step waited on communication
 * @reserved: zero
 *
 * What a step reports at once. @loss and @correct are filled only by a
 * strategy without read_stats; one with it leaves them 0 (its figures stay
 * on the device until tdm_strategy_read_stats()).
 */
typedef struct {
    float loss;           /* mean loss of the batch (strategies without read_stats) */
    int64_t correct;      /* right predictions in the batch (the same) */
    int64_t count;        /* samples in the batch: always filled */
    double comm_wait_s;   /* time the step waited on communication */
    gpointer reserved[1];
} TdmStepResult;

/**
 * TdmStepStats:
 * @loss_sum: the samples' losses added up: @loss_sum / @count is their mean
 * @correct: samples whose first argmax is the label
 * @count: samples (#TdmStepResult's count added up)
 * @steps: train steps
 * @reserved: zero
 *
 * The loss statistics of the steps since the last read (this process's
 * share of each batch).
 */
typedef struct {
    double loss_sum;  /* the samples' losses added up: loss_sum / count is their mean */
    int64_t correct;  /* samples whose first argmax is the label */
    int64_t count;    /* samples (TdmStepResult.count added up) */
    int64_t steps;    /* train steps */
    gpointer reserved[2];
} TdmStepStats;

/**
 * TdmStrategyClass:
 * @iface_version: %TDM_STRATEGY_IFACE_VERSION
 * @struct_size: sizeof(TdmStrategyClass)
 * @setup: called once by tdm_strategy_new(), after the model's weights are
 *   loaded and before the first step: read s->params, set s->priv,
 *   broadcast rank 0's parameters (tdm_strategy_broadcast_values()); FALSE
 *   with the error set makes tdm_strategy_new() fail without a teardown
 *   call, so setup frees what it made before it fails (optional: NULL
 *   means there is nothing to set up)
 * @train_step: one micro-batch on @batch: forward, loss, backward (the
 *   gradient of the mean loss scaled by 1/accumulate, added into the grad
 *   arena), reduction and, when @do_update, the optimizer step and zeroed
 *   gradients; fills @result (count always; loss and correct only without
 *   @read_stats). tdm_strategy_default_step() is what `single` does
 * @teardown: frees what setup made, also after a failed step; runs no
 *   collectives (optional: NULL means there is nothing to tear down)
 * @read_stats: sets stats->loss_sum and stats->correct to the figures of
 *   the steps since the last call (or since setup), this process's, and
 *   starts from zero again; the core fills count and steps (since 1.1;
 *   optional: NULL means each train_step reports its batch's loss and
 *   correct count in #TdmStepResult and the core adds them up, which on an
 *   accelerator costs a wait for the device every step)
 * @export_optimizer: for checkpoints: adds the optimizer's state to @out
 *   as @prefix + "<parameter full name>.<state name>", plain f32 shaped
 *   like the parameter, for every trainable parameter, whatever the
 *   strategy and the world size, and sets *@step_count; a collective, rank
 *   0's @out counts (since 1.2; optional: NULL means s->optimizer holds the
 *   whole state; set together with @import_optimizer)
 * @import_optimizer: the reverse, after setup: takes this rank's part of
 *   the whole state in @in (read from @path, which errors name) and the
 *   step count; an absent or misshapen tensor is an error naming it (since
 *   1.2; optional: NULL means the core restores s->optimizer's state)
 * @end: the end of an epoch (%TDM_STRATEGY_END_EPOCH, @epoch its 0-based
 *   number) or of training (%TDM_STRATEGY_END_TRAINING, @epoch the last
 *   one run), on every rank, before the core evaluates, saves or
 *   checkpoints: bring the ranks' parameters and buffers together here if
 *   the steps do not; a collective that never touches the gradients or the
 *   optimizer (since 1.3; optional: NULL means the ranks hold equal
 *   parameters after every step)
 *
 * A strategy's slots, in a static const struct the plugin gives to
 * tdm_plugin_add_feature() as a TDM_FEATURE_STRATEGY. Every slot is
 * required unless its comment says
 * "(optional: NULL means ...)"; the registry refuses a strategy with a NULL
 * required slot (%TDM_ERROR_PLUGIN). The comment of each slot in the
 * header says when the core calls it and what it must do; the rules every
 * strategy follows are in this section's introduction. Each slot that
 * takes a #GError returns FALSE with it set on failure, naming the
 * strategy and what failed; the job then stops on every rank.
 */
struct _TdmStrategyClass {
    guint32 iface_version; /* TDM_STRATEGY_IFACE_VERSION */
    guint32 struct_size;   /* sizeof(TdmStrategyClass) */
    /* (optional: NULL means there is nothing to set up) */
    gboolean (*setup)(TdmStrategy *s, GError **error);
    /* One training step on `batch`: forward, loss, backward, reduction and,
     * when `do_update`, the optimizer step and zeroing of gradients. */
    gboolean (*train_step)(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                           TdmStepResult *result, GError **error);
    /* (optional: NULL means there is nothing to tear down) */
    void (*teardown)(TdmStrategy *s);
    /* since 1.1: read_stats */
    /* Set stats->loss_sum and stats->correct to the figures of the steps
     * since the last call (or since setup), and start adding up from zero
     * again. The figures are this process's: each replica's added up when
     * the strategy drives several devices. The core fills count and steps.
     * (optional: NULL means each train_step reports its batch's loss and
     * correct count in TdmStepResult and the core adds them up, which on an
     * accelerator costs a wait for the device every step) */
    gboolean (*read_stats)(TdmStrategy *s, TdmStepStats *stats, GError **error);
    /* since 1.2: export_optimizer, import_optimizer */
    /* For checkpoints, in a layout that does not depend on the strategy or
     * the world size: add the optimizer's state to `out` (a safetensors
     * writer) as `prefix` + "<parameter full name>.<state name>", plain
     * f32 shaped like the parameter, for every trainable parameter of the
     * model, just as a whole-model optimizer's state table holds it, and
     * set *step_count to the optimizer steps done. A collective: every rank
     * calls it at the same point; what counts is rank 0's `out`, the other
     * ranks may leave theirs empty. A strategy that keeps the optimizer
     * state itself (zero1's shards) must have both slots.
     * (optional: NULL means s->optimizer holds the whole state, saved from
     * its state table and step_count) */
    gboolean (*export_optimizer)(TdmStrategy *s, TdmSafeTensors *out, const char *prefix,
                                 int64_t *step_count, GError **error);
    /* The reverse, after setup: take this rank's part of the whole state in
     * `in` (every rank gets the whole file, read from `path`, which errors
     * name) and the step count. An absent or misshapen tensor is an error
     * naming it. (optional: NULL means the core restores s->optimizer's
     * state table and step_count) */
    gboolean (*import_optimizer)(TdmStrategy *s, const TdmSafeTensors *in, const char *prefix,
                                 const char *path, int64_t step_count, GError **error);
    /* since 1.3: end */
    /* The end of an epoch (`what` = TDM_STRATEGY_END_EPOCH, `epoch` its
     * 0-based number) or of training (TDM_STRATEGY_END_TRAINING, `epoch`
     * the last one run), on every rank, before the core evaluates, saves
     * or checkpoints: bring the ranks' parameters and buffers together
     * here if the steps do not (tdm_strategy_average_values). A collective;
     * it may change the parameters and buffers, never the gradients or the
     * optimizer. The last epoch gets EPOCH then TRAINING, both before its
     * evaluation; training that stops mid-epoch (train.max_steps) gets only
     * the TRAINING call, early stopping gets it after the last evaluation
     * (and the trainer evaluates again). (optional: NULL means the ranks
     * hold equal parameters after every step) */
    gboolean (*end)(TdmStrategy *s, TdmStrategyEnd what, int epoch, GError **error);
};

/**
 * TdmStrategy:
 * @klass: its class
 * @name: its name
 * @model: the model (transfer none)
 * @optimizer: the optimizer (transfer none)
 * @opts: its options
 * @priv: the strategy's own state, set in setup
 * @params: since 1.1: its parameters ("ddp bucket-mb=25": bucket-mb), read
 *   in setup with the getters of <tandem/params.h> (owned by the strategy;
 *   never NULL)
 * @reserved: zero
 *
 * A strategy in use, made by tdm_strategy_new().
 */
struct _TdmStrategy {
    const TdmStrategyClass *klass;
    char *name;
    TdmModel *model;          /* transfer none */
    TdmOptimizer *optimizer;  /* transfer none */
    TdmStrategyOptions opts;
    gpointer priv;
    /* since 1.1: params */
    /* Its parameters ("ddp bucket-mb=25": bucket-mb), read in setup with
     * the getters of <tandem/params.h> (owned by the strategy; never NULL). */
    TdmParams *params;
    gpointer reserved[3];
};

/**
 * tdm_strategy_new:
 * @name: (nullable): a strategy with its parameters, "ddp bucket-mb=25"
 *   (<tandem/params.h>); NULL or "": "single"
 * @model: the model (transfer none: it outlives the strategy)
 * @optimizer: the optimizer (transfer none: it outlives the strategy)
 * @opts: the options; opts->params, when given, replaces the parameters in
 *   @name
 * @error: return location for a #GError, or NULL
 *
 * Selects a strategy and sets it up (its setup slot).
 *
 * Returns: (transfer full): the strategy, free it with tdm_strategy_free();
 * or NULL with @error set: %TDM_ERROR_NOT_FOUND listing the strategies, a
 * bad parameter as %TDM_ERROR_INVALID_ARG naming the strategy, the key and
 * what it accepts, or the setup's error
 */
TDM_API TdmStrategy *tdm_strategy_new(const char *name, TdmModel *model, TdmOptimizer *optimizer,
                                      const TdmStrategyOptions *opts, GError **error);
/**
 * tdm_strategy_train_step:
 * @s: a strategy
 * @batch: the batch, on the model's device
 * @do_update: whether this micro-batch ends an optimizer step
 * @result: (out caller-allocates): what the step reports at once
 * @error: return location for a #GError, or NULL
 *
 * Runs one training step through the strategy's train_step: forward, loss,
 * backward, gradient communication and, when @do_update, the optimizer
 * step and zeroing of gradients.
 *
 * Returns: TRUE, or FALSE with @error set (an op, a collective or the
 * optimizer failed; the model is then in an undefined state)
 */
TDM_API gboolean tdm_strategy_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                         TdmStepResult *result, GError **error);
/**
 * tdm_strategy_read_stats:
 * @s: a strategy
 * @stats: (out caller-allocates): overwritten with the figures
 * @error: return location for a #GError, or NULL
 *
 * The loss statistics of the steps since the last call (since the strategy
 * was made, the first time), then zero again. With the strategy's
 * read_stats this waits for the device once (and the core folds the
 * device's f32 sums into its own every 2^16 samples, so they stay exact
 * however rarely this is called); without it the figures are the steps'
 * #TdmStepResult added up. A step that failed may have added its figures
 * or not.
 *
 * Returns: TRUE, or FALSE with @error set (the device failed)
 */
TDM_API gboolean tdm_strategy_read_stats(TdmStrategy *s, TdmStepStats *stats, GError **error);
/**
 * tdm_strategy_owns_optimizer_state:
 * @s: a strategy
 *
 * Whether the strategy keeps the optimizer state itself (its class has
 * export_optimizer and import_optimizer): then a checkpoint's optimizer
 * state goes through tdm_strategy_export_optimizer() and
 * tdm_strategy_import_optimizer(), else through s->optimizer.
 *
 * Returns: TRUE when it does
 */
TDM_API gboolean tdm_strategy_owns_optimizer_state(const TdmStrategy *s);
/**
 * tdm_strategy_export_optimizer:
 * @s: a strategy
 * @out: the checkpoint being written
 * @prefix: the prefix of the tensors' names
 * @step_count: (out): the optimizer steps done
 * @error: return location for a #GError, or NULL
 *
 * Adds the optimizer's state to @out as a checkpoint holds it (see the
 * class's export_optimizer): through the strategy's slot, else from
 * s->optimizer. A collective with a strategy that owns the state: every
 * rank calls it at the same point.
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_strategy_export_optimizer(TdmStrategy *s, TdmSafeTensors *out,
                                               const char *prefix, int64_t *step_count,
                                               GError **error);
/**
 * tdm_strategy_import_optimizer:
 * @s: a strategy, set up
 * @in: the checkpoint read
 * @prefix: the prefix of the tensors' names
 * @path: the checkpoint's file, for errors
 * @step_count: the optimizer steps done
 * @error: return location for a #GError, or NULL
 *
 * Restores the optimizer's state from @in: through the strategy's
 * import_optimizer; without one, s->optimizer's state and step count are
 * set here.
 *
 * Returns: TRUE, or FALSE with @error set: an absent or misshapen tensor,
 * naming it and @path
 */
TDM_API gboolean tdm_strategy_import_optimizer(TdmStrategy *s, const TdmSafeTensors *in,
                                               const char *prefix, const char *path,
                                               int64_t step_count, GError **error);
/**
 * tdm_strategy_end:
 * @s: a strategy
 * @what: the end of an epoch or of training
 * @epoch: the epoch's 0-based number (for training: the last one run)
 * @error: return location for a #GError, or NULL
 *
 * Calls the strategy's end hook (a class of 1.3 or later with one; else
 * does nothing). The trainer calls it; a program that drives a strategy
 * itself calls it at the end of each epoch and of training, on every rank.
 *
 * Returns: TRUE, or FALSE with @error set: the hook's error, prefixed with
 * the strategy's name and "at the end of an epoch" or "at the end of
 * training"
 */
TDM_API gboolean tdm_strategy_end(TdmStrategy *s, TdmStrategyEnd what, int epoch,
                                  GError **error);
/**
 * tdm_strategy_free:
 * @s: (transfer full) (nullable): a strategy
 *
 * Tears the strategy down (its teardown slot) and frees it.
 */
TDM_API void tdm_strategy_free(TdmStrategy *s);

/* ---- helpers for strategy plugins (since 1.3) -------------------------
 *
 * What a strategy on one device per process needs, so that it writes only
 * what is its own. With these a data-parallel strategy is a few lines:
 *
 *     static gboolean my_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
 *                                   TdmStepResult *result, GError **error)
 *     {
 *         return tdm_strategy_default_step(s, batch, do_update, result, error)
 *                && (!do_update || my_sync(s, error));
 *     }
 */

/**
 * tdm_strategy_forward_backward:
 * @s: a strategy
 * @batch: the batch, on the model's device
 * @error: return location for a #GError, or NULL
 *
 * Forward @batch through s->model, softmax cross-entropy with
 * opts.label_smoothing, backward with the loss gradient scaled by
 * 1/opts.accumulate: the gradients are added into s->model's grad arena
 * (and its grad-ready hook fires per parameter). The batch's loss sum and
 * right predictions are added up on the device by the core (in tensors
 * the core keeps with the strategy and frees with it), which hands them to
 * tdm_strategy_read_stats(): a strategy that uses this leaves its class's
 * read_stats NULL and #TdmStepResult's loss and correct 0. It has no
 * #TdmStepResult: the train_step that calls it sets result->count =
 * batch->size itself (tdm_strategy_default_step() does). Nothing waits
 * for the device. Since 1.3.
 *
 * Returns: TRUE, or FALSE with @error set by the failing op (the model's
 * forward or backward, the loss: a label out of range names it); the
 * gradients are then partly accumulated
 */
TDM_API gboolean tdm_strategy_forward_backward(TdmStrategy *s, TdmBatch *batch, GError **error);
/**
 * tdm_strategy_default_step:
 * @s: a strategy
 * @batch: the batch, on the model's device
 * @do_update: whether this micro-batch ends an optimizer step
 * @result: (out caller-allocates): its count is set to the batch's size;
 *   the rest is left as it was
 * @error: return location for a #GError, or NULL
 *
 * What `single` does, as a train_step slot: tdm_strategy_forward_backward(),
 * then when @do_update the optimizer step and zeroed gradients
 * (tdm_optimizer_step_zero_grad()), and result->count = batch->size. No
 * communication: on several ranks, average the gradients before the
 * update or the parameters after it yourself. Since 1.3.
 *
 * Returns: TRUE, or FALSE with @error set by the forward, backward or
 * optimizer step
 */
TDM_API gboolean tdm_strategy_default_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                           TdmStepResult *result, GError **error);
/**
 * tdm_strategy_get_comm:
 * @s: a strategy
 * @error: return location for a #GError, or NULL
 *
 * The strategy's communicator, for a strategy that cannot run without
 * one. Since 1.3.
 *
 * Returns: (transfer none): s->opts.comm, or NULL with
 * %TDM_ERROR_INVALID_ARG naming the strategy and how to get a
 * communicator (`tandem run`, mpirun or srun, or tdm_comm_new())
 */
TDM_API TdmComm *tdm_strategy_get_comm(TdmStrategy *s, GError **error);
/**
 * tdm_strategy_broadcast_values:
 * @s: a strategy
 * @root: the rank whose values every rank takes, >= 0
 * @error: return location for a #GError, or NULL
 *
 * Every rank takes rank @root's parameters and buffers (the whole value
 * arena), over s->opts.comm; nothing to do without a communicator or in a
 * world of one. A collective: every rank calls it. Since 1.3.
 *
 * Returns: TRUE, or FALSE with @error set: the collective's error, prefixed
 * with the strategy's name and "broadcasting the parameters from rank N"
 */
TDM_API gboolean tdm_strategy_broadcast_values(TdmStrategy *s, int root, GError **error);
/**
 * tdm_strategy_average_values:
 * @s: a strategy
 * @error: return location for a #GError, or NULL
 *
 * Every rank's parameters and buffers (batch-norm running statistics
 * included) become their mean over the ranks (an all-reduce of the whole
 * value arena), over s->opts.comm; nothing to do without a communicator or
 * in a world of one. A collective: every rank calls it. Since 1.3.
 *
 * Returns: TRUE, or FALSE with @error set: the collective's error, prefixed
 * with the strategy's name and "averaging the parameters over N ranks"
 */
TDM_API gboolean tdm_strategy_average_values(TdmStrategy *s, GError **error);

/**
 * tdm_arena_slice:
 * @arena: a plain f32 tensor with storage: model->value_arena,
 *   model->grad_arena, or any f32 tensor laid out so
 * @start: the first element
 * @count: the number of elements
 * @error: return location for a #GError, or NULL
 *
 * A flat f32 view [@count] of elements [@start, @start + @count) of an
 * arena: how a strategy addresses a range of parameters or gradients, a
 * bucket or a shard, without copying. A parameter's elements start at
 * param->arena_offset / sizeof(float). The view shares the arena's
 * storage (it holds a reference to it). The range is checked against the
 * arena's storage, not its shape: a range past the arena's last element
 * but inside its storage is not refused. Since 1.3.
 *
 * Returns: (transfer full): the view, or NULL with %TDM_ERROR_SHAPE when
 * the range does not fit in the arena's storage (the message gives the
 * bytes)
 */
TDM_API TdmTensor *tdm_arena_slice(TdmTensor *arena, size_t start, size_t count, GError **error);
/**
 * tdm_model_first_buffer:
 * @model: a model
 *
 * The first element of the value arena that is a buffer (batch-norm
 * running statistics): parameters are [0, it), buffers [it, n_values).
 * Since 1.3.
 *
 * Returns: that element's index; model->n_values when there are no buffers
 */
TDM_API size_t tdm_model_first_buffer(const TdmModel *model);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStrategy, tdm_strategy_free)

G_END_DECLS

#endif /* TANDEM_STRATEGY_H */

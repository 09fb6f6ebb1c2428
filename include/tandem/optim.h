/* SPDX-License-Identifier: MIT */
/**
 * SECTION:optim
 * @title: Optimizers
 * @short_description: loss, optimizers and learning-rate schedules
 * @include: tandem/tandem.h
 *
 * Optimizers are features of kind TDM_FEATURE_OPTIMIZER (the core registers
 * "sgd" and "adamw"); each keeps per-parameter state keyed by the parameter's
 * full name, so checkpoints carry it as "tandem.optim.<param>.<state>" tensors
 * (<tandem/checkpoint.h>).
 * Updates run on the device through the backend's fused update ops.
 */
#ifndef TANDEM_OPTIM_H
#define TANDEM_OPTIM_H

#include <tandem/module.h>
#include <tandem/params.h>

G_BEGIN_DECLS

/* ---- loss ---- */
/**
 * tdm_loss_cross_entropy:
 * @dev: the device
 * @cache: (nullable): the op's cache, as for ops
 * @logits: [B, K] f32
 * @labels: [B] i32
 * @label_smoothing: 0 for none
 * @loss: (out): the mean loss
 * @dlogits: (nullable): an output slot owned by the caller, for the
 *   gradient of the mean loss; NULL: no gradient
 * @correct: (out) (optional): the number of right argmax predictions
 * @error: return location for a #GError, or NULL
 *
 * The mean softmax cross-entropy of a batch.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_SHAPE naming both shapes, or the
 * device's error
 */
TDM_API gboolean tdm_loss_cross_entropy(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                        TdmTensor *labels, float label_smoothing, float *loss,
                                        TdmTensor *dlogits, int64_t *correct, GError **error);

/* ---- optimizers ---- */

/**
 * TdmOptimizerOptions:
 * @lr: the learning rate
 * @momentum: sgd
 * @dampening: sgd
 * @nesterov: sgd
 * @weight_decay: decoupled for adamw, L2 for sgd
 * @beta1: adamw
 * @beta2: adamw
 * @eps: adamw
 * @hparams: (nullable): since 1.1: the optimizer's hyperparameters already
 *   bound to its specs (transfer none); NULL: tdm_optimizer_new() binds
 *   those in its name
 * @max_grad_norm: since 1.2: clip the gradients before each update as
 *   PyTorch's clip_grad_norm_ does (see tdm_optimizer_step()); 0: never
 * @reserved: zero
 *
 * The defaults of an optimizer's hyperparameters;
 * tdm_optimizer_options_init() sets them.
 */
typedef struct {
    float lr;
    float momentum;     /* sgd */
    float dampening;    /* sgd */
    gboolean nesterov;  /* sgd */
    float weight_decay;
    float beta1, beta2, eps; /* adamw */
    /* since 1.1: hparams */
    /* The optimizer's hyperparameters already bound to its specs
     * (transfer none; NULL: tdm_optimizer_new() binds those in its `name`). */
    TdmParams *hparams;
    /* since 1.2: max_grad_norm */
    /* Clip the gradients before each update as PyTorch's clip_grad_norm_
     * does (see tdm_optimizer_step); 0 = never. */
    float max_grad_norm;
    gpointer reserved[2];
} TdmOptimizerOptions;

/**
 * tdm_optimizer_options_init:
 * @opts: (out caller-allocates): the options
 *
 * The defaults: lr 0.01, momentum 0, dampening 0, nesterov off, weight
 * decay 0, betas 0.9/0.999, eps 1e-8, no hparams, no clipping.
 */
TDM_API void tdm_optimizer_options_init(TdmOptimizerOptions *opts);

/**
 * TDM_OPTIMIZER_IFACE_VERSION:
 *
 * The interface version of #TdmOptimizerClass this core's headers describe.
 * 1.1 gave #TdmOptimizer and #TdmOptimizerOptions a reserved slot each,
 * hparams: an optimizer that reads it needs a core that fills it. 1.2 gave
 * one more of each a meaning: max_grad_norm in the options and the core's
 * own state (learning-rate groups, clipping) in the optimizer; the core
 * reads both.
 */
#define TDM_OPTIMIZER_IFACE_VERSION TDM_IFACE_VERSION(1, 2)

/**
 * TdmOptimizerClass:
 * @iface_version: %TDM_OPTIMIZER_IFACE_VERSION
 * @struct_size: sizeof(TdmOptimizerClass)
 * @init: creates the state for opt->params (the trainable parameters):
 *   state tensors in opt->state, the rest in opt->priv; FALSE with the
 *   error set makes tdm_optimizer_new() fail, and the core then frees the
 *   optimizer, calling @finalize, so finalize must cope with a partial init
 *   (optional: NULL means the optimizer keeps no state of its own)
 * @step: one update of every parameter in opt->params, each at its rate
 *   (tdm_optimizer_param_lr(): opt->lr or its learning-rate group's), from
 *   gradients that are final; the core clips them first when
 *   opts.max_grad_norm is set, and counts the step; FALSE with the error
 *   set naming the optimizer
 * @finalize: frees opt->priv (the core frees opt->state) (optional: NULL
 *   means there is nothing to free)
 * @reserved: NULL
 *
 * An optimizer's slots, in a static const struct the plugin gives to
 * tdm_plugin_add_feature() as a TDM_FEATURE_OPTIMIZER. Every slot is
 * required unless its comment says
 * "(optional: NULL means ...)"; the registry refuses an optimizer with a
 * NULL required slot.
 */
struct _TdmOptimizerClass {
    guint32 iface_version; /* TDM_OPTIMIZER_IFACE_VERSION */
    guint32 struct_size;   /* sizeof(TdmOptimizerClass) */
    /* Create state for the given parameters (TdmParam *, trainable only).
     * (optional: NULL means the optimizer keeps no state of its own) */
    gboolean (*init)(TdmOptimizer *opt, GError **error);
    /* One update of every parameter in opt->params with lr opt->lr. */
    gboolean (*step)(TdmOptimizer *opt, GError **error);
    /* (optional: NULL means there is nothing to free) */
    void (*finalize)(TdmOptimizer *opt);
    gpointer reserved[4];
};

/**
 * TdmOptimizer:
 * @klass: its class
 * @opts: its options
 * @lr: the current learning rate (schedules change it)
 * @step_count: completed steps
 * @device: the parameters' device
 * @params: (element-type TdmParam): the parameters being optimised
 *   (transfer none)
 * @state: state tensors by "<param full name>.<state name>" (e.g.
 *   "fc.weight.momentum_buffer"), plain f32 on @device, owned here
 * @priv: the optimizer's own state
 * @hparams: since 1.1: its hyperparameters ("sgd momentum=0.9": lr,
 *   momentum, ...) bound to its specs (owned; never NULL)
 * @core: since 1.2: the core's own state of this optimizer (private)
 * @reserved: zero
 *
 * An optimizer in use, made by tdm_optimizer_new().
 */
struct _TdmOptimizer {
    const TdmOptimizerClass *klass;
    TdmOptimizerOptions opts;
    float lr;              /* current learning rate (schedules change it) */
    int64_t step_count;    /* completed steps */
    TdmDevice *device;
    GPtrArray *params;     /* TdmParam * (transfer none) being optimised */
    /* State tensors by "<param full name>.<state name>" (e.g.
     * "fc.weight.momentum_buffer"), plain f32 on `device`, owned here. */
    GHashTable *state;
    gpointer priv;
    /* since 1.1: hparams */
    /* Its hyperparameters ("sgd momentum=0.9": lr, momentum, ...) bound to
     * its specs (owned; never NULL): what opts holds, for the keys the
     * specs share with TdmOptimizerOptions, and a plugin's own keys.
     * opts.hparams points here. */
    TdmParams *hparams;
    /* since 1.2: core */
    /* The core's own state of this optimizer: learning-rate groups and
     * what clipping needs (private; NULL until one of them is used). */
    gpointer core;
    gpointer reserved[2];
};

/**
 * tdm_optimizer_new:
 * @name: an optimizer ("sgd", "adamw" or a plugin's) with its
 *   hyperparameters, "sgd momentum=0.9 nesterov=true" (<tandem/params.h>)
 * @model: the model whose trainable parameters it optimises
 * @params: (nullable) (element-type TdmParam): the parameters instead (a
 *   ZeRO shard); NULL: those of @model
 * @opts: (nullable): the defaults of the hyperparameters of the same name
 *   (so a config's optim.momentum and "sgd momentum=0.9" are checked
 *   against the same spec, and the text wins); opts->hparams, when given,
 *   replaces both; NULL: the defaults
 * @error: return location for a #GError, or NULL
 *
 * Makes an optimizer.
 *
 * Returns: (transfer full): the optimizer, free it with
 * tdm_optimizer_free(); or NULL with %TDM_ERROR_INVALID_ARG naming the
 * optimizer, the key and what it accepts, or %TDM_ERROR_NOT_FOUND
 */
TDM_API TdmOptimizer *tdm_optimizer_new(const char *name, TdmModel *model, GPtrArray *params,
                                        const TdmOptimizerOptions *opts, GError **error);
/**
 * tdm_optimizer_step:
 * @opt: an optimizer
 * @error: return location for a #GError, or NULL
 *
 * One update of every parameter of opt->params from its gradient. With
 * opts.max_grad_norm > 0 the gradients are first clipped as PyTorch's
 * clip_grad_norm_(params, max_grad_norm) does: their total 2-norm over
 * every trainable parameter is computed (summed over the ranks of the
 * communicator given by tdm_optimizer_set_grad_norm_comm(), when the
 * optimizer holds one rank's share of the gradients), and when
 * max_grad_norm / (norm + 1e-6) < 1 every gradient is scaled by it. This
 * waits for the device once per step.
 *
 * Returns: TRUE, or FALSE with the device's or the collective's error
 */
TDM_API gboolean tdm_optimizer_step(TdmOptimizer *opt, GError **error);
/**
 * tdm_optimizer_step_zero_grad:
 * @opt: an optimizer
 * @model: its model
 * @error: return location for a #GError, or NULL
 *
 * tdm_optimizer_step() then tdm_model_zero_grad(), in one pass over the
 * gradients where the optimizer and the backend can.
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_optimizer_step_zero_grad(TdmOptimizer *opt, TdmModel *model,
                                              GError **error);
/**
 * tdm_optimizer_free:
 * @opt: (transfer full) (nullable): an optimizer
 *
 * Frees the optimizer and its state.
 */
TDM_API void tdm_optimizer_free(TdmOptimizer *opt);
/**
 * tdm_optimizer_state:
 * @opt: an optimizer
 * @p: one of its parameters
 * @state_name: the state's name, "momentum_buffer"
 * @error: return location for a #GError, or NULL
 *
 * Gets a state tensor, or creates it zero-filled and shaped like @p.
 *
 * Returns: (transfer none): the state tensor, or NULL with @error set (out
 * of memory)
 */
TDM_API TdmTensor *tdm_optimizer_state(TdmOptimizer *opt, TdmParam *p, const char *state_name,
                                       GError **error);

/* ---- gradient clipping across ranks ---- */
/**
 * tdm_optimizer_set_grad_norm_comm:
 * @opt: an optimizer holding this rank's share of the gradients (a ZeRO
 *   shard, disjoint from the other ranks')
 * @comm: (nullable): the communicator (transfer none; it outlives @opt);
 *   NULL: @opt holds all of them
 *
 * Clipping then sums the squared norms of every rank's share over @comm.
 * Every rank of @comm must then call tdm_optimizer_step() together, also
 * one whose share is empty.
 */
TDM_API void tdm_optimizer_set_grad_norm_comm(TdmOptimizer *opt, TdmComm *comm);
/**
 * tdm_optimizer_get_grad_norm:
 * @opt: an optimizer
 *
 * The total gradient norm the last clipping step measured, before
 * clipping.
 *
 * Returns: the norm, or -1 when no step clipped
 */
TDM_API double tdm_optimizer_get_grad_norm(const TdmOptimizer *opt);

/* ---- learning-rate groups ---- */
/**
 * tdm_optimizer_set_lr_groups:
 * @opt: an optimizer (sgd or adamw)
 * @model: (nullable): the model whose parameters the prefixes must name;
 *   NULL: opt->params
 * @groups: (nullable): "PREFIX=LR,PREFIX=LR..." ("fc=0.01,layer4=0.001");
 *   NULL or "" removes the groups
 * @error: return location for a #GError, or NULL
 *
 * PyTorch's parameter groups, differing in the learning rate only: a
 * parameter whose full name starts with one of the prefixes (matched as
 * tdm_model_freeze() matches them; the longest prefix wins) trains at its
 * group's rate, the others at opt->lr. Each prefix must name at least one
 * trainable parameter that no longer prefix takes. A schedule applied with
 * tdm_schedule_apply() runs every group from its own rate.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG naming the entry (a
 * malformed list, a prefix that names nothing) or the optimizer (not sgd
 * or adamw)
 */
TDM_API gboolean tdm_optimizer_set_lr_groups(TdmOptimizer *opt, TdmModel *model,
                                             const char *groups, GError **error);
/**
 * tdm_optimizer_lr_group_of:
 * @opt: an optimizer
 * @full_name: a parameter's full name
 *
 * The learning-rate group a parameter falls in.
 *
 * Returns: 0 for none (opt->lr), k for the k-th entry of the list
 */
TDM_API int tdm_optimizer_lr_group_of(const TdmOptimizer *opt, const char *full_name);
/**
 * tdm_optimizer_share_lr_groups:
 * @dst: an optimizer
 * @src: the optimizer whose groups it takes
 *
 * @dst takes @src's groups (shared: a schedule applied to @src sets @dst's
 * group rates too) and puts each of its parameters in one by name;
 * tdm_optimizer_set_param_lr_group() then places parameters whose names say
 * nothing (a ZeRO shard's slices). dst->lr stays its own to set.
 */
TDM_API void tdm_optimizer_share_lr_groups(TdmOptimizer *dst, TdmOptimizer *src);
/**
 * tdm_optimizer_set_param_lr_group:
 * @opt: an optimizer with shared groups
 * @p: one of its parameters
 * @group: 0 for none, else the group's number
 * @error: return location for a #GError, or NULL
 *
 * Places a parameter in a learning-rate group.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG (no such group or
 * parameter)
 */
TDM_API gboolean tdm_optimizer_set_param_lr_group(TdmOptimizer *opt, const TdmParam *p,
                                                  int group, GError **error);
/**
 * tdm_optimizer_param_lr:
 * @opt: an optimizer
 * @index: an index into opt->params
 *
 * The learning rate a parameter trains at now.
 *
 * Returns: the rate
 */
TDM_API float tdm_optimizer_param_lr(const TdmOptimizer *opt, guint index);

/* ---- schedules ---- */

/**
 * TdmScheduleKind:
 * @TDM_SCHEDULE_CONSTANT: the base rate throughout
 * @TDM_SCHEDULE_STEP: lr * gamma^(floor(epoch / step_size))
 * @TDM_SCHEDULE_COSINE: to min_lr over total_steps
 *
 * A learning-rate schedule's shape; any kind may start with a linear
 * warmup.
 */
typedef enum {
    TDM_SCHEDULE_CONSTANT,
    TDM_SCHEDULE_STEP,    /* lr * gamma^(floor(epoch / step_size)) */
    TDM_SCHEDULE_COSINE,  /* to min_lr over total_steps */
} TdmScheduleKind;

/**
 * TdmSchedule:
 * @kind: its shape
 * @base_lr: the rate it starts from
 * @min_lr: cosine: where it ends
 * @gamma: step: the factor
 * @step_size: step: in epochs
 * @warmup_steps: a linear warmup from 0 (any kind)
 * @total_steps: cosine: the length including warmup
 * @steps_per_epoch: for step
 * @reserved: zero
 *
 * A learning-rate schedule.
 */
struct _TdmSchedule {
    TdmScheduleKind kind;
    float base_lr;
    float min_lr;          /* cosine */
    float gamma;           /* step */
    int step_size;         /* step: in epochs */
    int64_t warmup_steps;  /* linear warmup from 0 (any kind) */
    int64_t total_steps;   /* cosine: length including warmup */
    int64_t steps_per_epoch;
    gpointer reserved[4];
};

/**
 * tdm_schedule_kind_parse:
 * @s: "constant", "step" or "cosine"
 * @kind: (out): the kind
 * @error: return location for a #GError, or NULL
 *
 * Parses a schedule's name.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG naming the word
 */
TDM_API gboolean tdm_schedule_kind_parse(const char *s, TdmScheduleKind *kind, GError **error);
/**
 * tdm_schedule_lr:
 * @s: a schedule
 * @step: the global step, 0-based
 *
 * The learning rate for a step.
 *
 * Returns: the rate
 */
TDM_API float tdm_schedule_lr(const TdmSchedule *s, int64_t step);
/**
 * tdm_schedule_apply:
 * @s: a schedule
 * @opt: an optimizer
 * @step: the global step
 *
 * Sets opt->lr = tdm_schedule_lr(@s, @step), and each learning-rate group's
 * rate the same schedule run from the group's own rate instead of
 * s->base_lr, as PyTorch's schedulers treat parameter groups (warmup and
 * step decay scale every group alike; cosine ends every group at
 * s->min_lr).
 */
TDM_API void tdm_schedule_apply(const TdmSchedule *s, TdmOptimizer *opt, int64_t step);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmOptimizer, tdm_optimizer_free)

G_END_DECLS

#endif /* TANDEM_OPTIM_H */

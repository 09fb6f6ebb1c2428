/* tandem/optim.h - loss, optimizers and learning-rate schedules.
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
/* Mean softmax cross-entropy. *loss gets the mean; dlogits (slot owned by the
 * caller, may be NULL) the gradient; *correct (may be NULL) the number of
 * right argmax predictions. */
TDM_API gboolean tdm_loss_cross_entropy(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                        TdmTensor *labels, float label_smoothing, float *loss,
                                        TdmTensor *dlogits, int64_t *correct, GError **error);

/* ---- optimizers ---- */
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

/* Defaults: lr 0.01, momentum 0, dampening 0, nesterov off, weight decay 0,
 * betas 0.9/0.999, eps 1e-8, no hparams, no clipping. */
TDM_API void tdm_optimizer_options_init(TdmOptimizerOptions *opts);

/* 1.1 gave TdmOptimizer and TdmOptimizerOptions a reserved slot each,
 * hparams: an optimizer that reads it needs a core that fills it (see
 * `since 1.1`). 1.2 gave one more of each a meaning: max_grad_norm in the
 * options and the core's own state (learning-rate groups, clipping) in
 * the optimizer (see `since 1.2`); the core reads both. */
#define TDM_OPTIMIZER_IFACE_VERSION TDM_IFACE_VERSION(1, 2)

/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses an optimizer with a NULL required slot. */
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

/* Create an optimizer over the trainable parameters of `model` (or over
 * `params` when not NULL: a ZeRO shard). `name` is an optimizer ("sgd",
 * "adamw" or a plugin's) with its hyperparameters, "sgd momentum=0.9
 * nesterov=true" (<tandem/params.h>). The fields of `opts` (NULL: the
 * defaults) are the defaults of the hyperparameters of the same name, so
 * a config's optim.momentum and "sgd momentum=0.9" are checked against the
 * same spec, and the text wins over `opts`; opts->hparams, when given,
 * replaces both. A bad value is TDM_ERROR_INVALID_ARG naming the
 * optimizer, the key and what it accepts. Transfer full. */
TDM_API TdmOptimizer *tdm_optimizer_new(const char *name, TdmModel *model, GPtrArray *params,
                                        const TdmOptimizerOptions *opts, GError **error);
/* One update of every parameter of opt->params from its gradient. With
 * opts.max_grad_norm > 0 the gradients are first clipped as PyTorch's
 * clip_grad_norm_(params, max_grad_norm) does: their total 2-norm over
 * every trainable parameter is computed (summed over the ranks of the
 * communicator given by tdm_optimizer_set_grad_norm_comm, when the
 * optimizer holds one rank's share of the gradients), and when
 * max_grad_norm / (norm + 1e-6) < 1 every gradient is scaled by it. This
 * waits for the device once per step. */
TDM_API gboolean tdm_optimizer_step(TdmOptimizer *opt, GError **error);
/* tdm_optimizer_step() then tdm_model_zero_grad(model), in one pass over the
 * gradients where the optimizer and the backend can. */
TDM_API gboolean tdm_optimizer_step_zero_grad(TdmOptimizer *opt, TdmModel *model,
                                              GError **error);
TDM_API void tdm_optimizer_free(TdmOptimizer *opt);
/* Get or create (zero-filled, shaped like `p`) a state tensor (transfer none). */
TDM_API TdmTensor *tdm_optimizer_state(TdmOptimizer *opt, TdmParam *p, const char *state_name,
                                       GError **error);

/* ---- gradient clipping across ranks ---- */
/* `opt` holds this rank's share of the gradients (a ZeRO shard, disjoint
 * from the other ranks'): clipping sums the squared norms of every rank's
 * share over `comm` (transfer none; outlives `opt`; NULL: `opt` holds all
 * of them). Every rank of `comm` must then call tdm_optimizer_step
 * together, also one whose share is empty. */
TDM_API void tdm_optimizer_set_grad_norm_comm(TdmOptimizer *opt, TdmComm *comm);
/* The total gradient norm the last clipping step measured (before
 * clipping), or -1 when none did. */
TDM_API double tdm_optimizer_get_grad_norm(const TdmOptimizer *opt);

/* ---- learning-rate groups ---- */
/* PyTorch's parameter groups, differing in the learning rate only:
 * `groups` is "PREFIX=LR,PREFIX=LR..." ("fc=0.01,layer4=0.001"); a
 * parameter whose full name starts with one of the prefixes (matched as
 * tdm_model_freeze matches them; the longest prefix wins) trains at its
 * group's rate, the others at opt->lr. Each prefix must name at least one
 * trainable parameter of `model` (NULL: of opt->params) that no longer
 * prefix takes. A schedule applied with tdm_schedule_apply runs every
 * group from its own rate. sgd and adamw only (another optimizer reads
 * opt->lr alone): TDM_ERROR_INVALID_ARG otherwise, and for a malformed
 * list, naming the entry. NULL or "" removes the groups. */
TDM_API gboolean tdm_optimizer_set_lr_groups(TdmOptimizer *opt, TdmModel *model,
                                             const char *groups, GError **error);
/* The group a parameter named `full_name` falls in: 0 for none (opt->lr),
 * k for the k-th entry of the list. */
TDM_API int tdm_optimizer_lr_group_of(const TdmOptimizer *opt, const char *full_name);
/* `dst` takes `src`'s groups (shared: a schedule applied to `src` sets
 * `dst`'s group rates too) and puts each of its parameters in one by name;
 * tdm_optimizer_set_param_lr_group then places parameters whose names
 * say nothing (a ZeRO shard's slices). dst->lr stays its own to set. */
TDM_API void tdm_optimizer_share_lr_groups(TdmOptimizer *dst, TdmOptimizer *src);
TDM_API gboolean tdm_optimizer_set_param_lr_group(TdmOptimizer *opt, const TdmParam *p,
                                                  int group, GError **error);
/* The learning rate opt->params[index] trains at now. */
TDM_API float tdm_optimizer_param_lr(const TdmOptimizer *opt, guint index);

/* ---- schedules ---- */
typedef enum {
    TDM_SCHEDULE_CONSTANT,
    TDM_SCHEDULE_STEP,    /* lr * gamma^(floor(epoch / step_size)) */
    TDM_SCHEDULE_COSINE,  /* to min_lr over total_steps */
} TdmScheduleKind;

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

/* Parse "constant", "step", "cosine" (TDM_ERROR_INVALID_ARG otherwise). */
TDM_API gboolean tdm_schedule_kind_parse(const char *s, TdmScheduleKind *kind, GError **error);
/* Learning rate to use for global step `step` (0-based). */
TDM_API float tdm_schedule_lr(const TdmSchedule *s, int64_t step);
/* opt->lr = tdm_schedule_lr(s, step), and each learning-rate group's rate
 * the same schedule run from the group's own rate instead of s->base_lr,
 * as PyTorch's schedulers treat parameter groups (warmup and step decay
 * scale every group alike; cosine ends every group at s->min_lr). */
TDM_API void tdm_schedule_apply(const TdmSchedule *s, TdmOptimizer *opt, int64_t step);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmOptimizer, tdm_optimizer_free)

G_END_DECLS

#endif /* TANDEM_OPTIM_H */

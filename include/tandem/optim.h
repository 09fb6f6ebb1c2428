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
    gpointer reserved[3];
} TdmOptimizerOptions;

/* Defaults: lr 0.01, momentum 0, dampening 0, nesterov off, weight decay 0,
 * betas 0.9/0.999, eps 1e-8, no hparams. */
TDM_API void tdm_optimizer_options_init(TdmOptimizerOptions *opts);

/* 1.1 gave TdmOptimizer and TdmOptimizerOptions a reserved slot each,
 * hparams: an optimizer that reads it needs a core that fills it (see
 * `since 1.1`). */
#define TDM_OPTIMIZER_IFACE_VERSION TDM_IFACE_VERSION(1, 1)

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
    gpointer reserved[3];
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
TDM_API gboolean tdm_optimizer_step(TdmOptimizer *opt, GError **error);
/* tdm_optimizer_step() then tdm_model_zero_grad(model), in one pass over the
 * gradients where the optimizer and the backend can. */
TDM_API gboolean tdm_optimizer_step_zero_grad(TdmOptimizer *opt, TdmModel *model,
                                              GError **error);
TDM_API void tdm_optimizer_free(TdmOptimizer *opt);
/* Get or create (zero-filled, shaped like `p`) a state tensor (transfer none). */
TDM_API TdmTensor *tdm_optimizer_state(TdmOptimizer *opt, TdmParam *p, const char *state_name,
                                       GError **error);

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

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmOptimizer, tdm_optimizer_free)

G_END_DECLS

#endif /* TANDEM_OPTIM_H */

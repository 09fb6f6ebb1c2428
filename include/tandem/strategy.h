/* tandem/strategy.h - parallel strategies: who owns one training step.
 *
 * A strategy is a feature of kind TDM_FEATURE_STRATEGY whose class is a
 * TdmStrategyClass. The trainer hands it the model, the optimizer and a batch;
 * the strategy runs forward, loss, backward, gradient communication and the
 * optimizer step. `single` runs it on one device; `dp`, `ddp` and `zero1`
 * (other plugins) split the work over devices or processes.
 */
#ifndef TANDEM_STRATEGY_H
#define TANDEM_STRATEGY_H

#include <tandem/optim.h>
#include <tandem/data.h>
#include <tandem/params.h>

G_BEGIN_DECLS

/* 1.1 gave TdmStrategy and TdmStrategyOptions a reserved slot each, params:
 * a strategy that reads it needs a core that fills it (see `since 1.1`). */
#define TDM_STRATEGY_IFACE_VERSION TDM_IFACE_VERSION(1, 1)

typedef struct {
    float label_smoothing;
    int accumulate;       /* micro-batches per optimizer step (1) */
    GPtrArray *devices;   /* TdmDevice * for dp; NULL = the model's device */
    gpointer comm;        /* collective communicator (distributed strategies) */
    /* since 1.1: params */
    /* The strategy's parameters bound to its specs (transfer none; NULL:
     * tdm_strategy_new() binds those of its `name`). */
    TdmParams *params;
    gpointer reserved[7];
} TdmStrategyOptions;

typedef struct {
    float loss;           /* mean loss of the batch */
    int64_t correct;      /* right predictions in the batch */
    int64_t count;        /* samples in the batch */
    double comm_wait_s;   /* time the step waited on communication */
    gpointer reserved[1];
} TdmStepResult;

/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses a strategy with a NULL required slot. */
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
    gpointer reserved[4];
};

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

/* Select a strategy and set it up. `name` is a strategy with its
 * parameters, "ddp bucket-mb=25" (<tandem/params.h>; NULL or "" =
 * "single"); opts->params, when given, replaces the ones in `name`. A bad
 * parameter is TDM_ERROR_INVALID_ARG naming the strategy, the key and what
 * it accepts. Transfer full. */
TDM_API TdmStrategy *tdm_strategy_new(const char *name, TdmModel *model, TdmOptimizer *optimizer,
                                      const TdmStrategyOptions *opts, GError **error);
TDM_API gboolean tdm_strategy_train_step(TdmStrategy *s, TdmBatch *batch, gboolean do_update,
                                         TdmStepResult *result, GError **error);
TDM_API void tdm_strategy_free(TdmStrategy *s);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStrategy, tdm_strategy_free)

G_END_DECLS

#endif /* TANDEM_STRATEGY_H */

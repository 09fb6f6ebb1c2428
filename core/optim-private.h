/* SPDX-License-Identifier: MIT */
/* core/optim-private.h - what the optimizer's files share: the core's own
 * state of a TdmOptimizer (opt->core), which holds the learning-rate
 * groups (core/optim-groups.c) and what gradient clipping needs
 * (core/optim-clip.c), while core/optim.c holds the object and the
 * built-in updates that read them. Private to the core.
 */
#ifndef TDM_OPTIM_PRIVATE_H
#define TDM_OPTIM_PRIVATE_H

#include "internal.h"

/* The groups of a "PREFIX=LR,..." list: shared by the optimizers that
 * train one model's parameters (zero1's shard optimizer and the trainer's),
 * so that a schedule applied to one sets the rates of both. */
typedef struct {
    gint ref_count;
    guint n;
    char **prefixes; /* n, NULL-terminated */
    float *base_lr;  /* n: the rates the list gives */
    float *lr;       /* n: the rates now (tdm_schedule_apply) */
} OptimLrGroups;

typedef struct {
    OptimLrGroups *groups; /* NULL: every parameter trains at opt->lr */
    int *param_group;      /* per opt->params entry: 0 = none, k = groups' k-th */
    TdmComm *norm_comm;    /* clipping sums the squared norms over it; NULL: no need */
    TdmTensor *norm_sum;   /* [1] on opt->device: the all-reduced squared norm */
    double grad_norm;      /* the last clipping step's total norm, -1 = none */
} OptimCore;

/* opt->core, made on first use (transfer none). */
OptimCore *tdm_optimizer_core(TdmOptimizer *opt);
void tdm_optimizer_core_free(TdmOptimizer *opt);
/* Whether some parameter of opt trains at a rate of its own group. */
gboolean tdm_optimizer_has_lr_groups(const TdmOptimizer *opt);
/* Clip opt's gradients as opts.max_grad_norm says (tdm_optimizer_step).
 * `grad_run`, when not NULL, is one tensor holding exactly the gradients
 * of opt->params, read and scaled in one op each. */
gboolean tdm_optimizer_clip_grads(TdmOptimizer *opt, TdmTensor *grad_run, GError **error);

#endif /* TDM_OPTIM_PRIVATE_H */

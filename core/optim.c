/* SPDX-License-Identifier: MIT */
/* core/optim.c - optimizers: the generic TdmOptimizer object (class lookup
 * through the registry, hyperparameters bound to the optimizer's specs,
 * per-parameter state keyed "<param>.<state>") and the built-in SGD and
 * AdamW, which run the fused updates (tdm_op_*_update).
 *
 * Hyperparameters come from two places that must agree on what is valid:
 * the fields of TdmOptimizerOptions (a config's optim.momentum) and the
 * text after the name ("sgd momentum=0.9"). Both go through the optimizer's
 * specs: a field is the default of the hyperparameter of its name, the text
 * may override it, and the result goes back into the fields the built-in
 * optimizers read.
 *
 * The common case is an optimizer over every parameter of a model: those
 * parameters are one contiguous run at the start of the value arena, their
 * gradients the same run of the grad arena. Then the state lives in one
 * arena per state kind too and a step is ONE fused call over the whole run;
 * the per-parameter state tensors are views into it, for checkpoints. Any
 * other parameter list (a ZeRO shard, a partly frozen model) is updated
 * parameter by parameter, skipping frozen ones; so are parameters in
 * learning-rate groups (core/optim-groups.c), each at its group's rate.
 * Gradient clipping (core/optim-clip.c) runs first, in tdm_optimizer_step.
 */
#include "config.h"

#include <string.h>

#include "optim-private.h"
#include "params-private.h"

#define MAX_STATES 2

typedef struct {
    /* Set when opt->params is one contiguous run of its model's arenas. */
    gboolean fused;
    TdmTensor *value_run, *grad_run;
    TdmTensor *state_run[MAX_STATES];
    /* Set when the run is the model's whole grad arena: a fused step may
     * then also do the model's zero_grad. */
    TdmModel *whole_model;
    /* tdm_optimizer_step_zero_grad() asks the built-in step to zero the
     * gradients (zero_grad) and learns whether it did (zeroed). */
    gboolean zero_grad, zeroed;
} OptimPriv;

void tdm_optimizer_options_init(TdmOptimizerOptions *opts)
{
    g_return_if_fail(opts != NULL);
    memset(opts, 0, sizeof *opts);
    opts->lr = 0.01f;
    opts->beta1 = 0.9f;
    opts->beta2 = 0.999f;
    opts->eps = 1e-8f;
}

static int64_t param_numel(const TdmParam *p)
{
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) {
        n *= p->shape[i];
    }
    return n;
}

static char *state_key(const TdmParam *p, const char *state_name)
{
    return g_strconcat(p->full_name != NULL ? p->full_name : p->name, ".", state_name, NULL);
}

TdmTensor *tdm_optimizer_state(TdmOptimizer *opt, TdmParam *p, const char *state_name,
                               GError **error)
{
    g_return_val_if_fail(opt != NULL && p != NULL && state_name != NULL, NULL);
    char *key = state_key(p, state_name);
    TdmTensor *t = g_hash_table_lookup(opt->state, key);
    if (t != NULL) {
        g_free(key);
        return t;
    }
    t = tdm_tensor_new(opt->device, TDM_DTYPE_F32, p->ndim, p->shape, error);
    if (t == NULL) {
        g_prefix_error(error, "optimizer state %s: ", key);
        g_free(key);
        return NULL;
    }
    g_hash_table_insert(opt->state, key, t);
    return t;
}

/* The run [first offset, last end) when params are back to back in one
 * model's arenas, in order; 0 otherwise. */
static int64_t contiguous_run(GPtrArray *params, TdmModel **model_out, size_t *offset_out)
{
    if (params->len == 0) {
        return 0;
    }
    const TdmParam *first = g_ptr_array_index(params, 0);
    TdmModel *model = first->owner != NULL ? first->owner->model : NULL;
    if (model == NULL || model->grad_arena == NULL) {
        return 0;
    }
    size_t next = first->arena_offset;
    int64_t n = 0;
    for (guint i = 0; i < params->len; i++) {
        const TdmParam *p = g_ptr_array_index(params, i);
        if (p->is_buffer || p->grad == NULL || p->owner == NULL || p->owner->model != model ||
            p->arena_offset != next) {
            return 0;
        }
        n += param_numel(p);
        next += (size_t)param_numel(p) * sizeof(float);
    }
    *model_out = model;
    *offset_out = first->arena_offset;
    return n;
}

/* Creates the named state tensors of every parameter: one arena per state
 * with per-parameter views when fused, separate tensors otherwise. */
static gboolean optim_setup(TdmOptimizer *opt, const char *const *state_names, int n_states,
                            GError **error)
{
    OptimPriv *op = g_new0(OptimPriv, 1);
    opt->priv = op;
    TdmModel *model = NULL;
    size_t offset = 0;
    int64_t n = contiguous_run(opt->params, &model, &offset);
    if (n > 0 && model->device == opt->device) {
        int64_t shape[1] = {n};
        op->value_run = tdm_tensor_new_view(model->value_arena, offset, TDM_DTYPE_F32, 1, shape,
                                            error);
        op->grad_run = op->value_run == NULL ? NULL
                                             : tdm_tensor_new_view(model->grad_arena, offset,
                                                                   TDM_DTYPE_F32, 1, shape, error);
        if (op->grad_run == NULL) {
            return FALSE;
        }
        for (int s = 0; s < n_states; s++) {
            op->state_run[s] = tdm_tensor_new(opt->device, TDM_DTYPE_F32, 1, shape, error);
            if (op->state_run[s] == NULL) {
                g_prefix_error(error, "optimizer %s state (%" G_GINT64_FORMAT " floats): ",
                               state_names[s], n);
                return FALSE;
            }
            for (guint i = 0; i < opt->params->len; i++) {
                TdmParam *p = g_ptr_array_index(opt->params, i);
                TdmTensor *v = tdm_tensor_new_view(op->state_run[s], p->arena_offset - offset,
                                                   TDM_DTYPE_F32, p->ndim, p->shape, error);
                if (v == NULL) {
                    return FALSE;
                }
                g_hash_table_insert(opt->state, state_key(p, state_names[s]), v);
            }
        }
        op->fused = TRUE;
        if (offset == 0 && (size_t)n == model->n_grads) {
            op->whole_model = model;
        }
        return TRUE;
    }
    for (int s = 0; s < n_states; s++) {
        for (guint i = 0; i < opt->params->len; i++) {
            if (tdm_optimizer_state(opt, g_ptr_array_index(opt->params, i), state_names[s],
                                    error) == NULL) {
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* The one tensor holding every gradient of opt->params, when the built-in
 * optimizer runs them as one run and none was frozen since. */
static TdmTensor *fused_grad_run(TdmOptimizer *opt)
{
    if (opt->klass != &tdm_sgd_class && opt->klass != &tdm_adamw_class) {
        return NULL;
    }
    OptimPriv *op = opt->priv;
    if (op == NULL || !op->fused) {
        return NULL;
    }
    /* A parameter frozen after creation must not be decayed or moved. */
    for (guint i = 0; i < opt->params->len; i++) {
        const TdmParam *p = g_ptr_array_index(opt->params, i);
        if (!p->requires_grad) {
            return NULL;
        }
    }
    return op->grad_run;
}

/* Whether a step may update the whole run in one call: one learning rate. */
static gboolean fused_usable(TdmOptimizer *opt)
{
    return fused_grad_run(opt) != NULL && !tdm_optimizer_has_lr_groups(opt);
}

static void optim_finalize(TdmOptimizer *opt)
{
    OptimPriv *op = opt->priv;
    if (op == NULL) {
        return;
    }
    if (op->value_run != NULL) {
        tdm_tensor_unref(op->value_run);
    }
    if (op->grad_run != NULL) {
        tdm_tensor_unref(op->grad_run);
    }
    for (int s = 0; s < MAX_STATES; s++) {
        if (op->state_run[s] != NULL) {
            tdm_tensor_unref(op->state_run[s]);
        }
    }
    g_free(op);
    opt->priv = NULL;
}

/* ---- SGD ---- */

static gboolean sgd_init(TdmOptimizer *opt, GError **error)
{
    const TdmOptimizerOptions *o = &opt->opts;
    if (o->lr < 0.0f || o->momentum < 0.0f || o->weight_decay < 0.0f) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "sgd: lr (%g), momentum (%g) and weight_decay (%g) must be >= 0", o->lr,
                    o->momentum, o->weight_decay);
        return FALSE;
    }
    if (o->nesterov && (o->momentum <= 0.0f || o->dampening != 0.0f)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "sgd: nesterov needs momentum > 0 and dampening 0 (got momentum %g, "
                    "dampening %g)",
                    o->momentum, o->dampening);
        return FALSE;
    }
    static const char *const names[] = {"momentum_buffer"};
    return optim_setup(opt, names, o->momentum != 0.0f ? 1 : 0, error);
}

static gboolean sgd_step(TdmOptimizer *opt, GError **error)
{
    const TdmOptimizerOptions *o = &opt->opts;
    OptimPriv *op = opt->priv;
    TdmSgdParams hp = {
        .lr = opt->lr,
        .momentum = o->momentum,
        .dampening = o->dampening,
        .weight_decay = o->weight_decay,
        .nesterov = o->nesterov,
        .first_step = opt->step_count == 0,
    };
    gboolean has_buf = o->momentum != 0.0f;
    if (fused_usable(opt)) {
        TdmTensor *buf = has_buf ? op->state_run[0] : NULL;
        if (op->zero_grad) {
            op->zeroed = TRUE;
            return tdm_op_sgd_update_zero_grad(opt->device, &hp, op->value_run, op->grad_run, buf,
                                               error);
        }
        return tdm_op_sgd_update(opt->device, &hp, op->value_run, op->grad_run, buf, error);
    }
    for (guint i = 0; i < opt->params->len; i++) {
        TdmParam *p = g_ptr_array_index(opt->params, i);
        if (!p->requires_grad) {
            continue;
        }
        TdmTensor *buf = NULL;
        if (has_buf && (buf = tdm_optimizer_state(opt, p, "momentum_buffer", error)) == NULL) {
            return FALSE;
        }
        hp.lr = tdm_optimizer_param_lr(opt, i);
        if (!tdm_op_sgd_update(opt->device, &hp, p->value, p->grad, buf, error)) {
            g_prefix_error(error, "sgd step of %s: ", p->full_name);
            return FALSE;
        }
    }
    return TRUE;
}

const TdmOptimizerClass tdm_sgd_class = {
    TDM_CLASS_HEADER(TDM_OPTIMIZER_IFACE_VERSION, TdmOptimizerClass),
    .init = sgd_init,
    .step = sgd_step,
    .finalize = optim_finalize,
};

/* ---- AdamW ---- */

static gboolean adamw_init(TdmOptimizer *opt, GError **error)
{
    const TdmOptimizerOptions *o = &opt->opts;
    if (o->lr < 0.0f || o->eps < 0.0f || o->weight_decay < 0.0f || o->beta1 < 0.0f ||
        o->beta1 >= 1.0f || o->beta2 < 0.0f || o->beta2 >= 1.0f) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "adamw: invalid lr %g, betas (%g, %g), eps %g or weight_decay %g "
                    "(betas must lie in [0, 1), the others be >= 0)",
                    o->lr, o->beta1, o->beta2, o->eps, o->weight_decay);
        return FALSE;
    }
    static const char *const names[] = {"exp_avg", "exp_avg_sq"};
    return optim_setup(opt, names, 2, error);
}

static gboolean adamw_step(TdmOptimizer *opt, GError **error)
{
    const TdmOptimizerOptions *o = &opt->opts;
    OptimPriv *op = opt->priv;
    TdmAdamWParams hp = {
        .lr = opt->lr,
        .beta1 = o->beta1,
        .beta2 = o->beta2,
        .eps = o->eps,
        .weight_decay = o->weight_decay,
        .step = opt->step_count + 1,
    };
    if (fused_usable(opt)) {
        if (op->zero_grad) {
            op->zeroed = TRUE;
            return tdm_op_adamw_update_zero_grad(opt->device, &hp, op->value_run, op->grad_run,
                                                 op->state_run[0], op->state_run[1], error);
        }
        return tdm_op_adamw_update(opt->device, &hp, op->value_run, op->grad_run,
                                   op->state_run[0], op->state_run[1], error);
    }
    for (guint i = 0; i < opt->params->len; i++) {
        TdmParam *p = g_ptr_array_index(opt->params, i);
        if (!p->requires_grad) {
            continue;
        }
        TdmTensor *m = tdm_optimizer_state(opt, p, "exp_avg", error);
        TdmTensor *v = m != NULL ? tdm_optimizer_state(opt, p, "exp_avg_sq", error) : NULL;
        if (v == NULL) {
            return FALSE;
        }
        hp.lr = tdm_optimizer_param_lr(opt, i);
        if (!tdm_op_adamw_update(opt->device, &hp, p->value, p->grad, m, v, error)) {
            g_prefix_error(error, "adamw step of %s: ", p->full_name);
            return FALSE;
        }
    }
    return TRUE;
}

const TdmOptimizerClass tdm_adamw_class = {
    TDM_CLASS_HEADER(TDM_OPTIMIZER_IFACE_VERSION, TdmOptimizerClass),
    .init = adamw_init,
    .step = adamw_step,
    .finalize = optim_finalize,
};

/* ---- the generic object ---- */

/* The TdmOptimizerOptions fields an optimizer's specs may name: their
 * values are the defaults of those hyperparameters, and the bound values
 * go back into them. */
typedef struct {
    const char *key;
    size_t offset;
    gboolean is_bool;
} OptionField;

#define FIELD(key, member, is_bool) {key, offsetof(TdmOptimizerOptions, member), is_bool}
static const OptionField option_fields[] = {
    FIELD("lr", lr, FALSE),
    FIELD("momentum", momentum, FALSE),
    FIELD("dampening", dampening, FALSE),
    FIELD("nesterov", nesterov, TRUE),
    FIELD("weight_decay", weight_decay, FALSE),
    FIELD("beta1", beta1, FALSE),
    FIELD("beta2", beta2, FALSE),
    FIELD("eps", eps, FALSE),
};
#undef FIELD

/* The shortest text that reads back as `v` ("0.05", not 0.0500000007). */
static void format_float(float v, char buf[G_ASCII_DTOSTR_BUF_SIZE])
{
    for (int digits = 6; digits <= 9; digits++) {
        char fmt[8];
        g_snprintf(fmt, sizeof fmt, "%%.%dg", digits);
        g_ascii_formatd(buf, G_ASCII_DTOSTR_BUF_SIZE, fmt, (double)v);
        if ((float)g_ascii_strtod(buf, NULL) == v) {
            return;
        }
    }
}

/* The hyperparameters of the optimizer `spec` names: the fields of `opts`
 * as defaults, then the key=value text after the name (transfer full). */
static TdmParams *optimizer_hparams(const char *spec, const TdmOptimizerOptions *opts,
                                    GError **error)
{
    if (opts->hparams != NULL) {
        return tdm_params_ref(opts->hparams);
    }
    const char *args = NULL;
    g_autofree char *name = tdm_params_split_name(spec, &args);
    if (name == NULL) {
        return tdm_params_parse(TDM_FEATURE_OPTIMIZER, spec, error); /* says what is wrong */
    }
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_OPTIMIZER, name, error);
    if (f == NULL) {
        return NULL;
    }
    g_autoptr(TdmParams) hp = tdm_params_new(name, tdm_feature_get_params(f), error);
    if (hp == NULL) {
        return NULL;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(option_fields); i++) {
        const OptionField *o = &option_fields[i];
        if (!tdm_params_has_key(hp, o->key)) {
            continue;
        }
        const void *field = (const char *)opts + o->offset;
        char text[G_ASCII_DTOSTR_BUF_SIZE];
        if (o->is_bool) {
            g_strlcpy(text, *(const gboolean *)field ? "true" : "false", sizeof text);
        } else {
            format_float(*(const float *)field, text);
        }
        if (!tdm_params_set_default(hp, o->key, text, error)) {
            return NULL;
        }
    }
    g_autoptr(GArray) tokens = tdm_param_tokens_new();
    if (!tdm_param_tokens_read(name, args, &args, FALSE, FALSE, tokens, error) ||
        !tdm_params_bind_tokens(hp, tokens, FALSE, error)) {
        return NULL;
    }
    return g_steal_pointer(&hp);
}

/* opts' fields from the bound hyperparameters of the same name. */
static void options_from_hparams(TdmOptimizerOptions *opts, const TdmParams *hp)
{
    for (gsize i = 0; i < G_N_ELEMENTS(option_fields); i++) {
        const OptionField *o = &option_fields[i];
        if (!tdm_params_has_key(hp, o->key) || !tdm_params_has_value(hp, o->key)) {
            continue;
        }
        void *field = (char *)opts + o->offset;
        if (o->is_bool) {
            *(gboolean *)field = tdm_params_get_bool(hp, o->key);
        } else {
            *(float *)field = (float)tdm_params_get_float(hp, o->key);
        }
    }
}

TdmOptimizer *tdm_optimizer_new(const char *name, TdmModel *model, GPtrArray *params,
                                const TdmOptimizerOptions *opts, GError **error)
{
    g_return_val_if_fail(name != NULL && model != NULL, NULL);
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    TdmOptimizerOptions defaults;
    if (opts == NULL) {
        tdm_optimizer_options_init(&defaults);
        opts = &defaults;
    }
    g_autoptr(TdmParams) hparams = optimizer_hparams(name, opts, error);
    if (hparams == NULL) {
        return NULL;
    }
    name = tdm_params_get_name(hparams);
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_OPTIMIZER, name, error);
    if (f == NULL) {
        return NULL;
    }
    const TdmOptimizerClass *klass = tdm_feature_get_class(f);
    TdmOptimizer *opt = g_new0(TdmOptimizer, 1);
    opt->klass = klass;
    opt->opts = *opts;
    opt->hparams = g_steal_pointer(&hparams);
    opt->opts.hparams = opt->hparams;
    options_from_hparams(&opt->opts, opt->hparams);
    opt->lr = opt->opts.lr;
    opt->device = model->device;
    opt->params = g_ptr_array_new();
    opt->state = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify)tdm_tensor_unref);
    GPtrArray *src = params != NULL ? params : model->params;
    for (guint i = 0; i < src->len; i++) {
        TdmParam *p = g_ptr_array_index(src, i);
        if (!p->is_buffer && p->requires_grad) {
            g_ptr_array_add(opt->params, p);
        }
    }
    if (klass->init != NULL && !klass->init(opt, error)) {
        g_prefix_error(error, "optimizer %s: ", name);
        tdm_optimizer_free(opt);
        return NULL;
    }
    return opt;
}

gboolean tdm_optimizer_step(TdmOptimizer *opt, GError **error)
{
    g_return_val_if_fail(opt != NULL, FALSE);
    if (opt->opts.max_grad_norm > 0.0f &&
        !tdm_optimizer_clip_grads(opt, fused_grad_run(opt), error)) {
        return FALSE;
    }
    if (!opt->klass->step(opt, error)) {
        return FALSE;
    }
    opt->step_count++;
    return TRUE;
}

/* One step, then zero every gradient of `model`: the same as
 * tdm_optimizer_step() followed by tdm_model_zero_grad(), through the
 * update-and-zero front end (one pass over the gradients where the backend
 * has the fused op) when a built-in optimizer updates the model's whole
 * grad arena in one call. */
gboolean tdm_optimizer_step_zero_grad(TdmOptimizer *opt, TdmModel *model, GError **error)
{
    g_return_val_if_fail(opt != NULL && model != NULL, FALSE);
    OptimPriv *op = NULL;
    if ((opt->klass == &tdm_sgd_class || opt->klass == &tdm_adamw_class) && opt->priv != NULL) {
        op = opt->priv;
        if (op->whole_model != model) {
            op = NULL;
        }
    }
    if (op != NULL) {
        op->zero_grad = TRUE;
        op->zeroed = FALSE;
    }
    gboolean ok = tdm_optimizer_step(opt, error);
    gboolean zeroed = op != NULL && op->zeroed;
    if (op != NULL) {
        op->zero_grad = FALSE;
        op->zeroed = FALSE;
    }
    return ok && (zeroed || tdm_model_zero_grad(model, error));
}

void tdm_optimizer_free(TdmOptimizer *opt)
{
    if (opt == NULL) {
        return;
    }
    if (opt->klass->finalize != NULL) {
        opt->klass->finalize(opt);
    }
    tdm_optimizer_core_free(opt);
    g_hash_table_unref(opt->state);
    g_ptr_array_unref(opt->params);
    tdm_params_unref(opt->hparams);
    g_free(opt);
}

/* SPDX-License-Identifier: MIT */
/* examples/plugin/sign-sgd.c - an out-of-tree Tandem plugin: signSGD.
 *
 * A third party builds this file against the installed headers only
 * (`pkg-config --cflags --libs tandem-1`) into libtdm-example.so. Its init
 * registers one OPTIMIZER feature, "example-sign-sgd", which updates each
 * parameter by the sign of its gradient (Bernstein et al., 2018):
 *
 *     g' = g + weight_decay * p
 *     m  = momentum * m + (1 - momentum) * g'    (m = g' when momentum = 0)
 *     p -= lr * sign(m)
 *
 * With momentum this is "Signum". No backend has a sign op, so the update
 * goes through the host: tdm_tensor_read() / tdm_tensor_write() hand over
 * plain f32 data whatever the device, which is how any plugin can add an
 * optimizer without writing a kernel per backend. The momentum buffer is an
 * optimizer state tensor ("<param>.momentum_buffer"), so checkpoints keep it.
 */
#include <tandem/tandem.h>

/* Host scratch buffers, sized once for the largest parameter. */
typedef struct {
    float *value;
    float *grad;
    float *momentum;
    int64_t capacity; /* elements */
} SignSgdState;

static gboolean sign_sgd_init(TdmOptimizer *opt, GError **error)
{
    SignSgdState *st;
    int64_t largest = 0;

    if (opt->opts.momentum < 0.0f || opt->opts.momentum >= 1.0f) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "example-sign-sgd: momentum %g is outside [0, 1)", opt->opts.momentum);
        return FALSE;
    }
    for (guint i = 0; i < opt->params->len; i++) {
        TdmParam *p = g_ptr_array_index(opt->params, i);
        largest = MAX(largest, tdm_tensor_numel(p->value));
    }
    st = g_new0(SignSgdState, 1);
    st->capacity = largest;
    st->value = g_new(float, MAX(largest, 1));
    st->grad = g_new(float, MAX(largest, 1));
    st->momentum = g_new(float, MAX(largest, 1));
    opt->priv = st;
    return TRUE;
}

static float sign_of(float x)
{
    return (float)((x > 0.0f) - (x < 0.0f));
}

static gboolean sign_sgd_update(TdmOptimizer *opt, TdmParam *p, GError **error)
{
    SignSgdState *st = opt->priv;
    const float lr = opt->lr;
    const float wd = opt->opts.weight_decay;
    const float beta = opt->opts.momentum;
    int64_t n = tdm_tensor_numel(p->value);
    TdmTensor *buf = NULL;

    if (n > st->capacity) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "example-sign-sgd: parameter %s has %" G_GINT64_FORMAT
                    " elements, more than at init (%" G_GINT64_FORMAT ")",
                    p->full_name, n, st->capacity);
        return FALSE;
    }
    if (!tdm_tensor_read(p->value, st->value, error) ||
        !tdm_tensor_read(p->grad, st->grad, error)) {
        return FALSE;
    }
    if (beta > 0.0f) {
        buf = tdm_optimizer_state(opt, p, "momentum_buffer", error);
        if (buf == NULL || !tdm_tensor_read(buf, st->momentum, error)) {
            return FALSE;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        float g = st->grad[i] + wd * st->value[i];
        if (buf != NULL) {
            /* The first step starts the average at the gradient itself. */
            g = opt->step_count == 0 ? g : beta * st->momentum[i] + (1.0f - beta) * g;
            st->momentum[i] = g;
        }
        st->value[i] -= lr * sign_of(g);
    }
    if (buf != NULL && !tdm_tensor_write(buf, st->momentum, error)) {
        return FALSE;
    }
    return tdm_tensor_write(p->value, st->value, error);
}

static gboolean sign_sgd_step(TdmOptimizer *opt, GError **error)
{
    for (guint i = 0; i < opt->params->len; i++) {
        TdmParam *p = g_ptr_array_index(opt->params, i);
        if (p->requires_grad && p->grad != NULL && !sign_sgd_update(opt, p, error)) {
            return FALSE;
        }
    }
    return TRUE;
}

static void sign_sgd_finalize(TdmOptimizer *opt)
{
    SignSgdState *st = opt->priv;
    if (st != NULL) {
        g_free(st->value);
        g_free(st->grad);
        g_free(st->momentum);
        g_free(st);
        opt->priv = NULL;
    }
}

static const TdmOptimizerClass sign_sgd_class = {
    TDM_CLASS_HEADER(TDM_OPTIMIZER_IFACE_VERSION, TdmOptimizerClass),
    .init = sign_sgd_init,
    .step = sign_sgd_step,
    .finalize = sign_sgd_finalize,
};

/* "example-sign-sgd momentum=0.9" (--optimizer) or the optim.* config keys
 * of the same names set these; the core checks them against the ranges
 * given here and copies them into opt->opts (a key of the optimizer's own
 * would be read with tdm_params_get_float(opt->hparams, "key")). */
static const TdmParamSpec sign_sgd_params[] = {
    TDM_PARAM_SPEC_FLOAT("lr", 0, "0.01", 0, 1e6,
                         "step size: every weight moves by exactly lr per step"),
    TDM_PARAM_SPEC_FLOAT("momentum", 0, "0", 0, 1,
                         "averaging factor of the gradient before its sign (Signum)"),
    TDM_PARAM_SPEC_FLOAT("weight_decay", 0, "0", 0, 1e6, "L2 penalty added to the gradient"),
    TDM_PARAM_SPEC_END,
};

static gboolean example_init(TdmPlugin *plugin, GError **error)
{
    /* Priority 0: an optimizer is always chosen by name, never by rank. */
    return tdm_plugin_add_feature(plugin, TDM_FEATURE_OPTIMIZER, "example-sign-sgd", 0,
                                  &sign_sgd_class,
                                  "signSGD / Signum: p -= lr * sign(gradient), on any backend",
                                  sign_sgd_params, NULL, error) != NULL;
}

TDM_PLUGIN_DEFINE(example, "MIT",
                  "Example out-of-tree plugin: the signSGD optimizer", "Tandem examples/plugin",
                  example_init)

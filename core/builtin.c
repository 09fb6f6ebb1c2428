/* SPDX-License-Identifier: MIT */
/* core/builtin.c - the built-in "core" plugin: the layers, containers and
 * optimizers that ship inside libtandem-1.
 *
 * They register through the same tdm_plugin_add_feature() call as any
 * plugin, so tdm_registry_find(TDM_FEATURE_MODULE, "conv2d") and `tandem
 * inspect conv2d` treat them like everything else, and a plugin may add
 * layers or optimizers beside them (never under the same name). The
 * parameter lists document the option names configs use; they follow
 * PyTorch's argument names and the defaults of the tdm_*_new() constructors
 * and tdm_optimizer_options_init(). Modules and optimizers are always chosen
 * by name, so their priority only orders listings.
 */
#include "config.h"

#include <math.h>

#include "internal.h"

#define BUILTIN_PRIORITY 0

#define REQ TDM_PARAM_REQUIRED
#define INF INFINITY

static const TdmParamSpec linear_params[] = {
    TDM_PARAM_SPEC_INT("in_features", REQ, NULL, 1, INF, "size of each input sample"),
    TDM_PARAM_SPEC_INT("out_features", REQ, NULL, 1, INF, "size of each output sample"),
    TDM_PARAM_SPEC_BOOL("bias", 0, "true", "learn an additive bias"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec conv2d_params[] = {
    TDM_PARAM_SPEC_INT("in_channels", REQ, NULL, 1, INF, "channels of the input image"),
    TDM_PARAM_SPEC_INT("out_channels", REQ, NULL, 1, INF, "channels produced by the convolution"),
    TDM_PARAM_SPEC_INT("kernel_size", REQ, NULL, 1, INF, "size of the square kernel"),
    TDM_PARAM_SPEC_INT("stride", 0, "1", 1, INF, "stride of the convolution"),
    TDM_PARAM_SPEC_INT("padding", 0, "0", 0, INF, "zero padding added to each side"),
    TDM_PARAM_SPEC_BOOL("bias", 0, "true", "learn an additive bias"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec batchnorm2d_params[] = {
    TDM_PARAM_SPEC_INT("num_features", REQ, NULL, 1, INF, "channels C of an [N, C, H, W] input"),
    TDM_PARAM_SPEC_FLOAT("eps", 0, "1e-5", 0, INF, "added to the variance for numerical stability"),
    TDM_PARAM_SPEC_FLOAT("momentum", 0, "0.1", 0, 1,
                         "weight of the batch statistics in the running ones"),
    TDM_PARAM_SPEC_END,
};

/* The window of MaxPool2d and AvgPool2d; each says what its padding is. */
#define POOL_WINDOW_PARAMS                                                                         \
    TDM_PARAM_SPEC_INT("kernel_size", REQ, NULL, 1, INF, "size of the square window"),             \
    TDM_PARAM_SPEC_INT("stride", 0, NULL, 1, INF, "stride of the window (default: kernel_size)")

static const TdmParamSpec maxpool2d_params[] = {
    POOL_WINDOW_PARAMS,
    TDM_PARAM_SPEC_INT("padding", 0, "0", 0, INF,
                       "implicit negative-infinity padding on each side"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec avgpool2d_params[] = {
    POOL_WINDOW_PARAMS,
    TDM_PARAM_SPEC_INT("padding", 0, "0", 0, INF,
                       "implicit zero padding on each side (counted in the average)"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec adaptive_avgpool2d_params[] = {
    TDM_PARAM_SPEC_INTS("output_size", 0, "1,1", 2, 2, 1, INF,
                        "output height and width; 1,1 is global average pooling"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec dropout_params[] = {
    TDM_PARAM_SPEC_FLOAT("p", 0, "0.5", 0, 1, "probability of zeroing an element during training"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec residual_params[] = {
    TDM_PARAM_SPEC_BOOL("relu_after", 0, "true", "apply ReLU to the sum of body and shortcut"),
    TDM_PARAM_SPEC_END,
};

/* The optimizers' ranges are those of the optim.* configuration keys,
 * which core/optim.c applies through these same specs. */
static const TdmParamSpec sgd_params[] = {
    TDM_PARAM_SPEC_FLOAT("lr", 0, "0.01", 0, 1e6, "learning rate"),
    TDM_PARAM_SPEC_FLOAT("momentum", 0, "0", 0, 1, "momentum factor"),
    TDM_PARAM_SPEC_FLOAT("dampening", 0, "0", 0, 1, "dampening of the momentum"),
    TDM_PARAM_SPEC_BOOL("nesterov", 0, "false", "use Nesterov momentum"),
    TDM_PARAM_SPEC_FLOAT("weight_decay", 0, "0", 0, 1e6, "L2 penalty added to the gradient"),
    TDM_PARAM_SPEC_END,
};

static const TdmParamSpec adamw_params[] = {
    TDM_PARAM_SPEC_FLOAT("lr", 0, "0.01", 0, 1e6, "learning rate"),
    TDM_PARAM_SPEC_FLOAT("beta1", TDM_PARAM_MAX_EXCLUSIVE, "0.9", 0, 1,
                         "decay of the running average of the gradient"),
    TDM_PARAM_SPEC_FLOAT("beta2", TDM_PARAM_MAX_EXCLUSIVE, "0.999", 0, 1,
                         "decay of the running average of its square"),
    TDM_PARAM_SPEC_FLOAT("eps", TDM_PARAM_MIN_EXCLUSIVE, "1e-8", 0, 1,
                         "added to the denominator for numerical stability"),
    TDM_PARAM_SPEC_FLOAT("weight_decay", 0, "0", 0, 1e6, "decoupled weight decay"),
    TDM_PARAM_SPEC_END,
};

#undef POOL_WINDOW_PARAMS
#undef REQ
#undef INF

typedef struct {
    TdmFeatureKind kind;
    const char *name;
    gconstpointer klass;
    const char *description;
    const TdmParamSpec *params;
} BuiltinFeature;

static const BuiltinFeature features[] = {
    {TDM_FEATURE_MODULE, "linear", &tdm_linear_class, "fully connected layer: y = x W^T + b",
     linear_params},
    {TDM_FEATURE_MODULE, "conv2d", &tdm_conv2d_class, "2-D convolution over NCHW images",
     conv2d_params},
    {TDM_FEATURE_MODULE, "batchnorm2d", &tdm_batchnorm2d_class,
     "batch normalisation per channel with running statistics", batchnorm2d_params},
    {TDM_FEATURE_MODULE, "relu", &tdm_relu_class, "rectified linear unit: max(x, 0)", NULL},
    {TDM_FEATURE_MODULE, "maxpool2d", &tdm_maxpool2d_class, "2-D max pooling", maxpool2d_params},
    {TDM_FEATURE_MODULE, "avgpool2d", &tdm_avgpool2d_class, "2-D average pooling",
     avgpool2d_params},
    {TDM_FEATURE_MODULE, "adaptive-avgpool2d", &tdm_adaptive_avgpool2d_class,
     "2-D average pooling to a fixed output size", adaptive_avgpool2d_params},
    {TDM_FEATURE_MODULE, "flatten", &tdm_flatten_class,
     "flattens every dimension but the batch one", NULL},
    {TDM_FEATURE_MODULE, "dropout", &tdm_dropout_class,
     "zeroes elements at random during training (inverted dropout)", dropout_params},
    {TDM_FEATURE_MODULE, "sequential", &tdm_sequential_class,
     "container running its children in order", NULL},
    {TDM_FEATURE_MODULE, "residual", &tdm_residual_class,
     "residual block: body(x) + shortcut(x) (identity by default), optional ReLU", residual_params},
    {TDM_FEATURE_OPTIMIZER, "sgd", &tdm_sgd_class,
     "stochastic gradient descent with momentum, Nesterov and weight decay (PyTorch's SGD)",
     sgd_params},
    {TDM_FEATURE_OPTIMIZER, "adamw", &tdm_adamw_class,
     "Adam with decoupled weight decay (PyTorch's AdamW)", adamw_params},
};

gboolean tdm_builtin_init(TdmPlugin *plugin, GError **error)
{
    for (gsize i = 0; i < G_N_ELEMENTS(features); i++) {
        const BuiltinFeature *b = &features[i];
        if (tdm_plugin_add_feature(plugin, b->kind, b->name, BUILTIN_PRIORITY, b->klass,
                                   b->description, b->params, NULL, error) == NULL) {
            return FALSE;
        }
    }
    return TRUE;
}

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

#include "internal.h"

#define BUILTIN_PRIORITY 0

static const TdmParamSpec linear_params[] = {
    {"in_features", "int", NULL, "size of each input sample"},
    {"out_features", "int", NULL, "size of each output sample"},
    {"bias", "bool", "true", "learn an additive bias"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec conv2d_params[] = {
    {"in_channels", "int", NULL, "channels of the input image"},
    {"out_channels", "int", NULL, "channels produced by the convolution"},
    {"kernel_size", "int", NULL, "size of the square kernel"},
    {"stride", "int", "1", "stride of the convolution"},
    {"padding", "int", "0", "zero padding added to each side"},
    {"bias", "bool", "true", "learn an additive bias"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec batchnorm2d_params[] = {
    {"num_features", "int", NULL, "channels C of an [N, C, H, W] input"},
    {"eps", "float", "1e-5", "added to the variance for numerical stability"},
    {"momentum", "float", "0.1", "weight of the batch statistics in the running ones"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec maxpool2d_params[] = {
    {"kernel_size", "int", NULL, "size of the square window"},
    {"stride", "int", "kernel_size", "stride of the window"},
    {"padding", "int", "0", "implicit negative-infinity padding on each side"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec avgpool2d_params[] = {
    {"kernel_size", "int", NULL, "size of the square window"},
    {"stride", "int", "kernel_size", "stride of the window"},
    {"padding", "int", "0", "implicit zero padding on each side (counted in the average)"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec adaptive_avgpool2d_params[] = {
    {"output_size", "list", "1,1", "output height and width; 1,1 is global average pooling"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec dropout_params[] = {
    {"p", "float", "0.5", "probability of zeroing an element during training"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec residual_params[] = {
    {"relu_after", "bool", "true", "apply ReLU to the sum of body and shortcut"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec sgd_params[] = {
    {"lr", "float", "0.01", "learning rate"},
    {"momentum", "float", "0", "momentum factor"},
    {"dampening", "float", "0", "dampening of the momentum"},
    {"nesterov", "bool", "false", "use Nesterov momentum"},
    {"weight_decay", "float", "0", "L2 penalty added to the gradient"},
    {NULL, NULL, NULL, NULL},
};

static const TdmParamSpec adamw_params[] = {
    {"lr", "float", "0.01", "learning rate"},
    {"beta1", "float", "0.9", "decay of the running average of the gradient"},
    {"beta2", "float", "0.999", "decay of the running average of its square"},
    {"eps", "float", "1e-8", "added to the denominator for numerical stability"},
    {"weight_decay", "float", "0", "decoupled weight decay"},
    {NULL, NULL, NULL, NULL},
};

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

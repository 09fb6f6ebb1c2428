/* SPDX-License-Identifier: MIT */
/* core/zoo.c - the built-in model zoo: mlp, lenet, the CIFAR-style resnet8 /
 * resnet20 and torchvision's resnet18 / resnet34 (BasicBlock) and resnet50
 * (Bottleneck), built from the core's layers with exactly the PyTorch
 * architectures and state-dict names, so weights move between Tandem and
 * PyTorch and the oracle tests can compare them layer by layer. The VGGs and
 * AlexNet live in core/zoo-vgg.c; the list of names is here.
 */
#include "config.h"

#include <string.h>

#include "zoo-private.h"

#define BN_EPS TDM_ZOO_BN_EPS
#define BN_MOMENTUM TDM_ZOO_BN_MOMENTUM
/* torchvision's ImageNet ResNets have four stages, layer1..layer4. */
#define RESNET_STAGES 4
/* A child's name: a block's index or "layerN". */
#define CHILD_NAME_LEN 16
/* A Bottleneck's output has 4 times the channels of its 3x3 convolution. */
#define BOTTLENECK_EXPANSION 4

static const char *const zoo_names[] = {"mlp",      "lenet",    "resnet8",  "resnet20",
                                        "resnet18", "resnet34", "resnet50", "vgg11",
                                        "vgg16",    "vgg16_bn", "alexnet",  NULL};

const char *const *tdm_model_zoo_names(void)
{
    return zoo_names;
}

static TdmModule *build_mlp(int c, int size, int classes)
{
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc1", tdm_linear_new(c * size * size, 512, TRUE));
    tdm_module_add_child(m, "relu1", tdm_relu_new());
    tdm_module_add_child(m, "fc2", tdm_linear_new(512, 256, TRUE));
    tdm_module_add_child(m, "relu2", tdm_relu_new());
    tdm_module_add_child(m, "fc3", tdm_linear_new(256, classes, TRUE));
    return m;
}

static TdmModule *build_lenet(int c, int size, int classes, GError **error)
{
    /* conv1 keeps the size (padding 2), pool halves, conv2 (5x5) takes 4. */
    int s = ((size / 2) - 4) / 2;
    if (size / 2 - 4 < 2) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "lenet: image size %d is too small (at least 12)", size);
        return NULL;
    }
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "conv1", tdm_conv2d_new(c, 6, 5, 1, 2, TRUE));
    tdm_module_add_child(m, "relu1", tdm_relu_new());
    tdm_module_add_child(m, "pool1", tdm_maxpool2d_new(2, 2, 0));
    tdm_module_add_child(m, "conv2", tdm_conv2d_new(6, 16, 5, 1, 0, TRUE));
    tdm_module_add_child(m, "relu2", tdm_relu_new());
    tdm_module_add_child(m, "pool2", tdm_maxpool2d_new(2, 2, 0));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc1", tdm_linear_new(16 * s * s, 120, TRUE));
    tdm_module_add_child(m, "relu3", tdm_relu_new());
    tdm_module_add_child(m, "fc2", tdm_linear_new(120, 84, TRUE));
    tdm_module_add_child(m, "relu4", tdm_relu_new());
    tdm_module_add_child(m, "fc3", tdm_linear_new(84, classes, TRUE));
    return m;
}

/* convN (k x k, padding k / 2, no bias) and bnN, appended to `seq`. */
static void add_conv_bn(TdmModule *seq, int n, int in, int out, int k, int stride)
{
    char conv[CHILD_NAME_LEN], bn[CHILD_NAME_LEN];
    g_snprintf(conv, sizeof conv, "conv%d", n);
    g_snprintf(bn, sizeof bn, "bn%d", n);
    tdm_module_add_child(seq, conv, tdm_conv2d_new(in, out, k, stride, k / 2, FALSE));
    tdm_module_add_child(seq, bn, tdm_batchnorm2d_new(out, BN_EPS, BN_MOMENTUM));
}

/* `body` plus its shortcut, then relu: torchvision's downsample (a 1x1
 * convolution and batch norm) when the shape changes. */
static TdmModule *block_with_shortcut(TdmModule *body, int in, int out, int stride)
{
    TdmModule *shortcut = NULL;
    if (stride != 1 || in != out) {
        shortcut = tdm_sequential_new();
        tdm_module_add_child(shortcut, "0", tdm_conv2d_new(in, out, 1, stride, 0, FALSE));
        tdm_module_add_child(shortcut, "1", tdm_batchnorm2d_new(out, BN_EPS, BN_MOMENTUM));
    }
    return tdm_residual_new(body, shortcut, TRUE);
}

/* torchvision's BasicBlock: conv-bn-relu-conv-bn (+ shortcut), relu. */
static TdmModule *basic_block(int in, int out, int stride)
{
    TdmModule *body = tdm_sequential_new();
    add_conv_bn(body, 1, in, out, 3, stride);
    tdm_module_add_child(body, "relu", tdm_relu_new());
    add_conv_bn(body, 2, out, out, 3, 1);
    return block_with_shortcut(body, in, out, stride);
}

/* torchvision's Bottleneck (v1.5: the stride is in the 3x3 convolution):
 * conv1x1-bn-relu, conv3x3-bn-relu, conv1x1-bn (+ shortcut), relu; `width`
 * is the 3x3's channels, the output has BOTTLENECK_EXPANSION times more. */
static TdmModule *bottleneck_block(int in, int width, int stride)
{
    int out = width * BOTTLENECK_EXPANSION;
    TdmModule *body = tdm_sequential_new();
    add_conv_bn(body, 1, in, width, 1, 1);
    tdm_module_add_child(body, "relu1", tdm_relu_new());
    add_conv_bn(body, 2, width, width, 3, stride);
    tdm_module_add_child(body, "relu2", tdm_relu_new());
    add_conv_bn(body, 3, width, out, 1, 1);
    return block_with_shortcut(body, in, out, stride);
}

/* `blocks` blocks of `width` (the first with `stride`) after *in channels;
 * *in becomes the stage's output channels. */
static TdmModule *resnet_stage(int *in, int width, int blocks, int stride, gboolean bottleneck)
{
    TdmModule *stage = tdm_sequential_new();
    for (int i = 0; i < blocks; i++) {
        char name[CHILD_NAME_LEN];
        int s = i == 0 ? stride : 1;
        g_snprintf(name, sizeof name, "%d", i);
        tdm_module_add_child(
            stage, name, bottleneck ? bottleneck_block(*in, width, s) : basic_block(*in, width, s));
        *in = bottleneck ? width * BOTTLENECK_EXPANSION : width;
    }
    return stage;
}

static void resnet_head(TdmModule *m, int features, int classes)
{
    tdm_module_add_child(m, "avgpool", tdm_adaptive_avgpool2d_new(1, 1));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc", tdm_linear_new(features, classes, TRUE));
}

/* CIFAR-style ResNet (He et al. 2016, section 4.2) with 3 stages. */
static TdmModule *build_cifar_resnet(int c, int classes, int blocks)
{
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "conv1", tdm_conv2d_new(c, 16, 3, 1, 1, FALSE));
    tdm_module_add_child(m, "bn1", tdm_batchnorm2d_new(16, BN_EPS, BN_MOMENTUM));
    tdm_module_add_child(m, "relu", tdm_relu_new());
    int in = 16;
    tdm_module_add_child(m, "layer1", resnet_stage(&in, 16, blocks, 1, FALSE));
    tdm_module_add_child(m, "layer2", resnet_stage(&in, 32, blocks, 2, FALSE));
    tdm_module_add_child(m, "layer3", resnet_stage(&in, 64, blocks, 2, FALSE));
    resnet_head(m, 64, classes);
    return m;
}

/* torchvision.models.resnet18 / resnet34 (BasicBlock), resnet50 (Bottleneck). */
static TdmModule *build_imagenet_resnet(int c, int classes, const int blocks[RESNET_STAGES],
                                        gboolean bottleneck)
{
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "conv1", tdm_conv2d_new(c, 64, 7, 2, 3, FALSE));
    tdm_module_add_child(m, "bn1", tdm_batchnorm2d_new(64, BN_EPS, BN_MOMENTUM));
    tdm_module_add_child(m, "relu", tdm_relu_new());
    tdm_module_add_child(m, "maxpool", tdm_maxpool2d_new(3, 2, 1));
    int in = 64;
    static const int widths[RESNET_STAGES] = {64, 128, 256, 512};
    for (int i = 0; i < RESNET_STAGES; i++) {
        char name[CHILD_NAME_LEN];
        g_snprintf(name, sizeof name, "layer%d", i + 1);
        tdm_module_add_child(m, name,
                             resnet_stage(&in, widths[i], blocks[i], i == 0 ? 1 : 2, bottleneck));
    }
    resnet_head(m, in, classes);
    return m;
}

TdmModule *tdm_model_zoo_create(const char *name, const TdmModelConfig *cfg, GError **error)
{
    g_return_val_if_fail(name != NULL, NULL);
    int c = cfg != NULL && cfg->in_channels > 0 ? cfg->in_channels : 1;
    int classes = cfg != NULL && cfg->num_classes > 0 ? cfg->num_classes : 10;
    int size = cfg != NULL && cfg->image_size > 0 ? cfg->image_size : 28;
    if (cfg != NULL && (cfg->in_channels < 0 || cfg->num_classes < 0 || cfg->image_size < 0)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "model %s: negative in_channels (%d), num_classes (%d) or image_size (%d)",
                    name, cfg->in_channels, cfg->num_classes, cfg->image_size);
        return NULL;
    }
    if (strcmp(name, "mlp") == 0) {
        return build_mlp(c, size, classes);
    }
    if (strcmp(name, "lenet") == 0) {
        return build_lenet(c, size, classes, error);
    }
    if (strcmp(name, "resnet8") == 0) {
        return build_cifar_resnet(c, classes, 1);
    }
    if (strcmp(name, "resnet20") == 0) {
        return build_cifar_resnet(c, classes, 3);
    }
    if (strcmp(name, "resnet18") == 0) {
        static const int blocks[RESNET_STAGES] = {2, 2, 2, 2};
        return build_imagenet_resnet(c, classes, blocks, FALSE);
    }
    if (strcmp(name, "resnet34") == 0) {
        static const int blocks[RESNET_STAGES] = {3, 4, 6, 3};
        return build_imagenet_resnet(c, classes, blocks, FALSE);
    }
    if (strcmp(name, "resnet50") == 0) {
        static const int blocks[RESNET_STAGES] = {3, 4, 6, 3};
        return build_imagenet_resnet(c, classes, blocks, TRUE);
    }
    TdmModule *m =
        tdm_zoo_build_vgg_family(name, c, cfg != NULL ? cfg->image_size : 0, classes, error);
    if (m != NULL || (error != NULL && *error != NULL)) {
        return m;
    }
    g_autofree char *known = g_strjoinv(", ", (char **)zoo_names);
    g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND, "unknown model '%s' (known: %s)", name,
                known);
    return NULL;
}

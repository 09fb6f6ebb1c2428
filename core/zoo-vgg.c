/* SPDX-License-Identifier: MIT */
/* core/zoo-vgg.c - the zoo's plain convolutional classifiers, exactly as
 * torchvision 0.14 defines them: vgg11 (configuration "A"), vgg16 ("D"),
 * vgg16_bn ("D" with a BatchNorm2d after every convolution) and alexnet.
 *
 * Each is a Sequential of "features" (numbered children: their indices are
 * torchvision's, so "features.3.weight" is the same tensor in both),
 * "avgpool" (AdaptiveAvgPool2d to 7x7 for VGG, 6x6 for AlexNet, which also
 * upsamples the feature map of a small image, as torchvision's does), a
 * Flatten and "classifier" (Linear, ReLU and Dropout(0.5) with torchvision's
 * indices). A torchvision state dict therefore loads strictly, and the
 * in_channels / num_classes settings change only the first convolution and
 * the last Linear.
 */
#include "config.h"

#include <string.h>

#include "zoo-private.h"

/* A child's name: its index in a torchvision Sequential. */
#define CHILD_NAME_LEN 16
/* In a VGG configuration: a 2x2 max pool instead of a convolution. */
#define VGG_POOL 0
#define VGG_HIDDEN 4096
#define VGG_POOLED 7
#define ALEXNET_POOLED 6
#define DROPOUT_P 0.5f
/* The smallest images the feature extractors take: VGG halves the size 5
 * times; AlexNet's 11x11 stride-4 convolution and three 3x3 stride-2 max
 * pools need 63 pixels to leave one. */
#define VGG_MIN_SIZE 32
#define ALEXNET_MIN_SIZE 63

/* One entry per torchvision layer, the pools where they are. */
/* clang-format off */
static const int vgg_a[] = {64,  VGG_POOL, 128, VGG_POOL, 256, 256, VGG_POOL,
                            512, 512,      VGG_POOL,      512, 512, VGG_POOL, -1};
static const int vgg_d[] = {64,  64,  VGG_POOL, 128, 128, VGG_POOL, 256, 256,      256, VGG_POOL,
                            512, 512, 512,      VGG_POOL,           512, 512, 512, VGG_POOL, -1};
/* clang-format on */

/* Appends `child` to the numbered Sequential `seq` under the next index. */
static void add_numbered(TdmModule *seq, int *index, TdmModule *child)
{
    char name[CHILD_NAME_LEN];
    g_snprintf(name, sizeof name, "%d", (*index)++);
    tdm_module_add_child(seq, name, child);
}

static TdmModule *vgg_features(int c, const int *cfg, gboolean batch_norm)
{
    TdmModule *f = tdm_sequential_new();
    int index = 0;
    for (int i = 0; cfg[i] >= 0; i++) {
        if (cfg[i] == VGG_POOL) {
            add_numbered(f, &index, tdm_maxpool2d_new(2, 2, 0));
            continue;
        }
        add_numbered(f, &index, tdm_conv2d_new(c, cfg[i], 3, 1, 1, TRUE));
        if (batch_norm) {
            add_numbered(f, &index,
                         tdm_batchnorm2d_new(cfg[i], TDM_ZOO_BN_EPS, TDM_ZOO_BN_MOMENTUM));
        }
        add_numbered(f, &index, tdm_relu_new());
        c = cfg[i];
    }
    return f;
}

/* avgpool, flatten and the classifier after `features`. */
static TdmModule *classifier_model(TdmModule *features, int pooled, TdmModule *classifier)
{
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "features", features);
    tdm_module_add_child(m, "avgpool", tdm_adaptive_avgpool2d_new(pooled, pooled));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "classifier", classifier);
    return m;
}

static TdmModule *build_vgg(int c, int classes, const int *cfg, gboolean batch_norm)
{
    TdmModule *cl = tdm_sequential_new();
    int i = 0;
    add_numbered(cl, &i, tdm_linear_new(512 * VGG_POOLED * VGG_POOLED, VGG_HIDDEN, TRUE));
    add_numbered(cl, &i, tdm_relu_new());
    add_numbered(cl, &i, tdm_dropout_new(DROPOUT_P));
    add_numbered(cl, &i, tdm_linear_new(VGG_HIDDEN, VGG_HIDDEN, TRUE));
    add_numbered(cl, &i, tdm_relu_new());
    add_numbered(cl, &i, tdm_dropout_new(DROPOUT_P));
    add_numbered(cl, &i, tdm_linear_new(VGG_HIDDEN, classes, TRUE));
    return classifier_model(vgg_features(c, cfg, batch_norm), VGG_POOLED, cl);
}

static TdmModule *build_alexnet(int c, int classes)
{
    TdmModule *f = tdm_sequential_new();
    int i = 0;
    add_numbered(f, &i, tdm_conv2d_new(c, 64, 11, 4, 2, TRUE));
    add_numbered(f, &i, tdm_relu_new());
    add_numbered(f, &i, tdm_maxpool2d_new(3, 2, 0));
    add_numbered(f, &i, tdm_conv2d_new(64, 192, 5, 1, 2, TRUE));
    add_numbered(f, &i, tdm_relu_new());
    add_numbered(f, &i, tdm_maxpool2d_new(3, 2, 0));
    add_numbered(f, &i, tdm_conv2d_new(192, 384, 3, 1, 1, TRUE));
    add_numbered(f, &i, tdm_relu_new());
    add_numbered(f, &i, tdm_conv2d_new(384, 256, 3, 1, 1, TRUE));
    add_numbered(f, &i, tdm_relu_new());
    add_numbered(f, &i, tdm_conv2d_new(256, 256, 3, 1, 1, TRUE));
    add_numbered(f, &i, tdm_relu_new());
    add_numbered(f, &i, tdm_maxpool2d_new(3, 2, 0));
    TdmModule *cl = tdm_sequential_new();
    i = 0;
    add_numbered(cl, &i, tdm_dropout_new(DROPOUT_P));
    add_numbered(cl, &i, tdm_linear_new(256 * ALEXNET_POOLED * ALEXNET_POOLED, VGG_HIDDEN, TRUE));
    add_numbered(cl, &i, tdm_relu_new());
    add_numbered(cl, &i, tdm_dropout_new(DROPOUT_P));
    add_numbered(cl, &i, tdm_linear_new(VGG_HIDDEN, VGG_HIDDEN, TRUE));
    add_numbered(cl, &i, tdm_relu_new());
    add_numbered(cl, &i, tdm_linear_new(VGG_HIDDEN, classes, TRUE));
    return classifier_model(f, ALEXNET_POOLED, cl);
}

static gboolean check_size(const char *name, int size, int min, GError **error)
{
    if (size > 0 && size < min) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: image size %d is too small (at least %d: its max pools would leave "
                    "nothing)",
                    name, size, min);
        return FALSE;
    }
    return TRUE;
}

TdmModule *tdm_zoo_build_vgg_family(const char *name, int c, int size, int classes, GError **error)
{
    const int *cfg = NULL;
    gboolean batch_norm = FALSE;
    if (strcmp(name, "alexnet") == 0) {
        return check_size(name, size, ALEXNET_MIN_SIZE, error) ? build_alexnet(c, classes) : NULL;
    }
    if (strcmp(name, "vgg11") == 0) {
        cfg = vgg_a;
    } else if (strcmp(name, "vgg16") == 0) {
        cfg = vgg_d;
    } else if (strcmp(name, "vgg16_bn") == 0) {
        cfg = vgg_d;
        batch_norm = TRUE;
    } else {
        return NULL;
    }
    return check_size(name, size, VGG_MIN_SIZE, error) ? build_vgg(c, classes, cfg, batch_norm)
                                                       : NULL;
}

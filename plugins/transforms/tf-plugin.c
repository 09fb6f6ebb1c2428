/* SPDX-License-Identifier: MIT */
/* plugins/transforms/tf-plugin.c - the transforms plugin: registers every
 * augmentation transform as a TRANSFORM feature.
 *
 * One plugin, one feature per transform, each with its parameter specs so
 * that `tandem inspect NAME` lists what the pipeline string accepts. The
 * transforms themselves are grouped by concept: geometry.c (pad, crops,
 * flips), rotate.c, resize.c (resize, random-resized-crop), color.c
 * (color-jitter, normalize, to-tensor) and erasing.c (random-erasing).
 */
#include "tf.h"

static gboolean transforms_init(TdmPlugin *plugin, GError **error)
{
    const TfInfo *all[] = {
        &tf_pad_info,          &tf_random_crop_info,    &tf_center_crop_info,
        &tf_resize_info,       &tf_random_resized_crop_info, &tf_hflip_info,
        &tf_vflip_info,        &tf_rotate_info,         &tf_color_jitter_info,
        &tf_normalize_info,    &tf_to_tensor_info,      &tf_random_erasing_info,
    };
    for (gsize i = 0; i < G_N_ELEMENTS(all); i++) {
        if (tdm_plugin_add_feature(plugin, TDM_FEATURE_TRANSFORM, all[i]->name, 50, all[i]->klass,
                                   all[i]->description, all[i]->params, NULL, error) == NULL) {
            return FALSE;
        }
    }
    return TRUE;
}

TDM_PLUGIN_DEFINE(transforms, "MIT",
                  "Augmentation transforms with torchvision's names and parameters", "tandem",
                  transforms_init)

/* SPDX-License-Identifier: MIT */
/* core/zoo-private.h - how core/zoo.c, which holds the zoo's list of names
 * and its ResNets, reaches the families built in other files of the zoo
 * (core/zoo-vgg.c). Not installed.
 */
#ifndef TDM_CORE_ZOO_PRIVATE_H
#define TDM_CORE_ZOO_PRIVATE_H

#include "internal.h"

#define TDM_ZOO_BN_EPS 1e-5f
#define TDM_ZOO_BN_MOMENTUM 0.1f

/* torchvision's "vgg11", "vgg16", "vgg16_bn" or "alexnet" for c-channel
 * images of size x size (0: unknown, not checked) and `classes` classes;
 * NULL without an error when `name` is none of them. Transfer full. */
TdmModule *tdm_zoo_build_vgg_family(const char *name, int c, int size, int classes, GError **error);

#endif /* TDM_CORE_ZOO_PRIVATE_H */

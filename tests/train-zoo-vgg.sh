#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/train-zoo-vgg.sh - vgg11, vgg16 and vgg16_bn train a few steps on
# 32 px images (AdaptiveAvgPool2d upsamples their 1x1 feature maps to 7x7).
. "$TDM_TOP_SRCDIR/tests/train-zoo-lib.sh"

train_smoke vgg11 32
train_smoke vgg16 32
train_smoke vgg16_bn 32
done_testing

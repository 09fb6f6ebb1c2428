#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision-vgg16-bn.sh - against torchvision: vgg16_bn logits
# at 64 px in eval mode (running statistics).
cases="vgg16_bn-64"
. "${TDM_TOP_SRCDIR:?}/tests/oracle/torchvision.sh"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision-vgg16.sh - against torchvision: vgg16 logits at 96
# px (adaptive pooling upsamples 3x3 to 7x7).
cases="vgg16-96"
. "${TDM_TOP_SRCDIR:?}/tests/oracle/torchvision.sh"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision-vgg11.sh - against torchvision: vgg11 logits at 64
# px and every gradient at 32 px (adaptive pooling upsamples 2x2 and 1x1 to
# 7x7).
cases="vgg11-64 vgg11-grad-32"
. "${TDM_TOP_SRCDIR:?}/tests/oracle/torchvision.sh"

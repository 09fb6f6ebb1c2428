#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision-resnet50.sh - against torchvision: resnet50 logits
# at 224 px (eval) and at 64 px in train mode with every gradient.
cases="resnet50-224 resnet50-train-64"
. "${TDM_TOP_SRCDIR:?}/tests/oracle/torchvision.sh"

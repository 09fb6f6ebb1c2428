#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision-alexnet.sh - against torchvision: alexnet logits at
# 224 px (adaptive pooling is the identity at 6x6).
cases="alexnet-224"
. "${TDM_TOP_SRCDIR:?}/tests/oracle/torchvision.sh"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision-resnet18.sh - against torchvision: resnet18 (the
# articles' fine-tuning model) logits at 224 px from a torch.save .pth, and
# every gradient in train mode (batch statistics) at 64 px.
cases="resnet18-224 resnet18-train-64"
. "${TDM_TOP_SRCDIR:?}/tests/oracle/torchvision.sh"

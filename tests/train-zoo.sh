#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/train-zoo.sh - the zoo's torchvision models from the command line:
# `tandem train --help` and `tandem inspect` list them, resnet50 and alexnet
# train a few steps, and a VGG or AlexNet given images its max pools would
# reduce to nothing fails up front naming the model and the smallest size.
# The VGGs train in tests/train-zoo-vgg.sh.
. "$TDM_TOP_SRCDIR/tests/train-zoo-lib.sh"

"$TANDEM" train --help >"$tmp/help" 2>&1
for m in resnet50 vgg11 vgg16 vgg16_bn alexnet; do
    if grep -- '--model=NAME' "$tmp/help" | grep -qE "[:,] ${m}[,( ]"; then
        ok "train --help lists $m"
    else
        fail "train --help lists $m" "$(grep -- '--model' "$tmp/help")"
    fi
done

train_smoke resnet50 32
train_smoke alexnet 64

# Fashion-MNIST's 28 px are too small for vgg11 (32) and alexnet (63).
expect_error "vgg11 at 28 px is refused, naming the smallest size" \
    "vgg11: image size 28 is too small" "(at least 32:" -- \
    "$TANDEM" train --model vgg11 --limit 2 --no-eval --quiet
expect_error "alexnet at 32 px is refused, naming the smallest size" \
    "alexnet: image size 32 is too small" "(at least 63:" -- \
    "$TANDEM" train --model alexnet --limit 2 --no-eval --quiet --transforms "resize 32"
done_testing

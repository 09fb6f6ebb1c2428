#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/datasets-cli.sh - `tandem train` on CIFAR and image-folder data made
# by tests/make-fixtures.py: training runs on good data, named either way
# ("cifar10:DIR" or "cifar10 path=DIR key=value"), and each kind of bad
# input fails with a non-zero status and one error line on stderr naming the
# file (and the byte offset where one applies).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-datasets-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
py=${TORCH_PYTHON:-python3}
"$py" "$TDM_TOP_SRCDIR/tests/make-fixtures.py" cifar "$tmp" || skip_all "cannot make CIFAR fixtures"
images=yes
"$py" "$TDM_TOP_SRCDIR/tests/make-fixtures.py" images "$tmp" || images=no
[ -f "$TDM_PLUGIN_SYSTEM_PATH/libtdm-imagefolder.so" ] || images=no
common="--model mlp --device ref --epochs 1 --batch-size 2 --quiet"

# tandem_train ARGS...: `tandem train` with the options every case shares.
tandem_train() {
    "$TANDEM" train $common "$@"
}

# expect_fail NAME PATTERN... -- tandem_train ARGS...: fails (1 or 2) with a
# "tandem train: " line containing every PATTERN.
expect_fail() {
    n=$1; shift
    expect_error "$n" '^tandem train: ' "$@"
}

# expect_train NAME PATTERN ARGS...: `tandem train ARGS` succeeds and its
# stdout has a line matching PATTERN (a grep regular expression).
expect_train() {
    name=$1; pattern=$2; shift 2
    if tandem_train "$@" >"$tmp/out" 2>"$tmp/err" && grep -q "$pattern" "$tmp/out"; then
        ok "$name"
    else
        fail "$name" "$(cat "$tmp/out" "$tmp/err")"
    fi
}

# --- CIFAR ------------------------------------------------------------------
expect_train "train on CIFAR-10 files" '^summary: model mlp, 1 epoch, 5 images' \
    --dataset "cifar10:$tmp/cifar10"
expect_train "train on CIFAR-100 files" '^summary: model mlp, 1 epoch, 4 images' \
    --dataset "cifar:$tmp/cifar100"
# The grammar every feature shares opens the same data as KIND:PATH.
expect_train "train on --dataset \"cifar10 path=DIR\"" '^summary: model mlp, 1 epoch, 5 images' \
    --dataset "cifar10 path=$tmp/cifar10"
expect_train "train on --dataset \"cifar100 DIR label=coarse\"" \
    '^summary: model mlp, 1 epoch, 4 images' --dataset "cifar100 $tmp/cifar100 label=coarse"
expect_fail "a dataset parameter out of its choices" \
    "cifar100: label=medium: expected one of fine, coarse" -- tandem_train \
    --dataset "cifar100 path=$tmp/cifar100 label=medium"
mkdir "$tmp/trunc"
cp "$tmp/cifar10/"*.bin "$tmp/trunc/"
head -c 5000 "$tmp/cifar10/data_batch_1.bin" >"$tmp/trunc/data_batch_1.bin"
expect_fail "truncated CIFAR record" "$tmp/trunc/data_batch_1.bin" "truncated record 1" \
    "byte 3073" -- tandem_train --dataset "cifar10:$tmp/trunc"
expect_fail "CIFAR directory missing" "$tmp/nowhere" -- \
    tandem_train --dataset "cifar10:$tmp/nowhere"
expect_fail "CIFAR-100 files named as CIFAR-10" "$tmp/cifar100" "CIFAR-100" -- tandem_train \
    --dataset "cifar10:$tmp/cifar100"

# --- image folders -----------------------------------------------------------
if [ $images = yes ]; then
    expect_train "train on an image folder of one size" '^summary: model mlp, 1 epoch, 3 images' \
        --dataset "imagefolder:$tmp/splits,size=first"
    expect_train "train on --dataset \"imagefolder path=DIR size=first\"" \
        '^summary: model mlp, 1 epoch, 3 images' --dataset "imagefolder path=$tmp/splits size=first"
    expect_fail "imagefolder size= out of its choices" \
        "imagefolder: size=same: expected one of first, varying" -- tandem_train \
        --dataset "imagefolder $tmp/splits size=same"
    expect_fail "images of different sizes need a resize" "$tmp/good" "resize" -- tandem_train \
        --dataset "imagefolder:$tmp/good"
    # Mixed sizes with a pipeline that fixes the size: training runs, and the
    # evaluation split gets "resize | center-crop" sized like the pipeline.
    expect_train "train on images of different sizes with --transforms" \
        '^summary: model mlp, 1 epoch,.*test accuracy' --dataset "imagefolder:$tmp/good" \
        --workers 2 \
        --transforms "random-resized-crop 8 | hflip | normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25"
    expect_fail "corrupt PNG" "$tmp/bad-png/a/zz-broken.png" "PNG" -- tandem_train \
        --dataset "imagefolder:$tmp/bad-png"
    expect_fail "a .jpg that is not a JPEG" "$tmp/bad-jpg/b/photo.jpg" "not a JPEG" -- \
        tandem_train --dataset "imagefolder:$tmp/bad-jpg"
    expect_fail "empty class folder" "$tmp/empty-class/empty" -- tandem_train \
        --dataset "imagefolder:$tmp/empty-class"
    expect_fail "no class folders" "$tmp/no-classes" "no class folders" -- tandem_train \
        --dataset "imagefolder:$tmp/no-classes"
    expect_fail "image folder missing" "$tmp/nowhere" "no such dataset directory" -- tandem_train \
        --dataset "imagefolder:$tmp/nowhere"
else
    echo "# image-folder cases skipped (no PIL or no imagefolder plugin)"
fi
done_testing

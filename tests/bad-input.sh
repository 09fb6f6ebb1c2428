#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/bad-input.sh - `tandem train` / `tandem eval` on bad input: each case
# must fail with a non-zero status (not a crash) and one clear error line
# naming the file, key or parameter involved.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-bad-input-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
data="$TDM_TOP_SRCDIR/data/fashion-mnist"
common="--device ref --quiet --limit 128 --batch-size 64"

# expect_fail NAME PATTERN... -- COMMAND...: fails cleanly (1 or 2), with a
# "tandem <cmd>: " line on stderr that contains every PATTERN.
expect_fail() {
    n=$1; shift
    expect_error "$n" '^tandem [a-z]*: ' "$@"
}

# --- datasets ---------------------------------------------------------------
mkdir "$tmp/trunc-gz" "$tmp/trunc-raw" "$tmp/magic" "$tmp/corrupt-gz"
for d in trunc-gz trunc-raw magic corrupt-gz; do
    cp "$data"/*labels* "$data"/t10k-images-idx3-ubyte.gz "$tmp/$d/"
done
head -c 1000000 "$data/train-images-idx3-ubyte.gz" >"$tmp/trunc-gz/train-images-idx3-ubyte.gz"
expect_fail "truncated gzip IDX file" "$tmp/trunc-gz/train-images-idx3-ubyte.gz" "byte" -- \
    "$TANDEM" train $common --dataset "idx:$tmp/trunc-gz"

gzip -dc "$data/train-images-idx3-ubyte.gz" | head -c 500000 >"$tmp/trunc-raw/train-images-idx3-ubyte"
expect_fail "truncated raw IDX file" "$tmp/trunc-raw/train-images-idx3-ubyte" \
    "ends at byte 500000" "7840016" -- \
    "$TANDEM" train $common --dataset "idx:$tmp/trunc-raw"

{ printf '\000\000\010\001'; gzip -dc "$data/train-images-idx3-ubyte.gz" | tail -c +5; } \
    >"$tmp/magic/train-images-idx3-ubyte"
expect_fail "IDX file with a wrong magic" "$tmp/magic/train-images-idx3-ubyte" "magic" -- \
    "$TANDEM" train $common --dataset "idx:$tmp/magic"

# Damage the middle of the compressed stream (the gzip trailer stays valid):
# found lazily, while training reads the samples.
cp "$data/train-images-idx3-ubyte.gz" "$tmp/corrupt-gz/"
printf 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX' |
    dd of="$tmp/corrupt-gz/train-images-idx3-ubyte.gz" bs=1 seek=20000 conv=notrunc 2>/dev/null
expect_fail "corrupt gzip data" "$tmp/corrupt-gz/train-images-idx3-ubyte.gz" "byte" -- \
    "$TANDEM" train --device ref --quiet --no-eval --dataset "idx:$tmp/corrupt-gz"

expect_fail "wrong dataset path" "$tmp/no-such-dir" -- \
    "$TANDEM" train $common --dataset "idx:$tmp/no-such-dir"
expect_fail "unknown dataset name" "imagenet-42" -- \
    "$TANDEM" train $common --dataset imagenet-42

# --- model and config -------------------------------------------------------
expect_fail "unknown model name" "resnet999" -- \
    "$TANDEM" train $common --model resnet999
expect_fail "fewer classes than the labels" "model.num_classes is 5" "10 classes" -- \
    "$TANDEM" train $common --set model.num_classes=5
expect_fail "3 input channels for grey images" "model.in_channels is 3" "1 channel" -- \
    "$TANDEM" train $common --set model.in_channels=3
expect_fail "--set optim.lr=abc" "optim.lr" "abc" -- \
    "$TANDEM" train $common --set optim.lr=abc
expect_fail "--lr abc" "optim.lr" "abc" -- "$TANDEM" train $common --lr abc
expect_fail "negative batch size" "data.batch_size" "-5" -- \
    "$TANDEM" train --device ref --quiet --batch-size -5
expect_fail "negative --limit" "data.limit" "-3" ">= 0" -- \
    "$TANDEM" train --device ref --quiet --limit -3
# 10,000 samples of 1x16384x16384 (10 PiB): a batch larger than any
# machine's memory is refused before it is allocated (overcommit would grant
# it and the kernel kill the process when the loader fills it).
expect_fail "a batch larger than memory" "1x16384x16384" "GiB" "data.batch_size" -- \
    "$TANDEM" train --device ref --quiet --limit 10000 --batch-size 10000 \
    --transforms "center-crop 16384"
expect_fail "--freeze of every parameter" "model.freeze" "nothing left to train" -- \
    "$TANDEM" train $common --freeze fc1,fc2,fc3
expect_fail "unknown --set key" "optim.speed" -- \
    "$TANDEM" train $common --set optim.speed=3
expect_fail "key in the wrong section" "train.lr" "did you mean 'optim.lr'" -- \
    "$TANDEM" train $common --set train.lr=0.1
printf '[optim]\nlr = 0.1\nturbo = yes\n' >"$tmp/unknown-key.ini"
expect_fail "INI with an unknown key" "$tmp/unknown-key.ini" "optim.turbo" -- \
    "$TANDEM" train $common --config "$tmp/unknown-key.ini"
printf '[data]\nbatch_size = -64\n' >"$tmp/negative.ini"
expect_fail "INI with a negative batch size" "$tmp/negative.ini" "data.batch_size" "-64" -- \
    "$TANDEM" train $common --config "$tmp/negative.ini"
expect_fail "missing INI file" "$tmp/absent.ini" -- \
    "$TANDEM" train $common --config "$tmp/absent.ini"
expect_fail "unknown option" "--frobnicate" -- "$TANDEM" train --frobnicate

# --- feature parameters: a bad value names the feature, the key and the range ---
expect_fail "--strategy with a value out of range" \
    "ddp: bucket-mb=-3: expected a number in [0.001, 1024]" -- \
    "$TANDEM" train $common --strategy "ddp bucket-mb=-3"
expect_fail "--strategy with an unknown key" "ddp: unknown parameter 'buckets'" \
    "known: bucket-mb" -- "$TANDEM" train $common --strategy "ddp buckets=2"
expect_fail "--optimizer with a value out of range" \
    "sgd: momentum=2: expected a number in [0, 1]" -- \
    "$TANDEM" train $common --optimizer "sgd momentum=2"
expect_fail "--optimizer with another optimizer's key" "adamw: unknown parameter 'momentum'" \
    "known: lr, beta1, beta2, eps, weight_decay" -- \
    "$TANDEM" train $common --optimizer "adamw momentum=0.9"
expect_fail "optim.* key out of the optimizer's range" \
    "adamw: beta1=1: expected a number in [0, 1)" -- \
    "$TANDEM" train $common --optimizer adamw --set optim.beta1=1
expect_fail "--dataset with a bad choice" "cifar100: label=medium: expected one of fine, coarse" -- \
    "$TANDEM" train $common --dataset "cifar100 $tmp label=medium"
expect_fail "--dataset with an unknown key" "idx: unknown parameter 'size'; known: path" -- \
    "$TANDEM" train $common --dataset "idx path=$data size=first"
expect_fail "--dataset with an unknown key (old form)" "idx: unknown parameter 'size'" -- \
    "$TANDEM" train $common --dataset "idx:$data,size=first"
expect_fail "--dataset without its path" "idx: missing parameter path" -- \
    "$TANDEM" train $common --dataset idx
expect_fail "--transforms with a value out of range" \
    "hflip: p=2 (column 7): expected a number in [0, 1]" -- \
    "$TANDEM" train $common --transforms "hflip p=2"

# --- weights given to --init ------------------------------------------------
"$TANDEM" train $common --no-eval --save "$tmp/good.safetensors" >/dev/null 2>"$tmp/err" ||
    fail "save weights" "$(cat "$tmp/err")"
size=$(wc -c <"$tmp/good.safetensors")
head -c $((size / 2)) "$tmp/good.safetensors" >"$tmp/truncated.safetensors"
expect_fail "truncated safetensors" "$tmp/truncated.safetensors" "byte" -- \
    "$TANDEM" train $common --init "$tmp/truncated.safetensors"
head -c 20 "$tmp/good.safetensors" >"$tmp/short.safetensors"
expect_fail "safetensors shorter than its header" "$tmp/short.safetensors" "byte 0" -- \
    "$TANDEM" train $common --init "$tmp/short.safetensors"
# Same length, the JSON header broken in its middle.
cp "$tmp/good.safetensors" "$tmp/badjson.safetensors"
printf '}}}}' | dd of="$tmp/badjson.safetensors" bs=1 seek=9 conv=notrunc 2>/dev/null
expect_fail "safetensors with a bad JSON header" "$tmp/badjson.safetensors" "bad JSON" "byte" -- \
    "$TANDEM" train $common --init "$tmp/badjson.safetensors"
# fc1.weight as [512, 100] instead of [512, 784].
/usr/bin/env python3 - "$tmp/shape.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"fc1.weight": {"dtype": "F32", "shape": [512, 100],
                                    "data_offsets": [0, 512 * 100 * 4]}}).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + bytes(512 * 100 * 4))
PY
expect_fail "shape mismatch in --init weights" "fc1.weight" "[512, 784]" "[512, 100]" -- \
    "$TANDEM" train $common --init "$tmp/shape.safetensors"
expect_fail "eval with mismatched weights" "fc1.weight" "[512, 100]" -- \
    "$TANDEM" eval --device ref --init "$tmp/shape.safetensors"
expect_fail "weights of another model" "conv1.weight" "missing" -- \
    "$TANDEM" eval --device ref --model lenet --init "$tmp/good.safetensors"
expect_fail "eval without --init" "--init" -- "$TANDEM" eval --device ref
expect_fail "--init-skip of no parameter" "fc9" "no parameter" -- \
    "$TANDEM" train $common --init "$tmp/good.safetensors" --init-skip fc9
expect_fail "--init-skip without --init" "model.init_skip" "without model.init" -- \
    "$TANDEM" train $common --init-skip fc3

# --- early errors with the cpu device open ----------------------------------
# The default device (cpu when its plugin is built): these errors come a few
# milliseconds after the device opens, and the process must still exit
# cleanly, not crash tearing down a backend that is still busy.
cpu_common="--quiet --limit 128 --batch-size 64"
expect_fail "unknown optimizer (default device)" "foo" "sgd" -- \
    "$TANDEM" train $cpu_common --optimizer foo
expect_fail "unknown dataset kind (default device)" "nosuchkind" -- \
    "$TANDEM" train $cpu_common --dataset "nosuchkind:$tmp"
expect_fail "missing --init file (default device)" "$tmp/absent.safetensors" -- \
    "$TANDEM" train $cpu_common --init "$tmp/absent.safetensors"
# A --save that cannot be made is refused before training, not after it
# (the "train.save:" prefix is the up-front check's).
expect_fail "--save into a missing directory" "train.save" "$tmp/no-dir/w.safetensors" -- \
    "$TANDEM" train $cpu_common --save "$tmp/no-dir/w.safetensors"
expect_fail "--save to a directory" "train.save" "$tmp" "is a directory" -- \
    "$TANDEM" train $cpu_common --save "$tmp"
expect_fail "log file in a missing directory (default device)" "$tmp/no-dir/log.json" -- \
    "$TANDEM" train $cpu_common --log-file "$tmp/no-dir/log.json"

done_testing

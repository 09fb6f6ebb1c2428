#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/transfer-learning/run.sh - the articles' fine-tuning flow end to
# end, on image folders this script generates (no download, no PyTorch):
#
#   1. "pretrained" weights: resnet18 trained briefly on another task (10
#      classes of ring patterns) and exported to a .pth, as torchvision
#      ships them; or PRETRAINED=resnet18-f37072fd.pth to use the real ones
#   2. the head only: a new 5-class fc on the frozen network
#   3. fine-tuning: layer4 and fc unfrozen, each at its own (lower) rate,
#      with checkpoints; the run is interrupted at step 10 (--max-steps)
#      and resumed from its checkpoint directory, continuing exactly
#   4. the curves of both stages in one PNG, and the model back to .pth
#
# usage: examples/transfer-learning/run.sh [WORKDIR]
#   TANDEM   the tandem program (default: ../../build/tools/tandem from
#            here if built, else tandem on PATH)
#   EPOCHS   epochs of each stage (default 3)
#   SIZE     image size in pixels (default 48; crops of 7/8 of it)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
W=${1:-transfer-learning-run}
if [ -z "${TANDEM:-}" ]; then
    TANDEM=tandem
    [ -x "$here/../../build/tools/tandem" ] && TANDEM=$here/../../build/tools/tandem
fi
E=${EPOCHS:-3}
mkdir -p "$W"
S=${SIZE:-48}
crop=$((S * 7 / 8))
norm="normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25"
# tandem train with the settings every stage shares
train() {
    echo "+ tandem train $*"
    "$TANDEM" train --model resnet18 --batch-size 25 --threads 2 --progress 0 \
        --transforms "random-resized-crop size=$crop scale=0.6,1 | hflip | $norm" \
        --test-transforms "center-crop size=$crop | $norm" "$@"
}
tdm() { echo "+ tandem $*"; "$TANDEM" "$@"; }

[ -d "$W/flowers" ] || python3 "$here/make_images.py" "$W/flowers" --classes 5 --train 40 \
    --val 10 --size "$S"
P=${PRETRAINED:-}
if [ -z "$P" ]; then
    [ -d "$W/source" ] || python3 "$here/make_images.py" "$W/source" --classes 10 --train 30 \
        --val 5 --size "$S" --family rings --seed 2
    train --dataset "imagefolder $W/source" --set model.num_classes=10 --epochs "$E" \
        --lr 0.01 --save "$W/source.safetensors" --log-file "$W/source.jsonl"
    tdm export "$W/source.safetensors" "$W/pretrained.pth"
    P=$W/pretrained.pth
fi

# 2. the head only
train --dataset "imagefolder $W/flowers" --init "$P" --init-skip fc --set model.num_classes=5 \
    --freeze conv1,bn1,layer1,layer2,layer3,layer4 --epochs "$E" --lr 0.01 \
    --save "$W/head.safetensors" --log-file "$W/head.jsonl"

# 3. layer4 and fc at their own rates, checkpointed, interrupted, resumed
rm -rf "$W/ckpt" "$W/tune.jsonl"
tune() {
    train --dataset "imagefolder $W/flowers" --init "$W/head.safetensors" \
        --set model.num_classes=5 --freeze conv1,bn1,layer1,layer2,layer3 \
        --lr-group 'fc=0.01,layer4=0.002' --clip-grad-norm 5 --schedule cosine --epochs "$E" \
        --checkpoint-dir "$W/ckpt" --checkpoint-every 4 --keep-last 2 --keep-best \
        --log-file "$W/tune.jsonl" "$@"
}
tune --max-steps 10
echo "(interrupted at step 10; resuming)"
tune --resume "$W/ckpt"

# 4. curves and the model for PyTorch
tdm plot "$W/head.jsonl" "$W/tune.jsonl" --label head --label fine-tune --out "$W/curves.png"
tdm export "$W/ckpt/latest" "$W/model.pth"
echo "done: $W/curves.png, $W/model.pth (torch.load(..., weights_only=True) and"
echo "torchvision.models.resnet18(num_classes=5).load_state_dict(...) take it)"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/finetune-torch.sh - the fine-tuning tools against PyTorch: frozen
# layers (a frozen batch norm in eval mode), learning-rate groups with
# their schedule, and gradient clipping, for one process, dp on two
# devices, and ddp and zero1 on two ranks.
#
# tests/finetune-reference.py makes the starting weights (resnet8 with
# batch-norm statistics of the data, as a pretrained model has them;
# lenet) and repeats each `tandem train` in PyTorch, in float64. Every run
# takes the first 16 training images as one batch per step (--limit 16
# -b 16, or 2 ranks x 8: the same global batch), so the steps see the
# same data whatever order the sampler shuffles them in; 5 steps at a
# small learning rate, where float32 rounding stays near 1e-7 (AdamW with
# eps 1e-3 for the same reason: its default 1e-8 turns gradients of 1e-9
# into whole steps). Every parameter and running statistic must be within
# 1e-5 of PyTorch's; zero1 must also be within 1e-6 (relative) of the
# single process. Skipped without torch.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"

"$PY" -c 'import torch' 2>/dev/null || skip_all "no torch in $PY"
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
ref="$PY $TDM_TOP_SRCDIR/tests/finetune-reference.py"
# What is checked here is the fine-tuning semantics at 1e-5, on a resnet8
# whose frozen batch norm makes the running variance ill-conditioned: the
# cpu backend's timed kernel choice (oneDNN's Winograd rounds differently,
# within the conformance tolerance) moves it by up to 5e-4. The direct
# kernels keep the comparison about the semantics.
export TDM_CPU_TUNE=force:onednn

for m in resnet8 lenet; do
    $ref init $m "$work/$m-init.st" 2>"$work/init.err" ||
        fail "PyTorch makes $m's starting weights" "$(cat "$work/init.err")"
done
# resnet8 from its init: 5 steps of the 16 images, one thread
base="--init $work/resnet8-init.st --model resnet8 --limit 16 -b 16 --epochs 5 --no-eval --seed 1
    --threads 1 --quiet --lr 0.01 --momentum 0.9 --weight-decay 5e-4"

# torch NAME TANDEM.st OPTIONS...: TAP result for "within 1e-5 of PyTorch"
torch() {
    name=$1; st=$2; shift 2
    if [ ! -s "$st" ]; then
        fail "$name" "tandem train wrote no weights"
        return
    fi
    init=$work/resnet8-init.st
    case " $* " in *" model=lenet "*) init=$work/lenet-init.st ;; esac
    if out=$($ref check "$init" "$st" lr=0.01 "$@" 2>&1) &&
       awk -v d="${out%% *}" 'BEGIN { exit !(d <= 1e-5) }'; then
        ok "$name (largest difference ${out%% *})"
    else
        fail "$name" "$out"
    fi
}
# tandem OUT.st ARGS...: one `tandem train` from $base
tandem() {
    out=$1; shift
    # shellcheck disable=SC2086
    "$TANDEM" train $base --save "$work/$out" "$@" >"$work/$out.log" 2>&1 ||
        { echo "# tandem train $* failed:"; sed 's/^/#   /' "$work/$out.log"; }
}

tandem groups.st --freeze conv1,bn1 --lr-group 'fc=0.05,layer2=0.002'
torch "sgd, frozen conv1 and bn1 (bn1 in eval mode), groups fc and layer2 = PyTorch" \
    "$work/groups.st" freeze=conv1,bn1 groups=fc=0.05,layer2=0.002
# without the groups in PyTorch the same weights are far off: the check can fail
if $ref check "$work/resnet8-init.st" "$work/groups.st" lr=0.01 freeze=conv1,bn1 \
        >"$work/neg.out" 2>&1 && awk -v d="$(cut -d' ' -f1 "$work/neg.out")" 'BEGIN { exit !(d > 1e-3) }'; then
    ok "the comparison tells runs with and without groups apart ($(cut -d' ' -f1 "$work/neg.out"))"
else
    fail "the comparison tells runs with and without groups apart" "$(cat "$work/neg.out")"
fi

# bn1 frozen under a conv1 that trains: the gradient goes back through bn1
# in eval mode (and through the ReLU it applies)
tandem bn1.st --freeze bn1
torch "sgd, frozen bn1 under a trained conv1 (eval-mode backward) = PyTorch" "$work/bn1.st" \
    freeze=bn1

tandem adamw.st --optimizer adamw --lr 0.001 --set optim.eps=1e-3 --freeze conv1,bn1 \
    --lr-group 'fc=0.01,layer1=0.0001' --warmup-steps 2 --schedule cosine --set optim.min_lr=0.0001
torch "adamw, groups each warmed up and annealed from its own rate to min_lr = PyTorch" \
    "$work/adamw.st" opt=adamw lr=0.001 eps=1e-3 freeze=conv1,bn1 groups=fc=0.01,layer1=0.0001 \
    warmup=2 schedule=cosine min_lr=0.0001

tandem clip.st --clip-grad-norm 0.1 --freeze conv1,bn1 --lr-group 'fc=0.05'
torch "--clip-grad-norm 0.1 with frozen layers and a group = clip_grad_norm_" "$work/clip.st" \
    clip=0.1 freeze=conv1,bn1 groups=fc=0.05
if $ref check "$work/resnet8-init.st" "$work/clip.st" lr=0.01 freeze=conv1,bn1 groups=fc=0.05 \
        >"$work/neg.out" 2>&1 && awk -v d="$(cut -d' ' -f1 "$work/neg.out")" 'BEGIN { exit !(d > 1e-3) }'; then
    ok "the comparison tells clipped runs from unclipped ones ($(cut -d' ' -f1 "$work/neg.out"))"
else
    fail "the comparison tells clipped runs from unclipped ones" "$(cat "$work/neg.out")"
fi

# lenet with groups and clipping: one process, dp on two ref devices
# (8 images each), then 2 ranks x 8 (each rank's half of the 16) with
# groups that cut zero1's shards (conv* | fc1, fc2 | fc3) and clipping by
# the norm over both ranks' shards
base="--init $work/lenet-init.st --model lenet --limit 16 --epochs 5 --no-eval --seed 1
    --threads 1 --quiet --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --timeout 60
    --lr-group fc3=0.05,conv=0.002 --clip-grad-norm 0.05"
lenet="model=lenet groups=fc3=0.05,conv=0.002 clip=0.05"
tandem single.st -b 16
# shellcheck disable=SC2086
torch "lenet, one process, groups and clipping = PyTorch" "$work/single.st" $lenet
export TDM_REF_DEVICES=2
tandem dp.st -b 16 --strategy dp --devices ref:0,ref:1
unset TDM_REF_DEVICES
# shellcheck disable=SC2086
torch "dp, 2 devices x 8, groups and clipping = PyTorch with 16" "$work/dp.st" $lenet
has_feature collective shm || { done_testing; exit; }
for s in ddp zero1; do
    # shellcheck disable=SC2086
    "$TANDEM" run --nproc-per-node 2 -- "$TANDEM" train $base -b 8 --strategy $s \
        --save "$work/$s.st" >"$work/$s.log" 2>&1 ||
        { echo "# $s failed:"; sed 's/^/#   /' "$work/$s.log"; }
    # shellcheck disable=SC2086
    torch "$s, 2 ranks x 8, groups and clipping = PyTorch with 16" "$work/$s.st" $lenet
done
if out=$("$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$work/zero1.st" "$work/single.st" 1e-6 2>&1); then
    ok "zero1, 2 ranks x 8 = single 16 within 1e-6: $out"
else
    fail "zero1, 2 ranks x 8 = single 16 within 1e-6" "$out"
fi
done_testing

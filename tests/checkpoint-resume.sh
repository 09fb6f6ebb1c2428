#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/checkpoint-resume.sh - a run stopped at step k (--max-steps, which
# writes the last checkpoint) and resumed with --resume ends with exactly
# the parameters of a run that was never stopped: bit for bit (tolerance
# 0) for single, ddp and zero1 (2 ranks, shm), stopped mid-epoch, at an
# epoch's end and in the second epoch, with SGD momentum and with AdamW
# (whose step count and moments must come back). A checkpoint made by 2
# ranks x 32 resumes on 1 rank x 64 and the reverse (the same global batch
# and sample order; the gradient is summed in another order, so the
# parameters agree within 1e-6 relative). zero1's checkpoint names its
# optimizer state as a single process does (whole tensors per parameter).
# 2 epochs of 20 steps, mlp, Fashion-MNIST (strategies-lib.sh's settings).
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"
has_feature collective shm || skip_all "the shm collective is not available"

# within NAME A B TOL: TAP result for "A's weights equal B's within TOL"
within() {
    if out=$("$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$work/$2" "$work/$3" "$4" 2>&1)
    then ok "$1: $out"; else fail "$1" "$out"; fi
}

# resumed NAME LOG CKPT: the log says it resumed from that checkpoint
resumed() {
    if grep -q "resuming from .*$3" "$work/$2"; then ok "$1 says it resumes from $3"
    else fail "$1 says it resumes from $3" "$(cat "$work/$2")"; fi
}

E="--epochs 2 --model mlp"

# single: SGD with momentum stopped mid-epoch 1; AdamW stopped in epoch 2
train full.st full.log $E
train part.st part.log $E --checkpoint-dir "$work/c1" --checkpoint-every 5 --max-steps 13
train res.st res.log $E --checkpoint-dir "$work/c1" --resume "$work/c1"
resumed "single" res.log ckpt-000000013.safetensors
within "single, stopped at step 13 of 40 and resumed = uninterrupted" full.st res.st 0
differ "the stopped run's weights are not the final ones" part.st full.st

train fulla.st fulla.log $E --optimizer adamw --lr 0.001
train parta.st parta.log $E --optimizer adamw --lr 0.001 --checkpoint-dir "$work/c2" \
    --max-steps 27
train resa.st resa.log $E --optimizer adamw --lr 0.001 --resume "$work/c2/latest"
within "single adamw, stopped at step 27 and resumed from DIR/latest = uninterrupted" \
    fulla.st resa.st 0

# cpu: convolution kernels chosen by timing (TDM_CPU_TUNE) round
# differently, and the timing itself runs each candidate on a shape's
# first calls, so two runs are bit-identical only when they share the
# choices. A checkpointed run keeps them in DIR/cpu-tune-rank0.txt (from
# the first choice on) and a resumed one takes them from there: a first
# run (cw) leaves its file, a directory seeded with it trains, stops at
# step 16 and resumes, and equals an uninterrupted run given a copy.
if has_feature backend cpu; then
    L="--epochs 2 --model lenet --device cpu"
    train lw.st lw.log $L --checkpoint-dir "$work/cw" --max-steps 16
    if [ -s "$work/cw/cpu-tune-rank0.txt" ]; then
        ok "the cpu backend's kernel choices are kept in the checkpoint directory"
    else
        fail "the cpu backend's kernel choices are kept in the checkpoint directory" \
            "$(ls "$work/cw")"
    fi
    mkdir -p "$work/cl"
    cp "$work/cw/cpu-tune-rank0.txt" "$work/cl/cpu-tune-rank0.txt"
    cp "$work/cw/cpu-tune-rank0.txt" "$work/tune-copy.txt"
    train lpart.st lpart.log $L --checkpoint-dir "$work/cl" --max-steps 16
    train lres.st lres.log $L --checkpoint-dir "$work/cl" --resume "$work/cl"
    export TDM_CPU_TUNE_CACHE="$work/tune-copy.txt"
    train lfull.st lfull.log $L
    unset TDM_CPU_TUNE_CACHE
    within "lenet on cpu with the kept kernel choices, stopped at step 16 and resumed = uninterrupted" \
        lfull.st lres.st 0
else
    skip "the cpu backend's kernel choices are kept in the checkpoint directory" "no cpu backend"
    skip "lenet on cpu, stopped and resumed = uninterrupted" "no cpu backend"
fi

# ddp and zero1 on 2 ranks: stopped at an epoch's end and mid-epoch
for s in ddp zero1; do
    opt=
    [ $s = zero1 ] && opt="--optimizer adamw --lr 0.001"
    train_dist 2 "full-$s.st" "full-$s.log" $E -b 32 --strategy $s $opt
    for k in 20 13; do
        train_dist 2 "part-$s-$k.st" "part-$s-$k.log" $E -b 32 --strategy $s $opt \
            --checkpoint-dir "$work/$s-$k" --checkpoint-every 7 --max-steps $k
        train_dist 2 "res-$s-$k.st" "res-$s-$k.log" $E -b 32 --strategy $s $opt \
            --checkpoint-dir "$work/$s-$k" --resume "$work/$s-$k"
        within "$s x 2 ${opt:+(adamw) }stopped at step $k and resumed = uninterrupted" \
            "full-$s.st" "res-$s-$k.st" 0
    done
done
resumed "ddp" res-ddp-13.log ckpt-000000013.safetensors

# zero1's optimizer state is gathered whole, named as single's
names() {
    "$PY" - "$1" <<'EOF'
import json, struct, sys
d = open(sys.argv[1], "rb").read()
h = json.loads(d[8:8 + struct.unpack("<Q", d[:8])[0]])
print(" ".join(sorted(k for k in h if k != "__metadata__")))
EOF
}
train_dist 2 ignored.st ignored.log $E -b 32 --strategy zero1 --checkpoint-dir "$work/z" \
    --max-steps 3
train ignored.st ignored.log $E --checkpoint-dir "$work/s" --max-steps 3
if [ -n "$(names "$work/z/latest")" ] && [ "$(names "$work/z/latest")" = "$(names "$work/s/latest")" ]
then ok "zero1 x 2 and single checkpoints hold the same tensor names"
else fail "zero1 x 2 and single checkpoints hold the same tensor names" \
    "$(names "$work/z/latest") / $(names "$work/s/latest")"; fi

# world size 2 -> 1 (zero1) and 1 -> 2 (ddp), same global batch of 64
train w1.st w1.log $E -b 64 --strategy zero1 --optimizer adamw --lr 0.001 \
    --resume "$work/zero1-13/ckpt-000000013.safetensors"
resumed "1 rank from 2 ranks' checkpoint" w1.log ckpt-000000013.safetensors
within "zero1: 2 x 32 to step 13, then 1 x 64 = 2 x 32 throughout" full-zero1.st w1.st 1e-6

train full1.st full1.log $E -b 64 --strategy ddp
train part1.st part1.log $E -b 64 --strategy ddp --checkpoint-dir "$work/d1" --max-steps 13
train_dist 2 res2.st res2.log $E -b 32 --strategy ddp --resume "$work/d1"
within "ddp: 1 x 64 to step 13, then 2 x 32 = 1 x 64 throughout" full1.st res2.st 1e-6

# another global batch is refused, naming both
if "$TANDEM" train $common $E -b 32 --resume "$work/d1" >"$work/bad.out" 2>"$work/bad.err"
then fail "a global batch of 32 against 64 is refused" "it trained"
elif grep -q "global batch is 64 .*this run's 32" "$work/bad.err"
then ok "a global batch of 32 against 64 is refused: $(cat "$work/bad.err")"
else fail "a global batch of 32 against 64 is refused naming both" "$(cat "$work/bad.err")"; fi

done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/equivalence.sh - the distributed strategies train the same model as
# one process does.
#
# The global batch is the same by construction: the distributed sampler
# gives rank r of w the samples r, r + w, r + 2w, ... of the one shuffled
# order (seed, epoch) that a single process walks through, so at step k the
# w ranks with batch b hold exactly the samples of step k of a single run
# with batch w x b. Averaging the ranks' mean gradients (ddp, zero1), or
# weighting each device's by its share of the batch (dp), gives the mean
# gradient of that batch. So after 20 steps the parameters must match the
# single run's up to float rounding: relative difference (L2, per tensor)
# under 1e-5. mlp and lenet have no batch norm. Real processes through
# `tandem run` on loopback, for every collective plugin that is built.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"

colls=shm
has_feature collective gloo && colls="shm gloo"
has_feature collective shm || skip_all "the shm collective is not available"

for m in mlp lenet; do
    train "single-$m.st" "single-$m.log" --model $m -b 64
done

for c in $colls; do
    for s in ddp zero1; do
        for m in mlp lenet; do
            train_dist 2 "$s-$c-$m.st" "$s-$c-$m.log" --model $m -b 32 --strategy $s \
                --collective $c
            same "$s, 2 ranks x 32, $c, $m = single 64" "$work/$s-$c-$m.st" "$work/single-$m.st"
        done
    done
done

# no_sync accumulation: 2 ranks x 2 micro-batches of 16 = one batch of 64
for s in ddp zero1; do
    train_dist 2 "acc-$s.st" "acc-$s.log" --model mlp -b 16 --accumulate 2 --strategy $s
    same "$s, 2 ranks x 16, --accumulate 2 = single 64" "$work/acc-$s.st" "$work/single-mlp.st"
done

# zero1 on 3 ranks: lenet's 61,706 gradients do not divide by 3 (padded
# shards); 3 x 32 = 96 per step, 13 steps of the first 1,248 images
train "single-96.st" "single-96.log" --model lenet -b 96 --limit 1248
train_dist 3 "zero1-3.st" "zero1-3.log" --model lenet -b 32 --limit 1248 --strategy zero1
same "zero1, 3 ranks x 32 (padded shards) = single 96" "$work/zero1-3.st" "$work/single-96.st"

# 3 epochs (each reshuffled by every rank on its own), loader threads, and
# evaluation on rank 0 between epochs
train "single-3ep.st" "single-3ep.log" --model mlp -b 64 --limit 640 --epochs 3
train_dist 2 "ddp-3ep.st" "ddp-3ep.log" --model mlp -b 32 --limit 640 --epochs 3 --strategy ddp \
    --workers 1 --set train.eval=true
same "ddp over 3 epochs, 2 ranks x 32 = single 64" "$work/ddp-3ep.st" "$work/single-3ep.st"

# a world of one: ddp started alone
train "ddp-alone.st" "ddp-alone.log" --model mlp -b 64 --strategy ddp
same "ddp started alone (a world of 1) = single" "$work/ddp-alone.st" "$work/single-mlp.st"

# dp: one process, two virtual devices of the ref backend, 2 x 32
export TDM_REF_DEVICES=2
for m in mlp lenet; do
    train "ref-$m.st" "ref-$m.log" --model $m -b 64 --device ref:0
    train "dp-$m.st" "dp-$m.log" --model $m -b 64 --strategy dp --devices ref:0,ref:1
    same "dp, 2 devices x 32, $m = single 64 (ref)" "$work/dp-$m.st" "$work/ref-$m.st"
done
unset TDM_REF_DEVICES

# the comparison can fail: a single run with batch 32 is another model
train "single-32.st" "single-32.log" --model mlp -b 32
differ "the check tells batch 32 from 2 x 32" "$work/single-32.st" "$work/ddp-shm-mlp.st"

# the ddp log reports the communication wait
train_dist 2 "log.st" "log.out" --model mlp -b 32 --strategy ddp --log-file "$work/ddp.jsonl"
if grep -q '"event":"summary".*"world_size":2,"comm_wait_s":[0-9.eE+-]*,"comm_wait_frac":0\.[0-9]*' \
    "$work/ddp.jsonl"; then
    ok "the ddp log has the communication wait"
else
    fail "the ddp log has the communication wait" "$(tail -2 "$work/ddp.jsonl" 2>&1)"
fi

done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/staged-ddp.sh - ddp through host-staged collectives equals ddp on
# host memory and one process with the global batch.
#
# With TDM_REF_NOT_HOST=1 (a test hook: configure --enable-test-hooks) the
# ref backend's devices claim memory the host cannot reach, as cuda's do,
# so shm and gloo take the core's staged path: each bucket is read into a
# pinned host buffer, reduced there and written back. Staging moves the
# same bytes through the same arithmetic, so the staged run must equal the
# unstaged one bit for bit, and one process with batch 2 x 32 within 1e-6
# relative after 20 steps (issue 14's target). Real processes through
# `tandem run` on loopback.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"

has_feature collective shm || skip_all "the shm collective is not available"
have_test_hooks || skip_all "$TEST_HOOKS_WHY"

colls=shm
has_feature collective gloo && colls="shm gloo"

# near NAME A B TOL: TAP result for "A's weights equal B's within TOL"
near() {
    if out=$("$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$2" "$3" "$4" 2>&1); then
        ok "$1: $out"
    else
        fail "$1" "$out"
    fi
}

train "single.st" "single.log" --model mlp -b 64 --device ref
for c in $colls; do
    train_dist 2 "plain-$c.st" "plain-$c.log" --model mlp -b 32 --device ref --strategy ddp \
        --collective $c
    export TDM_REF_NOT_HOST=1
    train_dist 2 "staged-$c.st" "staged-$c.log" --model mlp -b 32 --device ref --strategy ddp \
        --collective $c --set train.progress=100
    unset TDM_REF_NOT_HOST
    if grep -q "collective $c (staged through host memory)" "$work/staged-$c.log"; then
        ok "ddp over $c stages through host memory when the device is not host memory"
    else
        fail "ddp over $c stages through host memory when the device is not host memory" \
            "$(head -5 "$work/staged-$c.log")"
    fi
    near "ddp staged through host memory ($c) = ddp on host memory" \
        "$work/staged-$c.st" "$work/plain-$c.st" 0
    near "ddp staged ($c), 2 ranks x 32 = single 64 within 1e-6" \
        "$work/staged-$c.st" "$work/single.st" 1e-6
done

# zero1: reduce-scatter and all-gather staged
export TDM_REF_NOT_HOST=1
train_dist 2 "staged-zero1.st" "staged-zero1.log" --model mlp -b 32 --device ref \
    --strategy zero1 --collective shm
unset TDM_REF_NOT_HOST
near "zero1 staged (shm), 2 ranks x 32 = single 64 within 1e-6" \
    "$work/staged-zero1.st" "$work/single.st" 1e-6

# automatic selection: shm, staged
export TDM_REF_NOT_HOST=1
train_dist 2 "staged-auto.st" "staged-auto.log" --model mlp -b 32 --device ref --strategy ddp \
    --set train.progress=100
unset TDM_REF_NOT_HOST
if grep -q "collective shm (staged through host memory)" "$work/staged-auto.log"; then
    ok "automatic selection stages through shm"
else
    fail "automatic selection stages through shm" "$(head -5 "$work/staged-auto.log")"
fi
done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/save-ranks.sh - how a user sees that every rank ended alike:
# `--save` with {rank} in the file name is written by every rank (without
# it only rank 0 writes), and `tandem compare A B` compares two weight
# files tensor by tensor (the largest relative L2 difference, exit 0 within
# --tolerance, 1 beyond it or when the tensors differ in name or shape, 2
# for a usage error or a file it cannot read).
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"
tmp=$work

has_feature collective shm || skip_all "the shm collective is not available"

# ---- --save with {rank} ------------------------------------------------------
train_dist 2 "ddp-{rank}.st" ddp.log -b 32 --strategy ddp --collective shm
if [ -s "$work/ddp-0.st" ] && [ -s "$work/ddp-1.st" ] && [ ! -e "$work/ddp-{rank}.st" ]; then
    ok "--save 'ddp-{rank}.st' on 2 ranks writes ddp-0.st and ddp-1.st"
else
    fail "--save 'ddp-{rank}.st' on 2 ranks writes ddp-0.st and ddp-1.st" "$(ls "$work")"
fi
train "one-{rank}.st" one.log -b 64
check "in one process {rank} is 0" test -s "$work/one-0.st"

# ---- tandem compare ------------------------------------------------------------
if out=$("$TANDEM" compare --tolerance 0 "$work/ddp-1.st" "$work/ddp-0.st" 2>&1) &&
    echo "$out" | grep -q '^largest relative difference 0 (.*), tolerance 0: ok$'; then
    ok "ddp's two ranks end with the same weights: $out"
else
    fail "ddp's two ranks end with the same weights" "$out"
fi
# ddp on 2 x 32 trains as one process on 64 (tests/equivalence.sh): equal
# within float rounding, the default tolerance
"$TANDEM" compare "$work/ddp-0.st" "$work/one-0.st" >"$work/out" 2>&1
check "ddp and single runs of the same batches compare ok (exit 0)" \
    grep -q 'tolerance 1e-05: ok$' "$work/out"
train seed8.st seed8.log -b 64 --seed 8
"$TANDEM" compare "$work/seed8.st" "$work/one-0.st" >"$work/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q '^largest relative difference .*tolerance 1e-05: TOO LARGE$' "$work/out"; then
    ok "another seed's weights are TOO LARGE a difference, exit 1"
else
    fail "another seed's weights are TOO LARGE a difference, exit 1" "exit $rc: $(cat "$work/out")"
fi
train lenet.st lenet.log -b 64 --model lenet
"$TANDEM" compare "$work/lenet.st" "$work/one-0.st" >"$work/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q 'DIFFERENT$' "$work/out"; then
    ok "another model's tensors are DIFFERENT, exit 1: $(cat "$work/out")"
else
    fail "another model's tensors are DIFFERENT, exit 1" "exit $rc: $(cat "$work/out")"
fi
expect_error "a missing file is exit 2, naming it" "^tandem compare: .*nope.st" "nope.st" -- \
    "$TANDEM" compare "$work/one-0.st" "$work/nope.st"
expect_error "one file is a usage error" "two files A and B are required" -- \
    "$TANDEM" compare "$work/one-0.st"
expect_error "a negative tolerance is a usage error" "tolerance -1: expected a number >= 0" -- \
    "$TANDEM" compare --tolerance -1 "$work/one-0.st" "$work/one-0.st"
if "$TANDEM" train --help | grep -q -- '--save=FILE .*every rank when FILE has {rank}'; then
    ok "train --help documents {rank}"
else
    fail "train --help documents {rank}" "$("$TANDEM" train --help | grep -- --save)"
fi

done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/ops-profile.sh - TDM_PROFILE=1 times every op front end: a short
# `tandem train` on the ref backend prints, when it exits, a per-op table
# (calls, total ms, mean us, share) whose rows are the ops an mlp runs, one
# optimizer update per step (the loss kept on the device: softmax_xent_stats;
# the evaluation's softmax_xent; the host's reads), shares adding up to
# 100%. Unset or 0, no table.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-ops-profile-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
train() {
    "$TANDEM" train --device ref --model mlp --limit 256 --epochs 1 >"$tmp/out" 2>"$tmp/err"
}

if TDM_PROFILE=1 train; then
    ok "train with TDM_PROFILE=1"
else
    fail "train with TDM_PROFILE=1" "$(cat "$tmp/err")"
fi
if grep -q '^# tandem op profile (TDM_PROFILE), backend ref: [0-9.]* s in [0-9]* op calls$' \
        "$tmp/err" &&
   grep -q '^# op  *calls  *total ms  *mean us  *share %$' "$tmp/err"; then
    ok "profile header"
else
    fail "profile header" "$(cat "$tmp/err")"
fi
# Rows: "  op calls total_ms mean_us share".
rows=$(grep -E '^  [a-z_0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$tmp/err")
missing=
for op in gemm bias_grad relu_forward relu_backward softmax_xent softmax_xent_stats \
        sgd_update_zero_grad read; do
    printf '%s\n' "$rows" | grep -q "^  $op " || missing="$missing $op"
done
if [ -z "$missing" ]; then
    ok "a row for every op an mlp step runs"
else
    fail "a row for every op an mlp step runs" "missing:$missing
$(cat "$tmp/err")"
fi
steps=$(sed -n 's/.*, \([0-9]*\) steps per epoch$/\1/p' "$tmp/err")
updates=$(printf '%s\n' "$rows" | awk '$1 == "sgd_update_zero_grad" { print $2 }')
if [ -n "$steps" ] && [ "$updates" = "$steps" ]; then
    ok "one optimizer update per step ($steps)"
else
    fail "one optimizer update per step" "steps '$steps', sgd_update_zero_grad calls '$updates'"
fi
if printf '%s\n' "$rows" | awk '{ s += $5; c += $2; if ($3 < 0 || $4 < 0) bad = 1 }
        END { exit !(s > 99.5 && s < 100.5 && c > 0 && !bad) }'; then
    ok "shares add up to 100%"
else
    fail "shares add up to 100%" "$rows"
fi

for value in "" 0; do
    if TDM_PROFILE=$value train && ! grep -q 'op profile' "$tmp/err"; then
        ok "no table with TDM_PROFILE='$value'"
    else
        fail "no table with TDM_PROFILE='$value'" "$(cat "$tmp/err")"
    fi
done
done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/train-precision.sh - train.precision (--precision): fp32 trains on
# every backend and the log's start event records it; tf32 and bf16 are
# refused before training on backends that do not offer them (ref refuses
# through its slot, cpu has none), whether they come from the flag, --set
# or an INI file, naming the backend, the device and the precision, and for
# every device of a dp run; `tandem eval` applies it too; a word that is no
# precision is a config error listing the three.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-train-precision-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
export TDM_REF_DEVICES=2
common="--model mlp --limit 128 --batch-size 64 --no-eval --quiet"

# refused NAME WANT ARGS...: `tandem train ARGS` fails with status 1, its
# error contains WANT, and it never started training.
refused() {
    name=$1; want=$2; shift 2
    "$TANDEM" train $common "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ $status -eq 1 ] && grep -qF -- "$want" "$tmp/err" &&
       ! grep -q '^summary:' "$tmp/out"; then
        ok "$name"
    else
        fail "$name" "status $status; stdout: $(cat "$tmp/out"); stderr: $(cat "$tmp/err")"
    fi
}

# --- fp32 everywhere ------------------------------------------------------------
if "$TANDEM" train $common --device ref --precision fp32 --log-file "$tmp/ref.json" \
        >"$tmp/out" 2>"$tmp/err" &&
   grep -q '^{"event":"start",.*"precision":"fp32"' "$tmp/ref.json"; then
    ok "--precision fp32 on ref, recorded in the start event"
else
    fail "--precision fp32 on ref" "$(cat "$tmp/err"; head -1 "$tmp/ref.json" 2>&1)"
fi
if "$TANDEM" train $common --device ref --log-file "$tmp/default.json" >"$tmp/out" 2>&1 &&
   grep -q '^{"event":"start",.*"precision":"fp32"' "$tmp/default.json"; then
    ok "fp32 by default"
else
    fail "fp32 by default" "$(cat "$tmp/out"; head -1 "$tmp/default.json" 2>&1)"
fi
if "$TANDEM" train $common --strategy dp --devices ref:0,ref:1 --precision fp32 \
        >"$tmp/out" 2>"$tmp/err"; then
    ok "--precision fp32 on dp over ref:0,ref:1"
else
    fail "--precision fp32 on dp" "$(cat "$tmp/err")"
fi

# --- refused where not offered --------------------------------------------------
refused "--precision bf16 on ref" \
    "train.precision: backend 'ref' (ref:0) does not offer bf16 precision" \
    --device ref --precision bf16
refused "--set train.precision=tf32 on ref" "backend 'ref' (ref:0) does not offer tf32 precision" \
    --device ref --set train.precision=tf32
printf '[train]\nprecision = bf16\n' >"$tmp/bf16.ini"
refused "precision = bf16 in an INI file, on ref" \
    "backend 'ref' (ref:0) does not offer bf16 precision" --device ref --config "$tmp/bf16.ini"
refused "--precision bf16 on dp: the first device refuses" \
    "backend 'ref' (ref:0) does not offer bf16 precision" \
    --strategy dp --devices ref:0,ref:1 --precision bf16
refused "--precision fp16 is no precision" "expected one of fp32, tf32, bf16" \
    --device ref --precision fp16
if "$TANDEM" inspect 2>/dev/null | grep -Eq '^ +backend +cpu +priority +-?[0-9]+ +available'; then
    refused "--precision bf16 on cpu" \
        "train.precision: backend 'cpu' (cpu:0) does not offer bf16 precision; use --device cuda" \
        --device cpu --precision bf16
    refused "--precision tf32 on cpu" "backend 'cpu' (cpu:0) does not offer tf32 precision" \
        --device cpu --precision tf32
    refused "dp over ref:1,cpu:0 with bf16" "does not offer bf16 precision" \
        --strategy dp --devices ref:1,cpu:0 --precision bf16
    if "$TANDEM" train $common --device cpu --precision fp32 >"$tmp/out" 2>"$tmp/err"; then
        ok "--precision fp32 on cpu"
    else
        fail "--precision fp32 on cpu" "$(cat "$tmp/err")"
    fi
else
    for t in "bf16 on cpu" "tf32 on cpu" "dp over ref:1,cpu:0" "fp32 on cpu"; do
        skip "$t" "the cpu backend is not built"
    done
fi

# --- tandem eval ----------------------------------------------------------------
if "$TANDEM" train $common --device ref --save "$tmp/w.st" >"$tmp/out" 2>"$tmp/err" &&
   "$TANDEM" eval --device ref --model mlp --init "$tmp/w.st" --precision fp32 \
        >"$tmp/eval-out" 2>"$tmp/eval-err" && grep -q '^eval: ' "$tmp/eval-out"; then
    ok "tandem eval --precision fp32"
else
    fail "tandem eval --precision fp32" "$(cat "$tmp/err" "$tmp/eval-err" 2>&1)"
fi
if ! "$TANDEM" eval --device ref --model mlp --init "$tmp/w.st" --precision bf16 \
        >"$tmp/eval-out" 2>"$tmp/eval-err" &&
   grep -qF "backend 'ref' (ref:0) does not offer bf16 precision" "$tmp/eval-err"; then
    ok "tandem eval --precision bf16 refused on ref"
else
    fail "tandem eval --precision bf16 refused on ref" "$(cat "$tmp/eval-out" "$tmp/eval-err")"
fi

done_testing

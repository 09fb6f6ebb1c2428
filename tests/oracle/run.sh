#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/run.sh - whole models against PyTorch (the oracle test).
# make_reference.py computes PyTorch's numbers into a temporary directory,
# then test-oracle repeats the run through Tandem's public API on the ref and
# cpu backends and prints TAP. Skipped when torch cannot be imported.
. "${TDM_TOP_SRCDIR:?}/tests/tap.sh"

py=${TORCH_PYTHON:-/usr/bin/python3}
models="mlp lenet resnet8"

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    skip_all "torch cannot be imported by $py"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-oracle.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# shellcheck disable=SC2086
if ! "$py" "$TDM_TOP_SRCDIR/tests/oracle/make_reference.py" "$tmp" $models >"$tmp/py.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - make_reference.py computes PyTorch's reference numbers"
    sed 's/^/# /' "$tmp/py.log"
    exit 1
fi
# shellcheck disable=SC2086
"${TDM_TOP_BUILDDIR:?}/tests/oracle/test-oracle" "$tmp" $models

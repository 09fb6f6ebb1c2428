#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/oracle/torchvision.sh - the zoo's ImageNet models against torchvision.
# Sourced by the tests/oracle/torchvision-*.sh tests with $cases set (case
# names of torchvision_reference.py, one model family per test so that each
# stays within seconds): torchvision_reference.py computes torchvision's
# numbers into a temporary directory, then test-torchvision loads the same
# weights strictly into the zoo model and compares, on the ref and cpu
# backends, printing TAP. Skipped when torch or torchvision cannot be imported.
. "${TDM_TOP_SRCDIR:?}/tests/tap.sh"

py=${TORCH_PYTHON:-/usr/bin/python3}

if ! "$py" -c 'import torch, torchvision' >/dev/null 2>&1; then
    skip_all "torch or torchvision cannot be imported by $py"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-torchvision.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# shellcheck disable=SC2086,SC2154
if ! "$py" "$TDM_TOP_SRCDIR/tests/oracle/torchvision_reference.py" "$tmp" $cases \
    >"$tmp/py.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - torchvision_reference.py computes torchvision's reference numbers"
    sed 's/^/# /' "$tmp/py.log"
    exit 1
fi
# shellcheck disable=SC2086
"${TDM_TOP_BUILDDIR:?}/tests/oracle/test-torchvision" "$tmp" $cases

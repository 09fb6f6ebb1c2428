#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/nccl-unavailable.sh - the nccl collectives on a machine without a
# usable GPU: `tandem inspect` lists nccl as unavailable with the reason
# (the missing driver where libcuda.so.1 is absent), and `--collective
# nccl` with `--device cpu` fails cleanly naming nccl and why, while the
# automatic choice on cpu still trains (shm or gloo). Skips where the
# plugin is not built (configure's reason) and where a GPU is usable (the
# GPU checks are tests/gpu/run's).
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/unavailable.sh"
check_unavailable nccl collective "$TDM_NCCL_BUILT" "${TDM_NCCL_WHY:-configure found no NCCL}" \
    "NCCL is usable here"
if printf '%s\n' "$line" | grep -q 'priority  *80 '; then
    ok "nccl ranks above gloo and shm"
else
    fail "nccl ranks above gloo and shm" "line: '$line'"
fi

# --collective nccl on cpu: a clean failure naming nccl and the reason.
for device in cpu ref; do
    "$TANDEM" train --device $device --strategy ddp --collective nccl --model mlp --limit 64 \
        --epochs 1 --no-eval --quiet >"$tmp/train" 2>"$tmp/train.err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ]; then
        ok "--collective nccl --device $device fails cleanly (exit $rc)"
    else
        fail "--collective nccl --device $device fails cleanly" "exit $rc: $(cat "$tmp/train.err")"
    fi
    if grep -qF -- "'nccl'" "$tmp/train.err" && grep -qF -- "$reason" "$tmp/train.err"; then
        ok "the error names nccl and the reason ($device)"
    else
        fail "the error names nccl and the reason ($device)" "stderr: $(cat "$tmp/train.err")"
    fi
done
# The automatic choice passes over nccl on cpu.
"$TANDEM" train --device cpu --strategy ddp --model mlp --limit 64 --epochs 1 --no-eval \
    --quiet >"$tmp/auto" 2>"$tmp/auto.err"
rc=$?
if [ $rc -eq 0 ]; then ok "ddp on cpu without --collective still trains"; else
    fail "ddp on cpu without --collective still trains" "exit $rc: $(cat "$tmp/auto.err")"; fi
done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/cuda-unavailable.sh - the cuda backend on a machine without a usable
# GPU: `tandem inspect` lists it as unavailable with the reason, `--device
# cuda` fails naming that reason, `tandem inspect devices` and the other
# backends keep working, and the conformance test asked for cuda skips
# (status 77) with the reason.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/unavailable.sh"
check_unavailable cuda backend "$TDM_CUDA_BUILT" "${TDM_CUDA_WHY:-configure found no CUDA toolkit}" \
    "a CUDA device is usable here"

# --device cuda fails, naming the backend and the reason.
"$TANDEM" train --device cuda --model mlp --limit 64 --epochs 1 --no-eval --quiet \
    >"$tmp/train" 2>"$tmp/train.err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ]; then ok "train --device cuda fails cleanly (exit $rc)"; else
    fail "train --device cuda fails cleanly" "exit $rc: $(cat "$tmp/train.err")"; fi
if grep -F -- "device 'cuda'" "$tmp/train.err" | grep -qF -- "$reason"; then
    ok "the train error names the device and the reason"
else
    fail "the train error names the device and the reason" "stderr: $(cat "$tmp/train.err")"
fi
"$TANDEM" train --device cuda:1 --model mlp --limit 64 --epochs 1 --no-eval --quiet \
    >"$tmp/train1" 2>"$tmp/train1.err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$reason" "$tmp/train1.err"; then
    ok "--device cuda:1 fails with the reason too"
else
    fail "--device cuda:1 fails with the reason too" "exit $rc: $(cat "$tmp/train1.err")"
fi

# The devices list and the automatic choice ignore cuda.
"$TANDEM" inspect devices >"$tmp/devices" 2>"$tmp/devices.err"
rc=$?
if [ $rc -eq 0 ]; then ok "inspect devices exits 0"; else
    fail "inspect devices exits 0" "exit $rc: $(cat "$tmp/devices.err")"; fi
if grep -qE '^ *cuda:[0-9]' "$tmp/devices"; then
    fail "inspect devices lists no cuda device" "$(cat "$tmp/devices")"
else
    ok "inspect devices lists no cuda device"
fi
if grep -q '^  ref:0$' "$tmp/devices"; then ok "inspect devices still lists ref:0"; else
    fail "inspect devices still lists ref:0" "$(cat "$tmp/devices")"; fi
if "$TANDEM" train --model mlp --limit 64 --epochs 1 --no-eval --quiet \
        >"$tmp/auto" 2>"$tmp/auto.err"; then
    ok "train on the automatic device works"
else
    fail "train on the automatic device works" "$(cat "$tmp/auto.err")"
fi

# The conformance test asked for cuda skips with the reason (77).
conf="$TDM_TOP_BUILDDIR/tests/test-conformance"
if [ -x "$conf" ]; then
    TDM_CONFORMANCE_BACKEND=cuda "$conf" >"$tmp/conf" 2>"$tmp/conf.err"
    rc=$?
    if [ $rc -eq 77 ] && grep -qF "1..0 # SKIP backend cuda is unavailable: $reason" "$tmp/conf"; then
        ok "TDM_CONFORMANCE_BACKEND=cuda test-conformance skips (77) with the reason"
    else
        fail "TDM_CONFORMANCE_BACKEND=cuda test-conformance skips (77) with the reason" \
            "exit $rc: $(cat "$tmp/conf" "$tmp/conf.err")"
    fi
else
    skip "TDM_CONFORMANCE_BACKEND=cuda test-conformance skips" "tests/test-conformance is not built"
fi
done_testing

#!/bin/sh
# tests/nccl-unavailable.sh - the nccl collectives on a machine without a
# usable GPU: `tandem inspect` lists nccl as unavailable with the reason
# (the missing driver where libcuda.so.1 is absent), and `--collective
# nccl` with `--device cpu` fails cleanly naming nccl and why, while the
# automatic choice on cpu still trains (shm or gloo). Skips where the
# plugin is not built (configure's reason) and where a GPU is usable (the
# GPU checks are tests/gpu/run's).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

[ -x "$TANDEM" ] || skip_all "tandem is not built"
[ "${TDM_NCCL_BUILT:-no}" = yes ] ||
    skip_all "the nccl plugin is not built: ${TDM_NCCL_WHY:-configure found no NCCL}"
plugin="$TDM_TOP_BUILDDIR/plugins/.libs/libtdm-nccl.so"
[ -f "$plugin" ] || skip_all "the nccl plugin is configured but $plugin is missing"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$TANDEM" inspect >"$tmp/inspect" 2>"$tmp/inspect.err"
rc=$?
line=$(grep -E '^ +collective +nccl ' "$tmp/inspect")
case $line in
*" available"*) skip_all "NCCL is usable here (the GPU checks are tests/gpu/run's)" ;;
esac
if [ $rc -eq 0 ]; then ok "inspect exits 0"; else
    fail "inspect exits 0" "exit $rc: $(cat "$tmp/inspect.err")"; fi
if grep -q '^Plugin: nccl$' "$tmp/inspect"; then ok "the nccl plugin loads"; else
    fail "the nccl plugin loads" "$(grep -A2 nccl "$tmp/inspect")"; fi
if printf '%s\n' "$line" | grep -q 'priority  *80 '; then
    ok "nccl ranks above gloo and shm"
else
    fail "nccl ranks above gloo and shm" "line: '$line'"
fi
reason=$(printf '%s\n' "$line" | sed -n 's/.*unavailable: //p')
if [ -n "$reason" ]; then ok "nccl is unavailable with a reason ($reason)"; else
    fail "nccl is unavailable with a reason" "line: '$line'"; fi
if [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] || [ -e /usr/lib64/libcuda.so.1 ] ||
        ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    skip "the reason names the missing driver" "libcuda.so.1 is installed here"
else
    case $reason in
    "no NVIDIA driver (libcuda.so.1 not found)") ok "the reason names the missing driver" ;;
    *) fail "the reason names the missing driver" "reason: '$reason'" ;;
    esac
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

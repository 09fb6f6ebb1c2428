#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/bench-tools.sh - the measuring parts of bench/train-folder, which is
# itself run by hand: bench/fma-peak reports an FMA rate that a real CPU can
# have (above 1 GFLOP/s per thread, below 2 FMA ports x 16 lanes x 2 flops
# x 6 GHz) and agrees with itself (the rate by cpu time is never well under
# the rate by wall time) and refuses bad arguments; bench/peer_folder.py
# --count-flops counts the forward multiply-adds of torchvision's resnet18
# and resnet50 at 224 px as torchvision's model documentation gives them
# (1.81 and 4.09 G). The count needs torch and torchvision (skipped
# without).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-bench-tools-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fma=$TDM_TOP_BUILDDIR/bench/fma-peak
py=${TORCH_PYTHON:-/usr/bin/python3}

# num KEY FILE: the number after "KEY": in a JSON line.
num() { sed -n "s/.*\"$1\": *\([0-9.eE+-]*\).*/\1/p" "$2"; }

if "$fma" --threads 2 --seconds 0.05 >"$tmp/out" 2>"$tmp/err"; then
    ok "fma-peak runs"
    isa=$(sed -n 's/.*"isa": *"\([a-z0-9]*\)".*/\1/p' "$tmp/out")
    case $isa in
    avx512|avx2) ok "fma-peak names its ISA ($isa)" ;;
    *) fail "fma-peak names its ISA" "$(cat "$tmp/out")" ;;
    esac
    wall=$(num gflops "$tmp/out")
    cpu=$(num gflops_by_cpu_time "$tmp/out")
    if awk -v w="$wall" -v c="$cpu" 'BEGIN { exit !(c / 2 > 1 && c / 2 < 384 && w > 0 && c >= 0.9 * w) }'; then
        ok "fma-peak's rate is plausible ($wall GFLOP/s by wall time, $cpu by cpu time)"
    else
        fail "fma-peak's rate is plausible" "$(cat "$tmp/out")"
    fi
elif grep -q 'neither AVX-512 nor AVX2' "$tmp/err"; then
    skip "fma-peak runs" "no AVX2 on this CPU"
    skip "fma-peak names its ISA" "no AVX2 on this CPU"
    skip "fma-peak's rate is plausible" "no AVX2 on this CPU"
else
    fail "fma-peak runs" "$(cat "$tmp/err")"
fi
expect_error "fma-peak refuses --threads 0" '^fma-peak: --threads must be' -- \
    "$fma" --threads 0
expect_error "fma-peak refuses an unknown ISA" "^fma-peak: --isa 'sse' is not" -- \
    "$fma" --isa sse

if "$py" -c 'import torch, torchvision' 2>/dev/null; then
    for case in "resnet18 1.814e9" "resnet50 4.089e9"; do
        set -- $case
        if "$py" "$TDM_TOP_SRCDIR/bench/peer_folder.py" --count-flops --model "$1" --size 224 \
                --classes 1000 >"$tmp/flops" 2>"$tmp/err" &&
                awk -v m="$(num forward_macs "$tmp/flops")" -v e="$2" \
                    -v t="$(num train_flops_per_image "$tmp/flops")" \
                    'BEGIN { exit !(m > 0.995 * e && m < 1.005 * e && t == 6 * m) }'; then
            ok "$1 at 224 px: $(num forward_macs "$tmp/flops") forward multiply-adds"
        else
            fail "$1 at 224 px: forward multiply-adds" "$(cat "$tmp/flops" "$tmp/err")"
        fi
    done
else
    skip "resnet18 at 224 px: forward multiply-adds" "no torch and torchvision in $py"
    skip "resnet50 at 224 px: forward multiply-adds" "no torch and torchvision in $py"
fi
done_testing

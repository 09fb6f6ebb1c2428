#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/cuda-lazy-blas.sh - the cuda plugin does not link cuBLAS: no
# DT_NEEDED entry for libcublas or libcublasLt, and no undefined cublas*
# symbol for the dynamic loader to bind at plugin load. Loading libcublasLt
# costs about 150 MiB of resident memory, which every process loading the
# plugin (tandem inspect, a cpu training run, a machine without a GPU)
# would pay; the plugin dlopens both when a device is opened instead
# (plugins/cuda/cuda-blas-lib.h). Skips where the plugin is not built.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

[ "${TDM_CUDA_BUILT:-no}" = yes ] ||
    skip_all "the cuda plugin is not built: ${TDM_CUDA_WHY:-configure found no CUDA toolkit}"
plugin="$TDM_TOP_BUILDDIR/plugins/.libs/libtdm-cuda.so"
[ -f "$plugin" ] || skip_all "the cuda plugin is configured but $plugin is missing"
command -v readelf >/dev/null 2>&1 || skip_all "readelf (binutils) is missing"

needed=$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
# The list was read: the plugin does link the CUDA runtime.
if printf '%s\n' "$needed" | grep -q '^libcudart\.so'; then
    ok "readelf lists the plugin's libraries (libcudart among them)"
else
    fail "readelf lists the plugin's libraries (libcudart among them)" "NEEDED: $needed"
fi
blas=$(printf '%s\n' "$needed" | grep -E '^libcublas(Lt)?\.so')
if [ -z "$blas" ]; then
    ok "no DT_NEEDED entry for libcublas or libcublasLt"
else
    fail "no DT_NEEDED entry for libcublas or libcublasLt" \
        "$(printf 'NEEDED: %s\n' $blas)
(link cuBLAS through plugins/cuda/cuda-blas-lib.h, not -lcublas/-lcublasLt)"
fi
# readelf -W --dyn-syms: "Num: Value Size Type Bind Vis Ndx Name"; Ndx UND
# is a symbol the loader must find elsewhere.
und=$(readelf -W --dyn-syms "$plugin" | awk '$7 == "UND" && $8 ~ /^cublas/ { print $8 }')
if [ -z "$und" ]; then
    ok "no undefined cublas* symbol in the plugin"
else
    fail "no undefined cublas* symbol in the plugin" "$und"
fi
done_testing

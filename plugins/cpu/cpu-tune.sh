# SPDX-License-Identifier: MIT
# plugins/cpu/cpu-tune.sh - the cpu backend's convolution kernels chosen by
# measurement (plugins/cpu/cpu-tune.h): the convolution conformance tests
# against ref pass with every candidate forced (TDM_CPU_TUNE=force:NAME),
# on the machine's own instruction set and on AVX2 (ONEDNN_MAX_CPU_ISA,
# where the nChw8c kernels apply), and each forced candidate is the one the
# profile says ran; with tuning on they pass too. A short lenet training
# times its image-input shapes (runs that paged memory in timed again), and
# TDM_CPU_PROFILE=1 names each choice with the times measured; TDM_CPU_TUNE_CACHE keeps the choices in a file that
# a second run uses without timing again (an edited choice in the file is
# obeyed, and a choice made among other candidates than the run has is
# timed again), while a corrupt file, one from another machine or one of
# the older format is ignored with a warning naming it, then replaced;
# TDM_CPU_WORKSPACE_LIMIT keeps a
# kernel with a larger scratchpad out. Max pooling's conformance tests run
# on AVX2's nChw8c too (its vector loops are compiled for 16 and 8 lanes).
# Prints TAP.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

conf="$TDM_TOP_BUILDDIR/tests/test-conformance"
[ -e "$TDM_TOP_BUILDDIR/plugins/.libs/libtdm-cpu.so" ] || skip_all "cpu plugin not built"
[ -x "$conf" ] || skip_all "tests/test-conformance not built"
unset TDM_CPU_TUNE TDM_CPU_TUNE_CACHE TDM_CPU_STEM TDM_CPU_BWF8 TDM_CPU_WINO ONEDNN_MAX_CPU_ISA
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-cpu-tune-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
export TDM_CONFORMANCE_BACKEND=cpu

# ---- conformance, each candidate forced ----

conv_conformance() {
    "$conf" -p /conformance/conv2d_forward -p /conformance/conv2d_relu_forward \
        -p /conformance/conv2d_backward_data -p /conformance/conv2d_backward_filter \
        -p /conformance/conv2d_backward_filter_layout -p /conformance/conv2d_layout \
        -p /conformance/chain >"$tmp/conf.out" 2>"$tmp/conf.err"
}

conf_failures() { grep -A3 '^not ok' "$tmp/conf.out"; tail -5 "$tmp/conf.err"; }

avx2=no
grep -qw avx2 /proc/cpuinfo && avx2=yes
avx512=no
grep -qw avx512f /proc/cpuinfo && avx512=yes
# (on AVX-512 the nChw8c kernels, wino and bwf8, never apply: they are
# forced on AVX2 only; oneDNN has its Winograd kernels on AVX-512 only)
for run in native:onednn native:stem native:onednn_wino native:gemm AVX2:onednn AVX2:stem \
        AVX2:wino AVX2:bwf8 AVX2:gemm; do
    isa=${run%%:*} cand=${run#*:}
    name="conformance, $isa, TDM_CPU_TUNE=force:$cand"
    if [ $isa = AVX2 ] && [ $avx2 = no ]; then
        skip "$name" "no AVX2 on this machine"
        continue
    fi
    if [ $cand = onednn_wino ] && [ $avx512 = no ]; then
        skip "$name" "no AVX-512 on this machine"
        continue
    fi
    if [ $isa = native ]; then
        TDM_CPU_PROFILE=1 TDM_CPU_TUNE=force:$cand conv_conformance
    else
        ONEDNN_MAX_CPU_ISA=AVX2 TDM_CPU_PROFILE=1 TDM_CPU_TUNE=force:$cand conv_conformance
    fi
    status=$?
    if [ $status -ne 0 ] || grep -q '^not ok' "$tmp/conf.out"; then
        fail "$name" "status $status: $(conf_failures)"
        continue
    fi
    others=$(grep -E ': [a-z0-9_]+ \(' "$tmp/conf.err" |
        grep -v -E ": ($cand|onednn) \((forced|only)\)$")
    if grep -q ": $cand (forced)" "$tmp/conf.err" && [ -z "$others" ]; then
        ok "$name (profile: $cand ran)"
    else
        fail "$name" "no shape ran $cand, or another kernel ran: $others
$(grep -E '^  conv' "$tmp/conf.err" | head -20)"
    fi
done

# TDM_CPU_WORKSPACE_LIMIT keeps out a candidate whose scratchpad is larger:
# with 0 MiB oneDNN's Winograd kernels (which all have one) never run, even
# forced, and the results still pass
name="TDM_CPU_WORKSPACE_LIMIT=0 keeps oneDNN's Winograd kernels out"
if [ $avx512 = no ]; then
    skip "$name" "no AVX-512 on this machine"
elif TDM_CPU_WORKSPACE_LIMIT=0 TDM_CPU_PROFILE=1 TDM_CPU_TUNE=force:onednn_wino \
        conv_conformance && ! grep -q '^not ok' "$tmp/conf.out"; then
    if grep -q ': onednn_wino (' "$tmp/conf.err"; then
        fail "$name" "$(grep ': onednn_wino (' "$tmp/conf.err" | head -5)"
    elif grep -q ': onednn (' "$tmp/conf.err"; then
        ok "$name"
    else
        fail "$name" "no profile: $(tail -5 "$tmp/conf.err")"
    fi
else
    fail "$name" "$(conf_failures)"
fi

if TDM_CPU_PROFILE=1 conv_conformance && ! grep -q '^not ok' "$tmp/conf.out" &&
   grep -q 'kernel choices (TDM_CPU_TUNE=on)' "$tmp/conf.err"; then
    ok "conformance with tuning on"
else
    fail "conformance with tuning on" "$(conf_failures)"
fi

# ---- max pooling's vector loops on nChw8c ----

# make check's conformance run gives the max pools nChw16c inputs on an
# AVX-512 machine; with ONEDNN_MAX_CPU_ISA=AVX2 they get nChw8c, the other
# block width plugins/cpu/cpu-maxpool-vec.h is compiled for
name="max pooling conformance on nChw8c (AVX2)"
if [ $avx2 = no ]; then
    skip "$name" "no AVX2 on this machine"
elif ONEDNN_MAX_CPU_ISA=AVX2 "$conf" -p /conformance/maxpool2d_layout \
        -p /conformance/maxpool2d_forward -p /conformance/maxpool2d_backward \
        -p /conformance/chain >"$tmp/conf.out" 2>"$tmp/conf.err" &&
        ! grep -q '^not ok' "$tmp/conf.out"; then
    layouts=$(sed -n 's/^# x layout: //p' "$tmp/conf.out" | sort | uniq -c)
    if [ -n "$layouts" ] && ! printf '%s\n' "$layouts" | grep -qv ' nChw8c$'; then
        ok "$name"
    else
        fail "$name" "inputs not all nChw8c: $layouts"
    fi
else
    fail "$name" "$(conf_failures)"
fi

# ---- tuning in training, the profile, the cache file ----

cache=$tmp/tune.txt
# train [ENV=VALUE...]: a short lenet run on cpu; stderr in $tmp/err
train() {
    env TDM_CPU_PROFILE=1 "$@" "$TANDEM" train --device cpu --threads 2 --model lenet \
        --limit 256 --batch-size 16 --epochs 1 >"$tmp/out" 2>"$tmp/err"
}
# the profile's line for the first convolution's pass $1 (an image input:
# the stem is a candidate)
stem_line() { grep -E "^  $1 n16 c1 h28 w28 o6 " "$tmp/err"; }

if train TDM_CPU_TUNE_CACHE="$cache"; then
    ok "train with tuning on and a cache file"
else
    fail "train with tuning on and a cache file" "$(cat "$tmp/err")"
fi
timed_ok=yes
for pass in conv_fwd conv_bwd_filter; do
    line=$(stem_line $pass)
    runs='[0-9.]+ \[[0-9]+/[0-9]+ clean(, [0-9]+ paging)?\]'
    printf '%s\n' "$line" |
        grep -qE ": (onednn|stem|gemm) \(timed, ms: onednn $runs stem $runs( gemm $runs)?\)$" ||
        timed_ok="no: '$line'"
done
if [ "$timed_ok" = yes ]; then
    ok "the profile names each timed choice and the times of every candidate"
else
    fail "the profile names each timed choice and the times" "$timed_ok
$(grep -E '^  conv' "$tmp/err")"
fi
# Runs that paged memory in do not count: a candidate is timed until it
# has 4 runs without page faults (or 12 in all), and the first step, which
# lays the activations out in fresh memory, pages in the first run.
paged=0 counted=yes
while read -r runs; do
    [ -n "$runs" ] || continue
    r=$(printf '%s\n' "$runs" | sed -E 's|^\[[0-9]+/([0-9]+) clean.*|\1|')
    p=$(printf '%s\n' "$runs" | sed -nE 's|.*, ([0-9]+) paging\]$|\1|p')
    paged=$((paged + ${p:-0}))
    [ $((r - ${p:-0})) -eq 4 ] || [ "$r" -eq 12 ] || counted="no: $runs"
done <<EOF
$(grep '(timed' "$tmp/err" | grep -oE '\[[0-9]+/[0-9]+ clean(, [0-9]+ paging)?\]')
EOF
if [ "$counted" = yes ] && [ "$paged" -gt 0 ]; then
    ok "runs that paged memory in are timed again ($paged of the first step's)"
else
    fail "runs that paged memory in are timed again" "counted $counted, paged $paged
$(grep -E '^  conv' "$tmp/err")"
fi
if grep -qE '^  conv_bwd_data .*: onednn \(only\)$' "$tmp/err"; then
    ok "a shape with one candidate is not timed"
else
    fail "a shape with one candidate is not timed" "$(grep -E '^  conv' "$tmp/err")"
fi

# the shapes timed (the image input's two passes, and the other layers'
# backward weights, where the gathered sgemm is a candidate too)
ntimed=$(grep -c '(timed' "$tmp/err")

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
head4=$(head -n 4 "$cache" 2>/dev/null)
if [ "$(sed -n 1p "$cache" 2>/dev/null)" = "tandem-cpu-tune 2" ] &&
   [ "$(sed -n 2p "$cache")" = "cpu ${model:-unknown}" ] &&
   sed -n 3p "$cache" | grep -qE '^isa [a-z0-9_]+$' &&
   sed -n 4p "$cache" | grep -qE '^onednn [0-9]+\.[0-9]+\.[0-9]+$'; then
    ok "the cache file names the CPU, instruction set and oneDNN version"
else
    fail "the cache file's header" "$head4"
fi
same=yes
for pass in conv_fwd conv_bwd_filter; do
    choice=$(stem_line $pass | sed 's/.*: \([a-z0-9]*\) (timed.*/\1/')
    key=$(stem_line $pass | sed 's/^  \(.*\): [a-z0-9]* (timed.*/\1/')
    # CHOICE<tab>CANDIDATES<tab>SHAPE, the stem among the candidates
    awk -F '\t' -v c="$choice" -v k="$key" '$1 == c && $3 == k && $2 ~ /(^|,)stem(,|$)/ { f = 1 }
        END { exit !f }' "$cache" || same="no: '$choice ... $key'"
done
if [ "$same" = yes ] && [ "$(grep -c '	' "$cache")" -eq "$ntimed" ]; then
    ok "the cache file holds the $ntimed timed choices"
else
    fail "the cache file holds the $ntimed timed choices" "$same
$(cat "$cache")"
fi

cp "$cache" "$tmp/first.txt"
train TDM_CPU_TUNE_CACHE="$cache"
if [ -n "$(stem_line conv_fwd | grep -F "(cache $cache)")" ] &&
   [ -n "$(stem_line conv_bwd_filter | grep -F "(cache $cache)")" ] &&
   ! grep -q '(timed' "$tmp/err" && cmp -s "$cache" "$tmp/first.txt"; then
    ok "a second run takes the choices from the file without timing"
else
    fail "a second run takes the choices from the file" "$(grep -E '^  conv' "$tmp/err")"
fi

# the file is obeyed: every choice made among candidates with the stem
# edited to the stem
sed 's/^onednn	\([a-z0-9_,]*stem[a-z0-9_,]*\)	/stem	\1	/' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
if stem_line conv_fwd | grep -qF ": stem (cache $cache)" &&
   stem_line conv_bwd_filter | grep -qF ": stem (cache $cache)"; then
    ok "a choice edited in the file is used"
else
    fail "a choice edited in the file is used" "$(grep -E '^  conv' "$tmp/err")"
fi

# warned_and_retimed NAME WHY: the last run warned about the file with WHY,
# timed again and replaced the file with a valid one
warned_and_retimed() {
    if grep -F "TDM_CPU_TUNE_CACHE $cache: " "$tmp/err" | grep -qF "$2" &&
       stem_line conv_fwd | grep -q '(timed' &&
       [ "$(sed -n 1p "$cache")" = "tandem-cpu-tune 2" ] &&
       [ "$(grep -c '	' "$cache")" -eq "$ntimed" ]; then
        ok "$1"
    else
        fail "$1" "$(cat "$tmp/err")
$(cat "$cache")"
    fi
}
printf 'tandem-cpu-tune 2\ncpu x\n\001\002 garbage\n' >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
warned_and_retimed "a corrupt cache file is ignored with a warning naming it" "line 3: expected"
sed 's/^cpu .*/cpu Some Other Processor 9000/' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
warned_and_retimed "a cache file from another machine is ignored with a warning" \
    "made on another machine or oneDNN"
sed 's/^onednn	/sse2	/; s/^stem	/sse2	/; s/^gemm	/sse2	/' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
warned_and_retimed "a cache file naming an unknown kernel is ignored" "unknown kernel 'sse2'"
sed 's/^\([a-z0-9_]*\)	[a-z0-9_,]*	/\1	onednn,sse2	/' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
warned_and_retimed "a cache file naming an unknown candidate is ignored" \
    "unknown kernel among 'onednn,sse2'"
sed 's/^[a-z0-9_]*	[a-z0-9_,]*	/stem	onednn	/' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
warned_and_retimed "a cache file whose choice is not among its candidates is ignored" \
    "'stem' is not among its candidates 'onednn'"
sed '1s/ 2$/ 1/; s/^\([a-z0-9_]*\)	[a-z0-9_,]*	/\1	/' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
warned_and_retimed "a cache file of the format before candidates were kept is ignored" \
    "written by an older Tandem (format 1"
# a choice made among other candidates than this process has: the image
# input's forward with the stem left out of its candidates is timed again,
# the other shapes are taken from the file, and nothing is warned about
awk -F '\t' -v OFS='\t' 'NR > 4 && $3 ~ /^conv_fwd n16 c1 h28 w28 o6 / { $1 = "onednn"; $2 = "onednn" }
    { print }' "$tmp/first.txt" >"$cache"
train TDM_CPU_TUNE_CACHE="$cache"
if stem_line conv_fwd | grep -q '(timed' && stem_line conv_bwd_filter | grep -qF "(cache $cache)" &&
   ! grep -q "TDM_CPU_TUNE_CACHE" "$tmp/err" &&
   awk -F '\t' '$3 ~ /^conv_fwd n16 c1 h28 w28 o6 / && $2 ~ /stem/ { f = 1 } END { exit !f }' \
       "$cache"; then
    ok "a cached choice made among other candidates is timed again"
else
    fail "a cached choice made among other candidates is timed again" "$(grep -E '^  conv|TDM_CPU' "$tmp/err")
$(cat "$cache")"
fi

# ---- the fixed rules and a bad mode ----

train TDM_CPU_TUNE=off
if stem_line conv_fwd | grep -q ': stem (rule)$' &&
   stem_line conv_bwd_filter | grep -q ': stem (rule)$'; then
    ok "TDM_CPU_TUNE=off keeps the fixed rules (the stem for an image input)"
else
    fail "TDM_CPU_TUNE=off keeps the fixed rules" "$(grep -E '^  conv' "$tmp/err")"
fi
train TDM_CPU_TUNE=off TDM_CPU_STEM=0
if stem_line conv_fwd | grep -q ': onednn (only)$'; then
    ok "TDM_CPU_STEM=0 takes the stem out"
else
    fail "TDM_CPU_STEM=0 takes the stem out" "$(grep -E '^  conv' "$tmp/err")"
fi
if train TDM_CPU_TUNE=fastest && grep -q "TDM_CPU_TUNE='fastest' is not on, off or force:NAME" \
        "$tmp/err" && stem_line conv_fwd | grep -q '(timed'; then
    ok "an unknown TDM_CPU_TUNE is warned about, and tuning stays on"
else
    fail "an unknown TDM_CPU_TUNE" "$(cat "$tmp/err")"
fi

done_testing

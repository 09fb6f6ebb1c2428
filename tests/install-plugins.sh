#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/install-plugins.sh - the third-party plugin kit, as its author uses
# it: stage `make install` into a temporary DESTDIR, build the three
# examples of examples/plugins/ (a strategy, a transform, a dataset reader)
# with their own Makefiles and nothing but `pkg-config tandem-1` (with
# PKG_CONFIG_PATH in the environment, as their READMEs say), from the copies
# installed in $(docdir), and run them from the stage. The Local SGD strategy trains on 2 ranks: its ranks must
# end with equal weights (each rank's file, written by tests/strategy-ranks.c
# built against the stage), the same run without the end-of-training hook
# must not (the control), and it must differ from ddp with sync-every=4 yet
# match it with sync-every=1. `--strategy "localsgd sync-every=4"` and
# `--set strategy.sync-every=4` must train alike.
# The source tree is never written to (make distcheck makes it read-only).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

PKG_CONFIG=${PKG_CONFIG:-pkg-config}
CC=${CC:-cc}
PY=/usr/bin/python3
top_build=$TDM_TOP_BUILDDIR
top_src=$TDM_TOP_SRCDIR

command -v "$PKG_CONFIG" >/dev/null 2>&1 || skip_all "no $PKG_CONFIG"
command -v "$CC" >/dev/null 2>&1 || skip_all "no C compiler ($CC)"
[ -x "$PY" ] || skip_all "no $PY (tests/compare-weights.py)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-kit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage

# ---- the stage and a tandem-1.pc pointing into it --------------------------
run_logged "make install DESTDIR=<tmp>" install.log \
    make -C "$top_build" install DESTDIR="$stage" || bail "make install failed"
# The staged tandem-1.pc is relocatable (${pcfiledir}): PKG_CONFIG_PATH
# alone points a build at the stage. libdir and pluginsdir as installed
# (below the stage) are what it gives with the stage taken off.
pc=$(find "$stage" -path '*/pkgconfig/tandem-1.pc' | head -n 1)
[ -n "$pc" ] || bail "no pkgconfig/tandem-1.pc under the stage"
pcvar() {
    d=$(cd "$("$PKG_CONFIG" --variable="$1" "$pc")" 2>/dev/null && pwd -P) && printf '%s\n' "${d#"$(cd "$stage" && pwd -P)"}"
}
libdir=$(pcvar libdir)
pluginsdir=$(pcvar pluginsdir)
[ -n "$libdir" ] && [ -n "$pluginsdir" ] || bail "cannot read libdir from $pc"
tandem=$(find "$stage" -path '*/bin/tandem' -type f | head -n 1)
fmnist=$(find "$stage" -type d -path '*/tandem/fashion-mnist' | head -n 1)
[ -n "$tandem" ] && [ -n "$fmnist" ] || bail "no bin/tandem or fashion-mnist under the stage"
PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH

staged() {
    env LD_LIBRARY_PATH="$stage$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        TDM_PLUGIN_SYSTEM_PATH="$stage$pluginsdir" TDM_PLUGIN_PATH="$tmp/plugins" "$@"
}

# ---- build each example as its README says ---------------------------------
# From the copy `make install` put in $(docdir), as an author who has only
# the installed Tandem finds them.
docdir=$(printf 'tdm-print-docdir:\n\t@echo $(docdir)\n' |
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_build" -f Makefile -f - tdm-print-docdir)
examples=$stage$docdir/examples/plugins
[ -n "$docdir" ] && [ -d "$examples" ] || bail "no examples/plugins under the staged \$docdir ($docdir)"
mkdir -p "$tmp/plugins"
for ex in localsgd invert rawimg; do
    cp -R "$examples/$ex" "$tmp/$ex"
    chmod -R u+w "$tmp/$ex"
    rm -f "$tmp/$ex"/*.so
    # a third party's make: none of this tree's make flags
    run_logged "examples/plugins/$ex builds with its Makefile and pkg-config" "make-$ex.log" \
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$tmp/$ex" CC="$CC" CFLAGS="-O2 -Werror"
    run_logged "examples/plugins/$ex installs into DESTDIR\$pluginsdir" "install-$ex.log" \
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$tmp/$ex" install DESTDIR="$tmp/pstage"
    cp "$tmp/$ex/libtdm-$ex.so" "$tmp/plugins/" 2>/dev/null
done

staged "$tandem" inspect >"$tmp/inspect.log" 2>&1
for f in "strategy +localsgd" "transform +invert" "dataset +rawimg"; do
    if grep -Eq "^ +$f +priority" "$tmp/inspect.log"; then
        ok "tandem inspect lists the example's $f"
    else
        fail "tandem inspect lists the example's $f" "$(cat "$tmp/inspect.log")"
    fi
done
staged "$tandem" inspect localsgd >"$tmp/inspect-plugin.log" 2>&1
if grep -q 'version: *1.0.0' "$tmp/inspect-plugin.log"; then
    ok "the plugin's version is the one its Makefile gives (1.0.0)"
else
    fail "the plugin's version is the one its Makefile gives (1.0.0)" \
        "$(cat "$tmp/inspect-plugin.log")"
fi

# `tandem check-plugin` passes on each, run from the stage.
for ex in localsgd invert rawimg; do
    staged "$tandem" check-plugin "$tmp/plugins/libtdm-$ex.so" >"$tmp/check-$ex.log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q '^FAIL' "$tmp/check-$ex.log"; then
        ok "tandem check-plugin passes on the $ex example ($(tail -n 1 "$tmp/check-$ex.log" |
            sed 's/.*: //'))"
    else
        fail "tandem check-plugin passes on the $ex example" "exit $rc: $(cat "$tmp/check-$ex.log")"
    fi
done
if grep -q '^PASS strategy localsgd: alone it trains as single' "$tmp/check-localsgd.log" &&
    grep -q "^PASS strategy localsgd, 2 ranks: .* every rank ends with rank 0's weights" \
        "$tmp/check-localsgd.log" &&
    grep -q '^PASS transform invert:' "$tmp/check-invert.log"; then
    ok "check-plugin ran the strategy's and the transform's checks"
else
    fail "check-plugin ran the strategy's and the transform's checks" \
        "$(cat "$tmp/check-localsgd.log" "$tmp/check-invert.log")"
fi

# ---- Local SGD on 2 ranks --------------------------------------------------
strict="-std=gnu11 -Wall -Wextra -Werror -O1"
# shellcheck disable=SC2046,SC2086 # word splitting of flags is intended
run_logged "tests/strategy-ranks.c builds against the staged install" cc-ranks.log \
    "$CC" $strict -o "$tmp/strategy-ranks" "$top_src/tests/strategy-ranks.c" \
    $("$PKG_CONFIG" --cflags --libs tandem-1)

# ranks NAME SPEC [STEPS noend]: a 2-rank job writing $tmp/NAME-<rank>.safetensors
ranks() {
    name=$1; spec=$2; shift 2
    staged "$tandem" run --nproc-per-node 2 -- "$tmp/strategy-ranks" "$spec" "$tmp/$name" "$@" \
        >"$tmp/$name.log" 2>&1 || { echo "# $spec failed:"; sed 's/^/#   /' "$tmp/$name.log"; }
}
# compare A B TOL: compare-weights.py's verdict, its line in $cmp
compare() { cmp=$("$PY" "$top_src/tests/compare-weights.py" "$1" "$2" "$3" 2>&1); }
ranks k4 "localsgd sync-every=4"
ranks k4-noend "localsgd sync-every=4" 10 noend
ranks k1 "localsgd sync-every=1"
ranks ddp ddp
if [ -s "$tmp/k4-1.safetensors" ] && compare "$tmp/k4-0.safetensors" "$tmp/k4-1.safetensors" 0; then
    ok "localsgd sync-every=4: both ranks end with equal weights ($cmp)"
else
    fail "localsgd sync-every=4: both ranks end with equal weights" "$cmp"
fi
if [ -s "$tmp/k4-noend-1.safetensors" ] &&
    ! compare "$tmp/k4-noend-0.safetensors" "$tmp/k4-noend-1.safetensors" 1e-5; then
    ok "without the end-of-training average the ranks differ (the control: $cmp)"
else
    fail "without the end-of-training average the ranks differ (the control)" "$cmp"
fi
if [ -s "$tmp/ddp-0.safetensors" ] && [ -s "$tmp/k4-0.safetensors" ] &&
    ! compare "$tmp/k4-0.safetensors" "$tmp/ddp-0.safetensors" 1e-5; then
    ok "localsgd sync-every=4 trains otherwise than ddp ($cmp)"
else
    fail "localsgd sync-every=4 trains otherwise than ddp" "$cmp"
fi
if [ -s "$tmp/k1-0.safetensors" ] && compare "$tmp/k1-0.safetensors" "$tmp/ddp-0.safetensors" 1e-5
then
    ok "localsgd sync-every=1 trains as ddp does ($cmp)"
else
    fail "localsgd sync-every=1 trains as ddp does" "$cmp"
fi

# The practitioner's path: tandem run + tandem train, the parameter given
# in the strategy's text or through --set.
common="--dataset idx:$fmnist --limit 640 --no-eval --seed 7 --threads 1 --quiet --lr 0.01
    --timeout 60 --device ref --collective shm"
train2() {
    out=$1; shift
    # shellcheck disable=SC2086
    staged "$tandem" run --nproc-per-node 2 -- "$tandem" train $common --save "$tmp/$out" "$@" \
        >"$tmp/$out.log" 2>&1 || { echo "# tandem train $* failed:"; sed 's/^/#   /' "$tmp/$out.log"; }
}
train2 t-spec.st --strategy "localsgd sync-every=4"
train2 t-set.st --strategy localsgd --set strategy.sync-every=4
train2 t-ddp.st --strategy ddp
if [ -s "$tmp/t-set.st" ] && compare "$tmp/t-spec.st" "$tmp/t-set.st" 0; then
    ok "tandem train: --set strategy.sync-every=4 is --strategy \"localsgd sync-every=4\""
else
    fail "tandem train: --set strategy.sync-every=4 is --strategy \"localsgd sync-every=4\"" "$cmp"
fi
if [ -s "$tmp/t-ddp.st" ] && [ -s "$tmp/t-spec.st" ] &&
    ! compare "$tmp/t-spec.st" "$tmp/t-ddp.st" 1e-5; then
    ok "tandem train: localsgd sync-every=4 on 2 ranks is not ddp ($cmp)"
else
    fail "tandem train: localsgd sync-every=4 on 2 ranks is not ddp" "$cmp"
fi
# shellcheck disable=SC2086
out=$(staged "$tandem" train $common --strategy localsgd --set strategy.sync-every=0 2>&1)
case $out in
*"localsgd: sync-every=0: expected an integer in [1, 1e+06]"*) ok "a bad --set strategy value names the parameter" ;;
*) fail "a bad --set strategy value names the parameter" "$out" ;;
esac
# "none" would leave the getter nothing in range (it read 0: never averaged)
# shellcheck disable=SC2086
out=$(staged "$tandem" train $common --strategy "localsgd sync-every=none" 2>&1)
case $out in
*"localsgd: sync-every=none: expected an integer in [1, 1e+06] ('none' is not accepted)"*)
    ok "sync-every=none is refused, not read as 0" ;;
*) fail "sync-every=none is refused, not read as 0" "$out" ;;
esac

# ---- the dataset reader and the transform ---------------------------------
"$PY" - "$tmp/raw" <<'PYEOF'
import os, random, sys
d = sys.argv[1]
os.makedirs(d)
rng = random.Random(5)
for split, n in (("train", 96), ("test", 32)):
    labels = bytes(rng.randrange(4) for _ in range(n))
    images = bytes((lab * 60 + rng.randrange(40)) for lab in labels for _ in range(64))
    open(f"{d}/{split}-labels.u8", "wb").write(labels)
    open(f"{d}/{split}-images.u8", "wb").write(images)
PYEOF
run_logged "tandem train reads the example reader's rawimg data set" train-raw.log \
    staged "$tandem" train --dataset "rawimg $tmp/raw size=8,8 classes=4" --model mlp --epochs 2 \
    --device ref --threads 1 --quiet
out=$(staged "$tandem" train --dataset "rawimg $tmp/raw size=9,9 classes=4" --model mlp \
    --device ref --quiet 2>&1)
case $out in
*"train-images.u8: 6144 bytes, expected 96 images of 81 bytes"*) ok "rawimg names the file whose size is wrong" ;;
*) fail "rawimg names the file whose size is wrong" "$out" ;;
esac
run_logged "tandem train runs the example transform (invert p=0.5)" train-invert.log \
    staged "$tandem" train --dataset "idx:$fmnist" --limit 256 --transforms "invert p=0.5" \
    --no-eval --device ref --threads 1 --quiet
out=$(staged "$tandem" train --dataset "idx:$fmnist" --transforms "invert p=2" --device ref 2>&1)
case $out in
*"p=2"*) ok "invert p=2 is refused naming the parameter" ;;
*) fail "invert p=2 is refused naming the parameter" "$out" ;;
esac

done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/install-example.sh - proves that an installed Tandem is usable by a C
# programmer and a plugin author: stage `make install` into a temporary
# DESTDIR, check the layout that tandem-1.pc promises, build examples/train-mlp.c
# and the out-of-tree plugin in examples/plugin/ against the staged headers and
# library only, then run the staged `tandem inspect` and the example program,
# with the example plugin's optimizer, on a small subset of Fashion-MNIST.
# A backend plugin with a NULL required slot (tests/fixtures/nullgemm.c),
# built the same way, must show under the load failures with its reason and
# never be selected.
# The source tree is never written to (make distcheck makes it read-only).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

PKG_CONFIG=${PKG_CONFIG:-pkg-config}
CC=${CC:-cc}
top_build=$TDM_TOP_BUILDDIR
top_src=$TDM_TOP_SRCDIR

command -v "$PKG_CONFIG" >/dev/null 2>&1 || skip_all "no $PKG_CONFIG"
command -v "$CC" >/dev/null 2>&1 || skip_all "no C compiler ($CC)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage

# ---- 1. make install into a DESTDIR ---------------------------------------
# Run from inside `make check`, this make inherits the outer one's flags
# (-j, jobserver); everything is already built, so it only installs.
run_logged "make install DESTDIR=<tmp>" install.log \
    make -C "$top_build" install DESTDIR="$stage" || bail "make install failed"

# Where things went: the staged tandem-1.pc alone says it. It is
# relocatable (its prefix is ${pcfiledir}/..), so with PKG_CONFIG_PATH at
# its directory every path it gives lies inside the stage.
pcfile=$(find "$stage" -path '*/pkgconfig/tandem-1.pc' -type f | head -n 1)
[ -n "$pcfile" ] || bail "no tandem-1.pc under the staged install"
staged_pc_dir=${pcfile%/tandem-1.pc}
PKG_CONFIG_PATH=$staged_pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
# A directory without "." or ".." components, or nothing if it is missing.
canon() { (cd "$1" 2>/dev/null && pwd -P); }
pcvar() { canon "$("$PKG_CONFIG" --variable="$1" tandem-1)"; }
stage_phys=$(canon "$stage")
libdir=$(pcvar libdir)
includedir=$(pcvar includedir)
pluginsdir=$(pcvar pluginsdir)
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_build/config.h")
[ -n "$libdir" ] && [ -n "$includedir" ] && [ -n "$version" ] ||
    bail "cannot read libdir/includedir from $pcfile or the version from config.h"

# ---- 2. the installed layout ---------------------------------------------
if [ "$staged_pc_dir" -ef "$libdir/pkgconfig" ]; then
    ok "tandem-1.pc installed in \$libdir/pkgconfig"
else
    fail "tandem-1.pc installed in \$libdir/pkgconfig" "found: $pcfile, libdir: $libdir"
fi
# shellcheck disable=SC2016 # the literal ${pcfiledir} is what is checked
if grep -q '^prefix=${pcfiledir}/' "$pcfile"; then
    ok "tandem-1.pc is relocatable: prefix=\${pcfiledir}/..."
else
    fail "tandem-1.pc is relocatable: prefix=\${pcfiledir}/..." "$(cat "$pcfile")"
fi
inside_stage() {
    case $1 in
    "$stage_phys"/*) return 0 ;;
    esac
    return 1
}
for var in libdir includedir pluginsdir; do
    eval "dir=\$$var"
    if inside_stage "$dir"; then
        ok "pkg-config --variable=$var tandem-1 lies in the stage"
    else
        fail "pkg-config --variable=$var tandem-1 lies in the stage" \
            "got: $("$PKG_CONFIG" --variable=$var tandem-1 2>&1) -> '$dir', stage $stage_phys"
    fi
done

got=$("$PKG_CONFIG" --modversion tandem-1 2>&1)
if [ "$got" = "$version" ]; then
    ok "pkg-config --modversion tandem-1 = $version"
else
    fail "pkg-config --modversion tandem-1 = $version" "got: $got"
fi
if [ -n "$pluginsdir" ] && [ "$pluginsdir" = "$libdir/tandem-1/plugins" ]; then
    ok "pkg-config --variable=pluginsdir tandem-1 = \$libdir/tandem-1/plugins"
else
    fail "pkg-config --variable=pluginsdir tandem-1 = \$libdir/tandem-1/plugins" \
        "got: $pluginsdir, expected $libdir/tandem-1/plugins"
fi

missing=
for h in "$top_src"/include/tandem/*.h; do
    [ -f "$includedir/tandem-1/tandem/$(basename "$h")" ] || missing="$missing $(basename "$h")"
done
if [ -z "$missing" ]; then
    ok "every public header under include/tandem-1/tandem/"
else
    fail "every public header under include/tandem-1/tandem/" "missing:$missing"
fi

if [ -f "$libdir/libtandem-1.so.0" ] && [ -e "$libdir/libtandem-1.so" ]; then
    ok "libtandem-1.so.0 and the libtandem-1.so link installed"
else
    fail "libtandem-1.so.0 and the libtandem-1.so link installed" \
        "$(ls -l "$libdir" 2>&1)"
fi

if [ -f "$pluginsdir/libtdm-ref.so" ]; then
    ok "plugins installed in lib/tandem-1/plugins/"
else
    fail "plugins installed in lib/tandem-1/plugins/" "$(ls -l "$pluginsdir" 2>&1)"
fi

tandem=$(find "$stage" -path '*/bin/tandem' -type f | head -n 1)
fmnist=$(find "$stage" -type d -path '*/tandem/fashion-mnist' | head -n 1)
[ -n "$tandem" ] || bail "no bin/tandem under the staged install"
[ -n "$fmnist" ] || bail "no embedded fashion-mnist under the staged install"

# The documentation, in $(docdir) as this build's Makefile has it: every
# guide of docs/ and every file of examples/ (docs/docs.mk lists them; a
# file added to the tree but not to the list fails here), unchanged, the
# example scripts still executable, and every relative link of the
# installed Markdown pages resolving inside the installed tree.
docdir=$(printf 'tdm-print-docdir:\n\t@echo $(docdir)\n' |
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_build" -f Makefile -f - tdm-print-docdir)
staged_doc=$stage$docdir
if [ -n "$docdir" ] && [ -f "$staged_doc/docs/plugins/strategy.md" ] &&
    [ -f "$staged_doc/examples/plugins/localsgd/Makefile" ]; then
    ok "docs/plugins/strategy.md and examples/plugins/localsgd/ installed in \$docdir ($docdir)"
else
    fail "docs/plugins/strategy.md and examples/plugins/localsgd/ installed in \$docdir" \
        "docdir '$docdir': $(find "$stage" -path '*/doc/*' -type f | head -n 20)"
fi
doc_files=$(cd "$top_src" && {
    echo README.md
    echo LICENSE
    ls docs/*.md docs/plugins/*.md docs/reference/README.md
    find examples -type f ! -name '*.so' ! -name '*.o' ! -name '*~'
} | LC_ALL=C sort)
missing=
for f in $doc_files; do
    cmp -s "$top_src/$f" "$staged_doc/$f" || missing="$missing $f"
done
if [ -z "$missing" ]; then
    ok "README, LICENSE, docs/ and examples/ installed unchanged ($(echo $doc_files | wc -w) files)"
else
    fail "README, LICENSE, docs/ and examples/ installed unchanged" \
        "missing or different in $staged_doc (list them in docs/docs.mk):$missing"
fi
check "the installed examples/transfer-learning/run.sh is executable" \
    [ -x "$staged_doc/examples/transfer-learning/run.sh" ]
broken=
for page in $(cd "$staged_doc" && find . -name '*.md' | LC_ALL=C sort); do
    dir=$(dirname "$staged_doc/$page")
    for link in $(grep -o '](\([^)]*\))' "$staged_doc/$page" | sed 's/^](//; s/)$//; s/#.*//' |
        grep -v '^[a-z]*:' | sort -u); do
        [ -e "$dir/$link" ] || broken="$broken ${page#./} -> $link;"
    done
done
if [ -z "$broken" ]; then
    ok "every relative link of the installed Markdown pages resolves in \$docdir"
else
    fail "every relative link of the installed Markdown pages resolves in \$docdir" "$broken"
fi

# Installed binaries must not look into the build tree at run time (libtool
# relinks them on install for that). An RPATH entry leaks when it is the
# build directory or a directory under it, compared by whole path
# components: a prefix that merely begins with the same characters
# (configure --prefix=$top_build-stage) installs outside the build tree.
# The build directory is compared both as make names it and as its physical
# path, in case one of them goes through a symbolic link.
top_build_phys=$(cd "$top_build" && pwd -P)
in_build_tree() {
    for root in "$top_build" "$top_build_phys"; do
        case ${1%/} in
        "$root" | "$root"/*) return 0 ;;
        esac
    done
    return 1
}
# The directories of a file's RPATH and RUNPATH entries, one per line.
rpath_dirs() {
    readelf -d "$1" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\].*/\2/p' | tr ':' '\n'
}
if command -v readelf >/dev/null 2>&1; then
    leaks=
    for f in "$libdir"/libtandem-1.so.0 "$pluginsdir"/*.so "$tandem"; do
        [ -f "$f" ] || continue
        leaks="$leaks$(rpath_dirs "$f" | while IFS= read -r dir; do
            if in_build_tree "$dir"; then printf ' %s (%s)' "$f" "$dir"; fi
        done)"
    done
    if [ -z "$leaks" ]; then
        ok "no installed binary has an RPATH into the build tree"
    else
        fail "no installed binary has an RPATH into the build tree" "$leaks"
    fi
fi

# ---- 3. build against the staged install ----------------------------------
# PKG_CONFIG_PATH (set above) names the staged .pc file's directory and
# nothing else is needed: glib-2.0's own flags, pulled in by Requires, stay
# the system's.
incflag=$("$PKG_CONFIG" --cflags-only-I tandem-1 | tr ' ' '\n' | sed -n 's/^-I//p' | head -n 1)
if [ -n "$incflag" ] && [ "$(canon "$incflag")" = "$includedir/tandem-1" ]; then
    ok "pkg-config --cflags tandem-1 points into the stage"
else
    fail "pkg-config --cflags tandem-1 points into the stage" "$("$PKG_CONFIG" --cflags tandem-1 2>&1)"
fi

strict="-std=gnu11 -Wall -Wextra -Werror -O1"
# shellcheck disable=SC2046,SC2086 # word splitting of flags is intended
run_logged "examples/train-mlp.c builds with pkg-config tandem-1" cc-example.log \
    "$CC" $strict -o "$tmp/train-mlp" "$top_src/examples/train-mlp.c" \
    $("$PKG_CONFIG" --cflags --libs tandem-1)

# The plugin is a third party's project: build a copy (the source tree may
# be read-only) with a make that does not inherit this tree's make flags.
cp -R "$top_src/examples/plugin" "$tmp/plugin"
chmod -R u+w "$tmp/plugin"
rm -f "$tmp/plugin/libtdm-example.so"
plugin_make() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$tmp/plugin" "$@"; }
run_logged "examples/plugin builds with its Makefile" plugin.log \
    plugin_make PKG_CONFIG="$PKG_CONFIG" CC="$CC" CFLAGS="-O2 -Werror"
run_logged "examples/plugin installs into DESTDIR\$pluginsdir" plugin-install.log \
    plugin_make install DESTDIR="$tmp/pstage"
pl_dest=$tmp/pstage$("$PKG_CONFIG" --variable=pluginsdir tandem-1)/libtdm-example.so
if [ -f "$pl_dest" ]; then
    ok "libtdm-example.so is at DESTDIR\$pluginsdir"
else
    fail "libtdm-example.so is at DESTDIR\$pluginsdir" "missing: $pl_dest"
fi

# One step of the plugin's optimizer, checked element by element: every
# weight moves by exactly -lr * sign(its gradient). Built like the example,
# against the staged install only.
cat >"$tmp/check-sign-sgd.c" <<'EOF'
#include <math.h>
#include <stdio.h>
#include <tandem/tandem.h>

static int failed(const char *what, const GError *error)
{
    fprintf(stderr, "%s: %s\n", what, error != NULL ? error->message : "failed");
    return 1;
}

int main(void)
{
    const float lr = 0.01f;
    GError *error = NULL;
    TdmModelConfig mc = {.in_channels = 1, .num_classes = 10, .image_size = 28};
    TdmOptimizerOptions oo;
    int64_t xshape[4] = {8, 1, 28, 28}, lshape[1] = {8};
    static float x[8 * 28 * 28];
    int32_t labels[8];
    TdmTensor *logits = NULL;
    float loss;

    TdmDevice *dev = tdm_device_get("auto", &error);
    TdmModule *root = dev ? tdm_model_zoo_create("mlp", &mc, &error) : NULL;
    TdmModel *model = root ? tdm_model_new(root, dev, 7, &error) : NULL;
    tdm_optimizer_options_init(&oo);
    oo.lr = lr;
    TdmOptimizer *opt = model ? tdm_optimizer_new("example-sign-sgd", model, NULL, &oo, &error) : NULL;
    if (opt == NULL) {
        return failed("setup", error);
    }
    for (int i = 0; i < 8 * 28 * 28; i++) {
        x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    }
    for (int i = 0; i < 8; i++) {
        labels[i] = (i * 3) % 10;
    }
    TdmTensor *xt = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, xshape, &error);
    TdmTensor *lt = xt ? tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, &error) : NULL;
    TdmTensor *dlogits = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    if (lt == NULL || !tdm_tensor_write(xt, x, &error) || !tdm_tensor_write(lt, labels, &error) ||
        !tdm_model_forward(model, xt, &logits, &error) ||
        !tdm_loss_cross_entropy(dev, NULL, logits, lt, 0.0f, &loss, dlogits, NULL, &error) ||
        !tdm_model_backward(model, dlogits, &error)) {
        return failed("forward/backward", error);
    }
    int64_t n = (int64_t)model->n_grads, moved = 0;
    float *before = tdm_tensor_read_f32(model->value_arena, &error);
    float *grad = before ? tdm_tensor_read_f32(model->grad_arena, &error) : NULL;
    if (grad == NULL || !tdm_optimizer_step(opt, &error)) {
        return failed("step", error);
    }
    float *after = tdm_tensor_read_f32(model->value_arena, &error);
    if (after == NULL) {
        return failed("read", error);
    }
    for (int64_t i = 0; i < n; i++) {
        float want = before[i] - lr * (float)((grad[i] > 0) - (grad[i] < 0));
        if (fabsf(after[i] - want) > 1e-6f) {
            fprintf(stderr, "element %ld: %g -> %g with gradient %g, expected %g\n", (long)i,
                    before[i], after[i], grad[i], want);
            return 1;
        }
        moved += grad[i] != 0.0f;
    }
    if (moved < n / 2) {
        fprintf(stderr, "only %ld of %ld gradients are non-zero\n", (long)moved, (long)n);
        return 1;
    }
    printf("%ld of %ld weights moved by exactly lr\n", (long)moved, (long)n);
    return 0;
}
EOF
# shellcheck disable=SC2046,SC2086
run_logged "a check program builds against the staged install" cc-check.log \
    "$CC" $strict -o "$tmp/check-sign-sgd" "$tmp/check-sign-sgd.c" \
    $("$PKG_CONFIG" --cflags --libs tandem-1) -lm

# A third party's backend with a NULL required slot (gemm), built like the
# example plugin against the staged headers only.
mkdir -p "$tmp/nullslot"
# shellcheck disable=SC2046,SC2086
run_logged "a backend plugin with a NULL gemm builds against the staged install" cc-nullslot.log \
    "$CC" $strict -Wno-unused-parameter -fPIC -fvisibility=hidden -shared -Wl,--no-undefined \
    -o "$tmp/nullslot/libtdm-fixture-nullgemm.so" "$top_src/tests/fixtures/nullgemm.c" \
    "$top_src/tests/fixtures/backend-ops.c" $("$PKG_CONFIG" --cflags --libs tandem-1)

# ---- 4. run from the stage -------------------------------------------------
# TDM_PLUGIN_SYSTEM_PATH replaces the compiled-in plugin directory (which is
# the real, not the staged, one); LD_LIBRARY_PATH finds the staged library.
staged() {
    env LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        TDM_PLUGIN_SYSTEM_PATH="$pluginsdir" "$@"
}

staged TDM_PLUGIN_PATH="$tmp/plugin" "$tandem" inspect >"$tmp/inspect.log" 2>&1
if grep -q 'example-sign-sgd' "$tmp/inspect.log"; then
    ok "tandem inspect lists example-sign-sgd with TDM_PLUGIN_PATH"
else
    fail "tandem inspect lists example-sign-sgd with TDM_PLUGIN_PATH" "$(tail -n 30 "$tmp/inspect.log")"
fi
# `tandem inspect` prints each plugin's file: the example comes from
# TDM_PLUGIN_PATH, ref from the staged plugin directory, and every staged
# plugin loads.
shown_file() { grep 'file:' "$tmp/inspect.log" | grep -qF "$1"; }
if shown_file "$tmp/plugin/libtdm-example.so" && shown_file "$pluginsdir/libtdm-ref.so"; then
    ok "plugins load from TDM_PLUGIN_PATH and the staged plugin directory"
else
    fail "plugins load from TDM_PLUGIN_PATH and the staged plugin directory" \
        "$(grep -E 'Plugin:|file:' "$tmp/inspect.log")"
fi
if grep -q '^Load failures: none' "$tmp/inspect.log"; then
    ok "no staged plugin fails to load"
else
    fail "no staged plugin fails to load" "$(sed -n '/^Load failures/,$p' "$tmp/inspect.log")"
fi
# The NULL-gemm backend is refused at registration: a load failure with
# its reason, never a device, even at the highest priority.
staged TDM_PLUGIN_PATH="$tmp/nullslot" "$tandem" inspect >"$tmp/inspect-null.log" 2>&1
null_reason="$tmp/nullslot/libtdm-fixture-nullgemm.so: backend 'fixture-nullgemm': required slot 'gemm' is NULL"
if sed -n '/^Load failures/,$p' "$tmp/inspect-null.log" | grep -qF -- "$null_reason"; then
    ok "tandem inspect lists the NULL-gemm backend under load failures with the reason"
else
    fail "tandem inspect lists the NULL-gemm backend under load failures with the reason" \
        "$(sed -n '/^Load failures/,$p' "$tmp/inspect-null.log")"
fi
if grep -q '^ *backend  *fixture-nullgemm' "$tmp/inspect-null.log"; then
    fail "the NULL-gemm backend is not listed as a feature" "$(cat "$tmp/inspect-null.log")"
else
    ok "the NULL-gemm backend is not listed as a feature"
fi
if staged TDM_PLUGIN_PATH="$tmp/nullslot" "$tandem" train --dataset "idx:$fmnist" --limit 64 \
    --device fixture-nullgemm --no-eval --quiet >"$tmp/train-null-named.log" 2>&1; then
    fail "tandem train --device fixture-nullgemm is an error" "$(cat "$tmp/train-null-named.log")"
elif grep -qF "no backend named 'fixture-nullgemm'" "$tmp/train-null-named.log"; then
    ok "tandem train --device fixture-nullgemm is an error: no such backend"
else
    fail "tandem train --device fixture-nullgemm is an error: no such backend" \
        "$(cat "$tmp/train-null-named.log")"
fi
if staged TDM_PLUGIN_PATH="$tmp/nullslot" TDM_PLUGIN_PRIORITY=fixture-nullgemm:100 "$tandem" train \
    --dataset "idx:$fmnist" --limit 64 --no-eval >"$tmp/train-null-auto.log" 2>&1 &&
    ! grep -q 'fixture-nullgemm' "$tmp/train-null-auto.log"; then
    ok "tandem train never selects the NULL-gemm backend, even at priority 100"
else
    fail "tandem train never selects the NULL-gemm backend, even at priority 100" \
        "$(cat "$tmp/train-null-auto.log")"
fi

staged TDM_PLUGIN_PATH= "$tandem" inspect >"$tmp/inspect-none.log" 2>&1
if grep -q 'example-sign-sgd' "$tmp/inspect-none.log"; then
    fail "without TDM_PLUGIN_PATH the example plugin is not found" "$(cat "$tmp/inspect-none.log")"
else
    ok "without TDM_PLUGIN_PATH the example plugin is not found"
fi
staged TDM_PLUGIN_PATH="$tmp/plugin" "$tandem" inspect example-sign-sgd >"$tmp/inspect-one.log" 2>&1
if grep -q 'weight_decay' "$tmp/inspect-one.log" && grep -q 'momentum' "$tmp/inspect-one.log"; then
    ok "tandem inspect example-sign-sgd shows its parameters"
else
    fail "tandem inspect example-sign-sgd shows its parameters" "$(tail -n 30 "$tmp/inspect-one.log")"
fi

if staged TDM_PLUGIN_PATH="$tmp/plugin" "$tmp/check-sign-sgd" >"$tmp/check.log" 2>&1; then
    ok "example-sign-sgd: one step moves each weight by -lr * sign(grad) ($(cat "$tmp/check.log"))"
else
    fail "example-sign-sgd: one step moves each weight by -lr * sign(grad)" "$(cat "$tmp/check.log")"
fi

# Train on a small subset, then check the test accuracy is far above chance
# (0.1): the loop, the loss and the optimizer really work.
accuracy_of() { sed -n 's/^test: .*accuracy \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 > b + 0) }'; }
# learns WHAT ACC LOG: WHAT reached a test accuracy ACC above 0.5 (else LOG is shown).
learns() {
    if above "$2" 0.5; then
        ok "$1 learns (test accuracy $2 > 0.5)"
    else
        fail "$1 learns (test accuracy > 0.5)" "$(cat "$3")"
    fi
}
small="--limit 1280 --test-limit 1000 --log-every 5"
subset="--dataset idx:$fmnist $small"

# The first run uses the example's default dataset name, resolved through
# TDM_DATA_DIR to the staged copy of the embedded subset.
# shellcheck disable=SC2086
if staged TDM_PLUGIN_PATH= TDM_DATA_DIR="${fmnist%/fashion-mnist}" "$tmp/train-mlp" \
    $small --lr 0.1 --momentum 0.5 >"$tmp/sgd.log" 2>&1; then
    acc=$(accuracy_of "$tmp/sgd.log")
    if ! grep -qF "dataset idx:$fmnist " "$tmp/sgd.log"; then
        fail "train-mlp reads the staged fashion-mnist" "$(head -n 3 "$tmp/sgd.log")"
    else
        learns "train-mlp with sgd" "$acc" "$tmp/sgd.log"
    fi
else
    fail "train-mlp with sgd runs" "$(tail -n 30 "$tmp/sgd.log")"
fi

# shellcheck disable=SC2086
if staged TDM_PLUGIN_PATH="$tmp/plugin" "$tmp/train-mlp" $subset --optimizer example-sign-sgd \
    --lr 0.001 --momentum 0 >"$tmp/sign.log" 2>&1; then
    learns "train-mlp with the plugin's example-sign-sgd" "$(accuracy_of "$tmp/sign.log")" \
        "$tmp/sign.log"
else
    fail "train-mlp with the plugin's example-sign-sgd runs" "$(tail -n 30 "$tmp/sign.log")"
fi

# The practitioner's path: the staged `tandem train` picks the plugin's
# optimizer by name, like a built-in one.
if staged TDM_PLUGIN_PATH="$tmp/plugin" "$tandem" train --dataset "idx:$fmnist" --limit 1280 \
    --optimizer example-sign-sgd --lr 0.001 --momentum 0 --quiet >"$tmp/train.log" 2>&1; then
    acc=$(sed -n 's/^summary: .*test accuracy \([0-9.]*\).*/\1/p' "$tmp/train.log")
    learns "tandem train --optimizer example-sign-sgd" "$acc" "$tmp/train.log"
else
    fail "tandem train --optimizer example-sign-sgd runs" "$(tail -n 30 "$tmp/train.log")"
fi

# shellcheck disable=SC2086
if staged TDM_PLUGIN_PATH= "$tmp/train-mlp" $subset --optimizer example-sign-sgd \
    >"$tmp/noplugin.log" 2>&1; then
    fail "without the plugin, --optimizer example-sign-sgd is an error" "$(cat "$tmp/noplugin.log")"
elif grep -q 'example-sign-sgd' "$tmp/noplugin.log"; then
    ok "without the plugin, --optimizer example-sign-sgd is an error naming it"
else
    fail "without the plugin, --optimizer example-sign-sgd is an error naming it" \
        "$(cat "$tmp/noplugin.log")"
fi

# ---- 5. a moved install -----------------------------------------------------
# The whole tree moved elsewhere: tandem-1.pc follows it, with no edit.
mv "$stage" "$tmp/moved"
PKG_CONFIG_PATH=$tmp/moved${staged_pc_dir#"$stage"}
moved_phys=$(canon "$tmp/moved")
moved_plugins=$(pcvar pluginsdir)
moved_lib=$(canon "$("$PKG_CONFIG" --libs-only-L tandem-1 | tr ' ' '\n' | sed -n 's/^-L//p' | head -n 1)")
if [ "$moved_plugins" = "$moved_phys${pluginsdir#"$stage_phys"}" ] &&
    [ "$moved_lib" = "$moved_phys${libdir#"$stage_phys"}" ]; then
    ok "after moving the install, pluginsdir and -L follow it"
else
    fail "after moving the install, pluginsdir and -L follow it" \
        "pluginsdir '$moved_plugins', -L '$moved_lib', moved to $moved_phys"
fi

done_testing

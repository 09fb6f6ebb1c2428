#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/deb-install.sh - installs the Debian packages that
# build-aux/build-deb.sh built into the real system, checks what a user of
# them would (the plugins found in the system path, a training run from
# them, the man pages, building against libtandem-1-dev with pkg-config,
# its guides, a strategy built from its examples, `tandem check-plugin`),
# then purges every package the install added, so that the machine's
# package set is as before, even after a failure or an interrupt. Root
# only; not part of `make check` (build-aux/check.sh runs it after it).
#
#   sh tests/deb-install.sh [DEBDIR]     (default build/deb)
#
# Prints TAP. The commands run are /usr/bin/tandem with TDM_PLUGIN_PATH
# and TDM_PLUGIN_SYSTEM_PATH unset, so that nothing of a build tree or of
# a `make install` into /usr/local is used.
top=$(cd "$(dirname "$0")/.." && pwd)
TDM_TOP_SRCDIR=${TDM_TOP_SRCDIR:-$top}
. "$TDM_TOP_SRCDIR/tests/tap.sh"

debdir=${1:-$top/build/deb}
[ "$(id -u)" = 0 ] || skip_all "not root (installs packages into the system)"
ls "$debdir"/libtandem-1-0_*.deb >/dev/null 2>&1 ||
    skip_all "no packages in $debdir (run build-aux/build-deb.sh)"
for p in libtandem-1-0 libtandem-1-dev tandem tandem-plugin-gloo tandem-plugin-cuda tandem-plugin-nccl; do
    if dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "installed"; then
        echo "Bail out! $p is already installed: this script removes what it installs"
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-deb.XXXXXX") || exit 1
# The packages present on the system: installed, or unpacked or
# half-configured by an install that failed midway (anything but not
# installed and config-files), so that a broken install is purged too.
installed_list() {
    dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 !~ /^.[nc]/ { print $2 }' | sort
}
installed_list >"$tmp/before"

# Purge what the install added (the packages and the dependencies pulled
# in for them), whatever happened: at the end, on a failure, and when the
# script is interrupted (the EXIT trap alone does not run on a signal).
cleanup() {
    installed_list >"$tmp/after"
    added=$(comm -13 "$tmp/before" "$tmp/after")
    if [ -n "$added" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $added >"$tmp/purge.log" 2>&1 ||
            { echo "# purge failed:"; sed 's/^/# /' "$tmp/purge.log"; }
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT HUP TERM

# ---- install ----------------------------------------------------------------
# The cuda and nccl plugin packages depend on NVIDIA's packages (cuBLAS from
# NVIDIA's CUDA repository, debian/control): where apt knows none of them,
# they are left out of the install (nccl's needs cuda's), each with a skip.
# Any other package is installed, whatever its dependencies.
available() {
    apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [0-9]' ||
        dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q "install ok installed"
}
debs=
left_out=
for deb in $(ls "$debdir"/*.deb | grep -v -- '-dbgsym_'); do
    name=$(dpkg-deb -f "$deb" Package)
    case $name in
    tandem-plugin-cuda | tandem-plugin-nccl)
        missing=
        for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/[(|].*//; s/ //g'); do
            case " $left_out " in *" $dep "*) missing="$missing $dep (left out above)"; continue ;; esac
            case $dep in libtandem-1-0 | tandem-plugin-*) continue ;; esac
            available "$dep" || missing="$missing $dep (not known to apt: NVIDIA's repository)"
        done
        if [ -n "$missing" ]; then
            skip "install $name" "needs$missing"
            left_out="$left_out $name"
            continue
        fi ;;
    esac
    debs="$debs $deb"
done
if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $debs >"$tmp/install.log" 2>&1; then
    ok "the packages install ($(echo $debs | wc -w) of them)"
else
    fail "the packages install" "$(tail -n 20 "$tmp/install.log")"
    echo "Bail out! cannot install"
    exit 1
fi

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
pluginsdir=/usr/lib/$multiarch/tandem-1/plugins
tandem() { env -u TDM_PLUGIN_PATH -u TDM_PLUGIN_SYSTEM_PATH /usr/bin/tandem "$@"; }

# A `make install` into /usr/local would shadow the packaged library (the
# loader searches /usr/local/lib first): the packaged command must run on
# the packaged library, or nothing below tests the packages.
lib=$(ldd /usr/bin/tandem 2>/dev/null | sed -n 's/^.*libtandem-1\.so\.0 => \([^ ]*\) .*/\1/p')
if [ "$lib" -ef "/usr/lib/$multiarch/libtandem-1.so.0" ]; then
    ok "/usr/bin/tandem runs on the packaged libtandem-1.so.0"
else
    fail "/usr/bin/tandem runs on the packaged libtandem-1.so.0" "it loads '$lib' (a make install elsewhere?)"
fi

# ---- the plugins come from the system path ---------------------------------
tandem inspect >"$tmp/inspect" 2>&1
check "tandem inspect exits 0" [ $? -eq 0 ]
for deb in $debs; do
    for so in $(dpkg-deb -c "$deb" | awk '{ print $6 }' | grep '/plugins/libtdm-.*\.so$'); do
        f=$pluginsdir/$(basename "$so")
        if grep -qF "file:        $f" "$tmp/inspect"; then
            ok "inspect lists $(basename "$so") from $pluginsdir"
        else
            fail "inspect lists $(basename "$so") from $pluginsdir" "$(grep 'file:' "$tmp/inspect")"
        fi
    done
done
if grep 'file:' "$tmp/inspect" | grep -v "(built-in)" | grep -qvF "$pluginsdir/"; then
    fail "no plugin comes from elsewhere" "$(grep 'file:' "$tmp/inspect")"
else
    ok "no plugin comes from elsewhere"
fi
if grep -q "^Load failures" "$tmp/inspect" && sed -n '/^Load failures/,$p' "$tmp/inspect" | grep -q "libtdm-"; then
    # The cuda and nccl plugins fail to load without NVIDIA's libraries;
    # any other failure is a packaging error.
    if sed -n '/^Load failures/,$p' "$tmp/inspect" | grep "libtdm-" | grep -qv "libtdm-cuda\|libtdm-nccl"; then
        fail "no light plugin fails to load" "$(sed -n '/^Load failures/,$p' "$tmp/inspect")"
    else
        ok "no light plugin fails to load"
    fi
else
    ok "no light plugin fails to load"
fi

# ---- a training run from the installed plugins ------------------------------
# The default data (dataset-fashion-mnist's when installed, else the subset
# that libtandem-1-0 carries) on cpu, and that subset named on ref.
for dev in cpu ref; do
    data=fashion-mnist
    [ "$dev" = ref ] && data=idx:/usr/share/tandem/fashion-mnist
    if tandem train --model mlp --dataset "$data" --limit 640 --epochs 1 --device "$dev" --threads 2 \
        --save "$tmp/$dev.safetensors" >"$tmp/train-$dev" 2>&1 &&
        grep -qi "accuracy" "$tmp/train-$dev" && [ -s "$tmp/$dev.safetensors" ]; then
        ok "tandem train --device $dev --dataset $data runs from the packages"
    else
        fail "tandem train --device $dev --dataset $data runs from the packages" "$(tail -n 15 "$tmp/train-$dev")"
    fi
done
if [ -d /usr/share/datasets/fashion-mnist ]; then
    if tandem train --model mlp --dataset idx:/usr/share/datasets/fashion-mnist --limit 640 \
        --epochs 1 --device cpu --threads 2 --quiet >"$tmp/train-full" 2>&1; then
        ok "tandem train --dataset idx:/usr/share/datasets/fashion-mnist"
    else
        fail "tandem train --dataset idx:/usr/share/datasets/fashion-mnist" "$(tail -n 15 "$tmp/train-full")"
    fi
else
    skip "tandem train --dataset idx:/usr/share/datasets/fashion-mnist" "dataset-fashion-mnist not installed"
fi

# ---- the man pages ------------------------------------------------------------
for page in $(dpkg -L tandem | grep '/man1/.*\.1\.gz$'); do
    name=$(basename "$page" .1.gz)
    if [ "$(man -w "$name" 2>/dev/null)" = "$page" ] &&
        [ -z "$(LC_ALL=C MANWIDTH=80 man --warnings "$name" 2>&1 >/dev/null)" ]; then
        ok "man $name renders"
    else
        fail "man $name renders" "$(man -w "$name" 2>&1; LC_ALL=C man --warnings "$name" 2>&1 >/dev/null)"
    fi
done

# ---- libtandem-1-dev: pkg-config and a program built against it --------------
# tandem-1.pc is relocatable (prefix=${pcfiledir}/...): the same directory,
# not the same string.
check "pkg-config's pluginsdir is where the plugins are" \
    [ "$(pkg-config --variable=pluginsdir tandem-1)" -ef "$pluginsdir" ]

# ---- libtandem-1-dev: the documentation and the examples -----------------------
# What a plugin author with only the packages has: the guides and the
# examples in /usr/share/doc/libtandem-1-dev, from which the examples build
# (copied, as /usr/share/doc is read-only to them) and run.
doc=/usr/share/doc/libtandem-1-dev
missing=
for f in README.md docs/README.md docs/architecture.md docs/plugins/README.md docs/plugins/strategy.md \
    examples/README.md examples/train-mlp.c examples/plugins/localsgd/Makefile \
    examples/plugins/localsgd/README.md examples/plugins/localsgd/localsgd.c; do
    [ -f "$doc/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then
    ok "$doc has docs/plugins/strategy.md and examples/plugins/localsgd/"
else
    fail "$doc has docs/plugins/strategy.md and examples/plugins/localsgd/" \
        "missing:$missing; $(dpkg -L libtandem-1-dev | grep /doc/ | head -n 40)"
fi
if dpkg -S "$doc/docs/plugins/strategy.md" "$doc/examples/plugins/localsgd/Makefile" 2>/dev/null |
    grep -qv '^libtandem-1-dev:'; then
    fail "the guides and examples belong to libtandem-1-dev alone" "$(dpkg -S "$doc/docs" "$doc/examples")"
else
    ok "the guides and examples belong to libtandem-1-dev alone"
fi
if cc -o "$tmp/train-mlp" "$doc/examples/train-mlp.c" $(pkg-config --cflags --libs tandem-1) \
    >"$tmp/cc.log" 2>&1; then
    ok "the installed examples/train-mlp.c builds with pkg-config tandem-1"
else
    fail "the installed examples/train-mlp.c builds with pkg-config tandem-1" "$(tail -n 15 "$tmp/cc.log")"
fi
cp -R "$doc/examples/plugins/localsgd" "$tmp/localsgd"
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$tmp/localsgd" >"$tmp/localsgd.log" 2>&1; then
    ok "the installed examples/plugins/localsgd builds with its Makefile"
else
    fail "the installed examples/plugins/localsgd builds with its Makefile" "$(tail -n 15 "$tmp/localsgd.log")"
fi
with_localsgd() { env -u TDM_PLUGIN_SYSTEM_PATH TDM_PLUGIN_PATH="$tmp/localsgd" /usr/bin/tandem "$@"; }
if with_localsgd inspect localsgd >"$tmp/inspect-localsgd" 2>&1 &&
    grep -q 'sync-every' "$tmp/inspect-localsgd" &&
    with_localsgd train --model mlp --limit 256 --epochs 1 \
        --device cpu --threads 2 --strategy "localsgd sync-every=2" --no-eval --quiet \
        >"$tmp/train-localsgd" 2>&1; then
    ok "tandem inspect lists it and trains with --strategy \"localsgd sync-every=2\""
else
    fail "tandem inspect lists it and trains with --strategy \"localsgd sync-every=2\"" \
        "$(tail -n 15 "$tmp/inspect-localsgd" "$tmp/train-localsgd")"
fi

# ---- tandem check-plugin: the packaged conformance runner --------------------------
# A backend's check runs the helper /usr/libexec/tandem/tandem-conformance;
# the strategy built above is checked against single.
for so in "$pluginsdir/libtdm-cpu.so" "$tmp/localsgd/libtdm-localsgd.so"; do
    if tandem check-plugin "$so" >"$tmp/check-plugin.log" 2>&1 &&
        grep -q "^PASS \(backend\|strategy\) " "$tmp/check-plugin.log"; then
        ok "tandem check-plugin $(basename "$so") passes ($(tail -n 1 "$tmp/check-plugin.log"))"
    else
        fail "tandem check-plugin $(basename "$so") passes" "$(tail -n 15 "$tmp/check-plugin.log")"
    fi
done

# ---- removal ------------------------------------------------------------------
installed_list >"$tmp/after"
added=$(comm -13 "$tmp/before" "$tmp/after")
if DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $added >"$tmp/purge.log" 2>&1; then
    installed_list >"$tmp/after"
    if cmp -s "$tmp/before" "$tmp/after" && [ ! -e "$pluginsdir" ] && [ ! -e /usr/bin/tandem ]; then
        ok "purging leaves the package set as before"
    else
        fail "purging leaves the package set as before" "$(diff "$tmp/before" "$tmp/after")"
    fi
else
    fail "purging leaves the package set as before" "$(tail -n 15 "$tmp/purge.log")"
fi
done_testing

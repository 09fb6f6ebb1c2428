#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/deb-install.sh - installs the Debian packages that
# build-aux/build-deb.sh built into the real system, checks what a user of
# them would (the plugins found in the system path, a training run from
# them, the man pages, building against libtandem-1-dev with pkg-config),
# then purges every package the install added, so that the machine's
# package set is as before. Root only; not part of `make check`.
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
installed_list() { dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 ~ /^.i/ { print $2 }' | sort; }
installed_list >"$tmp/before"

# Purge what the install added (the packages and the dependencies pulled
# in for them), whatever happened.
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

# ---- install ----------------------------------------------------------------
debs=$(ls "$debdir"/*.deb | grep -v -- '-dbgsym_')
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
check "pkg-config's pluginsdir is where the plugins are" \
    [ "$(pkg-config --variable=pluginsdir tandem-1)" = "$pluginsdir" ]
if cc -o "$tmp/train-mlp" "$top/examples/train-mlp.c" $(pkg-config --cflags --libs tandem-1) \
    >"$tmp/cc.log" 2>&1; then
    ok "examples/train-mlp.c builds with pkg-config tandem-1"
else
    fail "examples/train-mlp.c builds with pkg-config tandem-1" "$(tail -n 15 "$tmp/cc.log")"
fi

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

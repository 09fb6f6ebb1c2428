#!/bin/sh
# SPDX-License-Identifier: MIT
# build-aux/build-deb.sh - builds Tandem's Debian packages (debian/) and
# checks them with lintian, on Debian 12 as root:
#
#   build-deb.sh [--cuda | --no-cuda] [OUTDIR]
#
# 1. installs what building needs: dpkg-dev, debhelper and lintian, then
#    debian/control's Build-Depends (apt-get build-dep on the tree);
# 2. copies the source tree (git's tracked and untracked-but-not-ignored
#    files, so none of a developer's generated files) into a temporary
#    directory and runs `dpkg-buildpackage -us -uc -b` there, so that the
#    tree itself is never written to;
# 3. runs lintian on the .changes, failing on an error;
# 4. leaves the .deb, .changes and .buildinfo files and lintian's report in
#    OUTDIR (default build/deb).
#
# The cuda and nccl plugin packages need the pkg.tandem.cuda build profile
# (debian/README.source): --cuda asks for it, --no-cuda leaves it off, and
# by default it is on when CUDA_DIR (default /usr/local/cuda) holds nvcc
# and nccl.h. DEB_BUILD_OPTIONS defaults to "nocheck parallel=<cores>":
# the test suite is the CI's job (build-aux/check.sh); set it to run it here.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
cuda=auto
out=
for arg in "$@"; do
    case "$arg" in
    --cuda) cuda=yes ;;
    --no-cuda) cuda=no ;;
    -*) echo "usage: build-deb.sh [--cuda | --no-cuda] [OUTDIR]" >&2; exit 2 ;;
    *) out=$arg ;;
    esac
done
out=${out:-$top/build/deb}
CUDA_DIR=${CUDA_DIR:-/usr/local/cuda}
export CUDA_DIR
if [ "$cuda" = auto ]; then
    if [ -x "$CUDA_DIR/bin/nvcc" ] && [ -f "$CUDA_DIR/include/nccl.h" ]; then
        cuda=yes
    else
        cuda=no
    fi
fi
profiles=
[ "$cuda" = yes ] && profiles=pkg.tandem.cuda

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

# ---- 1. the tools and the build dependencies ------------------------------
missing=""
for p in dpkg-dev debhelper lintian; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
updated=no
if [ -n "$missing" ]; then
    echo "build-deb: installing$missing"
    $SUDO apt-get update -q
    updated=yes
    $SUDO apt-get install -y -q --no-install-recommends $missing
fi
if ! (cd "$top" && dpkg-checkbuilddeps ${profiles:+-P$profiles}) 2>/dev/null; then
    echo "build-deb: installing the Build-Depends of debian/control"
    [ "$updated" = yes ] || $SUDO apt-get update -q
    $SUDO apt-get build-dep -y -q --no-install-recommends "$top"
fi

# ---- 2. dpkg-buildpackage in a copy of the tree ----------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
version=$(cd "$top" && dpkg-parsechangelog -S Version)
src=$work/tandem-${version%-*}
mkdir "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # The working tree as it is, uncommitted changes included.
    (cd "$top" && git ls-files -z --cached --others --exclude-standard) |
        (cd "$top" && xargs -0 tar -cf - --no-recursion --ignore-failed-read) | tar -xf - -C "$src"
else
    # A tree without git (an export): everything but build output.
    (cd "$top" && tar -cf - --exclude=./build --exclude=./debian/tmp .) | tar -xf - -C "$src"
fi

: "${DEB_BUILD_OPTIONS:=nocheck parallel=$(nproc)}"
export DEB_BUILD_OPTIONS
echo "build-deb: dpkg-buildpackage -us -uc -b${profiles:+ -P$profiles} (DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS)"
start=$(date +%s)
(cd "$src" && dpkg-buildpackage -us -uc -b ${profiles:+-P$profiles}) >"$work/build.log" 2>&1 || {
    tail -n 60 "$work/build.log"
    echo "build-deb: dpkg-buildpackage failed (log above)" >&2
    exit 1
}
echo "build-deb: dpkg-buildpackage took $(($(date +%s) - start)) s"

# ---- 3. lintian ------------------------------------------------------------
changes=$(ls "$work"/tandem_*.changes)
status=0
lintian --fail-on error --info "$changes" >"$work/lintian.txt" 2>&1 || status=$?
cat "$work/lintian.txt"

# ---- 4. the results --------------------------------------------------------
mkdir -p "$out"
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$work/build.log" "$work/lintian.txt" "$out"/
ls "$out"/*.deb
if [ "$status" -ne 0 ]; then
    echo "build-deb: lintian reports errors (see $out/lintian.txt)" >&2
    exit 1
fi
echo "build-deb: packages in $out"

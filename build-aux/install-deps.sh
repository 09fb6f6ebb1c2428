#!/bin/sh
# SPDX-License-Identifier: MIT
# Install what Tandem needs on Debian 12 (run as root; skips apt-get when
# every package is already installed).
#
#   install-deps.sh          build and run: the compiler, Autotools, the
#                            libraries the core and plugins link (the main
#                            job, build-aux/quickstart.sh)
#   install-deps.sh --tests  also what the tests and benchmarks use: PyTorch
#                            and torchvision (the oracle and the peer, with
#                            their ~200 dependencies), Open MPI, iproute2,
#                            GNU time, the full Fashion-MNIST, OpenBLAS,
#                            clang with libFuzzer (make fuzz), gtk-doc
#                            (make doc), debhelper, lintian and man-db
#                            (the Debian packages' build and install check)
#                            (build-aux/check.sh)
set -e
PKGS="build-essential autoconf automake libtool pkg-config
libglib2.0-dev libjson-glib-dev zlib1g-dev libdeflate-dev libdnnl-dev libpng-dev libjpeg62-turbo-dev libgloo-dev
libzip-dev libcairo2-dev"
TEST_PKGS="openmpi-bin libopenmpi-dev iproute2
python3 python3-torch python3-torchvision
dataset-fashion-mnist time libopenblas0-pthread
clang libclang-rt-dev gtk-doc-tools
dpkg-dev debhelper lintian man-db"
case "${1:-}" in
--tests) PKGS="$PKGS $TEST_PKGS" ;;
"") ;;
*) echo "usage: install-deps.sh [--tests]" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing

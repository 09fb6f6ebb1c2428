#!/bin/sh
# SPDX-License-Identifier: MIT
# Configure and build Tandem out of tree in ./build (the source tree stays clean).
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x configure ] || ./autogen.sh
mkdir -p build
cd build
[ -f Makefile ] || ../configure --prefix="${PREFIX:-/usr/local}" ${CONFIGURE_FLAGS:-}
make -j"$(nproc)"

#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's first command: install dependencies, build, and train the
# default model (mlp) on the default data (Fashion-MNIST: the Debian package
# when installed, else the subset embedded under data/), then report the test
# accuracy. Extra arguments go to `tandem train`.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/build-aux/install-deps.sh"
"$top/build-aux/build.sh"
exec "$top/build/tools/tandem" train --epochs 2 "$@"

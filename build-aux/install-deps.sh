#!/bin/sh
# Install everything Tandem needs to build, test and benchmark on Debian 12
# (run as root). Skips apt-get when every package is already installed.
set -e
PKGS="build-essential autoconf automake libtool pkg-config
libglib2.0-dev libjson-glib-dev zlib1g-dev libdeflate-dev libdnnl-dev libpng-dev libjpeg62-turbo-dev libgloo-dev
libzip-dev libcairo2-dev
openmpi-bin libopenmpi-dev iproute2
python3 python3-torch python3-torchvision
dataset-fashion-mnist time libopenblas0-pthread"
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

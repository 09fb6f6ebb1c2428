#!/bin/sh
# SPDX-License-Identifier: MIT
# build-aux/spdx.sh - the SPDX-License-Identifier line every source file
# carries (the licence of LICENSE and of the plugin descriptors).
#
#   build-aux/spdx.sh [--check] [DIR]   list the source files under DIR
#                                       (default: the source tree) that lack
#                                       it; exit 1 when there are any
#   build-aux/spdx.sh --add [DIR]       add it where it is missing
#
# Source files: C, C++ and CUDA (a /* */ line first), shell, Python, make,
# Autoconf and pkg-config files and the extensionless scripts (a # or dnl
# line first, after a #! line). Data (corpora, compressed files), Markdown
# and the licence text itself are not sources. Build trees, .git and what
# autogen.sh generates are skipped.
set -e
mode=check
case $1 in
    --check) shift ;;
    --add) mode=add; shift ;;
    -h|--help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
tag="SPDX-License-Identifier: MIT"

# style FILE: the comment style of FILE's line (c, hash, dnl), none when it
# is not a source file
style() {
    case ${1##*/} in
        *.c|*.h|*.cu|*.cc) echo c ;;
        *.ac|*.m4) echo dnl ;;
        *.sh|*.py|*.mk|*.am|*.inc|*.in|*.ini|Makefile) echo hash ;;
        *.*) echo none ;;
        *)  if head -c 2 "$1" | grep -q '^#!'; then echo hash; else echo none; fi ;;
    esac
}

missing=0
for f in $(cd "$top" && find . \( -name .git -o -name build -o -name '_build*' -o -name autom4te.cache \
                              -o -name .deps -o -name .libs -o -name 'tandem-[0-9]*' -o -name debian \) -prune \
                          -o -type f -print | sed 's|^\./||' | LC_ALL=C sort); do
    case $f in
        configure|Makefile.in|aclocal.m4|config.h.in|build-aux/ltmain.sh|build-aux/compile| \
        build-aux/config.*|build-aux/depcomp|build-aux/install-sh|build-aux/missing| \
        build-aux/test-driver|build-aux/tap-driver.sh|build-aux/ar-lib|m4/libtool.m4|m4/lt*.m4|*/corpus/*|config.status| \
        config.log|libtool|stamp-h1|*.tar.*|*~) continue ;;
    esac
    s=$(style "$top/$f")
    [ "$s" = none ] && continue
    head -n 3 "$top/$f" | grep -q "$tag" && continue
    if [ $mode = check ]; then
        echo "$f"
        missing=$((missing + 1))
        continue
    fi
    case $s in
        c) line="/* $tag */" ;;
        dnl) line="dnl $tag" ;;
        hash) line="# $tag" ;;
    esac
    tmp="$top/$f.spdx-tmp"
    if head -c 2 "$top/$f" | grep -q '^#!'; then
        { head -n 1 "$top/$f"; echo "$line"; tail -n +2 "$top/$f"; } >"$tmp"
    else
        { echo "$line"; cat "$top/$f"; } >"$tmp"
    fi
    cat "$tmp" >"$top/$f" # keeps the file's mode
    rm -f "$tmp"
done
if [ $mode = check ] && [ $missing -gt 0 ]; then
    echo "spdx: $missing source file(s) above lack '$tag' in their first lines (build-aux/spdx.sh --add)" >&2
    exit 1
fi
exit 0

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/inspect-rss.sh - the peak resident memory of `tandem inspect`,
# which loads every built plugin, stays under 100 MiB.
#
# A plugin pays at load for every library it links, whether or not it is
# used: the cuda plugin, when it linked cuBLAS, made every process that
# loaded it (a cpu training run, a machine without a GPU) 210 MiB larger,
# most of it libcublasLt (~150 MiB by itself). Measured on the build
# machine (Debian 12, x86-64, GNU time's %M): 15 MiB with no GPU plugin,
# 17 MiB with today's plugins, 226 MiB with cuBLAS linked. 100 MiB leaves
# room for other machines' libraries and for growth, and fails as soon as
# any plugin links something of cuBLASLt's size again.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

limit_kib=$((100 * 1024))
[ -x "$TANDEM" ] || skip_all "tandem is not built"
[ -x /usr/bin/time ] || skip_all "/usr/bin/time is missing (Debian package 'time')"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/time -f %M -o "$tmp/rss" "$TANDEM" inspect >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ]; then ok "inspect exits 0"; else
    fail "inspect exits 0" "exit $rc: $(cat "$tmp/err")"; fi
# The bound means something only if the plugins were loaded: name those
# that link GPU libraries.
loaded=$(sed -n -e 's/^Plugin: cuda$/cuda/p' -e 's/^Plugin: nccl$/nccl/p' "$tmp/out" | tr '\n' ' ' | sed 's/ $//')
rss=$(tail -n 1 "$tmp/rss")
case $rss in
'' | *[!0-9]*) fail "inspect's peak RSS is measured" "GNU time wrote: $(cat "$tmp/rss")" ;;
*)
    mib=$((rss / 1024))
    if [ "$rss" -lt "$limit_kib" ]; then
        ok "inspect's peak RSS $mib MiB < 100 MiB (GPU plugins loaded: ${loaded:-none})"
    else
        fail "inspect's peak RSS $mib MiB < 100 MiB (GPU plugins loaded: ${loaded:-none})" \
            "a plugin links a library that costs this much at load (readelf -d plugins/.libs/*.so)"
    fi
    ;;
esac
done_testing

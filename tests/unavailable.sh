# SPDX-License-Identifier: MIT
# tests/unavailable.sh - sourced by the scripts that check a GPU plugin on
# a machine without a usable GPU (cuda-unavailable.sh, nccl-unavailable.sh),
# after tests/tap.sh.
#
# check_unavailable NAME KIND BUILT WHY USABLE: skips the whole script when
# tandem or the plugin libtdm-NAME.so is not built (BUILT is configure's
# yes/no, WHY its reason) or when `tandem inspect` lists feature KIND NAME
# as available (USABLE says why that means the GPU checks are elsewhere);
# otherwise checks that inspect exits 0, that the plugin loads and that the
# feature is unavailable with a reason, which names the missing driver
# where libcuda.so.1 is absent. Leaves a temporary directory in $tmp
# (removed at exit), inspect's output in $tmp/inspect, the feature's line
# in $line and the reason in $reason.
check_unavailable() {
    [ -x "$TANDEM" ] || skip_all "tandem is not built"
    [ "${3:-no}" = yes ] || skip_all "the $1 plugin is not built: $4"
    plugin="$TDM_TOP_BUILDDIR/plugins/.libs/libtdm-$1.so"
    [ -f "$plugin" ] || skip_all "the $1 plugin is configured but $plugin is missing"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT

    "$TANDEM" inspect >"$tmp/inspect" 2>"$tmp/inspect.err"
    rc=$?
    line=$(grep -E "^ +$2 +$1 " "$tmp/inspect")
    case $line in
    *" available"*) skip_all "$5 (the GPU checks are tests/gpu/run's)" ;;
    esac
    if [ $rc -eq 0 ]; then ok "inspect exits 0"; else
        fail "inspect exits 0" "exit $rc: $(cat "$tmp/inspect.err")"; fi
    if grep -q "^Plugin: $1\$" "$tmp/inspect"; then ok "the $1 plugin loads"; else
        fail "the $1 plugin loads" "$(grep -A2 "$1" "$tmp/inspect")"; fi
    # The reason: no driver on a machine like CI's; another one (no device,
    # an old driver) where a driver is installed.
    reason=$(printf '%s\n' "$line" | sed -n 's/.*unavailable: //p')
    if [ -n "$reason" ]; then ok "$1 is unavailable with a reason ($reason)"; else
        fail "$1 is unavailable with a reason" "line: '$line'"; fi
    if [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] || [ -e /usr/lib64/libcuda.so.1 ] ||
            ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
        skip "the reason names the missing driver" "libcuda.so.1 is installed here"
    else
        case $reason in
        "no NVIDIA driver (libcuda.so.1 not found)") ok "the reason names the missing driver" ;;
        *) fail "the reason names the missing driver" "reason: '$reason'" ;;
        esac
    fi
}

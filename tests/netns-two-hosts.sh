#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/netns-two-hosts.sh - a DDP job over two "hosts": two network
# namespaces joined by a veth pair, each running its own `tandem run
# --nnodes 2` launcher. Node 0 serves the store on its veth address; the
# ranks cannot share memory across the namespaces, so the collective is
# picked automatically among the ones that can reach the other host (gloo
# over TCP). The trained weights must equal a single process's with the
# same global batch. Needs root and `ip netns`; skipped where that fails.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"

command -v ip >/dev/null 2>&1 || skip_all "no ip command (iproute2)"
has_feature collective gloo || skip_all "the gloo collective is not built"
ns0=tdm-$$-0
ns1=tdm-$$-1
veth0=tdmv$$a
veth1=tdmv$$b
ip netns add "$ns0" 2>/dev/null || skip_all "ip netns add does not work here (not root?)"
ns_cleanup() {
    ip netns pids "$ns0" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns pids "$ns1" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns0" 2>/dev/null
    ip netns del "$ns1" 2>/dev/null
    cleanup
}
trap ns_cleanup EXIT
ip netns add "$ns1" || skip_all "cannot create a second namespace"
# a /24 of 10.0.0.0/8 picked from the pid, so parallel runs do not collide
net=10.$(( ($$ >> 8) % 250 + 1 )).$(( $$ % 250 + 1 ))
ip link add "$veth0" type veth peer name "$veth1" || skip_all "cannot create a veth pair"
ip link set "$veth0" netns "$ns0" && ip link set "$veth1" netns "$ns1" &&
    ip -n "$ns0" addr add "$net.1/24" dev "$veth0" && ip -n "$ns1" addr add "$net.2/24" dev "$veth1" &&
    ip -n "$ns0" link set "$veth0" up && ip -n "$ns1" link set "$veth1" up &&
    ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up ||
    skip_all "cannot configure the veth pair"
# The hosts see each other only through the veth pair: host 1 has no route
# to anything else, and its loopback is its own.
if ip -n "$ns1" route | grep -q "$net.0/24"; then
    ok "host 1 reaches host 0's network over the veth pair"
else
    fail "host 1 reaches host 0's network over the veth pair" "$(ip -n "$ns1" route)"
fi

train "single.st" "single.log" --model mlp -b 64

export TDM_STORE_TOKEN=two-hosts-test-token
job="--nnodes 2 --nproc-per-node 1 --master-addr $net.1 --master-port 29517 --timeout 60"
ip netns exec "$ns1" "$TANDEM" run $job --node-rank 1 -- "$TANDEM" train $common --model mlp \
    -b 32 --strategy ddp >"$work/node1.log" 2>&1 &
node1=$!
launchers="$launchers $node1"
ip netns exec "$ns0" "$TANDEM" run $job --node-rank 0 -- "$TANDEM" train $common --model mlp \
    -b 32 --strategy ddp --save "$work/two-hosts.st" >"$work/node0.log" 2>&1
rc0=$?
wait $node1
rc1=$?
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]; then
    ok "both hosts' launchers exit 0"
else
    fail "both hosts' launchers exit 0" "node 0: $rc0 $(cat "$work/node0.log"); node 1: $rc1 $(cat "$work/node1.log")"
fi
same "ddp over two hosts (2 x 32) = single 64" "$work/two-hosts.st" "$work/single.st"

done_testing

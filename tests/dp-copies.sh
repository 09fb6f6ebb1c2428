#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/dp-copies.sh - dp moves its data between devices with
# tdm_tensor_copy_across, peer to peer where the backend offers copy_peer
# and through host memory otherwise, and trains the same model either way.
#
# TDM_PROFILE=1 counts every copy in the rows copy_peer and copy_staged of
# the source's backend. A dp step on two devices makes four: the two
# shares of the batch (images, labels) to the second device, its gradients
# to the master, the master's parameters back. So 20 steps are 80 copies:
#  - ref:0,ref:1 (ref offers copy_peer): 80 copy_peer, no copy_staged;
#  - ref:0,cpu:0 (two backends): no copy_peer; 60 copy_staged from ref
#    (batch and parameters) and 20 from cpu (gradients).
# Both runs end within 1e-5 of one device with the whole batch.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
export TDM_REF_DEVICES=2

# calls BACKEND OP FILE: the calls of the row OP in BACKEND's table, or 0
calls() {
    awk -v b="$1" -v op="$2" '
        /^# tandem op profile/ { cur = $7; sub(/:$/, "", cur) }
        cur == b && $1 == op { n = $2 }
        END { print n + 0 }' "$3"
}

train "ref.st" "ref.log" --model mlp -b 64 --device ref:0

TDM_PROFILE=1 train "peer.st" "peer.log" --model mlp -b 64 --strategy dp --devices ref:0,ref:1
same "dp on ref:0,ref:1 = one device" "$work/peer.st" "$work/ref.st"
peer=$(calls ref copy_peer "$work/peer.log")
staged=$(calls ref copy_staged "$work/peer.log")
if [ "$peer" = 80 ] && [ "$staged" = 0 ]; then
    ok "ref:0,ref:1: 80 peer copies, none staged"
else
    fail "ref:0,ref:1: 80 peer copies, none staged" \
        "copy_peer $peer, copy_staged $staged; $(cat "$work/peer.log")"
fi

if has_feature backend cpu; then
    TDM_PROFILE=1 train "mixed.st" "mixed.log" --model mlp -b 64 --strategy dp \
        --devices ref:0,cpu:0
    same "dp on ref:0,cpu:0 = one device" "$work/mixed.st" "$work/ref.st"
    peer=$(($(calls ref copy_peer "$work/mixed.log") + $(calls cpu copy_peer "$work/mixed.log")))
    from_ref=$(calls ref copy_staged "$work/mixed.log")
    from_cpu=$(calls cpu copy_staged "$work/mixed.log")
    if [ "$peer" = 0 ] && [ "$from_ref" = 60 ] && [ "$from_cpu" = 20 ]; then
        ok "ref:0,cpu:0: every copy staged (60 from ref, 20 from cpu)"
    else
        fail "ref:0,cpu:0: every copy staged" \
            "copy_peer $peer, staged from ref $from_ref, from cpu $from_cpu; $(cat "$work/mixed.log")"
    fi
else
    skip "dp on ref:0,cpu:0" "the cpu backend is not built"
    skip "ref:0,cpu:0: every copy staged" "the cpu backend is not built"
fi

done_testing

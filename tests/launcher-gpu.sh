#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/launcher-gpu.sh - `tandem run --nproc-per-node gpu|auto`, with real
# processes.
#
# `gpu` starts one worker per visible GPU and fails, starting nothing, with
# the cuda backend's reason when there is none; `auto` is `gpu` with GPUs,
# else one worker per core group (NUMA node). A GPU job's workers get
# LOCAL_RANK and TDM_DEVICE=cuda:LOCAL_RANK and their lines carry
# "[rank N cuda:L] ": on a machine without a GPU that part runs with the
# test hook TDM_TEST_FAKE_GPUS (configure --enable-test-hooks), which makes
# the launcher count that many GPUs.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/launcher-lib.sh"

export W="$work"
dump='echo "LOCAL_RANK=$LOCAL_RANK TDM_DEVICE=${TDM_DEVICE-unset} LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE" > "$W/env.$LOCAL_RANK"; echo hello'

gpu_available=no
"$TANDEM" inspect 2>/dev/null | grep -Eq '^ +backend +cuda +priority +-?[0-9]+ +available' &&
    gpu_available=yes

# without a GPU: `gpu` fails with the reason and starts nothing
if [ $gpu_available = no ]; then
    rm -f "$work"/env.*
    "$TANDEM" run --nproc-per-node gpu -- sh -c "$dump" >"$work/out" 2>"$work/err"
    rc=$?
    if [ $rc -ne 0 ]; then ok "gpu without a GPU fails"; else fail "gpu without a GPU fails" "exit 0"; fi
    has "gpu without a GPU says why" "tandem run: --nproc-per-node gpu: no GPU: cuda unavailable: " \
        "$work/err"
    if ls "$work"/env.* >/dev/null 2>&1; then
        fail "gpu without a GPU starts no worker" "$(ls "$work")"
    else
        ok "gpu without a GPU starts no worker"
    fi
    CUDA_VISIBLE_DEVICES= "$TANDEM" run --nproc-per-node gpu -- true >"$work/out" 2>"$work/err"
    has "gpu with CUDA_VISIBLE_DEVICES empty says why" "no GPU: cuda unavailable: " "$work/err"

    # `auto` falls back to one worker per core group
    groups=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
    [ "$groups" -ge 1 ] || groups=1
    rm -f "$work"/env.*
    "$TANDEM" run --nproc-per-node auto -- sh -c "$dump" >"$work/out" 2>"$work/err"
    rc=$?
    n=$(ls "$work"/env.* 2>/dev/null | wc -l)
    if [ $rc -eq 0 ] && [ "$n" -eq "$groups" ]; then
        ok "auto without a GPU starts one worker per core group ($groups)"
    else
        fail "auto without a GPU starts one worker per core group ($groups)" \
            "exit $rc, $n workers: $(cat "$work/err")"
    fi
    has "auto without a GPU: LOCAL_RANK, no TDM_DEVICE" \
        "LOCAL_RANK=0 TDM_DEVICE=unset LOCAL_WORLD_SIZE=$groups" "$work/env.0"
    has "auto without a GPU: the prefix names the rank only" "[rank 0] hello" "$work/out"
else
    skip "gpu without a GPU fails" "this machine has a GPU"
fi

# a GPU job: one worker per GPU, each told its GPU
if [ $gpu_available = yes ]; then
    ngpu=$("$TANDEM" inspect devices 2>/dev/null | grep -c '^ *cuda:[0-9]')
    fake=
elif have_test_hooks; then
    ngpu=2
    fake=2
else
    skip "a GPU job's workers" "no GPU and $TEST_HOOKS_WHY"
    done_testing
    exit $?
fi
for mode in gpu auto; do
    rm -f "$work"/env.*
    TDM_TEST_FAKE_GPUS=$fake "$TANDEM" run --nproc-per-node $mode -- sh -c "$dump" \
        >"$work/out" 2>"$work/err"
    rc=$?
    n=$(ls "$work"/env.* 2>/dev/null | wc -l)
    if [ $rc -eq 0 ] && [ "$n" -eq "$ngpu" ]; then
        ok "$mode: one worker per GPU ($ngpu)"
    else
        fail "$mode: one worker per GPU ($ngpu)" "exit $rc, $n workers: $(cat "$work/err")"
    fi
    last=$((ngpu - 1))
    has "$mode: worker $last drives cuda:$last" \
        "LOCAL_RANK=$last TDM_DEVICE=cuda:$last LOCAL_WORLD_SIZE=$ngpu" "$work/env.$last"
    has "$mode: the log prefix names the GPU" "[rank $last cuda:$last] hello" "$work/out"
done
done_testing

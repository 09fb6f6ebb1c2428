#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/checkpoint-crash.sh - crashes never cost more than the work since
# the last checkpoint, and never a checkpoint.
#
# 30 SIGKILLs of a training that writes a checkpoint every 2 steps: the
# even-numbered ones while a save is under way (the test hook
# TDM_TEST_SAVE_DELAY_MS holds each save between its synced temporary file
# and the rename, and the kill comes when the temporary file is there), the
# others at a random moment of the next 0.2 s of steps and saves. After each, the newest checkpoint of the
# directory must load (`tandem train --resume` takes it) and training goes
# on from it; at the end the weights equal, bit for bit, those of a run
# that was never killed. Then `tandem run --max-restarts 1` with a worker
# command that fails once after step 12: the restarted ranks find the
# checkpoint in --checkpoint-dir by themselves (TDM_RESTART_COUNT) and end
# with the weights of an uninterrupted job.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"

E="--epochs 2 --model mlp"
K="--epochs 16 --model mlp" # long enough that no run of the kill loop ends first

# one random number in [0, $1) per call, from awk's clock-seeded generator
rand_ms() { awk -v n="$1" -v s="$2" 'BEGIN { srand(); srand(srand() + s); printf "%d", rand() * n }'; }

# new_tmp: DIR $d has a temporary file of a save that $before did not list
new_tmp() {
    ls -a "$d" 2>/dev/null | grep '^\.ckpt-.*\.tmp-' | while read -r f; do
        case " $before " in *" $f "*) ;; *) echo "$f" ;; esac
    done | grep -q .
}

if have_test_hooks; then
    train full.st full.log $K
    d="$work/k"
    kills=0 bad=0 i=0
    while [ $i -lt 30 ]; do
        i=$((i + 1))
        resume=
        ls "$d"/ckpt-*.safetensors >/dev/null 2>&1 && resume="--resume $d"
        # a killed save leaves its temporary file: wait for a new one
        before=$(ls -a "$d" 2>/dev/null | grep '^\.ckpt-.*\.tmp-' | tr '\n' ' ')
        TDM_TEST_SAVE_DELAY_MS=20 "$TANDEM" train $common $K --checkpoint-dir "$d" \
            --checkpoint-every 2 --keep-last 2 $resume >"$work/k.out" 2>"$work/k.err" &
        pid=$!
        launchers="$launchers $pid"
        # once the first save is under way (its temporary file is there):
        # at once for even kills, in the middle of that save; a random
        # moment of the next 0.2 s (steps and later saves) for odd ones
        n=0
        while ! new_tmp && [ $n -lt 400 ]; do
            sleep 0.01; n=$((n + 1))
        done
        if [ $((i % 2)) -eq 0 ]; then
            sleep "0.0$(rand_ms 2 $i)"
        else
            sleep "0.$(rand_ms 2 $i)$(rand_ms 10 $i)"
        fi
        kill -9 $pid 2>/dev/null && kills=$((kills + 1))
        wait $pid 2>/dev/null
        if ls "$d"/ckpt-*.safetensors >/dev/null 2>&1; then
            # the newest complete checkpoint loads: a resume to its own step
            # reads it whole (checksums) and trains nothing
            newest=$(ls "$d"/ckpt-*.safetensors | tail -n 1)
            step=$(basename "$newest" .safetensors); step=${step#ckpt-}
            if ! "$TANDEM" train $common $K --resume "$newest" --max-steps "$((1$step - 1000000000))" \
                    >"$work/r.out" 2>"$work/r.err"; then
                bad=$((bad + 1))
                echo "# kill $i: $newest does not load:"; sed 's/^/#   /' "$work/r.err"
            fi
        fi
    done
    if [ $kills -eq 30 ] && [ $bad -eq 0 ]; then
        ok "$kills SIGKILLs while checkpointing: the newest checkpoint always loads (the last: step $step of 320)"
    else
        fail "SIGKILLs while checkpointing: the newest checkpoint always loads" \
            "$kills kills, $bad bad"
    fi
    train end.st end.log $K --checkpoint-dir "$d" --checkpoint-every 2 --keep-last 2 --resume "$d"
    if out=$("$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$work/end.st" "$work/full.st" 0 2>&1)
    then ok "resumed after the kills = never killed: $out"
    else fail "resumed after the kills = never killed" "$out"; fi
else
    skip "SIGKILLs while checkpointing" "$TEST_HOOKS_WHY"
    skip "resumed after the kills = never killed" "$TEST_HOOKS_WHY"
fi

# tandem run --max-restarts: the first attempt stops after step 12 and fails
train_dist 2 fulld.st fulld.log $E -b 32 --strategy ddp
"$TANDEM" run --nproc-per-node 2 --max-restarts 1 -- sh -c '
    if [ "$TDM_RESTART_COUNT" = 0 ]; then
        "$0" train "$@" --max-steps 12; exit 3
    fi
    exec "$0" train "$@"' "$TANDEM" $common $E -b 32 --strategy ddp \
    --checkpoint-dir "$work/r" --checkpoint-every 5 --save "$work/restart.st" \
    >"$work/restart.out" 2>"$work/restart.err"
rc=$?
if [ $rc -eq 0 ] && grep -q "restarting all workers" "$work/restart.err" &&
        grep -q "resuming from .*ckpt-000000012.safetensors" "$work/restart.err"
then ok "tandem run --max-restarts: the restarted job resumes from the checkpoint"
else fail "tandem run --max-restarts: the restarted job resumes from the checkpoint" \
    "exit $rc: $(cat "$work/restart.err")"; fi
if out=$("$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$work/restart.st" "$work/fulld.st" 0 2>&1)
then ok "restarted job = uninterrupted job: $out"
else fail "restarted job = uninterrupted job" "$out"; fi

done_testing

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/checkpoint-keep.sh - which checkpoints a directory keeps: with
# --keep-last N the N newest (the default 3; 0 keeps all), DIR/latest a
# relative link to the newest; with --keep-best also the one of the best
# test accuracy (the log's eval events say which), linked as DIR/best,
# whatever keep-last removes; `tandem eval --init` takes a checkpoint's
# weights; a flipped byte in a checkpoint is named when
# resuming from it; and the flags that make no sense without another are
# refused by name.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"

ckpts() { (cd "$1" && ls ckpt-*.safetensors 2>/dev/null | tr '\n' ' '); }

train a.st a.log --epochs 2 --checkpoint-dir "$work/a" --checkpoint-every 5 --keep-last 2
got=$(ckpts "$work/a")
if [ "$got" = "ckpt-000000035.safetensors ckpt-000000040.safetensors " ]
then ok "--keep-last 2 keeps the 2 newest of 8"; else fail "--keep-last 2 keeps the 2 newest of 8" "$got"; fi
if [ "$(readlink "$work/a/latest")" = ckpt-000000040.safetensors ]
then ok "latest is a relative link to the newest"
else fail "latest is a relative link to the newest" "$(readlink "$work/a/latest")"; fi

train b.st b.log --epochs 2 --checkpoint-dir "$work/b" --checkpoint-every 5 --keep-last 0
n=$(ckpts "$work/b" | wc -w)
if [ "$n" -eq 8 ]; then ok "--keep-last 0 keeps all 8"; else fail "--keep-last 0 keeps all 8" "$n"; fi
train c.st c.log --epochs 2 --checkpoint-dir "$work/c" --checkpoint-every 5
n=$(ckpts "$work/c" | wc -w)
if [ "$n" -eq 3 ]; then ok "3 are kept by default"; else fail "3 are kept by default" "$n"; fi

# keep-best: evaluation after each of 4 epochs on 320 images, a checkpoint
# every 2 steps, keep-last 1; a high learning rate makes the accuracy move
# (with seed 2 it is best after epoch 3 of 4, so best is not the newest)
"$TANDEM" train --limit 320 --seed 2 --threads 1 --quiet --epochs 4 --lr 0.3 \
    --checkpoint-dir "$work/k" --checkpoint-every 2 --keep-last 1 --keep-best \
    --log-file "$work/k.jsonl" >"$work/k.out" 2>"$work/k.err" ||
    fail "train with --keep-best" "$(cat "$work/k.err")"
best=$("$PY" - "$work/k.jsonl" <<'EOF'
import json, sys
evals = []
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "eval":
        evals.append((e["accuracy"], e["epoch"]))
best = max(evals, key=lambda x: x[0])  # the first of equals, as keep-best takes
print("%d %s" % (5 * best[1], " ".join("%.4f" % a for a, _ in evals)))
EOF
)
want=$(printf 'ckpt-%09d.safetensors' "${best%% *}")
if [ "$(readlink "$work/k/best")" = "$want" ] && [ -f "$work/k/$want" ]
then ok "DIR/best is the checkpoint of the best accuracy ($best)"
else fail "DIR/best is the checkpoint of the best accuracy" \
    "best -> $(readlink "$work/k/best"), want $want (step, accuracies: $best); $(ckpts "$work/k")"; fi
left="$want ckpt-000000020.safetensors "
[ "$want" = ckpt-000000020.safetensors ] && left="$want "
if [ "$(readlink "$work/k/latest")" = ckpt-000000020.safetensors ] &&
        [ "$(ckpts "$work/k")" = "$left" ]
then ok "with --keep-last 1 the best and the newest are left: $(ckpts "$work/k")"
else fail "with --keep-last 1 the best and the newest are left" "$(ckpts "$work/k")"; fi

# --init (tandem eval, tandem train) takes a checkpoint's weights
if "$TANDEM" eval --model mlp --init "$work/a/latest" >"$work/e.out" 2>"$work/e.err" &&
        grep -q "test accuracy" "$work/e.out"
then ok "tandem eval --init DIR/latest: $(cat "$work/e.out")"
else fail "tandem eval --init DIR/latest" "$(cat "$work/e.err")"; fi

# a flipped byte in a checkpoint is named when resuming from it
cp "$work/a/ckpt-000000040.safetensors" "$work/flipped.safetensors"
"$PY" - "$work/flipped.safetensors" <<'EOF'
import json, struct, sys
path = sys.argv[1]
d = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
d[8 + n + h["fc2.weight"]["data_offsets"][0] + 100] ^= 0x04
open(path, "wb").write(d)
EOF
if "$TANDEM" train $common --epochs 2 --resume "$work/flipped.safetensors" >"$work/f.out" 2>"$work/f.err"
then fail "a checkpoint with a flipped byte is refused" "it trained"
elif grep -q "flipped.safetensors: tensor 'fc2.weight' is corrupt" "$work/f.err"
then ok "a checkpoint with a flipped byte is refused: $(cat "$work/f.err")"
else fail "a checkpoint with a flipped byte is refused naming the tensor" "$(cat "$work/f.err")"; fi

# flags that need another
for args in "--keep-best --checkpoint-dir $work/x --no-eval|train.eval is off" \
            "--checkpoint-every 5|train.checkpoint_every needs train.checkpoint_dir" \
            "--keep-best|train.keep_best needs train.checkpoint_dir"; do
    flags=${args%%|*}; msg=${args#*|}
    if "$TANDEM" train $common $flags >"$work/f.out" 2>"$work/f.err"; then
        fail "$flags is refused" "it trained"
    elif grep -q "$msg" "$work/f.err"; then ok "$flags is refused: $(cat "$work/f.err")"
    else fail "$flags is refused saying '$msg'" "$(cat "$work/f.err")"; fi
done

done_testing

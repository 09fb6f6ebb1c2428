#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/train-smoke.sh - `tandem train` end to end on the embedded
# Fashion-MNIST subset: mlp reaches 80% test accuracy after one epoch on
# 10,000 images with the default settings; the same seed gives the same loss
# curve twice on the ref backend (and another seed another curve); weights
# saved by train give the same accuracy and loss under `tandem eval`; a
# batch size above the number of images trains in one step; the summary
# line and the log's summary event give the peak RSS and the device's
# allocator peak, with its hardware name, reserved bytes and utilisation
# ("-" and -1 when unknown), as the epoch events do.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-train-smoke-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The embedded subset, whatever is installed system-wide: same numbers
# everywhere.
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"

# --- accuracy, progress, log, save ---------------------------------------------
if "$TANDEM" train --model mlp --dataset fashion-mnist --limit 10000 --epochs 1 \
        --log-file "$tmp/log.json" --save "$tmp/mlp.safetensors" \
        >"$tmp/out" 2>"$tmp/err"; then
    ok "train mlp for one epoch"
else
    fail "train mlp for one epoch" "$(cat "$tmp/err")"
fi
summary=$(grep '^summary: ' "$tmp/out")
acc=$(printf '%s\n' "$summary" | sed -n 's/.*test accuracy \([0-9.]*\) (loss \([0-9.]*\)).*/\1/p')
loss=$(printf '%s\n' "$summary" | sed -n 's/.*test accuracy \([0-9.]*\) (loss \([0-9.]*\)).*/\2/p')
if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }'; then
    ok "test accuracy $acc >= 0.80"
else
    fail "test accuracy >= 0.80" "summary: $summary"
fi
case "$summary" in
*"model mlp, 1 epoch, 10000 images"*"first step after"*) ok "summary line" ;;
*) fail "summary line" "$summary" ;;
esac
# Peak memory: the summary line's MiB are the log's peak_rss_bytes, and a
# process that held the model and the data had more than 8 MiB.
rss_mib=$(printf '%s\n' "$summary" | sed -n 's/.*, peak RSS \([0-9]*\) MiB, .*/\1/p')
rss_bytes=$(sed -n 's/^{"event":"summary",.*"peak_rss_bytes":\([0-9]*\)[,}].*/\1/p' "$tmp/log.json")
if [ -n "$rss_mib" ] && [ -n "$rss_bytes" ] &&
   awk -v m="$rss_mib" -v b="$rss_bytes" 'BEGIN { exit !(m > 8 && m == sprintf("%.0f", b / 1048576)) }'; then
    ok "peak RSS $rss_mib MiB in the summary line and the log"
else
    fail "peak RSS in the summary line and the log" "$summary; $(grep '"summary"' "$tmp/log.json")"
fi
# The device's allocator peak ends the line and is the log's
# peak_device_bytes: more than the model's 2 MiB of parameters, and on a
# host device no more than the process's peak RSS.
dev=$(sed -n 's/^{"event":"start",.*"device":"\([^"]*\)".*/\1/p' "$tmp/log.json")
dev_mib=$(printf '%s\n' "$summary" |
    sed -n "s/.*, peak RSS [0-9]* MiB, peak $dev \([0-9]*\) MiB (.*, reserved [0-9]* MiB, util [-0-9%]*)\$/\1/p")
dev_bytes=$(sed -n 's/^{"event":"summary",.*"peak_device_bytes":\([0-9]*\)[,}].*/\1/p' "$tmp/log.json")
if [ -n "$dev" ] && [ -n "$dev_mib" ] && [ -n "$dev_bytes" ] &&
   awk -v m="$dev_mib" -v b="$dev_bytes" -v r="$rss_bytes" \
       'BEGIN { exit !(b > 2 * 1048576 && b <= r && m == sprintf("%.0f", b / 1048576)) }'; then
    ok "peak $dev $dev_mib MiB in the summary line and the log, below the peak RSS"
else
    fail "peak device memory in the summary line and the log" \
        "$summary; $(grep '"summary"' "$tmp/log.json")"
fi
# The device's figures in the epoch and summary events: its hardware name
# (the line's too), peak and reserved bytes (reserved >= peak's live part,
# here all of it: the core's own counts), utilisation -1 (unknown on a
# host device).
if ${TORCH_PYTHON:-python3} - "$tmp/log.json" "$summary" <<'PY'
import json, re, sys
events = [json.loads(l) for l in open(sys.argv[1])]
epoch = [e for e in events if e["event"] == "epoch"][0]
summary = [e for e in events if e["event"] == "summary"][0]
for e in (epoch, summary):
    assert e["device_name"] and e["device_name"] in sys.argv[2], e
    assert 2 * 1048576 < e["peak_device_bytes"] <= summary["peak_rss_bytes"], e
    assert e["reserved_device_bytes"] >= 0, e
    assert e["device_util"] == -1, e
    assert "per_device" not in e, e
assert epoch["peak_device_bytes"] <= summary["peak_device_bytes"], (epoch, summary)
assert re.search(r", util -\)$", sys.argv[2]), sys.argv[2]
PY
then
    ok "device name, peak, reserved and utilisation in the epoch and summary events"
else
    fail "device figures in the epoch and summary events" "$summary; $(grep -v '"step"' "$tmp/log.json")"
fi
# dp: one figure per device, and the largest as peak_device_bytes.
if TDM_REF_DEVICES=2 "$TANDEM" train --device ref --strategy dp --devices ref:0,ref:1 \
        --model mlp --limit 256 --no-eval --quiet --log-file "$tmp/dp.json" >"$tmp/dp-out" \
        2>"$tmp/dp-err" &&
   grep -q '^summary: .*, peak RSS [0-9]* MiB, peak ref:0 [0-9]* MiB (ref virtual device 0, reserved [0-9]* MiB, util -), ref:1 [0-9]* MiB (ref virtual device 1, reserved [0-9]* MiB, util -)$' "$tmp/dp-out" &&
   ${TORCH_PYTHON:-python3} - "$tmp/dp.json" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
s = [e for e in events if e["event"] == "summary"][0]
each = s["peak_device_bytes_per_device"]
assert sorted(each) == ["ref:0", "ref:1"], each
assert all(0 < b <= s["peak_rss_bytes"] for b in each.values()), s
assert s["peak_device_bytes"] == max(each.values()), s
for e in (s, [e for e in events if e["event"] == "epoch"][0]):
    per = e["per_device"]
    assert sorted(per) == ["ref:0", "ref:1"], per
    assert per["ref:1"]["device_name"] == "ref virtual device 1", per
    assert e["device_name"] == "ref virtual device 0", e
    assert e["peak_device_bytes"] == max(d["peak_device_bytes"] for d in per.values()), e
    assert e["reserved_device_bytes"] == max(d["reserved_device_bytes"] for d in per.values()), e
    assert all(d["device_util"] == -1 for d in per.values()), per
PY
then
    ok "dp: each device's peak in the summary line and the log"
else
    fail "dp: each device's peak in the summary line and the log" \
        "$(cat "$tmp/dp-out" "$tmp/dp-err"; grep '"summary"' "$tmp/dp.json")"
fi
if grep -q '^epoch 1/1  step 157/157  loss [0-9.]*  [0-9]* img/s  ETA [0-9]*:[0-9][0-9]$' "$tmp/err"; then
    ok "progress line"
else
    fail "progress line" "$(cat "$tmp/err")"
fi
steps=$(grep -c '^{"event":"step",' "$tmp/log.json")
if [ "$steps" -eq 157 ] && grep -q '^{"event":"epoch",' "$tmp/log.json" &&
   grep -q '^{"event":"eval",' "$tmp/log.json" && grep -q '^{"event":"summary",' "$tmp/log.json"; then
    ok "JSON log: 157 steps, epoch, eval and summary events"
else
    fail "JSON log" "$steps step events; $(grep -v '"step"' "$tmp/log.json")"
fi
if [ -n "$TORCH_PYTHON" ] && "$TORCH_PYTHON" -c 'import json' 2>/dev/null; then
    if "$TORCH_PYTHON" -c '
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)' "$tmp/log.json"; then
        ok "every log line is JSON"
    else
        fail "every log line is JSON"
    fi
fi

# --- more compute threads than cores: a warning naming the better setting --------
cores=$(nproc)
if "$TANDEM" train --device ref --model mlp --limit 128 --no-eval --quiet \
        --threads $((cores + 1)) >"$tmp/out" 2>"$tmp/err" &&
        grep -q "^warning: $((cores + 1)) compute threads x 1 process on this node, but $cores core.*train.threads $cores " "$tmp/err"; then
    ok "--threads above the cores is warned about"
else
    fail "--threads above the cores is warned about" "$(cat "$tmp/err")"
fi
if "$TANDEM" train --device ref --model mlp --limit 128 --no-eval --quiet --threads 1 \
        >"$tmp/out" 2>"$tmp/err" && ! grep -q "compute thread" "$tmp/err"; then
    ok "--threads 1: no warning"
else
    fail "--threads 1: no warning" "$(cat "$tmp/err")"
fi

# --- a new classifier over loaded weights (--init-skip) ---------------------------
# 12 classes from a 10-class file: refused with a hint; with --init-skip fc3
# every other tensor comes from the file (lr 0 keeps them as loaded) and fc3
# is fresh, of the new shape.
ft="--device ref --model mlp --limit 128 --no-eval --quiet --set model.num_classes=12"
"$TANDEM" train --device ref --model mlp --limit 128 --no-eval --quiet \
    --save "$tmp/base.safetensors" >/dev/null 2>&1
if "$TANDEM" train $ft --init "$tmp/base.safetensors" >"$tmp/out" 2>"$tmp/err"; then
    fail "a 10-class head into a 12-class model is refused" "accepted"
elif grep -q "fc3.weight.*\[12, 256\].*\[10, 256\].*--init-skip" "$tmp/err"; then
    ok "a 10-class head into a 12-class model is refused, with a hint"
else
    fail "a 10-class head into a 12-class model is refused, with a hint" "$(cat "$tmp/err")"
fi
if "$TANDEM" train $ft --init "$tmp/base.safetensors" --init-skip fc3 --lr 0 \
        --save "$tmp/ft.safetensors" >"$tmp/out" 2>"$tmp/err" &&
        ${TORCH_PYTHON:-python3} - "$TDM_TOP_SRCDIR/tests/compare-weights.py" \
            "$tmp/base.safetensors" "$tmp/ft.safetensors" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("compare_weights", sys.argv[1])
cw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cw)
base, ft = cw.load(sys.argv[2]), cw.load(sys.argv[3])
assert ft["fc3.weight"][0] == (12, 256) and ft["fc3.bias"][0] == (12,), ft["fc3.weight"][0]
for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
    assert ft[k] == base[k], k + " differs from the loaded file"
PY
then
    ok "--init-skip fc3: fc1, fc2 as loaded, fc3 fresh with 12 rows"
else
    fail "--init-skip fc3: fc1, fc2 as loaded, fc3 fresh with 12 rows" "$(cat "$tmp/err")"
fi

# --- a run whose loss diverges: one warning, and still a JSON log ----------------
if "$TANDEM" train --device ref --model mlp --limit 640 --batch-size 64 --lr 100000 --quiet \
        --log-file "$tmp/nan.json" >"$tmp/out" 2>"$tmp/err"; then
    n=$(grep -c '^warning: the loss is \(NaN\|infinite\) at step [0-9]* of epoch 1 (learning rate 100000)' "$tmp/err")
    [ "$n" -eq 1 ] && ok "a diverging loss is warned about once" ||
        fail "a diverging loss is warned about once" "$(cat "$tmp/err")"
    if [ -n "$TORCH_PYTHON" ] && "$TORCH_PYTHON" -c '
import json, sys
def reject(name):
    raise ValueError("not JSON: " + name)
nulls = 0
for line in open(sys.argv[1]):
    event = json.loads(line, parse_constant=reject)
    nulls += event.get("loss", 0) is None
sys.exit(0 if nulls > 0 else 1)' "$tmp/nan.json"; then
        ok "a diverged loss is null in the JSON log"
    else
        fail "a diverged loss is null in the JSON log" "$(tail -3 "$tmp/nan.json")"
    fi
else
    fail "a diverging run ends normally" "$(cat "$tmp/err")"
fi

# --- save, then eval gives the same numbers --------------------------------------
if "$TANDEM" eval --model mlp --dataset fashion-mnist --init "$tmp/mlp.safetensors" \
        >"$tmp/eval" 2>"$tmp/eval-err"; then
    eval_line=$(cat "$tmp/eval")
    case "$eval_line" in
    *"test accuracy $acc (loss $loss)"*) ok "eval --init gives accuracy $acc, loss $loss" ;;
    *) fail "eval --init gives the training's accuracy" "train: $summary; eval: $eval_line" ;;
    esac
else
    fail "eval --init" "$(cat "$tmp/eval-err")"
fi

# --- eval reads the test split as the training's evaluation did -------------------
# A pipeline that crops (the evaluation center-crops to 26x26) and brings its
# own normalize (used on the test split too): eval given the same pipeline
# gives the same numbers; without it, a clear error about the input size.
tf="random-crop 26 | normalize mean=0.5 std=0.5"
if "$TANDEM" train --model mlp --dataset fashion-mnist --limit 1000 --epochs 1 --quiet \
        --transforms "$tf" --save "$tmp/crop.safetensors" >"$tmp/crop-out" 2>"$tmp/crop-err" &&
   crop_sum=$(grep '^summary:' "$tmp/crop-out") &&
   crop_acc=$(printf '%s\n' "$crop_sum" | sed -n 's/.*test accuracy \([0-9.]*\) (loss \([0-9.]*\)).*/\1 (loss \2)/p') &&
   [ -n "$crop_acc" ] &&
   "$TANDEM" eval --model mlp --dataset fashion-mnist --init "$tmp/crop.safetensors" \
        --transforms "$tf" >"$tmp/crop-eval" 2>"$tmp/crop-eval-err" &&
   grep -q "test accuracy $crop_acc" "$tmp/crop-eval"; then
    ok "eval --transforms gives the training's accuracy ($crop_acc)"
else
    fail "eval --transforms gives the training's accuracy" \
        "$(cat "$tmp/crop-out" "$tmp/crop-err" "$tmp/crop-eval" "$tmp/crop-eval-err" 2>/dev/null)"
fi
if ! "$TANDEM" eval --model mlp --dataset fashion-mnist --init "$tmp/crop.safetensors" \
        >/dev/null 2>"$tmp/crop-eval-err" &&
   grep -q "fc1.weight.*\[512, 676\]" "$tmp/crop-eval-err"; then
    ok "eval without the pipeline names the weight shape that does not fit"
else
    fail "eval without the pipeline names the weight shape that does not fit" \
        "$(cat "$tmp/crop-eval-err")"
fi

# --- the example config, with --set applied after it ---------------------------------
if "$TANDEM" train --config "$TDM_TOP_SRCDIR/examples/fashion-mlp.ini" --device ref \
        --set data.limit=128 --set train.eval=false --quiet >"$tmp/ini-out" 2>"$tmp/ini-err" &&
   grep -q '^summary: model mlp, 1 epoch, 128 images, .*not evaluated' "$tmp/ini-out"; then
    ok "examples/fashion-mlp.ini with --set overrides"
else
    fail "examples/fashion-mlp.ini with --set overrides" "$(cat "$tmp/ini-out" "$tmp/ini-err")"
fi

# --- determinism on ref ------------------------------------------------------------
curve() {
    sed -n 's/^{"event":"step",.*"loss":\([^,]*\),.*/\1/p' "$1"
}
run_ref() {
    "$TANDEM" train --device ref --model mlp --limit 640 --no-eval --quiet --seed "$1" \
        --log-file "$2" >/dev/null 2>"$tmp/ref-err" || fail "train on ref (seed $1)" "$(cat "$tmp/ref-err")"
}
run_ref 7 "$tmp/a.json"
run_ref 7 "$tmp/b.json"
run_ref 8 "$tmp/c.json"
curve "$tmp/a.json" >"$tmp/a.loss"
curve "$tmp/b.json" >"$tmp/b.loss"
curve "$tmp/c.json" >"$tmp/c.loss"
if [ "$(wc -l <"$tmp/a.loss")" -eq 10 ] && cmp -s "$tmp/a.loss" "$tmp/b.loss"; then
    ok "same seed, same loss curve on ref"
else
    fail "same seed, same loss curve on ref" "$(paste "$tmp/a.loss" "$tmp/b.loss")"
fi
if ! cmp -s "$tmp/a.loss" "$tmp/c.loss"; then
    ok "another seed, another loss curve"
else
    fail "another seed, another loss curve"
fi

# --- hyperparameters after the optimizer's name win over --lr --------------------
if "$TANDEM" train --device ref --quiet --limit 128 --no-eval --lr 0.5 \
        --optimizer "sgd lr=0.125 momentum=0" --log-file "$tmp/hp.json" \
        >"$tmp/out" 2>"$tmp/err" &&
        [ "$(grep -c '"event":"step".*"lr":0.125,' "$tmp/hp.json")" -eq 2 ]; then
    ok "--optimizer \"sgd lr=0.125\" sets the learning rate of every step"
else
    fail "--optimizer \"sgd lr=0.125\" sets the learning rate of every step" \
        "$(cat "$tmp/err" "$tmp/hp.json")"
fi

# --- a batch larger than the data -------------------------------------------------
# One step of all 256 images; the loader's buffers are sized by the data, not
# by the 2^20 asked for (3 GiB each), so this fits in 1.5 GB of address space.
if (ulimit -v 1500000 && "$TANDEM" train --device ref --model mlp --limit 256 \
        --batch-size 1048576 --no-eval --quiet) >"$tmp/big-out" 2>"$tmp/big-err" &&
   grep -q '^summary: model mlp, 1 epoch, 256 images' "$tmp/big-out"; then
    ok "batch size above the number of images"
else
    fail "batch size above the number of images" "$(cat "$tmp/big-out" "$tmp/big-err")"
fi

done_testing

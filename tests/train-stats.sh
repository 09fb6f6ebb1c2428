#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/train-stats.sh - the loss and right predictions stay on the device
# between reports: `tandem train` reads them once per report (a step event
# every train.log_every steps, a progress line, the epoch's end), not per
# step, as TDM_PROFILE's "read" row counts; a step event of several steps
# gives their mean loss and summed counts; a diverged loss is named with
# the steps of the read that found it; dp adds up every replica's figures;
# and a strategy written before read_stats (tests/fixtures/oldstrategy.c,
# figures per step in TdmStepResult) logs exactly what `single` logs.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

fixtures="$TDM_TOP_BUILDDIR/tests/fixtures/.libs"
old="$fixtures/libtdm-fixture-oldstrategy.so"
[ -f "$old" ] || skip_all "fixture plugins are not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-train-stats-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"
# 64 images a step: --limit 640 is 10 steps, 1280 is 20.
run="--device ref --model mlp --no-eval --seed 7 --threads 1 --lr 0.01"

# --- one read per report -----------------------------------------------------------
# reads ARGS...: the calls of the "read" row (0 without one)
reads() {
    TDM_PROFILE=1 "$TANDEM" train $run "$@" 2>&1 >/dev/null |
        awk '$1 == "read" { n = $2 } END { print n + 0 }'
}
r10=$(reads --limit 640 --quiet)
r20=$(reads --limit 1280 --quiet)
if [ "$r10" -ge 1 ] && [ "$r10" = "$r20" ]; then
    ok "no reports: $r20 read(s) for 10 steps and for 20"
else
    fail "no reports: as many reads for 20 steps as for 10" "10 steps: $r10, 20 steps: $r20"
fi
# Each further report after a step that is not the last adds one read.
expect_reads() { # NAME EXTRA ARGS...
    name=$1 extra=$2; shift 2
    n=$(reads --limit 1280 "$@")
    if [ "$n" -eq $((r20 + extra)) ]; then
        ok "$name: $n reads"
    else
        fail "$name: $((r20 + extra)) reads" "got $n"
    fi
}
expect_reads "progress every 5 of 20 steps" 3 --progress 5
expect_reads "a step event every 4 of 20 steps" 4 --quiet --log-file "$tmp/every4.json" \
    --log-every 4
expect_reads "a step event every step" 19 --quiet --log-file "$tmp/every1.json"

# --- a step event of several steps ---------------------------------------------------
"$TANDEM" train $run --limit 640 --quiet --log-file "$tmp/one.json" >/dev/null 2>&1
"$TANDEM" train $run --limit 640 --quiet --log-file "$tmp/four.json" --log-every 4 \
    >/dev/null 2>&1
# event lines: step loss correct count
events() {
    sed -n 's/^{"event":"step",.*"step":\([0-9]*\),.*"loss":\([^,]*\),"correct":\([0-9]*\),"count":\([0-9]*\),.*/\1 \2 \3 \4/p' "$1"
}
events "$tmp/one.json" >"$tmp/one.ev"
events "$tmp/four.json" >"$tmp/four.ev"
# Group the single steps as the log did (ends 4, 8, 10) and compare.
if [ "$(wc -l <"$tmp/one.ev")" -eq 10 ] && [ "$(cut -d' ' -f1 "$tmp/four.ev" | tr '\n' ' ')" = "4 8 10 " ] &&
   awk 'NR == FNR { s += $2 * $4; c += $3; n += $4
                    if ($1 == 4 || $1 == 8 || $1 == 10) { L[$1] = s / n; C[$1] = c; N[$1] = n; s = c = n = 0 }
                    next }
        { d = $2 - L[$1]; if (d < 0) d = -d
          if (d > 1e-6 * L[$1] || $3 != C[$1] || $4 != N[$1]) { print "step " $1 ": " $0 " vs " L[$1] " " C[$1] " " N[$1]; bad = 1 } }
        END { exit bad }' "$tmp/one.ev" "$tmp/four.ev" >"$tmp/cmp" 2>&1; then
    ok "--log-every 4: events at steps 4, 8, 10 with their steps' mean loss and summed counts"
else
    fail "--log-every 4: events with their steps' mean loss and summed counts" \
        "$(cat "$tmp/cmp" "$tmp/one.ev" "$tmp/four.ev")"
fi
if [ "$(sed -n 's/^{"event":"epoch",\(.*\),"images".*/\1/p' "$tmp/one.json")" = \
     "$(sed -n 's/^{"event":"epoch",\(.*\),"images".*/\1/p' "$tmp/four.json")" ] &&
   grep -q '^{"event":"epoch",' "$tmp/one.json"; then
    ok "--log-every 4: the same epoch loss and accuracy"
else
    fail "--log-every 4: the same epoch loss and accuracy" "$(grep -h '"epoch"' "$tmp"/*.json)"
fi

# --- a diverging loss, found at the epoch's one read ---------------------------------
if "$TANDEM" train $run --limit 640 --lr 100000 --quiet >/dev/null 2>"$tmp/nan.err"; then
    n=$(grep -c '^warning: the loss is \(NaN\|infinite\) in steps 1-10 of epoch 1 (learning rate 100000)' "$tmp/nan.err")
    [ "$n" -eq 1 ] && ok "a diverging loss is named with the steps of the read" ||
        fail "a diverging loss is named with the steps of the read" "$(cat "$tmp/nan.err")"
else
    fail "a diverging run ends normally" "$(cat "$tmp/nan.err")"
fi

# --- a strategy of the 1.0 contract logs as single does -------------------------------
# figures FILE: every step's and the epoch's loss and counts, and the
# summary's final loss, without the times
figures() {
    sed -n -e 's/^{"event":"step",\(.*\),"lr".*/\1/p' -e 's/^{"event":"epoch",\(.*\),"images".*/\1/p' \
        -e 's/^{"event":"summary",.*\("final_loss":[^,]*\),.*/\1/p' "$1"
}
# progress FILE: the progress lines up to their loss
progress() {
    sed -n 's/^\(epoch .*  loss [0-9.]*\)  .*/\1/p' "$1"
}
for acc in 1 2; do
    common="$run --limit 640 --accumulate $acc --progress 3 --log-file"
    "$TANDEM" train $common "$tmp/single$acc.json" >/dev/null 2>"$tmp/single$acc.err"
    if "$TANDEM" --plugin "$old" train $common "$tmp/old$acc.json" --strategy fixture-old-strategy \
            >/dev/null 2>"$tmp/old$acc.err" &&
       grep -q '"strategy":"fixture-old-strategy"' "$tmp/old$acc.json" &&
       [ "$(figures "$tmp/old$acc.json" | wc -l)" -eq 12 ] &&
       [ "$(figures "$tmp/old$acc.json")" = "$(figures "$tmp/single$acc.json")" ] &&
       [ "$(progress "$tmp/old$acc.err" | wc -l)" -eq 4 ] &&
       [ "$(progress "$tmp/old$acc.err")" = "$(progress "$tmp/single$acc.err")" ]; then
        ok "accumulate $acc: a strategy without read_stats logs what single logs"
    else
        fail "accumulate $acc: a strategy without read_stats logs what single logs" \
            "$(cat "$tmp/old$acc.err"; figures "$tmp/old$acc.json" >"$tmp/a"
               figures "$tmp/single$acc.json" >"$tmp/b"; diff "$tmp/a" "$tmp/b")"
    fi
done

# --- dp: every replica's figures ------------------------------------------------------
if TDM_REF_DEVICES=2 "$TANDEM" train $run --limit 640 --quiet --strategy dp --devices ref:0,ref:1 \
        --log-file "$tmp/dp.json" >/dev/null 2>"$tmp/dp.err"; then
    events "$tmp/dp.json" >"$tmp/dp.ev"
    events "$tmp/single1.json" >"$tmp/single.ev"
    # The same samples on two devices: the same counts, and losses within
    # float rounding of the one-device run's (the first step's exactly the
    # same predictions).
    if [ "$(wc -l <"$tmp/dp.ev")" -eq 10 ] &&
       paste -d' ' "$tmp/dp.ev" "$tmp/single.ev" | awk '
            { d = $2 - $6; if (d < 0) d = -d
              if ($1 != $5 || $4 != $8 || d > 1e-4 * $6 || (NR == 1 && $3 != $7)) bad = 1 }
            END { exit bad }'; then
        ok "dp over two devices: counts and losses of the whole batch"
    else
        fail "dp over two devices: counts and losses of the whole batch" \
            "$(paste "$tmp/dp.ev" "$tmp/single.ev")"
    fi
else
    fail "train dp over two ref devices" "$(cat "$tmp/dp.err")"
fi

done_testing

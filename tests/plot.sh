#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/plot.sh - `tandem plot` on the logs of short real training runs
# (tandem train --log-file, with evaluation after each epoch, one run
# without): the PNG is a PNG of the size asked for, and read back
# (tests/plot-pixels) each run's colour is in every panel it has figures
# for, and not in the test panels of a run without evaluation, which say
# "no data" instead. Bad logs fail with the file and line named and leave
# no image behind; an unfinished last line (a run still writing) and an
# empty log plot with a warning; bad options fail with status 2.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-plot-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pixels="$TDM_TOP_BUILDDIR/tests/plot-pixels"

# --- a build without cairo keeps the command, which says why it cannot draw ---
: >"$tmp/empty.jsonl"
"$TANDEM" plot "$tmp/empty.jsonl" --out "$tmp/probe.png" >"$tmp/out" 2>"$tmp/err"
if grep -q "built without cairo" "$tmp/err"; then
    ok "a build without cairo says so: $(cat "$tmp/err")"
    done_testing
    exit
fi
"$TANDEM" --help | grep -q "^  plot " && ok "tandem --help lists plot" ||
    fail "tandem --help lists plot" "$("$TANDEM" --help)"

# --- logs of real runs: two learning rates, one run without evaluation --------
train() {
    log=$1; shift
    if "$TANDEM" train --model mlp --limit 640 -b 64 --quiet --log-file "$tmp/$log" "$@" \
            >"$tmp/train.out" 2>&1 && [ -s "$tmp/$log" ]; then
        ok "train $* writes $log"
    else
        fail "train $* writes $log" "$(cat "$tmp/train.out")"
    fi
}
train a.jsonl --epochs 2 --lr 0.05
train b.jsonl --epochs 2 --lr 0.1 --log-every 3 --schedule cosine
train c.jsonl --epochs 1 --lr 0.05 --no-eval

# colour_of LABEL: the colour `tandem plot` printed for LABEL in $tmp/out
colour_of() {
    sed -n "s|^  #\([0-9a-f]\{6\}\) $1: .*|\1|p" "$tmp/out"
}
# count PNG CELL COLOUR: pixels of COLOUR in cell CELL of the 3x2 grid
count() {
    "$pixels" "$1" 3 2 "$2" "$3" 2>/dev/null || echo error
}

if "$TANDEM" plot "$tmp/a.jsonl" "$tmp/b.jsonl" --label "lr 0.05" --label "lr 0.1" \
        --width 900 --height 600 --out "$tmp/ab.png" >"$tmp/out" 2>"$tmp/err"; then
    ok "plot two logs"
else
    fail "plot two logs" "$(cat "$tmp/err")"
fi
grep -q "^wrote $tmp/ab.png, 900x600, from 2 logs" "$tmp/out" && ok "summary line" ||
    fail "summary line" "$(cat "$tmp/out")"
[ "$(od -An -tx1 -N8 "$tmp/ab.png" | tr -d ' ')" = 89504e470d0a1a0a ] &&
    ok "the file is a PNG" || fail "the file is a PNG" "$(od -An -tx1 -N8 "$tmp/ab.png")"
size=$("$pixels" "$tmp/ab.png" 2>&1)
[ "$size" = "900 600" ] && ok "cairo reads it back, 900x600" ||
    fail "cairo reads it back, 900x600" "$size"
ca=$(colour_of "lr 0.05"); cb=$(colour_of "lr 0.1")
if [ -n "$ca" ] && [ -n "$cb" ] && [ "$ca" != "$cb" ]; then
    ok "each log its own colour (#$ca, #$cb)"
else
    fail "each log its own colour" "$(cat "$tmp/out")"
fi
grep -q "  #$ca lr 0.05: .* 20 step events, 2 epochs, 2 evaluations" "$tmp/out" &&
    ok "a.jsonl: 20 step events, 2 epochs, 2 evaluations" ||
    fail "a.jsonl: 20 step events, 2 epochs, 2 evaluations" "$(cat "$tmp/out")"
# --log-every 3 over 10 steps an epoch: steps 3, 6, 9 and the epoch's end
grep -q "  #$cb lr 0.1: .* 8 step events, 2 epochs, 2 evaluations" "$tmp/out" &&
    ok "b.jsonl (--log-every 3): 8 step events" ||
    fail "b.jsonl (--log-every 3): 8 step events" "$(cat "$tmp/out")"
grep -q "^no data" "$tmp/out" && fail "every panel has data" "$(cat "$tmp/out")" ||
    ok "every panel has data"
for cell in 0 1 2 3 4 5; do
    case $cell in
    0) name="training loss" ;; 1) name="test loss" ;; 2) name="test accuracy" ;;
    3) name="learning rate" ;; 4) name="images/s" ;; 5) name="legend" ;;
    esac
    na=$(count "$tmp/ab.png" $cell "$ca"); nb=$(count "$tmp/ab.png" $cell "$cb")
    if [ "$na" != error ] && [ "$nb" != error ] && [ "$na" -gt 20 ] && [ "$nb" -gt 20 ]; then
        ok "$name panel (cell $cell) has both colours ($na, $nb pixels)"
    else
        fail "$name panel (cell $cell) has both colours" "#$ca: $na, #$cb: $nb pixels"
    fi
done

# --- a run without evaluation: its test panels say "no data" -----------------
if "$TANDEM" plot "$tmp/c.jsonl" --out "$tmp/c.png" >"$tmp/out" 2>"$tmp/err"; then
    ok "plot a log without evaluation"
else
    fail "plot a log without evaluation" "$(cat "$tmp/err")"
fi
cc=$(colour_of "$tmp/c.jsonl")
grep -q "^no data: Test loss" "$tmp/out" && grep -q "^no data: Test accuracy" "$tmp/out" &&
    [ "$(grep -c '^no data' "$tmp/out")" -eq 2 ] &&
    ok "the two test panels, and only they, have no data" ||
    fail "the two test panels, and only they, have no data" "$(cat "$tmp/out")"
n0=$(count "$tmp/c.png" 0 "$cc"); n1=$(count "$tmp/c.png" 1 "$cc")
n2=$(count "$tmp/c.png" 2 "$cc"); n3=$(count "$tmp/c.png" 3 "$cc")
if [ -n "$cc" ] && [ "$n0" -gt 20 ] && [ "$n3" -gt 20 ] && [ "$n1" -eq 0 ] && [ "$n2" -eq 0 ]; then
    ok "its colour in the step panels, not in the empty ones"
else
    fail "its colour in the step panels, not in the empty ones" \
        "#$cc: cells 0..3: $n0 $n1 $n2 $n3 pixels"
fi

# --- three logs, a log scale, a default size -------------------------------------
if "$TANDEM" plot "$tmp/a.jsonl" "$tmp/b.jsonl" "$tmp/c.jsonl" --log-loss --smooth 0.5 \
        --out "$tmp/abc.png" >"$tmp/out" 2>"$tmp/err"; then
    ok "plot three logs, --log-loss"
else
    fail "plot three logs, --log-loss" "$(cat "$tmp/err")"
fi
c3=$(colour_of "$tmp/c.jsonl")
[ "$("$pixels" "$tmp/abc.png" 2>&1)" = "1200 750" ] && ok "default size 1200x750" ||
    fail "default size 1200x750" "$("$pixels" "$tmp/abc.png" 2>&1)"
n=$(count "$tmp/abc.png" 0 "$c3")
[ -n "$c3" ] && [ "$c3" != "$ca" ] && [ "$c3" != "$cb" ] && [ "$n" -gt 20 ] &&
    ok "the third log has a third colour, in the loss panel ($n pixels)" ||
    fail "the third log has a third colour, in the loss panel" "#$c3: $n; $(cat "$tmp/out")"

# --- logs a run can leave ------------------------------------------------------------
cat "$tmp/a.jsonl" "$tmp/a.jsonl" >"$tmp/twice.jsonl" # a run restarted into the same log
sed '3s/"loss":[^,]*/"loss":null/; 4s/"loss":[^,]*/"loss":null/' "$tmp/a.jsonl" >"$tmp/nan.jsonl"
check "a log of a restarted run plots" \
    "$TANDEM" plot "$tmp/twice.jsonl" "$tmp/nan.jsonl" --out "$tmp/x.png"
# figures no run has: the panels show what they can, nothing overflows
cat >"$tmp/odd.jsonl" <<'EOF'
{"event":"start","batch_size":1e300,"world_size":-3}
{"event":"step","epoch":1e300,"global_step":1e18,"loss":1e300,"lr":-5,"count":64,"time_s":1e-300}
{"event":"step","epoch":1,"global_step":1e18,"loss":1e-300,"lr":0,"count":-1,"time_s":0}
{"event":"epoch","epoch":1e18,"loss":-1e300,"accuracy":2,"img_per_s":1e308}
{"event":"eval","epoch":1e18,"loss":0,"accuracy":-1}
EOF
check "a log of impossible figures plots" \
    "$TANDEM" plot "$tmp/odd.jsonl" --log-loss --out "$tmp/odd.png"
check "... and on linear axes" "$TANDEM" plot "$tmp/odd.jsonl" --out "$tmp/odd.png"
head -c -25 "$tmp/a.jsonl" >"$tmp/cut.jsonl"
lines=$(wc -l <"$tmp/a.jsonl")
if "$TANDEM" plot "$tmp/cut.jsonl" --out "$tmp/cut.png" >"$tmp/out" 2>"$tmp/err" &&
        grep -q "warning: $tmp/cut.jsonl:$lines: the last line is unfinished" "$tmp/err"; then
    ok "an unfinished last line: a warning naming it, the rest plotted"
else
    fail "an unfinished last line: a warning naming it, the rest plotted" "$(cat "$tmp/err")"
fi
if "$TANDEM" plot "$tmp/empty.jsonl" --out "$tmp/empty.png" >"$tmp/out" 2>"$tmp/err" &&
        grep -q "empty.jsonl has no records" "$tmp/err" &&
        [ "$(grep -c '^no data' "$tmp/out")" -eq 5 ] && [ -s "$tmp/empty.png" ]; then
    ok "an empty log: a warning, every panel \"no data\""
else
    fail "an empty log: a warning, every panel \"no data\"" "$(cat "$tmp/out" "$tmp/err")"
fi

# --- bad logs: the file and line named, nothing written --------------------------
rm -f "$tmp/x.png"
sed '3s/.*/{"event":"step","global_step":3,/' "$tmp/a.jsonl" >"$tmp/broken.jsonl"
printf '{"event":"start"}\n[1, 2]\n' >"$tmp/array.jsonl"
printf '{"event":"start"}\n\n{"step":3,"loss":1}\n' >"$tmp/noevent.jsonl"
sed '5s/"loss":[^,]*/"loss":"high"/' "$tmp/a.jsonl" >"$tmp/type.jsonl"
expect_error "a missing log" "^tandem plot: " "$tmp/nope.jsonl: cannot open the log" -- \
    "$TANDEM" plot "$tmp/a.jsonl" "$tmp/nope.jsonl" --out "$tmp/x.png"
expect_error "a line that is not JSON" "^tandem plot: " "$tmp/broken.jsonl:3: not JSON" -- \
    "$TANDEM" plot "$tmp/broken.jsonl" --out "$tmp/x.png"
expect_error "a JSON array" "^tandem plot: " "$tmp/array.jsonl:2: an array, not a log record" -- \
    "$TANDEM" plot "$tmp/array.jsonl" --out "$tmp/x.png"
expect_error "an object without an event (blank lines counted)" "^tandem plot: " \
    "$tmp/noevent.jsonl:3: a JSON object without an \"event\" string" -- \
    "$TANDEM" plot "$tmp/noevent.jsonl" --out "$tmp/x.png"
expect_error "a loss that is a string" "^tandem plot: " \
    "$tmp/type.jsonl:5: \"loss\" is a string, not a number" -- \
    "$TANDEM" plot "$tmp/type.jsonl" --out "$tmp/x.png"
expect_error "a PNG given as a log" "^tandem plot: " "$tmp/ab.png:1: not JSON" -- \
    "$TANDEM" plot "$tmp/ab.png" --out "$tmp/x.png"
expect_error "a directory given as a log" "^tandem plot: " "$tmp: is a directory" -- \
    "$TANDEM" plot "$tmp" --out "$tmp/x.png"
[ ! -e "$tmp/x.png" ] && ok "no image written for a bad log" ||
    fail "no image written for a bad log" "x.png exists"

# --- bad options: status 2 and the option named -------------------------------
expect_usage() {
    name=$1; pattern=$2; shift 3
    "$TANDEM" plot "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ $status -eq 2 ] && grep -qF -- "$pattern" "$tmp/err"; then
        ok "$name"
    else
        fail "$name" "status $status; stderr: $(cat "$tmp/err")"
    fi
}
expect_usage "no --out" "--out FILE.png is required" -- "$tmp/a.jsonl"
expect_usage "no log" "no log to plot" -- --out "$tmp/x.png"
expect_usage "more labels than logs" "2 --label for 1 log" -- "$tmp/a.jsonl" -L x -L y \
    --out "$tmp/x.png"
expect_usage "--width too small" "--width 10" -- "$tmp/a.jsonl" --width 10 --out "$tmp/x.png"
expect_usage "--smooth 1" "--smooth 1 is outside" -- "$tmp/a.jsonl" --smooth 1 --out "$tmp/x.png"
expect_usage "--out a directory" "is a directory" -- "$tmp/a.jsonl" --out "$tmp"
expect_usage "an unknown option" "--colour" -- "$tmp/a.jsonl" --colour red --out "$tmp/x.png"
expect_error "--out in a missing directory" "^tandem plot: " "$tmp/no-dir/x.png" -- \
    "$TANDEM" plot "$tmp/a.jsonl" --out "$tmp/no-dir/x.png"
leftover=$(find "$tmp" -name '*.tmp-*')
[ -z "$leftover" ] && ok "no temporary files left" || fail "no temporary files left" "$leftover"
done_testing

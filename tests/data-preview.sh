#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/data-preview.sh - `tandem data preview`: it writes a PNG grid of the
# samples asked for, with their labels (checked against the label file), the
# same bytes for the same seed and epoch and other bytes for another epoch
# when the transforms are random; bad options fail with status 2 and a line
# naming the option, and a write that fails leaves no file behind.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-data-preview-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
data="idx:$TDM_TOP_SRCDIR/data/fashion-mnist"
labels_gz="$TDM_TOP_SRCDIR/data/fashion-mnist/train-labels-idx1-ubyte.gz"
pipeline="random-crop 28 pad=4 | hflip | rotate 15"

# png_size FILE: "WIDTH HEIGHT" from the IHDR chunk (bytes 16..23).
png_size() {
    od -An -tu1 -j16 -N8 "$1" |
        awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4, $5 * 16777216 + $6 * 65536 + $7 * 256 + $8 }'
}

# --- a grid of the first samples ------------------------------------------------
if "$TANDEM" data preview --dataset "$data" --start 3 --count 12 --columns 4 \
        --transforms "$pipeline" --out "$tmp/a.png" >"$tmp/out" 2>"$tmp/err"; then
    ok "preview writes a grid"
else
    fail "preview writes a grid" "$(cat "$tmp/err")"
fi
if [ "$(od -An -tx1 -N8 "$tmp/a.png" | tr -d ' ')" = 89504e470d0a1a0a ]; then
    ok "the file is a PNG"
else
    fail "the file is a PNG" "$(od -An -tx1 -N8 "$tmp/a.png")"
fi
set -- $(png_size "$tmp/a.png")
if [ "${1:-0}" -gt "${2:-0}" ] && [ "${2:-0}" -gt 0 ]; then
    ok "4 columns of 3 rows: wider than high (${1}x${2})"
else
    fail "4 columns of 3 rows: wider than high" "size ${1:-?}x${2:-?}"
fi
want=$(gzip -dc "$labels_gz" | od -An -tu1 -j11 -N12 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
got=$(sed -n 's/^labels: //p' "$tmp/out")
if [ -n "$want" ] && [ "$got" = "$want" ]; then
    ok "labels of samples 3..14 as in the label file ($got)"
else
    fail "labels of samples 3..14 as in the label file" "file: $want; printed: $got"
fi
grep -q "^wrote .*: 12 samples of $data (train, from 3), 1x28x28" "$tmp/out" &&
    ok "summary line" || fail "summary line" "$(cat "$tmp/out")"

# --- the augmentation is keyed by seed and epoch -----------------------------------
"$TANDEM" data preview --dataset "$data" --start 3 --count 12 --columns 4 \
    --transforms "$pipeline" --out "$tmp/b.png" >/dev/null 2>&1
"$TANDEM" data preview --dataset "$data" --start 3 --count 12 --columns 4 \
    --transforms "$pipeline" --epoch 1 --out "$tmp/c.png" >/dev/null 2>&1
cmp -s "$tmp/a.png" "$tmp/b.png" && ok "same seed and epoch, same image" ||
    fail "same seed and epoch, same image" "a.png and b.png differ"
[ -f "$tmp/c.png" ] && ! cmp -s "$tmp/a.png" "$tmp/c.png" &&
    ok "another epoch, another augmentation" ||
    fail "another epoch, another augmentation" "c.png missing or equal to a.png"

# --- bad options ---------------------------------------------------------------------
# expect_usage NAME PATTERN -- ARGS...: status 2, a line with PATTERN.
expect_usage() {
    name=$1; pattern=$2; shift 3
    "$TANDEM" data preview "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ $status -eq 2 ] && grep -qF -- "$pattern" "$tmp/err"; then
        ok "$name"
    else
        fail "$name" "status $status; stderr: $(cat "$tmp/err")"
    fi
}
expect_usage "no --out" "--out" -- --count 4
expect_usage "--count 0" "--count 0" -- --count 0 --out "$tmp/x.png"
expect_usage "--columns too many" "--columns 100000" -- --columns 100000 --out "$tmp/x.png"
expect_usage "--scale too large" "--scale 99" -- --scale 99 --out "$tmp/x.png"
expect_usage "negative --seed" "--seed -1" -- --seed -1 --out "$tmp/x.png"
expect_usage "--start past the end" "--start 999999" -- --start 999999 --out "$tmp/x.png"
expect_usage "--out a directory" "is a directory" -- --out "$tmp"
if "$TANDEM" data preview --transforms "spin 3" --out "$tmp/x.png" >/dev/null 2>"$tmp/err"; then
    fail "unknown transform" "accepted"
elif grep -q "spin" "$tmp/err"; then
    ok "unknown transform named"
else
    fail "unknown transform named" "$(cat "$tmp/err")"
fi
if "$TANDEM" data preview --out "$tmp/no-dir/x.png" >/dev/null 2>"$tmp/err"; then
    fail "--out in a missing directory" "accepted"
elif grep -q "$tmp/no-dir/x.png" "$tmp/err" && [ ! -e "$tmp/no-dir" ]; then
    ok "--out in a missing directory names the file"
else
    fail "--out in a missing directory names the file" "$(cat "$tmp/err")"
fi
leftover=$(find "$tmp" -name '*.tmp-*')
[ -z "$leftover" ] && ok "no temporary files left" || fail "no temporary files left" "$leftover"
done_testing

# SPDX-License-Identifier: MIT
# tests/strategies-lib.sh - helpers for the strategy tests (source it after
# tests/tap.sh). Every test works in its own temporary directory, removed at
# exit with any training process a failed test left behind.
[ -x "$TANDEM" ] || skip_all "tandem is not built"
PY=${TORCH_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=/usr/bin/python3
work=$(mktemp -d)
launchers=
cleanup() {
    for p in $launchers; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

# The same run everywhere: 1,280 Fashion-MNIST images, so 20 steps of 64
# (or 2 ranks x 32), seed 7, one compute thread per process, no evaluation.
# lr 0.01 keeps 20 steps of training from amplifying float rounding (at
# 0.05, ReLUs that flip sign turn 1e-7 differences into 1e-5).
common="--limit 1280 --no-eval --seed 7 --threads 1 --quiet --lr 0.01 --timeout 60"

# has_feature KIND NAME: does `tandem inspect` list this feature as available?
has_feature() {
    "$TANDEM" inspect 2>/dev/null | grep -Eq "^ +$1 +$2 +priority +-?[0-9]+ +available"
}

# same NAME A B: TAP result for "A's weights equal B's within 1e-5"
same() {
    if [ ! -s "$2" ] || [ ! -s "$3" ]; then
        fail "$1" "missing weights: $2 or $3"
        return
    fi
    if out=$("$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$2" "$3" 1e-5 2>&1); then
        ok "$1: $out"
    else
        fail "$1" "$out"
    fi
}

# differ NAME A B: TAP result for "A's weights are NOT within 1e-5 of B's"
differ() {
    if "$PY" "$TDM_TOP_SRCDIR/tests/compare-weights.py" "$2" "$3" 1e-5 >/dev/null 2>&1; then
        fail "$1" "the weights are equal"
    else
        ok "$1"
    fi
}

# train OUT.st LOG ARGS...: one process
train() {
    out=$1; log=$2; shift 2
    "$TANDEM" train $common --save "$work/$out" "$@" >"$work/$log" 2>&1 ||
        { echo "# tandem train $* failed:"; sed 's/^/#   /' "$work/$log"; }
}

# train_dist NPROC OUT.st LOG ARGS...: one job of NPROC processes on loopback
train_dist() {
    n=$1; out=$2; log=$3; shift 3
    "$TANDEM" run --nproc-per-node "$n" -- "$TANDEM" train $common --save "$work/$out" "$@" \
        >"$work/$log" 2>&1 ||
        { echo "# tandem run -- tandem train $* failed:"; sed 's/^/#   /' "$work/$log"; }
}

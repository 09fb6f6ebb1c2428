#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/gpu-dry-run.sh - the GPU check script's dry run passes here.
# tests/gpu/run runs once on a GPU machine, with no time to debug it there;
# its --dry-run runs the same stages against the cpu backend (ref where cpu
# is not built) at tiny sizes with PyTorch on the CPU. This runs stages 0
# (environment), 2 (oracle against PyTorch, 3 steps), 4 (benchmark table
# against bench/peer_gpu.py) and 6 (distributed: staged shm between two
# processes on ref devices that claim non-host memory, the collectives on
# device tensors, a dead rank) on the build tree, about 30 s, and
# checks the summary: every stage passed, the logs are where they belong,
# and every benchmark row has figures on both sides. Skipped without torch.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

py=${TORCH_PYTHON:-/usr/bin/python3}
"$py" -c 'import torch' >/dev/null 2>&1 || skip_all "torch cannot be imported by $py"
command -v bash >/dev/null || skip_all "tests/gpu/run needs bash"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-gpu-dry.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# Stage 6's dry run needs the TDM_REF_NOT_HOST hook to make ref stage.
stages="0 2 4"
have_test_hooks && stages="$stages 6"
list=$(echo "$stages" | tr ' ' ',')
TORCH_PYTHON=$py bash "$TDM_TOP_SRCDIR/tests/gpu/run" --dry-run --build "$TDM_TOP_BUILDDIR" \
    --stages "$list" --out "$tmp/out" >"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    ok "tests/gpu/run --dry-run --stages $list exits 0"
else
    fail "tests/gpu/run --dry-run --stages $list exits 0" "exit $rc: $(cat "$tmp/log")"
fi

summary=$tmp/out/summary.txt
for s in $stages; do
    row=$(grep -E "^$s +[a-z-]+ +" "$summary" 2>/dev/null)
    case $row in
    *" pass "*) ok "stage $s passes: $(echo "$row" | cut -c1-100)" ;;
    *) fail "stage $s passes" "${row:-no row in the summary}; log: $(tail -20 "$tmp/out/stage$s.log" 2>&1)" ;;
    esac
done
for s in 1 3 5; do
    if grep -Eq "^$s " "$summary" 2>/dev/null || [ -e "$tmp/out/stage$s.log" ]; then
        fail "stage $s is not run when not asked for" "$(cat "$summary")"
    else
        ok "stage $s is not run when not asked for"
    fi
done
# only the stage logs and the summary land in the output directory
n=$(ls "$tmp/out" | wc -l)
want=$(($(echo "$stages" | wc -w) + 1))
[ "$n" -eq "$want" ] && ok "$want files in the output directory" ||
    fail "$want files in the output directory" "$(ls "$tmp/out")"

# every row of the benchmark table has images/s for both and a ratio
rows=$(sed -n '/^model  *batch/,$p' "$summary" | tail -n +2)
nrows=$(echo "$rows" | grep -c "^[a-z]")
full=$(echo "$rows" | awk 'NF >= 9 && $5 + 0 > 0 && $6 + 0 > 0 && $7 + 0 > 0' | wc -l)
if [ "$nrows" -eq 3 ] && [ "$full" -eq 3 ]; then
    ok "the benchmark table has 3 rows with Tandem, PyTorch and the ratio"
else
    fail "the benchmark table has 3 rows with Tandem, PyTorch and the ratio" "$(cat "$summary")"
fi

# a stage that fails is reported as such: stage 2 with the oracle program
# replaced by one that always fails
mkdir -p "$tmp/bad/tests/oracle" "$tmp/bad/tools" "$tmp/bad/bench" "$tmp/bad/plugins"
printf '#!/bin/sh\necho "not ok 1 - broken"\nexit 1\n' >"$tmp/bad/tests/oracle/test-oracle"
chmod +x "$tmp/bad/tests/oracle/test-oracle"
ln -s "$TDM_TOP_BUILDDIR/tools/tandem" "$tmp/bad/tools/tandem"
ln -s "$TDM_TOP_BUILDDIR/plugins/.libs" "$tmp/bad/plugins/.libs"
TORCH_PYTHON=$py bash "$TDM_TOP_SRCDIR/tests/gpu/run" --dry-run --build "$tmp/bad" \
    --stages 2 --out "$tmp/out2" >"$tmp/log2" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -Eq '^2 +oracle +fail ' "$tmp/out2/summary.txt"; then
    ok "a failing oracle fails stage 2 and the run"
else
    fail "a failing oracle fails stage 2 and the run" "exit $rc: $(cat "$tmp/log2")"
fi
done_testing

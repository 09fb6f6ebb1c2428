#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/strategies-mpirun.sh - `mpirun -np 2 tandem train --strategy ddp`
# trains without Tandem's launcher: the ranks come from Open MPI's
# OMPI_COMM_WORLD_* variables, rank 0 serves the store, and the result equals
# the single-process run (2 x 32 = 64). Skipped without Debian's openmpi-bin.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
. "$TDM_TOP_SRCDIR/tests/strategies-lib.sh"
command -v mpirun >/dev/null 2>&1 || skip_all "mpirun not found (Debian: openmpi-bin)"
has_feature collective shm || skip_all "the shm collective is not available"

train "single.st" "single.log" --model mlp -b 64
# Open MPI refuses root without --allow-run-as-root; --oversubscribe lets 2
# ranks run on fewer slots; -x passes the plugin path to the ranks.
if timeout 120 mpirun -np 2 --allow-run-as-root --oversubscribe -x TDM_PLUGIN_SYSTEM_PATH \
    -x TDM_PLUGIN_PATH "$TANDEM" train $common --model mlp -b 32 --strategy ddp \
    --save "$work/mpi.st" --log-file "$work/mpi.jsonl" >"$work/mpi.out" 2>&1; then
    ok "mpirun -np 2 tandem train --strategy ddp exits 0"
else
    fail "mpirun -np 2 tandem train --strategy ddp exits 0" "$(tail -20 "$work/mpi.out")"
fi
if grep -q '"event":"start".*"strategy":"ddp","world_size":2' "$work/mpi.jsonl" 2>/dev/null; then
    ok "the ranks found each other (world size 2)"
else
    fail "the ranks found each other (world size 2)" "$(head -1 "$work/mpi.jsonl" 2>&1)"
fi
same "mpirun ddp 2 x 32 = single 64" "$work/mpi.st" "$work/single.st"

done_testing

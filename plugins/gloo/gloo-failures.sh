# SPDX-License-Identifier: MIT
# plugins/gloo/gloo-failures.sh - failures the gloo plugin reports by itself,
# without TDM_DEBUG=collectives: a mismatched call, a skipped call and a dead
# rank, each on real processes started by `tandem run`, must stop the job
# quickly (well before TDM_TIMEOUT) with a message naming the rank. The
# generic tests (every op, timeouts) are tests/test-collectives, which runs
# every collective plugin built. Prints TAP.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

coll="$TDM_TOP_BUILDDIR/tests/test-collectives"
[ -e "$TDM_TOP_BUILDDIR/plugins/.libs/libtdm-gloo.so" ] || skip_all "gloo plugin not built"
[ -x "$coll" ] || skip_all "tests/test-collectives not built"
"$TANDEM" run --help >/dev/null 2>&1 || skip_all "no launcher (tandem run)"
export TDM_TEST_COLLECTIVE=gloo
unset TDM_DEBUG

# job NAME NPROC MODE TDM_TIMEOUT LIMIT_S EXPECTED...
job() {
    name=$1 nproc=$2 mode=$3 tmo=$4 limit=$5
    shift 5
    start=$(date +%s)
    out=$(TDM_TIMEOUT=$tmo timeout -k 2 "$limit" "$TANDEM" run --nproc-per-node "$nproc" -- \
        "$coll" --worker "$mode" 2>&1)
    rc=$?
    took=$(($(date +%s) - start))
    if [ "$rc" -eq 0 ]; then
        fail "$name" "the job should have failed; output:
$out"
        return
    fi
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        fail "$name" "the job hung (killed after $limit s); output:
$out"
        return
    fi
    for want in "$@"; do
        case $out in
        *"$want"*) ;;
        *)
            fail "$name" "output lacks \"$want\"; output:
$out"
            return
            ;;
        esac
    done
    ok "$name ($took s)"
}

job "mismatched count stops 3 ranks" 3 mismatch 20 15 \
    "collective mismatch at #1" "rank 2 called allreduce(1000 x f32, sum)"
job "a skipped call is named on 3 ranks" 3 skip 20 15 \
    "collective mismatch at #2" "rank 1 called barrier()"
job "a dead rank is named on 2 ranks" 2 dead 20 15 \
    "allreduce #2 (1000 x f32) failed on rank 0: rank 1 (pid"
# The launcher stops the job at the first failure: either survivor may speak.
job "a dead rank is named on 3 ranks" 3 dead 20 15 \
    ": rank 1 (pid" "exited while rank" "waited for it in gloo allreduce #2"
# Here too either survivor may time out first (rank 2 does on a busy
# machine): both name the rank that never arrived.
job "a silent rank is named on 3 ranks" 3 timeout 2 15 \
    "allreduce #2 (1000 x f32) timed out after 2.0 s on rank " ": ranks 1 never arrived"
done_testing

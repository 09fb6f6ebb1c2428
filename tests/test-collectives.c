/* SPDX-License-Identifier: MIT */
/* tests/test-collectives.c - collectives across real processes, with TAP.
 *
 * Run without arguments it is the driver: for each case it starts a job of
 * N ranks of this same program (`--worker CASE`), through `$TANDEM run
 * --nproc-per-node N` when the launcher is there (TDM_TEST_LAUNCHER=self
 * forces the test's own spawner: a store served here and N forked ranks),
 * and checks the job's exit status and output. The worker side checks every
 * op on integer-valued data, where any correct implementation gives exact
 * results, for odd sizes and zero length; the failure cases check that a
 * mismatched call, a skipped call, a silent rank and a dead rank each stop
 * the job with a message naming the rank. The collectives under test are
 * TDM_TEST_COLLECTIVES (comma list), by default every one registered.
 *
 * TDM_TEST_DEVICE=SPEC (e.g. cuda:0) runs the ranks' tensors on that device
 * instead of ref:0, with the cases one device allows (tests/gpu/run):
 * every op in one process and at world 1; for shm and gloo every op staged
 * through host memory at world 2 (both ranks on the one device), a rank
 * that never arrives and a dead rank; for nccl, which refuses two ranks on
 * one GPU, an operation held back by the test hook TDM_TEST_NCCL_STALL,
 * which must time out, abort the communicator and refuse the next call.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <tandem/tandem.h>

#include "collectives-jobs.h"

/* ==================== worker side ==================== */

typedef struct {
    TdmComm *comm;
    TdmStore *store;
    TdmDevice *dev;
    int rank, world;
} Worker;

/* The device every rank's tensors live on. */
static const char *test_device(void)
{
    const char *spec = g_getenv("TDM_TEST_DEVICE");
    return spec != NULL && spec[0] != '\0' ? spec : "ref:0";
}

static void die(const Worker *w, const char *what, GError *error)
{
    fprintf(stderr, "rank %d: %s: %s\n", w->rank, what, error != NULL ? error->message : "");
    fflush(stderr);
    _exit(1);
}

static float val_f32(int r, int64_t i)
{
    return (float)((i * 7 + r * 13) % 1000) - 300.0f;
}

static int32_t val_i32(int r, int64_t i)
{
    return (int32_t)((i * 31 + (int64_t)r * 1000003) % 200000) - 100000;
}

static int64_t val_i64(int r, int64_t i)
{
    return i * 1000000007LL - (int64_t)r * 3;
}

static TdmTensor *tensor_1d(Worker *w, TdmDType dtype, int64_t n)
{
    GError *error = NULL;
    TdmTensor *t = tdm_tensor_new(w->dev, dtype, 1, &n, &error);
    if (t == NULL) {
        die(w, "tensor_new", error);
    }
    return t;
}

static void put(Worker *w, TdmTensor *t, const void *host)
{
    GError *error = NULL;
    if (tdm_tensor_nbytes(t) > 0 && !tdm_tensor_write(t, host, &error)) {
        die(w, "tensor_write", error);
    }
}

static void *get(Worker *w, TdmTensor *t)
{
    GError *error = NULL;
    void *host = g_malloc0(tdm_tensor_nbytes(t) + 1);
    if (tdm_tensor_nbytes(t) > 0 && !tdm_tensor_read(t, host, &error)) {
        die(w, "tensor_read", error);
    }
    return host;
}

#define CHECK_EQ(w, what, n, got, expect_expr, fmt)                                                \
    do {                                                                                           \
        for (int64_t i_ = 0; i_ < (n); i_++) {                                                     \
            if ((got)[i_] != (expect_expr(i_))) {                                                  \
                fprintf(stderr,                                                                    \
                        "rank %d: %s (n=%" G_GINT64_FORMAT "): element %" G_GINT64_FORMAT          \
                        " is " fmt ", expected " fmt "\n",                                         \
                        (w)->rank, what, (int64_t)(n), i_, (got)[i_], (expect_expr(i_)));          \
                _exit(1);                                                                          \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* `error` by address: read after `ok` is computed (argument order is not
 * defined in C, so passing the GError itself could read it too early). */
static void ok_or_die(Worker *w, const char *what, gboolean ok, GError **error)
{
    if (!ok) {
        die(w, what, *error);
    }
}

static void check_allreduce_f32(Worker *w, int64_t n, TdmReduceOp op)
{
    TdmTensor *t = tensor_1d(w, TDM_DTYPE_F32, n);
    float *host = g_new(float, n + 1);
    float *expect = g_new(float, n + 1);
    for (int64_t i = 0; i < n; i++) {
        host[i] = val_f32(w->rank, i);
        float acc = val_f32(0, i);
        for (int r = 1; r < w->world; r++) {
            float v = val_f32(r, i);
            acc = op == TDM_REDUCE_MAX ? MAX(acc, v) : op == TDM_REDUCE_MIN ? MIN(acc, v) : acc + v;
        }
        expect[i] = op == TDM_REDUCE_AVG ? acc / (float)w->world : acc;
    }
    put(w, t, host);
    GError *error = NULL;
    ok_or_die(w, "allreduce", tdm_comm_allreduce(w->comm, t, op, &error), &error);
    float *got = get(w, t);
    g_autofree char *what = g_strdup_printf("allreduce f32 %s", tdm_reduce_op_name(op));
#define EXPECT(i) expect[i]
    CHECK_EQ(w, what, n, got, EXPECT, "%g");
#undef EXPECT
    g_free(got);
    g_free(host);
    g_free(expect);
    tdm_tensor_unref(t);
}

static void check_allreduce_int(Worker *w, int64_t n)
{
    TdmTensor *a = tensor_1d(w, TDM_DTYPE_I32, n);
    TdmTensor *b = tensor_1d(w, TDM_DTYPE_I64, n);
    int32_t *ha = g_new(int32_t, n + 1);
    int64_t *hb = g_new(int64_t, n + 1);
    for (int64_t i = 0; i < n; i++) {
        ha[i] = val_i32(w->rank, i);
        hb[i] = val_i64(w->rank, i);
    }
    put(w, a, ha);
    put(w, b, hb);
    GError *error = NULL;
    ok_or_die(w, "allreduce i32 max", tdm_comm_allreduce(w->comm, a, TDM_REDUCE_MAX, &error),
              &error);
    ok_or_die(w, "allreduce i64 sum", tdm_comm_allreduce(w->comm, b, TDM_REDUCE_SUM, &error),
              &error);
    int32_t *ga = get(w, a);
    int64_t *gb = get(w, b);
#define EXPECT_MAX(i)                                                                              \
    ({                                                                                             \
        int32_t m_ = val_i32(0, i);                                                                \
        for (int r_ = 1; r_ < w->world; r_++)                                                      \
            m_ = MAX(m_, val_i32(r_, i));                                                          \
        m_;                                                                                        \
    })
#define EXPECT_SUM(i)                                                                              \
    ({                                                                                             \
        int64_t s_ = 0;                                                                            \
        for (int r_ = 0; r_ < w->world; r_++)                                                      \
            s_ += val_i64(r_, i);                                                                  \
        s_;                                                                                        \
    })
    CHECK_EQ(w, "allreduce i32 max", n, ga, EXPECT_MAX, "%d");
    CHECK_EQ(w, "allreduce i64 sum", n, gb, EXPECT_SUM, "%" G_GINT64_FORMAT);
#undef EXPECT_MAX
#undef EXPECT_SUM
    g_free(ga);
    g_free(gb);
    g_free(ha);
    g_free(hb);
    tdm_tensor_unref(a);
    tdm_tensor_unref(b);
}

static void check_broadcast(Worker *w, int64_t n, int root)
{
    TdmTensor *t = tensor_1d(w, TDM_DTYPE_F32, n);
    float *host = g_new(float, n + 1);
    for (int64_t i = 0; i < n; i++) {
        host[i] = w->rank == root ? val_f32(root, i) : -1.0f;
    }
    put(w, t, host);
    GError *error = NULL;
    ok_or_die(w, "broadcast", tdm_comm_broadcast(w->comm, t, root, &error), &error);
    float *got = get(w, t);
#define EXPECT(i) val_f32(root, i)
    CHECK_EQ(w, "broadcast f32", n, got, EXPECT, "%g");
#undef EXPECT
    g_free(got);
    g_free(host);
    tdm_tensor_unref(t);
}

static void check_allgather(Worker *w, int64_t n, gboolean in_place)
{
    int64_t total = n * w->world;
    TdmTensor *out = tensor_1d(w, TDM_DTYPE_F32, total);
    GError *error = NULL;
    TdmTensor *in = in_place ? tdm_tensor_new_view(out, (size_t)(w->rank * n) * sizeof(float),
                                                   TDM_DTYPE_F32, 1, &n, &error)
                             : tensor_1d(w, TDM_DTYPE_F32, n);
    if (in == NULL) {
        die(w, "tensor_new_view", error);
    }
    float *host = g_new(float, total + 1);
    /* The whole output poisoned first (in place: then this rank's part
     * written over it), so an element the op leaves unwritten shows. */
    for (int64_t i = 0; i < total; i++) {
        host[i] = -7777.5f;
    }
    put(w, out, host);
    for (int64_t i = 0; i < n; i++) {
        host[i] = val_f32(w->rank, i);
    }
    put(w, in, host);
    ok_or_die(w, "allgather", tdm_comm_allgather(w->comm, in, out, &error), &error);
    float *got = get(w, out);
#define EXPECT(i) val_f32((int)((i) / n), (i) % n)
    CHECK_EQ(w, in_place ? "allgather f32 in place" : "allgather f32", total, got, EXPECT, "%g");
#undef EXPECT
    g_free(got);
    g_free(host);
    tdm_tensor_unref(in);
    tdm_tensor_unref(out);
}

/* in_place: out is this rank's part of in (ZeRO's gradient shard). */
static void check_reduce_scatter(Worker *w, int64_t n, TdmReduceOp op, gboolean in_place)
{
    int64_t total = n * w->world;
    TdmTensor *in = tensor_1d(w, TDM_DTYPE_F32, total);
    GError *view_error = NULL;
    TdmTensor *out = in_place ? tdm_tensor_new_view(in, (size_t)(w->rank * n) * sizeof(float),
                                                    TDM_DTYPE_F32, 1, &n, &view_error)
                              : tensor_1d(w, TDM_DTYPE_F32, n);
    if (out == NULL) {
        die(w, "tensor_new_view", view_error);
    }
    float *host = g_new(float, total + 1);
    if (!in_place) {
        /* Poisoned: an element the op leaves unwritten shows. */
        for (int64_t i = 0; i < n; i++) {
            host[i] = -7777.5f;
        }
        put(w, out, host);
    }
    for (int64_t i = 0; i < total; i++) {
        host[i] = val_f32(w->rank, i);
    }
    put(w, in, host);
    GError *error = NULL;
    ok_or_die(w, "reduce_scatter", tdm_comm_reduce_scatter(w->comm, in, out, op, &error), &error);
    float *got = get(w, out);
    const int64_t base = (int64_t)w->rank * n;
#define EXPECT(i)                                                                                  \
    ({                                                                                             \
        float a_ = val_f32(0, base + (i));                                                         \
        for (int r_ = 1; r_ < w->world; r_++) {                                                    \
            float v_ = val_f32(r_, base + (i));                                                    \
            a_ = op == TDM_REDUCE_MAX ? MAX(a_, v_) : a_ + v_;                                     \
        }                                                                                          \
        op == TDM_REDUCE_AVG ? a_ / (float)w->world : a_;                                          \
    })
    g_autofree char *what =
        g_strdup_printf("reduce_scatter %s%s", tdm_reduce_op_name(op), in_place ? " in place" : "");
    CHECK_EQ(w, what, n, got, EXPECT, "%g");
#undef EXPECT
    g_free(got);
    g_free(host);
    tdm_tensor_unref(in);
    tdm_tensor_unref(out);
}

/* Several operations in flight at once, waited in reverse order. */
static void check_async(Worker *w)
{
    enum { K = 4 };
    const int64_t n = 4099;
    TdmTensor *t[K];
    TdmCommWork *work[K];
    float *host = g_new(float, n);
    GError *error = NULL;
    for (int k = 0; k < K; k++) {
        t[k] = tensor_1d(w, TDM_DTYPE_F32, n);
        for (int64_t i = 0; i < n; i++) {
            host[i] = val_f32(w->rank, i + k);
        }
        put(w, t[k], host);
        work[k] = tdm_comm_allreduce_async(w->comm, t[k], TDM_REDUCE_SUM, &error);
        if (work[k] == NULL) {
            die(w, "allreduce_async", error);
        }
    }
    for (int k = K - 1; k >= 0; k--) {
        ok_or_die(w, "wait", tdm_comm_wait(w->comm, work[k], &error), &error);
    }
    for (int k = 0; k < K; k++) {
        float *got = get(w, t[k]);
#define EXPECT(i)                                                                                  \
    ({                                                                                             \
        float s_ = 0;                                                                              \
        for (int r_ = 0; r_ < w->world; r_++)                                                      \
            s_ += val_f32(r_, (i) + k);                                                            \
        s_;                                                                                        \
    })
        CHECK_EQ(w, "async allreduce", n, got, EXPECT, "%g");
#undef EXPECT
        g_free(got);
        tdm_tensor_unref(t[k]);
    }
    g_free(host);
}

/* A second communicator of the same job works beside the first. */
static void check_two_comms(Worker *w)
{
    GError *error = NULL;
    TdmDistEnv env = {.rank = w->rank,
                      .world_size = w->world,
                      .local_rank = w->rank,
                      .local_world_size = w->world};
    TdmComm *other =
        tdm_comm_new(g_getenv("TDM_TEST_COLLECTIVE"), w->store, &env, w->dev, NULL, &error);
    if (other == NULL) {
        die(w, "second comm_new", error);
    }
    const int64_t n = 333;
    TdmTensor *a = tensor_1d(w, TDM_DTYPE_I32, n);
    TdmTensor *b = tensor_1d(w, TDM_DTYPE_I32, n);
    int32_t *host = g_new(int32_t, n);
    for (int64_t i = 0; i < n; i++) {
        host[i] = val_i32(w->rank, i);
    }
    put(w, a, host);
    put(w, b, host);
    TdmCommWork *wa = tdm_comm_allreduce_async(w->comm, a, TDM_REDUCE_SUM, &error);
    TdmCommWork *wb =
        wa != NULL ? tdm_comm_allreduce_async(other, b, TDM_REDUCE_MIN, &error) : NULL;
    if (wb == NULL) {
        die(w, "two comms", error);
    }
    ok_or_die(w, "wait other", tdm_comm_wait(other, wb, &error), &error);
    ok_or_die(w, "wait first", tdm_comm_wait(w->comm, wa, &error), &error);
    int32_t *ga = get(w, a);
    int32_t *gb = get(w, b);
#define EXPECT_SUM(i)                                                                              \
    ({                                                                                             \
        int32_t s_ = 0;                                                                            \
        for (int r_ = 0; r_ < w->world; r_++)                                                      \
            s_ += val_i32(r_, i);                                                                  \
        s_;                                                                                        \
    })
#define EXPECT_MIN(i)                                                                              \
    ({                                                                                             \
        int32_t m_ = val_i32(0, i);                                                                \
        for (int r_ = 1; r_ < w->world; r_++)                                                      \
            m_ = MIN(m_, val_i32(r_, i));                                                          \
        m_;                                                                                        \
    })
    CHECK_EQ(w, "first comm allreduce i32 sum", n, ga, EXPECT_SUM, "%d");
    CHECK_EQ(w, "second comm allreduce i32 min", n, gb, EXPECT_MIN, "%d");
#undef EXPECT_SUM
#undef EXPECT_MIN
    g_free(ga);
    g_free(gb);
    g_free(host);
    tdm_tensor_unref(a);
    tdm_tensor_unref(b);
    tdm_comm_free(other);
}

/* Bad arguments fail on every rank alike, name the problem, and leave the
 * communicator usable. */
static void check_refusals(Worker *w)
{
    GError *error = NULL;
    TdmTensor *bytes = tensor_1d(w, TDM_DTYPE_U8, 16);
    TdmTensor *small = tensor_1d(w, TDM_DTYPE_F32, 3);
    TdmTensor *wrong = tensor_1d(w, TDM_DTYPE_F32, 3 * w->world + 1);
    if (tdm_comm_allreduce(w->comm, bytes, TDM_REDUCE_SUM, &error) || error == NULL ||
        strstr(error->message, "u8") == NULL) {
        fprintf(stderr, "rank %d: u8 allreduce: %s\n", w->rank,
                error ? error->message : "no error");
        _exit(1);
    }
    g_clear_error(&error);
    if (tdm_comm_allgather(w->comm, small, wrong, &error) ||
        !g_error_matches(error, TDM_ERROR, TDM_ERROR_SHAPE) ||
        strstr(error->message, "[") == NULL) {
        fprintf(stderr, "rank %d: bad allgather: %s\n", w->rank,
                error ? error->message : "no error");
        _exit(1);
    }
    g_clear_error(&error);
    ok_or_die(w, "broadcast u8 after refusals", tdm_comm_broadcast(w->comm, bytes, 0, &error),
              &error);
    check_allreduce_f32(w, 5, TDM_REDUCE_SUM);
    tdm_tensor_unref(bytes);
    tdm_tensor_unref(small);
    tdm_tensor_unref(wrong);
}

static void worker_ops(Worker *w)
{
    static const int64_t sizes[] = {0, 1, 7, 1023, 1000003};
    GError *error = NULL;
    const char *want = g_getenv("TDM_TEST_EXPECT_FEATURE");
    if (want != NULL && strcmp(tdm_feature_get_name(w->comm->feature), want) != 0) {
        fprintf(stderr, "rank %d: picked collective '%s', expected '%s'\n", w->rank,
                tdm_feature_get_name(w->comm->feature), want);
        _exit(1);
    }
    /* TDM_TEST_EXPECT_STAGED=1: the device claims memory the host cannot
     * reach (TDM_REF_NOT_HOST), so the core must stage every op. */
    const char *staged = g_getenv("TDM_TEST_EXPECT_STAGED");
    if (staged != NULL && tdm_comm_is_staged(w->comm) != (strcmp(staged, "1") == 0)) {
        fprintf(stderr, "rank %d: collective '%s' on %s (host memory: %s) is %sstaged\n", w->rank,
                tdm_feature_get_name(w->comm->feature), w->dev->name,
                tdm_device_host_accessible(w->dev) ? "yes" : "no",
                tdm_comm_is_staged(w->comm) ? "" : "not ");
        _exit(1);
    }
    for (gsize s = 0; s < G_N_ELEMENTS(sizes); s++) {
        int64_t n = sizes[s];
        for (int op = TDM_REDUCE_SUM; op <= TDM_REDUCE_MIN; op++) {
            check_allreduce_f32(w, n, (TdmReduceOp)op);
        }
        check_allreduce_int(w, n);
        check_broadcast(w, n, 0);
        check_broadcast(w, n, w->world - 1);
        check_allgather(w, n, FALSE);
        check_allgather(w, n, TRUE);
        check_reduce_scatter(w, n, TDM_REDUCE_SUM, FALSE);
        check_reduce_scatter(w, n, TDM_REDUCE_SUM, TRUE);
        check_reduce_scatter(w, n, TDM_REDUCE_MAX, FALSE);
        if ((w->world & (w->world - 1)) == 0) {
            /* exact only where the division by the world is (1, 2, 4) */
            check_reduce_scatter(w, n, TDM_REDUCE_AVG, FALSE);
        }
        ok_or_die(w, "barrier", tdm_comm_barrier(w->comm, &error), &error);
    }
    check_async(w);
    check_two_comms(w);
    check_refusals(w);
}

/* Every rank calls allreduce except one, which calls something else. */
static void worker_mismatch(Worker *w)
{
    const int odd = w->world - 1;
    TdmTensor *t = tensor_1d(w, TDM_DTYPE_F32, w->rank == odd ? 1000 : 1024);
    GError *error = NULL;
    gboolean ok = w->rank == odd && g_getenv("TDM_TEST_MISMATCH_BROADCAST") != NULL
                      ? tdm_comm_broadcast(w->comm, t, 0, &error)
                      : tdm_comm_allreduce(w->comm, t, TDM_REDUCE_SUM, &error);
    if (!ok) {
        die(w, "error", error);
    }
    tdm_tensor_unref(t);
}

/* Rank 1 skips the second allreduce: calls a barrier instead ("skip") or
 * nothing and waits ("silent", "timeout") or exits ("dead"). */
static void worker_skip(Worker *w, const char *mode)
{
    TdmTensor *t = tensor_1d(w, TDM_DTYPE_F32, 1000);
    GError *error = NULL;
    ok_or_die(w, "first allreduce", tdm_comm_allreduce(w->comm, t, TDM_REDUCE_SUM, &error), &error);
    gboolean ok = TRUE;
    if (w->rank != 1) {
        ok = tdm_comm_allreduce(w->comm, t, TDM_REDUCE_SUM, &error);
        if (!ok) {
            fprintf(stderr, "rank %d: error: %s\n", w->rank, error->message);
            fflush(stderr);
        }
        /* Let the skipping rank go once this rank has its error. */
        tdm_store_set(w->store, "test/release", "1", 1, NULL);
    } else if (strcmp(mode, "skip") == 0) {
        ok = tdm_comm_barrier(w->comm, &error);
        if (!ok) {
            fprintf(stderr, "rank %d: error: %s\n", w->rank, error->message);
        }
    } else if (strcmp(mode, "dead") == 0) {
        _exit(0);
    } else {
        /* Stay alive (a dead rank is reported differently) until released. */
        for (int tries = 0; tries < 5; tries++) {
            GBytes *b = tdm_store_get(w->store, "test/release", NULL);
            if (b != NULL) {
                g_bytes_unref(b);
                break;
            }
        }
        _exit(0); /* skip the communicator's teardown: it is not in step */
    }
    tdm_tensor_unref(t);
    if (!ok) {
        _exit(1);
    }
}

/* One rank alone (nccl at world 1): the second allreduce is held back by
 * TDM_TEST_NCCL_STALL=2 and must time out; the next call must be refused
 * at once, since the communicator was aborted. */
static void worker_stall(Worker *w)
{
    TdmTensor *t = tensor_1d(w, TDM_DTYPE_F32, 1000);
    GError *error = NULL;
    ok_or_die(w, "first allreduce", tdm_comm_allreduce(w->comm, t, TDM_REDUCE_SUM, &error), &error);
    if (tdm_comm_allreduce(w->comm, t, TDM_REDUCE_SUM, &error)) {
        fprintf(stderr, "rank %d: the held-back allreduce completed\n", w->rank);
        _exit(1);
    }
    fprintf(stderr, "rank %d: error: %s\n", w->rank, error->message);
    g_clear_error(&error);
    double t0 = tdm_time_now();
    if (tdm_comm_allreduce(w->comm, t, TDM_REDUCE_SUM, &error)) {
        fprintf(stderr, "rank %d: an allreduce after the abort completed\n", w->rank);
        _exit(1);
    }
    fprintf(stderr, "rank %d: next call refused in %.1f s: %s\n", w->rank, tdm_time_now() - t0,
            error->message);
    g_clear_error(&error);
    _exit(1); /* the job failed, as a real one would */
}

static int worker_main(const char *mode)
{
    Worker w = {0};
    TdmDistEnv env;
    GError *error = NULL;
    if (!tdm_dist_env_read(&env, &error)) {
        die(&w, "dist env", error);
    }
    w.rank = env.rank;
    w.world = env.world_size;
    w.store = tdm_store_connect_from_env(&error);
    if (w.store == NULL) {
        die(&w, "store", error);
    }
    w.dev = tdm_device_get(test_device(), &error);
    if (w.dev == NULL) {
        die(&w, "device", error);
    }
    TdmCommOptions opts;
    tdm_comm_options_init(&opts);
    w.comm = tdm_comm_new(g_getenv("TDM_TEST_COLLECTIVE"), w.store, &env, w.dev, &opts, &error);
    if (w.comm == NULL) {
        die(&w, "comm_new", error);
    }
    if (strcmp(mode, "ops") == 0) {
        worker_ops(&w);
    } else if (strcmp(mode, "mismatch") == 0) {
        worker_mismatch(&w);
    } else if (strcmp(mode, "stall") == 0) {
        worker_stall(&w);
    } else {
        worker_skip(&w, mode);
    }
    tdm_comm_free(w.comm);
    tdm_store_free(w.store);
    tdm_dist_env_clear(&env);
    return 0;
}

/* ==================== driver side ==================== */

static int n_tests = 0, n_failed = 0;

static void report(gboolean ok, const char *name, const JobResult *res, const char *why)
{
    n_tests++;
    printf("%sok %d - %s (%.1f s)\n", ok ? "" : "not ", n_tests, name, res->seconds);
    if (!ok || g_getenv("TDM_TEST_VERBOSE") != NULL) {
        n_failed += !ok;
        printf("# %s\n", ok ? "output:" : why);
        g_auto(GStrv) lines = g_strsplit(res->output != NULL ? res->output : "", "\n", 40);
        for (int i = 0; lines[i] != NULL; i++) {
            printf("#   %s\n", lines[i]);
        }
    }
    fflush(stdout);
}

/* Run a job; `expect` NULL: it must succeed; else it must fail with every
 * one of the NULL-terminated `expect` strings in its output. */
static void job(const char *name, const char *collective, int world, const char *mode,
                const char *const *expect, double limit, ...)
{
    GPtrArray *extra = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(extra, g_strdup_printf("TDM_TEST_COLLECTIVE=%s", collective));
    va_list ap;
    va_start(ap, limit);
    for (const char *kv = va_arg(ap, const char *); kv != NULL; kv = va_arg(ap, const char *)) {
        g_ptr_array_add(extra, g_strdup(kv));
    }
    va_end(ap);
    g_ptr_array_add(extra, NULL);
    JobResult res = tdm_test_use_launcher()
                        ? tdm_test_run_with_launcher(world, mode, (char **)extra->pdata, limit)
                        : tdm_test_run_self(world, mode, (char **)extra->pdata, limit);
    g_autofree char *title =
        g_strdup_printf("%s: %s on %d ranks", *collective ? collective : "auto", name, world);
    if (expect == NULL) {
        report(res.status == 0, title, &res, "the job failed");
    } else {
        gboolean ok = res.status != 0;
        const char *missing = NULL;
        for (int i = 0; expect[i] != NULL && ok; i++) {
            if (strstr(res.output, expect[i]) == NULL) {
                ok = FALSE;
                missing = expect[i];
            }
        }
        g_autofree char *why = missing != NULL ? g_strdup_printf("output lacks \"%s\"", missing)
                                               : g_strdup("the job should have failed");
        report(ok, title, &res, why);
    }
    g_free(res.output);
    g_ptr_array_unref(extra);
}

static void driver_run(const char *coll)
{
    /* Small slots make large tensors take many steps. */
    job("every op, sizes 0..1000003", coll, 2, "ops", NULL, 60, NULL);
    job("every op, sizes 0..1000003, 64 KiB slots", coll, 3, "ops", NULL, 60,
        "TDM_SHM_SLOT_BYTES=65536", NULL);
    job("every op, sizes 0..1000003", coll, 4, "ops", NULL, 60, NULL);

    const char *mismatch_dbg[] = {"collective mismatch at #1: rank 0 called allreduce(1024 x f32, "
                                  "sum), rank 1 called broadcast(1000 x f32, root 0)",
                                  NULL};
    job("debug check names a mismatched call", coll, 2, "mismatch", mismatch_dbg, 30,
        "TDM_DEBUG=collectives", "TDM_TIMEOUT=5", "TDM_TEST_MISMATCH_BROADCAST=1", NULL);
    /* shm and gloo compare every rank's call at every step, even without the
     * debug check, and notice a peer process that is gone. */
    const gboolean checks_calls = strcmp(coll, "shm") == 0 || strcmp(coll, "gloo") == 0;
    const char *mismatch[] = {"collective mismatch at #1", "rank 2 called allreduce(1000 x f32",
                              NULL};
    if (checks_calls) {
        job("mismatched count stops the job", coll, 3, "mismatch", mismatch, 30, "TDM_TIMEOUT=5",
            NULL);
    }

    const char *skip[] = {"collective mismatch at #2", "rank 1 called barrier()", NULL};
    job("debug check names a rank that skips a call", coll, 3, "skip", skip, 30,
        "TDM_DEBUG=collectives", "TDM_TIMEOUT=5", NULL);
    const char *silent[] = {"collective #2 allreduce(1000 x f32, sum) on rank 0: ranks 1 never "
                            "issued it within 2.0 s; rank 1's last call was #1",
                            NULL};
    job("debug check names a silent rank", coll, 2, "silent", silent, 30, "TDM_DEBUG=collectives",
        "TDM_TIMEOUT=2", NULL);
    const char *timeout[] = {"allreduce #2 (1000 x f32) timed out after 2.0 s on rank 0: ranks 1 "
                             "never arrived",
                             NULL};
    job("timeout names op, sequence number and missing rank", coll, 2, "timeout", timeout, 30,
        "TDM_TIMEOUT=2", NULL);
    const char *dead[] = {"allreduce #2 (1000 x f32) failed on rank 0: rank 1 (pid", NULL};
    if (checks_calls) {
        job("a dead rank is named", coll, 2, "dead", dead, 30, "TDM_TIMEOUT=20", NULL);
    }
}

/* The child of single_process: a device and a communicator of its own,
 * every op; exit 2 when there is no communicator, 1 on a failed check. */
static G_GNUC_NORETURN void single_process_child(const char *coll)
{
    GError *error = NULL;
    TdmDistEnv env = {.rank = 0, .world_size = 1, .local_world_size = 1, .source = "none"};
    Worker w = {.rank = 0, .world = 1};
    w.dev = tdm_device_get(test_device(), &error);
    w.comm = w.dev != NULL ? tdm_comm_new(coll, NULL, &env, w.dev, NULL, &error) : NULL;
    if (w.comm == NULL) {
        fprintf(stderr, "%s\n", error->message);
        fflush(stderr);
        _exit(2);
    }
    check_allreduce_f32(&w, 1023, TDM_REDUCE_AVG);
    check_allreduce_int(&w, 7);
    check_broadcast(&w, 5, 0);
    check_allgather(&w, 9, FALSE);
    check_reduce_scatter(&w, 11, TDM_REDUCE_SUM, FALSE);
    check_reduce_scatter(&w, 100003, TDM_REDUCE_AVG, FALSE);
    check_async(&w);
    tdm_comm_free(w.comm);
    _exit(0);
}

/* One process, no store: every op is local and exact. The checks _exit on
 * a mismatch, so they run in a child, which also opens the device: CUDA
 * set up before a fork cannot be used in the child. */
static void single_process(const char *coll)
{
    JobResult res = {.output = NULL};
    g_autofree char *title = g_strdup_printf("%s: every op in a single process", coll);
    int fds[2];
    if (pipe(fds) != 0) {
        res.output = g_strdup_printf("pipe: %s", g_strerror(errno));
        report(FALSE, title, &res, "no child");
        g_free(res.output);
        return;
    }
    const double t0 = tdm_time_now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        single_process_child(coll);
    }
    close(fds[1]);
    GString *out = g_string_new(NULL);
    char buf[4096];
    ssize_t got;
    while ((got = read(fds[0], buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR)) {
        if (got > 0) {
            g_string_append_len(out, buf, got);
        }
    }
    close(fds[0]);
    int status = 1;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        g_string_append_printf(out, "fork or waitpid: %s", g_strerror(errno));
        status = 1;
    }
    res.output = g_string_free(out, FALSE);
    res.seconds = tdm_time_now() - t0;
    const gboolean no_comm = WIFEXITED(status) && WEXITSTATUS(status) == 2;
    report(WIFEXITED(status) && WEXITSTATUS(status) == 0, title, &res,
           no_comm ? "no communicator" : "a check failed");
    g_free(res.output);
}

/* The cases one device allows (TDM_TEST_DEVICE set): see the top. */
static void driver_device(const char *coll)
{
    single_process(coll);
    job("every op at world 1", coll, 1, "ops", NULL, 60, NULL);
    if (strcmp(coll, "shm") == 0 || strcmp(coll, "gloo") == 0) {
        job("every op staged through host memory, 2 ranks on one device", coll, 2, "ops", NULL, 90,
            "TDM_TEST_EXPECT_STAGED=1", NULL);
        const char *timeout[] = {"allreduce #2 (1000 x f32) timed out after 2.0 s on rank 0: "
                                 "ranks 1 never arrived",
                                 NULL};
        job("staged: timeout names op, sequence number and missing rank", coll, 2, "timeout",
            timeout, 30, "TDM_TIMEOUT=2", NULL);
        if (strcmp(coll, "shm") == 0) {
            const char *dead[] = {"allreduce #2 (1000 x f32) failed on rank 0: rank 1 (pid", NULL};
            job("staged: a dead rank is named", coll, 2, "dead", dead, 30, "TDM_TIMEOUT=20", NULL);
        }
    }
#ifdef TDM_ENABLE_TEST_HOOKS
    if (strcmp(coll, "nccl") == 0) {
        const char *stall[] = {"allreduce #2 (1000 x f32) timed out after 2.0 s on rank 0",
                               "nccl: rank 0: aborting the communicator: allreduce #2",
                               "next call refused in 0.", NULL};
        job("an operation held back times out and aborts the communicator", coll, 1, "stall", stall,
            14, "TDM_TIMEOUT=2", "TDM_TEST_NCCL_STALL=2", NULL);
    }
#endif
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--worker") == 0) {
        return worker_main(argv[2]);
    }
    /* Every collective plugin there is, unless told which. */
    const char *list = g_getenv("TDM_TEST_COLLECTIVES");
    g_auto(GStrv) colls = NULL;
    if (list != NULL && *list) {
        colls = g_strsplit(list, ",", -1);
    } else {
        tdm_registry_init(NULL);
        GPtrArray *features = tdm_registry_list_features(TDM_FEATURE_COLLECTIVE);
        GStrvBuilder *names = g_strv_builder_new();
        for (guint i = 0; i < features->len; i++) {
            TdmFeature *f = g_ptr_array_index(features, i);
            if (tdm_feature_is_available(f, NULL)) {
                g_strv_builder_add(names, tdm_feature_get_name(f));
            }
        }
        colls = g_strv_builder_end(names);
        g_strv_builder_unref(names);
        g_ptr_array_unref(features);
    }
    if (g_getenv("TDM_TEST_DEVICE") != NULL) {
        for (int i = 0; colls[i] != NULL; i++) {
            driver_device(colls[i]);
        }
        printf("1..%d\n", n_tests);
        return n_failed > 0 ? 1 : 0;
    }
    for (int i = 0; colls[i] != NULL; i++) {
        single_process(colls[i]);
        driver_run(colls[i]);
    }
    /* Automatic selection prefers shm for host tensors on one host. */
    if (g_strv_contains((const char *const *)colls, "shm")) {
        job("automatic selection picks shm", "", 2, "ops", NULL, 60, "TDM_TEST_EXPECT_FEATURE=shm",
            "TDM_TEST_EXPECT_STAGED=0", "TDM_COLLECTIVE=", NULL);
    }
#ifdef TDM_ENABLE_TEST_HOOKS
    /* Host staging: ref devices that claim memory the host cannot reach, as
     * cuda's, make shm and gloo run every op on staged host copies. */
    for (int i = 0; colls[i] != NULL; i++) {
        if (strcmp(colls[i], "shm") == 0 || strcmp(colls[i], "gloo") == 0) {
            job("every op staged through host memory", colls[i], 2, "ops", NULL, 60,
                "TDM_REF_NOT_HOST=1", "TDM_TEST_EXPECT_STAGED=1", NULL);
        }
    }
    if (g_strv_contains((const char *const *)colls, "shm")) {
        job("automatic selection stages through shm", "", 2, "ops", NULL, 60, "TDM_REF_NOT_HOST=1",
            "TDM_TEST_EXPECT_FEATURE=shm", "TDM_TEST_EXPECT_STAGED=1", "TDM_COLLECTIVE=", NULL);
    }
#endif
    printf("1..%d\n", n_tests);
    return n_failed > 0 ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* tools/check-plugin-collective.c - `tandem check-plugin` on a collective:
 * every op on 2 and 3 local processes.
 *
 * The check starts `tandem run --nproc-per-node N -- tandem check-plugin
 * --worker-collective NAME FILE` (the job's store and environment as for
 * training), once per world size. Each worker makes a communicator of the
 * collective on a ref device, with the check's timeout for every wait and
 * for the rendezvous, and runs each op on tensors of several sizes (one
 * element, an odd count, more than a page) filled with small whole numbers
 * that depend on the rank and the element, so that every sum is exact in
 * f32 and the expected result is computed here without communication. A
 * worker that finds a wrong value or an error says which op, size, rank and
 * element, and exits 1; `tandem run` then stops the others. A hung op ends
 * in the communicator's timeout, and the job as a whole is bounded too.
 */
#include "config.h"

#include <string.h>
#include <sys/wait.h>

#include "check-plugin.h"

static const int64_t sizes[] = {1, 13, 4099};

/* Rank r's element i: a small whole number, so sums are exact. */
static float val(int r, int64_t i)
{
    return (float)((r * 7 + i * 3) % 11 - 5);
}

static gboolean expect(const char *op, int rank, int64_t n, const float *got, const float *want,
                       GError **error)
{
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                        "%s of %" G_GINT64_FORMAT " elements: rank %d, element %" G_GINT64_FORMAT
                        ": %g, expected %g",
                        op, n, rank, i, got[i], want[i]);
            return FALSE;
        }
    }
    return TRUE;
}

static TdmTensor *flat(TdmDevice *dev, int64_t n, const float *data, GError **error)
{
    TdmTensor *t = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, &n, error);
    if (t != NULL && data != NULL && !tdm_tensor_write(t, data, error)) {
        g_clear_pointer(&t, tdm_tensor_unref);
    }
    return t;
}

/* One reduction of every rank's val(r, i) to each element. */
static float reduce_all(TdmReduceOp op, int world, int64_t i)
{
    float acc = val(0, i);
    for (int r = 1; r < world; r++) {
        float v = val(r, i);
        acc = op == TDM_REDUCE_MAX ? MAX(acc, v) : op == TDM_REDUCE_MIN ? MIN(acc, v) : acc + v;
    }
    return op == TDM_REDUCE_AVG ? acc / (float)world : acc;
}

static gboolean run_ops(TdmComm *comm, TdmDevice *dev, int64_t n, GError **error)
{
    const int rank = comm->rank, world = comm->world;
    static const TdmReduceOp ops[] = {TDM_REDUCE_SUM, TDM_REDUCE_AVG, TDM_REDUCE_MAX,
                                      TDM_REDUCE_MIN};
    static const char *const op_names[] = {"all-reduce sum", "all-reduce avg", "all-reduce max",
                                           "all-reduce min"};
    g_autofree float *mine = g_new(float, n * world), *want = g_new(float, n * world);
    g_autofree float *got = g_new(float, n * world);
    gboolean ok = TRUE;
    for (int64_t i = 0; i < n * world; i++) {
        mine[i] = val(rank, i);
    }
    for (size_t k = 0; ok && k < G_N_ELEMENTS(ops); k++) {
        TdmTensor *t = flat(dev, n, mine, error);
        ok = t != NULL && tdm_comm_allreduce(comm, t, ops[k], error) && tdm_tensor_read(t, got, error);
        for (int64_t i = 0; ok && i < n; i++) {
            want[i] = reduce_all(ops[k], world, i);
        }
        ok = ok && expect(op_names[k], rank, n, got, want, error);
        g_clear_pointer(&t, tdm_tensor_unref);
    }
    if (ok) { /* the async form, as strategies overlap it */
        TdmTensor *t = flat(dev, n, mine, error);
        TdmCommWork *w = t != NULL ? tdm_comm_allreduce_async(comm, t, TDM_REDUCE_SUM, error) : NULL;
        ok = w != NULL && tdm_comm_wait(comm, w, error) && tdm_tensor_read(t, got, error);
        for (int64_t i = 0; ok && i < n; i++) {
            want[i] = reduce_all(TDM_REDUCE_SUM, world, i);
        }
        ok = ok && expect("async all-reduce sum", rank, n, got, want, error);
        g_clear_pointer(&t, tdm_tensor_unref);
    }
    if (ok) { /* broadcast from the last rank */
        TdmTensor *t = flat(dev, n, mine, error);
        ok = t != NULL && tdm_comm_broadcast(comm, t, world - 1, error) &&
             tdm_tensor_read(t, got, error);
        for (int64_t i = 0; ok && i < n; i++) {
            want[i] = val(world - 1, i);
        }
        ok = ok && expect("broadcast from the last rank", rank, n, got, want, error);
        g_clear_pointer(&t, tdm_tensor_unref);
    }
    if (ok) { /* all-gather: rank r's n elements at [r * n, (r + 1) * n) */
        TdmTensor *in = flat(dev, n, mine, error);
        TdmTensor *out = in != NULL ? flat(dev, n * world, NULL, error) : NULL;
        ok = out != NULL && tdm_comm_allgather(comm, in, out, error) &&
             tdm_tensor_read(out, got, error);
        for (int64_t i = 0; ok && i < n * world; i++) {
            want[i] = val((int)(i / n), i % n);
        }
        ok = ok && expect("all-gather", rank, n * world, got, want, error);
        g_clear_pointer(&in, tdm_tensor_unref);
        g_clear_pointer(&out, tdm_tensor_unref);
    }
    if (ok) { /* reduce-scatter: rank r gets the sums of [r * n, (r + 1) * n) */
        TdmTensor *in = flat(dev, n * world, mine, error);
        TdmTensor *out = in != NULL ? flat(dev, n, NULL, error) : NULL;
        ok = out != NULL && tdm_comm_reduce_scatter(comm, in, out, TDM_REDUCE_SUM, error) &&
             tdm_tensor_read(out, got, error);
        for (int64_t i = 0; ok && i < n; i++) {
            want[i] = reduce_all(TDM_REDUCE_SUM, world, (int64_t)rank * n + i);
        }
        ok = ok && expect("reduce-scatter sum", rank, n, got, want, error);
        g_clear_pointer(&in, tdm_tensor_unref);
        g_clear_pointer(&out, tdm_tensor_unref);
    }
    return ok && tdm_comm_barrier(comm, error);
}

gboolean check_worker_open(CheckWorker *w, const char *name, double timeout_s, GError **error)
{
    *w = (CheckWorker){0};
    GError *local = NULL;
    if (!tdm_dist_env_read(&w->env, &local)) {
        fprintf(stderr, "check-plugin worker: %s\n", local->message);
        g_error_free(local);
        return FALSE;
    }
    TdmCommOptions co = {.timeout_s = timeout_s};
    w->store = tdm_store_open_for_job(&w->env, &w->server, error);
    w->dev = w->store != NULL ? tdm_device_get("ref", error) : NULL;
    w->comm = w->dev != NULL ? tdm_comm_new(name, w->store, &w->env, w->dev, &co, error) : NULL;
    return TRUE;
}

int check_worker_close(CheckWorker *w, gboolean ok, GError *error)
{
    if (!ok) {
        fprintf(stderr, "check-plugin worker, rank %d of %d: %s\n", w->env.rank,
                w->env.world_size, error->message);
        g_error_free(error);
    }
    tdm_comm_free(w->comm);
    tdm_store_free(w->store);
    tdm_store_server_free(w->server);
    tdm_dist_env_clear(&w->env);
    return ok ? 0 : 1;
}

int check_collective_worker(const char *name, double timeout_s)
{
    GError *error = NULL;
    CheckWorker w;
    if (!check_worker_open(&w, name, timeout_s, &error)) {
        return 1;
    }
    gboolean ok = w.comm != NULL;
    for (size_t k = 0; ok && k < G_N_ELEMENTS(sizes); k++) {
        ok = run_ops(w.comm, w.dev, sizes[k], &error);
    }
    return check_worker_close(&w, ok, error);
}

gboolean check_spawn_job(const CheckOptions *o, int world, char **worker_args, char **out,
                         gboolean *timed_out)
{
    g_autofree char *nproc = g_strdup_printf("%d", world);
    g_autofree char *timeout = g_strdup_printf("%g", o->timeout_s);
    char *head[] = {(char *)o->self, (char *)"run", (char *)"--nproc-per-node", nproc,
                    (char *)"--", (char *)o->self, (char *)"check-plugin", (char *)"--timeout",
                    timeout};
    /* stdout and stderr together: the workers' reports; the job as a whole
     * is bounded too */
    g_autofree char *cmd = g_strdup_printf("exec 2>&1; exec timeout %d \"$@\"",
                                           (int)(o->timeout_s * 2 + 30));
    g_autoptr(GPtrArray) sh = g_ptr_array_new();
    g_ptr_array_add(sh, (char *)"/bin/sh");
    g_ptr_array_add(sh, (char *)"-c");
    g_ptr_array_add(sh, cmd);
    g_ptr_array_add(sh, (char *)"sh");
    for (gsize i = 0; i < G_N_ELEMENTS(head); i++) {
        g_ptr_array_add(sh, head[i]);
    }
    for (char **a = worker_args; *a != NULL; a++) {
        g_ptr_array_add(sh, *a);
    }
    g_ptr_array_add(sh, (char *)o->file);
    g_ptr_array_add(sh, NULL);
    char **env = g_environ_setenv(g_get_environ(), "TDM_TIMEOUT", timeout, TRUE);
    int status = 0;
    GError *error = NULL;
    *out = NULL;
    gboolean ran = g_spawn_sync(NULL, (char **)sh->pdata, env, G_SPAWN_DEFAULT, NULL, NULL, out,
                                NULL, &status, &error);
    g_strfreev(env);
    if (!ran) {
        *out = g_strdup(error->message);
        g_error_free(error);
        *timed_out = FALSE;
        return FALSE;
    }
    if (o->verbose) {
        printf("%s", *out);
    }
    *timed_out = WIFEXITED(status) && WEXITSTATUS(status) == 124;
    return g_spawn_check_wait_status(status, NULL);
}

CheckResult check_collective(const CheckOptions *o, TdmFeature *f)
{
    const char *name = tdm_feature_get_name(f);
    g_autofree char *what = g_strdup_printf("collective %s", name);
    g_autoptr(GString) done = g_string_new(NULL);
    for (int world = 2; world <= o->max_world; world++) {
        char *args[] = {(char *)"--worker-collective", (char *)name, NULL};
        g_autofree char *out = NULL;
        gboolean timed_out = FALSE;
        double t0 = tdm_time_now();
        if (!check_spawn_job(o, world, args, &out, &timed_out)) {
            return check_report(CHECK_FAIL, what, "%d processes: %s%s", world,
                                timed_out ? "the job did not finish in time (a hung op)"
                                          : "failed:\n",
                                timed_out ? "" : out);
        }
        g_string_append_printf(done, "%s%d (%.1f s)", done->len > 0 ? ", " : "", world,
                               tdm_time_now() - t0);
    }
    return check_report(CHECK_PASS, what,
                        "all-reduce sum/avg/max/min, async all-reduce, broadcast, all-gather, "
                        "reduce-scatter, barrier on 1, 13, 4099 elements, exact, on %s processes",
                        done->str);
}

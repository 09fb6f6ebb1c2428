/* SPDX-License-Identifier: MIT */
/* bench/allreduce.c - allreduce bandwidth of one Tandem collective plugin.
 *
 * `allreduce-tdm COLLECTIVE [NPROC] [MIN_BYTES] [MAX_BYTES]` serves a store,
 * starts NPROC (2) ranks of itself on this host and prints, from rank 0, one
 * line per size (powers of 4 from MIN_BYTES to MAX_BYTES, f32 sum):
 *     COLLECTIVE BYTES SECONDS_PER_CALL
 * Each size is warmed up, then timed as the median of 5 runs of enough calls
 * to move about 64 MiB (3..1000 calls), each run started after a barrier.
 * bench/allreduce turns these into algorithm and bus bandwidth (nccl-tests
 * definitions) beside PyTorch's. Not a test.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tandem/tandem.h>

#include "../tests/rank-env.h"

#define RUNS 5

static void fail(const char *what, GError *error)
{
    fprintf(stderr, "allreduce-tdm: %s: %s\n", what, error != NULL ? error->message : "");
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int worker(const char *coll, size_t min_bytes, size_t max_bytes)
{
    TdmDistEnv env;
    GError *error = NULL;
    if (!tdm_dist_env_read(&env, &error)) {
        fail("env", error);
    }
    TdmStore *store = tdm_store_connect_from_env(&error);
    TdmDevice *dev = store != NULL ? tdm_device_get("ref:0", &error) : NULL;
    if (dev == NULL) {
        fail("setup", error);
    }
    TdmComm *comm = tdm_comm_new(coll, store, &env, dev, NULL, &error);
    if (comm == NULL) {
        fail("communicator", error);
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        int64_t n = (int64_t)(bytes / sizeof(float));
        TdmTensor *t = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, &n, &error);
        if (t == NULL) {
            fail("tensor", error);
        }
        int calls = (int)CLAMP((64u << 20) / bytes, 3, 1000);
        for (int i = 0; i < 3; i++) {
            if (!tdm_comm_allreduce(comm, t, TDM_REDUCE_SUM, &error)) {
                fail("warm-up", error);
            }
        }
        double per_call[RUNS];
        for (int run = 0; run < RUNS; run++) {
            if (!tdm_comm_barrier(comm, &error)) {
                fail("barrier", error);
            }
            double t0 = tdm_time_now();
            for (int i = 0; i < calls; i++) {
                if (!tdm_comm_allreduce(comm, t, TDM_REDUCE_SUM, &error)) {
                    fail("allreduce", error);
                }
            }
            per_call[run] = (tdm_time_now() - t0) / calls;
        }
        qsort(per_call, RUNS, sizeof(double), cmp_double);
        if (env.rank == 0) {
            printf("%s %zu %.9f\n", tdm_feature_get_name(comm->feature), bytes, per_call[RUNS / 2]);
            fflush(stdout);
        }
        tdm_tensor_unref(t);
    }
    tdm_comm_free(comm);
    tdm_store_free(store);
    tdm_dist_env_clear(&env);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--worker") == 0) {
        if (argc < 5) {
            return 2;
        }
        return worker(argv[2], strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    }
    if (argc < 2) {
        fprintf(stderr, "usage: allreduce-tdm COLLECTIVE [NPROC] [MIN_BYTES] [MAX_BYTES]\n");
        return 2;
    }
    const char *coll = argv[1];
    int world = argc > 2 ? atoi(argv[2]) : 2;
    const char *min_b = argc > 3 ? argv[3] : "4096";
    const char *max_b = argc > 4 ? argv[4] : "67108864";
    if (world < 1 || world > 64) {
        fprintf(stderr, "allreduce-tdm: NPROC must be 1..64\n");
        return 2;
    }
    GError *error = NULL;
    char token[33];
    g_snprintf(token, sizeof token, "%08x%08x%08x%08x", g_random_int(), g_random_int(),
               g_random_int(), g_random_int());
    TdmStoreServer *server = tdm_store_server_new("127.0.0.1", 0, token, &error);
    if (server == NULL) {
        fail("store server", error);
    }
    g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
    pid_t pids[64];
    for (int r = 0; r < world; r++) {
        char **envp = rank_env(g_get_environ(), r, world, tdm_store_server_get_port(server), token);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char *args[] = {self, "--worker", (char *)coll, (char *)min_b, (char *)max_b, NULL};
            execve(self, args, envp);
            _exit(127);
        }
        pids[r] = pid;
        g_strfreev(envp);
    }
    int rc = 0;
    for (int r = 0; r < world; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "allreduce-tdm: rank %d failed (status %d)\n", r, status);
            rc = 1;
            for (int q = 0; q < world; q++) {
                if (q != r) {
                    kill(pids[q], SIGTERM);
                }
            }
        }
    }
    tdm_store_server_free(server);
    return rc;
}

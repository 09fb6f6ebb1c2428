/* SPDX-License-Identifier: MIT */
/* tests/test-nccl-rdzv.c - the nccl plugin's rendezvous (plugins/nccl/
 * nccl-rdzv.c) between real processes over a real store, with the
 * GPU-facing calls (unique id, PCI bus id, host name) filled by plain
 * functions: the unique-id exchange, the refusal of two ranks on one GPU
 * naming both ranks and the GPU, the waits that time out naming the rank
 * that never posted, and the ranks that never arrived at initialisation.
 * Needs no GPU, no CUDA and no NCCL. The parent serves the store; each
 * rank is this program run again with "--rank" (see child_main).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tandem/tandem.h>

#include "nccl-rdzv.h"

#define TOKEN "nccl-rdzv-test-token"

/* ---- a rank ---- */

typedef struct {
    const char *host;
    const char *bus;
    guint8 seed;
} FakeGpu;

static gboolean fake_unique_id(gpointer ctx, guint8 id[NCCL_RDZV_ID_BYTES], GError **error)
{
    (void)error;
    const FakeGpu *g = ctx;
    for (int i = 0; i < NCCL_RDZV_ID_BYTES; i++) {
        id[i] = (guint8)(g->seed + i * 7);
    }
    return TRUE;
}

static char *fake_bus_id(gpointer ctx, GError **error)
{
    (void)error;
    return g_strdup(((const FakeGpu *)ctx)->bus);
}

static char *fake_host(gpointer ctx)
{
    return g_strdup(((const FakeGpu *)ctx)->host);
}

/* argv: --rank PORT RANK WORLD TIMEOUT STEPS HOST BUS SEED, STEPS a subset of
 * "g" (check GPUs), "i" (exchange the id), "a" (arrive). Prints one line
 * per step: "gpus ok", "gpus refused: ...", "id HEX", "id error: ...". */
static int child_main(char **argv)
{
    int port = atoi(argv[2]), rank = atoi(argv[3]), world = atoi(argv[4]);
    double timeout_s = g_ascii_strtod(argv[5], NULL);
    const char *steps = argv[6];
    FakeGpu gpu = {argv[7], argv[8], (guint8)atoi(argv[9])};
    NcclRdzvSeam seam = {fake_unique_id, fake_bus_id, fake_host, &gpu};
    GError *error = NULL;
    TdmStore *store = tdm_store_connect("127.0.0.1", port, TOKEN, 30.0, &error);
    if (store == NULL) {
        printf("connect error: %s\n", error->message);
        return 1;
    }
    NcclRdzv rz;
    nccl_rdzv_init(&rz, store, rank, world, timeout_s, 0);
    for (const char *s = steps; *s != '\0'; s++) {
        if (*s == 'g') {
            char *reason = NULL;
            if (nccl_rdzv_check_gpus(&rz, &seam, &reason)) {
                printf("gpus ok\n");
            } else {
                printf("gpus refused: %s\n", reason);
                g_free(reason);
                break;
            }
        } else if (*s == 'i') {
            guint8 id[NCCL_RDZV_ID_BYTES];
            if (nccl_rdzv_exchange_id(&rz, &seam, id, &error)) {
                g_autofree char *hex =
                    g_compute_checksum_for_data(G_CHECKSUM_SHA256, id, sizeof id);
                printf("id %s\n", hex);
            } else {
                printf("id error: %s\n", error->message);
                g_clear_error(&error);
            }
        } else if (*s == 'a') {
            if (!nccl_rdzv_arrive(&rz, &error)) {
                printf("arrive error: %s\n", error->message);
                g_clear_error(&error);
            }
        }
    }
    fflush(stdout);
    nccl_rdzv_clear(&rz);
    tdm_store_free(store);
    return 0;
}

/* ---- the job ---- */

typedef struct {
    int rank;
    const char *host, *bus;
    int seed;
} RankSpec;

/* Run the ranks of `specs` at once against a store of this process; each
 * rank's output in out[i] (g_strfreev). */
static char **run_ranks(TdmStoreServer *server, int world, double timeout_s, const char *steps,
                        const RankSpec *specs, int n)
{
    g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
    g_assert_nonnull(self);
    g_autofree char *port = g_strdup_printf("%d", tdm_store_server_get_port(server));
    g_autofree char *w = g_strdup_printf("%d", world);
    char t[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_dtostr(t, sizeof t, timeout_s);
    GPid *pids = g_new0(GPid, n);
    int *fds = g_new0(int, n);
    for (int i = 0; i < n; i++) {
        g_autofree char *r = g_strdup_printf("%d", specs[i].rank);
        g_autofree char *seed = g_strdup_printf("%d", specs[i].seed);
        char *argv[] = {self,
                        "--rank",
                        port,
                        r,
                        w,
                        t,
                        (char *)steps,
                        (char *)specs[i].host,
                        (char *)specs[i].bus,
                        seed,
                        NULL};
        GError *error = NULL;
        g_assert_true(g_spawn_async_with_pipes(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                               NULL, &pids[i], NULL, &fds[i], NULL, &error));
        g_assert_no_error(error);
    }
    char **out = g_new0(char *, (gsize)n + 1);
    for (int i = 0; i < n; i++) {
        GString *s = g_string_new(NULL);
        char buf[512];
        ssize_t got;
        while ((got = read(fds[i], buf, sizeof buf)) > 0) {
            g_string_append_len(s, buf, got);
        }
        close(fds[i]);
        int status = 0;
        g_assert_cmpint(waitpid(pids[i], &status, 0), ==, pids[i]);
        g_assert_true(WIFEXITED(status));
        g_assert_cmpint(WEXITSTATUS(status), ==, 0);
        g_spawn_close_pid(pids[i]);
        out[i] = g_string_free(s, FALSE);
        g_test_message("rank %d: %s", specs[i].rank, out[i]);
    }
    g_free(pids);
    g_free(fds);
    return out;
}

static TdmStoreServer *server_new(void)
{
    GError *error = NULL;
    TdmStoreServer *server = tdm_store_server_new(NULL, 0, TOKEN, &error);
    g_assert_no_error(error);
    return server;
}

static char *expected_id_hex(int seed)
{
    FakeGpu g = {"h", "b", (guint8)seed};
    guint8 id[NCCL_RDZV_ID_BYTES];
    g_assert_true(fake_unique_id(&g, id, NULL));
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, id, sizeof id);
}

/* Run three ranks (check the GPUs, then exchange the id) and expect the
 * same output from every one. */
static void expect_three(const RankSpec *specs, const char *want)
{
    g_autoptr(TdmStoreServer) server = server_new();
    char **out = run_ranks(server, 3, 30.0, "gi", specs, 3);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpstr(out[i], ==, want);
    }
    g_strfreev(out);
}

/* Three ranks on three GPUs (one bus id on two hosts, in two cases): the
 * check passes and all get rank 0's id, not the one their own seam would
 * have made. */
static void test_unique_id(void)
{
    RankSpec specs[] = {{0, "hostA", "0000:3B:00.0", 11},
                        {1, "hostA", "0000:5e:00.0", 22},
                        {2, "hostB", "0000:3b:00.0", 33}};
    g_autofree char *hex = expected_id_hex(11);
    g_autofree char *want = g_strdup_printf("gpus ok\nid %s\n", hex);
    expect_three(specs, want);
}

/* Ranks 1 and 2 on one GPU of one host (the bus id in another case): every
 * rank refuses with the same message naming both ranks and the GPU. */
static void test_duplicate_gpu(void)
{
    RankSpec specs[] = {{0, "hostA", "0000:3b:00.0", 1},
                        {1, "hostA", "0000:5e:00.0", 2},
                        {2, "hostA", "0000:5E:00.0", 3}};
    expect_three(specs, "gpus refused: ranks 1 and 2 are both on GPU 0000:5e:00.0 of host "
                        "hostA: NCCL needs one GPU per rank; use --collective shm (host-staged) "
                        "or one process per GPU\n");
}

/* Rank 0 never comes: rank 1 gives up on the id within the timeout and
 * names rank 0; a rank that never posts its GPU is named too. */
static void test_timeouts(void)
{
    g_autoptr(TdmStoreServer) server = server_new();
    RankSpec one[] = {{1, "hostA", "0000:5e:00.0", 2}};
    gint64 t0 = g_get_monotonic_time();
    char **out = run_ranks(server, 2, 1.0, "i", one, 1);
    double took = (double)(g_get_monotonic_time() - t0) / G_USEC_PER_SEC;
    g_assert_cmpstr(out[0], ==,
                    "id error: nccl: rank 1 waited 1.0 s for the NCCL unique id from rank 0; "
                    "rank 0 never published it\n");
    g_assert_cmpfloat(took, >=, 1.0);
    g_assert_cmpfloat(took, <, 15.0);
    g_strfreev(out);

    g_autoptr(TdmStoreServer) server2 = server_new();
    RankSpec two[] = {{0, "hostA", "0000:3b:00.0", 1}, {1, "hostA", "0000:5e:00.0", 2}};
    out = run_ranks(server2, 3, 1.0, "g", two, 2);
    g_assert_cmpstr(out[0], ==,
                    "gpus refused: rank 0 waited 1.0 s for rank 2's GPU identity; rank 2 never "
                    "posted it\n");
    g_assert_cmpstr(out[1], ==,
                    "gpus refused: rank 1 waited 1.0 s for rank 2's GPU identity; rank 2 never "
                    "posted it\n");
    g_strfreev(out);
}

/* The ranks that never arrived at initialisation, as the init timeout
 * names them: ranks 0 and 2 arrive (other processes), 1 and 3 do not. */
static void test_missing(void)
{
    g_autoptr(TdmStoreServer) server = server_new();
    RankSpec specs[] = {{0, "hostA", "0000:3b:00.0", 1}, {2, "hostA", "0000:5e:00.0", 2}};
    g_strfreev(run_ranks(server, 4, 5.0, "a", specs, 2));
    GError *error = NULL;
    g_autoptr(TdmStore) store =
        tdm_store_connect("127.0.0.1", tdm_store_server_get_port(server), TOKEN, 10.0, &error);
    g_assert_no_error(error);
    NcclRdzv rz;
    nccl_rdzv_init(&rz, store, 1, 4, 5.0, 0);
    int *missing = nccl_rdzv_missing(&rz);
    g_autofree char *text = nccl_rdzv_ranks_text(missing);
    g_assert_cmpstr(text, ==, "1, 3");
    g_free(missing);
    /* Another communicator of the job (probe 1) has its own keys. */
    NcclRdzv other;
    nccl_rdzv_init(&other, store, 1, 4, 5.0, 1);
    missing = nccl_rdzv_missing(&other);
    g_autofree char *all = nccl_rdzv_ranks_text(missing);
    g_assert_cmpstr(all, ==, "0, 1, 2, 3");
    g_free(missing);
    nccl_rdzv_clear(&other);
    nccl_rdzv_clear(&rz);
}

int main(int argc, char **argv)
{
    /* The key digest comes from the job's token, as under `tandem run`. */
    g_setenv("TDM_STORE_TOKEN", TOKEN, TRUE);
    if (argc == 10 && strcmp(argv[1], "--rank") == 0) {
        return child_main(argv);
    }
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/nccl-rdzv/unique-id", test_unique_id);
    g_test_add_func("/nccl-rdzv/duplicate-gpu", test_duplicate_gpu);
    g_test_add_func("/nccl-rdzv/timeouts", test_timeouts);
    g_test_add_func("/nccl-rdzv/missing", test_missing);
    return g_test_run();
}

/* SPDX-License-Identifier: MIT */
/* tests/test-store.c - the rendezvous store (core/store.c) and the
 * distributed environment (core/distenv.c): every operation, timeouts,
 * concurrent clients, and hostile input (wrong token, oversized and
 * malformed frames written on raw sockets) that must close only the guilty
 * connection while the server keeps serving the others.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tandem/tandem.h>

#define TOKEN "0123456789abcdef-test-token"

typedef struct {
    TdmStoreServer *server;
    TdmStore *store;
    int port;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    GError *error = NULL;
    f->server = tdm_store_server_new(NULL, 0, TOKEN, &error);
    g_assert_no_error(error);
    f->port = tdm_store_server_get_port(f->server);
    g_assert_cmpint(f->port, >, 0);
    f->store = tdm_store_connect("127.0.0.1", f->port, TOKEN, 5.0, &error);
    g_assert_no_error(error);
    tdm_store_set_timeout(f->store, 5.0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    tdm_store_free(f->store);
    tdm_store_server_free(f->server);
}

static void assert_value(GBytes *v, const char *want)
{
    g_assert_nonnull(v);
    gsize len;
    const char *p = g_bytes_get_data(v, &len);
    g_assert_cmpmem(p, len, want, strlen(want));
    g_bytes_unref(v);
}

static void test_ops(Fixture *f, gconstpointer data)
{
    GError *error = NULL;
    gboolean b;
    g_assert_true(tdm_store_set(f->store, "a", "hello", 5, &error));
    assert_value(tdm_store_get(f->store, "a", &error), "hello");
    g_assert_true(tdm_store_set(f->store, "a", "", 0, &error));
    assert_value(tdm_store_get(f->store, "a", &error), "");
    g_assert_true(tdm_store_check(f->store, "a", &b, &error) && b);
    g_assert_true(tdm_store_check(f->store, "nope", &b, &error) && !b);
    g_assert_true(tdm_store_delete(f->store, "a", &b, &error) && b);
    g_assert_true(tdm_store_delete(f->store, "a", &b, &error) && !b);
    g_assert_true(tdm_store_check(f->store, "a", &b, &error) && !b);

    gint64 r = 0;
    g_assert_true(tdm_store_add(f->store, "n", 5, &r, &error));
    g_assert_cmpint(r, ==, 5);
    g_assert_true(tdm_store_add(f->store, "n", -7, &r, &error));
    g_assert_cmpint(r, ==, -2);
    assert_value(tdm_store_get(f->store, "n", &error), "-2");
    g_assert_true(tdm_store_set(f->store, "s", "abc", 3, &error));
    g_assert_false(tdm_store_add(f->store, "s", 1, &r, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_FAILED);
    g_assert_nonnull(strstr(error->message, "'s'"));
    g_clear_error(&error);
    /* a refused request leaves the connection usable */
    assert_value(tdm_store_get(f->store, "s", &error), "abc");

    g_autoptr(GBytes) one = g_bytes_new_static("1", 1);
    g_autoptr(GBytes) two = g_bytes_new_static("2", 1);
    assert_value(tdm_store_compare_set(f->store, "c", NULL, one, &error), "1");
    assert_value(tdm_store_compare_set(f->store, "c", NULL, two, &error), "1");
    assert_value(tdm_store_compare_set(f->store, "c", two, two, &error), "1");
    assert_value(tdm_store_compare_set(f->store, "c", one, two, &error), "2");

    const char *keys[] = {"n", "s", "c", NULL};
    g_assert_true(tdm_store_wait(f->store, keys, &error));
    g_assert_no_error(error);
}

static void test_bounds(Fixture *f, gconstpointer data)
{
    GError *error = NULL;
    gsize big = TDM_STORE_MAX_MESSAGE - 3;
    guint8 *buf = g_malloc0(big + 16);
    buf[big - 1] = 7;
    g_assert_true(tdm_store_set(f->store, "big", buf, big, &error));
    g_assert_no_error(error);
    GBytes *v = tdm_store_get(f->store, "big", &error);
    g_assert_cmpuint(g_bytes_get_size(v), ==, big);
    g_assert_cmpint(((const guint8 *)g_bytes_get_data(v, NULL))[big - 1], ==, 7);
    g_bytes_unref(v);
    g_assert_false(tdm_store_set(f->store, "big", buf, big + 16, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "'big'"));
    g_clear_error(&error);
    g_assert_false(tdm_store_set(f->store, "", "x", 1, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_clear_error(&error);
    g_free(buf);
}

static void test_timeouts(Fixture *f, gconstpointer data)
{
    GError *error = NULL;
    tdm_store_set_timeout(f->store, 0.3);
    double t0 = tdm_time_now();
    g_assert_null(tdm_store_get(f->store, "missing/key", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT);
    g_assert_nonnull(strstr(error->message, "'missing/key'"));
    g_assert_nonnull(strstr(error->message, "0.3 s"));
    g_clear_error(&error);
    double dt = tdm_time_now() - t0;
    g_assert_cmpfloat(dt, >=, 0.25);
    g_assert_cmpfloat(dt, <, 3.0);

    g_assert_true(tdm_store_set(f->store, "here", "1", 1, &error));
    const char *keys[] = {"here", "gone1", "gone2", NULL};
    g_assert_false(tdm_store_wait(f->store, keys, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT);
    g_assert_nonnull(strstr(error->message, "'gone1', 'gone2'"));
    g_assert_null(strstr(error->message, "'here'"));
    g_clear_error(&error);
    /* the connection still works after a timed-out wait */
    assert_value(tdm_store_get(f->store, "here", &error), "1");

    /* nobody listening: connect gives up at its deadline naming host:port */
    TdmStoreServer *tmp = tdm_store_server_new(NULL, 0, TOKEN, &error);
    int dead_port = tdm_store_server_get_port(tmp);
    tdm_store_server_free(tmp);
    t0 = tdm_time_now();
    g_assert_null(tdm_store_connect("127.0.0.1", dead_port, TOKEN, 0.5, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT);
    g_autofree char *where = g_strdup_printf("127.0.0.1:%d", dead_port);
    g_assert_nonnull(strstr(error->message, where));
    g_clear_error(&error);
    g_assert_cmpfloat(tdm_time_now() - t0, <, 3.0);
}

typedef struct {
    int port;
    int iterations;
    gboolean ok;
} Worker;

static gpointer add_worker(gpointer data)
{
    Worker *w = data;
    GError *error = NULL;
    TdmStore *s = tdm_store_connect("127.0.0.1", w->port, TOKEN, 5.0, &error);
    w->ok = s != NULL;
    for (int i = 0; s != NULL && i < w->iterations; i++) {
        w->ok &= tdm_store_add(s, "counter", 1, NULL, &error);
    }
    /* everybody waits for everybody: a barrier through the store */
    gint64 arrived = 0;
    w->ok &= s != NULL && tdm_store_add(s, "arrived", 1, &arrived, &error);
    if (arrived == 8) {
        w->ok &= tdm_store_set(s, "all-here", "y", 1, &error);
    }
    GBytes *v = s ? tdm_store_get(s, "all-here", &error) : NULL;
    w->ok &= v != NULL;
    if (v) {
        g_bytes_unref(v);
    }
    if (error) {
        g_printerr("worker: %s\n", error->message);
        g_error_free(error);
    }
    tdm_store_free(s);
    return NULL;
}

static void test_concurrent(Fixture *f, gconstpointer data)
{
    Worker w[8];
    GThread *t[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (Worker){.port = f->port, .iterations = 50};
        t[i] = g_thread_new("w", add_worker, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        g_thread_join(t[i]);
        g_assert_true(w[i].ok);
    }
    GError *error = NULL;
    assert_value(tdm_store_get(f->store, "counter", &error), "400");
}

/* A raw connection; returns the fd. */
static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof sa), ==, 0);
    return fd;
}

/* Read until EOF (TRUE) or 3 s without EOF (FALSE); the bytes in *got. */
static gboolean raw_expect_close(int fd, GByteArray *got)
{
    double deadline = tdm_time_now() + 3.0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)((deadline - tdm_time_now()) * 1e3);
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            return FALSE;
        }
        guint8 buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) {
            return r == 0 || errno == ECONNRESET;
        }
        if (got) {
            g_byte_array_append(got, buf, (guint)r);
        }
    }
}

static void put32(GByteArray *a, guint32 v)
{
    guint8 b[4] = {v, v >> 8, v >> 16, v >> 24};
    g_byte_array_append(a, b, 4);
}

/* A frame from an opcode and fields given as strings. */
static void frame(GByteArray *a, guint8 op, int n, const char *const *fields)
{
    guint32 len = 2;
    for (int i = 0; i < n; i++) {
        len += 4 + (guint32)strlen(fields[i]);
    }
    put32(a, len);
    guint8 h[2] = {op, (guint8)n};
    g_byte_array_append(a, h, 2);
    for (int i = 0; i < n; i++) {
        put32(a, (guint32)strlen(fields[i]));
        g_byte_array_append(a, (const guint8 *)fields[i], (guint)strlen(fields[i]));
    }
}

static void hello(GByteArray *a, const char *token)
{
    const char *f[] = {"tandem-store-1", token};
    frame(a, 1, 2, f);
}

static void send_bytes(int fd, GByteArray *a)
{
    g_assert_cmpint(send(fd, a->data, a->len, MSG_NOSIGNAL), ==, (gssize)a->len);
}

/* Each case: bytes after a good handshake (or instead of it) that must get
 * the connection closed, with a log line naming the reason. */
static void bad_frame_case(int port, const char *what, gboolean with_hello, GByteArray *bytes)
{
    g_autoptr(GByteArray) a = g_byte_array_new();
    if (with_hello) {
        hello(a, TOKEN);
    }
    g_byte_array_append(a, bytes->data, bytes->len);
    int fd = raw_connect(port);
    send_bytes(fd, a);
    if (!raw_expect_close(fd, NULL)) {
        g_error("server kept the connection open after %s", what);
    }
    close(fd);
}

static void run_hostile_clients(int port)
{
    GError *error = NULL;
    TdmStore *good = tdm_store_connect("127.0.0.1", port, TOKEN, 5.0, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_store_set(good, "k", "v", 1, &error));

    /* wrong token: refused, with an error naming the store */
    TdmStore *bad = tdm_store_connect("127.0.0.1", port, "not-the-token", 2.0, &error);
    g_assert_null(bad);
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "wrong store token"));
    g_clear_error(&error);

    g_autoptr(GByteArray) b = g_byte_array_new();
    /* over the size bound: only the 4-byte prefix is sent */
    put32(b, TDM_STORE_MAX_MESSAGE + 100000);
    bad_frame_case(port, "an oversized frame", TRUE, b);
    g_byte_array_set_size(b, 0);
    { const char *f[] = {"k"}; frame(b, 0x42, 1, f); }
    bad_frame_case(port, "an unknown opcode", TRUE, b);
    g_byte_array_set_size(b, 0);
    { const char *f[] = {"k", "v", "w"}; frame(b, 2, 3, f); }
    bad_frame_case(port, "a SET with three fields", TRUE, b);
    g_byte_array_set_size(b, 0);
    { const char *f[] = {"k", "v"}; frame(b, 2, 2, f); }
    bad_frame_case(port, "a SET before the handshake", FALSE, b);
    g_byte_array_set_size(b, 0);
    { const char *f[] = {"", "v"}; frame(b, 2, 2, f); }
    bad_frame_case(port, "an empty key", TRUE, b);
    g_byte_array_set_size(b, 0);
    put32(b, 8);
    { guint8 body[8] = {2, 1, 0xff, 0xff, 0xff, 0x7f, 'k', 'v'}; g_byte_array_append(b, body, 8); }
    bad_frame_case(port, "a field running past the frame", TRUE, b);
    g_byte_array_set_size(b, 0);
    put32(b, 9);
    { guint8 body[9] = {8, 1, 1, 0, 0, 0, 'k', 'x', 'y'}; g_byte_array_append(b, body, 9); }
    bad_frame_case(port, "trailing bytes", TRUE, b);
    g_byte_array_set_size(b, 0);
    put32(b, 0);
    bad_frame_case(port, "an empty frame", TRUE, b);
    g_byte_array_set_size(b, 0);
    hello(b, TOKEN);
    bad_frame_case(port, "a second handshake", TRUE, b);

    /* a half-sent frame from a client that then leaves costs nothing */
    int fd = raw_connect(port);
    g_byte_array_set_size(b, 0);
    hello(b, TOKEN);
    put32(b, 1000);
    send_bytes(fd, b);
    close(fd);

    /* the well-behaved client never noticed */
    GBytes *v = tdm_store_get(good, "k", &error);
    g_assert_no_error(error);
    g_bytes_unref(v);
    g_assert_true(tdm_store_set(good, "k2", "v", 1, &error));
    tdm_store_free(good);
}

static void test_hostile(void)
{
    if (g_test_subprocess()) {
        GError *error = NULL;
        TdmStoreServer *srv = tdm_store_server_new(NULL, 0, TOKEN, &error);
        g_assert_no_error(error);
        run_hostile_clients(tdm_store_server_get_port(srv));
        tdm_store_server_free(srv);
        return;
    }
    g_test_trap_subprocess(NULL, 60 * G_USEC_PER_SEC, 0);
    g_test_trap_assert_passed();
    /* one line per rejected connection, naming the peer and the reason */
    g_test_trap_assert_stderr("*closing connection from 127.0.0.1:*: wrong token*");
    g_test_trap_assert_stderr("*over the limit of*");
    g_test_trap_assert_stderr("*unknown opcode*");
    g_test_trap_assert_stderr("*wrong number of fields*");
    g_test_trap_assert_stderr("*not a tandem store handshake*");
    g_test_trap_assert_stderr("*empty key*");
    g_test_trap_assert_stderr("*runs past the end*");
    g_test_trap_assert_stderr("*trailing bytes*");
    g_test_trap_assert_stderr("*empty message*");
    g_test_trap_assert_stderr("*second handshake*");
}

static void test_free_port_and_lost(void)
{
    GError *error = NULL;
    TdmStoreServer *a = tdm_store_server_new("127.0.0.1", 0, TOKEN, &error);
    g_assert_no_error(error);
    int port = tdm_store_server_get_port(a);
    g_assert_cmpint(port, >, 1023);
    /* the same port twice is an error naming it */
    TdmStoreServer *b = tdm_store_server_new("127.0.0.1", port, TOKEN, &error);
    g_assert_null(b);
    g_autofree char *where = g_strdup_printf(":%d", port);
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, where));
    g_clear_error(&error);

    TdmStore *s = tdm_store_connect("localhost", port, TOKEN, 5.0, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_store_set(s, "x", "1", 1, &error));
    tdm_store_server_free(a);
    /* the server is gone: the next call fails at once naming host:port */
    double t0 = tdm_time_now();
    g_assert_null(tdm_store_get(s, "x", &error));
    g_assert_nonnull(error);
    g_autofree char *addr = g_strdup_printf("localhost:%d", port);
    g_assert_nonnull(strstr(error->message, addr));
    g_assert_nonnull(strstr(error->message, "connection lost"));
    g_clear_error(&error);
    g_assert_cmpfloat(tdm_time_now() - t0, <, 2.0);
    tdm_store_free(s);
}

static const char *const all_vars[] = {
    "TDM_RANK", "TDM_LOCAL_RANK", "TDM_WORLD_SIZE", "TDM_LOCAL_WORLD_SIZE", "TDM_NODE_RANK",
    "TDM_NNODES", "TDM_MASTER_ADDR", "TDM_MASTER_PORT", "TDM_STORE_TOKEN", "TDM_JOB_ID",
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES",
    "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "TDM_TIMEOUT",
};

static void clear_env(void)
{
    for (gsize i = 0; i < G_N_ELEMENTS(all_vars); i++) {
        unsetenv(all_vars[i]);
    }
}

static void setenvs(const char *const *kv)
{
    clear_env();
    for (; *kv; kv += 2) {
        setenv(kv[0], kv[1], 1);
    }
}

static void test_distenv(void)
{
    GError *error = NULL;
    TdmDistEnv env;

    clear_env();
    g_assert_true(tdm_dist_env_read(&env, &error));
    g_assert_cmpstr(env.source, ==, "none");
    g_assert_cmpint(env.rank, ==, 0);
    g_assert_cmpint(env.world_size, ==, 1);
    tdm_dist_env_clear(&env);

    const char *tdm[] = {"TDM_RANK", "3", "TDM_WORLD_SIZE", "4", "TDM_LOCAL_RANK", "1",
                         "TDM_LOCAL_WORLD_SIZE", "2", "TDM_NODE_RANK", "1", "TDM_NNODES", "2",
                         "TDM_MASTER_ADDR", "10.0.0.1", "TDM_MASTER_PORT", "29501",
                         "TDM_STORE_TOKEN", "tok", "RANK", "0", NULL};
    setenvs(tdm);
    g_assert_true(tdm_dist_env_read(&env, &error));
    g_assert_cmpstr(env.source, ==, "tandem");
    g_assert_cmpint(env.rank, ==, 3);
    g_assert_cmpint(env.local_rank, ==, 1);
    g_assert_cmpint(env.local_world_size, ==, 2);
    g_assert_cmpint(env.node_rank, ==, 1);
    g_assert_cmpint(env.nnodes, ==, 2);
    g_assert_cmpstr(env.master_addr, ==, "10.0.0.1");
    g_assert_cmpint(env.master_port, ==, 29501);
    g_assert_cmpstr(env.token, ==, "tok");
    tdm_dist_env_clear(&env);

    const char *torch[] = {"RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1",
                           "LOCAL_WORLD_SIZE", "2", "GROUP_RANK", "0", "MASTER_ADDR",
                           "127.0.0.1", "MASTER_PORT", "29500", NULL};
    setenvs(torch);
    g_assert_true(tdm_dist_env_read(&env, &error));
    g_assert_cmpstr(env.source, ==, "torchrun");
    g_assert_cmpint(env.rank, ==, 1);
    g_assert_cmpint(env.nnodes, ==, 1);
    /* torchrun's agent holds MASTER_PORT with its own store */
    g_assert_cmpint(env.master_port, ==, 29501);
    g_assert_nonnull(env.token);
    tdm_dist_env_clear(&env);

    const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2",
                          "OMPI_MCA_ess_base_jobid", "12345", "MASTER_ADDR", "host0", NULL};
    setenvs(ompi);
    g_assert_true(tdm_dist_env_read(&env, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(env.source, ==, "openmpi");
    g_assert_cmpint(env.node_rank, ==, 1);
    g_assert_cmpint(env.nnodes, ==, 2);
    g_assert_cmpint(env.master_port, >=, 20000);
    g_assert_cmpint(env.master_port, <, 60000);
    int port = env.master_port;
    g_autofree char *token = g_strdup(env.token);
    tdm_dist_env_clear(&env);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    g_assert_true(tdm_dist_env_read(&env, &error));
    g_assert_cmpint(env.master_port, ==, port); /* every rank derives the same */
    g_assert_cmpstr(env.token, ==, token);
    tdm_dist_env_clear(&env);
    unsetenv("MASTER_ADDR");
    g_assert_false(tdm_dist_env_read(&env, &error));
    g_assert_nonnull(strstr(error->message, "MASTER_ADDR"));
    g_clear_error(&error);

    const char *slurm[] = {"SLURM_PROCID", "5", "SLURM_NTASKS", "6", "SLURM_LOCALID", "1",
                           "SLURM_NODEID", "2", "SLURM_NNODES", "3", "SLURM_JOB_ID", "77",
                           "SLURM_STEP_ID", "0", "SLURM_STEP_TASKS_PER_NODE", "2(x3)",
                           "SLURM_JOB_NODELIST", "gpu[07-09],cpu1", NULL};
    setenvs(slurm);
    g_assert_true(tdm_dist_env_read(&env, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(env.source, ==, "slurm");
    g_assert_cmpint(env.local_world_size, ==, 2);
    g_assert_cmpstr(env.master_addr, ==, "gpu07");
    tdm_dist_env_clear(&env);

    /* inconsistent values name the variable */
    const char *bad1[] = {"TDM_RANK", "4", "TDM_WORLD_SIZE", "4", "TDM_MASTER_PORT", "1", NULL};
    setenvs(bad1);
    g_assert_false(tdm_dist_env_read(&env, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "TDM_RANK=4"));
    g_assert_nonnull(strstr(error->message, "TDM_WORLD_SIZE=4"));
    g_clear_error(&error);
    const char *bad2[] = {"RANK", "x1", "WORLD_SIZE", "4", NULL};
    setenvs(bad2);
    g_assert_false(tdm_dist_env_read(&env, &error));
    g_assert_nonnull(strstr(error->message, "RANK='x1'"));
    g_clear_error(&error);
    const char *bad3[] = {"SLURM_PROCID", "0", NULL};
    setenvs(bad3);
    g_assert_false(tdm_dist_env_read(&env, &error));
    g_assert_nonnull(strstr(error->message, "SLURM_NTASKS"));
    g_clear_error(&error);
    const char *bad4[] = {"TDM_RANK", "1", "TDM_WORLD_SIZE", "4", "TDM_LOCAL_RANK", "2",
                          "TDM_LOCAL_WORLD_SIZE", "2", "TDM_MASTER_PORT", "1", NULL};
    setenvs(bad4);
    g_assert_false(tdm_dist_env_read(&env, &error));
    g_assert_nonnull(strstr(error->message, "TDM_LOCAL_RANK=2"));
    g_clear_error(&error);
    clear_env();
}

/* A process started alone gets a private store; an mpirun-style job of one
 * rank serves its own at the derived port. */
static void test_open_for_job(void)
{
    GError *error = NULL;
    TdmDistEnv env;
    TdmStoreServer *srv = NULL;
    clear_env();
    g_assert_true(tdm_dist_env_read(&env, &error));
    TdmStore *s = tdm_store_open_for_job(&env, &srv, &error);
    g_assert_no_error(error);
    g_assert_nonnull(srv);
    g_assert_true(tdm_store_set(s, "k", "v", 1, &error));
    tdm_store_free(s);
    tdm_store_server_free(srv);
    tdm_dist_env_clear(&env);

    const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "1",
                          "OMPI_MCA_ess_base_jobid", "test-open-for-job", NULL};
    setenvs(ompi);
    g_assert_true(tdm_dist_env_read(&env, &error));
    s = tdm_store_open_for_job(&env, &srv, &error);
    g_assert_no_error(error);
    g_assert_cmpint(tdm_store_server_get_port(srv), ==, env.master_port);
    TdmStore *s2 = tdm_store_connect_from_env(&error);
    g_assert_no_error(error);
    g_assert_true(tdm_store_set(s2, "k", "v", 1, &error));
    assert_value(tdm_store_get(s, "k", &error), "v");
    tdm_store_free(s2);
    tdm_store_free(s);
    tdm_store_server_free(srv);
    tdm_dist_env_clear(&env);
    clear_env();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/store/ops", Fixture, NULL, fixture_setup, test_ops, fixture_teardown);
    g_test_add("/store/bounds", Fixture, NULL, fixture_setup, test_bounds, fixture_teardown);
    g_test_add("/store/timeouts", Fixture, NULL, fixture_setup, test_timeouts,
               fixture_teardown);
    g_test_add("/store/concurrent", Fixture, NULL, fixture_setup, test_concurrent,
               fixture_teardown);
    g_test_add_func("/store/hostile-clients", test_hostile);
    g_test_add_func("/store/free-port-and-lost-server", test_free_port_and_lost);
    g_test_add_func("/store/distenv", test_distenv);
    g_test_add_func("/store/open-for-job", test_open_for_job);
    return g_test_run();
}

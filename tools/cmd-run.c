/* SPDX-License-Identifier: MIT */
/* tools/cmd-run.c - `tandem run`: start the workers of a distributed job,
 * torchrun style, and end them all when one fails.
 *
 * Node 0's launcher serves the job's store (core/store-server.c); every
 * launcher, node 0's included, connects to it as a client and registers its
 * node for the current attempt ("rdzv/<attempt>/node/<r>" = "<nproc>
 * <host>"), then waits for all nodes; ranks are numbered by node order, so
 * nodes may run different process counts (that part is in
 * tools/run-rdzv.c). Each worker is its own session (setsid), so one
 * kill(-pid) reaches the scripts and programs it starts, and it gets SIGKILL
 * when the launcher dies (PR_SET_PDEATHSIG, with a getppid() check for a
 * launcher that died before the prctl). The launcher is one poll loop on
 * the workers' output pipes (whole lines, prefixed "[rank N] ") and a
 * self-pipe fed by the signal handlers, so nothing blocks without a
 * deadline. On a failure it prints which rank ended how, sends SIGTERM to
 * every worker's session, SIGKILL after a grace period, and publishes
 * "job/<attempt>/failed" so the launchers of other nodes, which check that
 * key every half second, end theirs too; a store that stops answering ends
 * the job as well. With --max-restarts every node starts a new attempt,
 * whose workers get TDM_RESTART_COUNT > 0: `tandem train` with
 * --checkpoint-dir then resumes from the newest checkpoint there itself
 * (core/trainer-resume.c), so the launcher never rewrites a command line.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tandem/tandem.h>

#include "commands.h"
#include "run.h"

#define GRACE_S 3.0
#define DRAIN_S 1.0
#define LINE_MAX_BYTES 65536
/* Upper bounds of --nproc-per-node and --nnodes: a typo beyond them is an
 * error rather than thousands of processes. */
#define MAX_NPROC_PER_NODE 4096
#define MAX_NNODES 250
/* What one read() takes of a worker's output at most. */
#define READ_CHUNK_BYTES 16384
/* The random bytes of a job's store token (64 hex digits). */
#define TOKEN_RANDOM_BYTES 32
/* "[rank 12345] ", the prefix of each line a worker prints. */
#define RANK_PREFIX_LEN 32
/* One line on a worker's end: "rank R (pid P) was killed by signal S". */
#define EXIT_TEXT_LEN 160
/* Reaping what is left of a failed job, for up to DRAIN_S. */
#define REAP_POLL_US 10000

typedef enum { JOB_OK, JOB_FAILED, JOB_INTERRUPTED } JobResult;

static int sig_pipe[2] = {-1, -1};
volatile sig_atomic_t pending_stop_sig;

static void on_signal(int sig)
{
    int saved = errno;
    if (sig != SIGCHLD) {
        pending_stop_sig = sig;
    }
    unsigned char b = (unsigned char)sig;
    G_GNUC_UNUSED ssize_t w = write(sig_pipe[1], &b, 1);
    errno = saved;
}

const char *signal_name(int sig, char *buf, gsize size)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) {
        g_snprintf(buf, size, "SIG%s", abbrev);
    } else {
        g_snprintf(buf, size, "signal %d", sig);
    }
    return buf;
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: tandem run [OPTIONS] [--] COMMAND [ARGS...]\n"
            "\n"
            "Start COMMAND once per process of a distributed job (torchrun's flags).\n"
            "\n"
            "  --nproc-per-node N  processes on this node (default 1); `gpu`: one per\n"
            "                      visible GPU (CUDA_VISIBLE_DEVICES), failing without one;\n"
            "                      `auto`: one per GPU, else one per core group (NUMA node)\n"
            "  --nnodes N          nodes in the job (default 1)\n"
            "  --node-rank R       this node's index, 0..N-1 (default 0)\n"
            "  --master-addr A     host of node 0, where the store is served (127.0.0.1)\n"
            "  --master-port P     the store's port (default: any free port on one node,\n"
            "                      29500 on several; 0 = any free port, one node only)\n"
            "  --max-restarts N    restart all workers up to N times after a failure; a\n"
            "                      restarted `tandem train --checkpoint-dir DIR` resumes\n"
            "                      from the newest checkpoint in DIR by itself\n"
            "  --timeout S         rendezvous and store timeout (TDM_TIMEOUT, 300)\n"
            "  --token T           the job's store token; multi-node jobs need the same one\n"
            "                      on every node (or TDM_STORE_TOKEN), e.g. `openssl rand\n"
            "                      -hex 32`; one-node jobs make a random one\n"
            "\n"
            "Workers get TDM_RANK, TDM_LOCAL_RANK, TDM_WORLD_SIZE, TDM_LOCAL_WORLD_SIZE,\n"
            "TDM_NODE_RANK, TDM_NNODES, TDM_MASTER_ADDR, TDM_MASTER_PORT, TDM_STORE_TOKEN,\n"
            "TDM_RESTART_COUNT and torchrun's RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
            "GROUP_RANK, MASTER_ADDR, MASTER_PORT; in a GPU job also TDM_DEVICE=cuda:LOCAL_RANK.\n"
            "Output lines carry \"[rank N] \" (\"[rank N cuda:L] \" in a GPU job). When a\n"
            "worker fails, all end within a few seconds and tandem run exits 1.\n");
}

static gboolean parse_int_opt(const char *name, const char *v, int min, int max, int *out)
{
    gint64 x;
    if (!g_ascii_string_to_signed(v, 10, min, max, &x, NULL)) {
        fprintf(stderr, "tandem run: --%s '%s' is not an integer in %d..%d\n", name, v, min, max);
        return FALSE;
    }
    *out = (int)x;
    return TRUE;
}

/* Returns 0 to go on, else the exit status. */
static int parse_args(int argc, char **argv, RunOptions *o)
{
    *o = (RunOptions){.nproc = 1, .nnodes = 1, .master_port = -1, .timeout = -1};
    int i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-') {
            break;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return -1;
        }
        g_autofree char *name = g_strdup(arg + strspn(arg, "-"));
        char *value = strchr(name, '=');
        if (value) {
            *value++ = 0;
        }
        g_strdelimit(name, "_", '-');
        if (strcmp(name, "standalone") == 0) {
            continue;
        }
        static const char *const known[] = {"nproc-per-node", "nnodes", "node-rank",
                                            "master-addr", "master-port", "max-restarts",
                                            "timeout", "token"};
        gboolean ok = FALSE;
        for (gsize k = 0; k < G_N_ELEMENTS(known); k++) {
            ok |= strcmp(name, known[k]) == 0;
        }
        if (!ok) {
            fprintf(stderr, "tandem run: unknown option '%s' (see tandem run --help)\n", arg);
            return 2;
        }
        if (value == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tandem run: --%s needs a value\n", name);
                return 2;
            }
            value = argv[++i];
        }
        gboolean good = TRUE;
        if (strcmp(name, "nproc-per-node") == 0) {
            if (run_resolve_nproc(value, o)) {
                good = o->nproc > 0;
            } else {
                good = parse_int_opt(name, value, 1, MAX_NPROC_PER_NODE, &o->nproc);
            }
        } else if (strcmp(name, "nnodes") == 0) {
            good = parse_int_opt(name, value, 1, MAX_NNODES, &o->nnodes);
        } else if (strcmp(name, "node-rank") == 0) {
            good = parse_int_opt(name, value, 0, MAX_NNODES - 1, &o->node_rank);
        } else if (strcmp(name, "master-port") == 0) {
            good = parse_int_opt(name, value, 0, 65535, &o->master_port);
        } else if (strcmp(name, "max-restarts") == 0) {
            good = parse_int_opt(name, value, 0, 1000000, &o->max_restarts);
        } else if (strcmp(name, "master-addr") == 0) {
            o->master_addr = value;
        } else if (strcmp(name, "token") == 0) {
            o->token = value;
        } else if (strcmp(name, "timeout") == 0) {
            o->timeout = g_ascii_strtod(value, NULL);
            if (!(o->timeout > 0)) {
                fprintf(stderr, "tandem run: --timeout '%s' is not a positive number\n", value);
                good = FALSE;
            }
        }
        if (!good) {
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "tandem run: no command given\n\n");
        usage(stderr);
        return 2;
    }
    o->cmd = argv + i;
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "tandem run: --node-rank %d is not below --nnodes %d\n", o->node_rank,
                o->nnodes);
        return 2;
    }
    if (o->master_port < 0) {
        o->master_port = o->nnodes > 1 ? 29500 : 0;
    } else if (o->master_port == 0 && o->nnodes > 1) {
        fprintf(stderr, "tandem run: --master-port 0 only works for one node: the other "
                        "nodes must know the port\n");
        return 2;
    }
    if (o->timeout <= 0) {
        const char *t = g_getenv("TDM_TIMEOUT");
        o->timeout = t ? g_ascii_strtod(t, NULL) : 0;
        if (!(o->timeout > 0)) {
            o->timeout = TDM_STORE_DEFAULT_TIMEOUT;
        }
    }
    if (o->token == NULL) {
        o->token = g_getenv("TDM_STORE_TOKEN");
    }
    if (o->token == NULL && o->nnodes > 1) {
        fprintf(stderr, "tandem run: a job on %d nodes needs the same --token (or "
                        "TDM_STORE_TOKEN) on every node, e.g. from `openssl rand -hex 32`\n",
                o->nnodes);
        return 2;
    }
    if (o->master_addr == NULL) {
        o->master_addr = "127.0.0.1";
    }
    return 0;
}

static char *random_token(void)
{
    guint8 raw[TOKEN_RANDOM_BYTES];
    GRand *r = g_rand_new(); /* seeded from /dev/urandom */
    for (int i = 0; i < TOKEN_RANDOM_BYTES; i++) {
        raw[i] = (guint8)g_rand_int(r);
    }
    g_rand_free(r);
    GString *s = g_string_new(NULL);
    for (int i = 0; i < TOKEN_RANDOM_BYTES; i++) {
        g_string_append_printf(s, "%02x", raw[i]);
    }
    return g_string_free(s, FALSE);
}

static gboolean is_loopback(const char *addr)
{
    return g_str_has_prefix(addr, "127.") || strcmp(addr, "localhost") == 0 ||
           strcmp(addr, "::1") == 0;
}

/* ---- output ---- */

static void write_all(int fd, const char *p, gsize n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return; /* nobody reads our output any more: drop it */
        }
        p += w;
        n -= (gsize)w;
    }
}

/* Emit the complete lines of a worker stream, or everything at EOF. */
static void flush_lines(Worker *w, int s, gboolean eof)
{
    GString *b = w->buf[s];
    gsize start = 0;
    char prefix[RANK_PREFIX_LEN];
    int plen = w->gpu >= 0 ? g_snprintf(prefix, sizeof prefix, "[rank %d cuda:%d] ", w->rank, w->gpu)
                           : g_snprintf(prefix, sizeof prefix, "[rank %d] ", w->rank);
    GString *out = g_string_new(NULL);
    for (;;) {
        char *nl = memchr(b->str + start, '\n', b->len - start);
        gsize end;
        if (nl != NULL) {
            end = (gsize)(nl - b->str) + 1;
        } else if (b->len - start >= LINE_MAX_BYTES || (eof && b->len > start)) {
            end = b->len;
        } else {
            break;
        }
        g_string_append_len(out, prefix, plen);
        g_string_append_len(out, b->str + start, (gssize)(end - start));
        if (out->str[out->len - 1] != '\n') {
            g_string_append_c(out, '\n');
        }
        start = end;
    }
    write_all(s == 0 ? STDOUT_FILENO : STDERR_FILENO, out->str, out->len);
    g_string_free(out, TRUE);
    g_string_erase(b, 0, (gssize)start);
}

static void read_stream(Worker *w, int s)
{
    char buf[READ_CHUNK_BYTES];
    for (;;) {
        ssize_t r = read(w->fd[s], buf, sizeof buf);
        if (r > 0) {
            g_string_append_len(w->buf[s], buf, r);
            flush_lines(w, s, FALSE);
            continue;
        }
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0 && errno == EAGAIN) {
            return;
        }
        flush_lines(w, s, TRUE);
        close(w->fd[s]);
        w->fd[s] = -1;
        return;
    }
}

/* ---- workers ---- */

static char **worker_env(Job *job, int local_rank)
{
    char **env = g_get_environ();
    const RunOptions *o = &job->opt;
    struct {
        const char *name;
        int value;
    } ints[] = {
        {"TDM_RANK", job->rank_offset + local_rank}, {"RANK", job->rank_offset + local_rank},
        {"TDM_LOCAL_RANK", local_rank},              {"LOCAL_RANK", local_rank},
        {"TDM_WORLD_SIZE", job->world},              {"WORLD_SIZE", job->world},
        {"TDM_LOCAL_WORLD_SIZE", o->nproc},          {"LOCAL_WORLD_SIZE", o->nproc},
        {"TDM_NODE_RANK", o->node_rank},             {"GROUP_RANK", o->node_rank},
        {"TDM_NNODES", o->nnodes},                   {"GROUP_WORLD_SIZE", o->nnodes},
        {"TDM_MASTER_PORT", job->port},              {"MASTER_PORT", job->port},
        {"TDM_RESTART_COUNT", job->attempt},         {"TORCHELASTIC_RESTART_COUNT", job->attempt},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(ints); i++) {
        char v[16];
        g_snprintf(v, sizeof v, "%d", ints[i].value);
        env = g_environ_setenv(env, ints[i].name, v, TRUE);
    }
    env = g_environ_setenv(env, "TDM_MASTER_ADDR", o->master_addr, TRUE);
    env = g_environ_setenv(env, "MASTER_ADDR", o->master_addr, TRUE);
    env = g_environ_setenv(env, "TDM_STORE_TOKEN", job->token, TRUE);
    char t[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_dtostr(t, sizeof t, o->timeout);
    env = g_environ_setenv(env, "TDM_TIMEOUT", t, TRUE);
    if (o->gpus > 0) {
        /* The GPU this rank drives: what `--device cuda` picks from
         * LOCAL_RANK, for scripts that choose their device themselves. */
        char dev[32];
        g_snprintf(dev, sizeof dev, "cuda:%d", local_rank % o->gpus);
        env = g_environ_setenv(env, "TDM_DEVICE", dev, TRUE);
    }
    return env;
}

static gboolean spawn_worker(Job *job, int local_rank, Worker *w)
{
    int out[2], err[2];
    w->rank = job->rank_offset + local_rank;
    w->gpu = job->opt.gpus > 0 ? local_rank % job->opt.gpus : -1;
    w->fd[0] = w->fd[1] = -1;
    w->buf[0] = g_string_new(NULL);
    w->buf[1] = g_string_new(NULL);
    if (pipe2(out, O_CLOEXEC) != 0) {
        return FALSE;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return FALSE;
    }
    /* Everything the child needs is made before fork: after it, only
     * async-signal-safe calls (the store's thread may hold malloc's lock). */
    char **env = worker_env(job, local_rank);
    g_autofree char *exec_fail = g_strdup_printf("tandem run: cannot run '%s'\n", job->opt.cmd[0]);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t parent = getpid();
    /* A signal between fork and exec would run the launcher's handler in
     * the child, which writes to the launcher's signal pipe: block them
     * until the child has reset its handlers. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        static const int reset[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD};
        for (gsize i = 0; i < G_N_ELEMENTS(reset); i++) {
            signal(reset[i], SIG_DFL);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(128 + SIGKILL);
        }
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
        }
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        execvpe(job->opt.cmd[0], job->opt.cmd, env);
        G_GNUC_UNUSED ssize_t wr = write(STDERR_FILENO, exec_fail, strlen(exec_fail));
        _exit(127);
    }
    int saved = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    g_strfreev(env);
    if (devnull >= 0) {
        close(devnull);
    }
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        errno = saved;
        return FALSE;
    }
    w->pid = pid;
    w->fd[0] = out[0];
    w->fd[1] = err[0];
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    return TRUE;
}

static void signal_workers(Job *job, int sig)
{
    for (int i = 0; i < job->opt.nproc; i++) {
        if (job->workers[i].pid > 0) {
            kill(-job->workers[i].pid, sig); /* the worker's whole session */
            if (!job->workers[i].reaped) {
                kill(job->workers[i].pid, sig);
            }
        }
    }
}

static void describe_exit(const Worker *w, char *buf, gsize size)
{
    char sname[SIGNAL_NAME_LEN];
    if (WIFSIGNALED(w->status)) {
        g_snprintf(buf, size, "rank %d (pid %d) was killed by signal %s", w->rank, (int)w->pid,
                   signal_name(WTERMSIG(w->status), sname, sizeof sname));
    } else {
        g_snprintf(buf, size, "rank %d (pid %d) exited with status %d", w->rank, (int)w->pid,
                   WEXITSTATUS(w->status));
    }
}

typedef struct {
    gboolean stopping, killed, failed;
    double kill_at, drain_until, next_check;
} RunState;

static void begin_stop(Job *job, RunState *st)
{
    if (!st->stopping) {
        st->stopping = TRUE;
        st->kill_at = tdm_time_now() + GRACE_S;
        signal_workers(job, SIGTERM);
    }
}

/* Tell the other nodes' launchers (best effort: the store may be gone). */
static void publish_failure(Job *job, const char *what)
{
    if (job->opt.nnodes > 1 && job->store != NULL) {
        g_autofree char *key = g_strdup_printf("job/%d/failed", job->attempt);
        g_autofree char *msg = g_strdup_printf("%s on node %d", what, job->opt.node_rank);
        tdm_store_set(job->store, key, msg, strlen(msg), NULL);
    }
}

static void reap(Job *job, RunState *st)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < job->opt.nproc; i++) {
            Worker *w = &job->workers[i];
            if (w->pid != pid || w->reaped) {
                continue;
            }
            w->reaped = TRUE;
            w->status = status;
            if (!st->stopping && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                char what[EXIT_TEXT_LEN];
                describe_exit(w, what, sizeof what);
                fprintf(stderr, "tandem run: %s\n", what);
                st->failed = TRUE;
                publish_failure(job, what);
                begin_stop(job, st);
            }
        }
    }
}

/* Has another node's launcher reported a failure? Also ends the job when
 * the store stops answering. */
static void check_remote(Job *job, RunState *st)
{
    g_autofree char *key = g_strdup_printf("job/%d/failed", job->attempt);
    GError *error = NULL;
    gboolean exists = FALSE;
    if (!tdm_store_check(job->store, key, &exists, &error)) {
        fprintf(stderr, "tandem run: ending the job: %s\n", error->message);
        g_error_free(error);
        st->failed = TRUE;
        begin_stop(job, st);
        return;
    }
    if (exists) {
        GBytes *v = tdm_store_get(job->store, key, NULL);
        gsize len = 0;
        const char *p = v ? g_bytes_get_data(v, &len) : "";
        fprintf(stderr, "tandem run: ending the job: %.*s\n", (int)len, p);
        if (v) {
            g_bytes_unref(v);
        }
        st->failed = TRUE;
        begin_stop(job, st);
    }
}

static gboolean all_done(Job *job, double now, RunState *st)
{
    for (int i = 0; i < job->opt.nproc; i++) {
        if (!job->workers[i].reaped) {
            return FALSE;
        }
    }
    if (st->drain_until == 0) {
        st->drain_until = now + DRAIN_S;
    }
    for (int i = 0; i < job->opt.nproc; i++) {
        for (int s = 0; s < 2; s++) {
            if (job->workers[i].fd[s] >= 0 && now < st->drain_until) {
                return FALSE;
            }
        }
    }
    return TRUE;
}

static void handle_signals(Job *job, RunState *st)
{
    unsigned char sigs[64];
    ssize_t n;
    while ((n = read(sig_pipe[0], sigs, sizeof sigs)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (sigs[i] == SIGCHLD) {
                continue;
            }
            char sname[SIGNAL_NAME_LEN];
            if (job->interrupt_sig == 0) {
                job->interrupt_sig = sigs[i];
                fprintf(stderr, "tandem run: received %s, ending the job\n",
                        signal_name(sigs[i], sname, sizeof sname));
                publish_failure(job, "tandem run was interrupted");
                begin_stop(job, st);
            } else if (!st->killed) {
                st->killed = TRUE;
                signal_workers(job, SIGKILL);
            }
        }
    }
}

static JobResult run_attempt(Job *job)
{
    int n = job->opt.nproc;
    RunState st = {0};
    job->workers = g_new0(Worker, n);
    for (int i = 0; i < n; i++) {
        if (!spawn_worker(job, i, &job->workers[i])) {
            fprintf(stderr, "tandem run: cannot start rank %d: %s\n", job->rank_offset + i,
                    g_strerror(errno));
            job->workers[i].reaped = TRUE;
            st.failed = TRUE;
            publish_failure(job, "a worker could not be started");
            begin_stop(job, &st);
            for (int j = i + 1; j < n; j++) {
                job->workers[j].reaped = TRUE;
                job->workers[j].fd[0] = job->workers[j].fd[1] = -1;
                job->workers[j].buf[0] = g_string_new(NULL);
                job->workers[j].buf[1] = g_string_new(NULL);
            }
            break;
        }
    }
    st.next_check = tdm_time_now() + POLL_FAILED_S;
    GArray *pfds = g_array_new(FALSE, FALSE, sizeof(struct pollfd));
    GArray *owners = g_array_new(FALSE, FALSE, sizeof(int));
    for (;;) {
        handle_signals(job, &st);
        reap(job, &st);
        double now = tdm_time_now();
        if (st.stopping && !st.killed && now >= st.kill_at) {
            st.killed = TRUE;
            signal_workers(job, SIGKILL);
        }
        if (!st.stopping && job->opt.nnodes > 1 && now >= st.next_check) {
            check_remote(job, &st);
            st.next_check = now + POLL_FAILED_S;
        }
        if (all_done(job, now, &st)) {
            break;
        }
        g_array_set_size(pfds, 0);
        g_array_set_size(owners, 0);
        struct pollfd sp = {.fd = sig_pipe[0], .events = POLLIN};
        g_array_append_val(pfds, sp);
        int none = -1;
        g_array_append_val(owners, none);
        for (int i = 0; i < n; i++) {
            for (int s = 0; s < 2; s++) {
                if (job->workers[i].fd[s] >= 0) {
                    struct pollfd p = {.fd = job->workers[i].fd[s], .events = POLLIN};
                    int owner = 2 * i + s;
                    g_array_append_val(pfds, p);
                    g_array_append_val(owners, owner);
                }
            }
        }
        double wake = now + 1.0;
        if (st.stopping && !st.killed) {
            wake = MIN(wake, st.kill_at);
        }
        if (job->opt.nnodes > 1 && !st.stopping) {
            wake = MIN(wake, st.next_check);
        }
        if (st.drain_until > 0) {
            wake = MIN(wake, st.drain_until);
        }
        int ms = (int)MAX(0.0, (wake - now) * 1e3 + 1);
        struct pollfd *p = (struct pollfd *)pfds->data;
        if (poll(p, pfds->len, ms) <= 0) {
            continue;
        }
        for (guint k = 1; k < pfds->len; k++) {
            if (p[k].revents != 0) {
                int owner = g_array_index(owners, int, k);
                read_stream(&job->workers[owner / 2], owner % 2);
            }
        }
    }
    g_array_unref(pfds);
    g_array_unref(owners);
    /* leftovers of a failed job (a script's children) go too; being the
     * subreaper, the launcher reaps them rather than leave zombies */
    if (st.stopping) {
        signal_workers(job, SIGKILL);
        double until = tdm_time_now() + DRAIN_S;
        while (waitpid(-1, NULL, WNOHANG) >= 0 && tdm_time_now() < until) {
            g_usleep(REAP_POLL_US);
        }
    }
    for (int i = 0; i < n; i++) {
        for (int s = 0; s < 2; s++) {
            if (job->workers[i].fd[s] >= 0) {
                flush_lines(&job->workers[i], s, TRUE);
                close(job->workers[i].fd[s]);
            }
            g_string_free(job->workers[i].buf[s], TRUE);
        }
    }
    g_clear_pointer(&job->workers, g_free);
    if (job->interrupt_sig != 0) {
        return JOB_INTERRUPTED;
    }
    return st.failed ? JOB_FAILED : JOB_OK;
}

static void install_signals(void)
{
    G_GNUC_UNUSED int r = pipe2(sig_pipe, O_NONBLOCK | O_CLOEXEC);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int tdm_cmd_run(int argc, char **argv)
{
    Job job = {0};
    int rc = parse_args(argc, argv, &job.opt);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    const RunOptions *o = &job.opt;
    GError *error = NULL;
    install_signals();
    /* orphans of the workers come to us, not to init (which may not reap) */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    job.token = o->token ? g_strdup(o->token) : random_token();
    job.port = o->master_port;
    if (o->node_rank == 0) {
        const char *bind = o->master_addr;
        if (o->nnodes > 1) {
            bind = is_loopback(o->master_addr) ? "127.0.0.1" : "0.0.0.0";
        }
        job.server = tdm_store_server_new(bind, o->master_port, job.token, &error);
        if (job.server == NULL) {
            fprintf(stderr, "tandem run: %s\n", error->message);
            g_error_free(error);
            g_free(job.token);
            return 1;
        }
        job.port = tdm_store_server_get_port(job.server);
    }
    rc = 1;
    if (!connect_store(&job, &error)) {
        fprintf(stderr, "tandem run: %s\n", error->message);
        g_clear_error(&error);
        goto out;
    }
    for (job.attempt = 0;; job.attempt++) {
        if (!rendezvous(&job, &error)) {
            fprintf(stderr, "tandem run: %s\n", error->message);
            g_clear_error(&error);
            rc = pending_stop_sig ? 128 + pending_stop_sig : 1;
            break;
        }
        /* during the run a store call must answer quickly, or the job ends */
        tdm_store_set_timeout(job.store, 2.0);
        JobResult r = run_attempt(&job);
        if (r == JOB_OK) {
            if (finish_nodes(&job, &error)) {
                rc = 0;
            } else {
                fprintf(stderr, "tandem run: %s\n", error->message);
                g_clear_error(&error);
            }
            break;
        }
        if (r == JOB_INTERRUPTED) {
            rc = 128 + job.interrupt_sig;
            break;
        }
        if (job.attempt < o->max_restarts) {
            fprintf(stderr, "tandem run: restarting all workers (restart %d of %d)\n",
                    job.attempt + 1, o->max_restarts);
            continue;
        }
        if (o->max_restarts > 0) {
            fprintf(stderr, "tandem run: the job failed after %d restart%s\n", o->max_restarts,
                    o->max_restarts == 1 ? "" : "s");
        }
        /* let the other nodes' launchers read the failure before the store goes */
        if (job.server != NULL && o->nnodes > 1) {
            g_usleep((gulong)(2 * POLL_FAILED_S * G_USEC_PER_SEC));
        }
        break;
    }
out:
    tdm_store_free(job.store);
    tdm_store_server_free(job.server);
    g_free(job.token);
    return rc;
}

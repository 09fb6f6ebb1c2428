/* SPDX-License-Identifier: MIT */
/* core/distenv.c - who this process is in a distributed job, and where the
 * job's store is.
 *
 * Four launchers are understood, first match wins: Tandem's own (`tandem
 * run`: TDM_*), torchrun (RANK, WORLD_SIZE, ...), Open MPI
 * (OMPI_COMM_WORLD_*) and Slurm's srun (SLURM_*). Only `tandem run` serves a
 * store; under the others rank 0 serves it (tdm_store_open_for_job), at
 * MASTER_ADDR (127.0.0.1 on one node) and a port every rank derives alike:
 * MASTER_PORT when set (plus one under torchrun, whose agent holds
 * MASTER_PORT with a store of its own), else a hash of the job id into
 * 20000..59999. Without TDM_STORE_TOKEN the token is derived from the job
 * id too: it keeps stray clients of other jobs out, but it is no secret;
 * set TDM_STORE_TOKEN for that.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The random bytes of a lone process's private store token. */
#define TOKEN_RANDOM_BYTES 32
/* A port derived from a scheduler's job id lies in [first, first + count):
 * above the usual services, below the kernel's ephemeral range. */
#define JOB_PORT_FIRST 20000
#define JOB_PORT_COUNT 40000

typedef struct {
    const char *source;
    const char *rank, *world, *local_rank, *local_world, *node_rank, *nnodes;
} EnvNames;

static const EnvNames env_names[] = {
    {"tandem", "TDM_RANK", "TDM_WORLD_SIZE", "TDM_LOCAL_RANK", "TDM_LOCAL_WORLD_SIZE",
     "TDM_NODE_RANK", "TDM_NNODES"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
     "GROUP_WORLD_SIZE"},
    /* OMPI_COMM_WORLD_NODE_RANK is the rank among the processes of one node,
     * not a node index, so the node index is derived from the local size. */
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", NULL, NULL},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, "SLURM_NODEID",
     "SLURM_NNODES"},
};

/* Read a non-negative integer variable; *value untouched when unset. */
static gboolean env_int(const char *name, int *value, gboolean *present, GError **error)
{
    const char *s = name ? g_getenv(name) : NULL;
    guint64 v;
    if (present) {
        *present = FALSE;
    }
    if (s == NULL) {
        return TRUE;
    }
    g_autofree char *trimmed = g_strstrip(g_strdup(s));
    if (!g_ascii_string_to_unsigned(trimmed, 10, 0, G_MAXINT, &v, NULL)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s='%s' is not a non-negative integer", name, s);
        return FALSE;
    }
    *value = (int)v;
    if (present) {
        *present = TRUE;
    }
    return TRUE;
}

/* The job id of an mpirun / srun / torchrun job, or NULL (transfer full). */
static char *job_id(const char *source)
{
    const char *v;
    if ((v = g_getenv("TDM_JOB_ID")) != NULL) {
        return g_strdup(v);
    }
    if (strcmp(source, "openmpi") == 0) {
        if ((v = g_getenv("OMPI_MCA_ess_base_jobid")) != NULL ||
            (v = g_getenv("PMIX_NAMESPACE")) != NULL ||
            (v = g_getenv("OMPI_MCA_orte_ess_jobid")) != NULL) {
            return g_strdup_printf("ompi:%s", v);
        }
    } else if (strcmp(source, "slurm") == 0) {
        if ((v = g_getenv("SLURM_JOB_ID")) != NULL) {
            const char *step = g_getenv("SLURM_STEP_ID");
            return g_strdup_printf("slurm:%s.%s", v, step ? step : "");
        }
    } else if (strcmp(source, "torchrun") == 0) {
        const char *addr = g_getenv("MASTER_ADDR"), *port = g_getenv("MASTER_PORT");
        v = g_getenv("TORCHELASTIC_RUN_ID");
        return g_strdup_printf("torchrun:%s:%s:%s", v ? v : "", addr ? addr : "",
                               port ? port : "");
    }
    return NULL;
}

/* Local processes of node `node` from Slurm's "2(x3),1" notation. */
static int slurm_tasks_on_node(const char *spec, int node)
{
    const char *p = spec;
    int seen = 0;
    while (p && *p) {
        char *end;
        long count = strtol(p, &end, 10), times = 1;
        if (end == p || count <= 0) {
            return -1;
        }
        p = end;
        if (g_str_has_prefix(p, "(x")) {
            times = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || times <= 0) {
                return -1;
            }
            p = end + 1;
        }
        if (node < seen + times) {
            return (int)count;
        }
        seen += (int)times;
        if (*p == ',') {
            p++;
        } else if (*p != 0) {
            return -1;
        }
    }
    return -1;
}

/* First host of a Slurm node list: "gpu[03-05,9],cpu1" -> "gpu03". */
static char *slurm_first_host(const char *list)
{
    gsize n = strcspn(list, ",[");
    if (list[n] != '[') {
        return g_strndup(list, n);
    }
    const char *in = list + n + 1;
    gsize m = strcspn(in, ",-]");
    const char *close = strchr(in, ']');
    const char *suffix = close ? close + 1 : "";
    gsize slen = strcspn(suffix, ",");
    return g_strdup_printf("%.*s%.*s%.*s", (int)n, list, (int)m, in, (int)slen, suffix);
}

static gboolean is_loopback(const char *addr)
{
    return g_str_has_prefix(addr, "127.") || strcmp(addr, "localhost") == 0 ||
           strcmp(addr, "::1") == 0;
}

static gboolean range_error(GError **error, const char *what, int v, const char *bound_name,
                            int bound)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s=%d is not below %s=%d", what, v,
                bound_name, bound);
    return FALSE;
}

static gboolean read_counts(TdmDistEnv *env, const EnvNames *nm, GError **error)
{
    gboolean has_world, has_lrank, has_lworld, has_node, has_nnodes;
    if (!env_int(nm->rank, &env->rank, NULL, error) ||
        !env_int(nm->world, &env->world_size, &has_world, error) ||
        !env_int(nm->local_rank, &env->local_rank, &has_lrank, error) ||
        !env_int(nm->local_world, &env->local_world_size, &has_lworld, error) ||
        !env_int(nm->node_rank, &env->node_rank, &has_node, error) ||
        !env_int(nm->nnodes, &env->nnodes, &has_nnodes, error)) {
        return FALSE;
    }
    if (!has_world) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s is set but %s is not",
                    nm->rank, nm->world);
        return FALSE;
    }
    if (env->world_size < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s=0: a job has at least one rank",
                    nm->world);
        return FALSE;
    }
    if (env->rank >= env->world_size) {
        return range_error(error, nm->rank, env->rank, nm->world, env->world_size);
    }
    if (!has_lworld && strcmp(env->source, "slurm") == 0) {
        const char *spec = g_getenv("SLURM_STEP_TASKS_PER_NODE");
        spec = spec ? spec : g_getenv("SLURM_TASKS_PER_NODE");
        int n = spec ? slurm_tasks_on_node(spec, env->node_rank) : -1;
        if (n > 0) {
            env->local_world_size = n;
            has_lworld = TRUE;
        }
    }
    if (!has_lrank) {
        env->local_rank = env->rank;
    }
    if (!has_lworld) {
        env->local_world_size = env->world_size;
    }
    const char *lw_name = nm->local_world ? nm->local_world : "the local size";
    if (env->local_world_size < 1 || env->local_world_size > env->world_size) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s=%d is not between 1 and %s=%d", lw_name, env->local_world_size,
                    nm->world, env->world_size);
        return FALSE;
    }
    if (env->local_rank >= env->local_world_size) {
        return range_error(error, nm->local_rank, env->local_rank, lw_name,
                           env->local_world_size);
    }
    if (!has_nnodes) {
        env->nnodes = (env->world_size + env->local_world_size - 1) / env->local_world_size;
    }
    if (!has_node) {
        env->node_rank = env->rank / env->local_world_size;
    }
    const char *nn_name = nm->nnodes ? nm->nnodes : "the node count";
    if (env->nnodes < 1 || env->nnodes > env->world_size) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s=%d is not between 1 and %s=%d",
                    nn_name, env->nnodes, nm->world, env->world_size);
        return FALSE;
    }
    if (env->node_rank >= env->nnodes) {
        return range_error(error, nm->node_rank ? nm->node_rank : "the node index",
                           env->node_rank, nn_name, env->nnodes);
    }
    return TRUE;
}

static gboolean read_store_address(TdmDistEnv *env, GError **error)
{
    const char *addr = g_getenv("TDM_MASTER_ADDR");
    addr = addr ? addr : g_getenv("MASTER_ADDR");
    g_autofree char *slurm_host = NULL;
    if (addr == NULL && strcmp(env->source, "slurm") == 0 && env->nnodes > 1) {
        const char *list = g_getenv("SLURM_STEP_NODELIST");
        list = list ? list : g_getenv("SLURM_JOB_NODELIST");
        if (list != NULL && *list) {
            addr = slurm_host = slurm_first_host(list);
        }
    }
    if (addr == NULL && env->nnodes > 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "a job on %d nodes needs MASTER_ADDR (or TDM_MASTER_ADDR): the host of "
                    "rank 0",
                    env->nnodes);
        return FALSE;
    }
    env->master_addr = g_strdup(addr && *addr ? addr : "127.0.0.1");

    gboolean has_port = FALSE;
    const char *port_var = g_getenv("TDM_MASTER_PORT") ? "TDM_MASTER_PORT" : "MASTER_PORT";
    if (!env_int(port_var, &env->master_port, &has_port, error)) {
        return FALSE;
    }
    if (has_port && (env->master_port < 1 || env->master_port > 65535)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s=%d is not a TCP port",
                    port_var, env->master_port);
        return FALSE;
    }
    if (has_port && strcmp(port_var, "MASTER_PORT") == 0 && strcmp(env->source, "torchrun") == 0) {
        env->master_port = env->master_port % 65535 + 1;
    }
    g_autofree char *id = job_id(env->source);
    if (!has_port && id != NULL) {
        /* FNV-1a: every rank computes the same port from the job id */
        guint64 h = 1469598103934665603ull;
        for (const char *p = id; *p; p++) {
            h = (h ^ (guchar)*p) * 1099511628211ull;
        }
        env->master_port = JOB_PORT_FIRST + (int)(h % JOB_PORT_COUNT);
    } else if (!has_port && strcmp(env->source, "tandem") == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "TDM_RANK is set but TDM_MASTER_PORT is not");
        return FALSE;
    }

    const char *token = g_getenv("TDM_STORE_TOKEN");
    if (token != NULL) {
        env->token = g_strdup(token);
    } else if (id != NULL) {
        g_autofree char *seed = g_strconcat("tandem-store-token:", id, NULL);
        env->token = g_compute_checksum_for_string(G_CHECKSUM_SHA256, seed, -1);
    }
    return TRUE;
}

gboolean tdm_dist_env_read(TdmDistEnv *env, GError **error)
{
    g_return_val_if_fail(env != NULL, FALSE);
    memset(env, 0, sizeof *env);
    env->world_size = env->local_world_size = env->nnodes = 1;
    env->source = "none";
    const EnvNames *nm = NULL;
    for (gsize i = 0; i < G_N_ELEMENTS(env_names); i++) {
        if (g_getenv(env_names[i].rank) != NULL) {
            nm = &env_names[i];
            env->source = nm->source;
            break;
        }
    }
    if ((nm != NULL && !read_counts(env, nm, error)) || !read_store_address(env, error)) {
        tdm_dist_env_clear(env);
        return FALSE;
    }
    return TRUE;
}

void tdm_dist_env_clear(TdmDistEnv *env)
{
    if (env == NULL) {
        return;
    }
    g_clear_pointer(&env->master_addr, g_free);
    g_clear_pointer(&env->token, g_free);
}

/* TDM_TIMEOUT, or the store's default. */
static double job_timeout(void)
{
    const char *s = g_getenv("TDM_TIMEOUT");
    double v = s ? g_ascii_strtod(s, NULL) : 0.0;
    return v > 0.0 ? v : TDM_STORE_DEFAULT_TIMEOUT;
}

TdmStore *tdm_store_connect_from_env(GError **error)
{
    TdmDistEnv env;
    if (!tdm_dist_env_read(&env, error)) {
        return NULL;
    }
    TdmStore *store = NULL;
    if (env.master_port <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "no store to connect to: TDM_MASTER_PORT (or MASTER_PORT) is not set");
    } else {
        double timeout = job_timeout();
        store = tdm_store_connect(env.master_addr, env.master_port, env.token, timeout, error);
        if (store != NULL) {
            tdm_store_set_timeout(store, timeout);
        }
    }
    tdm_dist_env_clear(&env);
    return store;
}

/* Connect to the job's store; rank 0 serves it first when no launcher does
 * (mpirun, srun, torchrun, or a process started alone). The caller frees
 * the store, then (after a last barrier) the server. */
TdmStore *tdm_store_open_for_job(const TdmDistEnv *env, TdmStoreServer **server_out,
                                 GError **error)
{
    g_return_val_if_fail(env != NULL && server_out != NULL, NULL);
    *server_out = NULL;
    double timeout = job_timeout();
    const char *addr = env->master_addr ? env->master_addr : "127.0.0.1";
    int port = env->master_port;
    g_autofree char *token = g_strdup(env->token);
    gboolean launcher = strcmp(env->source, "tandem") == 0;
    if (!launcher && env->world_size == 1 && strcmp(env->source, "none") == 0) {
        /* alone: a private store on any free port */
        guint8 raw[TOKEN_RANDOM_BYTES];
        for (int i = 0; i < TOKEN_RANDOM_BYTES; i++) {
            raw[i] = (guint8)g_random_int();
        }
        g_free(token);
        token = g_compute_checksum_for_data(G_CHECKSUM_SHA256, raw, sizeof raw);
        port = 0;
        addr = "127.0.0.1";
    }
    if (!launcher && env->rank == 0) {
        const char *bind = env->nnodes > 1 || !is_loopback(addr) ? "0.0.0.0" : "127.0.0.1";
        *server_out = tdm_store_server_new(bind, port, token, error);
        if (*server_out == NULL) {
            g_prefix_error(error, "rank 0 serves the job's store (%s source; set MASTER_PORT "
                                  "to choose another port): ",
                           env->source);
            return NULL;
        }
        port = tdm_store_server_get_port(*server_out);
    } else if (port <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "no store port for this job: set TDM_MASTER_PORT or MASTER_PORT");
        return NULL;
    }
    TdmStore *store = tdm_store_connect(addr, port, token, timeout, error);
    if (store == NULL) {
        g_clear_pointer(server_out, tdm_store_server_free);
        return NULL;
    }
    tdm_store_set_timeout(store, timeout);
    return store;
}

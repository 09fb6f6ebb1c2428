/* SPDX-License-Identifier: MIT */
/* tools/run.h - what `tandem run`'s launcher (tools/cmd-run.c) shares with
 * its multi-node rendezvous (tools/run-rdzv.c): the parsed options, the job
 * being run, and the flag the signal handlers set.
 */
#ifndef TDM_TOOLS_RUN_H
#define TDM_TOOLS_RUN_H

#include <signal.h>

#include <tandem/tandem.h>

/* How often a waiting launcher looks for another node's failure. */
#define POLL_FAILED_S 0.5

typedef struct {
    int nproc, nnodes, node_rank, master_port, max_restarts;
    int gpus; /* > 0: a GPU job (`gpu`, `auto`): local rank i drives cuda:i */
    double timeout;
    const char *master_addr, *token;
    char **cmd;
} RunOptions;

typedef struct {
    int rank;
    int gpu; /* the cuda device it drives, or -1 */
    pid_t pid;
    gboolean reaped;
    int status;
    int fd[2];       /* stdout, stderr pipes; -1 once closed */
    GString *buf[2]; /* partial lines */
} Worker;

typedef struct {
    RunOptions opt;
    TdmStoreServer *server;
    TdmStore *store;
    char *store_addr;
    int port;
    char *token;
    int world, rank_offset, attempt;
    Worker *workers;
    int interrupt_sig;
} Job;

/* cmd-run.c: the stop signal received (SIGINT, SIGTERM, SIGHUP), or 0. */
extern volatile sig_atomic_t pending_stop_sig;
/* "SIGKILL" (or "signal 42") into buf, of SIGNAL_NAME_LEN bytes. */
#define SIGNAL_NAME_LEN 32
const char *signal_name(int sig, char *buf, gsize size);

/* run-rdzv.c */
/* Connect to node 0's store, retrying until the job's timeout. */
gboolean connect_store(Job *job, GError **error);
/* Register this node for the attempt, wait for all, number the ranks. */
gboolean rendezvous(Job *job, GError **error);
/* Node 0 keeps the store up until every node's workers are done with it. */
gboolean finish_nodes(Job *job, GError **error);

/* run-nproc.c: --nproc-per-node `gpu` or `auto` sets o->nproc and o->gpus
 * (nproc -1 after printing why a `gpu` job has no GPU) and returns TRUE;
 * FALSE for any other value (a number, parsed by the caller). */
gboolean run_resolve_nproc(const char *value, RunOptions *o);

#endif /* TDM_TOOLS_RUN_H */

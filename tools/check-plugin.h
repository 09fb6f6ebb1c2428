/* SPDX-License-Identifier: MIT */
/* tools/check-plugin.h - the parts of `tandem check-plugin` (tools/cmd-
 * check-plugin.c drives; one file per kind of check). Each check prints
 * its own "PASS ..."/"FAIL ..."/"SKIP ..." lines and returns which. */
#ifndef TDM_TOOLS_CHECK_PLUGIN_H
#define TDM_TOOLS_CHECK_PLUGIN_H

#include <stdio.h>

#include <tandem/tandem.h>

typedef enum { CHECK_PASS = 0, CHECK_FAIL, CHECK_SKIP } CheckResult;

typedef struct {
    const char *file;     /* the plugin file under test */
    const char *self;     /* this program's executable, for child processes */
    double timeout_s;     /* collectives and the rendezvous */
    int max_world;        /* collectives run on 2..max_world processes */
    gboolean verbose;     /* show the children's whole output */
    const char *strategy; /* --strategy: "name key=value ..." for that strategy, or NULL */
} CheckOptions;

/* Prints "RESULT what: detail" and returns the result. */
CheckResult check_report(CheckResult r, const char *what, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* check-plugin-backend.c: the op-by-op conformance suite against ref, run
 * as the helper program tandem-conformance. */
CheckResult check_backend(const CheckOptions *o, TdmFeature *f);
/* check-plugin-collective.c: every op on 2..max_world local processes
 * (`tandem run`), and the worker those processes run. */
CheckResult check_collective(const CheckOptions *o, TdmFeature *f);
int check_collective_worker(const char *name, double timeout_s);
/* A worker's place in the job `tandem run` started: its environment, the
 * job's store, a ref device and a communicator of a collective. */
typedef struct {
    TdmDistEnv env;
    TdmStoreServer *server;
    TdmStore *store;
    TdmDevice *dev;
    TdmComm *comm;
} CheckWorker;
/* Joins the job with collective `name` (timeout_s for every wait). FALSE
 * when the environment cannot be read (said on stderr; nothing to close);
 * else w->comm is NULL with *error set when the store, device or
 * collective could not be had. */
gboolean check_worker_open(CheckWorker *w, const char *name, double timeout_s, GError **error);
/* Says error on stderr with the rank when !ok (and frees it), closes w;
 * the worker's exit status. */
int check_worker_close(CheckWorker *w, gboolean ok, GError *error);
/* Runs `tandem run --nproc-per-node WORLD -- tandem check-plugin --timeout
 * T WORKER_ARGS... FILE` under a time limit; *out (transfer full) gets the
 * job's output (or why it did not start). TRUE when the job succeeded;
 * *timed_out says whether it ran out of time. */
gboolean check_spawn_job(const CheckOptions *o, int world, char **worker_args, char **out,
                         gboolean *timed_out);
/* check-plugin-train.c: a strategy equals `single` in a world of one and
 * ends with the same weights on every rank of 2 (the worker is one rank of
 * that job, writing its weights under DIR); a transform is deterministic
 * per (seed, epoch, index) and makes the shape it declares. */
CheckResult check_strategy(const CheckOptions *o, TdmFeature *f);
int check_strategy_worker(const char *spec, const char *dir, double timeout_s);
CheckResult check_transform(const CheckOptions *o, TdmFeature *f);

#endif /* TDM_TOOLS_CHECK_PLUGIN_H */

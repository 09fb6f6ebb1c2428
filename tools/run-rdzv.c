/* SPDX-License-Identifier: MIT */
/* tools/run-rdzv.c - the multi-node rendezvous of `tandem run`: every
 * launcher (node 0's included) connects to node 0's store, registers its
 * node for the current attempt ("rdzv/<attempt>/node/<r>" = "<nproc>
 * <host>") and waits for all nodes; ranks are numbered by node order, so
 * nodes may run different process counts. At the end of a good attempt each
 * node sets "done/<attempt>/node/<r>" and node 0 waits for them all before
 * taking the store down. Every wait is in short slices, so a stop signal or
 * another node's "job/<attempt>/failed" ends it early.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <tandem/tandem.h>

#include "run.h"

/* Wait for `keys` until the job's timeout, in short slices so that a
 * signal or `abort_key` (set by a failing node) ends the wait early. */
static gboolean wait_keys(Job *job, const char *const *keys, const char *abort_key,
                          const char *what, GError **error)
{
    double deadline = tdm_time_now() + job->opt.timeout;
    tdm_store_set_timeout(job->store, POLL_FAILED_S);
    for (;;) {
        GError *local = NULL;
        if (pending_stop_sig != 0) {
            char sname[SIGNAL_NAME_LEN];
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "%s: interrupted by %s", what,
                        signal_name(pending_stop_sig, sname, sizeof sname));
            return FALSE;
        }
        if (tdm_store_wait(job->store, keys, &local)) {
            return TRUE;
        }
        if (!g_error_matches(local, TDM_ERROR, TDM_ERROR_TIMEOUT)) {
            g_propagate_prefixed_error(error, local, "%s: ", what);
            return FALSE;
        }
        g_error_free(local);
        gboolean aborted = FALSE;
        if (abort_key && tdm_store_check(job->store, abort_key, &aborted, NULL) && aborted) {
            GBytes *v = tdm_store_get(job->store, abort_key, NULL);
            gsize len = 0;
            const char *p = v ? g_bytes_get_data(v, &len) : "";
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "%s: %.*s", what, (int)len, p);
            if (v) {
                g_bytes_unref(v);
            }
            return FALSE;
        }
        if (tdm_time_now() >= deadline) {
            GString *missing = g_string_new(NULL);
            for (int i = 0; keys[i] != NULL; i++) {
                gboolean there = FALSE;
                tdm_store_check(job->store, keys[i], &there, NULL);
                if (!there) {
                    g_string_append_printf(missing, "%s%s", missing->len ? ", " : "",
                                           strrchr(keys[i], '/') + 1);
                }
            }
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "%s: timed out after %.1f s waiting for node(s) %s", what,
                        job->opt.timeout, missing->str);
            g_string_free(missing, TRUE);
            return FALSE;
        }
    }
}

static char **node_keys(Job *job, const char *kind)
{
    char **keys = g_new0(char *, job->opt.nnodes + 1);
    for (int i = 0; i < job->opt.nnodes; i++) {
        keys[i] = g_strdup_printf("%s/%d/node/%d", kind, job->attempt, i);
    }
    return keys;
}

gboolean rendezvous(Job *job, GError **error)
{
    const RunOptions *o = &job->opt;
    g_auto(GStrv) keys = node_keys(job, "rdzv");
    g_autofree char *mine = g_strdup_printf("%d %s", o->nproc, g_get_host_name());
    g_autoptr(GBytes) desired = g_bytes_new(mine, strlen(mine));
    tdm_store_set_timeout(job->store, o->timeout);
    g_autoptr(GBytes) now = tdm_store_compare_set(job->store, keys[o->node_rank], NULL, desired,
                                                  error);
    if (now == NULL) {
        g_prefix_error(error, "rendezvous: ");
        return FALSE;
    }
    if (!g_bytes_equal(now, desired)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "rendezvous: node rank %d was taken by another launcher (%.*s)",
                    o->node_rank, (int)g_bytes_get_size(now),
                    (const char *)g_bytes_get_data(now, NULL));
        return FALSE;
    }
    g_autofree char *abort_key = g_strdup_printf("job/%d/failed", job->attempt);
    if (!wait_keys(job, (const char *const *)keys, abort_key, "rendezvous", error)) {
        return FALSE;
    }
    tdm_store_set_timeout(job->store, o->timeout);
    job->world = job->rank_offset = 0;
    for (int i = 0; i < o->nnodes; i++) {
        g_autoptr(GBytes) v = tdm_store_get(job->store, keys[i], error);
        if (v == NULL) {
            return FALSE;
        }
        g_autofree char *s = g_strndup(g_bytes_get_data(v, NULL), g_bytes_get_size(v));
        int nproc = atoi(s);
        if (nproc < 1) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                        "rendezvous: node %d registered '%s', not a process count", i, s);
            return FALSE;
        }
        if (i < o->node_rank) {
            job->rank_offset += nproc;
        }
        job->world += nproc;
    }
    return TRUE;
}

/* Node 0 keeps the store up until every node's workers are done with it. */
gboolean finish_nodes(Job *job, GError **error)
{
    if (job->opt.nnodes == 1) {
        return TRUE;
    }
    g_autofree char *key = g_strdup_printf("done/%d/node/%d", job->attempt, job->opt.node_rank);
    if (!tdm_store_set(job->store, key, "1", 1, error)) {
        return FALSE;
    }
    if (job->opt.node_rank != 0) {
        return TRUE;
    }
    g_auto(GStrv) keys = node_keys(job, "done");
    g_autofree char *abort_key = g_strdup_printf("job/%d/failed", job->attempt);
    return wait_keys(job, (const char *const *)keys, abort_key, "waiting for the other nodes",
                     error);
}

gboolean connect_store(Job *job, GError **error)
{
    double deadline = tdm_time_now() + job->opt.timeout;
    for (;;) {
        GError *local = NULL;
        job->store = tdm_store_connect(job->opt.master_addr, job->port, job->token, 1.0, &local);
        if (job->store != NULL) {
            return TRUE;
        }
        if (pending_stop_sig != 0 || tdm_time_now() >= deadline ||
            !g_error_matches(local, TDM_ERROR, TDM_ERROR_TIMEOUT)) {
            g_propagate_prefixed_error(error, local, "cannot reach node 0's store (%.1f s): ",
                                       job->opt.timeout);
            return FALSE;
        }
        g_error_free(local);
    }
}

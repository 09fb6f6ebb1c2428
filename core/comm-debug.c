/* SPDX-License-Identifier: MIT */
/* core/comm-debug.c - the collective front end's checks across ranks, kept
 * apart from the issue and wait path of comm.c: in debug mode
 * (TDM_DEBUG=collectives) every rank posts to the store what it is about to
 * run for each sequence number and compares it with every other rank's
 * post, so that a mismatched or skipped call is named instead of hanging;
 * after a timeout the plugin could not explain, the ranks stuck in the same
 * call tell the store, and those that never did are the ones named.
 */
#include "config.h"

#include <string.h>

#include "comm-private.h"
#include "internal.h"

/* Polling the store for the other ranks' debug posts: from this interval,
 * doubled up to the cap (a check usually finds them at once). */
#define DEBUG_POLL_FIRST_US 50
#define DEBUG_POLL_MAX_US 20000
/* How long a timed-out call asks the store which ranks are stuck with it:
 * a tenth of the timeout within these bounds, polled at this interval. */
#define STUCK_GRACE_MIN_S 1.0
#define STUCK_GRACE_MAX_S 5.0
#define STUCK_POLL_US 20000

/* ---- debug mode: every rank compares what it runs with everyone ---- */

static char *debug_key(CommImpl *impl, guint64 seq, int rank)
{
    return g_strdup_printf("%s/dbg/%" G_GUINT64_FORMAT "/%d", impl->key_prefix, seq, rank);
}

static char *last_key(CommImpl *impl, int rank)
{
    return g_strdup_printf("%s/last/%d", impl->key_prefix, rank);
}

/* The last sequence number `rank` posted, or 0 when it posted none. */
static guint64 debug_last_seq(CommImpl *impl, int rank)
{
    TdmStore *store = impl->pub.store;
    g_autofree char *key = last_key(impl, rank);
    gboolean exists = FALSE;
    if (!tdm_store_check(store, key, &exists, NULL) || !exists) {
        return 0;
    }
    GBytes *value = tdm_store_get(store, key, NULL);
    if (value == NULL) {
        return 0;
    }
    gsize len = 0;
    const char *data = g_bytes_get_data(value, &len);
    g_autofree char *text = g_strndup(data, len);
    g_bytes_unref(value);
    return g_ascii_strtoull(text, NULL, 10);
}

gboolean comm_debug_check(CommImpl *impl, const TdmCommWork *w, GError **error)
{
    TdmComm *comm = &impl->pub;
    TdmStore *store = comm->store;
    const int world = comm->world;
    g_autofree char *mine = comm_work_describe_call(w);
    g_autofree char *my_key = debug_key(impl, w->seq, comm->rank);
    g_autofree char *my_last = last_key(impl, comm->rank);
    g_autofree char *seq_text = g_strdup_printf("%" G_GUINT64_FORMAT, w->seq);
    if (!tdm_store_set(store, my_key, mine, strlen(mine), error) ||
        !tdm_store_set(store, my_last, seq_text, strlen(seq_text), error)) {
        g_prefix_error(error,
                       "collective debug check at #%" G_GUINT64_FORMAT " on rank %d: ", w->seq,
                       comm->rank);
        return FALSE;
    }

    char **calls = g_new0(char *, (gsize)world + 1);
    gboolean ok = TRUE;
    const double deadline = tdm_time_now() + comm->opts.timeout_s;
    gulong sleep_us = DEBUG_POLL_FIRST_US;
    int pending = world;
    while (pending > 0 && ok) {
        pending = 0;
        for (int r = 0; r < world && ok; r++) {
            if (calls[r] != NULL) {
                continue;
            }
            g_autofree char *key = debug_key(impl, w->seq, r);
            gboolean exists = FALSE;
            if (!tdm_store_check(store, key, &exists, error)) {
                ok = FALSE;
            } else if (exists) {
                GBytes *value = tdm_store_get(store, key, error);
                if (value == NULL) {
                    ok = FALSE;
                } else {
                    gsize len = 0;
                    const char *data = g_bytes_get_data(value, &len);
                    calls[r] = g_strndup(data, len);
                    g_bytes_unref(value);
                }
            } else {
                pending++;
            }
        }
        if (!ok) {
            g_prefix_error(error,
                           "collective debug check at #%" G_GUINT64_FORMAT " on rank %d: ", w->seq,
                           comm->rank);
            break;
        }
        if (pending > 0) {
            if (tdm_time_now() >= deadline) {
                GString *who = g_string_new(NULL);
                GString *last = g_string_new(NULL);
                for (int r = 0; r < world; r++) {
                    if (calls[r] == NULL) {
                        guint64 l = debug_last_seq(impl, r);
                        g_string_append_printf(who, "%s%d", who->len > 0 ? ", " : "", r);
                        if (l > 0) {
                            g_string_append_printf(
                                last, "; rank %d's last call was #%" G_GUINT64_FORMAT, r, l);
                        } else {
                            g_string_append_printf(last, "; rank %d issued no collective", r);
                        }
                    }
                }
                g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                            "collective #%" G_GUINT64_FORMAT
                            " %s on rank %d: ranks %s never issued "
                            "it within %.1f s%s",
                            w->seq, mine, comm->rank, who->str, comm->opts.timeout_s, last->str);
                g_string_free(who, TRUE);
                g_string_free(last, TRUE);
                ok = FALSE;
                break;
            }
            g_usleep(sleep_us);
            sleep_us = MIN(sleep_us * 2, DEBUG_POLL_MAX_US);
        }
    }
    if (ok) {
        /* The reference is what most ranks called (rank 0's on a tie), so
         * the rank named is the odd one out even when it is rank 0. */
        int ref = 0, ref_votes = 0;
        for (int r = 0; r < world; r++) {
            int votes = 0;
            for (int q = 0; q < world; q++) {
                votes += strcmp(calls[q], calls[r]) == 0;
            }
            if (votes > ref_votes) {
                ref = r;
                ref_votes = votes;
            }
        }
        for (int r = 0; r < world; r++) {
            if (strcmp(calls[r], calls[ref]) != 0) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                            "collective mismatch at #%" G_GUINT64_FORMAT
                            ": rank %d called %s, rank %d called %s",
                            w->seq, ref, calls[ref], r, calls[r]);
                ok = FALSE;
                break;
            }
        }
    }
    if (ok && w->seq > 1) {
        /* Every rank posted #seq, so every rank is done reading #seq-1. */
        g_autofree char *old = debug_key(impl, w->seq - 1, comm->rank);
        tdm_store_delete(store, old, NULL, NULL);
    }
    g_strfreev(calls);
    return ok;
}

/* After a timeout that the plugin could not explain: every rank that times
 * out posts the call it is stuck in, then waits a short grace for the
 * others' posts. Ranks stuck in the same call did arrive; the others (dead,
 * hung elsewhere, or behind) did not. In debug mode the per-rank last-call
 * keys settle it at once. Costs nothing until something has gone wrong.
 * Returns the missing ranks, -1 terminated, or NULL when unknown. */
int *comm_missing_from_store(CommImpl *impl, guint64 seq)
{
    TdmComm *comm = &impl->pub;
    if (comm->store == NULL || comm->world < 2) {
        return NULL;
    }
    int *missing = g_new(int, (gsize)comm->world + 1);
    int n = 0;
    if (comm->opts.debug) {
        for (int r = 0; r < comm->world; r++) {
            if (debug_last_seq(impl, r) < seq) {
                missing[n++] = r;
            }
        }
        missing[n] = -1;
        return missing;
    }
    g_autofree char *mine = g_strdup_printf("%s/stuck/%d", impl->key_prefix, comm->rank);
    g_autofree char *text = g_strdup_printf("%" G_GUINT64_FORMAT, seq);
    if (!tdm_store_set(comm->store, mine, text, strlen(text), NULL)) {
        g_free(missing);
        return NULL;
    }
    gboolean *seen = g_new0(gboolean, (gsize)comm->world);
    seen[comm->rank] = TRUE;
    const double grace = CLAMP(comm->opts.timeout_s / 10, STUCK_GRACE_MIN_S, STUCK_GRACE_MAX_S);
    const double deadline = tdm_time_now() + grace;
    int pending = comm->world - 1;
    while (pending > 0 && tdm_time_now() < deadline) {
        for (int r = 0; r < comm->world; r++) {
            if (seen[r]) {
                continue;
            }
            g_autofree char *key = g_strdup_printf("%s/stuck/%d", impl->key_prefix, r);
            gboolean exists = FALSE;
            if (tdm_store_check(comm->store, key, &exists, NULL) && exists) {
                GBytes *value = tdm_store_get(comm->store, key, NULL);
                if (value != NULL) {
                    gsize len = 0;
                    const char *data = g_bytes_get_data(value, &len);
                    g_autofree char *theirs = g_strndup(data, len);
                    /* Stuck in another call: it never reached this one. */
                    seen[r] = g_ascii_strtoull(theirs, NULL, 10) == seq;
                    pending -= seen[r];
                    g_bytes_unref(value);
                }
            }
        }
        if (pending > 0) {
            g_usleep(STUCK_POLL_US);
        }
    }
    for (int r = 0; r < comm->world; r++) {
        if (!seen[r]) {
            missing[n++] = r;
        }
    }
    missing[n] = -1;
    g_free(seen);
    return missing;
}

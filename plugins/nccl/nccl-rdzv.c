/* SPDX-License-Identifier: MIT */
/* plugins/nccl/nccl-rdzv.c - the nccl plugin's rendezvous through Tandem's
 * store: the duplicate-GPU check, the unique-id exchange and the arrival
 * marks (see nccl-rdzv.h). Waits poll tdm_store_check with a growing pause
 * rather than block in tdm_store_get, so that each wait has its own
 * deadline (the store's timeout is shared with the rest of the process)
 * and its error can name the rank it waited for.
 */
#include "config.h"

#include <string.h>

#include "nccl-rdzv.h"

#define RDZV_PAUSE_MIN_US 1000
#define RDZV_PAUSE_MAX_US 50000

static const char *restart_generation(void)
{
    const char *gen = g_getenv("TDM_RESTART_COUNT");
    if (gen == NULL) {
        gen = g_getenv("TORCHELASTIC_RESTART_COUNT");
    }
    return gen != NULL ? gen : "0";
}

void nccl_rdzv_init(NcclRdzv *rz, TdmStore *store, int rank, int world, double timeout_s, int probe)
{
    /* A digest, not the token itself: keys show up in debug logs. */
    const char *token = g_getenv("TDM_STORE_TOKEN");
    g_autofree char *digest =
        g_compute_checksum_for_string(G_CHECKSUM_SHA256, token != NULL ? token : "", -1);
    digest[16] = '\0';
    rz->store = store;
    rz->rank = rank;
    rz->world = world;
    rz->timeout_s = timeout_s;
    rz->prefix = g_strdup_printf("tdm/nccl/%s/%s/%d", digest, restart_generation(), probe);
}

void nccl_rdzv_clear(NcclRdzv *rz)
{
    g_clear_pointer(&rz->prefix, g_free);
}

char *nccl_rdzv_ranks_text(const int *ranks)
{
    GString *s = g_string_new(NULL);
    for (int i = 0; ranks != NULL && ranks[i] >= 0; i++) {
        g_string_append_printf(s, "%s%d", i > 0 ? ", " : "", ranks[i]);
    }
    return g_string_free(s, FALSE);
}

/* Wait until `key` exists, at most until `deadline` (monotonic us).
 * FALSE with error unset on timeout, set on a store failure. */
static gboolean wait_key(NcclRdzv *rz, const char *key, gint64 deadline, GError **error)
{
    gint64 pause = RDZV_PAUSE_MIN_US;
    for (;;) {
        gboolean exists = FALSE;
        if (!tdm_store_check(rz->store, key, &exists, error)) {
            return FALSE;
        }
        if (exists) {
            return TRUE;
        }
        gint64 now = g_get_monotonic_time();
        if (now >= deadline) {
            return FALSE;
        }
        g_usleep((gulong)MIN(pause, deadline - now));
        pause = MIN(pause * 2, RDZV_PAUSE_MAX_US);
    }
}

static gint64 deadline_of(const NcclRdzv *rz)
{
    return g_get_monotonic_time() + (gint64)(rz->timeout_s * G_TIME_SPAN_SECOND);
}

/* The identity text: "host\tbus id". */
static char *identity_of(const NcclRdzvSeam *seam, GError **error)
{
    g_autofree char *bus = seam->gpu_bus_id(seam->ctx, error);
    if (bus == NULL) {
        return NULL;
    }
    g_autofree char *host = seam->host_name(seam->ctx);
    /* Bus ids differ in case between tools (nvidia-smi, CUDA). */
    g_autofree char *bus_low = g_ascii_strdown(bus, -1);
    return g_strdup_printf("%s\t%s", host, bus_low);
}

gboolean nccl_rdzv_check_gpus(NcclRdzv *rz, const NcclRdzvSeam *seam, char **reason)
{
    GError *error = NULL;
    g_autofree char *mine = identity_of(seam, &error);
    if (mine == NULL) {
        *reason = g_strdup_printf("rank %d cannot name its GPU: %s", rz->rank, error->message);
        g_error_free(error);
        return FALSE;
    }
    g_autofree char *my_key = g_strdup_printf("%s/gpu/%d", rz->prefix, rz->rank);
    if (!tdm_store_set(rz->store, my_key, mine, strlen(mine), &error)) {
        *reason = g_strdup_printf("rank %d cannot post its GPU to the store: %s", rz->rank,
                                  error->message);
        g_error_free(error);
        return FALSE;
    }
    gint64 deadline = deadline_of(rz);
    char **ids = g_new0(char *, (gsize)rz->world + 1);
    gboolean ok = TRUE;
    for (int r = 0; r < rz->world && ok; r++) {
        g_autofree char *key = g_strdup_printf("%s/gpu/%d", rz->prefix, r);
        if (!wait_key(rz, key, deadline, &error)) {
            *reason = error != NULL
                          ? g_strdup_printf("rank %d cannot read rank %d's GPU from the store: %s",
                                            rz->rank, r, error->message)
                          : g_strdup_printf("rank %d waited %.1f s for rank %d's GPU identity; "
                                            "rank %d never posted it",
                                            rz->rank, rz->timeout_s, r, r);
            g_clear_error(&error);
            ok = FALSE;
            break;
        }
        GBytes *value = tdm_store_get(rz->store, key, &error);
        if (value == NULL) {
            *reason = g_strdup_printf("rank %d cannot read rank %d's GPU from the store: %s",
                                      rz->rank, r, error->message);
            g_clear_error(&error);
            ok = FALSE;
            break;
        }
        gsize len = 0;
        const char *data = g_bytes_get_data(value, &len);
        ids[r] = g_strndup(data, len);
        g_bytes_unref(value);
    }
    /* The first pair in rank order, so every rank gives the same reason. */
    for (int a = 0; ok && a < rz->world; a++) {
        for (int b = a + 1; ok && b < rz->world; b++) {
            if (strcmp(ids[a], ids[b]) != 0) {
                continue;
            }
            const char *tab = strchr(ids[a], '\t');
            int host_len = tab != NULL ? (int)(tab - ids[a]) : (int)strlen(ids[a]);
            *reason = g_strdup_printf("ranks %d and %d are both on GPU %s of host %.*s: NCCL "
                                      "needs one GPU per rank; use --collective shm "
                                      "(host-staged) or one process per GPU",
                                      a, b, tab != NULL ? tab + 1 : "?", host_len, ids[a]);
            ok = FALSE;
        }
    }
    g_strfreev(ids);
    return ok;
}

gboolean nccl_rdzv_exchange_id(NcclRdzv *rz, const NcclRdzvSeam *seam,
                               guint8 id[NCCL_RDZV_ID_BYTES], GError **error)
{
    g_autofree char *key = g_strdup_printf("%s/unique-id", rz->prefix);
    if (rz->rank == 0) {
        if (!seam->unique_id(seam->ctx, id, error)) {
            return FALSE;
        }
        return tdm_store_set(rz->store, key, id, NCCL_RDZV_ID_BYTES, error);
    }
    GError *local = NULL;
    if (!wait_key(rz, key, deadline_of(rz), &local)) {
        if (local != NULL) {
            g_propagate_prefixed_error(
                error, local, "nccl: rank %d cannot read the unique id from the store: ", rz->rank);
        } else {
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "nccl: rank %d waited %.1f s for the NCCL unique id from rank 0; rank 0 "
                        "never published it",
                        rz->rank, rz->timeout_s);
        }
        return FALSE;
    }
    GBytes *value = tdm_store_get(rz->store, key, error);
    if (value == NULL) {
        return FALSE;
    }
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(value, &len);
    gboolean ok = len == NCCL_RDZV_ID_BYTES;
    if (ok) {
        memcpy(id, data, NCCL_RDZV_ID_BYTES);
    } else {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "nccl: rank 0's unique id has %" G_GSIZE_FORMAT " bytes, not %d", len,
                    NCCL_RDZV_ID_BYTES);
    }
    g_bytes_unref(value);
    return ok;
}

gboolean nccl_rdzv_arrive(NcclRdzv *rz, GError **error)
{
    g_autofree char *key = g_strdup_printf("%s/arrived/%d", rz->prefix, rz->rank);
    return tdm_store_set(rz->store, key, "1", 1, error);
}

int *nccl_rdzv_missing(NcclRdzv *rz)
{
    int *missing = g_new(int, (gsize)rz->world + 1);
    int n = 0;
    for (int r = 0; r < rz->world; r++) {
        g_autofree char *key = g_strdup_printf("%s/arrived/%d", rz->prefix, r);
        gboolean exists = FALSE;
        if (!tdm_store_check(rz->store, key, &exists, NULL)) {
            g_free(missing);
            return NULL;
        }
        if (!exists) {
            missing[n++] = r;
        }
    }
    missing[n] = -1;
    return missing;
}

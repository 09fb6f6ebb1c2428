/* SPDX-License-Identifier: MIT */
/* core/ops-profile.c - TDM_PROFILE: the time spent in each op front end.
 *
 * With TDM_PROFILE set (to anything but "" or "0") when the library loads,
 * every tdm_op_* call (and tdm_tensor_reorder, tdm_tensor_read: the row
 * "read" counts the run's waits for a device, and tdm_tensor_copy_across:
 * "copy_peer" or "copy_staged") synchronizes its device
 * before and after the backend runs, so that an asynchronous backend is
 * charged for the op itself rather than for whatever was queued before it,
 * and adds the elapsed time to a row per (backend, op). The table goes to
 * stderr when the process exits: calls, total milliseconds, mean
 * microseconds and share of the backend's op time, largest first. The
 * synchronization makes a profiled run slower than a plain one on an
 * asynchronous device; the table says where the time goes, not how fast the
 * run is. Unset, a front end pays one branch on tdm_ops_profiling.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops-private.h"

/* More distinct backends than this in one process share the last row. */
#define PROFILE_MAX_BACKENDS 8
/* A backend's name in the report (longer ones are cut). */
#define PROFILE_NAME_LEN 32

static const char *const op_names[TDM_OPID_N] = {
    [TDM_OPID_GEMM] = "gemm",
    [TDM_OPID_BIAS_GRAD] = "bias_grad",
    [TDM_OPID_CONV2D_FORWARD] = "conv2d_forward",
    [TDM_OPID_CONV2D_RELU_FORWARD] = "conv2d_relu_forward",
    [TDM_OPID_CONV2D_BACKWARD_DATA] = "conv2d_backward_data",
    [TDM_OPID_CONV2D_BACKWARD_FILTER] = "conv2d_backward_filter",
    [TDM_OPID_BATCHNORM_FORWARD] = "batchnorm_forward",
    [TDM_OPID_BATCHNORM_BACKWARD] = "batchnorm_backward",
    [TDM_OPID_BATCHNORM_RELU_FORWARD] = "batchnorm_relu_forward",
    [TDM_OPID_BATCHNORM_RELU_BACKWARD] = "batchnorm_relu_backward",
    [TDM_OPID_RELU_FORWARD] = "relu_forward",
    [TDM_OPID_RELU_BACKWARD] = "relu_backward",
    [TDM_OPID_ADD] = "add",
    [TDM_OPID_ADD_RELU] = "add_relu",
    [TDM_OPID_MAXPOOL2D_FORWARD] = "maxpool2d_forward",
    [TDM_OPID_MAXPOOL2D_BACKWARD] = "maxpool2d_backward",
    [TDM_OPID_AVGPOOL2D_FORWARD] = "avgpool2d_forward",
    [TDM_OPID_AVGPOOL2D_BACKWARD] = "avgpool2d_backward",
    [TDM_OPID_GLOBAL_AVGPOOL_FORWARD] = "global_avgpool_forward",
    [TDM_OPID_GLOBAL_AVGPOOL_BACKWARD] = "global_avgpool_backward",
    [TDM_OPID_SOFTMAX_XENT] = "softmax_xent",
    [TDM_OPID_SOFTMAX_XENT_STATS] = "softmax_xent_stats",
    [TDM_OPID_DROPOUT_FORWARD] = "dropout_forward",
    [TDM_OPID_DROPOUT_BACKWARD] = "dropout_backward",
    [TDM_OPID_FILL] = "fill",
    [TDM_OPID_COPY] = "copy",
    [TDM_OPID_SCALE] = "scale",
    [TDM_OPID_AXPY] = "axpy",
    [TDM_OPID_SUM_SQUARES] = "sum_squares",
    [TDM_OPID_CAST] = "cast",
    [TDM_OPID_SGD_UPDATE] = "sgd_update",
    [TDM_OPID_ADAMW_UPDATE] = "adamw_update",
    [TDM_OPID_SGD_UPDATE_ZERO_GRAD] = "sgd_update_zero_grad",
    [TDM_OPID_ADAMW_UPDATE_ZERO_GRAD] = "adamw_update_zero_grad",
    [TDM_OPID_REORDER] = "reorder",
    [TDM_OPID_READ] = "read",
    [TDM_OPID_COPY_PEER] = "copy_peer",
    [TDM_OPID_COPY_STAGED] = "copy_staged",
};

typedef struct {
    const TdmBackendClass *backend;
    char name[PROFILE_NAME_LEN]; /* copied: the report runs when plugins may be gone */
    guint64 calls[TDM_OPID_N];
    double seconds[TDM_OPID_N];
} BackendRows;

int tdm_ops_profiling;
static GMutex profile_lock; /* static storage: usable without init */
static BackendRows backends[PROFILE_MAX_BACKENDS];
static int n_backends;

__attribute__((constructor)) static void ops_profile_init(void)
{
    const char *v = getenv("TDM_PROFILE");
    tdm_ops_profiling = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

gboolean tdm_ops_profile_begin(TdmDevice *dev, double *t0, GError **error)
{
    if (!tdm_device_synchronize(dev, error)) {
        g_prefix_error(error, "TDM_PROFILE: waiting for %s before an op: ", dev->name);
        return FALSE;
    }
    *t0 = tdm_time_now();
    return TRUE;
}

static BackendRows *rows_of(const TdmBackendClass *backend)
{
    for (int i = 0; i < n_backends; i++) {
        if (backends[i].backend == backend) {
            return &backends[i];
        }
    }
    if (n_backends < PROFILE_MAX_BACKENDS) {
        backends[n_backends].backend = backend;
        g_strlcpy(backends[n_backends].name,
                  backend->device_type != NULL ? backend->device_type : "?",
                  sizeof backends[n_backends].name);
        return &backends[n_backends++];
    }
    return &backends[PROFILE_MAX_BACKENDS - 1];
}

gboolean tdm_ops_profile_end(TdmOpId id, TdmDevice *dev, double t0, gboolean ok, GError **error)
{
    if (ok && !tdm_device_synchronize(dev, error)) {
        g_prefix_error(error, "TDM_PROFILE: waiting for %s after %s: ", dev->name, op_names[id]);
        ok = FALSE;
    }
    double dt = tdm_time_now() - t0;
    g_mutex_lock(&profile_lock);
    BackendRows *r = rows_of(dev->backend);
    r->calls[id]++;
    r->seconds[id] += dt;
    g_mutex_unlock(&profile_lock);
    return ok;
}

static const BackendRows *sort_rows;

static int by_time_desc(const void *a, const void *b)
{
    double ta = sort_rows->seconds[*(const int *)a], tb = sort_rows->seconds[*(const int *)b];
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

static void print_backend(const BackendRows *r)
{
    int order[TDM_OPID_N], n = 0;
    double total = 0.0;
    guint64 calls = 0;
    for (int i = 0; i < TDM_OPID_N; i++) {
        if (r->calls[i] > 0) {
            order[n++] = i;
            total += r->seconds[i];
            calls += r->calls[i];
        }
    }
    if (n == 0) {
        return;
    }
    sort_rows = r;
    qsort(order, (size_t)n, sizeof(int), by_time_desc);
    fprintf(stderr,
            "# tandem op profile (TDM_PROFILE), backend %s: %.3f s in %" G_GUINT64_FORMAT
            " op calls\n",
            r->name, total, calls);
    fprintf(stderr, "# %-24s %10s %12s %12s %7s\n", "op", "calls", "total ms", "mean us",
            "share %");
    for (int k = 0; k < n; k++) {
        int i = order[k];
        fprintf(stderr, "  %-24s %10" G_GUINT64_FORMAT " %12.2f %12.1f %7.1f\n", op_names[i],
                r->calls[i], r->seconds[i] * 1e3, r->seconds[i] * 1e6 / (double)r->calls[i],
                total > 0.0 ? 100.0 * r->seconds[i] / total : 0.0);
    }
}

__attribute__((destructor)) static void ops_profile_report(void)
{
    if (!tdm_ops_profiling) {
        return;
    }
    g_mutex_lock(&profile_lock);
    for (int i = 0; i < n_backends; i++) {
        print_backend(&backends[i]);
    }
    g_mutex_unlock(&profile_lock);
}

/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-transfer.c - memory, copies, tensor transfers, streams
 * and events, and device information of the cuda backend.
 *
 * Every copy is ordered on one of the device's two streams: the compute
 * stream for everything the ops see (so a copy needs no extra
 * synchronisation against the kernels before and after it), the copy
 * stream only for the loader's host-to-device batches (copy_h2d_on). The
 * host waits only where the contract says so: copy_d2h, read and write
 * return when the data has arrived, synchronous copy_h2d when its source
 * may be reused. Strided plain tensors move with cudaMemcpy2DAsync, one
 * call per row of their outer dimensions, so the copy engine gathers and
 * scatters them without a kernel.
 */
#include "config.h"

#include <string.h>

#include "cuda-backend.h"
#include "cuda-nvml.h"

/* ---- memory ---- */

void *cuda_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    if (!cuda_op_begin(dev, "alloc", error)) {
        return NULL;
    }
    CudaDevice *d = cuda_dev(dev);
    void *p = cuda_alloc_get(d->alloc, nbytes, error);
    /* Zero-filled, as the contract wants, in stream order: the block may
     * have served a tensor that queued kernels still use. */
    gboolean ok = p != NULL && cuda_check(dev, cudaMemsetAsync(p, 0, nbytes, d->compute), "alloc",
                                          "cudaMemsetAsync", error);
    if (!cuda_op_end(dev, "alloc", ok, error)) {
        cuda_alloc_put(d->alloc, p);
        return NULL;
    }
    return p;
}

void cuda_free(TdmDevice *dev, void *ptr, size_t nbytes)
{
    /* No CUDA call: the block goes back to the cache, and work queued later
     * on the compute stream (the only one that touches tensors) runs after
     * the work that used it. */
    cuda_alloc_put(cuda_dev(dev)->alloc, ptr);
}

void *cuda_host_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    return cuda_alloc_get(cuda_dev(dev)->host_alloc, nbytes, error);
}

void cuda_host_free(TdmDevice *dev, void *ptr)
{
    cuda_alloc_put(cuda_dev(dev)->host_alloc, ptr);
}

/* ---- raw copies ---- */

gboolean cuda_copy_h2d(TdmDevice *dev, void *dst, const void *src, size_t n, gboolean async,
                       GError **error)
{
    if (!cuda_op_begin(dev, "copy_h2d", error)) {
        return FALSE;
    }
    CudaDevice *d = cuda_dev(dev);
    gboolean ok =
        n == 0 || cuda_check(dev, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, d->compute),
                             "copy_h2d", "cudaMemcpyAsync (host to device)", error);
    if (ok && !async) {
        /* The caller may reuse `src` at once (pinned memory would still be
         * read by the copy engine). */
        ok = cuda_check(dev, cudaStreamSynchronize(d->compute), "copy_h2d",
                        "cudaStreamSynchronize (compute)", error);
    }
    return cuda_op_end(dev, "copy_h2d", ok, error);
}

gboolean cuda_copy_d2h(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error)
{
    if (!cuda_op_begin(dev, "copy_d2h", error)) {
        return FALSE;
    }
    CudaDevice *d = cuda_dev(dev);
    gboolean ok =
        n == 0 || (cuda_check(dev, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, d->compute),
                              "copy_d2h", "cudaMemcpyAsync (device to host)", error) &&
                   cuda_check(dev, cudaStreamSynchronize(d->compute), "copy_d2h",
                              "cudaStreamSynchronize (compute)", error));
    return cuda_op_end(dev, "copy_d2h", ok, error);
}

gboolean cuda_copy_d2d(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error)
{
    if (!cuda_op_begin(dev, "copy_d2d", error)) {
        return FALSE;
    }
    gboolean ok =
        n == 0 || dst == src ||
        cuda_check(dev,
                   cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cuda_dev(dev)->compute),
                   "copy_d2d", "cudaMemcpyAsync (device to device)", error);
    return cuda_op_end(dev, "copy_d2d", ok, error);
}

/* ---- tensors: strided plain views ---- */

/* Moves the elements of the plain tensor `t` (any strides >= 0) between its
 * device memory and `dense`, a contiguous buffer in plain order (host or
 * device memory, per `kind`): to_dense gathers, !to_dense scatters. The
 * trailing dimensions that are contiguous make one row of `width` bytes;
 * the next dimension out makes the rows of one cudaMemcpy2DAsync; the
 * dimensions further out are walked, one call each. */
static gboolean copy_strided(TdmDevice *dev, const char *op, const TdmTensor *t, void *dense,
                             gboolean to_dense, enum cudaMemcpyKind kind, GError **error)
{
    const int ndim = t->ndim;
    const size_t esize = tdm_dtype_size(t->dtype);
    int64_t numel = tdm_tensor_numel(t);
    if (numel == 0) {
        return TRUE;
    }
    int64_t block = 1; /* elements of one contiguous row */
    int j = ndim - 1;  /* the dimension whose steps make the 2-D rows */
    while (j >= 0 && (t->shape[j] == 1 || t->stride[j] == block)) {
        block *= t->shape[j];
        j--;
    }
    char *base = tdm_tensor_data(t);
    cudaStream_t s = cuda_dev(dev)->compute;
    if (j < 0) {
        size_t n = (size_t)numel * esize;
        void *dst = to_dense ? dense : base;
        const void *src = to_dense ? (const void *)base : dense;
        return cuda_check(dev, cudaMemcpyAsync(dst, src, n, kind, s), op, "cudaMemcpyAsync", error);
    }
    for (int i = 0; i <= j; i++) {
        if (t->stride[i] < 0 || (i == j && t->stride[j] < block)) {
            g_autofree char *shape = tdm_tensor_shape_string(t);
            g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                        "%s on %s: tensor %s has negative or overlapping strides (dim %d: "
                        "%" G_GINT64_FORMAT ")",
                        op, dev->name, shape, i, t->stride[i]);
            return FALSE;
        }
    }
    const size_t width = (size_t)block * esize;
    const size_t pitch = (size_t)t->stride[j] * esize;
    const size_t rows = (size_t)t->shape[j];
    int64_t outer = numel / (block * t->shape[j]);
    int64_t idx[TDM_MAX_DIMS] = {0};
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = 0;
        for (int i = 0; i < j; i++) {
            off += idx[i] * t->stride[i];
        }
        char *strided = base + (size_t)off * esize;
        char *flat = (char *)dense + (size_t)o * rows * width;
        cudaError_t rc = to_dense
                             ? cudaMemcpy2DAsync(flat, width, strided, pitch, width, rows, kind, s)
                             : cudaMemcpy2DAsync(strided, pitch, flat, width, width, rows, kind, s);
        if (!cuda_check(dev, rc, op, "cudaMemcpy2DAsync", error)) {
            return FALSE;
        }
        for (int i = j - 1; i >= 0; i--) {
            if (++idx[i] < t->shape[i]) {
                break;
            }
            idx[i] = 0;
        }
    }
    return TRUE;
}

static gboolean check_transfer(TdmDevice *dev, const char *op, const TdmTensor *t, GError **error)
{
    if (t->layout != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s on %s: the tensor has a layout the cuda backend did not make", op,
                    dev->name);
        return FALSE;
    }
    if (t->storage == NULL && tdm_tensor_numel(t) > 0) {
        g_autofree char *shape = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s on %s: tensor %s has no storage",
                    op, dev->name, shape);
        return FALSE;
    }
    return TRUE;
}

gboolean cuda_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error)
{
    if (!check_transfer(dev, "read", t, error) || !cuda_op_begin(dev, "read", error)) {
        return FALSE;
    }
    /* On the compute stream, after every op queued before; the host then
     * waits for the data. */
    gboolean ok = copy_strided(dev, "read", t, host, TRUE, cudaMemcpyDeviceToHost, error) &&
                  cuda_check(dev, cudaStreamSynchronize(cuda_dev(dev)->compute), "read",
                             "cudaStreamSynchronize (compute)", error);
    return cuda_op_end(dev, "read", ok, error);
}

gboolean cuda_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error)
{
    if (!check_transfer(dev, "write", t, error) || !cuda_op_begin(dev, "write", error)) {
        return FALSE;
    }
    /* Waits for the copy: the caller owns `host` again when this returns
     * (and pinned memory is read by the copy engine until then). */
    gboolean ok =
        copy_strided(dev, "write", t, (void *)host, FALSE, cudaMemcpyHostToDevice, error) &&
        cuda_check(dev, cudaStreamSynchronize(cuda_dev(dev)->compute), "write",
                   "cudaStreamSynchronize (compute)", error);
    return cuda_op_end(dev, "write", ok, error);
}

gboolean cuda_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src, const TdmTensor *like,
                      TdmTensor *dst, GError **error)
{
    /* The backend has the plain layout only: a reorder is a (gathering)
     * copy into a plain contiguous tensor. */
    if (!check_transfer(dev, "reorder", src, error)) {
        return FALSE;
    }
    if (like != NULL && like->layout != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "reorder on %s: the target layout is not one the cuda backend made", dev->name);
        return FALSE;
    }
    if (src == dst) {
        if (tdm_tensor_is_contiguous(src)) {
            return TRUE;
        }
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "reorder on %s: source and destination are the same strided tensor", dev->name);
        return FALSE;
    }
    int64_t shape[TDM_MAX_DIMS];
    memcpy(shape, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    if (!cuda_ensure_out(dst, src->dtype, src->ndim, shape, error) ||
        !cuda_op_begin(dev, "reorder", error)) {
        return FALSE;
    }
    gboolean ok = copy_strided(dev, "reorder", src, tdm_tensor_data(dst), TRUE,
                               cudaMemcpyDeviceToDevice, error);
    return cuda_op_end(dev, "reorder", ok, error);
}

gboolean cuda_synchronize(TdmDevice *dev, GError **error)
{
    if (!cuda_op_begin(dev, "synchronize", error)) {
        return FALSE;
    }
    CudaDevice *d = cuda_dev(dev);
    gboolean ok = cuda_check(dev, cudaStreamSynchronize(d->compute), "synchronize",
                             "cudaStreamSynchronize (compute)", error) &&
                  cuda_check(dev, cudaStreamSynchronize(d->copy), "synchronize",
                             "cudaStreamSynchronize (copy)", error);
    /* The device is idle: the place to report a bad label that
     * softmax_xent_stats left for later (cuda-vector.c). */
    ok = ok && cuda_vector_check_deferred(dev, error);
    return cuda_op_end(dev, "synchronize", ok, error);
}

/* ---- copies between devices ---- */

/* Peer access, enabled once per ordered pair of GPUs where the hardware
 * allows it (NVLink or PCIe P2P); without it cudaMemcpyPeerAsync still
 * works, staged by the driver. */
static GMutex peer_lock;
static GHashTable *peer_tried; /* (dst_ordinal << 16 | src_ordinal) */

static void enable_peer_access(TdmDevice *dst_dev, int src_ordinal)
{
    int dst_ordinal = cuda_dev(dst_dev)->ordinal;
    gpointer key = GINT_TO_POINTER((dst_ordinal << 16) | src_ordinal);
    g_mutex_lock(&peer_lock);
    if (peer_tried == NULL) {
        peer_tried = g_hash_table_new(g_direct_hash, g_direct_equal);
    }
    if (!g_hash_table_contains(peer_tried, key)) {
        g_hash_table_add(peer_tried, key);
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, dst_ordinal, src_ordinal) == cudaSuccess && can) {
            /* The current device (dst) gets access to src's memory;
             * "already enabled" is no failure. */
            cudaError_t rc = cudaDeviceEnablePeerAccess(src_ordinal, 0);
            if (rc != cudaSuccess && rc != cudaErrorPeerAccessAlreadyEnabled) {
                g_debug("cuda: peer access GPU %d -> %d: %s", dst_ordinal, src_ordinal,
                        cudaGetErrorString(rc));
            }
        }
        (void)cudaGetLastError();
    }
    g_mutex_unlock(&peer_lock);
}

/* Makes later work on `waiter`'s compute stream wait for the work queued so
 * far on `signaller`'s compute stream (the host does not wait). */
static gboolean order_after(TdmDevice *waiter, TdmDevice *signaller, const char *op, GError **error)
{
    cudaEvent_t ev = NULL;
    gboolean ok = cuda_set_current(signaller, op, error) &&
                  cuda_check(signaller, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), op,
                             "cudaEventCreateWithFlags", error) &&
                  cuda_check(signaller, cudaEventRecord(ev, cuda_dev(signaller)->compute), op,
                             "cudaEventRecord", error) &&
                  cuda_set_current(waiter, op, error) &&
                  cuda_check(waiter, cudaStreamWaitEvent(cuda_dev(waiter)->compute, ev, 0), op,
                             "cudaStreamWaitEvent", error);
    if (ev != NULL) {
        /* Allowed while the wait is pending: it keeps its own reference. */
        cudaEventDestroy(ev);
    }
    return ok;
}

gboolean cuda_copy_peer(TdmDevice *dst_dev, void *dst, TdmDevice *src_dev, const void *src,
                        size_t n, GError **error)
{
    const char *op = "copy_peer";
    if (!cuda_op_begin(src_dev, op, error) || !cuda_op_begin(dst_dev, op, error)) {
        return FALSE;
    }
    if (n == 0) {
        return TRUE;
    }
    CudaDevice *s = cuda_dev(src_dev), *d = cuda_dev(dst_dev);
    /* dst's compute waits for src's work so far; the copy runs on dst's
     * compute; then src's later work waits for the copy, so that src cannot
     * overwrite what is still being read. */
    gboolean ok = order_after(dst_dev, src_dev, op, error);
    if (ok && s->ordinal != d->ordinal) {
        enable_peer_access(dst_dev, s->ordinal);
    }
    if (ok) {
        /* Two logical devices of one GPU share its memory: a plain copy. */
        cudaError_t rc = s->ordinal == d->ordinal
                             ? cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, d->compute)
                             : cudaMemcpyPeerAsync(dst, d->ordinal, src, s->ordinal, n, d->compute);
        g_autofree char *what = g_strdup_printf(
            "%s of %zu bytes from %s",
            s->ordinal == d->ordinal ? "cudaMemcpyAsync" : "cudaMemcpyPeerAsync", n, s->name);
        ok = cuda_check(dst_dev, rc, op, what, error);
    }
    ok = ok && order_after(src_dev, dst_dev, op, error);
    return cuda_op_end(dst_dev, op, ok, error);
}

/* ---- streams and events ---- */

struct _TdmBackendEvent {
    cudaEvent_t event;
    TdmDevice *dev; /* the device it was made on: records must use its streams */
};

static TdmBackendEvent *cuda_event_new(TdmDevice *dev, GError **error)
{
    if (!cuda_op_begin(dev, "event_new", error)) {
        return NULL;
    }
    TdmBackendEvent *ev = g_new0(TdmBackendEvent, 1);
    ev->dev = dev;
    /* No timing: a timing event costs more to record and to wait for. */
    if (!cuda_check(dev, cudaEventCreateWithFlags(&ev->event, cudaEventDisableTiming), "event_new",
                    "cudaEventCreateWithFlags", error)) {
        g_free(ev);
        return NULL;
    }
    return ev;
}

static void cuda_event_free(TdmDevice *dev, TdmBackendEvent *ev)
{
    if (ev == NULL) {
        return;
    }
    GError *err = NULL;
    if (cuda_set_current(ev->dev, "event_free", &err)) {
        /* Allowed while pending: the resources go when it completes. */
        cuda_check(ev->dev, cudaEventDestroy(ev->event), "event_free", "cudaEventDestroy", &err);
    }
    if (err != NULL) {
        g_debug("%s", err->message);
        g_error_free(err);
    }
    g_free(ev);
}

static gboolean cuda_event_record(TdmDevice *dev, TdmBackendEvent *ev, TdmStream stream,
                                  GError **error)
{
    if (cuda_dev(ev->dev)->ordinal != cuda_dev(dev)->ordinal) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "event_record on %s: the event belongs to %s, on another GPU", dev->name,
                    ev->dev->name);
        return FALSE;
    }
    if (!cuda_op_begin(dev, "event_record", error)) {
        return FALSE;
    }
    gboolean ok = cuda_check(dev, cudaEventRecord(ev->event, cuda_stream_of(dev, stream)),
                             "event_record", "cudaEventRecord", error);
    return cuda_op_end(dev, "event_record", ok, error);
}

static gboolean cuda_stream_wait_event(TdmDevice *dev, TdmStream stream, TdmBackendEvent *ev,
                                       GError **error)
{
    if (!cuda_op_begin(dev, "stream_wait_event", error)) {
        return FALSE;
    }
    /* An event of another GPU is fine: the stream waits on the device. */
    gboolean ok = cuda_check(dev, cudaStreamWaitEvent(cuda_stream_of(dev, stream), ev->event, 0),
                             "stream_wait_event", "cudaStreamWaitEvent", error);
    return cuda_op_end(dev, "stream_wait_event", ok, error);
}

/* TRUE when complete; FALSE while pending (*pending set) or on failure. */
static gboolean query_status(TdmDevice *dev, cudaError_t rc, const char *op, const char *what,
                             gboolean *pending, GError **error)
{
    *pending = FALSE;
    if (rc == cudaErrorNotReady) {
        /* Not an error, but the runtime may keep it as the last one. */
        (void)cudaGetLastError();
        *pending = TRUE;
        return FALSE;
    }
    return cuda_check(dev, rc, op, what, error);
}

static gboolean cuda_event_query(TdmDevice *dev, TdmBackendEvent *ev, GError **error)
{
    if (!cuda_op_begin(ev->dev, "event_query", error)) {
        return FALSE;
    }
    gboolean pending;
    return query_status(ev->dev, cudaEventQuery(ev->event), "event_query", "cudaEventQuery",
                        &pending, error);
}

/* Polls `done` until it holds or `timeout_s` passes, sleeping a little
 * longer each time, up to 100 us (a step's waits are on the critical path:
 * a longer sleep would show in the step time): a blocking CUDA wait could
 * not be abandoned at the deadline. Without a deadline the callers block
 * in CUDA instead. */
typedef gboolean (*PollFunc)(TdmDevice *dev, gpointer what, gboolean *pending, GError **error);

static gboolean poll_until(TdmDevice *dev, PollFunc done, gpointer what, double timeout_s,
                           const char *op, const char *waited_for, GError **error)
{
    double deadline = tdm_time_now() + timeout_s;
    gulong sleep_us = 5;
    for (;;) {
        gboolean pending = FALSE;
        if (done(dev, what, &pending, error)) {
            return TRUE;
        }
        if (!pending) {
            return FALSE;
        }
        if (tdm_time_now() >= deadline) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "%s on %s: %s not finished after %.3g s", op, dev->name, waited_for,
                        timeout_s);
            return FALSE;
        }
        g_usleep(sleep_us);
        sleep_us = MIN(sleep_us * 2, 100);
    }
}

static gboolean event_done(TdmDevice *dev, gpointer what, gboolean *pending, GError **error)
{
    TdmBackendEvent *ev = what;
    return query_status(dev, cudaEventQuery(ev->event), "event_synchronize", "cudaEventQuery",
                        pending, error);
}

static gboolean cuda_event_synchronize(TdmDevice *dev, TdmBackendEvent *ev, double timeout_s,
                                       GError **error)
{
    if (!cuda_op_begin(ev->dev, "event_synchronize", error)) {
        return FALSE;
    }
    if (timeout_s < 0) {
        return cuda_check(ev->dev, cudaEventSynchronize(ev->event), "event_synchronize",
                          "cudaEventSynchronize", error);
    }
    return poll_until(ev->dev, event_done, ev, timeout_s, "event_synchronize",
                      "the work before the event", error);
}

static gboolean streams_done(TdmDevice *dev, gpointer what, gboolean *pending, GError **error)
{
    CudaDevice *d = cuda_dev(dev);
    return query_status(dev, cudaStreamQuery(d->compute), "synchronize", "cudaStreamQuery", pending,
                        error) &&
           query_status(dev, cudaStreamQuery(d->copy), "synchronize", "cudaStreamQuery", pending,
                        error);
}

static gboolean cuda_stream_synchronize(TdmDevice *dev, double timeout_s, GError **error)
{
    if (timeout_s < 0) {
        return cuda_synchronize(dev, error);
    }
    if (!cuda_op_begin(dev, "synchronize", error)) {
        return FALSE;
    }
    return poll_until(dev, streams_done, NULL, timeout_s, "synchronize",
                      "the work queued on the device", error) &&
           cuda_vector_check_deferred(dev, error);
}

static gboolean cuda_copy_h2d_on(TdmDevice *dev, TdmStream stream, void *dst, const void *src,
                                 size_t n, GError **error)
{
    if (!cuda_op_begin(dev, "copy_h2d_on", error)) {
        return FALSE;
    }
    gboolean ok = n == 0 || cuda_check(dev,
                                       cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice,
                                                       cuda_stream_of(dev, stream)),
                                       "copy_h2d_on", "cudaMemcpyAsync (host to device)", error);
    return cuda_op_end(dev, "copy_h2d_on", ok, error);
}

static gpointer cuda_native_stream(TdmDevice *dev, TdmStream stream)
{
    return (gpointer)cuda_stream_of(dev, stream);
}

const TdmStreamOps cuda_stream_ops = {
    .iface_version = TDM_STREAM_OPS_IFACE_VERSION,
    .struct_size = sizeof(TdmStreamOps),
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .synchronize = cuda_stream_synchronize,
    .copy_h2d_on = cuda_copy_h2d_on,
    .native_stream = cuda_native_stream,
};

/* ---- device information ---- */

gboolean cuda_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error)
{
    CudaDevice *d = cuda_dev(dev);
    const struct cudaDeviceProp *p = &d->props.prop;
    info->kind = TDM_DEVICE_KIND_GPU;
    info->host_accessible = FALSE;
    if (d->props.valid) {
        g_strlcpy(info->name, p->name, sizeof(info->name));
        g_snprintf(info->capability, sizeof(info->capability), "%d.%d", p->major, p->minor);
        info->compute_units = p->multiProcessorCount;
    }
    if (!cuda_op_begin(dev, "device_info", error)) {
        return FALSE;
    }
    /* cudaMemGetInfo asks the driver; it does not wait for the device. */
    size_t free_bytes = 0, total_bytes = 0;
    if (!cuda_check(dev, cudaMemGetInfo(&free_bytes, &total_bytes), "device_info", "cudaMemGetInfo",
                    error)) {
        return FALSE;
    }
    info->free_bytes = (gint64)free_bytes;
    info->total_bytes = (gint64)total_bytes;
    /* The allocator's figures: what tensors and workspaces hold, what the
     * cache keeps besides. */
    CudaAllocStats stats;
    cuda_alloc_get_stats(d->alloc, &stats);
    info->allocated_bytes = stats.allocated_bytes;
    info->reserved_bytes = stats.reserved_bytes;
    info->peak_bytes = stats.peak_bytes;
    char bus_id[32];
    info->utilization = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), d->ordinal) == cudaSuccess
                            ? cuda_nvml_utilization(bus_id)
                            : -1;
    (void)cudaGetLastError();
    return TRUE;
}

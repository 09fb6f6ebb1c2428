/* SPDX-License-Identifier: MIT */
/* plugins/ref/ref-device.c - the reference backend's streams, events and
 * device information.
 *
 * Compute on a ref device is the calling thread: an op has finished when it
 * returns, so an event recorded on compute is complete at once. The copy
 * stream, though, is real: a thread of the device's own runs the copies
 * queued on it in order, and TDM_REF_COPY_DELAY_US=N (read when the device
 * opens; a test hook, compiled in with configure --enable-test-hooks only)
 * makes it sleep N microseconds before each one, like a slow bus. A
 * caller that forgets to order its work after a copy's event then reads
 * stale data on ref too, instead of only on a GPU. The queue is a fixed
 * ring (a full ring blocks the caller, as a GPU's does), so a steady step
 * allocates nothing.
 *
 * An event is a position in a copy stream: the number of operations queued
 * on it when the event was recorded; it is complete once the stream has
 * run that many. Making compute wait for an event blocks the calling
 * thread (compute is that thread); making the copy stream wait for another
 * device's copy event queues a wait operation on it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define REF_COPY_RING 64

typedef enum {
    REF_COPY_BYTES,
    REF_COPY_WAIT,
} RefCopyKind;

typedef struct {
    RefCopyKind kind;
    void *dst;
    const void *src;
    size_t n;
    RefCopyStream *wait_on; /* REF_COPY_WAIT: until it has run wait_seq operations */
    guint64 wait_seq;
} RefCopyOp;

struct _RefCopyStream {
    GMutex lock;
    GCond cond; /* any change of queued, done or quit */
    GThread *thread;
    RefCopyOp ring[REF_COPY_RING];
    guint64 queued, done; /* operations queued / run since the device opened */
    gboolean quit;
    gulong delay_us;
    char *name; /* "ref:0 copy stream" */
};

struct _TdmBackendEvent {
    RefCopyStream *stream; /* NULL: recorded on compute, or never: complete */
    guint64 seq;
};

/* ---- the copy stream ---- */

void ref_stream_open(TdmDevice *dev, RefDevice *rd)
{
    RefCopyStream *s = g_new0(RefCopyStream, 1);
    g_mutex_init(&s->lock);
    g_cond_init(&s->cond);
    s->name = g_strdup_printf("%s copy stream", dev->name);
#ifdef TDM_ENABLE_TEST_HOOKS
    const char *delay = g_getenv("TDM_REF_COPY_DELAY_US");
    s->delay_us = delay != NULL ? (gulong)g_ascii_strtoull(delay, NULL, 10) : 0;
#endif
    rd->copy = s;
}

void ref_stream_close(RefDevice *rd)
{
    RefCopyStream *s = rd->copy;
    if (s == NULL) {
        return;
    }
    g_mutex_lock(&s->lock);
    s->quit = TRUE;
    g_cond_broadcast(&s->cond);
    g_mutex_unlock(&s->lock);
    if (s->thread != NULL) {
        g_thread_join(s->thread); /* runs what is queued first */
    }
    g_mutex_clear(&s->lock);
    g_cond_clear(&s->cond);
    g_free(s->name);
    g_free(s);
    rd->copy = NULL;
}

/* Wait until `s` has run `seq` operations: without a deadline when
 * deadline < 0, else until that monotonic time. */
static gboolean stream_reach(RefCopyStream *s, guint64 seq, gint64 deadline)
{
    gboolean reached = TRUE;
    g_mutex_lock(&s->lock);
    while (s->done < seq) {
        if (deadline < 0) {
            g_cond_wait(&s->cond, &s->lock);
        } else if (!g_cond_wait_until(&s->cond, &s->lock, deadline)) {
            reached = s->done >= seq;
            break;
        }
    }
    g_mutex_unlock(&s->lock);
    return reached;
}

static gint64 deadline_of(double timeout_s)
{
    return timeout_s < 0 ? -1 : g_get_monotonic_time() + (gint64)(timeout_s * G_TIME_SPAN_SECOND);
}

static gpointer copy_main(gpointer data)
{
    RefCopyStream *s = data;
    g_mutex_lock(&s->lock);
    for (;;) {
        while (s->done == s->queued && !s->quit) {
            g_cond_wait(&s->cond, &s->lock);
        }
        if (s->done == s->queued) {
            break; /* quit, and nothing left */
        }
        RefCopyOp op = s->ring[s->done % REF_COPY_RING];
        g_mutex_unlock(&s->lock);
        if (op.kind == REF_COPY_WAIT) {
            stream_reach(op.wait_on, op.wait_seq, -1);
        } else {
            if (s->delay_us > 0) {
                g_usleep(s->delay_us);
            }
            memmove(op.dst, op.src, op.n);
        }
        g_mutex_lock(&s->lock);
        s->done++;
        g_cond_broadcast(&s->cond);
    }
    g_mutex_unlock(&s->lock);
    return NULL;
}

static gboolean stream_push(RefCopyStream *s, const RefCopyOp *op, GError **error)
{
    g_mutex_lock(&s->lock);
    if (s->thread == NULL) {
        /* Started on first use: most ref devices never copy on this stream. */
        s->thread = g_thread_try_new("ref-copy", copy_main, s, error);
        if (s->thread == NULL) {
            g_mutex_unlock(&s->lock);
            g_prefix_error(error, "%s: ", s->name);
            return FALSE;
        }
    }
    while (s->queued - s->done >= REF_COPY_RING) {
        g_cond_wait(&s->cond, &s->lock);
    }
    s->ring[s->queued % REF_COPY_RING] = *op;
    s->queued++;
    g_cond_broadcast(&s->cond);
    g_mutex_unlock(&s->lock);
    return TRUE;
}

gboolean ref_stream_drain(TdmDevice *dev, double timeout_s, GError **error)
{
    RefCopyStream *s = ((RefDevice *)dev->priv)->copy;
    g_mutex_lock(&s->lock);
    guint64 target = s->queued;
    g_mutex_unlock(&s->lock);
    if (!stream_reach(s, target, deadline_of(timeout_s))) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                    "%s: copies still running after %g s", s->name, timeout_s);
        return FALSE;
    }
    return TRUE;
}

/* ---- events ---- */

static RefCopyStream *copy_stream(TdmDevice *dev)
{
    return ((RefDevice *)dev->priv)->copy;
}

static TdmBackendEvent *ref_event_new(TdmDevice *dev, GError **error)
{
    return g_new0(TdmBackendEvent, 1);
}

static void ref_event_free(TdmDevice *dev, TdmBackendEvent *ev)
{
    /* The stream never looks at events: freeing a pending one is safe. */
    g_free(ev);
}

static gboolean ref_event_record(TdmDevice *dev, TdmBackendEvent *ev, TdmStream stream,
                                 GError **error)
{
    if (stream == TDM_STREAM_COMPUTE) {
        ev->stream = NULL; /* compute work has finished when the host gets here */
        ev->seq = 0;
        return TRUE;
    }
    RefCopyStream *s = copy_stream(dev);
    g_mutex_lock(&s->lock);
    ev->stream = s;
    ev->seq = s->queued;
    g_mutex_unlock(&s->lock);
    return TRUE;
}

static gboolean ref_stream_wait_event(TdmDevice *dev, TdmStream stream, TdmBackendEvent *ev,
                                      GError **error)
{
    if (ev->stream == NULL) {
        return TRUE;
    }
    if (stream == TDM_STREAM_COMPUTE) {
        stream_reach(ev->stream, ev->seq, -1);
        return TRUE;
    }
    RefCopyStream *s = copy_stream(dev);
    if (ev->stream == s) {
        return TRUE; /* the stream runs in order */
    }
    RefCopyOp op = {.kind = REF_COPY_WAIT, .wait_on = ev->stream, .wait_seq = ev->seq};
    return stream_push(s, &op, error);
}

static gboolean ref_event_query(TdmDevice *dev, TdmBackendEvent *ev, GError **error)
{
    return ev->stream == NULL || stream_reach(ev->stream, ev->seq, 0);
}

static gboolean ref_event_synchronize(TdmDevice *dev, TdmBackendEvent *ev, double timeout_s,
                                      GError **error)
{
    if (ev->stream == NULL || stream_reach(ev->stream, ev->seq, deadline_of(timeout_s))) {
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                "%s: event not reached after %g s (waiting from %s)", ev->stream->name,
                timeout_s, dev->name);
    return FALSE;
}

static gboolean ref_copy_h2d_on(TdmDevice *dev, TdmStream stream, void *dst, const void *src,
                                size_t n, GError **error)
{
    if (n == 0) {
        return TRUE;
    }
    if (dst == NULL || src == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "ref copy_h2d_on %s: %zu bytes with a NULL %s pointer", dev->name, n,
                    dst == NULL ? "destination" : "source");
        return FALSE;
    }
    if (stream == TDM_STREAM_COMPUTE) {
        memmove(dst, src, n);
        return TRUE;
    }
    RefCopyOp op = {.kind = REF_COPY_BYTES, .dst = dst, .src = src, .n = n};
    return stream_push(copy_stream(dev), &op, error);
}

static gpointer ref_native_stream(TdmDevice *dev, TdmStream stream)
{
    return NULL; /* compute is the calling thread; the copy thread is ref's own */
}

const TdmStreamOps ref_stream_ops = {
    TDM_CLASS_HEADER(TDM_STREAM_OPS_IFACE_VERSION, TdmStreamOps),
    .event_new = ref_event_new,
    .event_free = ref_event_free,
    .event_record = ref_event_record,
    .stream_wait_event = ref_stream_wait_event,
    .event_query = ref_event_query,
    .event_synchronize = ref_event_synchronize,
    .synchronize = ref_stream_drain,
    .copy_h2d_on = ref_copy_h2d_on,
    .native_stream = ref_native_stream,
};

/* ---- device information ---- */

gboolean ref_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error)
{
    /* Virtual devices share the host's memory; the core's counts give each
     * its own allocated and peak bytes. */
    g_snprintf(info->name, sizeof(info->name), "ref virtual device %d", dev->index);
    g_strlcpy(info->capability, "plain C (oracle)", sizeof(info->capability));
    info->kind = TDM_DEVICE_KIND_VIRTUAL;
    info->host_accessible = TRUE;
#ifdef TDM_ENABLE_TEST_HOOKS
    /* Tests of the host-staged collectives: the devices claim memory the
     * host cannot reach, as cuda's, so shm and gloo stage their tensors. */
    if (g_strcmp0(g_getenv("TDM_REF_NOT_HOST"), "1") == 0) {
        info->host_accessible = FALSE;
    }
#endif
    info->compute_units = 1; /* single-threaded on purpose */
    tdm_host_memory(&info->total_bytes, &info->free_bytes);
    return TRUE;
}

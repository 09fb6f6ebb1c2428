/* SPDX-License-Identifier: MIT */
/* core/stream.c - events and the compute and copy streams of a device.
 *
 * A TdmEvent is the core's handle over a backend event (stream_ops). The
 * backends that run every op before returning and have no stream_ops get
 * the fallback the header promises: a device has one in-order stream, so
 * recording an event notes only that there is work to wait for, waiting
 * for it is tdm_device_synchronize (a deadline cannot be honoured there:
 * such a device finishes its work when the call returns), a stream that
 * waits for an event of its own device has nothing to do, and a copy on
 * either stream is the backend's async copy_h2d. Waits across backends
 * (an event of one, a stream of another) are done by the host, which is
 * always correct and costs only overlap.
 */
#include "config.h"

#include <math.h>

#include "internal.h"

struct _TdmEvent {
    TdmDevice *device;
    TdmBackendEvent *ev; /* NULL when the backend has no stream_ops */
    gboolean pending;    /* fallback: recorded and not waited for since */
};

static const TdmStreamOps *stream_ops(const TdmDevice *dev)
{
    return dev->backend->stream_ops;
}

static gboolean check_stream(const TdmDevice *dev, TdmStream stream, const char *what,
                             GError **error)
{
    if ((unsigned)stream >= TDM_N_STREAMS) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s on device '%s': unknown stream %d (compute 0, copy 1)", what, dev->name,
                    (int)stream);
        return FALSE;
    }
    return TRUE;
}

static gboolean check_timeout(const TdmDevice *dev, double timeout_s, GError **error)
{
    if (isnan(timeout_s)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "device '%s': a timeout of NaN seconds (< 0 waits without a deadline)",
                    dev->name);
        return FALSE;
    }
    return TRUE;
}

TdmEvent *tdm_event_new(TdmDevice *dev, GError **error)
{
    g_return_val_if_fail(dev != NULL, NULL);
    TdmEvent *event = g_new0(TdmEvent, 1);
    event->device = dev;
    const TdmStreamOps *ops = stream_ops(dev);
    if (ops != NULL) {
        event->ev = ops->event_new(dev, error);
        if (event->ev == NULL) {
            g_prefix_error(error, "device '%s': cannot make an event: ", dev->name);
            g_free(event);
            return NULL;
        }
    }
    return event;
}

void tdm_event_free(TdmEvent *event)
{
    if (event == NULL) {
        return;
    }
    if (event->ev != NULL) {
        stream_ops(event->device)->event_free(event->device, event->ev);
    }
    g_free(event);
}

TdmDevice *tdm_event_get_device(const TdmEvent *event)
{
    g_return_val_if_fail(event != NULL, NULL);
    return event->device;
}

gboolean tdm_event_record(TdmEvent *event, TdmStream stream, GError **error)
{
    g_return_val_if_fail(event != NULL, FALSE);
    TdmDevice *dev = event->device;
    if (!check_stream(dev, stream, "event record", error)) {
        return FALSE;
    }
    if (event->ev != NULL) {
        return stream_ops(dev)->event_record(dev, event->ev, stream, error);
    }
    event->pending = TRUE;
    return TRUE;
}

/* The fallback's wait: the device's one stream, drained. */
static gboolean fallback_wait(TdmEvent *event, GError **error)
{
    if (!event->pending) {
        return TRUE;
    }
    if (!tdm_device_synchronize(event->device, error)) {
        return FALSE;
    }
    event->pending = FALSE;
    return TRUE;
}

gboolean tdm_event_query(TdmEvent *event, GError **error)
{
    g_return_val_if_fail(event != NULL, FALSE);
    if (event->ev != NULL) {
        return stream_ops(event->device)->event_query(event->device, event->ev, error);
    }
    return fallback_wait(event, error);
}

gboolean tdm_event_synchronize(TdmEvent *event, double timeout_s, GError **error)
{
    g_return_val_if_fail(event != NULL, FALSE);
    TdmDevice *dev = event->device;
    if (!check_timeout(dev, timeout_s, error)) {
        return FALSE;
    }
    if (event->ev != NULL) {
        return stream_ops(dev)->event_synchronize(dev, event->ev, timeout_s, error);
    }
    return fallback_wait(event, error);
}

gboolean tdm_stream_wait_event(TdmDevice *dev, TdmStream stream, TdmEvent *event,
                               GError **error)
{
    g_return_val_if_fail(dev != NULL && event != NULL, FALSE);
    if (!check_stream(dev, stream, "stream wait", error)) {
        return FALSE;
    }
    const TdmStreamOps *ops = stream_ops(dev);
    if (ops != NULL && event->ev != NULL && event->device->backend == dev->backend) {
        return ops->stream_wait_event(dev, stream, event->ev, error);
    }
    if (ops == NULL && event->device == dev) {
        return TRUE; /* one in-order stream: later work follows the event */
    }
    return tdm_event_synchronize(event, -1.0, error);
}

gboolean tdm_device_copy_h2d(TdmDevice *dev, TdmStream stream, void *dst, const void *src,
                             size_t n, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_stream(dev, stream, "copy_h2d", error)) {
        return FALSE;
    }
    const TdmStreamOps *ops = stream_ops(dev);
    if (ops != NULL) {
        return ops->copy_h2d_on(dev, stream, dst, src, n, error);
    }
    return dev->backend->copy_h2d(dev, dst, src, n, TRUE, error);
}

gboolean tdm_device_synchronize_timeout(TdmDevice *dev, double timeout_s, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (!check_timeout(dev, timeout_s, error)) {
        return FALSE;
    }
    const TdmStreamOps *ops = stream_ops(dev);
    if (ops != NULL) {
        return ops->synchronize(dev, timeout_s, error);
    }
    return tdm_device_synchronize(dev, error);
}

gpointer tdm_device_native_stream(TdmDevice *dev, TdmStream stream)
{
    g_return_val_if_fail(dev != NULL, NULL);
    const TdmStreamOps *ops = stream_ops(dev);
    if (ops == NULL || (unsigned)stream >= TDM_N_STREAMS) {
        return NULL;
    }
    return ops->native_stream(dev, stream);
}

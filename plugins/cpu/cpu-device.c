/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-device.c - the cpu backend's streams, events, device
 * information and device-side loss statistics.
 *
 * With oneDNN's OpenMP runtime a primitive has run when dnnl_primitive_execute
 * returns, and every copy is a memcpy: the device's work is always finished
 * when the host gets control back. So both streams are the calling thread,
 * every event is complete when it is recorded, and waiting is free; the
 * tables exist so that code written for accelerators (the loader's per-batch
 * events, a collective ordered after compute) runs unchanged here.
 *
 * The device is the host: its name is the processor's model name, its
 * capability the instruction set oneDNN dispatches to, its memory the
 * host's; the core's allocation counts give allocated and peak bytes, and
 * the caching allocator's cache makes the reserved bytes.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu.h"

/* ---- streams and events ---- */

struct _TdmBackendEvent {
    int recorded; /* for a debugger's eyes only: nothing ever waits */
};

static TdmBackendEvent *cpu_event_new(TdmDevice *dev, GError **error)
{
    return g_new0(TdmBackendEvent, 1);
}

static void cpu_event_free(TdmDevice *dev, TdmBackendEvent *ev)
{
    g_free(ev);
}

static gboolean cpu_event_record(TdmDevice *dev, TdmBackendEvent *ev, TdmStream stream,
                                 GError **error)
{
    ev->recorded = 1;
    return TRUE;
}

static gboolean cpu_stream_wait_event(TdmDevice *dev, TdmStream stream, TdmBackendEvent *ev,
                                      GError **error)
{
    return TRUE;
}

static gboolean cpu_event_query(TdmDevice *dev, TdmBackendEvent *ev, GError **error)
{
    return TRUE;
}

static gboolean cpu_event_synchronize(TdmDevice *dev, TdmBackendEvent *ev, double timeout_s,
                                      GError **error)
{
    return TRUE;
}

static gboolean cpu_stream_synchronize(TdmDevice *dev, double timeout_s, GError **error)
{
    return cpu_check(dnnl_stream_wait(CPU_DEV(dev)->stream), "stream wait", error);
}

static gboolean cpu_copy_h2d_on(TdmDevice *dev, TdmStream stream, void *dst, const void *src,
                                size_t n, GError **error)
{
    if (n > 0 && dst != src) {
        memcpy(dst, src, n);
    }
    return TRUE;
}

static gpointer cpu_native_stream(TdmDevice *dev, TdmStream stream)
{
    return NULL;
}

const TdmStreamOps cpu_stream_ops = {
    TDM_CLASS_HEADER(TDM_STREAM_OPS_IFACE_VERSION, TdmStreamOps),
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_query = cpu_event_query,
    .event_synchronize = cpu_event_synchronize,
    .synchronize = cpu_stream_synchronize,
    .copy_h2d_on = cpu_copy_h2d_on,
    .native_stream = cpu_native_stream,
};

/* ---- device information ---- */

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41:
        return "sse41";
    case dnnl_cpu_isa_avx:
        return "avx";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
    case dnnl_cpu_isa_avx512_mic_4ops:
        return "avx512_mic";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    default:
        return NULL;
    }
}

/* The "model name" of the first processor in /proc/cpuinfo, else NULL
 * (transfer full). */
static char *cpu_model_name(void)
{
    char *text = NULL;
    if (!g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL)) {
        return NULL;
    }
    char *name = NULL;
    char *line = strstr(text, "model name");
    char *colon = line != NULL ? strchr(line, ':') : NULL;
    if (colon != NULL) {
        char *end = strchr(colon, '\n');
        name = g_strstrip(g_strndup(colon + 1, end != NULL ? (gsize)(end - colon - 1)
                                                           : strlen(colon + 1)));
    }
    g_free(text);
    return name;
}

const char *cpu_model(void)
{
    /* Read once: it does not change while the process runs. */
    static gsize once = 0;
    static char *model;
    if (g_once_init_enter(&once)) {
        model = cpu_model_name();
        g_once_init_leave(&once, 1);
    }
    return model;
}

const char *cpu_isa(void)
{
    const char *isa = isa_name(dnnl_get_effective_cpu_isa());
    return isa != NULL ? isa : "unknown";
}

gboolean cpu_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error)
{
    const char *model = cpu_model();
    if (model != NULL && model[0] != '\0') {
        g_strlcpy(info->name, model, sizeof(info->name));
    } else {
        g_strlcpy(info->name, "host processor", sizeof(info->name));
    }
    g_strlcpy(info->capability, cpu_isa(), sizeof(info->capability));
    info->kind = TDM_DEVICE_KIND_CPU;
    info->host_accessible = TRUE;
    info->compute_units = omp_get_max_threads();
    tdm_host_memory(&info->total_bytes, &info->free_bytes);
    CpuDevice *d = CPU_DEV(dev);
    if (d != NULL && info->allocated_bytes >= 0) {
        g_mutex_lock(&d->alloc_lock);
        info->reserved_bytes = info->allocated_bytes + (gint64)d->cached_bytes;
        g_mutex_unlock(&d->alloc_lock);
    }
    return TRUE;
}

/* ---- loss statistics on the device ---- */

gboolean cpu_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                TdmTensor *stats, GError **error)
{
    /* The loss of softmax_xent itself: its mean times the rows is the sum
     * (to float rounding, as stats is f32). */
    float mean = 0.0f;
    int64_t hits = 0;
    if (!cpu_softmax_xent(dev, cache, logits, labels, label_smoothing, &mean, dlogits, &hits,
                          error)) {
        return FALSE;
    }
    float *acc = tdm_tensor_data(stats);
    acc[TDM_XENT_STATS_LOSS_SUM] += (float)((double)mean * (double)logits->shape[0]);
    acc[TDM_XENT_STATS_CORRECT] += (float)hits;
    return TRUE;
}

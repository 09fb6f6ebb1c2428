/* SPDX-License-Identifier: MIT */
/**
 * SECTION:device
 * @title: Devices
 * @short_description: what a device is and how work on it is ordered
 * @include: tandem/tandem.h
 *
 * Device information: tdm_device_info() fills a TdmDeviceInfo with the
 * hardware's name, kind, memory and capability (from the backend when it
 * offers device_info) and the allocator's figures. The core counts every
 * tensor storage it allocates on a device, so allocated and peak bytes are
 * known for every backend; a backend with a caching allocator reports its
 * own figures, reserved bytes included.
 *
 * Streams and events: a device runs its work on a COMPUTE stream (every op,
 * tdm_tensor_read/write) and may have a COPY stream for host-to-device
 * transfers that overlap compute. An event marks a point in one stream:
 * tdm_event_record() places it after the work queued so far, and
 * tdm_event_synchronize() (host waits, with a deadline) or
 * tdm_stream_wait_event() (a stream waits, the host goes on) order later
 * work after it, as CUDA's cudaEventRecord / cudaStreamWaitEvent do. On a
 * backend without streams (the host backends before 1.1) the core falls
 * back: an event stands for "everything queued on the device", waiting for
 * it synchronises the device, and both streams are the device's one stream.
 *
 * Timeouts, wherever one is taken: < 0 waits without a deadline, 0 only
 * checks, > 0 waits that many seconds and then fails with
 * TDM_ERROR_TIMEOUT naming the device.
 */
#ifndef TANDEM_DEVICE_H
#define TANDEM_DEVICE_H

#include <tandem/tensor.h>

G_BEGIN_DECLS

/* ---- device information ---- */

/**
 * TdmDeviceKind:
 * @TDM_DEVICE_KIND_UNKNOWN: the backend does not say
 * @TDM_DEVICE_KIND_CPU: the host's processors
 * @TDM_DEVICE_KIND_GPU: an accelerator with its own memory
 * @TDM_DEVICE_KIND_VIRTUAL: a device simulated on the host (ref:N)
 *
 * What kind of hardware a device is.
 */
typedef enum {
    TDM_DEVICE_KIND_UNKNOWN = 0, /* the backend does not say */
    TDM_DEVICE_KIND_CPU,         /* the host's processors */
    TDM_DEVICE_KIND_GPU,         /* an accelerator with its own memory */
    TDM_DEVICE_KIND_VIRTUAL,     /* a device simulated on the host (ref:N) */
} TdmDeviceKind;

/**
 * tdm_device_kind_name:
 * @kind: a kind
 *
 * The kind's name, as `tandem inspect` and the log write it.
 *
 * Returns: (transfer none): "cpu", "gpu", "virtual" or "unknown"
 */
TDM_API const char *tdm_device_kind_name(TdmDeviceKind kind);

/**
 * TDM_DEVICE_INFO_NAME_LEN:
 *
 * The size of #TdmDeviceInfo's name, terminating NUL included; a longer
 * name is cut.
 */
/**
 * TDM_DEVICE_INFO_CAPABILITY_LEN:
 *
 * The size of #TdmDeviceInfo's capability, terminating NUL included; a
 * longer one is cut.
 */
#define TDM_DEVICE_INFO_NAME_LEN 96
#define TDM_DEVICE_INFO_CAPABILITY_LEN 48

/**
 * TdmDeviceInfo:
 * @name: "NVIDIA H200", the CPU's model name
 * @capability: "9.0" (CUDA), "avx512_core" (ISA)
 * @kind: the kind of hardware
 * @host_accessible: tensor memory is host memory
 * @compute_units: SMs, or the threads ops run on
 * @utilization: percent busy lately
 * @total_bytes: memory of the device (host memory for host devices)
 * @free_bytes: of which free (MemAvailable on the host)
 * @allocated_bytes: tensor storage live now
 * @reserved_bytes: held by the allocator: allocated + its cache
 * @peak_bytes: the most allocated since open or tdm_device_reset_peak()
 * @reserved: zero
 *
 * What tdm_device_info() tells about a device. Every byte and count figure
 * is -1 when unknown.
 */
typedef struct {
    char name[TDM_DEVICE_INFO_NAME_LEN];             /* "NVIDIA H200", the CPU's model name */
    char capability[TDM_DEVICE_INFO_CAPABILITY_LEN]; /* "9.0" (CUDA), "avx512_core" (ISA) */
    TdmDeviceKind kind;
    gboolean host_accessible; /* tensor memory is host memory */
    int compute_units;        /* SMs, or the threads ops run on */
    int utilization;          /* percent busy lately */
    gint64 total_bytes;       /* memory of the device (host memory for host devices) */
    gint64 free_bytes;        /* of which free (MemAvailable on the host) */
    gint64 allocated_bytes;   /* tensor storage live now */
    gint64 reserved_bytes;    /* held by the allocator: allocated + its cache */
    gint64 peak_bytes;        /* highest allocated since open / tdm_device_reset_peak */
    gpointer reserved[8];
} TdmDeviceInfo;

/**
 * tdm_device_info:
 * @dev: a device
 * @info: (out caller-allocates): filled in
 * @error: return location for a #GError, or NULL
 *
 * Fills @info for @dev, from the backend when it offers device_info and
 * from the core's allocation counts. Cheap enough to call once per logging
 * interval (no device-wide synchronisation).
 *
 * Returns: TRUE, or FALSE with @error set when the backend cannot query the
 * device
 */
TDM_API gboolean tdm_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
/**
 * tdm_device_host_accessible:
 * @dev: a device
 *
 * Whether the tensor memory of @dev is host memory (#TdmDeviceInfo's
 * host_accessible): what a collective that moves host memory only (shm,
 * gloo) asks in supports_device.
 *
 * Returns: TRUE when it is; FALSE when it is not or the backend cannot say
 */
TDM_API gboolean tdm_device_host_accessible(const TdmDevice *dev);
/**
 * tdm_device_reset_peak:
 * @dev: a device
 *
 * Starts a new peak: peak_bytes becomes the bytes allocated now.
 */
TDM_API void tdm_device_reset_peak(TdmDevice *dev);
/**
 * tdm_device_list:
 * @error: return location for a #GError, or NULL
 *
 * Opens every device of every available backend.
 *
 * Returns: (transfer container) (element-type TdmDevice): the devices in
 * backend priority order, then index; free the array, not the devices. NULL
 * with @error naming the device when one cannot be opened
 */
TDM_API GPtrArray *tdm_device_list(GError **error);
/**
 * tdm_host_memory:
 * @total_bytes: (out): MemTotal
 * @available_bytes: (out): MemAvailable
 *
 * The host's memory, from /proc/meminfo (else the physical pages); for host
 * backends' device_info.
 *
 * Returns: FALSE when neither can be read
 */
TDM_API gboolean tdm_host_memory(gint64 *total_bytes, gint64 *available_bytes);

/* ---- precision ---- */

/**
 * TdmPrecision:
 * @TDM_PRECISION_FP32: strict IEEE f32 (the default, every backend)
 * @TDM_PRECISION_TF32: f32 with TF32 tensor-core products
 * @TDM_PRECISION_BF16: inputs rounded to bf16, f32 accumulation
 *
 * What GEMM and convolution compute in. Tensors stay f32 whatever the
 * precision: master weights, batch-norm statistics and the loss are f32.
 */
typedef enum {
    TDM_PRECISION_FP32 = 0, /* strict IEEE f32 (the default, every backend) */
    TDM_PRECISION_TF32,     /* f32 with TF32 tensor-core products */
    TDM_PRECISION_BF16,     /* inputs rounded to bf16, f32 accumulation */
} TdmPrecision;

/**
 * tdm_precision_name:
 * @precision: a precision
 *
 * The precision's name, as --precision takes it.
 *
 * Returns: (transfer none): "fp32", "tf32" or "bf16"; "unknown" out of range
 */
TDM_API const char *tdm_precision_name(TdmPrecision precision);
/**
 * tdm_precision_from_name:
 * @name: "fp32", "tf32" or "bf16", in any case
 * @precision: (out): the precision
 * @error: return location for a #GError, or NULL
 *
 * The inverse of tdm_precision_name().
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG naming the word and
 * the three names
 */
TDM_API gboolean tdm_precision_from_name(const char *name, TdmPrecision *precision, GError **error);
/**
 * tdm_device_set_precision:
 * @dev: a device
 * @precision: the precision
 * @error: return location for a #GError, or NULL
 *
 * GEMM and convolution on @dev compute in @precision from now on (until the
 * next call; a device starts in FP32). FP32 is accepted everywhere.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_UNSUPPORTED naming the backend,
 * the device and the precision ("backend 'cpu' (cpu:0) does not offer bf16
 * precision; use --device cuda") when the backend offers nothing else or
 * refuses this one; the device then keeps its precision
 */
TDM_API gboolean tdm_device_set_precision(TdmDevice *dev, TdmPrecision precision, GError **error);
/**
 * tdm_device_get_precision:
 * @dev: a device
 *
 * The precision last set on @dev.
 *
 * Returns: the precision; FP32 when never set
 */
TDM_API TdmPrecision tdm_device_get_precision(const TdmDevice *dev);

/* ---- copies between devices ---- */

/**
 * tdm_device_can_copy_peer:
 * @src: the source device
 * @dst: the destination device
 *
 * Whether tdm_tensor_copy_across() from @src to @dst goes device to device
 * (two devices of one backend that offers copy_peer) rather than through
 * host memory: a caller keeps a staging buffer only when this is FALSE.
 *
 * Returns: TRUE for a peer copy
 */
TDM_API gboolean tdm_device_can_copy_peer(const TdmDevice *src, const TdmDevice *dst);
/**
 * tdm_tensor_copy_across:
 * @src: a plain contiguous tensor
 * @dst: an output slot on any device (shaped like @src, plain, in @src's
 *   dtype; it keeps its storage when large enough)
 * @staging: (nullable): host memory of at least @src's bytes for a copy
 *   through the host; NULL: a buffer allocated for the call
 * @error: return location for a #GError, or NULL
 *
 * Copies @src into @dst. Between two devices for which
 * tdm_device_can_copy_peer() holds, the backend copies peer to peer,
 * ordered after the work queued so far on both devices and before the work
 * queued on either later, and no host waits; otherwise the bytes go through
 * host memory with a read of @src, which waits for its device, and a write
 * of @dst. Timed under TDM_PROFILE as the row "copy_peer" or "copy_staged"
 * of the source's backend.
 *
 * Returns: TRUE, or FALSE with @error set (@src not plain and contiguous,
 * or a device failed)
 */
TDM_API gboolean tdm_tensor_copy_across(TdmTensor *src, TdmTensor *dst, void *staging,
                                        GError **error);

/* ---- streams and events ---- */

/**
 * TdmStream:
 * @TDM_STREAM_COMPUTE: ops, tensor reads and writes
 * @TDM_STREAM_COPY: host-to-device copies that overlap compute
 *
 * The streams of a device (%TDM_N_STREAMS of them). On a backend without
 * streams both are the device's one stream.
 */
typedef enum {
    TDM_STREAM_COMPUTE = 0, /* ops, tensor reads and writes */
    TDM_STREAM_COPY = 1,    /* host-to-device copies that overlap compute */
} TdmStream;

/**
 * TDM_N_STREAMS:
 *
 * The number of #TdmStream values: the streams every device has (both the
 * same stream on a backend without streams).
 */
#define TDM_N_STREAMS 2

/**
 * TdmEvent:
 *
 * A point in a stream of a device (tdm_event_record()); opaque.
 */
typedef struct _TdmEvent TdmEvent;

/**
 * tdm_event_new:
 * @dev: a device
 * @error: return location for a #GError, or NULL
 *
 * Makes an event on @dev, not recorded yet (an unrecorded event counts as
 * complete).
 *
 * Returns: (transfer full): the event, free it with tdm_event_free(); or
 * NULL with @error set
 */
TDM_API TdmEvent *tdm_event_new(TdmDevice *dev, GError **error);
/**
 * tdm_event_free:
 * @event: (transfer full) (nullable): an event
 *
 * Frees an event, even while it is pending; NULL is ignored.
 */
TDM_API void tdm_event_free(TdmEvent *event);
/**
 * tdm_event_get_device:
 * @event: an event
 *
 * The device the event belongs to.
 *
 * Returns: (transfer none): the device
 */
TDM_API TdmDevice *tdm_event_get_device(const TdmEvent *event);
/**
 * tdm_event_record:
 * @event: an event
 * @stream: a stream of the event's device
 * @error: return location for a #GError, or NULL
 *
 * Places the event after the work queued so far on @stream; a later record
 * moves it.
 *
 * Returns: TRUE, or FALSE with @error set (the device failed)
 */
TDM_API gboolean tdm_event_record(TdmEvent *event, TdmStream stream, GError **error);
/**
 * tdm_event_query:
 * @event: an event
 * @error: return location for a #GError, or NULL
 *
 * Whether the work before the last record has finished. Never blocks on a
 * backend with streams.
 *
 * Returns: TRUE once it has; FALSE while it runs (@error unset) or when the
 * device failed (@error set)
 */
TDM_API gboolean tdm_event_query(TdmEvent *event, GError **error);
/**
 * tdm_event_synchronize:
 * @event: an event
 * @timeout_s: < 0 waits without a deadline, 0 only checks, > 0 waits that
 *   many seconds
 * @error: return location for a #GError, or NULL
 *
 * Blocks the calling thread until the event completes.
 *
 * Returns: TRUE, or FALSE with @error set: %TDM_ERROR_TIMEOUT naming the
 * device, or the device's failure
 */
TDM_API gboolean tdm_event_synchronize(TdmEvent *event, double timeout_s, GError **error);
/**
 * tdm_stream_wait_event:
 * @dev: a device
 * @stream: a stream of @dev
 * @event: the event to wait for, of this or another device
 * @error: return location for a #GError, or NULL
 *
 * Makes later work on @stream of @dev wait for @event without blocking the
 * host. When the two devices share no backend the host waits for it
 * instead.
 *
 * Returns: TRUE, or FALSE with @error set (a device failed)
 */
TDM_API gboolean tdm_stream_wait_event(TdmDevice *dev, TdmStream stream, TdmEvent *event,
                                       GError **error);
/**
 * tdm_device_copy_h2d:
 * @dev: a device
 * @stream: the stream the copy is ordered on
 * @dst: a device pointer
 * @src: host memory; it must stay valid and unchanged until an event
 *   recorded on @stream after the copy completes (pinned memory from
 *   host_alloc makes the copy truly asynchronous on accelerators)
 * @n: the bytes to copy
 * @error: return location for a #GError, or NULL
 *
 * Copies @n bytes of host memory to @dst, ordered on @stream.
 *
 * Returns: TRUE, or FALSE with @error set (the device failed)
 */
TDM_API gboolean tdm_device_copy_h2d(TdmDevice *dev, TdmStream stream, void *dst,
                                     const void *src, size_t n, GError **error);
/**
 * tdm_device_synchronize_timeout:
 * @dev: a device
 * @timeout_s: as for tdm_event_synchronize()
 * @error: return location for a #GError, or NULL
 *
 * tdm_device_synchronize() for every stream of the device, with a deadline.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_TIMEOUT naming the
 * device, or the device's failure)
 */
TDM_API gboolean tdm_device_synchronize_timeout(TdmDevice *dev, double timeout_s,
                                                GError **error);
/**
 * tdm_device_native_stream:
 * @dev: a device
 * @stream: one of its streams
 *
 * The backend's own handle of a stream (a cudaStream_t on cuda), for a
 * collective plugin that orders its work after compute without including
 * the backend's headers.
 *
 * Returns: (transfer none) (nullable): the handle; NULL on backends whose
 * streams are the calling thread (ref, cpu)
 */
TDM_API gpointer tdm_device_native_stream(TdmDevice *dev, TdmStream stream);

G_END_DECLS

#endif /* TANDEM_DEVICE_H */

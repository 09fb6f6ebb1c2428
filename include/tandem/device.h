/* tandem/device.h - what a device is and how work on it is ordered.
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

typedef enum {
    TDM_DEVICE_KIND_UNKNOWN = 0, /* the backend does not say */
    TDM_DEVICE_KIND_CPU,         /* the host's processors */
    TDM_DEVICE_KIND_GPU,         /* an accelerator with its own memory */
    TDM_DEVICE_KIND_VIRTUAL,     /* a device simulated on the host (ref:N) */
} TdmDeviceKind;

/* "cpu", "gpu", "virtual" or "unknown" (transfer none). */
TDM_API const char *tdm_device_kind_name(TdmDeviceKind kind);

#define TDM_DEVICE_INFO_NAME_LEN 96
#define TDM_DEVICE_INFO_CAPABILITY_LEN 48

/* Every byte and count figure is -1 when unknown. */
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

/* Fill `info` for `dev`. Cheap enough to call once per logging interval
 * (no device-wide synchronisation). FALSE with the error set when the
 * backend cannot query the device. */
TDM_API gboolean tdm_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
/* Whether the tensor memory of `dev` is host memory (TdmDeviceInfo's
 * host_accessible; FALSE when the backend cannot say): what a collective
 * that moves host memory only (shm, gloo) asks in supports_device. */
TDM_API gboolean tdm_device_host_accessible(const TdmDevice *dev);
/* Start a new peak: peak_bytes becomes the bytes allocated now. */
TDM_API void tdm_device_reset_peak(TdmDevice *dev);
/* Every device of every available backend, in backend priority order then
 * index, opened (transfer container: free the array, not the devices).
 * NULL with the error naming the device when one cannot be opened. */
TDM_API GPtrArray *tdm_device_list(GError **error);
/* The host's memory: MemTotal and MemAvailable of /proc/meminfo (else the
 * physical pages). FALSE when neither can be read. For host backends. */
TDM_API gboolean tdm_host_memory(gint64 *total_bytes, gint64 *available_bytes);

/* ---- precision ---- */

/* What GEMM and convolution compute in. Tensors stay f32 whatever the
 * precision: master weights, batch-norm statistics and the loss are f32. */
typedef enum {
    TDM_PRECISION_FP32 = 0, /* strict IEEE f32 (the default, every backend) */
    TDM_PRECISION_TF32,     /* f32 with TF32 tensor-core products */
    TDM_PRECISION_BF16,     /* inputs rounded to bf16, f32 accumulation */
} TdmPrecision;

/* "fp32", "tf32" or "bf16" (transfer none); "unknown" out of range. */
TDM_API const char *tdm_precision_name(TdmPrecision precision);
/* The inverse of tdm_precision_name (case-insensitive); anything else is
 * TDM_ERROR_INVALID_ARG naming the word and the three names. */
TDM_API gboolean tdm_precision_from_name(const char *name, TdmPrecision *precision, GError **error);
/* GEMM and convolution on `dev` compute in `precision` from now on (until
 * the next call; a device starts in FP32). FP32 is accepted everywhere; a
 * backend that offers nothing else, or refuses this one, fails with
 * TDM_ERROR_UNSUPPORTED naming the backend, the device and the precision
 * ("backend 'cpu' (cpu:0) does not offer bf16 precision; use --device
 * cuda"), and the device keeps its precision. */
TDM_API gboolean tdm_device_set_precision(TdmDevice *dev, TdmPrecision precision, GError **error);
/* The precision last set on `dev` (FP32 when never set). */
TDM_API TdmPrecision tdm_device_get_precision(const TdmDevice *dev);

/* ---- copies between devices ---- */

/* Whether tdm_tensor_copy_across from `src` to `dst` goes device to device
 * (two devices of one backend that offers copy_peer) rather than through
 * host memory: a caller keeps a staging buffer only when this is FALSE. */
TDM_API gboolean tdm_device_can_copy_peer(const TdmDevice *src, const TdmDevice *dst);
/* Copy the plain contiguous tensor `src` into `dst`, an output slot on any
 * device (shaped like src, plain, in src's dtype; it keeps its storage when
 * large enough). Between two devices for which tdm_device_can_copy_peer
 * holds, the backend copies peer to peer, ordered after the work queued so
 * far on both devices and before the work queued on either later, and no
 * host waits; otherwise the bytes go through host memory (`staging`, at
 * least src's bytes, or a buffer allocated for the call when NULL) with a
 * read of src, which waits for its device, and a write of dst. Timed under
 * TDM_PROFILE as the row "copy_peer" or "copy_staged" of the source's
 * backend. */
TDM_API gboolean tdm_tensor_copy_across(TdmTensor *src, TdmTensor *dst, void *staging,
                                        GError **error);

/* ---- streams and events ---- */

typedef enum {
    TDM_STREAM_COMPUTE = 0, /* ops, tensor reads and writes */
    TDM_STREAM_COPY = 1,    /* host-to-device copies that overlap compute */
} TdmStream;

#define TDM_N_STREAMS 2

typedef struct _TdmEvent TdmEvent;

/* A new event on `dev`, not recorded yet (an unrecorded event counts as
 * complete). Transfer full: free with tdm_event_free. */
TDM_API TdmEvent *tdm_event_new(TdmDevice *dev, GError **error);
/* May be called while the event is pending; NULL is ignored. */
TDM_API void tdm_event_free(TdmEvent *event);
/* The device the event belongs to (transfer none). */
TDM_API TdmDevice *tdm_event_get_device(const TdmEvent *event);
/* Place the event after the work queued so far on `stream` of its device;
 * a later record moves it. */
TDM_API gboolean tdm_event_record(TdmEvent *event, TdmStream stream, GError **error);
/* TRUE once the work before the last record has finished; FALSE while it
 * runs (error unset) or when the device failed (error set). Never blocks on
 * a backend with streams. */
TDM_API gboolean tdm_event_query(TdmEvent *event, GError **error);
/* Block the calling thread until the event completes, at most timeout_s
 * (see the top of this file). */
TDM_API gboolean tdm_event_synchronize(TdmEvent *event, double timeout_s, GError **error);
/* Make later work on `stream` of `dev` wait for `event` without blocking
 * the host. The event may belong to another device; when the two devices
 * share no backend the host waits for it instead. */
TDM_API gboolean tdm_stream_wait_event(TdmDevice *dev, TdmStream stream, TdmEvent *event,
                                       GError **error);
/* Copy n bytes of host memory to the device pointer dst, ordered on
 * `stream`. `src` must stay valid and unchanged until an event recorded on
 * that stream after the copy completes (pinned memory from host_alloc makes
 * it truly asynchronous on accelerators). */
TDM_API gboolean tdm_device_copy_h2d(TdmDevice *dev, TdmStream stream, void *dst,
                                     const void *src, size_t n, GError **error);
/* tdm_device_synchronize for every stream of the device, at most timeout_s. */
TDM_API gboolean tdm_device_synchronize_timeout(TdmDevice *dev, double timeout_s,
                                                GError **error);
/* The backend's own handle of a stream (a cudaStream_t on cuda), for a
 * collective plugin that orders its work after compute without including
 * the backend's headers; NULL on backends whose streams are the calling
 * thread (ref, cpu). Transfer none. */
TDM_API gpointer tdm_device_native_stream(TdmDevice *dev, TdmStream stream);

G_END_DECLS

#endif /* TANDEM_DEVICE_H */

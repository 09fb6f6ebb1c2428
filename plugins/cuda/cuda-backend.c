/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-backend.c - the cuda backend: plugin, probe, devices,
 * errors, the per-op wrapper and the class table.
 *
 * The plugin's init makes no CUDA call: `tandem run` forks its workers, and
 * a CUDA context does not survive a fork. Everything that touches the
 * driver waits for the probe (run when the backend is first considered),
 * which also decides the device count. Without a driver the probe fails
 * with the reason `tandem inspect` shows and `--device cuda` reports.
 *
 * Each logical device (TDM_CUDA_DEVICES=N spreads N of them round-robin
 * over the physical GPUs) has two non-blocking streams, its own cuBLAS,
 * cuBLASLt and cuDNN handles bound to the compute stream, and two caching
 * allocators (device memory, pinned host memory; cuda-alloc.h), so that
 * a steady training step never calls cudaMalloc.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-backend.h"
#include "cuda-blas-lib.h"

/* Above cpu's 50: a machine with a GPU trains on it by default. */
#define CUDA_PRIORITY 80

/* ---- discovery: driver, devices, library versions ---- */

static struct {
    gboolean ok;
    char *reason; /* why not, when !ok */
    int physical; /* CUDA devices visible to this process */
    int logical;  /* devices the backend exposes (TDM_CUDA_DEVICES) */
} cuda_found;

static gboolean env_flag(const char *name)
{
    const char *v = g_getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0 &&
           g_ascii_strcasecmp(v, "false") != 0 && g_ascii_strcasecmp(v, "no") != 0 &&
           g_ascii_strcasecmp(v, "off") != 0;
}

/* Compares a library's version as loaded with the one compiled in: FALSE
 * (and the reason) on another major version, a message when older. */
static gboolean check_version(const char *lib, long compiled, long loaded, long major_div,
                              const char *text_compiled, const char *text_loaded, char **reason)
{
    if (compiled / major_div != loaded / major_div) {
        *reason = g_strdup_printf("%s %s is loaded but the plugin was built against %s "
                                  "(another major version: rebuild it against this one, or "
                                  "put %s %s first on LD_LIBRARY_PATH)",
                                  lib, text_loaded, text_compiled, lib, text_compiled);
        return FALSE;
    }
    if (loaded < compiled) {
        g_message("cuda: %s %s is loaded, older than %s the plugin was built against", lib,
                  text_loaded, text_compiled);
    }
    return TRUE;
}

static char *cudnn_text(long v)
{
    return g_strdup_printf("%ld.%ld.%ld", v / 10000, v / 100 % 100, v % 100);
}

static char *cudart_text(long v)
{
    return g_strdup_printf("%ld.%ld", v / 1000, v / 10 % 100);
}

static gboolean check_library_versions(char **reason)
{
    int rt = 0;
    cudaError_t rc = cudaRuntimeGetVersion(&rt);
    if (rc != cudaSuccess) {
        *reason = g_strdup_printf("cudaRuntimeGetVersion failed: %s", cudaGetErrorString(rc));
        return FALSE;
    }
    g_autofree char *rt_c = cudart_text(CUDART_VERSION), *rt_l = cudart_text(rt);
    if (!check_version("the CUDA runtime", CUDART_VERSION, rt, 1000, rt_c, rt_l, reason)) {
        return FALSE;
    }
    /* cuBLAS is not checked here: it is loaded (and its version checked)
     * when a device is opened (cuda-blas-lib.h). */
    long dnn = (long)cudnnGetVersion();
    g_autofree char *dnn_c = cudnn_text(CUDNN_VERSION), *dnn_l = cudnn_text(dnn);
    return check_version("cuDNN", CUDNN_VERSION, dnn, 10000, dnn_c, dnn_l, reason);
}

static gpointer cuda_discover(gpointer unused)
{
    /* The runtime finds the driver through libcuda.so.1; without it every
     * call fails with a less telling error, so look first. The handle
     * stays open: the runtime loads the same library anyway. */
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == NULL) {
        cuda_found.reason = g_strdup("no NVIDIA driver (libcuda.so.1 not found)");
        return NULL;
    }
    /* Without a usable driver cudaGetDeviceCount leaves the count alone. */
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    const char *visible = g_getenv("CUDA_VISIBLE_DEVICES");
    if (rc == cudaErrorInsufficientDriver) {
        int driver = 0;
        (void)cudaDriverGetVersion(&driver);
        g_autofree char *drv = cudart_text(driver), *rt = cudart_text(CUDART_VERSION);
        cuda_found.reason = g_strdup_printf(
            "the NVIDIA driver (CUDA %s) is older than the CUDA %s runtime the plugin uses "
            "(cudaGetDeviceCount: %s)",
            driver > 0 ? drv : "unknown", rt, cudaGetErrorName(rc));
        return NULL;
    }
    if (rc == cudaErrorNoDevice || (rc == cudaSuccess && count == 0)) {
        cuda_found.reason = g_strdup_printf("no CUDA device visible (CUDA_VISIBLE_DEVICES=%s)",
                                            visible != NULL ? visible : "unset");
        return NULL;
    }
    if (rc != cudaSuccess) {
        cuda_found.reason = g_strdup_printf("cudaGetDeviceCount failed: %s (%s)",
                                            cudaGetErrorName(rc), cudaGetErrorString(rc));
        (void)cudaGetLastError();
        return NULL;
    }
    if (!check_library_versions(&cuda_found.reason)) {
        return NULL;
    }
    cuda_found.physical = count;
    cuda_found.logical = count;
    const char *n = g_getenv("TDM_CUDA_DEVICES");
    if (n != NULL && n[0] != '\0') {
        guint64 v = 0;
        if (!g_ascii_string_to_unsigned(n, 10, 1, 64, &v, NULL)) {
            cuda_found.reason = g_strdup_printf(
                "TDM_CUDA_DEVICES='%s': expected a number of devices in [1, 64]", n);
            return NULL;
        }
        cuda_found.logical = (int)v;
    }
    cuda_found.ok = TRUE;
    return NULL;
}

static void cuda_discover_once(void)
{
    static GOnce once = G_ONCE_INIT;
    g_once(&once, cuda_discover, NULL);
}

static gboolean cuda_probe(gconstpointer klass, char **reason)
{
    cuda_discover_once();
    if (!cuda_found.ok && reason != NULL) {
        *reason = g_strdup(cuda_found.reason);
    }
    return cuda_found.ok;
}

static int cuda_device_count(void)
{
    cuda_discover_once();
    return cuda_found.ok ? cuda_found.logical : 0;
}

/* ---- errors ---- */

/* Errors after which the CUDA context cannot run anything more: the
 * process must be restarted (CUDA's own documentation calls them
 * "sticky"). */
static gboolean cuda_error_is_sticky(cudaError_t rc)
{
    switch (rc) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorContextIsDestroyed:
        return TRUE;
    default:
        return FALSE;
    }
}

static const char *dev_name(TdmDevice *dev)
{
    return dev != NULL && dev->name != NULL ? dev->name : "cuda";
}

/* Records the first sticky failure of a device; later ops refuse to run. */
static void mark_broken(TdmDevice *dev, const char *message)
{
    if (dev == NULL || cuda_dev(dev) == NULL) {
        return;
    }
    char *copy = g_strdup(message);
    if (!g_atomic_pointer_compare_and_exchange(&cuda_dev(dev)->broken, NULL, copy)) {
        g_free(copy);
    }
}

gboolean cuda_check(TdmDevice *dev, cudaError_t rc, const char *op, const char *what,
                    GError **error)
{
    if (rc == cudaSuccess) {
        return TRUE;
    }
    /* The runtime also keeps the error as its "last error" (which the next
     * cuda_op_end would report again) unless it is sticky: clear it. */
    (void)cudaGetLastError();
    gboolean sticky = cuda_error_is_sticky(rc);
    g_autofree char *message = g_strdup_printf(
        "%s on %s: %s failed: %s (%s)%s", op, dev_name(dev), what, cudaGetErrorName(rc),
        cudaGetErrorString(rc), sticky ? "; the device cannot run more work in this process" : "");
    if (sticky) {
        mark_broken(dev, message);
    }
    g_set_error_literal(error, TDM_ERROR, TDM_ERROR_BACKEND, message);
    return FALSE;
}

gboolean cuda_check_cublas(TdmDevice *dev, cublasStatus_t rc, const char *op, const char *what,
                           GError **error)
{
    if (rc == CUBLAS_STATUS_SUCCESS) {
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "%s on %s: %s failed: %s (cuBLAS status %d)",
                op, dev_name(dev), what, cuda_blas.cublasGetStatusString(rc), (int)rc);
    return FALSE;
}

gboolean cuda_check_cudnn(TdmDevice *dev, cudnnStatus_t rc, const char *op, const char *what,
                          GError **error)
{
    if (rc == CUDNN_STATUS_SUCCESS) {
        return TRUE;
    }
    /* cuDNN 9 keeps a more precise message of the last failure on this
     * thread (which parameter it refused, and why). */
    char detail[512] = "";
    cudnnGetLastErrorString(detail, sizeof(detail));
    g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                "%s on %s: %s failed: %s (cuDNN status %d)%s%s", op, dev_name(dev), what,
                cudnnGetErrorString(rc), (int)rc, detail[0] != '\0' ? ": " : "", detail);
    return FALSE;
}

/* ---- the per-op wrapper ---- */

/* The runtime keeps the current device per host thread, and cudaGetDevice
 * reads it without calling the driver: comparing first spares a
 * cudaSetDevice per op when a thread drives one device (the common case,
 * `dp` runs one thread per device), and stays right when other code of the
 * process (the nccl plugin) switched devices on this thread meanwhile,
 * which a cache of our own would not see. */
gboolean cuda_set_current(TdmDevice *dev, const char *op, GError **error)
{
    int ordinal = cuda_dev(dev)->ordinal;
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == ordinal) {
        return TRUE;
    }
    return cuda_check(dev, cudaSetDevice(ordinal), op, "cudaSetDevice", error);
}

cudaStream_t cuda_stream_of(TdmDevice *dev, TdmStream stream)
{
    CudaDevice *d = cuda_dev(dev);
    return stream == TDM_STREAM_COPY ? d->copy : d->compute;
}

gboolean cuda_op_begin(TdmDevice *dev, const char *op, GError **error)
{
    CudaDevice *d = cuda_dev(dev);
    const char *broken = g_atomic_pointer_get(&d->broken);
    if (broken != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "%s on %s: the device failed earlier and cannot run more work: %s", op, d->name,
                    broken);
        return FALSE;
    }
    return cuda_set_current(dev, op, error);
}

gboolean cuda_op_end(TdmDevice *dev, const char *op, gboolean ok, GError **error)
{
    CudaDevice *d = cuda_dev(dev);
    /* A launch that failed (bad configuration, no kernel image for this
     * GPU) says so only here; an asynchronous fault of an earlier kernel
     * may surface here too (then it is sticky). */
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        if (ok) {
            return cuda_check(dev, rc, op, "a kernel launch", error);
        }
        /* The op has its own error already; keep the device's state. */
        cuda_check(dev, rc, op, "a kernel launch", NULL);
        return FALSE;
    }
    if (ok && d->sync_each_op) {
        /* TDM_CUDA_SYNC=1: an asynchronous fault is reported by the op
         * that caused it, not by a later one. */
        return cuda_check(dev, cudaStreamSynchronize(d->compute), op,
                          "cudaStreamSynchronize after the op (TDM_CUDA_SYNC=1)", error);
    }
    return ok;
}

gboolean cuda_launched(TdmDevice *dev, cudaError_t rc, const char *op, const char *kernel,
                       const TdmTensor *t, GError **error)
{
    if (rc == cudaSuccess) {
        return TRUE;
    }
    g_autofree char *shape = tdm_tensor_shape_string(t);
    g_autofree char *what = g_strdup_printf("%s %s", kernel, shape);
    return cuda_check(dev, rc, op, what, error);
}

gboolean cuda_check_plain(const char *op, const char *what, const TdmTensor *t, GError **error)
{
    if (t->layout != NULL || !tdm_tensor_is_contiguous(t)) {
        g_autofree char *shape = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s on %s: %s %s is not a plain dense tensor (the cuda backend's kernels "
                    "take plain contiguous tensors only)",
                    op, dev_name(t->device), what, shape);
        return FALSE;
    }
    if (t->storage == NULL && tdm_tensor_numel(t) > 0) {
        g_autofree char *shape = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s on %s: %s %s has no storage", op,
                    dev_name(t->device), what, shape);
        return FALSE;
    }
    return TRUE;
}

gboolean cuda_ensure_out(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                         GError **error)
{
    return tdm_tensor_ensure(t, dtype, ndim, shape, NULL, 0, error);
}

void *cuda_workspace(TdmDevice *dev, size_t nbytes, GError **error)
{
    CudaDevice *d = cuda_dev(dev);
    if (d->workspace != NULL && d->workspace_bytes >= nbytes) {
        return d->workspace;
    }
    /* Grow by at least half again, so that a slowly growing series of
     * shapes does not reallocate at each one. The old block goes back
     * first: the allocator hands memory out again in stream order, after
     * the work that used it, so old and new never both count. */
    size_t want = MAX(nbytes, d->workspace_bytes + d->workspace_bytes / 2);
    cuda_workspace_drop(dev);
    void *p = cuda_alloc_get(d->alloc, want, error);
    if (p == NULL) {
        g_prefix_error(error, "%s workspace of %zu bytes: ", d->name, want);
        return NULL;
    }
    d->workspace = p;
    d->workspace_bytes = want;
    return p;
}

void cuda_workspace_drop(TdmDevice *dev)
{
    CudaDevice *d = cuda_dev(dev);
    cuda_alloc_put(d->alloc, d->workspace);
    d->workspace = NULL;
    d->workspace_bytes = 0;
}

/* ---- precision ---- */

gboolean cuda_set_precision(TdmDevice *dev, TdmPrecision precision, GError **error)
{
    CudaDevice *d = cuda_dev(dev);
    if ((int)precision < 0 || precision > TDM_PRECISION_BF16) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "set_precision on %s: unknown precision %d", d->name, (int)precision);
        return FALSE;
    }
    /* TF32 and bf16 tensor-core math came with Ampere (8.0). */
    if (precision != TDM_PRECISION_FP32 && d->props.prop.major < 8) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "set_precision on %s: %s needs compute capability 8.0 or newer, %s (%s) has "
                    "%d.%d",
                    d->name, tdm_precision_name(precision), d->name, d->props.prop.name,
                    d->props.prop.major, d->props.prop.minor);
        return FALSE;
    }
    /* cuBLAS's default math is strict FP32 (TF32 only when asked for);
     * bf16 GEMMs go through cuBLASLt with bf16 inputs, which needs no mode. */
    cublasMath_t mode =
        precision == TDM_PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    g_mutex_lock(&d->lock);
    gboolean ok = cuda_check_cublas(dev, cuda_blas.cublasSetMathMode(d->cublas, mode),
                                    "set_precision", "cublasSetMathMode", error);
    if (ok) {
        d->precision = precision;
    }
    g_mutex_unlock(&d->lock);
    return ok;
}

/* ---- devices ---- */

static void *device_raw_alloc(gpointer ctx, size_t nbytes, GError **error)
{
    TdmDevice *dev = ctx;
    void *p = NULL;
    if (!cuda_set_current(dev, "alloc", error) ||
        !cuda_check(dev, cudaMalloc(&p, nbytes), "alloc", "cudaMalloc", error)) {
        return NULL;
    }
    return p;
}

static void device_raw_free(gpointer ctx, void *ptr, size_t nbytes)
{
    TdmDevice *dev = ctx;
    GError *err = NULL;
    if (!cuda_set_current(dev, "free", &err) ||
        !cuda_check(dev, cudaFree(ptr), "free", "cudaFree", &err)) {
        g_warning("%s", err->message);
        g_error_free(err);
    }
}

static gboolean device_raw_synchronize(gpointer ctx, GError **error)
{
    TdmDevice *dev = ctx;
    return cuda_set_current(dev, "alloc", error) &&
           cuda_check(dev, cudaDeviceSynchronize(), "alloc",
                      "cudaDeviceSynchronize before releasing cached memory", error);
}

static void *host_raw_alloc(gpointer ctx, size_t nbytes, GError **error)
{
    TdmDevice *dev = ctx;
    void *p = NULL;
    /* Portable: pinned for every device of the process (dp's replicas read
     * the same loader buffers). */
    if (!cuda_set_current(dev, "host_alloc", error) ||
        !cuda_check(dev, cudaHostAlloc(&p, nbytes, cudaHostAllocPortable), "host_alloc",
                    "cudaHostAlloc", error)) {
        return NULL;
    }
    return p;
}

static void host_raw_free(gpointer ctx, void *ptr, size_t nbytes)
{
    TdmDevice *dev = ctx;
    GError *err = NULL;
    if (!cuda_check(dev, cudaFreeHost(ptr), "host_free", "cudaFreeHost", &err)) {
        g_warning("%s", err->message);
        g_error_free(err);
    }
}

static void cuda_device_close(TdmDevice *dev)
{
    CudaDevice *d = cuda_dev(dev);
    if (d == NULL) {
        return;
    }
    GError *err = NULL;
    if (cuda_set_current(dev, "device_close", &err) && d->broken == NULL) {
        /* Work still queued may use the memory released below. */
        if (d->compute != NULL) {
            cuda_check(dev, cudaStreamSynchronize(d->compute), "device_close",
                       "cudaStreamSynchronize (compute)", &err);
        }
        if (err == NULL && d->copy != NULL) {
            cuda_check(dev, cudaStreamSynchronize(d->copy), "device_close",
                       "cudaStreamSynchronize (copy)", &err);
        }
    }
    if (err != NULL) {
        g_warning("%s", err->message);
        g_clear_error(&err);
    }
    if (d->alloc != NULL) {
        /* The loss state lives in the allocators released below. */
        cuda_vector_close(dev);
        cuda_alloc_put(d->alloc, d->workspace);
        cuda_alloc_destroy(d->alloc);
    }
    if (d->host_alloc != NULL) {
        cuda_alloc_destroy(d->host_alloc);
    }
    if (d->cudnn != NULL) {
        cudnnDestroy(d->cudnn);
    }
    if (d->lt != NULL) {
        cuda_blas.cublasLtDestroy(d->lt);
    }
    if (d->cublas != NULL) {
        cuda_blas.cublasDestroy(d->cublas);
    }
    cudaStream_t streams[] = {d->copy, d->compute};
    for (size_t i = 0; i < G_N_ELEMENTS(streams); i++) {
        if (streams[i] != NULL) {
            cudaStreamDestroy(streams[i]);
        }
    }
    (void)cudaGetLastError();
    g_mutex_clear(&d->lock);
    g_free(d->broken);
    g_free(d->name);
    g_free(d);
    dev->priv = NULL;
}

static gboolean cuda_device_open(TdmDevice *dev, GError **error)
{
    cuda_discover_once();
    if (!cuda_found.ok) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE, "cuda is unavailable: %s",
                    cuda_found.reason);
        return FALSE;
    }
    CudaDevice *d = g_new0(CudaDevice, 1);
    d->index = dev->index;
    d->ordinal = dev->index % cuda_found.physical;
    d->name = g_strdup(dev->name);
    g_mutex_init(&d->lock);
    dev->priv = d;
    const char *op = "device_open";

    /* The device first: streams, handles and memory belong to the
     * current device. */
    gboolean ok = cuda_set_current(dev, op, error) &&
                  cuda_check(dev, cudaGetDeviceProperties(&d->props.prop, d->ordinal), op,
                             "cudaGetDeviceProperties", error);
    d->props.valid = ok;
    /* SASS runs on its own major version from its minor on, PTX on any
     * newer GPU: nothing runs below the oldest architecture built. */
    if (ok && d->props.prop.major * 10 + d->props.prop.minor < TDM_CUDA_MIN_ARCH) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: GPU %d (%s) has compute capability %d.%d, older than every "
                    "architecture the kernels are built for (%s; configure --with-cuda-arch)",
                    d->name, d->ordinal, d->props.prop.name, d->props.prop.major,
                    d->props.prop.minor, TDM_CUDA_ARCHS);
        ok = FALSE;
    }
    /* Never the legacy default stream, which would serialise everything
     * with every other stream of the device. */
    ok = ok &&
         cuda_check(dev, cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking), op,
                    "cudaStreamCreateWithFlags (compute)", error) &&
         cuda_check(dev, cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking), op,
                    "cudaStreamCreateWithFlags (copy)", error);
    /* cuBLAS is loaded now, not with the plugin (cuda-blas-lib.h). */
    if (ok && !cuda_blas_lib_load(error)) {
        g_prefix_error(error, "%s: ", d->name);
        ok = FALSE;
    }
    ok = ok &&
         cuda_check_cublas(dev, cuda_blas.cublasCreate(&d->cublas), op, "cublasCreate", error) &&
         cuda_check_cublas(dev, cuda_blas.cublasSetStream(d->cublas, d->compute), op,
                           "cublasSetStream", error) &&
         cuda_check_cublas(dev, cuda_blas.cublasLtCreate(&d->lt), op, "cublasLtCreate", error) &&
         cuda_check_cudnn(dev, cudnnCreate(&d->cudnn), op, "cudnnCreate", error) &&
         cuda_check_cudnn(dev, cudnnSetStream(d->cudnn, d->compute), op, "cudnnSetStream", error);
    if (ok) {
        CudaAllocBacking device_backing = {
            .raw_alloc = device_raw_alloc,
            .raw_free = device_raw_free,
            .synchronize = device_raw_synchronize,
            .ctx = dev,
        };
        CudaAllocBacking host_backing = {
            .raw_alloc = host_raw_alloc,
            .raw_free = host_raw_free,
            .synchronize = device_raw_synchronize,
            .ctx = dev,
        };
        g_autofree char *host_name = g_strdup_printf("%s pinned host", d->name);
        d->alloc = cuda_alloc_new(&device_backing, d->name);
        d->host_alloc = cuda_alloc_new(&host_backing, host_name);
    }
    d->deterministic = env_flag("TDM_CUDA_DETERMINISTIC");
    d->sync_each_op = env_flag("TDM_CUDA_SYNC");
    /* Strict FP32 unless asked (TF32 would break the 1e-4 tolerance of the
     * conformance tests against ref). */
    ok = ok && cuda_set_precision(
                   dev, env_flag("TDM_CUDA_TF32") ? TDM_PRECISION_TF32 : TDM_PRECISION_FP32, error);
    if (!ok) {
        cuda_device_close(dev);
        return FALSE;
    }
    g_debug("cuda: %s is GPU %d (%s, compute capability %d.%d)%s%s", d->name, d->ordinal,
            d->props.prop.name, d->props.prop.major, d->props.prop.minor,
            d->deterministic ? ", deterministic" : "", d->sync_each_op ? ", TDM_CUDA_SYNC" : "");
    return TRUE;
}

static const char *cuda_layout_name(TdmDevice *dev, gconstpointer layout)
{
    return "plain";
}

/* ---- the class table ---- */

static const TdmBackendClass cuda_backend_class = {
    .iface_version = TDM_BACKEND_IFACE_VERSION,
    .struct_size = sizeof(TdmBackendClass),
    .device_type = "cuda",
    .device_count = cuda_device_count,
    .device_open = cuda_device_open,
    .device_close = cuda_device_close,
    .synchronize = cuda_synchronize,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .read = cuda_read,
    .write = cuda_write,
    .reorder = cuda_reorder,
    .layout_name = cuda_layout_name,
    .cache_free = cuda_cache_free,
    .gemm = cuda_gemm,
    .bias_grad = cuda_bias_grad,
    .conv2d_forward = cuda_conv2d_forward,
    .conv2d_backward_data = cuda_conv2d_backward_data,
    .conv2d_backward_filter = cuda_conv2d_backward_filter,
    .batchnorm_forward = cuda_batchnorm_forward,
    .batchnorm_backward = cuda_batchnorm_backward,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .add = cuda_add,
    .maxpool2d_forward = cuda_maxpool2d_forward,
    .maxpool2d_backward = cuda_maxpool2d_backward,
    .avgpool2d_forward = cuda_avgpool2d_forward,
    .avgpool2d_backward = cuda_avgpool2d_backward,
    .global_avgpool_forward = cuda_global_avgpool_forward,
    .global_avgpool_backward = cuda_global_avgpool_backward,
    .softmax_xent = cuda_softmax_xent,
    .dropout_forward = cuda_dropout_forward,
    .dropout_backward = cuda_dropout_backward,
    .fill = cuda_fill,
    .copy = cuda_copy,
    .scale = cuda_scale,
    .axpy = cuda_axpy,
    .sum_squares = cuda_sum_squares,
    .cast = cuda_cast,
    .sgd_update = cuda_sgd_update,
    .adamw_update = cuda_adamw_update,
    .batchnorm_relu_forward = cuda_batchnorm_relu_forward,
    .batchnorm_relu_backward = cuda_batchnorm_relu_backward,
    .add_relu = cuda_add_relu,
    .sgd_update_zero_grad = cuda_sgd_update_zero_grad,
    .adamw_update_zero_grad = cuda_adamw_update_zero_grad,
    .conv2d_relu_forward = cuda_conv2d_relu_forward,
    .stream_ops = &cuda_stream_ops,
    .device_info = cuda_device_info,
    .softmax_xent_stats = cuda_softmax_xent_stats,
    .set_precision = cuda_set_precision,
    .copy_peer = cuda_copy_peer,
};

/* No CUDA call here (see the top of the file): the probe does the work. */
static gboolean cuda_plugin_init(TdmPlugin *plugin, GError **error)
{
    return tdm_plugin_add_feature(plugin, TDM_FEATURE_BACKEND, "cuda", CUDA_PRIORITY,
                                  &cuda_backend_class,
                                  "NVIDIA GPUs: cuBLASLt GEMM, cuDNN convolutions, own kernels",
                                  NULL, cuda_probe, error) != NULL;
}

TDM_PLUGIN_DEFINE(cuda, "MIT", "CUDA backend (cuBLAS, cuDNN) for NVIDIA GPUs",
                  "tandem", cuda_plugin_init)

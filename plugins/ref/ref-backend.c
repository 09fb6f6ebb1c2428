/* SPDX-License-Identifier: MIT */
/* plugins/ref/ref-backend.c - the reference backend's plugin, devices and memory.
 *
 * Registers the BACKEND feature "ref" (priority 10: picked automatically only
 * when no faster backend is available). Devices are virtual: TDM_REF_DEVICES=N
 * exposes N of them, each with its own allocations and byte count, so code
 * that spreads work over several devices runs honestly on one CPU. Memory is
 * host memory (64-byte aligned, zero-filled); every copy is a memcpy and
 * nothing runs asynchronously, except copies queued on the copy stream
 * (ref-device.c, TDM_REF_COPY_DELAY_US). Only the plain layout exists here;
 * read and write also accept strided plain views. The one argument check
 * every op makes (plain and dense, ref's own limit) lives here too.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define REF_ALIGN 64
#define REF_MAX_DEVICES 256

/* ---- what ref cannot read ---- */

/* Dense row-major strides, ignoring dims of size 1 (their stride never matters). */
static gboolean ref_is_dense(const TdmTensor *t)
{
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) {
            return FALSE;
        }
        expect *= t->shape[i];
    }
    return TRUE;
}

gboolean ref_check_plain(const char *op, const char *what, const TdmTensor *t, GError **error)
{
    if (t->layout != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "ref %s: %s has a non-plain layout; the ref backend handles plain tensors only",
                    op, what);
        return FALSE;
    }
    if (!ref_is_dense(t)) {
        g_autofree char *s = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "ref %s: %s %s is a strided view; ops need contiguous tensors", op, what, s);
        return FALSE;
    }
    return TRUE;
}

gboolean ref_ensure_out(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                        GError **error)
{
    return tdm_tensor_ensure(t, dtype, ndim, shape, NULL, 0, error);
}

/* ---- devices ---- */

static int ref_device_count(void)
{
    const char *env = g_getenv("TDM_REF_DEVICES");
    if (env == NULL || *env == '\0') {
        return 1;
    }
    char *end = NULL;
    long n = strtol(env, &end, 10);
    if (*end != '\0' || n < 1) {
        g_warning("TDM_REF_DEVICES=%s is not a positive integer; using 1 device", env);
        return 1;
    }
    return n > REF_MAX_DEVICES ? REF_MAX_DEVICES : (int)n;
}

static gboolean ref_device_open(TdmDevice *dev, GError **error)
{
    RefDevice *rd = g_new0(RefDevice, 1);
    rd->index = dev->index;
    rd->num_threads = 1;
    ref_stream_open(dev, rd);
    dev->priv = rd;
    return TRUE;
}

static void ref_device_close(TdmDevice *dev)
{
    if (dev->priv != NULL) {
        ref_stream_close(dev->priv);
    }
    g_clear_pointer(&dev->priv, g_free);
}

static gboolean ref_synchronize(TdmDevice *dev, GError **error)
{
    /* Every op has finished when it returns; only the copy stream may run. */
    return ref_stream_drain(dev, -1.0, error);
}

static void ref_set_num_threads(TdmDevice *dev, int n)
{
    /* The oracle is single-threaded on purpose: the number is only recorded. */
    RefDevice *rd = dev->priv;
    if (rd != NULL) {
        rd->num_threads = n;
    }
}

/* ---- memory ---- */

static void *ref_aligned_alloc(const char *who, size_t nbytes, GError **error)
{
    /* Round up so that a zero-byte request still yields a unique pointer. */
    size_t rounded = (nbytes + REF_ALIGN - 1) / REF_ALIGN * REF_ALIGN;
    if (rounded == 0) {
        rounded = REF_ALIGN;
    }
    void *ptr = NULL;
    int rc = posix_memalign(&ptr, REF_ALIGN, rounded);
    if (rc != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "%s: cannot allocate %zu bytes: %s", who,
                    nbytes, g_strerror(rc));
        return NULL;
    }
    memset(ptr, 0, rounded);
    return ptr;
}

static void *ref_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    void *ptr = ref_aligned_alloc(dev->name, nbytes, error);
    RefDevice *rd = dev->priv;
    if (ptr != NULL && rd != NULL) {
        g_atomic_pointer_add(&rd->live_bytes, (gssize)nbytes);
    }
    return ptr;
}

static void ref_free(TdmDevice *dev, void *ptr, size_t nbytes)
{
    RefDevice *rd = dev->priv;
    if (ptr != NULL && rd != NULL) {
        g_atomic_pointer_add(&rd->live_bytes, -(gssize)nbytes);
    }
    free(ptr);
}

static void *ref_host_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    return ref_aligned_alloc("ref host memory", nbytes, error);
}

static void ref_host_free(TdmDevice *dev, void *ptr)
{
    free(ptr);
}

static gboolean ref_copy_bytes(void *dst, const void *src, size_t n, GError **error)
{
    if (n == 0) {
        return TRUE;
    }
    if (dst == NULL || src == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "ref copy of %zu bytes with a NULL %s pointer", n,
                    dst == NULL ? "destination" : "source");
        return FALSE;
    }
    memmove(dst, src, n);
    return TRUE;
}

static gboolean ref_copy_h2d(TdmDevice *dev, void *dst, const void *src, size_t n, gboolean async,
                             GError **error)
{
    return ref_copy_bytes(dst, src, n, error);
}

static gboolean ref_copy_d2h(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error)
{
    return ref_copy_bytes(dst, src, n, error);
}

static gboolean ref_copy_d2d(TdmDevice *dev, void *dst, const void *src, size_t n, GError **error)
{
    return ref_copy_bytes(dst, src, n, error);
}

/* ---- host transfers of plain (possibly strided) tensors ---- */

/* Copies between a plain strided tensor and a dense buffer, one element at a
 * time in logical order; `to_host` says which way. */
static void ref_strided_copy(TdmTensor *t, void *host, gboolean to_host)
{
    size_t es = tdm_dtype_size(t->dtype);
    int64_t n = tdm_tensor_numel(t);
    char *base = tdm_tensor_data(t);
    char *h = host;
    if (ref_is_dense(t)) {
        if (to_host) {
            memcpy(h, base, (size_t)n * es);
        } else {
            memcpy(base, h, (size_t)n * es);
        }
        return;
    }
    int64_t idx[TDM_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) {
            off += idx[d] * t->stride[d];
        }
        if (to_host) {
            memcpy(h + (size_t)i * es, base + off * (int64_t)es, es);
        } else {
            memcpy(base + off * (int64_t)es, h + (size_t)i * es, es);
        }
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
}

/* read, write and reorder reach ref through tdm_tensor_read/write and
 * tdm_tensor_reorder, which check the tensor; ref adds its layout limit. */
static gboolean ref_check_transfer(const char *op, const TdmTensor *t, GError **error)
{
    if (t->layout != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "ref %s: tensor has a non-plain layout; the ref backend handles plain only",
                    op);
        return FALSE;
    }
    return TRUE;
}

static gboolean ref_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error)
{
    if (!ref_check_transfer("read", t, error)) {
        return FALSE;
    }
    if (tdm_tensor_numel(t) > 0) {
        ref_strided_copy(t, host, TRUE);
    }
    return TRUE;
}

static gboolean ref_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error)
{
    if (!ref_check_transfer("write", t, error)) {
        return FALSE;
    }
    if (tdm_tensor_numel(t) > 0) {
        ref_strided_copy(t, (void *)host, FALSE);
    }
    return TRUE;
}

static gboolean ref_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src,
                            const TdmTensor *like, TdmTensor *dst, GError **error)
{
    if (!ref_check_transfer("reorder", src, error)) {
        return FALSE;
    }
    if (like != NULL && like->layout != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "ref reorder: target layout of `like` is not plain; the ref backend has "
                    "only the plain layout");
        return FALSE;
    }
    /* Gather first: dst may be src itself or share its storage. */
    size_t nbytes = (size_t)tdm_tensor_numel(src) * tdm_dtype_size(src->dtype);
    void *tmp = g_malloc(nbytes ? nbytes : 1);
    if (nbytes > 0) {
        ref_strided_copy(src, tmp, TRUE);
    }
    int64_t shape[TDM_MAX_DIMS];
    memcpy(shape, src->shape, sizeof(shape));
    gboolean ok = ref_ensure_out(dst, src->dtype, src->ndim, shape, error);
    if (ok && nbytes > 0) {
        memcpy(tdm_tensor_data(dst), tmp, nbytes);
    }
    g_free(tmp);
    return ok;
}

static const char *ref_layout_name(TdmDevice *dev, gconstpointer layout)
{
    return layout == NULL ? "plain" : "foreign";
}

static void ref_cache_free(TdmDevice *dev, TdmOpCache *cache)
{
    /* The ref backend never fills an op cache: there is nothing to free. */
}

/* The oracle computes in strict f32 only: a lower precision is refused so
 * that a run asking for it on ref never silently differs from the request. */
static gboolean ref_set_precision(TdmDevice *dev, TdmPrecision precision, GError **error)
{
    if (precision != TDM_PRECISION_FP32) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: the ref backend computes in strict fp32 only", dev->name);
        return FALSE;
    }
    return TRUE;
}

/* Virtual devices share the host's memory, and ref ops have finished when
 * they return, so a peer copy is a memcpy already in stream order. */
static gboolean ref_copy_peer(TdmDevice *dst_dev, void *dst, TdmDevice *src_dev, const void *src,
                              size_t n, GError **error)
{
    return ref_copy_bytes(dst, src, n, error);
}

/* ---- the class and the plugin ---- */

static const TdmBackendClass ref_backend_class = {
    TDM_CLASS_HEADER(TDM_BACKEND_IFACE_VERSION, TdmBackendClass),
    .device_type = "ref",
    .device_count = ref_device_count,
    .device_open = ref_device_open,
    .device_close = ref_device_close,
    .synchronize = ref_synchronize,
    .set_num_threads = ref_set_num_threads,
    .alloc = ref_alloc,
    .free = ref_free,
    .host_alloc = ref_host_alloc,
    .host_free = ref_host_free,
    .copy_h2d = ref_copy_h2d,
    .copy_d2h = ref_copy_d2h,
    .copy_d2d = ref_copy_d2d,
    .read = ref_read,
    .write = ref_write,
    .reorder = ref_reorder,
    .layout_name = ref_layout_name,
    .cache_free = ref_cache_free,
    .gemm = ref_gemm,
    .bias_grad = ref_bias_grad,
    .conv2d_forward = ref_conv2d_forward,
    .conv2d_backward_data = ref_conv2d_backward_data,
    .conv2d_backward_filter = ref_conv2d_backward_filter,
    .batchnorm_forward = ref_batchnorm_forward,
    .batchnorm_backward = ref_batchnorm_backward,
    .relu_forward = ref_relu_forward,
    .relu_backward = ref_relu_backward,
    .add = ref_add,
    .maxpool2d_forward = ref_maxpool2d_forward,
    .maxpool2d_backward = ref_maxpool2d_backward,
    .avgpool2d_forward = ref_avgpool2d_forward,
    .avgpool2d_backward = ref_avgpool2d_backward,
    .global_avgpool_forward = ref_global_avgpool_forward,
    .global_avgpool_backward = ref_global_avgpool_backward,
    .softmax_xent = ref_softmax_xent,
    .dropout_forward = ref_dropout_forward,
    .dropout_backward = ref_dropout_backward,
    .fill = ref_fill,
    .copy = ref_copy,
    .scale = ref_scale,
    .axpy = ref_axpy,
    .sum_squares = ref_sum_squares,
    .cast = ref_cast,
    .sgd_update = ref_sgd_update,
    .adamw_update = ref_adamw_update,
    .batchnorm_relu_forward = ref_batchnorm_relu_forward,
    .batchnorm_relu_backward = ref_batchnorm_relu_backward,
    .batchnorm_relu_backward_ws = ref_batchnorm_relu_backward_ws,
    .add_relu = ref_add_relu,
    .sgd_update_zero_grad = ref_sgd_update_zero_grad,
    .adamw_update_zero_grad = ref_adamw_update_zero_grad,
    .conv2d_relu_forward = ref_conv2d_relu_forward,
    .stream_ops = &ref_stream_ops,
    .device_info = ref_device_info,
    .softmax_xent_stats = ref_softmax_xent_stats,
    .set_precision = ref_set_precision,
    .copy_peer = ref_copy_peer,
};

/* The fused ops took six of the reserved slots, the 1.1 slots three, the
 * 1.2 slots two and the 1.3 slot one more: the class keeps its size. */
G_STATIC_ASSERT(sizeof(TdmBackendClass) ==
                offsetof(TdmBackendClass, adamw_update) + 17 * sizeof(gpointer));
G_STATIC_ASSERT(offsetof(TdmBackendClass, reserved) ==
                offsetof(TdmBackendClass, conv2d_relu_forward) + 7 * sizeof(gpointer));

TDM_PLUGIN_INIT_FEATURE(ref_plugin_init, TDM_FEATURE_BACKEND, "ref", 10, &ref_backend_class,
                        "Plain C reference backend (the oracle; TDM_REF_DEVICES=N "
                        "virtual devices)",
                        NULL, NULL)

TDM_PLUGIN_DEFINE(ref, "MIT", "Reference backend in plain C: the oracle", "tandem",
                  ref_plugin_init)

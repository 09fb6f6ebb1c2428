/* tandem/tensor.h - devices, storages and tensors.
 *
 * A TdmDevice is a backend feature plus an index ("cpu:0", "ref:1"); devices
 * are created on first use and live until the process ends, so pointers to
 * them are never reference counted.
 *
 * A TdmTensor has a dtype, up to TDM_MAX_DIMS dims, a reference-counted
 * storage on one device and a layout. Layout NULL means plain: row major with
 * element strides (NCHW for images). Any other layout is a handle private to
 * the tensor's backend (oneDNN's nChw16c, say), interned by that backend for
 * the lifetime of the device. Core code never indexes a tensor's memory
 * itself: it asks the backend to read or write it in plain layout
 * (tdm_tensor_read / tdm_tensor_write).
 */
#ifndef TANDEM_TENSOR_H
#define TANDEM_TENSOR_H

#include <tandem/types.h>

G_BEGIN_DECLS

struct _TdmDevice {
    const TdmBackendClass *backend; /* the op table */
    TdmFeature *feature;            /* the backend feature (transfer none) */
    int index;                      /* 0.. count-1 */
    char *name;                     /* "cpu:0" */
    gpointer priv;                  /* backend-private per-device state */
    gpointer core;                  /* the core's own per-device state (allocator
                                     * counts); backends leave it alone */
    gpointer reserved[3];
};

/* Resolve a device spec: NULL, "" or "auto" (best available backend, index 0),
 * "cpu", "cpu:1", "ref:0"... Loads the registry if needed. Transfer none. */
TDM_API TdmDevice *tdm_device_get(const char *spec, GError **error);
/* tdm_device_get for process `local_rank` of several on one node (the
 * launcher's LOCAL_RANK): a spec without an index ("cuda", "auto") names
 * device local_rank % count of its backend, opening no other device of it,
 * so that each process of a node drives its own GPU; a spec with an index
 * ("cuda:1") is that device whatever the rank. Transfer none. */
TDM_API TdmDevice *tdm_device_get_local(const char *spec, int local_rank, GError **error);
/* Number of devices the backend of `dev` exposes. */
TDM_API int tdm_device_count(const TdmDevice *dev);
/* Block until all work queued on the device is done. */
TDM_API gboolean tdm_device_synchronize(TdmDevice *dev, GError **error);
/* The device type of the backend, the part of the name before the colon
 * ("cpu", "ref", "cuda"; transfer none). */
TDM_API const char *tdm_device_type(const TdmDevice *dev);
/* Set the number of compute threads of the backend (0 = its default); a
 * no-op for a backend without such a setting. */
TDM_API void tdm_device_set_num_threads(TdmDevice *dev, int n);

struct _TdmStorage {
    gint ref_count;
    TdmDevice *device;
    void *data;       /* device pointer (host pointer on CPU backends) */
    size_t nbytes;
    gpointer reserved[2];
};

/* Allocate `nbytes` on `dev` through its backend (transfer full). */
TDM_API TdmStorage *tdm_storage_new(TdmDevice *dev, size_t nbytes, GError **error);
TDM_API TdmStorage *tdm_storage_ref(TdmStorage *storage);
TDM_API void tdm_storage_unref(TdmStorage *storage);

struct _TdmTensor {
    gint ref_count;
    TdmDType dtype;
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    int64_t stride[TDM_MAX_DIMS]; /* elements; meaningful for plain layout only */
    TdmDevice *device;
    TdmStorage *storage;          /* NULL until allocated */
    size_t offset;                /* bytes into storage */
    gconstpointer layout;         /* NULL = plain; else backend-private handle */
    size_t layout_nbytes;         /* bytes occupied when layout != NULL */
    gpointer reserved[4];
};

/* New plain contiguous tensor, zero-filled (transfer full). */
TDM_API TdmTensor *tdm_tensor_new(TdmDevice *dev, TdmDType dtype, int ndim,
                                  const int64_t *shape, GError **error);
/* New tensor without storage (ndim 0): an op output slot that the backend
 * shapes with tdm_tensor_ensure() on first use (transfer full). */
TDM_API TdmTensor *tdm_tensor_new_empty(TdmDevice *dev, TdmDType dtype);
/* New plain contiguous tensor sharing `base`'s storage, starting
 * `byte_offset` bytes after base's own offset. Used for parameter arenas.
 * Fails if the view does not fit (transfer full). */
TDM_API TdmTensor *tdm_tensor_new_view(TdmTensor *base, size_t byte_offset, TdmDType dtype,
                                       int ndim, const int64_t *shape, GError **error);
/* Plain contiguous `t` seen with another shape of the same numel (transfer full). */
TDM_API TdmTensor *tdm_tensor_reshape(TdmTensor *t, int ndim, const int64_t *shape,
                                      GError **error);
/* Rows [start, start+len) along dim 0 of a plain contiguous tensor (transfer full). */
TDM_API TdmTensor *tdm_tensor_narrow(TdmTensor *t, int64_t start, int64_t len, GError **error);
TDM_API TdmTensor *tdm_tensor_ref(TdmTensor *t);
TDM_API void tdm_tensor_unref(TdmTensor *t);

/* Give `t` this dtype, shape and layout (NULL = plain contiguous, then
 * layout_nbytes is ignored). Keeps the storage when it is large enough and
 * allocates a new one otherwise, so an output slot reused with stable shapes
 * allocates only once. Backends call this on their outputs. */
TDM_API gboolean tdm_tensor_ensure(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                                   gconstpointer layout, size_t layout_nbytes, GError **error);

TDM_API int64_t tdm_tensor_numel(const TdmTensor *t);
/* Bytes the data occupies (layout_nbytes for non-plain layouts). */
TDM_API size_t tdm_tensor_nbytes(const TdmTensor *t);
TDM_API gboolean tdm_tensor_is_plain(const TdmTensor *t);
TDM_API gboolean tdm_tensor_is_contiguous(const TdmTensor *t); /* plain and dense */
TDM_API gboolean tdm_tensor_same_shape(const TdmTensor *a, const TdmTensor *b);
/* storage->data + offset: for backends only (a device pointer on GPUs). */
TDM_API void *tdm_tensor_data(const TdmTensor *t);
/* "[64, 16, 28, 28]" (transfer full). */
TDM_API char *tdm_tensor_shape_string(const TdmTensor *t);

/* Copy the tensor to host memory in plain contiguous order (`numel *
 * dtype_size` bytes), whatever its device and layout. */
TDM_API gboolean tdm_tensor_read(TdmTensor *t, void *host, GError **error);
/* Fill the tensor from host memory in plain contiguous order. */
TDM_API gboolean tdm_tensor_write(TdmTensor *t, const void *host, GError **error);
/* Convenience: read an f32 tensor into a new g_malloc'ed array (transfer full). */
TDM_API float *tdm_tensor_read_f32(TdmTensor *t, GError **error);
/* dst (an output slot, shaped by the backend) = src in the layout of
 * `like` (same logical shape; NULL = plain contiguous). `cache` as for ops
 * (may be NULL); timed under TDM_PROFILE like the op front ends. */
TDM_API gboolean tdm_tensor_reorder(TdmTensor *src, const TdmTensor *like, TdmTensor *dst,
                                    TdmOpCache **cache, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmTensor, tdm_tensor_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStorage, tdm_storage_unref)

G_END_DECLS

#endif /* TANDEM_TENSOR_H */

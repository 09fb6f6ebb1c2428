/* SPDX-License-Identifier: MIT */
/**
 * SECTION:tensor
 * @title: Tensors
 * @short_description: devices, storages and tensors
 * @include: tandem/tandem.h
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

/**
 * TdmDevice:
 * @backend: the backend's op table
 * @feature: the backend feature (transfer none)
 * @index: 0 .. count - 1
 * @name: "cpu:0"
 * @priv: the backend's per-device state (its device_open sets it)
 * @core: the core's own per-device state (allocator counts); backends leave
 *   it alone
 * @reserved: zero
 *
 * One device of a backend. Devices are made on first use by
 * tdm_device_get() and live until the process ends: never freed, never
 * reference counted.
 */
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

/**
 * tdm_device_get:
 * @spec: (nullable): NULL, "" or "auto" (the best available backend, index
 *   0), "cpu", "cpu:1", "ref:0"...
 * @error: return location for a #GError, or NULL
 *
 * Resolves a device spec, opening the device on first use; loads the
 * registry if needed.
 *
 * Returns: (transfer none): the device, or NULL with @error set (no such
 * backend, index out of range, the backend unavailable, with why)
 */
TDM_API TdmDevice *tdm_device_get(const char *spec, GError **error);
/**
 * tdm_device_get_local:
 * @spec: (nullable): as for tdm_device_get()
 * @local_rank: this process's rank on its node (the launcher's LOCAL_RANK)
 * @error: return location for a #GError, or NULL
 *
 * tdm_device_get() for process @local_rank of several on one node: a spec
 * without an index ("cuda", "auto") names device @local_rank % count of its
 * backend, opening no other device of it, so that each process of a node
 * drives its own GPU; a spec with an index ("cuda:1") is that device
 * whatever the rank.
 *
 * Returns: (transfer none): the device, or NULL with @error set
 */
TDM_API TdmDevice *tdm_device_get_local(const char *spec, int local_rank, GError **error);
/**
 * tdm_device_count:
 * @dev: a device
 *
 * How many devices the backend of @dev exposes.
 *
 * Returns: the count, at least 1
 */
TDM_API int tdm_device_count(const TdmDevice *dev);
/**
 * tdm_device_synchronize:
 * @dev: a device
 * @error: return location for a #GError, or NULL
 *
 * Blocks until all work queued on the device is done.
 *
 * Returns: TRUE, or FALSE with @error set when the device reports a failure
 * of queued work
 */
TDM_API gboolean tdm_device_synchronize(TdmDevice *dev, GError **error);
/**
 * tdm_device_type:
 * @dev: a device
 *
 * The device type of the backend: the part of the name before the colon.
 *
 * Returns: (transfer none): "cpu", "ref", "cuda"...
 */
TDM_API const char *tdm_device_type(const TdmDevice *dev);
/**
 * tdm_device_set_num_threads:
 * @dev: a device
 * @n: the number of compute threads; 0: the backend's default
 *
 * Sets the number of compute threads of the backend; a no-op for a backend
 * without such a setting.
 */
TDM_API void tdm_device_set_num_threads(TdmDevice *dev, int n);

/**
 * TdmStorage:
 * @ref_count: the reference count (tdm_storage_ref(), tdm_storage_unref())
 * @device: where the memory is
 * @data: a device pointer (a host pointer on CPU backends)
 * @nbytes: its size
 * @reserved: zero
 *
 * A reference-counted block of device memory, shared by the tensors that
 * view it.
 */
struct _TdmStorage {
    gint ref_count;
    TdmDevice *device;
    void *data;       /* device pointer (host pointer on CPU backends) */
    size_t nbytes;
    gpointer reserved[2];
};

/**
 * tdm_storage_new:
 * @dev: the device
 * @nbytes: the size
 * @error: return location for a #GError, or NULL
 *
 * Allocates @nbytes on @dev through its backend.
 *
 * Returns: (transfer full): the storage, or NULL with @error set (out of
 * memory, naming the device and the size)
 */
TDM_API TdmStorage *tdm_storage_new(TdmDevice *dev, size_t nbytes, GError **error);
/**
 * tdm_storage_ref:
 * @storage: a storage
 *
 * Takes a reference.
 *
 * Returns: (transfer full): @storage
 */
TDM_API TdmStorage *tdm_storage_ref(TdmStorage *storage);
/**
 * tdm_storage_unref:
 * @storage: (transfer full) (nullable): a storage
 *
 * Drops a reference; the last one frees the memory through the backend.
 */
TDM_API void tdm_storage_unref(TdmStorage *storage);

/**
 * TdmTensor:
 * @ref_count: the reference count (tdm_tensor_ref(), tdm_tensor_unref())
 * @dtype: the element type
 * @ndim: the number of dimensions, 0 .. %TDM_MAX_DIMS (0 for an empty slot)
 * @shape: the extents
 * @stride: element strides; meaningful for the plain layout only
 * @device: the device
 * @storage: (nullable): the memory; NULL until allocated
 * @offset: bytes into @storage
 * @layout: (nullable): NULL for plain; else a backend-private handle
 * @layout_nbytes: bytes occupied when @layout is not NULL
 * @reserved: zero
 *
 * A view of a storage with a dtype, a shape and a layout. Core code never
 * indexes a tensor's memory itself: it asks the backend to read or write it
 * in plain layout (tdm_tensor_read(), tdm_tensor_write()).
 */
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

/**
 * tdm_tensor_new:
 * @dev: the device
 * @dtype: the element type
 * @ndim: the number of dimensions, 0 .. %TDM_MAX_DIMS
 * @shape: (array length=ndim): the extents, each >= 0
 * @error: return location for a #GError, or NULL
 *
 * Makes a plain contiguous tensor, zero-filled.
 *
 * Returns: (transfer full): the tensor, or NULL with @error set (a rank
 * outside 0 .. %TDM_MAX_DIMS, a negative extent, or out of memory)
 */
TDM_API TdmTensor *tdm_tensor_new(TdmDevice *dev, TdmDType dtype, int ndim,
                                  const int64_t *shape, GError **error);
/**
 * tdm_tensor_new_empty:
 * @dev: the device
 * @dtype: the element type
 *
 * Makes a tensor without storage (ndim 0): an op output slot that the
 * backend shapes with tdm_tensor_ensure() on first use.
 *
 * Returns: (transfer full): the tensor
 */
TDM_API TdmTensor *tdm_tensor_new_empty(TdmDevice *dev, TdmDType dtype);
/**
 * tdm_tensor_new_view:
 * @base: the tensor whose storage is shared
 * @byte_offset: where the view starts, in bytes after @base's own offset
 * @dtype: the element type of the view
 * @ndim: its number of dimensions
 * @shape: (array length=ndim): its extents
 * @error: return location for a #GError, or NULL
 *
 * Makes a plain contiguous tensor sharing @base's storage; used for
 * parameter arenas.
 *
 * Returns: (transfer full): the view, or NULL with @error set when it does
 * not fit in the storage
 */
TDM_API TdmTensor *tdm_tensor_new_view(TdmTensor *base, size_t byte_offset, TdmDType dtype,
                                       int ndim, const int64_t *shape, GError **error);
/**
 * tdm_tensor_reshape:
 * @t: a plain contiguous tensor
 * @ndim: the new number of dimensions
 * @shape: (array length=ndim): the new extents, of the same element count
 * @error: return location for a #GError, or NULL
 *
 * Sees @t with another shape, sharing its storage.
 *
 * Returns: (transfer full): the view, or NULL with @error set (another
 * element count, naming both shapes; @t not plain and contiguous)
 */
TDM_API TdmTensor *tdm_tensor_reshape(TdmTensor *t, int ndim, const int64_t *shape,
                                      GError **error);
/**
 * tdm_tensor_narrow:
 * @t: a plain contiguous tensor
 * @start: the first row along dimension 0
 * @len: the number of rows
 * @error: return location for a #GError, or NULL
 *
 * Rows [@start, @start + @len) along dimension 0, sharing @t's storage.
 *
 * Returns: (transfer full): the view, or NULL with @error set when the range
 * does not fit
 */
TDM_API TdmTensor *tdm_tensor_narrow(TdmTensor *t, int64_t start, int64_t len, GError **error);
/**
 * tdm_tensor_ref:
 * @t: a tensor
 *
 * Takes a reference.
 *
 * Returns: (transfer full): @t
 */
TDM_API TdmTensor *tdm_tensor_ref(TdmTensor *t);
/**
 * tdm_tensor_unref:
 * @t: (transfer full) (nullable): a tensor
 *
 * Drops a reference; the last one drops the tensor's storage reference.
 */
TDM_API void tdm_tensor_unref(TdmTensor *t);

/**
 * tdm_tensor_ensure:
 * @t: an output slot
 * @dtype: the element type it must have
 * @ndim: the number of dimensions
 * @shape: (array length=ndim): the extents
 * @layout: (nullable): the backend's layout handle; NULL: plain contiguous,
 *   and then @layout_nbytes is ignored
 * @layout_nbytes: the bytes the layout occupies
 * @error: return location for a #GError, or NULL
 *
 * Gives @t this dtype, shape and layout. Keeps the storage when it is
 * large enough and allocates a new one otherwise, so an output slot reused
 * with stable shapes allocates only once. Backends call this on their
 * outputs.
 *
 * Returns: TRUE, or FALSE with @error set (out of memory)
 */
TDM_API gboolean tdm_tensor_ensure(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                                   gconstpointer layout, size_t layout_nbytes, GError **error);

/**
 * tdm_tensor_numel:
 * @t: a tensor
 *
 * The number of elements: the product of the extents.
 *
 * Returns: the count
 */
TDM_API int64_t tdm_tensor_numel(const TdmTensor *t);
/**
 * tdm_tensor_nbytes:
 * @t: a tensor
 *
 * The bytes the data occupies (layout_nbytes for a non-plain layout).
 *
 * Returns: the size
 */
TDM_API size_t tdm_tensor_nbytes(const TdmTensor *t);
/**
 * tdm_tensor_is_plain:
 * @t: a tensor
 *
 * Whether @t has the plain layout (row major, element strides).
 *
 * Returns: TRUE when its layout is NULL
 */
TDM_API gboolean tdm_tensor_is_plain(const TdmTensor *t);
/**
 * tdm_tensor_is_contiguous:
 * @t: a tensor
 *
 * Whether @t is plain and dense.
 *
 * Returns: TRUE when plain with row-major strides
 */
TDM_API gboolean tdm_tensor_is_contiguous(const TdmTensor *t); /* plain and dense */
/**
 * tdm_tensor_same_shape:
 * @a: a tensor
 * @b: another
 *
 * Whether two tensors have the same rank and extents.
 *
 * Returns: TRUE when they do
 */
TDM_API gboolean tdm_tensor_same_shape(const TdmTensor *a, const TdmTensor *b);
/**
 * tdm_tensor_data:
 * @t: a tensor with storage
 *
 * storage->data + offset: for backends only (a device pointer on GPUs).
 *
 * Returns: (transfer none): the address of the first element
 */
TDM_API void *tdm_tensor_data(const TdmTensor *t);
/**
 * tdm_tensor_shape_string:
 * @t: a tensor
 *
 * The shape as error messages write it.
 *
 * Returns: (transfer full): "[64, 16, 28, 28]"; g_free() it
 */
TDM_API char *tdm_tensor_shape_string(const TdmTensor *t);

/**
 * tdm_tensor_read:
 * @t: a tensor
 * @host: where to put numel * dtype size bytes
 * @error: return location for a #GError, or NULL
 *
 * Copies the tensor to host memory in plain contiguous order, whatever its
 * device and layout.
 *
 * Returns: TRUE, or FALSE with @error set (no storage yet, or the device
 * failed)
 */
TDM_API gboolean tdm_tensor_read(TdmTensor *t, void *host, GError **error);
/**
 * tdm_tensor_write:
 * @t: a tensor
 * @host: numel * dtype size bytes in plain contiguous order
 * @error: return location for a #GError, or NULL
 *
 * Fills the tensor from host memory, into its device and layout.
 *
 * Returns: TRUE, or FALSE with @error set (no storage yet, or the device
 * failed)
 */
TDM_API gboolean tdm_tensor_write(TdmTensor *t, const void *host, GError **error);
/**
 * tdm_tensor_read_f32:
 * @t: an f32 tensor
 * @error: return location for a #GError, or NULL
 *
 * tdm_tensor_read() into a new array.
 *
 * Returns: (transfer full): numel floats, g_free() them; or NULL with @error
 * set (not f32, or the device failed)
 */
TDM_API float *tdm_tensor_read_f32(TdmTensor *t, GError **error);
/**
 * tdm_tensor_reorder:
 * @src: the tensor to convert
 * @like: (nullable): a tensor whose layout @dst takes (same logical shape);
 *   NULL: plain contiguous
 * @dst: an output slot, shaped by the backend
 * @cache: (nullable): the op's cache, as for ops
 * @error: return location for a #GError, or NULL
 *
 * @dst = @src in the layout of @like; timed under TDM_PROFILE like the op
 * front ends.
 *
 * Returns: TRUE, or FALSE with @error set (shapes differ, naming both)
 */
TDM_API gboolean tdm_tensor_reorder(TdmTensor *src, const TdmTensor *like, TdmTensor *dst,
                                    TdmOpCache **cache, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmTensor, tdm_tensor_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmStorage, tdm_storage_unref)

G_END_DECLS

#endif /* TANDEM_TENSOR_H */

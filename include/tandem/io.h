/* SPDX-License-Identifier: MIT */
/**
 * SECTION:io
 * @title: Weight files
 * @short_description: safetensors and PyTorch .pth files
 * @include: tandem/tandem.h
 *
 * Weights are saved in the safetensors format (8-byte little-endian header
 * length, a JSON header naming every tensor's dtype, shape and byte range,
 * then raw little-endian data) with torchvision's names, so they move to and
 * from PyTorch. Files are written atomically: a temporary file in the same
 * directory, fsync, rename, fsync of the directory.
 */
#ifndef TANDEM_IO_H
#define TANDEM_IO_H

#include <tandem/module.h>

G_BEGIN_DECLS

/**
 * TdmSafeTensor:
 * @name: the tensor's name
 * @dtype: its element type
 * @ndim: its number of dimensions
 * @shape: its extents
 * @data: its bytes, plain little-endian
 * @nbytes: their number
 *
 * One tensor of a safetensors file, on the host, owned by its
 * #TdmSafeTensors.
 */
typedef struct {
    char *name;
    TdmDType dtype;
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    void *data;      /* plain little-endian */
    size_t nbytes;
} TdmSafeTensor;

/**
 * TdmSafeTensors:
 *
 * The tensors and metadata of a safetensors file, read or to be written;
 * opaque.
 */
typedef struct _TdmSafeTensors TdmSafeTensors;

/**
 * tdm_safetensors_load:
 * @path: the file
 * @error: return location for a #GError, or NULL
 *
 * Reads and checks a safetensors file.
 *
 * Returns: (transfer full): the tensors, free them with
 * tdm_safetensors_free(); or NULL with %TDM_ERROR_IO, or
 * %TDM_ERROR_CORRUPT naming the file and the byte offset of malformed
 * content
 */
TDM_API TdmSafeTensors *tdm_safetensors_load(const char *path, GError **error);
/**
 * tdm_safetensors_get:
 * @st: tensors
 * @name: a tensor's name
 *
 * Looks a tensor up by name.
 *
 * Returns: (transfer none) (nullable): the tensor; NULL if absent
 */
TDM_API const TdmSafeTensor *tdm_safetensors_get(const TdmSafeTensors *st, const char *name);
/**
 * tdm_safetensors_count:
 * @st: tensors
 *
 * The number of tensors.
 *
 * Returns: the count
 */
TDM_API guint tdm_safetensors_count(const TdmSafeTensors *st);
/**
 * tdm_safetensors_index:
 * @st: tensors
 * @i: 0 .. count - 1
 *
 * The tensors in file order.
 *
 * Returns: (transfer none): tensor @i
 */
TDM_API const TdmSafeTensor *tdm_safetensors_index(const TdmSafeTensors *st, guint i);
/**
 * tdm_safetensors_metadata:
 * @st: tensors
 * @key: a key of the "__metadata__" entry
 *
 * A metadata string.
 *
 * Returns: (transfer none) (nullable): the value; NULL if absent
 */
TDM_API const char *tdm_safetensors_metadata(const TdmSafeTensors *st, const char *key);
/**
 * tdm_safetensors_free:
 * @st: (transfer full) (nullable): tensors
 *
 * Frees the tensors and their data.
 */
TDM_API void tdm_safetensors_free(TdmSafeTensors *st);

/**
 * tdm_safetensors_new:
 *
 * A writer: it collects tensors (tdm_safetensors_add()) and metadata, then
 * writes the file atomically (tdm_safetensors_save()).
 *
 * Returns: (transfer full): an empty set of tensors
 */
TDM_API TdmSafeTensors *tdm_safetensors_new(void);
/**
 * tdm_safetensors_add:
 * @st: a writer
 * @name: the tensor's name
 * @dtype: its element type
 * @ndim: its number of dimensions
 * @shape: (array length=ndim): its extents
 * @data: its bytes, plain; copied
 *
 * Adds a tensor.
 */
TDM_API void tdm_safetensors_add(TdmSafeTensors *st, const char *name, TdmDType dtype, int ndim,
                                 const int64_t *shape, const void *data);
/**
 * tdm_safetensors_set_metadata:
 * @st: a writer
 * @key: the key
 * @value: the value; copied
 *
 * Sets a metadata string, replacing any value of @key.
 */
TDM_API void tdm_safetensors_set_metadata(TdmSafeTensors *st, const char *key, const char *value);
/**
 * tdm_safetensors_save:
 * @st: a writer
 * @path: the file
 * @error: return location for a #GError, or NULL
 *
 * Writes the file atomically: a temporary file in the same directory,
 * fsync, rename, fsync of the directory.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_IO naming the file
 */
TDM_API gboolean tdm_safetensors_save(TdmSafeTensors *st, const char *path, GError **error);

/**
 * tdm_model_save:
 * @model: a model
 * @path: the file
 * @error: return location for a #GError, or NULL
 *
 * Saves every parameter and buffer of @model under its full name
 * (torchvision's names), as safetensors.
 *
 * Returns: TRUE, or FALSE with @error set (the device, or the file)
 */
TDM_API gboolean tdm_model_save(TdmModel *model, const char *path, GError **error);
/**
 * tdm_model_load:
 * @model: a model
 * @path: a safetensors or .pth file (tdm_weights_load())
 * @strict: whether a name of the file the model lacks is an error
 * @error: return location for a #GError, or NULL
 *
 * Loads values by name. A training checkpoint (<tandem/checkpoint.h>)
 * gives its weights, its checksums checked; its "tandem.*" tensors are not
 * unexpected.
 *
 * Returns: TRUE, or FALSE with an error naming the parameter (and both
 * shapes): a missing name, an unexpected extra name (when @strict), a
 * shape mismatch; or the file's error
 */
TDM_API gboolean tdm_model_load(TdmModel *model, const char *path, gboolean strict,
                                GError **error);
/**
 * tdm_model_load_except:
 * @model: a model
 * @path: a safetensors or .pth file
 * @strict: as for tdm_model_load()
 * @skip: (nullable): comma-separated prefixes of full names
 * @error: return location for a #GError, or NULL
 *
 * As tdm_model_load(), except for the parameters and buffers whose full
 * names start with one of the prefixes in @skip: those are neither read nor
 * required and keep their values, and the file's tensors under them are
 * ignored (PyTorch: load a backbone, then replace its classifier).
 *
 * Returns: TRUE, or FALSE with an error as tdm_model_load()'s
 */
TDM_API gboolean tdm_model_load_except(TdmModel *model, const char *path, gboolean strict,
                                       const char *skip, GError **error);

/**
 * tdm_pth_load:
 * @path: a .pth file
 * @error: return location for a #GError, or NULL
 *
 * Reads PyTorch's zip checkpoint format (torch.save of a state dict, 1.6
 * and later) through a strict pickle reader that calls nothing: the state
 * dict, or the one under a "state_dict" or "model" key of the saved dict,
 * as tensors copied out contiguous (F16 and BF16 become F32).
 *
 * Returns: (transfer full): the tensors, or NULL with %TDM_ERROR_CORRUPT
 * naming the file, the global or opcode and its byte offset (anything but
 * tensors, OrderedDicts and the plain values around them), or
 * %TDM_ERROR_UNSUPPORTED for the legacy format
 */
TDM_API TdmSafeTensors *tdm_pth_load(const char *path, GError **error);
/**
 * tdm_pth_save:
 * @st: tensors
 * @path: the file
 * @error: return location for a #GError, or NULL
 *
 * Writes @st's tensors, atomically, as a .pth file that
 * torch.load(weights_only=True) reads as an OrderedDict state dict.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_IO naming the file
 */
TDM_API gboolean tdm_pth_save(const TdmSafeTensors *st, const char *path, GError **error);
/**
 * tdm_weights_load:
 * @path: a weights file
 * @error: return location for a #GError, or NULL
 *
 * Reads a weights file of either format, chosen by its content (a zip
 * archive or a pre-1.6 torch.save pickle: tdm_pth_load(); else
 * tdm_safetensors_load()).
 *
 * Returns: (transfer full): the tensors, or NULL with the reader's error
 */
TDM_API TdmSafeTensors *tdm_weights_load(const char *path, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmSafeTensors, tdm_safetensors_free)

G_END_DECLS

#endif /* TANDEM_IO_H */

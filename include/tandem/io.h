/* tandem/io.h - safetensors files and configuration.
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

/* One tensor of a safetensors file, on the host. */
typedef struct {
    char *name;
    TdmDType dtype;
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    void *data;      /* plain little-endian */
    size_t nbytes;
} TdmSafeTensor;

typedef struct _TdmSafeTensors TdmSafeTensors;

/* Parse a file. Malformed content is TDM_ERROR_CORRUPT naming the file and
 * the byte offset. Transfer full. */
TDM_API TdmSafeTensors *tdm_safetensors_load(const char *path, GError **error);
/* NULL if absent (transfer none). */
TDM_API const TdmSafeTensor *tdm_safetensors_get(const TdmSafeTensors *st, const char *name);
TDM_API guint tdm_safetensors_count(const TdmSafeTensors *st);
TDM_API const TdmSafeTensor *tdm_safetensors_index(const TdmSafeTensors *st, guint i);
/* Metadata string ("__metadata__" entries), NULL if absent (transfer none). */
TDM_API const char *tdm_safetensors_metadata(const TdmSafeTensors *st, const char *key);
TDM_API void tdm_safetensors_free(TdmSafeTensors *st);

/* A writer collects tensors then writes the file atomically. */
TDM_API TdmSafeTensors *tdm_safetensors_new(void);
/* Copies `data`. */
TDM_API void tdm_safetensors_add(TdmSafeTensors *st, const char *name, TdmDType dtype, int ndim,
                                 const int64_t *shape, const void *data);
TDM_API void tdm_safetensors_set_metadata(TdmSafeTensors *st, const char *key, const char *value);
TDM_API gboolean tdm_safetensors_save(TdmSafeTensors *st, const char *path, GError **error);

/* Save every parameter and buffer of `model` under its full name. */
TDM_API gboolean tdm_model_save(TdmModel *model, const char *path, GError **error);
/* Load values by name from a safetensors or .pth file (tdm_weights_load);
 * a missing name, an unexpected extra name (when
 * `strict`) or a shape mismatch is an error naming the parameter and both
 * shapes. A training checkpoint (<tandem/checkpoint.h>) gives its weights,
 * its checksums checked; its "tandem.*" tensors are not unexpected. */
TDM_API gboolean tdm_model_load(TdmModel *model, const char *path, gboolean strict,
                                GError **error);
/* As tdm_model_load, except for the parameters and buffers whose full names
 * start with one of the comma-separated prefixes in `skip` (may be NULL):
 * those are neither read nor required and keep their values, and the file's
 * tensors under them are ignored (PyTorch: load a backbone, then replace
 * its classifier). */
TDM_API gboolean tdm_model_load_except(TdmModel *model, const char *path, gboolean strict,
                                       const char *skip, GError **error);

/* PyTorch's zip checkpoint format (torch.save of a state dict, 1.6 and
 * later), read through a strict pickle reader that calls nothing: the
 * state dict, or the one under a "state_dict" or "model" key of the saved
 * dict, as tensors copied out contiguous (F16 and BF16 become F32). Anything
 * but tensors, OrderedDicts and the plain values around them is refused
 * with TDM_ERROR_CORRUPT naming the file, the global or opcode and its
 * byte offset; the legacy format is TDM_ERROR_UNSUPPORTED. Transfer full. */
TDM_API TdmSafeTensors *tdm_pth_load(const char *path, GError **error);
/* Write `st`'s tensors as a .pth file that torch.load(weights_only=True)
 * reads as an OrderedDict state dict, atomically. */
TDM_API gboolean tdm_pth_save(const TdmSafeTensors *st, const char *path, GError **error);
/* A weights file of either format, chosen by its content (a zip archive or
 * a pre-1.6 torch.save pickle: tdm_pth_load; else tdm_safetensors_load).
 * Transfer full. */
TDM_API TdmSafeTensors *tdm_weights_load(const char *path, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmSafeTensors, tdm_safetensors_free)

G_END_DECLS

#endif /* TANDEM_IO_H */

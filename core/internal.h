/* SPDX-License-Identifier: MIT */
/* core/internal.h - declarations shared by the core's files, not installed.
 *
 * Everything here is hidden (-fvisibility=hidden): plugins and tools see only
 * include/tandem/.
 */
#ifndef TDM_CORE_INTERNAL_H
#define TDM_CORE_INTERNAL_H

#include <tandem/tandem.h>

/* registry.c: the built-in "core" plugin's init (builtin.c). */
gboolean tdm_builtin_init(TdmPlugin *plugin, GError **error);

/* device.c: tensor.c reports each storage allocated (+nbytes) or freed
 * (-nbytes) on a device, for tdm_device_info's allocated and peak bytes. */
void tdm_device_count_bytes(TdmDevice *dev, gint64 delta);

/* Seconds since the process started (first call to tdm_time_now counts from
 * the library constructor). */
double tdm_time_since_start(void);

/* TRUE when TDM_DEBUG lists `flag` (or "all"): items separated by commas,
 * colons or spaces. Read at each call. */
gboolean tdm_debug_flag(const char *flag);

/* "true", "yes", "on", "1" and "false", "no", "off", "0" (any case): the one
 * spelling of a boolean in configs and feature parameters. */
gboolean tdm_parse_bool_word(const char *s, gboolean *out);

/* safetensors.c: whether a save to `path` can be made (its directory takes
 * a new file, and `path` is not a directory or device), checked before a
 * long run rather than after it. */
gboolean tdm_save_path_check(const char *path, GError **error);
/* safetensors.c: sets TDM_ERROR_CORRUPT "PATH: message" and returns FALSE,
 * for the readers of weight files (safetensors, .pth). */
G_GNUC_PRINTF(3, 4)
gboolean tdm_file_corrupt(GError **error, const char *path, const char *fmt, ...);

/* device.c: the backend's memory and transfer slots, for tensor.c and
 * loader.c (every file of the core but device.c, stream.c and ops-*.c
 * leaves the backend table alone). */
/* strategy.c: whether the strategy's class has an end hook (1.3 or later,
 * slot set): the trainer evaluates again after one at an early stop. */
gboolean tdm_strategy_has_end(const TdmStrategy *s);

/* tensor.c: a storage for bytes [offset, offset + nbytes) of `parent`
 * (itself not a slice), holding a reference to it: tensors on the slice
 * see nbytes, so tdm_tensor_ensure() gives one that needs more its own
 * storage rather than writing past the slice. Kept in the storage's
 * reserved[0]; the gradient pool's planned region (grad-pool.c). */
TdmStorage *tdm_storage_new_slice(TdmStorage *parent, size_t offset, size_t nbytes);

void *tdm_device_alloc(TdmDevice *dev, size_t nbytes, GError **error);
void tdm_device_free(TdmDevice *dev, void *ptr, size_t nbytes);
gboolean tdm_device_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
gboolean tdm_device_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
/* Whether the backend offers page-locked host memory (host_alloc). */
gboolean tdm_device_has_pinned_memory(const TdmDevice *dev);
void *tdm_device_host_alloc(TdmDevice *dev, size_t nbytes, GError **error);
void tdm_device_host_free(TdmDevice *dev, void *ptr);
/* Whether the backend offers raw (async) host-to-device copies (copy_h2d;
 * tdm_device_copy_h2d in stream.c runs them). */
gboolean tdm_device_has_async_copy(const TdmDevice *dev);
/* Whether a batch-norm or ReLU backward may be given dy as dx without a
 * temporary: the backend writes over dy itself (interface 1.3) and dy has
 * the layout dx gets, x's (the batch norm's input, the ReLU's output). */
gboolean tdm_ops_can_write_over(const TdmDevice *dev, const TdmTensor *dy, const TdmTensor *x);
/* Whether its batchnorm_relu backward can do without y (the mask in the
 * workspace: batchnorm_relu_backward_ws, interface 1.3). */
gboolean tdm_ops_bn_relu_mask_in_workspace(const TdmDevice *dev);

/* transform.c, for loader.c: whether a `normalize` of `p` waits for
 * tdm_transform_pipeline_set_normalization (has neither mean= nor std=),
 * and a copy of `p` (transfer full; its normalisation too) to set it on
 * when `p` is not the loader's own. */
gboolean tdm_transform_pipeline_lacks_normalization(const TdmTransformPipeline *p);
TdmTransformPipeline *tdm_transform_pipeline_copy(const TdmTransformPipeline *p, GError **error);

/* model.c: parameters named by prefix, as model.freeze and
 * optim.lr_groups name them. The comma-separated `list` split, each
 * prefix stripped of blanks (transfer full); and the index of the longest
 * prefix `name` starts with, or -1 (an empty prefix matches nothing). */
char **tdm_name_prefixes_split(const char *list);
int tdm_name_prefix_match(char *const *prefixes, const char *name);

/* module.c / model.c: built-in module classes, for the registry. */
extern const TdmModuleClass tdm_linear_class;
extern const TdmModuleClass tdm_conv2d_class;
extern const TdmModuleClass tdm_batchnorm2d_class;
extern const TdmModuleClass tdm_relu_class;
extern const TdmModuleClass tdm_maxpool2d_class;
extern const TdmModuleClass tdm_avgpool2d_class;
extern const TdmModuleClass tdm_adaptive_avgpool2d_class;
extern const TdmModuleClass tdm_flatten_class;
extern const TdmModuleClass tdm_dropout_class;
extern const TdmModuleClass tdm_sequential_class;
extern const TdmModuleClass tdm_residual_class;

/* optim.c: built-in optimizer classes. */
extern const TdmOptimizerClass tdm_sgd_class;
extern const TdmOptimizerClass tdm_adamw_class;

#endif /* TDM_CORE_INTERNAL_H */

/* SPDX-License-Identifier: MIT */
/**
 * SECTION:types
 * @title: Basic types and errors
 * @short_description: basic types, forward declarations and the error domain
 * @include: tandem/tandem.h
 *
 * Every public header includes this one. Objects are either reference
 * counted (`tdm_x_ref` / `tdm_x_unref`) or owned by exactly one parent; the
 * documentation of each function says which. Failures are reported through a
 * `GError **error` last argument (may be NULL): a FALSE / NULL / negative
 * return means the error is set, and never both an error and a result.
 */
#ifndef TANDEM_TYPES_H
#define TANDEM_TYPES_H

#include <glib.h>
#include <stdint.h>
#include <stddef.h>

G_BEGIN_DECLS

/**
 * TDM_API:
 *
 * Marks a function or variable that libtandem-1 exports. The library is
 * built with -fvisibility=hidden and TDM_COMPILATION defined, where this
 * makes the symbol visible; for everyone else (plugins, programs) it
 * expands to nothing. Every exported name is listed in tests/abi/symbols.txt
 * (docs/abi.md).
 */
#if defined(TDM_COMPILATION) && defined(__GNUC__)
#define TDM_API __attribute__((visibility("default")))
#else
#define TDM_API
#endif

/**
 * TDM_PLUGIN_EXPORT:
 *
 * Marks a plugin's one exported symbol, its descriptor function (plugins
 * are built with -fvisibility=hidden); TDM_PLUGIN_DEFINE() uses it.
 */
#if defined(__GNUC__)
#define TDM_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TDM_PLUGIN_EXPORT
#endif

/**
 * TDM_MAX_DIMS:
 *
 * The most dimensions a #TdmTensor has: the length of its shape and stride
 * arrays. tdm_tensor_new() and the other makers refuse a larger rank with
 * %TDM_ERROR_SHAPE ("tensor rank 9 is outside 0..8"); files that hold one
 * are corrupt (%TDM_ERROR_CORRUPT).
 */
#define TDM_MAX_DIMS 8

/**
 * TDM_MAX_CHANNELS:
 *
 * The most channels a dataset's images have (RGBA), and so the length of
 * the per-channel normalisation constants (TdmLoaderOptions' mean and std,
 * tdm_dataset_get_normalization(), tdm_transform_pipeline_set_normalization()).
 */
#define TDM_MAX_CHANNELS 4

/**
 * TDM_IFACE_VERSION:
 * @major: the major version: another major is refused
 * @minor: the minor version: an older minor keeps working
 *
 * The interface version of a class struct a plugin fills (#TdmBackendClass,
 * #TdmCommClass, #TdmStrategyClass, #TdmOptimizerClass, #TdmDatasetClass,
 * #TdmTransformClass, #TdmModuleClass): the major in the high 16 bits, the
 * minor in the low 16. Each such struct starts with
 * `guint32 iface_version` (the kind's TDM_*_IFACE_VERSION) and
 * `guint32 struct_size` (sizeof the struct), and the registry refuses a
 * class of another major, of a newer minor than the core's, or of another
 * size (tdm_plugin_add_feature()). A minor version only gives reserved
 * slots a meaning, so a struct never changes size and a plugin built for an
 * older minor keeps working: new slots are optional, and a comment line in
 * the struct, `since 1.1: slot_a, slot_b`, says which minor brought them.
 * TDM_IFACE_VERSION_MAJOR() and TDM_IFACE_VERSION_MINOR() take a version
 * apart.
 */
#define TDM_IFACE_VERSION(major, minor) ((major) << 16 | (minor))
/**
 * TDM_IFACE_VERSION_MAJOR:
 * @version: a version made by TDM_IFACE_VERSION()
 *
 * The major part of @version, as a #guint32.
 */
/**
 * TDM_IFACE_VERSION_MINOR:
 * @version: a version made by TDM_IFACE_VERSION()
 *
 * The minor part of @version, as a #guint32.
 */
#define TDM_IFACE_VERSION_MAJOR(version) (((guint32)(version) >> 16) & 0xffffu)
#define TDM_IFACE_VERSION_MINOR(version) ((guint32)(version) & 0xffffu)

/**
 * TDM_CLASS_HEADER:
 * @version: the kind's TDM_*_IFACE_VERSION
 * @ClassType: the struct's type name
 *
 * The two first fields in a class table's designated initializer, so that
 * struct_size is the struct's size as this plugin was built:
 * |[<!-- language="C" -->
 *     static const TdmOptimizerClass my_class = {
 *         TDM_CLASS_HEADER(TDM_OPTIMIZER_IFACE_VERSION, TdmOptimizerClass),
 *         .step = my_step,
 *     };
 * ]|
 */
#define TDM_CLASS_HEADER(version, ClassType)                                                       \
    .iface_version = (version), .struct_size = sizeof(ClassType)

/**
 * TdmPlugin:
 *
 * A loaded plugin (opaque): its descriptor, file and features, or why it
 * failed to load. Owned by the registry for the life of the process; see
 * tandem/plugin.h.
 */
/**
 * TdmFeature:
 *
 * One feature a plugin registered (opaque): a kind, a name, a rank and a
 * class struct. Owned by the registry for the life of the process, so a
 * pointer to one never needs a reference; see tandem/plugin.h.
 */
/**
 * TdmOpCache:
 *
 * The state a backend keeps for one op call site (opaque to the core,
 * defined by each backend: primitives, layouts, scratch memory keyed by
 * shape). A module owns the slot (`TdmOpCache *cache = NULL`), passes its
 * address to the op and frees it with tdm_op_cache_clear(); see
 * tandem/backend.h.
 */
/**
 * TdmLoader:
 *
 * A data loader (opaque): batches of a dataset in sampler order, prepared
 * by worker threads ahead of use. Made by tdm_loader_new() and freed by
 * tdm_loader_free(); see tandem/data.h.
 */
typedef struct _TdmPlugin TdmPlugin;
typedef struct _TdmFeature TdmFeature;
typedef struct _TdmDevice TdmDevice;
typedef struct _TdmStorage TdmStorage;
typedef struct _TdmTensor TdmTensor;
typedef struct _TdmBackendClass TdmBackendClass;
typedef struct _TdmOpCache TdmOpCache;
typedef struct _TdmModule TdmModule;
typedef struct _TdmModuleClass TdmModuleClass;
typedef struct _TdmParam TdmParam;
typedef struct _TdmModel TdmModel;
typedef struct _TdmOptimizer TdmOptimizer;
typedef struct _TdmOptimizerClass TdmOptimizerClass;
typedef struct _TdmSchedule TdmSchedule;
typedef struct _TdmDataset TdmDataset;
typedef struct _TdmDatasetClass TdmDatasetClass;
typedef struct _TdmSampler TdmSampler;
typedef struct _TdmLoader TdmLoader;
typedef struct _TdmBatch TdmBatch;
typedef struct _TdmStrategy TdmStrategy;
typedef struct _TdmStrategyClass TdmStrategyClass;
typedef struct _TdmComm TdmComm;

/**
 * TDM_ERROR:
 *
 * The error domain of every Tandem #GError; the codes are #TdmErrorCode.
 */
#define TDM_ERROR (tdm_error_quark())
/**
 * tdm_error_quark:
 *
 * The quark of %TDM_ERROR.
 *
 * Returns: the quark
 */
TDM_API GQuark tdm_error_quark(void);

/**
 * TdmErrorCode:
 * @TDM_ERROR_FAILED: anything not listed below
 * @TDM_ERROR_IO: a file could not be read or written
 * @TDM_ERROR_CORRUPT: a file's content is malformed (the message names the
 *   file and the offset)
 * @TDM_ERROR_INVALID_ARG: a parameter, option or config value is invalid
 * @TDM_ERROR_SHAPE: tensor shapes do not match (the message names both)
 * @TDM_ERROR_NOT_FOUND: an unknown name: model, plugin, feature, parameter
 * @TDM_ERROR_PLUGIN: a plugin failed to load or initialise
 * @TDM_ERROR_UNAVAILABLE: a feature present but not usable here (no GPU...)
 * @TDM_ERROR_UNSUPPORTED: an operation this backend or layout does not offer
 * @TDM_ERROR_BACKEND: a backend library call failed
 * @TDM_ERROR_TIMEOUT: a wait ran past its deadline
 *
 * The codes of %TDM_ERROR.
 */
typedef enum {
    TDM_ERROR_FAILED,        /* anything not listed below */
    TDM_ERROR_IO,            /* a file could not be read or written */
    TDM_ERROR_CORRUPT,       /* a file's content is malformed (message names file and offset) */
    TDM_ERROR_INVALID_ARG,   /* a parameter, option or config value is invalid */
    TDM_ERROR_SHAPE,         /* tensor shapes do not match (message names both) */
    TDM_ERROR_NOT_FOUND,     /* unknown name: model, plugin, feature, parameter */
    TDM_ERROR_PLUGIN,        /* a plugin failed to load or initialise */
    TDM_ERROR_UNAVAILABLE,   /* feature present but not usable here (no GPU...) */
    TDM_ERROR_UNSUPPORTED,   /* operation not supported by this backend / layout */
    TDM_ERROR_BACKEND,       /* a backend library call failed */
    TDM_ERROR_TIMEOUT,       /* a wait ran past its deadline */
} TdmErrorCode;

/**
 * TdmDType:
 * @TDM_DTYPE_F32: 32-bit float
 * @TDM_DTYPE_I32: 32-bit signed integer (labels)
 * @TDM_DTYPE_I64: 64-bit signed integer
 * @TDM_DTYPE_U8: unsigned byte (images)
 * @TDM_DTYPE_BF16: bfloat16
 * @TDM_DTYPE_F16: IEEE half float
 *
 * A tensor's element type.
 */
typedef enum {
    TDM_DTYPE_F32 = 0,
    TDM_DTYPE_I32,
    TDM_DTYPE_I64,
    TDM_DTYPE_U8,
    TDM_DTYPE_BF16,
    TDM_DTYPE_F16,
} TdmDType;

/**
 * tdm_dtype_size:
 * @dtype: an element type
 *
 * The size of one element.
 *
 * Returns: the size in bytes
 */
TDM_API size_t tdm_dtype_size(TdmDType dtype);
/**
 * tdm_dtype_name:
 * @dtype: an element type
 *
 * The type's name, as messages and safetensors write it.
 *
 * Returns: (transfer none): "f32", "i32", ...
 */
TDM_API const char *tdm_dtype_name(TdmDType dtype);

/**
 * tdm_time_now:
 *
 * Monotonic time, for progress and benchmarks.
 *
 * Returns: seconds since an arbitrary point
 */
TDM_API double tdm_time_now(void);

G_END_DECLS

#endif /* TANDEM_TYPES_H */

/* tandem/plugin.h - plugin descriptor, features and the registry.
 *
 * A plugin is a shared object `libtdm-<name>.so` exporting exactly one
 * symbol, `tdm_plugin_<name>_get_desc` (dashes become underscores), that
 * returns a `const TdmPluginDesc *`. Its `init` registers features: a
 * backend, a collective, a strategy, a transform, a dataset reader, a module
 * or an optimizer, each with a priority and a kind-specific class struct.
 * The core's own modules and optimizers are registered the same way by a
 * built-in plugin called "core", so every lookup is tdm_registry_find().
 */
#ifndef TANDEM_PLUGIN_H
#define TANDEM_PLUGIN_H

#include <tandem/types.h>

G_BEGIN_DECLS

/* Bumped whenever TdmPluginDesc or a feature class changes incompatibly.
 * 2: every class struct starts with iface_version and struct_size. */
#define TDM_PLUGIN_ABI_VERSION 2

typedef enum {
    TDM_FEATURE_BACKEND = 0,
    TDM_FEATURE_COLLECTIVE,
    TDM_FEATURE_STRATEGY,
    TDM_FEATURE_TRANSFORM,
    TDM_FEATURE_DATASET,
    TDM_FEATURE_MODULE,
    TDM_FEATURE_OPTIMIZER,
    TDM_FEATURE_N_KINDS
} TdmFeatureKind;

/* "backend", "collective", ... (transfer none); parse returns -1 if unknown. */
TDM_API const char *tdm_feature_kind_name(TdmFeatureKind kind);
TDM_API int tdm_feature_kind_from_name(const char *name);

/* Priorities: 0..100; a negative priority means "never picked automatically". */
#define TDM_PRIORITY_NEVER (-1)

typedef struct {
    guint32 abi_version;  /* TDM_PLUGIN_ABI_VERSION */
    guint32 struct_size;  /* sizeof(TdmPluginDesc) */
    const char *name;     /* must equal the file stem: libtdm-<name>.so */
    const char *version;
    const char *license;  /* SPDX identifier, mandatory */
    const char *description;
    const char *origin;   /* URL or vendor */
    gboolean (*init)(TdmPlugin *plugin, GError **error);
    gpointer reserved[8];
} TdmPluginDesc;

/* Declares the descriptor symbol for a plugin. `ident` is the name with
 * dashes as underscores, `name_str` the name itself. Use once per plugin:
 *   TDM_PLUGIN_DEFINE(ref, "ref", "0.1", "MIT", "Reference backend", "tandem", ref_init)
 * The file must be installed as libtdm-<name>.so.
 */
#define TDM_PLUGIN_DEFINE(ident, name_str, ver, lic, desc, orig, initfn)            \
    static const TdmPluginDesc tdm_plugin_desc_ = {                                 \
        TDM_PLUGIN_ABI_VERSION, sizeof(TdmPluginDesc), name_str, ver, lic, desc, orig, \
        initfn, {0}};                                                               \
    TDM_PLUGIN_EXPORT const TdmPluginDesc *tdm_plugin_##ident##_get_desc(void);     \
    TDM_PLUGIN_EXPORT const TdmPluginDesc *tdm_plugin_##ident##_get_desc(void)      \
    {                                                                               \
        return &tdm_plugin_desc_;                                                   \
    }

/* A parameter a feature accepts (shown by `tandem inspect NAME`). */
typedef struct {
    const char *name;
    const char *type;          /* "int", "float", "string", "bool", "list" */
    const char *default_value; /* NULL if required */
    const char *description;
} TdmParamSpec;

/* Availability probe: return FALSE with a reason (no GPU, no driver...). */
typedef gboolean (*TdmFeatureProbe)(gconstpointer klass, char **reason);

/* Register a feature of PLUGIN during init. `klass` is the kind-specific
 * class struct (TdmBackendClass, TdmDatasetClass, ...), which must outlive
 * the plugin (static storage). `params` is NULL or terminated by an entry
 * with a NULL name. Returns the feature (transfer none, owned by the
 * registry) or NULL with error set (duplicate name of that kind...).
 *
 * The class is checked here, once, for every plugin and the built-in one:
 * its iface_version must have the core's major and no newer minor (see
 * TDM_IFACE_VERSION), its struct_size must be the core's sizeof, and every
 * slot its header does not mark "(optional: NULL means ...)" must be set.
 * A class that fails is refused with a reason naming the kind, the feature
 * and the slot ("backend 'x': required slot 'gemm' is NULL"), and the whole
 * plugin then fails to load with that reason, even if its init goes on and
 * returns TRUE: `tandem inspect` lists it under the load failures. */
TDM_API TdmFeature *tdm_plugin_add_feature(TdmPlugin *plugin, TdmFeatureKind kind,
                                           const char *name, int priority,
                                           gconstpointer klass, const char *description,
                                           const TdmParamSpec *params,
                                           TdmFeatureProbe probe, GError **error);

TDM_API const char *tdm_plugin_get_name(const TdmPlugin *plugin);
TDM_API const char *tdm_plugin_get_filename(const TdmPlugin *plugin); /* NULL for built-in */
TDM_API const TdmPluginDesc *tdm_plugin_get_desc(const TdmPlugin *plugin);

TDM_API const char *tdm_feature_get_name(const TdmFeature *feature);
TDM_API TdmFeatureKind tdm_feature_get_kind(const TdmFeature *feature);
TDM_API int tdm_feature_get_priority(const TdmFeature *feature); /* after overrides */
TDM_API gconstpointer tdm_feature_get_class(const TdmFeature *feature);
TDM_API TdmPlugin *tdm_feature_get_plugin(const TdmFeature *feature);
TDM_API const char *tdm_feature_get_description(const TdmFeature *feature);
TDM_API const TdmParamSpec *tdm_feature_get_params(const TdmFeature *feature);
/* Runs the probe once (cached). On FALSE, *reason (may be NULL) gets a
 * transfer-none explanation. */
TDM_API gboolean tdm_feature_is_available(TdmFeature *feature, const char **reason);

/* ---- Registry (process-wide, thread-safe) ----------------------------- */

/* Load the built-in core plugin and scan the plugin path once:
 * TDM_PLUGIN_PATH (colon separated), then TDM_PLUGIN_SYSTEM_PATH if set
 * (it replaces the default), else tdm_registry_default_plugin_dir(). The first
 * file of a given basename wins. Idempotent. A plugin that fails is recorded,
 * never fatal. Returns FALSE only on a programming error. */
TDM_API gboolean tdm_registry_init(GError **error);

/* Load one plugin file explicitly (`--plugin FILE`); failure is an error.
 * Returns the plugin (transfer none). */
TDM_API TdmPlugin *tdm_registry_load_file(const char *filename, GError **error);

/* All loaded plugins, in load order (transfer container: free the array only). */
TDM_API GPtrArray *tdm_registry_list_plugins(void);

typedef struct {
    char *filename;
    char *reason;
} TdmPluginFailure;
/* Load failures recorded so far (transfer none; array of TdmPluginFailure *). */
TDM_API const GPtrArray *tdm_registry_list_failures(void);

/* Every feature of KIND (or of every kind if kind == TDM_FEATURE_N_KINDS),
 * sorted by priority, highest first (transfer container). */
TDM_API GPtrArray *tdm_registry_list_features(TdmFeatureKind kind);

/* Exact lookup by name; NULL with a TDM_ERROR_NOT_FOUND error listing the
 * known names of that kind. Transfer none. */
TDM_API TdmFeature *tdm_registry_find(TdmFeatureKind kind, const char *name, GError **error);

/* Selection: `spec` is NULL/"" (automatic: highest priority available),
 * a name ("cuda"), a comma list tried in order ("cuda,cpu"), or a negated list
 * ("^gloo,ref": automatic among all but these). `accept` may further filter
 * candidates (NULL = all). Returns the feature (transfer none) or NULL with an
 * error that says why each candidate was rejected. */
typedef gboolean (*TdmFeatureFilter)(TdmFeature *feature, gpointer user_data);
TDM_API TdmFeature *tdm_registry_select(TdmFeatureKind kind, const char *spec,
                                        TdmFeatureFilter accept, gpointer user_data,
                                        GError **error);

/* TDM_PLUGIN_PRIORITY=name:prio,name:prio is read by tdm_registry_init();
 * this sets one override programmatically. */
TDM_API void tdm_registry_set_priority(const char *feature_name, int priority);

/* The directory scanned when TDM_PLUGIN_SYSTEM_PATH is unset: the installed
 * plugin directory, or the build's plugins/.libs when the library itself is
 * run uninstalled from its build tree (transfer none). */
TDM_API const char *tdm_registry_default_plugin_dir(void);

G_END_DECLS

#endif /* TANDEM_PLUGIN_H */

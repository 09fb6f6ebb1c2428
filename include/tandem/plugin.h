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
    const char *name;     /* the file stem of libtdm-<name>.so ('_' may stand for '-') */
    const char *version;
    const char *license;  /* SPDX identifier, mandatory */
    const char *description;
    const char *origin;   /* URL or vendor */
    gboolean (*init)(TdmPlugin *plugin, GError **error);
    gpointer reserved[8];
} TdmPluginDesc;

/* The version a plugin's descriptor declares: the build gives it, as
 * -DTDM_PLUGIN_VERSION='"1.2"' on the compiler's command line, or through
 * an Autoconf config.h (its PACKAGE_VERSION) included before this header.
 * A plugin that has neither fails to compile at TDM_PLUGIN_DEFINE with
 * "'TDM_PLUGIN_VERSION' undeclared", which says what to define. */
#if !defined(TDM_PLUGIN_VERSION) && defined(PACKAGE_VERSION)
#define TDM_PLUGIN_VERSION PACKAGE_VERSION
#endif

/* Declares the descriptor symbol for a plugin; use once per plugin:
 *   TDM_PLUGIN_DEFINE(ref, "MIT", "Reference backend", "tandem", ref_init)
 * `name` is the plugin's name written as a C identifier, once: the file
 * must be installed as libtdm-<name>.so, where a dash in the file name
 * stands for an underscore in `name` (TDM_PLUGIN_DEFINE(my_sgd, ...) is
 * libtdm-my-sgd.so, whose plugin is then called "my-sgd"). The version
 * is TDM_PLUGIN_VERSION (above); `lic` is an SPDX identifier (mandatory),
 * `desc` one line, `orig` a URL or vendor, `initfn` the init (NULL: a
 * plugin that registers nothing).
 *
 * The older form, which named the plugin twice and gave its version,
 * TDM_PLUGIN_DEFINE(ident, "name", "version", lic, desc, orig, initfn), is
 * still accepted, so that sources written for it keep building. */
#define TDM_PLUGIN_DEFINE(...)                                                                    \
    TDM_PLUGIN_DEFINE_PICK_(__VA_ARGS__, TDM_PLUGIN_DEFINE_OLD_, TDM_PLUGIN_DEFINE_BAD_,         \
                            TDM_PLUGIN_DEFINE_NEW_, TDM_PLUGIN_DEFINE_BAD_,                       \
                            TDM_PLUGIN_DEFINE_BAD_)(__VA_ARGS__)
#define TDM_PLUGIN_DEFINE_PICK_(a1, a2, a3, a4, a5, a6, a7, which, ...) which
#define TDM_PLUGIN_DEFINE_NEW_(name, lic, desc, orig, initfn)                                     \
    TDM_PLUGIN_DEFINE_OLD_(name, #name, TDM_PLUGIN_VERSION, lic, desc, orig, initfn)
#define TDM_PLUGIN_DEFINE_OLD_(ident, name_str, ver, lic, desc, orig, initfn)                     \
    static const TdmPluginDesc tdm_plugin_desc_ = {                                               \
        TDM_PLUGIN_ABI_VERSION, sizeof(TdmPluginDesc), name_str, ver, lic, desc, orig, initfn,   \
        {0}};                                                                                     \
    TDM_PLUGIN_EXPORT const TdmPluginDesc *tdm_plugin_##ident##_get_desc(void);                   \
    TDM_PLUGIN_EXPORT const TdmPluginDesc *tdm_plugin_##ident##_get_desc(void)                    \
    {                                                                                             \
        return &tdm_plugin_desc_;                                                                 \
    }
#define TDM_PLUGIN_DEFINE_BAD_(...)                                                               \
    _Static_assert(0, "TDM_PLUGIN_DEFINE takes (name, licence, description, origin, init)");

/* ---- parameters ------------------------------------------------------- */

/* What a parameter's value is. A list is written with commas ("0.5,0.5,0.5",
 * spaces after the commas allowed); its elements obey min/max and its
 * length min_count/max_count. */
typedef enum {
    TDM_PARAM_STRING = 0, /* any text */
    TDM_PARAM_INT,        /* an integer in [min, max] */
    TDM_PARAM_FLOAT,      /* a finite number in [min, max] */
    TDM_PARAM_BOOL,       /* true/false, yes/no, on/off, 1/0 */
    TDM_PARAM_CHOICE,     /* one of `choices` */
    TDM_PARAM_INTS,       /* a list of integers */
    TDM_PARAM_FLOATS,     /* a list of numbers */
    TDM_PARAM_N_TYPES
} TdmParamType;

typedef enum {
    TDM_PARAM_REQUIRED = 1 << 0,      /* an error when not given */
    TDM_PARAM_POSITIONAL = 1 << 1,    /* may be given without "key=", in spec order */
    TDM_PARAM_MIN_EXCLUSIVE = 1 << 2, /* (min, ...: min itself is refused */
    TDM_PARAM_MAX_EXCLUSIVE = 1 << 3, /* ..., max): max itself is refused */
} TdmParamFlags;

/* A parameter a feature accepts: the parser (<tandem/params.h>) checks
 * values against it and `tandem inspect NAME` shows it.
 *
 * Growing without breaking plugins built earlier: every entry carries its
 * own size (`struct_size`, set by the TDM_PARAM_SPEC_* macros below), and the
 * core reads an array entry by entry with that stride, copying the fields
 * it knows and zero-filling the ones an older plugin did not have. So new
 * fields go at the end, and a plugin built against older headers keeps
 * working. The first layout (interface 1.0: four strings name, type,
 * default_value, description) had no size; `struct_size` sits where its
 * `type` pointer was and is pointer-sized, and since no string lives in the
 * first page of memory, a value below 4096 there can only be a size: that
 * is how the core tells the two layouts apart (a 1.0 array's "int",
 * "float", "bool" and "string" types map to the enum, anything else to
 * TDM_PARAM_STRING). tdm_feature_get_params() always returns the current
 * layout. An array ends with an entry whose name is NULL (TDM_PARAM_SPEC_END).
 * since 1.1: struct_size, type, flags, min, max, min_count, max_count,
 * choices, aliases (the 1.0 layout had name, type text, default, description) */
typedef struct {
    const char *name;          /* the key: letters, digits, '-', '_' */
    gsize struct_size;         /* sizeof(TdmParamSpec) */
    TdmParamType type;
    guint32 flags;             /* TdmParamFlags */
    const char *default_value; /* as a user would write it; NULL: none */
    double min, max;           /* numbers, each list element: both 0 = any */
    int min_count, max_count;  /* lists: how many values; both 0 = one or more */
    const char *choices;       /* TDM_PARAM_CHOICE: "a|b|c" */
    const char *aliases;       /* other keys accepted for it, "a|b", or NULL */
    const char *description;
} TdmParamSpec;

/* Parsed values of one use of a feature (<tandem/params.h>). */
typedef struct _TdmParams TdmParams;

/* Entries for the common cases (`flags` is a TdmParamFlags mask; for a
 * number without limits give 0, 0 as the range). Write other combinations
 * (aliases, say) with designated initializers and
 * `.struct_size = sizeof(TdmParamSpec)`. */
#define TDM_PARAM_SPEC_FULL(n, t, f, def, lo, hi, cmin, cmax, ch, desc)                           \
    {                                                                                             \
        .name = (n), .struct_size = sizeof(TdmParamSpec), .type = (t), .flags = (f),              \
        .default_value = (def), .min = (lo), .max = (hi), .min_count = (cmin),                    \
        .max_count = (cmax), .choices = (ch), .description = (desc)                               \
    }
#define TDM_PARAM_SPEC_STRING(n, f, def, desc)                                                    \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_STRING, f, def, 0, 0, 0, 0, NULL, desc)
#define TDM_PARAM_SPEC_INT(n, f, def, lo, hi, desc)                                               \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_INT, f, def, lo, hi, 0, 0, NULL, desc)
#define TDM_PARAM_SPEC_FLOAT(n, f, def, lo, hi, desc)                                             \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_FLOAT, f, def, lo, hi, 0, 0, NULL, desc)
#define TDM_PARAM_SPEC_BOOL(n, f, def, desc)                                                      \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_BOOL, f, def, 0, 0, 0, 0, NULL, desc)
#define TDM_PARAM_SPEC_CHOICE(n, f, def, choices, desc)                                           \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_CHOICE, f, def, 0, 0, 0, 0, choices, desc)
#define TDM_PARAM_SPEC_INTS(n, f, def, cmin, cmax, lo, hi, desc)                                  \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_INTS, f, def, lo, hi, cmin, cmax, NULL, desc)
#define TDM_PARAM_SPEC_FLOATS(n, f, def, cmin, cmax, lo, hi, desc)                                \
    TDM_PARAM_SPEC_FULL(n, TDM_PARAM_FLOATS, f, def, lo, hi, cmin, cmax, NULL, desc)
#define TDM_PARAM_SPEC_END {.name = NULL}

/* Availability probe: return FALSE with a reason (no GPU, no driver...). */
typedef gboolean (*TdmFeatureProbe)(gconstpointer klass, char **reason);

/* Register a feature of PLUGIN during init. `klass` is the kind-specific
 * class struct (TdmBackendClass, TdmDatasetClass, ...), which must outlive
 * the plugin (static storage). `params` is NULL or terminated by an entry
 * with a NULL name (either layout, see TdmParamSpec; the registry keeps a
 * copy in the current one); a spec that makes no sense (a default its own
 * type refuses, an unknown type) is refused with the reason. Returns the
 * feature (transfer none, owned by the registry) or NULL with error set
 * (duplicate name of that kind...).
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

/* The init of a plugin that registers one feature and nothing else: defines
 * `static gboolean fn(TdmPlugin *plugin, GError **error)`, which calls
 * tdm_plugin_add_feature with these arguments, for TDM_PLUGIN_DEFINE:
 *     TDM_PLUGIN_INIT_FEATURE(ddp_init, TDM_FEATURE_STRATEGY, "ddp", 50, &ddp_class,
 *                             "data-parallel training", ddp_params, NULL)
 *     TDM_PLUGIN_DEFINE(ddp, "MIT", "...", "tandem", ddp_init) */
#define TDM_PLUGIN_INIT_FEATURE(fn, kind, name, priority, klass, description, params, probe)      \
    static gboolean fn(TdmPlugin *plugin, GError **error)                                          \
    {                                                                                              \
        return tdm_plugin_add_feature(plugin, kind, name, priority, klass, description, params,   \
                                      probe, error) != NULL;                                       \
    }

TDM_API const char *tdm_plugin_get_name(const TdmPlugin *plugin);
TDM_API const char *tdm_plugin_get_filename(const TdmPlugin *plugin); /* NULL for built-in */
TDM_API const TdmPluginDesc *tdm_plugin_get_desc(const TdmPlugin *plugin);

TDM_API const char *tdm_feature_get_name(const TdmFeature *feature);
TDM_API TdmFeatureKind tdm_feature_get_kind(const TdmFeature *feature);
TDM_API int tdm_feature_get_priority(const TdmFeature *feature); /* after overrides */
TDM_API gconstpointer tdm_feature_get_class(const TdmFeature *feature);
TDM_API TdmPlugin *tdm_feature_get_plugin(const TdmFeature *feature);
TDM_API const char *tdm_feature_get_description(const TdmFeature *feature);
/* NULL, or the parameter specs in the current layout, ending with a NULL
 * name (transfer none). */
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

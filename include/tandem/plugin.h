/* SPDX-License-Identifier: MIT */
/**
 * SECTION:plugin
 * @title: Plugins and the registry
 * @short_description: the plugin descriptor, features, and finding them
 * @include: tandem/tandem.h
 *
 * A plugin is a shared object `libtdm-<name>.so` exporting exactly one
 * symbol, `tdm_plugin_<name>_get_desc` (dashes become underscores), that
 * returns a `const TdmPluginDesc *`. Its `init` registers features: a
 * backend, a collective, a strategy, a transform, a dataset reader, a module
 * or an optimizer, each with a priority and a kind-specific class struct.
 * The core's own modules and optimizers are registered the same way by a
 * built-in plugin called "core", so every lookup is tdm_registry_find().
 *
 * The registry is process-wide and thread-safe; everything it returns is
 * owned by it and lives until the process ends (plugins are never
 * unloaded).
 */
#ifndef TANDEM_PLUGIN_H
#define TANDEM_PLUGIN_H

#include <tandem/types.h>

G_BEGIN_DECLS

/**
 * TDM_PLUGIN_ABI_VERSION:
 *
 * The version of #TdmPluginDesc and of the class structs' common header,
 * bumped whenever one of them changes incompatibly (2: every class struct
 * starts with iface_version and struct_size). A plugin built with another
 * value is refused at load time with a reason naming both versions; the
 * class structs themselves carry their own major.minor versions
 * (TDM_IFACE_VERSION()).
 */
#define TDM_PLUGIN_ABI_VERSION 2

/**
 * TdmFeatureKind:
 * @TDM_FEATURE_BACKEND: a compute backend (#TdmBackendClass)
 * @TDM_FEATURE_COLLECTIVE: a collective communication library (#TdmCommClass)
 * @TDM_FEATURE_STRATEGY: a training strategy (#TdmStrategyClass)
 * @TDM_FEATURE_TRANSFORM: an augmentation transform (#TdmTransformClass)
 * @TDM_FEATURE_DATASET: a dataset reader (#TdmDatasetClass)
 * @TDM_FEATURE_MODULE: a model layer (#TdmModuleClass)
 * @TDM_FEATURE_OPTIMIZER: an optimizer (#TdmOptimizerClass)
 * @TDM_FEATURE_N_KINDS: the number of kinds; "every kind" where a kind is asked
 *
 * What a feature is, and so which class struct it registers.
 */
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

/**
 * tdm_feature_kind_name:
 * @kind: a kind
 *
 * The name of a feature kind.
 *
 * Returns: (transfer none): the kind's name as users write it: "backend",
 * "collective", "strategy", ...
 */
TDM_API const char *tdm_feature_kind_name(TdmFeatureKind kind);
/**
 * tdm_feature_kind_from_name:
 * @name: a kind's name, as tdm_feature_kind_name() gives it
 *
 * The kind a name stands for.
 *
 * Returns: the #TdmFeatureKind, or -1 if @name is no kind's name
 */
TDM_API int tdm_feature_kind_from_name(const char *name);

/**
 * TDM_PRIORITY_NEVER:
 *
 * A feature's priority is 0..100, and automatic selection picks the highest
 * available one; a negative priority, such as this, means "never picked
 * automatically, only by name".
 */
#define TDM_PRIORITY_NEVER (-1)

/**
 * TdmPluginDesc:
 * @abi_version: %TDM_PLUGIN_ABI_VERSION
 * @struct_size: sizeof(TdmPluginDesc)
 * @name: the plugin's name; must equal the file stem: libtdm-<name>.so
 * @version: the plugin's version
 * @license: an SPDX licence identifier; mandatory
 * @description: one line for `tandem inspect`
 * @origin: a URL or vendor
 * @init: registers the plugin's features (tdm_plugin_add_feature()); FALSE
 *   with @error set fails the whole plugin, and what it registered is
 *   rolled back
 * @reserved: zero
 *
 * What a plugin's one exported function, tdm_plugin_<name>_get_desc()
 * (dashes as underscores), returns: static storage, written with
 * TDM_PLUGIN_DEFINE(). A descriptor of another @abi_version or
 * @struct_size, a @name other than the file's, or no @license, is refused
 * with the reason, recorded as a load failure.
 */
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

/**
 * TDM_PLUGIN_VERSION:
 *
 * The version a plugin's descriptor declares (a string literal): the
 * build gives it, as -DTDM_PLUGIN_VERSION='"1.2"' on the compiler's
 * command line, or through an Autoconf config.h (its PACKAGE_VERSION)
 * included before this header. A plugin that has neither fails to compile
 * at TDM_PLUGIN_DEFINE() with "'TDM_PLUGIN_VERSION' undeclared", which
 * says what to define.
 */
#if !defined(TDM_PLUGIN_VERSION) && defined(PACKAGE_VERSION)
#define TDM_PLUGIN_VERSION PACKAGE_VERSION
#endif

/**
 * TDM_PLUGIN_DEFINE:
 * @...: name, lic, desc, orig, initfn (or the older seven arguments)
 *
 * Declares the descriptor symbol for a plugin; use once per plugin:
 * |[<!-- language="C" -->
 *   TDM_PLUGIN_DEFINE(ref, "MIT", "Reference backend", "tandem", ref_init)
 * ]|
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
 * still accepted, so that sources written for it keep building. Any other
 * number of arguments fails to compile with a static assertion naming the
 * five it takes.
 *
 * It defines a static #TdmPluginDesc and the exported function
 * tdm_plugin_<name>_get_desc() that returns it (the descriptor is static
 * storage: the registry never frees it). What the descriptor says is
 * checked when the plugin loads (see #TdmPluginDesc).
 */
/**
 * TDM_PLUGIN_DEFINE_PICK_:
 * @a1: an argument of TDM_PLUGIN_DEFINE()
 * @a2: an argument
 * @a3: an argument
 * @a4: an argument
 * @a5: an argument
 * @a6: an argument
 * @a7: an argument
 * @which: the form picked by the number of arguments
 * @...: the rest
 *
 * Part of TDM_PLUGIN_DEFINE(), not for use on its own: picks the form by
 * the number of arguments.
 */
/**
 * TDM_PLUGIN_DEFINE_NEW_:
 * @name: the plugin's name as a C identifier
 * @lic: the SPDX licence identifier
 * @desc: one line
 * @orig: a URL or vendor
 * @initfn: (nullable): the init function
 *
 * Part of TDM_PLUGIN_DEFINE(), not for use on its own: the five-argument
 * form, with the version from %TDM_PLUGIN_VERSION.
 */
/**
 * TDM_PLUGIN_DEFINE_OLD_:
 * @ident: the plugin's name as a C identifier
 * @name_str: the plugin's name as a string
 * @ver: the version string
 * @lic: the SPDX licence identifier
 * @desc: one line
 * @orig: a URL or vendor
 * @initfn: (nullable): the init function
 *
 * Part of TDM_PLUGIN_DEFINE(), not for use on its own: the seven-argument
 * form, which also defines the descriptor and its exported getter.
 */
/**
 * TDM_PLUGIN_DEFINE_BAD_:
 * @...: the arguments given
 *
 * Part of TDM_PLUGIN_DEFINE(), not for use on its own: a static assertion
 * that fails the build when the number of arguments is wrong.
 */
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

/**
 * TdmParamType:
 * @TDM_PARAM_STRING: any text
 * @TDM_PARAM_INT: an integer in [min, max]
 * @TDM_PARAM_FLOAT: a finite number in [min, max]
 * @TDM_PARAM_BOOL: true/false, yes/no, on/off, 1/0
 * @TDM_PARAM_CHOICE: one of the spec's `choices`
 * @TDM_PARAM_INTS: a list of integers
 * @TDM_PARAM_FLOATS: a list of numbers
 * @TDM_PARAM_N_TYPES: the number of types
 *
 * What a parameter's value is. A list is written with commas ("0.5,0.5,0.5",
 * spaces after the commas allowed); its elements obey min/max and its
 * length min_count/max_count.
 */
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

/**
 * TdmParamFlags:
 * @TDM_PARAM_REQUIRED: an error when not given
 * @TDM_PARAM_POSITIONAL: may be given without "key=", in spec order
 * @TDM_PARAM_MIN_EXCLUSIVE: (min, ...: min itself is refused
 * @TDM_PARAM_MAX_EXCLUSIVE: ..., max): max itself is refused
 * @TDM_PARAM_ALLOW_NONE: the value "none" is accepted and means "off":
 *   tdm_params_has_value() is FALSE, which the feature must check (without
 *   the flag, "none" is refused when the spec has a default)
 *
 * A #TdmParamSpec's flags, or-ed together.
 */
typedef enum {
    TDM_PARAM_REQUIRED = 1 << 0,      /* an error when not given */
    TDM_PARAM_POSITIONAL = 1 << 1,    /* may be given without "key=", in spec order */
    TDM_PARAM_MIN_EXCLUSIVE = 1 << 2, /* (min, ...: min itself is refused */
    TDM_PARAM_MAX_EXCLUSIVE = 1 << 3, /* ..., max): max itself is refused */
    TDM_PARAM_ALLOW_NONE = 1 << 4,    /* "none" = off: check tdm_params_has_value() */
} TdmParamFlags;

/**
 * TdmParamSpec:
 * @name: the key: letters, digits, '-', '_'; NULL ends an array
 * @struct_size: sizeof(TdmParamSpec)
 * @type: what the value is
 * @flags: a #TdmParamFlags mask
 * @default_value: (nullable): as a user would write it; NULL: none
 * @min: numbers and each list element: the least value (min and max both
 *   0: no range at all, any finite value, negative ones too; for ">= 0"
 *   write 0, INFINITY)
 * @max: the greatest value (both 0: any finite value)
 * @min_count: lists: the fewest values (both 0: one or more)
 * @max_count: lists: the most values
 * @choices: %TDM_PARAM_CHOICE: "a|b|c"
 * @aliases: (nullable): other keys accepted for it, "a|b"
 * @description: one line for `tandem inspect`
 *
 * A parameter a feature accepts: the parser (<tandem/params.h>) checks
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
 * choices, aliases (the 1.0 layout had name, type text, default, description)
 */
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

/**
 * TdmParams:
 *
 * The parsed values of one use of a feature (<tandem/params.h>); opaque.
 */
typedef struct _TdmParams TdmParams;

/**
 * TDM_PARAM_SPEC_FULL:
 * @n: the name
 * @t: the #TdmParamType
 * @f: a #TdmParamFlags mask
 * @def: the default, or NULL
 * @lo: the least value
 * @hi: the greatest value (@lo and @hi both 0: any finite value, negative
 *   ones too; 0, INFINITY: >= 0)
 * @cmin: lists: the fewest values
 * @cmax: lists: the most values
 * @ch: %TDM_PARAM_CHOICE: "a|b|c", else NULL
 * @desc: the description
 *
 * One #TdmParamSpec entry with its struct_size set. TDM_PARAM_SPEC_STRING(),
 * _INT(), _FLOAT(), _BOOL(), _CHOICE(), _INTS() and _FLOATS() are the common
 * cases (for a number without limits give 0, 0 as the range); write other
 * combinations (aliases, say) with designated initializers and
 * `.struct_size = sizeof(TdmParamSpec)`. TDM_PARAM_SPEC_END ends an array.
 */
#define TDM_PARAM_SPEC_FULL(n, t, f, def, lo, hi, cmin, cmax, ch, desc)                           \
    {                                                                                             \
        .name = (n), .struct_size = sizeof(TdmParamSpec), .type = (t), .flags = (f),              \
        .default_value = (def), .min = (lo), .max = (hi), .min_count = (cmin),                    \
        .max_count = (cmax), .choices = (ch), .description = (desc)                               \
    }
/**
 * TDM_PARAM_SPEC_STRING:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_STRING.
 */
/**
 * TDM_PARAM_SPEC_INT:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @lo: the least value
 * @hi: the greatest value (0, 0: any)
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_INT.
 */
/**
 * TDM_PARAM_SPEC_FLOAT:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @lo: the least value
 * @hi: the greatest value (0, 0: any)
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_FLOAT.
 */
/**
 * TDM_PARAM_SPEC_BOOL:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_BOOL.
 */
/**
 * TDM_PARAM_SPEC_CHOICE:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @choices: the names allowed, "a|b|c"
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_CHOICE.
 */
/**
 * TDM_PARAM_SPEC_INTS:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @cmin: the fewest values
 * @cmax: the most values (0, 0: one or more)
 * @lo: each value's least
 * @hi: each value's greatest (0, 0: any)
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_INTS. Note the order: the
 * counts come before the range, unlike TDM_PARAM_SPEC_FULL().
 */
/**
 * TDM_PARAM_SPEC_FLOATS:
 * @n: the name
 * @f: a #TdmParamFlags mask
 * @def: (nullable): the default, or NULL
 * @cmin: the fewest values
 * @cmax: the most values (0, 0: one or more)
 * @lo: each value's least
 * @hi: each value's greatest (0, 0: any)
 * @desc: the description
 *
 * A #TdmParamSpec entry of type %TDM_PARAM_FLOATS; the counts come before
 * the range, as for TDM_PARAM_SPEC_INTS().
 */
/**
 * TDM_PARAM_SPEC_END:
 *
 * The entry that ends an array of #TdmParamSpec (its name is NULL).
 */
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

/**
 * TdmFeatureProbe:
 * @klass: the feature's class struct
 * @reason: (out) (transfer full): where to put why it is unavailable
 *
 * A feature's availability probe, run once per process.
 *
 * Returns: TRUE when the feature can work on this machine; FALSE with a
 * reason (no GPU, no driver...) otherwise
 */
typedef gboolean (*TdmFeatureProbe)(gconstpointer klass, char **reason);

/**
 * tdm_plugin_add_feature:
 * @plugin: the plugin being initialised (its init's argument)
 * @kind: what the feature is
 * @name: its name, unique within @kind
 * @priority: 0..100, or negative for "only by name" (%TDM_PRIORITY_NEVER)
 * @klass: the kind-specific class struct (#TdmBackendClass,
 *   #TdmDatasetClass, ...); it must outlive the plugin (static storage)
 * @description: one line for `tandem inspect`
 * @params: (nullable): the parameters it accepts, ending with an entry whose
 *   name is NULL (either layout, see #TdmParamSpec; the registry keeps a
 *   copy in the current one)
 * @probe: (nullable): its availability probe; NULL: always available
 * @error: return location for a #GError, or NULL
 *
 * Registers a feature of @plugin during its init. A spec that makes no
 * sense (a default its own type refuses, an unknown type) is refused with
 * the reason, as is a duplicate name of that kind.
 *
 * The class is checked here, once, for every plugin and the built-in one:
 * its iface_version must have the core's major and no newer minor (see
 * TDM_IFACE_VERSION), its struct_size must be the core's sizeof, and every
 * slot its header does not mark "(optional: NULL means ...)" must be set.
 * A class that fails is refused with a reason naming the kind, the feature
 * and the slot ("backend 'x': required slot 'gemm' is NULL"), and the whole
 * plugin then fails to load with that reason, even if its init goes on and
 * returns TRUE: `tandem inspect` lists it under the load failures.
 *
 * Returns: (transfer none): the feature, owned by the registry, or NULL with
 * @error set (%TDM_ERROR_PLUGIN)
 */
TDM_API TdmFeature *tdm_plugin_add_feature(TdmPlugin *plugin, TdmFeatureKind kind,
                                           const char *name, int priority,
                                           gconstpointer klass, const char *description,
                                           const TdmParamSpec *params,
                                           TdmFeatureProbe probe, GError **error);

/**
 * TDM_PLUGIN_INIT_FEATURE:
 * @fn: the name of the init function to define
 * @kind: as for tdm_plugin_add_feature()
 * @name: as for tdm_plugin_add_feature()
 * @priority: as for tdm_plugin_add_feature()
 * @klass: as for tdm_plugin_add_feature()
 * @description: as for tdm_plugin_add_feature()
 * @params: as for tdm_plugin_add_feature()
 * @probe: as for tdm_plugin_add_feature()
 *
 * The init of a plugin that registers one feature and nothing else: defines
 * `static gboolean fn(TdmPlugin *plugin, GError **error)`, which calls
 * tdm_plugin_add_feature() with these arguments, for TDM_PLUGIN_DEFINE():
 * |[<!-- language="C" -->
 *     TDM_PLUGIN_INIT_FEATURE(ddp_init, TDM_FEATURE_STRATEGY, "ddp", 50, &ddp_class,
 *                             "data-parallel training", ddp_params, NULL)
 *     TDM_PLUGIN_DEFINE(ddp, "MIT", "...", "tandem", ddp_init)
 * ]|
 */
#define TDM_PLUGIN_INIT_FEATURE(fn, kind, name, priority, klass, description, params, probe)      \
    static gboolean fn(TdmPlugin *plugin, GError **error)                                          \
    {                                                                                              \
        return tdm_plugin_add_feature(plugin, kind, name, priority, klass, description, params,   \
                                      probe, error) != NULL;                                       \
    }

/**
 * tdm_plugin_get_name:
 * @plugin: a plugin
 *
 * A plugin's name.
 *
 * Returns: (transfer none): the plugin's name ("core" for the built-in one)
 */
TDM_API const char *tdm_plugin_get_name(const TdmPlugin *plugin);
/**
 * tdm_plugin_get_filename:
 * @plugin: a plugin
 *
 * The file a plugin was loaded from.
 *
 * Returns: (transfer none) (nullable): the absolute path it was loaded from;
 * NULL for the built-in plugin
 */
TDM_API const char *tdm_plugin_get_filename(const TdmPlugin *plugin); /* NULL for built-in */
/**
 * tdm_plugin_get_desc:
 * @plugin: a plugin
 *
 * A plugin's descriptor.
 *
 * Returns: (transfer none): its descriptor (the plugin's static storage)
 */
TDM_API const TdmPluginDesc *tdm_plugin_get_desc(const TdmPlugin *plugin);

/**
 * tdm_feature_get_name:
 * @feature: a feature
 *
 * A feature's name.
 *
 * Returns: (transfer none): its name
 */
TDM_API const char *tdm_feature_get_name(const TdmFeature *feature);
/**
 * tdm_feature_get_kind:
 * @feature: a feature
 *
 * A feature's kind.
 *
 * Returns: its kind
 */
TDM_API TdmFeatureKind tdm_feature_get_kind(const TdmFeature *feature);
/**
 * tdm_feature_get_priority:
 * @feature: a feature
 *
 * A feature's priority.
 *
 * Returns: its priority after overrides (TDM_PLUGIN_PRIORITY,
 * tdm_registry_set_priority())
 */
TDM_API int tdm_feature_get_priority(const TdmFeature *feature); /* after overrides */
/**
 * tdm_feature_get_class:
 * @feature: a feature
 *
 * A feature's class struct.
 *
 * Returns: (transfer none): its class struct, as registered; cast it to
 * the struct of its kind
 */
TDM_API gconstpointer tdm_feature_get_class(const TdmFeature *feature);
/**
 * tdm_feature_get_plugin:
 * @feature: a feature
 *
 * The plugin a feature comes from.
 *
 * Returns: (transfer none): the plugin that registered it
 */
TDM_API TdmPlugin *tdm_feature_get_plugin(const TdmFeature *feature);
/**
 * tdm_feature_get_description:
 * @feature: a feature
 *
 * A feature's description.
 *
 * Returns: (transfer none): its one-line description
 */
TDM_API const char *tdm_feature_get_description(const TdmFeature *feature);
/**
 * tdm_feature_get_params:
 * @feature: a feature
 *
 * The parameters a feature accepts.
 *
 * Returns: (transfer none) (nullable): NULL, or the parameter specs in the
 * current layout, ending with a NULL name
 */
TDM_API const TdmParamSpec *tdm_feature_get_params(const TdmFeature *feature);
/**
 * tdm_feature_is_available:
 * @feature: a feature
 * @reason: (out) (transfer none) (optional): where to put why it is not
 *
 * Runs the feature's probe once per process and keeps the answer.
 *
 * Returns: TRUE when the feature can work here; on FALSE, *@reason (if
 * @reason is not NULL) is the explanation
 */
TDM_API gboolean tdm_feature_is_available(TdmFeature *feature, const char **reason);

/* ---- Registry (process-wide, thread-safe) ----------------------------- */

/**
 * tdm_registry_init:
 * @error: return location for a #GError, or NULL
 *
 * Loads the built-in core plugin and scans the plugin path once:
 * TDM_PLUGIN_PATH (colon separated), then TDM_PLUGIN_SYSTEM_PATH if set
 * (it replaces the default), else tdm_registry_default_plugin_dir(). The first
 * file of a given basename wins. Idempotent. A plugin that fails is recorded,
 * never fatal (tdm_registry_list_failures()). Every lookup calls it.
 *
 * Returns: TRUE; FALSE with @error set only on a programming error
 */
TDM_API gboolean tdm_registry_init(GError **error);

/**
 * tdm_registry_load_file:
 * @filename: a plugin file, libtdm-<name>.so
 * @error: return location for a #GError, or NULL
 *
 * Loads one plugin file explicitly (`--plugin FILE`); unlike the scan of
 * the plugin path, a failure is an error, naming the file and the reason.
 *
 * Returns: (transfer none): the plugin, or NULL with @error set
 * (%TDM_ERROR_PLUGIN)
 */
TDM_API TdmPlugin *tdm_registry_load_file(const char *filename, GError **error);

/**
 * tdm_registry_list_plugins:
 *
 * The loaded plugins.
 *
 * Returns: (transfer container) (element-type TdmPlugin): every loaded
 * plugin, in load order; free the array only
 */
TDM_API GPtrArray *tdm_registry_list_plugins(void);

/**
 * TdmPluginFailure:
 * @filename: the file's absolute path
 * @reason: why it failed to load
 *
 * A plugin file that failed to load.
 */
typedef struct {
    char *filename;
    char *reason;
} TdmPluginFailure;
/**
 * tdm_registry_list_failures:
 *
 * The plugin files that failed to load.
 *
 * Returns: (transfer none) (element-type TdmPluginFailure): the load
 * failures recorded so far
 */
TDM_API const GPtrArray *tdm_registry_list_failures(void);

/**
 * tdm_registry_list_features:
 * @kind: a kind, or %TDM_FEATURE_N_KINDS for every kind
 *
 * The features of a kind.
 *
 * Returns: (transfer container) (element-type TdmFeature): every feature of
 * @kind, highest priority first; free the array only
 */
TDM_API GPtrArray *tdm_registry_list_features(TdmFeatureKind kind);

/**
 * tdm_registry_find:
 * @kind: the kind
 * @name: the feature's name
 * @error: return location for a #GError, or NULL
 *
 * Looks a feature up by its exact name.
 *
 * Returns: (transfer none): the feature, or NULL with a %TDM_ERROR_NOT_FOUND
 * error listing the known names of that kind
 */
TDM_API TdmFeature *tdm_registry_find(TdmFeatureKind kind, const char *name, GError **error);

/**
 * TdmFeatureFilter:
 * @feature: a candidate
 * @user_data: what tdm_registry_select() was given
 *
 * A filter of tdm_registry_select()'s candidates.
 *
 * Returns: TRUE to keep @feature among the candidates
 */
typedef gboolean (*TdmFeatureFilter)(TdmFeature *feature, gpointer user_data);
/**
 * tdm_registry_select:
 * @kind: the kind
 * @spec: (nullable): NULL or "" (automatic: the highest priority available),
 *   a name ("cuda"), a comma list tried in order ("cuda,cpu"), or a negated
 *   list ("^gloo,ref": automatic among all but these)
 * @accept: (nullable): a further filter of the candidates; NULL: all
 * @user_data: passed to @accept
 * @error: return location for a #GError, or NULL
 *
 * Selects a feature as the command line's --device, --comm... do.
 *
 * Returns: (transfer none): the feature, or NULL with an error that says
 * why each candidate was rejected
 */
TDM_API TdmFeature *tdm_registry_select(TdmFeatureKind kind, const char *spec,
                                        TdmFeatureFilter accept, gpointer user_data,
                                        GError **error);

/**
 * tdm_registry_set_priority:
 * @feature_name: a feature's name (of any kind)
 * @priority: its new priority
 *
 * Overrides a priority, as TDM_PLUGIN_PRIORITY=name:prio,name:prio (read by
 * tdm_registry_init()) does.
 */
TDM_API void tdm_registry_set_priority(const char *feature_name, int priority);

/**
 * tdm_registry_default_plugin_dir:
 *
 * The directory scanned when TDM_PLUGIN_SYSTEM_PATH is unset: the installed
 * plugin directory (`pkg-config --variable=pluginsdir tandem-1`), or the
 * build's plugins/.libs when the library itself is run uninstalled from its
 * build tree.
 *
 * Returns: (transfer none): the directory
 */
TDM_API const char *tdm_registry_default_plugin_dir(void);

G_END_DECLS

#endif /* TANDEM_PLUGIN_H */

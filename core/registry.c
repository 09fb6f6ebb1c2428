/* SPDX-License-Identifier: MIT */
/* core/registry.c - the plugin registry: loading plugins, their features
 * and lookup by name (priority overrides and selection are in
 * core/select.c, the shared state in core/registry-private.h).
 *
 * The registry is one process-wide table guarded by a recursive mutex (a
 * plugin's init runs with the lock held and calls back into
 * tdm_plugin_add_feature, and may look features up). The built-in "core"
 * plugin is registered first; then explicit files (tdm_registry_load_file),
 * then every libtdm-*.so found in TDM_PLUGIN_PATH and in
 * TDM_PLUGIN_SYSTEM_PATH (or the installed plugin directory; a library run
 * from its build tree uses the build's plugins instead). The first file
 * of a basename claims it, whether it loads or not, so what runs never
 * depends on which copy happens to work. Each feature's class is checked
 * once, as it is registered, against its kind's contract
 * (core/class-check.c); a refused class fails its whole plugin. A plugin
 * that fails is recorded with its reason and closed; the features its init
 * registered are rolled back so nothing points into an unloaded object.
 * Priority overrides are kept apart from the registered values and applied
 * on every read, so tdm_registry_set_priority() takes effect immediately.
 */
#define _GNU_SOURCE /* dladdr */
#include "config.h"

#include <dlfcn.h>
#include <string.h>

#include <gmodule.h>

#include "internal.h"
#include "params-private.h"
#include "registry-private.h"

TdmRegistry registry;

#define PLUGIN_PREFIX "libtdm-"
#define PLUGIN_SUFFIX ".so"

static const TdmPluginDesc core_desc = {
    TDM_PLUGIN_ABI_VERSION,
    sizeof(TdmPluginDesc),
    "core",
    TDM_VERSION,
    "MIT",
    "Built-in modules (layers, containers) and optimizers",
    "tandem",
    tdm_builtin_init,
    {0},
};

const char *const registry_kind_names[TDM_FEATURE_N_KINDS] = {
    "backend", "collective", "strategy", "transform", "dataset", "module", "optimizer",
};

const char *tdm_feature_kind_name(TdmFeatureKind kind)
{
    if ((unsigned)kind < TDM_FEATURE_N_KINDS) {
        return registry_kind_names[kind];
    }
    return "unknown";
}

int tdm_feature_kind_from_name(const char *name)
{
    if (name == NULL) {
        return -1;
    }
    for (int i = 0; i < TDM_FEATURE_N_KINDS; i++) {
        if (g_ascii_strcasecmp(name, registry_kind_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/* ---- bookkeeping ------------------------------------------------------- */

static void failure_free(gpointer data)
{
    TdmPluginFailure *f = data;
    g_free(f->filename);
    g_free(f->reason);
    g_free(f);
}

static void feature_free(TdmFeature *f)
{
    g_free(f->name);
    g_free(f->description);
    g_free(f->params);
    g_free(f->unavailable_reason);
    g_free(f);
}

static void plugin_free(TdmPlugin *p)
{
    g_free(p->refused);
    g_free(p->name);
    g_free(p->filename);
    g_free(p);
}

void registry_ensure_tables_locked(void)
{
    if (registry.plugins != NULL) {
        return;
    }
    registry.plugins = g_ptr_array_new();
    registry.features = g_ptr_array_new();
    registry.failures = g_ptr_array_new_with_free_func(failure_free);
    registry.basenames = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    registry.priorities = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static void record_failure_locked(const char *filename, const char *reason)
{
    TdmPluginFailure *f = g_new0(TdmPluginFailure, 1);
    f->filename = g_strdup(filename);
    f->reason = g_strdup(reason);
    g_ptr_array_add(registry.failures, f);
    g_debug("plugin %s failed: %s", filename, reason);
}

TdmFeature *registry_find_locked(TdmFeatureKind kind, const char *name)
{
    for (guint i = 0; i < registry.features->len; i++) {
        TdmFeature *f = g_ptr_array_index(registry.features, i);
        if (f->kind == kind && strcmp(f->name, name) == 0) {
            return f;
        }
    }
    return NULL;
}

/* ---- features ---------------------------------------------------------- */

static gboolean feature_name_is_valid(const char *name)
{
    if (name[0] == '\0') {
        return FALSE;
    }
    /* Selection specs use ',', '^', ':' and '/' as separators. */
    for (const char *c = name; *c; c++) {
        if (!g_ascii_isalnum(*c) && *c != '-' && *c != '_' && *c != '.') {
            return FALSE;
        }
    }
    return TRUE;
}

TdmFeature *tdm_plugin_add_feature(TdmPlugin *plugin, TdmFeatureKind kind, const char *name,
                                   int priority, gconstpointer klass, const char *description,
                                   const TdmParamSpec *params, TdmFeatureProbe probe,
                                   GError **error)
{
    g_return_val_if_fail(plugin != NULL, NULL);
    g_return_val_if_fail((unsigned)kind < TDM_FEATURE_N_KINDS, NULL);
    g_return_val_if_fail(name != NULL, NULL);
    g_return_val_if_fail(klass != NULL, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);

    TdmFeature *f = NULL;
    g_rec_mutex_lock(&registry.lock);
    registry_ensure_tables_locked();
    if (!plugin->in_init) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "plugin '%s': feature '%s' added outside the plugin's init", plugin->name,
                    name);
        goto out;
    }
    if (!feature_name_is_valid(name)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "plugin '%s': invalid %s name '%s' (letters, digits, '-', '_', '.')",
                    plugin->name, registry_kind_names[kind], name);
        goto out;
    }
    if (priority > PRIORITY_MAX) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "feature '%s' (%s): priority %d out of range (0..100, negative = never "
                    "automatic)",
                    name, registry_kind_names[kind], priority);
        goto out;
    }
    GError *refusal = NULL;
    if (!registry_check_class(kind, name, klass, &refusal)) {
        /* Recorded as well as returned: the plugin must fail to load even
         * if its init carries on past the error. */
        if (plugin->refused == NULL) {
            plugin->refused = g_strdup(refusal->message);
        }
        g_propagate_error(error, refusal);
        goto out;
    }
    TdmFeature *other = registry_find_locked(kind, name);
    if (other != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "feature '%s' (%s) already registered by plugin '%s'", name, registry_kind_names[kind],
                    other->plugin->name);
        goto out;
    }
    /* The registry keeps the specs in the current layout, checked once; a
     * spec that makes no sense refuses the plugin like a bad class. */
    TdmParamSpec *param_copy = NULL;
    if (params != NULL &&
        (param_copy = tdm_param_specs_copy(name, params, NULL, &refusal)) == NULL) {
        if (plugin->refused == NULL) {
            plugin->refused = g_strdup(refusal->message);
        }
        g_propagate_error(error, refusal);
        goto out;
    }
    f = g_new0(TdmFeature, 1);
    f->kind = kind;
    f->name = g_strdup(name);
    f->priority = priority < 0 ? TDM_PRIORITY_NEVER : priority;
    f->klass = klass;
    f->description = g_strdup(description != NULL ? description : "");
    f->params = param_copy;
    f->probe = probe;
    f->plugin = plugin;
    f->seq = registry.next_seq++;
    g_ptr_array_add(registry.features, f);
out:
    g_rec_mutex_unlock(&registry.lock);
    return f;
}

const char *tdm_plugin_get_name(const TdmPlugin *plugin)
{
    g_return_val_if_fail(plugin != NULL, NULL);
    return plugin->name;
}

const char *tdm_plugin_get_filename(const TdmPlugin *plugin)
{
    g_return_val_if_fail(plugin != NULL, NULL);
    return plugin->filename;
}

const TdmPluginDesc *tdm_plugin_get_desc(const TdmPlugin *plugin)
{
    g_return_val_if_fail(plugin != NULL, NULL);
    return plugin->desc;
}

const char *tdm_feature_get_name(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, NULL);
    return feature->name;
}

TdmFeatureKind tdm_feature_get_kind(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, TDM_FEATURE_N_KINDS);
    return feature->kind;
}

int tdm_feature_get_priority(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, TDM_PRIORITY_NEVER);
    g_rec_mutex_lock(&registry.lock);
    int prio = registry_effective_priority_locked(feature);
    g_rec_mutex_unlock(&registry.lock);
    return prio;
}

gconstpointer tdm_feature_get_class(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, NULL);
    return feature->klass;
}

TdmPlugin *tdm_feature_get_plugin(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, NULL);
    return feature->plugin;
}

const char *tdm_feature_get_description(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, NULL);
    return feature->description;
}

const TdmParamSpec *tdm_feature_get_params(const TdmFeature *feature)
{
    g_return_val_if_fail(feature != NULL, NULL);
    return feature->params;
}

gboolean registry_is_available_locked(TdmFeature *f, const char **reason)
{
    if (!f->probed) {
        f->probed = TRUE;
        f->available = TRUE;
        if (f->probe != NULL) {
            char *why = NULL;
            f->available = f->probe(f->klass, &why);
            if (!f->available) {
                f->unavailable_reason =
                    why != NULL ? why : g_strdup("probe failed (no reason given)");
            } else {
                g_free(why);
            }
        }
    }
    if (!f->available && reason != NULL) {
        *reason = f->unavailable_reason;
    }
    return f->available;
}

gboolean tdm_feature_is_available(TdmFeature *feature, const char **reason)
{
    g_return_val_if_fail(feature != NULL, FALSE);
    g_rec_mutex_lock(&registry.lock);
    gboolean ok = registry_is_available_locked(feature, reason);
    g_rec_mutex_unlock(&registry.lock);
    return ok;
}

/* ---- loading ----------------------------------------------------------- */

/* Runs the plugin's init; on failure, or when one of its classes was
 * refused, removes every feature it registered. A refusal is the reason
 * as it stands ("backend 'x': required slot 'gemm' is NULL"), whatever
 * init made of it. */
static gboolean plugin_run_init_locked(TdmPlugin *plugin, GError **error)
{
    GError *local = NULL;
    plugin->in_init = TRUE;
    gboolean ok = plugin->desc->init != NULL ? plugin->desc->init(plugin, &local) : TRUE;
    plugin->in_init = FALSE;
    if (ok && plugin->refused == NULL) {
        g_clear_error(&local);
        return TRUE;
    }
    for (guint i = registry.features->len; i > 0; i--) {
        TdmFeature *f = g_ptr_array_index(registry.features, i - 1);
        if (f->plugin == plugin) {
            g_ptr_array_remove_index(registry.features, i - 1);
            feature_free(f);
        }
    }
    if (plugin->refused != NULL) {
        g_set_error_literal(error, TDM_ERROR, TDM_ERROR_PLUGIN, plugin->refused);
    } else {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN, "init failed: %s",
                    local != NULL ? local->message : "(no reason given)");
    }
    g_clear_error(&local);
    return FALSE;
}

static void load_core_locked(void)
{
    if (registry.core_loaded) {
        return;
    }
    registry.core_loaded = TRUE;
    TdmPlugin *plugin = g_new0(TdmPlugin, 1);
    plugin->name = g_strdup(core_desc.name);
    plugin->desc = &core_desc;
    GError *error = NULL;
    if (plugin_run_init_locked(plugin, &error)) {
        g_ptr_array_add(registry.plugins, plugin);
    } else {
        record_failure_locked("core (built-in)", error->message);
        g_error_free(error);
        plugin_free(plugin);
    }
}

/* "libtdm-foo-bar.so" -> "foo-bar", or NULL if the name does not fit. */
static char *plugin_stem(const char *basename)
{
    size_t len = strlen(basename);
    size_t pre = strlen(PLUGIN_PREFIX), suf = strlen(PLUGIN_SUFFIX);
    if (len <= pre + suf || !g_str_has_prefix(basename, PLUGIN_PREFIX) ||
        !g_str_has_suffix(basename, PLUGIN_SUFFIX)) {
        return NULL;
    }
    return g_strndup(basename + pre, len - pre - suf);
}

/* Whether a descriptor's name is the file stem, where TDM_PLUGIN_DEFINE's
 * identifier writes each '-' of the stem as '_'. */
static gboolean plugin_name_matches(const char *name, const char *stem)
{
    for (; *name != '\0' && *stem != '\0'; name++, stem++) {
        if (*name != *stem && !(*name == '_' && *stem == '-')) {
            return FALSE;
        }
    }
    return *name == *stem;
}

typedef const TdmPluginDesc *(*TdmGetDescFunc)(void);

/* Opens and checks one file; returns the descriptor with *module set, or
 * NULL with a reason (transfer full). */
static const TdmPluginDesc *open_plugin_file(const char *path, const char *basename,
                                             const char *stem, GModule **module, char **reason)
{
    GModule *mod = g_module_open(path, G_MODULE_BIND_LOCAL);
    if (mod == NULL) {
        *reason = g_strdup_printf("cannot open: %s", g_module_error());
        return NULL;
    }
    char *ident = g_strdelimit(g_strdup(stem), "-", '_');
    char *symbol = g_strdup_printf("tdm_plugin_%s_get_desc", ident);
    gpointer sym = NULL;
    const TdmPluginDesc *desc = NULL;
    if (!g_module_symbol(mod, symbol, &sym) || sym == NULL) {
        *reason = g_strdup_printf("missing symbol %s", symbol);
    } else if ((desc = ((TdmGetDescFunc)sym)()) == NULL) {
        *reason = g_strdup_printf("%s returned NULL", symbol);
    } else if (desc->abi_version != TDM_PLUGIN_ABI_VERSION) {
        *reason = g_strdup_printf("ABI version %u, expected %d", desc->abi_version,
                                  TDM_PLUGIN_ABI_VERSION);
    } else if (desc->struct_size != sizeof(TdmPluginDesc)) {
        *reason = g_strdup_printf("descriptor size %u, expected %zu", desc->struct_size,
                                  sizeof(TdmPluginDesc));
    } else if (desc->name == NULL || !plugin_name_matches(desc->name, stem)) {
        *reason = g_strdup_printf("name '%s' does not match file name '%s'",
                                  desc->name != NULL ? desc->name : "(null)", basename);
    } else if (desc->license == NULL || desc->license[0] == '\0') {
        *reason = g_strdup("no licence: an SPDX identifier is required");
    }
    g_free(symbol);
    g_free(ident);
    if (*reason != NULL) {
        g_module_close(mod);
        return NULL;
    }
    *module = mod;
    return desc;
}

static TdmPlugin *find_plugin_by_file_locked(const char *path)
{
    for (guint i = 0; i < registry.plugins->len; i++) {
        TdmPlugin *p = g_ptr_array_index(registry.plugins, i);
        if (p->filename != NULL && strcmp(p->filename, path) == 0) {
            return p;
        }
    }
    return NULL;
}

/* The recorded reason why `path` failed, or NULL (transfer none). */
static const char *find_failure_locked(const char *path)
{
    for (guint i = registry.failures->len; i > 0; i--) {
        const TdmPluginFailure *f = g_ptr_array_index(registry.failures, i - 1);
        if (strcmp(f->filename, path) == 0) {
            return f->reason;
        }
    }
    return NULL;
}

/* Loads one file. `explicit` files (--plugin) report a clash of basenames
 * as an error; scanned ones are skipped silently. */
static TdmPlugin *load_file_locked(const char *filename, gboolean explicit, GError **error)
{
    char *path = g_canonicalize_filename(filename, NULL);
    char *basename = g_path_get_basename(path);
    char *stem = plugin_stem(basename);
    char *reason = NULL;
    TdmPlugin *plugin = NULL;

    if (stem == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "%s: not a plugin file name (expected libtdm-<name>.so)", path);
        goto out;
    }
    const char *claimed = g_hash_table_lookup(registry.basenames, basename);
    if (claimed != NULL) {
        plugin = find_plugin_by_file_locked(path);
        const char *failed = find_failure_locked(path);
        if (plugin == NULL && explicit && strcmp(claimed, path) == 0 && failed != NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN, "%s: %s", path, failed);
        } else if (plugin == NULL && explicit) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                        "%s: a plugin file of the same name was loaded first: %s", path, claimed);
        } else if (plugin == NULL) {
            g_debug("plugin %s shadowed by %s", path, claimed);
        }
        goto out;
    }
    g_hash_table_insert(registry.basenames, g_strdup(basename), g_strdup(path));

    GModule *module = NULL;
    const TdmPluginDesc *desc = open_plugin_file(path, basename, stem, &module, &reason);
    if (desc != NULL) {
        plugin = g_new0(TdmPlugin, 1);
        plugin->name = g_strdup(stem); /* desc->name may have '_' for '-' */
        plugin->filename = g_strdup(path);
        plugin->module = module;
        plugin->desc = desc;
        GError *init_error = NULL;
        if (plugin_run_init_locked(plugin, &init_error)) {
            /* Feature classes live in the module: it must never go away. */
            g_module_make_resident(module);
            g_ptr_array_add(registry.plugins, plugin);
        } else {
            reason = g_strdup(init_error->message);
            g_error_free(init_error);
            plugin_free(plugin);
            plugin = NULL;
            g_module_close(module);
        }
    }
    if (reason != NULL) {
        record_failure_locked(path, reason);
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN, "%s: %s", path, reason);
    }
out:
    g_free(reason);
    g_free(stem);
    g_free(basename);
    g_free(path);
    return plugin;
}

TdmPlugin *tdm_registry_load_file(const char *filename, GError **error)
{
    g_return_val_if_fail(filename != NULL, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    g_rec_mutex_lock(&registry.lock);
    registry_ensure_tables_locked();
    load_core_locked();
    TdmPlugin *plugin = load_file_locked(filename, TRUE, error);
    g_rec_mutex_unlock(&registry.lock);
    return plugin;
}

static int compare_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A path entry may be a directory (every libtdm-*.so in it, sorted so the
 * load order does not depend on the file system) or a plugin file. */
static void scan_entry_locked(const char *entry)
{
    if (g_file_test(entry, G_FILE_TEST_IS_REGULAR)) {
        load_file_locked(entry, FALSE, NULL);
        return;
    }
    GDir *dir = g_dir_open(entry, 0, NULL);
    if (dir == NULL) {
        return; /* a missing directory is normal (nothing installed there) */
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
        char *stem = plugin_stem(name);
        if (stem != NULL) {
            g_ptr_array_add(names, g_strdup(name));
        }
        g_free(stem);
    }
    g_dir_close(dir);
    g_ptr_array_sort(names, compare_strings);
    for (guint i = 0; i < names->len; i++) {
        char *path = g_build_filename(entry, g_ptr_array_index(names, i), NULL);
        load_file_locked(path, FALSE, NULL);
        g_free(path);
    }
    g_ptr_array_unref(names);
}

static void scan_path_list_locked(const char *list)
{
    char **entries = g_strsplit(list, G_SEARCHPATH_SEPARATOR_S, -1);
    for (char **e = entries; *e != NULL; e++) {
        if ((*e)[0] != '\0') {
            scan_entry_locked(*e);
        }
    }
    g_strfreev(entries);
}

gboolean tdm_registry_init(GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    g_rec_mutex_lock(&registry.lock);
    if (!registry.scanned) {
        /* Set first: a plugin's init may itself call into the registry. */
        registry.scanned = TRUE;
        registry_ensure_tables_locked();
        load_core_locked();
        registry_read_priority_env_locked();
        const char *user_path = g_getenv("TDM_PLUGIN_PATH");
        if (user_path != NULL) {
            scan_path_list_locked(user_path);
        }
        const char *system_path = g_getenv("TDM_PLUGIN_SYSTEM_PATH");
        scan_path_list_locked(system_path != NULL ? system_path
                                                  : tdm_registry_default_plugin_dir());
    }
    g_rec_mutex_unlock(&registry.lock);
    return TRUE;
}

void registry_ensure_init(void)
{
    tdm_registry_init(NULL);
}

GPtrArray *tdm_registry_list_plugins(void)
{
    registry_ensure_init();
    g_rec_mutex_lock(&registry.lock);
    GPtrArray *out = g_ptr_array_sized_new(registry.plugins->len);
    for (guint i = 0; i < registry.plugins->len; i++) {
        g_ptr_array_add(out, g_ptr_array_index(registry.plugins, i));
    }
    g_rec_mutex_unlock(&registry.lock);
    return out;
}

const GPtrArray *tdm_registry_list_failures(void)
{
    registry_ensure_init();
    return registry.failures;
}

GPtrArray *tdm_registry_list_features(TdmFeatureKind kind)
{
    g_return_val_if_fail((unsigned)kind <= TDM_FEATURE_N_KINDS, NULL);
    registry_ensure_init();
    g_rec_mutex_lock(&registry.lock);
    GPtrArray *out = registry_list_features_locked(kind);
    g_rec_mutex_unlock(&registry.lock);
    return out;
}

/* "a, b, c": the names of KIND, sorted (transfer full). */
char *registry_known_names_locked(TdmFeatureKind kind)
{
    GPtrArray *names = g_ptr_array_new();
    for (guint i = 0; i < registry.features->len; i++) {
        TdmFeature *f = g_ptr_array_index(registry.features, i);
        if (f->kind == kind) {
            g_ptr_array_add(names, f->name);
        }
    }
    g_ptr_array_sort(names, compare_strings);
    g_ptr_array_add(names, NULL);
    char *joined = names->len > 1 ? g_strjoinv(", ", (char **)names->pdata) : g_strdup("none");
    g_ptr_array_unref(names);
    return joined;
}

void registry_set_not_found_locked(TdmFeatureKind kind, const char *name, GError **error)
{
    char *known = registry_known_names_locked(kind);
    g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND, "no %s named '%s' (known: %s)",
                registry_kind_names[kind], name, known);
    g_free(known);
}

TdmFeature *tdm_registry_find(TdmFeatureKind kind, const char *name, GError **error)
{
    g_return_val_if_fail((unsigned)kind < TDM_FEATURE_N_KINDS, NULL);
    g_return_val_if_fail(name != NULL, NULL);
    registry_ensure_init();
    g_rec_mutex_lock(&registry.lock);
    TdmFeature *f = registry_find_locked(kind, name);
    if (f == NULL) {
        registry_set_not_found_locked(kind, name, error);
    }
    g_rec_mutex_unlock(&registry.lock);
    return f;
}

/* An uninstalled library (loaded from TDM_BUILD_DIR/core/.libs, as
 * `build/tools/tandem` does) uses the plugins built beside it, so that a
 * fresh build runs without `make install`; an installed one uses
 * TDM_PLUGINS_DIR. */
const char *tdm_registry_default_plugin_dir(void)
{
    static const char *dir;
    if (g_once_init_enter(&dir)) {
        const char *found = TDM_PLUGINS_DIR;
        Dl_info info;
        if (dladdr((void *)tdm_registry_default_plugin_dir, &info) != 0 &&
            info.dli_fname != NULL &&
            g_str_has_prefix(info.dli_fname, TDM_BUILD_DIR "/core/.libs/")) {
            found = TDM_BUILD_DIR "/plugins/.libs";
        }
        g_once_init_leave(&dir, found);
    }
    return dir;
}

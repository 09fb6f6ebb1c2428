/* SPDX-License-Identifier: MIT */
/* tools/cmd-inspect.c - `tandem inspect`: what the registry holds.
 *
 * Without an argument it lists every plugin with its features, then every
 * file that failed to load and why, then the model zoo's names; with a NAME
 * it shows one feature (its parameters included), every feature of that
 * name when several kinds share it, the plugin of that name, or the load
 * failure of that plugin. Each
 * parameter line gives its type and accepted range, its default (or
 * "required"), whether it may be given without "key=", and its aliases. The
 * layout is "key: value" lines indented under a header, one feature or
 * failure per line, so it reads well and scripts (and tests) can grep it.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <tandem/tandem.h>

#include "commands.h"

static void print_inspect_usage(FILE *out)
{
    fprintf(out, "Usage: tandem inspect [NAME | devices]\n"
                 "\n"
                 "Without NAME, list every plugin, its features, every plugin that failed\n"
                 "to load and the models of the built-in zoo (--model). NAME is a feature\n"
                 "(\"conv2d\", or \"kind/name\" such as \"backend/ref\") or a plugin (\"ref\",\n"
                 "or \"plugin/ref\").\n"
                 "\"devices\" lists every device of every available backend: name, kind,\n"
                 "memory, capability and allocator figures.\n");
}

static void print_feature_line(TdmFeature *f)
{
    const char *reason = NULL;
    gboolean ok = tdm_feature_is_available(f, &reason);
    printf("    %-10s %-22s priority %3d  %s%s\n", tdm_feature_kind_name(tdm_feature_get_kind(f)),
           tdm_feature_get_name(f), tdm_feature_get_priority(f),
           ok ? "available" : "unavailable: ", ok ? "" : (reason != NULL ? reason : "?"));
}

static void print_plugin(TdmPlugin *plugin)
{
    const TdmPluginDesc *desc = tdm_plugin_get_desc(plugin);
    const char *file = tdm_plugin_get_filename(plugin);
    printf("Plugin: %s\n", tdm_plugin_get_name(plugin));
    printf("  file:        %s\n", file != NULL ? file : "(built-in)");
    printf("  version:     %s\n", desc->version != NULL ? desc->version : "?");
    printf("  licence:     %s\n", desc->license);
    printf("  description: %s\n", desc->description != NULL ? desc->description : "");
    if (desc->origin != NULL && desc->origin[0] != '\0') {
        printf("  origin:      %s\n", desc->origin);
    }
    /* Grouped by kind, highest priority first within a kind. */
    GPtrArray *all = tdm_registry_list_features(TDM_FEATURE_N_KINDS);
    guint shown = 0;
    for (int kind = 0; kind < TDM_FEATURE_N_KINDS; kind++) {
        for (guint i = 0; i < all->len; i++) {
            TdmFeature *f = g_ptr_array_index(all, i);
            if (tdm_feature_get_plugin(f) == plugin && (int)tdm_feature_get_kind(f) == kind) {
                if (shown++ == 0) {
                    printf("  features:\n");
                }
                print_feature_line(f);
            }
        }
    }
    if (shown == 0) {
        printf("  features:    none\n");
    }
    g_ptr_array_unref(all);
}

/* "name (type and range, default D, positional; alias a): description" */
static void print_param(const TdmParamSpec *p)
{
    g_autofree char *what = tdm_param_spec_describe(p);
    printf("    %s (%s, ", p->name, what);
    if (p->default_value != NULL) {
        printf("default %s", p->default_value);
    } else {
        printf((p->flags & TDM_PARAM_REQUIRED) ? "required" : "optional");
    }
    if (p->flags & TDM_PARAM_POSITIONAL) {
        printf(", positional");
    }
    if (p->aliases != NULL) {
        g_autofree char *aliases = g_strdelimit(g_strdup(p->aliases), "|", ',');
        printf("; alias %s", aliases);
    }
    printf(")%s%s\n", p->description != NULL ? ": " : "",
           p->description != NULL ? p->description : "");
}

/* Whether `specs` has a parameter `name`. */
static gboolean declares(const TdmParamSpec *specs, const char *name)
{
    for (const TdmParamSpec *p = specs; p != NULL && p->name != NULL; p++) {
        if (strcmp(p->name, name) == 0) {
            return TRUE;
        }
    }
    return FALSE;
}

static void print_feature(TdmFeature *f)
{
    TdmPlugin *plugin = tdm_feature_get_plugin(f);
    const char *file = tdm_plugin_get_filename(plugin);
    const char *reason = NULL;
    gboolean ok = tdm_feature_is_available(f, &reason);
    const char *kind = tdm_feature_kind_name(tdm_feature_get_kind(f));
    int priority = tdm_feature_get_priority(f);

    printf("Feature: %s/%s\n", kind, tdm_feature_get_name(f));
    printf("  plugin:      %s (%s)\n", tdm_plugin_get_name(plugin),
           file != NULL ? file : "built-in");
    printf("  kind:        %s\n", kind);
    printf("  priority:    %d%s\n", priority, priority < 0 ? " (never picked automatically)" : "");
    printf("  status:      %s%s\n",
           ok ? "available" : "unavailable: ", ok ? "" : (reason != NULL ? reason : "?"));
    printf("  description: %s\n", tdm_feature_get_description(f));
    const TdmParamSpec *params = tdm_feature_get_params(f);
    /* Every dataset reader takes the common ones (path) before its own. */
    const TdmParamSpec *common = tdm_feature_get_kind(f) == TDM_FEATURE_DATASET
                                     ? tdm_dataset_common_params()
                                     : NULL;
    if ((params == NULL || params[0].name == NULL) && common == NULL) {
        printf("  parameters:  none\n");
        return;
    }
    printf("  parameters:\n");
    for (const TdmParamSpec *p = common; p != NULL && p->name != NULL; p++) {
        if (!declares(params, p->name)) {
            print_param(p);
        }
    }
    for (const TdmParamSpec *p = params; p != NULL && p->name != NULL; p++) {
        print_param(p);
    }
}

static void print_failure(const TdmPluginFailure *failure)
{
    printf("  %s: %s\n", failure->filename, failure->reason);
}

static int inspect_all(void)
{
    GPtrArray *plugins = tdm_registry_list_plugins();
    const GPtrArray *failures = tdm_registry_list_failures();
    GPtrArray *features = tdm_registry_list_features(TDM_FEATURE_N_KINDS);
    for (guint i = 0; i < plugins->len; i++) {
        print_plugin(g_ptr_array_index(plugins, i));
        printf("\n");
    }
    if (failures->len == 0) {
        printf("Load failures: none\n");
    } else {
        printf("Load failures:\n");
        for (guint i = 0; i < failures->len; i++) {
            print_failure(g_ptr_array_index(failures, i));
        }
    }
    /* The zoo is built into the core, not a feature: listed on its own. */
    printf("\nModels (--model):\n");
    for (const char *const *m = tdm_model_zoo_names(); *m != NULL; m++) {
        printf("  %s\n", *m);
    }
    printf("\n%u plugins, %u features, %u load failures\n", plugins->len, features->len,
           failures->len);
    g_ptr_array_unref(features);
    g_ptr_array_unref(plugins);
    return 0;
}

static TdmPlugin *find_plugin(const char *name)
{
    GPtrArray *plugins = tdm_registry_list_plugins();
    TdmPlugin *found = NULL;
    for (guint i = 0; i < plugins->len && found == NULL; i++) {
        TdmPlugin *p = g_ptr_array_index(plugins, i);
        if (strcmp(tdm_plugin_get_name(p), name) == 0) {
            found = p;
        }
    }
    g_ptr_array_unref(plugins);
    return found;
}

/* Failures of files named libtdm-NAME.so; returns how many were printed. */
static guint print_failures_of(const char *name)
{
    const GPtrArray *failures = tdm_registry_list_failures();
    char *basename = g_strdup_printf("libtdm-%s.so", name);
    guint n = 0;
    for (guint i = 0; i < failures->len; i++) {
        const TdmPluginFailure *failure = g_ptr_array_index(failures, i);
        char *base = g_path_get_basename(failure->filename);
        if (strcmp(base, basename) == 0) {
            if (n++ == 0) {
                printf("Plugin: %s (failed to load)\n", name);
            }
            print_failure(failure);
        }
        g_free(base);
    }
    g_free(basename);
    return n;
}

static int inspect_qualified(const char *arg)
{
    const char *slash = strchr(arg, '/');
    char *kind_name = g_strndup(arg, (gsize)(slash - arg));
    const char *name = slash + 1;
    int status = 0;
    if (strcmp(kind_name, "plugin") == 0) {
        TdmPlugin *plugin = find_plugin(name);
        if (plugin != NULL) {
            print_plugin(plugin);
        } else if (print_failures_of(name) == 0) {
            fprintf(stderr, "tandem inspect: no plugin named '%s'\n", name);
            status = 1;
        }
        g_free(kind_name);
        return status;
    }
    int kind = tdm_feature_kind_from_name(kind_name);
    if (kind < 0) {
        fprintf(stderr, "tandem inspect: unknown kind '%s' in '%s' (kinds:", kind_name, arg);
        for (int k = 0; k < TDM_FEATURE_N_KINDS; k++) {
            fprintf(stderr, " %s", tdm_feature_kind_name(k));
        }
        fprintf(stderr, ", plugin)\n");
        g_free(kind_name);
        return 1;
    }
    GError *error = NULL;
    TdmFeature *f = tdm_registry_find(kind, name, &error);
    if (f != NULL) {
        print_feature(f);
    } else {
        fprintf(stderr, "tandem inspect: %s\n", error->message);
        g_error_free(error);
        status = 1;
    }
    g_free(kind_name);
    return status;
}

static int inspect_name(const char *name)
{
    if (strchr(name, '/') != NULL) {
        return inspect_qualified(name);
    }
    guint shown = 0;
    for (int kind = 0; kind < TDM_FEATURE_N_KINDS; kind++) {
        TdmFeature *f = tdm_registry_find(kind, name, NULL);
        if (f != NULL) {
            if (shown++ > 0) {
                printf("\n");
            }
            print_feature(f);
        }
    }
    TdmPlugin *plugin = find_plugin(name);
    if (plugin != NULL) {
        if (shown++ > 0) {
            printf("\n");
        }
        print_plugin(plugin);
    } else if (shown == 0) {
        shown = print_failures_of(name);
    }
    if (shown == 0) {
        fprintf(stderr,
                "tandem inspect: no plugin or feature named '%s' "
                "(run 'tandem inspect' for the list)\n",
                name);
        return 1;
    }
    return 0;
}

int tdm_cmd_inspect(int argc, char **argv)
{
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_inspect_usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' || name != NULL) {
            fprintf(stderr, "tandem inspect: unexpected argument '%s'\n\n", argv[i]);
            print_inspect_usage(stderr);
            return 2;
        }
        name = argv[i];
    }
    if (!tdm_registry_init(NULL)) {
        return 1;
    }
    if (name != NULL && strcmp(name, "devices") == 0) {
        return tdm_inspect_devices();
    }
    return name != NULL ? inspect_name(name) : inspect_all();
}

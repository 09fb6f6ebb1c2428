/* SPDX-License-Identifier: MIT */
/* tests/test-registry.c - the plugin registry and devices, through the
 * public API.
 *
 * The fixture plugins (tests/fixtures/) sit on TDM_PLUGIN_SYSTEM_PATH and the
 * real plugins of the build tree on TDM_PLUGIN_PATH, so one scan meets a good
 * plugin, one plugin per way of failing (including each way a class is
 * refused at registration), and the ref backend. Assertions
 * only look at fixture names where the real plugins could change the
 * answer (their priorities are theirs to choose).
 */
#include <string.h>

#include <tandem/tandem.h>

static char *fixtures_dir;

static char *fixture_path(const char *stem)
{
    char *base = g_strdup_printf("libtdm-%s.so", stem);
    char *path = g_build_filename(fixtures_dir, base, NULL);
    g_free(base);
    return path;
}

static const TdmPluginFailure *find_failure(const char *stem)
{
    const GPtrArray *failures = tdm_registry_list_failures();
    char *base = g_strdup_printf("libtdm-%s.so", stem);
    const TdmPluginFailure *found = NULL;
    for (guint i = 0; i < failures->len; i++) {
        const TdmPluginFailure *f = g_ptr_array_index(failures, i);
        char *b = g_path_get_basename(f->filename);
        if (strcmp(b, base) == 0) {
            found = f;
        }
        g_free(b);
    }
    g_free(base);
    return found;
}

static TdmPlugin *find_plugin(const char *name)
{
    GPtrArray *plugins = tdm_registry_list_plugins();
    TdmPlugin *found = NULL;
    for (guint i = 0; i < plugins->len; i++) {
        TdmPlugin *p = g_ptr_array_index(plugins, i);
        if (strcmp(tdm_plugin_get_name(p), name) == 0) {
            found = p;
        }
    }
    g_ptr_array_unref(plugins);
    return found;
}

/* ---- first: several threads race to initialise the registry ---- */

static gpointer find_in_thread(gpointer data)
{
    return tdm_registry_find(TDM_FEATURE_DATASET, "fixture-data", NULL);
}

static void test_concurrent_init(void)
{
    GThread *threads[4];
    for (int i = 0; i < 4; i++) {
        threads[i] = g_thread_new("finder", find_in_thread, NULL);
    }
    gpointer first = g_thread_join(threads[0]);
    g_assert_nonnull(first);
    for (int i = 1; i < 4; i++) {
        g_assert_true(g_thread_join(threads[i]) == first);
    }
    /* One scan only: the good plugin is listed exactly once. */
    GPtrArray *plugins = tdm_registry_list_plugins();
    int n = 0;
    for (guint i = 0; i < plugins->len; i++) {
        n += strcmp(tdm_plugin_get_name(g_ptr_array_index(plugins, i)), "fixture-good") == 0;
    }
    g_ptr_array_unref(plugins);
    g_assert_cmpint(n, ==, 1);
    g_assert_true(tdm_registry_init(NULL));
}

static void test_kind_names(void)
{
    for (int k = 0; k < TDM_FEATURE_N_KINDS; k++) {
        g_assert_cmpint(tdm_feature_kind_from_name(tdm_feature_kind_name(k)), ==, k);
    }
    g_assert_cmpstr(tdm_feature_kind_name(TDM_FEATURE_BACKEND), ==, "backend");
    g_assert_cmpstr(tdm_feature_kind_name(TDM_FEATURE_OPTIMIZER), ==, "optimizer");
    g_assert_cmpint(tdm_feature_kind_from_name("nonsense"), ==, -1);
}

static void test_builtin(void)
{
    GPtrArray *plugins = tdm_registry_list_plugins();
    g_assert_cmpuint(plugins->len, >=, 2);
    TdmPlugin *core = g_ptr_array_index(plugins, 0);
    g_ptr_array_unref(plugins);
    g_assert_cmpstr(tdm_plugin_get_name(core), ==, "core");
    g_assert_null(tdm_plugin_get_filename(core));
    g_assert_cmpstr(tdm_plugin_get_desc(core)->version, ==, tdm_version());

    static const char *const modules[] = {
        "linear",    "conv2d",     "batchnorm2d",        "relu",
        "maxpool2d", "avgpool2d",  "adaptive-avgpool2d", "flatten",
        "dropout",   "sequential", "residual",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(modules); i++) {
        GError *error = NULL;
        TdmFeature *f = tdm_registry_find(TDM_FEATURE_MODULE, modules[i], &error);
        g_assert_no_error(error);
        g_assert_true(tdm_feature_get_plugin(f) == core);
        const TdmModuleClass *klass = tdm_feature_get_class(f);
        g_assert_cmpuint(klass->iface_version, ==, TDM_MODULE_IFACE_VERSION);
        g_assert_cmpuint(klass->struct_size, ==, sizeof(TdmModuleClass));
        g_assert_true(tdm_feature_is_available(f, NULL));
    }
    TdmFeature *sgd = tdm_registry_find(TDM_FEATURE_OPTIMIZER, "sgd", NULL);
    g_assert_nonnull(sgd);
    g_assert_true(tdm_feature_get_class(sgd) != NULL);
    g_assert_cmpstr(tdm_feature_get_params(sgd)[0].name, ==, "lr");
    g_assert_nonnull(tdm_registry_find(TDM_FEATURE_OPTIMIZER, "adamw", NULL));
}

static void test_good_plugin(void)
{
    GError *error = NULL;
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_DATASET, "fixture-data", &error);
    g_assert_no_error(error);
    TdmPlugin *plugin = tdm_feature_get_plugin(f);
    g_assert_cmpstr(tdm_plugin_get_name(plugin), ==, "fixture-good");
    g_assert_true(g_str_has_suffix(tdm_plugin_get_filename(plugin), "/libtdm-fixture-good.so"));
    g_assert_true(g_path_is_absolute(tdm_plugin_get_filename(plugin)));
    const TdmPluginDesc *desc = tdm_plugin_get_desc(plugin);
    g_assert_cmpstr(desc->version, ==, "1.2.3");
    g_assert_cmpstr(desc->license, ==, "MIT");

    g_assert_cmpint(tdm_feature_get_kind(f), ==, TDM_FEATURE_DATASET);
    g_assert_cmpstr(tdm_feature_get_name(f), ==, "fixture-data");
    g_assert_cmpint(tdm_feature_get_priority(f), ==, 50);
    g_assert_cmpstr(tdm_feature_get_description(f), ==, "in-memory fixture samples");
    const TdmParamSpec *params = tdm_feature_get_params(f);
    g_assert_cmpstr(params[0].name, ==, "path");
    g_assert_null(params[0].default_value);
    g_assert_cmpstr(params[1].name, ==, "repeat");
    g_assert_cmpstr(params[1].default_value, ==, "1");
    g_assert_null(params[2].name);
    g_assert_true(tdm_feature_is_available(f, NULL));

    /* The class is the plugin's, callable after loading. */
    const TdmDatasetClass *klass = tdm_feature_get_class(f);
    TdmDataset ds = {0};
    guint8 image[4];
    int32_t label = -1;
    g_assert_true(klass->open(&ds, "x", "train", &error));
    g_assert_no_error(error);
    g_assert_cmpint(ds.length, ==, 4);
    g_assert_true(klass->read(&ds, 3, image, &label, &error));
    g_assert_cmpint(label, ==, 1);
    g_assert_cmpint(image[0], ==, 3);
}

static void test_unavailable(void)
{
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_DATASET, "fixture-broken", NULL);
    g_assert_nonnull(f);
    const char *reason = NULL;
    g_assert_false(tdm_feature_is_available(f, &reason));
    g_assert_cmpstr(reason, ==, "fixture hardware is absent");
    /* Cached: asking again gives the same answer. */
    reason = NULL;
    g_assert_false(tdm_feature_is_available(f, &reason));
    g_assert_cmpstr(reason, ==, "fixture hardware is absent");
}

static void assert_failure(const char *stem, const char *reason)
{
    const TdmPluginFailure *f = find_failure(stem);
    if (f == NULL) {
        g_error("no load failure recorded for libtdm-%s.so", stem);
    }
    g_assert_true(g_path_is_absolute(f->filename));
    g_assert_cmpstr(f->reason, ==, reason);
    char *name = g_strdup(stem);
    g_assert_null(find_plugin(name));
    g_free(name);
}

static void test_failures(void)
{
    char *abi = g_strdup_printf("ABI version 99, expected %d", TDM_PLUGIN_ABI_VERSION);
    assert_failure("fixture-abi", abi);
    g_free(abi);
    assert_failure("fixture-mismatch",
                   "name 'fixture-other' does not match file name 'libtdm-fixture-mismatch.so'");
    assert_failure("fixture-nosym", "missing symbol tdm_plugin_fixture_nosym_get_desc");
    assert_failure("fixture-initfail", "init failed: fixture init fails on purpose");
    assert_failure("fixture-twin", "init failed: feature 'fixture-data' (dataset) already "
                                   "registered by plugin 'fixture-good'");
    g_assert_null(find_plugin("fixture-other"));
    g_assert_nonnull(find_failure("fixture-abi"));
    g_assert_null(find_failure("fixture-good"));

    /* The failed init's feature was rolled back... */
    GError *error = NULL;
    g_assert_null(tdm_registry_find(TDM_FEATURE_DATASET, "fixture-rollback", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "'fixture-rollback'"));
    g_assert_nonnull(strstr(error->message, "fixture-data"));
    g_clear_error(&error);
    /* ...and the duplicate did not replace the good plugin's feature. */
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_DATASET, "fixture-data", NULL);
    g_assert_cmpstr(tdm_plugin_get_name(tdm_feature_get_plugin(f)), ==, "fixture-good");
    g_assert_cmpint(tdm_feature_get_priority(f), ==, 50);
}

/* A plugin built against an older minor interface keeps loading: the
 * 1.0 strategy of tests/fixtures/oldstrategy.c (no read_stats, no
 * optimizer export) is registered beside this core's newer minor, while
 * the other major (fixture-major) and the other descriptor ABI
 * (fixture-abi) are refused naming both versions (test_failures,
 * test_class_refusals). */
static void test_older_minor_loads(void)
{
    g_assert_cmpuint(TDM_IFACE_VERSION_MINOR(TDM_STRATEGY_IFACE_VERSION), >, 0);
    g_assert_null(find_failure("fixture-oldstrategy"));
    g_assert_nonnull(find_plugin("fixture-oldstrategy"));
    GError *error = NULL;
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_STRATEGY, "fixture-old-strategy", &error);
    g_assert_no_error(error);
    const TdmStrategyClass *klass = tdm_feature_get_class(f);
    g_assert_cmpuint(klass->iface_version, ==, TDM_IFACE_VERSION(1, 0));
    g_assert_cmpstr(tdm_plugin_get_name(tdm_feature_get_plugin(f)), ==, "fixture-oldstrategy");
}

static void test_iface_version_macros(void)
{
    g_assert_cmpuint(TDM_IFACE_VERSION(3, 7), ==, 0x30007u);
    g_assert_cmpuint(TDM_IFACE_VERSION_MAJOR(TDM_IFACE_VERSION(3, 7)), ==, 3);
    g_assert_cmpuint(TDM_IFACE_VERSION_MINOR(TDM_IFACE_VERSION(3, 7)), ==, 7);
    g_assert_cmpuint(TDM_IFACE_VERSION_MAJOR(TDM_IFACE_VERSION(1, 0xffff)), ==, 1);
    g_assert_cmpuint(TDM_IFACE_VERSION_MINOR(TDM_IFACE_VERSION(1, 0xffff)), ==, 0xffff);
    /* Every kind is at major 1 with this ABI. */
    const guint32 versions[] = {TDM_BACKEND_IFACE_VERSION,   TDM_COMM_IFACE_VERSION,
                                TDM_STRATEGY_IFACE_VERSION,  TDM_TRANSFORM_IFACE_VERSION,
                                TDM_DATASET_IFACE_VERSION,   TDM_MODULE_IFACE_VERSION,
                                TDM_OPTIMIZER_IFACE_VERSION};
    for (gsize i = 0; i < G_N_ELEMENTS(versions); i++) {
        g_assert_cmpuint(TDM_IFACE_VERSION_MAJOR(versions[i]), ==, 1);
    }
}

/* Each fixture's class is refused at registration with a reason naming
 * the kind, the feature and what is wrong, and the plugin fails to load. */
static void test_class_refusals(void)
{
    char *reason = g_strdup_printf("dataset 'fixture-size-data': struct_size %zu, expected %zu "
                                   "(sizeof(TdmDatasetClass) in this core's headers)",
                                   sizeof(TdmDatasetClass) - sizeof(gpointer),
                                   sizeof(TdmDatasetClass));
    assert_failure("fixture-size", reason);
    g_free(reason);

    guint major = TDM_IFACE_VERSION_MAJOR(TDM_STRATEGY_IFACE_VERSION);
    guint minor = TDM_IFACE_VERSION_MINOR(TDM_STRATEGY_IFACE_VERSION);
    reason = g_strdup_printf("strategy 'fixture-newer-strategy': interface version %u.%u is newer "
                             "than this core's %u.%u (the plugin needs a newer Tandem)",
                             major, minor + 1, major, minor);
    assert_failure("fixture-newer", reason);
    g_free(reason);

    major = TDM_IFACE_VERSION_MAJOR(TDM_TRANSFORM_IFACE_VERSION);
    minor = TDM_IFACE_VERSION_MINOR(TDM_TRANSFORM_IFACE_VERSION);
    reason = g_strdup_printf("transform 'fixture-major-tf': interface version %u.0, this core has "
                             "%u.%u (another major version: rebuild the plugin against this "
                             "core's headers)",
                             major + 1, major, minor);
    assert_failure("fixture-major", reason);
    g_free(reason);

    assert_failure("fixture-nullgemm", "backend 'fixture-nullgemm': required slot 'gemm' is NULL");
    assert_failure("fixture-pinned", "backend 'fixture-pinned': slot 'host_free' is NULL while "
                                     "'host_alloc' is set (the two come together)");
    assert_failure("fixture-streams",
                   "backend 'fixture-streams' stream_ops: required slot 'event_query' is NULL");

    /* Nothing of theirs is registered: not the refused classes, and not the
     * valid reader registered beside one (its plugin's init even returned
     * TRUE after the refusal). */
    static const struct {
        TdmFeatureKind kind;
        const char *name;
    } gone[] = {
        {TDM_FEATURE_DATASET, "fixture-size-data"},
        {TDM_FEATURE_STRATEGY, "fixture-newer-strategy"},
        {TDM_FEATURE_TRANSFORM, "fixture-major-tf"},
        {TDM_FEATURE_DATASET, "fixture-major-data"},
        {TDM_FEATURE_BACKEND, "fixture-nullgemm"},
        {TDM_FEATURE_BACKEND, "fixture-pinned"},
        {TDM_FEATURE_BACKEND, "fixture-streams"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(gone); i++) {
        GError *error = NULL;
        g_assert_null(tdm_registry_find(gone[i].kind, gone[i].name, &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
        g_clear_error(&error);
    }

    /* Loading the file explicitly reports the same reason as an error. */
    GError *error = NULL;
    char *path = fixture_path("fixture-nullgemm");
    g_assert_null(tdm_registry_load_file(path, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_assert_nonnull(strstr(error->message, "libtdm-fixture-nullgemm.so: backend "
                                            "'fixture-nullgemm': required slot 'gemm' is NULL"));
    g_clear_error(&error);
    g_free(path);
}

/* The refused backends (priority 100) and strategy (priority 100) would be
 * the automatic choice if they had been registered; they are never chosen. */
static void test_refused_never_selected(void)
{
    GError *error = NULL;
    TdmFeature *b = tdm_registry_select(TDM_FEATURE_BACKEND, NULL, NULL, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(tdm_feature_get_name(b), !=, "fixture-nullgemm");
    g_assert_cmpstr(tdm_feature_get_name(b), !=, "fixture-pinned");
    g_assert_cmpstr(tdm_feature_get_name(b), !=, "fixture-streams");
    TdmDevice *dev = tdm_device_get("auto", &error);
    g_assert_no_error(error);
    g_assert_false(g_str_has_prefix(dev->name, "fixture-nullgemm"));
    g_assert_false(g_str_has_prefix(dev->name, "fixture-pinned"));
    g_assert_false(g_str_has_prefix(dev->name, "fixture-streams"));

    g_assert_null(tdm_device_get("fixture-nullgemm", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "no backend named 'fixture-nullgemm'"));
    g_clear_error(&error);
    g_assert_null(tdm_device_get("fixture-nullgemm,fixture-pinned", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE);
    g_clear_error(&error);

    TdmFeature *s = tdm_registry_select(TDM_FEATURE_STRATEGY, NULL, NULL, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(tdm_feature_get_name(s), !=, "fixture-newer-strategy");
    g_assert_null(tdm_registry_select(TDM_FEATURE_STRATEGY, "fixture-newer-strategy", NULL, NULL,
                                      &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_clear_error(&error);
    g_assert_null(tdm_registry_select(TDM_FEATURE_TRANSFORM, "fixture-major-tf", NULL, NULL,
                                      &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_clear_error(&error);
}

static void test_load_file(void)
{
    GError *error = NULL;
    char *good = fixture_path("fixture-good");
    TdmPlugin *p = tdm_registry_load_file(good, &error);
    g_assert_no_error(error);
    g_assert_true(p == find_plugin("fixture-good"));
    g_free(good);

    char *abi = fixture_path("fixture-abi");
    g_assert_null(tdm_registry_load_file(abi, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_assert_nonnull(strstr(error->message, "libtdm-fixture-abi.so"));
    g_assert_nonnull(strstr(error->message, "ABI version 99, expected"));
    g_clear_error(&error);
    g_free(abi);

    g_assert_null(tdm_registry_load_file("/nonexistent/libtdm-absent.so", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_assert_nonnull(strstr(error->message, "/nonexistent/libtdm-absent.so"));
    g_assert_nonnull(strstr(error->message, "cannot open"));
    g_clear_error(&error);

    g_assert_null(tdm_registry_load_file("/nonexistent/plugin.so", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_PLUGIN);
    g_assert_nonnull(strstr(error->message, "libtdm-<name>.so"));
    g_clear_error(&error);
}

static gboolean only_fixture_good(TdmFeature *f, gpointer user_data)
{
    return strcmp(tdm_plugin_get_name(tdm_feature_get_plugin(f)), "fixture-good") == 0;
}

static gboolean reject_all(TdmFeature *f, gpointer user_data)
{
    return FALSE;
}

static void test_select(void)
{
    GError *error = NULL;
    TdmFeature *data = tdm_registry_find(TDM_FEATURE_DATASET, "fixture-data", NULL);
    TdmFeature *broken = tdm_registry_find(TDM_FEATURE_DATASET, "fixture-broken", NULL);

    /* Automatic: the higher-priority reader is unavailable, so the next. */
    TdmFeature *f = tdm_registry_select(TDM_FEATURE_DATASET, NULL, only_fixture_good, NULL, &error);
    g_assert_no_error(error);
    g_assert_true(f == data);
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "auto", only_fixture_good, NULL, NULL) ==
                  data);
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "", only_fixture_good, NULL, NULL) ==
                  data);

    /* By name, and lists tried in order, skipping what does not work. */
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "fixture-data", NULL, NULL, NULL) ==
                  data);
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "fixture-broken, fixture-data", NULL,
                                      NULL, NULL) == data);
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "nope,fixture-data", NULL, NULL, NULL) ==
                  data);

    /* A named feature that cannot be used says why. */
    g_assert_null(tdm_registry_select(TDM_FEATURE_DATASET, "fixture-broken", NULL, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE);
    g_assert_nonnull(strstr(error->message, "'fixture-broken' unavailable: fixture hardware is "
                                            "absent"));
    g_clear_error(&error);

    g_assert_null(tdm_registry_select(TDM_FEATURE_DATASET, "nope", NULL, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "'nope'"));
    g_assert_nonnull(strstr(error->message, "fixture-data"));
    g_clear_error(&error);

    /* Negation: automatic among the others; nothing left -> every reason. */
    g_assert_null(
        tdm_registry_select(TDM_FEATURE_DATASET, "^fixture-data", only_fixture_good, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE);
    g_assert_nonnull(strstr(error->message, "fixture hardware is absent"));
    g_assert_null(strstr(error->message, "'fixture-data'"));
    g_clear_error(&error);
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "^fixture-broken", only_fixture_good,
                                      NULL, NULL) == data);

    /* The filter is applied to named candidates too. */
    g_assert_null(
        tdm_registry_select(TDM_FEATURE_DATASET, "fixture-data", reject_all, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_UNAVAILABLE);
    g_assert_nonnull(strstr(error->message, "'fixture-data' not suitable"));
    g_clear_error(&error);

    /* Priority overrides reorder the list immediately, by name or kind/name. */
    GPtrArray *list = tdm_registry_list_features(TDM_FEATURE_DATASET);
    g_assert_cmpuint(list->len, >=, 2);
    gint pos_data = -1, pos_broken = -1;
    for (guint i = 0; i < list->len; i++) {
        pos_data = g_ptr_array_index(list, i) == data ? (gint)i : pos_data;
        pos_broken = g_ptr_array_index(list, i) == broken ? (gint)i : pos_broken;
    }
    g_assert_cmpint(pos_broken, <, pos_data);
    g_ptr_array_unref(list);

    tdm_registry_set_priority("dataset/fixture-data", 70);
    g_assert_cmpint(tdm_feature_get_priority(data), ==, 70);
    list = tdm_registry_list_features(TDM_FEATURE_DATASET);
    for (guint i = 0; i < list->len; i++) {
        pos_data = g_ptr_array_index(list, i) == data ? (gint)i : pos_data;
        pos_broken = g_ptr_array_index(list, i) == broken ? (gint)i : pos_broken;
    }
    g_assert_cmpint(pos_data, <, pos_broken);
    g_ptr_array_unref(list);

    /* A negative override takes it out of automatic selection only. */
    tdm_registry_set_priority("dataset/fixture-data", -1);
    g_assert_null(tdm_registry_select(TDM_FEATURE_DATASET, NULL, only_fixture_good, NULL, &error));
    g_assert_nonnull(strstr(error->message, "'fixture-data' is never picked automatically"));
    g_clear_error(&error);
    g_assert_true(tdm_registry_select(TDM_FEATURE_DATASET, "fixture-data", NULL, NULL, NULL) ==
                  data);
    tdm_registry_set_priority("dataset/fixture-data", 50);
    g_assert_cmpint(tdm_feature_get_priority(data), ==, 50);
}

/* TDM_PLUGIN_PRIORITY (set in main) raised the never-automatic strategy. */
static void test_priority_env(void)
{
    TdmFeature *s = tdm_registry_find(TDM_FEATURE_STRATEGY, "fixture-strategy", NULL);
    g_assert_nonnull(s);
    g_assert_cmpint(tdm_feature_get_priority(s), ==, 40);
    g_assert_true(tdm_registry_select(TDM_FEATURE_STRATEGY, NULL, only_fixture_good, NULL, NULL) ==
                  s);
    TdmFeature *b = tdm_registry_find(TDM_FEATURE_BACKEND, "fixture-backend", NULL);
    g_assert_cmpint(tdm_feature_get_priority(b), ==, 1);
}

static void test_devices(void)
{
    GError *error = NULL;
    TdmFeature *feature = tdm_registry_find(TDM_FEATURE_BACKEND, "fixture-backend", NULL);
    const TdmBackendClass *backend = tdm_feature_get_class(feature);
    const int *opened = backend->reserved[0];
    int opened_before = *opened;

    TdmDevice *d1 = tdm_device_get("fixture-backend:1", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(d1->name, ==, "fixture-backend:1");
    g_assert_cmpint(d1->index, ==, 1);
    g_assert_true(d1->backend == backend);
    g_assert_true(d1->feature == feature);
    g_assert_cmpint(tdm_device_count(d1), ==, 2);
    g_assert_cmpint(*opened, ==, opened_before + 1);
    /* Same device every time, opened once. */
    g_assert_true(tdm_device_get("fixture-backend:1", NULL) == d1);
    g_assert_cmpint(*opened, ==, opened_before + 1);

    TdmDevice *d0 = tdm_device_get("fixture-backend", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(d0->name, ==, "fixture-backend:0");
    g_assert_true(d0 != d1);
    g_assert_true(tdm_device_get("fixture-backend:0", NULL) == d0);

    g_assert_true(tdm_device_synchronize(d0, &error));
    g_assert_true(tdm_device_synchronize(d0, &error));
    g_assert_cmpint(*(int *)d0->priv, ==, 2);
    g_assert_cmpint(*(int *)d1->priv, ==, 0);

    /* TDM_BACKEND is the spec of "auto". */
    g_setenv("TDM_BACKEND", "fixture-backend:1", TRUE);
    g_assert_true(tdm_device_get(NULL, NULL) == d1);
    g_assert_true(tdm_device_get("auto", NULL) == d1);
    g_unsetenv("TDM_BACKEND");

    g_assert_null(tdm_device_get("fixture-backend:2", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "'fixture-backend:2'"));
    g_assert_nonnull(strstr(error->message, "has 2 devices"));
    g_clear_error(&error);

    g_assert_null(tdm_device_get("fixture-backend:x", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "'fixture-backend:x'"));
    g_clear_error(&error);

    g_assert_null(tdm_device_get("nosuch:0", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "'nosuch'"));
    g_assert_nonnull(strstr(error->message, "fixture-backend"));
    g_clear_error(&error);

    /* A device that fails to open is not cached: the next try opens it. */
    g_setenv("TDM_FIXTURE_DEVICES", "3", TRUE);
    g_setenv("TDM_FIXTURE_OPEN_FAILS", "1", TRUE);
    g_assert_null(tdm_device_get("fixture-backend:2", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
    g_assert_nonnull(strstr(error->message, "device 'fixture-backend:2'"));
    g_assert_nonnull(strstr(error->message, "fixture refuses to open device 2"));
    g_clear_error(&error);
    g_unsetenv("TDM_FIXTURE_OPEN_FAILS");
    TdmDevice *d2 = tdm_device_get("fixture-backend:2", &error);
    g_assert_no_error(error);
    g_assert_cmpint(d2->index, ==, 2);
    g_unsetenv("TDM_FIXTURE_DEVICES");

    TdmOpCache *cache = NULL;
    tdm_op_cache_clear(d0, &cache);
    g_assert_null(cache);
}

/* Automatic device selection picks the highest-priority usable backend. */
static void test_auto_device(void)
{
    GPtrArray *backends = tdm_registry_list_features(TDM_FEATURE_BACKEND);
    TdmFeature *expected = NULL;
    for (guint i = 0; i < backends->len && expected == NULL; i++) {
        TdmFeature *f = g_ptr_array_index(backends, i);
        const TdmBackendClass *b = tdm_feature_get_class(f);
        if (tdm_feature_get_priority(f) >= 0 && tdm_feature_is_available(f, NULL) &&
            b->device_count() > 0) {
            expected = f;
        }
    }
    g_ptr_array_unref(backends);
    g_assert_nonnull(expected); /* at least the fixture backend */
    GError *error = NULL;
    TdmDevice *dev = tdm_device_get(NULL, &error);
    g_assert_no_error(error);
    g_assert_true(dev->feature == expected);
    g_assert_cmpint(dev->index, ==, 0);

    /* Raising the fixture backend above everything makes it the choice. */
    tdm_registry_set_priority("fixture-backend", 100);
    dev = tdm_device_get("auto", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(dev->name, ==, "fixture-backend:0");
    if (expected != tdm_registry_find(TDM_FEATURE_BACKEND, "fixture-backend", NULL)) {
        /* Another backend was the automatic choice: negation falls back to it. */
        dev = tdm_device_get("^fixture-backend", &error);
        g_assert_no_error(error);
        g_assert_true(dev->feature == expected);
    }
    tdm_registry_set_priority("fixture-backend", 1);
}

/* The reference backend of the build tree (plugins/ref). */
static void test_ref_device(void)
{
    GError *error = NULL;
    TdmDevice *dev = tdm_device_get("ref", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(dev->name, ==, "ref:0");
    g_assert_cmpint(dev->index, ==, 0);
    g_assert_cmpstr(dev->backend->device_type, ==, "ref");
    g_assert_true(tdm_device_get("ref:0", NULL) == dev);
    g_assert_true(tdm_device_synchronize(dev, &error));
    g_assert_no_error(error);

    int count = tdm_device_count(dev);
    g_assert_cmpint(count, >=, 1);
    char *spec = g_strdup_printf("ref:%d", count);
    g_assert_null(tdm_device_get(spec, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, spec));
    char *has = g_strdup_printf("has %d device", count);
    g_assert_nonnull(strstr(error->message, has));
    g_clear_error(&error);
    g_free(has);
    g_free(spec);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    const char *top = g_getenv("TDM_TOP_BUILDDIR");
    if (top == NULL) {
        g_printerr("TDM_TOP_BUILDDIR is not set (run through make check)\n");
        return 1;
    }
    fixtures_dir = g_build_filename(top, "tests", "fixtures", ".libs", NULL);
    char *real_plugins = g_build_filename(top, "plugins", ".libs", NULL);
    g_setenv("TDM_PLUGIN_SYSTEM_PATH", fixtures_dir, TRUE);
    g_setenv("TDM_PLUGIN_PATH", real_plugins, TRUE);
    g_setenv("TDM_PLUGIN_PRIORITY", "fixture-strategy:40, strategy/nope:3", TRUE);
    g_unsetenv("TDM_BACKEND");
    g_free(real_plugins);

    g_test_add_func("/registry/concurrent-init", test_concurrent_init);
    g_test_add_func("/registry/kind-names", test_kind_names);
    g_test_add_func("/registry/builtin", test_builtin);
    g_test_add_func("/registry/good-plugin", test_good_plugin);
    g_test_add_func("/registry/unavailable", test_unavailable);
    g_test_add_func("/registry/failures", test_failures);
    g_test_add_func("/registry/iface-version", test_iface_version_macros);
    g_test_add_func("/registry/class-refusals", test_class_refusals);
    g_test_add_func("/registry/older-minor-loads", test_older_minor_loads);
    g_test_add_func("/registry/refused-never-selected", test_refused_never_selected);
    g_test_add_func("/registry/load-file", test_load_file);
    g_test_add_func("/registry/select", test_select);
    g_test_add_func("/registry/priority-env", test_priority_env);
    g_test_add_func("/device/fixture", test_devices);
    g_test_add_func("/device/auto", test_auto_device);
    g_test_add_func("/device/ref", test_ref_device);
    int status = g_test_run();
    g_free(fixtures_dir);
    return status;
}

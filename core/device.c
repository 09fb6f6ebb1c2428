/* core/device.c - devices: a backend feature plus an index ("ref:1").
 *
 * A device spec names the backend feature before the colon and the index
 * after it; without a name ("auto", "", NULL) the backend comes from
 * TDM_BACKEND when set, else from automatic selection among the backends
 * that expose at least one device. The part before the colon is a registry
 * selection spec, so "cuda,cpu" and "^cuda" work too. Each (backend, index)
 * device is opened once through the backend's device_open and then lives
 * until the process ends: tensors, storages and op caches keep bare pointers
 * to it, so devices are never reference counted nor closed.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

static GRecMutex device_lock; /* static storage: usable without init */
static GHashTable *devices;   /* "name:index" -> TdmDevice * */

static int backend_device_count(const TdmBackendClass *backend)
{
    /* A backend without a count is a host backend with one device. */
    return backend->device_count != NULL ? backend->device_count() : 1;
}

static gboolean backend_is_usable(TdmFeature *feature, gpointer user_data)
{
    return backend_device_count(tdm_feature_get_class(feature)) > 0;
}

/* Splits "type:index"; a missing index is 0. */
static gboolean parse_spec(const char *spec, char **type, int *index, GError **error)
{
    const char *colon = strrchr(spec, ':');
    *index = 0;
    if (colon == NULL) {
        *type = g_strdup(spec);
        return TRUE;
    }
    guint64 value = 0;
    if (!g_ascii_string_to_unsigned(colon + 1, 10, 0, G_MAXINT, &value, NULL)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "device '%s': invalid index '%s' (expected a number >= 0)", spec, colon + 1);
        return FALSE;
    }
    *type = g_strndup(spec, (gsize)(colon - spec));
    *index = (int)value;
    return TRUE;
}

static gboolean is_single_name(const char *type)
{
    return type[0] != '\0' && strcmp(type, "auto") != 0 && strchr(type, ',') == NULL &&
           type[0] != '^';
}

static TdmFeature *select_backend(const char *spec, const char *type, GError **error)
{
    if (!is_single_name(type)) {
        TdmFeature *f =
            tdm_registry_select(TDM_FEATURE_BACKEND, type, backend_is_usable, NULL, error);
        if (f == NULL) {
            g_prefix_error(error, "device '%s': ", spec);
        }
        return f;
    }
    /* A named backend is selected without the device-count filter, so
     * that asking for an index it lacks names the count (see
     * tdm_device_get), not just "not suitable". */
    TdmFeature *f = tdm_registry_select(TDM_FEATURE_BACKEND, type, NULL, NULL, error);
    if (f == NULL) {
        g_prefix_error(error, "device '%s': ", spec);
    }
    return f;
}

static TdmDevice *open_device_locked(TdmFeature *feature, int index, const char *key,
                                     GError **error)
{
    TdmDevice *dev = g_new0(TdmDevice, 1);
    dev->backend = tdm_feature_get_class(feature);
    dev->feature = feature;
    dev->index = index;
    dev->name = g_strdup(key);
    if (dev->backend->device_open != NULL && !dev->backend->device_open(dev, error)) {
        g_prefix_error(error, "device '%s': ", key);
        g_free(dev->name);
        g_free(dev);
        return NULL;
    }
    g_hash_table_insert(devices, g_strdup(key), dev);
    return dev;
}

TdmDevice *tdm_device_get(const char *spec, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    if (spec == NULL || spec[0] == '\0' || strcmp(spec, "auto") == 0) {
        const char *env = g_getenv("TDM_BACKEND");
        spec = env != NULL && env[0] != '\0' ? env : "auto";
    }

    char *type = NULL;
    int index = 0;
    if (!parse_spec(spec, &type, &index, error)) {
        return NULL;
    }
    TdmDevice *dev = NULL;
    TdmFeature *feature = select_backend(spec, type, error);
    if (feature != NULL) {
        const char *name = tdm_feature_get_name(feature);
        int count = backend_device_count(tdm_feature_get_class(feature));
        if (index >= count) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "device '%s': index %d out of range (backend '%s' has %d device%s)", spec,
                        index, name, count, count == 1 ? "" : "s");
        } else {
            char *key = g_strdup_printf("%s:%d", name, index);
            g_rec_mutex_lock(&device_lock);
            if (devices == NULL) {
                devices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
            }
            dev = g_hash_table_lookup(devices, key);
            if (dev == NULL) {
                dev = open_device_locked(feature, index, key, error);
            }
            g_rec_mutex_unlock(&device_lock);
            g_free(key);
        }
    }
    g_free(type);
    return dev;
}

int tdm_device_count(const TdmDevice *dev)
{
    g_return_val_if_fail(dev != NULL, 0);
    return backend_device_count(dev->backend);
}

gboolean tdm_device_synchronize(TdmDevice *dev, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    if (dev->backend->synchronize == NULL) {
        return TRUE;
    }
    return dev->backend->synchronize(dev, error);
}

void tdm_op_cache_clear(TdmDevice *dev, TdmOpCache **cache)
{
    if (cache == NULL || *cache == NULL) {
        return;
    }
    if (dev != NULL && dev->backend->cache_free != NULL) {
        dev->backend->cache_free(dev, *cache);
    }
    *cache = NULL;
}

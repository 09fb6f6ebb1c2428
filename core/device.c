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
 *
 * The core counts the bytes of every tensor storage on a device (tensor.c
 * reports each allocation and free here), so every backend has allocated
 * and peak figures; tdm_device_info() starts from those and the host's
 * memory and lets the backend's device_info overwrite what it knows better.
 *
 * The rest of the core reaches the backend's device, memory and transfer
 * slots only through the functions at the end of this file and stream.c
 * (and its ops through the front ends of ops-*.c), so that these are the
 * only files that read the backend table.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "ops-private.h"

static GRecMutex device_lock; /* static storage: usable without init */
static GHashTable *devices;   /* "name:index" -> TdmDevice * */

/* dev->core of every device opened here. */
typedef struct {
    gint64 allocated; /* bytes of live tensor storage (atomic) */
    gint64 peak;      /* highest `allocated` since open or reset (atomic) */
} DeviceCore;

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
    dev->core = g_new0(DeviceCore, 1);
    if (dev->backend->device_open != NULL && !dev->backend->device_open(dev, error)) {
        g_prefix_error(error, "device '%s': ", key);
        g_free(dev->core);
        g_free(dev->name);
        g_free(dev);
        return NULL;
    }
    g_hash_table_insert(devices, g_strdup(key), dev);
    return dev;
}

/* Device `index` of a selected backend, opened on first use. */
static TdmDevice *device_of(TdmFeature *feature, int index, GError **error)
{
    char *key = g_strdup_printf("%s:%d", tdm_feature_get_name(feature), index);
    g_rec_mutex_lock(&device_lock);
    if (devices == NULL) {
        devices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    }
    TdmDevice *dev = g_hash_table_lookup(devices, key);
    if (dev == NULL) {
        dev = open_device_locked(feature, index, key, error);
    }
    g_rec_mutex_unlock(&device_lock);
    g_free(key);
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
            dev = device_of(feature, index, error);
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

GPtrArray *tdm_device_list(GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    GPtrArray *list = g_ptr_array_new();
    GPtrArray *backends = tdm_registry_list_features(TDM_FEATURE_BACKEND);
    for (guint i = 0; i < backends->len; i++) {
        TdmFeature *f = g_ptr_array_index(backends, i);
        if (!tdm_feature_is_available(f, NULL)) {
            continue;
        }
        int count = backend_device_count(tdm_feature_get_class(f));
        for (int index = 0; index < count; index++) {
            TdmDevice *dev = device_of(f, index, error);
            if (dev == NULL) {
                g_ptr_array_unref(backends);
                g_ptr_array_unref(list);
                return NULL;
            }
            g_ptr_array_add(list, dev);
        }
    }
    g_ptr_array_unref(backends);
    return list;
}

/* ---- allocator counts and device information ---- */

void tdm_device_count_bytes(TdmDevice *dev, gint64 delta)
{
    DeviceCore *c = dev->core;
    if (c == NULL) {
        return; /* a device a test made by hand */
    }
    gint64 now = __atomic_add_fetch(&c->allocated, delta, __ATOMIC_RELAXED);
    gint64 peak = __atomic_load_n(&c->peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&c->peak, &peak, now, TRUE,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void tdm_device_reset_peak(TdmDevice *dev)
{
    g_return_if_fail(dev != NULL);
    DeviceCore *c = dev->core;
    if (c != NULL) {
        __atomic_store_n(&c->peak, __atomic_load_n(&c->allocated, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
    }
}

const char *tdm_device_kind_name(TdmDeviceKind kind)
{
    switch (kind) {
    case TDM_DEVICE_KIND_CPU:
        return "cpu";
    case TDM_DEVICE_KIND_GPU:
        return "gpu";
    case TDM_DEVICE_KIND_VIRTUAL:
        return "virtual";
    case TDM_DEVICE_KIND_UNKNOWN:
        break;
    }
    return "unknown";
}

/* One "Key:   N kB" line of /proc/meminfo in bytes, or -1. */
static gint64 meminfo_bytes(const char *text, const char *key)
{
    const char *line = strstr(text, key);
    if (line == NULL || (line != text && line[-1] != '\n')) {
        return -1;
    }
    char *end = NULL;
    guint64 kb = g_ascii_strtoull(line + strlen(key), &end, 10);
    return end == line + strlen(key) ? -1 : (gint64)(kb * 1024);
}

gboolean tdm_host_memory(gint64 *total_bytes, gint64 *available_bytes)
{
    gint64 total = -1, avail = -1;
    char *text = NULL;
    if (g_file_get_contents("/proc/meminfo", &text, NULL, NULL)) {
        total = meminfo_bytes(text, "MemTotal:");
        avail = meminfo_bytes(text, "MemAvailable:");
        g_free(text);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (total < 0 && pages > 0 && page > 0) {
        total = (gint64)pages * page;
    }
    long avail_pages = sysconf(_SC_AVPHYS_PAGES);
    if (avail < 0 && avail_pages > 0 && page > 0) {
        avail = (gint64)avail_pages * page;
    }
    if (total_bytes != NULL) {
        *total_bytes = total;
    }
    if (available_bytes != NULL) {
        *available_bytes = avail;
    }
    return total >= 0;
}

gboolean tdm_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error)
{
    g_return_val_if_fail(dev != NULL && info != NULL, FALSE);
    memset(info, 0, sizeof(*info));
    g_strlcpy(info->name, dev->name, sizeof(info->name));
    info->kind = TDM_DEVICE_KIND_UNKNOWN;
    info->compute_units = -1;
    info->utilization = -1;
    info->total_bytes = info->free_bytes = -1;
    DeviceCore *c = dev->core;
    if (c != NULL) {
        info->allocated_bytes = __atomic_load_n(&c->allocated, __ATOMIC_RELAXED);
        info->peak_bytes = __atomic_load_n(&c->peak, __ATOMIC_RELAXED);
    } else {
        info->allocated_bytes = info->peak_bytes = -1;
    }
    info->reserved_bytes = info->allocated_bytes;
    if (dev->backend->device_info != NULL && !dev->backend->device_info(dev, info, error)) {
        g_prefix_error(error, "device '%s': ", dev->name);
        return FALSE;
    }
    return TRUE;
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

/* ---- the memory and transfer slots, for the core's tensors and loader ---- */

const char *tdm_device_type(const TdmDevice *dev)
{
    g_return_val_if_fail(dev != NULL, NULL);
    return dev->backend != NULL ? dev->backend->device_type : NULL;
}

void tdm_device_set_num_threads(TdmDevice *dev, int n)
{
    g_return_if_fail(dev != NULL);
    if (dev->backend->set_num_threads != NULL) {
        dev->backend->set_num_threads(dev, n);
    }
}

void *tdm_device_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    return dev->backend->alloc(dev, nbytes, error);
}

void tdm_device_free(TdmDevice *dev, void *ptr, size_t nbytes)
{
    dev->backend->free(dev, ptr, nbytes);
}

/* Timed under TDM_PROFILE as the row "read": every read waits for the
 * device, so the row counts the waits a run makes. */
gboolean tdm_device_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error)
{
    TDM_OP_RUN(TDM_OPID_READ, dev, error, dev->backend->read(dev, t, host, error));
}

gboolean tdm_device_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error)
{
    return dev->backend->write(dev, t, host, error);
}

gboolean tdm_device_has_pinned_memory(const TdmDevice *dev)
{
    return dev->backend->host_alloc != NULL && dev->backend->host_free != NULL;
}

void *tdm_device_host_alloc(TdmDevice *dev, size_t nbytes, GError **error)
{
    return dev->backend->host_alloc(dev, nbytes, error);
}

void tdm_device_host_free(TdmDevice *dev, void *ptr)
{
    dev->backend->host_free(dev, ptr);
}

gboolean tdm_device_has_async_copy(const TdmDevice *dev)
{
    return dev->backend->copy_h2d != NULL;
}

/* A front end like those of ops-*.c (checked, timed under TDM_PROFILE):
 * reorder is a transfer slot but runs on the device like an op. */
gboolean tdm_tensor_reorder(TdmTensor *src, const TdmTensor *like, TdmTensor *dst,
                            TdmOpCache **cache, GError **error)
{
    g_return_val_if_fail(src != NULL, FALSE);
    TdmDevice *dev = src->device;
    const char *op = "reorder";
    if (!tdm_ops_check_input(dev, op, "src", src, -1, error) ||
        (like != NULL && !tdm_ops_check_out(dev, op, "like", like, error)) ||
        !tdm_ops_check_out(dev, op, "dst", dst, error)) {
        return FALSE;
    }
    if (like != NULL && !tdm_ops_check_same_shape(op, "src", src, "like", like, error)) {
        return FALSE;
    }
    TDM_OP_RUN(TDM_OPID_REORDER, dev, error,
               dev->backend->reorder(dev, cache, src, like, dst, error));
}

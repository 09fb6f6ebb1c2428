/* SPDX-License-Identifier: MIT */
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
    gint64 allocated;       /* bytes of live tensor storage (atomic) */
    gint64 peak;            /* highest `allocated` since open or reset (atomic) */
    TdmPrecision precision; /* last set by tdm_device_set_precision */
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

/* The spec tdm_device_get resolves: TDM_BACKEND, else "auto", for an
 * empty or automatic one. */
static const char *effective_spec(const char *spec)
{
    if (spec == NULL || spec[0] == '\0' || strcmp(spec, "auto") == 0) {
        const char *env = g_getenv("TDM_BACKEND");
        return env != NULL && env[0] != '\0' ? env : "auto";
    }
    return spec;
}

TdmDevice *tdm_device_get(const char *spec, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    spec = effective_spec(spec);

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

TdmDevice *tdm_device_get_local(const char *spec, int local_rank, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    spec = effective_spec(spec);
    if (local_rank <= 0 || strchr(spec, ':') != NULL) {
        return tdm_device_get(spec, error);
    }
    if (!tdm_registry_init(error)) {
        return NULL;
    }
    /* The backend first, then only this rank's device: opening device 0
     * in every process would put a context of each on the first GPU. */
    TdmFeature *feature = select_backend(spec, spec, error);
    if (feature == NULL) {
        return NULL;
    }
    int count = backend_device_count(tdm_feature_get_class(feature));
    if (count <= 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "device '%s': backend '%s' has no device", spec, tdm_feature_get_name(feature));
        return NULL;
    }
    return device_of(feature, local_rank % count, error);
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

gboolean tdm_device_host_accessible(const TdmDevice *dev)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    TdmDeviceInfo info;
    /* device_info takes the device to query it; it changes nothing. */
    if (!tdm_device_info((TdmDevice *)dev, &info, NULL)) {
        return FALSE;
    }
    return info.host_accessible;
}

/* ---- precision ---- */

static const char *const precision_names[] = {
    [TDM_PRECISION_FP32] = "fp32",
    [TDM_PRECISION_TF32] = "tf32",
    [TDM_PRECISION_BF16] = "bf16",
};

const char *tdm_precision_name(TdmPrecision precision)
{
    return (guint)precision < G_N_ELEMENTS(precision_names) ? precision_names[precision]
                                                            : "unknown";
}

gboolean tdm_precision_from_name(const char *name, TdmPrecision *precision, GError **error)
{
    g_return_val_if_fail(precision != NULL, FALSE);
    for (guint i = 0; name != NULL && i < G_N_ELEMENTS(precision_names); i++) {
        if (g_ascii_strcasecmp(name, precision_names[i]) == 0) {
            *precision = (TdmPrecision)i;
            return TRUE;
        }
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                "unknown precision '%s' (expected fp32, tf32 or bf16)", name != NULL ? name : "");
    return FALSE;
}

gboolean tdm_device_set_precision(TdmDevice *dev, TdmPrecision precision, GError **error)
{
    g_return_val_if_fail(dev != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    const char *name = tdm_precision_name(precision);
    if ((guint)precision >= G_N_ELEMENTS(precision_names)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "device '%s': precision %d: %s",
                    dev->name, (int)precision, "not a TdmPrecision");
        return FALSE;
    }
    /* Pointing elsewhere is what a user on a host backend needs, not on
     * cuda itself (an older GPU refusing bf16, say). */
    const char *type = tdm_device_type(dev);
    const char *hint = g_strcmp0(type, "cuda") != 0 ? "; use --device cuda" : "";
    const char *backend = dev->feature != NULL ? tdm_feature_get_name(dev->feature) : type;
    if (dev->backend->set_precision == NULL) {
        if (precision != TDM_PRECISION_FP32) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                        "backend '%s' (%s) does not offer %s precision%s", backend, dev->name, name,
                        hint);
            return FALSE;
        }
    } else {
        GError *local = NULL;
        if (!dev->backend->set_precision(dev, precision, &local)) {
            if (local == NULL) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                            "backend '%s' (%s) does not offer %s precision%s", backend, dev->name,
                            name, hint);
            } else if (g_error_matches(local, TDM_ERROR, TDM_ERROR_UNSUPPORTED)) {
                /* the backend's reason, in the same sentence as above */
                g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                            "backend '%s' (%s) does not offer %s precision (%s)%s", backend,
                            dev->name, name, local->message, hint);
                g_error_free(local);
            } else {
                g_propagate_prefixed_error(error, local,
                                           "device '%s': setting %s precision: ", dev->name, name);
            }
            return FALSE;
        }
    }
    DeviceCore *c = dev->core;
    if (c != NULL) {
        c->precision = precision;
    }
    return TRUE;
}

TdmPrecision tdm_device_get_precision(const TdmDevice *dev)
{
    g_return_val_if_fail(dev != NULL, TDM_PRECISION_FP32);
    const DeviceCore *c = dev->core;
    return c != NULL ? c->precision : TDM_PRECISION_FP32;
}

/* ---- copies between devices ---- */

gboolean tdm_device_can_copy_peer(const TdmDevice *src, const TdmDevice *dst)
{
    g_return_val_if_fail(src != NULL && dst != NULL, FALSE);
    return src != dst && src->backend == dst->backend && src->backend->copy_peer != NULL;
}

/* Both devices idle before the clock starts (TDM_PROFILE). */
static gboolean copy_profile_begin(TdmDevice *src, TdmDevice *dst, double *t0, GError **error)
{
    if (dst != src && !tdm_device_synchronize(dst, error)) {
        g_prefix_error(error, "TDM_PROFILE: waiting for %s before a copy: ", dst->name);
        return FALSE;
    }
    return tdm_ops_profile_begin(src, t0, error);
}

/* And both again after it, whichever stream the backend ran it on; the
 * row is the source backend's. */
static gboolean copy_profile_end(TdmOpId id, TdmDevice *src, TdmDevice *dst, double t0, gboolean ok,
                                 GError **error)
{
    if (ok && dst != src && !tdm_device_synchronize(dst, error)) {
        g_prefix_error(error, "TDM_PROFILE: waiting for %s after a copy: ", dst->name);
        ok = FALSE;
    }
    return tdm_ops_profile_end(id, src, t0, ok, error);
}

static gboolean copy_run(TdmTensor *src, TdmTensor *dst, size_t bytes, void *staging,
                         GError **error)
{
    TdmDevice *sdev = src->device, *ddev = dst->device;
    if (tdm_device_can_copy_peer(sdev, ddev)) {
        return sdev->backend->copy_peer(ddev, tdm_tensor_data(dst), sdev, tdm_tensor_data(src),
                                        bytes, error);
    }
    /* The backends' own read and write, not the profiled tdm_device_read:
     * the row copy_staged holds the whole copy, counted once. */
    void *host = staging != NULL ? staging : g_malloc(bytes);
    gboolean ok =
        sdev->backend->read(sdev, src, host, error) && ddev->backend->write(ddev, dst, host, error);
    if (host != staging) {
        g_free(host);
    }
    return ok;
}

gboolean tdm_tensor_copy_across(TdmTensor *src, TdmTensor *dst, void *staging, GError **error)
{
    g_return_val_if_fail(src != NULL && dst != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (!tdm_tensor_is_contiguous(src)) {
        g_autofree char *shape = tdm_tensor_shape_string(src);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "copy from %s to %s: the source %s %s is not plain and contiguous",
                    src->device->name, dst->device->name, tdm_dtype_name(src->dtype), shape);
        return FALSE;
    }
    if (!tdm_tensor_ensure(dst, src->dtype, src->ndim, src->shape, NULL, 0, error)) {
        g_prefix_error(error, "copy from %s to %s: ", src->device->name, dst->device->name);
        return FALSE;
    }
    const size_t bytes = (size_t)tdm_tensor_numel(src) * tdm_dtype_size(src->dtype);
    if (bytes == 0) {
        return TRUE;
    }
    if (src->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "copy from %s to %s: the source has no storage", src->device->name,
                    dst->device->name);
        return FALSE;
    }
    const TdmOpId id = tdm_device_can_copy_peer(src->device, dst->device) ? TDM_OPID_COPY_PEER
                                                                          : TDM_OPID_COPY_STAGED;
    gboolean ok;
    if (G_UNLIKELY(tdm_ops_profiling)) {
        double t0 = 0.0;
        ok = copy_profile_begin(src->device, dst->device, &t0, error) &&
             copy_profile_end(id, src->device, dst->device, t0,
                              copy_run(src, dst, bytes, staging, error), error);
    } else {
        ok = copy_run(src, dst, bytes, staging, error);
    }
    if (!ok) {
        g_prefix_error(error, "copy of %zu bytes from %s to %s (%s): ", bytes, src->device->name,
                       dst->device->name, id == TDM_OPID_COPY_PEER ? "peer" : "through the host");
    }
    return ok;
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

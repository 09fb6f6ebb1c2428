/* SPDX-License-Identifier: MIT */
/* core/safetensors.c - reading and writing safetensors files, and saving and
 * loading a model's weights through them.
 *
 * A safetensors file is an 8-byte little-endian header length, a JSON object
 * naming every tensor's dtype, shape and [begin, end) byte range in the data
 * area, then the raw little-endian data. The reader is strict, because the
 * file comes from outside: the header is read through json-glib by
 * core/safetensors-header.c, which refuses anything but strict JSON and
 * keeps every value's byte offset, and every inconsistency (length past the
 * end of the file, bad JSON, unknown dtype, byte range out of bounds or
 * overlapping another, size not matching the shape) is a TDM_ERROR_CORRUPT
 * naming the file and the byte offset. The writer builds the header with
 * json-glib's JsonBuilder, pads it to 8 bytes as the reference
 * implementation does, and replaces the destination atomically: temporary
 * file in the same directory, fsync, rename, fsync of the directory, so a
 * crash or a full disk never leaves a half-written file where a good one was.
 *
 * Test hook (compiled in with configure --enable-test-hooks only):
 * TDM_TEST_SAVE_DELAY_MS makes a save sleep that long between the synced
 * temporary file and the rename, for the tests that kill a run mid-save.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "safetensors-header.h"
#include <tandem/checkpoint.h>

#define MAX_HEADER_BYTES (100u << 20)
/* The file starts with the JSON header's length, a little-endian u64. */
#define HEADER_LEN_BYTES 8
/* Written headers are padded with spaces to a multiple of this, so that
 * the data area is aligned for any dtype. */
#define HEADER_ALIGN 8
/* The largest element (i64, f64): numel times this must not overflow. */
#define MAX_ELEMENT_BYTES 8

struct _TdmSafeTensors {
    char *path;           /* file read from, for messages; NULL for a writer */
    GPtrArray *tensors;   /* TdmSafeTensor * (owned) in file / insertion order */
    GHashTable *by_name;  /* name -> TdmSafeTensor * */
    GPtrArray *meta_keys; /* char * (owned), insertion order */
    GHashTable *metadata; /* key -> value (owned) */
    gpointer blob;        /* loaded file: tensors' data point into it */
    gboolean owns_data;   /* writer: each tensor's data is its own copy */
};

static const struct {
    const char *name;
    TdmDType dtype;
} dtype_names[] = {
    {"F32", TDM_DTYPE_F32}, {"I32", TDM_DTYPE_I32},   {"I64", TDM_DTYPE_I64},
    {"U8", TDM_DTYPE_U8},   {"BF16", TDM_DTYPE_BF16}, {"F16", TDM_DTYPE_F16},
};

static const char *dtype_to_st(TdmDType dtype)
{
    for (size_t i = 0; i < G_N_ELEMENTS(dtype_names); i++) {
        if (dtype_names[i].dtype == dtype) {
            return dtype_names[i].name;
        }
    }
    return NULL;
}

static void safetensor_free(gpointer p)
{
    TdmSafeTensor *t = p;
    g_free(t->name);
    g_free(t);
}

static TdmSafeTensors *safetensors_alloc(void)
{
    TdmSafeTensors *st = g_new0(TdmSafeTensors, 1);
    st->tensors = g_ptr_array_new_with_free_func(safetensor_free);
    st->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    st->meta_keys = g_ptr_array_new_with_free_func(g_free);
    st->metadata = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    return st;
}

void tdm_safetensors_free(TdmSafeTensors *st)
{
    if (st == NULL) {
        return;
    }
    if (st->owns_data) {
        for (guint i = 0; i < st->tensors->len; i++) {
            g_free(((TdmSafeTensor *)st->tensors->pdata[i])->data);
        }
    }
    g_hash_table_destroy(st->by_name);
    g_ptr_array_free(st->tensors, TRUE);
    g_hash_table_destroy(st->metadata);
    g_ptr_array_free(st->meta_keys, TRUE);
    g_free(st->blob);
    g_free(st->path);
    g_free(st);
}

gboolean tdm_file_corrupt(GError **error, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT, "%s: %s", path, msg);
    return FALSE;
}

/* ---- reading --------------------------------------------------------- */

/* `node`'s integer, when it is one (the header gate lets no other number
 * through). */
static gboolean node_int(JsonNode *node, gint64 *out)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        return FALSE;
    }
    *out = json_node_get_int(node);
    return TRUE;
}

/* `node`'s string, or NULL when it is not one (transfer none). */
static const char *node_string(JsonNode *node)
{
    return JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING
               ? json_node_get_string(node)
               : NULL;
}

static gboolean read_tensor_entry(TdmSafeTensors *st, const TdmStHeader *h, const char *name,
                                  JsonNode *v, size_t data_len, size_t *begin_out, GError **error)
{
    const char *path = st->path;
    size_t at = tdm_st_header_offset(h, v);
    if (!JSON_NODE_HOLDS_OBJECT(v)) {
        return tdm_file_corrupt(error, path, "entry '%s' at byte %zu is not an object", name, at);
    }
    JsonObject *entry = json_node_get_object(v);
    JsonObjectIter iter;
    const char *k;
    json_object_iter_init_ordered(&iter, entry);
    while (json_object_iter_next_ordered(&iter, &k, NULL)) {
        if (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 && strcmp(k, "data_offsets") != 0) {
            return tdm_file_corrupt(
                error, path, "tensor '%s' at byte %zu has an unknown field '%s'", name, at, k);
        }
    }
    JsonNode *dtype = json_object_get_member(entry, "dtype");
    JsonNode *shape = json_object_get_member(entry, "shape");
    JsonNode *offsets = json_object_get_member(entry, "data_offsets");
    if (dtype == NULL || shape == NULL || offsets == NULL) {
        return tdm_file_corrupt(error, path, "tensor '%s' at byte %zu lacks %s", name, at,
                                dtype == NULL   ? "\"dtype\""
                                : shape == NULL ? "\"shape\""
                                                : "\"data_offsets\"");
    }
    TdmSafeTensor *t = g_new0(TdmSafeTensor, 1);
    t->name = g_strdup(name);
    /* Owned by st from here so that every error path below frees it. */
    g_ptr_array_add(st->tensors, t);
    g_hash_table_insert(st->by_name, t->name, t);

    const char *dtype_name = node_string(dtype);
    gboolean known = FALSE;
    for (size_t i = 0; dtype_name != NULL && i < G_N_ELEMENTS(dtype_names); i++) {
        if (strcmp(dtype_name, dtype_names[i].name) == 0) {
            t->dtype = dtype_names[i].dtype;
            known = TRUE;
        }
    }
    if (!known) {
        return tdm_file_corrupt(error, path, "tensor '%s': unknown dtype %s%s%s at byte %zu", name,
                                dtype_name != NULL ? "'" : "",
                                dtype_name != NULL ? dtype_name : "(not a string)",
                                dtype_name != NULL ? "'" : "", tdm_st_header_offset(h, dtype));
    }
    JsonArray *dims = JSON_NODE_HOLDS_ARRAY(shape) ? json_node_get_array(shape) : NULL;
    if (dims == NULL || json_array_get_length(dims) > TDM_MAX_DIMS) {
        return tdm_file_corrupt(error, path,
                                "tensor '%s': shape at byte %zu is not an array of at most %d "
                                "integers",
                                name, tdm_st_header_offset(h, shape), TDM_MAX_DIMS);
    }
    guint64 numel = 1;
    t->ndim = (int)json_array_get_length(dims);
    for (int d = 0; d < t->ndim; d++) {
        JsonNode *dim = json_array_get_element(dims, (guint)d);
        gint64 n;
        if (!node_int(dim, &n) || n < 0) {
            return tdm_file_corrupt(error, path, "tensor '%s': bad dimension at byte %zu", name,
                                    tdm_st_header_offset(h, dim));
        }
        t->shape[d] = n;
        if (n != 0 && numel > G_MAXUINT64 / (guint64)n / MAX_ELEMENT_BYTES) {
            return tdm_file_corrupt(error, path, "tensor '%s': shape at byte %zu is too large",
                                    name, tdm_st_header_offset(h, shape));
        }
        numel *= (guint64)n;
    }
    JsonArray *range = JSON_NODE_HOLDS_ARRAY(offsets) ? json_node_get_array(offsets) : NULL;
    gint64 begin = 0, end = 0;
    if (range == NULL || json_array_get_length(range) != 2 ||
        !node_int(json_array_get_element(range, 0), &begin) ||
        !node_int(json_array_get_element(range, 1), &end)) {
        return tdm_file_corrupt(error, path,
                                "tensor '%s': data_offsets at byte %zu is not [begin, end]", name,
                                tdm_st_header_offset(h, offsets));
    }
    if (begin < 0 || end < begin || (guint64)end > data_len) {
        return tdm_file_corrupt(error, path,
                                "tensor '%s': data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                                "] at byte %zu out of range (data area is %zu bytes)",
                                name, begin, end, tdm_st_header_offset(h, offsets), data_len);
    }
    guint64 expect = numel * tdm_dtype_size(t->dtype);
    if ((guint64)(end - begin) != expect) {
        return tdm_file_corrupt(error, path,
                                "tensor '%s': %" G_GINT64_FORMAT " bytes at byte %zu but its "
                                "shape and dtype need %" G_GUINT64_FORMAT,
                                name, end - begin, tdm_st_header_offset(h, offsets), expect);
    }
    t->nbytes = (size_t)expect;
    *begin_out = (size_t)begin;
    return TRUE;
}

/* The __metadata__ entry: an object of strings. */
static gboolean read_metadata(TdmSafeTensors *st, const TdmStHeader *h, JsonNode *v, GError **error)
{
    if (!JSON_NODE_HOLDS_OBJECT(v)) {
        return tdm_file_corrupt(error, st->path, "__metadata__ at byte %zu is not an object",
                                tdm_st_header_offset(h, v));
    }
    JsonObjectIter iter;
    const char *key;
    JsonNode *value;
    json_object_iter_init_ordered(&iter, json_node_get_object(v));
    while (json_object_iter_next_ordered(&iter, &key, &value)) {
        if (node_string(value) == NULL) {
            return tdm_file_corrupt(error, st->path,
                                    "__metadata__ value '%s' at byte %zu is not a string", key,
                                    tdm_st_header_offset(h, value));
        }
        tdm_safetensors_set_metadata(st, key, node_string(value));
    }
    return TRUE;
}

static int compare_by_data(gconstpointer a, gconstpointer b)
{
    const TdmSafeTensor *x = *(TdmSafeTensor *const *)a;
    const TdmSafeTensor *y = *(TdmSafeTensor *const *)b;
    uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
    return px < py ? -1 : px > py ? 1 : 0;
}

/* Parse a whole file held in memory; takes ownership of `contents`. */
static TdmSafeTensors *safetensors_parse(const char *path, char *contents, size_t size,
                                         GError **error)
{
    g_autoptr(GError) local = NULL;
    TdmSafeTensors *st = safetensors_alloc();
    st->path = g_strdup(path);
    st->blob = contents;
    TdmStHeader h = {0};
    g_autoptr(GPtrArray) sorted = NULL;

    if (size < HEADER_LEN_BYTES) {
        tdm_file_corrupt(&local, path,
                         "file is %zu bytes, too short for the %d-byte header length at "
                         "byte 0",
                         size, HEADER_LEN_BYTES);
        goto fail;
    }
    guint64 hlen = 0;
    for (int i = HEADER_LEN_BYTES - 1; i >= 0; i--) {
        hlen = (hlen << 8) | (guint8)contents[i];
    }
    if (hlen > size - HEADER_LEN_BYTES || hlen > MAX_HEADER_BYTES) {
        tdm_file_corrupt(&local, path,
                         "header length %" G_GUINT64_FORMAT " at byte 0 runs past the end "
                         "of the file (%zu bytes)",
                         hlen, size);
        goto fail;
    }
    if (!g_utf8_validate(contents + HEADER_LEN_BYTES, (gssize)hlen, NULL)) {
        const char *bad = NULL;
        g_utf8_validate(contents + HEADER_LEN_BYTES, (gssize)hlen, &bad);
        tdm_file_corrupt(&local, path, "bad JSON header at byte %zu: invalid UTF-8",
                         (size_t)(bad - contents));
        goto fail;
    }
    if (!tdm_st_header_parse(&h, path, contents + HEADER_LEN_BYTES, (size_t)hlen, HEADER_LEN_BYTES,
                             &local)) {
        goto fail;
    }

    size_t data_start = HEADER_LEN_BYTES + (size_t)hlen;
    size_t data_len = size - data_start;
    JsonObjectIter iter;
    const char *name;
    JsonNode *v;
    json_object_iter_init_ordered(&iter, h.root);
    while (json_object_iter_next_ordered(&iter, &name, &v)) {
        if (strcmp(name, "__metadata__") == 0) {
            if (!read_metadata(st, &h, v, &local)) {
                goto fail;
            }
            continue;
        }
        size_t begin = 0;
        if (!read_tensor_entry(st, &h, name, v, data_len, &begin, &local)) {
            goto fail;
        }
        TdmSafeTensor *t = st->tensors->pdata[st->tensors->len - 1];
        t->data = contents + data_start + begin;
    }

    /* Overlap check: sort a copy by start, every range must end before the
     * next begins. Empty tensors overlap nothing. */
    sorted = g_ptr_array_new();
    for (guint i = 0; i < st->tensors->len; i++) {
        TdmSafeTensor *t = st->tensors->pdata[i];
        if (t->nbytes > 0) {
            g_ptr_array_add(sorted, t);
        }
    }
    g_ptr_array_sort(sorted, compare_by_data);
    for (guint i = 1; i < sorted->len; i++) {
        TdmSafeTensor *a = sorted->pdata[i - 1], *b = sorted->pdata[i];
        if ((char *)a->data + a->nbytes > (char *)b->data) {
            tdm_file_corrupt(&local, path, "tensors '%s' and '%s' overlap at byte %zu", a->name,
                             b->name, (size_t)((char *)b->data - contents));
            goto fail;
        }
    }
    tdm_st_header_clear(&h);
    return st;

fail:
    tdm_st_header_clear(&h);
    tdm_safetensors_free(st);
    g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
}

TdmSafeTensors *tdm_safetensors_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    char *contents = NULL;
    gsize size = 0;
    GError *local = NULL;
    if (!g_file_get_contents(path, &contents, &size, &local)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s", local->message);
        g_error_free(local);
        return NULL;
    }
    return safetensors_parse(path, contents, size, error);
}

const TdmSafeTensor *tdm_safetensors_get(const TdmSafeTensors *st, const char *name)
{
    g_return_val_if_fail(st != NULL && name != NULL, NULL);
    return g_hash_table_lookup(st->by_name, name);
}

guint tdm_safetensors_count(const TdmSafeTensors *st)
{
    g_return_val_if_fail(st != NULL, 0);
    return st->tensors->len;
}

const TdmSafeTensor *tdm_safetensors_index(const TdmSafeTensors *st, guint i)
{
    g_return_val_if_fail(st != NULL && i < st->tensors->len, NULL);
    return st->tensors->pdata[i];
}

const char *tdm_safetensors_metadata(const TdmSafeTensors *st, const char *key)
{
    g_return_val_if_fail(st != NULL && key != NULL, NULL);
    return g_hash_table_lookup(st->metadata, key);
}

/* ---- writing --------------------------------------------------------- */

TdmSafeTensors *tdm_safetensors_new(void)
{
    TdmSafeTensors *st = safetensors_alloc();
    st->owns_data = TRUE;
    return st;
}

void tdm_safetensors_add(TdmSafeTensors *st, const char *name, TdmDType dtype, int ndim,
                         const int64_t *shape, const void *data)
{
    g_return_if_fail(st != NULL && st->owns_data && name != NULL);
    g_return_if_fail(ndim >= 0 && ndim <= TDM_MAX_DIMS && (ndim == 0 || shape != NULL));
    g_return_if_fail(dtype_to_st(dtype) != NULL);
    g_return_if_fail(g_hash_table_lookup(st->by_name, name) == NULL);

    TdmSafeTensor *t = g_new0(TdmSafeTensor, 1);
    t->name = g_strdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        numel *= (size_t)shape[d];
    }
    t->nbytes = numel * tdm_dtype_size(dtype);
    t->data = t->nbytes > 0 ? g_memdup2(data, t->nbytes) : NULL;
    g_ptr_array_add(st->tensors, t);
    g_hash_table_insert(st->by_name, t->name, t);
}

void tdm_safetensors_set_metadata(TdmSafeTensors *st, const char *key, const char *value)
{
    g_return_if_fail(st != NULL && key != NULL && value != NULL);
    if (!g_hash_table_contains(st->metadata, key)) {
        g_ptr_array_add(st->meta_keys, g_strdup(key));
        /* The table's keys point at the strings the array owns. */
        g_hash_table_insert(st->metadata, st->meta_keys->pdata[st->meta_keys->len - 1],
                            g_strdup(value));
        return;
    }
    char *stored_key = NULL;
    for (guint i = 0; i < st->meta_keys->len; i++) {
        if (strcmp(st->meta_keys->pdata[i], key) == 0) {
            stored_key = st->meta_keys->pdata[i];
        }
    }
    g_hash_table_insert(st->metadata, stored_key, g_strdup(value));
}

static gboolean write_all(int fd, const void *buf, size_t n, const char *path, GError **error)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            int e = errno;
            g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: write failed: %s", path,
                        g_strerror(e));
            return FALSE;
        }
        p += w;
        n -= (size_t)w;
    }
    return TRUE;
}

/* The temporary file a save of `path` writes before renaming it into place,
 * created and opened (its name in *tmp_out), or -1 with `error` set: also
 * when `path` names something a rename must not replace (a directory, a
 * device). */
static int save_temp_open(const char *path, char **tmp_out, GError **error)
{
    struct stat sb;
    size_t len = strlen(path);
    gboolean is_dir = len > 0 && G_IS_DIR_SEPARATOR(path[len - 1]);
    if (is_dir || (g_stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: %s, not a file to save into", path,
                    is_dir || S_ISDIR(sb.st_mode) ? "is a directory" : "exists");
        return -1;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *name = g_strdup_printf(".%s.tmp-XXXXXX", base);
    char *t = g_build_filename(dir, name, NULL);
    int fd = g_mkstemp_full(t, O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot create a temporary file in %s: %s",
                    path, dir, g_strerror(e));
        g_free(t);
        return -1;
    }
    *tmp_out = t;
    return fd;
}

gboolean tdm_save_path_check(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, FALSE);
    g_autofree char *tmp = NULL;
    int fd = save_temp_open(path, &tmp, error);
    if (fd < 0) {
        return FALSE;
    }
    close(fd);
    g_unlink(tmp);
    return TRUE;
}

#ifdef TDM_ENABLE_TEST_HOOKS
/* TDM_TEST_SAVE_DELAY_MS=N: sleep N ms between the written, synced
 * temporary file and its rename, so that a test can kill the process in
 * the middle of a save. */
static void save_delay_hook(void)
{
    const char *env = g_getenv("TDM_TEST_SAVE_DELAY_MS");
    if (env != NULL && env[0] != '\0') {
        g_usleep((gulong)g_ascii_strtoull(env, NULL, 10) * 1000);
    }
}
#endif

/* The JSON header of `st`: its metadata, then each tensor's dtype, shape
 * and byte range, in the order they were added. */
static GString *header_build(const TdmSafeTensors *st)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    if (st->meta_keys->len > 0) {
        json_builder_set_member_name(b, "__metadata__");
        json_builder_begin_object(b);
        for (guint i = 0; i < st->meta_keys->len; i++) {
            const char *k = st->meta_keys->pdata[i];
            json_builder_set_member_name(b, k);
            json_builder_add_string_value(b, g_hash_table_lookup(st->metadata, k));
        }
        json_builder_end_object(b);
    }
    size_t offset = 0;
    for (guint i = 0; i < st->tensors->len; i++) {
        const TdmSafeTensor *t = st->tensors->pdata[i];
        json_builder_set_member_name(b, t->name);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "dtype");
        json_builder_add_string_value(b, dtype_to_st(t->dtype));
        json_builder_set_member_name(b, "shape");
        json_builder_begin_array(b);
        for (int d = 0; d < t->ndim; d++) {
            json_builder_add_int_value(b, t->shape[d]);
        }
        json_builder_end_array(b);
        json_builder_set_member_name(b, "data_offsets");
        json_builder_begin_array(b);
        json_builder_add_int_value(b, (gint64)offset);
        json_builder_add_int_value(b, (gint64)(offset + t->nbytes));
        json_builder_end_array(b);
        json_builder_end_object(b);
        offset += t->nbytes;
    }
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = json_to_string(root, FALSE);
    return g_string_new(text);
}

gboolean tdm_safetensors_save(TdmSafeTensors *st, const char *path, GError **error)
{
    g_return_val_if_fail(st != NULL && path != NULL, FALSE);

    g_autoptr(GString) header = header_build(st);
    /* Pad with spaces so the data area starts aligned. */
    while (header->len % HEADER_ALIGN != 0) {
        g_string_append_c(header, ' ');
    }
    guint8 lenbuf[HEADER_LEN_BYTES];
    guint64 hlen = header->len;
    for (int i = 0; i < HEADER_LEN_BYTES; i++) {
        lenbuf[i] = (guint8)(hlen >> (8 * i));
    }

    g_autofree char *tmp = NULL;
    int fd = save_temp_open(path, &tmp, error);
    if (fd < 0) {
        return FALSE;
    }
    gboolean ok = write_all(fd, lenbuf, sizeof lenbuf, path, error) &&
                  write_all(fd, header->str, header->len, path, error);
    for (guint i = 0; ok && i < st->tensors->len; i++) {
        const TdmSafeTensor *t = st->tensors->pdata[i];
        ok = write_all(fd, t->data, t->nbytes, path, error);
    }
    if (ok && fsync(fd) != 0) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: fsync failed: %s", path, g_strerror(e));
        ok = FALSE;
    }
    if (close(fd) != 0 && ok) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: close failed: %s", path, g_strerror(e));
        ok = FALSE;
    }
#ifdef TDM_ENABLE_TEST_HOOKS
    save_delay_hook();
#endif
    if (ok && g_rename(tmp, path) != 0) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot rename %s into place: %s", path,
                    tmp, g_strerror(e));
        ok = FALSE;
    }
    if (!ok) {
        g_unlink(tmp);
        return FALSE;
    }
    /* Make the rename itself durable. */
    g_autofree char *dir = g_path_get_dirname(path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return TRUE;
}

/* ---- models ---------------------------------------------------------- */

static char *shape_string(int ndim, const int64_t *shape)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++) {
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d > 0 ? ", " : "", shape[d]);
    }
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

static gboolean is_num_batches_tracked(const char *name)
{
    return g_str_has_suffix(name, ".num_batches_tracked") ||
           strcmp(name, "num_batches_tracked") == 0;
}

gboolean tdm_model_save(TdmModel *model, const char *path, GError **error)
{
    g_return_val_if_fail(model != NULL && path != NULL, FALSE);
    TdmSafeTensors *st = tdm_safetensors_new();
    tdm_safetensors_set_metadata(st, "format", "pt");
    tdm_safetensors_set_metadata(st, "producer", "tandem " TDM_VERSION);
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < model->params->len; i++) {
        TdmParam *p = model->params->pdata[i];
        float *buf = g_malloc(MAX((size_t)tdm_tensor_numel(p->value), 1) * sizeof(float));
        ok = tdm_tensor_read(p->value, buf, error);
        if (ok) {
            tdm_safetensors_add(st, p->full_name, TDM_DTYPE_F32, p->ndim, p->shape, buf);
        }
        g_free(buf);
        /* PyTorch's BatchNorm also has this i64 counter; Tandem does not
         * keep it, but load_state_dict (strict) wants it. */
        if (ok && p->is_buffer && strcmp(p->name, "running_mean") == 0) {
            size_t plen = strlen(p->full_name) - strlen("running_mean");
            g_autofree char *name =
                g_strdup_printf("%.*snum_batches_tracked", (int)plen, p->full_name);
            gint64 zero = 0;
            tdm_safetensors_add(st, name, TDM_DTYPE_I64, 0, NULL, &zero);
        }
    }
    ok = ok && tdm_safetensors_save(st, path, error);
    tdm_safetensors_free(st);
    return ok;
}

/* Whether `name` starts with one of the prefixes in `skip` (NULL: none). */
static gboolean skipped(char **skip, const char *name)
{
    for (char **s = skip; s != NULL && *s != NULL; s++) {
        if ((*s)[0] != '\0' && g_str_has_prefix(name, *s)) {
            return TRUE;
        }
    }
    return FALSE;
}

/* `p` has its tensor in `st`, of its shape and in F32: what loading it
 * needs. `path` names the file in the error. */
static gboolean check_param(const TdmSafeTensors *st, const char *path, const TdmParam *p,
                            GError **error)
{
    const TdmSafeTensor *t = tdm_safetensors_get(st, p->full_name);
    g_autofree char *want = shape_string(p->ndim, p->shape);
    if (t == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "%s: parameter '%s' (shape %s) is missing", path, p->full_name, want);
        return FALSE;
    }
    gboolean same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) {
        same = t->shape[d] == p->shape[d];
    }
    if (!same) {
        g_autofree char *got = shape_string(t->ndim, t->shape);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "%s: parameter '%s' has shape %s in the model but %s in the file", path,
                    p->full_name, want, got);
        return FALSE;
    }
    if (t->dtype != TDM_DTYPE_F32) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: parameter '%s' is %s in the file; only F32 weights can be loaded", path,
                    p->full_name, dtype_to_st(t->dtype));
        return FALSE;
    }
    return TRUE;
}

gboolean tdm_model_load(TdmModel *model, const char *path, gboolean strict, GError **error)
{
    return tdm_model_load_except(model, path, strict, NULL, error);
}

gboolean tdm_model_load_except(TdmModel *model, const char *path, gboolean strict, const char *skip,
                               GError **error)
{
    g_return_val_if_fail(model != NULL && path != NULL, FALSE);
    TdmSafeTensors *st = tdm_weights_load(path, error);
    if (st == NULL) {
        return FALSE;
    }
    /* A training checkpoint: its weights, checksums checked; its own
     * tensors (optimizer state, "tandem.*") are not the model's. */
    const gboolean checkpoint =
        g_strcmp0(tdm_safetensors_metadata(st, "format"), TDM_CHECKPOINT_FORMAT) == 0;
    if (checkpoint && !tdm_checkpoint_verify(st, path, error)) {
        tdm_safetensors_free(st);
        return FALSE;
    }
    g_auto(GStrv) prefixes = skip != NULL ? g_strsplit(skip, ",", -1) : NULL;
    gboolean ok = TRUE;
    for (char **s = prefixes; ok && s != NULL && *s != NULL; s++) {
        g_strstrip(*s);
        gboolean any = (*s)[0] == '\0';
        for (guint i = 0; !any && i < model->params->len; i++) {
            any = g_str_has_prefix(((TdmParam *)model->params->pdata[i])->full_name, *s);
        }
        if (!any) { /* a typo would otherwise load what was meant to be left out */
            g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                        "%s: '%s', to be left out of the load, names no parameter or buffer of "
                        "the model",
                        path, *s);
            ok = FALSE;
        }
    }
    /* Check everything before writing anything: a failed load leaves the
     * model as it was. */
    g_autoptr(GPtrArray) loads = g_ptr_array_new(); /* the parameters to write */
    for (guint i = 0; ok && i < model->params->len; i++) {
        TdmParam *p = model->params->pdata[i];
        if (!skipped(prefixes, p->full_name)) {
            ok = check_param(st, path, p, error);
            g_ptr_array_add(loads, p);
        }
    }
    for (guint i = 0; ok && strict && i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        if (!is_num_batches_tracked(t->name) && !skipped(prefixes, t->name) &&
            !(checkpoint && g_str_has_prefix(t->name, TDM_CHECKPOINT_PREFIX)) &&
            tdm_model_find_param(model, t->name) == NULL) {
            g_autofree char *got = shape_string(t->ndim, t->shape);
            g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                        "%s: unexpected tensor '%s' (shape %s): the model has no such parameter "
                        "or buffer",
                        path, t->name, got);
            ok = FALSE;
        }
    }
    for (guint i = 0; ok && i < loads->len; i++) {
        TdmParam *p = loads->pdata[i];
        const TdmSafeTensor *t = tdm_safetensors_get(st, p->full_name);
        /* The data area may be unaligned (any 8-byte header padding is
         * optional), so hand the backend an aligned copy. */
        gpointer aligned = g_malloc(MAX(t->nbytes, 1));
        memcpy(aligned, t->data, t->nbytes);
        ok = tdm_tensor_write(p->value, aligned, error);
        g_free(aligned);
    }
    tdm_safetensors_free(st);
    return ok;
}

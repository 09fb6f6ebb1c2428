/* SPDX-License-Identifier: MIT */
/* core/checkpoint.c - checkpoint files and directories (<tandem/checkpoint.h>).
 *
 * A checkpoint is a safetensors file with a "tandem-checkpoint" metadata
 * block; what the trainer puts in it is core/trainer-checkpoint.c's
 * business, this file only knows the file and the directory. safetensors
 * has no checksum, so each tensor's CRC-32 (zlib) goes into the metadata
 * and is checked on load: a flipped byte is named (tensor, byte range,
 * file) instead of trained on. A checkpoint is written as the safetensors
 * writer writes every file (temporary file in the same directory, fsync,
 * rename, fsync of the directory), so DIR/ckpt-<step>.safetensors is
 * complete or absent; DIR/latest is then replaced by renaming a fresh
 * symbolic link over it, so it always names a complete checkpoint. The
 * newest checkpoint is found by the step in the file names, not through
 * `latest`: a crash between the two renames leaves `latest` one behind,
 * never wrong. The optimizer's state goes in and out through its state
 * table, full-sized per parameter, which is what makes a checkpoint
 * independent of the strategy and the world size.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "internal.h"
#include <tandem/checkpoint.h>

#define CKPT_PREFIX "ckpt-"
#define CKPT_SUFFIX ".safetensors"
#define CKPT_DIGITS 9

static guint32 tensor_crc(const TdmSafeTensor *t)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const guint8 *p = t->data;
    size_t left = t->nbytes;
    /* zlib's length is a uInt: feed large tensors in pieces */
    while (left > 0) {
        uInt n = (uInt)MIN(left, (size_t)1 << 30);
        crc = crc32(crc, p, n);
        p += n;
        left -= n;
    }
    return (guint32)crc;
}

void tdm_checkpoint_set_checksums(TdmSafeTensors *st)
{
    g_return_if_fail(st != NULL);
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    json_builder_begin_object(b);
    for (guint i = 0; i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        char hex[9];
        g_snprintf(hex, sizeof hex, "%08x", tensor_crc(t));
        json_builder_set_member_name(b, t->name);
        json_builder_add_string_value(b, hex);
    }
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = json_to_string(root, FALSE);
    tdm_safetensors_set_metadata(st, "checksums", text);
}

/* The byte range of `t`'s data in the file `st` was read from. */
static size_t data_offset(const TdmSafeTensors *st, const TdmSafeTensor *t)
{
    /* tensors point into one blob in file order; the lowest is the data
     * area's start, which follows the header */
    const guint8 *lowest = t->data;
    for (guint i = 0; i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *o = tdm_safetensors_index(st, i);
        if (o->nbytes > 0 && (const guint8 *)o->data < lowest) {
            lowest = o->data;
        }
    }
    return (size_t)((const guint8 *)t->data - lowest);
}

gboolean tdm_checkpoint_verify(const TdmSafeTensors *st, const char *path, GError **error)
{
    g_return_val_if_fail(st != NULL && path != NULL, FALSE);
    const char *text = tdm_safetensors_metadata(st, "checksums");
    if (text == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: no \"checksums\" in the checkpoint's __metadata__", path);
        return FALSE;
    }
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    JsonNode *root =
        json_parser_load_from_data(parser, text, -1, NULL) ? json_parser_get_root(parser) : NULL;
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: the checkpoint's \"checksums\" metadata is not a JSON object", path);
        return FALSE;
    }
    JsonObject *sums = json_node_get_object(root);
    for (guint i = 0; i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        JsonNode *v = json_object_get_member(sums, t->name);
        const char *want =
            v != NULL && JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING
                ? json_node_get_string(v)
                : NULL;
        if (want == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                        "%s: tensor '%s' has no checksum in the checkpoint's metadata", path,
                        t->name);
            return FALSE;
        }
        char got[9];
        g_snprintf(got, sizeof got, "%08x", tensor_crc(t));
        if (g_ascii_strcasecmp(want, got) != 0) {
            size_t off = data_offset(st, t);
            g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                        "%s: tensor '%s' is corrupt: CRC-32 %s, the checkpoint recorded %s "
                        "(its bytes %zu..%zu of the data area)",
                        path, t->name, got, want, off, off + t->nbytes);
            return FALSE;
        }
    }
    if (json_object_get_size(sums) != tdm_safetensors_count(st)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: the checkpoint's metadata has %u checksums for %u tensors (a tensor "
                    "is missing)",
                    path, json_object_get_size(sums), tdm_safetensors_count(st));
        return FALSE;
    }
    return TRUE;
}

TdmSafeTensors *tdm_checkpoint_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    g_autoptr(TdmSafeTensors) st = tdm_safetensors_load(path, error);
    if (st == NULL) {
        return NULL;
    }
    const char *format = tdm_safetensors_metadata(st, "format");
    const char *version = tdm_safetensors_metadata(st, "format_version");
    if (g_strcmp0(format, TDM_CHECKPOINT_FORMAT) != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: not a Tandem checkpoint (metadata format '%s', not '%s'; --init loads "
                    "weights alone)",
                    path, format != NULL ? format : "(none)", TDM_CHECKPOINT_FORMAT);
        return NULL;
    }
    if (g_strcmp0(version, TDM_CHECKPOINT_FORMAT_VERSION) != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: checkpoint format version '%s'; this Tandem reads version %s", path,
                    version != NULL ? version : "(none)", TDM_CHECKPOINT_FORMAT_VERSION);
        return NULL;
    }
    if (!tdm_checkpoint_verify(st, path, error)) {
        return NULL;
    }
    return g_steal_pointer(&st);
}

/* The step of a checkpoint's file name, or -1 for any other name. */
static int64_t name_step(const char *name)
{
    size_t len = strlen(name);
    const size_t plen = strlen(CKPT_PREFIX), slen = strlen(CKPT_SUFFIX);
    if (len != plen + CKPT_DIGITS + slen || !g_str_has_prefix(name, CKPT_PREFIX) ||
        !g_str_has_suffix(name, CKPT_SUFFIX)) {
        return -1;
    }
    int64_t step = 0;
    for (size_t i = plen; i < plen + CKPT_DIGITS; i++) {
        if (!g_ascii_isdigit(name[i])) {
            return -1;
        }
        step = step * 10 + (name[i] - '0');
    }
    return step;
}

static gint compare_steps_desc(gconstpointer a, gconstpointer b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The steps of DIR's checkpoints, newest first (transfer full). */
static GArray *list_steps(const char *dir, GError **error)
{
    GError *local = NULL;
    GDir *d = g_dir_open(dir, 0, &local);
    if (d == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "checkpoint directory %s: %s", dir,
                    local->message);
        g_error_free(local);
        return NULL;
    }
    GArray *steps = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        int64_t step = name_step(name);
        if (step >= 0) {
            g_array_append_val(steps, step);
        }
    }
    g_dir_close(d);
    g_array_sort(steps, compare_steps_desc);
    return steps;
}

char *tdm_checkpoint_path(const char *dir, int64_t step)
{
    g_return_val_if_fail(dir != NULL && step >= 0, NULL);
    g_autofree char *name =
        g_strdup_printf(CKPT_PREFIX "%0*" G_GINT64_FORMAT CKPT_SUFFIX, CKPT_DIGITS, step);
    return g_build_filename(dir, name, NULL);
}

char *tdm_checkpoint_find(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    if (!g_file_test(path, G_FILE_TEST_IS_DIR)) {
        if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                        "%s: no such checkpoint file or directory", path);
            return NULL;
        }
        return g_strdup(path);
    }
    g_autoptr(GArray) steps = list_steps(path, error);
    if (steps == NULL) {
        return NULL;
    }
    if (steps->len == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                    "%s: no checkpoint in this directory (no " CKPT_PREFIX "<step>" CKPT_SUFFIX ")",
                    path);
        return NULL;
    }
    return tdm_checkpoint_path(path, g_array_index(steps, int64_t, 0));
}

static void fsync_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

/* Points DIR/link_name at `target` (a name in DIR): a fresh link renamed
 * over the old one, so that the link is always whole. */
static gboolean link_replace(const char *dir, const char *link_name, const char *target,
                             GError **error)
{
    g_autofree char *tmp_name = g_strdup_printf(".%s.tmp-%d", link_name, (int)getpid());
    g_autofree char *tmp = g_build_filename(dir, tmp_name, NULL);
    g_autofree char *link = g_build_filename(dir, link_name, NULL);
    (void)g_unlink(tmp);
    if (symlink(target, tmp) != 0 || g_rename(tmp, link) != 0) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot point it at %s: %s", link, target,
                    g_strerror(e));
        (void)g_unlink(tmp);
        return FALSE;
    }
    fsync_dir(dir);
    return TRUE;
}

gboolean tdm_checkpoint_save(TdmSafeTensors *st, const char *dir, int64_t step, GError **error)
{
    g_return_val_if_fail(st != NULL && dir != NULL && step >= 0, FALSE);
    if (g_mkdir_with_parents(dir, 0777) != 0) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "checkpoint directory %s: %s", dir,
                    g_strerror(e));
        return FALSE;
    }
    tdm_checkpoint_set_checksums(st);
    g_autofree char *path = tdm_checkpoint_path(dir, step);
    if (!tdm_safetensors_save(st, path, error)) {
        return FALSE;
    }
    g_autofree char *base = g_path_get_basename(path);
    return link_replace(dir, "latest", base, error);
}

gboolean tdm_checkpoint_set_best(const char *dir, int64_t step, GError **error)
{
    g_return_val_if_fail(dir != NULL && step >= 0, FALSE);
    g_autofree char *path = tdm_checkpoint_path(dir, step);
    g_autofree char *base = g_path_get_basename(path);
    return link_replace(dir, "best", base, error);
}

/* The step of the checkpoint DIR/link_name points at, -1 if none. */
static int64_t link_step(const char *dir, const char *link_name)
{
    g_autofree char *link = g_build_filename(dir, link_name, NULL);
    g_autofree char *target = g_file_read_link(link, NULL);
    if (target == NULL) {
        return -1;
    }
    g_autofree char *base = g_path_get_basename(target);
    return name_step(base);
}

/* Removes what saves that were killed left in DIR: temporary files of
 * checkpoints and links. Only one process writes a checkpoint directory,
 * and it calls this after its own save is in place. */
static void remove_stale_temps(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d == NULL) {
        return;
    }
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        if ((g_str_has_prefix(name, "." CKPT_PREFIX) && strstr(name, CKPT_SUFFIX ".tmp-")) ||
            g_str_has_prefix(name, ".latest.tmp-") || g_str_has_prefix(name, ".best.tmp-")) {
            g_autofree char *path = g_build_filename(dir, name, NULL);
            (void)g_unlink(path);
        }
    }
    g_dir_close(d);
}

gboolean tdm_checkpoint_prune(const char *dir, int keep_last, GError **error)
{
    g_return_val_if_fail(dir != NULL, FALSE);
    remove_stale_temps(dir);
    if (keep_last <= 0) {
        return TRUE;
    }
    g_autoptr(GArray) steps = list_steps(dir, error);
    if (steps == NULL) {
        return FALSE;
    }
    const int64_t best = link_step(dir, "best"), latest = link_step(dir, "latest");
    for (guint i = (guint)keep_last; i < steps->len; i++) {
        int64_t step = g_array_index(steps, int64_t, i);
        if (step == best || step == latest) {
            continue;
        }
        g_autofree char *path = tdm_checkpoint_path(dir, step);
        if (g_unlink(path) != 0 && errno != ENOENT) {
            int e = errno;
            g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot delete an old checkpoint: %s",
                        path, g_strerror(e));
            return FALSE;
        }
    }
    fsync_dir(dir);
    return TRUE;
}

/* ---- optimizer state ---- */

static char *shape_text(int ndim, const int64_t *shape)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++) {
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d > 0 ? ", " : "", shape[d]);
    }
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The state table's keys, sorted, so that files come out the same. */
static GPtrArray *sorted_keys(GHashTable *state)
{
    GPtrArray *keys = g_ptr_array_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, state);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        g_ptr_array_add(keys, key);
    }
    g_ptr_array_sort(keys, compare_names);
    return keys;
}

gboolean tdm_optimizer_export_state(TdmOptimizer *opt, TdmSafeTensors *st, const char *prefix,
                                    GError **error)
{
    g_return_val_if_fail(opt != NULL && st != NULL && prefix != NULL, FALSE);
    g_autoptr(GPtrArray) keys = sorted_keys(opt->state);
    for (guint i = 0; i < keys->len; i++) {
        const char *key = keys->pdata[i];
        TdmTensor *t = g_hash_table_lookup(opt->state, key);
        const int64_t numel = tdm_tensor_numel(t);
        g_autofree float *host = g_new(float, MAX(numel, 1));
        if (!tdm_tensor_read(t, host, error)) {
            g_prefix_error(error, "optimizer state %s: ", key);
            return FALSE;
        }
        g_autofree char *name = g_strconcat(prefix, key, NULL);
        tdm_safetensors_add(st, name, TDM_DTYPE_F32, t->ndim, t->shape, host);
    }
    return TRUE;
}

gboolean tdm_optimizer_import_state(TdmOptimizer *opt, const TdmSafeTensors *st, const char *prefix,
                                    const char *path, GError **error)
{
    g_return_val_if_fail(opt != NULL && st != NULL && prefix != NULL && path != NULL, FALSE);
    /* every tensor under the prefix must be a state of this optimizer */
    for (guint i = 0; i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *f = tdm_safetensors_index(st, i);
        if (g_str_has_prefix(f->name, prefix) &&
            !g_hash_table_contains(opt->state, f->name + strlen(prefix))) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                        "%s: optimizer state '%s' has no place in this run's optimizer (another "
                        "optimizer, momentum or set of frozen parameters?)",
                        path, f->name);
            return FALSE;
        }
    }
    g_autoptr(GPtrArray) keys = sorted_keys(opt->state);
    for (guint i = 0; i < keys->len; i++) {
        const char *key = keys->pdata[i];
        TdmTensor *t = g_hash_table_lookup(opt->state, key);
        g_autofree char *name = g_strconcat(prefix, key, NULL);
        const TdmSafeTensor *f = tdm_safetensors_get(st, name);
        g_autofree char *want = shape_text(t->ndim, t->shape);
        if (f == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND,
                        "%s: optimizer state '%s' (shape %s) is missing", path, name, want);
            return FALSE;
        }
        gboolean same = f->dtype == TDM_DTYPE_F32 && f->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) {
            same = f->shape[d] == t->shape[d];
        }
        if (!same) {
            g_autofree char *got = shape_text(f->ndim, f->shape);
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "%s: optimizer state '%s' has shape %s in this run but %s in the file",
                        path, name, want, got);
            return FALSE;
        }
        /* the data area need not be aligned: hand the backend a copy */
        g_autofree gpointer aligned = g_malloc(MAX(f->nbytes, 1));
        memcpy(aligned, f->data, f->nbytes);
        if (!tdm_tensor_write(t, aligned, error)) {
            g_prefix_error(error, "%s: optimizer state '%s': ", path, name);
            return FALSE;
        }
    }
    return TRUE;
}

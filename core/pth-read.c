/* SPDX-License-Identifier: MIT */
/* core/pth-read.c - reading PyTorch's zip checkpoint format (torch.save of
 * a state dict, as torchvision's pretrained files are), and picking a
 * weights file's format by its content.
 *
 * torch.save (1.6 and later) writes a zip archive of stored entries under
 * one top folder whose name varies: <top>/data.pkl, a pickle of the state
 * dict whose tensors refer by persistent id to their storages, one entry
 * <top>/data/<key> of raw little-endian elements per storage, and
 * <top>/version and <top>/byteorder. The archive is read through libzip,
 * which checks its directory and every entry's CRC; the pickle through the
 * strict reader of core/pickle.c, which calls nothing. This file then
 * finds the state dict (the top dict, or its "state_dict" or "model"
 * entry, as training scripts wrap it), checks each tensor's view against
 * its storage (offset, shape and strides must stay inside it) and copies
 * it out contiguous into a TdmSafeTensors, so that loading into a model
 * and its name and shape checks are the safetensors path's own. F16 and
 * BF16 storages become F32 (exactly); i64 ones (BatchNorm's
 * num_batches_tracked) stay i64. Every refusal names the file, the entry
 * or tensor, and the byte offset in the pickle where one applies.
 */
#include "config.h"

#include <glib/gstdio.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zip.h>

#include "internal.h"
#include "pickle.h"

/* The pickle of a state dict is small (names and view descriptions);
 * this bounds what a hostile directory entry can make the reader
 * allocate before any check. */
#define MAX_PICKLE_BYTES (256u << 20)

typedef struct {
    const char *path; /* the file, for messages */
    zip_t *za;
    char *top;            /* "<top>/" */
    char *pkl_name;       /* "<top>/data.pkl", for messages */
    GHashTable *storages; /* key -> Storage * */
    guint64 file_size;    /* the archive's bytes: no stored entry holds more */
} PthReader;

typedef struct {
    const TdmPv *first; /* the persistent id that named it first */
    guint8 *data;
    size_t nbytes;
} Storage;

static void storage_free(gpointer p)
{
    Storage *s = p;
    g_free(s->data);
    g_free(s);
}

/* ---- the archive ------------------------------------------------------ */

/* The whole of entry `name` (transfer full), after libzip checked its CRC. */
static guint8 *read_entry(PthReader *r, zip_int64_t index, size_t max, size_t *size_out,
                          GError **error)
{
    const char *name = zip_get_name(r->za, (zip_uint64_t)index, ZIP_FL_ENC_RAW);
    zip_stat_t sb;
    zip_stat_init(&sb);
    if (zip_stat_index(r->za, (zip_uint64_t)index, 0, &sb) != 0 || !(sb.valid & ZIP_STAT_SIZE) ||
        !(sb.valid & ZIP_STAT_COMP_METHOD)) {
        tdm_file_corrupt(error, r->path, "zip entry %s: %s", name, zip_strerror(r->za));
        return NULL;
    }
    /* torch.save stores entries uncompressed; a compressed one could claim
     * any size, so it is refused rather than trusted. */
    if (sb.comp_method != ZIP_CM_STORE) {
        tdm_file_corrupt(error, r->path,
                         "zip entry %s is compressed (method %u); torch.save writes "
                         "stored entries",
                         name, (unsigned)sb.comp_method);
        return NULL;
    }
    /* A stored entry's bytes are in the file: a size beyond it is a lie
     * of the directory (and would be allocated before any read fails). */
    if (r->file_size > 0 && sb.size > r->file_size) {
        tdm_file_corrupt(error, r->path,
                         "zip entry %s claims %" G_GUINT64_FORMAT " bytes, more than the "
                         "archive's %" G_GUINT64_FORMAT,
                         name, (guint64)sb.size, r->file_size);
        return NULL;
    }
    if (sb.size > max) {
        tdm_file_corrupt(error, r->path,
                         "zip entry %s is %" G_GUINT64_FORMAT " bytes, more than the "
                         "%zu it may hold",
                         name, (guint64)sb.size, max);
        return NULL;
    }
    zip_file_t *zf = zip_fopen_index(r->za, (zip_uint64_t)index, 0);
    if (zf == NULL) {
        tdm_file_corrupt(error, r->path, "zip entry %s: %s", name, zip_strerror(r->za));
        return NULL;
    }
    guint8 *buf = g_try_malloc(MAX((size_t)sb.size, 1));
    if (buf == NULL) {
        zip_fclose(zf);
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO,
                    "%s: no memory for the %" G_GUINT64_FORMAT " bytes of zip entry %s", r->path,
                    (guint64)sb.size, name);
        return NULL;
    }
    size_t got = 0;
    gboolean ok = TRUE;
    while (ok && got < sb.size) {
        zip_int64_t n = zip_fread(zf, buf + got, sb.size - got);
        ok = n > 0;
        got += ok ? (size_t)n : 0;
    }
    /* One more read reaches the end of the entry, where libzip checks the
     * CRC. */
    guint8 extra;
    ok = ok && zip_fread(zf, &extra, 1) == 0;
    if (!ok) {
        zip_error_t *ze = zip_file_get_error(zf);
        tdm_file_corrupt(
            error, r->path, "zip entry %s: %s after %zu of %" G_GUINT64_FORMAT " bytes", name,
            zip_error_code_zip(ze) != ZIP_ER_OK ? zip_error_strerror(ze)
                                                : "it is shorter than its directory entry says",
            got, (guint64)sb.size);
        zip_fclose(zf);
        g_free(buf);
        return NULL;
    }
    zip_fclose(zf);
    *size_out = (size_t)sb.size;
    return buf;
}

static zip_int64_t find_entry(PthReader *r, const char *rel)
{
    g_autofree char *name = g_strconcat(r->top, rel, NULL);
    return zip_name_locate(r->za, name, ZIP_FL_ENC_RAW);
}

/* The top folder: the one holding data.pkl, which must be alone. */
static gboolean find_top(PthReader *r, GError **error)
{
    zip_int64_t n = zip_get_num_entries(r->za, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(r->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        const char *slash = name != NULL ? strchr(name, '/') : NULL;
        if (slash == NULL || strcmp(slash, "/data.pkl") != 0) {
            continue;
        }
        if (r->top != NULL) {
            return tdm_file_corrupt(error, r->path, "two pickles in the archive: %s and %s",
                                    r->pkl_name, name);
        }
        r->top = g_strndup(name, (gsize)(slash - name) + 1);
        r->pkl_name = g_strdup(name);
    }
    if (r->top == NULL) {
        return tdm_file_corrupt(error, r->path,
                                "a zip archive without <folder>/data.pkl: not a file "
                                "torch.save writes (%" G_GINT64_FORMAT " entries)",
                                (gint64)n);
    }
    zip_int64_t bo = find_entry(r, "byteorder");
    if (bo >= 0) {
        size_t len = 0;
        g_autofree guint8 *text = read_entry(r, bo, 16, &len, error);
        if (text == NULL) {
            return FALSE;
        }
        if (len != strlen("little") || memcmp(text, "little", len) != 0) {
            return tdm_file_corrupt(error, r->path,
                                    "%sbyteorder says '%.*s': only little-endian "
                                    "storages are read",
                                    r->top, (int)len, (const char *)text);
        }
    }
    return TRUE;
}

static Storage *get_storage(PthReader *r, const TdmPv *pid, GError **error)
{
    Storage *s = g_hash_table_lookup(r->storages, pid->s);
    if (s != NULL) {
        if (s->first->storage_type != pid->storage_type || s->first->numel != pid->numel) {
            tdm_file_corrupt(error, r->path,
                             "storage '%s' is torch.%s of %" G_GINT64_FORMAT " elements "
                             "at byte %zu of %s but torch.%s of %" G_GINT64_FORMAT " at byte %zu",
                             pid->s, s->first->storage_type->name, s->first->numel, s->first->at,
                             r->pkl_name, pid->storage_type->name, pid->numel, pid->at);
            return NULL;
        }
        return s;
    }
    g_autofree char *rel = g_strconcat("data/", pid->s, NULL);
    zip_int64_t index = find_entry(r, rel);
    if (index < 0) {
        tdm_file_corrupt(error, r->path, "storage '%s' (byte %zu of %s) has no entry %s%s", pid->s,
                         pid->at, r->pkl_name, r->top, rel);
        return NULL;
    }
    size_t size = 0;
    guint8 *data = read_entry(r, index, G_MAXSIZE, &size, error);
    if (data == NULL) {
        return NULL;
    }
    guint64 want = 0;
    if (!g_uint64_checked_mul(&want, (guint64)pid->numel, pid->storage_type->elsize) ||
        want != size) {
        tdm_file_corrupt(error, r->path,
                         "%s%s is %zu bytes but storage '%s' (byte %zu of %s) is %" G_GINT64_FORMAT
                         " elements of torch.%s",
                         r->top, rel, size, pid->s, pid->at, r->pkl_name, pid->numel,
                         pid->storage_type->name);
        g_free(data);
        return NULL;
    }
    s = g_new0(Storage, 1);
    s->first = pid;
    s->data = data;
    s->nbytes = size;
    g_hash_table_insert(r->storages, pid->s, s);
    return s;
}

/* ---- tensors ----------------------------------------------------------- */

static guint32 half_bits_to_float_bits(guint16 h)
{
    guint32 sign = (guint32)(h & 0x8000) << 16;
    guint32 exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) {
        return sign | 0x7f800000u | (man << 13);
    }
    if (exp != 0) {
        return sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    if (man == 0) {
        return sign;
    }
    /* A subnormal half is a normal float: shift the leading 1 out. */
    int e = 127 - 15 + 1;
    while (!(man & 0x400)) {
        man <<= 1;
        e--;
    }
    return sign | ((guint32)e << 23) | ((man & 0x3ff) << 13);
}

static char *shape_string(int ndim, const gint64 *v)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++) {
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d > 0 ? ", " : "", v[d]);
    }
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

/* Copy tensor `t` (the state dict's `name`) out of its storage into `st`. */
static gboolean add_tensor(PthReader *r, TdmSafeTensors *st, const char *name, const TdmPv *t,
                           GError **error)
{
    const TdmPv *pid = t->storage;
    const TdmPickleStorageType *type = pid->storage_type;
    if (type->dtype < 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: tensor '%s' (byte %zu of %s) "
                    "is a torch.%s; Tandem reads Float, Half, BFloat16, Long, Int and Byte "
                    "storages",
                    r->path, name, t->at, r->pkl_name, type->name);
        return FALSE;
    }
    Storage *s = get_storage(r, pid, error);
    if (s == NULL) {
        return FALSE;
    }
    g_autofree char *shape = shape_string(t->ndim, t->size);
    g_autofree char *strides = shape_string(t->ndim, t->stride);
    guint64 numel = 1, last = (guint64)t->offset;
    gboolean fits = TRUE;
    for (int d = 0; d < t->ndim; d++) {
        fits = fits && g_uint64_checked_mul(&numel, numel, (guint64)t->size[d]);
    }
    for (int d = 0; fits && numel > 0 && d < t->ndim; d++) {
        guint64 reach = 0;
        fits = g_uint64_checked_mul(&reach, (guint64)t->size[d] - 1, (guint64)t->stride[d]) &&
               g_uint64_checked_add(&last, last, reach);
    }
    /* A view may not reach past its storage, nor hold more elements than
     * it (a broadcast view would make a small file expand without bound). */
    if (!fits || numel > (guint64)pid->numel || (numel > 0 && last >= (guint64)pid->numel)) {
        return tdm_file_corrupt(
            error, r->path,
            "tensor '%s' (byte %zu of %s): offset %" G_GINT64_FORMAT
            ", shape %s, strides %s reach past storage '%s' of %" G_GINT64_FORMAT " elements",
            name, t->at, r->pkl_name, t->offset, shape, strides, pid->s, pid->numel);
    }
    size_t el = type->elsize;
    guint8 *view = g_malloc(MAX((size_t)numel * el, 1));
    gint64 idx[TDM_MAX_DIMS] = {0};
    guint64 src = (guint64)t->offset;
    for (guint64 k = 0; k < numel; k++) {
        memcpy(view + k * el, s->data + src * el, el);
        /* Next index, last dimension fastest; src follows it. */
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->size[d]) {
                src += (guint64)t->stride[d];
                break;
            }
            src -= (guint64)t->stride[d] * (guint64)(t->size[d] - 1);
            idx[d] = 0;
        }
    }
    TdmDType dtype = (TdmDType)type->dtype;
    if (dtype == TDM_DTYPE_F16 || dtype == TDM_DTYPE_BF16) {
        guint32 *f = g_malloc(MAX((size_t)numel, 1) * sizeof(guint32));
        for (guint64 k = 0; k < numel; k++) {
            guint16 h = (guint16)(view[2 * k] | (view[2 * k + 1] << 8));
            f[k] = dtype == TDM_DTYPE_F16 ? half_bits_to_float_bits(h) : (guint32)h << 16;
        }
        g_free(view);
        view = (guint8 *)f;
        dtype = TDM_DTYPE_F32;
    }
    tdm_safetensors_add(st, name, dtype, t->ndim, t->size, view);
    g_free(view);
    return TRUE;
}

/* Whether `d` maps strings to tensors only; else *bad is its first entry
 * that does not (key index in d->items). */
static gboolean is_state_dict(const TdmPv *d, guint *bad)
{
    for (guint i = 0; i + 1 < d->items->len; i += 2) {
        const TdmPv *k = d->items->pdata[i], *v = d->items->pdata[i + 1];
        if (k->kind != TDM_PV_STR || v->kind != TDM_PV_TENSOR) {
            *bad = i;
            return FALSE;
        }
    }
    return TRUE;
}

static const TdmPv *dict_get(const TdmPv *d, const char *key)
{
    for (guint i = 0; i + 1 < d->items->len; i += 2) {
        const TdmPv *k = d->items->pdata[i];
        if (k->kind == TDM_PV_STR && strcmp(k->s, key) == 0) {
            return d->items->pdata[i + 1];
        }
    }
    return NULL;
}

/* The error for `d`'s entry at key index `bad`, which is not a tensor. */
static void not_a_tensor(PthReader *r, const TdmPv *d, guint bad, const char *under, GError **error)
{
    const TdmPv *k = d->items->pdata[bad], *v = d->items->pdata[bad + 1];
    g_autofree char *key = k->kind == TDM_PV_STR
                               ? g_strdup_printf("'%s'", k->s)
                               : g_strdup_printf("(a %s key)", tdm_pickle_kind_name(k->kind));
    tdm_file_corrupt(error, r->path,
                     "%s: entry %s%s%s (byte %zu) is of type %s, not a tensor: expected a "
                     "state dict, or a dict with one under \"state_dict\" or \"model\"",
                     r->pkl_name, key, under != NULL ? " under " : "", under != NULL ? under : "",
                     v->at, tdm_pickle_kind_name(v->kind));
}

/* The state dict: the top dict, or its "state_dict" or "model" entry. The
 * wrapper's other entries were parsed as strictly as the rest and are
 * ignored. */
static const TdmPv *find_state_dict(PthReader *r, const TdmPv *root, GError **error)
{
    if (root->kind != TDM_PV_DICT) {
        tdm_file_corrupt(error, r->path, "%s holds a %s (byte %zu), not a state dict", r->pkl_name,
                         tdm_pickle_kind_name(root->kind), root->at);
        return NULL;
    }
    guint bad = 0;
    if (is_state_dict(root, &bad)) {
        return root;
    }
    const char *const wrappers[] = {"state_dict", "model"};
    for (size_t i = 0; i < G_N_ELEMENTS(wrappers); i++) {
        const TdmPv *v = dict_get(root, wrappers[i]);
        guint inner = 0;
        if (v != NULL && v->kind == TDM_PV_DICT) {
            if (is_state_dict(v, &inner)) {
                return v;
            }
            not_a_tensor(r, v, inner, wrappers[i], error);
            return NULL;
        }
    }
    not_a_tensor(r, root, bad, NULL, error);
    return NULL;
}

/* Whether the file starts as a pre-1.6 torch.save file: a pickle (PROTO)
 * or a tar archive. */
static gboolean legacy_format(const guint8 *head, size_t n)
{
    return (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) ||
           (n >= 262 && memcmp(head + 257, "ustar", 5) == 0);
}

/* Up to `n` first bytes of `path`; how many in *got. */
static gboolean read_head(const char *path, guint8 *head, size_t n, size_t *got, GError **error)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        int e = errno;
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot open: %s", path, g_strerror(e));
        return FALSE;
    }
    *got = fread(head, 1, n, f);
    fclose(f);
    return TRUE;
}

#define HEAD_BYTES 512

TdmSafeTensors *tdm_pth_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    guint8 head[HEAD_BYTES];
    size_t got = 0;
    if (!read_head(path, head, sizeof head, &got, error)) {
        return NULL;
    }
    if (legacy_format(head, got)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s: the legacy (before PyTorch "
                    "1.6) torch.save format, not a zip archive; re-save it with a newer torch: "
                    "torch.save(torch.load(f), f2)",
                    path);
        return NULL;
    }
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (za == NULL) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        tdm_file_corrupt(error, path, "not a readable zip archive: %s", zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return NULL;
    }
    GStatBuf fst;
    PthReader r = {
        .path = path,
        .za = za,
        .file_size = g_stat(path, &fst) == 0 ? (guint64)fst.st_size : 0,
        .storages = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, storage_free),
    };
    TdmSafeTensors *st = NULL;
    TdmPickle *pickle = NULL;
    GHashTable *names = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree guint8 *pkl = NULL;
    g_autofree char *what = NULL;
    size_t len = 0;
    if (!find_top(&r, error)) {
        goto out;
    }
    pkl = read_entry(&r, find_entry(&r, "data.pkl"), MAX_PICKLE_BYTES, &len, error);
    if (pkl == NULL) {
        goto out;
    }
    what = g_strdup_printf("%s (%s)", path, r.pkl_name);
    pickle = tdm_pickle_parse(what, pkl, len, error);
    const TdmPv *sd = pickle != NULL ? find_state_dict(&r, tdm_pickle_root(pickle), error) : NULL;
    if (sd == NULL) {
        goto out;
    }
    st = tdm_safetensors_new();
    for (guint i = 0; i + 1 < sd->items->len; i += 2) {
        const TdmPv *k = sd->items->pdata[i], *v = sd->items->pdata[i + 1];
        if (g_hash_table_contains(names, k->s)) {
            tdm_file_corrupt(error, path, "the state dict names '%s' twice (byte %zu of %s)", k->s,
                             k->at, r.pkl_name);
        } else {
            g_hash_table_add(names, k->s);
            if (add_tensor(&r, st, k->s, v, error)) {
                continue;
            }
        }
        tdm_safetensors_free(st);
        st = NULL;
        break;
    }
out:
    /* The tables' keys point into the pickle's values: free them first. */
    g_hash_table_destroy(names);
    g_hash_table_destroy(r.storages);
    tdm_pickle_free(pickle);
    g_free(r.top);
    g_free(r.pkl_name);
    zip_discard(za);
    return st;
}

TdmSafeTensors *tdm_weights_load(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    guint8 head[HEAD_BYTES];
    size_t got = 0;
    if (!read_head(path, head, sizeof head, &got, error)) {
        return NULL;
    }
    /* A zip archive starts with a local file header (or, empty, with the
     * end of its directory); a safetensors file with its header length. */
    if ((got >= 4 && memcmp(head, "PK\x03\x04", 4) == 0) ||
        (got >= 4 && memcmp(head, "PK\x05\x06", 4) == 0) || legacy_format(head, got)) {
        return tdm_pth_load(path, error);
    }
    return tdm_safetensors_load(path, error);
}

/* SPDX-License-Identifier: MIT */
/* core/pth-write.c - writing tensors as a PyTorch .pth file: the zip
 * format torch.save writes for a state dict, read back by
 * torch.load(f, weights_only=True).
 *
 * The pickle is the one torch.save makes, in protocol 2 and using only
 * what torch's weights-only reader accepts: an OrderedDict whose values
 * are torch._utils._rebuild_tensor_v2(storage, 0, shape, contiguous
 * strides, False, OrderedDict()), each storage a persistent id
 * ('storage', torch.XStorage, key, 'cpu', numel) naming the archive entry
 * archive/data/<key>. The archive is built with libzip, every entry
 * stored uncompressed, and each data entry starts on a 64-byte boundary
 * as torch aligns them (so that a reader may map the file): libzip writes
 * entries in order, each as a 30-byte local header, its name, its extra
 * fields and its bytes, so the padding is an extra field (id "FB", as
 * torch's) sized from the offsets this file keeps. libzip writes to a
 * temporary file and renames it over the destination; the file and its
 * directory are then synced, as the safetensors writer does.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "internal.h"

#define TOP "archive/"
#define DATA_ALIGN 64
#define LOCAL_HEADER_BYTES 30
#define EXTRA_HEADER_BYTES 4
#define PAD_EXTRA_ID 0x4246 /* "FB" */
/* Python's pickler writes SETITEMS in batches of this many pairs. */
#define SETITEMS_BATCH 1000
/* What torch 1.13 writes to archive/version. */
#define ARCHIVE_VERSION "3\n"

static const char *storage_class(TdmDType dtype)
{
    switch (dtype) {
    case TDM_DTYPE_F32:
        return "FloatStorage";
    case TDM_DTYPE_F16:
        return "HalfStorage";
    case TDM_DTYPE_BF16:
        return "BFloat16Storage";
    case TDM_DTYPE_I64:
        return "LongStorage";
    case TDM_DTYPE_I32:
        return "IntStorage";
    case TDM_DTYPE_U8:
        return "ByteStorage";
    }
    return NULL;
}

/* ---- the pickle ------------------------------------------------------- */

static void emit_int(GByteArray *b, gint64 v)
{
    guint8 buf[10];
    if (v >= 0 && v < 256) {
        buf[0] = 'K';
        buf[1] = (guint8)v;
        g_byte_array_append(b, buf, 2);
    } else if (v >= 0 && v < 65536) {
        buf[0] = 'M';
        buf[1] = (guint8)v;
        buf[2] = (guint8)(v >> 8);
        g_byte_array_append(b, buf, 3);
    } else if (v >= G_MININT32 && v <= G_MAXINT32) {
        buf[0] = 'J';
        for (int i = 0; i < 4; i++) {
            buf[1 + i] = (guint8)((guint32)v >> (8 * i));
        }
        g_byte_array_append(b, buf, 5);
    } else {
        buf[0] = 0x8a; /* LONG1, 8 bytes of two's complement */
        buf[1] = 8;
        for (int i = 0; i < 8; i++) {
            buf[2 + i] = (guint8)((guint64)v >> (8 * i));
        }
        g_byte_array_append(b, buf, 10);
    }
}

static void emit_op(GByteArray *b, guint8 op)
{
    g_byte_array_append(b, &op, 1);
}

static void emit_str(GByteArray *b, const char *s)
{
    guint32 n = (guint32)strlen(s);
    guint8 head[5] = {'X', (guint8)n, (guint8)(n >> 8), (guint8)(n >> 16), (guint8)(n >> 24)};
    g_byte_array_append(b, head, 5);
    g_byte_array_append(b, (const guint8 *)s, n);
}

static void emit_global(GByteArray *b, const char *module, const char *name)
{
    emit_op(b, 'c');
    g_byte_array_append(b, (const guint8 *)module, (guint)strlen(module));
    emit_op(b, '\n');
    g_byte_array_append(b, (const guint8 *)name, (guint)strlen(name));
    emit_op(b, '\n');
}

static void emit_int_tuple(GByteArray *b, int n, const gint64 *v)
{
    if (n == 0) {
        emit_op(b, ')');
        return;
    }
    if (n > 3) {
        emit_op(b, '(');
    }
    for (int i = 0; i < n; i++) {
        emit_int(b, v[i]);
    }
    emit_op(b, n > 3 ? 't' : (guint8)(0x84 + n)); /* TUPLE or TUPLE1..3 */
}

static void emit_ordered_dict(GByteArray *b)
{
    emit_global(b, "collections", "OrderedDict");
    emit_op(b, ')');
    emit_op(b, 'R');
}

/* _rebuild_tensor_v2(storage `key`, 0, shape, strides, False, OrderedDict()) */
static void emit_tensor(GByteArray *b, const TdmSafeTensor *t, const char *key)
{
    gint64 shape[TDM_MAX_DIMS], stride[TDM_MAX_DIMS];
    gint64 numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        shape[d] = t->shape[d];
        stride[d] = numel;
        numel *= t->shape[d];
    }
    emit_global(b, "torch._utils", "_rebuild_tensor_v2");
    emit_op(b, '(');
    emit_op(b, '(');
    emit_str(b, "storage");
    emit_global(b, "torch", storage_class(t->dtype));
    emit_str(b, key);
    emit_str(b, "cpu");
    emit_int(b, numel);
    emit_op(b, 't');
    emit_op(b, 'Q'); /* BINPERSID */
    emit_int(b, 0);
    emit_int_tuple(b, t->ndim, shape);
    emit_int_tuple(b, t->ndim, stride);
    emit_op(b, 0x89); /* NEWFALSE: requires_grad */
    emit_ordered_dict(b);
    emit_op(b, 't');
    emit_op(b, 'R');
}

static GByteArray *pickle_build(const TdmSafeTensors *st)
{
    GByteArray *b = g_byte_array_new();
    guint8 proto[2] = {0x80, 2};
    g_byte_array_append(b, proto, 2);
    emit_ordered_dict(b);
    guint n = tdm_safetensors_count(st);
    for (guint i = 0; i < n; i++) {
        if (i % SETITEMS_BATCH == 0) {
            emit_op(b, '(');
        }
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        g_autofree char *key = g_strdup_printf("%u", i);
        emit_str(b, t->name);
        emit_tensor(b, t, key);
        if (i % SETITEMS_BATCH == SETITEMS_BATCH - 1 || i == n - 1) {
            emit_op(b, 'u'); /* SETITEMS */
        }
    }
    emit_op(b, '.');
    return b;
}

/* ---- the archive ------------------------------------------------------ */

typedef struct {
    const char *path;
    zip_t *za;
    guint64 offset; /* where the next entry's local header starts */
} Writer;

static gboolean zip_failed(Writer *w, const char *what, GError **error)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: %s: %s", w->path, what,
                zip_strerror(w->za));
    return FALSE;
}

/* Add entry TOP `name` holding `data` (not copied: it must live until
 * zip_close), stored, its data aligned to DATA_ALIGN when `align`. */
static gboolean add_entry(Writer *w, const char *name, const void *data, size_t len,
                          gboolean align, GError **error)
{
    g_autofree char *full = g_strconcat(TOP, name, NULL);
    zip_source_t *src = zip_source_buffer(w->za, len > 0 ? data : "", len, 0);
    if (src == NULL) {
        return zip_failed(w, full, error);
    }
    zip_int64_t index = zip_file_add(w->za, full, src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
        zip_source_free(src);
        return zip_failed(w, full, error);
    }
    if (zip_set_file_compression(w->za, (zip_uint64_t)index, ZIP_CM_STORE, 0) != 0) {
        return zip_failed(w, full, error);
    }
    guint64 header = LOCAL_HEADER_BYTES + strlen(full);
    if (align) {
        guint64 start = w->offset + header + EXTRA_HEADER_BYTES;
        size_t pad = (size_t)((DATA_ALIGN - start % DATA_ALIGN) % DATA_ALIGN);
        guint8 zeros[DATA_ALIGN] = {0};
        if (zip_file_extra_field_set(w->za, (zip_uint64_t)index, PAD_EXTRA_ID,
                                     ZIP_EXTRA_FIELD_NEW, zeros, (zip_uint16_t)pad,
                                     ZIP_FL_LOCAL) != 0) {
            return zip_failed(w, full, error);
        }
        header += EXTRA_HEADER_BYTES + pad;
    }
    w->offset += header + len;
    return TRUE;
}

static gboolean sync_file(const char *path, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: fsync failed: %s", path, g_strerror(e));
        return FALSE;
    }
    close(fd);
    g_autofree char *dir = g_path_get_dirname(path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return TRUE;
}

gboolean tdm_pth_save(const TdmSafeTensors *st, const char *path, GError **error)
{
    g_return_val_if_fail(st != NULL && path != NULL, FALSE);
    for (guint i = 0; i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        if (storage_class(t->dtype) == NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                        "%s: tensor '%s' has a dtype a .pth file cannot hold", path, t->name);
            return FALSE;
        }
    }
    if (!tdm_save_path_check(path, error)) {
        return FALSE;
    }
    int zerr = 0;
    Writer w = {.path = path};
    w.za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (w.za == NULL) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: cannot create: %s", path,
                    zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return FALSE;
    }
    g_autoptr(GByteArray) pkl = pickle_build(st);
    gboolean ok = add_entry(&w, "data.pkl", pkl->data, pkl->len, FALSE, error) &&
                  add_entry(&w, "byteorder", "little", strlen("little"), FALSE, error);
    for (guint i = 0; ok && i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        g_autofree char *name = g_strdup_printf("data/%u", i);
        ok = add_entry(&w, name, t->data, t->nbytes, TRUE, error);
    }
    ok = ok && add_entry(&w, "version", ARCHIVE_VERSION, strlen(ARCHIVE_VERSION), FALSE, error);
    if (!ok) {
        zip_discard(w.za);
        return FALSE;
    }
    if (zip_close(w.za) != 0) {
        zip_failed(&w, "cannot write the archive", error);
        zip_discard(w.za);
        return FALSE;
    }
    return sync_file(path, error);
}

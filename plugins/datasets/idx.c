/* SPDX-License-Identifier: MIT */
/* plugins/datasets/idx.c - the IDX dataset reader (MNIST, Fashion-MNIST).
 *
 * A dataset directory holds train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each raw or gzipped
 * (".gz"). Everything in the files is checked (magic numbers, dimensions,
 * file length against the header, equal image and label counts, label
 * range) and each error names the file and the byte offset.
 *
 * Start-up time matters more than anything else here: inflating 47 MB of
 * training images takes longer than the first training steps. So a gzipped
 * image file is inflated lazily and progressively into a buffer sized from
 * the header: a read of sample i inflates, under a mutex, only up to the end
 * of sample i (plus a small read-ahead), and readers of samples already
 * inflated never take the lock. A run with --limit 10000 never inflates
 * beyond the first 10000 images. Raw files are memory-mapped. The label file
 * (60 kB) is read whole at open so that its values can be checked at once,
 * and the gzip trailer's size field is checked against the header of the
 * image file at open, so a truncated download fails before training starts.
 * When a loader announces (prepare) that it will read more than half of a
 * gzipped image file and nothing of it is inflated yet, the whole file is
 * inflated at once by libdeflate, about twice as fast as zlib; should
 * libdeflate refuse the file, zlib's progressive inflate takes over and
 * reports where the data goes wrong.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>
#ifdef HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <tandem/data.h>
#include <tandem/plugin.h>

#include "datasets-util.h"

#define IDX_MAGIC_U8_1D 0x00000801u
#define IDX_MAGIC_U8_3D 0x00000803u
#define READ_AHEAD_BYTES (256u << 10)
#define MAX_DATA_BYTES ((guint64)16 << 30)
/* The header: the magic, then a big-endian u32 per dimension (3 at most). */
#define IDX_MAX_DIMS 3
#define IDX_MAX_HEADER_BYTES (4 + 4 * IDX_MAX_DIMS)
/* A gzip member's fixed header (10 bytes) and trailer (CRC32, ISIZE: 8). */
#define GZIP_MIN_BYTES 18
/* zlib's windowBits: the largest window (15), +16 for the gzip format only. */
#define GZIP_WINDOW_BITS (15 + 16)

typedef struct {
    char *path;
    GMappedFile *map;      /* the file as stored (compressed or raw) */
    const guint8 *src;
    size_t src_len;
    gboolean gz;
    z_stream zs;
    gboolean zs_open;
    guint8 *data;          /* gz: inflated bytes (header included); raw: the map */
    size_t total;          /* header + payload, as the header says */
    size_t header_len;
    size_t avail;          /* bytes of `data` ready; read atomically */
    GMutex lock;
    GError *failure;       /* sticky: the first inflate error */
    int64_t count;
    int rows, cols;
} IdxFile;

typedef struct {
    IdxFile images;
    IdxFile labels;
    size_t sample_bytes;
} IdxDataset;

static guint32 be32(const guint8 *p)
{
    return ((guint32)p[0] << 24) | ((guint32)p[1] << 16) | ((guint32)p[2] << 8) | p[3];
}

static void idx_file_clear(IdxFile *f)
{
    if (f->zs_open) {
        inflateEnd(&f->zs);
    }
    if (f->gz) {
        g_free(f->data);
    }
    if (f->map != NULL) {
        g_mapped_file_unref(f->map);
    }
    g_clear_error(&f->failure);
    g_mutex_clear(&f->lock);
    g_free(f->path);
    memset(f, 0, sizeof(*f));
}

/* Inflate until `want` bytes of data are available (or the whole file).
 * Called with f->lock held. */
static gboolean idx_inflate_locked(IdxFile *f, size_t want, GError **error)
{
    if (f->failure != NULL) {
        g_propagate_error(error, g_error_copy(f->failure));
        return FALSE;
    }
    size_t avail = f->avail;
    if (want <= avail) {
        return TRUE;
    }
    size_t target = MIN(f->total, MAX(want, avail + READ_AHEAD_BYTES));
    f->zs.next_out = f->data + avail;
    f->zs.avail_out = (uInt)(target - avail);
    int rc = Z_OK;
    while (f->zs.avail_out > 0) {
        rc = inflate(&f->zs, Z_NO_FLUSH);
        if (rc == Z_STREAM_END || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR || rc == Z_NEED_DICT ||
            (rc == Z_BUF_ERROR && f->zs.avail_in == 0)) {
            break;
        }
    }
    size_t got = (size_t)(f->zs.next_out - f->data);
    if (rc == Z_DATA_ERROR || rc == Z_MEM_ERROR || rc == Z_NEED_DICT) {
        g_set_error(&f->failure, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: corrupt gzip data at byte %zu of the compressed file: %s", f->path,
                    (size_t)(f->zs.next_in - f->src), f->zs.msg ? f->zs.msg : "inflate failed");
    } else if (got < target) {
        g_set_error(&f->failure, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s: data ends at byte %zu (uncompressed) but the header needs %zu bytes "
                    "(truncated file)", f->path, got, f->total);
    } else if (got == f->total && rc != Z_STREAM_END) {
        /* Everything the header announced is here; the stream must end now. */
        guint8 extra;
        f->zs.next_out = &extra;
        f->zs.avail_out = 1;
        rc = inflate(&f->zs, Z_NO_FLUSH);
        if (rc != Z_STREAM_END) {
            g_set_error(&f->failure, TDM_ERROR, TDM_ERROR_CORRUPT,
                        "%s: more data after byte %zu (uncompressed), where the header says the "
                        "file ends", f->path, f->total);
        }
    }
    __atomic_store_n(&f->avail, got, __ATOMIC_RELEASE);
    if (f->failure != NULL) {
        g_propagate_error(error, g_error_copy(f->failure));
        return FALSE;
    }
    return TRUE;
}

static gboolean idx_ensure(IdxFile *f, size_t want, GError **error)
{
    if (__atomic_load_n(&f->avail, __ATOMIC_ACQUIRE) >= want) {
        return TRUE;
    }
    g_mutex_lock(&f->lock);
    gboolean ok = idx_inflate_locked(f, want, error);
    g_mutex_unlock(&f->lock);
    return ok;
}

static gboolean corrupt(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean corrupt(GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ds_failv(error, TDM_ERROR_CORRUPT, fmt, ap);
    va_end(ap);
    return FALSE;
}

/* Find "<dir>/<stem>" or "<dir>/<stem>.gz". */
static char *idx_find(const char *dir, const char *stem, gboolean *gz, GError **error)
{
    g_autofree char *raw = g_build_filename(dir, stem, NULL);
    if (g_file_test(raw, G_FILE_TEST_IS_REGULAR)) {
        *gz = FALSE;
        return g_steal_pointer(&raw);
    }
    char *zipped = g_strconcat(raw, ".gz", NULL);
    if (g_file_test(zipped, G_FILE_TEST_IS_REGULAR)) {
        *gz = TRUE;
        return zipped;
    }
    g_free(zipped);
    g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s: no %s or %s.gz in this directory", dir, stem,
                stem);
    return NULL;
}

/* Open one IDX file and validate its header: magic, dimensions and the data
 * length it implies against the file (raw) or the gzip trailer. */
static gboolean idx_file_open(IdxFile *f, const char *dir, const char *stem, guint32 magic,
                              GError **error)
{
    g_mutex_init(&f->lock);
    f->path = idx_find(dir, stem, &f->gz, error);
    if (f->path == NULL) {
        return FALSE;
    }
    GError *local = NULL;
    f->map = g_mapped_file_new(f->path, FALSE, &local);
    if (f->map == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "%s", local->message);
        g_error_free(local);
        return FALSE;
    }
    f->src = (const guint8 *)g_mapped_file_get_contents(f->map);
    f->src_len = g_mapped_file_get_length(f->map);
    int ndims = magic == IDX_MAGIC_U8_3D ? 3 : 1;
    f->header_len = 4 + 4 * (size_t)ndims;
    guint8 header[IDX_MAX_HEADER_BYTES];

    if (f->gz) {
        if (f->src_len < GZIP_MIN_BYTES || f->src[0] != 0x1f || f->src[1] != 0x8b) {
            return corrupt(error, "%s: not a gzip file (bad gzip header at byte 0)", f->path);
        }
        if (inflateInit2(&f->zs, GZIP_WINDOW_BITS) != Z_OK) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "%s: cannot start zlib", f->path);
            return FALSE;
        }
        f->zs_open = TRUE;
        f->zs.next_in = (Bytef *)f->src;
        f->zs.avail_in = (uInt)MIN(f->src_len, (size_t)G_MAXUINT);
        f->zs.next_out = header;
        f->zs.avail_out = (uInt)f->header_len;
        int rc = Z_OK;
        while (f->zs.avail_out > 0 && (rc == Z_OK || rc == Z_BUF_ERROR) && f->zs.avail_in > 0) {
            rc = inflate(&f->zs, Z_NO_FLUSH);
        }
        if (f->zs.avail_out > 0) {
            return corrupt(error, "%s: data ends at byte %zu (uncompressed), before the end of "
                           "the %zu-byte IDX header", f->path,
                           f->header_len - f->zs.avail_out, f->header_len);
        }
    } else {
        if (f->src_len < f->header_len) {
            return corrupt(error, "%s: data ends at byte %zu, before the end of the %zu-byte IDX "
                           "header", f->path, f->src_len, f->header_len);
        }
        memcpy(header, f->src, f->header_len);
    }

    guint32 got_magic = be32(header);
    if (got_magic != magic) {
        return corrupt(error, "%s: bad magic number 0x%08x at byte 0 (expected 0x%08x, an IDX "
                       "%s file)", f->path, got_magic, magic,
                       ndims == 3 ? "image" : "label");
    }
    guint64 count = be32(header + 4);
    guint64 per_item = 1;
    if (ndims == 3) {
        guint32 rows = be32(header + 8), cols = be32(header + 12);
        if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536) {
            return corrupt(error, "%s: bad image size %ux%u at byte 8", f->path, rows, cols);
        }
        f->rows = (int)rows;
        f->cols = (int)cols;
        per_item = (guint64)rows * cols;
    }
    guint64 total = f->header_len + count * per_item;
    if (count == 0 || count > G_MAXINT32 || total > MAX_DATA_BYTES) {
        return corrupt(error, "%s: bad item count %" G_GUINT64_FORMAT " at byte 4", f->path,
                       count);
    }
    f->count = (int64_t)count;
    f->total = (size_t)total;

    if (!f->gz) {
        if (f->src_len != f->total) {
            return corrupt(error, "%s: data ends at byte %zu but the header (%" G_GINT64_FORMAT
                           " items) needs %zu bytes (%s file)", f->path, f->src_len, f->count,
                           f->total, f->src_len < f->total ? "truncated" : "overlong");
        }
        f->data = (guint8 *)f->src;
        f->avail = f->total;
        return TRUE;
    }

    f->data = g_try_malloc(f->total);
    if (f->data == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "%s: cannot allocate %zu bytes", f->path,
                    f->total);
        return FALSE;
    }
    memcpy(f->data, header, f->header_len);
    f->avail = f->header_len;

    /* ISIZE, the last 4 bytes of a gzip file, is the data length mod 2^32:
     * a cheap check that the file is whole. When it disagrees, inflate
     * everything now (this is the error path) to say where the data ends. */
    const guint8 *t = f->src + f->src_len - 4;
    guint32 isize = (guint32)t[0] | ((guint32)t[1] << 8) | ((guint32)t[2] << 16) |
                    ((guint32)t[3] << 24);
    if (isize != (guint32)f->total) {
        if (!idx_ensure(f, f->total, error)) {
            return FALSE;
        }
        return corrupt(error, "%s: the gzip trailer at byte %zu gives %u bytes of data but the "
                       "header (%" G_GINT64_FORMAT " items) needs %zu bytes", f->path,
                       f->src_len - 4, isize, f->count, f->total);
    }
    return TRUE;
}

static gboolean idx_open_files(TdmDataset *ds, const char *path, const char *split,
                               GError **error)
{
    const char *prefix;
    if (g_strcmp0(split, "train") == 0) {
        prefix = "train";
    } else if (g_strcmp0(split, "test") == 0) {
        prefix = "t10k";
    } else {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "idx: unknown split '%s' (expected train or test)", split);
        return FALSE;
    }
    if (!g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO,
                    "%s: no such dataset directory (the idx reader expects a directory holding "
                    "%s-images-idx3-ubyte[.gz] and %s-labels-idx1-ubyte[.gz])", path, prefix,
                    prefix);
        return FALSE;
    }
    IdxDataset *d = g_new0(IdxDataset, 1);
    ds->priv = d;
    g_autofree char *img_stem = g_strdup_printf("%s-images-idx3-ubyte", prefix);
    g_autofree char *lbl_stem = g_strdup_printf("%s-labels-idx1-ubyte", prefix);
    if (!idx_file_open(&d->images, path, img_stem, IDX_MAGIC_U8_3D, error) ||
        !idx_file_open(&d->labels, path, lbl_stem, IDX_MAGIC_U8_1D, error) ||
        !idx_ensure(&d->labels, d->labels.total, error)) {
        return FALSE;
    }
    if (d->images.count != d->labels.count) {
        return corrupt(error, "%s has %" G_GINT64_FORMAT " images but %s has %" G_GINT64_FORMAT
                       " labels", d->images.path, d->images.count, d->labels.path,
                       d->labels.count);
    }
    for (int64_t i = 0; i < d->labels.count; i++) {
        guint8 label = d->labels.data[d->labels.header_len + (size_t)i];
        if (label >= 10) {
            return corrupt(error, "%s: label %u of item %" G_GINT64_FORMAT " at byte %zu is out "
                           "of range (expected 0..9)", d->labels.path, label, i,
                           d->labels.header_len + (size_t)i);
        }
    }
    d->sample_bytes = (size_t)d->images.rows * (size_t)d->images.cols;
    ds->length = d->images.count;
    ds->channels = 1;
    ds->height = d->images.rows;
    ds->width = d->images.cols;
    ds->num_classes = 10;
    return TRUE;
}

static gboolean idx_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                         GError **error)
{
    IdxDataset *d = ds->priv;
    if (!ds_check_index(ds, index, "idx", error)) {
        return FALSE;
    }
    size_t start = d->images.header_len + (size_t)index * d->sample_bytes;
    if (!idx_ensure(&d->images, start + d->sample_bytes, error)) {
        return FALSE;
    }
    memcpy(image, d->images.data + start, d->sample_bytes);
    *label = d->labels.data[d->labels.header_len + (size_t)index];
    return TRUE;
}

/* Inflate the whole image file in one go when most of it is about to be
 * read and none of it is ready yet: no reader can be looking at `data`
 * then (each one waits for the lock), so libdeflate writes there directly. */
static void idx_prepare(TdmDataset *ds, int64_t end)
{
#ifdef HAVE_LIBDEFLATE
    IdxDataset *d = ds->priv;
    IdxFile *f = &d->images;
    size_t want = f->header_len + (size_t)CLAMP(end, 0, ds->length) * d->sample_bytes;
    if (!f->gz || want <= f->total / 2) {
        return; /* zlib's lazy inflate stops where the reads do */
    }
    g_mutex_lock(&f->lock);
    if (f->avail == f->header_len && f->failure == NULL) {
        struct libdeflate_decompressor *dc = libdeflate_alloc_decompressor();
        size_t in_used = 0, out_len = 0;
        if (dc != NULL &&
            libdeflate_gzip_decompress_ex(dc, f->src, f->src_len, f->data, f->total, &in_used,
                                          &out_len) == LIBDEFLATE_SUCCESS &&
            in_used == f->src_len && out_len == f->total) {
            __atomic_store_n(&f->avail, f->total, __ATOMIC_RELEASE);
        }
        /* else (corrupt, truncated, several gzip members): left to zlib */
        if (dc != NULL) {
            libdeflate_free_decompressor(dc);
        }
    }
    g_mutex_unlock(&f->lock);
#else
    (void)ds;
    (void)end;
#endif
}

static void idx_close(TdmDataset *ds)
{
    IdxDataset *d = ds->priv;
    if (d == NULL) {
        return;
    }
    idx_file_clear(&d->images);
    idx_file_clear(&d->labels);
    g_free(d);
    ds->priv = NULL;
}

static gboolean idx_open(TdmDataset *ds, const char *path, const char *split, GError **error)
{
    if (!idx_open_files(ds, path, split, error)) {
        idx_close(ds);
        return FALSE;
    }
    return TRUE;
}

static const TdmDatasetClass idx_class = {
    TDM_CLASS_HEADER(TDM_DATASET_IFACE_VERSION, TdmDatasetClass),
    .open = idx_open,
    .read = idx_read,
    .close = idx_close,
    .prepare = idx_prepare,
};

TDM_PLUGIN_INIT_FEATURE(idx_init, TDM_FEATURE_DATASET, "idx", 50, &idx_class,
                        "IDX files (MNIST, Fashion-MNIST), raw or gzipped", NULL, NULL)

TDM_PLUGIN_DEFINE(idx, "MIT", "IDX dataset reader (MNIST, Fashion-MNIST)", "tandem",
                  idx_init)

/* SPDX-License-Identifier: MIT */
/* plugins/datasets/image-decode.c - PNG (libpng) and JPEG (libjpeg-turbo)
 * decoding into u8 or float CHW pixels for the imagefolder reader.
 *
 * Both libraries report fatal errors by calling a handler that must not
 * return; each decode therefore owns its own structs and jump buffer (so
 * loader threads can decode side by side), copies the library's message
 * before jumping back, and frees what it allocated on the way out. Pointers
 * assigned after setjmp() and used after the jump are volatile so that the
 * cleanup sees their current values. The conversions follow PIL, which is
 * what torchvision users compare against: alpha is dropped (not blended),
 * RGB becomes grey with L = (19595 R + 38470 G + 7471 B + 2^15) >> 16, and
 * JPEG is decoded with libjpeg's defaults (ISLOW IDCT, fancy upsampling) as
 * PIL does. A JPEG that ends early is an error, not a grey-padded image.
 */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include <tandem/transform.h>

#include "datasets-util.h"
#include "image-decode.h"

#define MAX_SIDE 65535u
/* A libpng error message, kept for the GError (libjpeg's have
 * JMSG_LENGTH_MAX). */
#define PNG_MSG_LEN 256

/* Where decoded pixels go: u8 CHW planes (g_malloc'ed here) or the float
 * CHW planes of a TdmImage (u8 scale), written a band of rows at a time
 * straight from the decoder's interleaved rows, so that no whole-image
 * intermediate is needed on the float path. */
typedef struct {
    int want_c;     /* requested channels, 0 = the file's */
    TdmImage *img;  /* float output; NULL: u8 output */
    guint8 *u8;
    int c, h, w, src_c;
} ImageSink;

static void sink_begin(ImageSink *s, int src_c, int h, int w)
{
    s->src_c = src_c;
    s->c = s->want_c != 0 ? s->want_c : src_c;
    s->h = h;
    s->w = w;
    size_t n = (size_t)s->c * (size_t)h * (size_t)w;
    if (s->img != NULL) {
        tdm_image_reserve(s->img, s->c, h, w);
        s->img->normalized = FALSE;
    } else {
        s->u8 = g_malloc(MAX(n, 1));
    }
}

static inline guint8 grey_u8(const guint8 *p)
{
    return (guint8)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

/* The row converters below are what every decoded pixel goes through:
 * built with the loop vectoriser on (the default -O2 leaves them scalar) and,
 * on x86-64, also for AVX2, picked at load time. They only move and convert
 * integers, so every build computes the same values. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DECODE_VECTORIZE __attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define DECODE_VECTORIZE __attribute__((optimize("O3")))
#else
#define DECODE_VECTORIZE
#endif

DECODE_VECTORIZE
static void row_rgb_to_planes(const guint8 *restrict in, int w, float *restrict p0,
                              float *restrict p1, float *restrict p2)
{
    for (int x = 0; x < w; x++) {
        p0[x] = (float)in[3 * x];
        p1[x] = (float)in[3 * x + 1];
        p2[x] = (float)in[3 * x + 2];
    }
}

DECODE_VECTORIZE
static void row_u8_to_float(const guint8 *restrict in, int w, float *restrict p)
{
    for (int x = 0; x < w; x++) {
        p[x] = (float)in[x];
    }
}

DECODE_VECTORIZE
static void row_rgb_to_grey(const guint8 *restrict in, int w, float *restrict p)
{
    for (int x = 0; x < w; x++) {
        p[x] = (float)grey_u8(in + 3 * x);
    }
}

/* Interleaved rows y0 .. y0 + n - 1 (src_c channels) -> the sink's planes. */
static void sink_rows(ImageSink *s, int y0, const guint8 *rows, int n, size_t rowbytes)
{
    const size_t plane = (size_t)s->h * (size_t)s->w;
    const int w = s->w;
    for (int r = 0; r < n; r++) {
        const guint8 *in = rows + (size_t)r * rowbytes;
        const size_t off = (size_t)(y0 + r) * (size_t)w;
        if (s->img != NULL) {
            float *p0 = s->img->data + off;
            if (s->src_c == 3 && s->c == 3) {
                row_rgb_to_planes(in, w, p0, p0 + plane, p0 + 2 * plane);
            } else if (s->src_c == 3) {
                row_rgb_to_grey(in, w, p0);
            } else {
                row_u8_to_float(in, w, p0);
                for (int ch = 1; ch < s->c; ch++) {
                    memcpy(p0 + (size_t)ch * plane, p0, sizeof(float) * (size_t)w);
                }
            }
        } else {
            guint8 *p0 = s->u8 + off;
            if (s->src_c == 3 && s->c == 3) {
                guint8 *p1 = p0 + plane, *p2 = p0 + 2 * plane;
                for (int x = 0; x < w; x++) {
                    p0[x] = in[3 * x];
                    p1[x] = in[3 * x + 1];
                    p2[x] = in[3 * x + 2];
                }
            } else if (s->src_c == 3) {
                for (int x = 0; x < w; x++) {
                    p0[x] = grey_u8(in + 3 * x);
                }
            } else {
                for (int ch = 0; ch < s->c; ch++) {
                    memcpy(p0 + (size_t)ch * plane, in, (size_t)w);
                }
            }
        }
    }
}

/* ---- PNG ---- */

typedef struct {
    const guint8 *data;
    size_t len, pos;
    gboolean truncated;
    char msg[PNG_MSG_LEN];
} PngSource;

static void png_on_error(png_structp png, png_const_charp msg)
{
    PngSource *src = png_get_error_ptr(png);
    g_strlcpy(src->msg, msg, sizeof(src->msg));
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    /* Warnings (bad ancillary chunks, say) do not stop PIL either. */
}

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    PngSource *src = png_get_io_ptr(png);
    if (n > src->len - src->pos) {
        /* png_error copies the message: a local buffer is fine. */
        char msg[PNG_MSG_LEN];
        g_snprintf(msg, sizeof(msg), "the file ends at byte %zu, %zu bytes short (truncated)",
                   src->len, n - (src->len - src->pos));
        src->truncated = TRUE;
        png_error(png, msg);
    }
    memcpy(out, src->data + src->pos, n);
    src->pos += n;
}

static gboolean decode_png(const guint8 *data, size_t len, const char *path, ImageSink *sink,
                           GError **error)
{
    PngSource src = {.data = data, .len = len};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
    if (info == NULL) {
        png_destroy_read_struct(&png, NULL, NULL);
        return ds_fail(error, TDM_ERROR_FAILED, "%s: cannot start libpng", path);
    }
    guint8 *volatile hwc = NULL;
    guint8 **volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        g_free(hwc);
        g_free(rows);
        png_destroy_read_struct(&png, &info, NULL);
        if (src.truncated) {
            return ds_fail(error, TDM_ERROR_CORRUPT, "%s: corrupt PNG image: %s", path, src.msg);
        }
        return ds_fail(error, TDM_ERROR_CORRUPT,
                       "%s: corrupt PNG image: %s (in the data "
                       "before byte %zu)",
                       path, src.msg, src.pos);
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, MAX_SIDE, MAX_SIDE);
    png_read_info(png, info);
    png_uint_32 width = png_get_image_width(png, info);
    png_uint_32 height = png_get_image_height(png, info);
    if ((guint64)width * height > IMAGE_MAX_PIXELS) {
        g_snprintf(src.msg, sizeof(src.msg),
                   "%ux%u pixels is more than the %" G_GUINT64_FORMAT " this reader accepts", width,
                   height, IMAGE_MAX_PIXELS);
        png_longjmp(png, 1);
    }
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    (void)png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int src_c = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if ((src_c != 1 && src_c != 3) || rowbytes != (size_t)width * (size_t)src_c) {
        g_snprintf(src.msg, sizeof(src.msg), "unsupported pixel layout (%d channels)", src_c);
        png_longjmp(png, 1);
    }
    hwc = g_malloc(rowbytes * height);
    rows = g_new(guint8 *, height);
    for (png_uint_32 y = 0; y < height; y++) {
        rows[y] = hwc + (size_t)y * rowbytes;
    }
    png_read_image(png, rows);
    png_read_end(png, NULL);
    sink_begin(sink, src_c, (int)height, (int)width);
    sink_rows(sink, 0, hwc, (int)height, rowbytes);
    g_free(hwc);
    g_free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    return TRUE;
}

/* ---- JPEG ---- */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
    gboolean ended_early;
} JpegErrors;

static void jpeg_on_error(j_common_ptr cinfo)
{
    JpegErrors *e = (JpegErrors *)cinfo->err;
    cinfo->err->format_message(cinfo, e->msg);
    longjmp(e->jump, 1);
}

/* libjpeg's default prints warnings on stderr; keep quiet, but remember a
 * premature end (libjpeg pads the rest with grey and carries on). */
static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    JpegErrors *e = (JpegErrors *)cinfo->err;
    if (level < 0) {
        if (cinfo->err->msg_code == JWRN_JPEG_EOF && !e->ended_early) {
            e->ended_early = TRUE;
            cinfo->err->format_message(cinfo, e->msg);
        }
        cinfo->err->num_warnings++;
    }
}

static gboolean decode_jpeg(const guint8 *data, size_t len, const char *path, ImageSink *sink,
                            GError **error)
{
    struct jpeg_decompress_struct cinfo;
    JpegErrors err;
    memset(&err, 0, sizeof(err));
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_message;
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return ds_fail(error, TDM_ERROR_CORRUPT, "%s: corrupt JPEG image: %s", path, err.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        g_strlcpy(err.msg, "CMYK JPEG images are not supported (convert to RGB)", sizeof(err.msg));
        longjmp(err.jump, 1);
    }
    cinfo.out_color_space = cinfo.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
    if ((guint64)cinfo.image_width * cinfo.image_height > IMAGE_MAX_PIXELS) {
        g_snprintf(err.msg, sizeof(err.msg),
                   "%ux%u pixels is more than the %" G_GUINT64_FORMAT " this reader accepts",
                   cinfo.image_width, cinfo.image_height, IMAGE_MAX_PIXELS);
        longjmp(err.jump, 1);
    }
    jpeg_start_decompress(&cinfo);
    int src_c = cinfo.output_components;
    int height = (int)cinfo.output_height, width = (int)cinfo.output_width;
    size_t rowbytes = (size_t)width * (size_t)src_c;
    /* One row at a time, converted while it is hot in the cache; the row
     * comes from libjpeg's per-image pool, freed with it on every path. It
     * starts off a 16-byte boundary on purpose: libjpeg-turbo's SIMD colour
     * conversion writes aligned rows with non-temporal stores, which would
     * send each row to memory just before we read it back. */
    JSAMPARRAY pool_row = (*cinfo.mem->alloc_sarray)((j_common_ptr)&cinfo, JPOOL_IMAGE,
                                                     (JDIMENSION)(rowbytes + 64), 1);
    JSAMPROW row = pool_row[0] + 8;
    sink_begin(sink, src_c, height, width);
    while (cinfo.output_scanline < cinfo.output_height) {
        int y = (int)cinfo.output_scanline;
        jpeg_read_scanlines(&cinfo, &row, 1);
        if (err.ended_early) {
            longjmp(err.jump, 1);
        }
        sink_rows(sink, y, row, 1, rowbytes);
    }
    jpeg_finish_decompress(&cinfo);
    if (err.ended_early) {
        longjmp(err.jump, 1);
    }
    jpeg_destroy_decompress(&cinfo);
    return TRUE;
}

static gboolean decode_into(const guint8 *data, size_t len, const char *path, ImageSink *sink,
                            GError **error)
{
    static const guint8 png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 8 && memcmp(data, png_sig, 8) == 0) {
        return decode_png(data, len, path, sink, error);
    }
    if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
        return decode_jpeg(data, len, path, sink, error);
    }
    const char *dot = strrchr(path, '.');
    g_autofree char *ext = g_ascii_strdown(dot != NULL ? dot + 1 : "", -1);
    const char *claimed = g_str_equal(ext, "png")                               ? "a PNG"
                          : g_str_equal(ext, "jpg") || g_str_equal(ext, "jpeg") ? "a JPEG"
                                                                                : "an image";
    g_autoptr(GString) head = g_string_new(len > 0 ? "starting" : "empty");
    for (size_t i = 0; i < MIN(len, (size_t)4); i++) {
        g_string_append_printf(head, " %02x", data[i]);
    }
    return ds_fail(error, TDM_ERROR_CORRUPT,
                   "%s: not %s file: no PNG or JPEG signature at byte 0 (%zu bytes, %s)", path,
                   claimed, len, head->str);
}

gboolean image_decode(const guint8 *data, size_t len, const char *path, int want_c, guint8 **pixels,
                      int *c, int *h, int *w, GError **error)
{
    ImageSink sink = {.want_c = want_c};
    if (!decode_into(data, len, path, &sink, error)) {
        g_free(sink.u8);
        return FALSE;
    }
    *pixels = sink.u8;
    *c = sink.c;
    *h = sink.h;
    *w = sink.w;
    return TRUE;
}

gboolean image_decode_float(const guint8 *data, size_t len, const char *path, int want_c,
                            TdmImage *img, GError **error)
{
    ImageSink sink = {.want_c = want_c, .img = img};
    return decode_into(data, len, path, &sink, error);
}

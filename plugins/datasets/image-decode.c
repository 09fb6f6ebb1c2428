/* plugins/datasets/image-decode.c - PNG (libpng) and JPEG (libjpeg-turbo)
 * decoding into u8 CHW pixels for the imagefolder reader.
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

#include <tandem/types.h>

#include "image-decode.h"

#define MAX_SIDE 65535u

static gboolean decode_fail(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean decode_fail(GError **error, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, TDM_ERROR, code, msg);
    return FALSE;
}

/* Interleaved rows (src_c channels) -> CHW with want_c channels. */
static void to_chw(const guint8 *hwc, int src_c, int want_c, int h, int w, guint8 *chw)
{
    size_t plane = (size_t)h * (size_t)w;
    if (src_c == want_c) {
        for (int ch = 0; ch < want_c; ch++) {
            for (size_t i = 0; i < plane; i++) {
                chw[(size_t)ch * plane + i] = hwc[i * (size_t)src_c + (size_t)ch];
            }
        }
    } else if (src_c == 1) {
        for (int ch = 0; ch < want_c; ch++) {
            memcpy(chw + (size_t)ch * plane, hwc, plane);
        }
    } else {
        for (size_t i = 0; i < plane; i++) {
            const guint8 *p = hwc + i * 3;
            chw[i] = (guint8)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
        }
    }
}

/* ---- PNG ---- */

typedef struct {
    const guint8 *data;
    size_t len, pos;
    gboolean truncated;
    char msg[256];
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
        char msg[128];
        g_snprintf(msg, sizeof(msg), "the file ends at byte %zu, %zu bytes short (truncated)",
                   src->len, n - (src->len - src->pos));
        src->truncated = TRUE;
        png_error(png, msg);
    }
    memcpy(out, src->data + src->pos, n);
    src->pos += n;
}

static gboolean decode_png(const guint8 *data, size_t len, const char *path, int want_c,
                           guint8 **pixels, int *c, int *h, int *w, GError **error)
{
    PngSource src = {.data = data, .len = len};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
    if (info == NULL) {
        png_destroy_read_struct(&png, NULL, NULL);
        return decode_fail(error, TDM_ERROR_FAILED, "%s: cannot start libpng", path);
    }
    guint8 *volatile hwc = NULL;
    guint8 **volatile rows = NULL;
    guint8 *volatile out = NULL;
    if (setjmp(png_jmpbuf(png))) {
        g_free(hwc);
        g_free(rows);
        g_free(out);
        png_destroy_read_struct(&png, &info, NULL);
        if (src.truncated) {
            return decode_fail(error, TDM_ERROR_CORRUPT, "%s: corrupt PNG image: %s", path,
                               src.msg);
        }
        return decode_fail(error, TDM_ERROR_CORRUPT,
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
    int oc = want_c != 0 ? want_c : src_c;
    out = g_malloc((size_t)oc * width * height);
    to_chw(hwc, src_c, oc, (int)height, (int)width, out);
    g_free(hwc);
    g_free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    *pixels = out;
    *c = oc;
    *h = (int)height;
    *w = (int)width;
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

static gboolean decode_jpeg(const guint8 *data, size_t len, const char *path, int want_c,
                            guint8 **pixels, int *c, int *h, int *w, GError **error)
{
    struct jpeg_decompress_struct cinfo;
    JpegErrors err;
    memset(&err, 0, sizeof(err));
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_message;
    guint8 *volatile hwc = NULL;
    guint8 *volatile out = NULL;
    if (setjmp(err.jump)) {
        g_free(hwc);
        g_free(out);
        jpeg_destroy_decompress(&cinfo);
        return decode_fail(error, TDM_ERROR_CORRUPT, "%s: corrupt JPEG image: %s", path, err.msg);
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
    hwc = g_malloc(rowbytes * (size_t)height);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = hwc + (size_t)cinfo.output_scanline * rowbytes;
        jpeg_read_scanlines(&cinfo, &row, 1);
        if (err.ended_early) {
            longjmp(err.jump, 1);
        }
    }
    jpeg_finish_decompress(&cinfo);
    if (err.ended_early) {
        longjmp(err.jump, 1);
    }
    int oc = want_c != 0 ? want_c : src_c;
    out = g_malloc((size_t)oc * (size_t)width * (size_t)height);
    to_chw(hwc, src_c, oc, height, width, out);
    g_free(hwc);
    jpeg_destroy_decompress(&cinfo);
    *pixels = out;
    *c = oc;
    *h = height;
    *w = width;
    return TRUE;
}

gboolean image_decode(const guint8 *data, size_t len, const char *path, int want_c, guint8 **pixels,
                      int *c, int *h, int *w, GError **error)
{
    static const guint8 png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 8 && memcmp(data, png_sig, 8) == 0) {
        return decode_png(data, len, path, want_c, pixels, c, h, w, error);
    }
    if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
        return decode_jpeg(data, len, path, want_c, pixels, c, h, w, error);
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
    return decode_fail(error, TDM_ERROR_CORRUPT,
                       "%s: not %s file: no PNG or JPEG signature at byte 0 (%zu bytes, %s)", path,
                       claimed, len, head->str);
}

/* SPDX-License-Identifier: MIT */
/* plugins/datasets/image-decode.h - PNG and JPEG decoding for the
 * imagefolder reader (internal to the plugin).
 */
#ifndef TDM_IMAGE_DECODE_H
#define TDM_IMAGE_DECODE_H

#include <tandem/transform.h>

/* Largest image accepted, in pixels (a guard against absurd headers). */
#define IMAGE_MAX_PIXELS ((guint64)1 << 27)

/* Decode the PNG or JPEG held in `data` (the format is sniffed from the
 * content, as PIL does; `path` only names the file in errors) into u8 CHW
 * pixels with `want_c` channels: 1 (grey) or 3 (RGB); 0 keeps the file's own
 * (1 for grey, 3 for anything else). Alpha is dropped, palettes expanded,
 * 16-bit samples cut to 8, grey replicated to RGB, RGB turned grey with the
 * ITU-R 601 weights PIL's convert("L") uses. *pixels is transfer full
 * (g_free). Thread-safe: all decoder state is per call. */
gboolean image_decode(const guint8 *data, size_t len, const char *path, int want_c, guint8 **pixels,
                      int *c, int *h, int *w, GError **error);

/* The same decode into `img` (float CHW on the u8 scale, normalized FALSE),
 * converting the decoder's rows as they come: what the loader's transforms
 * take, without a u8 copy of the whole image in between. `img` keeps its
 * buffer when large enough; on error its contents are undefined. */
gboolean image_decode_float(const guint8 *data, size_t len, const char *path, int want_c,
                            TdmImage *img, GError **error);

#endif /* TDM_IMAGE_DECODE_H */

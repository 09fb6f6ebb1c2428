/* SPDX-License-Identifier: MIT */
/* tests/plot-pixels.c - reads a PNG back for tests/plot.sh.
 *
 *   plot-pixels FILE.png                          prints "WIDTH HEIGHT"
 *   plot-pixels FILE.png COLS ROWS CELL RRGGBB    prints how many pixels of
 *       cell CELL (row by row) of a COLS x ROWS grid of equal cells have
 *       the colour RRGGBB, within 12 per channel (antialiased edges blend
 *       with the background and do not count)
 *
 * The PNG is decoded by cairo (through libpng); a file that is not a PNG
 * is an error, exit status 1. Nothing here knows how `tandem plot` lays
 * its panels out beyond the grid the test names.
 */
#include "config.h"

#include <cairo.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 6) {
        fprintf(stderr, "usage: plot-pixels FILE.png [COLS ROWS CELL RRGGBB]\n");
        return 2;
    }
    cairo_surface_t *s = cairo_image_surface_create_from_png(argv[1]);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "plot-pixels: %s: %s\n", argv[1],
                cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return 1;
    }
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    if (argc == 2) {
        printf("%d %d\n", w, h);
        cairo_surface_destroy(s);
        return 0;
    }
    const int cols = atoi(argv[2]), rows = atoi(argv[3]), cell = atoi(argv[4]);
    const guint32 want = (guint32)strtoul(argv[5], NULL, 16);
    if (cols < 1 || rows < 1 || cell < 0 || cell >= cols * rows) {
        fprintf(stderr, "plot-pixels: cell %d is outside a %dx%d grid\n", cell, cols, rows);
        cairo_surface_destroy(s);
        return 2;
    }
    cairo_format_t format = cairo_image_surface_get_format(s);
    if (format != CAIRO_FORMAT_RGB24 && format != CAIRO_FORMAT_ARGB32) {
        fprintf(stderr, "plot-pixels: %s: unexpected pixel format %d\n", argv[1], format);
        cairo_surface_destroy(s);
        return 1;
    }
    cairo_surface_flush(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    const int stride = cairo_image_surface_get_stride(s);
    const int x0 = (cell % cols) * w / cols, x1 = (cell % cols + 1) * w / cols;
    const int y0 = (cell / cols) * h / rows, y1 = (cell / cols + 1) * h / rows;
    long count = 0;
    for (int y = y0; y < y1; y++) {
        const guint32 *row = (const guint32 *)(const void *)(data + (size_t)y * stride);
        for (int x = x0; x < x1; x++) {
            guint32 p = row[x];
            int dr = (int)((p >> 16) & 0xff) - (int)((want >> 16) & 0xff);
            int dg = (int)((p >> 8) & 0xff) - (int)((want >> 8) & 0xff);
            int db = (int)(p & 0xff) - (int)(want & 0xff);
            if (abs(dr) <= 12 && abs(dg) <= 12 && abs(db) <= 12) {
                count++;
            }
        }
    }
    printf("%ld\n", count);
    cairo_surface_destroy(s);
    return 0;
}

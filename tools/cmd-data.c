/* SPDX-License-Identifier: MIT */
/* tools/cmd-data.c - `tandem data preview`: look at augmented samples.
 *
 * Reads N samples of a dataset, runs them through a transform pipeline with
 * the same per-sample random streams training uses (seed, epoch, index), and
 * writes a PNG grid: each tile is one augmented sample, de-normalised for
 * display (the pipeline's normalize is undone, values clamped to 0..255),
 * enlarged by an integer factor when small, with its label drawn under it in
 * a tiny built-in 3x5 digit font. The PNG is written to a temporary file and
 * renamed, so a failed run never leaves a half-written image behind.
 */
#include "config.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <tandem/tandem.h>

#include "commands.h"

#define FONT_W 3
#define FONT_H 5
#define GAP 4
#define BACKGROUND 40

/* Rows of 3 bits, most significant bit on the left: 0-9 and '-' (the
 * glyph after the digits). */
#define GLYPH_MINUS 10
#define FONT_GLYPHS (GLYPH_MINUS + 1)
static const guint8 font_digits[FONT_GLYPHS][FONT_H] = {
    {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1},
    {7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7},
    {0, 0, 7, 0, 0},
};

typedef struct {
    int width, height;
    guint8 *rgb;
} Canvas;

static void canvas_put(Canvas *cv, int x, int y, guint8 r, guint8 g, guint8 b)
{
    if (x >= 0 && y >= 0 && x < cv->width && y < cv->height) {
        guint8 *p = cv->rgb + ((size_t)y * cv->width + x) * 3;
        p[0] = r;
        p[1] = g;
        p[2] = b;
    }
}

/* Draw `text` (digits and '-') centred on cx, top at y, each font pixel a
 * square of `px` pixels. */
static void draw_text(Canvas *cv, const char *text, int cx, int y, int px)
{
    int n = (int)strlen(text);
    int width = n * (FONT_W + 1) * px - px;
    int x0 = cx - width / 2;
    for (int i = 0; i < n; i++) {
        int glyph = text[i] == '-' ? GLYPH_MINUS : text[i] - '0';
        if (glyph < 0 || glyph >= FONT_GLYPHS) {
            continue;
        }
        for (int row = 0; row < FONT_H; row++) {
            for (int col = 0; col < FONT_W; col++) {
                if (!(font_digits[glyph][row] & (4 >> col))) {
                    continue;
                }
                for (int dy = 0; dy < px; dy++) {
                    for (int dx = 0; dx < px; dx++) {
                        canvas_put(cv, x0 + (i * (FONT_W + 1) + col) * px + dx,
                                   y + row * px + dy, 240, 240, 240);
                    }
                }
            }
        }
    }
}

/* Copy a de-normalised image (values 0..255, CHW) into the canvas at (x, y),
 * each pixel a square of `scale` pixels. 1 channel is grey, 3 are RGB, other
 * counts show their first channel. */
static void draw_tile(Canvas *cv, const float *chw, int c, int h, int w, int x, int y, int scale)
{
    size_t plane = (size_t)h * w;
    for (int yy = 0; yy < h; yy++) {
        for (int xx = 0; xx < w; xx++) {
            guint8 v[3];
            for (int k = 0; k < 3; k++) {
                float f = chw[(c >= 3 ? (size_t)k * plane : 0) + (size_t)yy * w + xx];
                f = CLAMP(f, 0.0f, 255.0f);
                v[k] = (guint8)(f + 0.5f);
            }
            for (int dy = 0; dy < scale; dy++) {
                for (int dx = 0; dx < scale; dx++) {
                    canvas_put(cv, x + xx * scale + dx, y + yy * scale + dy, v[0], v[1], v[2]);
                }
            }
        }
    }
}

static gboolean write_png(const Canvas *cv, const char *path, GError **error)
{
    g_autofree char *tmp = g_strdup_printf("%s.tmp-%d", path, (int)getpid());
    FILE *f = g_fopen(tmp, "wb");
    if (f == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot create %s: %s", tmp,
                    g_strerror(errno));
        return FALSE;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
    volatile gboolean ok = FALSE; /* read after libpng's longjmp */
    if (png == NULL || info == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED, "libpng: out of memory");
        goto out;
    }
    if (setjmp(png_jmpbuf(png))) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "libpng failed writing %s", tmp);
        goto out;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)cv->width, (png_uint_32)cv->height, 8,
                 PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < cv->height; y++) {
        png_write_row(png, cv->rgb + (size_t)y * cv->width * 3);
    }
    png_write_end(png, NULL);
    ok = TRUE;
out:
    png_destroy_write_struct(&png, &info);
    if (fclose(f) != 0 && ok) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot write %s: %s", tmp,
                    g_strerror(errno));
        ok = FALSE;
    }
    if (ok && g_rename(tmp, path) != 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_IO, "cannot rename %s to %s: %s", tmp, path,
                    g_strerror(errno));
        ok = FALSE;
    }
    if (!ok) {
        g_unlink(tmp);
    }
    return ok;
}

/* One sample, decoded into img (u8 scale). */
static gboolean read_sample(TdmDataset *ds, int64_t index, TdmImage *img, guint8 *buf,
                            int32_t *label, GError **error)
{
    if (ds->height > 0 && ds->width > 0) {
        if (!tdm_dataset_read(ds, index, buf, label, error)) {
            return FALSE;
        }
        tdm_image_set_u8(img, buf, ds->channels, ds->height, ds->width);
        return TRUE;
    }
    if (ds->klass->read_image == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "dataset %s has samples of varying size but no read_image", ds->kind);
        return FALSE;
    }
    return ds->klass->read_image(ds, index, img, label, error);
}

static int preview(const char *spec, const char *split, const char *transforms, int count,
                   int64_t start, guint64 seed, gint64 epoch, int columns, int scale,
                   const char *out)
{
    GError *error = NULL;
    g_autoptr(TdmDataset) ds = tdm_dataset_open(spec, split, &error);
    if (ds == NULL) {
        fprintf(stderr, "tandem data preview: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    g_autoptr(TdmTransformPipeline) p = tdm_transform_pipeline_parse(transforms, &error);
    if (p == NULL) {
        fprintf(stderr, "tandem data preview: --transforms: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    int n_norm = 0;
    float mean[TDM_MAX_CHANNELS], std[TDM_MAX_CHANNELS];
    if (tdm_dataset_get_normalization(ds, &n_norm, mean, std, NULL)) {
        tdm_transform_pipeline_set_normalization(p, n_norm, mean, std);
    }
    int oc, oh, ow;
    if (!tdm_transform_pipeline_output_shape(p, ds->channels, ds->height, ds->width, &oc, &oh,
                                             &ow, &error)) {
        fprintf(stderr, "tandem data preview: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    if (start < 0 || start >= ds->length) {
        fprintf(stderr, "tandem data preview: --start %" G_GINT64_FORMAT
                        " is outside the %s split's %" G_GINT64_FORMAT " samples\n",
                (gint64)start, split, (gint64)ds->length);
        return 2;
    }
    count = (int)MIN((int64_t)count, ds->length - start);
    gboolean denorm = tdm_transform_pipeline_get_normalization(p, &n_norm, mean, std);

    if (scale <= 0) {
        int side = MAX(oh, ow);
        scale = CLAMP((96 + side - 1) / side, 1, 8);
    }
    columns = MIN(columns, count); /* no empty columns */
    if (columns <= 0) {
        columns = 1;
        while (columns * columns < count) {
            columns++;
        }
    }
    int rows = (count + columns - 1) / columns;
    int text_px = MAX(1, MIN(3, scale * ow / 28));
    int label_h = FONT_H * text_px + 2 * GAP;
    int tile_w = ow * scale, tile_h = oh * scale + label_h;
    Canvas cv = {GAP + columns * (tile_w + GAP), GAP + rows * tile_h, NULL};
    cv.rgb = g_malloc((size_t)cv.width * cv.height * 3);
    memset(cv.rgb, BACKGROUND, (size_t)cv.width * cv.height * 3);

    TdmImage img = {0}, scratch = {0};
    g_autofree guint8 *buf =
        g_malloc((size_t)MAX(1, ds->channels) * MAX(1, ds->height) * MAX(1, ds->width));
    int status = 0;
    GString *labels = g_string_new(NULL);
    for (int i = 0; i < count; i++) {
        int64_t index = start + i;
        int32_t label = 0;
        if (!read_sample(ds, index, &img, buf, &label, &error) ||
            !tdm_transform_pipeline_apply(p, &img, &scratch, seed, (guint64)epoch,
                                          (guint64)index, &error)) {
            fprintf(stderr, "tandem data preview: sample %" G_GINT64_FORMAT ": %s\n",
                    (gint64)index, error->message);
            g_clear_error(&error);
            status = 1;
            goto out;
        }
        size_t plane = (size_t)img.h * img.w;
        for (int ch = 0; ch < img.c; ch++) {
            int k = !denorm ? 0 : n_norm == 1 ? 0 : MIN(ch, n_norm - 1);
            float m = denorm ? mean[k] : 0.0f, s = denorm ? std[k] : 1.0f;
            for (size_t j = 0; j < plane; j++) {
                float *v = &img.data[ch * plane + j];
                *v = (*v * s + m) * 255.0f;
            }
        }
        int x = GAP + (i % columns) * (tile_w + GAP), y = GAP + (i / columns) * tile_h;
        draw_tile(&cv, img.data, img.c, img.h, img.w, x, y, scale);
        char text[16];
        g_snprintf(text, sizeof(text), "%d", (int)label);
        draw_text(&cv, text, x + tile_w / 2, y + oh * scale + GAP, text_px);
        g_string_append_printf(labels, "%s%d", i > 0 ? " " : "", (int)label);
    }
    if (!write_png(&cv, out, &error)) {
        fprintf(stderr, "tandem data preview: %s\n", error->message);
        g_clear_error(&error);
        status = 1;
        goto out;
    }
    printf("wrote %s: %d sample%s of %s (%s, from %" G_GINT64_FORMAT "), %dx%dx%d after the "
           "transforms, shown x%d, seed %" G_GUINT64_FORMAT " epoch %" G_GINT64_FORMAT "\n"
           "labels: %s\n",
           out, count, count == 1 ? "" : "s", spec, split, (gint64)start, oc, oh, ow, scale, seed,
           epoch, labels->str);
out:
    g_string_free(labels, TRUE);
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
    g_free(cv.rgb);
    return status;
}

static int data_preview(int argc, char **argv)
{
    g_autofree char *spec = NULL, *split = NULL, *transforms = NULL, *out = NULL;
    int count = 16, columns = 0, scale = 0;
    gint64 start = 0, epoch = 0, seed = 0;
    GOptionEntry entries[] = {
        {"dataset", 0, 0, G_OPTION_ARG_STRING, &spec,
         "data set: a name (fashion-mnist, mnist), \"KIND path=DIR key=value...\" or KIND:PATH "
         "(fashion-mnist)",
         "SPEC"},
        {"split", 0, 0, G_OPTION_ARG_STRING, &split, "train or test (train)", "SPLIT"},
        {"transforms", 0, 0, G_OPTION_ARG_STRING, &transforms,
         "transform pipeline, e.g. \"pad 4 | random-crop 28 | hflip\" (none)", "PIPELINE"},
        {"count", 'n', 0, G_OPTION_ARG_INT, &count, "samples to show (16)", "N"},
        {"start", 0, 0, G_OPTION_ARG_INT64, &start, "index of the first sample (0)", "I"},
        {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "random seed, as in training (0)", "S"},
        {"epoch", 0, 0, G_OPTION_ARG_INT64, &epoch, "epoch whose augmentation to show (0)",
         "E"},
        {"columns", 0, 0, G_OPTION_ARG_INT, &columns, "tiles per row (about square)", "C"},
        {"scale", 0, 0, G_OPTION_ARG_INT, &scale, "enlarge each pixel K times (auto)", "K"},
        {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "PNG file to write", "FILE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_set_prgname("tandem data preview"); /* --help's "Usage: tandem data preview [OPTION...]" */
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- write a PNG grid of augmented samples with their labels");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_description(
        ctx, "Example:\n  tandem data preview --dataset fashion-mnist \\\n"
             "      --transforms \"pad 4 | random-crop 28 | hflip | rotate 15 | normalize\" "
             "--out grid.png\n");
    GError *error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "tandem data preview: %s\n", error->message);
        g_error_free(error);
        return 2;
    }
    if (argc > 1 || out == NULL) {
        fprintf(stderr, "tandem data preview: %s\n",
                argc > 1 ? "unexpected arguments" : "--out FILE.png is required");
        fprintf(stderr, "Run 'tandem data preview --help' for the options.\n");
        return 2;
    }
    /* each range check names its option */
    const struct {
        const char *name;
        gint64 value, lo, hi;
    } ranges[] = {
        {"--count", count, 1, 1024},     {"--scale", scale, 0, 32},
        {"--columns", columns, 0, 1024}, {"--seed", seed, 0, G_MAXINT64},
        {"--epoch", epoch, 0, G_MAXINT64},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(ranges); i++) {
        if (ranges[i].value < ranges[i].lo || ranges[i].value > ranges[i].hi) {
            if (ranges[i].hi == G_MAXINT64) {
                fprintf(stderr, "tandem data preview: %s %" G_GINT64_FORMAT " is negative\n",
                        ranges[i].name, ranges[i].value);
            } else {
                fprintf(stderr,
                        "tandem data preview: %s %" G_GINT64_FORMAT " is outside %" G_GINT64_FORMAT
                        "..%" G_GINT64_FORMAT "\n",
                        ranges[i].name, ranges[i].value, ranges[i].lo, ranges[i].hi);
            }
            return 2;
        }
    }
    if (g_file_test(out, G_FILE_TEST_IS_DIR)) {
        fprintf(stderr, "tandem data preview: --out %s is a directory, not a PNG file\n", out);
        return 2;
    }
    return preview(spec != NULL ? spec : "fashion-mnist", split != NULL ? split : "train",
                   transforms != NULL ? transforms : "", count, start, (guint64)seed, epoch,
                   columns, scale, out);
}

static void print_data_usage(FILE *out)
{
    fprintf(out, "Usage: tandem data preview [--dataset SPEC] [--transforms PIPELINE] "
                 "--out FILE.png [OPTIONS]\n"
                 "\n"
                 "Subcommands:\n"
                 "  preview   write a PNG grid of augmented samples with their labels\n"
                 "\n"
                 "Run 'tandem data preview --help' for its options.\n");
}

int tdm_cmd_data(int argc, char **argv)
{
    if (argc < 2) {
        print_data_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        print_data_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "preview") == 0) {
        return data_preview(argc - 1, argv + 1);
    }
    fprintf(stderr, "tandem data: unknown subcommand '%s'\n\n", argv[1]);
    print_data_usage(stderr);
    return 2;
}

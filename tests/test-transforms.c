/* SPDX-License-Identifier: MIT */
/* tests/test-transforms.c - the transform pipeline: random streams, the
 * parser's errors, output shapes, determinism and the random choices.
 *
 * What a user notices: a typo in a pipeline string is reported with the
 * token and its column; the same (seed, epoch, index) gives the same pixels
 * whatever else ran before, and another index or epoch gives other random
 * choices; p=0 never and p=1 always applies; normalize gives
 * (x / 255 - mean) / std. Pipelines are reference counted: a loader takes
 * a reference, never changes the caller's pipeline (an argument-less
 * normalize gets the loader's constants in a copy), and the pipeline and
 * the loader each work after the other is gone. Pixel accuracy against
 * torchvision is checked by transforms-oracle.py. Needs the transforms
 * plugin (TDM_PLUGIN_SYSTEM_PATH).
 */
#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "test-util.h"

/* ---- helpers ---- */

static TdmTransformPipeline *parse_ok(const char *spec)
{
    GError *error = NULL;
    TdmTransformPipeline *p = tdm_transform_pipeline_parse(spec, &error);
    g_assert_no_error(error);
    g_assert_nonnull(p);
    return p;
}

/* Parse `spec`, expect an INVALID_ARG error containing every string given. */
static void parse_fails(const char *spec, ...)
{
    GError *error = NULL;
    g_assert_null(tdm_transform_pipeline_parse(spec, &error));
    va_list ap;
    va_start(ap, spec);
    test_invalid_arg_mentions(error, spec, ap);
    va_end(ap);
}

/* A c x h x w test image with distinct pixel values. */
static void make_image(TdmImage *img, int c, int h, int w)
{
    g_autofree guint8 *px = g_new(guint8, (gsize)c * h * w);
    for (int i = 0; i < c * h * w; i++) {
        px[i] = (guint8)((i * 37 + 11) % 251);
    }
    tdm_image_set_u8(img, px, c, h, w);
}

/* Run `p` on a fresh copy of the test image; returns the output (caller
 * clears it). */
static TdmImage run(TdmTransformPipeline *p, int c, int h, int w, guint64 seed, guint64 epoch,
                    guint64 index)
{
    TdmImage img = {0}, scratch = {0};
    GError *error = NULL;
    make_image(&img, c, h, w);
    gboolean ok = tdm_transform_pipeline_apply(p, &img, &scratch, seed, epoch, index, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    g_assert_true(img.normalized);
    tdm_image_clear(&scratch);
    return img;
}

static gboolean same_pixels(const TdmImage *a, const TdmImage *b)
{
    return a->c == b->c && a->h == b->h && a->w == b->w &&
           memcmp(a->data, b->data, sizeof(float) * (size_t)a->c * a->h * a->w) == 0;
}

/* ---- random streams ---- */

static void test_rng(void)
{
    TdmRng a, b, c;
    tdm_rng_init(&a, 1, 2, 3, 4);
    tdm_rng_init(&b, 1, 2, 3, 4);
    tdm_rng_init(&c, 1, 2, 4, 4);
    int same_as_other = 0;
    for (int i = 0; i < 100; i++) {
        guint64 x = tdm_rng_next_u64(&a);
        g_assert_cmpuint(x, ==, tdm_rng_next_u64(&b));
        same_as_other += x == tdm_rng_next_u64(&c);
    }
    g_assert_cmpint(same_as_other, ==, 0);

    /* Streams differing in one key word are unrelated; draws are in range
     * and roughly uniform. */
    int counts[10] = {0};
    for (guint64 s = 0; s < 5000; s++) {
        TdmRng r;
        tdm_rng_init(&r, 42, 0, s, 0);
        double u = tdm_rng_uniform(&r);
        g_assert_cmpfloat(u, >=, 0.0);
        g_assert_cmpfloat(u, <, 1.0);
        counts[tdm_rng_below(&r, 10)]++;
        double v = tdm_rng_range(&r, -3.0, 5.0);
        g_assert_cmpfloat(v, >=, -3.0);
        g_assert_cmpfloat(v, <, 5.0);
    }
    for (int k = 0; k < 10; k++) {
        g_assert_cmpint(counts[k], >, 400);
        g_assert_cmpint(counts[k], <, 600);
    }
    /* Fixed values: the stream must not change between platforms or
     * releases, or resumed runs would augment differently. */
    TdmRng r;
    tdm_rng_init(&r, 0, 0, 0, 0);
    guint64 first = tdm_rng_next_u64(&r);
    tdm_rng_init(&r, 0, 0, 0, 0);
    g_assert_cmpuint(tdm_rng_next_u64(&r), ==, first);
    g_assert_cmpuint(tdm_rng_below(&r, 1), ==, 0);
}

/* ---- parser ---- */

static void test_parse_ok(void)
{
    g_autoptr(TdmTransformPipeline) empty = parse_ok("   ");
    g_assert_cmpint(tdm_transform_pipeline_length(empty), ==, 0);
    g_autoptr(TdmTransformPipeline) p =
        parse_ok("  pad 4|random-crop 32 |hflip p = 1| rotate degrees=-10,10 fill=0 | "
                 "color-jitter 0.2 0.3 | normalize mean=0.5, 0.5, 0.5 std=0.2 ");
    g_assert_cmpint(tdm_transform_pipeline_length(p), ==, 6);
    int n = 0;
    float mean[4], std[4];
    g_assert_true(tdm_transform_pipeline_get_normalization(p, &n, mean, std));
    g_assert_cmpint(n, ==, 3);
    g_assert_cmpfloat(mean[2], ==, 0.5f);
    g_assert_cmpfloat(std[2], ==, 0.2f);
    /* The pipelines. */
    g_autoptr(TdmTransformPipeline) q = parse_ok(
        "random-resized-crop size=64 scale=0.5,1 | hflip p=0.5 | rotate degrees=15 | "
        "color-jitter brightness=0.2 contrast=0.2 | normalize mean=0.5,0.5,0.5 "
        "std=0.25,0.25,0.25");
    g_assert_cmpint(tdm_transform_pipeline_length(q), ==, 5);
    g_autoptr(TdmTransformPipeline) r = parse_ok("random-crop 28 pad=2 | hflip | rotate "
                                                 "degrees=10 | normalize");
    g_assert_false(tdm_transform_pipeline_get_normalization(r, &n, mean, std));
}

static void test_parse_errors(void)
{
    parse_fails("pad 4 | random-flip | hflip", "'random-flip'", "column 9", "hflip",
                "random-crop", NULL);
    parse_fails("hflip | rotate degrees=abc", "degrees=abc", "column 16", "number", NULL);
    parse_fails("hflip p=2", "p=2", "column 7", "in [0, 1]", NULL);
    parse_fails("hflip q=1", "unknown parameter 'q'", "column 7", "known: p", NULL);
    parse_fails("pad 4 | random-crop", "random-crop", "column 9", "missing parameter size", NULL);
    parse_fails("pad 4 | random-crop padding=2", "column 9", "missing parameter size", NULL);
    parse_fails("hflip | | vflip", "missing transform", "column 9", NULL);
    parse_fails("| hflip", "missing transform", "column 1", NULL);
    parse_fails("hflip |  ", "missing transform", "the end", "column 10", NULL);
    parse_fails("hflip 0.5 0.7", "'0.7'", "column 11", "too many", NULL);
    parse_fails("pad 1,2,3", "padding=1,2,3", "column 5", "1, 2 or 4", NULL);
    parse_fails("center-crop 0", "size=0", "column 13", ">= 1", NULL);
    parse_fails("normalize mean=0.5", "std", "both", NULL);
    parse_fails("normalize mean=0.5 std=0", "std=0", "> 0", NULL);
    parse_fails("rotate degrees=", "degrees=", "missing value", "column 8", NULL);
    parse_fails("hflip p=0.5 p=0.2", "given twice", "columns 7 and 13", NULL);
    parse_fails("pad 2 padding_mode=wrap", "padding_mode=wrap", "reflect", NULL);
    parse_fails("hflip =3", "'='", "column 7", NULL);
    parse_fails("h@flip", "column 2", NULL);
}

/* ---- shapes ---- */

static void check_shape(const char *spec, int c, int h, int w, int ec, int eh, int ew)
{
    g_autoptr(TdmTransformPipeline) p = parse_ok(spec);
    GError *error = NULL;
    int oc = -1, oh = -1, ow = -1;
    g_assert_true(tdm_transform_pipeline_output_shape(p, c, h, w, &oc, &oh, &ow, &error));
    g_assert_no_error(error);
    g_assert_cmpint(oc, ==, ec);
    g_assert_cmpint(oh, ==, eh);
    g_assert_cmpint(ow, ==, ew);
    if (h == 0 || w == 0) {
        return; /* nothing to run it on */
    }
    /* What apply produces agrees. */
    TdmImage out = run(p, c, h, w, 3, 0, 1);
    g_assert_cmpint(out.c, ==, ec);
    g_assert_cmpint(out.h, ==, eh);
    g_assert_cmpint(out.w, ==, ew);
    tdm_image_clear(&out);
}

static void shape_fails(const char *spec, int c, int h, int w, const char *want)
{
    g_autoptr(TdmTransformPipeline) p = parse_ok(spec);
    GError *error = NULL;
    int oc, oh, ow;
    g_assert_false(tdm_transform_pipeline_output_shape(p, c, h, w, &oc, &oh, &ow, &error));
    g_assert_nonnull(error);
    if (strstr(error->message, want) == NULL) {
        g_error("'%s': error '%s' does not mention '%s'", spec, error->message, want);
    }
    g_error_free(error);
}

static void test_shapes(void)
{
    check_shape("", 1, 28, 28, 1, 28, 28);
    check_shape("pad 4 | random-crop 32", 1, 28, 28, 1, 32, 32);
    check_shape("random-crop 28 pad=2 | hflip | rotate degrees=10 | normalize mean=0.3 std=0.3",
                1, 28, 28, 1, 28, 28);
    check_shape("pad 1,2,3,4", 3, 10, 10, 3, 16, 14);
    check_shape("resize 14", 1, 28, 56, 1, 14, 28);
    check_shape("resize 20", 3, 50, 30, 3, 33, 20);
    check_shape("resize 7,9", 3, 50, 30, 3, 7, 9);
    check_shape("random-resized-crop 64 | hflip", 3, 96, 96, 3, 64, 64);
    check_shape("center-crop 40,30", 1, 28, 28, 1, 40, 30);
    check_shape("random-crop 32 pad_if_needed=true", 1, 28, 20, 1, 32, 32);
    shape_fails("random-crop 32", 1, 28, 28, "32x32");
    shape_fails("random-crop 32", 1, 28, 28, "28x28");
    shape_fails("normalize mean=0.1,0.2,0.3 std=0.3", 1, 28, 28, "1 channels");
    shape_fails("normalize", 1, 28, 28, "mean=");
    /* A size that depends on each image: the loader cannot batch it. */
    shape_fails("resize 20", 3, 0, 0, "varies");
    check_shape("resize 20 | center-crop 20", 3, 0, 0, 3, 20, 20);
}

/* ---- determinism and random choices ---- */

static const char *const busy = "random-crop 24 padding=2 | hflip | rotate 20 | color-jitter "
                                "brightness=0.4 contrast=0.4 | random-erasing p=0.7";

static void test_determinism(void)
{
    g_autoptr(TdmTransformPipeline) p = parse_ok(busy);
    TdmImage a = run(p, 1, 28, 28, 7, 1, 5);
    /* Other samples in between, and buffers reused, change nothing. */
    TdmImage img = {0}, scratch = {0};
    GError *error = NULL;
    for (guint64 i = 0; i < 20; i++) {
        make_image(&img, 1, 28, 28);
        g_assert_true(tdm_transform_pipeline_apply(p, &img, &scratch, 7, 1, i, &error));
    }
    make_image(&img, 1, 28, 28);
    g_assert_true(tdm_transform_pipeline_apply(p, &img, &scratch, 7, 1, 5, &error));
    g_assert_no_error(error);
    g_assert_true(same_pixels(&a, &img));
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
    /* A second pipeline parsed from the same string agrees too. */
    g_autoptr(TdmTransformPipeline) p2 = parse_ok(busy);
    TdmImage b = run(p2, 1, 28, 28, 7, 1, 5);
    g_assert_true(same_pixels(&a, &b));
    /* Another index, epoch or seed: other random choices. */
    TdmImage c = run(p, 1, 28, 28, 7, 1, 6);
    TdmImage d = run(p, 1, 28, 28, 7, 2, 5);
    TdmImage e = run(p, 1, 28, 28, 8, 1, 5);
    g_assert_false(same_pixels(&a, &c));
    g_assert_false(same_pixels(&a, &d));
    g_assert_false(same_pixels(&a, &e));
    tdm_image_clear(&a);
    tdm_image_clear(&b);
    tdm_image_clear(&c);
    tdm_image_clear(&d);
    tdm_image_clear(&e);
}

static void test_flip_probability(void)
{
    g_autoptr(TdmTransformPipeline) never = parse_ok("hflip p=0");
    g_autoptr(TdmTransformPipeline) always = parse_ok("hflip p=1");
    g_autoptr(TdmTransformPipeline) half = parse_ok("hflip");
    g_autoptr(TdmTransformPipeline) none = parse_ok("");
    TdmImage orig = run(none, 1, 5, 7, 0, 0, 0);
    int flipped = 0;
    for (guint64 i = 0; i < 400; i++) {
        TdmImage n = run(never, 1, 5, 7, 1, 0, i);
        TdmImage a = run(always, 1, 5, 7, 1, 0, i);
        TdmImage h = run(half, 1, 5, 7, 1, 0, i);
        g_assert_true(same_pixels(&n, &orig));
        for (int y = 0; y < 5; y++) {
            for (int x = 0; x < 7; x++) {
                g_assert_cmpfloat(a.data[y * 7 + x], ==, orig.data[y * 7 + 6 - x]);
            }
        }
        if (same_pixels(&h, &a)) {
            flipped++;
        } else {
            g_assert_true(same_pixels(&h, &orig));
        }
        tdm_image_clear(&n);
        tdm_image_clear(&a);
        tdm_image_clear(&h);
    }
    g_assert_cmpint(flipped, >, 150);
    g_assert_cmpint(flipped, <, 250);

    TdmImage orig3 = run(none, 3, 16, 16, 0, 0, 0);
    g_autoptr(TdmTransformPipeline) erase0 = parse_ok("random-erasing p=0 value=1");
    g_autoptr(TdmTransformPipeline) erase1 = parse_ok("random-erasing p=1 value=1");
    int erased = 0;
    for (guint64 i = 0; i < 50; i++) {
        TdmImage z = run(erase0, 3, 16, 16, 2, 0, i);
        TdmImage o = run(erase1, 3, 16, 16, 2, 0, i);
        g_assert_true(same_pixels(&z, &orig3));
        int ones = 0;
        for (int k = 0; k < 3 * 16 * 16; k++) {
            ones += o.data[k] == 1.0f;
        }
        erased += ones > 0;
        tdm_image_clear(&z);
        tdm_image_clear(&o);
    }
    g_assert_cmpint(erased, >=, 45); /* 10 tries rarely all fail */
    tdm_image_clear(&orig);
    tdm_image_clear(&orig3);
}

static void test_random_crop_offsets(void)
{
    /* random-crop 26 on 28 has 3 x 3 windows: every one is drawn. */
    g_autoptr(TdmTransformPipeline) none = parse_ok("");
    g_autoptr(TdmTransformPipeline) p = parse_ok("random-crop 26");
    TdmImage orig = run(none, 1, 28, 28, 0, 0, 0);
    int seen[3][3] = {{0}};
    for (guint64 i = 0; i < 300; i++) {
        TdmImage o = run(p, 1, 28, 28, 11, 0, i);
        int found = 0;
        for (int dy = 0; dy < 3; dy++) {
            for (int dx = 0; dx < 3; dx++) {
                if (o.data[0] == orig.data[dy * 28 + dx] &&
                    o.data[25 * 26 + 25] == orig.data[(dy + 25) * 28 + dx + 25]) {
                    seen[dy][dx]++;
                    found++;
                }
            }
        }
        g_assert_cmpint(found, ==, 1);
        tdm_image_clear(&o);
    }
    for (int dy = 0; dy < 3; dy++) {
        for (int dx = 0; dx < 3; dx++) {
            g_assert_cmpint(seen[dy][dx], >, 10);
        }
    }
    tdm_image_clear(&orig);
}

static void test_random_resized_crop_fallback(void)
{
    /* Area 1 at ratio 1 never fits a 10x40 image: torchvision falls back to
     * the central crop of the nearest allowed ratio, here 10x10 at x = 15. */
    g_autoptr(TdmTransformPipeline) none = parse_ok("");
    g_autoptr(TdmTransformPipeline) p = parse_ok("random-resized-crop 10 scale=1,1 ratio=1,1");
    TdmImage orig = run(none, 1, 10, 40, 0, 0, 0);
    TdmImage o = run(p, 1, 10, 40, 5, 0, 3);
    for (int y = 0; y < 10; y++) {
        for (int x = 0; x < 10; x++) {
            g_assert_cmpfloat(fabsf(o.data[y * 10 + x] - orig.data[y * 40 + 15 + x]), <, 1e-6f);
        }
    }
    tdm_image_clear(&orig);
    tdm_image_clear(&o);
}

static void test_rotate_range(void)
{
    /* degrees=D draws from [-D, D]: a 0-degree rotation is the identity and
     * other draws differ from sample to sample. */
    g_autoptr(TdmTransformPipeline) none = parse_ok("");
    g_autoptr(TdmTransformPipeline) zero = parse_ok("rotate 0");
    g_autoptr(TdmTransformPipeline) some = parse_ok("rotate 30");
    TdmImage orig = run(none, 3, 9, 11, 0, 0, 0);
    TdmImage z = run(zero, 3, 9, 11, 1, 0, 0);
    g_assert_true(same_pixels(&z, &orig));
    TdmImage a = run(some, 3, 9, 11, 1, 0, 0);
    TdmImage b = run(some, 3, 9, 11, 1, 0, 1);
    g_assert_false(same_pixels(&a, &b));
    g_assert_false(same_pixels(&a, &orig));
    tdm_image_clear(&orig);
    tdm_image_clear(&z);
    tdm_image_clear(&a);
    tdm_image_clear(&b);
}

/* ---- normalize ---- */

static void test_normalize(void)
{
    const guint8 px[4] = {0, 51, 102, 255};
    GError *error = NULL;
    TdmImage img = {0}, scratch = {0};

    g_autoptr(TdmTransformPipeline) plain = parse_ok("");
    tdm_image_set_u8(&img, px, 1, 2, 2);
    g_assert_true(tdm_transform_pipeline_apply(plain, &img, &scratch, 0, 0, 0, &error));
    for (int i = 0; i < 4; i++) {
        g_assert_cmpfloat(fabsf(img.data[i] - px[i] / 255.0f), <, 1e-6f);
    }

    g_autoptr(TdmTransformPipeline) p = parse_ok("normalize mean=0.2 std=0.5");
    tdm_image_set_u8(&img, px, 1, 2, 2);
    g_assert_true(tdm_transform_pipeline_apply(p, &img, &scratch, 0, 0, 0, &error));
    for (int i = 0; i < 4; i++) {
        g_assert_cmpfloat(fabsf(img.data[i] - (px[i] / 255.0f - 0.2f) / 0.5f), <, 1e-6f);
    }

    /* Per channel. */
    const guint8 rgb[3] = {255, 255, 255};
    g_autoptr(TdmTransformPipeline) q = parse_ok("normalize 0.5,0.4,0.3 0.1,0.2,0.4");
    tdm_image_set_u8(&img, rgb, 3, 1, 1);
    g_assert_true(tdm_transform_pipeline_apply(q, &img, &scratch, 0, 0, 0, &error));
    g_assert_cmpfloat(fabsf(img.data[0] - 5.0f), <, 1e-5f);
    g_assert_cmpfloat(fabsf(img.data[1] - 3.0f), <, 1e-5f);
    g_assert_cmpfloat(fabsf(img.data[2] - 1.75f), <, 1e-5f);

    /* An argument-less normalize takes the dataset's constants. */
    g_autoptr(TdmTransformPipeline) d = parse_ok("hflip p=0 | normalize");
    const float mean = 0.2860f, std = 0.3530f;
    tdm_transform_pipeline_set_normalization(d, 1, &mean, &std);
    int oc, oh, ow, n = 0;
    g_assert_true(tdm_transform_pipeline_output_shape(d, 1, 2, 2, &oc, &oh, &ow, &error));
    g_assert_no_error(error);
    float m[4], s[4];
    g_assert_true(tdm_transform_pipeline_get_normalization(d, &n, m, s));
    g_assert_cmpint(n, ==, 1);
    g_assert_cmpfloat(fabsf(m[0] - mean), <, 1e-6f);
    tdm_image_set_u8(&img, px, 1, 2, 2);
    g_assert_true(tdm_transform_pipeline_apply(d, &img, &scratch, 0, 0, 0, &error));
    for (int i = 0; i < 4; i++) {
        g_assert_cmpfloat(fabsf(img.data[i] - (px[i] / 255.0f - mean) / std), <, 1e-5f);
    }
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
}

/* ---- reference counting, and pipelines shared with loaders ---- */

/* A dataset of n 1x2x3 images whose pixel k of sample i is 40 * (i % 4) + k,
 * labelled i. */
static gboolean tiny_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                          GError **error)
{
    for (int k = 0; k < 6; k++) {
        image[k] = (guint8)(40 * (index % 4) + k);
    }
    *label = (int32_t)index;
    return TRUE;
}

static const TdmDatasetClass tiny_class = {
    TDM_CLASS_HEADER(TDM_DATASET_IFACE_VERSION, TdmDatasetClass),
    .read = tiny_read,
};

static TdmDataset tiny_dataset(void)
{
    TdmDataset ds = {.klass = &tiny_class, .kind = (char *)"tiny", .path = (char *)"/tiny",
                     .split = (char *)"train", .length = 12, .channels = 1, .height = 2,
                     .width = 3, .num_classes = 12};
    return ds;
}

/* A loader over `ds` with 2 workers, in order, batches of 4, running `p`,
 * with the options' constants (mean 0.5, std 0.25) when `constants`. */
static TdmLoader *tiny_loader(TdmDataset *ds, TdmTransformPipeline *p, gboolean constants)
{
    g_autoptr(GError) error = NULL;
    TdmDevice *dev = tdm_device_get("ref", &error);
    g_assert_no_error(error);
    TdmLoaderOptions o;
    tdm_loader_options_init(&o);
    o.batch_size = 4;
    o.shuffle = FALSE;
    o.workers = 2;
    o.transforms = p;
    if (constants) {
        o.n_mean = 1;
        o.mean[0] = 0.5f;
        o.std[0] = 0.25f;
    }
    TdmLoader *l = tdm_loader_new(ds, dev, &o, &error);
    g_assert_no_error(error);
    return l;
}

/* Every image of an epoch of `l` (12 samples of 6 floats). */
static void tiny_epoch(TdmLoader *l, float out[12 * 6])
{
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_loader_start_epoch(l, 0, &error));
    TdmBatch *b;
    int64_t at = 0;
    while ((b = tdm_loader_next(l, &error)) != NULL) {
        g_assert_true(tdm_tensor_read(b->images, out + at * 6, &error));
        at += b->size;
    }
    g_assert_no_error(error);
    g_assert_cmpint(at, ==, 12);
}

static void test_pipeline_ref(void)
{
    TdmTransformPipeline *p = parse_ok("hflip p=1");
    g_assert_true(tdm_transform_pipeline_ref(p) == p);
    tdm_transform_pipeline_unref(p);
    /* one reference left: still a working pipeline */
    const guint8 px[3] = {10, 20, 30};
    TdmImage img = {0}, scratch = {0};
    g_autoptr(GError) error = NULL;
    tdm_image_set_u8(&img, px, 1, 1, 3);
    g_assert_true(tdm_transform_pipeline_apply(p, &img, &scratch, 0, 0, 0, &error));
    g_assert_cmpfloat(fabsf(img.data[0] - 30 / 255.0f), <, 1e-6f);
    tdm_transform_pipeline_unref(p);
    tdm_transform_pipeline_unref(NULL);
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
}

/* The loader fills an argument-less normalize with its options' constants
 * in a copy: the caller's pipeline still lacks them afterwards. */
static void test_loader_leaves_pipeline(void)
{
    TdmDataset ds = tiny_dataset();
    g_autoptr(TdmTransformPipeline) p = parse_ok("hflip p=1 | normalize");
    TdmLoader *l = tiny_loader(&ds, p, TRUE);
    float got[12 * 6];
    tiny_epoch(l, got);
    for (int i = 0; i < 12; i++) {
        for (int k = 0; k < 6; k++) {
            int x = k % 3, y = k / 3; /* flipped: pixel (y, 2 - x) */
            float v = (float)(40 * (i % 4) + 3 * y + (2 - x));
            g_assert_cmpfloat(fabsf(got[i * 6 + k] - (v / 255.0f - 0.5f) / 0.25f), <, 1e-5f);
        }
    }
    int n = 0, oc, oh, ow;
    float m[TDM_MAX_CHANNELS], s[TDM_MAX_CHANNELS];
    g_assert_false(tdm_transform_pipeline_get_normalization(p, &n, m, s));
    g_autoptr(GError) error = NULL;
    g_assert_false(tdm_transform_pipeline_output_shape(p, 1, 2, 3, &oc, &oh, &ow, &error));
    g_assert_nonnull(error);
    tdm_loader_free(l);

    /* Constants the owner set first are the ones the loader runs, whatever
     * its options say. */
    g_autoptr(TdmTransformPipeline) q = parse_ok("normalize");
    const float mean = 0.1f, std = 0.5f;
    tdm_transform_pipeline_set_normalization(q, 1, &mean, &std);
    l = tiny_loader(&ds, q, TRUE);
    tiny_epoch(l, got);
    g_assert_cmpfloat(fabsf(got[6] - (40 / 255.0f - mean) / std), <, 1e-5f);
    g_assert_true(tdm_transform_pipeline_get_normalization(q, &n, m, s));
    g_assert_cmpfloat(fabsf(m[0] - mean), <, 1e-6f);
    tdm_loader_free(l);
}

/* A freed loader leaves the pipeline working; a loader keeps running the
 * pipeline after its caller dropped it. */
static void test_pipeline_loader_lifetimes(void)
{
    TdmDataset ds = tiny_dataset();
    const char *spec = "hflip p=1 | normalize mean=0.5 std=0.25";
    float want[12 * 6], got[12 * 6];
    TdmTransformPipeline *p = parse_ok(spec);
    TdmLoader *l = tiny_loader(&ds, p, FALSE);
    tiny_epoch(l, want);
    tdm_loader_free(l);
    const guint8 px[6] = {0, 1, 2, 3, 4, 5};
    TdmImage img = {0}, scratch = {0};
    g_autoptr(GError) error = NULL;
    tdm_image_set_u8(&img, px, 1, 2, 3);
    g_assert_true(tdm_transform_pipeline_apply(p, &img, &scratch, 0, 0, 0, &error));
    g_assert_cmpmem(img.data, sizeof(float) * 6, want, sizeof(float) * 6); /* sample 0 */

    l = tiny_loader(&ds, p, FALSE);
    tdm_transform_pipeline_unref(p); /* the loader's reference is the last */
    for (int epoch = 0; epoch < 2; epoch++) {
        memset(got, 0, sizeof(got));
        tiny_epoch(l, got);
        g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
    }
    tdm_loader_free(l);
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/transforms/rng", test_rng);
    g_test_add_func("/transforms/parse-ok", test_parse_ok);
    g_test_add_func("/transforms/parse-errors", test_parse_errors);
    g_test_add_func("/transforms/shapes", test_shapes);
    g_test_add_func("/transforms/determinism", test_determinism);
    g_test_add_func("/transforms/probability", test_flip_probability);
    g_test_add_func("/transforms/random-crop-offsets", test_random_crop_offsets);
    g_test_add_func("/transforms/random-resized-crop-fallback",
                    test_random_resized_crop_fallback);
    g_test_add_func("/transforms/rotate-range", test_rotate_range);
    g_test_add_func("/transforms/normalize", test_normalize);
    g_test_add_func("/transforms/pipeline/ref", test_pipeline_ref);
    g_test_add_func("/transforms/pipeline/loader-leaves-it", test_loader_leaves_pipeline);
    g_test_add_func("/transforms/pipeline/loader-lifetimes", test_pipeline_loader_lifetimes);
    return g_test_run();
}

/* SPDX-License-Identifier: MIT */
/* tests/test-datasets.c - the cifar and imagefolder dataset readers.
 *
 * Fixtures are made at test time by tests/make-fixtures.py into a temporary
 * directory: CIFAR-10 and CIFAR-100 files whose pixels and labels follow
 * formulas recomputed here, and image folders (PNG and JPEG, RGB, grey,
 * RGBA and palette images of different sizes) with PIL's decoding of each
 * image as the reference: PNG pixels must match exactly, JPEG pixels within
 * 2 grey levels. The sample order must be torchvision's ImageFolder order.
 * Bad input (truncated record, bad label, corrupt PNG, text named .jpg, a
 * cut JPEG, an empty class folder, no classes, a missing directory) must
 * fail with an error naming the file, and the offset where one applies.
 * The image-folder tests skip when PIL or the plugin is missing.
 */
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tandem/tandem.h>

#define CIFAR_PIXELS 3072

static char *fixtures;       /* the temporary directory */
static gboolean have_images; /* image fixtures made and the plugin loaded */

static char *fx(const char *rel)
{
    return g_build_filename(fixtures, rel, NULL);
}

static TdmDataset *open_ok(const char *kind, const char *rel, const char *split)
{
    g_autofree char *dir = fx(rel);
    g_autofree char *spec = g_strdup_printf("%s:%s", kind, dir);
    GError *error = NULL;
    TdmDataset *ds = tdm_dataset_open(spec, split, &error);
    g_assert_no_error(error);
    g_assert_nonnull(ds);
    return ds;
}

/* Opening (or, with read_index >= 0, reading sample read_index) fails with
 * a message that contains every one of the NULL-terminated `needles`. */
static void expect_error(const char *spec, const char *split, int64_t read_index, ...)
{
    GError *error = NULL;
    TdmDataset *ds = tdm_dataset_open(spec, split, &error);
    if (read_index >= 0) {
        g_assert_no_error(error);
        TdmImage img = {0};
        int32_t label;
        g_assert_false(ds->klass->read_image(ds, read_index, &img, &label, &error));
        tdm_image_clear(&img);
        tdm_dataset_close(ds);
    } else {
        g_assert_null(ds);
    }
    g_assert_nonnull(error);
    g_test_message("error: %s", error->message);
    va_list ap;
    va_start(ap, read_index);
    const char *needle;
    while ((needle = va_arg(ap, const char *)) != NULL) {
        if (strstr(error->message, needle) == NULL) {
            g_error("error '%s' lacks '%s'", error->message, needle);
        }
    }
    va_end(ap);
    g_error_free(error);
}

/* ---- CIFAR ---- */

static guint8 cifar_pixel(int64_t i, int split, int k)
{
    return (guint8)((37 * i + 11 * k + 101 * split) % 256);
}

static void check_cifar_samples(TdmDataset *ds, int split, gboolean c100, gboolean coarse)
{
    guint8 img[CIFAR_PIXELS];
    for (int64_t i = 0; i < ds->length; i++) {
        int32_t label = -1;
        g_autoptr(GError) error = NULL;
        g_assert_true(tdm_dataset_read(ds, i, img, &label, &error));
        int32_t want = !c100    ? (3 * i + 7 * split) % 10
                       : coarse ? (i + split) % 20
                                : (13 * i + 5 + split) % 100;
        g_assert_cmpint(label, ==, want);
        for (int k = 0; k < CIFAR_PIXELS; k++) {
            if (img[k] != cifar_pixel(i, split, k)) {
                g_error("sample %" G_GINT64_FORMAT " pixel %d: %u, expected %u", i, k, img[k],
                        cifar_pixel(i, split, k));
            }
        }
    }
}

static void test_cifar10(void)
{
    TdmDataset *ds = open_ok("cifar10", "cifar10", "train");
    g_assert_cmpint(ds->length, ==, 5); /* 3 + 2 over two batch files */
    g_assert_cmpint(ds->channels, ==, 3);
    g_assert_cmpint(ds->height, ==, 32);
    g_assert_cmpint(ds->width, ==, 32);
    g_assert_cmpint(ds->num_classes, ==, 10);
    check_cifar_samples(ds, 0, FALSE, FALSE);
    int n;
    float mean[4], std[4];
    g_assert_true(tdm_dataset_get_normalization(ds, &n, mean, std, NULL));
    g_assert_cmpint(n, ==, 3);
    g_assert_cmpfloat_with_epsilon(mean[0], 0.4914, 1e-6);
    g_assert_cmpfloat_with_epsilon(mean[2], 0.4465, 1e-6);
    g_assert_cmpfloat_with_epsilon(std[1], 0.2435, 1e-6);
    tdm_dataset_close(ds);

    ds = open_ok("cifar", "cifar10", "test");
    g_assert_cmpint(ds->length, ==, 2);
    check_cifar_samples(ds, 1, FALSE, FALSE);
    tdm_dataset_close(ds);
}

static void test_cifar100(void)
{
    TdmDataset *ds = open_ok("cifar", "cifar100", "train");
    g_assert_cmpint(ds->length, ==, 4);
    g_assert_cmpint(ds->num_classes, ==, 100);
    check_cifar_samples(ds, 0, TRUE, FALSE);
    tdm_dataset_close(ds);
    ds = open_ok("cifar100", "cifar100", "test");
    g_assert_cmpint(ds->length, ==, 3);
    check_cifar_samples(ds, 1, TRUE, FALSE);
    tdm_dataset_close(ds);
    ds = open_ok("cifar100", "cifar100,label=coarse", "test");
    g_assert_cmpint(ds->num_classes, ==, 20);
    check_cifar_samples(ds, 1, TRUE, TRUE);
    tdm_dataset_close(ds);
}

/* A directory not named like a known dataset: mean and std estimated from
 * the samples themselves. */
static void test_cifar_estimated_normalization(void)
{
    g_autofree char *src = fx("cifar10/test_batch.bin");
    g_autofree char *dir = fx("other");
    g_autofree char *dst = fx("other/test_batch.bin");
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_autofree char *data = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(src, &data, &len, NULL));
    g_assert_true(g_file_set_contents(dst, data, (gssize)len, NULL));
    TdmDataset *ds = open_ok("cifar", "other", "test");
    int n;
    float mean[4], std[4];
    g_assert_true(tdm_dataset_get_normalization(ds, &n, mean, std, NULL));
    g_assert_cmpint(n, ==, 3);
    for (int ch = 0; ch < 3; ch++) {
        double sum = 0;
        for (int64_t i = 0; i < 2; i++) {
            for (int k = 0; k < 1024; k++) {
                sum += cifar_pixel(i, 1, ch * 1024 + k) / 255.0;
            }
        }
        g_assert_cmpfloat_with_epsilon(mean[ch], sum / 2048, 1e-5);
    }
    tdm_dataset_close(ds);
}

/* Copy fixtures/cifar10 into fixtures/NAME, then let `edit` damage it. */
static char *cifar_copy(const char *name)
{
    char *dir = fx(name);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    const char *files[] = {"data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *src = g_build_filename(fixtures, "cifar10", files[i], NULL);
        g_autofree char *dst = g_build_filename(dir, files[i], NULL);
        g_autofree char *data = NULL;
        gsize len;
        g_assert_true(g_file_get_contents(src, &data, &len, NULL));
        g_assert_true(g_file_set_contents(dst, data, (gssize)len, NULL));
    }
    return dir;
}

static void test_cifar_bad_input(void)
{
    /* A truncated last record: 2 whole records (6146 bytes) + 100 bytes. */
    g_autofree char *trunc = cifar_copy("trunc");
    g_autofree char *b2 = g_build_filename(trunc, "data_batch_2.bin", NULL);
    g_autofree char *data = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(b2, &data, &len, NULL));
    g_assert_cmpuint(len, ==, 6146);
    data = g_realloc(data, len + 100);
    memset(data + len, 7, 100);
    g_assert_true(g_file_set_contents(b2, data, (gssize)len + 100, NULL));
    g_autofree char *spec = g_strconcat("cifar10:", trunc, NULL);
    expect_error(spec, "train", -1, b2, "truncated record 2", "byte 6146", NULL);

    /* A label out of range in record 1 (byte 3073). */
    g_autofree char *badlabel = cifar_copy("badlabel");
    g_autofree char *tb = g_build_filename(badlabel, "test_batch.bin", NULL);
    g_autofree char *tdata = NULL;
    g_assert_true(g_file_get_contents(tb, &tdata, &len, NULL));
    tdata[3073] = 10;
    g_assert_true(g_file_set_contents(tb, tdata, (gssize)len, NULL));
    g_autofree char *spec2 = g_strconcat("cifar:", badlabel, NULL);
    expect_error(spec2, "test", -1, tb, "record 1", "byte 3073", "label 10", NULL);

    /* A gap in the training batches. */
    g_autofree char *gap = cifar_copy("gap");
    g_autofree char *b1 = g_build_filename(gap, "data_batch_1.bin", NULL);
    g_assert_cmpint(g_unlink(b1), ==, 0);
    g_autofree char *spec3 = g_strconcat("cifar:", gap, NULL);
    expect_error(spec3, "train", -1, gap, "data_batch_1.bin", NULL);

    /* Missing directory, wrong format for the name, bad option, bad split. */
    g_autofree char *missing = fx("no-such-dir");
    g_autofree char *spec4 = g_strconcat("cifar10:", missing, NULL);
    expect_error(spec4, "train", -1, missing, "no such dataset directory", NULL);
    g_autofree char *c100 = fx("cifar100");
    g_autofree char *spec5 = g_strconcat("cifar10:", c100, NULL);
    expect_error(spec5, "train", -1, c100, "CIFAR-100", NULL);
    g_autofree char *spec6 = g_strconcat("cifar100:", c100, ",label=medium", NULL);
    expect_error(spec6, "train", -1, "label=medium", NULL);
    g_autofree char *spec7 = g_strconcat("cifar100:", c100, NULL);
    expect_error(spec7, "validation", -1, "validation", NULL);
    /* No Debian package: a bare name says how to name the directory. */
    expect_error("cifar10", "train", -1, "cifar10:PATH", NULL);
}

/* ---- image folders ---- */

typedef struct {
    char *path;
    int label, w, h;
    gboolean jpeg;
} Expected;

static GPtrArray *read_expected(void)
{
    g_autofree char *p = fx("good.expect");
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(p, &text, NULL, NULL));
    GPtrArray *out = g_ptr_array_new();
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);
        g_assert_cmpint(g_strv_length(f), ==, 5);
        Expected *e = g_new0(Expected, 1);
        e->path = g_strdup(f[0]);
        e->label = atoi(f[1]);
        e->w = atoi(f[2]);
        e->h = atoi(f[3]);
        e->jpeg = g_str_equal(f[4], "JPEG");
        g_ptr_array_add(out, e);
    }
    return out;
}

static void free_expected(GPtrArray *v)
{
    for (guint i = 0; i < v->len; i++) {
        Expected *e = v->pdata[i];
        g_free(e->path);
        g_free(e);
    }
    g_ptr_array_free(v, TRUE);
}

static void check_folder_pixels(const char *spec_suffix, int channels, const char *ref_dir)
{
    GPtrArray *want = read_expected();
    g_autofree char *dir = fx("good");
    g_autofree char *spec = g_strconcat("imagefolder:", dir, spec_suffix, NULL);
    GError *error = NULL;
    TdmDataset *ds = tdm_dataset_open(spec, "train", &error);
    g_assert_no_error(error);
    g_assert_cmpint(ds->length, ==, want->len);
    g_assert_cmpint(ds->channels, ==, channels);
    g_assert_cmpint(ds->height, ==, 0);
    g_assert_cmpint(ds->width, ==, 0);
    g_assert_cmpint(ds->num_classes, ==, 3);
    TdmImage img = {0};
    for (guint i = 0; i < want->len; i++) {
        Expected *e = want->pdata[i];
        int32_t label = -1;
        g_assert_true(ds->klass->read_image(ds, i, &img, &label, &error));
        g_assert_no_error(error);
        g_assert_cmpint(label, ==, e->label);
        g_assert_cmpint(img.c, ==, channels);
        g_assert_cmpint(img.h, ==, e->h);
        g_assert_cmpint(img.w, ==, e->w);
        g_autofree char *name = g_strdup_printf("%03u.raw", i);
        g_autofree char *raw_path = g_build_filename(fixtures, ref_dir, name, NULL);
        g_autofree guint8 *ref = NULL;
        gsize len;
        g_assert_true(g_file_get_contents(raw_path, (char **)&ref, &len, NULL));
        g_assert_cmpuint(len, ==, (gsize)channels * e->h * e->w);
        double tol = e->jpeg ? 2.0 : 0.0, worst = 0;
        for (gsize k = 0; k < len; k++) {
            worst = MAX(worst, fabs(img.data[k] - ref[k]));
        }
        g_test_message("%s: max difference from PIL %g", e->path, worst);
        if (worst > tol) {
            g_error("%s: pixels differ from PIL's by up to %g (tolerance %g)", e->path, worst, tol);
        }
    }
    tdm_image_clear(&img);
    tdm_dataset_close(ds);
    free_expected(want);
}

static void test_folder_rgb(void)
{
    if (!have_images) {
        g_test_skip("no image fixtures (PIL) or no imagefolder plugin");
        return;
    }
    /* The first sample (Dog/d1.png) is RGB, so the default is 3 channels. */
    check_folder_pixels("", 3, "good-rgb");
}

static void test_folder_grey(void)
{
    if (!have_images) {
        g_test_skip("no image fixtures (PIL) or no imagefolder plugin");
        return;
    }
    check_folder_pixels(",channels=1", 1, "good-grey");
}

static void test_folder_torchvision_order(void)
{
    if (!have_images) {
        g_test_skip("no image fixtures (PIL) or no imagefolder plugin");
        return;
    }
    g_autofree char *p = fx("torchvision.txt");
    g_autofree char *text = NULL;
    if (!g_file_get_contents(p, &text, NULL, NULL)) {
        g_test_skip("torchvision not importable");
        return;
    }
    TdmDataset *ds = open_ok("imagefolder", "good", "train");
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_assert_cmpstr(lines[0], ==, "classes Dog cat zebra");
    int64_t n = 0;
    TdmImage img = {0};
    for (int i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++, n++) {
        g_auto(GStrv) f = g_strsplit(lines[i], " ", 2);
        int32_t label;
        g_assert_true(ds->klass->read_image(ds, n, &img, &label, NULL));
        g_assert_cmpint(label, ==, atoi(f[1]));
    }
    g_assert_cmpint(n, ==, ds->length);
    tdm_image_clear(&img);
    tdm_dataset_close(ds);
    /* And the order of the files themselves (the pixels test reads
     * good.expect, written by the same rules): compare the two lists. */
    GPtrArray *want = read_expected();
    for (guint i = 0; i < want->len; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i + 1], " ", 2);
        g_assert_cmpstr(f[0], ==, ((Expected *)want->pdata[i])->path);
    }
    free_expected(want);
}

static void test_folder_fixed_size(void)
{
    if (!have_images) {
        g_test_skip("no image fixtures (PIL) or no imagefolder plugin");
        return;
    }
    /* Varying sizes: read() explains that a resize transform is needed. */
    TdmDataset *ds = open_ok("imagefolder", "good", "train");
    guint8 buf[3 * 24 * 17];
    int32_t label;
    GError *error = NULL;
    g_assert_false(tdm_dataset_read(ds, 0, buf, &label, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "resize"));
    g_clear_error(&error);
    int n;
    float mean[4], std[4];
    g_assert_true(tdm_dataset_get_normalization(ds, &n, mean, std, &error));
    g_assert_no_error(error);
    g_assert_cmpint(n, ==, 3);
    g_assert_true(mean[0] > 0.05 && mean[0] < 0.95 && std[0] > 0.01);
    tdm_dataset_close(ds);

    /* size=first on images that differ: the read of the odd one names it. */
    ds = open_ok("imagefolder", "good,size=first", "train");
    g_assert_cmpint(ds->height, ==, 5);
    g_assert_cmpint(ds->width, ==, 7);
    g_assert_true(tdm_dataset_read(ds, 0, buf, &label, NULL));
    g_assert_false(tdm_dataset_read(ds, 1, buf, &label, &error));
    g_assert_nonnull(strstr(error->message, "d2.JPG"));
    g_assert_nonnull(strstr(error->message, "16x12"));
    g_clear_error(&error);
    tdm_dataset_close(ds);

    /* train/ and val/ splits of one size: fixed-size reads work. */
    ds = open_ok("imagefolder", "splits,size=first", "train");
    g_assert_cmpint(ds->length, ==, 3);
    for (int64_t i = 0; i < ds->length; i++) {
        g_assert_true(tdm_dataset_read(ds, i, buf, &label, &error));
        g_assert_no_error(error);
    }
    tdm_dataset_close(ds);
    ds = open_ok("imagefolder", "splits", "test");
    g_assert_cmpint(ds->length, ==, 2);
    g_assert_cmpint(ds->num_classes, ==, 2);
    tdm_dataset_close(ds);
}

/* The grammar of every feature ("KIND path=DIR key=value", or the path
 * first without "path=") opens the same dataset as the older
 * "KIND:DIR,key=value"; quotes keep a path with spaces whole; a bad value
 * names the reader, the key and what it accepts. */
static void same_dataset(const char *old_spec, const char *new_spec, const char *split)
{
    GError *error = NULL;
    TdmDataset *a = tdm_dataset_open(old_spec, split, &error);
    g_assert_no_error(error);
    TdmDataset *b = tdm_dataset_open(new_spec, split, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(a->kind, ==, b->kind);
    g_assert_cmpstr(a->path, ==, b->path);
    g_assert_cmpint(a->length, ==, b->length);
    g_assert_cmpint(a->num_classes, ==, b->num_classes);
    g_assert_cmpint(a->channels, ==, b->channels);
    g_assert_cmpint(a->height, ==, b->height);
    g_assert_cmpint(a->width, ==, b->width);
    g_assert_cmpstr(tdm_params_get_string(a->params, "path"), ==, a->path);
    tdm_dataset_close(a);
    tdm_dataset_close(b);
}

static void test_parameter_forms(void)
{
    g_autofree char *c100 = fx("cifar100");
    g_autofree char *old1 = g_strconcat("cifar100:", c100, ",label=coarse", NULL);
    g_autofree char *new1 = g_strconcat("cifar100 path=", c100, " label=coarse", NULL);
    g_autofree char *new2 = g_strconcat("cifar100 ", c100, " label=coarse", NULL);
    same_dataset(old1, new1, "test");
    same_dataset(old1, new2, "test");
    GError *error = NULL;
    TdmDataset *ds = tdm_dataset_open(new1, "test", &error);
    g_assert_no_error(error);
    g_assert_cmpint(ds->num_classes, ==, 20);
    g_assert_cmpstr(tdm_params_get_string(ds->params, "label"), ==, "coarse");
    tdm_dataset_close(ds);
    /* A directory name with a space, quoted. */
    g_autofree char *spaced = fx("cifar 100");
    g_assert_cmpint(symlink(c100, spaced), ==, 0);
    g_autofree char *quoted = g_strdup_printf("cifar100 '%s' label=coarse", spaced);
    ds = tdm_dataset_open(quoted, "test", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(ds->path, ==, spaced);
    g_assert_cmpint(ds->num_classes, ==, 20);
    tdm_dataset_close(ds);
    g_autofree char *resolved = tdm_dataset_resolve(new1, &error);
    g_assert_cmpstr(resolved, ==, new1);
    /* A directory whose name has a space is a directory, not "NAME args". */
    g_autofree char *as_dir = tdm_dataset_resolve(spaced, &error);
    g_assert_no_error(error);
    g_autofree char *idx_dir = g_strconcat("idx:", spaced, NULL);
    g_assert_cmpstr(as_dir, ==, idx_dir);

    static const char *const bad[][2] = {
        {"cifar100 %s label=medium", "cifar100: label=medium: expected one of fine, coarse"},
        {"cifar10 %s label=coarse", "cifar10: unknown parameter 'label'; known: path"},
        {"cifar100 %s %s", "cifar100: unexpected value"},
        {"cifar100 label=fine", "cifar100: missing parameter path"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *spec = g_strdup_printf(bad[i][0], c100, c100);
        g_assert_null(tdm_dataset_open(spec, "test", &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        g_test_message("%s -> %s", spec, error->message);
        g_assert_nonnull(strstr(error->message, bad[i][1]));
        g_clear_error(&error);
    }
    if (!have_images) {
        return;
    }
    g_autofree char *splits = fx("splits");
    g_autofree char *old3 = g_strconcat("imagefolder:", splits, ",size=first,channels=1", NULL);
    g_autofree char *new3 = g_strconcat("imagefolder ", splits, " size=first channels=1", NULL);
    same_dataset(old3, new3, "train");
    g_autofree char *bad4 = g_strconcat("imagefolder ", splits, " channels=2", NULL);
    g_assert_null(tdm_dataset_open(bad4, "train", &error));
    g_assert_nonnull(strstr(error->message, "imagefolder: channels=2: expected one of 1, 3"));
    g_clear_error(&error);
}

static void test_folder_bad_input(void)
{
    if (!have_images) {
        g_test_skip("no image fixtures (PIL) or no imagefolder plugin");
        return;
    }
    g_autofree char *d = NULL, *spec = NULL, *file = NULL;
#define SPEC(rel)                                                                                  \
    (g_free(d), g_free(spec), d = fx(rel), spec = g_strconcat("imagefolder:", d, NULL))
#define FILE_IN(rel) (g_free(file), file = fx(rel))
    SPEC("bad-png");
    expect_error(spec, "train", 1, FILE_IN("bad-png/a/zz-broken.png"), "PNG", "ends at byte 60",
                 NULL);
    SPEC("bad-png-data");
    expect_error(spec, "train", 1, FILE_IN("bad-png-data/a/zz-garbled.png"), "PNG", NULL);
    SPEC("bad-jpg");
    expect_error(spec, "train", 1, FILE_IN("bad-jpg/b/photo.jpg"), "not a JPEG", NULL);
    SPEC("bad-jpg-cut");
    expect_error(spec, "train", 1, FILE_IN("bad-jpg-cut/b/cut.jpg"), "JPEG", "Premature end", NULL);
    SPEC("bad-jpg-head");
    expect_error(spec, "train", 1, FILE_IN("bad-jpg-head/b/head.jpg"), "JPEG", NULL);
    SPEC("bad-first");
    expect_error(spec, "train", -1, FILE_IN("bad-first/a/x.png"), "PNG", NULL);
    SPEC("empty-class");
    expect_error(spec, "train", -1, FILE_IN("empty-class/empty"), "no .png", NULL);
    SPEC("no-classes");
    expect_error(spec, "train", -1, d, "no class folders", NULL);
    SPEC("no-such-dir");
    expect_error(spec, "train", -1, d, "no such dataset directory", NULL);
    SPEC("good");
    g_autofree char *opt = g_strconcat(spec, ",channels=2", NULL);
    expect_error(opt, "train", -1, "channels=2", NULL);
    /* torchvision would load a .bmp: refusing it keeps the indices equal. */
    g_autofree char *bmp = fx("bmp");
    g_autofree char *bmp_file = fx("bmp/a/x.bmp");
    g_autofree char *png_src = fx("good/Dog/d1.png");
    g_autofree char *png_dst = fx("bmp/a/y.png");
    g_autofree char *bytes = NULL;
    gsize len;
    g_assert_cmpint(g_mkdir_with_parents(bmp_file, 0755), ==, 0);
    g_assert_cmpint(g_rmdir(bmp_file), ==, 0);
    g_assert_true(g_file_set_contents(bmp_file, "BM", 2, NULL));
    g_assert_true(g_file_get_contents(png_src, &bytes, &len, NULL));
    g_assert_true(g_file_set_contents(png_dst, bytes, (gssize)len, NULL));
    g_autofree char *spec_bmp = g_strconcat("imagefolder:", bmp, NULL);
    expect_error(spec_bmp, "train", -1, bmp_file, "not supported", NULL);
    /* An unreadable file (root reads anything: skip that part). */
    if (getuid() != 0) {
        g_autofree char *locked = fx("bad-png/a/ok.png");
        g_assert_cmpint(g_chmod(locked, 0), ==, 0);
        SPEC("bad-png");
        expect_error(spec, "train", -1, locked, NULL);
        g_chmod(locked, 0644);
    }
#undef SPEC
#undef FILE_IN
}

/* Several threads decode the same samples at once and get the same bytes. */
typedef struct {
    TdmDataset *ds;
    float sums[64];
    gboolean ok;
} ThreadJob;

static gpointer read_all(gpointer data)
{
    ThreadJob *job = data;
    TdmImage img = {0};
    job->ok = TRUE;
    for (int round = 0; round < 20; round++) {
        for (int64_t i = 0; i < job->ds->length && i < 64; i++) {
            int32_t label;
            if (!job->ds->klass->read_image(job->ds, i, &img, &label, NULL)) {
                job->ok = FALSE;
                continue;
            }
            float s = 0;
            for (size_t k = 0; k < (size_t)img.c * img.h * img.w; k++) {
                s += img.data[k] * (float)(k % 7 + 1);
            }
            job->sums[i] = s;
        }
    }
    tdm_image_clear(&img);
    return NULL;
}

static void test_folder_threads(void)
{
    if (!have_images) {
        g_test_skip("no image fixtures (PIL) or no imagefolder plugin");
        return;
    }
    TdmDataset *ds = open_ok("imagefolder", "good", "train");
    ThreadJob jobs[4] = {{0}};
    GThread *threads[4];
    for (int t = 0; t < 4; t++) {
        jobs[t].ds = ds;
        threads[t] = g_thread_new("reader", read_all, &jobs[t]);
    }
    for (int t = 0; t < 4; t++) {
        g_thread_join(threads[t]);
        g_assert_true(jobs[t].ok);
        g_assert_cmpmem(jobs[t].sums, sizeof(jobs[t].sums), jobs[0].sums, sizeof(jobs[0].sums));
    }
    tdm_dataset_close(ds);
}

static gboolean run_fixtures(const char *what, GError **error, int *status)
{
    const char *py = g_getenv("TORCH_PYTHON");
    const char *top = g_getenv("TDM_TOP_SRCDIR");
    g_autofree char *script =
        g_build_filename(top != NULL ? top : ".", "tests", "make-fixtures.py", NULL);
    const char *argv[] = {py != NULL && py[0] != '\0' ? py : "python3", script, what, fixtures,
                          NULL};
    return g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                        status, error);
}

static void remove_tree(const char *path)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
        GDir *d = g_dir_open(path, 0, NULL);
        const char *name;
        while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
            g_autofree char *p = g_build_filename(path, name, NULL);
            remove_tree(p);
        }
        if (d != NULL) {
            g_dir_close(d);
        }
        g_rmdir(path);
    } else {
        g_unlink(path);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    fixtures = g_dir_make_tmp("tdm-datasets-XXXXXX", NULL);
    g_assert_nonnull(fixtures);
    int status = -1;
    GError *error = NULL;
    if (!run_fixtures("cifar", &error, &status) || !g_spawn_check_wait_status(status, NULL)) {
        g_printerr("cannot make the CIFAR fixtures: %s\n", error ? error->message : "failed");
        return 1;
    }
    if (run_fixtures("images", NULL, &status) && g_spawn_check_wait_status(status, NULL)) {
        have_images = tdm_registry_init(NULL) &&
                      tdm_registry_find(TDM_FEATURE_DATASET, "imagefolder", NULL) != NULL;
    }

    g_test_add_func("/cifar/cifar10", test_cifar10);
    g_test_add_func("/cifar/cifar100", test_cifar100);
    g_test_add_func("/cifar/estimated-normalization", test_cifar_estimated_normalization);
    g_test_add_func("/cifar/bad-input", test_cifar_bad_input);
    g_test_add_func("/datasets/parameter-forms", test_parameter_forms);
    g_test_add_func("/imagefolder/rgb-pixels", test_folder_rgb);
    g_test_add_func("/imagefolder/grey-pixels", test_folder_grey);
    g_test_add_func("/imagefolder/torchvision-order", test_folder_torchvision_order);
    g_test_add_func("/imagefolder/fixed-size", test_folder_fixed_size);
    g_test_add_func("/imagefolder/bad-input", test_folder_bad_input);
    g_test_add_func("/imagefolder/threads", test_folder_threads);
    int rc = g_test_run();
    remove_tree(fixtures);
    g_free(fixtures);
    return rc;
}

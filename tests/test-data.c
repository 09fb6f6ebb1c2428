/* SPDX-License-Identifier: MIT */
/* tests/test-data.c - samplers, the idx dataset reader and the loader.
 *
 * The sampler must visit every index once per epoch, change order between
 * epochs but not between runs, and split an epoch over ranks into disjoint
 * parts of equal length. The idx reader is checked on small IDX files made
 * here (exact pixel values, every kind of malformed file) and on the
 * embedded Fashion-MNIST subset (gzip, lazy inflation, reads from several
 * threads at once). The loader is checked for batch shapes, normalised
 * values, the short last batch and --limit, on the `ref` backend.
 */
#include <glib/gstdio.h>
#include <string.h>

#include <tandem/tandem.h>

/* core/dataset.c (exported; to be declared in data.h). */
/* ---- sampler ---- */

static int64_t *drain(TdmSampler *s, int64_t *len)
{
    int64_t *out = g_new(int64_t, s->order_len + 1);
    int64_t n = 0, idx;
    while (tdm_sampler_next(s, &idx)) {
        out[n++] = idx;
    }
    *len = n;
    return out;
}

static void assert_permutation(const int64_t *v, int64_t len, int64_t n)
{
    g_assert_cmpint(len, ==, n);
    g_autofree gboolean *seen = g_new0(gboolean, n);
    for (int64_t i = 0; i < len; i++) {
        g_assert_cmpint(v[i], >=, 0);
        g_assert_cmpint(v[i], <, n);
        g_assert_false(seen[v[i]]);
        seen[v[i]] = TRUE;
    }
}

static void test_sampler_sequential(void)
{
    TdmSampler *s = tdm_sampler_new(TDM_SAMPLER_SEQUENTIAL, 7, 42, 0, 1, FALSE);
    int64_t len;
    g_autofree int64_t *v = drain(s, &len);
    g_assert_cmpint(len, ==, 7);
    for (int64_t i = 0; i < 7; i++) {
        g_assert_cmpint(v[i], ==, i);
    }
    tdm_sampler_free(s);
}

static void test_sampler_random(void)
{
    const int64_t n = 1000;
    TdmSampler *s = tdm_sampler_new(TDM_SAMPLER_RANDOM, n, 7, 0, 1, FALSE);
    int64_t len0, len1, len0b;
    g_autofree int64_t *e0 = drain(s, &len0);
    assert_permutation(e0, len0, n);
    tdm_sampler_set_epoch(s, 1);
    g_autofree int64_t *e1 = drain(s, &len1);
    assert_permutation(e1, len1, n);
    g_assert_true(memcmp(e0, e1, (size_t)n * sizeof(int64_t)) != 0);
    /* Not merely sorted. */
    int64_t in_place = 0;
    for (int64_t i = 0; i < n; i++) {
        in_place += e0[i] == i;
    }
    g_assert_cmpint(in_place, <, 20);
    /* Same (seed, epoch): same order, from a fresh sampler too. */
    TdmSampler *t = tdm_sampler_new(TDM_SAMPLER_RANDOM, n, 7, 0, 1, FALSE);
    g_autofree int64_t *e0b = drain(t, &len0b);
    g_assert_cmpmem(e0, (size_t)n * 8, e0b, (size_t)len0b * 8);
    /* Another seed: another order. */
    TdmSampler *u = tdm_sampler_new(TDM_SAMPLER_RANDOM, n, 8, 0, 1, FALSE);
    int64_t lenu;
    g_autofree int64_t *eu = drain(u, &lenu);
    g_assert_true(memcmp(e0, eu, (size_t)n * sizeof(int64_t)) != 0);
    tdm_sampler_free(s);
    tdm_sampler_free(t);
    tdm_sampler_free(u);
}

static void check_distributed(int64_t n, int world, gboolean drop_last)
{
    int64_t expect = drop_last ? n / world : (n + world - 1) / world;
    g_autofree int64_t *count = g_new0(int64_t, n);
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        memset(count, 0, (size_t)n * sizeof(int64_t));
        for (int r = 0; r < world; r++) {
            TdmSampler *s = tdm_sampler_new(TDM_SAMPLER_DISTRIBUTED, n, 3, r, world, drop_last);
            tdm_sampler_set_epoch(s, epoch);
            int64_t len;
            g_autofree int64_t *v = drain(s, &len);
            g_assert_cmpint(len, ==, expect);
            for (int64_t i = 0; i < len; i++) {
                count[v[i]]++;
            }
            tdm_sampler_free(s);
        }
        int64_t covered = 0, total = 0;
        for (int64_t i = 0; i < n; i++) {
            covered += count[i] > 0;
            total += count[i];
            if (n % world == 0 || drop_last) {
                g_assert_cmpint(count[i], <=, 1); /* disjoint */
            }
        }
        g_assert_cmpint(total, ==, expect * world);
        g_assert_cmpint(covered, ==, drop_last ? expect * world : n);
    }
}

static void test_sampler_distributed(void)
{
    check_distributed(12, 4, FALSE);
    check_distributed(10, 3, FALSE);
    check_distributed(10, 3, TRUE);
    check_distributed(1000, 8, FALSE);
}

/* ---- small IDX files ---- */

static void put_be32(GString *s, guint32 v)
{
    g_string_append_c(s, (char)(v >> 24));
    g_string_append_c(s, (char)(v >> 16));
    g_string_append_c(s, (char)(v >> 8));
    g_string_append_c(s, (char)v);
}

/* n images of rows x cols, pixel (i, k) = (i * 10 + k) % 256; label i % 10. */
static char *make_idx_dir(guint32 n, guint32 rows, guint32 cols, guint32 img_magic,
                          guint32 n_labels, int label_bump, size_t truncate_images)
{
    char *dir = g_dir_make_tmp("tdm-test-idx-XXXXXX", NULL);
    GString *img = g_string_new(NULL);
    put_be32(img, img_magic);
    put_be32(img, n);
    put_be32(img, rows);
    put_be32(img, cols);
    for (guint32 i = 0; i < n; i++) {
        for (guint32 k = 0; k < rows * cols; k++) {
            g_string_append_c(img, (char)((i * 10 + k) % 256));
        }
    }
    GString *lbl = g_string_new(NULL);
    put_be32(lbl, 0x801);
    put_be32(lbl, n_labels);
    for (guint32 i = 0; i < n_labels; i++) {
        g_string_append_c(lbl, (char)(i % 10 + (i == 1 ? label_bump : 0)));
    }
    for (int split = 0; split < 2; split++) {
        const char *prefix = split == 0 ? "train" : "t10k";
        g_autofree char *ip = g_strdup_printf("%s/%s-images-idx3-ubyte", dir, prefix);
        g_autofree char *lp = g_strdup_printf("%s/%s-labels-idx1-ubyte", dir, prefix);
        gssize ilen = truncate_images ? (gssize)truncate_images : (gssize)img->len;
        g_assert_true(g_file_set_contents(ip, img->str, ilen, NULL));
        g_assert_true(g_file_set_contents(lp, lbl->str, (gssize)lbl->len, NULL));
    }
    g_string_free(img, TRUE);
    g_string_free(lbl, TRUE);
    return dir;
}

static void remove_idx_dir(const char *dir)
{
    const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *p = g_build_filename(dir, names[i], NULL);
        g_unlink(p);
    }
    g_rmdir(dir);
}

/* The "train" split of the idx files in `dir`, which must open. */
static TdmDataset *open_idx(const char *dir)
{
    g_autofree char *spec = g_strconcat("idx:", dir, NULL);
    g_autoptr(GError) error = NULL;
    TdmDataset *ds = tdm_dataset_open(spec, "train", &error);
    g_assert_no_error(error);
    return ds;
}

static void test_idx_values(void)
{
    g_autofree char *dir = make_idx_dir(5, 3, 4, 0x803, 5, 0, 0);
    g_autoptr(GError) error = NULL;
    TdmDataset *ds = open_idx(dir);
    g_assert_cmpint(ds->length, ==, 5);
    g_assert_cmpint(ds->channels, ==, 1);
    g_assert_cmpint(ds->height, ==, 3);
    g_assert_cmpint(ds->width, ==, 4);
    g_assert_cmpint(ds->num_classes, ==, 10);
    guint8 img[12];
    int32_t label;
    for (int i = 4; i >= 0; i--) {
        g_assert_true(tdm_dataset_read(ds, i, img, &label, &error));
        g_assert_cmpint(label, ==, i % 10);
        for (int k = 0; k < 12; k++) {
            g_assert_cmpint(img[k], ==, (i * 10 + k) % 256);
        }
    }
    g_assert_false(tdm_dataset_read(ds, 5, img, &label, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_clear_error(&error);

    /* Unknown dataset: mean/std estimated from the pixels. */
    int n;
    float mean[4], std[4];
    g_assert_true(tdm_dataset_get_normalization(ds, &n, mean, std, &error));
    g_assert_cmpint(n, ==, 1);
    double sum = 0;
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 12; k++) {
            sum += (i * 10 + k) / 255.0;
        }
    }
    g_assert_cmpfloat_with_epsilon(mean[0], sum / 60, 1e-5);
    g_assert_cmpfloat(std[0], >, 0.0f);
    tdm_dataset_close(ds);

    g_autofree char *spec = g_strconcat("idx:", dir, NULL);
    ds = tdm_dataset_open(spec, "test", &error);
    g_assert_no_error(error);
    tdm_dataset_close(ds);
    g_assert_null(tdm_dataset_open(spec, "validation", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    remove_idx_dir(dir);
}

static void expect_open_error(const char *dir, const char *needle1, const char *needle2)
{
    g_autofree char *spec = g_strconcat("idx:", dir, NULL);
    g_autoptr(GError) error = NULL;
    TdmDataset *ds = tdm_dataset_open(spec, "train", &error);
    g_assert_null(ds);
    g_assert_nonnull(error);
    if (strstr(error->message, needle1) == NULL ||
        (needle2 != NULL && strstr(error->message, needle2) == NULL)) {
        g_error("message '%s' should contain '%s' and '%s'", error->message, needle1,
                needle2 ? needle2 : "");
    }
}

static void test_idx_bad(void)
{
    g_autofree char *trunc = make_idx_dir(5, 3, 4, 0x803, 5, 0, 16 + 30);
    g_autofree char *trunc_file = g_build_filename(trunc, "train-images-idx3-ubyte", NULL);
    expect_open_error(trunc, trunc_file, "ends at byte 46");
    remove_idx_dir(trunc);

    g_autofree char *magic = make_idx_dir(5, 3, 4, 0x1234, 5, 0, 0);
    expect_open_error(magic, "magic", "0x00001234");
    remove_idx_dir(magic);

    g_autofree char *counts = make_idx_dir(5, 3, 4, 0x803, 4, 0, 0);
    expect_open_error(counts, "5 images", "4 labels");
    remove_idx_dir(counts);

    g_autofree char *label = make_idx_dir(5, 3, 4, 0x803, 5, 20, 0);
    expect_open_error(label, "label 21", "byte 9");
    remove_idx_dir(label);

    g_autofree char *header = make_idx_dir(5, 3, 4, 0x803, 5, 0, 10);
    expect_open_error(header, "header", NULL);
    remove_idx_dir(header);

    expect_open_error("/nonexistent/tandem-data", "/nonexistent/tandem-data", NULL);
}

/* ---- the embedded subset (gzip, lazy) ---- */

static char *embedded_dir(void)
{
    const char *top = g_getenv("TDM_TOP_SRCDIR");
    return g_build_filename(top ? top : ".", "data", "fashion-mnist", NULL);
}

typedef struct {
    TdmDataset *ds;
    guint8 *expect; /* all images, read sequentially beforehand */
    int seed;
    gboolean ok;
} ThreadArgs;

static gpointer reader_thread(gpointer p)
{
    ThreadArgs *a = p;
    GRand *r = g_rand_new_with_seed((guint32)a->seed);
    guint8 img[784];
    int32_t label;
    a->ok = TRUE;
    for (int i = 0; i < 2000; i++) {
        int64_t idx = g_rand_int_range(r, 0, (gint32)a->ds->length);
        if (!tdm_dataset_read(a->ds, idx, img, &label, NULL) ||
            memcmp(img, a->expect + idx * 784, 784) != 0) {
            a->ok = FALSE;
        }
    }
    g_rand_free(r);
    return NULL;
}

/* 4 threads read random samples of ds at once; each must equal `expect`. */
static void check_concurrent_reads(TdmDataset *ds, guint8 *expect)
{
    ThreadArgs args[4];
    GThread *threads[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (ThreadArgs){ds, expect, t + 1, FALSE};
        threads[t] = g_thread_new("reader", reader_thread, &args[t]);
    }
    for (int t = 0; t < 4; t++) {
        g_thread_join(threads[t]);
        g_assert_true(args[t].ok);
    }
}

static void test_idx_embedded(void)
{
    g_autofree char *dir = embedded_dir();
    g_autoptr(GError) error = NULL;
    TdmDataset *ds = open_idx(dir);
    g_assert_cmpint(ds->length, ==, 10000);
    g_assert_cmpint(ds->height, ==, 28);
    g_assert_cmpint(ds->width, ==, 28);

    /* Read everything on one thread (in order), for reference. */
    guint8 *all = g_malloc((size_t)ds->length * 784);
    int32_t label, counts[10] = {0};
    for (int64_t i = 0; i < ds->length; i++) {
        g_assert_true(tdm_dataset_read(ds, i, all + i * 784, &label, &error));
        g_assert_cmpint(label, >=, 0);
        g_assert_cmpint(label, <, 10);
        counts[label]++;
    }
    for (int c = 0; c < 10; c++) {
        g_assert_cmpint(counts[c], >, 800); /* Fashion-MNIST is balanced */
    }
    /* Concurrent random reads on a freshly opened (not yet inflated) copy. */
    TdmDataset *fresh = open_idx(dir);
    check_concurrent_reads(fresh, all);
    tdm_dataset_close(fresh);

    /* A copy told that every sample comes (the idx reader then inflates the
     * whole file in one go, with libdeflate when built with it) reads the
     * same bytes, from several threads at once. */
    TdmDataset *prepared = open_idx(dir);
    g_assert_nonnull(prepared->klass->prepare);
    prepared->klass->prepare(prepared, prepared->length);
    check_concurrent_reads(prepared, all);
    tdm_dataset_close(prepared);
    g_free(all);

    /* Known dataset by directory name: published constants. */
    int n;
    float mean[4], std[4];
    g_assert_true(tdm_dataset_get_normalization(ds, &n, mean, std, &error));
    g_assert_cmpint(n, ==, 1);
    g_assert_cmpfloat_with_epsilon(mean[0], 0.2860, 1e-6);
    g_assert_cmpfloat_with_epsilon(std[0], 0.3530, 1e-6);
    tdm_dataset_close(ds);

    g_autofree char *spec = g_strconcat("idx:", dir, NULL);
    ds = tdm_dataset_open(spec, "test", &error);
    g_assert_no_error(error);
    g_assert_cmpint(ds->length, ==, 2000);
    tdm_dataset_close(ds);
}

static void test_resolve(void)
{
    g_autoptr(GError) error = NULL;
    const char *top = g_getenv("TDM_TOP_SRCDIR");
    g_autofree char *data = g_build_filename(top ? top : ".", "data", NULL);
    g_autofree char *old = g_strdup(g_getenv("TDM_DATA_DIR"));
    g_setenv("TDM_DATA_DIR", data, TRUE);
    g_autofree char *r = tdm_dataset_resolve("fashion-mnist", &error);
    g_assert_no_error(error);
    g_autofree char *expect = g_strconcat("idx:", data, "/fashion-mnist", NULL);
    g_assert_cmpstr(r, ==, expect);
    if (old != NULL) {
        g_setenv("TDM_DATA_DIR", old, TRUE);
    } else {
        g_unsetenv("TDM_DATA_DIR");
    }
    g_autofree char *r2 = tdm_dataset_resolve("idx:/x/y", &error);
    g_assert_cmpstr(r2, ==, "idx:/x/y");
    g_assert_null(tdm_dataset_resolve("no-such-dataset", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "no-such-dataset"));
    g_clear_error(&error);
    g_assert_null(tdm_dataset_resolve("idx:", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_clear_error(&error);
    g_assert_null(tdm_dataset_open("nosuchkind:/tmp", "train", &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
}

/* ---- loader ---- */

static void test_loader(void)
{
    /* 10 images of 2x2; label == i % 10 == i identifies the sample. */
    g_autofree char *dir = make_idx_dir(10, 2, 2, 0x803, 10, 0, 0);
    g_autofree char *spec = g_strconcat("idx:", dir, NULL);
    g_autoptr(GError) error = NULL;
    TdmDevice *dev = tdm_device_get("ref", &error);
    g_assert_no_error(error);
    TdmDataset *ds = tdm_dataset_open(spec, "train", &error);
    g_assert_no_error(error);

    TdmLoaderOptions o;
    tdm_loader_options_init(&o);
    g_assert_cmpint(o.batch_size, ==, 64);
    o.batch_size = 4;
    o.shuffle = FALSE;
    o.n_mean = 1;
    o.mean[0] = 0.5f;
    o.std[0] = 0.25f;
    TdmLoader *l = tdm_loader_new(ds, dev, &o, &error);
    g_assert_no_error(error);
    g_assert_cmpint(tdm_loader_steps_per_epoch(l), ==, 3);
    g_assert_cmpint(tdm_loader_num_samples(l), ==, 10);
    TdmTensor *full_images[2] = {NULL, NULL};
    for (int epoch = 0; epoch < 2; epoch++) {
        g_assert_true(tdm_loader_start_epoch(l, epoch, &error));
        int64_t seen = 0;
        TdmBatch *b;
        while ((b = tdm_loader_next(l, &error)) != NULL) {
            int64_t B = b->size;
            g_assert_cmpint(B, ==, seen < 8 ? 4 : 2);
            g_assert_cmpint(b->images->ndim, ==, 4);
            g_assert_cmpint(b->images->shape[0], ==, B);
            g_assert_cmpint(b->images->shape[1], ==, 1);
            g_assert_cmpint(b->labels->shape[0], ==, B);
            g_assert_cmpint(b->labels->dtype, ==, TDM_DTYPE_I32);
            g_assert_cmpfloat(b->wait_s, >=, 0.0);
            if (B == 4) {
                /* The same two device tensors take turns (double buffering):
                 * nothing allocated. */
                int slot = full_images[0] == NULL || full_images[0] == b->images ? 0 : 1;
                if (full_images[slot] == NULL) {
                    full_images[slot] = b->images;
                }
                g_assert_true(full_images[slot] == b->images);
            }
            g_autofree float *img = tdm_tensor_read_f32(b->images, &error);
            int32_t labels[4];
            g_assert_true(tdm_tensor_read(b->labels, labels, &error));
            for (int64_t j = 0; j < B; j++) {
                int64_t i = seen + j;
                g_assert_cmpint(labels[j], ==, i);
                for (int k = 0; k < 4; k++) {
                    float want = ((float)((i * 10 + k) % 256) / 255.0f - 0.5f) / 0.25f;
                    g_assert_cmpfloat_with_epsilon(img[j * 4 + k], want, 1e-5);
                }
            }
            seen += B;
        }
        g_assert_no_error(error);
        g_assert_cmpint(seen, ==, 10);
    }
    tdm_loader_free(l);

    /* Shuffled with a limit: the first 6 samples, each once per epoch, in
     * an order that changes between epochs. */
    o.shuffle = TRUE;
    o.limit = 6;
    o.batch_size = 6;
    o.seed = 11;
    l = tdm_loader_new(ds, dev, &o, &error);
    g_assert_cmpint(tdm_loader_steps_per_epoch(l), ==, 1);
    int32_t orders[4][6];
    for (int epoch = 0; epoch < 4; epoch++) {
        g_assert_true(tdm_loader_start_epoch(l, epoch, &error));
        TdmBatch *b = tdm_loader_next(l, &error);
        g_assert_nonnull(b);
        g_assert_true(tdm_tensor_read(b->labels, orders[epoch], &error));
        int seen = 0;
        for (int j = 0; j < 6; j++) {
            g_assert_cmpint(orders[epoch][j], <, 6);
            seen |= 1 << orders[epoch][j];
        }
        g_assert_cmpint(seen, ==, 0x3f);
        g_assert_null(tdm_loader_next(l, &error));
        g_assert_no_error(error);
    }
    g_assert_true(memcmp(orders[0], orders[1], sizeof(orders[0])) != 0 ||
                  memcmp(orders[1], orders[2], sizeof(orders[0])) != 0);
    tdm_loader_free(l);

    /* drop_last */
    o.limit = 0;
    o.batch_size = 4;
    o.drop_last = TRUE;
    l = tdm_loader_new(ds, dev, &o, &error);
    g_assert_cmpint(tdm_loader_steps_per_epoch(l), ==, 2);
    tdm_loader_free(l);
    tdm_dataset_close(ds);
    remove_idx_dir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* First: it sets an environment variable, before any thread exists. */
    g_test_add_func("/dataset/resolve", test_resolve);
    g_test_add_func("/sampler/sequential", test_sampler_sequential);
    g_test_add_func("/sampler/random", test_sampler_random);
    g_test_add_func("/sampler/distributed", test_sampler_distributed);
    g_test_add_func("/idx/values", test_idx_values);
    g_test_add_func("/idx/bad", test_idx_bad);
    g_test_add_func("/idx/embedded", test_idx_embedded);
    g_test_add_func("/loader/batches", test_loader);
    return g_test_run();
}

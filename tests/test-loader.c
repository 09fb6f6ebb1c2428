/* SPDX-License-Identifier: MIT */
/* tests/test-loader.c - the parallel loader and exact resumption.
 *
 * Most cases run on a synthetic dataset made here (its pixels are a hash of
 * the sample index, its label is the index, and it can be told to fail on
 * one sample or to read slowly), so that every batch can be compared byte
 * for byte: 0, 1, 2 and 4 workers must give identical epochs, also when
 * workers finish out of order (TDM_LOADER_JITTER_US, a test hook: skipped
 * in a build without them); a loader stopped at
 * step k and restored into a new loader (another worker count, another
 * world size) must continue with exactly the batches of an uninterrupted
 * run (for several ranks: the union over ranks of each step); every rank
 * must get the same number of steps; epochs must reshuffle on their own; a
 * reader's error must surface with the file's name; freeing the loader
 * mid-epoch must not hang. Fashion-MNIST (with --limit) is checked for
 * determinism across worker counts without and with a random transform
 * pipeline (skipped only when the transform plugins are not built).
 */
#include "config.h"

#include <string.h>

#include <tandem/tandem.h>

/* ---- a synthetic dataset ---- */

typedef struct {
    int64_t fail_index;     /* -1: never fail */
    gulong delay_us;        /* per read */
    gboolean vary;          /* samples of varying size through read_image */
} FakeConfig;

static guint8 fake_pixel(int64_t index, size_t k)
{
    guint64 h = ((guint64)index + 1) * 0x9e3779b97f4a7c15ULL + k * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebULL;
    return (guint8)(h >> 56);
}

static gboolean fake_check(TdmDataset *ds, int64_t index, GError **error)
{
    FakeConfig *fc = ds->priv;
    if (fc->delay_us > 0) {
        g_usleep(fc->delay_us);
    }
    if (index == fc->fail_index) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_CORRUPT,
                    "%s/sample-%05" G_GINT64_FORMAT ".png: not a PNG file (offset 0)", ds->path,
                    index);
        return FALSE;
    }
    return TRUE;
}

static gboolean fake_read(TdmDataset *ds, int64_t index, guint8 *image, int32_t *label,
                          GError **error)
{
    if (!fake_check(ds, index, error)) {
        return FALSE;
    }
    size_t n = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    for (size_t k = 0; k < n; k++) {
        image[k] = fake_pixel(index, k);
    }
    *label = (int32_t)index;
    return TRUE;
}

static gboolean fake_read_image(TdmDataset *ds, int64_t index, TdmImage *img, int32_t *label,
                                GError **error)
{
    if (!fake_check(ds, index, error)) {
        return FALSE;
    }
    int h = 6 + (int)(index % 5), w = 7 + (int)(index % 3);
    tdm_image_reserve(img, ds->channels, h, w);
    img->c = ds->channels;
    img->h = h;
    img->w = w;
    img->normalized = FALSE;
    for (size_t k = 0; k < (size_t)ds->channels * (size_t)(h * w); k++) {
        img->data[k] = (float)fake_pixel(index, k);
    }
    *label = (int32_t)index;
    return TRUE;
}

static const TdmDatasetClass fake_class = {
    TDM_CLASS_HEADER(TDM_DATASET_IFACE_VERSION, TdmDatasetClass),
    .read = fake_read,
    .read_image = fake_read_image,
};

static TdmDataset *fake_new(int64_t n, int c, int h, int w, FakeConfig *fc)
{
    TdmDataset *ds = g_new0(TdmDataset, 1);
    ds->klass = &fake_class;
    ds->kind = g_strdup("fake");
    ds->path = g_strdup("/fake/data");
    ds->split = g_strdup("train");
    ds->length = n;
    ds->channels = c;
    ds->height = fc->vary ? 0 : h;
    ds->width = fc->vary ? 0 : w;
    ds->num_classes = 10;
    ds->priv = fc;
    return ds;
}

static void fake_free(TdmDataset *ds)
{
    g_free(ds->kind);
    g_free(ds->path);
    g_free(ds->split);
    g_free(ds);
}

/* ---- helpers ---- */

static TdmDevice *ref_device(void)
{
    g_autoptr(GError) error = NULL;
    TdmDevice *dev = tdm_device_get("ref", &error);
    g_assert_no_error(error);
    return dev;
}

static TdmLoaderOptions base_options(int batch, int workers)
{
    TdmLoaderOptions o;
    tdm_loader_options_init(&o);
    o.batch_size = batch;
    o.workers = workers;
    o.seed = 1234;
    return o;
}

static TdmLoader *loader_new(TdmDataset *ds, const TdmLoaderOptions *o)
{
    g_autoptr(GError) error = NULL;
    TdmLoader *l = tdm_loader_new(ds, ref_device(), o, &error);
    g_assert_no_error(error);
    g_assert_nonnull(l);
    return l;
}

/* One batch as bytes: images (f32) then labels (i32). */
static GBytes *batch_bytes(TdmBatch *b)
{
    g_autoptr(GError) error = NULL;
    size_t ni = (size_t)tdm_tensor_numel(b->images), nl = (size_t)b->size;
    guint8 *buf = g_malloc(ni * 4 + nl * 4);
    g_assert_true(tdm_tensor_read(b->images, buf, &error));
    g_assert_true(tdm_tensor_read(b->labels, buf + ni * 4, &error));
    g_assert_no_error(error);
    return g_bytes_new_take(buf, ni * 4 + nl * 4);
}

static void batch_labels(TdmBatch *b, GArray *out)
{
    g_autoptr(GError) error = NULL;
    int32_t labels[256];
    g_assert_cmpint(b->size, <=, 256);
    g_assert_true(tdm_tensor_read(b->labels, labels, &error));
    g_array_append_vals(out, labels, (guint)b->size);
}

/* Up to `max_steps` batches (all when < 0) of the current epoch. */
static GPtrArray *take_batches(TdmLoader *l, int64_t max_steps)
{
    g_autoptr(GError) error = NULL;
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    TdmBatch *b;
    while ((max_steps < 0 || (int64_t)out->len < max_steps) &&
           (b = tdm_loader_next(l, &error)) != NULL) {
        g_ptr_array_add(out, batch_bytes(b));
    }
    g_assert_no_error(error);
    return out;
}

static void assert_same_batches(GPtrArray *a, GPtrArray *b, const char *what)
{
    if (a->len != b->len) {
        g_error("%s: %u batches against %u", what, a->len, b->len);
    }
    for (guint i = 0; i < a->len; i++) {
        if (!g_bytes_equal(g_ptr_array_index(a, i), g_ptr_array_index(b, i))) {
            g_error("%s: batch %u differs", what, i);
        }
    }
}

/* Epochs 0 and 1 of a loader with `workers` workers, concatenated. */
static GPtrArray *two_epochs(TdmDataset *ds, TdmLoaderOptions o, int workers)
{
    o.workers = workers;
    TdmLoader *l = loader_new(ds, &o);
    g_autoptr(GError) error = NULL;
    GPtrArray *all = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    for (int epoch = 0; epoch < 2; epoch++) {
        g_assert_true(tdm_loader_start_epoch(l, epoch, &error));
        GPtrArray *e = take_batches(l, -1);
        g_assert_cmpint(e->len, ==, tdm_loader_steps_per_epoch(l));
        for (guint i = 0; i < e->len; i++) {
            g_ptr_array_add(all, g_bytes_ref(g_ptr_array_index(e, i)));
        }
        g_ptr_array_unref(e);
    }
    tdm_loader_free(l);
    return all;
}

/* ---- determinism and ordering ---- */

static void test_workers_synthetic(void)
{
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(203, 3, 5, 4, &fc);
    TdmLoaderOptions o = base_options(16, 0);
    o.n_mean = 3;
    for (int c = 0; c < 3; c++) {
        o.mean[c] = 0.4f + 0.05f * (float)c;
        o.std[c] = 0.3f;
    }
    GPtrArray *ref = two_epochs(ds, o, 0);
    g_assert_cmpint(ref->len, ==, 2 * 13);
    const int counts[] = {1, 2, 4};
    for (size_t i = 0; i < G_N_ELEMENTS(counts); i++) {
        GPtrArray *got = two_epochs(ds, o, counts[i]);
        assert_same_batches(ref, got, "synthetic, workers vs caller's thread");
        g_ptr_array_unref(got);
    }
    g_ptr_array_unref(ref);
    fake_free(ds);
}

/* Ordered delivery: workers sleep at random after each batch so that later
 * batches often finish first; the batches must not change. Runs first: the
 * knob is an environment variable, set before any thread exists. */
static void test_ordered_delivery(void)
{
#ifndef TDM_ENABLE_TEST_HOOKS
    g_test_skip("TDM_LOADER_JITTER_US needs a build with configure --enable-test-hooks");
    return;
#endif
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(203, 3, 5, 4, &fc);
    TdmLoaderOptions o = base_options(16, 0);
    GPtrArray *ref = two_epochs(ds, o, 0);
    g_setenv("TDM_LOADER_JITTER_US", "3000", TRUE);
    o.prefetch = 3;
    GPtrArray *jittered = two_epochs(ds, o, 4);
    /* Left set: the tests after this one run with jittered workers too. */
    assert_same_batches(ref, jittered, "synthetic, 4 jittered workers");
    g_ptr_array_unref(jittered);
    g_ptr_array_unref(ref);
    fake_free(ds);
}

static void test_reshuffle(void)
{
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(100, 1, 2, 2, &fc);
    TdmLoaderOptions o = base_options(10, 2);
    TdmLoader *l = loader_new(ds, &o);
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) e0 = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GArray) e1 = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_autoptr(GArray) e1b = g_array_new(FALSE, FALSE, sizeof(int32_t));
    /* No start_epoch at all: the loader begins with epoch 0 and, after the
     * end of an epoch (NULL), goes on with the next one by itself. */
    TdmBatch *b;
    while ((b = tdm_loader_next(l, &error)) != NULL) {
        batch_labels(b, e0);
    }
    g_assert_no_error(error);
    while ((b = tdm_loader_next(l, &error)) != NULL) {
        batch_labels(b, e1);
    }
    g_assert_no_error(error);
    g_assert_cmpint(e0->len, ==, 100);
    g_assert_cmpint(e1->len, ==, 100);
    g_autofree gboolean *seen = g_new0(gboolean, 100);
    for (guint i = 0; i < 100; i++) {
        int32_t v = g_array_index(e1, int32_t, i);
        g_assert_false(seen[v]);
        seen[v] = TRUE;
    }
    g_assert_true(memcmp(e0->data, e1->data, 100 * sizeof(int32_t)) != 0);
    /* Explicitly starting epoch 1 gives the same order. */
    g_assert_true(tdm_loader_start_epoch(l, 1, &error));
    while ((b = tdm_loader_next(l, &error)) != NULL) {
        batch_labels(b, e1b);
    }
    g_assert_cmpmem(e1->data, 100 * sizeof(int32_t), e1b->data, e1b->len * sizeof(int32_t));
    tdm_loader_free(l);
    fake_free(ds);
}

/* ---- exact resume ---- */

static void test_resume_workers(void)
{
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(150, 1, 3, 3, &fc);
    g_autoptr(GError) error = NULL;
    TdmLoaderOptions o = base_options(8, 2);
    GPtrArray *full = two_epochs(ds, o, 2); /* 19 steps per epoch */
    g_assert_cmpint(full->len, ==, 38);

    const int64_t stops[] = {0, 1, 7, 18, 19};
    const int resume_workers[] = {0, 1, 4};
    for (size_t s = 0; s < G_N_ELEMENTS(stops); s++) {
        for (size_t w = 0; w < G_N_ELEMENTS(resume_workers); w++) {
            /* Run epoch 0 up to step k and keep the state. */
            TdmLoader *a = loader_new(ds, &o);
            g_assert_true(tdm_loader_start_epoch(a, 0, &error));
            GPtrArray *head = take_batches(a, stops[s]);
            TdmSamplerState st;
            tdm_loader_get_state(a, &st);
            tdm_loader_free(a);
            /* After the last batch, the state points at the next epoch. */
            g_assert_cmpint(st.epoch, ==, stops[s] == 19 ? 1 : 0);
            g_assert_cmpint(st.consumed, ==, stops[s] == 19 ? 0 : stops[s] * 8);

            TdmLoaderOptions o2 = o;
            o2.workers = resume_workers[w];
            TdmLoader *b = loader_new(ds, &o2);
            g_assert_true(tdm_loader_set_state(b, &st, &error));
            g_assert_true(tdm_loader_start_epoch(b, st.epoch, &error));
            GPtrArray *tail = take_batches(b, -1);
            /* The resumed loader goes on into the following epoch by itself. */
            GPtrArray *next = take_batches(b, -1);
            tdm_loader_free(b);
            g_assert_cmpint(head->len + tail->len, ==, st.epoch == 0 ? 19 : 38);
            for (guint i = 0; i < head->len; i++) {
                g_assert_true(g_bytes_equal(g_ptr_array_index(head, i),
                                            g_ptr_array_index(full, i)));
            }
            for (guint i = 0; i < tail->len; i++) {
                g_assert_true(g_bytes_equal(g_ptr_array_index(tail, i),
                                            g_ptr_array_index(full, head->len + i)));
            }
            if (st.epoch == 0) {
                g_assert_cmpint(next->len, ==, 19);
                for (guint i = 0; i < next->len; i++) {
                    g_assert_true(g_bytes_equal(g_ptr_array_index(next, i),
                                                g_ptr_array_index(full, 19 + i)));
                }
            }
            g_ptr_array_unref(next);
            g_ptr_array_unref(head);
            g_ptr_array_unref(tail);
        }
    }
    /* A state that does not fit the dataset is refused, naming the numbers. */
    TdmLoader *c = loader_new(ds, &o);
    TdmSamplerState bad = {.epoch = 0, .consumed = 151};
    g_assert_false(tdm_loader_set_state(c, &bad, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "151"));
    tdm_loader_free(c);
    g_ptr_array_unref(full);
    fake_free(ds);
}

/* Per step, the sorted union of the labels of all ranks; checks that every
 * rank has the same number of steps. */
static GPtrArray *ranks_run(TdmDataset *ds, int world, int batch, int64_t epoch,
                            const TdmSamplerState *state, int64_t max_steps,
                            TdmSamplerState *state_out)
{
    g_autoptr(GError) error = NULL;
    GPtrArray *steps = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    int64_t n_steps = -1;
    for (int r = 0; r < world; r++) {
        TdmLoaderOptions o = base_options(batch, r % 3);
        o.rank = r;
        o.world = world;
        TdmLoader *l = loader_new(ds, &o);
        if (state != NULL) {
            g_assert_true(tdm_loader_set_state(l, state, &error));
        }
        g_assert_true(tdm_loader_start_epoch(l, state != NULL ? state->epoch : epoch, &error));
        int64_t k = 0;
        TdmBatch *b;
        while ((max_steps < 0 || k < max_steps) && (b = tdm_loader_next(l, &error)) != NULL) {
            if ((guint)k >= steps->len) {
                g_ptr_array_add(steps, g_array_new(FALSE, FALSE, sizeof(int32_t)));
            }
            batch_labels(b, g_ptr_array_index(steps, k));
            k++;
        }
        g_assert_no_error(error);
        if (n_steps < 0) {
            n_steps = k;
        }
        g_assert_cmpint(k, ==, n_steps); /* equal steps on every rank */
        if (state_out != NULL) {
            TdmSamplerState st;
            tdm_loader_get_state(l, &st);
            if (r == 0) {
                *state_out = st;
            }
            g_assert_cmpint(st.epoch, ==, state_out->epoch);
            g_assert_cmpint(st.consumed, ==, state_out->consumed);
        }
        tdm_loader_free(l);
    }
    return steps;
}

static gint cmp_i32(gconstpointer a, gconstpointer b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static void sort_steps(GPtrArray *steps)
{
    for (guint i = 0; i < steps->len; i++) {
        g_array_sort(g_ptr_array_index(steps, i), cmp_i32);
    }
}

static void assert_same_steps(GPtrArray *a, guint a_from, GPtrArray *b, guint count,
                              const char *what)
{
    for (guint i = 0; i < count; i++) {
        GArray *x = g_ptr_array_index(a, a_from + i), *y = g_ptr_array_index(b, i);
        if (x->len != y->len || memcmp(x->data, y->data, x->len * sizeof(int32_t)) != 0) {
            g_error("%s: step %u differs", what, a_from + i);
        }
    }
}

static void check_world_change(int64_t n, int world_a, int batch_a, int world_b, int batch_b,
                               int64_t stop)
{
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(n, 1, 2, 2, &fc);
    g_autofree char *what = g_strdup_printf("n %" G_GINT64_FORMAT ", world %d x %d -> %d x %d "
                                            "after %" G_GINT64_FORMAT " steps", n, world_a,
                                            batch_a, world_b, batch_b, stop);
    GPtrArray *full = ranks_run(ds, world_a, batch_a, 3, NULL, -1, NULL);
    sort_steps(full);
    /* The same global batches on one rank with the global batch size. */
    GPtrArray *single = ranks_run(ds, 1, batch_a * world_a, 3, NULL, -1, NULL);
    sort_steps(single);
    g_assert_cmpint(single->len, ==, full->len);
    /* ...except for the padding of a last step that does not divide evenly. */
    guint padded = n % (batch_a * world_a) != 0;
    assert_same_steps(full, 0, single, full->len - padded, "1 rank vs several");

    TdmSamplerState st;
    GPtrArray *head = ranks_run(ds, world_a, batch_a, 3, NULL, stop, &st);
    g_assert_cmpint(st.epoch, ==, 3);
    g_assert_cmpint(st.consumed, ==, stop * batch_a * world_a);
    GPtrArray *tail = ranks_run(ds, world_b, batch_b, 3, &st, -1, NULL);
    sort_steps(tail);
    /* The remaining steps equal the uninterrupted run's; when the epoch
     * does not divide evenly the last step differs only by padding. */
    guint common = MIN(tail->len, full->len - (guint)stop);
    gboolean even = n % (batch_a * world_a) == 0 && n % (batch_b * world_b) == 0;
    if (even) {
        g_assert_cmpint(tail->len, ==, full->len - (guint)stop);
    } else {
        common = MIN(common, full->len - (guint)stop - 1);
    }
    assert_same_steps(full, (guint)stop, tail, common, what);
    /* Together, head and tail cover every sample of the epoch. */
    g_autofree gboolean *seen = g_new0(gboolean, n);
    GPtrArray *parts[] = {head, tail};
    for (int p = 0; p < 2; p++) {
        for (guint i = 0; i < parts[p]->len; i++) {
            GArray *v = g_ptr_array_index(parts[p], i);
            for (guint j = 0; j < v->len; j++) {
                seen[g_array_index(v, int32_t, j)] = TRUE;
            }
        }
    }
    for (int64_t i = 0; i < n; i++) {
        g_assert_true(seen[i]);
    }
    g_ptr_array_unref(full);
    g_ptr_array_unref(single);
    g_ptr_array_unref(head);
    g_ptr_array_unref(tail);
    fake_free(ds);
}

static void test_resume_world(void)
{
    check_world_change(120, 2, 6, 3, 4, 4);  /* global batch 12 both ways */
    check_world_change(120, 3, 4, 2, 6, 3);
    check_world_change(131, 2, 6, 3, 4, 5);  /* padded last step */
    check_world_change(131, 3, 4, 2, 6, 2);
    check_world_change(64, 2, 32, 1, 64, 0); /* 2 x 32 is 1 x 64 */
}

/* ---- failures ---- */

static void test_error_names_file(void)
{
    FakeConfig fc = {.fail_index = 37};
    TdmDataset *ds = fake_new(80, 1, 2, 2, &fc);
    for (int workers = 0; workers <= 2; workers += 2) {
        TdmLoaderOptions o = base_options(8, workers);
        o.shuffle = FALSE;
        TdmLoader *l = loader_new(ds, &o);
        g_autoptr(GError) error = NULL;
        int steps = 0;
        while (tdm_loader_next(l, &error) != NULL) {
            steps++;
        }
        g_assert_error(error, TDM_ERROR, TDM_ERROR_CORRUPT);
        g_assert_cmpint(steps, ==, 4); /* sample 37 is in batch 4 */
        g_assert_nonnull(strstr(error->message, "/fake/data/sample-00037.png"));
        g_clear_error(&error);
        /* It stays failed until the next epoch starts. */
        g_assert_null(tdm_loader_next(l, &error));
        g_assert_nonnull(error);
        tdm_loader_free(l);
    }
    fake_free(ds);
}

static void test_free_mid_epoch(void)
{
    FakeConfig fc = {.fail_index = -1, .delay_us = 2000};
    TdmDataset *ds = fake_new(4000, 1, 2, 2, &fc);
    TdmLoaderOptions o = base_options(32, 2);
    o.prefetch = 4;
    double t0 = tdm_time_now();
    TdmLoader *l = loader_new(ds, &o);
    g_autoptr(GError) error = NULL;
    g_assert_nonnull(tdm_loader_next(l, &error));
    tdm_loader_free(l);
    /* Also freed before the first batch and right after start_epoch. */
    l = loader_new(ds, &o);
    g_assert_true(tdm_loader_start_epoch(l, 0, &error));
    tdm_loader_free(l);
    /* A whole epoch would take 4 s per worker; cancelling must be quick. */
    g_assert_cmpfloat(tdm_time_now() - t0, <, 2.0);
    fake_free(ds);
}

static void test_variable_without_transforms(void)
{
    FakeConfig fc = {.fail_index = -1, .vary = TRUE};
    TdmDataset *ds = fake_new(10, 3, 0, 0, &fc);
    TdmLoaderOptions o = base_options(4, 0);
    g_autoptr(GError) error = NULL;
    g_assert_null(tdm_loader_new(ds, ref_device(), &o, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "/fake/data"));
    fake_free(ds);
}

static void test_pinned(void)
{
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(90, 1, 4, 4, &fc);
    TdmLoaderOptions o = base_options(16, 0);
    GPtrArray *ref = two_epochs(ds, o, 0);
    o.pin_memory = TRUE;
    GPtrArray *got = two_epochs(ds, o, 2);
    assert_same_batches(ref, got, "pinned staging with async copies");
    g_ptr_array_unref(got);
    g_ptr_array_unref(ref);
    fake_free(ds);
}

/* From pinned memory each batch is copied on the device's copy stream and
 * handed out with the event after its copy (compute waits for it), not
 * after a synchronisation of the whole device; without pinning the copy is
 * synchronous and there is no event. Every ref copy-stream copy is slowed
 * down (main), so a batch handed out before its copy landed, or a slot
 * released before its copy read it, would differ from the unpinned batch. */
static void test_pinned_events(void)
{
    FakeConfig fc = {.fail_index = -1};
    TdmDataset *ds = fake_new(40, 1, 4, 4, &fc);
    TdmLoaderOptions o = base_options(16, 2);
    TdmLoader *plain = loader_new(ds, &o);
    o.pin_memory = TRUE;
    TdmLoader *pinned = loader_new(ds, &o);
    g_autoptr(GError) error = NULL;
    TdmBatch *b;
    int batches = 0;
    while ((b = tdm_loader_next(pinned, &error)) != NULL) {
        g_assert_nonnull(b->ready);
        g_assert_true(tdm_event_get_device(b->ready) == ref_device());
        g_assert_true(tdm_event_query(b->ready, &error));
        g_autoptr(GBytes) got = batch_bytes(b);
        TdmBatch *p = tdm_loader_next(plain, &error);
        g_assert_nonnull(p);
        g_assert_null(p->ready);
        g_autoptr(GBytes) want = batch_bytes(p);
        g_assert_true(g_bytes_equal(got, want));
        batches++;
    }
    g_assert_no_error(error);
    g_assert_cmpint(batches, ==, 3);
    tdm_loader_free(pinned);
    tdm_loader_free(plain);
    fake_free(ds);
}

/* ---- with transforms ---- */

/* The pipeline, or NULL (test skipped) when no transform plugin is built. */
static TdmTransformPipeline *pipeline_or_skip(const char *spec)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_registry_init(&error));
    GPtrArray *features = tdm_registry_list_features(TDM_FEATURE_TRANSFORM);
    guint n_features = features->len;
    g_ptr_array_unref(features);
    if (n_features == 0) {
        g_test_skip("no transform plugin is built");
        return NULL;
    }
    TdmTransformPipeline *p = tdm_transform_pipeline_parse(spec, &error);
    g_assert_no_error(error);
    return p;
}

static void test_variable_with_transforms(void)
{
    TdmTransformPipeline *p = pipeline_or_skip("random-resized-crop 5 | hflip");
    if (p == NULL) {
        return;
    }
    FakeConfig fc = {.fail_index = -1, .vary = TRUE};
    TdmDataset *ds = fake_new(50, 3, 0, 0, &fc);
    TdmLoaderOptions o = base_options(8, 0);
    o.transforms = p;
    GPtrArray *ref = two_epochs(ds, o, 0);
    g_assert_cmpint(ref->len, ==, 14);
    g_assert_cmpint(g_bytes_get_size(g_ptr_array_index(ref, 0)), ==, 8 * 3 * 25 * 4 + 8 * 4);
    GPtrArray *got = two_epochs(ds, o, 2);
    assert_same_batches(ref, got, "variable-size samples, 2 workers");
    g_ptr_array_unref(got);
    g_ptr_array_unref(ref);
    fake_free(ds);
    tdm_transform_pipeline_unref(p);
}

static TdmDataset *fashion_or_skip(void)
{
    g_autoptr(GError) error = NULL;
    TdmDataset *ds = tdm_dataset_open("fashion-mnist", "train", &error);
    if (ds == NULL) {
        g_autofree char *why = g_strdup_printf("no Fashion-MNIST: %s", error->message);
        g_test_skip(why);
    }
    return ds;
}

static void fashion_determinism(const char *spec)
{
    TdmDataset *ds = fashion_or_skip();
    if (ds == NULL) {
        return;
    }
    TdmTransformPipeline *p = NULL;
    if (spec != NULL && (p = pipeline_or_skip(spec)) == NULL) {
        tdm_dataset_close(ds);
        return;
    }
    g_autoptr(GError) error = NULL;
    TdmLoaderOptions o = base_options(64, 1);
    o.limit = 600;
    o.transforms = p;
    g_assert_true(tdm_dataset_get_normalization(ds, &o.n_mean, o.mean, o.std, &error));
    GPtrArray *ref = two_epochs(ds, o, 1);
    g_assert_cmpint(ref->len, ==, 20);
    const int counts[] = {2, 4};
    for (size_t i = 0; i < G_N_ELEMENTS(counts); i++) {
        GPtrArray *got = two_epochs(ds, o, counts[i]);
        assert_same_batches(ref, got, spec != NULL ? spec : "fashion-mnist");
        g_ptr_array_unref(got);
    }
    if (p != NULL) {
        /* The pipeline is random: the augmented epochs differ from the
         * plain ones, and between epochs beyond the order. */
        TdmLoaderOptions plain = o;
        plain.transforms = NULL;
        GPtrArray *raw = two_epochs(ds, plain, 1);
        g_assert_false(g_bytes_equal(g_ptr_array_index(raw, 0), g_ptr_array_index(ref, 0)));
        g_ptr_array_unref(raw);
    }
    g_ptr_array_unref(ref);
    tdm_transform_pipeline_unref(p);
    tdm_dataset_close(ds);
}

static void test_fashion_plain(void)
{
    fashion_determinism(NULL);
}

static void test_fashion_transforms(void)
{
    fashion_determinism("random-crop 28 pad=2 | hflip | rotate degrees=10 | normalize");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* Slow copies on ref's copy stream (a test hook: without it the copies
     * are quick and test_pinned_events checks only the bytes). */
    g_setenv("TDM_REF_COPY_DELAY_US", "3000", TRUE);
    g_test_add_func("/loader/ordered-delivery", test_ordered_delivery);
    g_test_add_func("/loader/workers-identical", test_workers_synthetic);
    g_test_add_func("/loader/reshuffle", test_reshuffle);
    g_test_add_func("/loader/resume-workers", test_resume_workers);
    g_test_add_func("/loader/resume-world", test_resume_world);
    g_test_add_func("/loader/error-names-file", test_error_names_file);
    g_test_add_func("/loader/free-mid-epoch", test_free_mid_epoch);
    g_test_add_func("/loader/variable-needs-transforms", test_variable_without_transforms);
    g_test_add_func("/loader/variable-with-transforms", test_variable_with_transforms);
    g_test_add_func("/loader/pinned", test_pinned);
    g_test_add_func("/loader/pinned-events", test_pinned_events);
    g_test_add_func("/loader/fashion-workers", test_fashion_plain);
    g_test_add_func("/loader/fashion-transforms-workers", test_fashion_transforms);
    return g_test_run();
}

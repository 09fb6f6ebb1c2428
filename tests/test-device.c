/* SPDX-License-Identifier: MIT */
/* tests/test-device.c - what a device says about itself and how work on it
 * is ordered, on ref (two virtual devices) and cpu (skipped when it is not
 * built):
 *  - tdm_device_info: kind, host memory, capability; the allocator counts
 *    follow tensors as they are made and freed, peak stays, reset works,
 *    and each virtual device counts its own;
 *  - tdm_device_list: every device of every available backend, once;
 *  - events and streams: ref's copy stream runs on a thread of its own and
 *    is slowed to COPY_DELAY_US per copy here, so a copy is seen pending,
 *    a wait with a short deadline times out naming the stream, compute and
 *    another device's copy stream wait for it, and the data lands; cpu's
 *    events complete at once; a backend without stream_ops gets the core's
 *    fallback (events wait by synchronising the device);
 *  - softmax_xent_stats accumulates exactly softmax_xent's loss sum and
 *    correct count, with the same gradient, and refuses a bad stats tensor;
 *  - a collective work keeps its tensors alive until tdm_comm_wait: the
 *    deferred fixture collective copies at wait through raw pointers after
 *    the caller dropped the input and allocated over it.
 * Timing-dependent assertions (a copy still pending) are made only when the
 * test saw the clock show less than the copy's delay, so a slow machine
 * cannot fail them. The delay is a test hook (TDM_REF_COPY_DELAY_US): in a
 * build without them (configure --enable-test-hooks) the cases that need a
 * slow copy stream skip.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "test-util.h"

#define COPY_DELAY_US 100000
#define COPY_DELAY_S (COPY_DELAY_US / 1e6)

/* ---- helpers ---- */

static TdmDeviceInfo info_of(TdmDevice *dev)
{
    TdmDeviceInfo info;
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_device_info(dev, &info, &error));
    g_assert_no_error(error);
    return info;
}

static TdmTensor *tensor_f32(TdmDevice *dev, int64_t n, const float *values)
{
    return test_tensor_with(dev, TDM_DTYPE_F32, 1, &n, values);
}

static float *ramp(int64_t n, float start)
{
    float *v = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = start + (float)i;
    }
    return v;
}

static void assert_tensor_equals(TdmTensor *t, const float *expect, int64_t n, const char *what)
{
    g_autoptr(GError) error = NULL;
    g_autofree float *got = tdm_tensor_read_f32(t, &error);
    g_assert_no_error(error);
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != expect[i]) {
            g_error("%s: element %" G_GINT64_FORMAT " is %g, expected %g", what, i, got[i],
                    expect[i]);
        }
    }
}

/* ---- device information and allocator counts ---- */

static void test_info(gconstpointer data)
{
    const char *spec = data;
    TdmDevice *dev = test_device_or_skip(spec);
    if (dev == NULL) {
        return;
    }
    TdmDeviceInfo info = info_of(dev);
    g_test_message("%s: %s, %s, %s", dev->name, info.name, tdm_device_kind_name(info.kind),
                   info.capability);
    g_assert_cmpint(strlen(info.name), >, 0);
    g_assert_cmpint(strlen(info.capability), >, 0);
    g_assert_true(info.host_accessible);
    g_assert_cmpint(info.compute_units, >=, 1);
    g_assert_cmpint(info.total_bytes, >, 0);
    g_assert_cmpint(info.free_bytes, >=, 0);
    g_assert_cmpint(info.free_bytes, <=, info.total_bytes);
    g_assert_cmpint(info.allocated_bytes, >=, 0);
    g_assert_cmpint(info.reserved_bytes, >=, info.allocated_bytes);
    g_assert_cmpint(info.peak_bytes, >=, info.allocated_bytes);
    g_assert_cmpint(info.utilization, ==, -1);
    if (g_str_has_prefix(spec, "ref")) {
        g_assert_cmpint(info.kind, ==, TDM_DEVICE_KIND_VIRTUAL);
        g_assert_nonnull(strstr(info.name, spec[4] == '1' ? "1" : "0"));
    } else {
        g_assert_cmpint(info.kind, ==, TDM_DEVICE_KIND_CPU);
        g_assert_cmpstr(tdm_device_kind_name(info.kind), ==, "cpu");
    }
    gint64 total = 0, avail = 0;
    g_assert_true(tdm_host_memory(&total, &avail));
    g_assert_cmpint(info.total_bytes, ==, total);
}

static void test_alloc_counts(gconstpointer data)
{
    const char *spec = data;
    TdmDevice *dev = test_device_or_skip(spec);
    if (dev == NULL) {
        return;
    }
    const int64_t n = 1000;
    const gint64 bytes = n * 4;
    TdmDeviceInfo before = info_of(dev);
    TdmTensor *a = tensor_f32(dev, n, NULL);
    TdmDeviceInfo with_a = info_of(dev);
    g_assert_cmpint(with_a.allocated_bytes, ==, before.allocated_bytes + bytes);
    g_assert_cmpint(with_a.peak_bytes, >=, with_a.allocated_bytes);

    tdm_device_reset_peak(dev);
    TdmDeviceInfo reset = info_of(dev);
    g_assert_cmpint(reset.peak_bytes, ==, with_a.allocated_bytes);

    TdmTensor *b = tensor_f32(dev, 2 * n, NULL);
    tdm_tensor_unref(b);
    tdm_tensor_unref(a);
    TdmDeviceInfo after = info_of(dev);
    g_assert_cmpint(after.allocated_bytes, ==, before.allocated_bytes);
    g_assert_cmpint(after.peak_bytes, ==, with_a.allocated_bytes + 2 * bytes);
    if (strcmp(spec, "cpu") == 0) {
        /* The caching allocator keeps the freed blocks: reserved, not allocated. */
        g_assert_cmpint(after.reserved_bytes, >=, after.allocated_bytes + 3 * bytes);
    }
    /* A view shares its base's storage: nothing more is allocated. */
    a = tensor_f32(dev, n, NULL);
    g_autoptr(GError) error = NULL;
    TdmTensor *view = tdm_tensor_narrow(a, 10, 100, &error);
    g_assert_no_error(error);
    g_assert_cmpint(info_of(dev).allocated_bytes, ==, before.allocated_bytes + bytes);
    tdm_tensor_unref(a);
    g_assert_cmpint(info_of(dev).allocated_bytes, ==, before.allocated_bytes + bytes);
    tdm_tensor_unref(view);
    g_assert_cmpint(info_of(dev).allocated_bytes, ==, before.allocated_bytes);
}

static void test_virtual_devices_count_apart(void)
{
    TdmDevice *d0 = test_device_or_skip("ref:0");
    TdmDevice *d1 = test_device_or_skip("ref:1");
    gint64 base0 = info_of(d0).allocated_bytes, base1 = info_of(d1).allocated_bytes;
    TdmTensor *t = tensor_f32(d1, 256, NULL);
    g_assert_cmpint(info_of(d1).allocated_bytes, ==, base1 + 1024);
    g_assert_cmpint(info_of(d0).allocated_bytes, ==, base0);
    tdm_tensor_unref(t);
    g_assert_cmpint(info_of(d1).allocated_bytes, ==, base1);
}

static void test_device_list(void)
{
    g_autoptr(GError) error = NULL;
    GPtrArray *list = tdm_device_list(&error);
    g_assert_no_error(error);
    g_assert_nonnull(list);
    gboolean ref0 = FALSE, ref1 = FALSE, cpu = FALSE;
    for (guint i = 0; i < list->len; i++) {
        TdmDevice *dev = g_ptr_array_index(list, i);
        for (guint j = 0; j < i; j++) {
            g_assert_true(g_ptr_array_index(list, j) != dev);
        }
        ref0 |= strcmp(dev->name, "ref:0") == 0;
        ref1 |= strcmp(dev->name, "ref:1") == 0;
        cpu |= strcmp(dev->name, "cpu:0") == 0;
        /* the same device tdm_device_get opens */
        g_assert_true(tdm_device_get(dev->name, NULL) == dev);
    }
    g_assert_true(ref0 && ref1);
    TdmFeature *f = tdm_registry_find(TDM_FEATURE_BACKEND, "cpu", NULL);
    g_assert_true(cpu == (f != NULL && tdm_feature_is_available(f, NULL)));
    g_ptr_array_unref(list);
}

/* ---- events on ref: a real, slowed copy stream ---- */

/* FALSE, with the test skipped, when ref's copies cannot be slowed. */
static gboolean copy_delay_or_skip(void)
{
#ifdef TDM_ENABLE_TEST_HOOKS
    return TRUE;
#else
    g_test_skip("TDM_REF_COPY_DELAY_US needs a build with configure --enable-test-hooks");
    return FALSE;
#endif
}

static void test_ref_copy_pending(void)
{
    if (!copy_delay_or_skip()) {
        return;
    }
    TdmDevice *dev = test_device_or_skip("ref:0");
    const int64_t n = 4096;
    g_autofree float *src = ramp(n, 1.0f);
    TdmTensor *t = tensor_f32(dev, n, NULL);
    g_autoptr(GError) error = NULL;
    TdmEvent *ev = tdm_event_new(dev, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_event_get_device(ev) == dev);
    g_assert_true(tdm_event_query(ev, &error)); /* never recorded: complete */

    double t0 = tdm_time_now();
    g_assert_true(tdm_device_copy_h2d(dev, TDM_STREAM_COPY, tdm_tensor_data(t), src, n * 4, &error));
    g_assert_true(tdm_event_record(ev, TDM_STREAM_COPY, &error));
    gboolean done = tdm_event_query(ev, &error);
    g_assert_no_error(error);
    GError *timeout = NULL;
    gboolean within = tdm_event_synchronize(ev, 0.0, &timeout);
    GError *short_wait = NULL;
    gboolean within_short = tdm_event_synchronize(ev, 0.01, &short_wait);
    double elapsed = tdm_time_now() - t0;
    if (elapsed < 0.8 * COPY_DELAY_S) {
        g_assert_false(done);
        g_assert_false(within);
        g_assert_error(timeout, TDM_ERROR, TDM_ERROR_TIMEOUT);
        g_assert_nonnull(strstr(timeout->message, "ref:0 copy stream"));
        g_assert_false(within_short);
        g_assert_error(short_wait, TDM_ERROR, TDM_ERROR_TIMEOUT);
    } else {
        g_test_message("%.3f s passed: too slow to see the copy pending", elapsed);
    }
    g_clear_error(&timeout);
    g_clear_error(&short_wait);

    g_assert_true(tdm_event_synchronize(ev, -1.0, &error));
    g_assert_true(tdm_event_query(ev, &error));
    assert_tensor_equals(t, src, n, "after the event");
    tdm_event_free(ev);
    tdm_tensor_unref(t);
}

static void test_ref_compute_waits(void)
{
    TdmDevice *dev = test_device_or_skip("ref:0");
    const int64_t n = 1000;
    g_autofree float *src = ramp(n, -500.0f);
    TdmTensor *t = tensor_f32(dev, n, NULL);
    TdmTensor *sum = tensor_f32(dev, n, NULL);
    g_autoptr(GError) error = NULL;
    TdmEvent *ev = tdm_event_new(dev, &error);
    g_assert_true(tdm_device_copy_h2d(dev, TDM_STREAM_COPY, tdm_tensor_data(t), src, n * 4, &error));
    g_assert_true(tdm_event_record(ev, TDM_STREAM_COPY, &error));
    g_assert_true(tdm_stream_wait_event(dev, TDM_STREAM_COMPUTE, ev, &error));
    /* An op queued after the wait sees the copied data, with no host wait. */
    g_assert_true(dev->backend->axpy(dev, 2.0f, t, sum, &error));
    g_assert_no_error(error);
    g_autofree float *twice = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        twice[i] = 2.0f * src[i];
    }
    assert_tensor_equals(sum, twice, n, "axpy after the compute stream waited");
    tdm_event_free(ev);
    tdm_tensor_unref(t);
    tdm_tensor_unref(sum);
}

static void test_ref_device_synchronize(void)
{
    if (!copy_delay_or_skip()) {
        return;
    }
    TdmDevice *dev = test_device_or_skip("ref:0");
    const int64_t n = 64;
    g_autofree float *src = ramp(n, 7.0f);
    TdmTensor *t = tensor_f32(dev, n, NULL);
    g_autoptr(GError) error = NULL;
    double t0 = tdm_time_now();
    g_assert_true(tdm_device_copy_h2d(dev, TDM_STREAM_COPY, tdm_tensor_data(t), src, n * 4, &error));
    GError *timeout = NULL;
    gboolean ok = tdm_device_synchronize_timeout(dev, 0.0, &timeout);
    if (tdm_time_now() - t0 < 0.8 * COPY_DELAY_S) {
        g_assert_false(ok);
        g_assert_error(timeout, TDM_ERROR, TDM_ERROR_TIMEOUT);
    }
    g_clear_error(&timeout);
    /* The device-wide synchronize drains the copy stream too. */
    g_assert_true(tdm_device_synchronize(dev, &error));
    assert_tensor_equals(t, src, n, "after tdm_device_synchronize");
    g_assert_true(tdm_device_synchronize_timeout(dev, 0.0, &error));
    g_assert_null(tdm_device_native_stream(dev, TDM_STREAM_COMPUTE));
    g_assert_null(tdm_device_native_stream(dev, TDM_STREAM_COPY));
    tdm_tensor_unref(t);
}

/* ref:1's copy stream waits for a copy event of ref:0's. */
static void test_ref_cross_device_wait(void)
{
    if (!copy_delay_or_skip()) {
        return;
    }
    TdmDevice *d0 = test_device_or_skip("ref:0");
    TdmDevice *d1 = test_device_or_skip("ref:1");
    const int64_t n = 128;
    g_autofree float *a = ramp(n, 0.0f);
    g_autofree float *b = ramp(n, 1000.0f);
    TdmTensor *ta = tensor_f32(d0, n, NULL), *tb = tensor_f32(d1, n, NULL);
    g_autoptr(GError) error = NULL;
    TdmEvent *e0 = tdm_event_new(d0, &error), *e1 = tdm_event_new(d1, &error);
    /* two copies on ref:0, one on ref:1: without the wait ref:1 would finish first */
    g_assert_true(tdm_device_copy_h2d(d0, TDM_STREAM_COPY, tdm_tensor_data(ta), b, n * 4, &error));
    g_assert_true(tdm_device_copy_h2d(d0, TDM_STREAM_COPY, tdm_tensor_data(ta), a, n * 4, &error));
    g_assert_true(tdm_event_record(e0, TDM_STREAM_COPY, &error));
    g_assert_true(tdm_stream_wait_event(d1, TDM_STREAM_COPY, e0, &error));
    g_assert_true(tdm_device_copy_h2d(d1, TDM_STREAM_COPY, tdm_tensor_data(tb), b, n * 4, &error));
    g_assert_true(tdm_event_record(e1, TDM_STREAM_COPY, &error));
    g_assert_true(tdm_event_synchronize(e1, -1.0, &error));
    /* e1 comes after e0 on ref:1's stream: e0 is complete too. */
    g_assert_true(tdm_event_query(e0, &error));
    g_assert_no_error(error);
    assert_tensor_equals(ta, a, n, "ref:0's copy");
    assert_tensor_equals(tb, b, n, "ref:1's copy");
    /* An event on compute is complete once recorded. */
    g_assert_true(tdm_event_record(e0, TDM_STREAM_COMPUTE, &error));
    g_assert_true(tdm_event_query(e0, &error));
    tdm_event_free(e0);
    tdm_event_free(e1);
    tdm_tensor_unref(ta);
    tdm_tensor_unref(tb);
}

static void test_event_errors(void)
{
    TdmDevice *dev = test_device_or_skip("ref:0");
    g_autoptr(GError) error = NULL;
    TdmEvent *ev = tdm_event_new(dev, &error);
    g_assert_false(tdm_event_record(ev, (TdmStream)7, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "ref:0"));
    g_assert_nonnull(strstr(error->message, "stream 7"));
    g_clear_error(&error);
    g_assert_false(tdm_event_synchronize(ev, NAN, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_clear_error(&error);
    g_assert_false(tdm_device_copy_h2d(dev, TDM_STREAM_COPY, NULL, "x", 1, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_clear_error(&error);
    /* Freeing an event whose copy is still running is allowed. */
    const int64_t n = 16;
    g_autofree float *src = ramp(n, 3.0f);
    TdmTensor *t = tensor_f32(dev, n, NULL);
    g_assert_true(tdm_device_copy_h2d(dev, TDM_STREAM_COPY, tdm_tensor_data(t), src, n * 4, &error));
    g_assert_true(tdm_event_record(ev, TDM_STREAM_COPY, &error));
    tdm_event_free(ev);
    tdm_event_free(NULL);
    g_assert_true(tdm_device_synchronize(dev, &error));
    assert_tensor_equals(t, src, n, "copy of a freed event");
    tdm_tensor_unref(t);
}

/* ---- events on cpu: complete at once ---- */

static void test_cpu_events(void)
{
    TdmDevice *dev = test_device_or_skip("cpu");
    if (dev == NULL) {
        return;
    }
    const int64_t n = 300;
    g_autofree float *src = ramp(n, 2.0f);
    TdmTensor *t = tensor_f32(dev, n, NULL);
    g_autoptr(GError) error = NULL;
    TdmEvent *ev = tdm_event_new(dev, &error);
    for (int s = 0; s < TDM_N_STREAMS; s++) {
        g_assert_true(tdm_device_copy_h2d(dev, (TdmStream)s, tdm_tensor_data(t), src, n * 4, &error));
        g_assert_true(tdm_event_record(ev, (TdmStream)s, &error));
        g_assert_true(tdm_event_query(ev, &error));
        g_assert_true(tdm_event_synchronize(ev, 0.0, &error));
        g_assert_true(tdm_stream_wait_event(dev, TDM_STREAM_COMPUTE, ev, &error));
        g_assert_no_error(error);
        assert_tensor_equals(t, src, n, "cpu copy");
        src[0] += 1.0f;
    }
    g_assert_true(tdm_device_synchronize_timeout(dev, 0.0, &error));
    g_assert_null(tdm_device_native_stream(dev, TDM_STREAM_COMPUTE));
    /* a cpu stream may wait for a ref event: the host waits for it */
    TdmDevice *ref = test_device_or_skip("ref:0");
    TdmEvent *rev = tdm_event_new(ref, &error);
    TdmTensor *rt = tensor_f32(ref, n, NULL);
    g_assert_true(tdm_device_copy_h2d(ref, TDM_STREAM_COPY, tdm_tensor_data(rt), src, n * 4, &error));
    g_assert_true(tdm_event_record(rev, TDM_STREAM_COPY, &error));
    g_assert_true(tdm_stream_wait_event(dev, TDM_STREAM_COMPUTE, rev, &error));
    g_assert_true(tdm_event_query(rev, &error));
    assert_tensor_equals(rt, src, n, "ref copy a cpu stream waited for");
    tdm_event_free(rev);
    tdm_tensor_unref(rt);
    tdm_event_free(ev);
    tdm_tensor_unref(t);
}

/* ---- the core's fallback for a backend without stream_ops ---- */

static TdmBackendClass plain_class;
static int plain_syncs;

static gboolean plain_synchronize(TdmDevice *dev, GError **error)
{
    plain_syncs++;
    return TRUE;
}

static void test_fallback_events(void)
{
    TdmDevice *ref = test_device_or_skip("ref:0");
    plain_class = *ref->backend;
    plain_class.stream_ops = NULL;
    plain_class.synchronize = plain_synchronize;
    TdmDevice dev = *ref; /* ref:0's memory and state, through the copied class */
    dev.backend = &plain_class;
    dev.name = (char *)"plain:0";
    g_autoptr(GError) error = NULL;
    TdmEvent *ev = tdm_event_new(&dev, &error);
    g_assert_no_error(error);
    plain_syncs = 0;
    g_assert_true(tdm_event_query(ev, &error)); /* unrecorded */
    g_assert_true(tdm_event_record(ev, TDM_STREAM_COMPUTE, &error));
    g_assert_cmpint(plain_syncs, ==, 0);
    g_assert_true(tdm_event_query(ev, &error)); /* waits by synchronising */
    g_assert_cmpint(plain_syncs, ==, 1);
    g_assert_true(tdm_event_synchronize(ev, 1.0, &error)); /* nothing pending since */
    g_assert_cmpint(plain_syncs, ==, 1);

    const int64_t n = 32;
    g_autofree float *src = ramp(n, 9.0f);
    TdmTensor *t = tensor_f32(ref, n, NULL);
    g_assert_true(tdm_device_copy_h2d(&dev, TDM_STREAM_COPY, tdm_tensor_data(t), src, n * 4, &error));
    g_assert_true(tdm_event_record(ev, TDM_STREAM_COPY, &error));
    /* its own device: one in-order stream, nothing to do */
    g_assert_true(tdm_stream_wait_event(&dev, TDM_STREAM_COMPUTE, ev, &error));
    g_assert_cmpint(plain_syncs, ==, 1);
    /* another device: the host waits */
    g_assert_true(tdm_stream_wait_event(ref, TDM_STREAM_COMPUTE, ev, &error));
    g_assert_cmpint(plain_syncs, ==, 2);
    assert_tensor_equals(t, src, n, "fallback copy");
    g_assert_true(tdm_device_synchronize_timeout(&dev, 5.0, &error));
    g_assert_cmpint(plain_syncs, ==, 3);
    g_assert_null(tdm_device_native_stream(&dev, TDM_STREAM_COMPUTE));
    /* no device_info: the name and the core's own counts, unknowns at -1 */
    plain_class.device_info = NULL;
    TdmDeviceInfo info = info_of(&dev);
    g_assert_cmpstr(info.name, ==, "plain:0");
    g_assert_cmpint(info.kind, ==, TDM_DEVICE_KIND_UNKNOWN);
    g_assert_cmpint(info.total_bytes, ==, -1);
    g_assert_cmpint(info.allocated_bytes, ==, info_of(ref).allocated_bytes);
    tdm_event_free(ev);
    tdm_tensor_unref(t);
    g_assert_no_error(error);
}

/* ---- softmax_xent_stats against softmax_xent ---- */

static void test_xent_stats(gconstpointer data)
{
    TdmDevice *dev = test_device_or_skip(data);
    if (dev == NULL) {
        return;
    }
    const TdmBackendClass *B = dev->backend;
    g_assert_nonnull(B->softmax_xent_stats);
    const int64_t N = 37, K = 11, shape[2] = {N, K};
    GRand *rng = g_rand_new_with_seed(42);
    float *x = g_new(float, N * K);
    gint32 labels[37];
    for (int64_t i = 0; i < N * K; i++) {
        x[i] = (float)g_rand_double_range(rng, -3, 3);
    }
    int64_t hits = 0; /* rows labelled with their argmax, every third */
    for (int64_t i = 0; i < N; i++) {
        gint32 arg = 0;
        for (gint32 k = 1; k < K; k++) {
            arg = x[i * K + k] > x[i * K + arg] ? k : arg;
        }
        labels[i] = i % 3 == 0 ? arg : g_rand_int_range(rng, 0, (gint32)K);
        hits += labels[i] == arg;
    }
    g_rand_free(rng);
    g_autoptr(GError) error = NULL;
    TdmTensor *logits = tdm_tensor_new(dev, TDM_DTYPE_F32, 2, shape, &error);
    TdmTensor *lab = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, &N, &error);
    g_assert_true(tdm_tensor_write(logits, x, &error));
    g_assert_true(tdm_tensor_write(lab, labels, &error));
    TdmTensor *stats = tensor_f32(dev, TDM_XENT_STATS_LEN, NULL);
    const float smoothing[2] = {0.0f, 0.1f};
    double loss_sum = 0.0;
    int64_t correct_sum = 0;
    for (int c = 0; c < 2; c++) {
        TdmTensor *dl_a = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
        TdmTensor *dl_b = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
        float loss = 0.0f;
        int64_t correct = 0;
        g_assert_true(B->softmax_xent(dev, NULL, logits, lab, smoothing[c], &loss, dl_a, &correct,
                                      &error));
        g_assert_true(B->softmax_xent_stats(dev, NULL, logits, lab, smoothing[c], dl_b, stats,
                                            &error));
        /* without a gradient, twice: it accumulates */
        g_assert_true(B->softmax_xent_stats(dev, NULL, logits, lab, smoothing[c], NULL, stats,
                                            &error));
        g_assert_no_error(error);
        loss_sum += 2.0 * (double)loss * (double)N;
        correct_sum += 2 * correct;
        g_autofree float *ga = tdm_tensor_read_f32(dl_a, &error);
        g_autofree float *gb = tdm_tensor_read_f32(dl_b, &error);
        g_assert_cmpmem(ga, N * K * 4, gb, N * K * 4);
        float got[TDM_XENT_STATS_LEN];
        g_assert_true(tdm_tensor_read(stats, got, &error));
        g_assert_cmpfloat_with_epsilon(got[TDM_XENT_STATS_LOSS_SUM], loss_sum, 1e-5 * loss_sum);
        g_assert_cmpfloat(got[TDM_XENT_STATS_CORRECT], ==, (float)correct_sum);
        g_assert_cmpint(correct, ==, hits);
        tdm_tensor_unref(dl_a);
        tdm_tensor_unref(dl_b);
    }
    float before[TDM_XENT_STATS_LEN], after[TDM_XENT_STATS_LEN];
    g_assert_true(tdm_tensor_read(stats, before, &error));
    /* a bad label: an error, and the statistics untouched */
    labels[5] = (gint32)K;
    g_assert_true(tdm_tensor_write(lab, labels, &error));
    g_assert_false(B->softmax_xent_stats(dev, NULL, logits, lab, 0.0f, NULL, stats, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "row 5"));
    g_clear_error(&error);
    g_assert_true(tdm_tensor_read(stats, after, &error));
    g_assert_cmpmem(before, sizeof(before), after, sizeof(after));
    /* stats of the wrong size (the op's front end refuses them) */
    labels[5] = 0;
    g_assert_true(tdm_tensor_write(lab, labels, &error));
    TdmTensor *wrong = tensor_f32(dev, 3, NULL);
    g_assert_false(tdm_op_softmax_xent_stats(dev, NULL, logits, lab, 0.0f, NULL, wrong, &error));
    g_assert_nonnull(strstr(error->message, "stats"));
    g_clear_error(&error);
    tdm_tensor_unref(wrong);
    tdm_tensor_unref(stats);
    tdm_tensor_unref(logits);
    tdm_tensor_unref(lab);
    g_free(x);
}

/* ---- collective work holds its tensors ---- */

static void test_comm_work_holds_tensors(void)
{
    TdmDevice *dev = test_device_or_skip("ref:0");
    const char *top = g_getenv("TDM_TOP_BUILDDIR");
    g_autofree char *fixture = g_build_filename(top != NULL ? top : ".", "tests", "fixtures",
                                                ".libs", "libtdm-fixture-deferred.so", NULL);
    if (!g_file_test(fixture, G_FILE_TEST_EXISTS)) {
        g_test_skip("the deferred fixture collective is not built");
        return;
    }
    g_autoptr(GError) error = NULL;
    g_assert_nonnull(tdm_registry_load_file(fixture, &error));
    g_assert_no_error(error);
    TdmDistEnv env = {.rank = 0, .world_size = 1, .local_world_size = 1};
    TdmComm *comm = tdm_comm_new("fixture-deferred", NULL, &env, dev, NULL, &error);
    g_assert_no_error(error);

    const int64_t n = 1000;
    g_autofree float *values = ramp(n, 0.5f);
    g_autofree float *junk = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        junk[i] = -1.0f;
    }
    TdmTensor *in = tensor_f32(dev, n, values);
    TdmTensor *out = tensor_f32(dev, n, NULL);
    gint64 base = info_of(dev).allocated_bytes;
    TdmCommWork *w = tdm_comm_allgather_async(comm, in, out, &error);
    g_assert_no_error(error);
    tdm_tensor_unref(in); /* the caller is done with it; the work is not */
    g_assert_cmpint(info_of(dev).allocated_bytes, ==, base);
    /* an allocation of the same size would take a freed block */
    TdmTensor *other = tensor_f32(dev, n, junk);
    g_assert_cmpint(info_of(dev).allocated_bytes, ==, base + n * 4);
    g_assert_true(tdm_comm_wait(comm, w, &error));
    g_assert_no_error(error);
    assert_tensor_equals(out, values, n, "allgather run after the input was dropped");
    /* the wait let go of the input */
    g_assert_cmpint(info_of(dev).allocated_bytes, ==, base);

    /* reduce_scatter, through a view whose base is gone too */
    TdmTensor *base_t = tensor_f32(dev, 2 * n, NULL);
    TdmTensor *view = tdm_tensor_narrow(base_t, n, n, &error);
    g_assert_true(tdm_tensor_write(view, values, &error));
    tdm_tensor_unref(base_t);
    TdmTensor *out2 = tensor_f32(dev, n, NULL);
    w = tdm_comm_reduce_scatter_async(comm, view, out2, TDM_REDUCE_SUM, &error);
    g_assert_no_error(error);
    tdm_tensor_unref(view);
    TdmTensor *other2 = tensor_f32(dev, 2 * n, NULL);
    g_assert_true(tdm_comm_wait(comm, w, &error));
    assert_tensor_equals(out2, values, n, "reduce_scatter of a dropped view");

    tdm_tensor_unref(other);
    tdm_tensor_unref(other2);
    tdm_tensor_unref(out);
    tdm_tensor_unref(out2);
    tdm_comm_free(comm);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_setenv("TDM_REF_DEVICES", "2", TRUE);
    g_autofree char *delay = g_strdup_printf("%d", COPY_DELAY_US);
    g_setenv("TDM_REF_COPY_DELAY_US", delay, TRUE);
    g_unsetenv("TDM_BACKEND");
    g_test_add_data_func("/device/info/ref0", "ref:0", test_info);
    g_test_add_data_func("/device/info/ref1", "ref:1", test_info);
    g_test_add_data_func("/device/info/cpu", "cpu", test_info);
    g_test_add_data_func("/device/alloc-counts/ref", "ref:0", test_alloc_counts);
    g_test_add_data_func("/device/alloc-counts/cpu", "cpu", test_alloc_counts);
    g_test_add_func("/device/alloc-counts/virtual-devices", test_virtual_devices_count_apart);
    g_test_add_func("/device/list", test_device_list);
    g_test_add_func("/events/ref/copy-pending", test_ref_copy_pending);
    g_test_add_func("/events/ref/compute-waits", test_ref_compute_waits);
    g_test_add_func("/events/ref/device-synchronize", test_ref_device_synchronize);
    g_test_add_func("/events/ref/cross-device", test_ref_cross_device_wait);
    g_test_add_func("/events/errors", test_event_errors);
    g_test_add_func("/events/cpu", test_cpu_events);
    g_test_add_func("/events/fallback", test_fallback_events);
    g_test_add_data_func("/xent-stats/ref", "ref", test_xent_stats);
    g_test_add_data_func("/xent-stats/cpu", "cpu", test_xent_stats);
    g_test_add_func("/comm/work-holds-tensors", test_comm_work_holds_tensors);
    return g_test_run();
}

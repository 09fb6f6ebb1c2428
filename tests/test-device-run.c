/* SPDX-License-Identifier: MIT */
/* tests/test-device-run.c - what a training run asks of its devices, on
 * ref (two virtual devices) and cpu (skipped when it is not built):
 *  - precision: the names and their parsing; fp32 is accepted everywhere,
 *    tf32 and bf16 are refused with TDM_ERROR_UNSUPPORTED naming the
 *    backend, the device and the precision (ref says no through its slot,
 *    cpu has none), and a refused device keeps its precision; a backend
 *    that accepts gets the call and the core remembers what was set;
 *  - tdm_tensor_copy_across: between two devices of a backend with
 *    copy_peer the backend's peer copy runs (counted through a copy of
 *    ref's class whose copy_peer counts its calls), without it and between
 *    backends (ref:0 -> cpu:0) the bytes go through host memory, with the
 *    caller's staging buffer or without one; f32 and i32 data arrive
 *    intact, an empty slot is shaped like the source, a source that is
 *    not contiguous is refused naming both devices;
 *  - tdm_device_get_local: a spec without an index takes device
 *    local_rank % count (LOCAL_RANK=1 -> ref:1 with TDM_REF_DEVICES=2),
 *    also through TDM_BACKEND; a spec with an index keeps it.
 */
#include "config.h"

#include <string.h>

#include <tandem/tandem.h>

#include "test-util.h"

/* `t` holds exactly `n` bytes equal to `expect`, in the given dtype and shape. */
static void assert_holds(TdmTensor *t, TdmDType dtype, int ndim, const int64_t *shape,
                         const void *expect, size_t n)
{
    g_autoptr(GError) error = NULL;
    g_assert_cmpint(t->dtype, ==, dtype);
    g_assert_cmpint(t->ndim, ==, ndim);
    for (int i = 0; i < ndim; i++) {
        g_assert_cmpint(t->shape[i], ==, shape[i]);
    }
    g_assert_true(tdm_tensor_is_contiguous(t));
    g_autofree guint8 *got = g_malloc(n);
    g_assert_true(tdm_tensor_read(t, got, &error));
    g_assert_no_error(error);
    g_assert_cmpmem(got, n, expect, n);
}

/* ---- precision ---- */

static void test_precision_names(void)
{
    static const struct {
        const char *name;
        TdmPrecision value;
    } known[] = {
        {"fp32", TDM_PRECISION_FP32}, {"tf32", TDM_PRECISION_TF32}, {"bf16", TDM_PRECISION_BF16}};
    g_autoptr(GError) error = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(known); i++) {
        TdmPrecision p = (TdmPrecision)-1;
        g_assert_cmpstr(tdm_precision_name(known[i].value), ==, known[i].name);
        g_assert_true(tdm_precision_from_name(known[i].name, &p, &error));
        g_assert_no_error(error);
        g_assert_cmpint(p, ==, known[i].value);
        g_autofree char *upper = g_ascii_strup(known[i].name, -1);
        g_assert_true(tdm_precision_from_name(upper, &p, &error));
        g_assert_cmpint(p, ==, known[i].value);
    }
    g_assert_cmpstr(tdm_precision_name((TdmPrecision)7), ==, "unknown");
    static const char *const bad[] = {"fp16", "", "bf16 ", "float32"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        TdmPrecision p = TDM_PRECISION_TF32;
        g_assert_false(tdm_precision_from_name(bad[i], &p, &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        g_autofree char *quoted = g_strdup_printf("'%s'", bad[i]);
        g_assert_nonnull(strstr(error->message, quoted));
        g_assert_nonnull(strstr(error->message, "fp32, tf32 or bf16"));
        g_assert_cmpint(p, ==, TDM_PRECISION_TF32); /* untouched */
        g_clear_error(&error);
    }
}

/* fp32 accepted; tf32 and bf16 refused naming backend, device and
 * precision, the device staying in fp32. */
static void test_precision_refused(gconstpointer data)
{
    const char *spec = data;
    TdmDevice *dev = test_device_or_skip(spec);
    if (dev == NULL) {
        return;
    }
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_device_set_precision(dev, TDM_PRECISION_FP32, &error));
    g_assert_no_error(error);
    g_assert_cmpint(tdm_device_get_precision(dev), ==, TDM_PRECISION_FP32);
    const char *backend = tdm_feature_get_name(dev->feature);
    for (TdmPrecision p = TDM_PRECISION_TF32; p <= TDM_PRECISION_BF16; p++) {
        g_assert_false(tdm_device_set_precision(dev, p, &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED);
        g_autofree char *want = g_strdup_printf("backend '%s' (%s) does not offer %s precision",
                                                backend, dev->name, tdm_precision_name(p));
        if (!g_str_has_prefix(error->message, want) ||
            !g_str_has_suffix(error->message, "; use --device cuda")) {
            g_error("message '%s' should start with \"%s\" and point to cuda", error->message,
                    want);
        }
        g_clear_error(&error);
        g_assert_cmpint(tdm_device_get_precision(dev), ==, TDM_PRECISION_FP32);
    }
    /* cpu has no set_precision slot: the core's own sentence, exactly */
    if (dev->backend->set_precision == NULL) {
        g_assert_false(tdm_device_set_precision(dev, TDM_PRECISION_BF16, &error));
        g_autofree char *exact =
            g_strdup_printf("backend '%s' (%s) does not offer bf16 precision; use --device cuda",
                            backend, dev->name);
        g_assert_cmpstr(error->message, ==, exact);
    }
}

/* A backend that takes every precision (a copy of ref's class), and one
 * that fails for another reason than UNSUPPORTED. */
static TdmBackendClass accepting_class;
static TdmPrecision accepted;
static int accept_calls;

static gboolean accept_precision(TdmDevice *dev, TdmPrecision precision, GError **error)
{
    accept_calls++;
    accepted = precision;
    return TRUE;
}

static gboolean broken_precision(TdmDevice *dev, TdmPrecision precision, GError **error)
{
    g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "the library said no");
    return FALSE;
}

static void test_precision_accepted(void)
{
    TdmDevice *ref = test_device_or_skip("ref:1");
    if (ref == NULL) {
        return;
    }
    accepting_class = *ref->backend;
    accepting_class.set_precision = accept_precision;
    TdmDevice dev = *ref; /* ref:1's state (its core record too) through the copied class */
    dev.backend = &accepting_class;
    dev.name = (char *)"accepting:1";
    g_autoptr(GError) error = NULL;
    accept_calls = 0;
    g_assert_true(tdm_device_set_precision(&dev, TDM_PRECISION_BF16, &error));
    g_assert_no_error(error);
    g_assert_cmpint(accept_calls, ==, 1);
    g_assert_cmpint(accepted, ==, TDM_PRECISION_BF16);
    g_assert_cmpint(tdm_device_get_precision(&dev), ==, TDM_PRECISION_BF16);
    /* fp32 goes to the backend too: it resets a lower precision */
    g_assert_true(tdm_device_set_precision(&dev, TDM_PRECISION_FP32, &error));
    g_assert_cmpint(accept_calls, ==, 2);
    g_assert_cmpint(accepted, ==, TDM_PRECISION_FP32);
    g_assert_cmpint(tdm_device_get_precision(&dev), ==, TDM_PRECISION_FP32);
    /* another failure keeps its code, prefixed with the device */
    accepting_class.set_precision = broken_precision;
    g_assert_false(tdm_device_set_precision(&dev, TDM_PRECISION_TF32, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_BACKEND);
    g_assert_cmpstr(error->message, ==,
                    "device 'accepting:1': setting tf32 precision: the library said no");
    g_assert_cmpint(tdm_device_get_precision(&dev), ==, TDM_PRECISION_FP32);
}

/* ---- copies between devices ---- */

static TdmBackendClass counting_class;
static const TdmBackendClass *ref_class;
static int peer_copies;

static gboolean counting_copy_peer(TdmDevice *dst_dev, void *dst, TdmDevice *src_dev,
                                   const void *src, size_t n, GError **error)
{
    peer_copies++;
    return ref_class->copy_peer(dst_dev, dst, src_dev, src, n, error);
}

/* Copies src (f32 [3, 5] and i32 [7]) from `a` to `b` and back through
 * empty slots and shaped tensors, with and without a staging buffer; each
 * copy must arrive intact. Returns how many copies it made. */
static int copy_round_trips(TdmDevice *a, TdmDevice *b)
{
    g_autoptr(GError) error = NULL;
    int copies = 0;
    float f[15];
    gint32 ints[7];
    for (int i = 0; i < 15; i++) {
        f[i] = 0.25f * (float)i - 1.5f;
    }
    for (int i = 0; i < 7; i++) {
        ints[i] = 1000 * i - 3;
    }
    const int64_t fshape[2] = {3, 5}, ishape[1] = {7};
    TdmTensor *fa = test_tensor_with(a, TDM_DTYPE_F32, 2, fshape, f);
    TdmTensor *ia = test_tensor_with(a, TDM_DTYPE_I32, 1, ishape, ints);
    /* into empty slots: shaped and typed like the source */
    TdmTensor *fb = tdm_tensor_new_empty(b, TDM_DTYPE_F32);
    TdmTensor *ib = tdm_tensor_new_empty(b, TDM_DTYPE_F32);
    g_assert_true(tdm_tensor_copy_across(fa, fb, NULL, &error));
    g_assert_true(tdm_tensor_copy_across(ia, ib, NULL, &error));
    g_assert_no_error(error);
    copies += 2;
    g_assert_true(fb->device == b && ib->device == b);
    assert_holds(fb, TDM_DTYPE_F32, 2, fshape, f, sizeof(f));
    assert_holds(ib, TDM_DTYPE_I32, 1, ishape, ints, sizeof(ints));
    /* back into shaped tensors, through the caller's staging buffer, after
     * the source changed */
    for (int i = 0; i < 15; i++) {
        f[i] = -f[i];
    }
    g_assert_true(tdm_tensor_write(fb, f, &error));
    float staging[15];
    g_assert_true(tdm_tensor_copy_across(fb, fa, staging, &error));
    g_assert_no_error(error);
    copies++;
    assert_holds(fa, TDM_DTYPE_F32, 2, fshape, f, sizeof(f));
    /* a row of a tensor (a view at an offset) into a slot that had other
     * data and shape */
    TdmTensor *row = tdm_tensor_narrow(fa, 1, 1, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_tensor_copy_across(row, ib, NULL, &error));
    g_assert_no_error(error);
    copies++;
    const int64_t rshape[2] = {1, 5};
    assert_holds(ib, TDM_DTYPE_F32, 2, rshape, f + 5, 5 * sizeof(float));
    tdm_tensor_unref(row);
    tdm_tensor_unref(fa);
    tdm_tensor_unref(ia);
    tdm_tensor_unref(fb);
    tdm_tensor_unref(ib);
    return copies;
}

static void test_copy_peer(void)
{
    TdmDevice *ref0 = test_device_or_skip("ref:0"), *ref1 = test_device_or_skip("ref:1");
    if (ref0 == NULL || ref1 == NULL) {
        return;
    }
    g_assert_nonnull(ref0->backend->copy_peer);
    g_assert_true(tdm_device_can_copy_peer(ref0, ref1));
    g_assert_true(tdm_device_can_copy_peer(ref1, ref0));
    g_assert_false(tdm_device_can_copy_peer(ref0, ref0)); /* one device: not a peer */
    ref_class = ref0->backend;
    counting_class = *ref0->backend;
    counting_class.copy_peer = counting_copy_peer;
    TdmDevice a = *ref0, b = *ref1; /* ref's devices through the counting class */
    a.backend = b.backend = &counting_class;
    a.name = (char *)"counting:0";
    b.name = (char *)"counting:1";
    peer_copies = 0;
    int copies = copy_round_trips(&a, &b);
    g_assert_cmpint(peer_copies, ==, copies);

    /* without the slot: every copy through the host, none peer */
    counting_class.copy_peer = NULL;
    g_assert_false(tdm_device_can_copy_peer(&a, &b));
    peer_copies = 0;
    copy_round_trips(&a, &b);
    g_assert_cmpint(peer_copies, ==, 0);
    /* and on one device, staged too */
    counting_class.copy_peer = counting_copy_peer;
    peer_copies = 0;
    copy_round_trips(&a, &a);
    g_assert_cmpint(peer_copies, ==, 0);
}

/* Between backends (ref:0 -> cpu:0 and back): through host memory. */
static void test_copy_mixed(void)
{
    TdmDevice *ref = test_device_or_skip("ref:0"), *cpu = test_device_or_skip("cpu");
    if (ref == NULL || cpu == NULL) {
        return;
    }
    g_assert_false(tdm_device_can_copy_peer(ref, cpu));
    g_assert_false(tdm_device_can_copy_peer(cpu, ref));
    copy_round_trips(ref, cpu);
    copy_round_trips(cpu, ref);
}

static void test_copy_errors(void)
{
    TdmDevice *ref0 = test_device_or_skip("ref:0"), *ref1 = test_device_or_skip("ref:1");
    if (ref0 == NULL || ref1 == NULL) {
        return;
    }
    g_autoptr(GError) error = NULL;
    const int64_t shape[2] = {4, 2};
    TdmTensor *t = test_tensor_with(ref0, TDM_DTYPE_F32, 2, shape, NULL);
    TdmTensor *dst = tdm_tensor_new_empty(ref1, TDM_DTYPE_F32);
    /* column 0 only: [4, 1] with a row stride of 2, not contiguous */
    t->shape[1] = 1;
    g_assert_false(tdm_tensor_copy_across(t, dst, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_cmpstr(error->message, ==,
                    "copy from ref:0 to ref:1: the source f32 [4, 1] is not plain and contiguous");
    g_clear_error(&error);
    g_assert_cmpint(dst->ndim, ==, 0); /* untouched */
    t->shape[1] = 2;
    /* an empty source: nothing to copy, the slot shaped */
    TdmTensor *empty = tdm_tensor_new_empty(ref0, TDM_DTYPE_F32);
    const int64_t zero[1] = {0};
    g_assert_true(tdm_tensor_ensure(empty, TDM_DTYPE_F32, 1, zero, NULL, 0, &error));
    g_assert_true(tdm_tensor_copy_across(empty, dst, NULL, &error));
    g_assert_no_error(error);
    g_assert_cmpint(dst->ndim, ==, 1);
    g_assert_cmpint(dst->shape[0], ==, 0);
    tdm_tensor_unref(empty);
    tdm_tensor_unref(dst);
    tdm_tensor_unref(t);
}

/* ---- the local rank's device ---- */

static void assert_local(const char *spec, int local_rank, const char *want)
{
    g_autoptr(GError) error = NULL;
    TdmDevice *dev = tdm_device_get_local(spec, local_rank, &error);
    g_assert_no_error(error);
    g_assert_nonnull(dev);
    if (strcmp(dev->name, want) != 0) {
        g_error("tdm_device_get_local(\"%s\", %d) is %s, expected %s", spec ? spec : "NULL",
                local_rank, dev->name, want);
    }
    g_assert_true(dev == tdm_device_get(want, &error));
}

static void test_local_rank(void)
{
    if (test_device_or_skip("ref:1") == NULL) {
        return;
    }
    /* LOCAL_RANK % 2 for a spec without an index */
    assert_local("ref", 0, "ref:0");
    assert_local("ref", 1, "ref:1");
    assert_local("ref", 2, "ref:0");
    assert_local("ref", 3, "ref:1");
    /* an index wins */
    assert_local("ref:0", 1, "ref:0");
    assert_local("ref:1", 0, "ref:1");
    /* "auto" and NULL through TDM_BACKEND, with or without an index */
    g_setenv("TDM_BACKEND", "ref", TRUE);
    assert_local("auto", 1, "ref:1");
    assert_local(NULL, 1, "ref:1");
    assert_local("", 0, "ref:0");
    g_setenv("TDM_BACKEND", "ref:0", TRUE);
    assert_local("auto", 1, "ref:0");
    g_unsetenv("TDM_BACKEND");
    /* one device: every rank shares it */
    TdmDevice *cpu = tdm_device_get("cpu", NULL);
    if (cpu != NULL && tdm_device_count(cpu) == 1) {
        assert_local("cpu", 1, "cpu:0");
    }
    /* errors name the spec */
    g_autoptr(GError) error = NULL;
    g_assert_null(tdm_device_get_local("nosuchbackend", 1, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "nosuchbackend"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_setenv("TDM_REF_DEVICES", "2", TRUE);
    g_unsetenv("TDM_BACKEND");
    g_test_add_func("/precision/names", test_precision_names);
    g_test_add_data_func("/precision/refused/ref", "ref:0", test_precision_refused);
    g_test_add_data_func("/precision/refused/cpu", "cpu", test_precision_refused);
    g_test_add_func("/precision/accepted", test_precision_accepted);
    g_test_add_func("/copy/peer", test_copy_peer);
    g_test_add_func("/copy/mixed", test_copy_mixed);
    g_test_add_func("/copy/errors", test_copy_errors);
    g_test_add_func("/device/local-rank", test_local_rank);
    return g_test_run();
}

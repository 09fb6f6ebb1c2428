/* SPDX-License-Identifier: MIT */
/* tests/core-test-util.h - small helpers shared by the core's module, model
 * and optimizer tests: the ref device, host <-> tensor transfers and
 * deterministic random data. Static functions only (each test is one
 * program). */
#ifndef TDM_CORE_TEST_UTIL_H
#define TDM_CORE_TEST_UTIL_H

#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "test-util.h"

G_GNUC_UNUSED static TdmDevice *test_ref_device(void)
{
    GError *error = NULL;
    TdmDevice *dev = tdm_device_get("ref", &error);
    g_assert_no_error(error);
    g_assert_nonnull(dev);
    return dev;
}

G_GNUC_UNUSED static int64_t test_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        n *= shape[i];
    }
    return n;
}

/* Uniform values in [lo, hi) from a fixed seed. */
G_GNUC_UNUSED static void test_fill_uniform(float *v, int64_t n, guint32 seed, double lo, double hi)
{
    GRand *r = g_rand_new_with_seed(seed);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)g_rand_double_range(r, lo, hi);
    }
    g_rand_free(r);
}

G_GNUC_UNUSED static TdmTensor *test_tensor_from(TdmDevice *dev, int ndim, const int64_t *shape, const float *v)
{
    return test_tensor_with(dev, TDM_DTYPE_F32, ndim, shape, v);
}

G_GNUC_UNUSED static float *test_read(TdmTensor *t)
{
    GError *error = NULL;
    float *v = tdm_tensor_read_f32(t, &error);
    g_assert_no_error(error);
    g_assert_nonnull(v);
    return v;
}

G_GNUC_UNUSED static TdmModel *test_model(TdmModule *root, TdmDevice *dev, guint64 seed)
{
    GError *error = NULL;
    g_assert_nonnull(root);
    TdmModel *model = tdm_model_new(root, dev, seed, &error);
    g_assert_no_error(error);
    g_assert_nonnull(model);
    return model;
}

G_GNUC_UNUSED static TdmTensor *test_forward(TdmModel *model, TdmTensor *x)
{
    GError *error = NULL;
    TdmTensor *y = NULL;
    gboolean ok = tdm_model_forward(model, x, &y, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    g_assert_nonnull(y);
    return y;
}

#endif /* TDM_CORE_TEST_UTIL_H */

/* SPDX-License-Identifier: MIT */
/* tests/test-ops.c - the op front ends (tdm_op_*, include/tandem/ops.h).
 *
 * Bad arguments through each family of front ends (dense, convolution,
 * batch norm, elementwise, pooling, loss, dropout, vector ops, optimizer
 * updates, reorder) give an error of the right code whose message starts
 * with the op's name and names the shapes, before any backend sees them;
 * a tensor on another device is refused naming both devices. Then the
 * fused front ends are run on a backend that has the fused ops and on the
 * same backend with those slots emptied, which takes the unfused
 * sequences: ref must agree bit for bit (its fused ops are defined by its
 * unfused ones), cpu (when present) within rounding. Runs with two ref
 * devices (TDM_REF_DEVICES=2).
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include <tandem/tandem.h>

static TdmDevice *dev, *dev1; /* ref:0, ref:1 */
static GPtrArray *made;       /* tensors of the current test, freed at its end */
static GError *err;           /* every failing call below reports here */

static TdmTensor *keep(TdmTensor *t)
{
    g_ptr_array_add(made, t);
    return t;
}

/* A zero-filled tensor on d: ndim dims given as ints. */
static TdmTensor *mk(TdmDevice *d, TdmDType dtype, int ndim, ...)
{
    int64_t shape[TDM_MAX_DIMS];
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) {
        shape[i] = va_arg(ap, int);
    }
    va_end(ap);
    GError *e = NULL;
    TdmTensor *t = tdm_tensor_new(d, dtype, ndim, shape, &e);
    g_assert_no_error(e);
    return keep(t);
}

static TdmTensor *slot(TdmDevice *d)
{
    return keep(tdm_tensor_new_empty(d, TDM_DTYPE_F32));
}

/* The call failed with `code`, its message starts with "op: " and holds
 * every further string (NULL-terminated). */
static void expect_error(gboolean ok, TdmErrorCode code, const char *op, ...)
{
    g_assert_false(ok);
    g_assert_nonnull(err);
    if (err->domain != TDM_ERROR || err->code != (int)code) {
        g_error("expected code %d, got %d: %s", code, err->code, err->message);
    }
    g_autofree char *prefix = g_strconcat(op, ": ", NULL);
    if (!g_str_has_prefix(err->message, prefix)) {
        g_error("message '%s' does not start with '%s'", err->message, prefix);
    }
    va_list ap;
    va_start(ap, op);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *)) {
        if (strstr(err->message, s) == NULL) {
            g_error("message '%s' lacks '%s'", err->message, s);
        }
    }
    va_end(ap);
    g_test_message("%s", err->message);
    g_clear_error(&err);
}

static void test_setup(void)
{
    made = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_tensor_unref);
}

static void test_teardown(void)
{
    g_ptr_array_unref(made);
    g_assert_null(err);
}

/* ---- bad arguments, family by family ---- */

static void test_gemm_errors(void)
{
    test_setup();
    TdmTensor *a = mk(dev, TDM_DTYPE_F32, 2, 64, 784), *b = mk(dev, TDM_DTYPE_F32, 2, 512, 700);
    TdmTensor *c = slot(dev);
    expect_error(tdm_op_gemm(dev, NULL, FALSE, TRUE, 1.0f, a, b, 0.0f, c, NULL, &err),
                 TDM_ERROR_SHAPE, "gemm", "a [64, 784] and b [512, 700] (transposed)",
                 "inner dimensions differ", NULL);
    TdmTensor *ai = mk(dev, TDM_DTYPE_I32, 2, 2, 3), *b32 = mk(dev, TDM_DTYPE_F32, 2, 3, 2);
    expect_error(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, ai, b32, 0.0f, c, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "gemm", "a [2, 3] is i32, expected f32", NULL);
    TdmTensor *a23 = mk(dev, TDM_DTYPE_F32, 2, 2, 3), *b_other = mk(dev1, TDM_DTYPE_F32, 2, 3, 2);
    expect_error(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, a23, b_other, 0.0f, c, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "gemm", "b [3, 2] is on device ref:1", "runs on ref:0",
                 NULL);
    TdmTensor *c33 = mk(dev, TDM_DTYPE_F32, 2, 3, 3);
    expect_error(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, a23, b32, 1.0f, c33, NULL, &err),
                 TDM_ERROR_SHAPE, "gemm", "c [3, 3], expected [2, 2]", NULL);
    TdmTensor *bias3 = mk(dev, TDM_DTYPE_F32, 1, 3);
    expect_error(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, a23, b32, 0.0f, c, bias3, &err),
                 TDM_ERROR_SHAPE, "gemm", "bias [3], expected [2]", NULL);
    /* c is plain: not in a layout of the backend's. */
    TdmTensor *c22 = mk(dev, TDM_DTYPE_F32, 2, 2, 2);
    c22->layout = c22; /* any handle */
    expect_error(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, a23, b32, 1.0f, c22, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "gemm", "c [2, 2] is in a backend layout", NULL);
    c22->layout = NULL;
    /* beta != 0 reads c: an empty slot is not an input. */
    expect_error(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, a23, b32, 1.0f, c, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "gemm", "c [] has no storage", NULL);
    TdmTensor *dy1 = mk(dev, TDM_DTYPE_F32, 1, 4), *db = mk(dev, TDM_DTYPE_F32, 1, 4);
    expect_error(tdm_op_bias_grad(dev, NULL, dy1, db, &err), TDM_ERROR_SHAPE, "bias_grad",
                 "dy [4] needs at least 2 dims", NULL);
    TdmTensor *dy = mk(dev, TDM_DTYPE_F32, 2, 8, 4), *db3 = mk(dev, TDM_DTYPE_F32, 1, 3);
    expect_error(tdm_op_bias_grad(dev, NULL, dy, db3, &err), TDM_ERROR_SHAPE, "bias_grad",
                 "bias_grad [3], expected [4]", NULL);
    /* And the right arguments work. */
    g_assert_true(tdm_op_gemm(dev, NULL, FALSE, FALSE, 1.0f, a23, b32, 0.0f, c, NULL, &err));
    g_assert_cmpint(c->shape[0], ==, 2);
    test_teardown();
}

static void test_conv_errors(void)
{
    test_setup();
    TdmConv2dParams p = {1, 1, 1, 1, 1, 1, 1};
    TdmTensor *x = mk(dev, TDM_DTYPE_F32, 4, 1, 1, 3, 3),
              *w = mk(dev, TDM_DTYPE_F32, 4, 1, 3, 3, 3);
    TdmTensor *y = slot(dev);
    expect_error(tdm_op_conv2d_forward(dev, NULL, &p, x, w, NULL, y, &err), TDM_ERROR_SHAPE,
                 "conv2d_forward", "x [1, 1, 3, 3]", "w [1, 3, 3, 3]", "channels differ", NULL);
    TdmTensor *w1 = mk(dev, TDM_DTYPE_F32, 4, 2, 1, 3, 3);
    TdmConv2dParams bad = {0, 1, 1, 1, 1, 1, 1};
    expect_error(tdm_op_conv2d_relu_forward(dev, NULL, &bad, x, w1, NULL, y, &err),
                 TDM_ERROR_INVALID_ARG, "conv2d_relu_forward", "invalid parameters", NULL);
    TdmTensor *xu8 = mk(dev, TDM_DTYPE_U8, 4, 1, 1, 3, 3);
    expect_error(tdm_op_conv2d_relu_forward(dev, NULL, &p, xu8, w1, NULL, y, &err),
                 TDM_ERROR_INVALID_ARG, "conv2d_relu_forward", "x [1, 1, 3, 3] is u8", NULL);
    TdmTensor *w7 = mk(dev, TDM_DTYPE_F32, 4, 2, 1, 7, 7);
    expect_error(tdm_op_conv2d_forward(dev, NULL, &p, x, w7, NULL, y, &err), TDM_ERROR_SHAPE,
                 "conv2d_forward", "smaller than the kernel", "[2, 1, 7, 7]", NULL);
    TdmTensor *bias3 = mk(dev, TDM_DTYPE_F32, 1, 3);
    expect_error(tdm_op_conv2d_forward(dev, NULL, &p, x, w1, bias3, y, &err), TDM_ERROR_SHAPE,
                 "conv2d_forward", "bias [3], expected [2]", NULL);
    /* Backward data: dy must be the forward's output shape. */
    TdmTensor *dy_bad = mk(dev, TDM_DTYPE_F32, 4, 1, 2, 2, 2), *dx = slot(dev);
    expect_error(tdm_op_conv2d_backward_data(dev, NULL, &p, dy_bad, w1, x, dx, &err),
                 TDM_ERROR_SHAPE, "conv2d_backward_data", "dy [1, 2, 2, 2], expected [1, 2, 3, 3]",
                 NULL);
    /* x_like describes dx: f32 like the forward input it stands for. */
    expect_error(tdm_op_conv2d_backward_data(dev, NULL, &p, dy_bad, w1, xu8, dx, &err),
                 TDM_ERROR_INVALID_ARG, "conv2d_backward_data", "x_like [1, 1, 3, 3] is u8", NULL);
    TdmTensor *dy = mk(dev, TDM_DTYPE_F32, 4, 1, 2, 3, 3),
              *dw = mk(dev, TDM_DTYPE_F32, 4, 2, 1, 3, 3);
    TdmTensor *db_bad = mk(dev, TDM_DTYPE_F32, 1, 5);
    expect_error(tdm_op_conv2d_backward_filter(dev, NULL, &p, x, dy, dw, db_bad, &err),
                 TDM_ERROR_SHAPE, "conv2d_backward_filter", "db [5], expected [2]", NULL);
    TdmTensor *x_other = mk(dev1, TDM_DTYPE_F32, 4, 1, 1, 3, 3);
    expect_error(tdm_op_conv2d_backward_filter(dev, NULL, &p, x_other, dy, dw, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "conv2d_backward_filter", "on device ref:1", NULL);
    g_assert_true(tdm_op_conv2d_forward(dev, NULL, &p, x, w1, NULL, y, &err));
    test_teardown();
}

static void test_batchnorm_errors(void)
{
    test_setup();
    TdmTensor *x3 = mk(dev, TDM_DTYPE_F32, 3, 2, 2, 2), *y = slot(dev), *ws = slot(dev);
    expect_error(tdm_op_batchnorm_forward(dev, NULL, x3, NULL, NULL, NULL, NULL, 0.1f, 1e-5f, TRUE,
                                          NULL, NULL, y, &err),
                 TDM_ERROR_SHAPE, "batchnorm_forward", "x [2, 2, 2] must be [N, C]", NULL);
    TdmTensor *x = mk(dev, TDM_DTYPE_F32, 4, 2, 2, 3, 3), *g3 = mk(dev, TDM_DTYPE_F32, 1, 3);
    expect_error(tdm_op_batchnorm_relu_forward(dev, NULL, x, g3, NULL, NULL, NULL, 0.1f, 1e-5f,
                                               TRUE, NULL, NULL, ws, y, &err),
                 TDM_ERROR_SHAPE, "batchnorm_relu_forward", "gamma [3], expected [2]", NULL);
    TdmTensor *x1 = mk(dev, TDM_DTYPE_F32, 2, 1, 2);
    expect_error(tdm_op_batchnorm_forward(dev, NULL, x1, NULL, NULL, NULL, NULL, 0.1f, 1e-5f, TRUE,
                                          NULL, NULL, y, &err),
                 TDM_ERROR_SHAPE, "batchnorm_forward", "more than one value per channel", "[1, 2]",
                 NULL);
    expect_error(tdm_op_batchnorm_forward(dev, NULL, x, NULL, NULL, NULL, NULL, 0.1f, 1e-5f, FALSE,
                                          NULL, NULL, y, &err),
                 TDM_ERROR_INVALID_ARG, "batchnorm_forward", "eval mode needs running_mean", NULL);
    expect_error(tdm_op_batchnorm_relu_forward(dev, NULL, x, NULL, NULL, NULL, NULL, 0.1f, 1e-5f,
                                               TRUE, NULL, NULL, NULL, y, &err),
                 TDM_ERROR_INVALID_ARG, "batchnorm_relu_forward", "workspace is NULL", NULL);
    TdmTensor *dy = mk(dev, TDM_DTYPE_F32, 4, 2, 2, 3, 4), *sm = mk(dev, TDM_DTYPE_F32, 1, 2);
    TdmTensor *sv = mk(dev, TDM_DTYPE_F32, 1, 2), *dx = slot(dev);
    expect_error(
        tdm_op_batchnorm_backward(dev, NULL, x, dy, NULL, sm, sv, 1e-5f, dx, NULL, NULL, &err),
        TDM_ERROR_SHAPE, "batchnorm_backward", "x [2, 2, 3, 3] and dy [2, 2, 3, 4]", NULL);
    TdmTensor *dy_ok = mk(dev, TDM_DTYPE_F32, 4, 2, 2, 3, 3);
    expect_error(
        tdm_op_batchnorm_backward(dev, NULL, x, dy_ok, NULL, NULL, sv, 1e-5f, dx, NULL, NULL, &err),
        TDM_ERROR_INVALID_ARG, "batchnorm_backward", "save_mean is NULL", NULL);
    expect_error(tdm_op_batchnorm_relu_backward(dev, NULL, x, dy, ws, dy_ok, NULL, sm, sv, 1e-5f,
                                                dx, NULL, NULL, &err),
                 TDM_ERROR_SHAPE, "batchnorm_relu_backward", "y [2, 2, 3, 4] and dy [2, 2, 3, 3]",
                 NULL);
    /* Per-channel vectors are plain and contiguous: not every other float. */
    TdmTensor *base = mk(dev, TDM_DTYPE_F32, 1, 4);
    int64_t two = 2;
    TdmTensor *strided = keep(tdm_tensor_new_view(base, 0, TDM_DTYPE_F32, 1, &two, &err));
    g_assert_no_error(err);
    strided->stride[0] = 2;
    expect_error(tdm_op_batchnorm_backward(dev, NULL, x, dy_ok, NULL, sm, sv, 1e-5f, dx, strided,
                                           NULL, &err),
                 TDM_ERROR_INVALID_ARG, "batchnorm_backward",
                 "dgamma [2] is not plain and contiguous", NULL);
    /* in place needs dy in x's layout: a strided view is not */
    TdmTensor *wide = mk(dev, TDM_DTYPE_F32, 4, 2, 2, 3, 6);
    int64_t xs[4] = {2, 2, 3, 3};
    TdmTensor *dy_strided = keep(tdm_tensor_new_view(wide, 0, TDM_DTYPE_F32, 4, xs, &err));
    g_assert_no_error(err);
    dy_strided->stride[2] = 6;
    dy_strided->stride[1] = 18;
    dy_strided->stride[0] = 36;
    expect_error(tdm_op_batchnorm_backward(dev, NULL, x, dy_strided, NULL, sm, sv, 1e-5f,
                                           dy_strided, NULL, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "batchnorm_backward", "dx is dy [2, 2, 3, 3] (in place)",
                 "not x's", NULL);
    TdmTensor *dgamma_other = mk(dev1, TDM_DTYPE_F32, 1, 2);
    expect_error(tdm_op_batchnorm_backward(dev, NULL, x, dy_ok, NULL, sm, sv, 1e-5f, dx,
                                           dgamma_other, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "batchnorm_backward", "dgamma [2] is on device ref:1",
                 NULL);
    test_teardown();
}

static void test_elementwise_errors(void)
{
    test_setup();
    TdmTensor *a = mk(dev, TDM_DTYPE_F32, 1, 4), *c = mk(dev, TDM_DTYPE_F32, 2, 2, 2);
    TdmTensor *y = slot(dev);
    expect_error(tdm_op_add(dev, NULL, a, c, y, &err), TDM_ERROR_SHAPE, "add",
                 "a [4] and b [2, 2] differ in shape", NULL);
    /* relu_backward in place needs dy in y's layout: a strided view is not */
    TdmTensor *wide = mk(dev, TDM_DTYPE_F32, 2, 2, 8), *y4 = mk(dev, TDM_DTYPE_F32, 2, 2, 4);
    int64_t two_by_four[2] = {2, 4};
    TdmTensor *dy_strided = keep(tdm_tensor_new_view(wide, 0, TDM_DTYPE_F32, 2, two_by_four, &err));
    g_assert_no_error(err);
    dy_strided->stride[0] = 8;
    dy_strided->stride[1] = 2;
    expect_error(tdm_op_relu_backward(dev, NULL, y4, dy_strided, dy_strided, &err),
                 TDM_ERROR_INVALID_ARG, "relu_backward", "dx is dy [2, 4] (in place)", "not y's",
                 NULL);
    TdmTensor *b_other = mk(dev1, TDM_DTYPE_F32, 1, 4);
    expect_error(tdm_op_add_relu(dev, NULL, a, b_other, y, &err), TDM_ERROR_INVALID_ARG, "add_relu",
                 "b [4] is on device ref:1 but the op runs on ref:0", NULL);
    TdmTensor *y_other = slot(dev1);
    expect_error(tdm_op_relu_forward(dev, NULL, a, y_other, &err), TDM_ERROR_INVALID_ARG,
                 "relu_forward", "y [] is on device ref:1", NULL);
    /* An empty output slot used as an input. */
    TdmTensor *empty = slot(dev);
    empty->ndim = 1;
    empty->shape[0] = 4;
    expect_error(tdm_op_relu_forward(dev, NULL, empty, y, &err), TDM_ERROR_INVALID_ARG,
                 "relu_forward", "x [4] has no storage", NULL);
    expect_error(tdm_op_relu_backward(dev, NULL, a, c, y, &err), TDM_ERROR_SHAPE, "relu_backward",
                 "y [4] and dy [2, 2] differ in shape", NULL);
    test_teardown();
}

static void test_pool_errors(void)
{
    test_setup();
    TdmPool2dParams wide = {2, 2, 2, 2, 2, 2, TRUE};
    TdmTensor *x = mk(dev, TDM_DTYPE_F32, 4, 1, 1, 4, 4), *y = slot(dev), *ws = slot(dev);
    expect_error(tdm_op_maxpool2d_forward(dev, NULL, &wide, x, y, ws, &err), TDM_ERROR_INVALID_ARG,
                 "maxpool2d_forward", "at most half the kernel", NULL);
    TdmPool2dParams p = {2, 2, 2, 2, 0, 0, TRUE};
    TdmTensor *x3 = mk(dev, TDM_DTYPE_F32, 3, 1, 4, 4);
    expect_error(tdm_op_avgpool2d_forward(dev, NULL, &p, x3, y, &err), TDM_ERROR_SHAPE,
                 "avgpool2d_forward", "x [1, 4, 4] must be [N, C, H, W]", NULL);
    TdmTensor *dy = mk(dev, TDM_DTYPE_F32, 4, 1, 1, 3, 3), *dx = slot(dev);
    expect_error(tdm_op_avgpool2d_backward(dev, NULL, &p, dy, x, dx, &err), TDM_ERROR_SHAPE,
                 "avgpool2d_backward", "dy [1, 1, 3, 3], expected [1, 1, 2, 2]", NULL);
    g_assert_true(tdm_op_maxpool2d_forward(dev, NULL, &p, x, y, ws, &err));
    expect_error(tdm_op_maxpool2d_backward(dev, NULL, &p, dy, ws, x, dx, &err), TDM_ERROR_SHAPE,
                 "maxpool2d_backward", "dy [1, 1, 3, 3], expected [1, 1, 2, 2]", NULL);
    TdmTensor *xi32 = mk(dev, TDM_DTYPE_I32, 4, 1, 1, 4, 4);
    expect_error(tdm_op_maxpool2d_backward(dev, NULL, &p, dy, ws, xi32, dx, &err),
                 TDM_ERROR_INVALID_ARG, "maxpool2d_backward", "x_like [1, 1, 4, 4] is i32", NULL);
    TdmTensor *x2 = mk(dev, TDM_DTYPE_F32, 2, 2, 3);
    expect_error(tdm_op_global_avgpool_forward(dev, NULL, x2, y, &err), TDM_ERROR_SHAPE,
                 "global_avgpool_forward", "x [2, 3] must be [N, C, H, W]", NULL);
    TdmTensor *gdy = mk(dev, TDM_DTYPE_F32, 2, 1, 2);
    expect_error(tdm_op_global_avgpool_backward(dev, NULL, gdy, x, dx, &err), TDM_ERROR_SHAPE,
                 "global_avgpool_backward", "dy [1, 2], expected [1, 1]", NULL);
    expect_error(tdm_op_global_avgpool_backward(dev, NULL, gdy, xi32, dx, &err),
                 TDM_ERROR_INVALID_ARG, "global_avgpool_backward", "x_like [1, 1, 4, 4] is i32",
                 NULL);
    test_teardown();
}

static void test_loss_and_dropout_errors(void)
{
    test_setup();
    TdmTensor *logits = mk(dev, TDM_DTYPE_F32, 2, 3, 4), *l2 = mk(dev, TDM_DTYPE_I64, 1, 2);
    float loss;
    expect_error(tdm_op_softmax_xent(dev, NULL, logits, l2, 0.0f, &loss, NULL, NULL, &err),
                 TDM_ERROR_SHAPE, "softmax_xent", "labels [2] do not match logits [3, 4]", NULL);
    TdmTensor *lf = mk(dev, TDM_DTYPE_F32, 1, 3);
    expect_error(tdm_op_softmax_xent(dev, NULL, logits, lf, 0.0f, &loss, NULL, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "softmax_xent", "labels [3] are f32, expected i32 or i64",
                 NULL);
    TdmTensor *l3 = mk(dev, TDM_DTYPE_I32, 1, 3);
    expect_error(tdm_op_softmax_xent(dev, NULL, logits, l3, 1.5f, &loss, NULL, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "softmax_xent", "label smoothing 1.5", NULL);
    TdmTensor *l3_other = mk(dev1, TDM_DTYPE_I32, 1, 3);
    expect_error(tdm_op_softmax_xent(dev, NULL, logits, l3_other, 0.0f, &loss, NULL, NULL, &err),
                 TDM_ERROR_INVALID_ARG, "softmax_xent", "labels [3] is on device ref:1", NULL);
    TdmTensor *stats3 = mk(dev, TDM_DTYPE_F32, 1, 3), *l3ok = mk(dev, TDM_DTYPE_I32, 1, 3);
    expect_error(tdm_op_softmax_xent_stats(dev, NULL, logits, l3ok, 0.0f, NULL, stats3, &err),
                 TDM_ERROR_SHAPE, "softmax_xent_stats", "stats [3], expected [2]", NULL);
    expect_error(tdm_op_softmax_xent_stats(dev, NULL, logits, l2, 0.0f, NULL, stats3, &err),
                 TDM_ERROR_SHAPE, "softmax_xent_stats", "labels [2] do not match logits [3, 4]",
                 NULL);
    /* tdm_loss_cross_entropy is this front end. */
    expect_error(tdm_loss_cross_entropy(dev, NULL, logits, l2, 0.0f, &loss, NULL, NULL, &err),
                 TDM_ERROR_SHAPE, "softmax_xent", "[2]", "[3, 4]", NULL);
    TdmTensor *x = mk(dev, TDM_DTYPE_F32, 1, 4), *mask = slot(dev), *y = slot(dev);
    expect_error(tdm_op_dropout_forward(dev, NULL, 1.5f, 7, x, mask, y, &err),
                 TDM_ERROR_INVALID_ARG, "dropout_forward", "p = 1.5 is outside [0, 1]", NULL);
    TdmTensor *fmask = mk(dev, TDM_DTYPE_F32, 1, 4);
    expect_error(tdm_op_dropout_backward(dev, NULL, 0.5f, fmask, x, y, &err), TDM_ERROR_INVALID_ARG,
                 "dropout_backward", "mask [4] is f32, expected u8", NULL);
    test_teardown();
}

static void test_vector_errors(void)
{
    test_setup();
    TdmTensor *i4 = mk(dev, TDM_DTYPE_I32, 1, 4), *f4 = mk(dev, TDM_DTYPE_F32, 1, 4);
    TdmTensor *f5 = mk(dev, TDM_DTYPE_F32, 1, 5);
    expect_error(tdm_op_fill(dev, i4, 0.0f, &err), TDM_ERROR_INVALID_ARG, "fill",
                 "x [4] is i32, expected f32", NULL);
    expect_error(tdm_op_copy(dev, f4, f5, &err), TDM_ERROR_SHAPE, "copy",
                 "src [4] and dst [5] differ in number of elements", NULL);
    expect_error(tdm_op_copy(dev, f4, i4, &err), TDM_ERROR_INVALID_ARG, "copy",
                 "dst [4] is i32, expected f32", NULL);
    expect_error(tdm_op_axpy(dev, 1.0f, f4, f5, &err), TDM_ERROR_SHAPE, "axpy",
                 "x [4] and y [5] differ in number of elements", NULL);
    TdmTensor *f22 = mk(dev, TDM_DTYPE_F32, 2, 2, 2), *u5 = mk(dev, TDM_DTYPE_U8, 1, 5);
    expect_error(tdm_op_cast(dev, u5, f22, TRUE, &err), TDM_ERROR_SHAPE, "cast",
                 "src [5] and dst [2, 2] differ in shape", NULL);
    /* Columns 0 and 2 of a [2, 4] tensor: a strided view. */
    TdmTensor *base = mk(dev, TDM_DTYPE_F32, 2, 2, 4);
    int64_t s22[2] = {2, 2};
    TdmTensor *view = keep(tdm_tensor_new_view(base, 0, TDM_DTYPE_F32, 2, s22, &err));
    g_assert_no_error(err);
    view->stride[1] = 2;
    view->stride[0] = 4;
    expect_error(tdm_op_scale(dev, view, 2.0f, &err), TDM_ERROR_INVALID_ARG, "scale",
                 "x [2, 2] is not plain and contiguous (a strided view)", NULL);
    double ss;
    TdmTensor *other = mk(dev1, TDM_DTYPE_F32, 1, 4);
    expect_error(tdm_op_sum_squares(dev, other, &ss, &err), TDM_ERROR_INVALID_ARG, "sum_squares",
                 "x [4] is on device ref:1", NULL);
    /* reorder: `like` must have src's shape. */
    TdmTensor *dst = slot(dev);
    expect_error(tdm_tensor_reorder(f4, f5, dst, NULL, &err), TDM_ERROR_SHAPE, "reorder",
                 "src [4] and like [5] differ in shape", NULL);
    test_teardown();
}

static void test_optimizer_errors(void)
{
    test_setup();
    TdmTensor *p = mk(dev, TDM_DTYPE_F32, 1, 8), *g = mk(dev, TDM_DTYPE_F32, 1, 8);
    TdmTensor *g7 = mk(dev, TDM_DTYPE_F32, 1, 7);
    TdmSgdParams sgd = {.lr = 0.1f, .momentum = 0.9f};
    expect_error(tdm_op_sgd_update(dev, &sgd, p, g, NULL, &err), TDM_ERROR_INVALID_ARG,
                 "sgd_update", "momentum 0.9 needs a momentum buffer", NULL);
    sgd.momentum = 0.0f;
    expect_error(tdm_op_sgd_update_zero_grad(dev, &sgd, p, g7, NULL, &err), TDM_ERROR_SHAPE,
                 "sgd_update_zero_grad", "param [8] and grad [7] differ in number of elements",
                 NULL);
    TdmTensor *m = mk(dev, TDM_DTYPE_F32, 1, 8), *v_other = mk(dev1, TDM_DTYPE_F32, 1, 8);
    TdmAdamWParams adam = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 0};
    expect_error(tdm_op_adamw_update(dev, &adam, p, g, m, m, &err), TDM_ERROR_INVALID_ARG,
                 "adamw_update", "step must be >= 1 (got 0)", NULL);
    adam.step = 1;
    expect_error(tdm_op_adamw_update_zero_grad(dev, &adam, p, g, m, v_other, &err),
                 TDM_ERROR_INVALID_ARG, "adamw_update_zero_grad",
                 "exp_avg_sq [8] is on device ref:1", NULL);
    test_teardown();
}

/* ---- fused and unfused: the same numbers ---- */

/* A copy of a device whose backend has no fused ops: the front ends then
 * run the unfused sequences on the same backend. */
typedef struct {
    TdmBackendClass klass;
    TdmDevice dev;
} Unfused;

static Unfused *unfused_new(TdmDevice *orig)
{
    Unfused *u = g_new0(Unfused, 1);
    u->klass = *orig->backend;
    u->klass.batchnorm_relu_forward = NULL;
    u->klass.batchnorm_relu_backward = NULL;
    u->klass.batchnorm_relu_backward_ws = NULL;
    u->klass.add_relu = NULL;
    u->klass.conv2d_relu_forward = NULL;
    u->klass.sgd_update_zero_grad = NULL;
    u->klass.adamw_update_zero_grad = NULL;
    u->klass.softmax_xent_stats = NULL;
    u->dev = *orig;
    u->dev.backend = &u->klass;
    return u;
}

/* t filled with uniform values in [lo, hi) from `seed` (transfer none). */
static TdmTensor *rnd(TdmTensor *t, guint32 seed, double lo, double hi)
{
    int64_t n = tdm_tensor_numel(t);
    float *v = g_new(float, n);
    GRand *r = g_rand_new_with_seed(seed);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)g_rand_double_range(r, lo, hi);
    }
    g_rand_free(r);
    g_assert_true(tdm_tensor_write(t, v, &err));
    g_free(v);
    return t;
}

/* Appends t's values (plain order) to out. */
static void collect(GArray *out, TdmTensor *t)
{
    float *v = tdm_tensor_read_f32(t, &err);
    g_assert_no_error(err);
    g_array_append_vals(out, v, (guint)tdm_tensor_numel(t));
    g_free(v);
}

#define OKOP(call)                                                                                 \
    do {                                                                                           \
        gboolean ok_ = (call);                                                                     \
        g_assert_no_error(err);                                                                    \
        g_assert_true(ok_);                                                                        \
    } while (0)

/* Every fused front end once, on device d; the results in one array. */
static GArray *run_fused_ops(TdmDevice *d)
{
    GArray *out = g_array_new(FALSE, FALSE, sizeof(float));
    TdmOpCache *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL;
    /* conv + ReLU */
    TdmConv2dParams p = {1, 1, 1, 1, 1, 1, 1};
    TdmTensor *x = rnd(mk(d, TDM_DTYPE_F32, 4, 2, 3, 6, 6), 1, -1, 1),
              *w = rnd(mk(d, TDM_DTYPE_F32, 4, 4, 3, 3, 3), 2, -0.5, 0.5);
    TdmTensor *b = rnd(mk(d, TDM_DTYPE_F32, 1, 4), 3, -0.2, 0.2), *y = slot(d);
    OKOP(tdm_op_conv2d_relu_forward(d, &c1, &p, x, w, b, y, &err));
    collect(out, y);
    /* batch norm + ReLU, training forward and backward, then eval */
    TdmTensor *gamma = rnd(mk(d, TDM_DTYPE_F32, 1, 4), 4, 0.5, 1.5),
              *beta = rnd(mk(d, TDM_DTYPE_F32, 1, 4), 5, -0.5, 0.5);
    TdmTensor *rm = rnd(mk(d, TDM_DTYPE_F32, 1, 4), 6, -0.1, 0.1),
              *rv = rnd(mk(d, TDM_DTYPE_F32, 1, 4), 7, 0.9, 1.1);
    TdmTensor *sm = slot(d), *sv = slot(d), *ws = keep(tdm_tensor_new_empty(d, TDM_DTYPE_U8));
    TdmTensor *ybn = slot(d), *dx = slot(d);
    OKOP(tdm_op_batchnorm_relu_forward(d, &c2, y, gamma, beta, rm, rv, 0.1f, 1e-5f, TRUE, sm, sv,
                                       ws, ybn, &err));
    TdmTensor *dy = rnd(mk(d, TDM_DTYPE_F32, 4, 2, 4, 6, 6), 8, -1, 1);
    TdmTensor *dgamma = mk(d, TDM_DTYPE_F32, 1, 4), *dbeta = mk(d, TDM_DTYPE_F32, 1, 4);
    OKOP(tdm_op_batchnorm_relu_backward(d, &c3, y, ybn, ws, dy, gamma, sm, sv, 1e-5f, dx, dgamma,
                                        dbeta, &err));
    collect(out, ybn);
    collect(out, rm);
    collect(out, rv);
    collect(out, dx);
    collect(out, dgamma);
    collect(out, dbeta);
    OKOP(tdm_op_batchnorm_relu_forward(d, &c2, y, gamma, beta, rm, rv, 0.1f, 1e-5f, FALSE, NULL,
                                       NULL, ws, ybn, &err));
    collect(out, ybn);
    /* add + ReLU, into a slot and in place */
    TdmTensor *a = rnd(mk(d, TDM_DTYPE_F32, 4, 2, 3, 4, 4), 9, -1, 1),
              *a2 = rnd(mk(d, TDM_DTYPE_F32, 4, 2, 3, 4, 4), 10, -1, 1);
    TdmTensor *ya = slot(d);
    OKOP(tdm_op_add_relu(d, &c4, a, a2, ya, &err));
    OKOP(tdm_op_add_relu(d, &c4, a, a2, a, &err));
    collect(out, ya);
    collect(out, a);
    /* update + zero_grad: SGD with momentum, then AdamW, two steps each */
    TdmTensor *param = rnd(mk(d, TDM_DTYPE_F32, 1, 1000), 11, -1, 1),
              *buf = mk(d, TDM_DTYPE_F32, 1, 1000);
    TdmTensor *m = mk(d, TDM_DTYPE_F32, 1, 1000), *v = mk(d, TDM_DTYPE_F32, 1, 1000);
    for (int step = 1; step <= 2; step++) {
        TdmTensor *grad = rnd(mk(d, TDM_DTYPE_F32, 1, 1000), 11 + step, -1, 1);
        TdmSgdParams sgd = {
            .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-3f, .first_step = step == 1};
        OKOP(tdm_op_sgd_update_zero_grad(d, &sgd, param, grad, buf, &err));
        collect(out, grad); /* zero */
        TdmTensor *grad2 = rnd(mk(d, TDM_DTYPE_F32, 1, 1000), 21 + step, -1, 1);
        TdmAdamWParams adam = {.lr = 0.01f,
                               .beta1 = 0.9f,
                               .beta2 = 0.999f,
                               .eps = 1e-8f,
                               .weight_decay = 0.01f,
                               .step = step};
        OKOP(tdm_op_adamw_update_zero_grad(d, &adam, param, grad2, m, v, &err));
        collect(out, grad2);
    }
    /* loss statistics kept on the device, over two batches */
    TdmTensor *logits = rnd(mk(d, TDM_DTYPE_F32, 2, 5, 7), 31, -2, 2), *dl = slot(d);
    TdmTensor *labels = mk(d, TDM_DTYPE_I32, 1, 5), *stats = mk(d, TDM_DTYPE_F32, 1, 2);
    const gint32 lv[5] = {0, 6, 3, 3, 1};
    g_assert_true(tdm_tensor_write(labels, lv, &err));
    for (int batch = 0; batch < 2; batch++) {
        OKOP(tdm_op_softmax_xent_stats(d, NULL, logits, labels, 0.1f, dl, stats, &err));
    }
    collect(out, dl);
    collect(out, stats);
    collect(out, param);
    collect(out, buf);
    collect(out, m);
    collect(out, v);
    tdm_op_cache_clear(d, &c1);
    tdm_op_cache_clear(d, &c2);
    tdm_op_cache_clear(d, &c3);
    tdm_op_cache_clear(d, &c4);
    return out;
}

static void compare_fused_unfused(TdmDevice *d, double tol)
{
    test_setup();
    Unfused *u = unfused_new(d);
    GArray *fused = run_fused_ops(d);
    GArray *plain = run_fused_ops(&u->dev);
    g_assert_cmpuint(fused->len, ==, plain->len);
    const float *f = (const float *)(void *)fused->data, *p = (const float *)(void *)plain->data;
    int zeros = 0;
    for (guint i = 0; i < fused->len; i++) {
        if (fabs((double)f[i] - p[i]) > tol * MAX(1.0, fabs(f[i]))) {
            g_error("%s element %u: fused %.9g, unfused %.9g", d->name, i, f[i], p[i]);
        }
        zeros += f[i] == 0.0f;
    }
    /* The ReLUs and the zeroed gradients did their part. */
    g_assert_cmpint(zeros, >, 4000);
    g_assert_cmpint(zeros, <, (int)fused->len);
    g_array_unref(fused);
    g_array_unref(plain);
    test_teardown();
    g_free(u);
}

/* ---- batch-norm and ReLU backwards in place (dx == dy) ---- */

/* The two batch-norm backwards and the ReLU's on d, into a new dx and in
 * place over a copy of dy; the six results appended to out. */
static void run_backwards(TdmDevice *d, GArray *out)
{
    TdmOpCache *c = NULL;
    TdmTensor *x = rnd(mk(d, TDM_DTYPE_F32, 4, 3, 5, 6, 7), 41, -1.5, 2.5);
    TdmTensor *gamma = rnd(mk(d, TDM_DTYPE_F32, 1, 5), 42, 0.5, 1.5),
              *beta = rnd(mk(d, TDM_DTYPE_F32, 1, 5), 43, -0.5, 0.5);
    TdmTensor *sm = slot(d), *sv = slot(d), *ws = keep(tdm_tensor_new_empty(d, TDM_DTYPE_U8));
    TdmTensor *y = slot(d), *dx = slot(d), *dxr = slot(d);
    OKOP(tdm_op_batchnorm_relu_forward(d, &c, x, gamma, beta, NULL, NULL, 0.1f, 1e-5f, TRUE, sm, sv,
                                       ws, y, &err));
    for (int op = 0; op < 3; op++) {
        /* dy in x's layout, twice: one is overwritten */
        TdmTensor *dy = slot(d), *dyi = slot(d);
        TdmTensor *src = rnd(mk(d, TDM_DTYPE_F32, 4, 3, 5, 6, 7), 44 + op, -1, 1);
        OKOP(tdm_tensor_reorder(src, x, dy, NULL, &err));
        OKOP(tdm_tensor_reorder(src, x, dyi, NULL, &err));
        TdmTensor *into = op == 0 ? dx : op == 1 ? dxr : slot(d);
        if (op == 2) {
            OKOP(tdm_op_relu_backward(d, NULL, y, dy, into, &err));
            OKOP(tdm_op_relu_backward(d, NULL, y, dyi, dyi, &err));
        } else if (op == 1) {
            OKOP(tdm_op_batchnorm_relu_backward(d, NULL, x, y, ws, dy, gamma, sm, sv, 1e-5f, into,
                                                NULL, NULL, &err));
            OKOP(tdm_op_batchnorm_relu_backward(d, NULL, x, y, ws, dyi, gamma, sm, sv, 1e-5f, dyi,
                                                NULL, NULL, &err));
        } else {
            OKOP(tdm_op_batchnorm_backward(d, NULL, x, dy, gamma, sm, sv, 1e-5f, into, NULL, NULL,
                                           &err));
            OKOP(tdm_op_batchnorm_backward(d, NULL, x, dyi, gamma, sm, sv, 1e-5f, dyi, NULL, NULL,
                                           &err));
        }
        collect(out, into);
        collect(out, dyi);
    }
    tdm_op_cache_clear(d, &c);
}

/* In place gives what a new tensor gets, bit for bit (batch norm, batch
 * norm + ReLU, ReLU): on the backend itself (interface 1.3), on a copy of
 * it that claims 1.2 (the core goes through a temporary) and without the
 * fused ops (the mask made first). */
static void compare_backward_in_place(TdmDevice *d)
{
    test_setup();
    g_assert_cmpuint(TDM_IFACE_VERSION_MINOR(d->backend->iface_version), >=, 3);
    Unfused *old = unfused_new(d), *unfused = unfused_new(d);
    old->klass = *d->backend; /* the fused ops kept */
    old->klass.iface_version = TDM_IFACE_VERSION(1, 2);
    TdmDevice *devs[] = {d, &old->dev, &unfused->dev};
    for (size_t k = 0; k < G_N_ELEMENTS(devs); k++) {
        GArray *out = g_array_new(FALSE, FALSE, sizeof(float));
        run_backwards(devs[k], out);
        const float *v = (const float *)(void *)out->data;
        guint half = out->len / 6; /* new, in place; for each of 3 ops */
        g_assert_cmpuint(out->len, ==, 6 * half);
        static const char *const ops[] = {"batchnorm_backward", "batchnorm_relu_backward",
                                          "relu_backward"};
        for (guint i = 0; i < half; i++) {
            for (int r = 0; r < 3; r++) {
                float a = v[(2 * r) * half + i], b = v[(2 * r + 1) * half + i];
                if (memcmp(&a, &b, sizeof a) != 0) {
                    g_error("%s (%s) %s element %u: in place %.9g, new tensor %.9g", d->name,
                            k == 0   ? "1.3"
                            : k == 1 ? "as 1.2"
                                     : "unfused",
                            ops[r], i, b, a);
                }
            }
        }
        g_array_unref(out);
    }
    test_teardown();
    g_free(old);
    g_free(unfused);
}

/* Without y, the mask comes from the workspace: the same numbers; a
 * backend without batchnorm_relu_backward_ws refuses, naming it. */
static void test_bn_relu_without_y(void)
{
    test_setup();
    TdmTensor *x = rnd(mk(dev, TDM_DTYPE_F32, 4, 2, 3, 4, 5), 51, -1, 1);
    TdmTensor *sm = slot(dev), *sv = slot(dev), *y = slot(dev), *dx = slot(dev), *dx2 = slot(dev);
    TdmTensor *ws = keep(tdm_tensor_new_empty(dev, TDM_DTYPE_U8));
    TdmTensor *dy = rnd(mk(dev, TDM_DTYPE_F32, 4, 2, 3, 4, 5), 52, -1, 1);
    OKOP(tdm_op_batchnorm_relu_forward(dev, NULL, x, NULL, NULL, NULL, NULL, 0.1f, 1e-5f, TRUE, sm,
                                       sv, ws, y, &err));
    OKOP(tdm_op_batchnorm_relu_backward(dev, NULL, x, y, ws, dy, NULL, sm, sv, 1e-5f, dx, NULL,
                                        NULL, &err));
    OKOP(tdm_op_batchnorm_relu_backward(dev, NULL, x, NULL, ws, dy, NULL, sm, sv, 1e-5f, dx2, NULL,
                                        NULL, &err));
    GArray *a = g_array_new(FALSE, FALSE, sizeof(float)),
           *b = g_array_new(FALSE, FALSE, sizeof(float));
    collect(a, dx);
    collect(b, dx2);
    g_assert_cmpuint(a->len, ==, 120);
    g_assert_cmpmem(a->data, a->len * sizeof(float), b->data, b->len * sizeof(float));
    g_array_unref(a);
    g_array_unref(b);
    /* a backend without the slot: tensors on its device */
    Unfused *u = unfused_new(dev);
    TdmDevice *ud = &u->dev;
    TdmTensor *ux = mk(ud, TDM_DTYPE_F32, 4, 2, 3, 4, 5),
              *udy = mk(ud, TDM_DTYPE_F32, 4, 2, 3, 4, 5);
    TdmTensor *usm = mk(ud, TDM_DTYPE_F32, 1, 3), *usv = mk(ud, TDM_DTYPE_F32, 1, 3);
    TdmTensor *uws = keep(tdm_tensor_new_empty(ud, TDM_DTYPE_U8)), *udx = slot(ud);
    expect_error(tdm_op_batchnorm_relu_backward(ud, NULL, ux, NULL, uws, udy, NULL, usm, usv, 1e-5f,
                                                udx, NULL, NULL, &err),
                 TDM_ERROR_UNSUPPORTED, "batchnorm_relu_backward", "y is NULL",
                 "no batchnorm_relu_backward_ws", NULL);
    test_teardown();
    g_free(u);
}

static void test_backward_in_place_ref(void)
{
    compare_backward_in_place(dev);
}

/* The cpu device, or NULL after skipping the test when it is not built. */
static TdmDevice *cpu_or_skip(void)
{
    GError *e = NULL;
    TdmDevice *cpu = tdm_device_get("cpu", &e);
    if (cpu == NULL) {
        g_test_skip(e->message);
        g_error_free(e);
    }
    return cpu;
}

static void test_backward_in_place_cpu(void)
{
    TdmDevice *cpu = cpu_or_skip();
    if (cpu != NULL) {
        compare_backward_in_place(cpu);
    }
}

static void test_fused_unfused_ref(void)
{
    compare_fused_unfused(dev, 0.0);
}

static void test_fused_unfused_cpu(void)
{
    TdmDevice *cpu = cpu_or_skip();
    if (cpu != NULL) {
        compare_fused_unfused(cpu, 1e-5);
    }
}

int main(int argc, char **argv)
{
    g_setenv("TDM_REF_DEVICES", "2", TRUE);
    g_test_init(&argc, &argv, NULL);
    GError *e = NULL;
    dev = tdm_device_get("ref:0", &e);
    g_assert_no_error(e);
    dev1 = tdm_device_get("ref:1", &e);
    g_assert_no_error(e);
    g_test_add_func("/ops/errors/gemm", test_gemm_errors);
    g_test_add_func("/ops/errors/conv2d", test_conv_errors);
    g_test_add_func("/ops/errors/batchnorm", test_batchnorm_errors);
    g_test_add_func("/ops/errors/elementwise", test_elementwise_errors);
    g_test_add_func("/ops/errors/pool", test_pool_errors);
    g_test_add_func("/ops/errors/loss-dropout", test_loss_and_dropout_errors);
    g_test_add_func("/ops/errors/vector", test_vector_errors);
    g_test_add_func("/ops/errors/optimizer", test_optimizer_errors);
    g_test_add_func("/ops/fused-unfused/ref", test_fused_unfused_ref);
    g_test_add_func("/ops/fused-unfused/cpu", test_fused_unfused_cpu);
    g_test_add_func("/ops/backward-in-place/ref", test_backward_in_place_ref);
    g_test_add_func("/ops/backward-in-place/cpu", test_backward_in_place_cpu);
    g_test_add_func("/ops/bn-relu-without-y", test_bn_relu_without_y);
    return g_test_run();
}

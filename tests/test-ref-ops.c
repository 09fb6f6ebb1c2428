/* SPDX-License-Identifier: MIT */
/* tests/test-ref-ops.c - the ref backend checked on small hand-computed cases.
 *
 * The ref backend is the oracle of the conformance suite, so it is checked
 * here against numbers worked out by hand or taken from PyTorch 1.13 (each
 * noted where it is used): a 3x3 convolution, gemm with transposes, bias and
 * beta, softmax cross-entropy with and without label smoothing, batch norm
 * statistics and running stats, pooling windows, dropout masks, casts with
 * IEEE rounding, one SGD and AdamW step; backward ops are also checked
 * against finite differences of their forward op. It runs with three virtual
 * devices (TDM_REF_DEVICES=3) to check that they are really separate.
 */
#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "test-util.h"

static TdmDevice *dev;
static const TdmBackendClass *B;

static TdmTensor *mk(int ndim, const int64_t *shape, const float *vals)
{
    return test_tensor_with(dev, TDM_DTYPE_F32, ndim, shape, vals);
}

static TdmTensor *slot(void)
{
    return tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
}

static void expect(TdmTensor *t, const float *want, int64_t n, double tol)
{
    g_assert_cmpint(tdm_tensor_numel(t), ==, n);
    float *got = g_new(float, n);
    g_assert_true(tdm_tensor_read(t, got, NULL));
    for (int64_t i = 0; i < n; i++) {
        if (fabs((double)got[i] - want[i]) > tol * MAX(1.0, fabs(want[i]))) {
            g_error("element %" G_GINT64_FORMAT ": got %.9g, want %.9g", i, got[i], want[i]);
        }
    }
    g_free(got);
}

static void unref_all(TdmTensor **tensors, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tdm_tensor_unref(tensors[i]);
    }
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        GError *err_ = NULL;                                                                       \
        gboolean r_ = (call);                                                                      \
        g_assert_no_error(err_);                                                                   \
        g_assert_true(r_);                                                                         \
    } while (0)
#define ERR (&err_)

/* ---- convolution ---- */

static const float x123[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const int64_t s1133[4] = {1, 1, 3, 3};

static void test_conv_by_hand(void)
{
    const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const float right[9] = {0, 0, 0, 0, 0, 1, 0, 0, 0}; /* reads x[i][j+1] */
    const float bias1 = 1.0f;
    int64_t one = 1;
    TdmTensor *x = mk(4, s1133, x123), *w = mk(4, s1133, ones), *b = mk(1, &one, &bias1);
    TdmTensor *y = slot();
    TdmConv2dParams p = {1, 1, 1, 1, 1, 1, 1};
    /* Sums of 3x3 neighbourhoods with zero padding, plus the bias. */
    const float sums[9] = {13, 22, 17, 28, 46, 34, 25, 40, 29};
    OK(B->conv2d_forward(dev, NULL, &p, x, w, b, y, ERR));
    g_assert_cmpint(y->ndim, ==, 4);
    expect(y, sums, 9, 0);
    /* Cross-correlation, not convolution: the kernel is not flipped. */
    TdmTensor *wr = mk(4, s1133, right);
    const float shifted[9] = {2, 3, 0, 5, 6, 0, 8, 9, 0};
    OK(B->conv2d_forward(dev, NULL, &p, x, wr, NULL, y, ERR));
    expect(y, shifted, 9, 0);
    /* Stride 2 keeps the corners. */
    TdmConv2dParams p2 = {2, 2, 1, 1, 1, 1, 1};
    const float corners[4] = {12, 16, 24, 28};
    OK(B->conv2d_forward(dev, NULL, &p2, x, w, NULL, y, ERR));
    g_assert_cmpint(y->shape[2], ==, 2);
    expect(y, corners, 4, 0);
    /* Backward data of the shift: x[i][j] feeds y[i][j-1]. */
    TdmTensor *dy = mk(4, s1133, ones), *dx = slot();
    const float dx_want[9] = {0, 1, 1, 0, 1, 1, 0, 1, 1};
    OK(B->conv2d_backward_data(dev, NULL, &p, dy, wr, x, dx, ERR));
    expect(dx, dx_want, 9, 0);
    /* Backward filter accumulates: dw[kh][kw] = 1 + sum of the x window it saw. */
    TdmTensor *dw = mk(4, s1133, ones), *db = mk(1, &one, &bias1);
    const float dw_want[9] = {13, 22, 17, 28, 46, 34, 25, 40, 29};
    const float db_want = 10;
    OK(B->conv2d_backward_filter(dev, NULL, &p, x, dy, dw, db, ERR));
    expect(dw, dw_want, 9, 0);
    expect(db, &db_want, 1, 0);
    /* Groups: each output channel sees only its own input channel. */
    const int64_t gx[4] = {1, 2, 1, 1}, gw[4] = {2, 1, 1, 1};
    const float gxv[2] = {3, 5}, gwv[2] = {2, 10}, gy[2] = {6, 50};
    TdmTensor *xg = mk(4, gx, gxv), *wg = mk(4, gw, gwv);
    TdmConv2dParams pg = {1, 1, 0, 0, 1, 1, 2};
    OK(B->conv2d_forward(dev, NULL, &pg, xg, wg, NULL, y, ERR));
    expect(y, gy, 2, 0);
    TdmTensor *all[] = {x, w, b, y, wr, dy, dx, dw, db, xg, wg};
    unref_all(all, G_N_ELEMENTS(all));
}

/* Finite differences: d/dx of sum(dy * f(x)) against the backward op. */
typedef gboolean (*ForwardFn)(TdmTensor *x, TdmTensor *y, gpointer data);

static double fd_objective(ForwardFn f, TdmTensor *x, const float *dy, gpointer data)
{
    TdmTensor *y = slot();
    g_assert_true(f(x, y, data));
    int64_t n = tdm_tensor_numel(y);
    float *v = g_new(float, n);
    g_assert_true(tdm_tensor_read(y, v, NULL));
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)v[i] * dy[i];
    }
    g_free(v);
    tdm_tensor_unref(y);
    return s;
}

static void fd_check(ForwardFn f, TdmTensor *x, const float *dy, TdmTensor *dx, gpointer data)
{
    int64_t n = tdm_tensor_numel(x);
    float *xv = g_new(float, n), *dxv = g_new(float, n);
    g_assert_true(tdm_tensor_read(x, xv, NULL));
    g_assert_true(tdm_tensor_read(dx, dxv, NULL));
    const float h = 1e-2f;
    for (int64_t i = 0; i < n; i++) {
        float keep = xv[i];
        xv[i] = keep + h;
        g_assert_true(tdm_tensor_write(x, xv, NULL));
        double up = fd_objective(f, x, dy, data);
        xv[i] = keep - h;
        g_assert_true(tdm_tensor_write(x, xv, NULL));
        double down = fd_objective(f, x, dy, data);
        xv[i] = keep;
        double num = (up - down) / (2.0 * h);
        if (fabs(num - dxv[i]) > 2e-3 * MAX(1.0, fabs(num))) {
            g_error("d/dx[%" G_GINT64_FORMAT "]: backward %.6g, finite difference %.6g", i, dxv[i],
                    num);
        }
    }
    g_assert_true(tdm_tensor_write(x, xv, NULL));
    g_free(xv);
    g_free(dxv);
}

static float *rnd(int64_t n)
{
    float *v = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)g_test_rand_double_range(-1, 1);
    }
    return v;
}

typedef struct {
    TdmConv2dParams p;
    TdmTensor *w;
} ConvFd;

static gboolean conv_fwd(TdmTensor *x, TdmTensor *y, gpointer data)
{
    ConvFd *c = data;
    return B->conv2d_forward(dev, NULL, &c->p, x, c->w, NULL, y, NULL);
}

static void test_conv_finite_differences(void)
{
    const int64_t xs[4] = {2, 4, 7, 6}, ws[4] = {6, 2, 3, 3}, ys[4] = {2, 6, 5, 2};
    ConvFd c = {{2, 2, 2, 1, 1, 2, 2}, NULL}; /* stride 2, pad (2,1), dilation (1,2), groups 2 */
    float *xv = rnd(2 * 4 * 7 * 6), *wv = rnd(6 * 2 * 9), *dyv = rnd(2 * 6 * 5 * 2);
    TdmTensor *x = mk(4, xs, xv), *dy = mk(4, ys, dyv), *dx = slot(), *y = slot();
    c.w = mk(4, ws, wv);
    OK(B->conv2d_forward(dev, NULL, &c.p, x, c.w, NULL, y, ERR));
    g_assert_cmpint(y->shape[2], ==, 5);
    g_assert_cmpint(y->shape[3], ==, 2);
    OK(B->conv2d_backward_data(dev, NULL, &c.p, dy, c.w, x, dx, ERR));
    fd_check(conv_fwd, x, dyv, dx, &c);
    /* The filter gradient is the same derivative taken w.r.t. w: swap roles. */
    TdmTensor *dw = mk(4, ws, NULL);
    OK(B->conv2d_backward_filter(dev, NULL, &c.p, x, dy, dw, NULL, ERR));
    float *dwv = g_new(float, 6 * 2 * 9);
    g_assert_true(tdm_tensor_read(dw, dwv, NULL));
    const float h = 1e-2f;
    for (int i = 0; i < 6 * 2 * 9; i += 7) {
        float keep = wv[i];
        wv[i] = keep + h;
        g_assert_true(tdm_tensor_write(c.w, wv, NULL));
        double up = fd_objective(conv_fwd, x, dyv, &c);
        wv[i] = keep - h;
        g_assert_true(tdm_tensor_write(c.w, wv, NULL));
        double down = fd_objective(conv_fwd, x, dyv, &c);
        wv[i] = keep;
        g_assert_cmpfloat_with_epsilon((up - down) / (2 * h), dwv[i], 2e-3);
    }
    g_free(xv);
    g_free(wv);
    g_free(dyv);
    g_free(dwv);
    TdmTensor *all[] = {x, dy, dx, y, c.w, dw};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- gemm ---- */

static void test_gemm_by_hand(void)
{
    const int64_t s22[2] = {2, 2}, s2 = 2;
    const float av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8}, biasv[2] = {1, -1};
    const float onesv[4] = {1, 1, 1, 1}, nanv[4] = {NAN, NAN, NAN, NAN};
    TdmTensor *a = mk(2, s22, av), *b = mk(2, s22, bv), *bias = mk(1, &s2, biasv);
    TdmTensor *c = slot();
    const float ab[4] = {19, 22, 43, 50}, atb[4] = {26, 30, 38, 44}, abt[4] = {17, 23, 39, 53};
    OK(B->gemm(dev, NULL, FALSE, FALSE, 1.0f, a, b, 0.0f, c, NULL, ERR));
    expect(c, ab, 4, 0);
    OK(B->gemm(dev, NULL, TRUE, FALSE, 1.0f, a, b, 0.0f, c, NULL, ERR));
    expect(c, atb, 4, 0);
    OK(B->gemm(dev, NULL, FALSE, TRUE, 1.0f, a, b, 0.0f, c, NULL, ERR));
    expect(c, abt, 4, 0);
    /* c = 2 ab + 1 c + bias, with c = 1. */
    TdmTensor *c1 = mk(2, s22, onesv);
    const float full[4] = {40, 44, 88, 100};
    OK(B->gemm(dev, NULL, FALSE, FALSE, 2.0f, a, b, 1.0f, c1, bias, ERR));
    expect(c1, full, 4, 0);
    /* beta 0 ignores what c held, NaN included (BLAS). */
    TdmTensor *cn = mk(2, s22, nanv);
    const float ab_bias[4] = {20, 21, 44, 49};
    OK(B->gemm(dev, NULL, FALSE, FALSE, 1.0f, a, b, 0.0f, cn, bias, ERR));
    expect(cn, ab_bias, 4, 0);
    /* bias_grad sums dy over rows, into what is there. */
    TdmTensor *db = mk(1, &s2, onesv);
    const float db_want[2] = {1 + 1 + 3, 1 + 2 + 4};
    OK(B->bias_grad(dev, NULL, a, db, ERR));
    expect(db, db_want, 2, 0);
    TdmTensor *all[] = {a, b, bias, c, c1, cn, db};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- softmax cross-entropy ---- */

static void test_softmax_xent(void)
{
    const int64_t s23[2] = {2, 3}, n2 = 2;
    const float lv[6] = {1, 2, 3, 0, 0, 0};
    const gint64 yv[2] = {2, 0};
    TdmTensor *logits = mk(2, s23, lv), *dl = slot();
    TdmTensor *labels = tdm_tensor_new(dev, TDM_DTYPE_I64, 1, &n2, NULL);
    g_assert_true(tdm_tensor_write(labels, yv, NULL));
    float loss = 0;
    int64_t correct = -1;
    /* Row 0: log(1 + e^-1 + e^-2); row 1: log 3. */
    OK(B->softmax_xent(dev, NULL, logits, labels, 0.0f, &loss, dl, &correct, ERR));
    g_assert_cmpfloat_with_epsilon(loss, (0.40760596 + log(3.0)) / 2, 1e-6);
    g_assert_cmpint(correct, ==, 2); /* row 1 ties: the first maximum, 0, is the label */
    double e = exp(1.0) + exp(2.0) + exp(3.0);
    const float dl_want[6] = {
        (float)(exp(1.0) / e / 2),  (float)(exp(2.0) / e / 2), (float)((exp(3.0) / e - 1) / 2),
        (float)((1.0 / 3 - 1) / 2), (float)(1.0 / 6),          (float)(1.0 / 6)};
    expect(dl, dl_want, 6, 1e-6);
    /* Label smoothing 0.1: values from PyTorch 1.13 (float64). */
    OK(B->softmax_xent(dev, NULL, logits, labels, 0.1f, &loss, dl, NULL, ERR));
    g_assert_cmpfloat_with_epsilon(loss, 0.8031091265562451, 1e-6);
    const float ls_want[6] = {0.02834862f, 0.10569757f, -0.13404619f, -0.3f, 0.15f, 0.15f};
    expect(dl, ls_want, 6, 1e-6);
    /* i32 labels and a label out of range, named with its row. */
    const gint32 bad[2] = {1, 3};
    TdmTensor *l32 = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, &n2, NULL);
    g_assert_true(tdm_tensor_write(l32, bad, NULL));
    GError *err = NULL;
    g_assert_false(B->softmax_xent(dev, NULL, logits, l32, 0.0f, &loss, NULL, NULL, &err));
    g_assert_error(err, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(err->message, "label 3"));
    g_assert_nonnull(strstr(err->message, "row 1"));
    g_error_free(err);
    tdm_tensor_unref(logits);
    tdm_tensor_unref(dl);
    tdm_tensor_unref(labels);
    tdm_tensor_unref(l32);
}

/* The same hand-computed case, accumulated on the device: the loss sum
 * (twice the mean above) and the correct count, over two calls. */
static void test_softmax_xent_stats(void)
{
    const int64_t s23[2] = {2, 3}, n2 = 2, len = TDM_XENT_STATS_LEN;
    const float lv[6] = {1, 2, 3, 0, 0, 0}, zero[2] = {0, 0};
    const gint64 yv[2] = {2, 0};
    TdmTensor *logits = mk(2, s23, lv), *dl = slot(), *stats = mk(1, &len, zero);
    TdmTensor *labels = tdm_tensor_new(dev, TDM_DTYPE_I64, 1, &n2, NULL);
    g_assert_true(tdm_tensor_write(labels, yv, NULL));
    OK(B->softmax_xent_stats(dev, NULL, logits, labels, 0.0f, dl, stats, ERR));
    const float once[2] = {(float)(0.40760596 + log(3.0)), 2.0f};
    expect(stats, once, 2, 1e-6);
    double e = exp(1.0) + exp(2.0) + exp(3.0);
    const float dl_want[6] = {
        (float)(exp(1.0) / e / 2),  (float)(exp(2.0) / e / 2), (float)((exp(3.0) / e - 1) / 2),
        (float)((1.0 / 3 - 1) / 2), (float)(1.0 / 6),          (float)(1.0 / 6)};
    expect(dl, dl_want, 6, 1e-6);
    /* Label smoothing 0.1 (PyTorch's mean 0.8031091265562451), no gradient. */
    OK(B->softmax_xent_stats(dev, NULL, logits, labels, 0.1f, NULL, stats, ERR));
    const float twice[2] = {once[0] + (float)(2 * 0.8031091265562451), 4.0f};
    expect(stats, twice, 2, 1e-6);
    /* (A stats tensor that is not f32 [2] is refused by the front end:
     * test-ops.) */
    tdm_tensor_unref(logits);
    tdm_tensor_unref(dl);
    tdm_tensor_unref(stats);
    tdm_tensor_unref(labels);
}

/* ---- batch norm ---- */

static void test_batchnorm(void)
{
    /* One channel holding 1, 2, 3, 4: mean 2.5, biased variance 1.25, unbiased 5/3. */
    const int64_t xs[4] = {2, 1, 2, 1}, c1 = 1;
    const float xv[4] = {1, 2, 3, 4}, zero = 0, one = 1, g2 = 2, b3 = 3;
    TdmTensor *x = mk(4, xs, xv), *gamma = mk(1, &c1, &g2), *beta = mk(1, &c1, &b3);
    TdmTensor *rm = mk(1, &c1, &zero), *rv = mk(1, &c1, &one);
    TdmTensor *sm = slot(), *sv = slot(), *y = slot();
    OK(B->batchnorm_forward(dev, NULL, x, gamma, beta, rm, rv, 0.1f, 1e-5f, TRUE, sm, sv, y, ERR));
    const float mean = 2.5f, var = 1.25f, rm_want = 0.25f, rv_want = 0.9f + 0.1f * 5.0f / 3.0f;
    expect(sm, &mean, 1, 1e-7);
    expect(sv, &var, 1, 1e-7);
    expect(rm, &rm_want, 1, 1e-7);
    expect(rv, &rv_want, 1, 1e-6);
    /* PyTorch: [-1.34163542, -0.44721181, 0.44721181, 1.34163542] * 2 + 3 */
    const float y_want[4] = {3 - 2 * 1.34163542f, 3 - 2 * 0.44721181f, 3 + 2 * 0.44721181f,
                             3 + 2 * 1.34163542f};
    expect(y, y_want, 4, 1e-6);
    /* Eval uses the running stats and leaves them alone. */
    OK(B->batchnorm_forward(dev, NULL, x, gamma, beta, rm, rv, 0.1f, 1e-5f, FALSE, sm, sv, y, ERR));
    float ye[4];
    for (int i = 0; i < 4; i++) {
        ye[i] = (float)((xv[i] - rm_want) / sqrt(rv_want + 1e-5) * 2 + 3);
    }
    expect(y, ye, 4, 1e-6);
    expect(rm, &rm_want, 1, 1e-7);
    /* Backward: dbeta = sum dy, dgamma = sum dy * xhat (into 1 and 0). */
    const float dyv[4] = {1, -2, 0.5f, 3};
    TdmTensor *dy = mk(4, xs, dyv), *dx = slot(), *dg = mk(1, &c1, &one), *dbt = mk(1, &c1, &zero);
    OK(B->batchnorm_backward(dev, NULL, x, dy, gamma, sm, sv, 1e-5f, dx, dg, dbt, ERR));
    float dbeta_want = 2.5f, dgamma_want = 1.0f;
    for (int i = 0; i < 4; i++) {
        dgamma_want += (float)(dyv[i] * (xv[i] - 2.5) / sqrt(1.25 + 1e-5));
    }
    expect(dbt, &dbeta_want, 1, 1e-6);
    expect(dg, &dgamma_want, 1, 1e-6);
    TdmTensor *all[] = {dg, dbt, dx, dy, x, gamma, beta, rm, rv, sm, sv, y};
    unref_all(all, G_N_ELEMENTS(all));
}

typedef struct {
    TdmTensor *gamma, *beta;
} BnFd;

static gboolean bn_fwd(TdmTensor *x, TdmTensor *y, gpointer data)
{
    BnFd *b = data;
    return B->batchnorm_forward(dev, NULL, x, b->gamma, b->beta, NULL, NULL, 0.1f, 1e-5f, TRUE,
                                NULL, NULL, y, NULL);
}

static void test_batchnorm_finite_differences(void)
{
    const int64_t xs[4] = {3, 2, 2, 3}, c = 2;
    const float gv[2] = {1.5f, 0.5f}, bv[2] = {0.1f, -0.2f};
    float *xv = rnd(36), *dyv = rnd(36);
    BnFd b = {mk(1, &c, gv), mk(1, &c, bv)};
    TdmTensor *x = mk(4, xs, xv), *dy = mk(4, xs, dyv), *y = slot(), *sm = slot(), *sv = slot();
    TdmTensor *dx = slot();
    OK(B->batchnorm_forward(dev, NULL, x, b.gamma, b.beta, NULL, NULL, 0.1f, 1e-5f, TRUE, sm, sv, y,
                            ERR));
    OK(B->batchnorm_backward(dev, NULL, x, dy, b.gamma, sm, sv, 1e-5f, dx, NULL, NULL, ERR));
    fd_check(bn_fwd, x, dyv, dx, &b);
    g_free(xv);
    g_free(dyv);
    TdmTensor *all[] = {b.gamma, b.beta, x, dy, y, sm, sv, dx};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- pooling ---- */

static void test_maxpool(void)
{
    const int64_t xs[4] = {1, 1, 4, 4};
    const float xv[16] = {1, 5, 2, 0, 3, 4, 7, 7, 9, 0, 1, 1, 0, 9, 1, 2};
    TdmTensor *x = mk(4, xs, xv), *y = slot(), *dx = slot();
    TdmTensor *ws = tdm_tensor_new_empty(dev, TDM_DTYPE_I32);
    TdmPool2dParams p = {2, 2, 2, 2, 0, 0, TRUE};
    OK(B->maxpool2d_forward(dev, NULL, &p, x, y, ws, ERR));
    const float y_want[4] = {5, 7, 9, 2};
    expect(y, y_want, 4, 0);
    /* Argmax is the first maximum: 7 at (1, 2), not (1, 3); 9 at (2, 0). */
    gint32 idx[4];
    g_assert_true(tdm_tensor_read(ws, idx, NULL));
    g_assert_cmpint(idx[0], ==, 1);
    g_assert_cmpint(idx[1], ==, 6);
    g_assert_cmpint(idx[2], ==, 8);
    g_assert_cmpint(idx[3], ==, 15);
    const int64_t ys[4] = {1, 1, 2, 2};
    const float dyv[4] = {10, 20, 30, 40};
    TdmTensor *dy = mk(4, ys, dyv);
    OK(B->maxpool2d_backward(dev, NULL, &p, dy, ws, x, dx, ERR));
    const float dx_want[16] = {0, 10, 0, 0, 0, 0, 20, 0, 30, 0, 0, 0, 0, 0, 0, 40};
    expect(dx, dx_want, 16, 0);
    /* Padding is -inf, never the maximum; overlapping windows add up. */
    TdmTensor *x3 = mk(4, s1133, x123), *dy3 = slot();
    TdmPool2dParams p3 = {3, 3, 2, 2, 1, 1, TRUE};
    OK(B->maxpool2d_forward(dev, NULL, &p3, x3, y, ws, ERR));
    const float y3[4] = {5, 6, 8, 9};
    expect(y, y3, 4, 0);
    OK(B->fill(dev, y, 1.0f, ERR));
    OK(B->copy(dev, y, dy, ERR));
    OK(B->maxpool2d_backward(dev, NULL, &p3, dy, ws, x3, dy3, ERR));
    const float dx3[9] = {0, 0, 0, 0, 1, 1, 0, 1, 1};
    expect(dy3, dx3, 9, 0);
    TdmTensor *all[] = {x, y, dx, ws, dy, x3, dy3};
    unref_all(all, G_N_ELEMENTS(all));
}

static void test_avgpool(void)
{
    const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    TdmTensor *x = mk(4, s1133, ones), *y = slot(), *dx = slot();
    /* count_include_pad: a corner window holds 4 ones out of 9 cells. */
    TdmPool2dParams p = {3, 3, 1, 1, 1, 1, TRUE};
    OK(B->avgpool2d_forward(dev, NULL, &p, x, y, ERR));
    const float inc[9] = {4 / 9.f, 6 / 9.f, 4 / 9.f, 6 / 9.f, 1,
                          6 / 9.f, 4 / 9.f, 6 / 9.f, 4 / 9.f};
    expect(y, inc, 9, 1e-6);
    p.count_include_pad = FALSE;
    OK(B->avgpool2d_forward(dev, NULL, &p, x, y, ERR));
    expect(y, ones, 9, 1e-6);
    /* Backward of the padded-divisor case: each cell gets 1/9 per window covering it. */
    p.count_include_pad = TRUE;
    TdmTensor *dy = mk(4, s1133, ones);
    OK(B->avgpool2d_backward(dev, NULL, &p, dy, x, dx, ERR));
    expect(dx, inc, 9, 1e-6);
    /* Global average pooling and its backward. */
    TdmTensor *x1 = mk(4, s1133, x123), *g = slot(), *gdx = slot();
    const float mean = 5, spread[9] = {1 / 9.f, 1 / 9.f, 1 / 9.f, 1 / 9.f, 1 / 9.f,
                                       1 / 9.f, 1 / 9.f, 1 / 9.f, 1 / 9.f};
    OK(B->global_avgpool_forward(dev, NULL, x1, g, ERR));
    g_assert_cmpint(g->ndim, ==, 2);
    expect(g, &mean, 1, 1e-7);
    OK(B->fill(dev, g, 1.0f, ERR));
    OK(B->global_avgpool_backward(dev, NULL, g, x1, gdx, ERR));
    expect(gdx, spread, 9, 1e-7);
    TdmTensor *all[] = {x, y, dx, dy, x1, g, gdx};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- elementwise, dropout, vector ops ---- */

static void test_elementwise(void)
{
    const int64_t s4 = 4;
    const float av[4] = {-1, 0, 2, -3}, bv[4] = {1, 1, 1, 1};
    TdmTensor *a = mk(1, &s4, av), *b = mk(1, &s4, bv), *y = slot(), *dx = slot();
    const float relu[4] = {0, 0, 2, 0}, gate[4] = {0, 0, 1, 0}, sum[4] = {0, 1, 3, -2};
    OK(B->relu_forward(dev, NULL, a, y, ERR));
    expect(y, relu, 4, 0);
    OK(B->relu_backward(dev, NULL, y, b, dx, ERR));
    expect(dx, gate, 4, 0);
    OK(B->add(dev, NULL, a, b, a, ERR)); /* in place */
    expect(a, sum, 4, 0);
    double ss = 0;
    OK(B->sum_squares(dev, a, &ss, ERR));
    g_assert_cmpfloat(ss, ==, 14.0);
    OK(B->axpy(dev, -2.0f, b, a, ERR));
    const float axpy[4] = {-2, -1, 1, -4};
    expect(a, axpy, 4, 0);
    OK(B->scale(dev, a, 0.5f, ERR));
    const float half[4] = {-1, -0.5f, 0.5f, -2};
    expect(a, half, 4, 0);
    /* A non-plain input is not something ref can read. */
    const int64_t s22[2] = {2, 2};
    TdmTensor *c = mk(2, s22, av);
    GError *err = NULL;
    c->layout = (gconstpointer)c; /* any non-NULL handle */
    g_assert_false(B->relu_forward(dev, NULL, c, y, &err));
    g_assert_error(err, TDM_ERROR, TDM_ERROR_UNSUPPORTED);
    g_clear_error(&err);
    c->layout = NULL;
    TdmTensor *all[] = {a, b, y, dx, c};
    unref_all(all, G_N_ELEMENTS(all));
}

static void test_dropout(void)
{
    const int64_t n = 100000;
    float *xv = rnd(n);
    TdmTensor *x = mk(1, &n, xv), *y = slot(), *y2 = slot(), *dx = slot();
    TdmTensor *mask = tdm_tensor_new_empty(dev, TDM_DTYPE_U8);
    TdmTensor *mask2 = tdm_tensor_new_empty(dev, TDM_DTYPE_U8);
    OK(B->dropout_forward(dev, NULL, 0.3f, 1234, x, mask, y, ERR));
    guint8 *m = g_new(guint8, n), *m2 = g_new(guint8, n);
    float *yv = g_new(float, n);
    g_assert_true(tdm_tensor_read(mask, m, NULL));
    g_assert_true(tdm_tensor_read(y, yv, NULL));
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        kept += m[i];
        g_assert_cmpfloat(yv[i], ==, m[i] ? xv[i] * (1.0f / 0.7f) : 0.0f);
    }
    /* 70000 expected; 5 standard deviations is about 725. */
    g_assert_cmpint(kept, >, 69275);
    g_assert_cmpint(kept, <, 70725);
    /* Same seed, same mask; another seed, another mask. */
    OK(B->dropout_forward(dev, NULL, 0.3f, 1234, x, mask2, y2, ERR));
    g_assert_true(tdm_tensor_read(mask2, m2, NULL));
    g_assert_cmpmem(m, n, m2, n);
    OK(B->dropout_forward(dev, NULL, 0.3f, 1235, x, mask2, y2, ERR));
    g_assert_true(tdm_tensor_read(mask2, m2, NULL));
    g_assert_true(memcmp(m, m2, n) != 0);
    /* Backward reuses the mask and the scale. */
    OK(B->dropout_backward(dev, NULL, 0.3f, mask, x, dx, ERR));
    expect(dx, yv, n, 0);
    /* p = 0 keeps everything unchanged; p = 1 drops everything. */
    OK(B->dropout_forward(dev, NULL, 0.0f, 9, x, mask2, y2, ERR));
    expect(y2, xv, n, 0);
    OK(B->dropout_forward(dev, NULL, 1.0f, 9, x, mask2, y2, ERR));
    double ss = -1;
    OK(B->sum_squares(dev, y2, &ss, ERR));
    g_assert_cmpfloat(ss, ==, 0.0);
    g_free(xv);
    g_free(m);
    g_free(m2);
    g_free(yv);
    TdmTensor *all[] = {x, y, y2, dx, mask, mask2};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- cast ---- */

static void test_cast(void)
{
    const int64_t n = 7;
    const float f[7] = {65504.f, 65520.f,        1.0f / 3,          5.9604645e-08f,
                        0.1f,    1.00048828125f, 3.0f / 33554432.0f};
    /* f16 bit patterns from PyTorch 1.13: overflow to inf at 65520, ties to even. */
    const guint16 f16_want[7] = {31743, 31744, 13653, 1, 11878, 15360, 2};
    TdmTensor *src = mk(1, &n, f);
    TdmTensor *h = tdm_tensor_new(dev, TDM_DTYPE_F16, 1, &n, NULL);
    guint16 got[7];
    OK(B->cast(dev, src, h, FALSE, ERR));
    g_assert_true(tdm_tensor_read(h, got, NULL));
    g_assert_cmpmem(got, sizeof(got), f16_want, sizeof(f16_want));
    /* Back to f32: every half is exactly representable. */
    TdmTensor *back = slot();
    OK(B->cast(dev, h, back, FALSE, ERR));
    const float back_want[7] = {65504.f,          INFINITY, 0.333251953125f, 5.9604645e-08f,
                                0.0999755859375f, 1.0f,     1.1920929e-07f};
    float bv[7];
    g_assert_true(tdm_tensor_read(back, bv, NULL));
    g_assert_cmpmem(bv, sizeof(bv), back_want, sizeof(back_want));
    /* bf16: round to nearest even (PyTorch: 16256, 16256, 16258, -17628). */
    const int64_t n4 = 4;
    const float bf[4] = {1.0f, 1.00390625f, 1.01171875f, -2.5e-3f};
    const guint16 bf_want[4] = {16256, 16256, 16258, (guint16)(65536 - 17628)};
    TdmTensor *bsrc = mk(1, &n4, bf), *b16 = tdm_tensor_new(dev, TDM_DTYPE_BF16, 1, &n4, NULL);
    OK(B->cast(dev, bsrc, b16, FALSE, ERR));
    g_assert_true(tdm_tensor_read(b16, got, NULL));
    g_assert_cmpmem(got, 8, bf_want, 8);
    /* u8 -> f32 with and without normalisation; f32 -> i32 truncates. */
    const guint8 u[4] = {0, 1, 128, 255};
    TdmTensor *u8 = tdm_tensor_new(dev, TDM_DTYPE_U8, 1, &n4, NULL), *uf = slot();
    g_assert_true(tdm_tensor_write(u8, u, NULL));
    OK(B->cast(dev, u8, uf, TRUE, ERR));
    const float un[4] = {0, 1 / 255.f, 128 / 255.f, 1};
    expect(uf, un, 4, 1e-7);
    OK(B->cast(dev, u8, uf, FALSE, ERR));
    const float ur[4] = {0, 1, 128, 255};
    expect(uf, ur, 4, 0);
    const float tv[4] = {-2.7f, 2.7f, -0.5f, 1e10f};
    const gint32 tw[4] = {-2, 2, 0, G_MAXINT32};
    gint32 ti[4];
    TdmTensor *tf = mk(1, &n4, tv), *t32 = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, &n4, NULL);
    OK(B->cast(dev, tf, t32, FALSE, ERR));
    g_assert_true(tdm_tensor_read(t32, ti, NULL));
    g_assert_cmpmem(ti, sizeof(ti), tw, sizeof(tw));
    TdmTensor *all[] = {src, h, back, bsrc, b16, u8, uf, tf, t32};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- optimizers: values from torch.optim (PyTorch 1.13), one element ---- */

static void sgd_two_steps(TdmSgdParams hp, float want1, float want2, float want_buf)
{
    const int64_t n = 1;
    const float p0 = 1.0f, g = 0.5f, zero = 0.0f;
    TdmTensor *p = mk(1, &n, &p0), *gr = mk(1, &n, &g), *buf = mk(1, &n, &zero);
    hp.first_step = TRUE;
    OK(B->sgd_update(dev, &hp, p, gr, buf, ERR));
    expect(p, &want1, 1, 1e-6);
    hp.first_step = FALSE;
    OK(B->sgd_update(dev, &hp, p, gr, buf, ERR));
    expect(p, &want2, 1, 1e-6);
    expect(buf, &want_buf, 1, 1e-6);
    TdmTensor *all[] = {p, gr, buf};
    unref_all(all, G_N_ELEMENTS(all));
}

static void test_sgd(void)
{
    /* lr 0.1, momentum 0.9, weight decay 0.1; g' = 0.6 then 0.594. */
    sgd_two_steps((TdmSgdParams){0.1f, 0.9f, 0.0f, 0.1f, FALSE, FALSE}, 0.94f, 0.8266f, 1.134f);
    sgd_two_steps((TdmSgdParams){0.1f, 0.9f, 0.5f, 0.1f, FALSE, FALSE}, 0.94f, 0.8563f, 0.837f);
    sgd_two_steps((TdmSgdParams){0.1f, 0.9f, 0.0f, 0.1f, TRUE, FALSE}, 0.886f, 0.72556597f,
                  1.1286f);
    /* No momentum: no buffer needed, p -= lr (g + wd p). */
    const int64_t n = 1;
    const float p0 = 1.0f, g = 0.5f, want = 1.0f - 0.1f * 0.6f;
    TdmTensor *p = mk(1, &n, &p0), *gr = mk(1, &n, &g);
    TdmSgdParams hp = {0.1f, 0.0f, 0.0f, 0.1f, FALSE, TRUE};
    OK(B->sgd_update(dev, &hp, p, gr, NULL, ERR));
    expect(p, &want, 1, 1e-7);
    tdm_tensor_unref(p);
    tdm_tensor_unref(gr);
}

static void test_adamw(void)
{
    const int64_t n = 1;
    const float p0 = 1.0f, g1 = 0.5f, g2 = -0.25f, zero = 0.0f;
    TdmTensor *p = mk(1, &n, &p0), *g = mk(1, &n, &g1), *m = mk(1, &n, &zero);
    TdmTensor *v = mk(1, &n, &zero);
    TdmAdamWParams hp = {0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
    /* Step 1: p = 1 * (1 - 0.001) - 0.1 * (0.05 / 0.1) / (sqrt(0.00025 / 0.001) + eps). */
    OK(B->adamw_update(dev, &hp, p, g, m, v, ERR));
    const float want1 = 0.8990000486373901f;
    expect(p, &want1, 1, 1e-6);
    g_assert_true(tdm_tensor_write(g, &g2, NULL));
    hp.step = 2;
    OK(B->adamw_update(dev, &hp, p, g, m, v, ERR));
    const float want2 = 0.8714673519134521f, m2 = 0.019999997690320015f,
                v2 = 0.0003122500202152878f;
    expect(p, &want2, 1, 1e-6);
    expect(m, &m2, 1, 1e-6);
    expect(v, &v2, 1, 1e-6);
    TdmTensor *all[] = {p, g, m, v};
    unref_all(all, G_N_ELEMENTS(all));
}

/* ---- host transfers, reorder, devices ---- */

static void test_strided_read_write(void)
{
    const int64_t s46[2] = {4, 6}, s43[2] = {4, 3};
    float bv[24], got[24];
    for (int i = 0; i < 24; i++) {
        bv[i] = (float)i;
    }
    GError *err = NULL;
    TdmTensor *base = mk(2, s46, bv);
    /* Columns 1, 3, 5 of every row: a plain view with strides (6, 2). */
    TdmTensor *view = tdm_tensor_new_view(base, sizeof(float), TDM_DTYPE_F32, 2, s43, &err);
    g_assert_no_error(err);
    view->stride[0] = 6;
    view->stride[1] = 2;
    g_assert_true(B->read(dev, view, got, &err));
    g_assert_no_error(err);
    for (int r = 0; r < 4; r++) {
        for (int c = 0; c < 3; c++) {
            g_assert_cmpfloat(got[r * 3 + c], ==, bv[r * 6 + 1 + 2 * c]);
        }
    }
    float neg[12];
    for (int i = 0; i < 12; i++) {
        neg[i] = -1.0f - (float)i;
    }
    g_assert_true(B->write(dev, view, neg, &err));
    g_assert_true(tdm_tensor_read(base, got, NULL));
    for (int i = 0; i < 24; i++) {
        int r = i / 6, c = i % 6;
        g_assert_cmpfloat(got[i], ==, c % 2 ? neg[r * 3 + c / 2] : bv[i]);
    }
    /* reorder to plain makes a dense copy of the view. */
    TdmTensor *dense = slot();
    g_assert_true(B->reorder(dev, NULL, view, NULL, dense, &err));
    g_assert_no_error(err);
    g_assert_true(tdm_tensor_is_contiguous(dense));
    expect(dense, neg, 12, 0);
    /* Ops refuse strided views rather than misread them. */
    g_assert_false(B->relu_forward(dev, NULL, view, dense, &err));
    g_assert_error(err, TDM_ERROR, TDM_ERROR_UNSUPPORTED);
    g_clear_error(&err);
    tdm_tensor_unref(dense);
    tdm_tensor_unref(view);
    tdm_tensor_unref(base);
}

static void test_devices(void)
{
    GError *err = NULL;
    g_assert_cmpint(tdm_device_count(dev), ==, 3);
    TdmDevice *d2 = tdm_device_get("ref:2", &err);
    g_assert_no_error(err);
    g_assert_true(d2 != dev);
    g_assert_cmpint(d2->index, ==, 2);
    /* Separate allocations: the same values live at different addresses. */
    const int64_t n = 4;
    const float v[4] = {1, 2, 3, 4};
    TdmTensor *a = mk(1, &n, v), *b = tdm_tensor_new(d2, TDM_DTYPE_F32, 1, &n, &err);
    g_assert_true(tdm_tensor_write(b, v, NULL));
    g_assert_true(tdm_tensor_data(a) != tdm_tensor_data(b));
    g_assert_true(B->host_alloc != NULL);
    void *pinned = B->host_alloc(dev, 100, &err);
    g_assert_nonnull(pinned);
    g_assert_cmpuint((guintptr)pinned % 64, ==, 0);
    B->host_free(dev, pinned);
    /* (Mixing devices in one op is refused by the front end: test-ops.) */
    OK(d2->backend->add(d2, NULL, b, b, b, ERR));
    const float twice[4] = {2, 4, 6, 8};
    expect(b, twice, 4, 0);
    expect(a, v, 4, 0);
    g_assert_cmpstr(B->layout_name(dev, NULL), ==, "plain");
    tdm_tensor_unref(a);
    tdm_tensor_unref(b);
}

/* The oracle implements every member of the class: no NULL function pointer
 * between device_count and the reserved padding. */
static void test_class_complete(void)
{
    g_assert_cmpuint(B->iface_version, ==, TDM_BACKEND_IFACE_VERSION);
    g_assert_cmpuint(B->struct_size, ==, sizeof(TdmBackendClass));
    const char *first = (const char *)&B->device_count, *end = (const char *)&B->reserved;
    for (const char *p = first; p < end; p += sizeof(void (*)(void))) {
        void (*fn)(void);
        memcpy(&fn, p, sizeof(fn));
        g_assert_nonnull((gpointer)fn);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_setenv("TDM_REF_DEVICES", "3", TRUE);
    GError *err = NULL;
    dev = tdm_device_get("ref:0", &err);
    g_assert_no_error(err);
    B = dev->backend;
    g_assert_cmpstr(B->device_type, ==, "ref");

    g_test_add_func("/ref/class/complete", test_class_complete);
    g_test_add_func("/ref/conv2d/by_hand", test_conv_by_hand);
    g_test_add_func("/ref/conv2d/finite_differences", test_conv_finite_differences);
    g_test_add_func("/ref/gemm/by_hand", test_gemm_by_hand);
    g_test_add_func("/ref/softmax_xent/by_hand", test_softmax_xent);
    g_test_add_func("/ref/softmax_xent_stats/by_hand", test_softmax_xent_stats);
    g_test_add_func("/ref/batchnorm/statistics", test_batchnorm);
    g_test_add_func("/ref/batchnorm/finite_differences", test_batchnorm_finite_differences);
    g_test_add_func("/ref/maxpool/argmax", test_maxpool);
    g_test_add_func("/ref/avgpool/count_include_pad", test_avgpool);
    g_test_add_func("/ref/elementwise/vector_ops", test_elementwise);
    g_test_add_func("/ref/dropout/mask", test_dropout);
    g_test_add_func("/ref/cast/rounding", test_cast);
    g_test_add_func("/ref/optim/sgd", test_sgd);
    g_test_add_func("/ref/optim/adamw", test_adamw);
    g_test_add_func("/ref/memory/strided_read_write", test_strided_read_write);
    g_test_add_func("/ref/memory/devices", test_devices);
    return g_test_run();
}

/* SPDX-License-Identifier: MIT */
/* tests/test-gradcheck.c - every layer's backward (input and parameter
 * gradients) against central finite differences on the ref backend.
 *
 * The loss is L = sum(y * r) for a fixed random r, so dL/dy = r is what
 * backward receives. Forwards run in float32, so the check uses a step
 * h = 1e-2 (3e-3 or 3e-4 where batch norm feeds a ReLU, whose kink a
 * larger step would cross) and accepts
 *     |analytic - numeric| <= 3e-3 + 2e-2 * |numeric|,
 * which float32 rounding (about 1e-4 here) stays far inside while a wrong
 * formula (a missing factor, a transposed index) does not. Inputs are kept
 * away from kinks: ReLU inputs at |x| >= 0.1, max-pool inputs distinct by
 * 0.05. Dropout draws a fresh mask at every forward; its check rebuilds
 * the model with the same seed for each evaluation, which replays the same
 * (first) mask.
 */
#include "config.h"

#include "core-test-util.h"

#define ATOL 3e-3
#define RTOL 2e-2
#define SAMPLES 12

typedef enum { X_SMOOTH, X_AWAY_FROM_ZERO, X_DISTINCT } XKind;

typedef struct {
    const char *name;
    TdmModule *(*build)(void);
    int ndim;
    int64_t shape[4];
    XKind xkind;
    double h;
    gboolean rebuild; /* a fresh model (same seed) for every forward */
} Case;

static void make_input(float *x, int64_t n, XKind kind)
{
    test_fill_uniform(x, n, 11, -1.0, 1.0);
    if (kind == X_AWAY_FROM_ZERO) {
        for (int64_t i = 0; i < n; i++) {
            x[i] = (x[i] < 0 ? -1.0f : 1.0f) * (0.1f + 0.9f * fabsf(x[i]));
        }
    } else if (kind == X_DISTINCT) {
        /* A shuffled ramp: every pair of values differs by >= 0.05. */
        GRand *r = g_rand_new_with_seed(5);
        for (int64_t i = 0; i < n; i++) {
            x[i] = 0.05f * (float)(i - n / 2);
        }
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = g_rand_int_range(r, 0, (gint32)(i + 1));
            float t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
        g_rand_free(r);
    }
}

static double loss_at(TdmModel **model, const Case *c, TdmTensor *x, const float *r, int64_t ny)
{
    if (c->rebuild) {
        TdmDevice *dev = (*model)->device;
        tdm_model_free(*model);
        *model = test_model(c->build(), dev, 7);
    }
    TdmTensor *y = test_forward(*model, x);
    g_assert_cmpint(tdm_tensor_numel(y), ==, ny);
    g_autofree float *v = test_read(y);
    double s = 0.0;
    for (int64_t i = 0; i < ny; i++) {
        s += (double)v[i] * (double)r[i];
    }
    return s;
}

static int64_t *sample_indices(int64_t n, int *count)
{
    int k = n < SAMPLES ? (int)n : SAMPLES;
    int64_t *idx = g_new(int64_t, k);
    for (int j = 0; j < k; j++) {
        /* spread over the tensor, first and last included */
        idx[j] = k == 1 ? 0 : (int64_t)j * (n - 1) / (k - 1);
    }
    *count = k;
    return idx;
}

static int compare(const char *test, const char *what, int64_t i, double a, double num)
{
    if (fabs(a - num) <= ATOL + RTOL * fabs(num) && isfinite(a)) {
        return 0;
    }
    g_test_message("%s: d/d%s[%" G_GINT64_FORMAT "]: analytic %.6g, numeric %.6g", test, what, i,
                   a, num);
    return 1;
}

typedef struct {
    TdmParam *p;
    int count;
    int64_t *idx;
    double *num;
} ParamCheck;

static void run_case(gconstpointer data)
{
    const Case *c = data;
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    TdmModel *model = test_model(c->build(), dev, 7);
    int64_t nx = test_numel(c->ndim, c->shape);
    float *x = g_new(float, nx);
    make_input(x, nx, c->xkind);
    TdmTensor *xt = test_tensor_from(dev, c->ndim, c->shape, x);

    TdmTensor *y = test_forward(model, xt);
    int ny_dim = y->ndim;
    int64_t y_shape[TDM_MAX_DIMS];
    memcpy(y_shape, y->shape, sizeof y_shape);
    int64_t ny = tdm_tensor_numel(y);
    float *r = g_new(float, ny);
    test_fill_uniform(r, ny, 3, -1.0, 1.0);

    /* numeric: input */
    int nxs = 0;
    g_autofree int64_t *xidx = sample_indices(nx, &nxs);
    g_autofree double *xnum = g_new(double, nxs);
    for (int j = 0; j < nxs; j++) {
        int64_t i = xidx[j];
        float orig = x[i];
        x[i] = orig + (float)c->h;
        g_assert_true(tdm_tensor_write(xt, x, NULL));
        double lp = loss_at(&model, c, xt, r, ny);
        x[i] = orig - (float)c->h;
        g_assert_true(tdm_tensor_write(xt, x, NULL));
        double lm = loss_at(&model, c, xt, r, ny);
        x[i] = orig;
        g_assert_true(tdm_tensor_write(xt, x, NULL));
        xnum[j] = (lp - lm) / (2.0 * c->h);
    }
    /* numeric: parameters */
    GArray *checks = g_array_new(FALSE, TRUE, sizeof(ParamCheck));
    for (guint k = 0; k < model->params->len; k++) {
        TdmParam *p = g_ptr_array_index(model->params, k);
        if (p->is_buffer) {
            continue;
        }
        ParamCheck pc = {p, 0, NULL, NULL};
        int64_t n = tdm_tensor_numel(p->value);
        pc.idx = sample_indices(n, &pc.count);
        pc.num = g_new(double, pc.count);
        g_autofree float *v = test_read(p->value);
        for (int j = 0; j < pc.count; j++) {
            int64_t i = pc.idx[j];
            float orig = v[i];
            v[i] = orig + (float)c->h;
            g_assert_true(tdm_tensor_write(p->value, v, NULL));
            double lp = loss_at(&model, c, xt, r, ny);
            v[i] = orig - (float)c->h;
            g_assert_true(tdm_tensor_write(p->value, v, NULL));
            double lm = loss_at(&model, c, xt, r, ny);
            v[i] = orig;
            g_assert_true(tdm_tensor_write(p->value, v, NULL));
            pc.num[j] = (lp - lm) / (2.0 * c->h);
        }
        g_array_append_val(checks, pc);
    }

    /* analytic */
    if (c->rebuild) {
        g_assert_cmpuint(checks->len, ==, 0); /* rebuilding would reset parameters */
        tdm_model_free(model);
        model = test_model(c->build(), dev, 7);
    }
    g_assert_true(tdm_model_zero_grad(model, &error));
    g_assert_no_error(error);
    test_forward(model, xt);
    TdmTensor *dy = test_tensor_from(dev, ny_dim, y_shape, r);
    TdmTensor *dx = NULL;
    g_assert_true(tdm_module_backward(model->root, dy, TRUE, &dx, &error));
    g_assert_no_error(error);
    g_assert_nonnull(dx);
    g_assert_cmpint(dx->ndim, ==, c->ndim);
    for (int d = 0; d < c->ndim; d++) {
        g_assert_cmpint(dx->shape[d], ==, c->shape[d]);
    }
    g_autofree float *dxv = test_read(dx);
    int bad = 0;
    double max_abs = 0.0;
    for (int j = 0; j < nxs; j++) {
        bad += compare(c->name, "x", xidx[j], dxv[xidx[j]], xnum[j]);
        max_abs = fmax(max_abs, fabs(dxv[xidx[j]]));
    }
    g_assert_cmpfloat(max_abs, >, 0.0);
    for (guint k = 0; k < checks->len; k++) {
        ParamCheck *pc = &g_array_index(checks, ParamCheck, k);
        g_autofree float *g = test_read(pc->p->grad);
        double gmax = 0.0;
        for (int j = 0; j < pc->count; j++) {
            bad += compare(c->name, pc->p->full_name, pc->idx[j], g[pc->idx[j]], pc->num[j]);
            gmax = fmax(gmax, fabs(g[pc->idx[j]]));
        }
        g_assert_cmpfloat(gmax, >, 0.0);
        g_free(pc->idx);
        g_free(pc->num);
    }
    g_array_unref(checks);
    g_assert_cmpint(bad, ==, 0);

    tdm_tensor_unref(dy);
    tdm_tensor_unref(xt);
    tdm_model_free(model);
    g_free(x);
    g_free(r);
}

/* ---- the layers under test ---- */

static TdmModule *b_linear(void) { return tdm_linear_new(5, 4, TRUE); }
static TdmModule *b_linear_nobias(void) { return tdm_linear_new(6, 3, FALSE); }
static TdmModule *b_conv(void) { return tdm_conv2d_new(2, 3, 3, 1, 1, TRUE); }
static TdmModule *b_conv_s2(void) { return tdm_conv2d_new(2, 3, 3, 2, 1, TRUE); }
static TdmModule *b_conv_1x1_s2(void) { return tdm_conv2d_new(3, 4, 1, 2, 0, FALSE); }
static TdmModule *b_conv_k5(void) { return tdm_conv2d_new(1, 2, 5, 1, 2, TRUE); }
static TdmModule *b_bn(void) { return tdm_batchnorm2d_new(3, 1e-5f, 0.1f); }
static TdmModule *b_relu(void) { return tdm_relu_new(); }
static TdmModule *b_maxpool(void) { return tdm_maxpool2d_new(2, 2, 0); }
static TdmModule *b_maxpool_pad(void) { return tdm_maxpool2d_new(3, 2, 1); }
static TdmModule *b_avgpool(void) { return tdm_avgpool2d_new(2, 2, 0); }
static TdmModule *b_avgpool_pad(void) { return tdm_avgpool2d_new(3, 2, 1); }
static TdmModule *b_gap(void) { return tdm_adaptive_avgpool2d_new(1, 1); }
static TdmModule *b_adaptive2(void) { return tdm_adaptive_avgpool2d_new(2, 2); }
static TdmModule *b_adaptive3(void) { return tdm_adaptive_avgpool2d_new(3, 3); }
static TdmModule *b_adaptive_up(void) { return tdm_adaptive_avgpool2d_new(5, 4); }
static TdmModule *b_flatten(void) { return tdm_flatten_new(); }
static TdmModule *b_dropout(void) { return tdm_dropout_new(0.3f); }

static TdmModule *b_sequential(void)
{
    TdmModule *m = tdm_sequential_new();
    tdm_module_add_child(m, "conv", tdm_conv2d_new(2, 3, 3, 1, 1, TRUE));
    tdm_module_add_child(m, "bn", tdm_batchnorm2d_new(3, 1e-5f, 0.1f));
    tdm_module_add_child(m, "relu", tdm_relu_new());
    tdm_module_add_child(m, "pool", tdm_avgpool2d_new(2, 2, 0));
    tdm_module_add_child(m, "flatten", tdm_flatten_new());
    tdm_module_add_child(m, "fc", tdm_linear_new(3 * 2 * 2, 3, TRUE));
    return m;
}

static TdmModule *block_body(int in, int out, int stride)
{
    TdmModule *body = tdm_sequential_new();
    tdm_module_add_child(body, "conv1", tdm_conv2d_new(in, out, 3, stride, 1, FALSE));
    tdm_module_add_child(body, "bn1", tdm_batchnorm2d_new(out, 1e-5f, 0.1f));
    tdm_module_add_child(body, "relu", tdm_relu_new());
    tdm_module_add_child(body, "conv2", tdm_conv2d_new(out, out, 3, 1, 1, FALSE));
    tdm_module_add_child(body, "bn2", tdm_batchnorm2d_new(out, 1e-5f, 0.1f));
    return body;
}

static TdmModule *b_residual(void)
{
    return tdm_residual_new(block_body(3, 3, 1), NULL, TRUE);
}

static TdmModule *b_residual_down(void)
{
    TdmModule *sc = tdm_sequential_new();
    tdm_module_add_child(sc, "0", tdm_conv2d_new(3, 4, 1, 2, 0, FALSE));
    tdm_module_add_child(sc, "1", tdm_batchnorm2d_new(4, 1e-5f, 0.1f));
    return tdm_residual_new(block_body(3, 4, 2), sc, TRUE);
}

static TdmModule *b_residual_linear(void)
{
    /* no ReLU after the sum: a smooth block, checked at the larger step */
    return tdm_residual_new(tdm_conv2d_new(2, 2, 3, 1, 1, TRUE), NULL, FALSE);
}

static TdmModule *b_residual_relu_body(void)
{
    /* the body's output is needed by its own backward: no sum over it */
    TdmModule *body = tdm_sequential_new();
    tdm_module_add_child(body, "conv", tdm_conv2d_new(2, 2, 3, 1, 1, TRUE));
    tdm_module_add_child(body, "relu", tdm_relu_new());
    return tdm_residual_new(body, NULL, TRUE);
}

static TdmModule *b_residual_pass_body(void)
{
    /* body and shortcut both hand x through: out = relu(2x), dx = 2 d */
    return tdm_residual_new(tdm_dropout_new(0.0f), NULL, TRUE);
}

static const Case cases[] = {
    {"linear", b_linear, 2, {3, 5}, X_SMOOTH, 1e-2},
    {"linear-nobias", b_linear_nobias, 2, {2, 6}, X_SMOOTH, 1e-2},
    {"conv2d", b_conv, 4, {2, 2, 5, 5}, X_SMOOTH, 1e-2},
    {"conv2d-stride2", b_conv_s2, 4, {2, 2, 6, 6}, X_SMOOTH, 1e-2},
    {"conv2d-1x1-stride2-nobias", b_conv_1x1_s2, 4, {2, 3, 5, 5}, X_SMOOTH, 1e-2},
    {"conv2d-k5-pad2", b_conv_k5, 4, {2, 1, 6, 6}, X_SMOOTH, 1e-2},
    {"batchnorm2d-train", b_bn, 4, {4, 3, 3, 3}, X_SMOOTH, 1e-2},
    {"relu", b_relu, 4, {2, 3, 3, 3}, X_AWAY_FROM_ZERO, 1e-2},
    {"maxpool2d", b_maxpool, 4, {2, 2, 4, 4}, X_DISTINCT, 1e-2},
    {"maxpool2d-3-2-1", b_maxpool_pad, 4, {2, 2, 5, 5}, X_DISTINCT, 1e-2},
    {"avgpool2d", b_avgpool, 4, {2, 2, 4, 4}, X_SMOOTH, 1e-2},
    {"avgpool2d-3-2-1", b_avgpool_pad, 4, {2, 2, 5, 5}, X_SMOOTH, 1e-2},
    {"adaptive-avgpool2d-1", b_gap, 4, {2, 3, 4, 4}, X_SMOOTH, 1e-2},
    {"adaptive-avgpool2d-2", b_adaptive2, 4, {2, 3, 4, 6}, X_SMOOTH, 1e-2},
    {"adaptive-avgpool2d-3-of-5x4", b_adaptive3, 4, {2, 3, 5, 4}, X_SMOOTH, 1e-2},
    {"adaptive-avgpool2d-5x4-of-2x3", b_adaptive_up, 4, {2, 2, 2, 3}, X_SMOOTH, 1e-2},
    {"adaptive-avgpool2d-identity", b_adaptive3, 4, {1, 2, 3, 3}, X_SMOOTH, 1e-2},
    {"flatten", b_flatten, 4, {2, 3, 2, 2}, X_SMOOTH, 1e-2},
    {"dropout", b_dropout, 2, {4, 16}, X_SMOOTH, 1e-2, TRUE},
    {"sequential", b_sequential, 4, {3, 2, 4, 4}, X_SMOOTH, 3e-3},
    {"residual-identity", b_residual, 4, {2, 3, 4, 4}, X_SMOOTH, 3e-4},
    {"residual-downsample", b_residual_down, 4, {2, 3, 6, 6}, X_SMOOTH, 3e-4},
    {"residual-no-relu", b_residual_linear, 4, {2, 2, 3, 3}, X_SMOOTH, 1e-2},
    {"residual-relu-body", b_residual_relu_body, 4, {2, 2, 4, 4}, X_SMOOTH, 3e-4},
    {"residual-pass-body", b_residual_pass_body, 4, {2, 2, 3, 3}, X_AWAY_FROM_ZERO, 1e-2},
};

/* Dropout: the mask drops about p of the elements, scales the rest by
 * 1/(1-p), changes at every forward, and replays from the same seed. */
static void test_dropout_mask(void)
{
    TdmDevice *dev = test_ref_device();
    TdmModel *model = test_model(tdm_dropout_new(0.25f), dev, 3);
    int64_t shape[2] = {8, 256};
    int64_t n = shape[0] * shape[1];
    g_autofree float *x = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        x[i] = 1.0f;
    }
    TdmTensor *xt = test_tensor_from(dev, 2, shape, x);
    g_autofree float *a = test_read(test_forward(model, xt));
    TdmModel *again = test_model(tdm_dropout_new(0.25f), dev, 3);
    g_autofree float *b = test_read(test_forward(again, xt));
    tdm_model_free(again);
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        g_assert_cmpfloat(a[i], ==, b[i]);
        if (a[i] == 0.0f) {
            zeros++;
        } else {
            g_assert_cmpfloat_with_epsilon(a[i], 1.0f / 0.75f, 1e-6);
        }
    }
    g_assert_cmpfloat(fabs((double)zeros / (double)n - 0.25), <, 0.03);
    g_autofree float *c = test_read(test_forward(model, xt));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        differ += a[i] != c[i];
    }
    g_assert_cmpint(differ, >, n / 10);
    /* eval mode: the identity */
    tdm_model_set_training(model, FALSE);
    g_autofree float *e = test_read(test_forward(model, xt));
    for (int64_t i = 0; i < n; i++) {
        g_assert_cmpfloat(e[i], ==, 1.0f);
    }
    tdm_tensor_unref(xt);
    tdm_model_free(model);
}

/* Mean softmax cross-entropy: the value against the formula in double, the
 * gradient against finite differences, with and without label smoothing. */
static void check_xent(float smoothing)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    enum { N = 4, K = 5 };
    int64_t shape[2] = {N, K};
    float logits[N * K];
    test_fill_uniform(logits, N * K, 9, -2.0, 2.0);
    gint32 labels[N] = {0, 3, 4, 1};
    int64_t lshape[1] = {N};
    TdmTensor *lt = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_tensor_write(lt, labels, &error));
    TdmTensor *xt = test_tensor_from(dev, 2, shape, logits);
    TdmTensor *dl = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    float loss = 0.0f;
    int64_t correct = -1;
    g_assert_true(
        tdm_loss_cross_entropy(dev, NULL, xt, lt, smoothing, &loss, dl, &correct, &error));
    g_assert_no_error(error);

    double expect = 0.0;
    int64_t expect_correct = 0;
    for (int i = 0; i < N; i++) {
        const float *row = logits + i * K;
        double mx = row[0], z = 0.0;
        int arg = 0;
        for (int k = 1; k < K; k++) {
            if (row[k] > mx) {
                mx = row[k];
                arg = k;
            }
        }
        for (int k = 0; k < K; k++) {
            z += exp(row[k] - mx);
        }
        double lse = mx + log(z), mean_nll = 0.0;
        for (int k = 0; k < K; k++) {
            mean_nll += (lse - row[k]) / K;
        }
        expect += ((1.0 - smoothing) * (lse - row[labels[i]]) + smoothing * mean_nll) / N;
        expect_correct += arg == labels[i];
    }
    g_assert_cmpfloat(fabs(loss - expect), <, 1e-5);
    g_assert_cmpint(correct, ==, expect_correct);

    g_autofree float *g = test_read(dl);
    const double h = 1e-2;
    for (int i = 0; i < N * K; i++) {
        float orig = logits[i];
        float lp, lm;
        logits[i] = orig + (float)h;
        g_assert_true(tdm_tensor_write(xt, logits, NULL));
        g_assert_true(tdm_loss_cross_entropy(dev, NULL, xt, lt, smoothing, &lp, NULL, NULL, NULL));
        logits[i] = orig - (float)h;
        g_assert_true(tdm_tensor_write(xt, logits, NULL));
        g_assert_true(tdm_loss_cross_entropy(dev, NULL, xt, lt, smoothing, &lm, NULL, NULL, NULL));
        logits[i] = orig;
        double num = ((double)lp - (double)lm) / (2 * h);
        g_assert_cmpint(compare("xent", "logits", i, g[i], num), ==, 0);
    }
    g_assert_true(tdm_tensor_write(xt, logits, NULL));
    tdm_tensor_unref(dl);
    tdm_tensor_unref(xt);
    tdm_tensor_unref(lt);
}

static void test_xent(void)
{
    check_xent(0.0f);
}

static void test_xent_smoothing(void)
{
    check_xent(0.1f);
}

static void test_xent_bad_labels(void)
{
    GError *error = NULL;
    TdmDevice *dev = test_ref_device();
    int64_t shape[2] = {3, 4}, lshape[1] = {2};
    float logits[12] = {0};
    TdmTensor *xt = test_tensor_from(dev, 2, shape, logits);
    TdmTensor *lt = tdm_tensor_new(dev, TDM_DTYPE_I64, 1, lshape, &error);
    float loss;
    g_assert_false(tdm_loss_cross_entropy(dev, NULL, xt, lt, 0.0f, &loss, NULL, NULL, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_SHAPE);
    g_assert_nonnull(strstr(error->message, "[2]"));
    g_clear_error(&error);
    tdm_tensor_unref(lt);
    tdm_tensor_unref(xt);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = g_strdup_printf("/gradcheck/%s", cases[i].name);
        g_test_add_data_func(path, &cases[i], run_case);
    }
    g_test_add_func("/gradcheck/dropout-mask", test_dropout_mask);
    g_test_add_func("/gradcheck/cross-entropy", test_xent);
    g_test_add_func("/gradcheck/cross-entropy-smoothing", test_xent_smoothing);
    g_test_add_func("/gradcheck/cross-entropy-bad-labels", test_xent_bad_labels);
    return g_test_run();
}

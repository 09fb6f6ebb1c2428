/* SPDX-License-Identifier: MIT */
/* tests/conformance-vector.c - conformance of the loss, dropout, vector ops,
 * casts and optimizer updates (see test-conformance.c for how the suite runs).
 * The loss is compared as a number and its gradient as a tensor; the correct
 * count and the dropout mask must match exactly, since the mask is defined
 * as a function of (seed, element index) for every backend.
 */
#include <math.h>
#include <string.h>

#include "conformance-util.h"

static gboolean conf_compare_scalar(const char *what, double ref, double got, double tol)
{
    double rel = fabs(got - ref) / MAX(fabs(ref), 1e-30);
    if (!(rel <= tol)) {
        g_test_message("%s: ref %.9g, got %.9g (relative error %.3g > %.3g)", what, ref, got, rel,
                       tol);
        g_test_fail();
        return FALSE;
    }
    return TRUE;
}

/* ---- softmax cross-entropy ---- */

typedef struct {
    const char *name;
    int64_t n, k;
    float smoothing;
    TdmDType label_dtype;
    gboolean grad;
} XentCase;

static const XentCase xent_cases[] = {
    {"n3k5", 3, 5, 0.0f, TDM_DTYPE_I64, TRUE},
    {"n64k10_i32", 64, 10, 0.0f, TDM_DTYPE_I32, TRUE},
    {"n7k1000_ls0.1", 7, 1000, 0.1f, TDM_DTYPE_I64, TRUE},
    {"n32k10_ls0.1_i32", 32, 10, 0.1f, TDM_DTYPE_I32, TRUE},
    {"n5k3_no_grad", 5, 3, 0.0f, TDM_DTYPE_I64, FALSE},
    {"n1k1", 1, 1, 0.0f, TDM_DTYPE_I64, TRUE},
};

/* Labels for random logits: the row's argmax on even rows (so the correct
 * count is not trivially 0), random elsewhere. */
static void *conf_make_labels(const float *logits, int64_t n, int64_t k, TdmDType dtype)
{
    void *labels = g_malloc(tdm_dtype_size(dtype) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t y = g_test_rand_int_range(0, (gint32)k);
        if (i % 2 == 0) {
            y = 0;
            for (int64_t j = 1; j < k; j++) {
                y = logits[i * k + j] > logits[i * k + y] ? j : y;
            }
        }
        if (dtype == TDM_DTYPE_I32) {
            ((gint32 *)labels)[i] = (gint32)y;
        } else {
            ((gint64 *)labels)[i] = y;
        }
    }
    return labels;
}

/* The loss (mean or sum) within the reduction tolerance, the correct count
 * exactly, and the gradient when dl is given. */
static void xent_compare(const char *what, double loss_r, double loss_t, double correct_r,
                         double correct_t, const Pair *dl)
{
    conf_compare_scalar(what, loss_r, loss_t, TOL_REDUCTION);
    if (correct_r != correct_t) {
        g_test_message("correct: ref %.0f, got %.0f", correct_r, correct_t);
        g_test_fail();
    }
    if (dl != NULL) {
        conf_compare("dlogits", dl, TOL_REDUCTION);
    }
}

static void test_xent(gconstpointer data)
{
    const ConfData *d = data;
    const XentCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    int64_t shape[2] = {c->n, c->k};
    float *host = conf_random(c->n * c->k, -3, 3);
    void *lab = conf_make_labels(host, c->n, c->k, c->label_dtype);
    Pair logits = conf_pair_from(dev, TDM_DTYPE_F32, 2, shape, host);
    Pair labels = conf_pair_from(dev, c->label_dtype, 1, &c->n, lab);
    Pair dl = conf_pair_empty(dev, TDM_DTYPE_F32);
    float loss_r = NAN, loss_t = NAN;
    int64_t correct_r = -1, correct_t = -2;
    TRY(conf_ref->backend->softmax_xent(conf_ref, NULL, logits.r, labels.r, c->smoothing, &loss_r,
                                        c->grad ? dl.r : NULL, &correct_r, &err));
    TRY(dev->backend->softmax_xent(dev, NULL, logits.t, labels.t, c->smoothing, &loss_t,
                                   c->grad ? dl.t : NULL, &correct_t, &err));
    xent_compare("loss", loss_r, loss_t, (double)correct_r, (double)correct_t,
                 c->grad ? &dl : NULL);
out:
    g_free(host);
    g_free(lab);
    conf_pair_clear(&logits);
    conf_pair_clear(&labels);
    conf_pair_clear(&dl);
}

/* The device-side statistics: loss sum and correct count accumulated into
 * a [2] tensor over two calls, against ref's, with the same gradient. */
static void test_xent_stats(gconstpointer data)
{
    const ConfData *d = data;
    const XentCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    if (dev->backend->softmax_xent_stats == NULL) {
        g_test_skip("the backend has no softmax_xent_stats");
        return;
    }
    int64_t shape[2] = {c->n, c->k}, len = TDM_XENT_STATS_LEN;
    float *host = conf_random(c->n * c->k, -3, 3);
    void *lab = conf_make_labels(host, c->n, c->k, c->label_dtype);
    Pair logits = conf_pair_from(dev, TDM_DTYPE_F32, 2, shape, host);
    Pair labels = conf_pair_from(dev, c->label_dtype, 1, &c->n, lab);
    Pair dl = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair stats = conf_pair_from(dev, TDM_DTYPE_F32, 1, &len, NULL);
    for (int call = 0; call < 2; call++) {
        TdmTensor *gr = c->grad && call == 0 ? dl.r : NULL;
        TdmTensor *gt = c->grad && call == 0 ? dl.t : NULL;
        TRY(conf_ref->backend->softmax_xent_stats(conf_ref, NULL, logits.r, labels.r,
                                                  c->smoothing, gr, stats.r, &err));
        TRY(dev->backend->softmax_xent_stats(dev, NULL, logits.t, labels.t, c->smoothing, gt,
                                             stats.t, &err));
    }
    float sr[TDM_XENT_STATS_LEN], st[TDM_XENT_STATS_LEN];
    TRY(tdm_tensor_read(stats.r, sr, &err));
    TRY(tdm_tensor_read(stats.t, st, &err));
    xent_compare("loss sum", sr[TDM_XENT_STATS_LOSS_SUM], st[TDM_XENT_STATS_LOSS_SUM],
                 sr[TDM_XENT_STATS_CORRECT], st[TDM_XENT_STATS_CORRECT], c->grad ? &dl : NULL);
out:
    g_free(host);
    g_free(lab);
    conf_pair_clear(&logits);
    conf_pair_clear(&labels);
    conf_pair_clear(&dl);
    conf_pair_clear(&stats);
}

/* A label outside [0, K) is an error that names the row and the label. */
static void test_xent_bad_label(gconstpointer data)
{
    const ConfData *d = data;
    TdmDevice *dev = d->dev;
    const gint64 bad[2] = {17, -1};
    for (int b = 0; b < 2; b++) {
        int64_t shape[2] = {4, 5}, n = 4;
        gint64 lab[4] = {0, 1, 4, bad[b]};
        float *host = conf_random(20, -1, 1);
        g_autoptr(GError) err = NULL;
        g_autofree char *label_str = g_strdup_printf("%" G_GINT64_FORMAT, bad[b]);
        TdmTensor *logits = tdm_tensor_new(dev, TDM_DTYPE_F32, 2, shape, NULL);
        TdmTensor *labels = tdm_tensor_new(dev, TDM_DTYPE_I64, 1, &n, NULL);
        g_assert_true(tdm_tensor_write(logits, host, NULL));
        g_assert_true(tdm_tensor_write(labels, lab, NULL));
        float loss = 0.0f;
        gboolean ok =
            dev->backend->softmax_xent(dev, NULL, logits, labels, 0.0f, &loss, NULL, NULL, &err);
        if (ok || err == NULL) {
            g_test_message("label %s at row 3 was accepted", label_str);
            g_test_fail();
        } else if (strstr(err->message, label_str) == NULL || strstr(err->message, "3") == NULL) {
            g_test_message("the error does not name row 3 and label %s: %s", label_str,
                           err->message);
            g_test_fail();
        }
        g_free(host);
        tdm_tensor_unref(logits);
        tdm_tensor_unref(labels);
    }
}

/* ---- dropout ---- */

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[4];
    float p;
    guint64 seed;
} DropoutCase;

static const DropoutCase dropout_cases[] = {
    {"p0.5_n3c5h7w7", 4, {3, 5, 7, 7}, 0.5f, 42},
    {"p0.1_n1000", 1, {1000}, 0.1f, 7},
    {"p0_n64", 1, {64}, 0.0f, 1},
    {"p0.9_n4c300_bigseed", 2, {4, 300}, 0.9f, G_GUINT64_CONSTANT(0xdeadbeefcafe1234)},
};

static void test_dropout(const ConfData *d, gboolean backward)
{
    const DropoutCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    Pair x = conf_pair_random(dev, c->ndim, c->shape, -1, 1);
    Pair dy = conf_pair_random(dev, c->ndim, c->shape, -1, 1);
    Pair mask = conf_pair_empty(dev, TDM_DTYPE_U8), y = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair dx = conf_pair_empty(dev, TDM_DTYPE_F32);
    TRY(conf_ref->backend->dropout_forward(conf_ref, NULL, c->p, c->seed, x.r, mask.r, y.r, &err));
    TRY(dev->backend->dropout_forward(dev, NULL, c->p, c->seed, x.t, mask.t, y.t, &err));
    if (!backward) {
        conf_compare("mask", &mask, TOL_EXACT);
        conf_compare("y", &y, TOL_ELEMENTWISE);
        goto out;
    }
    TRY(conf_ref->backend->dropout_backward(conf_ref, NULL, c->p, mask.r, dy.r, dx.r, &err));
    TRY(dev->backend->dropout_backward(dev, NULL, c->p, mask.t, dy.t, dx.t, &err));
    conf_compare("dx", &dx, TOL_ELEMENTWISE);
out:
    conf_pair_clear(&x);
    conf_pair_clear(&dy);
    conf_pair_clear(&mask);
    conf_pair_clear(&y);
    conf_pair_clear(&dx);
}

static void test_dropout_fwd(gconstpointer d)
{
    test_dropout(d, FALSE);
}

static void test_dropout_bwd(gconstpointer d)
{
    test_dropout(d, TRUE);
}

/* ---- vector ops ---- */

typedef struct {
    const char *name;
    int64_t n;
} SizeCase;

static const SizeCase vector_cases[] = {
    {"n1", 1},
    {"n7", 7},
    {"n1000", 1000},
    {"n4097", 4097},
};

enum { VEC_FILL, VEC_COPY, VEC_SCALE, VEC_AXPY, VEC_SUM_SQUARES };

static void test_vector(const ConfData *d, int which)
{
    const SizeCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    const TdmBackendClass *R = conf_ref->backend, *T = dev->backend;
    Pair x = conf_pair_random(dev, 1, &c->n, -2, 2);
    Pair y = conf_pair_random(dev, 1, &c->n, -2, 2);
    double ss_r = NAN, ss_t = NAN;
    switch (which) {
    case VEC_FILL:
        TRY(R->fill(conf_ref, x.r, 0.37f, &err));
        TRY(T->fill(dev, x.t, 0.37f, &err));
        conf_compare("x", &x, TOL_EXACT);
        break;
    case VEC_COPY:
        TRY(R->copy(conf_ref, x.r, y.r, &err));
        TRY(T->copy(dev, x.t, y.t, &err));
        conf_compare("dst", &y, TOL_EXACT);
        break;
    case VEC_SCALE:
        TRY(R->scale(conf_ref, x.r, -1.5f, &err));
        TRY(T->scale(dev, x.t, -1.5f, &err));
        conf_compare("x", &x, TOL_ELEMENTWISE);
        break;
    case VEC_AXPY:
        TRY(R->axpy(conf_ref, 0.25f, x.r, y.r, &err));
        TRY(T->axpy(dev, 0.25f, x.t, y.t, &err));
        conf_compare("y", &y, TOL_ELEMENTWISE);
        break;
    case VEC_SUM_SQUARES:
        TRY(R->sum_squares(conf_ref, x.r, &ss_r, &err));
        TRY(T->sum_squares(dev, x.t, &ss_t, &err));
        conf_compare_scalar("sum of squares", ss_r, ss_t, TOL_REDUCTION);
        break;
    }
out:
    conf_pair_clear(&x);
    conf_pair_clear(&y);
}

static void test_fill(gconstpointer d)
{
    test_vector(d, VEC_FILL);
}

static void test_copy(gconstpointer d)
{
    test_vector(d, VEC_COPY);
}

static void test_scale(gconstpointer d)
{
    test_vector(d, VEC_SCALE);
}

static void test_axpy(gconstpointer d)
{
    test_vector(d, VEC_AXPY);
}

static void test_sum_squares(gconstpointer d)
{
    test_vector(d, VEC_SUM_SQUARES);
}

/* ---- cast ---- */

typedef struct {
    const char *name;
    TdmDType from, to;
    gboolean normalize;
    gboolean into_slot; /* dst is an empty slot, which the cast shapes */
} CastCase;

static const CastCase cast_cases[] = {
    {"u8_f32_normalize", TDM_DTYPE_U8, TDM_DTYPE_F32, TRUE},
    {"u8_f32", TDM_DTYPE_U8, TDM_DTYPE_F32, FALSE},
    {"f32_i32", TDM_DTYPE_F32, TDM_DTYPE_I32, FALSE},
    {"i32_f32", TDM_DTYPE_I32, TDM_DTYPE_F32, FALSE},
    {"i64_f32", TDM_DTYPE_I64, TDM_DTYPE_F32, FALSE},
    {"i64_i32", TDM_DTYPE_I64, TDM_DTYPE_I32, FALSE},
    {"f32_bf16", TDM_DTYPE_F32, TDM_DTYPE_BF16, FALSE},
    {"bf16_f32", TDM_DTYPE_BF16, TDM_DTYPE_F32, FALSE},
    {"f32_f16", TDM_DTYPE_F32, TDM_DTYPE_F16, FALSE},
    {"f16_f32", TDM_DTYPE_F16, TDM_DTYPE_F32, FALSE},
    {"u8_f32_into_slot", TDM_DTYPE_U8, TDM_DTYPE_F32, TRUE, TRUE},
};

/* Random values of any dtype; halves and bfloat16s are finite bit patterns. */
static void *conf_random_of(TdmDType dtype, int64_t n)
{
    guint8 *v = g_malloc(tdm_dtype_size(dtype) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        guint16 h = (guint16)g_test_rand_int_range(0, 65536);
        switch (dtype) {
        case TDM_DTYPE_F32:
            /* Wide range with fractions: exercises truncation and rounding. */
            ((float *)v)[i] = (float)g_test_rand_double_range(-70000.0, 70000.0) /
                              (float)(1 << g_test_rand_int_range(0, 20));
            break;
        case TDM_DTYPE_I32:
            ((gint32 *)v)[i] = g_test_rand_int_range(-100000, 100000);
            break;
        case TDM_DTYPE_I64:
            ((gint64 *)v)[i] = (gint64)g_test_rand_int_range(-100000, 100000) * 10007;
            break;
        case TDM_DTYPE_U8:
            v[i] = (guint8)g_test_rand_int_range(0, 256);
            break;
        case TDM_DTYPE_F16:
            if ((h & 0x7c00) == 0x7c00) {
                h &= 0xbfff;
            }
            ((guint16 *)v)[i] = h;
            break;
        case TDM_DTYPE_BF16:
            if ((h & 0x7f80) == 0x7f80) {
                h &= 0xbfff;
            }
            ((guint16 *)v)[i] = h;
            break;
        }
    }
    return v;
}

static void test_cast(gconstpointer data)
{
    const ConfData *d = data;
    const CastCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    int64_t shape[2] = {13, 77};
    void *host = conf_random_of(c->from, shape[0] * shape[1]);
    Pair src = conf_pair_from(dev, c->from, 2, shape, host);
    Pair dst = c->into_slot ? conf_pair_empty(dev, c->to)
                            : conf_pair_from(dev, c->to, 2, shape, NULL);
    TRY(conf_ref->backend->cast(conf_ref, src.r, dst.r, c->normalize, &err));
    TRY(dev->backend->cast(dev, src.t, dst.t, c->normalize, &err));
    /* Integer and half results must be exact; a float division may round. */
    conf_compare("dst", &dst, c->to == TDM_DTYPE_F32 ? TOL_ELEMENTWISE : TOL_EXACT);
out:
    g_free(host);
    conf_pair_clear(&src);
    conf_pair_clear(&dst);
}

/* ---- optimizer updates ---- */

typedef struct {
    const char *name;
    TdmSgdParams hp;
} SgdCase;

static const SgdCase sgd_cases[] = {
    {"plain", {0.1f, 0.0f, 0.0f, 0.0f, FALSE, FALSE}},
    {"momentum", {0.1f, 0.9f, 0.0f, 0.0f, FALSE, FALSE}},
    {"momentum_dampening_wd", {0.05f, 0.9f, 0.1f, 5e-4f, FALSE, FALSE}},
    {"nesterov_wd", {0.1f, 0.9f, 0.0f, 1e-4f, TRUE, FALSE}},
};

/* With zero_grad the device runs sgd_update_zero_grad against the ref's
 * sgd_update then fill(grad, 0): its definition. */
static void check_sgd(gconstpointer data, gboolean zero_grad)
{
    const ConfData *d = data;
    const SgdCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    if (zero_grad && dev->backend->sgd_update_zero_grad == NULL) {
        g_test_skip("backend has no sgd_update_zero_grad");
        return;
    }
    /* Large enough for the cpu backend's threaded, blocked path. */
    int64_t n = zero_grad ? 40003 : 1003;
    Pair p = conf_pair_random(dev, 1, &n, -1, 1);
    Pair buf = conf_pair_from(dev, TDM_DTYPE_F32, 1, &n, NULL);
    Pair g = {NULL, NULL};
    gboolean use_buf = c->hp.momentum != 0.0f;
    for (int step = 0; step < 3; step++) {
        TdmSgdParams hp = c->hp;
        hp.first_step = step == 0;
        conf_pair_clear(&g);
        g = conf_pair_random(dev, 1, &n, -1, 1);
        TRY(conf_ref->backend->sgd_update(conf_ref, &hp, p.r, g.r, use_buf ? buf.r : NULL, &err));
        if (zero_grad) {
            TRY(conf_ref->backend->fill(conf_ref, g.r, 0.0f, &err));
            TRY(dev->backend->sgd_update_zero_grad(dev, &hp, p.t, g.t, use_buf ? buf.t : NULL,
                                                   &err));
            conf_compare("zeroed grad", &g, TOL_EXACT);
        } else {
            TRY(dev->backend->sgd_update(dev, &hp, p.t, g.t, use_buf ? buf.t : NULL, &err));
        }
    }
    conf_compare("param after 3 steps", &p, TOL_ELEMENTWISE);
    if (use_buf) {
        conf_compare("momentum buffer after 3 steps", &buf, TOL_ELEMENTWISE);
    }
out:
    conf_pair_clear(&p);
    conf_pair_clear(&buf);
    conf_pair_clear(&g);
}

static void test_sgd(gconstpointer data)
{
    check_sgd(data, FALSE);
}

static void test_sgd_zero_grad(gconstpointer data)
{
    check_sgd(data, TRUE);
}

typedef struct {
    const char *name;
    TdmAdamWParams hp;
} AdamWCase;

static const AdamWCase adamw_cases[] = {
    {"default", {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, 0}},
    {"lr0.1_b0.8_0.99_wd0", {0.1f, 0.8f, 0.99f, 1e-6f, 0.0f, 0}},
};

static void check_adamw(gconstpointer data, gboolean zero_grad)
{
    const ConfData *d = data;
    const AdamWCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    if (zero_grad && dev->backend->adamw_update_zero_grad == NULL) {
        g_test_skip("backend has no adamw_update_zero_grad");
        return;
    }
    /* Large enough for the cpu backend's threaded, blocked path. */
    int64_t n = zero_grad ? 40003 : 1003;
    Pair p = conf_pair_random(dev, 1, &n, -1, 1);
    Pair m = conf_pair_from(dev, TDM_DTYPE_F32, 1, &n, NULL);
    Pair v = conf_pair_from(dev, TDM_DTYPE_F32, 1, &n, NULL);
    Pair g = {NULL, NULL};
    for (int step = 1; step <= 3; step++) {
        TdmAdamWParams hp = c->hp;
        hp.step = step;
        conf_pair_clear(&g);
        g = conf_pair_random(dev, 1, &n, -1, 1);
        TRY(conf_ref->backend->adamw_update(conf_ref, &hp, p.r, g.r, m.r, v.r, &err));
        if (zero_grad) {
            TRY(conf_ref->backend->fill(conf_ref, g.r, 0.0f, &err));
            TRY(dev->backend->adamw_update_zero_grad(dev, &hp, p.t, g.t, m.t, v.t, &err));
            conf_compare("zeroed grad", &g, TOL_EXACT);
        } else {
            TRY(dev->backend->adamw_update(dev, &hp, p.t, g.t, m.t, v.t, &err));
        }
    }
    conf_compare("param after 3 steps", &p, TOL_ELEMENTWISE);
    conf_compare("exp_avg after 3 steps", &m, TOL_ELEMENTWISE);
    conf_compare("exp_avg_sq after 3 steps", &v, TOL_ELEMENTWISE);
out:
    conf_pair_clear(&p);
    conf_pair_clear(&m);
    conf_pair_clear(&v);
    conf_pair_clear(&g);
}

static void test_adamw(gconstpointer data)
{
    check_adamw(data, FALSE);
}

static void test_adamw_zero_grad(gconstpointer data)
{
    check_adamw(data, TRUE);
}

#define ADD_CASES(op, cases, fn)                                                                   \
    for (size_t i_ = 0; i_ < G_N_ELEMENTS(cases); i_++) {                                          \
        conf_add(op, (cases)[i_].name, suffix, dev, &(cases)[i_], fn);                             \
    }

void conf_add_vector_tests(TdmDevice *dev, const char *suffix)
{
    ADD_CASES("softmax_xent", xent_cases, test_xent);
    conf_add("softmax_xent", "label_out_of_range", suffix, dev, NULL, test_xent_bad_label);
    ADD_CASES("softmax_xent_stats", xent_cases, test_xent_stats);
    ADD_CASES("dropout_forward", dropout_cases, test_dropout_fwd);
    ADD_CASES("dropout_backward", dropout_cases, test_dropout_bwd);
    ADD_CASES("fill", vector_cases, test_fill);
    ADD_CASES("copy", vector_cases, test_copy);
    ADD_CASES("scale", vector_cases, test_scale);
    ADD_CASES("axpy", vector_cases, test_axpy);
    ADD_CASES("sum_squares", vector_cases, test_sum_squares);
    ADD_CASES("cast", cast_cases, test_cast);
    ADD_CASES("sgd_update", sgd_cases, test_sgd);
    ADD_CASES("adamw_update", adamw_cases, test_adamw);
    ADD_CASES("sgd_update_zero_grad", sgd_cases, test_sgd_zero_grad);
    ADD_CASES("adamw_update_zero_grad", adamw_cases, test_adamw_zero_grad);
}

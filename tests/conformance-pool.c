/* SPDX-License-Identifier: MIT */
/* tests/conformance-pool.c - max pooling on inputs that make the choice
 * hard, compared with ref bit for bit.
 *
 * The single-op tests pool random plain tensors, where every window has one
 * clear maximum. Here the inputs are full of ties (equal values, +0 and -0),
 * NaNs and -infinity, and arrive either in the layout the backend keeps
 * between layers (conf_pair_produced: nChw16c / nChw8c on cpu, where its
 * vector loops run) or plain; whole planes are -infinity (every window's
 * choice is its first tap) or signed zeros. The windows are ResNet's stem
 * pool (3x3, stride 2, padding 1) on odd and even sizes, so that outputs
 * whose window overlaps the padding border those whose window does not on
 * one or both sides, and others: stride 1, 2x2 windows that tile the image
 * or leave a row out, 5x5, channels that leave a block part empty. y must
 * equal ref's bit for bit (the sign of a zero, which NaN), and so must dx:
 * dy is random, so a different choice among equal inputs moves a gradient,
 * and the sums must be made in the same order.
 */
#include <math.h>
#include <string.h>

#include "conformance-util.h"

typedef struct {
    const char *name;
    int64_t n, c, h, w;
    int k, s, p;
} PoolTieCase;

static const PoolTieCase tie_cases[] = {
    {"n2c16h9w9k3s2p1", 2, 16, 9, 9, 3, 2, 1},    {"n2c16h7w7k3s2p1", 2, 16, 7, 7, 3, 2, 1},
    {"n3c32h8w8k3s2p1", 3, 32, 8, 8, 3, 2, 1},    {"n2c24h11w6k3s2p1", 2, 24, 11, 6, 3, 2, 1},
    {"n2c12h5w9k3s2p1", 2, 12, 5, 9, 3, 2, 1},    {"n1c16h3w3k3s2p1", 1, 16, 3, 3, 3, 2, 1},
    {"n2c16h2w5k3s2p1", 2, 16, 2, 5, 3, 2, 1},    {"n2c16h32w32k3s2p1", 2, 16, 32, 32, 3, 2, 1},
    {"n2c16h9w9k3s1p1", 2, 16, 9, 9, 3, 1, 1},    {"n2c16h9w9k3s2p0", 2, 16, 9, 9, 3, 2, 0},
    {"n2c16h9w7k2s2p0", 2, 16, 9, 7, 2, 2, 0},    {"n2c8h10w10k2s2p0", 2, 8, 10, 10, 2, 2, 0},
    {"n1c16h11w11k5s2p2", 1, 16, 11, 11, 5, 2, 2}, {"n2c16h9w9k2s1p1", 2, 16, 9, 9, 2, 1, 1},
};

/* x's values: per plane (image i, channel ch) a kind, so that some planes
 * are all -inf, some all +-0, the rest a mix of a few repeated values,
 * NaNs and random ones. */
static float *tie_values(const PoolTieCase *c)
{
    static const float few[] = {-INFINITY, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f};
    const int64_t plane = c->h * c->w;
    float *v = g_new(float, c->n * c->c * plane);
    for (int64_t i = 0; i < c->n * c->c; i++) {
        const int kind = i % 5 == 0 ? 0 : i % 5 == 1 ? 1 : 2;
        for (int64_t j = 0; j < plane; j++) {
            float *e = &v[i * plane + j];
            const int r = g_test_rand_int_range(0, 100);
            if (kind == 0) {
                *e = -INFINITY;
            } else if (kind == 1) {
                *e = r < 50 ? 0.0f : -0.0f;
            } else if (r < 4) {
                *e = NAN;
            } else if (r < 60) {
                *e = few[g_test_rand_int_range(0, G_N_ELEMENTS(few))];
            } else {
                *e = (float)g_test_rand_double_range(-1, 1);
            }
        }
    }
    return v;
}

/* Whether the two sides of p hold the same bits; else the test fails with
 * the first element that differs. */
static gboolean same_bits(const char *what, const Pair *p)
{
    if (!tdm_tensor_same_shape(p->r, p->t)) {
        g_autofree char *sr = tdm_tensor_shape_string(p->r);
        g_autofree char *st = tdm_tensor_shape_string(p->t);
        g_test_message("%s: ref gives %s, tested backend %s", what, sr, st);
        g_test_fail();
        return FALSE;
    }
    const int64_t n = tdm_tensor_numel(p->r);
    float *r = conf_read_values(p->r), *t = conf_read_values(p->t);
    gboolean same = r != NULL && t != NULL;
    for (int64_t i = 0; same && i < n; i++) {
        if (memcmp(&r[i], &t[i], sizeof(float)) != 0) {
            g_test_message("%s: element %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                           ": ref %.9g, got %.9g (bits differ)",
                           what, i, n, r[i], t[i]);
            g_test_fail();
            same = FALSE;
        }
    }
    g_free(r);
    g_free(t);
    return same;
}

/* x (and dy) in the layout a backend's layer gives when `produced`, else
 * plain; the values written into it either way. */
static gboolean tie_pair(TdmDevice *dev, const int64_t *shape, const float *values,
                         gboolean produced, Pair *out)
{
    if (produced) {
        *out = conf_pair_empty(dev, TDM_DTYPE_F32);
        if (!conf_pair_produced(dev, shape, 0, 0, out)) {
            return FALSE;
        }
    } else {
        *out = conf_pair_from(dev, TDM_DTYPE_F32, 4, shape, NULL);
    }
    TRY(tdm_tensor_write(out->r, values, &err));
    TRY(tdm_tensor_write(out->t, values, &err));
    return TRUE;
out:
    return FALSE;
}

static void test_maxpool_ties(const ConfData *d, gboolean produced)
{
    const PoolTieCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    const TdmPool2dParams p = {c->k, c->k, c->s, c->s, c->p, c->p, TRUE};
    const int64_t xs[4] = {c->n, c->c, c->h, c->w};
    const int64_t ys[4] = {c->n, c->c, (c->h + 2 * c->p - c->k) / c->s + 1,
                           (c->w + 2 * c->p - c->k) / c->s + 1};
    float *xv = tie_values(c), *dyv = conf_random(ys[0] * ys[1] * ys[2] * ys[3], -1, 1);
    Pair x = {NULL, NULL}, dy = {NULL, NULL};
    Pair y = conf_pair_empty(dev, TDM_DTYPE_F32), dx = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair ws = conf_pair_empty(dev, TDM_DTYPE_I32);
    if (!tie_pair(dev, xs, xv, produced, &x) || !tie_pair(dev, ys, dyv, produced, &dy)) {
        goto out;
    }
    g_test_message("x layout: %s", dev->backend->layout_name(dev, x.t->layout));
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(q) (side == 0 ? (q).r : (q).t)
        TRY(B->maxpool2d_forward(dv, NULL, &p, T_(x), T_(y), T_(ws), &err));
        TRY(B->maxpool2d_backward(dv, NULL, &p, T_(dy), T_(ws), T_(x), T_(dx), &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    same_bits("y", &y);
    same_bits("dx", &dx);
out:
    g_free(xv);
    g_free(dyv);
    conf_pair_clear(&x);
    conf_pair_clear(&dy);
    conf_pair_clear(&y);
    conf_pair_clear(&dx);
    conf_pair_clear(&ws);
}

static void test_maxpool_ties_layout(gconstpointer d)
{
    test_maxpool_ties(d, TRUE);
}

static void test_maxpool_ties_plain(gconstpointer d)
{
    test_maxpool_ties(d, FALSE);
}

void conf_add_pool_tests(TdmDevice *dev, const char *suffix)
{
    for (size_t i = 0; i < G_N_ELEMENTS(tie_cases); i++) {
        conf_add("maxpool2d_layout", tie_cases[i].name, suffix, dev, &tie_cases[i],
                 test_maxpool_ties_layout);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(tie_cases); i++) {
        conf_add("maxpool2d_ties", tie_cases[i].name, suffix, dev, &tie_cases[i],
                 test_maxpool_ties_plain);
    }
}

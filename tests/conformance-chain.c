/* SPDX-License-Identifier: MIT */
/* tests/conformance-chain.c - conformance of chains of ops and of the
 * layout boundary (reorder, read, write).
 *
 * A backend may keep activations in a private layout from op to op, so the
 * single-op tests (plain inputs in, read out) do not show whether an op
 * accepts what another op produced. Here outputs feed the next op directly
 * on the device: a small conv net forward and backward (conv, batch norm,
 * relu, max pool, global average pool, linear, loss and back), a residual
 * sum of differently produced tensors, a LeNet-shaped chain (an image
 * convolution and tiled max pools), a ResNet basic block on the fused
 * ops (batch norm + relu, add + relu), and round trips through reorder,
 * read and write. Every intermediate is compared with the same chain on ref.
 * The conv before the batch norm has no bias (as in ResNets): that bias's
 * gradient is zero up to rounding, which no relative tolerance can judge.
 */
#include <math.h>
#include <string.h>

#include "conformance-util.h"

/* conf_add for a test without a case. */
static void chain_add(const char *group, const char *name, const char *suffix, TdmDevice *dev,
                      GTestDataFunc fn)
{
    conf_add(group, name, suffix, dev, NULL, fn);
}

/* An intermediate a chain test compares: its index in the test's Pair
 * array and the name a mismatch is reported under. */
typedef struct {
    int id;
    const char *name;
} ChainCheck;

static void chain_compare(const Pair *P, const ChainCheck *checks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        conf_compare(checks[i].name, &P[checks[i].id], TOL_REDUCTION);
    }
}

/* ---- a small conv net, forward and backward ---- */

/* clang-format off */
enum {
    X, W1, GAMMA, BETA, RMEAN, RVAR, FCW, FCB, LABELS,              /* inputs */
    Y1, SMEAN, SVAR, Y2, Y3, Y4, WS, Y5, LOGITS, DLOGITS,               /* forward */
    DFCW, DFCB, DY5, DY4, DY3, DY2, DY1, DGAMMA, DBETA, DX, DW1,        /* backward */
    N_CHAIN
};
/* clang-format on */

static gboolean chain_convnet_once(gconstpointer data, gboolean last)
{
    gboolean done = TRUE;
    const ConfData *d = data;
    TdmDevice *dev = d->dev;
    const int64_t N = 2, C = 8, H = 9, O = 16, K = 10;
    const int64_t xs[4] = {N, C, H, H}, ws[4] = {O, C, 3, 3}, fcs[2] = {K, O};
    const TdmConv2dParams conv = {1, 1, 1, 1, 1, 1, 1};
    const TdmPool2dParams pool = {3, 3, 2, 2, 1, 1, TRUE};
    const float momentum = 0.1f, eps = 1e-5f;
    Pair P[N_CHAIN];
    memset(P, 0, sizeof(P));
    P[X] = conf_pair_random(dev, 4, xs, -1, 1);
    P[W1] = conf_pair_random(dev, 4, ws, -0.3, 0.3);
    P[GAMMA] = conf_pair_random(dev, 1, &O, 0.5, 1.5);
    P[BETA] = conf_pair_random(dev, 1, &O, -0.5, 0.5);
    P[RMEAN] = conf_pair_from(dev, TDM_DTYPE_F32, 1, &O, NULL);
    P[RVAR] = conf_pair_random(dev, 1, &O, 1, 1);
    P[FCW] = conf_pair_random(dev, 2, fcs, -0.5, 0.5);
    P[FCB] = conf_pair_random(dev, 1, &K, -0.5, 0.5);
    gint64 labels[2] = {g_test_rand_int_range(0, (gint32)K), g_test_rand_int_range(0, (gint32)K)};
    P[LABELS] = conf_pair_from(dev, TDM_DTYPE_I64, 1, &N, labels);
    for (int i = Y1; i < N_CHAIN; i++) {
        P[i] = conf_pair_empty(dev, i == WS ? TDM_DTYPE_I32 : TDM_DTYPE_F32);
    }
    /* Parameter gradients are accumulated into plain zeroed tensors. */
    conf_pair_clear(&P[DFCW]);
    conf_pair_clear(&P[DFCB]);
    conf_pair_clear(&P[DGAMMA]);
    conf_pair_clear(&P[DBETA]);
    conf_pair_clear(&P[DW1]);
    P[DFCW] = conf_pair_from(dev, TDM_DTYPE_F32, 2, fcs, NULL);
    P[DFCB] = conf_pair_from(dev, TDM_DTYPE_F32, 1, &K, NULL);
    P[DGAMMA] = conf_pair_from(dev, TDM_DTYPE_F32, 1, &O, NULL);
    P[DBETA] = conf_pair_from(dev, TDM_DTYPE_F32, 1, &O, NULL);
    P[DW1] = conf_pair_from(dev, TDM_DTYPE_F32, 4, ws, NULL);

    float loss[2] = {0};
    int64_t correct[2] = {0};
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(i) (side == 0 ? P[i].r : P[i].t)
        TRY(B->conv2d_forward(dv, NULL, &conv, T_(X), T_(W1), NULL, T_(Y1), &err));
        TRY(B->batchnorm_forward(dv, NULL, T_(Y1), T_(GAMMA), T_(BETA), T_(RMEAN), T_(RVAR),
                                 momentum, eps, TRUE, T_(SMEAN), T_(SVAR), T_(Y2), &err));
        TRY(B->relu_forward(dv, NULL, T_(Y2), T_(Y3), &err));
        TRY(B->maxpool2d_forward(dv, NULL, &pool, T_(Y3), T_(Y4), T_(WS), &err));
        TRY(B->global_avgpool_forward(dv, NULL, T_(Y4), T_(Y5), &err));
        TRY(B->gemm(dv, NULL, FALSE, TRUE, 1.0f, T_(Y5), T_(FCW), 0.0f, T_(LOGITS), T_(FCB), &err));
        TRY(B->softmax_xent(dv, NULL, T_(LOGITS), T_(LABELS), 0.0f, &loss[side], T_(DLOGITS),
                            &correct[side], &err));
        TRY(B->gemm(dv, NULL, TRUE, FALSE, 1.0f, T_(DLOGITS), T_(Y5), 1.0f, T_(DFCW), NULL, &err));
        TRY(B->bias_grad(dv, NULL, T_(DLOGITS), T_(DFCB), &err));
        TRY(B->gemm(dv, NULL, FALSE, FALSE, 1.0f, T_(DLOGITS), T_(FCW), 0.0f, T_(DY5), NULL, &err));
        TRY(B->global_avgpool_backward(dv, NULL, T_(DY5), T_(Y4), T_(DY4), &err));
        TRY(B->maxpool2d_backward(dv, NULL, &pool, T_(DY4), T_(WS), T_(Y3), T_(DY3), &err));
        TRY(B->relu_backward(dv, NULL, T_(Y3), T_(DY3), T_(DY2), &err));
        TRY(B->batchnorm_backward(dv, NULL, T_(Y1), T_(DY2), T_(GAMMA), T_(SMEAN), T_(SVAR), eps,
                                  T_(DY1), T_(DGAMMA), T_(DBETA), &err));
        TRY(B->conv2d_backward_data(dv, NULL, &conv, T_(DY1), T_(W1), T_(X), T_(DX), &err));
        TRY(B->conv2d_backward_filter(dv, NULL, &conv, T_(X), T_(DY1), T_(DW1), NULL, &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    if (!last && conf_relu_ambiguous(&P[Y3], CONF_RELU_MARGIN)) {
        done = FALSE;
        goto out;
    }
    static const ChainCheck checks[] = {
        {Y1, "conv y"},      {Y2, "batchnorm y"},     {SMEAN, "save_mean"},
        {SVAR, "save_var"},  {RMEAN, "running_mean"}, {RVAR, "running_var"},
        {Y3, "relu y"},      {Y4, "maxpool y"},       {Y5, "global avgpool y"},
        {LOGITS, "logits"},  {DLOGITS, "dlogits"},    {DFCW, "fc dW"},
        {DFCB, "fc db"},     {DY5, "fc dx"},          {DY4, "global avgpool dx"},
        {DY3, "maxpool dx"}, {DY2, "relu dx"},        {DY1, "batchnorm dx"},
        {DGAMMA, "dgamma"},  {DBETA, "dbeta"},        {DX, "conv dx"},
        {DW1, "conv dw"},
    };
    chain_compare(P, checks, G_N_ELEMENTS(checks));
    if (fabsf(loss[1] - loss[0]) > TOL_REDUCTION * fabsf(loss[0]) || correct[0] != correct[1]) {
        g_test_message("loss: ref %.8g (correct %" G_GINT64_FORMAT
                       "), got %.8g (correct %" G_GINT64_FORMAT ")",
                       loss[0], correct[0], loss[1], correct[1]);
        g_test_fail();
    }
out:
    for (int i = 0; i < N_CHAIN; i++) {
        conf_pair_clear(&P[i]);
    }
    return done;
}

static void test_chain_convnet(gconstpointer data)
{
    conf_redrawing(chain_convnet_once, data);
}

/* ---- a LeNet-shaped chain: image conv + relu, tiled max pools ---- */

/* clang-format off */
enum {
    L_X, L_W1, L_B1, L_W2, L_B2,                                       /* inputs */
    L_Y1, L_P1, L_WS1, L_Y2, L_P2, L_WS2, L_DP2,                       /* forward */
    L_DY2, L_DP1, L_DY1, L_DW1, L_DB1, L_DW2, L_DB2,                   /* backward */
    N_LENET
};
/* clang-format on */

/* A 1-channel image into a conv with bias and fused ReLU (the cpu backend's
 * stem loops, writing its blocked layout), 2x2 max pools whose windows tile
 * the plane (own loops on that layout, with a row and column the second
 * pool's windows leave out), a second conv, and the way back; the first
 * conv's weight and bias gradients are read from a blocked output
 * gradient. */
static gboolean chain_lenet_once(gconstpointer data, gboolean last)
{
    gboolean done = TRUE;
    const ConfData *d = data;
    TdmDevice *dev = d->dev;
    const int64_t N = 3, O1 = 6, O2 = 16;
    const int64_t xs[4] = {N, 1, 14, 14}, w1s[4] = {O1, 1, 5, 5}, w2s[4] = {O2, O1, 3, 3};
    const int64_t p2s[4] = {N, O2, 2, 2};
    const TdmConv2dParams c1 = {1, 1, 2, 2, 1, 1, 1}, c2 = {1, 1, 0, 0, 1, 1, 1};
    const TdmPool2dParams pool = {2, 2, 2, 2, 0, 0, TRUE};
    Pair P[N_LENET];
    memset(P, 0, sizeof(P));
    P[L_X] = conf_pair_random(dev, 4, xs, 0, 1);
    P[L_W1] = conf_pair_random(dev, 4, w1s, -0.3, 0.3);
    P[L_B1] = conf_pair_random(dev, 1, &O1, -0.2, 0.2);
    P[L_W2] = conf_pair_random(dev, 4, w2s, -0.3, 0.3);
    P[L_B2] = conf_pair_random(dev, 1, &O2, -0.2, 0.2);
    P[L_DP2] = conf_pair_random(dev, 4, p2s, -1, 1);
    for (int i = L_Y1; i < N_LENET; i++) {
        if (i != L_DP2) {
            P[i] = conf_pair_empty(dev, i == L_WS1 || i == L_WS2 ? TDM_DTYPE_I32 : TDM_DTYPE_F32);
        }
    }
    const int64_t *grad_shape[] = {w1s, &O1, w2s, &O2};
    const int grads[] = {L_DW1, L_DB1, L_DW2, L_DB2};
    for (int i = 0; i < 4; i++) {
        conf_pair_clear(&P[grads[i]]);
        P[grads[i]] = conf_pair_random(dev, i % 2 ? 1 : 4, grad_shape[i], -1, 1);
    }
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(i) (side == 0 ? P[i].r : P[i].t)
        if (B->conv2d_relu_forward != NULL) {
            TRY(B->conv2d_relu_forward(dv, NULL, &c1, T_(L_X), T_(L_W1), T_(L_B1), T_(L_Y1), &err));
        } else {
            TRY(B->conv2d_forward(dv, NULL, &c1, T_(L_X), T_(L_W1), T_(L_B1), T_(L_Y1), &err));
            TRY(B->relu_forward(dv, NULL, T_(L_Y1), T_(L_Y1), &err));
        }
        TRY(B->maxpool2d_forward(dv, NULL, &pool, T_(L_Y1), T_(L_P1), T_(L_WS1), &err));
        TRY(B->conv2d_forward(dv, NULL, &c2, T_(L_P1), T_(L_W2), T_(L_B2), T_(L_Y2), &err));
        TRY(B->maxpool2d_forward(dv, NULL, &pool, T_(L_Y2), T_(L_P2), T_(L_WS2), &err));
        TRY(B->maxpool2d_backward(dv, NULL, &pool, T_(L_DP2), T_(L_WS2), T_(L_Y2), T_(L_DY2),
                                  &err));
        TRY(B->conv2d_backward_filter(dv, NULL, &c2, T_(L_P1), T_(L_DY2), T_(L_DW2), T_(L_DB2),
                                      &err));
        TRY(B->conv2d_backward_data(dv, NULL, &c2, T_(L_DY2), T_(L_W2), T_(L_P1), T_(L_DP1), &err));
        TRY(B->maxpool2d_backward(dv, NULL, &pool, T_(L_DP1), T_(L_WS1), T_(L_Y1), T_(L_DY1),
                                  &err));
        TRY(B->relu_backward(dv, NULL, T_(L_Y1), T_(L_DY1), T_(L_DY1), &err));
        TRY(B->conv2d_backward_filter(dv, NULL, &c1, T_(L_X), T_(L_DY1), T_(L_DW1), T_(L_DB1),
                                      &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    if (!last && conf_relu_ambiguous(&P[L_Y1], CONF_RELU_MARGIN)) {
        done = FALSE;
        goto out;
    }
    static const ChainCheck checks[] = {
        {L_Y1, "conv1+relu y"}, {L_P1, "pool1 y"},   {L_Y2, "conv2 y"},   {L_P2, "pool2 y"},
        {L_DY2, "pool2 dx"},    {L_DP1, "conv2 dx"}, {L_DY1, "relu dx"},  {L_DW2, "conv2 dw"},
        {L_DB2, "conv2 db"},    {L_DW1, "conv1 dw"}, {L_DB1, "conv1 db"},
    };
    chain_compare(P, checks, G_N_ELEMENTS(checks));
out:
    for (int i = 0; i < N_LENET; i++) {
        conf_pair_clear(&P[i]);
    }
    return done;
}

static void test_chain_lenet(gconstpointer data)
{
    conf_redrawing(chain_lenet_once, data);
}

/* ---- backward weights on activations in the backend's own layout ---- */

typedef struct {
    const char *name;
    int64_t n, c, h, o, k;
    int stride, pad;
    gboolean bias;
    int64_t w; /* input width when not h (0: square) */
} BwfCase;

/* The convolution of a case and the shapes of its x, dy and w. */
static void bwf_shapes(const BwfCase *c, int64_t xs[4], int64_t dys[4], int64_t ws[4],
                       TdmConv2dParams *conv)
{
    const int64_t wd = c->w > 0 ? c->w : c->h;
    const int64_t oh = (c->h + 2 * c->pad - c->k) / c->stride + 1;
    const int64_t ow = (wd + 2 * c->pad - c->k) / c->stride + 1;
    const int64_t x[4] = {c->n, c->c, c->h, wd}, dy[4] = {c->n, c->o, oh, ow};
    const int64_t w[4] = {c->o, c->c, c->k, c->k};
    const TdmConv2dParams cv = {c->stride, c->stride, c->pad, c->pad, 1, 1, 1};
    memcpy(xs, x, sizeof(x));
    memcpy(dys, dy, sizeof(dy));
    memcpy(ws, w, sizeof(w));
    *conv = cv;
}

/* Shapes of ResNet layers and odd ones: output channels in an odd number
 * of 8-blocks, channels that pad a block, 1x1 stride 2, 5x5. */
static const BwfCase bwf_cases[] = {
    {"n3c16h9o16k3s1p1", 3, 16, 9, 16, 3, 1, 1, FALSE},
    {"n2c16h9o32k3s2p1", 2, 16, 9, 32, 3, 2, 1, FALSE},
    {"n3c32h8o64k1s2p0", 3, 32, 8, 64, 1, 2, 0, FALSE},
    {"n2c8h7o24k3s1p0_bias", 2, 8, 7, 24, 3, 1, 0, TRUE},
    {"n3c12h11o20k5s2p2_bias", 3, 12, 11, 20, 5, 2, 2, TRUE},
    {"n1c16h6o8k3s1p1", 1, 16, 6, 8, 3, 1, 1, FALSE},
    /* the Winograd loops' edges on AVX2 (3x3, stride 1, padding 1, nChw8c):
     * the largest channel counts with partial tiles, input channels not a
     * multiple of the register tile's 6, a single tile */
    {"n2c64h5o64k3s1p1_bias", 2, 64, 5, 64, 3, 1, 1, TRUE},
    {"n2c24h7o16k3s1p1_bias", 2, 24, 7, 16, 3, 1, 1, TRUE},
    {"n1c8h4o8k3s1p1", 1, 8, 4, 8, 3, 1, 1, FALSE},
    {"n2c16h5w11o8k3s1p1_bias", 2, 16, 5, 8, 3, 1, 1, TRUE, 11},
};

/* x and dy arrive in the backend's own layout (conf_pair_produced); dw and
 * db accumulate into random values. */
static void test_chain_conv_bwf(gconstpointer data)
{
    const ConfData *d = data;
    const BwfCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    int64_t xs[4], dys[4], ws[4];
    TdmConv2dParams conv;
    bwf_shapes(c, xs, dys, ws, &conv);
    Pair x = conf_pair_empty(dev, TDM_DTYPE_F32), dy = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair dw = conf_pair_random(dev, 4, ws, -1, 1), db = {NULL, NULL};
    if (c->bias) {
        db = conf_pair_random(dev, 1, &c->o, -1, 1);
    }
    if (!conf_pair_produced(dev, xs, 0, 0, &x) || !conf_pair_produced(dev, dys, 0, 0, &dy)) {
        goto out;
    }
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(p) (side == 0 ? (p).r : (p).t)
        TRY(B->conv2d_backward_filter(dv, NULL, &conv, T_(x), T_(dy), T_(dw), T_(db), &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    conf_compare("dw (accumulated)", &dw, TOL_REDUCTION);
    if (c->bias) {
        conf_compare("db (accumulated)", &db, TOL_REDUCTION);
    }
out:
    conf_pair_clear(&x);
    conf_pair_clear(&dy);
    conf_pair_clear(&dw);
    conf_pair_clear(&db);
}

/* ---- forward and backward data on tensors in the backend's layout ---- */

/* Stride 1 and 2, odd counts of 8-channel blocks, padded blocks, widths
 * from 7 to 13, k 3 and 5, padding 0 to k - 1. */
static const BwfCase fwd_cases[] = {
    {"n2c16h9o16k3s1p1", 2, 16, 9, 16, 3, 1, 1, TRUE},
    {"n3c16h7o32k3s1p1", 3, 16, 7, 32, 3, 1, 1, FALSE},
    {"n2c8h13o24k3s1p1", 2, 8, 13, 24, 3, 1, 1, TRUE},
    {"n2c12h11o20k3s1p0", 2, 12, 11, 20, 3, 1, 0, TRUE},
    {"n1c16h10o8k5s1p2", 1, 16, 10, 8, 5, 1, 2, FALSE},
    {"n2c24h8o16k3s1p2", 2, 24, 8, 16, 3, 1, 2, TRUE},
    {"n2c16h9o32k3s2p1", 2, 16, 9, 32, 3, 2, 1, TRUE},
    /* the Winograd loops' edges on AVX2 (3x3, stride 1, padding 1, nChw8c):
     * one tile per image at the largest channel count, a partial tile and
     * 8 output channels, and more channels than they take */
    {"n1c64h4o64k3s1p1", 1, 64, 4, 64, 3, 1, 1, TRUE},
    {"n2c32h5o8k3s1p1", 2, 32, 5, 8, 3, 1, 1, FALSE},
    {"n1c72h6o16k3s1p1", 1, 72, 6, 16, 3, 1, 1, TRUE},
    {"n2c24h13w6o16k3s1p1", 2, 24, 13, 16, 3, 1, 1, TRUE, 6},
};

/* x and dy arrive in the backend's own layout (conf_pair_produced); then
 * the forward (bias when the case has one), the forward with ReLU fused and
 * the backward data, against ref. */
static void test_chain_conv_fwd(gconstpointer data)
{
    const ConfData *d = data;
    const BwfCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    int64_t xs[4], dys[4], ws[4];
    TdmConv2dParams conv;
    bwf_shapes(c, xs, dys, ws, &conv);
    Pair x = conf_pair_empty(dev, TDM_DTYPE_F32), dy = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair w = conf_pair_random(dev, 4, ws, -0.3, 0.3), b = {NULL, NULL};
    Pair y = conf_pair_empty(dev, TDM_DTYPE_F32), yr = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair dx = conf_pair_empty(dev, TDM_DTYPE_F32);
    if (c->bias) {
        b = conf_pair_random(dev, 1, &c->o, -0.5, 0.5);
    }
    if (!conf_pair_produced(dev, xs, 0, 0, &x) || !conf_pair_produced(dev, dys, 0, 0, &dy)) {
        goto out;
    }
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(p) (side == 0 ? (p).r : (p).t)
        TRY(B->conv2d_forward(dv, NULL, &conv, T_(x), T_(w), c->bias ? T_(b) : NULL, T_(y), &err));
        if (B->conv2d_relu_forward != NULL) {
            TRY(B->conv2d_relu_forward(dv, NULL, &conv, T_(x), T_(w), c->bias ? T_(b) : NULL,
                                       T_(yr), &err));
        }
        TRY(B->conv2d_backward_data(dv, NULL, &conv, T_(dy), T_(w), T_(x), T_(dx), &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    conf_compare("y", &y, TOL_REDUCTION);
    if (yr.r != NULL && yr.r->storage != NULL) {
        conf_compare("y (relu)", &yr, TOL_REDUCTION);
    }
    conf_compare("dx", &dx, TOL_REDUCTION);
out:
    conf_pair_clear(&x);
    conf_pair_clear(&dy);
    conf_pair_clear(&w);
    conf_pair_clear(&b);
    conf_pair_clear(&y);
    conf_pair_clear(&yr);
    conf_pair_clear(&dx);
}

/* ---- batch norm on tensors in the backend's layout ---- */

typedef struct {
    const char *name;
    int64_t n, c, h, w;
} BnLayoutCase;

/* ResNet-like shapes, channels that pad a block (12, 5), a plane larger than
 * the own loops' float chunk (23x23 > 256 pixels), a single image, enough
 * planes (64 images x 512 channels) for the per-channel combining loops to
 * go over the threads, and a tensor over 1 MiB (streamed stores). */
static const BnLayoutCase bn_layout_cases[] = {
    {"n4c16h7w7", 4, 16, 7, 7},   {"n3c32h5w5", 3, 32, 5, 5},     {"n2c12h9w9", 2, 12, 9, 9},
    {"n3c5h6w4", 3, 5, 6, 4},     {"n2c8h23w23", 2, 8, 23, 23},   {"n1c24h3w3", 1, 24, 3, 3},
    {"n64c512h2w2", 64, 512, 2, 2}, {"n8c64h23w23", 8, 64, 23, 23},
};

/* a and b (on one device) hold the same values, bit for bit. */
static void conf_assert_same_values(const char *what, TdmTensor *a, TdmTensor *b)
{
    int64_t n = tdm_tensor_numel(a);
    g_assert_cmpint(n, ==, tdm_tensor_numel(b));
    float *va = conf_read_values(a), *vb = conf_read_values(b);
    g_assert_nonnull(va);
    g_assert_nonnull(vb);
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&va[i], &vb[i], sizeof(float)) != 0) {
            g_error("%s: element %" G_GINT64_FORMAT " is %.9g, not %.9g", what, i, va[i], vb[i]);
        }
    }
    g_free(va);
    g_free(vb);
}

/* x and dy arrive in the backend's own layout (conf_pair_produced), with an
 * offset per channel so the statistics are not trivial; then batch norm
 * forward (training and eval) and backward, plain and with ReLU fused,
 * against ref; and both backwards once more in place (dx over a copy of
 * dy, interface 1.3; the ReLU's without y where the backend can), which
 * must give what they gave into a new tensor (skipped for an older
 * backend). */
static gboolean chain_bn_layout_once(gconstpointer data, gboolean last)
{
    gboolean done = TRUE;
    const ConfData *d = data;
    const BnLayoutCase *c = d->tcase;
    TdmDevice *dev = d->dev;
    const int64_t xs[4] = {c->n, c->c, c->h, c->w};
    const float eps = 1e-5f, momentum = 0.1f;
    Pair x = conf_pair_empty(dev, TDM_DTYPE_F32), dy = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair gamma = conf_pair_random(dev, 1, &c->c, 0.5, 1.5);
    Pair beta = conf_pair_random(dev, 1, &c->c, -0.5, 0.5);
    Pair rm = conf_pair_random(dev, 1, &c->c, -0.5, 0.5);
    Pair rv = conf_pair_random(dev, 1, &c->c, 0.5, 2);
    Pair y = conf_pair_empty(dev, TDM_DTYPE_F32), yr = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair ye = conf_pair_empty(dev, TDM_DTYPE_F32), yre = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair sm = conf_pair_empty(dev, TDM_DTYPE_F32), sv = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair wsp = conf_pair_empty(dev, TDM_DTYPE_U8);
    Pair dx = conf_pair_empty(dev, TDM_DTYPE_F32), dxr = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair dg = conf_pair_random(dev, 1, &c->c, -1, 1), dbt = conf_pair_random(dev, 1, &c->c, -1, 1);
    Pair dgr = conf_pair_random(dev, 1, &c->c, -1, 1), dbr = conf_pair_random(dev, 1, &c->c, -1, 1);
    Pair dxi = conf_pair_empty(dev, TDM_DTYPE_F32), dxri = conf_pair_empty(dev, TDM_DTYPE_F32);
    /* a backend built against an older header (tandem check-plugin) is
     * not asked for what 1.3 added */
    const gboolean in_place = TDM_IFACE_VERSION_MINOR(dev->backend->iface_version) >= 3;
    if (!conf_pair_produced(dev, xs, 1, 3, &x) || !conf_pair_produced(dev, xs, -1, 1, &dy)) {
        goto out;
    }
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(p) (side == 0 ? (p).r : (p).t)
        TRY(B->batchnorm_forward(dv, NULL, T_(x), T_(gamma), T_(beta), T_(rm), T_(rv), momentum,
                                 eps, TRUE, T_(sm), T_(sv), T_(y), &err));
        TRY(B->batchnorm_backward(dv, NULL, T_(x), T_(dy), T_(gamma), T_(sm), T_(sv), eps, T_(dx),
                                  T_(dg), T_(dbt), &err));
        TRY(B->batchnorm_relu_forward(dv, NULL, T_(x), T_(gamma), T_(beta), T_(rm), T_(rv),
                                      momentum, eps, TRUE, T_(sm), T_(sv), T_(wsp), T_(yr), &err));
        TRY(B->batchnorm_relu_backward(dv, NULL, T_(x), T_(yr), T_(wsp), T_(dy), T_(gamma),
                                       T_(sm), T_(sv), eps, T_(dxr), T_(dgr), T_(dbr), &err));
        /* in place (interface 1.3): the statistics are the relu forward's,
         * the same */
        if (in_place) {
            TRY(tdm_tensor_reorder(T_(dy), T_(dy), T_(dxi), NULL, &err));
            TRY(B->batchnorm_backward(dv, NULL, T_(x), T_(dxi), T_(gamma), T_(sm), T_(sv), eps,
                                      T_(dxi), NULL, NULL, &err));
            TRY(tdm_tensor_reorder(T_(dy), T_(dy), T_(dxri), NULL, &err));
        }
        if (in_place && B->batchnorm_relu_backward_ws != NULL) { /* without y, where it can */
            TRY(B->batchnorm_relu_backward_ws(dv, NULL, T_(x), T_(wsp), T_(dxri), T_(gamma), T_(sm),
                                              T_(sv), eps, T_(dxri), NULL, NULL, &err));
        } else if (in_place) {
            TRY(B->batchnorm_relu_backward(dv, NULL, T_(x), T_(yr), T_(wsp), T_(dxri), T_(gamma),
                                           T_(sm), T_(sv), eps, T_(dxri), NULL, NULL, &err));
        }
        TRY(B->batchnorm_forward(dv, NULL, T_(x), T_(gamma), T_(beta), T_(rm), T_(rv), momentum,
                                 eps, FALSE, NULL, NULL, T_(ye), &err));
        TRY(B->batchnorm_relu_forward(dv, NULL, T_(x), T_(gamma), T_(beta), T_(rm), T_(rv),
                                      momentum, eps, FALSE, NULL, NULL, NULL, T_(yre), &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    if (!last && conf_relu_ambiguous(&yr, CONF_RELU_MARGIN)) {
        done = FALSE;
        goto out;
    }
    conf_compare("y (training)", &y, TOL_REDUCTION);
    conf_compare("save_mean", &sm, TOL_REDUCTION);
    conf_compare("save_var", &sv, TOL_REDUCTION);
    conf_compare("running_mean (two updates)", &rm, TOL_REDUCTION);
    conf_compare("running_var (two updates)", &rv, TOL_REDUCTION);
    conf_compare("dx", &dx, TOL_REDUCTION);
    conf_compare("dgamma (accumulated)", &dg, TOL_REDUCTION);
    conf_compare("dbeta (accumulated)", &dbt, TOL_REDUCTION);
    conf_compare("y (training, relu)", &yr, TOL_REDUCTION);
    conf_compare("dx (relu)", &dxr, TOL_REDUCTION);
    conf_compare("dgamma (relu, accumulated)", &dgr, TOL_REDUCTION);
    conf_compare("dbeta (relu, accumulated)", &dbr, TOL_REDUCTION);
    conf_compare("y (eval)", &ye, TOL_REDUCTION);
    conf_compare("y (eval, relu)", &yre, TOL_REDUCTION);
    if (in_place) {
        conf_compare("dx (in place)", &dxi, TOL_REDUCTION);
        conf_compare("dx (relu, in place)", &dxri, TOL_REDUCTION);
        /* on the tested backend, in place or not is the same computation */
        conf_assert_same_values("dx in place / into a new tensor", dxi.t, dx.t);
        conf_assert_same_values("dx (relu) in place / into a new tensor", dxri.t, dxr.t);
    }
out:;
    Pair *all[] = {&x,  &dy,  &gamma, &beta, &rm, &rv,  &y,   &yr,  &ye,  &yre, &sm,
                   &sv, &wsp, &dx,    &dxr,  &dg, &dbt, &dgr, &dbr, &dxi, &dxri};
    for (size_t i = 0; i < G_N_ELEMENTS(all); i++) {
        conf_pair_clear(all[i]);
    }
    return done;
}

static void test_chain_bn_layout(gconstpointer data)
{
    conf_redrawing(chain_bn_layout_once, data);
}

/* ---- a residual sum of tensors produced in different ways ---- */

static void test_chain_residual(gconstpointer data)
{
    const ConfData *d = data;
    TdmDevice *dev = d->dev;
    const int64_t N = 2, C = 16, H = 8;
    const int64_t xs[4] = {N, C, H, H}, wa[4] = {C, C, 3, 3}, wb[4] = {C, C, 1, 1};
    const TdmConv2dParams p3 = {1, 1, 1, 1, 1, 1, 1}, p1 = {1, 1, 0, 0, 1, 1, 1};
    Pair x = conf_pair_random(dev, 4, xs, -1, 1), plain = conf_pair_random(dev, 4, xs, -1, 1);
    Pair w3 = conf_pair_random(dev, 4, wa, -0.2, 0.2), w1 = conf_pair_random(dev, 4, wb, -0.5, 0.5);
    Pair a = conf_pair_empty(dev, TDM_DTYPE_F32), b = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair bn = conf_pair_empty(dev, TDM_DTYPE_F32), r = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair sum = conf_pair_empty(dev, TDM_DTYPE_F32), out = conf_pair_empty(dev, TDM_DTYPE_F32);
    Pair rm = conf_pair_random(dev, 1, &C, -0.5, 0.5), rv = conf_pair_random(dev, 1, &C, 0.5, 2);
    Pair gamma = conf_pair_random(dev, 1, &C, 0.5, 1.5), beta = conf_pair_random(dev, 1, &C, -1, 1);
    Pair fin = conf_pair_empty(dev, TDM_DTYPE_F32);
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(pr) (side == 0 ? (pr).r : (pr).t)
        TRY(B->conv2d_forward(dv, NULL, &p3, T_(x), T_(w3), NULL, T_(a), &err));
        TRY(B->conv2d_forward(dv, NULL, &p1, T_(x), T_(w1), NULL, T_(b), &err));
        TRY(B->batchnorm_forward(dv, NULL, T_(b), T_(gamma), T_(beta), T_(rm), T_(rv), 0.1f, 1e-5f,
                                 FALSE, NULL, NULL, T_(bn), &err));
        TRY(B->relu_forward(dv, NULL, T_(bn), T_(r), &err));
        TRY(B->add(dv, NULL, T_(a), T_(r), T_(sum), &err));       /* conv + relu(bn(conv)) */
        TRY(B->add(dv, NULL, T_(sum), T_(plain), T_(sum), &err)); /* + a plain tensor, in place */
        TRY(B->add(dv, NULL, T_(x), T_(sum), T_(out), &err));     /* plain + produced */
        TRY(B->relu_forward(dv, NULL, T_(out), T_(fin), &err));
#undef T_
    }
    conf_compare("conv + relu(bn(conv)) + plain", &sum, TOL_REDUCTION);
    conf_compare("x + sum", &out, TOL_REDUCTION);
    conf_compare("relu(x + sum)", &fin, TOL_REDUCTION);
out:
    conf_pair_clear(&x);
    conf_pair_clear(&plain);
    conf_pair_clear(&w3);
    conf_pair_clear(&w1);
    conf_pair_clear(&a);
    conf_pair_clear(&b);
    conf_pair_clear(&bn);
    conf_pair_clear(&r);
    conf_pair_clear(&sum);
    conf_pair_clear(&out);
    conf_pair_clear(&rm);
    conf_pair_clear(&rv);
    conf_pair_clear(&gamma);
    conf_pair_clear(&beta);
    conf_pair_clear(&fin);
}

/* ---- a ResNet basic block with the fused ops, forward and backward ----
 * conv -> batchnorm+relu -> conv -> batchnorm, + x, relu (add_relu in place
 * over the second batch norm's output, as the core's Residual does), then
 * backward with relu_backward from the block output and the fused batch
 * norm backward from its workspace: on the tested backend every tensor but
 * x and the weights stays in the layout the backend chose. */

/* clang-format off */
enum {
    B_X, B_W1, B_W2, B_G1, B_B1, B_G2, B_B2, B_RM1, B_RV1, B_RM2, B_RV2, B_DOUT, /* inputs */
    B_Y1, B_SM1, B_SV1, B_WS1, B_Z1, B_Y2, B_SM2, B_SV2, B_OUT,                 /* forward */
    B_DSUM, B_DY2, B_DZ1, B_DY1, B_DX, B_DW1, B_DW2, B_DG1, B_DB1, B_DG2, B_DB2, /* backward */
    N_BLOCK
};
/* clang-format on */

static gboolean chain_fused_block_once(gconstpointer data, gboolean last)
{
    gboolean done = TRUE;
    const ConfData *d = data;
    TdmDevice *dev = d->dev;
    const TdmBackendClass *tb = dev->backend;
    if (tb->batchnorm_relu_forward == NULL || tb->batchnorm_relu_backward == NULL ||
        tb->add_relu == NULL) {
        g_test_skip("the backend leaves the fused ops NULL");
        return TRUE;
    }
    const int64_t N = 3, C = 16, H = 9;
    const int64_t xs[4] = {N, C, H, H}, wsh[4] = {C, C, 3, 3};
    const TdmConv2dParams p3 = {1, 1, 1, 1, 1, 1, 1};
    const float momentum = 0.1f, eps = 1e-5f;
    Pair P[N_BLOCK];
    memset(P, 0, sizeof(P));
    P[B_X] = conf_pair_random(dev, 4, xs, -1, 1);
    P[B_W1] = conf_pair_random(dev, 4, wsh, -0.2, 0.2);
    P[B_W2] = conf_pair_random(dev, 4, wsh, -0.2, 0.2);
    P[B_G1] = conf_pair_random(dev, 1, &C, 0.5, 1.5);
    P[B_B1] = conf_pair_random(dev, 1, &C, -0.5, 0.5);
    P[B_G2] = conf_pair_random(dev, 1, &C, 0.5, 1.5);
    P[B_B2] = conf_pair_random(dev, 1, &C, -0.5, 0.5);
    P[B_RM1] = conf_pair_random(dev, 1, &C, -0.5, 0.5);
    P[B_RV1] = conf_pair_random(dev, 1, &C, 0.5, 1.5);
    P[B_RM2] = conf_pair_random(dev, 1, &C, -0.5, 0.5);
    P[B_RV2] = conf_pair_random(dev, 1, &C, 0.5, 1.5);
    P[B_DOUT] = conf_pair_random(dev, 4, xs, -1, 1);
    for (int i = B_Y1; i < B_DW1; i++) {
        P[i] = conf_pair_empty(dev, i == B_WS1 ? TDM_DTYPE_U8 : TDM_DTYPE_F32);
    }
    for (int i = B_DW1; i < N_BLOCK; i++) {
        gboolean w = i == B_DW1 || i == B_DW2;
        P[i] = conf_pair_from(dev, TDM_DTYPE_F32, w ? 4 : 1, w ? wsh : &C, NULL);
    }
    for (int side = 0; side < 2; side++) {
        TdmDevice *dv = side == 0 ? conf_ref : dev;
        const TdmBackendClass *B = dv->backend;
#define T_(i) (side == 0 ? P[i].r : P[i].t)
        TRY(B->conv2d_forward(dv, NULL, &p3, T_(B_X), T_(B_W1), NULL, T_(B_Y1), &err));
        TRY(B->batchnorm_relu_forward(dv, NULL, T_(B_Y1), T_(B_G1), T_(B_B1), T_(B_RM1),
                                      T_(B_RV1), momentum, eps, TRUE, T_(B_SM1), T_(B_SV1),
                                      T_(B_WS1), T_(B_Z1), &err));
        TRY(B->conv2d_forward(dv, NULL, &p3, T_(B_Z1), T_(B_W2), NULL, T_(B_Y2), &err));
        TRY(B->batchnorm_forward(dv, NULL, T_(B_Y2), T_(B_G2), T_(B_B2), T_(B_RM2), T_(B_RV2),
                                 momentum, eps, TRUE, T_(B_SM2), T_(B_SV2), T_(B_OUT), &err));
        TRY(B->add_relu(dv, NULL, T_(B_OUT), T_(B_X), T_(B_OUT), &err));
        TRY(B->relu_backward(dv, NULL, T_(B_OUT), T_(B_DOUT), T_(B_DSUM), &err));
        TRY(B->batchnorm_backward(dv, NULL, T_(B_Y2), T_(B_DSUM), T_(B_G2), T_(B_SM2), T_(B_SV2),
                                  eps, T_(B_DY2), T_(B_DG2), T_(B_DB2), &err));
        TRY(B->conv2d_backward_filter(dv, NULL, &p3, T_(B_Z1), T_(B_DY2), T_(B_DW2), NULL, &err));
        TRY(B->conv2d_backward_data(dv, NULL, &p3, T_(B_DY2), T_(B_W2), T_(B_Z1), T_(B_DZ1),
                                    &err));
        TRY(B->batchnorm_relu_backward(dv, NULL, T_(B_Y1), T_(B_Z1), T_(B_WS1), T_(B_DZ1),
                                       T_(B_G1), T_(B_SM1), T_(B_SV1), eps, T_(B_DY1), T_(B_DG1),
                                       T_(B_DB1), &err));
        TRY(B->conv2d_backward_filter(dv, NULL, &p3, T_(B_X), T_(B_DY1), T_(B_DW1), NULL, &err));
        TRY(B->conv2d_backward_data(dv, NULL, &p3, T_(B_DY1), T_(B_W1), T_(B_X), T_(B_DX), &err));
        TRY(tdm_device_synchronize(dv, &err));
#undef T_
    }
    if (!last && (conf_relu_ambiguous(&P[B_Z1], CONF_RELU_MARGIN) ||
                  conf_relu_ambiguous(&P[B_OUT], CONF_RELU_MARGIN))) {
        done = FALSE;
        goto out;
    }
    static const ChainCheck checks[] = {
        {B_Z1, "relu(bn1)"},   {B_RM1, "bn1 running_mean"}, {B_RV1, "bn1 running_var"},
        {B_OUT, "block out"},  {B_DSUM, "relu dx"},         {B_DY2, "bn2 dx"},
        {B_DW2, "conv2 dw"},   {B_DZ1, "conv2 dx"},         {B_DY1, "bn1+relu dx"},
        {B_DG1, "bn1 dgamma"}, {B_DB1, "bn1 dbeta"},        {B_DW1, "conv1 dw"},
        {B_DX, "conv1 dx"},
    };
    chain_compare(P, checks, G_N_ELEMENTS(checks));
out:
    for (int i = 0; i < N_BLOCK; i++) {
        conf_pair_clear(&P[i]);
    }
    return done;
}

static void test_chain_fused_block(gconstpointer data)
{
    conf_redrawing(chain_fused_block_once, data);
}

/* ---- reorder, read, write ---- */

static const int64_t lay_shape[4] = {2, 16, 7, 7};

/* A conv output on `dev`: a tensor in whatever layout the backend prefers. */
static TdmTensor *conf_produced(TdmDevice *dev, GError **error)
{
    const int64_t ws[4] = {16, 16, 3, 3};
    const TdmConv2dParams p = {1, 1, 1, 1, 1, 1, 1};
    TdmTensor *x = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, lay_shape, error);
    TdmTensor *w = x ? tdm_tensor_new(dev, TDM_DTYPE_F32, 4, ws, error) : NULL;
    float *hx = conf_random(2 * 16 * 7 * 7, -1, 1), *hw = conf_random(16 * 16 * 9, -1, 1);
    TdmTensor *y = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    gboolean ok = x != NULL && w != NULL && tdm_tensor_write(x, hx, error) &&
                  tdm_tensor_write(w, hw, error) &&
                  dev->backend->conv2d_forward(dev, NULL, &p, x, w, NULL, y, error);
    g_free(hx);
    g_free(hw);
    g_clear_pointer(&x, tdm_tensor_unref);
    g_clear_pointer(&w, tdm_tensor_unref);
    if (!ok) {
        g_clear_pointer(&y, tdm_tensor_unref);
    }
    return y;
}

static void test_reorder_to_plain(gconstpointer data)
{
    TdmDevice *dev = ((const ConfData *)data)->dev;
    TdmTensor *y = NULL, *dst = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    float *before = NULL;
    TRY((y = conf_produced(dev, &err)) != NULL);
    g_test_message("conv output layout: %s", dev->backend->layout_name(dev, y->layout));
    before = conf_read_values(y);
    TRY(dev->backend->reorder(dev, NULL, y, NULL, dst, &err));
    g_assert_true(tdm_tensor_is_plain(dst) && tdm_tensor_is_contiguous(dst));
    g_assert_true(tdm_tensor_same_shape(dst, y));
    conf_compare_host("reordered to plain", dst, before, TOL_EXACT);
out:
    g_free(before);
    g_clear_pointer(&y, tdm_tensor_unref);
    tdm_tensor_unref(dst);
}

static void test_reorder_to_layout(gconstpointer data)
{
    TdmDevice *dev = ((const ConfData *)data)->dev;
    float *h = conf_random(2 * 16 * 7 * 7, -1, 1);
    TdmTensor *y = NULL, *dst = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    TdmTensor *relu = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    TdmTensor *plain = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, lay_shape, NULL);
    TRY((y = conf_produced(dev, &err)) != NULL);
    TRY(tdm_tensor_write(plain, h, &err));
    TRY(dev->backend->reorder(dev, NULL, plain, y, dst, &err));
    g_assert_true(dst->layout == y->layout);
    conf_compare_host("plain reordered to the conv layout", dst, h, TOL_EXACT);
    /* The reordered tensor is a valid input of the next op. */
    TRY(dev->backend->relu_forward(dev, NULL, dst, relu, &err));
    for (int i = 0; i < 2 * 16 * 7 * 7; i++) {
        h[i] = h[i] > 0.0f ? h[i] : 0.0f;
    }
    conf_compare_host("relu of the reordered tensor", relu, h, TOL_EXACT);
out:
    g_free(h);
    g_clear_pointer(&y, tdm_tensor_unref);
    tdm_tensor_unref(dst);
    tdm_tensor_unref(relu);
    tdm_tensor_unref(plain);
}

static void test_write_read_produced(gconstpointer data)
{
    TdmDevice *dev = ((const ConfData *)data)->dev;
    float *h = conf_random(2 * 16 * 7 * 7, -1, 1);
    TdmTensor *y = NULL, *relu = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    TRY((y = conf_produced(dev, &err)) != NULL);
    TRY(tdm_tensor_write(y, h, &err)); /* into the backend's own layout */
    conf_compare_host("written then read", y, h, TOL_EXACT);
    TRY(dev->backend->relu_forward(dev, NULL, y, relu, &err));
    for (int i = 0; i < 2 * 16 * 7 * 7; i++) {
        h[i] = h[i] > 0.0f ? h[i] : 0.0f;
    }
    conf_compare_host("relu of the written tensor", relu, h, TOL_EXACT);
out:
    g_free(h);
    g_clear_pointer(&y, tdm_tensor_unref);
    tdm_tensor_unref(relu);
}

static void test_write_read_plain(gconstpointer data)
{
    TdmDevice *dev = ((const ConfData *)data)->dev;
    const TdmDType dtypes[] = {TDM_DTYPE_F32, TDM_DTYPE_I32, TDM_DTYPE_I64, TDM_DTYPE_U8};
    const int64_t shape[3] = {3, 5, 7};
    for (size_t k = 0; k < G_N_ELEMENTS(dtypes); k++) {
        size_t nbytes = 105 * tdm_dtype_size(dtypes[k]);
        guint8 *h = g_malloc(nbytes), *back = g_malloc0(nbytes);
        for (size_t i = 0; i < nbytes; i++) {
            h[i] = (guint8)g_test_rand_int_range(0, 256);
        }
        TdmTensor *t = tdm_tensor_new(dev, dtypes[k], 3, shape, NULL);
        TRY(tdm_tensor_write(t, h, &err));
        TRY(tdm_tensor_read(t, back, &err));
        if (memcmp(h, back, nbytes) != 0) {
            g_test_message("%s: read does not give back what was written",
                           tdm_dtype_name(dtypes[k]));
            g_test_fail();
        }
    out:
        tdm_tensor_unref(t);
        g_free(h);
        g_free(back);
    }
}

/* A narrow (batch-row) view shares its base's storage at an offset. */
static void test_write_read_narrow(gconstpointer data)
{
    TdmDevice *dev = ((const ConfData *)data)->dev;
    const int64_t shape[2] = {5, 6};
    float base_h[30], rows[12], back[30];
    for (int i = 0; i < 30; i++) {
        base_h[i] = (float)i;
    }
    for (int i = 0; i < 12; i++) {
        rows[i] = -1.0f - (float)i;
    }
    TdmTensor *base = tdm_tensor_new(dev, TDM_DTYPE_F32, 2, shape, NULL), *view = NULL;
    TRY(tdm_tensor_write(base, base_h, &err));
    TRY((view = tdm_tensor_narrow(base, 2, 2, &err)) != NULL);
    TRY(tdm_tensor_write(view, rows, &err));
    TRY(tdm_tensor_read(base, back, &err));
    memcpy(base_h + 12, rows, sizeof(rows));
    conf_compare_values("base after writing rows 2..3", base_h, back, 30, TOL_EXACT);
    TRY(tdm_tensor_read(view, back, &err));
    conf_compare_values("rows 2..3 read through the view", rows, back, 12, TOL_EXACT);
out:
    g_clear_pointer(&view, tdm_tensor_unref);
    tdm_tensor_unref(base);
}

void conf_add_chain_tests(TdmDevice *dev, const char *suffix)
{
    chain_add("chain", "convnet_forward_backward", suffix, dev, test_chain_convnet);
    chain_add("chain", "lenet_forward_backward", suffix, dev, test_chain_lenet);
    for (size_t i = 0; i < G_N_ELEMENTS(bwf_cases); i++) {
        conf_add("conv2d_backward_filter_layout", bwf_cases[i].name, suffix, dev, &bwf_cases[i],
                 test_chain_conv_bwf);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(fwd_cases); i++) {
        conf_add("conv2d_layout", fwd_cases[i].name, suffix, dev, &fwd_cases[i],
                 test_chain_conv_fwd);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(bn_layout_cases); i++) {
        conf_add("batchnorm_layout", bn_layout_cases[i].name, suffix, dev, &bn_layout_cases[i],
                 test_chain_bn_layout);
    }
    chain_add("chain", "residual_add", suffix, dev, test_chain_residual);
    chain_add("chain", "fused_basic_block", suffix, dev, test_chain_fused_block);
    chain_add("reorder", "to_plain", suffix, dev, test_reorder_to_plain);
    chain_add("reorder", "to_layout_of_like", suffix, dev, test_reorder_to_layout);
    chain_add("read_write", "produced_layout", suffix, dev, test_write_read_produced);
    chain_add("read_write", "plain_dtypes", suffix, dev, test_write_read_plain);
    chain_add("read_write", "narrow_view", suffix, dev, test_write_read_narrow);
}

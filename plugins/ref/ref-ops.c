/* SPDX-License-Identifier: MIT */
/* plugins/ref/ref-ops.c - the reference layer ops: gemm, conv, batch norm,
 * relu and add, and the fused ops (conv, batch norm or add with ReLU),
 * defined as the unfused ops in sequence.
 *
 * Each op is the textbook loop nest over plain row-major f32 tensors, with
 * every sum accumulated in double, so that a result can be checked by hand
 * and other backends can be compared against it. Backward ops gather (one
 * output element at a time) instead of scattering, which keeps each sum in
 * one double. The semantics are exactly those documented in
 * include/tandem/backend.h; output sizes follow PyTorch (floor division).
 */
#include <math.h>
#include <string.h>

#include "ref.h"

/* ---- gemm and bias ---- */

gboolean ref_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                  float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                  TdmTensor *bias, GError **error)
{
    const char *op = "gemm";
    if (!ref_check_plain(op, "a", a, error) || !ref_check_plain(op, "b", b, error) ||
        (bias != NULL && !ref_check_plain(op, "bias", bias, error))) {
        return FALSE;
    }
    int64_t lda = a->shape[1], ldb = b->shape[1];
    int64_t M = trans_a ? a->shape[1] : a->shape[0];
    int64_t K = trans_a ? a->shape[0] : a->shape[1];
    int64_t N = trans_b ? b->shape[0] : b->shape[1];
    int64_t cshape[2] = {M, N};
    if (c->storage == NULL && beta == 0.0f) {
        if (!ref_ensure_out(c, TDM_DTYPE_F32, 2, cshape, error)) {
            return FALSE;
        }
    } else if (!ref_check_plain(op, "c", c, error)) {
        return FALSE;
    }
    const float *A = ref_f32(a), *B = ref_f32(b);
    const float *bs = bias ? ref_f32(bias) : NULL;
    float *C = ref_f32(c);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double av = trans_a ? A[k * lda + i] : A[i * lda + k];
                double bv = trans_b ? B[j * ldb + k] : B[k * ldb + j];
                acc += av * bv;
            }
            double r = (double)alpha * acc;
            /* beta == 0 means "ignore c" (BLAS): c may hold NaN or garbage. */
            if (beta != 0.0f) {
                r += (double)beta * C[i * N + j];
            }
            if (bs != NULL) {
                r += bs[j];
            }
            C[i * N + j] = (float)r;
        }
    }
    return TRUE;
}

gboolean ref_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                       GError **error)
{
    const char *op = "bias_grad";
    if (!ref_check_plain(op, "dy", dy, error) ||
        !ref_check_plain(op, "bias_grad", bias_grad, error)) {
        return FALSE;
    }
    int64_t C = dy->shape[1], inner = 1;
    for (int d = 2; d < dy->ndim; d++) {
        inner *= dy->shape[d];
    }
    const float *g = ref_f32(dy);
    float *db = ref_f32(bias_grad);
    for (int64_t c = 0; c < C; c++) {
        double acc = 0.0;
        for (int64_t n = 0; n < dy->shape[0]; n++) {
            for (int64_t s = 0; s < inner; s++) {
                acc += g[(n * C + c) * inner + s];
            }
        }
        db[c] = (float)(db[c] + acc);
    }
    return TRUE;
}

/* ---- convolution ---- */

typedef struct {
    int64_t N, C, H, W; /* input */
    int64_t O, KH, KW;  /* filter */
    int64_t OH, OW;     /* output */
    int64_t G, Cg, Og;  /* groups, channels per group in and out */
} RefConvGeom;

/* The geometry of the input shape and the filter (or filter gradient)
 * shape; the front end (tdm_op_conv2d_*) has checked that they fit. */
static void ref_conv_geometry(const TdmConv2dParams *p, const TdmTensor *x, const TdmTensor *w,
                              RefConvGeom *g)
{
    g->N = x->shape[0];
    g->C = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->O = w->shape[0];
    g->KH = w->shape[2];
    g->KW = w->shape[3];
    g->G = p->groups;
    g->Cg = g->C / g->G;
    g->Og = g->O / g->G;
    int64_t eff_h = (int64_t)p->dilation_h * (g->KH - 1) + 1;
    int64_t eff_w = (int64_t)p->dilation_w * (g->KW - 1) + 1;
    g->OH = (g->H + 2 * p->pad_h - eff_h) / p->stride_h + 1;
    g->OW = (g->W + 2 * p->pad_w - eff_w) / p->stride_w + 1;
}

#define IDX4(a, b, c, d, B, C, D) ((((a) * (B) + (b)) * (C) + (c)) * (D) + (d))

gboolean ref_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                            GError **error)
{
    const char *op = "conv2d_forward";
    RefConvGeom g;
    if (!ref_check_plain(op, "x", x, error) || !ref_check_plain(op, "w", w, error) ||
        (bias != NULL && !ref_check_plain(op, "bias", bias, error))) {
        return FALSE;
    }
    ref_conv_geometry(p, x, w, &g);
    int64_t yshape[4] = {g.N, g.O, g.OH, g.OW};
    if (!ref_ensure_out(y, TDM_DTYPE_F32, 4, yshape, error)) {
        return FALSE;
    }
    const float *X = ref_f32(x), *Wt = ref_f32(w), *B = bias ? ref_f32(bias) : NULL;
    float *Y = ref_f32(y);
    for (int64_t n = 0; n < g.N; n++) {
        for (int64_t o = 0; o < g.O; o++) {
            int64_t grp = o / g.Og;
            for (int64_t oh = 0; oh < g.OH; oh++) {
                for (int64_t ow = 0; ow < g.OW; ow++) {
                    double acc = B ? B[o] : 0.0;
                    for (int64_t c = 0; c < g.Cg; c++) {
                        int64_t ic = grp * g.Cg + c;
                        for (int64_t kh = 0; kh < g.KH; kh++) {
                            int64_t ih = oh * p->stride_h - p->pad_h + kh * p->dilation_h;
                            if (ih < 0 || ih >= g.H) {
                                continue;
                            }
                            for (int64_t kw = 0; kw < g.KW; kw++) {
                                int64_t iw = ow * p->stride_w - p->pad_w + kw * p->dilation_w;
                                if (iw < 0 || iw >= g.W) {
                                    continue;
                                }
                                acc += (double)X[IDX4(n, ic, ih, iw, g.C, g.H, g.W)] *
                                       Wt[IDX4(o, c, kh, kw, g.Cg, g.KH, g.KW)];
                            }
                        }
                    }
                    Y[IDX4(n, o, oh, ow, g.O, g.OH, g.OW)] = (float)acc;
                }
            }
        }
    }
    return TRUE;
}

/* The output position that input position `i` meets through kernel tap `k`,
 * or -1 when there is none (off the stride grid or outside the output). */
static int64_t ref_conv_out_pos(int64_t i, int64_t k, int stride, int pad, int dilation,
                                int64_t out_size)
{
    int64_t t = i + pad - k * dilation;
    if (t < 0 || t % stride != 0 || t / stride >= out_size) {
        return -1;
    }
    return t / stride;
}

gboolean ref_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                  TdmTensor *dx, GError **error)
{
    const char *op = "conv2d_backward_data";
    RefConvGeom g;
    if (!ref_check_plain(op, "dy", dy, error) || !ref_check_plain(op, "w", w, error)) {
        return FALSE;
    }
    ref_conv_geometry(p, x_like, w, &g);
    int64_t xshape[4] = {g.N, g.C, g.H, g.W};
    if (!ref_ensure_out(dx, TDM_DTYPE_F32, 4, xshape, error)) {
        return FALSE;
    }
    const float *DY = ref_f32(dy), *Wt = ref_f32(w);
    float *DX = ref_f32(dx);
    for (int64_t n = 0; n < g.N; n++) {
        for (int64_t ic = 0; ic < g.C; ic++) {
            int64_t grp = ic / g.Cg, c = ic % g.Cg;
            for (int64_t ih = 0; ih < g.H; ih++) {
                for (int64_t iw = 0; iw < g.W; iw++) {
                    double acc = 0.0;
                    for (int64_t o = grp * g.Og; o < (grp + 1) * g.Og; o++) {
                        for (int64_t kh = 0; kh < g.KH; kh++) {
                            int64_t oh = ref_conv_out_pos(ih, kh, p->stride_h, p->pad_h,
                                                          p->dilation_h, g.OH);
                            if (oh < 0) {
                                continue;
                            }
                            for (int64_t kw = 0; kw < g.KW; kw++) {
                                int64_t ow = ref_conv_out_pos(iw, kw, p->stride_w, p->pad_w,
                                                              p->dilation_w, g.OW);
                                if (ow < 0) {
                                    continue;
                                }
                                acc += (double)DY[IDX4(n, o, oh, ow, g.O, g.OH, g.OW)] *
                                       Wt[IDX4(o, c, kh, kw, g.Cg, g.KH, g.KW)];
                            }
                        }
                    }
                    DX[IDX4(n, ic, ih, iw, g.C, g.H, g.W)] = (float)acc;
                }
            }
        }
    }
    return TRUE;
}

gboolean ref_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                    GError **error)
{
    const char *op = "conv2d_backward_filter";
    RefConvGeom g;
    if (!ref_check_plain(op, "x", x, error) || !ref_check_plain(op, "dy", dy, error) ||
        !ref_check_plain(op, "dw", dw, error) ||
        (db != NULL && !ref_check_plain(op, "db", db, error))) {
        return FALSE;
    }
    ref_conv_geometry(p, x, dw, &g);
    const float *X = ref_f32(x), *DY = ref_f32(dy);
    float *DW = ref_f32(dw);
    for (int64_t o = 0; o < g.O; o++) {
        int64_t grp = o / g.Og;
        for (int64_t c = 0; c < g.Cg; c++) {
            int64_t ic = grp * g.Cg + c;
            for (int64_t kh = 0; kh < g.KH; kh++) {
                for (int64_t kw = 0; kw < g.KW; kw++) {
                    double acc = 0.0;
                    for (int64_t n = 0; n < g.N; n++) {
                        for (int64_t oh = 0; oh < g.OH; oh++) {
                            int64_t ih = oh * p->stride_h - p->pad_h + kh * p->dilation_h;
                            if (ih < 0 || ih >= g.H) {
                                continue;
                            }
                            for (int64_t ow = 0; ow < g.OW; ow++) {
                                int64_t iw = ow * p->stride_w - p->pad_w + kw * p->dilation_w;
                                if (iw < 0 || iw >= g.W) {
                                    continue;
                                }
                                acc += (double)DY[IDX4(n, o, oh, ow, g.O, g.OH, g.OW)] *
                                       X[IDX4(n, ic, ih, iw, g.C, g.H, g.W)];
                            }
                        }
                    }
                    float *slot = &DW[IDX4(o, c, kh, kw, g.Cg, g.KH, g.KW)];
                    *slot = (float)(*slot + acc);
                }
            }
        }
    }
    if (db != NULL) {
        float *DB = ref_f32(db);
        int64_t plane = g.OH * g.OW;
        for (int64_t o = 0; o < g.O; o++) {
            double acc = 0.0;
            for (int64_t n = 0; n < g.N; n++) {
                for (int64_t s = 0; s < plane; s++) {
                    acc += DY[(n * g.O + o) * plane + s];
                }
            }
            DB[o] = (float)(DB[o] + acc);
        }
    }
    return TRUE;
}

/* ---- batch norm ---- */

/* x is [N, C] or [N, C, H, W]: element (n, c, s) is at (n * C + c) * S + s. */
static void ref_bn_dims(const TdmTensor *x, int64_t *N, int64_t *C, int64_t *S)
{
    *N = x->shape[0];
    *C = x->shape[1];
    *S = x->ndim == 4 ? x->shape[2] * x->shape[3] : 1;
}

/* An optional per-channel input. */
static gboolean ref_check_channel(const char *op, const char *what, const TdmTensor *t,
                                  GError **error)
{
    return t == NULL || ref_check_plain(op, what, t, error);
}

gboolean ref_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                               TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                               float momentum, float eps, gboolean training, TdmTensor *save_mean,
                               TdmTensor *save_var, TdmTensor *y, GError **error)
{
    const char *op = "batchnorm_forward";
    int64_t N, C, S;
    if (!ref_check_plain(op, "x", x, error) || !ref_check_channel(op, "gamma", gamma, error) ||
        !ref_check_channel(op, "beta", beta, error) ||
        !ref_check_channel(op, "running_mean", running_mean, error) ||
        !ref_check_channel(op, "running_var", running_var, error)) {
        return FALSE;
    }
    ref_bn_dims(x, &N, &C, &S);
    int64_t m = N * S;
    int64_t xshape[4] = {x->shape[0], x->shape[1], x->ndim == 4 ? x->shape[2] : 0,
                         x->ndim == 4 ? x->shape[3] : 0};
    if ((training && save_mean != NULL &&
         !ref_ensure_out(save_mean, TDM_DTYPE_F32, 1, &C, error)) ||
        (training && save_var != NULL && !ref_ensure_out(save_var, TDM_DTYPE_F32, 1, &C, error)) ||
        !ref_ensure_out(y, TDM_DTYPE_F32, x->ndim, xshape, error)) {
        return FALSE;
    }
    const float *X = ref_f32(x);
    const float *G = gamma ? ref_f32(gamma) : NULL, *B = beta ? ref_f32(beta) : NULL;
    float *Y = ref_f32(y);
    for (int64_t c = 0; c < C; c++) {
        double mean, var;
        if (training) {
            double sum = 0.0, sq = 0.0;
            for (int64_t n = 0; n < N; n++) {
                for (int64_t s = 0; s < S; s++) {
                    sum += X[(n * C + c) * S + s];
                }
            }
            mean = sum / (double)m;
            for (int64_t n = 0; n < N; n++) {
                for (int64_t s = 0; s < S; s++) {
                    double d = X[(n * C + c) * S + s] - mean;
                    sq += d * d;
                }
            }
            var = sq / (double)m;
            if (save_mean != NULL) {
                ref_f32(save_mean)[c] = (float)mean;
            }
            if (save_var != NULL) {
                ref_f32(save_var)[c] = (float)var;
            }
            if (running_mean != NULL) {
                float *rm = &ref_f32(running_mean)[c];
                *rm = (float)((1.0 - momentum) * *rm + momentum * mean);
            }
            if (running_var != NULL) {
                float *rv = &ref_f32(running_var)[c];
                double unbiased = sq / (double)(m - 1);
                *rv = (float)((1.0 - momentum) * *rv + momentum * unbiased);
            }
        } else {
            mean = ref_f32(running_mean)[c];
            var = ref_f32(running_var)[c];
        }
        double invstd = 1.0 / sqrt(var + (double)eps);
        double gm = G ? G[c] : 1.0, bt = B ? B[c] : 0.0;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                Y[i] = (float)((X[i] - mean) * invstd * gm + bt);
            }
        }
    }
    return TRUE;
}

gboolean ref_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                GError **error)
{
    const char *op = "batchnorm_backward";
    int64_t N, C, S;
    if (!ref_check_plain(op, "x", x, error) || !ref_check_plain(op, "dy", dy, error) ||
        !ref_check_channel(op, "gamma", gamma, error) ||
        !ref_check_plain(op, "save_mean", save_mean, error) ||
        !ref_check_plain(op, "save_var", save_var, error) ||
        !ref_check_channel(op, "dgamma", dgamma, error) ||
        !ref_check_channel(op, "dbeta", dbeta, error)) {
        return FALSE;
    }
    ref_bn_dims(x, &N, &C, &S);
    int64_t xshape[4] = {x->shape[0], x->shape[1], x->ndim == 4 ? x->shape[2] : 0,
                         x->ndim == 4 ? x->shape[3] : 0};
    if (dx != NULL && !ref_ensure_out(dx, TDM_DTYPE_F32, x->ndim, xshape, error)) {
        return FALSE;
    }
    const float *X = ref_f32(x), *DY = ref_f32(dy), *G = gamma ? ref_f32(gamma) : NULL;
    double m = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double mean = ref_f32(save_mean)[c];
        double invstd = 1.0 / sqrt((double)ref_f32(save_var)[c] + (double)eps);
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                sum_dy += DY[i];
                sum_dy_xhat += DY[i] * (X[i] - mean) * invstd;
            }
        }
        if (dgamma != NULL) {
            ref_f32(dgamma)[c] = (float)(ref_f32(dgamma)[c] + sum_dy_xhat);
        }
        if (dbeta != NULL) {
            ref_f32(dbeta)[c] = (float)(ref_f32(dbeta)[c] + sum_dy);
        }
        if (dx != NULL) {
            double k = (G ? G[c] : 1.0) * invstd / m;
            float *DX = ref_f32(dx);
            for (int64_t n = 0; n < N; n++) {
                for (int64_t s = 0; s < S; s++) {
                    int64_t i = (n * C + c) * S + s;
                    double xhat = (X[i] - mean) * invstd;
                    DX[i] = (float)(k * (m * DY[i] - sum_dy - xhat * sum_dy_xhat));
                }
            }
        }
    }
    return TRUE;
}

/* ---- elementwise ---- */

gboolean ref_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                          GError **error)
{
    if (!ref_check_plain("relu_forward", "x", x, error) ||
        !ref_ensure_out(y, TDM_DTYPE_F32, x->ndim, x->shape, error)) {
        return FALSE;
    }
    const float *X = ref_f32(x);
    float *Y = ref_f32(y);
    int64_t n = tdm_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
    }
    return TRUE;
}

gboolean ref_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                           TdmTensor *dx, GError **error)
{
    const char *op = "relu_backward";
    if (!ref_check_plain(op, "y", y, error) || !ref_check_plain(op, "dy", dy, error) ||
        !ref_ensure_out(dx, TDM_DTYPE_F32, y->ndim, y->shape, error)) {
        return FALSE;
    }
    const float *Y = ref_f32(y), *DY = ref_f32(dy);
    float *DX = ref_f32(dx);
    int64_t n = tdm_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        DX[i] = Y[i] > 0.0f ? DY[i] : 0.0f;
    }
    return TRUE;
}

gboolean ref_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                 GError **error)
{
    if (!ref_check_plain("add", "a", a, error) || !ref_check_plain("add", "b", b, error) ||
        !ref_ensure_out(y, TDM_DTYPE_F32, a->ndim, a->shape, error)) {
        return FALSE;
    }
    const float *A = ref_f32(a), *B = ref_f32(b);
    float *Y = ref_f32(y);
    int64_t n = tdm_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        Y[i] = A[i] + B[i];
    }
    return TRUE;
}

/* ---- fused ops: defined by the unfused ones, which is what makes them
 * the oracle for the fused kernels of other backends ---- */

/* The ReLU of a fused forward: relu_forward on y in place once the op
 * (ok) has written y; an error names the fused op. */
static gboolean then_relu(TdmDevice *dev, const char *op, gboolean ok, TdmTensor *y, GError **error)
{
    if (!ok || !ref_relu_forward(dev, NULL, y, y, error)) {
        g_prefix_error(error, "(%s) ", op);
        return FALSE;
    }
    return TRUE;
}

gboolean ref_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                    TdmTensor *running_var, float momentum, float eps,
                                    gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                    TdmTensor *workspace, TdmTensor *y, GError **error)
{
    if (!then_relu(dev, "batchnorm_relu_forward",
                   ref_batchnorm_forward(dev, cache, x, gamma, beta, running_mean, running_var,
                                         momentum, eps, training, save_mean, save_var, y, error),
                   y, error)) {
        return FALSE;
    }
    if (!training || workspace == NULL) {
        return TRUE;
    }
    /* The mask y > 0, one byte per element, for the backward without y. */
    if (!ref_ensure_out(workspace, TDM_DTYPE_U8, y->ndim, y->shape, error)) {
        g_prefix_error(error, "(batchnorm_relu_forward) ");
        return FALSE;
    }
    const float *Y = ref_f32(y);
    guint8 *M = tdm_tensor_data(workspace);
    int64_t n = tdm_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        M[i] = Y[i] > 0.0f;
    }
    return TRUE;
}

gboolean ref_batchnorm_relu_backward_ws(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                        TdmTensor *workspace, TdmTensor *dy, TdmTensor *gamma,
                                        TdmTensor *save_mean, TdmTensor *save_var, float eps,
                                        TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                        GError **error)
{
    const char *op = "batchnorm_relu_backward_ws";
    int64_t n = tdm_tensor_numel(dy);
    if (!ref_check_plain(op, "dy", dy, error)) {
        return FALSE;
    }
    if (workspace->dtype != TDM_DTYPE_U8 || tdm_tensor_numel(workspace) != n) {
        g_autofree char *s = tdm_tensor_shape_string(workspace);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "ref %s: the workspace %s %s is not the mask a training-mode "
                    "batchnorm_relu_forward leaves (u8, one byte per element of dy)",
                    op, s, tdm_dtype_name(workspace->dtype));
        return FALSE;
    }
    g_autoptr(TdmTensor) masked = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    if (!ref_ensure_out(masked, TDM_DTYPE_F32, dy->ndim, dy->shape, error)) {
        return FALSE;
    }
    const float *DY = ref_f32(dy);
    const guint8 *M = tdm_tensor_data(workspace);
    float *D = ref_f32(masked);
    for (int64_t i = 0; i < n; i++) {
        D[i] = M[i] ? DY[i] : 0.0f;
    }
    if (!ref_batchnorm_backward(dev, cache, x, masked, gamma, save_mean, save_var, eps, dx, dgamma,
                                dbeta, error)) {
        g_prefix_error(error, "(%s) ", op);
        return FALSE;
    }
    return TRUE;
}

gboolean ref_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                     TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                     float eps, TdmTensor *dx, TdmTensor *dgamma,
                                     TdmTensor *dbeta, GError **error)
{
    g_autoptr(TdmTensor) masked = tdm_tensor_new_empty(dev, TDM_DTYPE_F32);
    if (!ref_relu_backward(dev, NULL, y, dy, masked, error) ||
        !ref_batchnorm_backward(dev, cache, x, masked, gamma, save_mean, save_var, eps, dx, dgamma,
                                dbeta, error)) {
        g_prefix_error(error, "(batchnorm_relu_backward) ");
        return FALSE;
    }
    return TRUE;
}

gboolean ref_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                      GError **error)
{
    return then_relu(dev, "add_relu", ref_add(dev, cache, a, b, y, error), y, error);
}

gboolean ref_conv2d_relu_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                 TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                 GError **error)
{
    return then_relu(dev, "conv2d_relu_forward",
                     ref_conv2d_forward(dev, cache, p, x, w, bias, y, error), y, error);
}

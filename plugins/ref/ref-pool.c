/* SPDX-License-Identifier: MIT */
/* plugins/ref/ref-pool.c - the reference pooling ops: max, average and
 * global average pooling, forward and backward.
 *
 * Output sizes follow PyTorch (floor division, no ceil mode) and so does
 * the padding rule: at most half the kernel, so every window holds at least
 * one real input. Max pooling pads with -infinity and records, per output,
 * the flat h * W + w index of the first maximum in its plane (the workspace,
 * i32 [N, C, OH, OW]); average pooling divides by PyTorch's count, which
 * with count_include_pad counts the padded cells but never the part of a
 * window beyond the padding.
 */
#include <math.h>
#include <string.h>

#include "ref.h"

typedef struct {
    int64_t N, C, H, W, OH, OW;
} RefPoolGeom;

/* The geometry of x under p; the front end (tdm_op_*pool2d_*) has checked
 * both against PyTorch's rules. */
static void ref_pool_geometry(const TdmPool2dParams *p, const TdmTensor *x, RefPoolGeom *g)
{
    g->N = x->shape[0];
    g->C = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->OH = (g->H + 2 * p->pad_h - p->kernel_h) / p->stride_h + 1;
    g->OW = (g->W + 2 * p->pad_w - p->kernel_w) / p->stride_w + 1;
}

/* The start of a forward: x plain, its geometry, y (out) shaped
 * [N, C, OH, OW]. */
static gboolean pool_forward_begin(const char *op, const TdmPool2dParams *p, const TdmTensor *x,
                                   TdmTensor *y, RefPoolGeom *g, GError **error)
{
    if (!ref_check_plain(op, "x", x, error)) {
        return FALSE;
    }
    ref_pool_geometry(p, x, g);
    int64_t yshape[4] = {g->N, g->C, g->OH, g->OW};
    return ref_ensure_out(y, TDM_DTYPE_F32, 4, yshape, error);
}

/* The start of a backward: dy plain, the geometry of x_like, dx (out)
 * shaped like x_like. */
static gboolean pool_backward_begin(const char *op, const TdmPool2dParams *p, const TdmTensor *dy,
                                    const TdmTensor *x_like, TdmTensor *dx, RefPoolGeom *g,
                                    GError **error)
{
    if (!ref_check_plain(op, "dy", dy, error)) {
        return FALSE;
    }
    ref_pool_geometry(p, x_like, g);
    int64_t xshape[4] = {g->N, g->C, g->H, g->W};
    return ref_ensure_out(dx, TDM_DTYPE_F32, 4, xshape, error);
}

gboolean ref_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error)
{
    RefPoolGeom g;
    if (!pool_forward_begin("maxpool2d_forward", p, x, y, &g, error) ||
        !ref_ensure_out(workspace, TDM_DTYPE_I32, 4, y->shape, error)) {
        return FALSE;
    }
    /* The workspace holds, per output, the flat h * W + w index of the chosen
     * input in its plane: the first maximum, or a NaN (as PyTorch). */
    const float *X = ref_f32(x);
    float *Y = ref_f32(y);
    gint32 *WS = tdm_tensor_data(workspace);
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        const float *plane = X + nc * g.H * g.W;
        for (int64_t oh = 0; oh < g.OH; oh++) {
            int64_t h0 = oh * p->stride_h - p->pad_h;
            for (int64_t ow = 0; ow < g.OW; ow++) {
                int64_t w0 = ow * p->stride_w - p->pad_w;
                float best = -INFINITY;
                int64_t best_i = -1;
                for (int64_t ih = MAX(h0, 0); ih < MIN(h0 + p->kernel_h, g.H); ih++) {
                    for (int64_t iw = MAX(w0, 0); iw < MIN(w0 + p->kernel_w, g.W); iw++) {
                        float v = plane[ih * g.W + iw];
                        if (best_i < 0 || v > best || isnan(v)) {
                            best = v;
                            best_i = ih * g.W + iw;
                        }
                    }
                }
                int64_t o = (nc * g.OH + oh) * g.OW + ow;
                Y[o] = best;
                WS[o] = (gint32)best_i;
            }
        }
    }
    return TRUE;
}

gboolean ref_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                TdmTensor *dx, GError **error)
{
    const char *op = "maxpool2d_backward";
    RefPoolGeom g;
    if (!ref_check_plain(op, "workspace", workspace, error) ||
        !pool_backward_begin(op, p, dy, x_like, dx, &g, error)) {
        return FALSE;
    }
    /* The workspace is ref's own (the front end cannot check it): i32
     * [N, C, OH, OW] as ref's forward makes it. */
    if (workspace->dtype != TDM_DTYPE_I32 || !tdm_tensor_same_shape(workspace, dy)) {
        g_autofree char *s = tdm_tensor_shape_string(workspace);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "ref %s: workspace %s (%s) is not what ref's maxpool2d_forward made for dy", op,
                    s, tdm_dtype_name(workspace->dtype));
        return FALSE;
    }
    const float *DY = ref_f32(dy);
    const gint32 *WS = tdm_tensor_data(workspace);
    float *DX = ref_f32(dx);
    memset(DX, 0, sizeof(float) * (size_t)(g.N * g.C * g.H * g.W));
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        for (int64_t o = 0; o < g.OH * g.OW; o++) {
            gint32 i = WS[nc * g.OH * g.OW + o];
            if (i < 0 || i >= g.H * g.W) {
                g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                            "ref %s: workspace entry %" G_GINT64_FORMAT " is %d, outside the "
                            "%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT " plane",
                            op, nc * g.OH * g.OW + o, i, g.H, g.W);
                return FALSE;
            }
            DX[nc * g.H * g.W + i] += DY[nc * g.OH * g.OW + o];
        }
    }
    return TRUE;
}

/* The window of output (oh, ow) clipped to the input, and its divisor
 * (PyTorch's: with count_include_pad the window clipped to the padded input). */
static void ref_avg_window(const TdmPool2dParams *p, const RefPoolGeom *g, int64_t oh, int64_t ow,
                           int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1, double *divisor)
{
    int64_t hs = oh * p->stride_h - p->pad_h, ws = ow * p->stride_w - p->pad_w;
    int64_t he = MIN(hs + p->kernel_h, g->H + p->pad_h);
    int64_t we = MIN(ws + p->kernel_w, g->W + p->pad_w);
    int64_t padded = (he - hs) * (we - ws);
    *h0 = MAX(hs, 0);
    *w0 = MAX(ws, 0);
    *h1 = MIN(he, g->H);
    *w1 = MIN(we, g->W);
    *divisor = p->count_include_pad ? (double)padded : (double)((*h1 - *h0) * (*w1 - *w0));
}

gboolean ref_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, GError **error)
{
    RefPoolGeom g;
    if (!pool_forward_begin("avgpool2d_forward", p, x, y, &g, error)) {
        return FALSE;
    }
    const float *X = ref_f32(x);
    float *Y = ref_f32(y);
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        const float *plane = X + nc * g.H * g.W;
        for (int64_t oh = 0; oh < g.OH; oh++) {
            for (int64_t ow = 0; ow < g.OW; ow++) {
                int64_t h0, h1, w0, w1;
                double div, acc = 0.0;
                ref_avg_window(p, &g, oh, ow, &h0, &h1, &w0, &w1, &div);
                for (int64_t ih = h0; ih < h1; ih++) {
                    for (int64_t iw = w0; iw < w1; iw++) {
                        acc += plane[ih * g.W + iw];
                    }
                }
                Y[(nc * g.OH + oh) * g.OW + ow] = (float)(acc / div);
            }
        }
    }
    return TRUE;
}

gboolean ref_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                GError **error)
{
    RefPoolGeom g;
    if (!pool_backward_begin("avgpool2d_backward", p, dy, x_like, dx, &g, error)) {
        return FALSE;
    }
    /* Overlapping windows (stride < kernel) add up: accumulate in double. */
    size_t plane_n = (size_t)(g.H * g.W);
    double *acc = g_new(double, plane_n);
    const float *DY = ref_f32(dy);
    float *DX = ref_f32(dx);
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        memset(acc, 0, sizeof(double) * plane_n);
        for (int64_t oh = 0; oh < g.OH; oh++) {
            for (int64_t ow = 0; ow < g.OW; ow++) {
                int64_t h0, h1, w0, w1;
                double div;
                ref_avg_window(p, &g, oh, ow, &h0, &h1, &w0, &w1, &div);
                double share = DY[(nc * g.OH + oh) * g.OW + ow] / div;
                for (int64_t ih = h0; ih < h1; ih++) {
                    for (int64_t iw = w0; iw < w1; iw++) {
                        acc[ih * g.W + iw] += share;
                    }
                }
            }
        }
        for (size_t i = 0; i < plane_n; i++) {
            DX[(size_t)nc * plane_n + i] = (float)acc[i];
        }
    }
    g_free(acc);
    return TRUE;
}

gboolean ref_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                                    GError **error)
{
    if (!ref_check_plain("global_avgpool_forward", "x", x, error)) {
        return FALSE;
    }
    int64_t NC = x->shape[0] * x->shape[1], S = x->shape[2] * x->shape[3];
    if (!ref_ensure_out(y, TDM_DTYPE_F32, 2, x->shape, error)) {
        return FALSE;
    }
    const float *X = ref_f32(x);
    float *Y = ref_f32(y);
    for (int64_t i = 0; i < NC; i++) {
        double acc = 0.0;
        for (int64_t s = 0; s < S; s++) {
            acc += X[i * S + s];
        }
        Y[i] = (float)(acc / (double)S);
    }
    return TRUE;
}

gboolean ref_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                     const TdmTensor *x_like, TdmTensor *dx, GError **error)
{
    /* dy is [N, C] or [N, C, 1, 1]: the same numbers. */
    if (!ref_check_plain("global_avgpool_backward", "dy", dy, error)) {
        return FALSE;
    }
    int64_t xshape[4] = {x_like->shape[0], x_like->shape[1], x_like->shape[2], x_like->shape[3]};
    if (!ref_ensure_out(dx, TDM_DTYPE_F32, 4, xshape, error)) {
        return FALSE;
    }
    int64_t NC = xshape[0] * xshape[1], S = xshape[2] * xshape[3];
    const float *DY = ref_f32(dy);
    float *DX = ref_f32(dx);
    for (int64_t i = 0; i < NC; i++) {
        float v = (float)((double)DY[i] / (double)S);
        for (int64_t s = 0; s < S; s++) {
            DX[i * S + s] = v;
        }
    }
    return TRUE;
}

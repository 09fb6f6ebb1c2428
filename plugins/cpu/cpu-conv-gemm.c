/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-gemm.c - backward weights as one matrix product:
 * dw [O][C*KH*KW] += dy^T [O][P] x col [P][C*KH*KW], P = N*OH*OW, where
 * col is x unrolled (im2col) and dy^T is the output gradient with its
 * pixels as rows, both gathered from the tensors' own layouts (nChw16c,
 * nChw8c, NCHW or NHWC) into the device's scratchpad, and the product is
 * oneDNN's sgemm with beta 1, straight into the plain gradient.
 *
 * For layers with few pixels and many channels (resnet's last stages:
 * 2x2 to 8x8 planes, 256 or 512 channels) oneDNN 2.6's backward-weights
 * primitive splits the images over the threads, each with its own copy
 * of the weight gradient (9 MiB per thread for a 512-channel 3x3 layer),
 * then sums the copies and reorders the result into the plain gradient:
 * it is bound by memory traffic, not arithmetic. Here no thread keeps a
 * copy: sgemm splits the output, and the gathering passes read each input
 * once. Where it loses (large planes, where im2col is KH*KW times x), the
 * tuner keeps oneDNN's kernel; the scratchpad it needs is bounded by
 * TDM_CPU_WORKSPACE_LIMIT like oneDNN's Winograd kernels'.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-own.h"

gboolean cpu_gemm_bwf_geom(const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *dymd,
                           const int64_t *wshape, const TdmConv2dParams *p, CpuGemmGeom *g)
{
    CpuPlanes xo, yo;
    if (!cpu_planes(xmd, &xo) || !cpu_planes(dymd, &yo) || p->groups > 1 || p->dilation_h > 1 ||
        p->dilation_w > 1 || p->stride_h < 1 || p->stride_w < 1) {
        return FALSE;
    }
    *g = (CpuGemmGeom){
        .n = xmd->dims[0], .c = xmd->dims[1], .h = xmd->dims[2], .w = xmd->dims[3],
        .xb = xo.b, .xplanes = xo.planes / xmd->dims[0],
        .o = dymd->dims[1], .oh = dymd->dims[2], .ow = dymd->dims[3],
        .yb = yo.b, .yplanes = yo.planes / dymd->dims[0],
        .kh = wshape[2], .kw = wshape[3], .sh = p->stride_h, .sw = p->stride_w,
        .ph = p->pad_h, .pw = p->pad_w,
    };
    return dymd->dims[0] == g->n && wshape[0] == g->o && wshape[1] == g->c;
}

static int64_t rows(const CpuGemmGeom *g)
{
    return g->n * g->oh * g->ow;
}

static int64_t cols(const CpuGemmGeom *g)
{
    return g->c * g->kh * g->kw;
}

size_t cpu_gemm_bwf_work_bytes(const CpuGemmGeom *g)
{
    return sizeof(float) * (size_t)(rows(g) * (cols(g) + g->o));
}

/* Where element (n, c, 0, 0) of a tensor seen as planes of [h][w][b]
 * floats (cpu_planes) is: NCHW has b = 1, NHWC one plane per image with
 * b = C, nChw8c / nChw16c one plane per image and channel block. Pixel
 * (y, x) of that channel is (y * w + x) * b further. */
static inline int64_t channel_base(int64_t planes_per_image, int64_t b, int64_t h, int64_t w,
                                   int64_t n, int64_t c)
{
    return (n * planes_per_image + c / b) * h * w * b + c % b;
}

/* col [P][C][KH][KW]: row (n, oy, ox) holds the input window of that
 * output pixel, zero where it falls in the padding. */
static void gather_columns(const CpuGemmGeom *g, const float *x, float *col)
{
    const int64_t np = rows(g), nc = cols(g), b = g->xb;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < np; r++) {
        const int64_t n = r / (g->oh * g->ow), oy = r / g->ow % g->oh, ox = r % g->ow;
        float *dst = col + r * nc;
        for (int64_t c = 0; c < g->c; c++) {
            const float *src = x + channel_base(g->xplanes, b, g->h, g->w, n, c);
            for (int64_t ky = 0; ky < g->kh; ky++) {
                const int64_t y = oy * g->sh - g->ph + ky;
                if (y < 0 || y >= g->h) {
                    memset(dst, 0, sizeof(float) * (size_t)g->kw);
                    dst += g->kw;
                    continue;
                }
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    const int64_t xx = ox * g->sw - g->pw + kx;
                    *dst++ = xx < 0 || xx >= g->w ? 0.0f : src[(y * g->w + xx) * b];
                }
            }
        }
    }
}

/* dyt [P][O]: the output gradient, one row per pixel. */
static void gather_rows(const CpuGemmGeom *g, const float *dy, float *dyt)
{
    const int64_t np = rows(g);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < np; r++) {
        const int64_t n = r / (g->oh * g->ow), oy = r / g->ow % g->oh, ox = r % g->ow;
        const int64_t pix = (oy * g->ow + ox) * g->yb;
        for (int64_t o = 0; o < g->o; o++) {
            dyt[r * g->o + o] = dy[channel_base(g->yplanes, g->yb, g->oh, g->ow, n, o) + pix];
        }
    }
}

gboolean cpu_gemm_bwf_run(const CpuGemmGeom *g, const float *x, const float *dy, float *dw,
                          float *db, void *work)
{
    const int64_t np = rows(g), nc = cols(g);
    float *col = work, *dyt = col + np * nc;
    gather_columns(g, x, col);
    gather_rows(g, dy, dyt);
    if (db != NULL) {
        /* in pixel order, whatever the thread count: the same bits */
        for (int64_t r = 0; r < np; r++) {
            for (int64_t o = 0; o < g->o; o++) {
                db[o] += dyt[r * g->o + o];
            }
        }
    }
    return dnnl_sgemm('T', 'N', g->o, nc, np, 1.0f, dyt, g->o, col, nc, 1.0f, dw, nc) ==
           dnnl_success;
}

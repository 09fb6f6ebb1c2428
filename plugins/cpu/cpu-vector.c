/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-vector.c - the vector ops on plain contiguous tensors:
 * fill, copy, scale, axpy and sum of squares.
 *
 * The core uses them on parameters, gradients and their arenas (zeroing,
 * averaging, accumulating, clipping, copies): flat loops (cpu-kernel.h
 * says how they are compiled and split over threads) with no oneDNN
 * primitive behind them. The core's front ends (tdm_op_fill, ...) hand
 * them only f32 tensors of matching sizes (copy: of any one dtype).
 */
#include "config.h"

#include <string.h>

#include "cpu-kernel.h"

/* What a range of a vector op works on. */
typedef struct {
    float *y;        /* the tensor written */
    const float *x;  /* the tensor read (axpy, sum of squares) */
    float a;         /* fill: the value; scale, axpy: the factor */
    double sum;      /* sum of squares: the result, summed over the ranges */
} VecCtx;

/* ---- kernels ---- */

CPU_KERNEL static void k_fill(float *restrict y, float v, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = v;
    }
}

static void r_fill(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    if (c->a == 0.0f) {
        memset(c->y + i0, 0, sizeof(float) * (size_t)(i1 - i0));
    } else {
        k_fill(c->y + i0, c->a, i1 - i0);
    }
}

CPU_KERNEL static void k_axpy(float *restrict y, const float *restrict x, float a, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] += a * x[i];
    }
}

static void r_axpy(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    k_axpy(c->y + i0, c->x + i0, c->a, i1 - i0);
}

CPU_KERNEL static void k_scale(float *restrict y, float a, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] *= a;
    }
}

static void r_scale(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    k_scale(c->y + i0, c->a, i1 - i0);
}

/* float partial sums over short blocks, added in double */
CPU_KERNEL static double k_sum_squares(const float *restrict x, int64_t n)
{
    double total = 0;
    for (int64_t i0 = 0; i0 < n; i0 += 4096) {
        int64_t i1 = MIN(n, i0 + 4096);
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = i0; i < i1; i++) {
            s += x[i] * x[i];
        }
        total += s;
    }
    return total;
}

static void r_sum_squares(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    double s = k_sum_squares(c->x + i0, i1 - i0);
#pragma omp atomic
    c->sum += s;
}

/* ---- vector ops ---- */

gboolean cpu_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error)
{
    VecCtx c = {.y = tdm_tensor_data(x), .a = value};
    cpu_par_range(tdm_tensor_numel(x), r_fill, &c);
    return TRUE;
}

gboolean cpu_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error)
{
    if (src != dst) {
        memcpy(tdm_tensor_data(dst), tdm_tensor_data(src), tdm_tensor_nbytes(src));
    }
    return TRUE;
}

gboolean cpu_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error)
{
    VecCtx c = {.y = tdm_tensor_data(x), .a = alpha};
    cpu_par_range(tdm_tensor_numel(x), r_scale, &c);
    return TRUE;
}

gboolean cpu_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    VecCtx c = {.y = tdm_tensor_data(y), .x = tdm_tensor_data(x), .a = alpha};
    cpu_par_range(tdm_tensor_numel(x), r_axpy, &c);
    return TRUE;
}

gboolean cpu_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    VecCtx c = {.x = tdm_tensor_data(x)};
    cpu_par_range(tdm_tensor_numel(x), r_sum_squares, &c);
    double total = c.sum;
    *result = total;
    return TRUE;
}

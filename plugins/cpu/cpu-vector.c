/* plugins/cpu/cpu-vector.c - the vector ops on plain contiguous tensors:
 * fill, copy, scale, axpy and sum of squares.
 *
 * The core uses them on parameters, gradients and their arenas (zeroing,
 * averaging, accumulating, clipping, copies): flat loops (cpu-kernel.h
 * says how they are compiled and split over threads) with no oneDNN
 * primitive behind them. copy also takes a strided or privately laid out
 * source into plain order. Their input checks (cpu_check_vec,
 * cpu_check_f32_pair) are shared with the casts and the optimizer updates.
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

gboolean cpu_check_vec(const TdmTensor *t, const char *op, GError **error)
{
    if (t == NULL || t->storage == NULL || !tdm_tensor_is_contiguous(t)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu %s: needs a plain contiguous tensor with storage", op);
        return FALSE;
    }
    return TRUE;
}

gboolean cpu_check_f32_pair(const TdmTensor *a, const TdmTensor *b, const char *op,
                            GError **error)
{
    if (!cpu_check_vec(a, op, error) || !cpu_check_vec(b, op, error)) {
        return FALSE;
    }
    if (a->dtype != TDM_DTYPE_F32 || b->dtype != TDM_DTYPE_F32 ||
        tdm_tensor_numel(a) != tdm_tensor_numel(b)) {
        g_autofree char *sa = tdm_tensor_shape_string(a);
        g_autofree char *sb = tdm_tensor_shape_string(b);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu %s: f32 tensors %s and %s differ in size", op, sa, sb);
        return FALSE;
    }
    return TRUE;
}

gboolean cpu_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error)
{
    if (!cpu_check_vec(x, "fill", error)) {
        return FALSE;
    }
    int64_t n = tdm_tensor_numel(x);
    void *p = tdm_tensor_data(x);
    switch (x->dtype) {
    case TDM_DTYPE_F32: {
        VecCtx c = {.y = p, .a = value};
        cpu_par_range(n, r_fill, &c);
        break;
    }
    case TDM_DTYPE_I32:
        for (int64_t i = 0; i < n; i++) {
            ((int32_t *)p)[i] = (int32_t)value;
        }
        break;
    case TDM_DTYPE_I64:
        for (int64_t i = 0; i < n; i++) {
            ((int64_t *)p)[i] = (int64_t)value;
        }
        break;
    case TDM_DTYPE_U8:
        memset(p, (int)(guint8)value, (size_t)n);
        break;
    default:
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED, "cpu fill: dtype %s",
                    tdm_dtype_name(x->dtype));
        return FALSE;
    }
    return TRUE;
}

gboolean cpu_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error)
{
    if (src->storage == NULL || dst->storage == NULL || src->dtype != dst->dtype ||
        tdm_tensor_numel(src) != tdm_tensor_numel(dst) || !tdm_tensor_is_contiguous(dst)) {
        g_autofree char *a = tdm_tensor_shape_string(src);
        g_autofree char *b = tdm_tensor_shape_string(dst);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cpu copy: %s %s into plain %s %s", tdm_dtype_name(src->dtype), a,
                    tdm_dtype_name(dst->dtype), b);
        return FALSE;
    }
    if (tdm_tensor_is_contiguous(src)) {
        if (src != dst) {
            memcpy(tdm_tensor_data(dst), tdm_tensor_data(src), tdm_tensor_nbytes(src));
        }
        return TRUE;
    }
    if (src->layout == NULL) {
        int64_t strides[TDM_MAX_DIMS], s = 1;
        for (int i = src->ndim - 1; i >= 0; i--) {
            strides[i] = s;
            s *= src->shape[i];
        }
        cpu_strided_copy(tdm_tensor_data(dst), strides, tdm_tensor_data(src), src->stride,
                         src->shape, src->ndim, tdm_dtype_size(src->dtype));
        return TRUE;
    }
    /* a private layout: into plain order (rare: not in a training step) */
    CpuEntry *e = NULL;
    const float *p;
    if (!cpu_plain_input(dev, NULL, CPU_OP_VECTOR, src, &p, &e, error)) {
        return FALSE;
    }
    memcpy(tdm_tensor_data(dst), p, tdm_tensor_nbytes(dst));
    cpu_entry_release(NULL, e);
    return TRUE;
}

gboolean cpu_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error)
{
    if (!cpu_check_f32_pair(x, x, "scale", error)) {
        return FALSE;
    }
    VecCtx c = {.y = tdm_tensor_data(x), .a = alpha};
    cpu_par_range(tdm_tensor_numel(x), r_scale, &c);
    return TRUE;
}

gboolean cpu_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    if (!cpu_check_f32_pair(x, y, "axpy", error)) {
        return FALSE;
    }
    VecCtx c = {.y = tdm_tensor_data(y), .x = tdm_tensor_data(x), .a = alpha};
    cpu_par_range(tdm_tensor_numel(x), r_axpy, &c);
    return TRUE;
}

gboolean cpu_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    if (!cpu_check_f32_pair(x, x, "sum_squares", error)) {
        return FALSE;
    }
    VecCtx c = {.x = tdm_tensor_data(x)};
    cpu_par_range(tdm_tensor_numel(x), r_sum_squares, &c);
    double total = c.sum;
    *result = total;
    return TRUE;
}

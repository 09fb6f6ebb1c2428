/* plugins/cpu/cpu-vector.c - the cpu backend's vectorised loops: flat
 * elementwise ops over dense layouts, vector ops, casts and the fused
 * optimizer updates.
 *
 * These are memory-bound passes over contiguous data. Each hot loop is a
 * leaf "kernel" over a range, marked `omp simd` so that it is vectorised
 * whatever -O level the build uses, and compiled as GCC target clones
 * (AVX-512, AVX2, baseline) picked at load time, so the plugin runs on any
 * x86-64 and still uses wide vectors where they exist. cpu_par_range splits
 * a range over the OpenMP pool oneDNN uses (never a second pool) in
 * contiguous, cache-line aligned chunks; small ranges stay on the calling
 * thread, where waking the pool would cost more than the work.
 */
#include "config.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_KERNEL __attribute__((target_clones("avx512f", "avx2", "default"), noinline))
#else
#define CPU_KERNEL __attribute__((noinline))
#endif

typedef void (*CpuRangeFn)(int64_t i0, int64_t i1, void *ctx);

static void cpu_par_range(int64_t n, CpuRangeFn fn, void *ctx)
{
    if (n <= CPU_PAR_MIN) {
        fn(0, n, ctx);
        return;
    }
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t chunk = ((n + nt - 1) / nt + 15) / 16 * 16;
        int64_t i0 = MIN(n, chunk * t), i1 = MIN(n, i0 + chunk);
        if (i1 > i0) {
            fn(i0, i1, ctx);
        }
    }
}

typedef struct {
    float *y;
    const float *x;
    float a, b, c, d, e;
    float *u, *v;
    const guint8 *m;
    int flags;
    double sum;
    float *zero; /* optimizer updates: the gradient (x) to zero after reading */
} VecCtx;

CPU_KERNEL static void k_accumulate(float *restrict y, const float *restrict x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] += x[i];
    }
}

static void r_accumulate(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    k_accumulate(c->y + i0, c->x + i0, i1 - i0);
}

void cpu_accumulate(float *dst, const float *src, int64_t n)
{
    VecCtx c = {.y = dst, .x = src};
    cpu_par_range(n, r_accumulate, &c);
}

/* ---- vector kernels ---- */

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

CPU_KERNEL static void k_u8_to_f32(float *restrict y, const guint8 *restrict u, float k, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = (float)u[i] * k;
    }
}

static void r_u8_to_f32(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    k_u8_to_f32(c->y + i0, c->m + i0, c->a, i1 - i0);
}

/* PyTorch's SGD; flags: 1 = first step, 2 = nesterov */
CPU_KERNEL static void k_sgd_momentum(float *restrict p, const float *restrict g, float *restrict b,
                                      float lr, float wd, float mu, float damp, int flags,
                                      int64_t n)
{
    if (flags & 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float gi = g[i] + wd * p[i];
            b[i] = gi;
            p[i] -= lr * ((flags & 2) ? gi + mu * gi : gi);
        }
        return;
    }
    if (flags & 2) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float gi = g[i] + wd * p[i];
            float bi = mu * b[i] + damp * gi;
            b[i] = bi;
            p[i] -= lr * (gi + mu * bi);
        }
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        float bi = mu * b[i] + damp * gi;
        b[i] = bi;
        p[i] -= lr * bi;
    }
}

CPU_KERNEL static void k_sgd_plain(float *restrict p, const float *restrict g, float lr, float wd,
                                   int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        p[i] -= lr * (g[i] + wd * p[i]);
    }
}

/* Fused zeroing goes block by block so that the gradient lines are still
 * in L1 when they are cleared: one pass over memory instead of two. */
#define CPU_ZERO_BLOCK 2048

static void r_sgd(int64_t i0, int64_t i1, void *ctx)
{
    VecCtx *c = ctx;
    int64_t step = c->zero != NULL ? CPU_ZERO_BLOCK : i1 - i0;
    for (int64_t b0 = i0; b0 < i1; b0 += step) {
        int64_t n = MIN(step, i1 - b0);
        if (c->u == NULL) {
            k_sgd_plain(c->y + b0, c->x + b0, c->a, c->b, n);
        } else {
            k_sgd_momentum(c->y + b0, c->x + b0, c->u + b0, c->a, c->b, c->c, c->d, c->flags, n);
        }
        if (c->zero != NULL) {
            memset(c->zero + b0, 0, sizeof(float) * (size_t)n);
        }
    }
}

CPU_KERNEL static void k_adamw(float *restrict p, const float *restrict g, float *restrict m,
                               float *restrict v, float b1, float b2, float eps, float decay,
                               float step_size, float inv_sqrt_bc2, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

typedef struct {
    float *p, *m, *v;
    const float *g;
    float b1, b2, eps, decay, step_size, inv_sqrt_bc2;
    float *zero; /* the gradient (g) to zero after reading, or NULL */
} AdamCtx;

static void r_adamw(int64_t i0, int64_t i1, void *ctx)
{
    AdamCtx *c = ctx;
    int64_t step = c->zero != NULL ? CPU_ZERO_BLOCK : i1 - i0;
    for (int64_t b0 = i0; b0 < i1; b0 += step) {
        int64_t n = MIN(step, i1 - b0);
        k_adamw(c->p + b0, c->g + b0, c->m + b0, c->v + b0, c->b1, c->b2, c->eps, c->decay,
                c->step_size, c->inv_sqrt_bc2, n);
        if (c->zero != NULL) {
            memset(c->zero + b0, 0, sizeof(float) * (size_t)n);
        }
    }
}

CPU_KERNEL static void k_relu(float *restrict y, const float *restrict x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

CPU_KERNEL static void k_relu_bwd(float *restrict dx, const float *restrict y,
                                  const float *restrict dy, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

CPU_KERNEL static void k_add(float *restrict y, const float *restrict a, const float *restrict b,
                             int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = a[i] + b[i];
    }
}

CPU_KERNEL static void k_add_relu(float *restrict y, const float *restrict a,
                                  const float *restrict b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] + b[i];
        y[i] = s > 0.0f ? s : 0.0f;
    }
}

/* in-place variants: y may alias an input, so no restrict on them */
CPU_KERNEL static void k_add_relu_ip(float *y, const float *restrict b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float s = y[i] + b[i];
        y[i] = s > 0.0f ? s : 0.0f;
    }
}

CPU_KERNEL static void k_relu_ip(float *x, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

CPU_KERNEL static void k_relu_bwd_ip(float *dy, const float *restrict y, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

typedef struct {
    float *out;
    const float *a, *b;
    int kind;
} EltCtx;

static void r_elementwise(int64_t i0, int64_t i1, void *ctx)
{
    EltCtx *c = ctx;
    float *o = c->out + i0;
    const float *a = c->a + i0, *b = c->b ? c->b + i0 : NULL;
    int64_t n = i1 - i0;
    switch (c->kind) {
    case CPU_ELT_RELU:
        if (o == a) {
            k_relu_ip(o, n);
        } else {
            k_relu(o, a, n);
        }
        break;
    case CPU_ELT_RELU_BWD: /* a = y, b = dy */
        if (o == b) {
            k_relu_bwd_ip(o, a, n);
        } else if (o == a) {
            /* dx over y: read y before writing */
            for (int64_t i = 0; i < n; i++) {
                o[i] = a[i] > 0.0f ? b[i] : 0.0f;
            }
        } else {
            k_relu_bwd(o, a, b, n);
        }
        break;
    case CPU_ELT_ADD:
        if (o == a || o == b) {
            k_accumulate(o, o == a ? b : a, n);
        } else {
            k_add(o, a, b, n);
        }
        break;
    case CPU_ELT_ADD_RELU:
        if (o == a || o == b) {
            k_add_relu_ip(o, o == a ? b : a, n);
        } else {
            k_add_relu(o, a, b, n);
        }
        break;
    default:
        break;
    }
}

void cpu_elementwise(CpuEltKind kind, float *out, const float *a, const float *b, int64_t n)
{
    EltCtx c = {.out = out, .a = a, .b = b, .kind = kind};
    cpu_par_range(n, r_elementwise, &c);
}

/* ---- vector ops ---- */

static gboolean check_vec(const TdmTensor *t, const char *op, GError **error)
{
    if (t == NULL || t->storage == NULL || !tdm_tensor_is_contiguous(t)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu %s: needs a plain contiguous tensor with storage", op);
        return FALSE;
    }
    return TRUE;
}

static gboolean check_f32_pair(const TdmTensor *a, const TdmTensor *b, const char *op,
                               GError **error)
{
    if (!check_vec(a, op, error) || !check_vec(b, op, error)) {
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
    if (!check_vec(x, "fill", error)) {
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
    if (!check_f32_pair(x, x, "scale", error)) {
        return FALSE;
    }
    VecCtx c = {.y = tdm_tensor_data(x), .a = alpha};
    cpu_par_range(tdm_tensor_numel(x), r_scale, &c);
    return TRUE;
}

gboolean cpu_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error)
{
    if (!check_f32_pair(x, y, "axpy", error)) {
        return FALSE;
    }
    VecCtx c = {.y = tdm_tensor_data(y), .x = tdm_tensor_data(x), .a = alpha};
    cpu_par_range(tdm_tensor_numel(x), r_axpy, &c);
    return TRUE;
}

gboolean cpu_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error)
{
    if (!check_f32_pair(x, x, "sum_squares", error)) {
        return FALSE;
    }
    VecCtx c = {.x = tdm_tensor_data(x)};
    cpu_par_range(tdm_tensor_numel(x), r_sum_squares, &c);
    double total = c.sum;
    *result = total;
    return TRUE;
}

/* ---- casts ---- */

static inline float bf16_to_f32(guint16 v)
{
    union { guint32 u; float f; } c = {.u = (guint32)v << 16};
    return c.f;
}

static inline guint16 f32_to_bf16(float f)
{
    union { float f; guint32 u; } c = {.f = f};
    if ((c.u & 0x7fffffffu) > 0x7f800000u) {
        return (guint16)((c.u >> 16) | 0x40); /* quiet NaN */
    }
    return (guint16)((c.u + 0x7fffu + ((c.u >> 16) & 1u)) >> 16);
}

/* IEEE half in integer arithmetic (no _Float16 needed: clang 14 has none
 * on x86-64), rounding to nearest even like every IEEE conversion. */
static inline float f16_to_f32(guint16 h)
{
    guint32 sign = (guint32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 31) {
        bits = sign | 0x7f800000u | (m << 13); /* inf, nan */
    } else if (e != 0) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else if (m == 0) {
        bits = sign;
    } else { /* subnormal: m 2^-24, normalised */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    union { guint32 u; float f; } c = {.u = bits};
    return c.f;
}

static inline guint16 f32_to_f16(float f)
{
    union { float f; guint32 u; } c = {.f = f};
    guint32 sign = (c.u >> 16) & 0x8000u, x = c.u & 0x7fffffffu;
    if (x > 0x7f800000u) {
        return (guint16)(sign | 0x7e00u); /* quiet NaN */
    }
    if (x >= 0x477ff000u) {
        return (guint16)(sign | 0x7c00u); /* 65520 and above round to infinity */
    }
    if (x >= 0x38800000u) { /* a normal half: rebias, drop 13 bits rounding */
        x -= 112u << 23;
        x += 0xfffu + ((x >> 13) & 1u);
        return (guint16)(sign | (x >> 13));
    }
    guint32 shift = 126u - (x >> 23); /* a subnormal half, in units of 2^-24 */
    if (shift > 24) {
        return (guint16)sign; /* below 2^-25: zero */
    }
    guint32 m = (x & 0x7fffffu) | 0x800000u, q = m >> shift;
    guint32 r = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    q += r > half || (r == half && (q & 1u));
    return (guint16)(sign | q);
}

static inline double load_elem(const void *p, TdmDType dt, int64_t i)
{
    switch (dt) {
    case TDM_DTYPE_F32: return ((const float *)p)[i];
    case TDM_DTYPE_I32: return ((const int32_t *)p)[i];
    case TDM_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case TDM_DTYPE_U8: return ((const guint8 *)p)[i];
    case TDM_DTYPE_BF16: return bf16_to_f32(((const guint16 *)p)[i]);
    case TDM_DTYPE_F16: return f16_to_f32(((const guint16 *)p)[i]);
    default: return 0.0;
    }
}

static inline void store_elem(void *p, TdmDType dt, int64_t i, double v)
{
    switch (dt) {
    case TDM_DTYPE_F32: ((float *)p)[i] = (float)v; break;
    case TDM_DTYPE_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case TDM_DTYPE_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case TDM_DTYPE_U8: ((guint8 *)p)[i] = (guint8)(int64_t)v; break;
    case TDM_DTYPE_BF16: ((guint16 *)p)[i] = f32_to_bf16((float)v); break;
    case TDM_DTYPE_F16: ((guint16 *)p)[i] = f32_to_f16((float)v); break;
    default: break;
    }
}

gboolean cpu_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                  GError **error)
{
    if (!check_vec(src, "cast", error) || !check_vec(dst, "cast", error)) {
        return FALSE;
    }
    if (!tdm_tensor_same_shape(src, dst)) {
        g_autofree char *a = tdm_tensor_shape_string(src);
        g_autofree char *b = tdm_tensor_shape_string(dst);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "cpu cast: shapes %s and %s differ", a, b);
        return FALSE;
    }
    int64_t n = tdm_tensor_numel(src);
    const void *s = tdm_tensor_data(src);
    void *d = tdm_tensor_data(dst);
    if (src->dtype == TDM_DTYPE_U8 && dst->dtype == TDM_DTYPE_F32) {
        VecCtx c = {.y = d, .m = s, .a = normalize_u8 ? 1.0f / 255.0f : 1.0f};
        cpu_par_range(n, r_u8_to_f32, &c);
        return TRUE;
    }
    if (src->dtype == dst->dtype) {
        if (s != d) {
            memcpy(d, s, tdm_tensor_nbytes(src));
        }
        return TRUE;
    }
    TdmDType sd = src->dtype, dd = dst->dtype;
#pragma omp parallel for schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        store_elem(d, dd, i, load_elem(s, sd, i));
    }
    return TRUE;
}

/* ---- fused optimizer updates ---- */

gboolean cpu_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                        TdmTensor *grad, TdmTensor *momentum_buf, gboolean zero_grad,
                        GError **error)
{
    if (!check_f32_pair(param, grad, "sgd_update", error) ||
        (hp->momentum != 0.0f && !check_f32_pair(param, momentum_buf, "sgd_update", error))) {
        return FALSE;
    }
    VecCtx c = {.y = tdm_tensor_data(param), .x = tdm_tensor_data(grad),
                .u = hp->momentum != 0.0f ? tdm_tensor_data(momentum_buf) : NULL,
                .a = hp->lr, .b = hp->weight_decay, .c = hp->momentum,
                .d = 1.0f - hp->dampening,
                .flags = (hp->first_step ? 1 : 0) | (hp->nesterov ? 2 : 0),
                .zero = zero_grad ? tdm_tensor_data(grad) : NULL};
    cpu_par_range(tdm_tensor_numel(param), r_sgd, &c);
    return TRUE;
}

gboolean cpu_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          gboolean zero_grad, GError **error)
{
    if (!check_f32_pair(param, grad, "adamw_update", error) ||
        !check_f32_pair(param, exp_avg, "adamw_update", error) ||
        !check_f32_pair(param, exp_avg_sq, "adamw_update", error)) {
        return FALSE;
    }
    if (hp->step < 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cpu adamw_update: step must be >= 1 (got %" G_GINT64_FORMAT ")", hp->step);
        return FALSE;
    }
    double bc1 = 1.0 - pow(hp->beta1, (double)hp->step);
    double bc2 = 1.0 - pow(hp->beta2, (double)hp->step);
    AdamCtx c = {.p = tdm_tensor_data(param), .g = tdm_tensor_data(grad),
                 .m = tdm_tensor_data(exp_avg), .v = tdm_tensor_data(exp_avg_sq),
                 .b1 = hp->beta1, .b2 = hp->beta2, .eps = hp->eps,
                 .decay = 1.0f - hp->lr * hp->weight_decay,
                 .step_size = (float)(hp->lr / bc1), .inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2)),
                 .zero = zero_grad ? tdm_tensor_data(grad) : NULL};
    cpu_par_range(tdm_tensor_numel(param), r_adamw, &c);
    return TRUE;
}

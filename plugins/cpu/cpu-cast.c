/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-cast.c - dtype conversions of plain contiguous tensors.
 *
 * u8 to f32 (image batches, optionally scaled to [0, 1]) is a vectorised
 * kernel over the OpenMP pool (cpu-kernel.h); every other pair converts
 * through double, element by element, with bf16 and IEEE half done in
 * integer arithmetic: rounding to nearest even, NaNs kept quiet NaNs.
 */
#include "config.h"

#include <string.h>

#include "cpu-kernel.h"

/* What a range of the u8 to f32 conversion works on. */
typedef struct {
    float *y;
    const guint8 *u;
    float scale; /* 1/255 when normalising, else 1 */
} U8Ctx;

CPU_KERNEL static void k_u8_to_f32(float *restrict y, const guint8 *restrict u, float k, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        y[i] = (float)u[i] * k;
    }
}

static void r_u8_to_f32(int64_t i0, int64_t i1, void *ctx)
{
    U8Ctx *c = ctx;
    k_u8_to_f32(c->y + i0, c->u + i0, c->scale, i1 - i0);
}

/* ---- bf16 and IEEE half ---- */

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
    /* An empty slot is shaped like src, in its own dtype (as tdm_op_cast
     * allows); otherwise the front end has checked that it has src's
     * shape. */
    if (dst->storage == NULL &&
        !tdm_tensor_ensure(dst, dst->dtype, src->ndim, src->shape, NULL, 0, error)) {
        return FALSE;
    }
    int64_t n = tdm_tensor_numel(src);
    const void *s = tdm_tensor_data(src);
    void *d = tdm_tensor_data(dst);
    if (src->dtype == TDM_DTYPE_U8 && dst->dtype == TDM_DTYPE_F32) {
        U8Ctx c = {.y = d, .u = s, .scale = normalize_u8 ? 1.0f / 255.0f : 1.0f};
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

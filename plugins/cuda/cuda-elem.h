/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-elem.h - the per-element arithmetic of the cuda
 * backend's own kernels, shared by nvcc and plain C compilers.
 *
 * Every function here computes what one thread of a kernel computes for
 * one element (or one lane's share of a softmax row), in exactly the
 * operation order of the ref backend (plugins/ref/ref-vector.c and
 * ref-ops.c), so that the kernels give ref's numbers: bit for bit for
 * relu, add, dropout masks, casts and the optimizer updates, and to
 * double rounding for the loss. Under nvcc the functions are
 * __host__ __device__: the .cu kernels call them per thread; under a plain
 * C compiler they are ordinary static inline functions, which the CPU test
 * tests/test-cuda-elem.c applies over every index and compares with ref.
 * So the arithmetic is tested on machines without a GPU, and only the
 * indexing, the launch geometry and the reductions' shuffles wait for one.
 *
 * Where ref computes in double, so do these functions. nvcc contracts a
 * product followed by a sum into one fused multiply-add, which rounds once
 * instead of twice; the device code therefore spells each double operation
 * with its _rn intrinsic (which nvcc never contracts), as ref's C code
 * compiled for x86-64 without FMA rounds each one. The header includes
 * nothing but <stdint.h> (and <math.h> outside nvcc, whose own headers
 * declare the math functions), so .cu files may include it.
 */
#ifndef TDM_CUDA_ELEM_H
#define TDM_CUDA_ELEM_H

#include <stdint.h>

#ifdef __CUDACC__
#define CUDA_ELEM __host__ __device__
#else
#include <math.h>
#define CUDA_ELEM
#endif

/* Element types, numbered as TdmDType (cuda-vector.c asserts it). */
enum {
    CUDA_ELEM_F32 = 0,
    CUDA_ELEM_I32 = 1,
    CUDA_ELEM_I64 = 2,
    CUDA_ELEM_U8 = 3,
    CUDA_ELEM_BF16 = 4,
    CUDA_ELEM_F16 = 5,
};

/* ---- bits and double operations rounded one at a time ---- */

static inline CUDA_ELEM uint32_t cuda_elem_f2u(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof(u));
    return u;
#endif
}

static inline CUDA_ELEM float cuda_elem_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    __builtin_memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

static inline CUDA_ELEM double cuda_elem_dmul(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

static inline CUDA_ELEM double cuda_elem_dadd(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

static inline CUDA_ELEM double cuda_elem_dsub(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

static inline CUDA_ELEM double cuda_elem_ddiv(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}

/* ---- relu and add (ref-ops.c) ---- */

/* NaN gives 0, as ref's `x > 0 ? x : 0`. */
static inline CUDA_ELEM float cuda_elem_relu(float x)
{
    return x > 0.0f ? x : 0.0f;
}

/* y is the forward output. */
static inline CUDA_ELEM float cuda_elem_relu_backward(float y, float dy)
{
    return y > 0.0f ? dy : 0.0f;
}

static inline CUDA_ELEM float cuda_elem_add(float a, float b)
{
    return a + b;
}

/* add then relu on the sum, as ref's fused op is defined. */
static inline CUDA_ELEM float cuda_elem_add_relu(float a, float b)
{
    return cuda_elem_relu(a + b);
}

/* ---- dropout (backend.h's rule, ref_dropout_keep) ---- */

static inline CUDA_ELEM uint64_t cuda_elem_splitmix64_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 1 when element `index` is kept: the top 24 bits of SplitMix64's output
 * number index+1 for `seed`, as a number in [0, 1), are >= p. */
static inline CUDA_ELEM int cuda_elem_dropout_keep(uint64_t seed, uint64_t index, float p)
{
    uint64_t h = cuda_elem_splitmix64_mix(seed + (index + 1) * 0x9e3779b97f4a7c15ULL);
    float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    return u >= p;
}

/* The scale of kept elements; p == 1 drops everything, the scale is then
 * never used. */
static inline CUDA_ELEM float cuda_elem_dropout_scale(float p)
{
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* Forward (x) and backward (dy) alike. */
static inline CUDA_ELEM float cuda_elem_dropout_apply(uint8_t keep, float v, float scale)
{
    return keep ? v * scale : 0.0f;
}

/* ---- cast (ref_cast): every pair of f32 i32 i64 u8 bf16 f16 ---- */

static inline CUDA_ELEM int cuda_elem_dtype_is_int(int t)
{
    return t == CUDA_ELEM_I32 || t == CUDA_ELEM_I64 || t == CUDA_ELEM_U8;
}

/* bf16 is the top half of an f32. */
static inline CUDA_ELEM float cuda_elem_bf16_to_f32(uint16_t b)
{
    return cuda_elem_u2f((uint32_t)b << 16);
}

/* Round to nearest even; a NaN stays a (quiet) NaN with its sign and the
 * top of its payload. */
static inline CUDA_ELEM uint16_t cuda_elem_f32_to_bf16(float f)
{
    uint32_t x = cuda_elem_f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u);
    }
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* IEEE half to f32, exact; a NaN becomes the default quiet NaN with the
 * half's sign (ref's `NAN` or `-NAN`). */
static inline CUDA_ELEM float cuda_elem_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        /* mant * 2^-24: exact in f32 */
        float v = (float)mant * 5.9604644775390625e-8f;
        return cuda_elem_u2f(cuda_elem_f2u(v) | sign);
    }
    if (exp == 31) {
        return cuda_elem_u2f(sign | (mant ? 0x7fc00000u : 0x7f800000u));
    }
    return cuda_elem_u2f(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

/* f32 to IEEE half, round to nearest even (ref_f32_to_f16). */
static inline CUDA_ELEM uint16_t cuda_elem_f32_to_f16(float f)
{
    uint32_t x = cuda_elem_f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    }
    if (ax >= 0x477ff000u) { /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half, in units of 2^-24 */
        float a = cuda_elem_u2f(ax) * 16777216.0f; /* exact: a power of two */
        return (uint16_t)(sign | (uint16_t)rintf(a));
    }
    uint32_t h = (((ax >> 23) - 127u + 15u) << 10) | ((ax & 0x7fffffu) >> 13);
    uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) {
        h++; /* a carry into the exponent is the right result */
    }
    return (uint16_t)(sign | h);
}

/* ref reads every float element as a double and stores (float) of it: on
 * x86-64 that round trip is the identity except that a signalling NaN
 * comes back quiet. The kernels do not go through double (a GPU may
 * canonicalise NaNs there) and set the quiet bit instead. */
static inline CUDA_ELEM float cuda_elem_quiet(float f)
{
    uint32_t x = cuda_elem_f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        x |= 0x00400000u;
    }
    return cuda_elem_u2f(x);
}

static inline CUDA_ELEM float cuda_elem_load_float(const void *base, int t, int64_t i)
{
    switch (t) {
    case CUDA_ELEM_BF16:
        return cuda_elem_bf16_to_f32(((const uint16_t *)base)[i]);
    case CUDA_ELEM_F16:
        return cuda_elem_f16_to_f32(((const uint16_t *)base)[i]);
    default:
        return ((const float *)base)[i];
    }
}

static inline CUDA_ELEM int64_t cuda_elem_load_int(const void *base, int t, int64_t i)
{
    switch (t) {
    case CUDA_ELEM_I32:
        return ((const int32_t *)base)[i];
    case CUDA_ELEM_I64:
        return ((const int64_t *)base)[i];
    default:
        return ((const uint8_t *)base)[i];
    }
}

static inline CUDA_ELEM void cuda_elem_store_float(void *base, int t, int64_t i, float v)
{
    switch (t) {
    case CUDA_ELEM_BF16:
        ((uint16_t *)base)[i] = cuda_elem_f32_to_bf16(v);
        break;
    case CUDA_ELEM_F16:
        ((uint16_t *)base)[i] = cuda_elem_f32_to_f16(v);
        break;
    default:
        ((float *)base)[i] = v;
        break;
    }
}

/* Integer to integer: saturated to the target's range (ref_store_int). */
static inline CUDA_ELEM void cuda_elem_store_int(void *base, int t, int64_t i, int64_t v)
{
    switch (t) {
    case CUDA_ELEM_I32:
        ((int32_t *)base)[i] = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
        break;
    case CUDA_ELEM_I64:
        ((int64_t *)base)[i] = v;
        break;
    default:
        ((uint8_t *)base)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        break;
    }
}

/* Float to integer: truncation toward zero, saturated to [lo, hi]; NaN
 * gives 0 (ref_to_int). */
static inline CUDA_ELEM int64_t cuda_elem_to_int(double v, double lo, double hi)
{
    if (v != v) {
        return 0;
    }
    v = trunc(v);
    return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

static inline CUDA_ELEM void cuda_elem_store_int_from_float(void *base, int t, int64_t i, float f)
{
    double v = (double)f; /* exact for every non-NaN float */
    switch (t) {
    case CUDA_ELEM_I32:
        ((int32_t *)base)[i] = (int32_t)cuda_elem_to_int(v, -2147483648.0, 2147483647.0);
        break;
    case CUDA_ELEM_I64:
        /* the largest double below 2^63 */
        ((int64_t *)base)[i] = cuda_elem_to_int(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    default:
        ((uint8_t *)base)[i] = (uint8_t)cuda_elem_to_int(v, 0.0, 255.0);
        break;
    }
}

/* dst[i] = src[i] converted as ref_cast converts it. Integers go to
 * floats through double (so i64 -> f32 rounds twice, as ref does), divided
 * by 255 in double when `normalize` and src is u8. */
static inline CUDA_ELEM void cuda_elem_cast(const void *src, int st, void *dst, int dt, int64_t i,
                                            int normalize)
{
    int src_int = cuda_elem_dtype_is_int(st), dst_int = cuda_elem_dtype_is_int(dt);
    if (src_int && dst_int) {
        cuda_elem_store_int(dst, dt, i, cuda_elem_load_int(src, st, i));
    } else if (src_int) {
        double v = (double)cuda_elem_load_int(src, st, i);
        if (normalize && st == CUDA_ELEM_U8) {
            v = cuda_elem_ddiv(v, 255.0);
        }
        cuda_elem_store_float(dst, dt, i, (float)v);
    } else if (dst_int) {
        cuda_elem_store_int_from_float(dst, dt, i, cuda_elem_load_float(src, st, i));
    } else {
        cuda_elem_store_float(dst, dt, i, cuda_elem_quiet(cuda_elem_load_float(src, st, i)));
    }
}

/* ---- optimizer updates (ref_sgd_update, ref_adamw_update) ---- */

/* SGD's hyper-parameters as ref's loop uses them, in double. */
typedef struct {
    double lr, momentum, one_minus_dampening, weight_decay;
    int use_buf;    /* momentum != 0 */
    int first_step; /* the buffer starts as the gradient */
    int nesterov;
} CudaElemSgd;

static inline CUDA_ELEM CudaElemSgd cuda_elem_sgd_params(float lr, float momentum, float dampening,
                                                         float weight_decay, int nesterov,
                                                         int first_step)
{
    CudaElemSgd e;
    e.lr = (double)lr;
    e.momentum = (double)momentum;
    e.one_minus_dampening = 1.0 - (double)dampening;
    e.weight_decay = (double)weight_decay;
    e.use_buf = momentum != 0.0f;
    e.first_step = first_step != 0;
    e.nesterov = nesterov != 0;
    return e;
}

/* One element of PyTorch's SGD: g' = g + wd p; buf = momentum buf +
 * (1 - dampening) g' (g' on the first step); d = nesterov ? g' + momentum
 * buf : buf; p -= lr d. `buf` is untouched (may be NULL) without momentum. */
static inline CUDA_ELEM void cuda_elem_sgd(const CudaElemSgd *h, float *p, float grad, float *buf)
{
    double g = cuda_elem_dadd((double)grad, cuda_elem_dmul(h->weight_decay, (double)*p));
    double d = g;
    if (h->use_buf) {
        double b = h->first_step ? g
                                 : cuda_elem_dadd(cuda_elem_dmul(h->momentum, (double)*buf),
                                                  cuda_elem_dmul(h->one_minus_dampening, g));
        *buf = (float)b;
        d = h->nesterov ? cuda_elem_dadd(g, cuda_elem_dmul(h->momentum, b)) : b;
    }
    *p = (float)cuda_elem_dsub((double)*p, cuda_elem_dmul(h->lr, d));
}

/* AdamW's per-step constants, computed once on the host as ref computes
 * them before its loop. */
typedef struct {
    double b1, b2, one_minus_b1, one_minus_b2;
    double eps;
    double step_size; /* lr / (1 - beta1^step) */
    double sqrt_bc2;  /* sqrt(1 - beta2^step) */
    double decay;     /* 1 - lr * weight_decay */
} CudaElemAdamW;

static inline CUDA_ELEM CudaElemAdamW cuda_elem_adamw_params(float lr, float beta1, float beta2,
                                                             float eps, float weight_decay,
                                                             int64_t step)
{
    CudaElemAdamW e;
    e.b1 = (double)beta1;
    e.b2 = (double)beta2;
    e.one_minus_b1 = 1.0 - e.b1;
    e.one_minus_b2 = 1.0 - e.b2;
    e.eps = (double)eps;
    double bc1 = 1.0 - pow(e.b1, (double)step);
    double bc2 = 1.0 - pow(e.b2, (double)step);
    e.step_size = (double)lr / bc1;
    e.sqrt_bc2 = sqrt(bc2);
    e.decay = 1.0 - (double)lr * (double)weight_decay;
    return e;
}

/* One element of PyTorch's AdamW (decoupled weight decay, bias-corrected),
 * term by term as ref_adamw_update. */
static inline CUDA_ELEM void cuda_elem_adamw(const CudaElemAdamW *h, float *p, float grad, float *m,
                                             float *v)
{
    double g = (double)grad;
    double mm =
        cuda_elem_dadd(cuda_elem_dmul(h->b1, (double)*m), cuda_elem_dmul(h->one_minus_b1, g));
    double vv = cuda_elem_dadd(cuda_elem_dmul(h->b2, (double)*v),
                               cuda_elem_dmul(cuda_elem_dmul(h->one_minus_b2, g), g));
    double denom = cuda_elem_dadd(cuda_elem_ddiv(sqrt(vv), h->sqrt_bc2), h->eps);
    *m = (float)mm;
    *v = (float)vv;
    *p = (float)cuda_elem_dsub(cuda_elem_dmul((double)*p, h->decay),
                               cuda_elem_ddiv(cuda_elem_dmul(h->step_size, mm), denom));
}

/* ---- softmax cross-entropy, one row [K] shared by `nlanes` lanes ----
 * Lane `lane` takes the classes k = lane, lane + nlanes, ...; each pass
 * gives a per-lane partial that the kernel combines across the warp (the
 * CPU test combines them in the same butterfly order). In ref's terms
 * (ref_softmax_xent): arg = the first maximum; mx = row[arg];
 * lse = mx + log(sum_k exp(row[k] - mx)); loss = -(1 - eps) (row[y] - lse)
 * - eps / K sum_k (row[k] - lse); dlogits[k] = (exp(row[k] - lse) -
 * target_k) / N with target_k = eps / K + (k == y ? 1 - eps : 0). */

/* The first maximum: ref scans k upward keeping arg unless row[k] >
 * row[arg], so NaNs are never chosen unless row[0] is one (then arg stays
 * 0). A partial is (best, arg) over the non-NaN entries seen, arg -1 when
 * none; merging keeps the larger value, the smaller index on a tie. */
static inline CUDA_ELEM void cuda_elem_argmax_merge(float *best, int64_t *arg, float other_best,
                                                    int64_t other_arg)
{
    if (other_arg < 0) {
        return;
    }
    if (*arg < 0 || other_best > *best || (other_best == *best && other_arg < *arg)) {
        *best = other_best;
        *arg = other_arg;
    }
}

static inline CUDA_ELEM void cuda_elem_xent_lane_max(const float *row, int64_t K, int lane,
                                                     int nlanes, float *best, int64_t *arg)
{
    *best = 0.0f;
    *arg = -1;
    for (int64_t k = lane; k < K; k += nlanes) {
        float v = row[k];
        if (v == v) {
            cuda_elem_argmax_merge(best, arg, v, k);
        }
    }
}

/* The merged arg as ref's scan ends: 0 when row[0] is NaN or every entry is. */
static inline CUDA_ELEM int64_t cuda_elem_argmax_final(float row0, int64_t arg)
{
    return (row0 != row0 || arg < 0) ? 0 : arg;
}

/* sum of exp(row[k] - mx) over the lane's classes */
static inline CUDA_ELEM double cuda_elem_xent_lane_sumexp(const float *row, int64_t K, int lane,
                                                          int nlanes, double mx)
{
    double s = 0.0;
    for (int64_t k = lane; k < K; k += nlanes) {
        s = cuda_elem_dadd(s, exp(cuda_elem_dsub((double)row[k], mx)));
    }
    return s;
}

static inline CUDA_ELEM double cuda_elem_xent_lse(double mx, double sum)
{
    return cuda_elem_dadd(mx, log(sum));
}

/* The gradient of the mean loss for one class; `is_label` when k == y. */
static inline CUDA_ELEM float cuda_elem_xent_dlogit(float x, double lse, double eps, int64_t K,
                                                    int is_label, int64_t N)
{
    double target = cuda_elem_ddiv(eps, (double)K);
    if (is_label) {
        target = cuda_elem_dadd(target, 1.0 - eps);
    }
    return (float)cuda_elem_ddiv(cuda_elem_dsub(exp(cuda_elem_dsub((double)x, lse)), target),
                                 (double)N);
}

/* sum of (row[k] - lse) over the lane's classes; writes the lane's
 * dlogits into drow unless it is NULL. y may be outside [0, K) (a bad
 * label, reported apart): no class is then the label. */
static inline CUDA_ELEM double cuda_elem_xent_lane_grad(const float *row, int64_t K, int lane,
                                                        int nlanes, double lse, double eps,
                                                        int64_t y, int64_t N, float *drow)
{
    double s = 0.0;
    for (int64_t k = lane; k < K; k += nlanes) {
        s = cuda_elem_dadd(s, cuda_elem_dsub((double)row[k], lse));
        if (drow != 0) {
            drow[k] = cuda_elem_xent_dlogit(row[k], lse, eps, K, k == y, N);
        }
    }
    return s;
}

/* A row's loss from the label's logit and the row's sum of log-probabilities. */
static inline CUDA_ELEM double cuda_elem_xent_loss(double eps, int64_t K, float x_label, double lse,
                                                   double sum_logp)
{
    double logp_y = cuda_elem_dsub((double)x_label, lse);
    return cuda_elem_dsub(cuda_elem_dmul(-(1.0 - eps), logp_y),
                          cuda_elem_dmul(cuda_elem_ddiv(eps, (double)K), sum_logp));
}

/* softmax_xent's host loss: the mean, in f32. */
static inline CUDA_ELEM float cuda_elem_xent_mean(double total, int64_t N)
{
    return (float)cuda_elem_ddiv(total, (double)N);
}

/* What softmax_xent_stats adds to its loss sum: ref's mean times the rows. */
static inline CUDA_ELEM float cuda_elem_xent_stats_sum(double total, int64_t N)
{
    return (float)cuda_elem_dmul((double)cuda_elem_xent_mean(total, N), (double)N);
}

#endif /* TDM_CUDA_ELEM_H */

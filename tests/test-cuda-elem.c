/* SPDX-License-Identifier: MIT */
/* tests/test-cuda-elem.c - the cuda kernels' per-element arithmetic
 * against the ref backend, on the CPU.
 *
 * plugins/cuda/cuda-elem.h holds what one thread of each cuda kernel
 * computes; the .cu kernels call those functions per element, and this
 * test calls the same functions over every index of random inputs (with
 * NaNs, infinities, signed zeros, subnormals and out-of-range values among
 * them) and compares with the ref backend's ops on the same inputs:
 * relu, add and dropout bit for bit, casts bit for bit over every pair of
 * element types (every bf16 and f16 bit pattern among the sources), the
 * SGD and AdamW updates to 1e-6, and the softmax cross-entropy row by row
 * (loss, gradient, first maximum) to 1e-5, with the warp's lane split and
 * butterfly reductions reproduced lane by lane. What this cannot check
 * (indexing, launch geometry, the shuffles themselves, atomics) waits for
 * a GPU (tests/gpu/run). No GPU and no CUDA toolkit needed.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "../plugins/cuda/cuda-elem.h"
#include "test-util.h"

static TdmDevice *ref;
static GRand *rng;

/* ---- helpers ---- */

static TdmTensor *vec_from(TdmDType dtype, int64_t n, const void *host)
{
    return test_tensor_with(ref, dtype, 1, &n, host);
}

static void *read_all(TdmTensor *t)
{
    GError *err = NULL;
    void *host = g_malloc(tdm_tensor_nbytes(t) + 1);
    g_assert_true(tdm_tensor_read(t, host, &err));
    g_assert_no_error(err);
    return host;
}

/* Random floats with every kind of special value among them. */
static float *random_floats(int64_t n, double range)
{
    static const guint32 special[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
        0x7f800001u, 0x7fa00123u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0x3f800000u,
        0xbf800000u, 0x4f000000u, 0xcf000001u, 0x5f000000u,
    };
    float *x = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        if (i < (int64_t)G_N_ELEMENTS(special)) {
            x[i] = cuda_elem_u2f(special[i]);
        } else if (i % 5 == 0) {
            x[i] = cuda_elem_u2f(g_rand_int(rng)); /* any bit pattern */
        } else {
            x[i] = (float)g_rand_double_range(rng, -range, range);
        }
    }
    return x;
}

static void assert_same_floats(const char *what, const float *want, const float *got, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (cuda_elem_f2u(want[i]) != cuda_elem_f2u(got[i])) {
            g_error("%s: element %" G_GINT64_FORMAT ": ref %g (0x%08x), cuda-elem %g (0x%08x)",
                    what, i, want[i], cuda_elem_f2u(want[i]), got[i], cuda_elem_f2u(got[i]));
        }
    }
}

/* |got - want| <= tol * max(1, |want|); NaN only where ref has NaN. */
static void assert_close(const char *what, int64_t i, double want, double got, double tol)
{
    if (isnan(want) || isnan(got)) {
        if (!(isnan(want) && isnan(got))) {
            g_error("%s: element %" G_GINT64_FORMAT ": ref %.9g, cuda-elem %.9g", what, i, want,
                    got);
        }
        return;
    }
    if (isinf(want) || isinf(got)) {
        if (want != got) {
            g_error("%s: element %" G_GINT64_FORMAT ": ref %.9g, cuda-elem %.9g", what, i, want,
                    got);
        }
        return;
    }
    if (fabs(got - want) > tol * MAX(1.0, fabs(want))) {
        g_error("%s: element %" G_GINT64_FORMAT ": ref %.9g, cuda-elem %.9g (tolerance %g)", what,
                i, want, got, tol);
    }
}

/* ---- relu, add ---- */

/* relu in the shape of the two-input functions (the second is unused) */
static float elem_relu(float x, float unused)
{
    return cuda_elem_relu(x);
}

static void test_elementwise(void)
{
    const int64_t n = 20011;
    float *a = random_floats(n, 10.0), *b = random_floats(n, 10.0);
    /* b shuffled against a so specials meet ordinary values */
    for (int64_t i = 0; i < n; i++) {
        int64_t j = g_rand_int_range(rng, 0, (gint32)n);
        float t = b[i];
        b[i] = b[j];
        b[j] = t;
    }
    /* relu_backward gets y = relu(a), the forward output */
    float *ra = g_new(float, n);
    for (int64_t i = 0; i < n; i++) {
        ra[i] = cuda_elem_relu(a[i]);
    }
    const struct {
        const char *name;
        const float *x0, *x1;
        float (*elem)(float, float);
    } ops[] = {
        {"relu_forward", a, b, elem_relu},
        {"relu_backward", ra, b, cuda_elem_relu_backward},
        {"add", a, b, cuda_elem_add},
        {"add_relu", a, b, cuda_elem_add_relu},
    };
    float *got = g_new(float, n);
    for (guint o = 0; o < G_N_ELEMENTS(ops); o++) {
        TdmTensor *t0 = vec_from(TDM_DTYPE_F32, n, ops[o].x0);
        TdmTensor *t1 = vec_from(TDM_DTYPE_F32, n, ops[o].x1);
        TdmTensor *y = tdm_tensor_new_empty(ref, TDM_DTYPE_F32);
        g_autoptr(GError) err = NULL;
        gboolean ok = o == 0   ? tdm_op_relu_forward(ref, NULL, t0, y, &err)
                      : o == 1 ? tdm_op_relu_backward(ref, NULL, t0, t1, y, &err)
                      : o == 2 ? tdm_op_add(ref, NULL, t0, t1, y, &err)
                               : tdm_op_add_relu(ref, NULL, t0, t1, y, &err);
        g_assert_no_error(err);
        g_assert_true(ok);
        float *want = read_all(y);
        for (int64_t i = 0; i < n; i++) {
            got[i] = ops[o].elem(ops[o].x0[i], ops[o].x1[i]);
        }
        assert_same_floats(ops[o].name, want, got, n);
        g_free(want);
        tdm_tensor_unref(t0);
        tdm_tensor_unref(t1);
        tdm_tensor_unref(y);
    }
    g_free(a);
    g_free(b);
    g_free(ra);
    g_free(got);
}

/* ---- dropout ---- */

static void test_dropout(void)
{
    const int64_t n = 30011;
    const float ps[] = {0.0f, 1e-6f, 0.1f, 0.5f, 0.9f, 1.0f};
    const guint64 seeds[] = {0, 1, 42, G_GUINT64_CONSTANT(0xfedcba9876543210), G_MAXUINT64};
    float *x = random_floats(n, 3.0), *dy = random_floats(n, 3.0);
    TdmTensor *tx = vec_from(TDM_DTYPE_F32, n, x), *tdy = vec_from(TDM_DTYPE_F32, n, dy);
    float *got = g_new(float, n);
    guint8 *got_mask = g_new(guint8, n);
    GError *err = NULL;
    for (guint pi = 0; pi < G_N_ELEMENTS(ps); pi++) {
        for (guint si = 0; si < G_N_ELEMENTS(seeds); si++) {
            float p = ps[pi];
            TdmTensor *mask = tdm_tensor_new_empty(ref, TDM_DTYPE_U8);
            TdmTensor *y = tdm_tensor_new_empty(ref, TDM_DTYPE_F32);
            TdmTensor *dx = tdm_tensor_new_empty(ref, TDM_DTYPE_F32);
            g_assert_true(tdm_op_dropout_forward(ref, NULL, p, seeds[si], tx, mask, y, &err));
            g_assert_true(tdm_op_dropout_backward(ref, NULL, p, mask, tdy, dx, &err));
            g_assert_no_error(err);
            guint8 *want_mask = read_all(mask);
            float *want_y = read_all(y), *want_dx = read_all(dx);
            float scale = cuda_elem_dropout_scale(p);
            for (int64_t i = 0; i < n; i++) {
                got_mask[i] = (guint8)cuda_elem_dropout_keep(seeds[si], (guint64)i, p);
                got[i] = cuda_elem_dropout_apply(got_mask[i], x[i], scale);
            }
            if (memcmp(want_mask, got_mask, (size_t)n) != 0) {
                g_error("dropout mask differs (p %g, seed %" G_GUINT64_FORMAT ")", p, seeds[si]);
            }
            assert_same_floats("dropout_forward", want_y, got, n);
            for (int64_t i = 0; i < n; i++) {
                got[i] = cuda_elem_dropout_apply(got_mask[i], dy[i], scale);
            }
            assert_same_floats("dropout_backward", want_dx, got, n);
            g_free(want_mask);
            g_free(want_y);
            g_free(want_dx);
            tdm_tensor_unref(mask);
            tdm_tensor_unref(y);
            tdm_tensor_unref(dx);
        }
    }
    tdm_tensor_unref(tx);
    tdm_tensor_unref(tdy);
    g_free(x);
    g_free(dy);
    g_free(got);
    g_free(got_mask);
}

/* ---- cast: every pair, both normalize settings ---- */

static const TdmDType all_dtypes[] = {TDM_DTYPE_F32, TDM_DTYPE_I32,  TDM_DTYPE_I64,
                                      TDM_DTYPE_U8,  TDM_DTYPE_BF16, TDM_DTYPE_F16};

/* n elements of dtype t: random bits, values near every range's edges,
 * every 16-bit pattern for bf16 and f16, every byte for u8. */
static void *cast_source(TdmDType t, int64_t n)
{
    void *p = g_malloc((size_t)n * tdm_dtype_size(t));
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case TDM_DTYPE_F32: {
            static const double scales[] = {1.0, 300.0, 7e4, 3e9, 2e19, 1e-6};
            float v = i % 3 == 0 ? cuda_elem_u2f(g_rand_int(rng))
                                 : (float)(g_rand_double_range(rng, -1, 1) *
                                           scales[g_rand_int_range(rng, 0, 6)]);
            if (i < 32) {
                static const guint32 sp[] = {0x7f800001u, 0xffc00000u, 0x7f800000u, 0x80000000u,
                                             0x4f000000u, 0xcf000000u, 0x5f000000u, 0xdf000000u,
                                             0x477ff000u, 0x477fefffu, 0x38800000u, 0x387fffffu,
                                             0x33000000u, 0x33000001u, 0x3f808000u, 0x3f818000u};
                v = i < 16 ? cuda_elem_u2f(sp[i]) : (float)(i - 16) + 0.5f;
            }
            ((float *)p)[i] = v;
            break;
        }
        case TDM_DTYPE_I32:
            ((gint32 *)p)[i] = i == 0   ? G_MININT32
                               : i == 1 ? G_MAXINT32
                               : i % 2  ? (gint32)g_rand_int(rng)
                                        : g_rand_int_range(rng, -70000, 70000);
            break;
        case TDM_DTYPE_I64: {
            gint64 v = ((gint64)g_rand_int(rng) << 32) | g_rand_int(rng);
            v >>= g_rand_int_range(rng, 0, 63); /* every magnitude */
            if (i >= 2 && i < 10) {
                /* just above a float tie that the first rounding to
                 * double makes exact: ref rounds twice, so down */
                v = ((gint64)1 << (52 + i)) + ((gint64)1 << (28 + i)) + 1;
                v = i % 2 ? -v : v;
            }
            ((gint64 *)p)[i] = i == 0 ? G_MININT64 : i == 1 ? G_MAXINT64 : v;
            break;
        }
        case TDM_DTYPE_U8:
            ((guint8 *)p)[i] = (guint8)i;
            break;
        default:
            ((guint16 *)p)[i] = (guint16)i;
            break;
        }
    }
    return p;
}

static void test_cast(void)
{
    const int64_t n = 65536 * 2;
    GError *err = NULL;
    for (guint si = 0; si < G_N_ELEMENTS(all_dtypes); si++) {
        TdmDType st = all_dtypes[si];
        void *src = cast_source(st, n);
        TdmTensor *ts = vec_from(st, n, src);
        for (guint di = 0; di < G_N_ELEMENTS(all_dtypes); di++) {
            TdmDType dt = all_dtypes[di];
            size_t esz = tdm_dtype_size(dt);
            guint8 *got = g_malloc((size_t)n * esz);
            for (int normalize = 0; normalize < 2; normalize++) {
                TdmTensor *td = vec_from(dt, n, NULL);
                g_assert_true(tdm_op_cast(ref, ts, td, normalize, &err));
                g_assert_no_error(err);
                guint8 *want = read_all(td);
                for (int64_t i = 0; i < n; i++) {
                    cuda_elem_cast(src, (int)st, got, (int)dt, i, normalize);
                }
                for (int64_t i = 0; i < n; i++) {
                    if (memcmp(want + i * esz, got + i * esz, esz) != 0) {
                        guint64 w = 0, g = 0;
                        memcpy(&w, want + i * esz, esz);
                        memcpy(&g, got + i * esz, esz);
                        g_error("cast %s -> %s (normalize %d): element %" G_GINT64_FORMAT
                                ": ref bits 0x%" G_GINT64_MODIFIER
                                "x, cuda-elem 0x%" G_GINT64_MODIFIER "x",
                                tdm_dtype_name(st), tdm_dtype_name(dt), normalize, i, w, g);
                    }
                }
                g_free(want);
                tdm_tensor_unref(td);
            }
            g_free(got);
        }
        tdm_tensor_unref(ts);
        g_free(src);
    }
}

/* ---- optimizer updates ---- */

static void test_sgd(void)
{
    const int64_t n = 4099;
    const float momenta[] = {0.0f, 0.9f}, dampenings[] = {0.0f, 0.1f}, decays[] = {0.0f, 5e-4f};
    GError *err = NULL;
    int cases = 0;
    for (int c = 0; c < 2 * 2 * 2 * 2 * 2; c++) {
        TdmSgdParams hp = {
            .lr = 0.05f,
            .momentum = momenta[c & 1],
            .dampening = dampenings[(c >> 1) & 1],
            .weight_decay = decays[(c >> 2) & 1],
            .nesterov = (c >> 3) & 1,
            .first_step = (c >> 4) & 1,
        };
        float *p = random_floats(n, 2.0), *g = random_floats(n, 2.0), *buf = random_floats(n, 1.0);
        for (int64_t i = 0; i < 16; i++) { /* the specials: ordinary values here */
            p[i] = g[i] = buf[i] = 0.25f * (float)i;
        }
        TdmTensor *tp = vec_from(TDM_DTYPE_F32, n, p), *tg = vec_from(TDM_DTYPE_F32, n, g);
        TdmTensor *tb = vec_from(TDM_DTYPE_F32, n, buf);
        g_assert_true(tdm_op_sgd_update(ref, &hp, tp, tg, tb, &err));
        g_assert_no_error(err);
        float *want_p = read_all(tp), *want_b = read_all(tb);
        CudaElemSgd e = cuda_elem_sgd_params(hp.lr, hp.momentum, hp.dampening, hp.weight_decay,
                                             hp.nesterov, hp.first_step);
        for (int64_t i = 0; i < n; i++) {
            float before = buf[i];
            cuda_elem_sgd(&e, &p[i], g[i], &buf[i]);
            if (!e.use_buf) {
                g_assert_true(cuda_elem_f2u(before) == cuda_elem_f2u(buf[i]));
            }
            assert_close("sgd param", i, want_p[i], p[i], 1e-6);
            assert_close("sgd momentum_buf", i, want_b[i], buf[i], 1e-6);
        }
        cases++;
        g_free(want_p);
        g_free(want_b);
        tdm_tensor_unref(tp);
        tdm_tensor_unref(tg);
        tdm_tensor_unref(tb);
        g_free(p);
        g_free(g);
        g_free(buf);
    }
    g_assert_cmpint(cases, ==, 32);
}

static void test_adamw(void)
{
    const int64_t n = 4099;
    const int64_t steps[] = {1, 2, 10, 1000};
    const float decays[] = {0.0f, 0.01f};
    GError *err = NULL;
    for (guint si = 0; si < G_N_ELEMENTS(steps); si++) {
        for (guint di = 0; di < G_N_ELEMENTS(decays); di++) {
            TdmAdamWParams hp = {.lr = 1e-3f,
                                 .beta1 = 0.9f,
                                 .beta2 = 0.999f,
                                 .eps = 1e-8f,
                                 .weight_decay = decays[di],
                                 .step = steps[si]};
            float *p = random_floats(n, 2.0), *g = random_floats(n, 2.0);
            float *m = g_new(float, n), *v = g_new(float, n);
            for (int64_t i = 0; i < n; i++) {
                if (i < 16) {
                    p[i] = g[i] = 0.125f * (float)i - 1.0f;
                }
                m[i] = (float)g_rand_double_range(rng, -0.1, 0.1);
                v[i] = (float)g_rand_double_range(rng, 0.0, 0.01);
            }
            TdmTensor *tp = vec_from(TDM_DTYPE_F32, n, p), *tg = vec_from(TDM_DTYPE_F32, n, g);
            TdmTensor *tm = vec_from(TDM_DTYPE_F32, n, m), *tv = vec_from(TDM_DTYPE_F32, n, v);
            g_assert_true(tdm_op_adamw_update(ref, &hp, tp, tg, tm, tv, &err));
            g_assert_no_error(err);
            float *want_p = read_all(tp), *want_m = read_all(tm), *want_v = read_all(tv);
            CudaElemAdamW e =
                cuda_elem_adamw_params(hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.step);
            for (int64_t i = 0; i < n; i++) {
                cuda_elem_adamw(&e, &p[i], g[i], &m[i], &v[i]);
                assert_close("adamw param", i, want_p[i], p[i], 1e-6);
                assert_close("adamw exp_avg", i, want_m[i], m[i], 1e-6);
                assert_close("adamw exp_avg_sq", i, want_v[i], v[i], 1e-6);
            }
            g_free(want_p);
            g_free(want_m);
            g_free(want_v);
            tdm_tensor_unref(tp);
            tdm_tensor_unref(tg);
            tdm_tensor_unref(tm);
            tdm_tensor_unref(tv);
            g_free(p);
            g_free(g);
            g_free(m);
            g_free(v);
        }
    }
}

/* ---- softmax cross-entropy: the kernel's lanes and reductions ---- */

#define LANES 32
#define FINISH_THREADS 256

/* __shfl_xor_sync butterfly: every lane adds its partner's value as it was
 * before the step; all lanes end with the same bits. */
static double butterfly_sum(double *v)
{
    for (int offset = LANES / 2; offset > 0; offset /= 2) {
        double before[LANES];
        memcpy(before, v, sizeof(before));
        for (int lane = 0; lane < LANES; lane++) {
            v[lane] = cuda_elem_dadd(before[lane], before[lane ^ offset]);
        }
    }
    for (int lane = 1; lane < LANES; lane++) {
        g_assert_true(memcmp(&v[lane], &v[0], sizeof(double)) == 0);
    }
    return v[0];
}

/* One row as xent_rows_kernel computes it with its 32 lanes. */
static double emulate_row(const float *row, int64_t K, int64_t y, double eps, int64_t N,
                          float *drow, int64_t *arg_out)
{
    float best[LANES];
    int64_t arg[LANES];
    for (int lane = 0; lane < LANES; lane++) {
        cuda_elem_xent_lane_max(row, K, lane, LANES, &best[lane], &arg[lane]);
    }
    for (int offset = LANES / 2; offset > 0; offset /= 2) {
        float b[LANES];
        int64_t a[LANES];
        memcpy(b, best, sizeof(b));
        memcpy(a, arg, sizeof(a));
        for (int lane = 0; lane < LANES; lane++) {
            cuda_elem_argmax_merge(&best[lane], &arg[lane], b[lane ^ offset], a[lane ^ offset]);
        }
    }
    for (int lane = 1; lane < LANES; lane++) {
        g_assert_cmpint(arg[lane], ==, arg[0]);
    }
    int64_t am = cuda_elem_argmax_final(row[0], arg[0]);
    double mx = (double)row[am];
    double part[LANES];
    for (int lane = 0; lane < LANES; lane++) {
        part[lane] = cuda_elem_xent_lane_sumexp(row, K, lane, LANES, mx);
    }
    double lse = cuda_elem_xent_lse(mx, butterfly_sum(part));
    for (int lane = 0; lane < LANES; lane++) {
        part[lane] = cuda_elem_xent_lane_grad(row, K, lane, LANES, lse, eps, y, N, drow);
    }
    double sum_logp = butterfly_sum(part);
    *arg_out = am;
    return cuda_elem_xent_loss(eps, K, row[y], lse, sum_logp);
}

/* xent_finish_kernel's fixed-order sum over rows. */
static double emulate_finish(const double *row_loss, int64_t N)
{
    double part[FINISH_THREADS];
    for (int t = 0; t < FINISH_THREADS; t++) {
        part[t] = 0.0;
        for (int64_t r = t; r < N; r += FINISH_THREADS) {
            part[t] = cuda_elem_dadd(part[t], row_loss[r]);
        }
    }
    for (int width = FINISH_THREADS / 2; width > 0; width /= 2) {
        for (int t = 0; t < width; t++) {
            part[t] = cuda_elem_dadd(part[t], part[t + width]);
        }
    }
    return part[0];
}

/* ref's softmax_xent on logits [n, K] with labels (i32 or i64). */
static float ref_xent(const float *logits, int64_t n, int64_t K, const gint64 *labels,
                      TdmDType label_dtype, float eps, float *dlogits, int64_t *correct)
{
    int64_t shape[2] = {n, K};
    TdmTensor *tl = test_tensor_with(ref, TDM_DTYPE_F32, 2, shape, logits);
    void *lab = g_malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) {
        if (label_dtype == TDM_DTYPE_I32) {
            ((gint32 *)lab)[i] = (gint32)labels[i];
        } else {
            ((gint64 *)lab)[i] = labels[i];
        }
    }
    TdmTensor *ty = vec_from(label_dtype, n, lab);
    TdmTensor *td = tdm_tensor_new_empty(ref, TDM_DTYPE_F32);
    GError *err = NULL;
    float loss = 0.0f;
    g_assert_true(tdm_op_softmax_xent(ref, NULL, tl, ty, eps, &loss, td, correct, &err));
    g_assert_no_error(err);
    float *d = read_all(td);
    memcpy(dlogits, d, (size_t)(n * K) * sizeof(float));
    g_free(d);
    g_free(lab);
    tdm_tensor_unref(tl);
    tdm_tensor_unref(ty);
    tdm_tensor_unref(td);
    return loss;
}

/* Logits with ties, NaNs (in column 0 and elsewhere), infinities and
 * large offsets among ordinary rows. */
static float *xent_logits(int64_t N, int64_t K)
{
    float *x = g_new(float, (size_t)(N * K));
    for (int64_t r = 0; r < N; r++) {
        float *row = x + r * K;
        double offset = r % 7 == 3 ? 500.0 : 0.0;
        for (int64_t k = 0; k < K; k++) {
            row[k] = (float)(offset + g_rand_double_range(rng, -4, 4));
        }
        switch (r % 9) {
        case 1: /* the maximum repeated: the first one counts */
            for (int64_t k = K / 3; k < K; k += 2) {
                row[k] = 9.5f;
            }
            break;
        case 2:
            row[0] = NAN;
            break;
        case 4:
            row[K - 1] = NAN;
            break;
        case 5:
            for (int64_t k = 0; k < K; k++) {
                row[k] = 1.25f;
            }
            break;
        case 6:
            row[K / 2] = -INFINITY;
            break;
        default:
            break;
        }
    }
    return x;
}

static void test_softmax_xent(void)
{
    const int64_t shapes[][2] = {{1, 1},   {37, 11},  {64, 10}, {300, 3},
                                 {5, 100}, {3, 1000}, {2, 33}};
    const float epss[] = {0.0f, 0.1f};
    int rows_checked = 0;
    for (guint si = 0; si < G_N_ELEMENTS(shapes); si++) {
        for (guint ei = 0; ei < G_N_ELEMENTS(epss); ei++) {
            const int64_t N = shapes[si][0], K = shapes[si][1];
            const float eps = epss[ei];
            const TdmDType ldt = (si + ei) % 2 ? TDM_DTYPE_I64 : TDM_DTYPE_I32;
            float *x = xent_logits(N, K);
            gint64 *labels = g_new(gint64, N);
            for (int64_t r = 0; r < N; r++) {
                labels[r] = g_rand_int_range(rng, 0, (gint32)K);
            }
            /* the batch: mean loss, gradient of the mean, hits */
            float *want_d = g_new(float, (size_t)(N * K)), *got_d = g_new(float, (size_t)(N * K));
            int64_t want_hits = 0, got_hits = 0;
            float want_loss = ref_xent(x, N, K, labels, ldt, eps, want_d, &want_hits);
            double *row_loss = g_new(double, N);
            int64_t *row_arg = g_new(int64_t, N);
            for (int64_t r = 0; r < N; r++) {
                row_loss[r] = emulate_row(x + r * K, K, labels[r], (double)eps, N, got_d + r * K,
                                          &row_arg[r]);
                got_hits += row_arg[r] == labels[r];
            }
            double total = emulate_finish(row_loss, N);
            assert_close("softmax_xent mean loss", 0, want_loss, cuda_elem_xent_mean(total, N),
                         1e-5);
            g_assert_cmpint(got_hits, ==, want_hits);
            for (int64_t i = 0; i < N * K; i++) {
                assert_close("softmax_xent dlogits", i, want_d[i], got_d[i], 1e-5);
            }
            /* what softmax_xent_stats adds: ref's mean times the rows */
            assert_close("softmax_xent_stats loss sum", 0, (float)((double)want_loss * (double)N),
                         cuda_elem_xent_stats_sum(total, N), 1e-5);
            /* row by row: the loss and gradient of each row alone, and its
             * first maximum: ref counts a hit when the label is it */
            for (int64_t r = 0; r < N; r++) {
                float want_rd[1000], got_rd[1000];
                int64_t hit = 0, arg = 0;
                float want_rl = ref_xent(x + r * K, 1, K, &labels[r], ldt, eps, want_rd, &hit);
                double got_rl = emulate_row(x + r * K, K, labels[r], (double)eps, 1, got_rd, &arg);
                assert_close("softmax_xent row loss", r, want_rl, (float)got_rl, 1e-5);
                for (int64_t k = 0; k < K; k++) {
                    assert_close("softmax_xent row dlogits", k, want_rd[k], got_rd[k], 1e-5);
                }
                g_assert_cmpint(hit, ==, arg == labels[r]);
                ref_xent(x + r * K, 1, K, &arg, ldt, eps, want_rd, &hit);
                if (hit != 1) {
                    g_error("softmax_xent: row %" G_GINT64_FORMAT " of [%" G_GINT64_FORMAT
                            ", %" G_GINT64_FORMAT "]: cuda-elem's first maximum %" G_GINT64_FORMAT
                            " is not ref's",
                            r, N, K, arg);
                }
                rows_checked++;
            }
            g_free(x);
            g_free(labels);
            g_free(want_d);
            g_free(got_d);
            g_free(row_loss);
            g_free(row_arg);
        }
    }
    g_assert_cmpint(rows_checked, ==, 2 * (1 + 37 + 64 + 300 + 5 + 3 + 2));
}

/* The first-maximum merge on its own: the order lanes meet in must not
 * matter, and ties go to the smaller index. */
static void test_argmax_merge(void)
{
    float best = 0.0f;
    int64_t arg = -1;
    cuda_elem_argmax_merge(&best, &arg, 2.0f, 7);
    cuda_elem_argmax_merge(&best, &arg, 2.0f, 3);
    cuda_elem_argmax_merge(&best, &arg, 1.0f, 1);
    cuda_elem_argmax_merge(&best, &arg, 0.0f, -1);
    g_assert_cmpint(arg, ==, 3);
    g_assert_cmpfloat(best, ==, 2.0f);
    cuda_elem_argmax_merge(&best, &arg, 2.5f, 9);
    g_assert_cmpint(arg, ==, 9);
    g_assert_cmpint(cuda_elem_argmax_final(NAN, 9), ==, 0);
    g_assert_cmpint(cuda_elem_argmax_final(1.0f, -1), ==, 0);
    g_assert_cmpint(cuda_elem_argmax_final(1.0f, 9), ==, 9);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    GError *err = NULL;
    ref = tdm_device_get("ref", &err);
    g_assert_no_error(err);
    rng = g_rand_new_with_seed(20261203);

    g_test_add_func("/cuda-elem/elementwise", test_elementwise);
    g_test_add_func("/cuda-elem/dropout", test_dropout);
    g_test_add_func("/cuda-elem/cast", test_cast);
    g_test_add_func("/cuda-elem/sgd", test_sgd);
    g_test_add_func("/cuda-elem/adamw", test_adamw);
    g_test_add_func("/cuda-elem/argmax_merge", test_argmax_merge);
    g_test_add_func("/cuda-elem/softmax_xent", test_softmax_xent);
    int rc = g_test_run();
    g_rand_free(rng);
    return rc;
}

/* SPDX-License-Identifier: MIT */
/* tests/test-cuda-gemm-map.c - the cuda backend's row-major to
 * column-major gemm mapping (plugins/cuda/cuda-blas-map.h), checked on the
 * CPU.
 *
 * The cuda backend hands Tandem's row-major gemm to cuBLASLt, which is
 * column-major, by swapping the operands (C^T = op(b)^T op(a)^T). Here a
 * plain column-major gemm written from the BLAS definition (with
 * cuBLASLt's bias epilogue: bias[i] added to row i of D) is driven by the
 * mapping over the very buffers Tandem holds, and compared with the ref
 * backend's gemm (through tdm_op_gemm) for every trans combination, shapes
 * with M, N or K equal to 1, odd sizes, beta 0 (over a NaN-filled c, which
 * BLAS ignores) and beta != 0, with and without bias; and the K = 0 case,
 * which cuda_gemm runs as K = 1 over zero operands. A wrong operand order,
 * transpose or leading dimension gives wrong numbers here, not on the GPU
 * only. Needs no GPU: it runs on every machine.
 */
#include <math.h>
#include <string.h>

#include <tandem/tandem.h>

#include "cuda-blas-map.h"

static TdmDevice *dev;

/* Column-major D = alpha op(F) op(S) + beta C + bias (bias[i] on row i), as
 * the BLAS reference defines it: C is ignored when beta == 0. */
static void colmajor_gemm(const CudaBlasMap *m, float alpha, const float *F, const float *S,
                          float beta, float *C, const float *bias)
{
    for (int64_t j = 0; j < m->n; j++) {
        for (int64_t i = 0; i < m->m; i++) {
            double acc = 0.0;
            for (int64_t p = 0; p < m->k; p++) {
                double f = m->first.trans ? F[p + i * m->first.ld] : F[i + p * m->first.ld];
                double s = m->second.trans ? S[j + p * m->second.ld] : S[p + j * m->second.ld];
                acc += f * s;
            }
            double r = (double)alpha * acc;
            if (beta != 0.0f) {
                r += (double)beta * C[i + j * m->ldc];
            }
            if (bias != NULL) {
                r += bias[i];
            }
            C[i + j * m->ldc] = (float)r;
        }
    }
}

static float *random_floats(int64_t n, guint32 seed)
{
    GRand *r = g_rand_new_with_seed(seed);
    float *v = g_new(float, MAX(n, 1));
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)g_rand_double_range(r, -1.0, 1.0);
    }
    g_rand_free(r);
    return v;
}

static TdmTensor *tensor2(int64_t rows, int64_t cols, const float *vals)
{
    GError *err = NULL;
    int64_t shape[2] = {rows, cols};
    TdmTensor *t = tdm_tensor_new(dev, TDM_DTYPE_F32, 2, shape, &err);
    g_assert_no_error(err);
    if (rows * cols > 0) {
        g_assert_true(tdm_tensor_write(t, vals, &err));
        g_assert_no_error(err);
    }
    return t;
}

/* The layout a map gives an operand covers its buffer exactly, as
 * cublasLtMatrixLayoutCreate needs (ld >= rows, ld * cols elements). */
static void check_operand(const CudaBlasOperand *o, int64_t numel)
{
    g_assert_cmpint(o->ld, >=, MAX(o->rows, 1));
    g_assert_cmpint(o->ld * o->cols, ==, numel);
}

/* One case: the mapped column-major gemm equals ref's gemm. K == 0 runs
 * the way cuda_gemm runs it: K = 1 with zero operands [M,1] and [1,N]. */
static void check_case(gboolean ta, gboolean tb, int64_t M, int64_t N, int64_t K, float alpha,
                       float beta, gboolean with_bias, guint32 seed)
{
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    float *av = random_floats(ar * ac, seed), *bv = random_floats(br * bc, seed + 1);
    float *cv = random_floats(M * N, seed + 2), *biasv = random_floats(N, seed + 3);
    if (beta == 0.0f) {
        /* BLAS ignores c when beta == 0: garbage must not leak through. */
        for (int64_t i = 0; i < M * N; i++) {
            cv[i] = NAN;
        }
    }

    /* The mapping over Tandem's own row-major buffers. */
    CudaBlasMap map;
    float *got = g_new(float, MAX(M * N, 1));
    memcpy(got, cv, sizeof(float) * M * N);
    if (K == 0) {
        float *za = g_new0(float, MAX(M, 1)), *zb = g_new0(float, MAX(N, 1));
        cuda_blas_map(FALSE, FALSE, M, 1, 1, N, &map);
        check_operand(&map.first, N);
        check_operand(&map.second, M);
        colmajor_gemm(&map, alpha, zb, za, beta, got, with_bias ? biasv : NULL);
        g_free(za);
        g_free(zb);
    } else {
        cuda_blas_map(ta, tb, ar, ac, br, bc, &map);
        g_assert_cmpint(map.m, ==, N);
        g_assert_cmpint(map.n, ==, M);
        g_assert_cmpint(map.k, ==, K);
        check_operand(&map.first, br * bc);
        check_operand(&map.second, ar * ac);
        colmajor_gemm(&map, alpha, bv, av, beta, got, with_bias ? biasv : NULL);
    }
    g_assert_cmpint(map.ldc, ==, N);

    /* The oracle: ref's gemm through the core's front end. */
    GError *err = NULL;
    TdmTensor *a = tensor2(ar, ac, av), *b = tensor2(br, bc, bv);
    TdmTensor *bias = NULL;
    if (with_bias) {
        int64_t n = N;
        bias = tdm_tensor_new(dev, TDM_DTYPE_F32, 1, &n, &err);
        g_assert_no_error(err);
        g_assert_true(tdm_tensor_write(bias, biasv, &err));
    }
    TdmTensor *c;
    if (beta == 0.0f && (seed & 1)) {
        c = tdm_tensor_new_empty(dev, TDM_DTYPE_F32); /* an out slot, shaped [M, N] */
    } else {
        c = tensor2(M, N, cv);
    }
    g_assert_true(tdm_op_gemm(dev, NULL, ta, tb, alpha, a, b, beta, c, bias, &err));
    g_assert_no_error(err);
    g_assert_cmpint(c->ndim, ==, 2);
    g_assert_cmpint(c->shape[0], ==, M);
    g_assert_cmpint(c->shape[1], ==, N);
    float *want = g_new(float, MAX(M * N, 1));
    g_assert_true(tdm_tensor_read(c, want, &err));
    g_assert_no_error(err);

    for (int64_t i = 0; i < M * N; i++) {
        if (!(fabs((double)got[i] - want[i]) <= 1e-5 * MAX(1.0, fabs(want[i])))) {
            g_error("gemm ta=%d tb=%d M=%" G_GINT64_FORMAT " N=%" G_GINT64_FORMAT
                    " K=%" G_GINT64_FORMAT " beta=%g bias=%d: element %" G_GINT64_FORMAT
                    " (row %" G_GINT64_FORMAT ", col %" G_GINT64_FORMAT "): mapped %.9g, ref %.9g",
                    ta, tb, M, N, K, beta, with_bias, i, i / N, i % N, got[i], want[i]);
        }
    }
    tdm_tensor_unref(a);
    tdm_tensor_unref(b);
    tdm_tensor_unref(c);
    if (bias != NULL) {
        tdm_tensor_unref(bias);
    }
    g_free(av);
    g_free(bv);
    g_free(cv);
    g_free(biasv);
    g_free(got);
    g_free(want);
}

static const int64_t sizes[] = {1, 2, 3, 5, 7, 17};

/* Every trans combination over every (M, N, K) from `sizes`, each with a
 * different (alpha, beta, bias) mix. */
static void test_all_shapes(gconstpointer data)
{
    int combo = GPOINTER_TO_INT(data);
    gboolean ta = (combo & 1) != 0, tb = (combo & 2) != 0;
    guint32 seed = 1000u * (guint32)combo;
    int n = (int)G_N_ELEMENTS(sizes);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            for (int l = 0; l < n; l++) {
                int v = (i + j + l) % 4;
                float alpha = v == 3 ? -0.5f : 1.0f;
                float beta = (v == 0 || v == 3) ? 0.0f : (v == 1 ? 1.0f : 0.25f);
                gboolean with_bias = v != 1;
                check_case(ta, tb, sizes[i], sizes[j], sizes[l], alpha, beta, with_bias, seed++);
            }
        }
    }
}

/* One shape and scaling of check_case. */
typedef struct {
    int64_t M, N, K;
    float alpha, beta;
    gboolean with_bias;
} GemmCase;

/* Each case under the four transpose combinations (combination outer),
 * with seeds counting up from `seed`. */
static void check_cases(const GemmCase *cases, size_t n, guint32 seed)
{
    for (int combo = 0; combo < 4; combo++) {
        gboolean ta = (combo & 1) != 0, tb = (combo & 2) != 0;
        for (size_t i = 0; i < n; i++) {
            const GemmCase *g = &cases[i];
            check_case(ta, tb, g->M, g->N, g->K, g->alpha, g->beta, g->with_bias, seed++);
        }
    }
}

/* A few larger, lopsided shapes (tall, wide, long inner dimension). */
static void test_lopsided(void)
{
    static const GemmCase cases[] = {{130, 3, 9, 1.0f, 0.0f, TRUE},
                                     {2, 129, 11, 1.0f, 1.0f, FALSE},
                                     {6, 5, 300, 2.0f, 0.5f, TRUE},
                                     {64, 10, 784, 1.0f, 0.0f, TRUE}};
    check_cases(cases, G_N_ELEMENTS(cases), 77);
}

/* K = 0: c = beta c + bias, computed as K = 1 over zero operands. */
static void test_empty_inner(void)
{
    static const GemmCase cases[] = {
        {3, 4, 0, 1.0f, 0.0f, TRUE}, {1, 5, 0, 1.0f, 0.5f, TRUE}, {4, 1, 0, 1.0f, 1.0f, FALSE}};
    check_cases(cases, G_N_ELEMENTS(cases), 500);
}

static void test_alignment(void)
{
    g_assert_cmpuint(cuda_blas_alignment(0), ==, 256);
    g_assert_cmpuint(cuda_blas_alignment(0x7f0000000000u), ==, 256);
    g_assert_cmpuint(cuda_blas_alignment(0x7f0000000200u + 4), ==, 4);
    g_assert_cmpuint(cuda_blas_alignment(0x7f0000000000u + 16 * 3), ==, 16);
    g_assert_cmpuint(cuda_blas_alignment(0x7f0000000000u + 128), ==, 128);
    g_assert_cmpuint(cuda_blas_alignment(0x7f0000000000u + 2), ==, 2);
    g_assert_cmpuint(cuda_blas_alignment(1), ==, 1);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    GError *err = NULL;
    dev = tdm_device_get("ref", &err);
    g_assert_no_error(err);
    g_assert_nonnull(dev);
    static const char *names[4] = {"nn", "tn", "nt", "tt"}; /* trans_a, trans_b */
    for (int combo = 0; combo < 4; combo++) {
        char *path = g_strdup_printf("/cuda-gemm-map/shapes/%s", names[combo]);
        g_test_add_data_func(path, GINT_TO_POINTER(combo), test_all_shapes);
        g_free(path);
    }
    g_test_add_func("/cuda-gemm-map/lopsided", test_lopsided);
    g_test_add_func("/cuda-gemm-map/empty_inner", test_empty_inner);
    g_test_add_func("/cuda-gemm-map/alignment", test_alignment);
    return g_test_run();
}

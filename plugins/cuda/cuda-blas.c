/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-blas.c - gemm on the cuda backend, through cuBLASLt.
 *
 * Tandem's row-major c[M,N] = alpha op(a) op(b) + beta c (+ bias[j] on
 * every row) runs as the column-major product C^T = op(b)^T op(a)^T
 * (cuda-blas-map.h: no copy, b first). The bias rides cuBLASLt's BIAS
 * epilogue, which adds bias[i] to row i of the column-major D, its M
 * dimension: Tandem's N, so c[i,j] gets bias[j] as it should, in every
 * trans case (D = alpha AB + beta C + bias).
 *
 * Precision (CudaDevice.precision, set_precision):
 *  - FP32: CUBLAS_COMPUTE_32F, strict IEEE products (the default);
 *  - TF32: CUBLAS_COMPUTE_32F_FAST_TF32, f32 data with TF32 tensor cores;
 *  - BF16: a and b rounded to bf16 into scratch (cuda_k_f32_to_bf16), A/B
 *    CUDA_R_16BF, C/D and bias CUDA_R_32F, compute 32F: f32 accumulation
 *    into the f32 c.
 *
 * Plans: the matmul descriptor, the three matrix layouts and the algorithm
 * cublasLtMatmulAlgoGetHeuristic picked are made once per key (shapes,
 * trans flags, precision, bias, pointer alignments) and kept in the call
 * site's op cache (cuda-cache.h); a steady step only sets the bias pointer
 * and calls cublasLtMatmul on the compute stream.
 *
 * Alignment: parameters live in packed arenas, so a weight, its gradient
 * or a bias may be only float-aligned, while cuBLASLt's heuristic assumes
 * 256-byte operands unless told otherwise. The plan tells it each
 * operand's real alignment (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES),
 * and a bias below 16 bytes of alignment is copied to aligned scratch
 * first (cuBLASLt's bias epilogue is reported to fault on such pointers
 * whatever the heuristic was told).
 *
 * K = 0 (an empty inner dimension) runs as K = 1 over zeroed operands
 * [M,1] and [1,N]: c = beta c (+ bias), with no special path.
 *
 * Threads: handles and the workspace are the logical device's; the
 * device lock is held from the plan lookup to the last enqueue.
 */
#include "config.h"

#include <string.h>

#include "cuda-blas-lib.h"
#include "cuda-blas-map.h"
#include "cuda-cache.h"
#include "cuda-kernels.h"

/* The most workspace the heuristic may choose an algorithm for: NVIDIA's
 * recommendation for Hopper (smaller GPUs need less, and take less). */
#define GEMM_WORKSPACE_MAX ((uint64_t)32 << 20)
/* Scratch pieces start on this boundary, so that what is staged there is
 * aligned for any kernel. */
#define SCRATCH_ALIGN ((size_t)256)
/* Below this a bias pointer is staged (see above). */
#define BIAS_MIN_ALIGN 16u

typedef struct {
    TdmDevice *dev;
    CudaDevice *cd;
    gboolean trans_a, trans_b;
    int64_t M, N, K;
    TdmPrecision precision;
    gboolean bias;
} GemmCall;

/* "cublasLtMatmul (c [M, N] = a^T [M, K] x b [K, N] + bias, fp32)": only
 * made when a call failed. */
static char *gemm_what(const GemmCall *g, const char *call)
{
    return g_strdup_printf(
        "%s (c [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "] = a%s [%" G_GINT64_FORMAT
        ", %" G_GINT64_FORMAT "] x b%s [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]%s, %s)",
        call, g->M, g->N, g->trans_a ? "^T" : "", g->M, g->K, g->trans_b ? "^T" : "", g->K, g->N,
        g->bias ? " + bias" : "", tdm_precision_name(g->precision));
}

static gboolean gemm_lt(const GemmCall *g, cublasStatus_t rc, const char *call, GError **error)
{
    if (rc == CUBLAS_STATUS_SUCCESS) {
        return TRUE;
    }
    g_autofree char *what = gemm_what(g, call);
    return cuda_check_cublas(g->dev, rc, "gemm", what, error);
}

static gboolean gemm_rt(const GemmCall *g, cudaError_t rc, const char *call, GError **error)
{
    if (rc == cudaSuccess) {
        return TRUE;
    }
    g_autofree char *what = gemm_what(g, call);
    return cuda_check(g->dev, rc, "gemm", what, error);
}

void cuda_gemm_plan_clear(CudaGemmPlan *p)
{
    cublasLtMatrixLayout_t layouts[] = {p->first, p->second, p->cd};
    for (size_t i = 0; i < G_N_ELEMENTS(layouts); i++) {
        if (layouts[i] != NULL) {
            cuda_blas.cublasLtMatrixLayoutDestroy(layouts[i]);
        }
    }
    if (p->desc != NULL) {
        cuda_blas.cublasLtMatmulDescDestroy(p->desc);
    }
    memset(p, 0, sizeof(*p));
}

/* The operands' alignments in bytes, as the heuristic must assume them. */
typedef struct {
    uint32_t first, second, c, bias;
} GemmAlign;

static gboolean pref_u32(const GemmCall *g, cublasLtMatmulPreference_t pref,
                         cublasLtMatmulPreferenceAttributes_t attr, uint32_t v, GError **error)
{
    return gemm_lt(g, cuda_blas.cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)),
                   "cublasLtMatmulPreferenceSetAttribute", error);
}

/* Descriptor, layouts and the heuristic's algorithm for one key. */
static CudaPlan *gemm_plan_make(const GemmCall *g, const CudaPlanKey *key, const CudaBlasMap *map,
                                const GemmAlign *al, GError **error)
{
    CudaPlan *plan = cuda_plan_new(CUDA_PLAN_GEMM, key);
    CudaGemmPlan *p = &plan->gemm;
    cublasComputeType_t compute =
        g->precision == TDM_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t ab = g->precision == TDM_PRECISION_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    int32_t op_first = map->first.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t op_second = map->second.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    /* The heuristic reads the bias pointer's value for its alignment and
     * never dereferences it: a stand-in with the real pointer's alignment
     * serves until the call sets the real one. */
    const void *bias_stand_in = (const void *)(uintptr_t)al->bias;
    const char *set = "cublasLtMatmulDescSetAttribute";
    gboolean ok =
        gemm_lt(g, cuda_blas.cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F),
                "cublasLtMatmulDescCreate", error) &&
        gemm_lt(g,
                cuda_blas.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                         &op_first, sizeof(op_first)),
                set, error) &&
        gemm_lt(g,
                cuda_blas.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                         &op_second, sizeof(op_second)),
                set, error) &&
        (!g->bias ||
         (gemm_lt(g,
                  cuda_blas.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                           &epilogue, sizeof(epilogue)),
                  set, error) &&
          gemm_lt(g,
                  cuda_blas.cublasLtMatmulDescSetAttribute(p->desc,
                                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                           &bias_stand_in, sizeof(bias_stand_in)),
                  set, error))) &&
        gemm_lt(g,
                cuda_blas.cublasLtMatrixLayoutCreate(&p->first, ab, (uint64_t)map->first.rows,
                                                     (uint64_t)map->first.cols, map->first.ld),
                "cublasLtMatrixLayoutCreate (b)", error) &&
        gemm_lt(g,
                cuda_blas.cublasLtMatrixLayoutCreate(&p->second, ab, (uint64_t)map->second.rows,
                                                     (uint64_t)map->second.cols, map->second.ld),
                "cublasLtMatrixLayoutCreate (a)", error) &&
        gemm_lt(g,
                cuda_blas.cublasLtMatrixLayoutCreate(&p->cd, CUDA_R_32F, (uint64_t)map->m,
                                                     (uint64_t)map->n, map->ldc),
                "cublasLtMatrixLayoutCreate (c)", error);

    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    uint64_t max_ws = GEMM_WORKSPACE_MAX;
    memset(&result, 0, sizeof(result));
    ok = ok &&
         gemm_lt(g, cuda_blas.cublasLtMatmulPreferenceCreate(&pref),
                 "cublasLtMatmulPreferenceCreate", error) &&
         gemm_lt(g,
                 cuda_blas.cublasLtMatmulPreferenceSetAttribute(
                     pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws)),
                 "cublasLtMatmulPreferenceSetAttribute", error) &&
         pref_u32(g, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al->first, error) &&
         pref_u32(g, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al->second, error) &&
         pref_u32(g, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al->c, error) &&
         pref_u32(g, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al->c, error) &&
         gemm_lt(g,
                 cuda_blas.cublasLtMatmulAlgoGetHeuristic(g->cd->lt, p->desc, p->first, p->second,
                                                          p->cd, p->cd, pref, 1, &result, &found),
                 "cublasLtMatmulAlgoGetHeuristic", error);
    if (pref != NULL) {
        cuda_blas.cublasLtMatmulPreferenceDestroy(pref);
    }
    if (ok && (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)) {
        g_autofree char *what = gemm_what(g, "cublasLtMatmulAlgoGetHeuristic");
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "gemm on %s: %s found no algorithm (alignments a %u, b %u, c %u bytes)",
                    g->cd->name, what, al->second, al->first, al->c);
        ok = FALSE;
    }
    if (!ok) {
        cuda_plan_free(plan);
        return NULL;
    }
    p->algo = result.algo;
    p->workspace = result.workspaceSize;
    return plan;
}

/* Takes the next piece of `nbytes` from the scratch being laid out. */
static size_t scratch_take(size_t *off, size_t nbytes)
{
    size_t at = *off;
    *off += (nbytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    return at;
}

/* Plan lookup, staging and the matmul; the caller holds the device lock.
 * M, N >= 1 here. */
static gboolean gemm_locked(const GemmCall *g, TdmOpCache **cache, float alpha, TdmTensor *a,
                            TdmTensor *b, float beta, TdmTensor *c, TdmTensor *bias, GError **error)
{
    CudaDevice *cd = g->cd;
    gboolean bf16 = g->precision == TDM_PRECISION_BF16;
    gboolean empty_k = g->K == 0;
    size_t esize = bf16 ? 2 : sizeof(float);
    const float *A = cuda_f32(a), *B = cuda_f32(b), *BIAS = bias ? cuda_f32(bias) : NULL;
    float *C = cuda_f32(c);

    /* Which operands go through scratch: bf16 copies of a and b, the
     * zero operands of K = 0, a badly aligned bias. */
    gboolean staged_ab = bf16 || empty_k;
    gboolean staged_bias = BIAS != NULL && cuda_blas_alignment((uintptr_t)BIAS) < BIAS_MIN_ALIGN;
    int64_t a_numel = empty_k ? g->M : tdm_tensor_numel(a);
    int64_t b_numel = empty_k ? g->N : tdm_tensor_numel(b);
    size_t off = 0, off_a = 0, off_b = 0, off_bias = 0;
    if (staged_ab) {
        off_a = scratch_take(&off, (size_t)a_numel * esize);
        off_b = scratch_take(&off, (size_t)b_numel * esize);
    }
    if (staged_bias) {
        off_bias = scratch_take(&off, (size_t)g->N * sizeof(float));
    }

    CudaBlasMap map;
    if (empty_k) {
        cuda_blas_map(FALSE, FALSE, g->M, 1, 1, g->N, &map);
    } else {
        cuda_blas_map(g->trans_a, g->trans_b, a->shape[0], a->shape[1], b->shape[0], b->shape[1],
                      &map);
    }
    GemmAlign al = {
        .first = staged_ab ? 256u : cuda_blas_alignment((uintptr_t)B),
        .second = staged_ab ? 256u : cuda_blas_alignment((uintptr_t)A),
        .c = cuda_blas_alignment((uintptr_t)C),
        .bias = BIAS == NULL ? 256u : (staged_bias ? 256u : cuda_blas_alignment((uintptr_t)BIAS)),
    };

    CudaPlanKey key;
    cuda_key_init(&key);
    int64_t head[] = {g->dev->index,
                      g->precision,
                      empty_k ? 0 : g->trans_a,
                      empty_k ? 0 : g->trans_b,
                      g->M,
                      g->N,
                      map.k,
                      g->bias,
                      al.first,
                      al.second,
                      al.c,
                      al.bias};
    for (size_t i = 0; i < G_N_ELEMENTS(head); i++) {
        cuda_key_add(&key, head[i]);
    }
    CudaPlan *plan = cuda_cache_find(cache, CUDA_PLAN_GEMM, &key);
    if (plan == NULL) {
        plan = gemm_plan_make(g, &key, &map, &al, error);
        if (plan == NULL) {
            return FALSE;
        }
        cuda_cache_insert(cache, plan);
    }
    CudaGemmPlan *p = &plan->gemm;
    size_t off_ws = scratch_take(&off, p->workspace);
    gboolean ok = TRUE;
    char *base = NULL;
    if (off > 0) {
        base = cuda_workspace(g->dev, off, error);
        ok = base != NULL;
    }

    const void *first = B, *second = A;
    if (ok && staged_ab) {
        first = base + off_b;
        second = base + off_a;
        if (empty_k) {
            /* Zero bits are zero in f32 and bf16 alike. */
            ok = gemm_rt(g, cudaMemsetAsync(base + off_a, 0, (size_t)a_numel * esize, cd->compute),
                         "cudaMemsetAsync (zero a)", error) &&
                 gemm_rt(g, cudaMemsetAsync(base + off_b, 0, (size_t)b_numel * esize, cd->compute),
                         "cudaMemsetAsync (zero b)", error);
        } else {
            ok = gemm_rt(g, cuda_k_f32_to_bf16(cd->compute, A, base + off_a, a_numel),
                         "cuda_k_f32_to_bf16 (a)", error) &&
                 gemm_rt(g, cuda_k_f32_to_bf16(cd->compute, B, base + off_b, b_numel),
                         "cuda_k_f32_to_bf16 (b)", error);
        }
    }
    const void *bias_ptr = BIAS;
    if (ok && staged_bias) {
        bias_ptr = base + off_bias;
        ok = gemm_rt(g,
                     cudaMemcpyAsync(base + off_bias, BIAS, (size_t)g->N * sizeof(float),
                                     cudaMemcpyDeviceToDevice, cd->compute),
                     "cudaMemcpyAsync (bias to aligned scratch)", error);
    }
    if (ok && bias_ptr != NULL) {
        ok = gemm_lt(g,
                     cuda_blas.cublasLtMatmulDescSetAttribute(
                         p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)),
                     "cublasLtMatmulDescSetAttribute (bias)", error);
    }
    if (ok) {
        /* C and D are the same matrix with the same layout: in place. */
        ok = gemm_lt(g,
                     cuda_blas.cublasLtMatmul(cd->lt, p->desc, &alpha, first, p->first, second,
                                              p->second, &beta, C, p->cd, C, p->cd, &p->algo,
                                              p->workspace > 0 ? base + off_ws : NULL, p->workspace,
                                              cd->compute),
                     "cublasLtMatmul", error);
    }
    cuda_plan_release(cache, plan);
    return ok;
}

gboolean cuda_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                   float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                   TdmTensor *bias, GError **error)
{
    const char *op = "gemm";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaDevice *cd = cuda_dev(dev);
    GemmCall g = {
        .dev = dev,
        .cd = cd,
        .trans_a = trans_a,
        .trans_b = trans_b,
        .M = trans_a ? a->shape[1] : a->shape[0],
        .K = trans_a ? a->shape[0] : a->shape[1],
        .N = trans_b ? b->shape[0] : b->shape[1],
        .bias = bias != NULL,
    };
    int64_t cshape[2] = {g.M, g.N};
    gboolean ok = cuda_check_plain(op, "a", a, error) && cuda_check_plain(op, "b", b, error) &&
                  (bias == NULL || cuda_check_plain(op, "bias", bias, error));
    if (ok) {
        /* c is not an out slot, except an empty one when beta == 0. */
        if (c->storage == NULL && beta == 0.0f) {
            ok = cuda_ensure_out(c, TDM_DTYPE_F32, 2, cshape, error);
        } else {
            ok = cuda_check_plain(op, "c", c, error);
        }
    }
    if (ok && g.M > 0 && g.N > 0) {
        g_mutex_lock(&cd->lock);
        g.precision = cd->precision;
        ok = gemm_locked(&g, cache, alpha, a, b, beta, c, bias, error);
        g_mutex_unlock(&cd->lock);
    }
    return cuda_op_end(dev, op, ok, error);
}

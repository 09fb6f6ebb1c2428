/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-blas-map.h - Tandem's row-major gemm as a column-major
 * BLAS call, and the alignment figure cuBLASLt's heuristic wants.
 *
 * Tandem computes c[M,N] = alpha op(a) op(b) + beta c (+ bias[j] on every
 * row) over row-major matrices; cuBLAS and cuBLASLt are column-major. A
 * row-major matrix X[r,c] with row stride ld is, read column-major, the
 * matrix X^T (c rows, r columns, leading dimension ld). So the call
 * computes C^T = op(b)^T op(a)^T, which needs no copy: the first operand of
 * the column-major call is Tandem's b, the second is Tandem's a, and the
 * result is c read column-major as an N x M matrix with ldc = N. Each
 * operand's column-major transpose flag is its own Tandem flag: b^T is what
 * column-major reading gives for free, so op(b)^T needs a transpose exactly
 * when op(b) = b^T.
 *
 * cuBLASLt's bias epilogue adds bias[i] to row i of the column-major D
 * (its M dimension, here Tandem's N): that is bias[j] added to c[i,j], the
 * broadcast Tandem wants, so the epilogue serves every case of the mapping.
 *
 * Pure C (no CUDA types), so that tests/test-cuda-gemm-map.c runs the
 * mapping on every machine against the ref backend's gemm.
 */
#ifndef TDM_CUDA_BLAS_MAP_H
#define TDM_CUDA_BLAS_MAP_H

#include <stdint.h>

/* One column-major operand: stored as `rows` x `cols` with leading
 * dimension `ld` (what cublasLtMatrixLayoutCreate takes), used transposed
 * when `trans`. */
typedef struct {
    int trans;
    int64_t rows, cols, ld;
} CudaBlasOperand;

/* The column-major problem D[m,n] = alpha op(first) op(second) + beta C:
 * first = Tandem's b, second = Tandem's a, C/D = Tandem's c. */
typedef struct {
    int64_t m, n, k;
    CudaBlasOperand first;  /* op(first) is m x k */
    CudaBlasOperand second; /* op(second) is k x n */
    int64_t ldc;            /* C and D: m rows, n columns */
} CudaBlasMap;

/* Maps Tandem's gemm with a [a_rows, a_cols] and b [b_rows, b_cols], both
 * plain row-major (row stride = their column count), and the trans flags.
 * The shapes must agree (op(a) is M x K, op(b) is K x N), which the core
 * checks before the op runs. */
static inline void cuda_blas_map(int trans_a, int trans_b, int64_t a_rows, int64_t a_cols,
                                 int64_t b_rows, int64_t b_cols, CudaBlasMap *map)
{
    int64_t M = trans_a ? a_cols : a_rows;
    int64_t K = trans_a ? a_rows : a_cols;
    int64_t N = trans_b ? b_rows : b_cols;
    map->m = N;
    map->n = M;
    map->k = K;
    /* b [b_rows, b_cols] read column-major: b_cols x b_rows, ld b_cols. */
    map->first.trans = trans_b ? 1 : 0;
    map->first.rows = b_cols;
    map->first.cols = b_rows;
    map->first.ld = b_cols;
    map->second.trans = trans_a ? 1 : 0;
    map->second.rows = a_cols;
    map->second.cols = a_rows;
    map->second.ld = a_cols;
    map->ldc = N;
}

/* The largest power of two, at most 256, that divides the address: the
 * alignment to give cuBLASLt's heuristic for that operand (it assumes 256
 * bytes unless told, and may then pick a kernel that faults on a view into
 * a parameter arena, which is only float-aligned). 256 for NULL. */
static inline uint32_t cuda_blas_alignment(uintptr_t addr)
{
    uint32_t a = 1;
    while (a < 256 && (addr & a) == 0) {
        a <<= 1;
    }
    return a;
}

#endif /* TDM_CUDA_BLAS_MAP_H */

/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-cache.h - what the cuda backend keeps in an op cache.
 *
 * A TdmOpCache slot belongs to one call site (a module's forward gemm, its
 * convolution's backward filter...). The cuda backend keeps there a short
 * list of plans, each made for one key: the op kind, the shapes, the
 * precision, the pointer alignments the chosen algorithm depends on. A plan
 * holds what is costly to make and the same at every step of a steady
 * run: cuBLASLt's matmul descriptor, matrix layouts and the algorithm its
 * heuristic chose (cuda-blas.c), or cuDNN's tensor, filter and convolution
 * descriptors and the algorithm chosen by its heuristic or by timing
 * (cuda-conv.c), with the workspace that algorithm needs. A few plans stay
 * per slot, so that the smaller last batch of an epoch does not evict the
 * full batch's; the least recently used goes first. Descriptors are host
 * objects: freeing one after its work was queued is safe.
 *
 * A NULL cache slot pointer means "cache nothing": the plan is made for the
 * call and freed after it (cuda_plan_release).
 */
#ifndef TDM_CUDA_CACHE_H
#define TDM_CUDA_CACHE_H

#include "cuda.h"

#define CUDA_PLAN_KEY_MAX 24
#define CUDA_PLANS_PER_CACHE 4

typedef enum {
    CUDA_PLAN_GEMM,
    CUDA_PLAN_CONV_FWD,
    CUDA_PLAN_CONV_FWD_RELU,
    CUDA_PLAN_CONV_BWD_DATA,
    CUDA_PLAN_CONV_BWD_FILTER,
} CudaPlanKind;

typedef struct {
    int n;
    int64_t v[CUDA_PLAN_KEY_MAX];
} CudaPlanKey;

/* cuBLASLt gemm (cuda-blas.c). `first` is Tandem's b, `second` Tandem's a
 * (cuda-blas-map.h); C and D share `cd`. */
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t first, second, cd;
    cublasLtMatmulAlgo_t algo;
    size_t workspace; /* bytes the algorithm needs */
} CudaGemmPlan;

/* One usable cuDNN algorithm: cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
 * of the plan's kind, the math type it runs with, the workspace it needs. */
typedef struct {
    int algo;
    cudnnMathType_t math;
    size_t workspace;
} CudaConvChoice;

#define CUDA_CONV_CHOICES 8

/* cuDNN convolution in one direction (cuda-conv.c). x/y/w describe the
 * tensors the convolution itself reads and writes (bf16 under BF16
 * precision, else f32); y32 is the f32 output-shaped tensor (bias add,
 * backward bias); bias is [1, O, 1, 1] f32. The choices are the
 * algorithms that passed the filters, best first; `cur` is the one in use
 * (a later one takes over if cuDNN refuses it at run time). */
typedef struct {
    cudnnTensorDescriptor_t x, y, y32, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnActivationDescriptor_t act; /* ReLU, CONV_FWD_RELU in f32/tf32 only */
    CudaConvChoice choice[CUDA_CONV_CHOICES];
    int n_choices, cur;
    gboolean fused; /* CONV_FWD_RELU: cudnnConvolutionBiasActivationForward is used */
} CudaConvPlan;

typedef struct _CudaPlan CudaPlan;
struct _CudaPlan {
    CudaPlanKind kind;
    CudaPlanKey key;
    CudaPlan *next;
    union {
        CudaGemmPlan gemm; /* GEMM */
        CudaConvPlan conv; /* CONV_* */
    };
};

struct _TdmOpCache {
    CudaPlan *plans; /* most recently used first, at most CUDA_PLANS_PER_CACHE */
};

void cuda_key_init(CudaPlanKey *key);
/* Appends v (a key never exceeds CUDA_PLAN_KEY_MAX values: the callers'
 * keys are fixed in length). */
void cuda_key_add(CudaPlanKey *key, int64_t v);

/* The plan of that kind and key (moved to the front), or NULL. */
CudaPlan *cuda_cache_find(TdmOpCache **cache, CudaPlanKind kind, const CudaPlanKey *key);
/* A new zeroed plan of that kind and key (not in any cache yet). */
CudaPlan *cuda_plan_new(CudaPlanKind kind, const CudaPlanKey *key);
/* Stores a plan made by cuda_plan_new in the cache (front), evicting the
 * least recently used beyond CUDA_PLANS_PER_CACHE; nothing when cache is
 * NULL (the caller then releases it after use). */
void cuda_cache_insert(TdmOpCache **cache, CudaPlan *plan);
/* After use: frees the plan if no cache holds it. */
void cuda_plan_release(TdmOpCache **cache, CudaPlan *plan);
void cuda_plan_free(CudaPlan *plan);

/* Frees what each kind holds (cuda-blas.c, cuda-conv.c); the plan's memory
 * itself is the cache's. */
void cuda_gemm_plan_clear(CudaGemmPlan *plan);
void cuda_conv_plan_clear(CudaConvPlan *plan);

#endif /* TDM_CUDA_CACHE_H */

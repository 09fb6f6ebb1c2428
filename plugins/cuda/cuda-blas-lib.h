/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-blas-lib.h - the cuBLAS and cuBLASLt functions the
 * cuda backend calls, loaded when the first cuda device is opened.
 *
 * Loading libcublasLt costs about 150 MiB of resident memory (its
 * relocations touch that much), so the plugin does not link cuBLAS: every
 * process that loads the plugin (a CPU training run, `tandem inspect`, a
 * machine without a GPU) would pay it. cuda_blas_lib_load() dlopens both
 * libraries by the soname of the cuBLAS major version the plugin was built
 * against and fills `cuda_blas`, a table of pointers typed after the
 * headers' prototypes; the plugin calls cuBLAS only through it, and only
 * on an opened device (device_open loads it first). The --no-undefined
 * link of the plugin fails on any direct call left.
 *
 * The table's fields are named after the functions as the headers spell
 * them, so `cuda_blas.cublasLtMatmul(...)` reads as the cuBLAS call it is.
 * cublas_v2.h maps some of those names to their _v2 symbols by macro
 * (cublasCreate -> cublasCreate_v2): the field and the symbol looked up
 * get the same mapping, so the table holds the function the header
 * declares.
 */
#ifndef TDM_CUDA_BLAS_LIB_H
#define TDM_CUDA_BLAS_LIB_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <glib.h>

/* Every function of the table: LT(name) for libcublasLt, BLAS(name) for
 * libcublas. */
#define CUDA_BLAS_FUNCTIONS(LT, BLAS)                                                              \
    LT(cublasLtGetVersion)                                                                         \
    LT(cublasLtCreate)                                                                             \
    LT(cublasLtDestroy)                                                                            \
    LT(cublasLtMatmul)                                                                             \
    LT(cublasLtMatmulAlgoGetHeuristic)                                                             \
    LT(cublasLtMatmulDescCreate)                                                                   \
    LT(cublasLtMatmulDescDestroy)                                                                  \
    LT(cublasLtMatmulDescSetAttribute)                                                             \
    LT(cublasLtMatmulPreferenceCreate)                                                             \
    LT(cublasLtMatmulPreferenceDestroy)                                                            \
    LT(cublasLtMatmulPreferenceSetAttribute)                                                       \
    LT(cublasLtMatrixLayoutCreate)                                                                 \
    LT(cublasLtMatrixLayoutDestroy)                                                                \
    BLAS(cublasCreate)                                                                             \
    BLAS(cublasDestroy)                                                                            \
    BLAS(cublasGetStatusString)                                                                    \
    BLAS(cublasSaxpy)                                                                              \
    BLAS(cublasSetMathMode)                                                                        \
    BLAS(cublasSetStream)

#define CUDA_BLAS_FIELD(name) __typeof__(name) *name;

typedef struct {
    CUDA_BLAS_FUNCTIONS(CUDA_BLAS_FIELD, CUDA_BLAS_FIELD)
} CudaBlasLib;

#undef CUDA_BLAS_FIELD

/* Filled by the first successful cuda_blas_lib_load(); all NULL before. */
extern CudaBlasLib cuda_blas;

/* Loads the library `lt_soname` (cuBLASLt), then `blas_soname` (cuBLAS),
 * resolves every function of the table into *table and checks cuBLASLt's
 * major version against the headers'. NULL on success (the libraries stay
 * loaded); else the message (transfer full) naming the library, the
 * symbol or the version, with the libraries closed again and *table
 * zeroed. cuda_blas_lib_load's work; tests call it with other names. */
char *cuda_blas_lib_open(const char *lt_soname, const char *blas_soname, CudaBlasLib *table);

/* Loads libcublasLt.so.N and libcublas.so.N (N: CUBLAS_VER_MAJOR of the
 * headers) and resolves every function of the table, once per process
 * (the libraries stay loaded). FALSE with a TDM_ERROR_UNAVAILABLE error
 * naming the library file, the symbol and where the loader searched when
 * one is missing; every later call returns the same error. Thread-safe. */
gboolean cuda_blas_lib_load(GError **error);

#endif /* TDM_CUDA_BLAS_LIB_H */

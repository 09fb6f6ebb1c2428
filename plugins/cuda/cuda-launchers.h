/* plugins/cuda/cuda-launchers.h - the kernel launchers cuda-blas.c and
 * cuda-conv.c call, as the plugin's shared contract fixes them.
 *
 * They are defined in cuda-ops.cu and declared, with the rest of the
 * .cu launchers, in cuda-kernels.h; this header repeats the three that
 * GEMM and convolution use (same prototypes), so that those two files
 * build without the elementwise kernels' header. Each enqueues on `s` and
 * returns the launch's cudaGetLastError(). bf16 buffers hold n uint16_t.
 */
#ifndef TDM_CUDA_LAUNCHERS_H
#define TDM_CUDA_LAUNCHERS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Round to nearest even (NaN kept). */
cudaError_t cuda_k_f32_to_bf16(cudaStream_t s, const float *src, void *dst, int64_t n);
cudaError_t cuda_k_bf16_to_f32(cudaStream_t s, const void *src, float *dst, int64_t n);
/* y = max(x, 0); y may be x. */
cudaError_t cuda_k_relu(cudaStream_t s, const float *x, float *y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* TDM_CUDA_LAUNCHERS_H */

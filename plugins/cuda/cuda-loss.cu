/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-loss.cu - the fused softmax cross-entropy kernels.
 *
 * One warp per row (kRowsPerBlock rows per block, grid-stride over rows):
 * the lanes share the row's classes, and three passes with warp-shuffle
 * reductions give the first maximum, the log-sum-exp and the sum of
 * log-probabilities; the third pass also writes the row's dlogits. The
 * arithmetic is cuda-elem.h's (in double, as ref), and the butterfly
 * reductions leave every lane with the same value, which the CPU test
 * reproduces in the same order. Each row's loss and hit go to scratch;
 * a one-block kernel then sums them in a fixed tree order (no atomics on
 * floats: the same batch always gives the same bits), reports the first
 * bad label and either stores the call's totals (softmax_xent, read by
 * the host) or adds them to the device statistics (softmax_xent_stats, no
 * host wait). A bad label (outside [0, K)) never indexes the row: its row
 * only records itself with atomicMin and contributes nothing.
 */
#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda-kernels.h"

static const int kWarp = 32;
static const int kRowsPerBlock = 8;
static const int kRowThreads = kWarp * kRowsPerBlock;
static const int64_t kMaxRowBlocks = 65536;
static const int kFinishThreads = 256; /* a power of two: the tree below halves it */
static const unsigned kFullMask = 0xffffffffu;
static const unsigned long long kNoRow = ~0ULL;

static __device__ double warp_sum(double v)
{
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
        v = cuda_elem_dadd(v, __shfl_xor_sync(kFullMask, v, offset));
    }
    return v;
}

static __device__ int64_t label_at(const void *labels, int labels_i64, int64_t r)
{
    return labels_i64 ? ((const int64_t *)labels)[r] : (int64_t)((const int32_t *)labels)[r];
}

static __global__ void xent_rows_kernel(const float *logits, const void *labels, int labels_i64,
                                        int64_t n, int64_t k, double eps, float *dlogits,
                                        double *row_loss, int32_t *row_hit, CudaXentState *state)
{
    const int lane = (int)(threadIdx.x % kWarp);
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / kWarp);
    /* r is the same for every lane of a warp: the shuffles see all 32 */
    for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp; r < n;
         r += warps) {
        const float *row = logits + r * k;
        const int64_t y = label_at(labels, labels_i64, r);
        const bool bad = y < 0 || y >= k;

        float best;
        int64_t arg;
        cuda_elem_xent_lane_max(row, k, lane, kWarp, &best, &arg);
        for (int offset = kWarp / 2; offset > 0; offset /= 2) {
            float other_best = __shfl_xor_sync(kFullMask, best, offset);
            long long other_arg = __shfl_xor_sync(kFullMask, (long long)arg, offset);
            cuda_elem_argmax_merge(&best, &arg, other_best, (int64_t)other_arg);
        }
        arg = cuda_elem_argmax_final(row[0], arg);
        const double mx = (double)row[arg];

        const double lse =
            cuda_elem_xent_lse(mx, warp_sum(cuda_elem_xent_lane_sumexp(row, k, lane, kWarp, mx)));
        /* read by every lane before any lane's gradient pass, which
         * overwrites the row when dlogits is logits */
        const float x_label = bad ? 0.0f : row[y];
        __syncwarp(kFullMask);
        float *drow = dlogits != nullptr ? dlogits + r * k : nullptr;
        const double sum_logp =
            warp_sum(cuda_elem_xent_lane_grad(row, k, lane, kWarp, lse, eps, y, n, drow));

        if (lane == 0) {
            if (bad) {
                atomicMin(&state->batch_bad_row, (unsigned long long)r);
                row_loss[r] = 0.0;
                row_hit[r] = 0;
            } else {
                row_loss[r] = cuda_elem_xent_loss(eps, k, x_label, lse, sum_logp);
                row_hit[r] = arg == y;
            }
        }
    }
}

static __global__ void xent_finish_kernel(const double *row_loss, const int32_t *row_hit,
                                          const void *labels, int labels_i64, int64_t n, int64_t k,
                                          CudaXentState *state, float *stats)
{
    __shared__ double loss_part[kFinishThreads];
    __shared__ long long hit_part[kFinishThreads];
    double loss = 0.0;
    long long hits = 0;
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
        loss = cuda_elem_dadd(loss, row_loss[r]);
        hits += row_hit[r];
    }
    loss_part[threadIdx.x] = loss;
    hit_part[threadIdx.x] = hits;
    __syncthreads();
    for (int width = kFinishThreads / 2; width > 0; width /= 2) {
        if ((int)threadIdx.x < width) {
            loss_part[threadIdx.x] =
                cuda_elem_dadd(loss_part[threadIdx.x], loss_part[threadIdx.x + width]);
            hit_part[threadIdx.x] += hit_part[threadIdx.x + width];
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) {
        return;
    }
    const double total = loss_part[0];
    const long long hit_total = hit_part[0];
    const unsigned long long bad = state->batch_bad_row;
    state->batch_bad_row = kNoRow; /* the next call starts clean */
    const long long bad_row = bad == kNoRow ? -1 : (long long)bad;
    const long long bad_label = bad_row < 0 ? -1 : (long long)label_at(labels, labels_i64, bad_row);
    if (stats == nullptr) {
        state->total = total;
        state->hits = hit_total;
        state->bad_row = bad_row;
        state->bad_label = bad_label;
    } else if (bad_row >= 0) {
        /* statistics untouched, as ref leaves them on a bad label; the
         * first bad label waits here for the host to report it */
        if (state->first_bad_row < 0) {
            state->first_bad_row = bad_row;
            state->first_bad_label = bad_label;
            state->first_bad_classes = k;
        }
    } else {
        stats[0] += cuda_elem_xent_stats_sum(total, n);
        stats[1] += (float)hit_total;
    }
}

extern "C" {

int64_t cuda_k_softmax_xent_scratch(int64_t n)
{
    int64_t bytes = n * (int64_t)(sizeof(double) + sizeof(int32_t));
    return (bytes + 7) / 8 * 8;
}

cudaError_t cuda_k_softmax_xent(cudaStream_t s, const float *logits, const void *labels,
                                int labels_i64, int64_t n, int64_t k, float label_smoothing,
                                float *dlogits, void *scratch, CudaXentState *state, float *stats)
{
    if (n <= 0 || k <= 0) {
        return cudaErrorInvalidValue; /* the front end refuses empty logits */
    }
    double *row_loss = (double *)scratch;
    int32_t *row_hit = (int32_t *)(row_loss + n);
    int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
    if (blocks > kMaxRowBlocks) {
        blocks = kMaxRowBlocks;
    }
    xent_rows_kernel<<<(unsigned)blocks, kRowThreads, 0, s>>>(logits, labels, labels_i64, n, k,
                                                              (double)label_smoothing, dlogits,
                                                              row_loss, row_hit, state);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        return rc;
    }
    xent_finish_kernel<<<1, kFinishThreads, 0, s>>>(row_loss, row_hit, labels, labels_i64, n, k,
                                                    state, stats);
    return cudaGetLastError();
}

} /* extern "C" */

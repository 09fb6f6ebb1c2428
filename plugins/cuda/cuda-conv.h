/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-conv.h - what the two files of the cuda backend's
 * convolutions share: the call being run (shapes, mode, messages) and the
 * making of a plan (cuda-conv-plan.c: cuDNN descriptors and the choice of
 * algorithms), which cuda-conv.c runs. Private to those two files.
 */
#ifndef TDM_CUDA_CONV_H
#define TDM_CUDA_CONV_H

#include "cuda-cache.h"

/* The bounds of the workspace limit, and the least that timed trials get. */
#define CONV_WORKSPACE_MIN ((size_t)512 << 20)
#define CONV_WORKSPACE_MAX ((size_t)2048 << 20)
#define CONV_FIND_WORKSPACE_MIN ((size_t)128 << 20)

/* One convolution call: its op name, parameters, plan kind, the mode read
 * under the device lock, and the geometry (x [N,C,H,W], w [O,Cg,KH,KW],
 * y [N,O,OH,OW]). */
typedef struct {
    TdmDevice *dev;
    CudaDevice *cd;
    const char *op;
    const TdmConv2dParams *p;
    CudaPlanKind kind;
    TdmPrecision precision;
    gboolean deterministic;
    int64_t N, C, H, W, O, Cg, KH, KW, OH, OW;
} ConvCall;

/* The real inputs and output of timed trials (TDM_CUDA_BENCHMARK=1):
 * in1/in2 as the kind's call takes them (x, w / w, dy / x, dy). */
typedef struct {
    const void *in1, *in2;
    void *out;
    void *ws;
    size_t ws_bytes;
} ConvFind;

/* "cudnnConvolutionForward algo 1 (x [..], w [..], y [..], stride 1x1,
 * pad 1x1, dilation 1x1, groups 1, fp32)"; algo < 0 leaves it out. Made
 * only when a call failed. */
char *cuda_conv_what(const ConvCall *c, const char *call, int algo);
/* A cuDNN status as a GError naming the op, the call and the shapes. */
gboolean cuda_conv_dnn(const ConvCall *c, cudnnStatus_t rc, const char *call, int algo,
                       GError **error);

/* Descriptors and the ranked usable algorithms for one key: cuDNN's _v7
 * heuristic, or timed trials on `find`'s buffers when it is not NULL.
 * Caller holds the device lock. NULL with the error set. */
/* The most workspace an algorithm of this call may take (cuda-conv-plan.c
 * says why). */
size_t cuda_conv_workspace_limit(const ConvCall *c);

CudaPlan *cuda_conv_plan_make(const ConvCall *c, const CudaPlanKey *key, const ConvFind *find,
                              GError **error);

#endif /* TDM_CUDA_CONV_H */

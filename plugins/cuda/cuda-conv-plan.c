/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-conv-plan.c - the plans of the cuda backend's
 * convolutions: cuDNN's tensor, filter, convolution and activation
 * descriptors for one shape and mode, and the algorithms that may run it.
 *
 * Descriptors: NCHW tensors, bf16 under BF16 precision (cuDNN's
 * PSEUDO_BFLOAT16 configuration: bf16 data, FLOAT compute type) and f32
 * otherwise; an f32 output-shaped tensor and a [1, O, 1, 1] f32 bias for
 * the bias add and the bias gradient; cross-correlation with the group
 * count; math type CUDNN_FMA_MATH in strict FP32 (DEFAULT_MATH would allow
 * TF32 from Ampere on), CUDNN_TENSOR_OP_MATH for TF32 and BF16.
 *
 * Algorithms: cuDNN ranks them, by its _v7 heuristic or (under
 * TDM_CUDA_BENCHMARK=1) by timing each with cudnnFind*AlgorithmEx. Kept,
 * best first, are those that succeeded, need at most the workspace limit,
 * and do not report tensor-op math in strict FP32 (each then runs with FMA
 * math whatever its record says); in deterministic mode only those that
 * report CUDNN_DETERMINISTIC (and never the ones cuDNN's header marks as
 * using atomics), and direct or GEMM-based ones first: FFT and Winograd
 * ones (whose transforms round differently) only when nothing else is
 * left. Outside deterministic mode FFT and Winograd stay allowed in strict
 * FP32, their error being far below the conformance tolerance (1e-4 of the
 * norm). Each kept choice records its math type and the workspace
 * cudnnGet*WorkspaceSize gives for it.
 */
#include "config.h"

#include <string.h>

#include "cuda-conv.h"

char *cuda_conv_what(const ConvCall *c, const char *call, int algo)
{
    const TdmConv2dParams *p = c->p;
    g_autofree char *head = algo >= 0 ? g_strdup_printf("%s algo %d", call, algo) : g_strdup(call);
    return g_strdup_printf(
        "%s (x [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
        "], w [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
        "], y [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
        "], stride %dx%d, pad %dx%d, dilation %dx%d, groups %d, %s%s)",
        head, c->N, c->C, c->H, c->W, c->O, c->Cg, c->KH, c->KW, c->N, c->O, c->OH, c->OW,
        p->stride_h, p->stride_w, p->pad_h, p->pad_w, p->dilation_h, p->dilation_w, p->groups,
        tdm_precision_name(c->precision), c->deterministic ? ", deterministic" : "");
}

gboolean cuda_conv_dnn(const ConvCall *c, cudnnStatus_t rc, const char *call, int algo,
                       GError **error)
{
    if (rc == CUDNN_STATUS_SUCCESS) {
        return TRUE;
    }
    g_autofree char *what = cuda_conv_what(c, call, algo);
    return cuda_check_cudnn(c->dev, rc, c->op, what, error);
}

void cuda_conv_plan_clear(CudaConvPlan *p)
{
    cudnnTensorDescriptor_t tensors[] = {p->x, p->y, p->y32, p->bias};
    for (size_t i = 0; i < G_N_ELEMENTS(tensors); i++) {
        if (tensors[i] != NULL) {
            cudnnDestroyTensorDescriptor(tensors[i]);
        }
    }
    if (p->w != NULL) {
        cudnnDestroyFilterDescriptor(p->w);
    }
    if (p->conv != NULL) {
        cudnnDestroyConvolutionDescriptor(p->conv);
    }
    if (p->act != NULL) {
        cudnnDestroyActivationDescriptor(p->act);
    }
    memset(p, 0, sizeof(*p));
}

/* What a heuristic or a trial says of one algorithm. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} ConvPerf;

/* FFT and Winograd algorithms of each direction (transform-based). */
static gboolean algo_is_transform(CudaPlanKind kind, int algo)
{
    switch (kind) {
    case CUDA_PLAN_CONV_BWD_DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case CUDA_PLAN_CONV_BWD_FILTER:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    default:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    }
}

/* The algorithms cuDNN's own header marks non-deterministic (atomics),
 * refused in deterministic mode whatever a perf record says. */
static gboolean algo_uses_atomics(CudaPlanKind kind, int algo)
{
    return (kind == CUDA_PLAN_CONV_BWD_DATA && algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) ||
           (kind == CUDA_PLAN_CONV_BWD_FILTER && (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
                                                  algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3));
}

/* The workspace limit: TDM_CUDA_WORKSPACE_LIMIT MiB when that is set, else
 * 4 x the f32 bytes of the call's input, weights and output, at least
 * CONV_WORKSPACE_MIN and at most CONV_WORKSPACE_MAX. Timed trials get that
 * much too (cuda-conv.c), so an algorithm that needs more is neither timed
 * nor kept.
 *
 * A fixed limit (512 MiB for an algorithm, 128 MiB for the trials, the
 * rule before) kept resnet18 at batch 256, 224 px, off cuDNN's FFT
 * algorithms in FP32 and off every tensor-core algorithm in BF16, whose
 * NCHW kernels transpose the operands into the workspace: the BF16 step
 * ran on cuDNN's legacy non-tensor-core kernels, slower than FP32. On an
 * H200 (resnet18, batch 256, 224 px, median step): FP32 126.5 -> 72.9 ms,
 * BF16 166.6 -> 50.1 ms; the same at fixed limits of 2 and 8 GiB, 77.5 and
 * 55.7 ms at 512 MiB. The upper bound keeps the trials of the largest
 * layers (the stem's 4 x is 3.9 GiB there) from setting the peak memory
 * for nothing. */
size_t cuda_conv_workspace_limit(const ConvCall *c)
{
    static gsize fixed = 0; /* the variable's bytes plus two; 1: not set */
    if (g_once_init_enter(&fixed)) {
        guint64 mib = 0;
        const char *s = g_getenv("TDM_CUDA_WORKSPACE_LIMIT");
        gsize v = 1;
        if (s != NULL && *s != '\0') {
            if (g_ascii_string_to_unsigned(s, 10, 0, 1 << 20, &mib, NULL)) {
                v = (gsize)(mib << 20) + 2;
            } else {
                g_warning("cuda backend: TDM_CUDA_WORKSPACE_LIMIT=%s is not a size in MiB "
                          "(0 to 1048576); using the default (4 x a convolution's operands, "
                          "%zu to %zu MiB)",
                          s, CONV_WORKSPACE_MIN >> 20, CONV_WORKSPACE_MAX >> 20);
            }
        }
        g_once_init_leave(&fixed, v); /* g_once_init_leave refuses 0 */
    }
    if (fixed > 1) {
        return (size_t)(fixed - 2);
    }
    const size_t elems = (size_t)(c->N * c->C * c->H * c->W) +
                         (size_t)(c->O * c->Cg * c->KH * c->KW) +
                         (size_t)(c->N * c->O * c->OH * c->OW);
    return CLAMP(4 * sizeof(float) * elems, CONV_WORKSPACE_MIN, CONV_WORKSPACE_MAX);
}

/* Asks cuDNN for its ranked algorithms of the plan's kind: the _v7
 * heuristic, or timed trials when `find` is given. */
static gboolean conv_rank(const ConvCall *c, CudaConvPlan *p, const ConvFind *find, ConvPerf *perf,
                          int *n, GError **error)
{
    cudnnHandle_t h = c->cd->cudnn;
    /* The records of the plan's kind: same fields, one type per kind. */
    union {
        cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    } r;
    int got = 0;
    cudnnStatus_t rc;
    const char *call;
    *n = 0;
    if (c->kind == CUDA_PLAN_CONV_BWD_DATA) {
        int want = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
        call = find ? "cudnnFindConvolutionBackwardDataAlgorithmEx"
                    : "cudnnGetConvolutionBackwardDataAlgorithm_v7";
        rc = find
                 ? cudnnFindConvolutionBackwardDataAlgorithmEx(h, p->w, find->in1, p->y, find->in2,
                                                               p->conv, p->x, find->out, want, &got,
                                                               r.data, find->ws, find->ws_bytes)
                 : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x, want,
                                                               &got, r.data);
    } else if (c->kind == CUDA_PLAN_CONV_BWD_FILTER) {
        int want = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
        call = find ? "cudnnFindConvolutionBackwardFilterAlgorithmEx"
                    : "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
        rc = find ? cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        h, p->x, find->in1, p->y, find->in2, p->conv, p->w, find->out, want, &got,
                        r.filter, find->ws, find->ws_bytes)
                  : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w,
                                                                  want, &got, r.filter);
    } else {
        int want = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
        call = find ? "cudnnFindConvolutionForwardAlgorithmEx"
                    : "cudnnGetConvolutionForwardAlgorithm_v7";
        rc = find ? cudnnFindConvolutionForwardAlgorithmEx(h, p->x, find->in1, p->w, find->in2,
                                                           p->conv, p->y, find->out, want, &got,
                                                           r.fwd, find->ws, find->ws_bytes)
                  : cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, want, &got,
                                                           r.fwd);
    }
    gboolean ok = cuda_conv_dnn(c, rc, call, -1, error);
#define CONV_PERF(rec)                                                                             \
    ((ConvPerf){(rec).algo, (rec).status, (rec).memory, (rec).determinism, (rec).mathType})
    for (int i = 0; ok && i < got; i++) {
        perf[(*n)++] = c->kind == CUDA_PLAN_CONV_BWD_DATA     ? CONV_PERF(r.data[i])
                       : c->kind == CUDA_PLAN_CONV_BWD_FILTER ? CONV_PERF(r.filter[i])
                                                              : CONV_PERF(r.fwd[i]);
    }
#undef CONV_PERF
    if (find != NULL) {
        /* A trial that failed to launch is reported in its record, but may
         * also leave the runtime's last error set, which cuda_op_end would
         * then blame on this op: the records have said it already. (A
         * sticky fault stays visible to the next call whatever this does.) */
        (void)cudaGetLastError();
    }
    return ok;
}

/* The workspace `algo` needs with the descriptor's current math type;
 * FALSE (no error) when cuDNN will not say, which drops the algorithm. */
static gboolean conv_ws_size(const ConvCall *c, CudaConvPlan *p, int algo, size_t *bytes)
{
    cudnnHandle_t h = c->cd->cudnn;
    cudnnStatus_t rc;
    if (c->kind == CUDA_PLAN_CONV_BWD_DATA) {
        rc = cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, p->w, p->y, p->conv, p->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    } else if (c->kind == CUDA_PLAN_CONV_BWD_FILTER) {
        rc = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, p->x, p->y, p->conv, p->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    } else {
        rc = cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y,
                                                     (cudnnConvolutionFwdAlgo_t)algo, bytes);
    }
    return rc == CUDNN_STATUS_SUCCESS;
}

/* Keeps the ranked algorithms that pass the filters (file comment), best
 * first; in deterministic mode transform-based ones only when nothing else
 * passes. */
static gboolean conv_choose(const ConvCall *c, CudaConvPlan *p, const ConvFind *find,
                            GError **error)
{
    ConvPerf perf[16];
    int n = 0;
    if (!conv_rank(c, p, find, perf, &n, error)) {
        return FALSE;
    }
    gboolean strict = c->precision == TDM_PRECISION_FP32;
    const size_t limit = cuda_conv_workspace_limit(c);
    p->n_choices = 0;
    for (int pass = 0; pass < 2 && p->n_choices == 0; pass++) {
        gboolean allow_transform = !c->deterministic || pass == 1;
        for (int i = 0; i < n && p->n_choices < CUDA_CONV_CHOICES; i++) {
            const ConvPerf *r = &perf[i];
            if (r->status != CUDNN_STATUS_SUCCESS || r->memory > limit ||
                (strict && (r->math == CUDNN_TENSOR_OP_MATH ||
                            r->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) ||
                (c->deterministic &&
                 (r->determinism != CUDNN_DETERMINISTIC || algo_uses_atomics(c->kind, r->algo))) ||
                (!allow_transform && algo_is_transform(c->kind, r->algo))) {
                continue;
            }
            /* Strict FP32 runs every algorithm with FMA math, whatever
             * default the record names. */
            cudnnMathType_t math = strict ? CUDNN_FMA_MATH : r->math;
            size_t ws = 0;
            if (cudnnSetConvolutionMathType(p->conv, math) != CUDNN_STATUS_SUCCESS ||
                !conv_ws_size(c, p, r->algo, &ws)) {
                continue;
            }
            ws = MAX(ws, r->memory);
            if (ws > limit) {
                continue;
            }
            p->choice[p->n_choices++] = (CudaConvChoice){r->algo, math, ws};
        }
    }
    if (p->n_choices == 0) {
        GString *cands = g_string_new(NULL);
        for (int i = 0; i < n; i++) {
            g_string_append_printf(
                cands, "%s algo %d status %d math %d %sdeterministic ws %zu", i ? ";" : "",
                perf[i].algo, (int)perf[i].status, (int)perf[i].math,
                perf[i].determinism == CUDNN_DETERMINISTIC ? "" : "non-", perf[i].memory);
        }
        g_autofree char *what =
            cuda_conv_what(c, find ? "cudnnFind*AlgorithmEx" : "cudnnGet*_v7", -1);
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s on %s: %s: no cuDNN algorithm fits (workspace <= %zu MiB); candidates:%s",
                    c->op, c->cd->name, what, limit >> 20, cands->str);
        g_string_free(cands, TRUE);
        return FALSE;
    }
    p->cur = 0;
    return cuda_conv_dnn(c, cudnnSetConvolutionMathType(p->conv, p->choice[0].math),
                         "cudnnSetConvolutionMathType", -1, error);
}

static gboolean set_tensor(const ConvCall *c, cudnnTensorDescriptor_t *d, cudnnDataType_t dt,
                           int64_t n, int64_t ch, int64_t h, int64_t w, GError **error)
{
    return cuda_conv_dnn(c, cudnnCreateTensorDescriptor(d), "cudnnCreateTensorDescriptor", -1,
                         error) &&
           cuda_conv_dnn(c,
                         cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, dt, (int)n, (int)ch,
                                                    (int)h, (int)w),
                         "cudnnSetTensor4dDescriptor", -1, error);
}

/* Descriptors and algorithm choice for one key. */
CudaPlan *cuda_conv_plan_make(const ConvCall *c, const CudaPlanKey *key, const ConvFind *find,
                              GError **error)
{
    const TdmConv2dParams *q = c->p;
    CudaPlan *plan = cuda_plan_new(c->kind, key);
    CudaConvPlan *p = &plan->conv;
    gboolean bf16 = c->precision == TDM_PRECISION_BF16;
    cudnnDataType_t dt = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    cudnnMathType_t math =
        c->precision == TDM_PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    int on = 0, oc = 0, oh = 0, ow = 0;
    p->fused = c->kind == CUDA_PLAN_CONV_FWD_RELU && !bf16;
    gboolean ok =
        set_tensor(c, &p->x, dt, c->N, c->C, c->H, c->W, error) &&
        set_tensor(c, &p->y, dt, c->N, c->O, c->OH, c->OW, error) &&
        set_tensor(c, &p->y32, CUDNN_DATA_FLOAT, c->N, c->O, c->OH, c->OW, error) &&
        set_tensor(c, &p->bias, CUDNN_DATA_FLOAT, 1, c->O, 1, 1, error) &&
        cuda_conv_dnn(c, cudnnCreateFilterDescriptor(&p->w), "cudnnCreateFilterDescriptor", -1,
                      error) &&
        cuda_conv_dnn(c,
                      cudnnSetFilter4dDescriptor(p->w, dt, CUDNN_TENSOR_NCHW, (int)c->O, (int)c->Cg,
                                                 (int)c->KH, (int)c->KW),
                      "cudnnSetFilter4dDescriptor", -1, error) &&
        cuda_conv_dnn(c, cudnnCreateConvolutionDescriptor(&p->conv),
                      "cudnnCreateConvolutionDescriptor", -1, error) &&
        cuda_conv_dnn(c,
                      cudnnSetConvolution2dDescriptor(p->conv, q->pad_h, q->pad_w, q->stride_h,
                                                      q->stride_w, q->dilation_h, q->dilation_w,
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                      "cudnnSetConvolution2dDescriptor", -1, error) &&
        cuda_conv_dnn(c, cudnnSetConvolutionGroupCount(p->conv, q->groups),
                      "cudnnSetConvolutionGroupCount", -1, error) &&
        cuda_conv_dnn(c, cudnnSetConvolutionMathType(p->conv, math), "cudnnSetConvolutionMathType",
                      -1, error) &&
        cuda_conv_dnn(
            c, cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow),
            "cudnnGetConvolution2dForwardOutputDim", -1, error);
    if (ok && (on != c->N || oc != c->O || oh != c->OH || ow != c->OW)) {
        g_autofree char *what = cuda_conv_what(c, "cudnnGetConvolution2dForwardOutputDim", -1);
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "%s on %s: %s gives an output of [%d, %d, %d, %d]: not Tandem's", c->op,
                    c->cd->name, what, on, oc, oh, ow);
        ok = FALSE;
    }
    if (ok && p->fused) {
        ok = cuda_conv_dnn(c, cudnnCreateActivationDescriptor(&p->act),
                           "cudnnCreateActivationDescriptor", -1, error) &&
             cuda_conv_dnn(c,
                           cudnnSetActivationDescriptor(p->act, CUDNN_ACTIVATION_RELU,
                                                        CUDNN_NOT_PROPAGATE_NAN, 0.0),
                           "cudnnSetActivationDescriptor", -1, error);
    }
    if (!ok || !conv_choose(c, p, find, error)) {
        cuda_plan_free(plan);
        return NULL;
    }
    return plan;
}

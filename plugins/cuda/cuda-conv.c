/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-conv.c - 2-D convolutions on the cuda backend, through
 * cuDNN's legacy convolution API (still shipped by cuDNN 9).
 *
 * Tensors are NCHW f32 as everywhere in Tandem; w is [O, C/groups, KH, KW]
 * and the convolution descriptor carries stride, padding, dilation and the
 * group count (cross-correlation, as ref). Semantics are ref's:
 * forward y (out) = conv(x, w) + bias; conv2d_relu_forward adds max(., 0)
 * (cudnnConvolutionBiasActivationForward with a ReLU, which takes any
 * algorithm; a zero bias when there is none); backward data dx (out);
 * backward filter ACCUMULATES: dw += (beta 1), db += (cudnnConvolution-
 * BackwardBias, beta 1).
 *
 * Precision (CudaDevice.precision):
 *  - FP32: CUDNN_FMA_MATH (DEFAULT_MATH would allow TF32 on Ampere and
 *    later); algorithms that report tensor-op math are skipped;
 *  - TF32: CUDNN_TENSOR_OP_MATH over f32 tensors;
 *  - BF16: x, w (dy) rounded to bf16 into scratch, cuDNN's
 *    PSEUDO_BFLOAT16 configuration (bf16 tensors, FLOAT compute type),
 *    the bf16 result converted back to the f32 output; bias and ReLU then
 *    in f32 (cudnnAddTensor, cuda_k_relu). cuDNN has no bf16-in/f32-out
 *    configuration for these calls. Backward filter computes the bf16
 *    gradient with beta 0, converts it to f32 scratch and adds it to dw
 *    with cublasSaxpy (f32 accumulation in the arena); db comes from the
 *    f32 dy.
 *
 * Plans (cuda-conv-plan.c): descriptors and the usable algorithms, best
 * first, made once per shape and mode and kept in the op cache
 * (cuda-cache.h); cudnnGet*Algorithm_v7's ranking by default, timed trials
 * (cudnnFind*AlgorithmEx on the real inputs; backward filter's written to
 * scratch, never into dw) under TDM_CUDA_BENCHMARK=1. A choice cuDNN
 * refuses when it runs (a NOT_SUPPORTED status, given before any work is
 * queued) gives way to the next one; a refused fused conv+bias+ReLU call
 * to the separate calls.
 *
 * Alignment: parameters live in packed arenas (only float-aligned) while
 * cuDNN 9 refuses or mishandles misaligned pointers (it has a status for
 * it). Any tensor below 16-byte alignment is staged through aligned
 * scratch (copied in, and out for outputs), which in practice means the
 * small weight, bias and gradient views.
 *
 * Threads: the device lock is held from the plan lookup to the last
 * enqueue (handles and workspace are the logical device's).
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "cuda-blas-lib.h"
#include "cuda-conv.h"
#include "cuda-kernels.h"

/* Scratch pieces start on this boundary; tensors below STAGE_ALIGN go
 * through scratch. */
#define SCRATCH_ALIGN ((size_t)256)
#define STAGE_ALIGN ((uintptr_t)16)

static gboolean conv_rt(const ConvCall *c, cudaError_t rc, const char *call, GError **error)
{
    if (rc == cudaSuccess) {
        return TRUE;
    }
    g_autofree char *what = cuda_conv_what(c, call, -1);
    return cuda_check(c->dev, rc, c->op, what, error);
}

/* ---- geometry ---- */

/* From x's shape (or x_like's) and w's (or dw's), as ref; the front end
 * has checked that they fit. Each size must fit cuDNN's int arguments. */
static gboolean conv_geometry(ConvCall *c, const TdmTensor *x, const TdmTensor *w, GError **error)
{
    const TdmConv2dParams *p = c->p;
    c->N = x->shape[0];
    c->C = x->shape[1];
    c->H = x->shape[2];
    c->W = x->shape[3];
    c->O = w->shape[0];
    c->Cg = w->shape[1];
    c->KH = w->shape[2];
    c->KW = w->shape[3];
    int64_t eff_h = (int64_t)p->dilation_h * (c->KH - 1) + 1;
    int64_t eff_w = (int64_t)p->dilation_w * (c->KW - 1) + 1;
    c->OH = (c->H + 2 * p->pad_h - eff_h) / p->stride_h + 1;
    c->OW = (c->W + 2 * p->pad_w - eff_w) / p->stride_w + 1;
    int64_t sizes[] = {c->N * c->C * c->H * c->W, c->O * c->Cg * c->KH * c->KW,
                       c->N * c->O * c->OH * c->OW};
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        if (sizes[i] > INT_MAX) {
            g_autofree char *what = cuda_conv_what(c, "cuDNN", -1);
            g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                        "%s on %s: %s: a tensor of more than %d elements is beyond cuDNN's "
                        "legacy convolutions",
                        c->op, c->cd->name, what, INT_MAX);
            return FALSE;
        }
    }
    return TRUE;
}

/* ---- scratch pieces ----
 * Each tensor an op touches may go through scratch: converted to bf16,
 * staged for alignment, or scratch of its own (zeros, f32 temporaries).
 * Pieces are laid out once per call; the algorithm's workspace follows. */

typedef enum {
    PIECE_IN,      /* copied in when staged (alignment) */
    PIECE_BF16_IN, /* always staged: f32 source rounded to bf16 */
    PIECE_OUT,     /* copied out when staged */
    PIECE_INOUT,   /* copied in and out when staged (accumulated) */
    PIECE_SCRATCH, /* always staged, contents made by the op */
    PIECE_ZERO,    /* always staged, zero-filled */
} PieceMode;

typedef struct {
    PieceMode mode;
    gboolean used, staged;
    gboolean zero_first; /* PIECE_OUT: zero-filled when staged (see conv_forward_any) */
    void *src;           /* the tensor's data (NULL for scratch) */
    int64_t n;           /* elements */
    size_t nbytes;       /* in scratch */
    size_t off;
} Piece;

enum { P_IN1, P_IN2, P_OUT_BF, P_OUT, P_BIAS, P_ZERO, P_DY32, P_TMP, P_N };

typedef struct {
    Piece pc[P_N];
    size_t scratch; /* bytes of pieces, before the workspace */
} ConvJob;

static size_t scratch_take(size_t *off, size_t nbytes)
{
    size_t at = *off;
    *off += (nbytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    return at;
}

static void piece_set(ConvJob *job, int i, PieceMode mode, const void *src, int64_t n, size_t esize)
{
    Piece *pc = &job->pc[i];
    pc->mode = mode;
    pc->used = TRUE;
    pc->src = (void *)src;
    pc->n = n;
    pc->nbytes = (size_t)n * esize;
    pc->staged = mode == PIECE_BF16_IN || mode == PIECE_SCRATCH || mode == PIECE_ZERO ||
                 ((uintptr_t)src % STAGE_ALIGN) != 0;
    if (pc->staged) {
        pc->off = scratch_take(&job->scratch, pc->nbytes);
    }
}

static void *piece_ptr(const ConvJob *job, int i, char *base)
{
    const Piece *pc = &job->pc[i];
    if (!pc->used) {
        return NULL;
    }
    return pc->staged ? base + pc->off : pc->src;
}

/* Fills the staged inputs (idempotent: reruns after a refused algorithm). */
static gboolean job_stage_in(const ConvCall *c, const ConvJob *job, char *base, GError **error)
{
    cudaStream_t s = c->cd->compute;
    for (int i = 0; i < P_N; i++) {
        const Piece *pc = &job->pc[i];
        if (!pc->used || !pc->staged || pc->n == 0) {
            continue;
        }
        gboolean ok = TRUE;
        switch (pc->mode) {
        case PIECE_IN:
        case PIECE_INOUT:
            ok = conv_rt(
                c,
                cudaMemcpyAsync(base + pc->off, pc->src, pc->nbytes, cudaMemcpyDeviceToDevice, s),
                "cudaMemcpyAsync (stage to aligned scratch)", error);
            break;
        case PIECE_BF16_IN:
            ok = conv_rt(c, cuda_k_f32_to_bf16(s, pc->src, base + pc->off, pc->n),
                         "cuda_k_f32_to_bf16", error);
            break;
        case PIECE_ZERO:
            ok = conv_rt(c, cudaMemsetAsync(base + pc->off, 0, pc->nbytes, s),
                         "cudaMemsetAsync (zero bias)", error);
            break;
        case PIECE_OUT:
            if (pc->zero_first) {
                ok = conv_rt(c, cudaMemsetAsync(base + pc->off, 0, pc->nbytes, s),
                             "cudaMemsetAsync (staged output)", error);
            }
            break;
        default:
            break;
        }
        if (!ok) {
            return FALSE;
        }
    }
    return TRUE;
}

/* Copies staged outputs back to their tensors. */
static gboolean job_stage_out(const ConvCall *c, const ConvJob *job, char *base, GError **error)
{
    for (int i = 0; i < P_N; i++) {
        const Piece *pc = &job->pc[i];
        if (pc->used && pc->staged && pc->n > 0 &&
            (pc->mode == PIECE_OUT || pc->mode == PIECE_INOUT) &&
            !conv_rt(c,
                     cudaMemcpyAsync(pc->src, base + pc->off, pc->nbytes, cudaMemcpyDeviceToDevice,
                                     c->cd->compute),
                     "cudaMemcpyAsync (staged result back)", error)) {
            return FALSE;
        }
    }
    return TRUE;
}

/* ---- running ---- */

/* The convolution call of the plan's kind with the current choice, into
 * the op's output (bf16 scratch under BF16); *fused_done when the fused
 * ReLU call ran. */
static cudnnStatus_t conv_exec(const ConvCall *c, CudaConvPlan *p, const ConvJob *job, char *base,
                               gboolean *fused_done, const char **call)
{
    static const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = c->cd->cudnn;
    const CudaConvChoice *ch = &p->choice[p->cur];
    gboolean bf16 = c->precision == TDM_PRECISION_BF16;
    const void *in1 = piece_ptr(job, P_IN1, base), *in2 = piece_ptr(job, P_IN2, base);
    void *out = piece_ptr(job, bf16 ? P_OUT_BF : P_OUT, base);
    void *ws = ch->workspace > 0 ? base + job->scratch : NULL;
    *fused_done = FALSE;
    switch (c->kind) {
    case CUDA_PLAN_CONV_BWD_DATA:
        *call = "cudnnConvolutionBackwardData";
        return cudnnConvolutionBackwardData(h, &one, p->w, in1, p->y, in2, p->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)ch->algo, ws,
                                            ch->workspace, &zero, p->x, out);
    case CUDA_PLAN_CONV_BWD_FILTER:
        /* f32: accumulate into dw; bf16: a fresh bf16 gradient, added later. */
        *call = "cudnnConvolutionBackwardFilter";
        return cudnnConvolutionBackwardFilter(h, &one, p->x, in1, p->y, in2, p->conv,
                                              (cudnnConvolutionBwdFilterAlgo_t)ch->algo, ws,
                                              ch->workspace, bf16 ? &zero : &one, p->w, out);
    default:
        if (p->fused) {
            /* y = relu(conv + 0 * z + bias), z = y itself. */
            const void *bias =
                job->pc[P_BIAS].used ? piece_ptr(job, P_BIAS, base) : piece_ptr(job, P_ZERO, base);
            *call = "cudnnConvolutionBiasActivationForward";
            *fused_done = TRUE;
            return cudnnConvolutionBiasActivationForward(
                h, &one, p->x, in1, p->w, in2, p->conv, (cudnnConvolutionFwdAlgo_t)ch->algo, ws,
                ch->workspace, &zero, p->y, out, p->bias, bias, p->act, p->y, out);
        }
        *call = "cudnnConvolutionForward";
        return cudnnConvolutionForward(h, &one, p->x, in1, p->w, in2, p->conv,
                                       (cudnnConvolutionFwdAlgo_t)ch->algo, ws, ch->workspace,
                                       &zero, p->y, out);
    }
}

/* After the convolution: back to f32, bias, ReLU, the bf16 filter
 * gradient's accumulation, the bias gradient, staged results back. */
static gboolean conv_finish(const ConvCall *c, CudaConvPlan *p, const ConvJob *job, char *base,
                            gboolean fused_done, GError **error)
{
    static const float one = 1.0f;
    CudaDevice *cd = c->cd;
    gboolean bf16 = c->precision == TDM_PRECISION_BF16;
    gboolean ok = TRUE;
    if (c->kind == CUDA_PLAN_CONV_BWD_FILTER) {
        if (bf16) {
            const Piece *dw = &job->pc[P_OUT];
            float *tmp = piece_ptr(job, P_TMP, base);
            ok = conv_rt(
                c, cuda_k_bf16_to_f32(cd->compute, piece_ptr(job, P_OUT_BF, base), tmp, dw->n),
                "cuda_k_bf16_to_f32 (dw)", error);
            if (ok) {
                cublasStatus_t rc =
                    cuda_blas.cublasSaxpy(cd->cublas, (int)dw->n, &one, tmp, 1, dw->src, 1);
                if (rc != CUBLAS_STATUS_SUCCESS) {
                    g_autofree char *what =
                        cuda_conv_what(c, "cublasSaxpy (dw += bf16 gradient)", -1);
                    ok = cuda_check_cublas(c->dev, rc, c->op, what, error);
                }
            }
        }
        if (ok && job->pc[P_BIAS].used) {
            ok = cuda_conv_dnn(c,
                               cudnnConvolutionBackwardBias(cd->cudnn, &one, p->y32,
                                                            piece_ptr(job, P_DY32, base), &one,
                                                            p->bias, piece_ptr(job, P_BIAS, base)),
                               "cudnnConvolutionBackwardBias", -1, error);
        }
        return ok && job_stage_out(c, job, base, error);
    }
    float *y = piece_ptr(job, P_OUT, base);
    int64_t n = job->pc[P_OUT].n;
    if (bf16) {
        ok = conv_rt(c, cuda_k_bf16_to_f32(cd->compute, piece_ptr(job, P_OUT_BF, base), y, n),
                     "cuda_k_bf16_to_f32", error);
    }
    if (ok && c->kind != CUDA_PLAN_CONV_BWD_DATA && !fused_done) {
        if (job->pc[P_BIAS].used) {
            ok = cuda_conv_dnn(c,
                               cudnnAddTensor(cd->cudnn, &one, p->bias,
                                              piece_ptr(job, P_BIAS, base), &one, p->y32, y),
                               "cudnnAddTensor (bias)", -1, error);
        }
        if (ok && c->kind == CUDA_PLAN_CONV_FWD_RELU) {
            ok = conv_rt(c, cuda_k_relu(cd->compute, y, y, n), "cuda_k_relu", error);
        }
    }
    return ok && job_stage_out(c, job, base, error);
}

static gboolean env_benchmark(void)
{
    return g_strcmp0(g_getenv("TDM_CUDA_BENCHMARK"), "1") == 0;
}

/* The memory of timed trials: one block of its own, given back once the
 * plan is made: `lead` bytes (the staged inputs and the trial output),
 * then the trials' workspace, of the workspace limit or of as much less
 * (halving, down to CONV_FIND_WORKSPACE_MIN) as the device has free. The
 * device's workspace goes back first, so that the two do not count
 * together in the peak (the next op grows it again). */
static char *find_block(const ConvCall *c, size_t lead, ConvFind *find, GError **error)
{
    cuda_workspace_drop(c->dev);
    find->ws_bytes = cuda_conv_workspace_limit(c);
    for (;;) {
        GError *local = NULL;
        char *block = cuda_alloc_get(c->cd->alloc, lead + find->ws_bytes, &local);
        if (block != NULL) {
            find->ws = block + lead;
            return block;
        }
        if (find->ws_bytes / 2 < CONV_FIND_WORKSPACE_MIN) {
            g_propagate_prefixed_error(error, local, "%s on %s: memory for timed trials: ", c->op,
                                       c->cd->name);
            return NULL;
        }
        g_error_free(local);
        find->ws_bytes /= 2;
    }
}

/* Plan lookup (or choice), staging, the call (with the next choice when
 * cuDNN refuses one), finishing. The caller holds the device lock. */
static gboolean conv_run(ConvCall *c, TdmOpCache **cache, ConvJob *job, GError **error)
{
    const TdmConv2dParams *q = c->p;
    CudaPlanKey key;
    cuda_key_init(&key);
    int64_t k[] = {c->dev->index, c->precision,  c->deterministic,
                   c->N,          c->C,          c->H,
                   c->W,          c->O,          c->Cg,
                   c->KH,         c->KW,         q->stride_h,
                   q->stride_w,   q->pad_h,      q->pad_w,
                   q->dilation_h, q->dilation_w, q->groups};
    for (size_t i = 0; i < G_N_ELEMENTS(k); i++) {
        cuda_key_add(&key, k[i]);
    }
    CudaPlan *plan = cuda_cache_find(cache, c->kind, &key);
    char *base = NULL;
    if (plan == NULL) {
        ConvFind find, *fp = NULL;
        char *trial = NULL;
        if (env_benchmark()) {
            /* Trials on the real (staged) inputs; backward filter's into
             * scratch past the pieces, never into dw. */
            size_t out_extra = c->kind == CUDA_PLAN_CONV_BWD_FILTER ? job->pc[P_OUT].n * 4 : 0;
            size_t extra = (out_extra + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
            trial = find_block(c, job->scratch + extra, &find, error);
            if (trial == NULL || !job_stage_in(c, job, trial, error)) {
                cuda_alloc_put(c->cd->alloc, trial);
                return FALSE;
            }
            base = trial;
            gboolean bf16 = c->precision == TDM_PRECISION_BF16;
            find.in1 = piece_ptr(job, P_IN1, base);
            find.in2 = piece_ptr(job, P_IN2, base);
            find.out =
                out_extra > 0 ? base + job->scratch : piece_ptr(job, bf16 ? P_OUT_BF : P_OUT, base);
            fp = &find;
        }
        plan = cuda_conv_plan_make(c, &key, fp, error);
        cuda_alloc_put(c->cd->alloc, trial); /* reused in stream order */
        if (plan == NULL) {
            return FALSE;
        }
        cuda_cache_insert(cache, plan);
    }
    CudaConvPlan *p = &plan->conv;
    gboolean ok = FALSE, fused_done = FALSE;
    for (;;) {
        size_t total = job->scratch + p->choice[p->cur].workspace;
        base = total > 0 ? cuda_workspace(c->dev, total, error) : NULL;
        if ((total > 0 && base == NULL) || !job_stage_in(c, job, base, error)) {
            break;
        }
        const char *call = "";
        cudnnStatus_t rc = conv_exec(c, p, job, base, &fused_done, &call);
        /* cuDNN checks a configuration before it queues anything: a
         * refusal leaves nothing half done, so another way may be tried. */
        if (p->fused && fused_done &&
            (CUDNN_STATUS_CATEGORY(rc) == CUDNN_STATUS_NOT_SUPPORTED ||
             CUDNN_STATUS_CATEGORY(rc) == CUDNN_STATUS_BAD_PARAM)) {
            g_message("%s on %s: cuDNN refused %s with algorithm %d (%s); "
                      "adding bias and ReLU apart",
                      c->op, c->cd->name, call, p->choice[p->cur].algo, cudnnGetErrorString(rc));
            p->fused = FALSE;
            continue;
        }
        if (CUDNN_STATUS_CATEGORY(rc) == CUDNN_STATUS_NOT_SUPPORTED) {
            if (p->cur + 1 < p->n_choices) {
                g_message("%s on %s: cuDNN refused algorithm %d of %s at run time (%s); "
                          "using algorithm %d",
                          c->op, c->cd->name, p->choice[p->cur].algo, call, cudnnGetErrorString(rc),
                          p->choice[p->cur + 1].algo);
                p->cur++;
                if (!cuda_conv_dnn(c, cudnnSetConvolutionMathType(p->conv, p->choice[p->cur].math),
                                   "cudnnSetConvolutionMathType", -1, error)) {
                    break;
                }
                continue;
            }
        }
        ok = cuda_conv_dnn(c, rc, call, p->choice[p->cur].algo, error) &&
             conv_finish(c, p, job, base, fused_done, error);
        break;
    }
    cuda_plan_release(cache, plan);
    return ok;
}

/* Opens the op (cuda_op_begin) and fills the call's fixed fields; FALSE
 * (error set) when the op could not begin. */
static gboolean conv_begin(ConvCall *c, TdmDevice *dev, const char *op, const TdmConv2dParams *p,
                           CudaPlanKind kind, GError **error)
{
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    memset(c, 0, sizeof(*c));
    c->dev = dev;
    c->cd = cuda_dev(dev);
    c->op = op;
    c->p = p;
    c->kind = kind;
    /* For messages before the lock; conv_lock reads it again. */
    c->precision = c->cd->precision;
    return TRUE;
}

/* Takes the device lock and reads the mode the op runs in: the job's
 * pieces are sized for this precision, so it is read once, under the lock
 * that covers the whole call. */
static void conv_lock(ConvCall *c)
{
    g_mutex_lock(&c->cd->lock);
    c->precision = c->cd->precision;
    c->deterministic = c->cd->deterministic;
}

static void conv_unlock(ConvCall *c)
{
    g_mutex_unlock(&c->cd->lock);
}

/* A job whose two inputs are `in1` and `in2`, read through bf16 staged
 * copies under BF16 precision. */
static void job_inputs(ConvJob *job, gboolean bf16, const TdmTensor *in1, const TdmTensor *in2)
{
    size_t es = bf16 ? 2 : sizeof(float);
    PieceMode in = bf16 ? PIECE_BF16_IN : PIECE_IN;
    memset(job, 0, sizeof(*job));
    piece_set(job, P_IN1, in, cuda_f32(in1), tdm_tensor_numel(in1), es);
    piece_set(job, P_IN2, in, cuda_f32(in2), tdm_tensor_numel(in2), es);
}

/* The job's f32 output `out` of n values, written by cuDNN through a bf16
 * scratch copy under BF16 precision. */
static void job_output(ConvJob *job, gboolean bf16, TdmTensor *out, int64_t n)
{
    if (bf16) {
        piece_set(job, P_OUT_BF, PIECE_SCRATCH, NULL, n, 2);
    }
    piece_set(job, P_OUT, PIECE_OUT, cuda_f32(out), n, sizeof(float));
}

/* ---- the ops ---- */

static gboolean conv_forward_any(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                 TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                 gboolean relu, GError **error)
{
    const char *op = relu ? "conv2d_relu_forward" : "conv2d_forward";
    ConvCall c;
    if (!conv_begin(&c, dev, op, p, relu ? CUDA_PLAN_CONV_FWD_RELU : CUDA_PLAN_CONV_FWD, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "x", x, error) && cuda_check_plain(op, "w", w, error) &&
                  (bias == NULL || cuda_check_plain(op, "bias", bias, error)) &&
                  conv_geometry(&c, x, w, error);
    int64_t yshape[4] = {c.N, c.O, c.OH, c.OW};
    ok = ok && cuda_ensure_out(y, TDM_DTYPE_F32, 4, yshape, error);
    int64_t ny = c.N * c.O * c.OH * c.OW;
    if (ok && ny > 0 && c.C * c.Cg == 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "%s on %s: no input channels (x with C = 0)", op, c.cd->name);
        ok = FALSE;
    }
    if (ok && ny > 0) {
        conv_lock(&c);
        gboolean bf16 = c.precision == TDM_PRECISION_BF16;
        ConvJob job;
        job_inputs(&job, bf16, x, w);
        job_output(&job, bf16, y, ny);
        /* The fused call reads y as its z (times alpha2 = 0): staged
         * scratch may hold any bits, NaN included, so it starts at zero. */
        job.pc[P_OUT].zero_first = relu && !bf16;
        if (bias != NULL) {
            piece_set(&job, P_BIAS, PIECE_IN, cuda_f32(bias), c.O, sizeof(float));
        } else if (relu && !bf16) {
            piece_set(&job, P_ZERO, PIECE_ZERO, NULL, c.O, sizeof(float));
        }
        ok = conv_run(&c, cache, &job, error);
        conv_unlock(&c);
    }
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                             TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                             GError **error)
{
    return conv_forward_any(dev, cache, p, x, w, bias, y, FALSE, error);
}

gboolean cuda_conv2d_relu_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *x, TdmTensor *w, TdmTensor *bias, TdmTensor *y,
                                  GError **error)
{
    return conv_forward_any(dev, cache, p, x, w, bias, y, TRUE, error);
}

gboolean cuda_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                   TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                   TdmTensor *dx, GError **error)
{
    const char *op = "conv2d_backward_data";
    ConvCall c;
    if (!conv_begin(&c, dev, op, p, CUDA_PLAN_CONV_BWD_DATA, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "dy", dy, error) && cuda_check_plain(op, "w", w, error) &&
                  conv_geometry(&c, x_like, w, error);
    int64_t xshape[4] = {c.N, c.C, c.H, c.W};
    ok = ok && cuda_ensure_out(dx, TDM_DTYPE_F32, 4, xshape, error);
    int64_t nx = c.N * c.C * c.H * c.W, ndy = tdm_tensor_numel(dy);
    if (ok && nx > 0 && ndy == 0) {
        /* No output channel reaches x (O = 0): its gradient is zero. */
        ok =
            conv_rt(&c, cudaMemsetAsync(cuda_f32(dx), 0, (size_t)nx * sizeof(float), c.cd->compute),
                    "cudaMemsetAsync (dx)", error);
    } else if (ok && nx > 0) {
        conv_lock(&c);
        gboolean bf16 = c.precision == TDM_PRECISION_BF16;
        ConvJob job;
        job_inputs(&job, bf16, w, dy);
        job_output(&job, bf16, dx, nx);
        ok = conv_run(&c, cache, &job, error);
        conv_unlock(&c);
    }
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                     TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                     GError **error)
{
    const char *op = "conv2d_backward_filter";
    ConvCall c;
    if (!conv_begin(&c, dev, op, p, CUDA_PLAN_CONV_BWD_FILTER, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "x", x, error) && cuda_check_plain(op, "dy", dy, error) &&
                  cuda_check_plain(op, "dw", dw, error) &&
                  (db == NULL || cuda_check_plain(op, "db", db, error)) &&
                  conv_geometry(&c, x, dw, error);
    int64_t ndw = tdm_tensor_numel(dw), ndy = tdm_tensor_numel(dy);
    /* Nothing to add when dy is empty (N = 0): dw and db keep their values. */
    if (ok && ndy > 0 && ndw > 0) {
        conv_lock(&c);
        gboolean bf16 = c.precision == TDM_PRECISION_BF16;
        ConvJob job;
        job_inputs(&job, bf16, x, dy);
        if (bf16) {
            /* The bf16 gradient, its f32 copy, then dw += it (cublasSaxpy
             * takes dw as it is, so P_OUT is never staged here). */
            piece_set(&job, P_OUT_BF, PIECE_SCRATCH, NULL, ndw, 2);
            piece_set(&job, P_TMP, PIECE_SCRATCH, NULL, ndw, sizeof(float));
            job.pc[P_OUT] = (Piece){.mode = PIECE_OUT, .used = TRUE, .src = cuda_f32(dw), .n = ndw};
        } else {
            piece_set(&job, P_OUT, PIECE_INOUT, cuda_f32(dw), ndw, sizeof(float));
        }
        if (db != NULL) {
            piece_set(&job, P_BIAS, PIECE_INOUT, cuda_f32(db), c.O, sizeof(float));
            if (bf16) {
                piece_set(&job, P_DY32, PIECE_IN, cuda_f32(dy), ndy, sizeof(float));
            } else {
                job.pc[P_DY32] = job.pc[P_IN2];      /* the same f32 dy, staged or not */
                job.pc[P_DY32].mode = PIECE_SCRATCH; /* staged (if at all) by P_IN2 */
            }
        }
        ok = conv_run(&c, cache, &job, error);
        conv_unlock(&c);
    }
    return cuda_op_end(dev, op, ok, error);
}

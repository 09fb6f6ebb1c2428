/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-nn.c - the op-table entries of the cuda backend for
 * batch norm (plain and fused with ReLU), pooling and bias_grad: argument
 * checks, output shapes, scratch memory and the launches of cuda-norm.cu and
 * cuda-pool.cu (through cuda-nn-kernels.h).
 *
 * The core's front ends (core/ops-nn.c, core/ops-pool.c) have checked
 * devices, dtypes, shapes and PyTorch's pooling rules; what is left here is
 * the backend's own: tensors the kernels can index (plain and dense), the
 * max pool workspace being what this backend's forward made, and its i32
 * range. Output shapes are ref's. Everything is enqueued on the device's
 * compute stream without a synchronisation. The per-channel reductions take
 * their scratch from the device's workspace, under the device lock until
 * the launches are enqueued: stream order keeps the next user of the
 * workspace behind them.
 */
#include "config.h"

#include <stdarg.h>

#include "cuda-nn-kernels.h"
#include "cuda.h"

/* The multiprocessor count picks how many blocks share a channel in the
 * reductions (cuda_nn_splits); an H200's when the properties are unknown,
 * which changes only the speed, not the results' correctness. */
static int nn_sm_count(TdmDevice *dev)
{
    CudaDevice *cd = cuda_dev(dev);
    return cd->props.valid && cd->props.prop.multiProcessorCount > 0
               ? cd->props.prop.multiProcessorCount
               : 132;
}

/* The inputs named in the NULL-terminated list of (name, tensor) pairs
 * are plain; with `optional`, a NULL tensor passes too. */
static gboolean nn_check_plain_all(const char *op, GError **error, gboolean optional,
                                   ...) G_GNUC_NULL_TERMINATED;

static gboolean nn_check_plain_all(const char *op, GError **error, gboolean optional, ...)
{
    va_list ap;
    va_start(ap, optional);
    gboolean ok = TRUE;
    for (const char *what = va_arg(ap, const char *); ok && what != NULL;
         what = va_arg(ap, const char *)) {
        const TdmTensor *t = va_arg(ap, const TdmTensor *);
        ok = (optional && t == NULL) || cuda_check_plain(op, what, t, error);
    }
    va_end(ap);
    return ok;
}

static float *nn_f32_or_null(const TdmTensor *t)
{
    return t != NULL ? cuda_f32(t) : NULL;
}

/* x as [N, C, S]: S is the product of the dims after C (1 for [N, C]). */
static void nn_chan_dims(const TdmTensor *x, int64_t *N, int64_t *C, int64_t *S)
{
    *N = x->shape[0];
    *C = x->shape[1];
    *S = 1;
    for (int d = 2; d < x->ndim; d++) {
        *S *= x->shape[d];
    }
}

/* The scratch of a per-channel op over [N, C, S], with the device lock
 * held (the caller enqueues its launches, then unlocks); NULL with error
 * and the lock released on failure. */
static void *nn_scratch_lock(TdmDevice *dev, int64_t N, int64_t C, int64_t S, int sm,
                             GError **error)
{
    CudaDevice *cd = cuda_dev(dev);
    g_mutex_lock(&cd->lock);
    void *scratch = cuda_workspace(dev, cuda_k_chan_scratch_bytes(N, C, S, sm), error);
    if (scratch == NULL) {
        g_mutex_unlock(&cd->lock);
    }
    return scratch;
}

/* ---- bias_grad ---- */

static gboolean bias_grad_run(TdmDevice *dev, const char *op, TdmTensor *dy, TdmTensor *db,
                              GError **error)
{
    int64_t N, C, S;
    int sm = nn_sm_count(dev);
    nn_chan_dims(dy, &N, &C, &S);
    void *scratch;
    if (!nn_check_plain_all(op, error, FALSE, "dy", dy, "bias_grad", db, NULL) ||
        (scratch = nn_scratch_lock(dev, N, C, S, sm, error)) == NULL) {
        return FALSE;
    }
    cudaError_t rc =
        cuda_k_bias_grad(cuda_dev(dev)->compute, cuda_f32(dy), N, C, S, cuda_f32(db), scratch, sm);
    g_mutex_unlock(&cuda_dev(dev)->lock);
    return cuda_launched(dev, rc, op, "bias_grad", dy, error);
}

gboolean cuda_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                        GError **error)
{
    return cuda_op_begin(dev, "bias_grad", error) &&
           cuda_op_end(dev, "bias_grad", bias_grad_run(dev, "bias_grad", dy, bias_grad, error),
                       error);
}

/* ---- batch norm ---- */

/* What the forward ops share: the checks, the outputs and the launch. */
static gboolean bn_forward_body(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *gamma,
                                TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                                float momentum, float eps, gboolean training, TdmTensor *save_mean,
                                TdmTensor *save_var, TdmTensor *y, gboolean relu, GError **error)
{
    int64_t N, C, S;
    int sm = nn_sm_count(dev);
    nn_chan_dims(x, &N, &C, &S);
    /* Shaped as ref: save_* [C] in training only, y like x (y may be x). */
    TdmTensor *sm_out = training ? save_mean : NULL, *sv_out = training ? save_var : NULL;
    void *scratch;
    if (!nn_check_plain_all(op, error, FALSE, "x", x, NULL) ||
        !nn_check_plain_all(op, error, TRUE, "gamma", gamma, "beta", beta, "running_mean",
                            running_mean, "running_var", running_var, NULL) ||
        (sm_out != NULL && !cuda_ensure_out(sm_out, TDM_DTYPE_F32, 1, &C, error)) ||
        (sv_out != NULL && !cuda_ensure_out(sv_out, TDM_DTYPE_F32, 1, &C, error)) ||
        !cuda_ensure_out(y, TDM_DTYPE_F32, x->ndim, x->shape, error) ||
        (scratch = nn_scratch_lock(dev, N, C, S, sm, error)) == NULL) {
        return FALSE;
    }
    cudaError_t rc = cuda_k_bn_forward(
        cuda_dev(dev)->compute, cuda_f32(x), cuda_f32(y), N, C, S, nn_f32_or_null(gamma),
        nn_f32_or_null(beta), nn_f32_or_null(running_mean), nn_f32_or_null(running_var), momentum,
        eps, training, nn_f32_or_null(sm_out), nn_f32_or_null(sv_out), relu, scratch, sm);
    g_mutex_unlock(&cuda_dev(dev)->lock);
    return cuda_launched(dev, rc, op, training ? "bn_forward (training)" : "bn_forward (eval)", x,
                         error);
}

static gboolean bn_forward_op(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *gamma,
                              TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                              float momentum, float eps, gboolean training, TdmTensor *save_mean,
                              TdmTensor *save_var, TdmTensor *y, gboolean relu, GError **error)
{
    return cuda_op_begin(dev, op, error) &&
           cuda_op_end(dev, op,
                       bn_forward_body(dev, op, x, gamma, beta, running_mean, running_var, momentum,
                                       eps, training, save_mean, save_var, y, relu, error),
                       error);
}

gboolean cuda_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                                TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                                float momentum, float eps, gboolean training, TdmTensor *save_mean,
                                TdmTensor *save_var, TdmTensor *y, GError **error)
{
    return bn_forward_op(dev, "batchnorm_forward", x, gamma, beta, running_mean, running_var,
                         momentum, eps, training, save_mean, save_var, y, FALSE, error);
}

/* y = max(BN(x), 0) in one pass. The workspace stays untouched (as ref's):
 * the backward's mask is y > 0. */
gboolean cuda_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                     TdmTensor *running_var, float momentum, float eps,
                                     gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                     TdmTensor *workspace, TdmTensor *y, GError **error)
{
    return bn_forward_op(dev, "batchnorm_relu_forward", x, gamma, beta, running_mean, running_var,
                         momentum, eps, training, save_mean, save_var, y, TRUE, error);
}

/* What the backward ops share; y_relu non-NULL masks dy by y_relu > 0. */
static gboolean bn_backward_body(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *y_relu,
                                 TdmTensor *dy, TdmTensor *gamma, TdmTensor *save_mean,
                                 TdmTensor *save_var, float eps, TdmTensor *dx, TdmTensor *dgamma,
                                 TdmTensor *dbeta, GError **error)
{
    int64_t N, C, S;
    int sm = nn_sm_count(dev);
    nn_chan_dims(x, &N, &C, &S);
    void *scratch;
    if (!nn_check_plain_all(op, error, FALSE, "x", x, "dy", dy, "save_mean", save_mean, "save_var",
                            save_var, NULL) ||
        !nn_check_plain_all(op, error, TRUE, "y", y_relu, "gamma", gamma, "dgamma", dgamma, "dbeta",
                            dbeta, NULL) ||
        (dx != NULL && !cuda_ensure_out(dx, TDM_DTYPE_F32, x->ndim, x->shape, error)) ||
        (scratch = nn_scratch_lock(dev, N, C, S, sm, error)) == NULL) {
        return FALSE;
    }
    cudaError_t rc = cuda_k_bn_backward(
        cuda_dev(dev)->compute, cuda_f32(x), cuda_f32(dy), nn_f32_or_null(y_relu), N, C, S,
        nn_f32_or_null(gamma), cuda_f32(save_mean), cuda_f32(save_var), eps, nn_f32_or_null(dx),
        nn_f32_or_null(dgamma), nn_f32_or_null(dbeta), scratch, sm);
    g_mutex_unlock(&cuda_dev(dev)->lock);
    return cuda_launched(dev, rc, op, "bn_backward", x, error);
}

static gboolean bn_backward_op(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *y_relu,
                               TdmTensor *dy, TdmTensor *gamma, TdmTensor *save_mean,
                               TdmTensor *save_var, float eps, TdmTensor *dx, TdmTensor *dgamma,
                               TdmTensor *dbeta, GError **error)
{
    return cuda_op_begin(dev, op, error) &&
           cuda_op_end(dev, op,
                       bn_backward_body(dev, op, x, y_relu, dy, gamma, save_mean, save_var, eps, dx,
                                        dgamma, dbeta, error),
                       error);
}

gboolean cuda_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                 TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                 float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                 GError **error)
{
    return bn_backward_op(dev, "batchnorm_backward", x, NULL, dy, gamma, save_mean, save_var, eps,
                          dx, dgamma, dbeta, error);
}

/* batchnorm_backward applied to dy * (y > 0), in the same passes; the
 * workspace is not read (the forward left it untouched). */
gboolean cuda_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                      TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                      TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                      float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                      GError **error)
{
    return bn_backward_op(dev, "batchnorm_relu_backward", x, y, dy, gamma, save_mean, save_var, eps,
                          dx, dgamma, dbeta, error);
}

/* ---- pooling ---- */

/* The geometry of the [N, C, H, W] input `x` under p, as ref computes it. */
static CudaPoolGeom nn_pool_geom(const TdmPool2dParams *p, const TdmTensor *x)
{
    return cuda_nn_pool_geom(x->shape[0], x->shape[1], x->shape[2], x->shape[3], p->kernel_h,
                             p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w,
                             p->count_include_pad ? 1 : 0);
}

/* The start of a pooling op: `in` (x, or dy for a backward) plain, the
 * geometry of the input x_like, and `out` shaped [N, C, OH, OW] (y of a
 * forward) or [N, C, H, W] (dx of a backward), as ref shapes them. */
static gboolean pool_begin(const char *op, const TdmPool2dParams *p, const char *in_name,
                           const TdmTensor *in, const TdmTensor *x_like, TdmTensor *out,
                           gboolean forward, CudaPoolGeom *g, GError **error)
{
    if (!cuda_check_plain(op, in_name, in, error)) {
        return FALSE;
    }
    *g = nn_pool_geom(p, x_like);
    int64_t shape[4] = {g->N, g->C, forward ? g->OH : g->H, forward ? g->OW : g->W};
    return cuda_ensure_out(out, TDM_DTYPE_F32, 4, shape, error);
}

typedef enum { NN_MAXPOOL_FWD, NN_MAXPOOL_BWD, NN_AVGPOOL_FWD, NN_AVGPOOL_BWD } NnPoolKind;

/* The max pool workspace: made here as i32 [N, C, OH, OW] (ref's format,
 * in-plane indices, so a plane must fit i32), or, for a backward, checked
 * to be what the forward made (the front end cannot check it). Its entries
 * are not checked (that would need a sync): the gather ignores any entry
 * that names no input of its window. */
static gboolean maxpool_workspace(const char *op, NnPoolKind kind, const CudaPoolGeom *g,
                                  TdmTensor *ws, const TdmTensor *y_like, GError **error)
{
    if (kind == NN_MAXPOOL_FWD) {
        if (g->H * g->W > G_MAXINT32) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                        "cuda %s: planes of %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                        " are more than the i32 workspace can index",
                        op, g->H, g->W);
            return FALSE;
        }
        return cuda_ensure_out(ws, TDM_DTYPE_I32, 4, y_like->shape, error);
    }
    if (!cuda_check_plain(op, "workspace", ws, error)) {
        return FALSE;
    }
    if (ws->dtype != TDM_DTYPE_I32 || !tdm_tensor_same_shape(ws, y_like)) {
        g_autofree char *s = tdm_tensor_shape_string(ws);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cuda %s: workspace %s (%s) is not what cuda's maxpool2d_forward made for dy",
                    op, s, tdm_dtype_name(ws->dtype));
        return FALSE;
    }
    return TRUE;
}

/* A pooling op: `in` is x (forward) or dy (backward), `out` y or dx, ws the
 * max pool workspace (NULL for average pooling). */
static gboolean pool_body(TdmDevice *dev, const char *op, NnPoolKind kind, const TdmPool2dParams *p,
                          TdmTensor *in, const TdmTensor *x_like, TdmTensor *ws, TdmTensor *out,
                          GError **error)
{
    static const char *const kernels[] = {"maxpool_forward", "maxpool_backward", "avgpool_forward",
                                          "avgpool_backward"};
    gboolean forward = kind == NN_MAXPOOL_FWD || kind == NN_AVGPOOL_FWD;
    CudaPoolGeom g;
    if (!pool_begin(op, p, forward ? "x" : "dy", in, x_like, out, forward, &g, error) ||
        (ws != NULL && !maxpool_workspace(op, kind, &g, ws, forward ? out : in, error))) {
        return FALSE;
    }
    cudaStream_t stream = cuda_dev(dev)->compute;
    cudaError_t rc;
    switch (kind) {
    case NN_MAXPOOL_FWD:
        rc = cuda_k_maxpool_forward(stream, cuda_f32(in), cuda_f32(out), tdm_tensor_data(ws), g);
        break;
    case NN_MAXPOOL_BWD:
        rc = cuda_k_maxpool_backward(stream, cuda_f32(in), tdm_tensor_data(ws), cuda_f32(out), g);
        break;
    case NN_AVGPOOL_FWD:
        rc = cuda_k_avgpool_forward(stream, cuda_f32(in), cuda_f32(out), g);
        break;
    default:
        rc = cuda_k_avgpool_backward(stream, cuda_f32(in), cuda_f32(out), g);
        break;
    }
    return cuda_launched(dev, rc, op, kernels[kind], in, error);
}

static gboolean pool_op(TdmDevice *dev, const char *op, NnPoolKind kind, const TdmPool2dParams *p,
                        TdmTensor *in, const TdmTensor *x_like, TdmTensor *ws, TdmTensor *out,
                        GError **error)
{
    return cuda_op_begin(dev, op, error) &&
           cuda_op_end(dev, op, pool_body(dev, op, kind, p, in, x_like, ws, out, error), error);
}

gboolean cuda_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error)
{
    return pool_op(dev, "maxpool2d_forward", NN_MAXPOOL_FWD, p, x, x, workspace, y, error);
}

gboolean cuda_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                 TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                 TdmTensor *dx, GError **error)
{
    return pool_op(dev, "maxpool2d_backward", NN_MAXPOOL_BWD, p, dy, x_like, workspace, dx, error);
}

gboolean cuda_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *x, TdmTensor *y, GError **error)
{
    return pool_op(dev, "avgpool2d_forward", NN_AVGPOOL_FWD, p, x, x, NULL, y, error);
}

gboolean cuda_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                 TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                 GError **error)
{
    return pool_op(dev, "avgpool2d_backward", NN_AVGPOOL_BWD, p, dy, x_like, NULL, dx, error);
}

gboolean cuda_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                                     GError **error)
{
    const char *op = "global_avgpool_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    /* y is [N, C] (the first two dims of x), as ref. */
    gboolean ok = cuda_check_plain(op, "x", x, error) &&
                  cuda_ensure_out(y, TDM_DTYPE_F32, 2, x->shape, error) &&
                  cuda_launched(dev,
                                cuda_k_global_avgpool_forward(
                                    cuda_dev(dev)->compute, cuda_f32(x), cuda_f32(y),
                                    x->shape[0] * x->shape[1], x->shape[2] * x->shape[3]),
                                op, "global_avgpool_forward", x, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                      const TdmTensor *x_like, TdmTensor *dx, GError **error)
{
    const char *op = "global_avgpool_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    /* dy is [N, C] or [N, C, 1, 1]: the same numbers. */
    int64_t xshape[4] = {x_like->shape[0], x_like->shape[1], x_like->shape[2], x_like->shape[3]};
    gboolean ok = cuda_check_plain(op, "dy", dy, error) &&
                  cuda_ensure_out(dx, TDM_DTYPE_F32, 4, xshape, error) &&
                  cuda_launched(dev,
                                cuda_k_global_avgpool_backward(cuda_dev(dev)->compute, cuda_f32(dy),
                                                               cuda_f32(dx), xshape[0] * xshape[1],
                                                               xshape[2] * xshape[3]),
                                op, "global_avgpool_backward", dx, error);
    return cuda_op_end(dev, op, ok, error);
}

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

/* The status of a launcher; on failure a GError naming the op, the kernel
 * and the shape of `t` (built only then: success allocates nothing). */
static gboolean nn_launched(TdmDevice *dev, cudaError_t rc, const char *op, const char *kernel,
                            const TdmTensor *t, GError **error)
{
    if (rc == cudaSuccess) {
        return TRUE;
    }
    g_autofree char *shape = tdm_tensor_shape_string(t);
    g_autofree char *what = g_strdup_printf("%s %s", kernel, shape);
    return cuda_check(dev, rc, op, what, error);
}

/* An optional input: NULL, or plain. */
static gboolean nn_check_optional(const char *op, const char *what, const TdmTensor *t,
                                  GError **error)
{
    return t == NULL || cuda_check_plain(op, what, t, error);
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

/* ---- bias_grad ---- */

gboolean cuda_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                        GError **error)
{
    const char *op = "bias_grad";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = cuda_check_plain(op, "dy", dy, error) &&
                  cuda_check_plain(op, "bias_grad", bias_grad, error);
    if (ok) {
        CudaDevice *cd = cuda_dev(dev);
        int64_t N, C, S;
        int sm = nn_sm_count(dev);
        nn_chan_dims(dy, &N, &C, &S);
        g_mutex_lock(&cd->lock);
        void *scratch = cuda_workspace(dev, cuda_k_chan_scratch_bytes(N, C, S, sm), error);
        cudaError_t rc = cudaSuccess;
        if (scratch != NULL) {
            rc = cuda_k_bias_grad(cd->compute, cuda_f32(dy), N, C, S, cuda_f32(bias_grad), scratch,
                                  sm);
        }
        g_mutex_unlock(&cd->lock);
        ok = scratch != NULL && nn_launched(dev, rc, op, "bias_grad", dy, error);
    }
    return cuda_op_end(dev, op, ok, error);
}

/* ---- batch norm ---- */

/* What the forward ops share: the checks, the outputs and the launch. */
static gboolean bn_forward_run(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *gamma,
                               TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                               float momentum, float eps, gboolean training, TdmTensor *save_mean,
                               TdmTensor *save_var, TdmTensor *y, gboolean relu, GError **error)
{
    if (!cuda_check_plain(op, "x", x, error) || !nn_check_optional(op, "gamma", gamma, error) ||
        !nn_check_optional(op, "beta", beta, error) ||
        !nn_check_optional(op, "running_mean", running_mean, error) ||
        !nn_check_optional(op, "running_var", running_var, error)) {
        return FALSE;
    }
    int64_t N, C, S;
    nn_chan_dims(x, &N, &C, &S);
    /* Shaped as ref: save_* [C] in training only, y like x (y may be x). */
    if ((training && save_mean != NULL &&
         !cuda_ensure_out(save_mean, TDM_DTYPE_F32, 1, &C, error)) ||
        (training && save_var != NULL && !cuda_ensure_out(save_var, TDM_DTYPE_F32, 1, &C, error)) ||
        !cuda_ensure_out(y, TDM_DTYPE_F32, x->ndim, x->shape, error)) {
        return FALSE;
    }
    CudaDevice *cd = cuda_dev(dev);
    int sm = nn_sm_count(dev);
    g_mutex_lock(&cd->lock);
    void *scratch = cuda_workspace(dev, cuda_k_chan_scratch_bytes(N, C, S, sm), error);
    cudaError_t rc = cudaSuccess;
    if (scratch != NULL) {
        rc = cuda_k_bn_forward(cd->compute, cuda_f32(x), cuda_f32(y), N, C, S,
                               nn_f32_or_null(gamma), nn_f32_or_null(beta),
                               nn_f32_or_null(running_mean), nn_f32_or_null(running_var), momentum,
                               eps, training, training ? nn_f32_or_null(save_mean) : NULL,
                               training ? nn_f32_or_null(save_var) : NULL, relu, scratch, sm);
    }
    g_mutex_unlock(&cd->lock);
    return scratch != NULL &&
           nn_launched(dev, rc, op, training ? "bn_forward (training)" : "bn_forward (eval)", x,
                       error);
}

gboolean cuda_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                                TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                                float momentum, float eps, gboolean training, TdmTensor *save_mean,
                                TdmTensor *save_var, TdmTensor *y, GError **error)
{
    const char *op = "batchnorm_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = bn_forward_run(dev, op, x, gamma, beta, running_mean, running_var, momentum, eps,
                                 training, save_mean, save_var, y, FALSE, error);
    return cuda_op_end(dev, op, ok, error);
}

/* y = max(BN(x), 0) in one pass. The workspace stays untouched (as ref's):
 * the backward's mask is y > 0. */
gboolean cuda_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                     TdmTensor *running_var, float momentum, float eps,
                                     gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                     TdmTensor *workspace, TdmTensor *y, GError **error)
{
    const char *op = "batchnorm_relu_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = bn_forward_run(dev, op, x, gamma, beta, running_mean, running_var, momentum, eps,
                                 training, save_mean, save_var, y, TRUE, error);
    return cuda_op_end(dev, op, ok, error);
}

/* What the backward ops share; y_relu non-NULL masks dy by y_relu > 0. */
static gboolean bn_backward_run(TdmDevice *dev, const char *op, TdmTensor *x, TdmTensor *y_relu,
                                TdmTensor *dy, TdmTensor *gamma, TdmTensor *save_mean,
                                TdmTensor *save_var, float eps, TdmTensor *dx, TdmTensor *dgamma,
                                TdmTensor *dbeta, GError **error)
{
    if (!cuda_check_plain(op, "x", x, error) || !cuda_check_plain(op, "dy", dy, error) ||
        !nn_check_optional(op, "y", y_relu, error) ||
        !nn_check_optional(op, "gamma", gamma, error) ||
        !cuda_check_plain(op, "save_mean", save_mean, error) ||
        !cuda_check_plain(op, "save_var", save_var, error) ||
        !nn_check_optional(op, "dgamma", dgamma, error) ||
        !nn_check_optional(op, "dbeta", dbeta, error)) {
        return FALSE;
    }
    if (dx != NULL && !cuda_ensure_out(dx, TDM_DTYPE_F32, x->ndim, x->shape, error)) {
        return FALSE;
    }
    int64_t N, C, S;
    nn_chan_dims(x, &N, &C, &S);
    CudaDevice *cd = cuda_dev(dev);
    int sm = nn_sm_count(dev);
    g_mutex_lock(&cd->lock);
    void *scratch = cuda_workspace(dev, cuda_k_chan_scratch_bytes(N, C, S, sm), error);
    cudaError_t rc = cudaSuccess;
    if (scratch != NULL) {
        rc = cuda_k_bn_backward(cd->compute, cuda_f32(x), cuda_f32(dy), nn_f32_or_null(y_relu), N,
                                C, S, nn_f32_or_null(gamma), cuda_f32(save_mean),
                                cuda_f32(save_var), eps, nn_f32_or_null(dx), nn_f32_or_null(dgamma),
                                nn_f32_or_null(dbeta), scratch, sm);
    }
    g_mutex_unlock(&cd->lock);
    return scratch != NULL && nn_launched(dev, rc, op, "bn_backward", x, error);
}

gboolean cuda_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                 TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                 float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                 GError **error)
{
    const char *op = "batchnorm_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = bn_backward_run(dev, op, x, NULL, dy, gamma, save_mean, save_var, eps, dx, dgamma,
                                  dbeta, error);
    return cuda_op_end(dev, op, ok, error);
}

/* batchnorm_backward applied to dy * (y > 0), in the same passes; the
 * workspace is not read (the forward left it untouched). */
gboolean cuda_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                      TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                      TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                      float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                      GError **error)
{
    const char *op = "batchnorm_relu_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    gboolean ok = bn_backward_run(dev, op, x, y, dy, gamma, save_mean, save_var, eps, dx, dgamma,
                                  dbeta, error);
    return cuda_op_end(dev, op, ok, error);
}

/* ---- pooling ---- */

/* The geometry of the [N, C, H, W] input `x` under p, as ref computes it. */
static CudaPoolGeom nn_pool_geom(const TdmPool2dParams *p, const TdmTensor *x)
{
    return cuda_nn_pool_geom(x->shape[0], x->shape[1], x->shape[2], x->shape[3], p->kernel_h,
                             p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w,
                             p->count_include_pad ? 1 : 0);
}

/* A forward's start: x plain, the geometry, y (out) [N, C, OH, OW]. */
static gboolean pool_forward_begin(const char *op, const TdmPool2dParams *p, const TdmTensor *x,
                                   TdmTensor *y, CudaPoolGeom *g, GError **error)
{
    if (!cuda_check_plain(op, "x", x, error)) {
        return FALSE;
    }
    *g = nn_pool_geom(p, x);
    int64_t yshape[4] = {g->N, g->C, g->OH, g->OW};
    return cuda_ensure_out(y, TDM_DTYPE_F32, 4, yshape, error);
}

/* A backward's start: dy plain, the geometry of x_like, dx (out) like it. */
static gboolean pool_backward_begin(const char *op, const TdmPool2dParams *p, const TdmTensor *dy,
                                    const TdmTensor *x_like, TdmTensor *dx, CudaPoolGeom *g,
                                    GError **error)
{
    if (!cuda_check_plain(op, "dy", dy, error)) {
        return FALSE;
    }
    *g = nn_pool_geom(p, x_like);
    int64_t xshape[4] = {g->N, g->C, g->H, g->W};
    return cuda_ensure_out(dx, TDM_DTYPE_F32, 4, xshape, error);
}

gboolean cuda_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error)
{
    const char *op = "maxpool2d_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaPoolGeom g;
    gboolean ok = pool_forward_begin(op, p, x, y, &g, error);
    /* The workspace holds in-plane indices as i32 (ref's format). */
    if (ok && g.H * g.W > G_MAXINT32) {
        g_autofree char *s = tdm_tensor_shape_string(x);
        g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE,
                    "cuda %s: x %s has planes of more than 2^31 - 1 elements, which the i32 "
                    "workspace cannot index",
                    op, s);
        ok = FALSE;
    }
    ok = ok && cuda_ensure_out(workspace, TDM_DTYPE_I32, 4, y->shape, error) &&
         nn_launched(dev,
                     cuda_k_maxpool_forward(cuda_dev(dev)->compute, cuda_f32(x), cuda_f32(y),
                                            tdm_tensor_data(workspace), g),
                     op, "maxpool_forward", x, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                 TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                 TdmTensor *dx, GError **error)
{
    const char *op = "maxpool2d_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaPoolGeom g;
    gboolean ok = cuda_check_plain(op, "workspace", workspace, error) &&
                  pool_backward_begin(op, p, dy, x_like, dx, &g, error);
    /* The workspace is this backend's own (the front end cannot check it):
     * i32 [N, C, OH, OW] as cuda_maxpool2d_forward makes it. Its entries
     * are not checked (that would need a sync): the gather ignores any
     * entry that names no input of its window. */
    if (ok && (workspace->dtype != TDM_DTYPE_I32 || !tdm_tensor_same_shape(workspace, dy))) {
        g_autofree char *s = tdm_tensor_shape_string(workspace);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "cuda %s: workspace %s (%s) is not what cuda's maxpool2d_forward made for dy",
                    op, s, tdm_dtype_name(workspace->dtype));
        ok = FALSE;
    }
    ok = ok && nn_launched(dev,
                           cuda_k_maxpool_backward(cuda_dev(dev)->compute, cuda_f32(dy),
                                                   tdm_tensor_data(workspace), cuda_f32(dx), g),
                           op, "maxpool_backward", dx, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *x, TdmTensor *y, GError **error)
{
    const char *op = "avgpool2d_forward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaPoolGeom g;
    gboolean ok =
        pool_forward_begin(op, p, x, y, &g, error) &&
        nn_launched(dev,
                    cuda_k_avgpool_forward(cuda_dev(dev)->compute, cuda_f32(x), cuda_f32(y), g), op,
                    "avgpool_forward", x, error);
    return cuda_op_end(dev, op, ok, error);
}

gboolean cuda_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                 TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                 GError **error)
{
    const char *op = "avgpool2d_backward";
    if (!cuda_op_begin(dev, op, error)) {
        return FALSE;
    }
    CudaPoolGeom g;
    gboolean ok =
        pool_backward_begin(op, p, dy, x_like, dx, &g, error) &&
        nn_launched(dev,
                    cuda_k_avgpool_backward(cuda_dev(dev)->compute, cuda_f32(dy), cuda_f32(dx), g),
                    op, "avgpool_backward", dx, error);
    return cuda_op_end(dev, op, ok, error);
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
                  nn_launched(dev,
                              cuda_k_global_avgpool_forward(cuda_dev(dev)->compute, cuda_f32(x),
                                                            cuda_f32(y), x->shape[0] * x->shape[1],
                                                            x->shape[2] * x->shape[3]),
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
                  nn_launched(dev,
                              cuda_k_global_avgpool_backward(cuda_dev(dev)->compute, cuda_f32(dy),
                                                             cuda_f32(dx), xshape[0] * xshape[1],
                                                             xshape[2] * xshape[3]),
                              op, "global_avgpool_backward", dx, error);
    return cuda_op_end(dev, op, ok, error);
}

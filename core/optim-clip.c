/* SPDX-License-Identifier: MIT */
/* core/optim-clip.c - gradient clipping by total norm, as PyTorch's
 * torch.nn.utils.clip_grad_norm_: the 2-norm of all trainable gradients
 * taken together, and when max_norm / (norm + 1e-6) is below 1 every
 * gradient scaled by it.
 *
 * It runs inside tdm_optimizer_step, so a strategy has one rule to follow
 * (include/tandem/strategy.h): hand the optimizer gradients already
 * averaged across ranks. Where every rank's optimizer holds all of them
 * (single, dp, ddp) each computes the same norm on its own; where each
 * holds a disjoint share (zero1's shard), the strategy names its
 * communicator (tdm_optimizer_set_grad_norm_comm) and the shares' squared
 * norms are added up with one all-reduce of a single float. The squared
 * norms are summed in double on the host (the backend's sum_squares), so
 * a clipping step waits for the device once.
 */
#include "config.h"

#include <math.h>

#include "optim-private.h"

/* PyTorch's guard against dividing by a zero norm. */
#define CLIP_EPS 1e-6

void tdm_optimizer_set_grad_norm_comm(TdmOptimizer *opt, TdmComm *comm)
{
    g_return_if_fail(opt != NULL);
    tdm_optimizer_core(opt)->norm_comm = comm;
}

double tdm_optimizer_get_grad_norm(const TdmOptimizer *opt)
{
    g_return_val_if_fail(opt != NULL, -1.0);
    const OptimCore *c = opt->core;
    return c != NULL ? c->grad_norm : -1.0;
}

/* The squared norms of every rank's share added up over c->norm_comm. */
static gboolean sum_over_ranks(TdmOptimizer *opt, OptimCore *c, double *sumsq, GError **error)
{
    if (c->norm_sum == NULL) {
        int64_t shape[1] = {1};
        c->norm_sum = tdm_tensor_new(opt->device, TDM_DTYPE_F32, 1, shape, error);
        if (c->norm_sum == NULL) {
            return FALSE;
        }
    }
    float v = (float)*sumsq;
    if (!tdm_tensor_write(c->norm_sum, &v, error) ||
        !tdm_comm_allreduce(c->norm_comm, c->norm_sum, TDM_REDUCE_SUM, error) ||
        !tdm_tensor_read(c->norm_sum, &v, error)) {
        g_prefix_error(
            error, "gradient clipping on rank %d: summing the squared norms: ", c->norm_comm->rank);
        return FALSE;
    }
    *sumsq = v;
    return TRUE;
}

gboolean tdm_optimizer_clip_grads(TdmOptimizer *opt, TdmTensor *grad_run, GError **error)
{
    const double max_norm = opt->opts.max_grad_norm;
    OptimCore *c = tdm_optimizer_core(opt);
    double sumsq = 0.0;
    if (grad_run != NULL) {
        if (!tdm_op_sum_squares(opt->device, grad_run, &sumsq, error)) {
            return FALSE;
        }
    } else {
        for (guint i = 0; i < opt->params->len; i++) {
            TdmParam *p = g_ptr_array_index(opt->params, i);
            double ss = 0.0;
            if (!p->requires_grad || p->grad == NULL) {
                continue;
            }
            if (!tdm_op_sum_squares(opt->device, p->grad, &ss, error)) {
                g_prefix_error(error, "gradient norm of %s: ", p->full_name);
                return FALSE;
            }
            sumsq += ss;
        }
    }
    if (c->norm_comm != NULL && c->norm_comm->world > 1 && !sum_over_ranks(opt, c, &sumsq, error)) {
        return FALSE;
    }
    const double norm = sqrt(sumsq);
    c->grad_norm = norm;
    /* PyTorch multiplies by the coefficient clamped to 1; multiplying by 1
     * changes nothing, so only a coefficient below 1 costs a pass. A norm
     * that is not finite makes it 0 or NaN, as there. */
    const double coef = max_norm / (norm + CLIP_EPS);
    if (coef >= 1.0) {
        return TRUE;
    }
    const float scale = (float)coef;
    if (grad_run != NULL) {
        return tdm_op_scale(opt->device, grad_run, scale, error);
    }
    for (guint i = 0; i < opt->params->len; i++) {
        TdmParam *p = g_ptr_array_index(opt->params, i);
        if (p->requires_grad && p->grad != NULL &&
            !tdm_op_scale(opt->device, p->grad, scale, error)) {
            g_prefix_error(error, "clipping the gradient of %s: ", p->full_name);
            return FALSE;
        }
    }
    return TRUE;
}

/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-optim.c - the fused optimizer updates: SGD (momentum,
 * dampening, Nesterov, weight decay) and AdamW, as PyTorch computes them.
 *
 * One pass over a parameter and its state per step, a vectorised kernel
 * over ranges of the OpenMP pool (cpu-kernel.h). The _zero_grad forms also
 * clear the gradient, block by block while its lines are still in L1, so
 * that zeroing costs no second pass over memory.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu-kernel.h"

/* PyTorch's SGD; flags: 1 = first step, 2 = nesterov */
CPU_KERNEL static void k_sgd_momentum(float *restrict p, const float *restrict g, float *restrict b,
                                      float lr, float wd, float mu, float damp, int flags,
                                      int64_t n)
{
    if (flags & 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float gi = g[i] + wd * p[i];
            b[i] = gi;
            p[i] -= lr * ((flags & 2) ? gi + mu * gi : gi);
        }
        return;
    }
    if (flags & 2) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float gi = g[i] + wd * p[i];
            float bi = mu * b[i] + damp * gi;
            b[i] = bi;
            p[i] -= lr * (gi + mu * bi);
        }
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        float bi = mu * b[i] + damp * gi;
        b[i] = bi;
        p[i] -= lr * bi;
    }
}

CPU_KERNEL static void k_sgd_plain(float *restrict p, const float *restrict g, float lr, float wd,
                                   int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        p[i] -= lr * (g[i] + wd * p[i]);
    }
}

/* Fused zeroing goes block by block so that the gradient lines are still
 * in L1 when they are cleared: one pass over memory instead of two. */
#define CPU_ZERO_BLOCK 2048

/* Runs update(ctx, b0, n) over [i0, i1): in blocks of CPU_ZERO_BLOCK when
 * zero (the gradient) is set, clearing each block of it once the update
 * has read it, else in one piece. */
static void update_range(int64_t i0, int64_t i1, float *zero,
                         void (*update)(void *ctx, int64_t b0, int64_t n), void *ctx)
{
    int64_t step = zero != NULL ? CPU_ZERO_BLOCK : i1 - i0;
    for (int64_t b0 = i0; b0 < i1; b0 += step) {
        int64_t n = MIN(step, i1 - b0);
        update(ctx, b0, n);
        if (zero != NULL) {
            memset(zero + b0, 0, sizeof(float) * (size_t)n);
        }
    }
}

typedef struct {
    float *p;       /* the parameter */
    const float *g; /* its gradient */
    float *buf;     /* the momentum buffer, NULL without momentum */
    float lr, wd, mu, damp; /* damp: 1 - dampening */
    int flags;      /* as k_sgd_momentum's */
    float *zero;    /* the gradient (g) to zero after reading, or NULL */
} SgdCtx;

static void sgd_block(void *ctx, int64_t b0, int64_t n)
{
    SgdCtx *c = ctx;
    if (c->buf == NULL) {
        k_sgd_plain(c->p + b0, c->g + b0, c->lr, c->wd, n);
    } else {
        k_sgd_momentum(c->p + b0, c->g + b0, c->buf + b0, c->lr, c->wd, c->mu, c->damp, c->flags,
                       n);
    }
}

static void r_sgd(int64_t i0, int64_t i1, void *ctx)
{
    update_range(i0, i1, ((SgdCtx *)ctx)->zero, sgd_block, ctx);
}

CPU_KERNEL static void k_adamw(float *restrict p, const float *restrict g, float *restrict m,
                               float *restrict v, float b1, float b2, float eps, float decay,
                               float step_size, float inv_sqrt_bc2, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

typedef struct {
    float *p, *m, *v;
    const float *g;
    float b1, b2, eps, decay, step_size, inv_sqrt_bc2;
    float *zero; /* the gradient (g) to zero after reading, or NULL */
} AdamCtx;

static void adamw_block(void *ctx, int64_t b0, int64_t n)
{
    AdamCtx *c = ctx;
    k_adamw(c->p + b0, c->g + b0, c->m + b0, c->v + b0, c->b1, c->b2, c->eps, c->decay,
            c->step_size, c->inv_sqrt_bc2, n);
}

static void r_adamw(int64_t i0, int64_t i1, void *ctx)
{
    update_range(i0, i1, ((AdamCtx *)ctx)->zero, adamw_block, ctx);
}

gboolean cpu_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                        TdmTensor *grad, TdmTensor *momentum_buf, gboolean zero_grad,
                        GError **error)
{
    SgdCtx c = {.p = tdm_tensor_data(param), .g = tdm_tensor_data(grad),
                .buf = hp->momentum != 0.0f ? tdm_tensor_data(momentum_buf) : NULL,
                .lr = hp->lr, .wd = hp->weight_decay, .mu = hp->momentum,
                .damp = 1.0f - hp->dampening,
                .flags = (hp->first_step ? 1 : 0) | (hp->nesterov ? 2 : 0),
                .zero = zero_grad ? tdm_tensor_data(grad) : NULL};
    cpu_par_range(tdm_tensor_numel(param), r_sgd, &c);
    return TRUE;
}

gboolean cpu_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          gboolean zero_grad, GError **error)
{
    double bc1 = 1.0 - pow(hp->beta1, (double)hp->step);
    double bc2 = 1.0 - pow(hp->beta2, (double)hp->step);
    AdamCtx c = {.p = tdm_tensor_data(param), .g = tdm_tensor_data(grad),
                 .m = tdm_tensor_data(exp_avg), .v = tdm_tensor_data(exp_avg_sq),
                 .b1 = hp->beta1, .b2 = hp->beta2, .eps = hp->eps,
                 .decay = 1.0f - hp->lr * hp->weight_decay,
                 .step_size = (float)(hp->lr / bc1), .inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2)),
                 .zero = zero_grad ? tdm_tensor_data(grad) : NULL};
    cpu_par_range(tdm_tensor_numel(param), r_adamw, &c);
    return TRUE;
}

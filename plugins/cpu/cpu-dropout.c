/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-dropout.c - dropout on the cpu backend's own loops.
 *
 * The mask is drawn from (seed, element index) alone with the same
 * SplitMix64 rule as the ref backend, so both give the same mask bit for
 * bit, whatever the thread count. The mask is a plain u8 tensor of the
 * input's shape; an input in a private layout is made plain first
 * (cpu_plain_input). Large loops use the OpenMP pool oneDNN uses.
 */
#include "config.h"

#include "cpu.h"

/* A uniform draw in [0, 1) from (seed, element index) alone (SplitMix64). */
static inline float dropout_uniform(guint64 seed, guint64 i)
{
    guint64 z = seed + (i + 1) * G_GUINT64_CONSTANT(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

gboolean cpu_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                             TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error)
{
    const float *xp;
    CpuEntry *e = NULL;
    if (!cpu_plain_input(dev, cache, CPU_OP_DROPOUT_FWD, x, &xp, &e, error)) {
        return FALSE;
    }
    /* (tdm_tensor_ensure takes y's own shape when y is x) */
    gboolean ok = tdm_tensor_ensure(mask, TDM_DTYPE_U8, x->ndim, x->shape, NULL, 0, error) &&
                  tdm_tensor_ensure(y, TDM_DTYPE_F32, x->ndim, x->shape, NULL, 0, error);
    if (ok) {
        if (e == NULL) {
            xp = tdm_tensor_data(x); /* y may be x: ensure kept its storage */
        }
        guint8 *m = tdm_tensor_data(mask);
        float *yp = tdm_tensor_data(y);
        int64_t n = tdm_tensor_numel(x);
        float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            guint8 keep = dropout_uniform(seed, (guint64)i) >= p;
            m[i] = keep;
            yp[i] = keep ? xp[i] * scale : 0.0f;
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

gboolean cpu_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                              TdmTensor *dy, TdmTensor *dx, GError **error)
{
    /* the mask is read as a flat array (the front end has checked its
     * dtype and shape) */
    if (!tdm_tensor_is_contiguous(mask)) {
        return cpu_refuse("dropout_backward", "mask", mask, "must be plain and contiguous", error);
    }
    const float *g;
    CpuEntry *e = NULL;
    if (!cpu_plain_input(dev, cache, CPU_OP_DROPOUT_BWD, dy, &g, &e, error)) {
        return FALSE;
    }
    gboolean ok = tdm_tensor_ensure(dx, TDM_DTYPE_F32, dy->ndim, dy->shape, NULL, 0, error);
    if (ok) {
        if (e == NULL) {
            g = tdm_tensor_data(dy);
        }
        const guint8 *m = tdm_tensor_data(mask);
        float *d = tdm_tensor_data(dx);
        int64_t n = tdm_tensor_numel(dy);
        float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            d[i] = m[i] ? g[i] * scale : 0.0f;
        }
    }
    cpu_entry_release(cache, e);
    return ok;
}

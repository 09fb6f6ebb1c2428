/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu.h - private declarations of the oneDNN cpu backend.
 *
 * The backend keeps tensors in oneDNN's preferred (blocked) layouts from op
 * to op. A layout handle is the address of a dnnl_memory_desc_t interned in
 * the device's state for the device's lifetime; NULL means plain. Every op
 * keeps its primitives, the memory objects bound to them and any reorder
 * buffers in an op cache entry keyed by the op's shapes, layouts and
 * parameters (cpu-cache.h), so that a steady-state step creates and
 * allocates nothing. One engine, one stream, a single scratchpad and the
 * transient buffers of CpuTransient (grown while primitives are created)
 * per device; ops on a device are serialised by its lock. The ops are declared below by the file that holds them.
 * The core's op front ends (tdm_op_*, core/ops-*.c) check every argument
 * against the contract of tandem/backend.h before an op runs; an op here
 * reports only what this backend cannot do (a layout, a dimension count).
 */
#ifndef TDM_CPU_H
#define TDM_CPU_H

#include <dnnl.h>
#include <tandem/tandem.h>

#include "cpu-cache.h"

#define CPU_ALIGN 64

/* Below this many elements an OpenMP loop stays on the calling thread. */
#define CPU_PAR_MIN 8192

/* ---- device state ---- */

typedef struct {
    dnnl_memory_desc_t md;     /* first member: the handle points here */
    char name[48];
    dnnl_primitive_t to_plain; /* lazily created host transfers */
    dnnl_primitive_t from_plain;
    dnnl_memory_desc_t plain_md;
} CpuLayout;

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    GMutex lock;        /* serialises ops: they share the scratchpad */
    GPtrArray *layouts; /* CpuLayout * (owned) */
    void *scratch;      /* shared scratchpad, grown at primitive creation */
    size_t scratch_size;
    void *transient[CPU_TRANSIENT_N]; /* see CpuTransient (cpu-cache.h) */
    size_t transient_size[CPU_TRANSIENT_N];
    GMutex alloc_lock;
    GHashTable *free_blocks; /* rounded size -> GSList of cached blocks */
    size_t cached_bytes;
} CpuDevice;

#define CPU_DEV(dev) ((CpuDevice *)(dev)->priv)

/* cpu-backend.c: TDM_CPU_PROFILE's per-op timer */
extern int cpu_profile_enabled;
void cpu_profile_add(CpuOpKind kind, double seconds);
double cpu_now(void);

/* oneDNN's right (or bottom) padding of a convolution or pooling whose
 * output has PyTorch's floor-mode size `out`: how far the last window
 * (`window` wide, dilation included) reaches beyond the input. */
static inline int64_t cpu_pad_right(int64_t out, int64_t stride, int64_t window, int64_t in,
                                    int64_t pad)
{
    return MAX(0, (out - 1) * stride + window - in - pad);
}

/* ---- memory descs and layout handles (cpu-cache.c) ---- */

gboolean cpu_check(dnnl_status_t s, const char *what, GError **error);
/* Refuses argument `what` (tensor t) of op with "cpu OP: WHAT SHAPE WHY":
 * for what the op's contract allows but this backend cannot take (the
 * core's front ends have checked the contract). Returns FALSE. */
gboolean cpu_refuse(const char *op, const char *what, const TdmTensor *t, const char *why,
                    GError **error);
gboolean cpu_dtype_to_dnnl(TdmDType dtype, dnnl_data_type_t *dt);
/* The memory desc of a tensor (its layout, or plain with its strides). */
gboolean cpu_tensor_md(const TdmTensor *t, dnnl_memory_desc_t *md, GError **error);
/* A plain dense row-major desc of this shape. */
gboolean cpu_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *shape, dnnl_data_type_t dt,
                      GError **error);
/* Interns md; returns NULL when md is plain dense (the tensor then has no
 * layout). *nbytes gets its size. */
gconstpointer cpu_layout_intern(TdmDevice *dev, const dnnl_memory_desc_t *md, size_t *nbytes);

/* ---- the ops, by file ---- */

/* cpu-transfer.c: host transfers, layout conversions */
TdmReadFn cpu_read;
TdmWriteFn cpu_write;
TdmReorderFn cpu_reorder;
/* t as plain contiguous data for the own loops: t's own data, or t
 * reordered into a buffer of a cached entry of `kind` (*entry, which the
 * caller releases; NULL when t is plain). */
gboolean cpu_plain_input(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind, TdmTensor *t,
                         const float **out, CpuEntry **entry, GError **error);
/* Plain strided copy of any element size into a dense buffer and back. */
void cpu_strided_copy(void *dst, const int64_t *dst_stride, const void *src,
                      const int64_t *src_stride, const int64_t *shape, int ndim, size_t esize);

/* cpu-gemm.c */
TdmGemmFn cpu_gemm;
TdmBiasGradFn cpu_bias_grad;

/* cpu-conv.c (the own loops it hands ops to: cpu-conv-own.h) */
gboolean cpu_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                            TdmTensor *y, GError **error);
TdmConv2dBackwardDataFn cpu_conv2d_backward_data;
TdmConv2dBackwardFilterFn cpu_conv2d_backward_filter;

/* cpu-batchnorm.c */
TdmBatchnormForwardFn cpu_batchnorm_forward;
TdmBatchnormBackwardFn cpu_batchnorm_backward;
TdmBatchnormReluForwardFn cpu_batchnorm_relu_forward;
TdmBatchnormReluBackwardFn cpu_batchnorm_relu_backward;

/* cpu-batchnorm-own.c: batch norm's own loops on channel-blocked layouts */
typedef struct {
    int64_t n, cb, s, b; /* images, channel blocks, pixels per plane, block (8/16) */
    int64_t c;           /* channels (the last block may be padded) */
} CpuBnGeom;
/* Whether the own loops handle a tensor of layout md with c channels (4-D,
 * nChw8c or nChw16c); fills g. */
gboolean cpu_bn_geom(const dnnl_memory_desc_t *md, int64_t c, CpuBnGeom *g);
size_t cpu_bn_work_bytes(const CpuBnGeom *g);
/* the ReLU mask the fused forward leaves: one byte per (padded) element */
size_t cpu_bn_mask_bytes(const CpuBnGeom *g);
void cpu_bn_forward(const CpuBnGeom *g, const float *x, const float *gamma, const float *beta,
                    float eps, gboolean training, float *mean, float *var, gboolean relu,
                    float *y, guint8 *mask, void *work);
void cpu_bn_backward(const CpuBnGeom *g, const float *x, const float *dy, const guint8 *mask,
                     const float *gamma, const float *mean, const float *var, float eps,
                     float *dx, float *dgamma, float *dbeta, void *work);

/* cpu-eltwise.c: ReLU and add (flat loops, oneDNN for mixed layouts) */
TdmReluForwardFn cpu_relu_forward;
TdmReluBackwardFn cpu_relu_backward;
TdmAddFn cpu_add;
TdmAddFn cpu_add_relu;
/* dst[i] += src[i] (vectorised, parallel for large n). */
void cpu_accumulate(float *dst, const float *src, int64_t n);

/* cpu-pool.c: pooling on oneDNN (average, global average, and max pooling
 * where cpu-maxpool.c's own loops do not apply) */
TdmAvgpool2dForwardFn cpu_avgpool2d_forward;
TdmAvgpool2dBackwardFn cpu_avgpool2d_backward;
TdmGlobalAvgpoolForwardFn cpu_global_avgpool_forward;
TdmGlobalAvgpoolBackwardFn cpu_global_avgpool_backward;
/* A pooling's window and output shape, from its parameters and input
 * (checked by the core's front ends: the output has at least one pixel). */
typedef struct {
    dnnl_dims_t strides, kernel, dilation, pad_l, pad_r;
    int64_t y_shape[4];
} CpuPoolGeom;
void cpu_pool_geom(const TdmPool2dParams *p, const int64_t *x, CpuPoolGeom *g);
/* The key of a pooling entry of `kind` so far: the algorithm and window. */
void cpu_pool_key_init(CpuKey *k, CpuOpKind kind, const TdmPool2dParams *p, dnnl_alg_kind_t alg);
/* Pooling with algorithm alg on oneDNN, cached under `kind`; ws is max
 * pooling's workspace (NULL for average pooling). */
gboolean cpu_pool_forward(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                          dnnl_alg_kind_t alg, const TdmPool2dParams *p, TdmTensor *x,
                          TdmTensor *y, TdmTensor *ws, GError **error);
gboolean cpu_pool_backward(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind,
                           dnnl_alg_kind_t alg, const TdmPool2dParams *p, TdmTensor *dy,
                           TdmTensor *ws, const TdmTensor *x_like, TdmTensor *dx,
                           GError **error);

/* cpu-maxpool.c: max pooling (own loops, else cpu-pool.c's oneDNN) */
TdmMaxpool2dForwardFn cpu_maxpool2d_forward;
TdmMaxpool2dBackwardFn cpu_maxpool2d_backward;

/* cpu-loss.c */
TdmSoftmaxXentFn cpu_softmax_xent;

/* cpu-dropout.c */
TdmDropoutForwardFn cpu_dropout_forward;
TdmDropoutBackwardFn cpu_dropout_backward;

/* cpu-vector.c */
TdmFillFn cpu_fill;
TdmCopyFn cpu_copy;
TdmScaleFn cpu_scale;
TdmAxpyFn cpu_axpy;
TdmSumSquaresFn cpu_sum_squares;

/* cpu-cast.c */
TdmCastFn cpu_cast;

/* cpu-optim.c: the fused optimizer updates */
gboolean cpu_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                        TdmTensor *grad, TdmTensor *momentum_buf, gboolean zero_grad,
                        GError **error);
gboolean cpu_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          gboolean zero_grad, GError **error);

/* cpu-device.c: streams and events, device information, loss statistics */
extern const TdmStreamOps cpu_stream_ops;
TdmDeviceInfoFn cpu_device_info;
TdmSoftmaxXentStatsFn cpu_softmax_xent_stats;
/* The first processor's "model name" in /proc/cpuinfo (NULL: none) and the
 * instruction set oneDNN's kernels use ("avx2", "avx512_core", ...); both
 * transfer none. */
const char *cpu_model(void);
const char *cpu_isa(void);

#endif /* TDM_CPU_H */

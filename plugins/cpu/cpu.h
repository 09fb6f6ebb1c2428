/* plugins/cpu/cpu.h - private declarations of the oneDNN cpu backend.
 *
 * The backend keeps tensors in oneDNN's preferred (blocked) layouts from op
 * to op. A layout handle is the address of a dnnl_memory_desc_t interned in
 * the device's state for the device's lifetime; NULL means plain. Every op
 * keeps its primitives, the memory objects bound to them and any reorder
 * buffers in an op cache entry keyed by the op's shapes, layouts and
 * parameters (cpu-cache.h), so that a steady-state step creates and
 * allocates nothing. One engine, one stream and a single scratchpad (grown
 * while primitives are created) per device; ops on a device are serialised
 * by its lock. The ops are declared below by the file that holds them.
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
gboolean cpu_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
gboolean cpu_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
gboolean cpu_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src, const TdmTensor *like,
                     TdmTensor *dst, GError **error);
/* t as plain contiguous data for the own loops: t's own data, or t
 * reordered into a buffer of a cached entry of `kind` (*entry, which the
 * caller releases; NULL when t is plain). */
gboolean cpu_plain_input(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind, TdmTensor *t,
                         const float **out, CpuEntry **entry, GError **error);
/* Plain strided copy of any element size into a dense buffer and back. */
void cpu_strided_copy(void *dst, const int64_t *dst_stride, const void *src,
                      const int64_t *src_stride, const int64_t *shape, int ndim, size_t esize);

/* cpu-gemm.c */
gboolean cpu_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                  float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                  TdmTensor *bias, GError **error);
gboolean cpu_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                       GError **error);

/* cpu-conv.c (the own loops it hands ops to: cpu-conv-own.h) */
gboolean cpu_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                            TdmTensor *y, GError **error);
gboolean cpu_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                  TdmTensor *dx, GError **error);
gboolean cpu_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache,
                                    const TdmConv2dParams *p, TdmTensor *x, TdmTensor *dy,
                                    TdmTensor *dw, TdmTensor *db, GError **error);

/* cpu-batchnorm.c */
gboolean cpu_batchnorm_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *gamma,
                               TdmTensor *beta, TdmTensor *running_mean, TdmTensor *running_var,
                               float momentum, float eps, gboolean training,
                               TdmTensor *save_mean, TdmTensor *save_var, TdmTensor *y,
                               GError **error);
gboolean cpu_batchnorm_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *dy,
                                TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                float eps, TdmTensor *dx, TdmTensor *dgamma, TdmTensor *dbeta,
                                GError **error);
gboolean cpu_batchnorm_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *gamma, TdmTensor *beta, TdmTensor *running_mean,
                                    TdmTensor *running_var, float momentum, float eps,
                                    gboolean training, TdmTensor *save_mean, TdmTensor *save_var,
                                    TdmTensor *workspace, TdmTensor *y, GError **error);
gboolean cpu_batchnorm_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                     TdmTensor *y, TdmTensor *workspace, TdmTensor *dy,
                                     TdmTensor *gamma, TdmTensor *save_mean, TdmTensor *save_var,
                                     float eps, TdmTensor *dx, TdmTensor *dgamma,
                                     TdmTensor *dbeta, GError **error);

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
gboolean cpu_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                          GError **error);
gboolean cpu_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                           TdmTensor *dx, GError **error);
gboolean cpu_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                 GError **error);
gboolean cpu_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                      GError **error);
/* dst[i] += src[i] (vectorised, parallel for large n). */
void cpu_accumulate(float *dst, const float *src, int64_t n);

/* cpu-pool.c: pooling on oneDNN (average, global average, and max pooling
 * where cpu-maxpool.c's own loops do not apply) */
gboolean cpu_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, GError **error);
gboolean cpu_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                GError **error);
gboolean cpu_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *y, GError **error);
gboolean cpu_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                     const TdmTensor *x_like, TdmTensor *dx, GError **error);
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
gboolean cpu_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error);
gboolean cpu_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                TdmTensor *dx, GError **error);

/* cpu-loss.c */
gboolean cpu_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                          TdmTensor *labels, float label_smoothing, float *loss,
                          TdmTensor *dlogits, int64_t *correct, GError **error);

/* cpu-dropout.c */
gboolean cpu_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                             TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
gboolean cpu_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                              TdmTensor *dy, TdmTensor *dx, GError **error);

/* cpu-vector.c */
gboolean cpu_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error);
gboolean cpu_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
gboolean cpu_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
gboolean cpu_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error);
gboolean cpu_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error);

/* cpu-cast.c */
gboolean cpu_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                  GError **error);

/* cpu-optim.c: the fused optimizer updates */
gboolean cpu_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                        TdmTensor *grad, TdmTensor *momentum_buf, gboolean zero_grad,
                        GError **error);
gboolean cpu_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          gboolean zero_grad, GError **error);

/* cpu-device.c: streams and events, device information, loss statistics */
extern const TdmStreamOps cpu_stream_ops;
gboolean cpu_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
gboolean cpu_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                TdmTensor *stats, GError **error);

#endif /* TDM_CPU_H */

/* plugins/cpu/cpu.h - private declarations of the oneDNN cpu backend.
 *
 * The backend keeps tensors in oneDNN's preferred (blocked) layouts from op
 * to op. A layout handle is the address of a dnnl_memory_desc_t interned in
 * the device's state for the device's lifetime; NULL means plain. Every op
 * keeps its primitives, the memory objects bound to them and any reorder
 * buffers in an op cache entry keyed by the op's shapes, layouts and
 * parameters, so that a steady-state step creates and allocates nothing.
 * One engine, one stream and a single scratchpad (grown while primitives are
 * created) per device; ops on a device are serialised by its lock.
 */
#ifndef TDM_CPU_H
#define TDM_CPU_H

#include <dnnl.h>
#include <tandem/tandem.h>

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

/* ---- op cache ---- */

#define CPU_KEY_MAX 96
#define CPU_MAX_PRIMS 6
#define CPU_MAX_MEMS 24
#define CPU_MAX_BUFS 8
#define CPU_ENTRIES_PER_KIND 4

typedef enum {
    CPU_OP_REORDER,
    CPU_OP_GEMM,
    CPU_OP_BIAS_GRAD,
    CPU_OP_CONV_FWD,
    CPU_OP_CONV_BWD_DATA,
    CPU_OP_CONV_BWD_FILTER,
    CPU_OP_BN_FWD,
    CPU_OP_BN_BWD,
    CPU_OP_RELU_FWD,
    CPU_OP_RELU_BWD,
    CPU_OP_ADD,
    CPU_OP_MAXPOOL_FWD,
    CPU_OP_MAXPOOL_BWD,
    CPU_OP_AVGPOOL_FWD,
    CPU_OP_AVGPOOL_BWD,
    CPU_OP_GAP_FWD,
    CPU_OP_GAP_BWD,
    CPU_OP_XENT,
    CPU_OP_DROPOUT_FWD,
    CPU_OP_DROPOUT_BWD,
    CPU_OP_VECTOR, /* fill, copy, scale, axpy, sum_squares, cast */
    CPU_OP_OPTIM,
    CPU_OP_HOST,   /* read, write */
    CPU_OP_BN_RELU_FWD,
    CPU_OP_BN_RELU_BWD,
    CPU_OP_ADD_RELU,
    CPU_OP_N
} CpuOpKind;

typedef struct {
    int n;
    int64_t v[CPU_KEY_MAX];
} CpuKey;

/* Brings an input into the layout a primitive wants: either nothing to do
 * (prim == NULL) or a cached reorder into a cached buffer. */
typedef struct {
    int prim; /* index in the entry's prims, -1 = no conversion */
    int src, dst; /* memory object indices */
    void *buf;
} CpuConvert;

typedef struct _CpuEntry CpuEntry;
struct _CpuEntry {
    CpuOpKind kind;
    CpuKey key;
    CpuEntry *next;
    int nprims;
    dnnl_primitive_t prims[CPU_MAX_PRIMS];
    int scratch[CPU_MAX_PRIMS]; /* scratchpad memory index or -1 */
    int nmems;
    dnnl_memory_t mems[CPU_MAX_MEMS];
    int nbufs;
    void *bufs[CPU_MAX_BUFS];
    CpuConvert conv[4];
    gconstpointer layout[3]; /* output layouts (interned) and their sizes */
    size_t nbytes[3];
    TdmDType out_dtype[3];
    int64_t aux[12];
    void *work[4]; /* op-specific buffers (owned through bufs) */
};

struct _TdmOpCache {
    CpuEntry *entries;
};

/* cpu-backend.c (profiling); cpu-cache.c (the rest below) */
extern int cpu_profile_enabled;
void cpu_profile_add(CpuOpKind kind, double seconds);
double cpu_now(void);

gboolean cpu_check(dnnl_status_t s, const char *what, GError **error);
#define CPU_TRY(call, what)                                                                   \
    do {                                                                                      \
        if (!cpu_check((call), (what), error)) {                                              \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

gboolean cpu_dtype_to_dnnl(TdmDType dtype, dnnl_data_type_t *dt);
/* The memory desc of a tensor (its layout, or plain with its strides). */
gboolean cpu_tensor_md(const TdmTensor *t, dnnl_memory_desc_t *md, GError **error);
/* A plain dense row-major desc of this shape. */
gboolean cpu_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *shape, dnnl_data_type_t dt,
                      GError **error);
/* Interns md; returns NULL when md is plain dense (the tensor then has no
 * layout). *nbytes gets its size. */
gconstpointer cpu_layout_intern(TdmDevice *dev, const dnnl_memory_desc_t *md, size_t *nbytes);
/* Records an output layout in slot i of e, from a primitive desc query. */
void cpu_entry_set_output(TdmDevice *dev, CpuEntry *e, int i, const dnnl_memory_desc_t *md,
                          TdmDType dtype);
/* Shapes `t` as output i of e (shape from the interned desc). */
gboolean cpu_entry_ensure_output(CpuEntry *e, int i, TdmTensor *t, int ndim,
                                 const int64_t *shape, GError **error);

void cpu_key_init(CpuKey *k, CpuOpKind kind);
void cpu_key_add(CpuKey *k, int64_t v);
void cpu_key_add_tensor(CpuKey *k, const TdmTensor *t);
CpuEntry *cpu_cache_find(TdmOpCache **cache, CpuOpKind kind, const CpuKey *key);
CpuEntry *cpu_entry_new(CpuOpKind kind, const CpuKey *key);
/* Stores e in the cache (or keeps it for a single use when cache is NULL). */
void cpu_cache_insert(TdmOpCache **cache, CpuEntry *e);
/* Frees e if it is not held by a cache. */
void cpu_entry_release(TdmOpCache **cache, CpuEntry *e);
void cpu_entry_free(CpuEntry *e);
void cpu_cache_free(TdmDevice *dev, TdmOpCache *cache);

/* Primitive creation helpers: attr with a user scratchpad (+ optional
 * post-op sum / output scale). */
dnnl_primitive_attr_t cpu_attr_new(float sum_scale, float out_scale);
gboolean cpu_prim_create(TdmDevice *dev, CpuEntry *e, const_dnnl_primitive_desc_t pd, int *index,
                         GError **error);
/* Grows the device's scratchpad to at least bytes (when an op's cache
 * entry is made, never in a steady step). An op may use it while it holds
 * the device lock; its contents do not last from one op to the next. */
gboolean cpu_scratch_reserve(TdmDevice *dev, size_t bytes, GError **error);
int cpu_entry_mem(TdmDevice *dev, CpuEntry *e, const dnnl_memory_desc_t *md);
void *cpu_entry_buf(CpuEntry *e, size_t nbytes);
dnnl_memory_t cpu_mem(CpuEntry *e, int index, void *ptr);
/* Executes prims[prim]; args needs room for one more (the scratchpad). */
gboolean cpu_run(TdmDevice *dev, CpuEntry *e, int prim, int nargs, dnnl_exec_arg_t *args,
                 GError **error);

gboolean cpu_convert_init(TdmDevice *dev, CpuEntry *e, CpuConvert *c,
                          const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                          GError **error);
/* Returns the pointer the primitive should read (ptr or the buffer). */
void *cpu_convert_run(TdmDevice *dev, CpuEntry *e, CpuConvert *c, void *ptr, GError **error);
/* Reorder src (desc `from`) into dst (desc `to`) with dst += when sum. */
gboolean cpu_reorder_prim(TdmDevice *dev, CpuEntry *e, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to, gboolean sum, int *prim, int *msrc,
                          int *mdst, GError **error);

/* A 4-D f32 layout seen as planes of [h][w][b] floats: plain NCHW (b = 1,
 * one plane per image and channel), NHWC (b = C, one plane per image) or
 * nChw8c / nChw16c (b = 8 / 16, one plane per image and channel block, C
 * padded to the block). FALSE for any other layout. The own loops (pooling,
 * the stem convolution) walk tensors through this view. */
typedef struct {
    int64_t planes, h, w, b; /* planes of [h][w][b] floats */
    dnnl_format_tag_t tag;   /* the layout's tag, to describe a resized tensor */
} CpuPlanes;
gboolean cpu_planes(const dnnl_memory_desc_t *md, CpuPlanes *o);

/* cpu-transfer.c */
gboolean cpu_read(TdmDevice *dev, TdmTensor *t, void *host, GError **error);
gboolean cpu_write(TdmDevice *dev, TdmTensor *t, const void *host, GError **error);
gboolean cpu_reorder(TdmDevice *dev, TdmOpCache **cache, TdmTensor *src, const TdmTensor *like,
                     TdmTensor *dst, GError **error);

/* conv2d and gemm: cpu-conv.c / cpu-gemm.c */
gboolean cpu_gemm(TdmDevice *dev, TdmOpCache **cache, gboolean trans_a, gboolean trans_b,
                  float alpha, TdmTensor *a, TdmTensor *b, float beta, TdmTensor *c,
                  TdmTensor *bias, GError **error);
gboolean cpu_bias_grad(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy, TdmTensor *bias_grad,
                       GError **error);
gboolean cpu_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                            TdmTensor *y, GError **error);
gboolean cpu_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                  TdmTensor *dx, GError **error);
gboolean cpu_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache,
                                    const TdmConv2dParams *p, TdmTensor *x, TdmTensor *dy,
                                    TdmTensor *dw, TdmTensor *db, GError **error);

/* cpu-norm.c: batch norm, relu, add */
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
gboolean cpu_relu_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x, TdmTensor *y,
                          GError **error);
gboolean cpu_relu_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *y, TdmTensor *dy,
                           TdmTensor *dx, GError **error);
gboolean cpu_add(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                 GError **error);
gboolean cpu_add_relu(TdmDevice *dev, TdmOpCache **cache, TdmTensor *a, TdmTensor *b, TdmTensor *y,
                      GError **error);

/* cpu-norm-own.c: batch norm's own loops on channel-blocked layouts */
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

/* cpu-pool.c */
gboolean cpu_maxpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, TdmTensor *workspace, GError **error);
gboolean cpu_maxpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, TdmTensor *workspace, const TdmTensor *x_like,
                                TdmTensor *dx, GError **error);
gboolean cpu_avgpool2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                               TdmTensor *x, TdmTensor *y, GError **error);
gboolean cpu_avgpool2d_backward(TdmDevice *dev, TdmOpCache **cache, const TdmPool2dParams *p,
                                TdmTensor *dy, const TdmTensor *x_like, TdmTensor *dx,
                                GError **error);
gboolean cpu_global_avgpool_forward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *x,
                                    TdmTensor *y, GError **error);
gboolean cpu_global_avgpool_backward(TdmDevice *dev, TdmOpCache **cache, TdmTensor *dy,
                                     const TdmTensor *x_like, TdmTensor *dx, GError **error);

/* cpu-ops.c (loss, dropout, plain inputs), cpu-vector.c (the rest) */
gboolean cpu_plain_input(TdmDevice *dev, TdmOpCache **cache, CpuOpKind kind, TdmTensor *t,
                         const float **out, CpuEntry **entry, GError **error);
gboolean cpu_softmax_xent(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                          TdmTensor *labels, float label_smoothing, float *loss,
                          TdmTensor *dlogits, int64_t *correct, GError **error);
gboolean cpu_dropout_forward(TdmDevice *dev, TdmOpCache **cache, float p, guint64 seed,
                             TdmTensor *x, TdmTensor *mask, TdmTensor *y, GError **error);
gboolean cpu_dropout_backward(TdmDevice *dev, TdmOpCache **cache, float p, TdmTensor *mask,
                              TdmTensor *dy, TdmTensor *dx, GError **error);
gboolean cpu_fill(TdmDevice *dev, TdmTensor *x, float value, GError **error);
gboolean cpu_copy(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, GError **error);
gboolean cpu_scale(TdmDevice *dev, TdmTensor *x, float alpha, GError **error);
gboolean cpu_axpy(TdmDevice *dev, float alpha, TdmTensor *x, TdmTensor *y, GError **error);
gboolean cpu_sum_squares(TdmDevice *dev, TdmTensor *x, double *result, GError **error);
gboolean cpu_cast(TdmDevice *dev, TdmTensor *src, TdmTensor *dst, gboolean normalize_u8,
                  GError **error);
gboolean cpu_sgd_update(TdmDevice *dev, const TdmSgdParams *hp, TdmTensor *param,
                        TdmTensor *grad, TdmTensor *momentum_buf, gboolean zero_grad,
                        GError **error);
gboolean cpu_adamw_update(TdmDevice *dev, const TdmAdamWParams *hp, TdmTensor *param,
                          TdmTensor *grad, TdmTensor *exp_avg, TdmTensor *exp_avg_sq,
                          gboolean zero_grad, GError **error);
typedef enum { CPU_ELT_RELU, CPU_ELT_RELU_BWD, CPU_ELT_ADD, CPU_ELT_ADD_RELU } CpuEltKind;
/* Flat loops over n floats of buffers that share one dense layout:
 * relu: out = max(a, 0); relu_bwd: out = a > 0 ? b : 0 (a = y, b = dy);
 * add: out = a + b; add_relu: out = max(a + b, 0). out may alias an input. */
void cpu_elementwise(CpuEltKind kind, float *out, const float *a, const float *b, int64_t n);
/* dst[i] += src[i] (vectorised, parallel for large n). */
void cpu_accumulate(float *dst, const float *src, int64_t n);
/* Plain strided copy of any element size into a dense buffer and back. */
void cpu_strided_copy(void *dst, const int64_t *dst_stride, const void *src,
                      const int64_t *src_stride, const int64_t *shape, int ndim, size_t esize);

/* cpu-device.c: streams and events, device information, loss statistics */
extern const TdmStreamOps cpu_stream_ops;
gboolean cpu_device_info(TdmDevice *dev, TdmDeviceInfo *info, GError **error);
gboolean cpu_softmax_xent_stats(TdmDevice *dev, TdmOpCache **cache, TdmTensor *logits,
                                TdmTensor *labels, float label_smoothing, TdmTensor *dlogits,
                                TdmTensor *stats, GError **error);

#endif /* TDM_CPU_H */

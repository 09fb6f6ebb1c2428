/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-cache.h - the op cache, and what each op keeps in it.
 *
 * An op looks its entry up by a key made of the op kind, its parameters and
 * its inputs' dtypes, shapes, strides and layout handles (cpu_cache_find).
 * On a miss it makes one: the oneDNN primitives (cpu_prim_create, which
 * also grows the device's shared scratchpad), the memory objects they run
 * with (cpu_entry_mem; their data handles are set on every call, cpu_mem),
 * the reorders that bring an input in another layout into the one a
 * primitive wants (CpuConvert) and any buffers (cpu_entry_buf). The entry
 * owns all of them through its arrays; where each one went is written into
 * the op's own fields, one struct per op in the union at the end of
 * CpuEntry (an index into prims[] or mems[], -1 where the op has none, or a
 * buffer pointer). A steady-state call then finds everything made, sets the
 * data handles and runs. A few entries per kind stay cached, so that the
 * smaller last batch of an epoch does not evict the full batch's.
 */
#ifndef TDM_CPU_CACHE_H
#define TDM_CPU_CACHE_H

#include <dnnl.h>
#include <tandem/tandem.h>

#define CPU_KEY_MAX 96
#define CPU_MAX_PRIMS 12
#define CPU_MAX_MEMS 40
#define CPU_MAX_BUFS 16
#define CPU_ENTRIES_PER_KIND 4

/* The ops, as cache kinds and as rows of the TDM_CPU_PROFILE table. */
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

/* The device's transient buffers: memory that one op call uses and no
 * later call reads (a convolution's inputs reordered into the primitive's
 * layouts, its weight gradient in the primitive's layout before it is
 * summed into the plain one). Every entry of the device shares them, which
 * ops can do because a device runs one op at a time (its lock): for
 * resnet18 this keeps one blocked copy of the largest layer's weights
 * instead of three copies of the whole model's (fwd, bwd data, bwd
 * weights). One buffer per role, so that the buffers one call uses at once
 * are distinct; each grows to the largest need while entries are set up
 * (cpu_transient_reserve), so a steady-state step allocates nothing. */
typedef enum {
    CPU_TRANSIENT_SRC,      /* x converted (forward, backward weights) */
    CPU_TRANSIENT_WEIGHTS,  /* weights converted, or the blocked weight gradient */
    CPU_TRANSIENT_DIFF_DST, /* dy converted (backward data and weights) */
    CPU_TRANSIENT_N
} CpuTransient;

/* Brings an input into the layout a primitive wants: either nothing to do
 * (prim < 0) or a cached reorder into a cached buffer or a transient one. */
typedef struct {
    int prim;     /* index in the entry's prims, -1 = no conversion */
    int src, dst; /* the reorder's memory objects */
    int slot;     /* the CpuTransient buffer converted into, -1: buf */
    void *buf;    /* the converted input when slot is -1 */
    size_t bytes; /* the converted input's size */
} CpuConvert;

/* A 4-D f32 layout seen as planes of [h][w][b] floats: plain NCHW (b = 1,
 * one plane per image and channel), NHWC (b = C, one plane per image) or
 * nChw8c / nChw16c (b = 8 / 16, one plane per image and channel block, C
 * padded to the block). The own loops (max pooling, batch norm) walk
 * tensors through this view; cpu_planes (cpu-cache.c) makes it. */
typedef struct {
    int64_t planes, h, w, b; /* planes of [h][w][b] floats */
    dnnl_format_tag_t tag;   /* the layout's tag, to describe a resized tensor */
} CpuPlanes;

/* The geometries of the own convolution loops (cpu-conv-own.h). */
typedef struct CpuStemGeom CpuStemGeom;
typedef struct CpuBwf8Geom CpuBwf8Geom;
typedef struct CpuGemmGeom CpuGemmGeom;
typedef struct CpuWinoGeom CpuWinoGeom;

/* ---- what each op keeps in its entry ----
 *
 * Unless a comment says otherwise, `prim` is an index into the entry's
 * prims[], a field named for a oneDNN argument (src, diff_dst, ...) the
 * index into mems[] of the memory object bound to that argument, and -1
 * means the op runs without it. Buffers are owned by the entry (bufs[]). */

/* reorder (cpu-transfer.c) */
typedef struct {
    int prim;     /* the reorder into the target layout */
    int from, to; /* its source and destination */
} CpuReorderOp;

/* an input made plain for the own loops (cpu_plain_input: the loss,
 * dropout, bias gradients) */
typedef struct {
    CpuConvert to_plain;
} CpuPlainInputOp;

/* gemm (cpu-gemm.c): one matmul */
typedef struct {
    int prim;
    int a, b, c;              /* op(a), op(b) (transposes as strides) and c */
    int bias;                 /* -1 when the bias is not fused (none, or alpha != 1) */
    CpuConvert a_in, b_in;    /* a and b from a private layout to plain */
} CpuGemmOp;

/* The code that can run a convolution pass (cpu-conv.c): the candidates
 * cpu-tune.c chooses among. */
typedef enum {
    CPU_CONV_ONEDNN,      /* the oneDNN primitive */
    CPU_CONV_STEM,        /* cpu-conv-stem.c: a plain image input with few channels */
    CPU_CONV_BWF8,        /* cpu-conv-bwf8.c: backward weights on nChw8c */
    CPU_CONV_WINO,        /* cpu-conv-wino.c: Winograd F(4x4, 3x3) on nChw8c */
    CPU_CONV_ONEDNN_WINO, /* oneDNN's Winograd primitive */
    CPU_CONV_GEMM,        /* cpu-conv-gemm.c: sgemms over pixel-major copies */
    CPU_CONV_N
} CpuConvImpl;

typedef struct CpuTuneShape CpuTuneShape;

/* The candidates a convolution entry has set up (all the valid ones while
 * its shape is being timed, else the choice), and the own loops' parts.
 * The op's dnnl[0] is filled when CPU_CONV_ONEDNN is there, dnnl[1] when
 * CPU_CONV_ONEDNN_WINO is. */
typedef struct {
    guint have;          /* 1 << CpuConvImpl for each candidate set up */
    CpuTuneShape *tune;  /* the shape's choice or timing (cpu-tune.c) */
    const CpuStemGeom *stem; /* the own loops' geometries (buffers of the entry) */
    const CpuBwf8Geom *bwf8;
    const CpuWinoGeom *wino;
    const CpuGemmGeom *gemm; /* its work is the scratchpad, as Winograd's */
    void *stem_work; /* their work buffers (Winograd's is the scratchpad) */
    void *bwf8_work;
} CpuConvOwn;

/* conv2d forward on a oneDNN primitive, with or without a ReLU post-op */
typedef struct {
    int prim;
    int src, weights, bias, dst;
    CpuConvert x_in; /* x into the primitive's source layout */
    CpuConvert w_in; /* the plain weights into the primitive's layout */
} CpuConvFwdPrim;

typedef struct {
    CpuConvOwn own;
    CpuConvFwdPrim dnnl[2]; /* direct, Winograd */
} CpuConvFwdOp;

/* conv2d backward data on a oneDNN primitive */
typedef struct {
    int prim;
    int diff_dst, weights, diff_src;
    CpuConvert dy_in; /* dy into the primitive's layout */
    CpuConvert w_in;  /* the plain weights into the primitive's layout */
} CpuConvBwdDataPrim;

typedef struct {
    CpuConvOwn own;
    CpuConvBwdDataPrim dnnl[2]; /* direct, Winograd */
} CpuConvBwdDataOp;

/* conv2d backward weights on a oneDNN primitive: it computes into the
 * device's transient weights buffer (its own layout) and db_buf, then
 * dw_sum adds that buffer into the plain dw (a reorder with a sum
 * post-op) and a loop adds db_buf into db */
typedef struct {
    int prim;
    int src, diff_dst, diff_weights, diff_bias;
    gboolean dw_own; /* the own loop sums instead (a 1x1 filter, cpu-conv.c) */
    int dw_sum, dw_sum_from, dw_sum_to; /* else the summing reorder and its memory */
    float *db_buf;      /* NULL without a bias */
    CpuConvert x_in;    /* x into the primitive's source layout */
    CpuConvert dy_in;   /* dy into the primitive's layout */
} CpuConvBwdFilterPrim;

typedef struct {
    CpuConvOwn own;
    CpuConvBwdFilterPrim dnnl[2]; /* direct, Winograd */
    CpuConvert stem_dy_in; /* dy into the blocked layout the stem loops read */
} CpuConvBwdFilterOp;

/* batch norm forward, plain or with ReLU fused (cpu-batchnorm.c) */
typedef struct {
    int prim;
    int src, dst, mean, variance, scale, shift;
    int workspace;           /* oneDNN's ReLU bit mask (training with ReLU) */
    int64_t workspace_bytes; /* its size */
    float *mean_buf;         /* [C]: the batch statistics when the caller */
    float *var_buf;          /* keeps none */
    void *workspace_buf;     /* oneDNN's mask when the caller passes no workspace */
    gboolean own;            /* cpu-batchnorm-own.c's loops run (work in the scratchpad) */
} CpuBnFwdOp;

/* batch norm backward, plain or with ReLU fused */
typedef struct {
    int prim;
    int src, diff_dst, mean, variance, scale, diff_src, diff_scale, diff_shift;
    int shift;               /* bound to dbeta_buf: the math does not read it */
    int workspace;           /* the forward's ReLU bit mask (with ReLU) */
    int64_t workspace_bytes; /* its size */
    float *dgamma_buf;       /* [C]: the parameter gradients, added into */
    float *dbeta_buf;        /* dgamma and dbeta afterwards */
    float *ones;             /* [C]: the scale of a layer without one */
    gboolean own;            /* cpu-batchnorm-own.c's loops run (work in the scratchpad) */
    CpuConvert dy_in;        /* dy into x's layout */
} CpuBnBwdOp;

/* ReLU and add on oneDNN, for tensors the flat loops do not take
 * (cpu-eltwise.c) */
typedef struct {
    int prim;
    int src, dst;
} CpuReluFwdOp;

typedef struct {
    int prim;
    int dst, diff_dst, diff_src;
    CpuConvert dy_in; /* dy into y's layout */
} CpuReluBwdOp;

typedef struct {
    int prim;
    int src0, src1, dst;
    CpuConvert a_in, b_in; /* a and b into the common layout */
} CpuAddOp;

/* max and average pooling forward on oneDNN (cpu-pool.c) */
typedef struct {
    int prim;
    int src, dst;
    int workspace;              /* max pooling's argmax (output 1) */
    int workspace_ndims;        /* the workspace's shape, for the caller's */
    int64_t workspace_shape[4]; /* workspace tensor */
    void *workspace_buf;        /* made at the first call without one */
} CpuPoolFwdOp;

/* max, average and global average pooling backward on oneDNN (global:
 * dy is the plain [N, C] gradient) */
typedef struct {
    int prim;
    int diff_dst, diff_src;
    int workspace;          /* max pooling's argmax from the forward */
    size_t workspace_bytes; /* its size (0 without one) */
    CpuConvert dy_in;       /* dy into the primitive's layout */
} CpuPoolBwdOp;

/* max pooling on the own loops, forward and backward (cpu-maxpool.c) */
typedef struct {
    CpuPlanes planes;        /* the input as planes */
    int64_t workspace_bytes; /* the argmax: one byte per output element */
    void *workspace_buf;     /* forward: made at the first call without one */
    CpuConvert dy_in;        /* backward: dy into the output's layout */
} CpuMaxpoolOwnOp;

/* global average pooling forward: oneDNN pools into pooled, then to_plain
 * reorders [N, C, 1, 1] into the plain [N, C] result (when the primitive's
 * output is plain, it writes the result directly and pooled is NULL) */
typedef struct {
    int prim;
    int src, dst;
    CpuConvert to_plain;
    void *pooled;
} CpuGapFwdOp;

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
    /* the op's outputs (0: its result; 1: max pooling's workspace): their
     * layouts (interned), sizes and dtypes, for cpu_entry_ensure_output */
    gconstpointer layout[2];
    size_t nbytes[2];
    TdmDType out_dtype[2];
    union { /* the op's own fields, by kind */
        CpuReorderOp reorder;           /* REORDER */
        CpuPlainInputOp plain_input;    /* XENT, DROPOUT_*, BIAS_GRAD */
        CpuGemmOp gemm;                 /* GEMM */
        CpuConvFwdOp conv_fwd;          /* CONV_FWD */
        CpuConvBwdDataOp conv_bwd_data; /* CONV_BWD_DATA */
        CpuConvBwdFilterOp conv_bwd_filter; /* CONV_BWD_FILTER */
        CpuBnFwdOp bn_fwd;              /* BN_FWD, BN_RELU_FWD */
        CpuBnBwdOp bn_bwd;              /* BN_BWD, BN_RELU_BWD */
        CpuReluFwdOp relu_fwd;          /* RELU_FWD */
        CpuReluBwdOp relu_bwd;          /* RELU_BWD */
        CpuAddOp add;                   /* ADD */
        CpuPoolFwdOp pool_fwd;          /* MAXPOOL_FWD, AVGPOOL_FWD */
        CpuPoolBwdOp pool_bwd;          /* MAXPOOL_BWD, AVGPOOL_BWD, GAP_BWD */
        CpuMaxpoolOwnOp maxpool_own;    /* MAXPOOL_FWD, MAXPOOL_BWD (own loops' keys) */
        CpuGapFwdOp gap_fwd;            /* GAP_FWD */
    };
};

struct _TdmOpCache {
    CpuEntry *entries;
};

/* ---- keys and entries ---- */

void cpu_key_init(CpuKey *k, CpuOpKind kind);
void cpu_key_add(CpuKey *k, int64_t v);
void cpu_key_add_tensor(CpuKey *k, const TdmTensor *t);
/* cpu_key_add_tensor for each of the n tensors that follow (any may be
 * NULL). */
void cpu_key_add_tensors(CpuKey *k, int n, ...);
CpuEntry *cpu_cache_find(TdmOpCache **cache, CpuOpKind kind, const CpuKey *key);
CpuEntry *cpu_entry_new(CpuOpKind kind, const CpuKey *key);
/* Stores e in the cache (or keeps it for a single use when cache is NULL). */
void cpu_cache_insert(TdmOpCache **cache, CpuEntry *e);
/* The end of an op's setup, made on a cache miss into e: frees pd (the
 * primitive descriptor the setup made its primitive from; NULL: none) and
 * stores e in the cache when ok, else frees e. Returns e, NULL when !ok.
 * An op then runs with the entry and releases it:
 *     CpuEntry *e = cpu_cache_find(cache, kind, &key);
 *     if (e == NULL && (e = op_setup(dev, cache, &key, ...)) == NULL) {
 *         return FALSE;
 *     }
 *     ... run ...
 *     cpu_entry_release(cache, e); */
CpuEntry *cpu_entry_setup_end(TdmOpCache **cache, CpuEntry *e, dnnl_primitive_desc_t pd,
                              gboolean ok);
/* Frees e if it is not held by a cache. */
void cpu_entry_release(TdmOpCache **cache, CpuEntry *e);
void cpu_entry_free(CpuEntry *e);
void cpu_cache_free(TdmDevice *dev, TdmOpCache *cache);

/* Records output i of e (its layout interned), from a primitive desc query;
 * dtype (TdmDType)-1 takes the desc's. */
void cpu_entry_set_output(TdmDevice *dev, CpuEntry *e, int i, const dnnl_memory_desc_t *md,
                          TdmDType dtype);
/* Shapes `t` as output i of e. */
gboolean cpu_entry_ensure_output(CpuEntry *e, int i, TdmTensor *t, int ndim,
                                 const int64_t *shape, GError **error);
/* The same in like's shape; t may be like itself (an op in place). */
gboolean cpu_entry_ensure_like(CpuEntry *e, int i, TdmTensor *t, const TdmTensor *like,
                               GError **error);

/* ---- primitives, memory objects, buffers ---- */

/* A primitive attr with a user scratchpad (+ optional post-op sum with
 * sum_scale when it is not 0, output scale when it is not 1). */
dnnl_primitive_attr_t cpu_attr_new(float sum_scale, float out_scale);
/* The primitive descriptor of op desc `desc` with a user scratchpad (the
 * attr of cpu_attr_new(0, 1)); hint is a backward pass's forward (NULL:
 * none); `what` names the primitive in the error. */
gboolean cpu_pd_create(TdmDevice *dev, const_dnnl_op_desc_t desc, const_dnnl_primitive_desc_t hint,
                       dnnl_primitive_desc_t *pd, const char *what, GError **error);
/* The same for a backward pass (op desc bwd), made with its forward (op
 * desc fwd) as the hint oneDNN wants. */
gboolean cpu_pd_create_backward(TdmDevice *dev, const_dnnl_op_desc_t fwd, const_dnnl_op_desc_t bwd,
                                dnnl_primitive_desc_t *pd, const char *what, GError **error);
/* Makes a primitive descriptor (see cpu_pd_create_fast); with `any`, the
 * activations' layouts are left to oneDNN (format any). */
typedef gboolean (*CpuPdMake)(TdmDevice *dev, const void *spec, gboolean any,
                              dnnl_primitive_desc_t *pd, GError **error);
/* oneDNN falls back to its slow reference kernels when it has no optimised
 * one for a combination of layouts (a padded blocked input with few
 * channels, say). Makes the primitive descriptor with make(dev, spec,
 * FALSE); when that fails or picks a reference kernel, once more with the
 * layouts left to oneDNN (make(dev, spec, TRUE)), which is kept when it
 * succeeds. The error is the first attempt's. */
gboolean cpu_pd_create_fast(TdmDevice *dev, CpuPdMake make, const void *spec,
                            dnnl_primitive_desc_t *pd, GError **error);
/* Creates the primitive of pd as e's next one (its index in *index) and
 * reserves its scratchpad. */
gboolean cpu_prim_create(TdmDevice *dev, CpuEntry *e, const_dnnl_primitive_desc_t pd, int *index,
                         GError **error);
/* Grows the device's scratchpad to at least bytes (when an op's cache
 * entry is made, never in a steady step). An op may use it while it holds
 * the device lock; its contents do not last from one op to the next. */
gboolean cpu_scratch_reserve(TdmDevice *dev, size_t bytes, GError **error);
/* Grows the device's transient buffer `slot` (a CpuTransient) to at least
 * `bytes` (when an entry is made); its content is not kept. */
gboolean cpu_transient_reserve(TdmDevice *dev, int slot, size_t bytes, GError **error);
/* The device's transient buffer `slot` as it is now. */
void *cpu_transient(TdmDevice *dev, int slot);
/* A memory object of desc md without data, owned by e: its index. */
int cpu_entry_mem(TdmDevice *dev, CpuEntry *e, const dnnl_memory_desc_t *md);
/* A zeroed, aligned buffer owned by e (NULL when out of memory). */
void *cpu_entry_buf(CpuEntry *e, size_t nbytes);
/* Memory object `index` of e, pointed at ptr. */
dnnl_memory_t cpu_mem(CpuEntry *e, int index, void *ptr);
/* Executes prims[prim]; args needs room for one more (the scratchpad). */
gboolean cpu_run(TdmDevice *dev, CpuEntry *e, int prim, int nargs, dnnl_exec_arg_t *args,
                 GError **error);

/* ---- reorders ---- */

/* Sets c up to bring data of desc `from` into `to` (nothing when equal). */
gboolean cpu_convert_init(TdmDevice *dev, CpuEntry *e, CpuConvert *c,
                          const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                          GError **error);
/* The same, converting into the device's transient buffer `slot` (a
 * CpuTransient), grown here if needed: for inputs that only the call
 * itself reads. */
gboolean cpu_convert_init_transient(TdmDevice *dev, CpuEntry *e, CpuConvert *c,
                                    const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    int slot, GError **error);

/* Returns the pointer the primitive should read (ptr or the buffer). */
void *cpu_convert_run(TdmDevice *dev, CpuEntry *e, CpuConvert *c, void *ptr, GError **error);
/* Reorder src (desc `from`) into dst (desc `to`) with dst += when sum. */
gboolean cpu_reorder_prim(TdmDevice *dev, CpuEntry *e, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to, gboolean sum, int *prim, int *msrc,
                          int *mdst, GError **error);

/* Whether md is one of the layouts CpuPlanes describes; fills o. */
gboolean cpu_planes(const dnnl_memory_desc_t *md, CpuPlanes *o);

#endif /* TDM_CPU_CACHE_H */

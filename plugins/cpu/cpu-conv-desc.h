/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-desc.h - what the convolution passes (cpu-conv.c)
 * are made from (cpu-conv-desc.c): a convolution's geometry and cache key,
 * the memory descs of its tensors, oneDNN's primitive descriptors (direct
 * and Winograd), the candidates' switches, the own loops' share of a cache
 * entry, and the shape's text key for the tuning (cpu-tune.h). */
#ifndef TDM_CPU_CONV_DESC_H
#define TDM_CPU_CONV_DESC_H

#include "cpu-conv-own.h"

/* oneDNN's geometry of a convolution, and its output's shape. */
typedef struct {
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    int64_t y_shape[4];
    int groups;
} CpuConvGeom;

void cpu_conv_geom(const TdmConv2dParams *p, const int64_t *x, const int64_t *w, CpuConvGeom *g);
/* The key of a convolution entry of `kind` so far: the parameters. */
void cpu_conv_key_init(CpuKey *k, CpuOpKind kind, const TdmConv2dParams *p);

/* The descs a primitive is created with: the source (or its gradient: x's
 * own layout, plain for few channels, else `any`), the destination (or
 * its gradient: dy's own layout, else `any`), the weights (plain, or
 * `any`; grouped as [g, O/g, C/g, KH, KW]). */
gboolean cpu_conv_src_md(const TdmTensor *x, const int64_t *shape, dnnl_memory_desc_t *md,
                         GError **error);
gboolean cpu_conv_dst_md(const TdmTensor *dy, const int64_t *shape, dnnl_memory_desc_t *md,
                         GError **error);
gboolean cpu_conv_weights_md(const TdmTensor *w, int groups, gboolean any, dnnl_memory_desc_t *md,
                             GError **error);
/* The direct primitives' algorithm (TDM_CPU_CONV_ALG=auto: oneDNN's pick). */
dnnl_alg_kind_t cpu_conv_alg(void);

/* What cpu_pd_create_fast makes a convolution's primitive descriptor from. */
typedef struct {
    CpuOpKind kind; /* the pass: CPU_OP_CONV_FWD, _BWD_DATA or _BWD_FILTER */
    const CpuConvGeom *g;
    const dnnl_memory_desc_t *src, *wei, *bias, *dst; /* bias NULL: none */
    gboolean relu;                                    /* forward: a ReLU post-op */
    dnnl_alg_kind_t alg; /* direct (or cpu_conv_alg()'s choice), or Winograd */
} CpuConvPdSpec;

/* CpuPdMake for the convolutions (spec: a CpuConvPdSpec). */
gboolean cpu_conv_pd_make(TdmDevice *dev, const void *spec, gboolean any, dnnl_primitive_desc_t *pd,
                          GError **error);
/* oneDNN's Winograd primitive descriptor for the pass of `direct`, its
 * output (out_query) in layout out_md when that is not NULL; FALSE when
 * oneDNN has none for the shape, its scratchpad is over
 * cpu_conv_workspace_limit(), or TDM_CPU_ONEDNN_WINO=0). */
gboolean cpu_conv_onednn_wino_pd(TdmDevice *dev, const CpuConvPdSpec *direct,
                                 dnnl_query_t out_query, const dnnl_memory_desc_t *out_md,
                                 dnnl_primitive_desc_t *pd);
/* The output-gradient layout the stem's backward weights reads. */
gboolean cpu_conv_stem_dy_md(TdmDevice *dev, const CpuConvGeom *g, const TdmTensor *dy,
                             const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                             dnnl_memory_desc_t *md);

/* The largest scratchpad a candidate other than oneDNN's direct kernel
 * may need, in bytes, for a convolution whose input, weights and output
 * take operand_bytes (TDM_CPU_WORKSPACE_LIMIT MiB when set, else 4 x
 * operand_bytes, at least 16 MiB). */
size_t cpu_conv_workspace_limit(size_t operand_bytes);

/* Whether the stem and bwf8 loops are candidates (TDM_CPU_STEM,
 * TDM_CPU_BWF8 not "0"). */
gboolean cpu_conv_stem_enabled(void);
gboolean cpu_conv_bwf8_enabled(void);
/* The own loops' geometry copied into the entry, with a work buffer of
 * work_bytes (when not 0) in *work; NULL (error `oom`) when out of memory. */
const void *cpu_conv_own_take(CpuEntry *e, const void *geom, size_t geom_size, size_t work_bytes,
                              void **work, const char *oom, GError **error);
/* Whether the Winograd loops can compute pass from inmd into (or with)
 * outmd (fills wg), and their setup in an entry. */
gboolean cpu_conv_wino_valid(const dnnl_memory_desc_t *inmd, const dnnl_memory_desc_t *outmd,
                             const TdmTensor *w, const TdmConv2dParams *p, CpuWinoPass pass,
                             CpuWinoGeom *wg);
gboolean cpu_conv_wino_setup(TdmDevice *dev, CpuEntry *e, CpuConvOwn *own, const CpuWinoGeom *wg,
                             GError **error);
/* The shape's key for cpu-tune.c (transfer full). */
char *cpu_conv_tune_key(const char *pass, const TdmConv2dParams *p, const int64_t *x,
                        const int64_t *w, const TdmTensor *a, const TdmTensor *b, gboolean bias,
                        gboolean relu);

#endif /* TDM_CPU_CONV_DESC_H */

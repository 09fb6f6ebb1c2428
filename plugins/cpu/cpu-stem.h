/* plugins/cpu/cpu-stem.h - the stem convolution's own loops (see
 * cpu-conv-stem.c): a plain NCHW input with at most CPU_STEM_MAX_C channels
 * into a blocked nChw8c / nChw16c output. */
#ifndef TDM_CPU_STEM_H
#define TDM_CPU_STEM_H

#include "cpu.h"

#define CPU_STEM_MAX_C 4
#define CPU_STEM_MAX_K 11

typedef struct {
    int64_t n, c, h, w;      /* input, plain NCHW */
    int64_t oc, ocp, oh, ow; /* output; ocp: channels padded to the block */
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t hp, wp; /* the zero-bordered input plane */
    int64_t b;      /* the output layout's block: 8 or 16 */
    int threads;
} CpuStemGeom;

/* Whether the own loops compute this convolution with the output (or
 * output gradient) in layout ymd; fills g. */
gboolean cpu_stem_geom(const TdmTensor *x, const TdmTensor *w, const TdmConv2dParams *p,
                       const dnnl_memory_desc_t *ymd, CpuStemGeom *g);
/* Size of the work buffer the calls below need. */
size_t cpu_stem_work_bytes(const CpuStemGeom *g, gboolean backward);
/* y = conv(x, w) + bias (bias may be NULL), then ReLU when relu. */
void cpu_stem_forward(const CpuStemGeom *g, const float *x, const float *w, const float *bias,
                      gboolean relu, float *y, void *work);
/* dw += dL/dw and db += dL/db (db may be NULL) for output gradient dy. */
void cpu_stem_backward_filter(const CpuStemGeom *g, const float *x, const float *dy, float *dw,
                              float *db, void *work);

#endif /* TDM_CPU_STEM_H */

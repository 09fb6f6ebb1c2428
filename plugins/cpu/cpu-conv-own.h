/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-own.h - the cpu backend's own convolution loops,
 * used where oneDNN's kernels are slow: the stem (cpu-conv-stem.c: a plain
 * NCHW input with at most CPU_STEM_MAX_C channels into a blocked nChw8c /
 * nChw16c output, forward and backward weights), backward weights on
 * nChw8c (cpu-conv-bwf8.c, AVX2 machines) and Winograd F(4x4, 3x3) for 3x3
 * stride-1 convolutions on nChw8c: forward, backward data and backward
 * weights (cpu-conv-wino.c); every pass as sgemms over pixel rows, one
 * per filter tap and run of output pixels, in any layout (cpu-conv-gemm.c). Their geometry structs
 * are named in cpu-cache.h, whose convolution entries point to them. */
#ifndef TDM_CPU_CONV_OWN_H
#define TDM_CPU_CONV_OWN_H

#include "cpu.h"

#define CPU_STEM_MAX_C 4
#define CPU_STEM_MAX_K 11

struct CpuStemGeom {
    int64_t n, c, h, w;      /* input, plain NCHW */
    int64_t oc, ocp, oh, ow; /* output; ocp: channels padded to the block */
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t hp, wp; /* the zero-bordered input plane */
    int64_t b;      /* the output layout's block: 8 or 16 */
    int threads;
};

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

/* ---- backward weights, input and output gradient in nChw8c ---- */

struct CpuBwf8Geom {
    int64_t n, ic, icp, h, w; /* input; icp: channels padded to 8 */
    int64_t oc, ocp, oh, ow;  /* output gradient */
    int64_t kh, kw, sh, sw, ph, pw;
    int threads;
};

/* Whether the own loops compute dw for x in layout xmd and dy in dymd
 * (both nChw8c), weights of shape wshape; fills g. */
gboolean cpu_bwf8_geom(const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *dymd,
                       const int64_t *wshape, const TdmConv2dParams *p, CpuBwf8Geom *g);
size_t cpu_bwf8_work_bytes(const CpuBwf8Geom *g);
/* dw += dL/dw (plain [oc][ic][kh][kw]) and db += dL/db (db may be NULL). */
void cpu_bwf8_run(const CpuBwf8Geom *g, const float *x, const float *dy, float *dw, float *db,
                  void *work);

/* ---- convolution as sgemms over pixel rows, x and dy in any 4-D layout ---- */

struct CpuGemmGeom {
    int64_t n, c, h, w, xb, xplanes; /* input; its layout as cpu_planes: block, planes/image */
    int64_t o, oh, ow, yb, yplanes;  /* output gradient, likewise */
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t threads; /* the backward weights' tiles in flight */
};

/* Output channels per backward-weights tile (cpu-conv-gemm.c) */
#define CPU_GEMM_BWF_TILE_O 32

/* Whether the sgemms compute this convolution for x in layout xmd and dy
 * in dymd (groups and dilation 1), weights of shape wshape; fills g. */
gboolean cpu_gemm_bwf_geom(const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *dymd,
                           const int64_t *wshape, const TdmConv2dParams *p, CpuGemmGeom *g);
/* Bytes of work space (the row copies, a tile per thread) a call needs. */
size_t cpu_gemm_bwf_work_bytes(const CpuGemmGeom *g);
/* dw += dL/dw (plain [o][c][kh][kw]) and db += dL/db (db may be NULL);
 * FALSE if sgemm refuses. */
gboolean cpu_gemm_bwf_run(const CpuGemmGeom *g, const float *x, const float *dy, float *dw,
                          float *db, void *work);

/* The forward and backward data as sgemms over pixel-major copies of the
 * activations and tap-major weights (same geometry: x the convolution's
 * input, or dx; y its output, or dy). Bytes of work space (the two
 * activation copies) a call needs. */
size_t cpu_gemm_rows_work_bytes(const CpuGemmGeom *g);
/* The plain weights w [O][C][KH][KW] tap-major into wt: [KH][KW][C][O]
 * for the forward (out_o), [KH][KW][O][C] for backward data. */
void cpu_gemm_weights_by_tap(const CpuGemmGeom *g, const float *w, gboolean out_o, float *wt);
/* y = conv(x, w) + bias (bias may be NULL), then ReLU when relu; w the
 * plain weights, wt room for them tap-major; FALSE if sgemm refuses. */
gboolean cpu_gemm_fwd_run(const CpuGemmGeom *g, const float *x, const float *w, float *wt,
                          const float *bias, gboolean relu, float *y, void *work);
/* dx = the input gradient for output gradient dy, w and wt as for the
 * forward (wt unused for a 1x1 filter: [O][C] is its tap-major order);
 * FALSE if sgemm refuses. */
gboolean cpu_gemm_bwd_data_run(const CpuGemmGeom *g, const float *dy, const float *w, float *wt,
                               float *dx, void *work);

/* ---- Winograd F(4x4, 3x3): 3x3, stride 1, padding 1, nChw8c in and out:
 * forward, backward data and backward weights ---- */

#define CPU_WINO_MAX_C 64

typedef enum {
    CPU_WINO_FORWARD,          /* in x (ci channels), out y (co); weights [co][ci] */
    CPU_WINO_BACKWARD_DATA,    /* in dy (ci), out dx (co); weights [ci][co] */
    CPU_WINO_BACKWARD_WEIGHTS, /* x (ci) and dy (co) into dw [co][ci] */
} CpuWinoPass;

struct CpuWinoGeom {
    int64_t n, ci, co, h, w; /* ci channels in, co out; planes h x w, the same in and out */
    int64_t th, tw;          /* 4x4 output tiles down and across */
    int64_t chunk, stride;   /* tiles per chunk; rows of V and M per position */
    int threads;
    CpuWinoPass pass;
};

/* Whether the own loops compute this pass from layout inmd into (or, for
 * the weights, with) outmd; fills g. */
gboolean cpu_wino_geom(const dnnl_memory_desc_t *inmd, const dnnl_memory_desc_t *outmd,
                       const int64_t *wshape, const TdmConv2dParams *p, CpuWinoPass pass,
                       CpuWinoGeom *g);
/* Bytes of work space a call of g's pass needs. */
size_t cpu_wino_work_bytes(const CpuWinoGeom *g);
/* The forward or backward data: out = conv(in, w) + bias (bias may be
 * NULL), then ReLU when relu. */
void cpu_wino_run(const CpuWinoGeom *g, const float *in, const float *w, const float *bias,
                  gboolean relu, float *out, void *work);
/* The weight gradient: dw += dL/dw (plain [co][ci][3][3]) and db += dL/db
 * (db may be NULL). */
void cpu_wino_backward_filter(const CpuWinoGeom *g, const float *x, const float *dy, float *dw,
                              float *db, void *work);

#endif /* TDM_CPU_CONV_OWN_H */

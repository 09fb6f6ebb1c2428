/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-conv-desc.c - what the convolution passes (cpu-conv.c)
 * are made from: the geometry and cache key of a convolution, the memory
 * descs of its tensors, oneDNN's primitive descriptors (direct, and
 * Winograd where oneDNN has it), the switches that take a candidate out,
 * the own loops' share of an entry, and the shape's text key for the
 * tuning (cpu-tune.c). Declared in cpu-conv-desc.h.
 */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu-conv-desc.h"

/* Inputs with at most this many channels are read in plain layout. */
#define CPU_CONV_PLAIN_MAX_C 4

/* The primitive's geometry. tdm_op_conv2d_* have checked the parameters
 * (stride, dilation and groups at least 1) and that x fits the weights,
 * with an output of at least one pixel. */
void cpu_conv_geom(const TdmConv2dParams *p, const int64_t *x, const int64_t *w, CpuConvGeom *g)
{
    int64_t kh = (w[2] - 1) * p->dilation_h + 1, kw = (w[3] - 1) * p->dilation_w + 1;
    int64_t oh = (x[2] + 2 * p->pad_h - kh) / p->stride_h + 1;
    int64_t ow = (x[3] + 2 * p->pad_w - kw) / p->stride_w + 1;
    g->groups = p->groups;
    g->strides[0] = p->stride_h;
    g->strides[1] = p->stride_w;
    g->dilates[0] = p->dilation_h - 1;
    g->dilates[1] = p->dilation_w - 1;
    g->pad_l[0] = p->pad_h;
    g->pad_l[1] = p->pad_w;
    g->pad_r[0] = cpu_pad_right(oh, p->stride_h, kh, x[2], p->pad_h);
    g->pad_r[1] = cpu_pad_right(ow, p->stride_w, kw, x[3], p->pad_w);
    g->y_shape[0] = x[0];
    g->y_shape[1] = w[0];
    g->y_shape[2] = oh;
    g->y_shape[3] = ow;
}

/* The key of a convolution entry of `kind` so far: the parameters. */
void cpu_conv_key_init(CpuKey *k, CpuOpKind kind, const TdmConv2dParams *p)
{
    cpu_key_init(k, kind);
    cpu_key_add(k, p->stride_h);
    cpu_key_add(k, p->stride_w);
    cpu_key_add(k, p->pad_h);
    cpu_key_add(k, p->pad_w);
    cpu_key_add(k, p->dilation_h);
    cpu_key_add(k, p->dilation_w);
    cpu_key_add(k, p->groups);
}

/* The source (or diff source) desc the primitive is created with. */
gboolean cpu_conv_src_md(const TdmTensor *x, const int64_t *shape, dnnl_memory_desc_t *md,
                         GError **error)
{
    if (x->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)x->layout;
        return TRUE;
    }
    if (shape[1] <= CPU_CONV_PLAIN_MAX_C) {
        return cpu_tensor_md(x, md, error);
    }
    dnnl_dims_t d = {shape[0], shape[1], shape[2], shape[3]};
    return cpu_check(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any),
                     "conv source desc", error);
}

/* The destination (or diff destination) desc: the gradient's own layout
 * when it has one, else whatever the primitive prefers. */
gboolean cpu_conv_dst_md(const TdmTensor *dy, const int64_t *shape, dnnl_memory_desc_t *md,
                         GError **error)
{
    if (dy != NULL && dy->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)dy->layout;
        return TRUE;
    }
    dnnl_dims_t d = {shape[0], shape[1], shape[2], shape[3]};
    return cpu_check(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any),
                     "conv destination desc", error);
}

/* Weights: plain [O, C/g, KH, KW] seen as [g, O/g, C/g, KH, KW] for groups. */
gboolean cpu_conv_weights_md(const TdmTensor *w, int groups, gboolean any, dnnl_memory_desc_t *md,
                             GError **error)
{
    if (groups == 1) {
        if (any) {
            dnnl_dims_t d = {w->shape[0], w->shape[1], w->shape[2], w->shape[3]};
            return cpu_check(dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any),
                             "weights desc", error);
        }
        return cpu_tensor_md(w, md, error);
    }
    dnnl_dims_t d = {groups, w->shape[0] / groups, w->shape[1], w->shape[2], w->shape[3]};
    return cpu_check(
        dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_f32, any ? dnnl_format_tag_any : dnnl_goihw),
        "weights desc", error);
}

/* TDM_CPU_CONV_ALG=auto lets oneDNN pick Winograd where it judges it
 * faster (experiments only; direct is the default). */
dnnl_alg_kind_t cpu_conv_alg(void)
{
    static int alg = -1;
    if (alg < 0) {
        const char *s = g_getenv("TDM_CPU_CONV_ALG");
        alg = s != NULL && strcmp(s, "auto") == 0;
    }
    return alg ? dnnl_convolution_auto : dnnl_convolution_direct;
}

/* The own loops (cpu-conv-own.h) and oneDNN's Winograd kernels are
 * candidates unless their variable is "0" (TDM_CPU_STEM, TDM_CPU_BWF8,
 * TDM_CPU_WINO, TDM_CPU_ONEDNN_WINO: to compare). */
static gboolean own_enabled(const char *var, int *cached)
{
    if (*cached < 0) {
        const char *s = g_getenv(var);
        *cached = s == NULL || strcmp(s, "0") != 0;
    }
    return *cached;
}

gboolean cpu_conv_stem_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_STEM", &enabled);
}

gboolean cpu_conv_bwf8_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_BWF8", &enabled);
}

static gboolean wino_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_WINO", &enabled);
}

static gboolean onednn_wino_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_ONEDNN_WINO", &enabled);
}

/* Copies the own loops' geometry (geom_size bytes) into a buffer of the
 * entry being set up and, when work_bytes is not 0, gives them a work
 * buffer (*work). Returns the geometry's copy, NULL (with `oom` as the
 * message) when out of memory. */
const void *cpu_conv_own_take(CpuEntry *e, const void *geom, size_t geom_size, size_t work_bytes,
                              void **work, const char *oom, GError **error)
{
    void *copy = cpu_entry_buf(e, geom_size);
    if (work_bytes > 0) {
        *work = cpu_entry_buf(e, work_bytes);
    }
    if (copy == NULL || (work_bytes > 0 && *work == NULL)) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "cpu conv2d: %s", oom);
        return NULL;
    }
    memcpy(copy, geom, geom_size);
    return copy;
}

/* Whether the Winograd loops (cpu-conv-wino.c) can compute pass from
 * layout inmd into (or, for the weights, with) outmd; fills wg. The
 * weights (or their gradient) must be plain, as the model keeps them. */
gboolean cpu_conv_wino_valid(const dnnl_memory_desc_t *inmd, const dnnl_memory_desc_t *outmd,
                             const TdmTensor *w, const TdmConv2dParams *p, CpuWinoPass pass,
                             CpuWinoGeom *wg)
{
    return wino_enabled() && w->layout == NULL && tdm_tensor_is_contiguous(w) &&
           cpu_wino_geom(inmd, outmd, w->shape, p, pass, wg);
}

/* Sets the Winograd loops up in the entry: keeps their geometry and grows
 * the device's scratchpad for their work. */
gboolean cpu_conv_wino_setup(TdmDevice *dev, CpuEntry *e, CpuConvOwn *own, const CpuWinoGeom *wg,
                             GError **error)
{
    own->wino = cpu_conv_own_take(e, wg, sizeof *wg, 0, NULL, "out of memory", error);
    return own->wino != NULL && cpu_scratch_reserve(dev, cpu_wino_work_bytes(wg), error);
}

static const char *tune_layout_name(const TdmTensor *t)
{
    if (t->layout != NULL) {
        return ((const CpuLayout *)t->layout)->name;
    }
    return tdm_tensor_is_contiguous(t) ? "plain" : "strided";
}

/* The shape's key for cpu-tune.c (transfer full): what decides which
 * kernel is fastest, in text that means the same in another process:
 * the pass, sizes, parameters, the layouts of the activations it reads
 * (a, b) and the threads. */
char *cpu_conv_tune_key(const char *pass, const TdmConv2dParams *p, const int64_t *x,
                        const int64_t *w, const TdmTensor *a, const TdmTensor *b, gboolean bias,
                        gboolean relu)
{
    return g_strdup_printf(
        "%s n%lld c%lld h%lld w%lld o%lld k%lldx%lld s%dx%d p%dx%d d%dx%d "
        "g%d%s%s %s %s t%d",
        pass, (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], (long long)w[0],
        (long long)w[2], (long long)w[3], (int)p->stride_h, (int)p->stride_w, (int)p->pad_h,
        (int)p->pad_w, (int)p->dilation_h, (int)p->dilation_w, (int)p->groups, bias ? " bias" : "",
        relu ? " relu" : "", tune_layout_name(a), tune_layout_name(b), omp_get_max_threads());
}

static gboolean md_any(const dnnl_memory_desc_t *like, dnnl_memory_desc_t *md, GError **error)
{
    return cpu_check(
        dnnl_memory_desc_init_by_tag(md, like->ndims, like->dims, dnnl_f32, dnnl_format_tag_any),
        "conv desc", error);
}

/* The forward's primitive descriptor; relu: a ReLU post-op
 * (conv2d_relu_forward). */
static gboolean fwd_pd(TdmDevice *dev, const CpuConvGeom *g, dnnl_alg_kind_t alg,
                       const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                       const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, gboolean relu,
                       dnnl_primitive_desc_t *pd, GError **error)
{
    dnnl_convolution_desc_t cd;
    if (!cpu_check(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, alg, src,
                                                              wei, bias, dst, g->strides,
                                                              g->dilates, g->pad_l, g->pad_r),
                   "convolution forward desc", error)) {
        return FALSE;
    }
    dnnl_primitive_attr_t attr = cpu_attr_new(0.0f, 1.0f);
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_success;
    if (relu && (s = dnnl_post_ops_create(&po)) == dnnl_success &&
        (s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f)) ==
            dnnl_success) {
        s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (po != NULL) {
        dnnl_post_ops_destroy(po);
    }
    if (s == dnnl_success) {
        s = dnnl_primitive_desc_create(pd, &cd, attr, CPU_DEV(dev)->engine, NULL);
    }
    dnnl_primitive_attr_destroy(attr);
    return cpu_check(s, relu ? "convolution forward with ReLU" : "convolution forward", error);
}

/* CpuPdMake for the convolutions: with `any`, src and dst (the
 * activations, or their gradients) are left to oneDNN. */
gboolean cpu_conv_pd_make(TdmDevice *dev, const void *spec, gboolean any, dnnl_primitive_desc_t *pd,
                          GError **error)
{
    const CpuConvPdSpec *s = spec;
    const CpuConvGeom *g = s->g;
    dnnl_memory_desc_t src = *s->src, dst = *s->dst;
    if (any && (!md_any(s->src, &src, error) || !md_any(s->dst, &dst, error))) {
        return FALSE;
    }
    if (s->kind == CPU_OP_CONV_FWD) {
        return fwd_pd(dev, g, s->alg, &src, s->wei, s->bias, &dst, s->relu, pd, error);
    }
    /* a backward pass is made with its forward as the hint */
    dnnl_primitive_desc_t fpd = NULL;
    if (!fwd_pd(dev, g, s->alg, &src, s->wei, s->bias, &dst, FALSE, &fpd, error)) {
        return FALSE;
    }
    gboolean data = s->kind == CPU_OP_CONV_BWD_DATA;
    dnnl_convolution_desc_t cd;
    gboolean ok = data ? cpu_check(dnnl_dilated_convolution_backward_data_desc_init(
                                       &cd, s->alg, &src, s->wei, &dst, g->strides, g->dilates,
                                       g->pad_l, g->pad_r),
                                   "convolution backward data desc", error)
                       : cpu_check(dnnl_dilated_convolution_backward_weights_desc_init(
                                       &cd, s->alg, &src, s->wei, s->bias, &dst, g->strides,
                                       g->dilates, g->pad_l, g->pad_r),
                                   "convolution backward weights desc", error);
    ok = ok &&
         cpu_pd_create(dev, &cd, fpd, pd,
                       data ? "convolution backward data" : "convolution backward weights", error);
    dnnl_primitive_desc_destroy(fpd);
    return ok;
}

/* The output-gradient layout the stem's backward weights reads: dy's own
 * layout, or for a plain dy the layout the forward would have written. */
gboolean cpu_conv_stem_dy_md(TdmDevice *dev, const CpuConvGeom *g, const TdmTensor *dy,
                             const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                             dnnl_memory_desc_t *md)
{
    if (dy->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)dy->layout;
        return TRUE;
    }
    dnnl_memory_desc_t any;
    dnnl_primitive_desc_t pd = NULL;
    if (!cpu_conv_dst_md(NULL, g->y_shape, &any, NULL) ||
        !fwd_pd(dev, g, cpu_conv_alg(), src, wei, NULL, &any, FALSE, &pd, NULL)) {
        return FALSE;
    }
    *md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_primitive_desc_destroy(pd);
    return TRUE;
}

/* The largest scratchpad a kernel other than oneDNN's direct one may use,
 * in bytes, for a convolution whose input, weights and output (or their
 * gradients) take operand_bytes: TDM_CPU_WORKSPACE_LIMIT MiB when that is
 * set, else 4 x operand_bytes, at least 16 MiB.
 *
 * The scratchpad is shared by every op of the device, so one candidate,
 * even timed once and dropped, sets the process's peak memory; like
 * cuDNN's workspace limit, the cap keeps a kernel out, not the op (the
 * direct kernel is always there). oneDNN's Winograd kernels keep their
 * transformed tiles (2.25 x the activations for F(4x4, 3x3)) and
 * transformed weights (4 x the weights) there. Where that is what they
 * need, they fit in 4 x the operands: on resnet18 at 224 px (batch 32)
 * 51-63 MiB for the 128- to 512-channel layers' forward and backward data
 * (2.5-3.9 x), and they run those passes in half the direct kernels' time
 * (resnet18 224 px on a Zen 5 EPYC: 43 -> 55 img/s, peak RSS +52 MiB).
 * Where they need far more than their operands they stay out: the 256-
 * and 512-channel layers at 64 px (17-120 MiB, 4.9-8.8 x, for a layer of
 * under 1 MiB of activations, where they saved about 4% of a step for
 * 3.5% more memory) and the 512-channel backward weights at 224 px
 * (134 MiB). A fixed 16 MiB, the rule before, kept Winograd off every
 * layer past the first at 224 px. */
size_t cpu_conv_workspace_limit(size_t operand_bytes)
{
    static gsize fixed = 0; /* the variable's bytes plus two; 1: not set */
    if (g_once_init_enter(&fixed)) {
        guint64 mib = 0;
        const char *s = g_getenv("TDM_CPU_WORKSPACE_LIMIT");
        gsize v = 1;
        if (s != NULL && *s != '\0') {
            if (g_ascii_string_to_unsigned(s, 10, 0, 1 << 20, &mib, NULL)) {
                v = (gsize)(mib << 20) + 2;
            } else {
                g_warning("cpu backend: TDM_CPU_WORKSPACE_LIMIT=%s is not a size in MiB "
                          "(0 to 1048576); using the default (4 x a convolution's operands, "
                          "at least 16 MiB)",
                          s);
            }
        }
        g_once_init_leave(&fixed, v); /* g_once_init_leave refuses 0 */
    }
    if (fixed > 1) {
        return (size_t)(fixed - 2);
    }
    return MAX((size_t)16 << 20, 4 * operand_bytes);
}

/* The bytes of a convolution primitive's input, weights and output (or
 * their gradients, whichever it has). */
static size_t pd_operand_bytes(const_dnnl_primitive_desc_t pd)
{
    static const dnnl_query_t q[3][2] = {{dnnl_query_src_md, dnnl_query_diff_src_md},
                                         {dnnl_query_weights_md, dnnl_query_diff_weights_md},
                                         {dnnl_query_dst_md, dnnl_query_diff_dst_md}};
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        size_t most = 0;
        for (int j = 0; j < 2; j++) {
            const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q[i][j], 0);
            if (md != NULL) {
                most = MAX(most, dnnl_memory_desc_get_size(md));
            }
        }
        total += most;
    }
    return total;
}

/* oneDNN's Winograd primitive descriptor for the pass of `direct` (the
 * direct one's spec, the output's layout in it fixed when out_md is not
 * NULL: the output must come out in that layout), or FALSE when oneDNN
 * has none for this shape or its scratchpad is over the limit. */
gboolean cpu_conv_onednn_wino_pd(TdmDevice *dev, const CpuConvPdSpec *direct,
                                 dnnl_query_t out_query, const dnnl_memory_desc_t *out_md,
                                 dnnl_primitive_desc_t *pd)
{
    CpuConvPdSpec spec = *direct;
    spec.alg = dnnl_convolution_winograd;
    const char *impl = NULL;
    if (!onednn_wino_enabled() || !cpu_pd_create_fast(dev, cpu_conv_pd_make, &spec, pd, NULL)) {
        return FALSE;
    }
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        impl == NULL || strstr(impl, "wino") == NULL ||
        dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(*pd, dnnl_query_scratchpad_md,
                                                               0)) >
            cpu_conv_workspace_limit(pd_operand_bytes(*pd)) ||
        (out_md != NULL &&
         !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(*pd, out_query, 0), out_md))) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        return FALSE;
    }
    return TRUE;
}

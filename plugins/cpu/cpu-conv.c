/* plugins/cpu/cpu-conv.c - 2-D convolution on oneDNN: forward (bias fused),
 * backward data and backward weights.
 *
 * Activations stay in whatever layout oneDNN picks (format `any`, blocked
 * nChw16c on AVX-512), except a plain input with very few channels (a
 * network's first layer), which the direct kernels read as it is, sparing a
 * reorder that would pad 1 channel to 16. Weights and their gradients stay
 * plain: they live in the model's arenas, which the optimizer, collectives
 * and checkpoints read directly. So each forward and each backward-data
 * reorders the current plain weights into the primitive's layout (weights
 * change every step; the buffer is kept in the op cache), and backward
 * weights computes into a cached buffer in its own layout, then reorders it
 * into the plain gradient with a sum post-op (dw += ...). Bias gradients are
 * computed by the same primitive and added with a loop.
 *
 * The backend's own loops (cpu-conv-own.h) can run three cases instead:
 * an image input (plain, at most CPU_STEM_MAX_C channels: forward and
 * backward weights, into and from the blocked layout oneDNN would have
 * used), backward weights with input and output gradient both in nChw8c
 * (AVX2 machines), and 3x3 stride-1 convolutions between nChw8c tensors
 * (Winograd F(4x4, 3x3): forward, backward data and backward weights).
 * Which of the valid candidates runs a shape is measured (cpu-tune.c), so
 * every candidate writes the same output layout: oneDNN's primitive
 * descriptor is always made first, and names it.
 *
 * Each op is a setup, run on a cache miss, that finds which candidates are
 * valid, asks cpu-tune.c which to set up (all of them while the shape is
 * being timed, else its choice) and fills the op's fields of the entry
 * (CpuConv*Op in cpu-cache.h: for the own loops their geometry, for oneDNN
 * the primitive and its memory objects), and a run that runs the candidate
 * cpu-tune.c picks, timing it while the shape is timed. Primitive
 * descriptors go through cpu_pd_create_fast, which makes them again with
 * the activation layouts left to oneDNN when it would pick a reference
 * kernel.
 */
#include "config.h"

#include <string.h>

#include <omp.h>

#include "cpu-conv-own.h"
#include "cpu-tune.h"

/* Inputs with at most this many channels are read in plain layout. */
#define CPU_CONV_PLAIN_MAX_C 4

typedef struct {
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    int64_t y_shape[4];
    int groups;
} ConvGeom;

/* The primitive's geometry. tdm_op_conv2d_* have checked the parameters
 * (stride, dilation and groups at least 1) and that x fits the weights,
 * with an output of at least one pixel. */
static void conv_geom(const TdmConv2dParams *p, const int64_t *x, const int64_t *w, ConvGeom *g)
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
static void conv_key_init(CpuKey *k, CpuOpKind kind, const TdmConv2dParams *p)
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
static gboolean conv_src_md(const TdmTensor *x, const int64_t *shape, dnnl_memory_desc_t *md,
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
static gboolean conv_dst_md(const TdmTensor *dy, const int64_t *shape, dnnl_memory_desc_t *md,
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
static gboolean conv_weights_md(const TdmTensor *w, int groups, gboolean any,
                                dnnl_memory_desc_t *md, GError **error)
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
    return cpu_check(dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_f32,
                                                  any ? dnnl_format_tag_any : dnnl_goihw),
                     "weights desc", error);
}

/* TDM_CPU_CONV_ALG=auto lets oneDNN pick Winograd where it judges it
 * faster (experiments only; direct is the default). */
static dnnl_alg_kind_t conv_alg(void)
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

static gboolean stem_enabled(void)
{
    static int enabled = -1;
    return own_enabled("TDM_CPU_STEM", &enabled);
}

static gboolean bwf8_enabled(void)
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
static const void *own_take(CpuEntry *e, const void *geom, size_t geom_size, size_t work_bytes,
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
static gboolean wino_valid(const dnnl_memory_desc_t *inmd, const dnnl_memory_desc_t *outmd,
                           const TdmTensor *w, const TdmConv2dParams *p, CpuWinoPass pass,
                           CpuWinoGeom *wg)
{
    return wino_enabled() && w->layout == NULL && tdm_tensor_is_contiguous(w) &&
           cpu_wino_geom(inmd, outmd, w->shape, p, pass, wg);
}

/* Sets the Winograd loops up in the entry: keeps their geometry and grows
 * the device's scratchpad for their work. */
static gboolean wino_setup(TdmDevice *dev, CpuEntry *e, CpuConvOwn *own, const CpuWinoGeom *wg,
                           GError **error)
{
    own->wino = own_take(e, wg, sizeof *wg, 0, NULL, "out of memory", error);
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
static char *conv_tune_key(const char *pass, const TdmConv2dParams *p, const int64_t *x,
                           const int64_t *w, const TdmTensor *a, const TdmTensor *b,
                           gboolean bias, gboolean relu)
{
    return g_strdup_printf("%s n%lld c%lld h%lld w%lld o%lld k%lldx%lld s%dx%d p%dx%d d%dx%d "
                           "g%d%s%s %s %s t%d",
                           pass, (long long)x[0], (long long)x[1], (long long)x[2],
                           (long long)x[3], (long long)w[0], (long long)w[2], (long long)w[3],
                           (int)p->stride_h, (int)p->stride_w, (int)p->pad_h, (int)p->pad_w,
                           (int)p->dilation_h, (int)p->dilation_w, (int)p->groups,
                           bias ? " bias" : "", relu ? " relu" : "", tune_layout_name(a),
                           tune_layout_name(b), omp_get_max_threads());
}

static gboolean md_any(const dnnl_memory_desc_t *like, dnnl_memory_desc_t *md, GError **error)
{
    return cpu_check(dnnl_memory_desc_init_by_tag(md, like->ndims, like->dims, dnnl_f32,
                                                  dnnl_format_tag_any),
                     "conv desc", error);
}

/* The forward's primitive descriptor; relu: a ReLU post-op
 * (conv2d_relu_forward). */
static gboolean fwd_pd(TdmDevice *dev, const ConvGeom *g, dnnl_alg_kind_t alg,
                       const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                       const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst,
                       gboolean relu, dnnl_primitive_desc_t *pd, GError **error)
{
    dnnl_convolution_desc_t cd;
    if (!cpu_check(dnnl_dilated_convolution_forward_desc_init(
                       &cd, dnnl_forward_training, alg, src, wei, bias, dst,
                       g->strides, g->dilates, g->pad_l, g->pad_r),
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

/* What cpu_pd_create_fast makes a convolution's primitive descriptor from. */
typedef struct {
    CpuOpKind kind; /* the pass: CPU_OP_CONV_FWD, _BWD_DATA or _BWD_FILTER */
    const ConvGeom *g;
    const dnnl_memory_desc_t *src, *wei, *bias, *dst; /* bias NULL: none */
    gboolean relu;  /* forward: a ReLU post-op */
    dnnl_alg_kind_t alg; /* direct (or conv_alg()'s choice), or Winograd */
} ConvPdSpec;

/* CpuPdMake for the convolutions: with `any`, src and dst (the
 * activations, or their gradients) are left to oneDNN. */
static gboolean conv_pd_make(TdmDevice *dev, const void *spec, gboolean any,
                             dnnl_primitive_desc_t *pd, GError **error)
{
    const ConvPdSpec *s = spec;
    const ConvGeom *g = s->g;
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
    gboolean ok =
        data ? cpu_check(dnnl_dilated_convolution_backward_data_desc_init(
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
static gboolean stem_dy_md(TdmDevice *dev, const ConvGeom *g, const TdmTensor *dy,
                           const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                           dnnl_memory_desc_t *md)
{
    if (dy->layout != NULL) {
        *md = *(const dnnl_memory_desc_t *)dy->layout;
        return TRUE;
    }
    dnnl_memory_desc_t any;
    dnnl_primitive_desc_t pd = NULL;
    if (!conv_dst_md(NULL, g->y_shape, &any, NULL) ||
        !fwd_pd(dev, g, conv_alg(), src, wei, NULL, &any, FALSE, &pd, NULL)) {
        return FALSE;
    }
    *md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_primitive_desc_destroy(pd);
    return TRUE;
}

/* oneDNN's Winograd primitive descriptor for the pass of `direct` (the
 * direct one's spec, the output's layout in it fixed when out_md is not
 * NULL: the output must come out in that layout), or FALSE when oneDNN
 * has none for this shape. */
static gboolean onednn_wino_pd(TdmDevice *dev, const ConvPdSpec *direct, dnnl_query_t out_query,
                               const dnnl_memory_desc_t *out_md, dnnl_primitive_desc_t *pd)
{
    ConvPdSpec spec = *direct;
    spec.alg = dnnl_convolution_winograd;
    const char *impl = NULL;
    if (!onednn_wino_enabled() || !cpu_pd_create_fast(dev, conv_pd_make, &spec, pd, NULL)) {
        return FALSE;
    }
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        impl == NULL || strstr(impl, "wino") == NULL ||
        (out_md != NULL &&
         !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(*pd, out_query, 0), out_md))) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        return FALSE;
    }
    return TRUE;
}

/* ---- forward ---- */

/* Sets forward primitive pd up as f: the reorders of x (layout xmd) and
 * of the plain weights into its layouts, its memory objects. */
static gboolean fwd_prim_setup(TdmDevice *dev, CpuEntry *e, CpuConvFwdPrim *f,
                               const_dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *xmd,
                               const dnnl_memory_desc_t *wplain, const dnnl_memory_desc_t *bmd,
                               GError **error)
{
    const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (!cpu_convert_init(dev, e, &f->x_in, xmd, psrc, error) ||
        !cpu_convert_init(dev, e, &f->w_in, wplain, pwei, error) ||
        !cpu_prim_create(dev, e, pd, &f->prim, error)) {
        return FALSE;
    }
    f->src = cpu_entry_mem(dev, e, psrc);
    f->weights = cpu_entry_mem(dev, e, pwei);
    f->bias = bmd != NULL ? cpu_entry_mem(dev, e, bmd) : -1;
    f->dst = cpu_entry_mem(dev, e, pdst);
    return TRUE;
}

/* The forward's entry: Winograd or the stem loops when they take the op,
 * else the primitive with the reorders of x and the weights into its
 * layouts. NULL on failure. */
static CpuEntry *conv_forward_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                    const ConvGeom *g, const TdmConv2dParams *p, TdmTensor *x,
                                    TdmTensor *w, TdmTensor *bias, gboolean relu, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_CONV_FWD, key);
    CpuConvFwdOp *op = &e->conv_fwd;
    dnnl_memory_desc_t src, wei, wplain, bmd, dst, xmd;
    dnnl_primitive_desc_t pd = NULL;
    ConvPdSpec spec = {CPU_OP_CONV_FWD, g, &src, &wei, bias ? &bmd : NULL, &dst, relu, conv_alg()};
    if (!conv_src_md(x, x->shape, &src, error) ||
        !conv_weights_md(w, g->groups, TRUE, &wei, error) ||
        !conv_weights_md(w, g->groups, FALSE, &wplain, error) ||
        (bias != NULL && !cpu_tensor_md(bias, &bmd, error)) ||
        !conv_dst_md(NULL, g->y_shape, &dst, error) || !cpu_tensor_md(x, &xmd, error) ||
        !cpu_pd_create_fast(dev, conv_pd_make, &spec, &pd, error)) {
        return cpu_entry_setup_end(cache, e, NULL, FALSE);
    }
    const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* every candidate writes the layout oneDNN would have written */
    CpuConvOwn *own = &op->own;
    CpuStemGeom sg;
    CpuWinoGeom wg;
    dnnl_primitive_desc_t wpd = NULL;
    ConvPdSpec wspec = spec;
    wspec.dst = pdst;
    guint valid = 0;
    if (onednn_wino_pd(dev, &wspec, dnnl_query_dst_md, pdst, &wpd)) {
        valid |= CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO);
    }
    if (wino_valid(&xmd, pdst, w, p, CPU_WINO_FORWARD, &wg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_WINO);
    }
    if (stem_enabled() && cpu_stem_geom(x, w, p, pdst, &sg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_STEM);
    }
    char *tkey = conv_tune_key("conv_fwd", p, x->shape, w->shape, x, x, bias != NULL, relu);
    const guint want = cpu_tune_plan(tkey, valid, &own->tune);
    g_free(tkey);
    gboolean ok = TRUE;
    if (want & CPU_CONV_BIT(CPU_CONV_WINO)) {
        ok = wino_setup(dev, e, own, &wg, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_STEM))) {
        own->stem = own_take(e, &sg, sizeof sg, cpu_stem_work_bytes(&sg, FALSE), &own->stem_work,
                             "cannot allocate the stem convolution's work buffer", error);
        ok = own->stem != NULL;
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN))) {
        ok = fwd_prim_setup(dev, e, &op->dnnl[0], pd, &xmd, &wplain, bias ? &bmd : NULL, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO))) {
        ok = fwd_prim_setup(dev, e, &op->dnnl[1], wpd, &xmd, &wplain, bias ? &bmd : NULL, error);
    }
    if (wpd != NULL) {
        dnnl_primitive_desc_destroy(wpd);
    }
    if (ok) {
        own->have = want;
        cpu_entry_set_output(dev, e, 0, pdst, TDM_DTYPE_F32);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

static gboolean conv_forward_onednn(TdmDevice *dev, CpuEntry *e, CpuConvFwdPrim *op,
                                    const ConvGeom *g, TdmTensor *x, TdmTensor *w,
                                    TdmTensor *bias, TdmTensor *y, GError **error)
{
    void *xs = cpu_convert_run(dev, e, &op->x_in, tdm_tensor_data(x), error);
    void *ws = xs ? cpu_convert_run(dev, e, &op->w_in, tdm_tensor_data(w), error) : NULL;
    if (ws == NULL || !cpu_entry_ensure_output(e, 0, y, 4, g->y_shape, error)) {
        return FALSE;
    }
    dnnl_exec_arg_t args[6];
    int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, op->src, xs)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, cpu_mem(e, op->weights, ws)};
    if (op->bias >= 0) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, cpu_mem(e, op->bias, tdm_tensor_data(bias))};
    }
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, cpu_mem(e, op->dst, tdm_tensor_data(y))};
    return cpu_run(dev, e, op->prim, n, args, error);
}

gboolean cpu_conv2d_forward(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                            TdmTensor *x, TdmTensor *w, TdmTensor *bias, gboolean relu,
                            TdmTensor *y, GError **error)
{
    ConvGeom g;
    conv_geom(p, x->shape, w->shape, &g);
    CpuKey key;
    conv_key_init(&key, CPU_OP_CONV_FWD, p);
    cpu_key_add_tensors(&key, 3, x, w, bias);
    cpu_key_add(&key, relu);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_CONV_FWD, &key);
    if (e == NULL &&
        (e = conv_forward_setup(dev, cache, &key, &g, p, x, w, bias, relu, error)) == NULL) {
        return FALSE;
    }
    CpuConvOwn *own = &e->conv_fwd.own;
    gboolean ok, timed;
    const CpuConvImpl impl = cpu_tune_pick(own->tune, own->have, &timed);
    CpuTuneClock t0;
    if (timed) {
        cpu_tune_start(&t0);
    }
    switch (impl) {
    case CPU_CONV_WINO:
        ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
        if (ok) {
            cpu_wino_run(own->wino, tdm_tensor_data(x), tdm_tensor_data(w),
                         bias != NULL ? tdm_tensor_data(bias) : NULL, relu, tdm_tensor_data(y),
                         CPU_DEV(dev)->scratch);
        }
        break;
    case CPU_CONV_STEM:
        ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error);
        if (ok) {
            cpu_stem_forward(own->stem, tdm_tensor_data(x), tdm_tensor_data(w),
                             bias != NULL ? tdm_tensor_data(bias) : NULL, relu,
                             tdm_tensor_data(y), own->stem_work);
        }
        break;
    default:
        ok = conv_forward_onednn(dev, e, &e->conv_fwd.dnnl[impl == CPU_CONV_ONEDNN_WINO], &g, x,
                                 w, bias, y, error);
        break;
    }
    if (timed && ok) {
        cpu_tune_record(own->tune, impl, &t0);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* ---- backward data ---- */

/* Sets backward data primitive pd up as b: the reorders of dy (layout
 * dymd) and of the plain weights into its layouts, its memory objects. */
static gboolean bwd_data_prim_setup(TdmDevice *dev, CpuEntry *e, CpuConvBwdDataPrim *b,
                                    const_dnnl_primitive_desc_t pd,
                                    const dnnl_memory_desc_t *dymd,
                                    const dnnl_memory_desc_t *wplain, GError **error)
{
    const dnnl_memory_desc_t *pdsrc = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
    const dnnl_memory_desc_t *pwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *pddst = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    if (!cpu_convert_init(dev, e, &b->dy_in, dymd, pddst, error) ||
        !cpu_convert_init(dev, e, &b->w_in, wplain, pwei, error) ||
        !cpu_prim_create(dev, e, pd, &b->prim, error)) {
        return FALSE;
    }
    b->diff_dst = cpu_entry_mem(dev, e, pddst);
    b->weights = cpu_entry_mem(dev, e, pwei);
    b->diff_src = cpu_entry_mem(dev, e, pdsrc);
    return TRUE;
}

/* The backward data's entry: Winograd when it takes the op, else the
 * primitive with the reorders of dy and the weights into its layouts. */
static CpuEntry *conv_backward_data_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                          const ConvGeom *g, const TdmConv2dParams *p,
                                          TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                          GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_CONV_BWD_DATA, key);
    CpuConvBwdDataOp *op = &e->conv_bwd_data;
    dnnl_memory_desc_t src, wei, wplain, dst, dymd;
    dnnl_primitive_desc_t pd = NULL;
    ConvPdSpec spec = {CPU_OP_CONV_BWD_DATA, g, &src, &wei, NULL, &dst, FALSE, conv_alg()};
    if (!conv_src_md(x_like, x_like->shape, &src, error) ||
        !conv_weights_md(w, g->groups, TRUE, &wei, error) ||
        !conv_weights_md(w, g->groups, FALSE, &wplain, error) ||
        !conv_dst_md(dy, g->y_shape, &dst, error) || !cpu_tensor_md(dy, &dymd, error) ||
        !cpu_pd_create_fast(dev, conv_pd_make, &spec, &pd, error)) {
        return cpu_entry_setup_end(cache, e, NULL, FALSE);
    }
    const dnnl_memory_desc_t *pdsrc = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
    /* every candidate writes the layout oneDNN would have written */
    CpuConvOwn *own = &op->own;
    CpuWinoGeom wg;
    dnnl_primitive_desc_t wpd = NULL;
    ConvPdSpec wspec = spec;
    wspec.src = pdsrc;
    guint valid = wino_valid(&dymd, pdsrc, w, p, CPU_WINO_BACKWARD_DATA, &wg)
                      ? CPU_CONV_BIT(CPU_CONV_WINO)
                      : 0;
    if (onednn_wino_pd(dev, &wspec, dnnl_query_diff_src_md, pdsrc, &wpd)) {
        valid |= CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO);
    }
    char *tkey = conv_tune_key("conv_bwd_data", p, x_like->shape, w->shape, dy, x_like, FALSE,
                               FALSE);
    const guint want = cpu_tune_plan(tkey, valid, &own->tune);
    g_free(tkey);
    gboolean ok = TRUE;
    if (want & CPU_CONV_BIT(CPU_CONV_WINO)) {
        ok = wino_setup(dev, e, own, &wg, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN))) {
        ok = bwd_data_prim_setup(dev, e, &op->dnnl[0], pd, &dymd, &wplain, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO))) {
        ok = bwd_data_prim_setup(dev, e, &op->dnnl[1], wpd, &dymd, &wplain, error);
    }
    if (wpd != NULL) {
        dnnl_primitive_desc_destroy(wpd);
    }
    if (ok) {
        own->have = want;
        cpu_entry_set_output(dev, e, 0, pdsrc, TDM_DTYPE_F32);
    }
    return cpu_entry_setup_end(cache, e, pd, ok);
}

static gboolean conv_backward_data_onednn(TdmDevice *dev, CpuEntry *e, CpuConvBwdDataPrim *op,
                                          TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                          TdmTensor *dx, GError **error)
{
    void *dys = cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error);
    void *ws = dys ? cpu_convert_run(dev, e, &op->w_in, tdm_tensor_data(w), error) : NULL;
    if (ws == NULL || !cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error)) {
        return FALSE;
    }
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_DIFF_DST, cpu_mem(e, op->diff_dst, dys)},
        {DNNL_ARG_WEIGHTS, cpu_mem(e, op->weights, ws)},
        {DNNL_ARG_DIFF_SRC, cpu_mem(e, op->diff_src, tdm_tensor_data(dx))},
    };
    return cpu_run(dev, e, op->prim, 3, args, error);
}

gboolean cpu_conv2d_backward_data(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                  TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                  TdmTensor *dx, GError **error)
{
    ConvGeom g;
    conv_geom(p, x_like->shape, w->shape, &g);
    CpuKey key;
    conv_key_init(&key, CPU_OP_CONV_BWD_DATA, p);
    cpu_key_add_tensors(&key, 3, dy, w, x_like);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_CONV_BWD_DATA, &key);
    if (e == NULL &&
        (e = conv_backward_data_setup(dev, cache, &key, &g, p, dy, w, x_like, error)) == NULL) {
        return FALSE;
    }
    CpuConvOwn *own = &e->conv_bwd_data.own;
    gboolean ok, timed;
    const CpuConvImpl impl = cpu_tune_pick(own->tune, own->have, &timed);
    CpuTuneClock t0;
    if (timed) {
        cpu_tune_start(&t0);
    }
    if (impl == CPU_CONV_WINO) {
        ok = cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error);
        if (ok) {
            cpu_wino_run(own->wino, tdm_tensor_data(dy), tdm_tensor_data(w), NULL, FALSE,
                         tdm_tensor_data(dx), CPU_DEV(dev)->scratch);
        }
    } else {
        ok = conv_backward_data_onednn(dev, e,
                                       &e->conv_bwd_data.dnnl[impl == CPU_CONV_ONEDNN_WINO], dy,
                                       w, x_like, dx, error);
    }
    if (timed && ok) {
        cpu_tune_record(own->tune, impl, &t0);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* ---- backward weights ---- */

/* Sets backward weights primitive pd up as op: the reorders of x and dy
 * (layouts xmd, dymd) into its layouts, the summing reorder into the plain
 * gradient (layout wplain), its buffers and memory objects. */
static gboolean bwd_filter_prim_setup(TdmDevice *dev, CpuEntry *e, CpuConvBwdFilterPrim *op,
                                      const_dnnl_primitive_desc_t pd,
                                      const dnnl_memory_desc_t *wplain,
                                      const dnnl_memory_desc_t *bmd,
                                      const dnnl_memory_desc_t *xmd,
                                      const dnnl_memory_desc_t *dymd, int64_t oc, GError **error)
{
    const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pdwei =
        dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
    const dnnl_memory_desc_t *pddst = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    gboolean ok = cpu_convert_init(dev, e, &op->x_in, xmd, psrc, error) &&
                  cpu_convert_init(dev, e, &op->dy_in, dymd, pddst, error) &&
                  cpu_prim_create(dev, e, pd, &op->prim, error) &&
                  cpu_reorder_prim(dev, e, pdwei, wplain, TRUE, &op->dw_sum, &op->dw_sum_from,
                                   &op->dw_sum_to, error);
    if (ok) {
        op->src = cpu_entry_mem(dev, e, psrc);
        op->diff_dst = cpu_entry_mem(dev, e, pddst);
        op->diff_weights = cpu_entry_mem(dev, e, pdwei);
        op->diff_bias = bmd != NULL ? cpu_entry_mem(dev, e, bmd) : -1;
        op->dw_buf = cpu_entry_buf(e, dnnl_memory_desc_get_size(pdwei));
        op->db_buf = bmd != NULL ? cpu_entry_buf(e, sizeof(float) * (size_t)oc) : NULL;
        ok = op->dw_buf != NULL && (bmd == NULL || op->db_buf != NULL);
    }
    return ok;
}

/* The backward weights' entry: the stem, Winograd or the nChw8c loops when
 * one of them takes the op (in that order), else the primitive. */
static CpuEntry *conv_backward_filter_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                            const ConvGeom *g, const TdmConv2dParams *p,
                                            TdmTensor *x, TdmTensor *dy, TdmTensor *dw,
                                            TdmTensor *db, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_CONV_BWD_FILTER, key);
    CpuConvBwdFilterOp *op = &e->conv_bwd_filter;
    dnnl_memory_desc_t src, wei, wplain, bmd, dst, xmd, dymd;
    if (!conv_src_md(x, x->shape, &src, error) ||
        !conv_weights_md(dw, g->groups, TRUE, &wei, error) ||
        !conv_weights_md(dw, g->groups, FALSE, &wplain, error) ||
        (db != NULL && !cpu_tensor_md(db, &bmd, error)) ||
        !conv_dst_md(dy, g->y_shape, &dst, error) || !cpu_tensor_md(x, &xmd, error) ||
        !cpu_tensor_md(dy, &dymd, error)) {
        return cpu_entry_setup_end(cache, e, NULL, FALSE);
    }
    /* the stem reads dy in its blocked layout; Winograd and the bwf8 loops
     * read the nChw8c tensors as they are */
    CpuConvOwn *own = &op->own;
    CpuStemGeom sg;
    CpuBwf8Geom bg;
    CpuWinoGeom wg;
    dnnl_memory_desc_t stem_dy;
    ConvPdSpec spec = {CPU_OP_CONV_BWD_FILTER, g, &src, &wei, db ? &bmd : NULL, &dst, FALSE,
                       conv_alg()};
    dnnl_primitive_desc_t pd = NULL, wpd = NULL;
    guint valid = onednn_wino_pd(dev, &spec, dnnl_query_undef, NULL, &wpd)
                      ? CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO)
                      : 0;
    if (stem_enabled() && stem_dy_md(dev, g, dy, &src, &wei, &stem_dy) &&
        cpu_stem_geom(x, dw, p, &stem_dy, &sg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_STEM);
    }
    if (wino_valid(&xmd, &dymd, dw, p, CPU_WINO_BACKWARD_WEIGHTS, &wg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_WINO);
    }
    if (bwf8_enabled() && cpu_bwf8_geom(&xmd, &dymd, dw->shape, p, &bg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_BWF8);
    }
    char *tkey = conv_tune_key("conv_bwd_filter", p, x->shape, dw->shape, x, dy, db != NULL,
                               FALSE);
    const guint want = cpu_tune_plan(tkey, valid, &own->tune);
    g_free(tkey);
    gboolean ok = TRUE;
    if (want & CPU_CONV_BIT(CPU_CONV_STEM)) {
        own->stem = own_take(e, &sg, sizeof sg, cpu_stem_work_bytes(&sg, TRUE), &own->stem_work,
                             "cannot allocate the stem convolution's work buffer", error);
        ok = own->stem != NULL &&
             cpu_convert_init(dev, e, &op->stem_dy_in, &dymd, &stem_dy, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_WINO))) {
        ok = wino_setup(dev, e, own, &wg, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_BWF8))) {
        own->bwf8 = own_take(e, &bg, sizeof bg, cpu_bwf8_work_bytes(&bg), &own->bwf8_work,
                             "cannot allocate the backward-weights work buffer", error);
        ok = own->bwf8 != NULL;
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN))) {
        ok = cpu_pd_create_fast(dev, conv_pd_make, &spec, &pd, error) &&
             bwd_filter_prim_setup(dev, e, &op->dnnl[0], pd, &wplain, db ? &bmd : NULL, &xmd,
                                   &dymd, dw->shape[0], error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO))) {
        ok = bwd_filter_prim_setup(dev, e, &op->dnnl[1], wpd, &wplain, db ? &bmd : NULL, &xmd,
                                   &dymd, dw->shape[0], error);
    }
    if (wpd != NULL) {
        dnnl_primitive_desc_destroy(wpd);
    }
    own->have = want;
    return cpu_entry_setup_end(cache, e, pd, ok);
}

/* The primitive into dw_buf and db_buf, then dw += dw_buf (the summing
 * reorder) and db += db_buf. */
static gboolean conv_backward_filter_onednn(TdmDevice *dev, CpuEntry *e,
                                            CpuConvBwdFilterPrim *op, TdmTensor *x,
                                            TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                            GError **error)
{
    void *xs = cpu_convert_run(dev, e, &op->x_in, tdm_tensor_data(x), error);
    void *dys = xs ? cpu_convert_run(dev, e, &op->dy_in, tdm_tensor_data(dy), error) : NULL;
    if (dys == NULL) {
        return FALSE;
    }
    dnnl_exec_arg_t args[6];
    int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, cpu_mem(e, op->src, xs)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, cpu_mem(e, op->diff_dst, dys)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, cpu_mem(e, op->diff_weights, op->dw_buf)};
    if (op->diff_bias >= 0) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, cpu_mem(e, op->diff_bias, op->db_buf)};
    }
    if (!cpu_run(dev, e, op->prim, n, args, error)) {
        return FALSE;
    }
    dnnl_exec_arg_t sum_args[3] = {
        {DNNL_ARG_FROM, cpu_mem(e, op->dw_sum_from, op->dw_buf)},
        {DNNL_ARG_TO, cpu_mem(e, op->dw_sum_to, tdm_tensor_data(dw))},
    };
    if (!cpu_run(dev, e, op->dw_sum, 2, sum_args, error)) {
        return FALSE;
    }
    if (db != NULL) {
        cpu_accumulate(tdm_tensor_data(db), op->db_buf, db->shape[0]);
    }
    return TRUE;
}

gboolean cpu_conv2d_backward_filter(TdmDevice *dev, TdmOpCache **cache, const TdmConv2dParams *p,
                                    TdmTensor *x, TdmTensor *dy, TdmTensor *dw, TdmTensor *db,
                                    GError **error)
{
    ConvGeom g;
    conv_geom(p, x->shape, dw->shape, &g);
    CpuKey key;
    conv_key_init(&key, CPU_OP_CONV_BWD_FILTER, p);
    cpu_key_add_tensors(&key, 4, x, dy, dw, db);
    CpuEntry *e = cpu_cache_find(cache, CPU_OP_CONV_BWD_FILTER, &key);
    if (e == NULL &&
        (e = conv_backward_filter_setup(dev, cache, &key, &g, p, x, dy, dw, db, error)) == NULL) {
        return FALSE;
    }
    CpuConvBwdFilterOp *op = &e->conv_bwd_filter;
    CpuConvOwn *own = &op->own;
    float *dbp = db != NULL ? tdm_tensor_data(db) : NULL;
    gboolean ok = TRUE, timed;
    const CpuConvImpl impl = cpu_tune_pick(own->tune, own->have, &timed);
    CpuTuneClock t0;
    if (timed) {
        cpu_tune_start(&t0);
    }
    switch (impl) {
    case CPU_CONV_WINO:
        cpu_wino_backward_filter(own->wino, tdm_tensor_data(x), tdm_tensor_data(dy),
                                 tdm_tensor_data(dw), dbp, CPU_DEV(dev)->scratch);
        break;
    case CPU_CONV_BWF8:
        cpu_bwf8_run(own->bwf8, tdm_tensor_data(x), tdm_tensor_data(dy), tdm_tensor_data(dw),
                     dbp, own->bwf8_work);
        break;
    case CPU_CONV_STEM: {
        void *dys = cpu_convert_run(dev, e, &op->stem_dy_in, tdm_tensor_data(dy), error);
        if (dys != NULL) {
            cpu_stem_backward_filter(own->stem, tdm_tensor_data(x), dys, tdm_tensor_data(dw),
                                     dbp, own->stem_work);
        }
        ok = dys != NULL;
        break;
    }
    default:
        ok = conv_backward_filter_onednn(dev, e, &op->dnnl[impl == CPU_CONV_ONEDNN_WINO], x, dy,
                                         dw, db, error);
        break;
    }
    if (timed && ok) {
        cpu_tune_record(own->tune, impl, &t0);
    }
    cpu_entry_release(cache, e);
    return ok;
}

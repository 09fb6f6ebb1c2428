/* SPDX-License-Identifier: MIT */
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
 * (Winograd F(4x4, 3x3): forward, backward data and backward weights),
 * and any layout as sgemms over pixel-major copies (cpu-conv-gemm.c:
 * every pass, for few pixels and many channels); and on AVX-512 oneDNN has
 * Winograd kernels of its own for 3x3 stride-1 convolutions. Which of the
 * valid candidates runs a shape is measured (cpu-tune.c), so every
 * candidate writes the same output layout: oneDNN's direct primitive
 * descriptor is always made first, and names it. The descs and primitive
 * descriptors are made in cpu-conv-desc.c.
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

#include <omp.h>
#include <string.h>

#include "cpu-conv-desc.h"
#include "cpu-conv-own.h"
#include "cpu-tune.h"

/* The bytes of the input, weights and output of geometry gg. */
static size_t gemm_operand_bytes(const CpuGemmGeom *gg)
{
    return sizeof(float) *
           (size_t)(gg->n * gg->c * gg->h * gg->w + gg->o * gg->c * gg->kh * gg->kw +
                    gg->n * gg->o * gg->oh * gg->ow);
}

/* Whether an sgemm candidate of geometry gg (cpu-conv-gemm.c) with weights
 * or weight gradient w may be timed, given `work`, the bytes of its work
 * space: plain contiguous w, the work space within the limit, and, unless
 * the tuner is forced to it, no larger than w times the threads (the
 * per-thread weight-gradient copies oneDNN's kernel keeps). The sgemms are
 * meant for few pixels and many channels (resnet's last stages at small
 * images); elsewhere timing them would only grow the scratchpad (lenet:
 * 54 -> 65 MiB) for a kernel that loses. */
static gboolean gemm_fits(const CpuGemmGeom *gg, size_t work, const TdmTensor *w)
{
    return w->layout == NULL && tdm_tensor_is_contiguous(w) &&
           work <= cpu_conv_workspace_limit(gemm_operand_bytes(gg)) &&
           (work <= tdm_tensor_nbytes(w) * (size_t)omp_get_max_threads() ||
            cpu_tune_forced(CPU_CONV_GEMM));
}

/* Whether the pixel-row sgemms are a candidate for weights w between
 * layouts xmd (the convolution's input) and ymd (its output); fills gg. */
static gboolean gemm_rows_valid(const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *ymd,
                                const TdmTensor *w, const TdmConv2dParams *p, CpuGemmGeom *gg)
{
    return cpu_gemm_bwf_geom(xmd, ymd, w->shape, p, gg) &&
           gemm_fits(gg, cpu_gemm_rows_work_bytes(gg), w);
}

/* Sets the pixel-row sgemms up for geometry gg: their geometry, their
 * work space, and room in the device's transient weights buffer for the
 * weights tap-major. */
static gboolean gemm_rows_setup(TdmDevice *dev, CpuEntry *e, CpuConvOwn *own, const CpuGemmGeom *gg,
                                const TdmTensor *w, GError **error)
{
    own->gemm = cpu_conv_own_take(e, gg, sizeof *gg, 0, NULL, "out of memory", error);
    return own->gemm != NULL && cpu_scratch_reserve(dev, cpu_gemm_rows_work_bytes(gg), error) &&
           cpu_transient_reserve(dev, CPU_TRANSIENT_WEIGHTS, tdm_tensor_nbytes(w), error);
}

/* ok, or FALSE with an error naming the pass when sgemm refused */
static gboolean gemm_ran(gboolean ok, const char *pass, const TdmTensor *w, GError **error)
{
    if (!ok) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "cpu conv2d: sgemm refused the %s of a [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "] filter",
                    pass, w->shape[0], w->shape[1], w->shape[2], w->shape[3]);
    }
    return ok;
}

/* ---- forward ---- */

/* Sets forward primitive pd up as f: the reorders of x (layout xmd) and
 * of the plain weights into its layouts, its memory objects. */
static gboolean fwd_prim_setup(TdmDevice *dev, CpuEntry *e, CpuConvFwdPrim *f,
                               const_dnnl_primitive_desc_t pd,
                               const dnnl_memory_desc_t *xmd, const dnnl_memory_desc_t *wplain,
                               const dnnl_memory_desc_t *bmd, GError **error)
{
    const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (!cpu_convert_init_transient(dev, e, &f->x_in, xmd, psrc, CPU_TRANSIENT_SRC, error) ||
        !cpu_convert_init_transient(dev, e, &f->w_in, wplain, pwei, CPU_TRANSIENT_WEIGHTS,
                                    error) ||
        !cpu_prim_create(dev, e, pd, &f->prim, error)) {
        return FALSE;
    }
    f->src = cpu_entry_mem(dev, e, psrc);
    f->weights = cpu_entry_mem(dev, e, pwei);
    f->bias = bmd != NULL ? cpu_entry_mem(dev, e, bmd) : -1;
    f->dst = cpu_entry_mem(dev, e, pdst);
    return TRUE;
}

/* The forward's entry: the candidates cpu-tune.c asks for among the
 * valid ones (oneDNN's direct primitive, oneDNN's Winograd one, the own
 * Winograd or stem loops), each primitive with the reorders of x and the
 * weights into its layouts. NULL on failure. */
static CpuEntry *conv_forward_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                    const CpuConvGeom *g, const TdmConv2dParams *p, TdmTensor *x,
                                    TdmTensor *w, TdmTensor *bias, gboolean relu, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_CONV_FWD, key);
    CpuConvFwdOp *op = &e->conv_fwd;
    dnnl_memory_desc_t src, wei, wplain, bmd, dst, xmd;
    dnnl_primitive_desc_t pd = NULL;
    CpuConvPdSpec spec = {CPU_OP_CONV_FWD,    g,    &src, &wei,
                          bias ? &bmd : NULL, &dst, relu, cpu_conv_alg()};
    if (!cpu_conv_src_md(x, x->shape, &src, error) ||
        !cpu_conv_weights_md(w, g->groups, TRUE, &wei, error) ||
        !cpu_conv_weights_md(w, g->groups, FALSE, &wplain, error) ||
        (bias != NULL && !cpu_tensor_md(bias, &bmd, error)) ||
        !cpu_conv_dst_md(NULL, g->y_shape, &dst, error) || !cpu_tensor_md(x, &xmd, error) ||
        !cpu_pd_create_fast(dev, cpu_conv_pd_make, &spec, &pd, error)) {
        return cpu_entry_setup_end(cache, e, NULL, FALSE);
    }
    const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    /* every candidate writes the layout oneDNN would have written */
    CpuConvOwn *own = &op->own;
    CpuStemGeom sg;
    CpuWinoGeom wg;
    dnnl_primitive_desc_t wpd = NULL;
    CpuConvPdSpec wspec = spec;
    wspec.dst = pdst;
    guint valid = 0;
    if (cpu_conv_onednn_wino_pd(dev, &wspec, dnnl_query_dst_md, pdst, &wpd)) {
        valid |= CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO);
    }
    if (cpu_conv_wino_valid(&xmd, pdst, w, p, CPU_WINO_FORWARD, &wg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_WINO);
    }
    if (cpu_conv_stem_enabled() && cpu_stem_geom(x, w, p, pdst, &sg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_STEM);
    }
    CpuGemmGeom gg;
    if (gemm_rows_valid(&xmd, pdst, w, p, &gg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_GEMM);
    }
    char *tkey = cpu_conv_tune_key("conv_fwd", p, x->shape, w->shape, x, x, bias != NULL, relu);
    const guint want = cpu_tune_plan(tkey, valid, &own->tune);
    g_free(tkey);
    gboolean ok = TRUE;
    if (want & CPU_CONV_BIT(CPU_CONV_WINO)) {
        ok = cpu_conv_wino_setup(dev, e, own, &wg, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_STEM))) {
        own->stem =
            cpu_conv_own_take(e, &sg, sizeof sg, cpu_stem_work_bytes(&sg, FALSE), &own->stem_work,
                              "cannot allocate the stem convolution's work buffer", error);
        ok = own->stem != NULL;
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_GEMM))) {
        ok = gemm_rows_setup(dev, e, own, &gg, w, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO))) {
        ok = fwd_prim_setup(dev, e, &op->dnnl[1], wpd, &xmd, &wplain, bias ? &bmd : NULL, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN))) {
        ok = fwd_prim_setup(dev, e, &op->dnnl[0], pd, &xmd, &wplain, bias ? &bmd : NULL, error);
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
                                    const CpuConvGeom *g, TdmTensor *x, TdmTensor *w,
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
    CpuConvGeom g;
    cpu_conv_geom(p, x->shape, w->shape, &g);
    CpuKey key;
    cpu_conv_key_init(&key, CPU_OP_CONV_FWD, p);
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
                             bias != NULL ? tdm_tensor_data(bias) : NULL, relu, tdm_tensor_data(y),
                             own->stem_work);
        }
        break;
    case CPU_CONV_GEMM: {
        ok = cpu_entry_ensure_output(e, 0, y, 4, g.y_shape, error) &&
             gemm_ran(cpu_gemm_fwd_run(own->gemm, tdm_tensor_data(x), tdm_tensor_data(w),
                                       cpu_transient(dev, CPU_TRANSIENT_WEIGHTS),
                                       bias != NULL ? tdm_tensor_data(bias) : NULL, relu,
                                       tdm_tensor_data(y), CPU_DEV(dev)->scratch),
                      "forward", w, error);
        break;
    }
    default:
        ok = conv_forward_onednn(dev, e, &e->conv_fwd.dnnl[impl == CPU_CONV_ONEDNN_WINO], &g, x, w,
                                 bias, y, error);
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
    if (!cpu_convert_init_transient(dev, e, &b->dy_in, dymd, pddst, CPU_TRANSIENT_DIFF_DST,
                                    error) ||
        !cpu_convert_init_transient(dev, e, &b->w_in, wplain, pwei, CPU_TRANSIENT_WEIGHTS,
                                    error) ||
        !cpu_prim_create(dev, e, pd, &b->prim, error)) {
        return FALSE;
    }
    b->diff_dst = cpu_entry_mem(dev, e, pddst);
    b->weights = cpu_entry_mem(dev, e, pwei);
    b->diff_src = cpu_entry_mem(dev, e, pdsrc);
    return TRUE;
}

/* The backward data's entry: the candidates cpu-tune.c asks for among the
 * valid ones (oneDNN's direct and Winograd primitives, the own Winograd
 * loops), each primitive with the reorders of dy and the weights into its
 * layouts. */
static CpuEntry *conv_backward_data_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                          const CpuConvGeom *g, const TdmConv2dParams *p,
                                          TdmTensor *dy, TdmTensor *w, const TdmTensor *x_like,
                                          GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_CONV_BWD_DATA, key);
    CpuConvBwdDataOp *op = &e->conv_bwd_data;
    dnnl_memory_desc_t src, wei, wplain, dst, dymd;
    dnnl_primitive_desc_t pd = NULL;
    CpuConvPdSpec spec = {CPU_OP_CONV_BWD_DATA, g, &src, &wei, NULL, &dst, FALSE, cpu_conv_alg()};
    if (!cpu_conv_src_md(x_like, x_like->shape, &src, error) ||
        !cpu_conv_weights_md(w, g->groups, TRUE, &wei, error) ||
        !cpu_conv_weights_md(w, g->groups, FALSE, &wplain, error) ||
        !cpu_conv_dst_md(dy, g->y_shape, &dst, error) || !cpu_tensor_md(dy, &dymd, error) ||
        !cpu_pd_create_fast(dev, cpu_conv_pd_make, &spec, &pd, error)) {
        return cpu_entry_setup_end(cache, e, NULL, FALSE);
    }
    const dnnl_memory_desc_t *pdsrc = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
    /* every candidate writes the layout oneDNN would have written */
    CpuConvOwn *own = &op->own;
    CpuWinoGeom wg;
    dnnl_primitive_desc_t wpd = NULL;
    CpuConvPdSpec wspec = spec;
    wspec.src = pdsrc;
    guint valid = cpu_conv_wino_valid(&dymd, pdsrc, w, p, CPU_WINO_BACKWARD_DATA, &wg)
                      ? CPU_CONV_BIT(CPU_CONV_WINO)
                      : 0;
    if (cpu_conv_onednn_wino_pd(dev, &wspec, dnnl_query_diff_src_md, pdsrc, &wpd)) {
        valid |= CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO);
    }
    CpuGemmGeom gg;
    if (gemm_rows_valid(pdsrc, &dymd, w, p, &gg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_GEMM);
    }
    char *tkey =
        cpu_conv_tune_key("conv_bwd_data", p, x_like->shape, w->shape, dy, x_like, FALSE, FALSE);
    const guint want = cpu_tune_plan(tkey, valid, &own->tune);
    g_free(tkey);
    gboolean ok = TRUE;
    if (want & CPU_CONV_BIT(CPU_CONV_WINO)) {
        ok = cpu_conv_wino_setup(dev, e, own, &wg, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_GEMM))) {
        ok = gemm_rows_setup(dev, e, own, &gg, w, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO))) {
        ok = bwd_data_prim_setup(dev, e, &op->dnnl[1], wpd, &dymd, &wplain, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN))) {
        ok = bwd_data_prim_setup(dev, e, &op->dnnl[0], pd, &dymd, &wplain, error);
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
    CpuConvGeom g;
    cpu_conv_geom(p, x_like->shape, w->shape, &g);
    CpuKey key;
    cpu_conv_key_init(&key, CPU_OP_CONV_BWD_DATA, p);
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
    } else if (impl == CPU_CONV_GEMM) {
        ok = cpu_entry_ensure_output(e, 0, dx, 4, x_like->shape, error) &&
             gemm_ran(cpu_gemm_bwd_data_run(own->gemm, tdm_tensor_data(dy), tdm_tensor_data(w),
                                            cpu_transient(dev, CPU_TRANSIENT_WEIGHTS),
                                            tdm_tensor_data(dx), CPU_DEV(dev)->scratch),
                      "backward data", w, error);
    } else {
        ok = conv_backward_data_onednn(dev, e, &e->conv_bwd_data.dnnl[impl == CPU_CONV_ONEDNN_WINO],
                                       dy, w, x_like, dx, error);
    }
    if (timed && ok) {
        cpu_tune_record(own->tune, impl, &t0);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* ---- backward weights ---- */

/* ---- the weight gradient's summing reorder, own loop for 1x1 filters ----
 *
 * oneDNN's backward weights on AVX-512 writes its gradient as ABcd16b16a:
 * [O/16][I/16][kh][kw][16 i][16 o]. Adding that into the plain [O][I][kh]
 * [kw] gradient is oneDNN's reorder with a sum post-op, which for 1x1
 * filters with fewer outputs than inputs is slow: on a Zen 5 EPYC (2
 * threads, standalone) a 256x1024 filter took 0.38 ms and a 512x2048 one
 * 1.24, against 0.039 ms for 1024x256. For 1x1 filters each 16 x 16 tile
 * is transposed in registers here and its lines (16 i of one o) added to
 * the gradient's rows: 0.033, 0.135 and 0.020 ms, the same sums (a + b in
 * the same order, so the same bits). With 3x3 filters oneDNN's reorder
 * is the faster (0.13 against 0.25 ms for 256x256x3x3 with the taps
 * interleaved by a second transpose), so they keep it. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_DW_SUM_OWN 1
/* c[j] lane i = r[i] lane j */
static inline __attribute__((always_inline, target("avx512f"))) void
transpose_16x16(const __m512 r[16], __m512 c[16])
{
    __m512 a[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* u[g + j], 128-bit lane k: column 4 k + j of rows g .. g + 3 */
    for (int g = 0; g < 16; g += 4) {
        __m512d a0 = _mm512_castps_pd(a[g]), a1 = _mm512_castps_pd(a[g + 1]);
        __m512d a2 = _mm512_castps_pd(a[g + 2]), a3 = _mm512_castps_pd(a[g + 3]);
        u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int j = 0; j < 4; j++) {
        __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
        __m512 h = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        __m512 h2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
        c[j] = _mm512_shuffle_f32x4(v, v2, 0x88);
        c[4 + j] = _mm512_shuffle_f32x4(h, h2, 0x88);
        c[8 + j] = _mm512_shuffle_f32x4(v, v2, 0xdd);
        c[12 + j] = _mm512_shuffle_f32x4(h, h2, 0xdd);
    }
}

/* dw [O][I] += src, ABcd16b16a of a 1x1 filter; O and I multiples of 16. */
static __attribute__((target("avx512f"), noinline)) void
cpu_dw_sum_blocked_1x1(const float *src, int64_t O, int64_t I, float *dw)
{
    const int64_t ib_n = I / 16, tiles = O / 16 * ib_n;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < tiles; p++) {
        const int64_t o0 = p / ib_n * 16, i0 = p % ib_n * 16;
        const float *tile = src + p * 256; /* [16 i][16 o] */
        __m512 r[16], c[16];
        for (int i = 0; i < 16; i++) {
            r[i] = _mm512_loadu_ps(tile + i * 16);
        }
        transpose_16x16(r, c); /* c[o]: its 16 i */
        for (int o = 0; o < 16; o++) {
            float *d = dw + (o0 + o) * I + i0;
            _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), c[o]));
        }
    }
}
#endif

/* Whether the own loop adds the primitive's weight gradient (layout pdwei)
 * into the plain one (layout wplain): a 1x1 filter, ABcd16b16a, and a
 * machine that runs it. */
static gboolean dw_sum_own(const dnnl_memory_desc_t *pdwei, const dnnl_memory_desc_t *wplain)
{
#ifdef CPU_DW_SUM_OWN
    const dnnl_dim_t *d = wplain->dims;
    if (wplain->ndims != 4 || d[0] % 16 != 0 || d[1] % 16 != 0 || d[2] != 1 || d[3] != 1 ||
        !__builtin_cpu_supports("avx512f")) {
        return FALSE;
    }
    dnnl_memory_desc_t plain, blocked;
    return dnnl_memory_desc_init_by_tag(&plain, 4, d, dnnl_f32, dnnl_abcd) == dnnl_success &&
           dnnl_memory_desc_equal(&plain, wplain) &&
           dnnl_memory_desc_init_by_tag(&blocked, 4, d, dnnl_f32, dnnl_ABcd16b16a) ==
               dnnl_success &&
           dnnl_memory_desc_equal(&blocked, pdwei);
#else
    (void)pdwei;
    (void)wplain;
    return FALSE;
#endif
}

/* Sets backward weights primitive pd up as op: the reorders of x and dy
 * (layouts xmd, dymd) into its layouts, the summing reorder into the plain
 * gradient (layout wplain), its buffers and memory objects. */
static gboolean bwd_filter_prim_setup(TdmDevice *dev, CpuEntry *e, CpuConvBwdFilterPrim *op,
                                      const CpuConvBwdFilterPrim *spare,
                                      const_dnnl_primitive_desc_t pd,
                                      const dnnl_memory_desc_t *wplain,
                                      const dnnl_memory_desc_t *bmd, const dnnl_memory_desc_t *xmd,
                                      const dnnl_memory_desc_t *dymd, int64_t oc, GError **error)
{
    const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pdwei =
        dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
    const dnnl_memory_desc_t *pddst = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    gboolean ok = cpu_convert_init_transient(dev, e, &op->x_in, xmd, psrc, CPU_TRANSIENT_SRC,
                                             error) &&
                  cpu_convert_init_transient(dev, e, &op->dy_in, dymd, pddst,
                                             CPU_TRANSIENT_DIFF_DST, error) &&
                  cpu_prim_create(dev, e, pd, &op->prim, error);
    /* the summing reorder, unless the own loop does its work */
    op->dw_own = dw_sum_own(pdwei, wplain);
    ok = ok && (op->dw_own || cpu_reorder_prim(dev, e, pdwei, wplain, TRUE, &op->dw_sum,
                                               &op->dw_sum_from, &op->dw_sum_to, error));
    if (ok) {
        op->src = cpu_entry_mem(dev, e, psrc);
        op->diff_dst = cpu_entry_mem(dev, e, pddst);
        op->diff_weights = cpu_entry_mem(dev, e, pdwei);
        op->diff_bias = bmd != NULL ? cpu_entry_mem(dev, e, bmd) : -1;
        /* the bias gradient's buffer of the other oneDNN candidate when it
         * has one: the two never run in the same call */
        op->db_buf = bmd == NULL     ? NULL
                     : spare != NULL ? spare->db_buf
                                     : cpu_entry_buf(e, sizeof(float) * (size_t)oc);
        ok = cpu_transient_reserve(dev, CPU_TRANSIENT_WEIGHTS, dnnl_memory_desc_get_size(pdwei),
                                   error) &&
             (bmd == NULL || op->db_buf != NULL);
    }
    return ok;
}

/* The backward weights' entry: the candidates cpu-tune.c asks for among
 * the valid ones (oneDNN's direct and Winograd primitives, the stem, own
 * Winograd and nChw8c loops, the sgemms per tap). */
static CpuEntry *conv_backward_filter_setup(TdmDevice *dev, TdmOpCache **cache, const CpuKey *key,
                                            const CpuConvGeom *g, const TdmConv2dParams *p,
                                            TdmTensor *x, TdmTensor *dy, TdmTensor *dw,
                                            TdmTensor *db, GError **error)
{
    CpuEntry *e = cpu_entry_new(CPU_OP_CONV_BWD_FILTER, key);
    CpuConvBwdFilterOp *op = &e->conv_bwd_filter;
    dnnl_memory_desc_t src, wei, wplain, bmd, dst, xmd, dymd;
    if (!cpu_conv_src_md(x, x->shape, &src, error) ||
        !cpu_conv_weights_md(dw, g->groups, TRUE, &wei, error) ||
        !cpu_conv_weights_md(dw, g->groups, FALSE, &wplain, error) ||
        (db != NULL && !cpu_tensor_md(db, &bmd, error)) ||
        !cpu_conv_dst_md(dy, g->y_shape, &dst, error) || !cpu_tensor_md(x, &xmd, error) ||
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
    CpuConvPdSpec spec = {CPU_OP_CONV_BWD_FILTER, g,    &src,  &wei,
                          db ? &bmd : NULL,       &dst, FALSE, cpu_conv_alg()};
    dnnl_primitive_desc_t pd = NULL, wpd = NULL;
    guint valid = cpu_conv_onednn_wino_pd(dev, &spec, dnnl_query_undef, NULL, &wpd)
                      ? CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO)
                      : 0;
    if (cpu_conv_stem_enabled() && cpu_conv_stem_dy_md(dev, g, dy, &src, &wei, &stem_dy) &&
        cpu_stem_geom(x, dw, p, &stem_dy, &sg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_STEM);
    }
    if (cpu_conv_wino_valid(&xmd, &dymd, dw, p, CPU_WINO_BACKWARD_WEIGHTS, &wg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_WINO);
    }
    if (cpu_conv_bwf8_enabled() && cpu_bwf8_geom(&xmd, &dymd, dw->shape, p, &bg)) {
        valid |= CPU_CONV_BIT(CPU_CONV_BWF8);
    }
    /* The sgemms per tap (gemm_fits says where) */
    CpuGemmGeom gg;
    if (cpu_gemm_bwf_geom(&xmd, &dymd, dw->shape, p, &gg) &&
        gemm_fits(&gg, cpu_gemm_bwf_work_bytes(&gg), dw)) {
        valid |= CPU_CONV_BIT(CPU_CONV_GEMM);
    }
    char *tkey =
        cpu_conv_tune_key("conv_bwd_filter", p, x->shape, dw->shape, x, dy, db != NULL, FALSE);
    const guint want = cpu_tune_plan(tkey, valid, &own->tune);
    g_free(tkey);
    gboolean ok = TRUE;
    if (want & CPU_CONV_BIT(CPU_CONV_STEM)) {
        own->stem =
            cpu_conv_own_take(e, &sg, sizeof sg, cpu_stem_work_bytes(&sg, TRUE), &own->stem_work,
                              "cannot allocate the stem convolution's work buffer", error);
        ok = own->stem != NULL && cpu_convert_init_transient(dev, e, &op->stem_dy_in, &dymd,
                                                             &stem_dy, CPU_TRANSIENT_DIFF_DST,
                                                             error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_WINO))) {
        ok = cpu_conv_wino_setup(dev, e, own, &wg, error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_BWF8))) {
        own->bwf8 = cpu_conv_own_take(e, &bg, sizeof bg, cpu_bwf8_work_bytes(&bg), &own->bwf8_work,
                                      "cannot allocate the backward-weights work buffer", error);
        ok = own->bwf8 != NULL;
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_GEMM))) {
        own->gemm = cpu_conv_own_take(e, &gg, sizeof gg, 0, NULL, "out of memory", error);
        ok = own->gemm != NULL && cpu_scratch_reserve(dev, cpu_gemm_bwf_work_bytes(&gg), error);
    }
    /* Winograd first (see the forward) */
    const gboolean spare = (want & CPU_CONV_BIT(CPU_CONV_ONEDNN_WINO)) != 0;
    if (ok && spare) {
        ok = bwd_filter_prim_setup(dev, e, &op->dnnl[1], NULL, wpd, &wplain, db ? &bmd : NULL, &xmd,
                                   &dymd, dw->shape[0], error);
    }
    if (ok && (want & CPU_CONV_BIT(CPU_CONV_ONEDNN))) {
        ok = cpu_pd_create_fast(dev, cpu_conv_pd_make, &spec, &pd, error) &&
             bwd_filter_prim_setup(dev, e, &op->dnnl[0], spare ? &op->dnnl[1] : NULL, pd, &wplain,
                                   db ? &bmd : NULL, &xmd, &dymd, dw->shape[0], error);
    }
    if (wpd != NULL) {
        dnnl_primitive_desc_destroy(wpd);
    }
    own->have = want;
    return cpu_entry_setup_end(cache, e, pd, ok);
}

/* The primitive into the transient weights buffer and db_buf, then dw +=
 * that buffer (the summing reorder) and db += db_buf. */
static gboolean conv_backward_filter_onednn(TdmDevice *dev, CpuEntry *e, CpuConvBwdFilterPrim *op,
                                            TdmTensor *x, TdmTensor *dy, TdmTensor *dw,
                                            TdmTensor *db, GError **error)
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
    void *dw_buf = cpu_transient(dev, CPU_TRANSIENT_WEIGHTS);
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, cpu_mem(e, op->diff_weights, dw_buf)};
    if (op->diff_bias >= 0) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, cpu_mem(e, op->diff_bias, op->db_buf)};
    }
    if (!cpu_run(dev, e, op->prim, n, args, error)) {
        return FALSE;
    }
#ifdef CPU_DW_SUM_OWN
    if (op->dw_own) {
        cpu_dw_sum_blocked_1x1(dw_buf, dw->shape[0], dw->shape[1], tdm_tensor_data(dw));
    } else
#endif
    {
        dnnl_exec_arg_t sum_args[3] = {
            {DNNL_ARG_FROM, cpu_mem(e, op->dw_sum_from, dw_buf)},
            {DNNL_ARG_TO, cpu_mem(e, op->dw_sum_to, tdm_tensor_data(dw))},
        };
        if (!cpu_run(dev, e, op->dw_sum, 2, sum_args, error)) {
            return FALSE;
        }
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
    CpuConvGeom g;
    cpu_conv_geom(p, x->shape, dw->shape, &g);
    CpuKey key;
    cpu_conv_key_init(&key, CPU_OP_CONV_BWD_FILTER, p);
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
        cpu_bwf8_run(own->bwf8, tdm_tensor_data(x), tdm_tensor_data(dy), tdm_tensor_data(dw), dbp,
                     own->bwf8_work);
        break;
    case CPU_CONV_GEMM:
        ok = cpu_gemm_bwf_run(own->gemm, tdm_tensor_data(x), tdm_tensor_data(dy),
                              tdm_tensor_data(dw), dbp, CPU_DEV(dev)->scratch);
        if (!ok) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                        "cpu conv2d: sgemm refused the backward weights of %" G_GINT64_FORMAT
                        " output channels", dw->shape[0]);
        }
        break;
    case CPU_CONV_STEM: {
        void *dys = cpu_convert_run(dev, e, &op->stem_dy_in, tdm_tensor_data(dy), error);
        if (dys != NULL) {
            cpu_stem_backward_filter(own->stem, tdm_tensor_data(x), dys, tdm_tensor_data(dw), dbp,
                                     own->stem_work);
        }
        ok = dys != NULL;
        break;
    }
    default:
        ok = conv_backward_filter_onednn(dev, e, &op->dnnl[impl == CPU_CONV_ONEDNN_WINO], x, dy, dw,
                                         db, error);
        break;
    }
    if (timed && ok) {
        cpu_tune_record(own->tune, impl, &t0);
    }
    cpu_entry_release(cache, e);
    return ok;
}

/* SPDX-License-Identifier: MIT */
/* core/grad-pool.c - the pool of input-gradient buffers that a model's
 * layers share during backward (module-private.h).
 *
 * A layer's input gradient is dead once the layer before it has consumed
 * it, so a backward pass needs memory for the gradients live at one time,
 * not one buffer per layer. The pool gets there in two stages:
 *
 * 1. The first pass of a model is recorded, from its training-mode
 *    forward (tdm_model_forward: the outputs lent to the pool) to the end
 *    of its backward (tdm_model_backward; from the backward's start when
 *    the forward ran otherwise): every buffer gets its own storage of
 *    exactly the size it needs, freed when released, and the pool notes
 *    when each was acquired and released and how large it became. The
 *    first step then holds what later steps hold, not more.
 * 2. At the end of that pass the pool plans one region for all of them:
 *    biggest first, each gradient at the lowest offset where it overlaps no
 *    gradient live at the same time (the greedy "by size" arena planning of
 *    inference runtimes), and makes one slice storage per gradient. Later
 *    passes make the same requests in the same order and get the same
 *    slices: the region is close to the largest set of gradients live at
 *    once (resnet18, batch 32, 64 px: 18 MiB, where buffers reused by size
 *    needed 35).
 *
 * Nothing relies on the passes being alike for correctness: a slice is
 * handed out only when no slice over the same bytes is still held, and a
 * request that fits no free slice gets a buffer of its own, pooled and
 * reused by size as before the plan. A slice is its own TdmStorage of its
 * planned size (tdm_storage_new_slice), so an op that needs more than that
 * gets a new storage from tdm_tensor_ensure instead of writing past it.
 * Passes outside tdm_model_backward (a test's tdm_module_backward on the
 * root) are never recorded: they use the pool by size alone.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/resource.h>

#include "internal.h"
#include "modules/module-private.h"
#include "recompute-choice.h"

/* Bounds the pool in case a pattern of sizes keeps growing it. */
#define GRAD_POOL_MAX 64
/* Bounds what one recorded pass may note. */
#define GRAD_TRACE_MAX 4096
/* Slices start on page boundaries, as the device's own allocations. */
#define GRAD_ALIGN 4096

typedef enum {
    POOL_FRESH,     /* no pass through tdm_model_backward yet */
    POOL_RECORDING, /* in the first one */
    POOL_PLANNED,   /* after it (or recording gave up) */
} PoolState;

/* One gradient of the recorded pass: its size and the events (acquire or
 * release, counted from the start of the pass) that begin and end it. */
typedef struct {
    TdmTensor *tensor; /* while live: the slot it was given to */
    TdmStorage *storage; /* while live: the storage it was given */
    size_t size;
    int begin, end; /* end G_MAXINT: never released in the pass */
    size_t offset;  /* planned */
} Lifetime;

typedef struct {
    TdmStorage *storage; /* one reference; free when that is the only one */
    size_t offset;       /* in the region */
} Slice;

typedef struct {
    GPtrArray *storages;   /* own buffers (one reference each), reused by size */
    size_t max_activation; /* largest training-mode module output seen */
    PoolState state;
    GArray *trace; /* Lifetime, while recording */
    int clock;     /* events so far in the recorded pass */
    GArray *slices; /* Slice, in the order of the recorded requests */
    guint next;     /* index of the request the next slice is planned for */
    gboolean in_pass;       /* a training forward began the pass: the backward continues it */
    TdmRecompute recompute; /* which lent outputs are recomputed (containers.c) */
    /* TDM_RECOMPUTE_AUTO (recompute-choice.c): the trial pass lends every
     * candidate and notes what each would save and cost; then the choice. */
    gboolean trial, decided;
    GPtrArray *outputs;    /* TdmTensor * (a reference each): the lent output slots */
    GPtrArray *cand_convs; /* TdmModule *, the candidates of the trial */
    GArray *cand;          /* TdmRecomputeCandidate, one per cand_convs */
    double work;           /* convolution multiply-adds of the trial pass */
} GradPool;

static GradPool *grad_pool(TdmModel *model, gboolean create)
{
    GradPool *gp = model->priv;
    if (gp == NULL && create) {
        gp = g_new0(GradPool, 1);
        gp->storages = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_storage_unref);
        gp->slices = g_array_new(FALSE, FALSE, sizeof(Slice));
        gp->outputs = g_ptr_array_new_with_free_func((GDestroyNotify)tdm_tensor_unref);
        gp->cand_convs = g_ptr_array_new();
        gp->cand = g_array_new(FALSE, FALSE, sizeof(TdmRecomputeCandidate));
        model->priv = gp;
    }
    return gp;
}

static gboolean grad_pool_has(const GradPool *gp, const TdmStorage *s)
{
    for (guint i = 0; i < gp->storages->len; i++) {
        if (g_ptr_array_index(gp->storages, i) == s) {
            return TRUE;
        }
    }
    for (guint i = 0; i < gp->slices->len; i++) {
        if (g_array_index(gp->slices, Slice, i).storage == s) {
            return TRUE;
        }
    }
    return FALSE;
}

static gboolean held(const TdmStorage *s)
{
    return g_atomic_int_get(&s->ref_count) > 1;
}

/* Slice i is free, at least `need` bytes, and no held slice shares a byte
 * with it. */
static gboolean slice_usable(const GradPool *gp, guint i, size_t need)
{
    const Slice *c = &g_array_index(gp->slices, Slice, i);
    if (held(c->storage) || c->storage->nbytes < need) {
        return FALSE;
    }
    for (guint j = 0; j < gp->slices->len; j++) {
        const Slice *o = &g_array_index(gp->slices, Slice, j);
        if (j != i && held(o->storage) && o->offset < c->offset + c->storage->nbytes &&
            c->offset < o->offset + o->storage->nbytes) {
            return FALSE;
        }
    }
    return TRUE;
}

static TdmStorage *take_slice(GradPool *gp, size_t need)
{
    if (gp->next < gp->slices->len && slice_usable(gp, gp->next, need)) {
        return g_array_index(gp->slices, Slice, gp->next++).storage;
    }
    gp->next++;
    /* Off the plan: the smallest slice that is safe to use. */
    TdmStorage *best = NULL;
    for (guint i = 0; i < gp->slices->len; i++) {
        TdmStorage *s = g_array_index(gp->slices, Slice, i).storage;
        if ((best == NULL || s->nbytes < best->nbytes) && slice_usable(gp, i, need)) {
            best = s;
        }
    }
    return best;
}

/* The smallest free own buffer of at least `need` bytes, or NULL. */
static TdmStorage *free_own(GradPool *gp, size_t need)
{
    TdmStorage *best = NULL;
    for (guint i = 0; i < gp->storages->len; i++) {
        TdmStorage *s = g_ptr_array_index(gp->storages, i);
        if (!held(s) && s->nbytes >= need && (best == NULL || s->nbytes < best->nbytes)) {
            best = s;
        }
    }
    return best;
}

static TdmStorage *take_own(GradPool *gp, TdmDevice *dev, size_t need)
{
    TdmStorage *best = free_own(gp, need);
    if (best == NULL && need > 0 && gp->storages->len < GRAD_POOL_MAX) {
        /* A new buffer. Gradients are as large as their activations: one
         * as large as the largest serves any layer. Requests under half
         * the largest get their own size: a network's stages halve or
         * quarter their activations, and rounding a stage's gradients up
         * to the stem's holds more of the large buffers than are ever
         * live at once. */
        size_t size = need * 2 >= gp->max_activation ? MAX(need, gp->max_activation) : need;
        best = tdm_storage_new(dev, size, NULL);
        if (best != NULL) {
            g_ptr_array_add(gp->storages, best);
        }
    }
    return best;
}

static void record_acquire(GradPool *gp, TdmTensor *t, TdmStorage *s, size_t need)
{
    if (gp->trace->len >= GRAD_TRACE_MAX) {
        return;
    }
    Lifetime l = {.tensor = t, .storage = tdm_storage_ref(s), .size = need,
                  .begin = gp->clock++, .end = G_MAXINT};
    g_array_append_val(gp->trace, l);
}

TdmTensor *tdm_module_grad_slot(TdmModule *m, TdmTensor **slot, const TdmTensor *like)
{
    TdmTensor *t = tdm_module_slot(m, slot, TDM_DTYPE_F32);
    if (m->model == NULL) {
        return t;
    }
    GradPool *gp = grad_pool(m->model, TRUE);
    if (t->storage != NULL) {
        /* Its own storage (first use, or grown by the op): pool it, so that
         * releasing it makes it free for the others. */
        if (gp->state != POOL_RECORDING && !held(t->storage) &&
            gp->storages->len < GRAD_POOL_MAX && !grad_pool_has(gp, t->storage)) {
            g_ptr_array_add(gp->storages, tdm_storage_ref(t->storage));
        }
        return t;
    }
    size_t need = like != NULL ? tdm_tensor_nbytes(like) : 0;
    if (t->ndim > 0) {
        need = MAX(need, tdm_tensor_nbytes(t)); /* what the last use needed */
    }
    if (need == 0) {
        return t;
    }
    TdmStorage *s = NULL;
    if (gp->state == POOL_RECORDING) {
        /* Exactly its size, gone when released: the pass's peak is the
         * gradients live at once, the plan's size. The own buffers the
         * first forward's lent outputs took are free by now and stay until
         * the plan is made: one of them serves first, or the recorded pass
         * would hold them and its gradients at once (resnet18 at 224 px:
         * 98 MiB over the steps after it). */
        s = free_own(gp, need);
        s = s != NULL ? tdm_storage_ref(s) : tdm_storage_new(m->device, need, NULL);
        if (s != NULL) {
            record_acquire(gp, t, s, need);
            t->storage = s;
            t->offset = 0;
        }
        return t; /* on failure the op allocates (and reports) itself */
    }
    s = take_slice(gp, need);
    if (s == NULL) {
        s = take_own(gp, m->device, need);
    }
    if (s != NULL) {
        t->storage = tdm_storage_ref(s);
        t->offset = 0;
    }
    return t;
}

/* Ends the recorded lifetimes whose memory nobody uses any more: the
 * owner gave it back, and so did every view of it (a Flatten's gradient
 * is a view of the next layer's; the Sequential gives it back after the
 * layer before has read it, after its owner). Until then the memory is
 * held in the later passes too, so the plan must not lend it out. */
static void end_free_lifetimes(GradPool *gp)
{
    gboolean ended = FALSE;
    for (guint i = 0; i < gp->trace->len; i++) {
        Lifetime *l = &g_array_index(gp->trace, Lifetime, i);
        if (l->tensor != NULL || l->storage == NULL) {
            continue;
        }
        /* the trace's reference, and the pool's own list's for its buffers */
        int base = 1 + (grad_pool_has(gp, l->storage) ? 1 : 0);
        if (g_atomic_int_get(&l->storage->ref_count) <= base) {
            l->end = gp->clock;
            tdm_storage_unref(l->storage);
            l->storage = NULL;
            ended = TRUE;
        }
    }
    if (ended) {
        gp->clock++;
    }
}

void tdm_module_grad_release(TdmModule *m, TdmTensor *g)
{
    if (g == NULL || g->storage == NULL || m->model == NULL) {
        return;
    }
    GradPool *gp = grad_pool(m->model, FALSE);
    if (gp == NULL) {
        return;
    }
    if (gp->state == POOL_RECORDING) {
        for (guint i = 0; i < gp->trace->len; i++) {
            Lifetime *l = &g_array_index(gp->trace, Lifetime, i);
            if ((l->tensor == g || (l->tensor == NULL && l->storage == g->storage)) &&
                l->storage != NULL) {
                /* The gradient, or a view of it that its owner gave back
                 * first. The op may have grown it past the request. */
                if (l->tensor == g) {
                    l->size = MAX(l->size, tdm_tensor_nbytes(g));
                    l->tensor = NULL;
                }
                tdm_storage_unref(g->storage);
                g->storage = NULL;
                g->offset = 0;
                end_free_lifetimes(gp);
                return;
            }
        }
        /* not recorded: one of the pool's own, or none of its */
    }
    if (!grad_pool_has(gp, g->storage)) {
        return;
    }
    tdm_storage_unref(g->storage);
    g->storage = NULL;
    g->offset = 0;
}

TdmTensor *tdm_module_lent_slot(TdmModule *m, TdmTensor **slot, const TdmTensor *like)
{
    TdmTensor *t = tdm_module_grad_slot(m, slot, like);
    if (m->model != NULL) {
        GradPool *gp = grad_pool(m->model, TRUE);
        if (!g_ptr_array_find(gp->outputs, t, NULL)) {
            g_ptr_array_add(gp->outputs, tdm_tensor_ref(t));
        }
    }
    return t;
}

/* A training forward begins: the lent outputs' content from before is
 * dead. Each gives back what it still holds, the pool's memory or a
 * buffer an eval-mode forward gave it, and forgets its shape, so that its
 * next request asks for the size of this pass's output. */
static void release_outputs(GradPool *gp, TdmModel *model)
{
    for (guint i = 0; i < gp->outputs->len; i++) {
        TdmTensor *t = g_ptr_array_index(gp->outputs, i);
        if (t->storage != NULL) {
            tdm_module_grad_release(model->root, t);
        }
        if (t->storage != NULL && !grad_pool_has(gp, t->storage)) {
            tdm_storage_unref(t->storage);
            t->storage = NULL;
            t->offset = 0;
        }
        t->ndim = 0;
    }
}

gboolean tdm_lent_output_begin(TdmLentOutput *l, const TdmModule *m)
{
    l->lent = l->next && m->model != NULL;
    l->next = FALSE;
    l->dropped = FALSE;
    return l->lent;
}

void tdm_lent_output_drop(TdmLentOutput *l, TdmModule *m, TdmTensor *y)
{
    if (!l->lent || y == NULL || y->storage == NULL) {
        return;
    }
    tdm_module_grad_release(m, y);
    l->dropped = y->storage == NULL;
}

void tdm_model_note_activation(TdmModel *model, const TdmTensor *y)
{
    GradPool *gp = grad_pool(model, TRUE);
    size_t n = tdm_tensor_nbytes(y);
    if (n > gp->max_activation) {
        gp->max_activation = n;
    }
}

static size_t align_up(size_t n)
{
    return (n + GRAD_ALIGN - 1) / GRAD_ALIGN * GRAD_ALIGN;
}

static int by_size_desc(gconstpointer a, gconstpointer b)
{
    const Lifetime *x = *(Lifetime *const *)a, *y = *(Lifetime *const *)b;
    return x->size < y->size ? 1 : x->size > y->size ? -1 : x->begin - y->begin;
}

static gboolean lives_overlap(const Lifetime *a, const Lifetime *b)
{
    return a->begin < b->end && b->begin < a->end;
}

/* Offsets for the recorded gradients, biggest first, each at the lowest
 * offset clear of every placed one whose lifetime overlaps; returns the
 * region's size. */
static size_t plan_offsets(GArray *trace)
{
    guint n = trace->len;
    Lifetime **order = g_new(Lifetime *, n);
    for (guint i = 0; i < n; i++) {
        order[i] = &g_array_index(trace, Lifetime, i);
    }
    qsort(order, n, sizeof *order, by_size_desc);
    size_t total = 0;
    for (guint i = 0; i < n; i++) {
        Lifetime *l = order[i];
        size_t size = align_up(l->size), off = 0;
        gboolean moved = TRUE;
        while (moved) { /* first fit among the placed ones it meets */
            moved = FALSE;
            for (guint j = 0; j < i; j++) {
                const Lifetime *p = order[j];
                if (lives_overlap(l, p) && p->offset < off + size &&
                    off < p->offset + align_up(p->size)) {
                    off = p->offset + align_up(p->size);
                    moved = TRUE;
                }
            }
        }
        l->offset = off;
        total = MAX(total, off + size);
    }
    g_free(order);
    return total;
}

static void start_recording(GradPool *gp)
{
    if (gp->state == POOL_FRESH) {
        gp->state = POOL_RECORDING;
        gp->trace = g_array_new(FALSE, FALSE, sizeof(Lifetime));
        gp->clock = 0;
    }
}

/* Drops the recorded pass (NULL-safe): the storages it still holds go
 * with it (their tensors keep their own references). */
static void drop_trace(GradPool *gp)
{
    if (gp->trace == NULL) {
        return;
    }
    for (guint i = 0; i < gp->trace->len; i++) {
        tdm_storage_unref(g_array_index(gp->trace, Lifetime, i).storage);
    }
    g_clear_pointer(&gp->trace, g_array_unref);
}

/* A recording that no tdm_model_backward ends (the backward went through
 * tdm_module_backward, or none ran) plans nothing: the pool hands out
 * buffers by size from now on. */
static void give_up_recording(GradPool *gp)
{
    drop_trace(gp);
    gp->state = POOL_PLANNED;
}

/* The passes to come will not make the requests the plan was made for (a
 * new recompute choice): forget the plan and the recording, and record the
 * next pass. Between passes no slice is held; one that were would stay
 * its holder's. */
static void plan_again(GradPool *gp)
{
    drop_trace(gp);
    for (guint i = 0; i < gp->slices->len; i++) {
        tdm_storage_unref(g_array_index(gp->slices, Slice, i).storage);
    }
    g_array_set_size(gp->slices, 0);
    gp->next = 0;
    gp->state = POOL_FRESH;
}

/* ---- the auto recompute policy ---- */

/* Forgets a choice: the convolutions recompute nothing until the next. */
static void auto_forget(GradPool *gp)
{
    for (guint i = 0; i < gp->cand_convs->len; i++) {
        tdm_conv2d_set_recomputed(g_ptr_array_index(gp->cand_convs, i), FALSE);
    }
    g_ptr_array_set_size(gp->cand_convs, 0);
    g_array_set_size(gp->cand, 0);
    gp->work = 0.0;
    gp->trial = gp->decided = FALSE;
}

/* The memory the trial held at its peak: the device's peak; on a device
 * whose memory is the host's, the process's peak resident set, which
 * holds the device's tensors and everything else the process has
 * (libraries, the loader's buffers), when that is more. 0: unknown. */
static double trial_peak(TdmDevice *dev)
{
    TdmDeviceInfo info;
    double peak = 0.0;
    if (tdm_device_info(dev, &info, NULL) && info.peak_bytes > 0) {
        peak = (double)info.peak_bytes;
    }
    struct rusage ru;
    if (peak > 0.0 && info.host_accessible && getrusage(RUSAGE_SELF, &ru) == 0) {
        peak = MAX(peak, (double)ru.ru_maxrss * 1024.0); /* Linux counts KiB */
    }
    return peak;
}

/* Ends the trial pass: the choice (recompute-choice.c) from what it
 * noted and the memory it held at its peak (every candidate lent) plus the
 * candidates' outputs, which a step keeping them holds at once. Returns
 * TRUE when every candidate was chosen, as in the trial. */
static gboolean auto_decide(GradPool *gp, TdmModel *model)
{
    gp->trial = FALSE;
    gp->decided = TRUE;
    double memory = trial_peak(model->device), kept = 0.0;
    TdmRecomputeCandidate *c = (TdmRecomputeCandidate *)(void *)gp->cand->data;
    guint n = gp->cand->len;
    for (guint i = 0; i < n; i++) {
        kept += c[i].bytes;
    }
    guint chosen = tdm_recompute_choose(c, n, memory > 0.0 ? memory + kept : 0.0, gp->work);
    double saved = 0.0, added = 0.0;
    for (guint i = 0; i < n; i++) {
        tdm_conv2d_set_recomputed(g_ptr_array_index(gp->cand_convs, i), c[i].chosen);
        saved += c[i].chosen ? c[i].bytes : 0.0;
        added += c[i].chosen ? c[i].work : 0.0;
    }
    g_debug("recompute auto: %u of %u convolution outputs (%.1f of %.1f MiB at a peak of %.1f "
            "MiB; %.1f%% more convolution work)",
            chosen, n, saved / 1048576.0, kept / 1048576.0, (memory + kept) / 1048576.0,
            gp->work > 0.0 ? 100.0 * added / gp->work : 0.0);
    return chosen == n;
}

gboolean tdm_model_recomputes(TdmModel *model, TdmModule *conv)
{
    GradPool *gp = model != NULL ? grad_pool(model, FALSE) : NULL;
    if (gp == NULL) {
        return FALSE;
    }
    switch (gp->recompute) {
    case TDM_RECOMPUTE_ALL:
        return TRUE;
    case TDM_RECOMPUTE_POINTWISE:
        return tdm_conv2d_kernel(conv) == 1;
    case TDM_RECOMPUTE_AUTO:
        return gp->trial || tdm_conv2d_recomputed(conv);
    default:
        return FALSE;
    }
}

void tdm_model_note_conv_work(TdmModel *model, TdmModule *conv, const TdmTensor *y, double macs,
                              gboolean lent)
{
    GradPool *gp = grad_pool(model, FALSE);
    if (gp == NULL || !gp->trial) {
        return;
    }
    gp->work += macs;
    if (lent && y != NULL) {
        TdmRecomputeCandidate c = {.bytes = (double)tdm_tensor_nbytes(y), .work = macs};
        g_ptr_array_add(gp->cand_convs, conv);
        g_array_append_val(gp->cand, c);
    }
}

void tdm_model_forward_pass_begin(TdmModel *model)
{
    GradPool *gp = grad_pool(model, TRUE);
    if (gp->state == POOL_RECORDING) {
        give_up_recording(gp);
    }
    if (gp->recompute == TDM_RECOMPUTE_AUTO && gp->trial) {
        auto_decide(gp, model); /* no tdm_model_backward ended the trial */
    } else if (gp->recompute == TDM_RECOMPUTE_AUTO && !gp->decided) {
        auto_forget(gp);
        gp->trial = TRUE;
    }
    release_outputs(gp, model);
    gp->next = 0;
    gp->in_pass = TRUE;
    start_recording(gp);
}

void tdm_model_grad_pass_begin(TdmModel *model)
{
    GradPool *gp = grad_pool(model, TRUE);
    if (!gp->in_pass) {
        gp->next = 0; /* a backward after forwards outside tdm_model_forward */
    }
    gp->in_pass = FALSE;
    start_recording(gp);
}

void tdm_model_grad_pass_end(TdmModel *model, TdmDevice *dev)
{
    GradPool *gp = grad_pool(model, FALSE);
    if (gp != NULL && gp->trial && !auto_decide(gp, model)) {
        plan_again(gp); /* the trial's requests are not the next passes' */
    }
    if (gp == NULL || gp->state != POOL_RECORDING) {
        return;
    }
    gp->state = POOL_PLANNED;
    GArray *trace = gp->trace;
    gp->trace = NULL;
    /* The own buffers made before the plan (the first forward's lent
     * outputs, module-private.h) are not needed any more: forwards take the
     * slices from now on, which are all free then. */
    for (guint i = gp->storages->len; i-- > 0;) {
        if (!held(g_ptr_array_index(gp->storages, i))) {
            g_ptr_array_remove_index_fast(gp->storages, i);
        }
    }
    /* Gradients still held (never released in the pass) keep their own
     * storage; the plan leaves them out. */
    for (guint i = 0; i < trace->len; i++) {
        Lifetime *l = &g_array_index(trace, Lifetime, i);
        if (l->storage != NULL) {
            tdm_storage_unref(l->storage);
            g_array_remove_index(trace, i--);
        }
    }
    size_t total = trace->len > 0 ? plan_offsets(trace) : 0;
    TdmStorage *region = total > 0 ? tdm_storage_new(dev, total, NULL) : NULL;
    g_debug("gradient pool: %u gradients planned into %zu bytes", trace->len, total);
    if (region != NULL) {
        /* In the order of the requests, so that request k gets slice k. */
        for (guint i = 0; i < trace->len; i++) {
            const Lifetime *l = &g_array_index(trace, Lifetime, i);
            Slice s = {tdm_storage_new_slice(region, l->offset, l->size), l->offset};
            g_array_append_val(gp->slices, s);
        }
        tdm_storage_unref(region); /* the slices hold it */
    }
    g_array_unref(trace);
}

void tdm_model_set_recompute(TdmModel *model, TdmRecompute what)
{
    g_return_if_fail(model != NULL);
    g_return_if_fail(what >= TDM_RECOMPUTE_NONE && what <= TDM_RECOMPUTE_AUTO);
    GradPool *gp = grad_pool(model, TRUE);
    if (gp->state == POOL_PLANNED && (what != gp->recompute || what == TDM_RECOMPUTE_AUTO)) {
        plan_again(gp);
    }
    auto_forget(gp);
    gp->recompute = what;
}

TdmRecompute tdm_model_get_recompute(TdmModel *model)
{
    g_return_val_if_fail(model != NULL, TDM_RECOMPUTE_NONE);
    GradPool *gp = grad_pool(model, FALSE);
    return gp != NULL ? gp->recompute : TDM_RECOMPUTE_NONE;
}

void tdm_model_grad_pool_free(TdmModel *model)
{
    GradPool *gp = grad_pool(model, FALSE);
    if (gp == NULL) {
        return;
    }
    g_ptr_array_unref(gp->storages);
    for (guint i = 0; i < gp->slices->len; i++) {
        tdm_storage_unref(g_array_index(gp->slices, Slice, i).storage);
    }
    g_array_unref(gp->slices);
    g_ptr_array_unref(gp->outputs);
    g_ptr_array_unref(gp->cand_convs);
    g_array_unref(gp->cand);
    drop_trace(gp);
    g_free(gp);
    model->priv = NULL;
}

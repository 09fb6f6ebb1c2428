/* SPDX-License-Identifier: MIT */
/* core/comm.c - the collective front end: picks a COLLECTIVE plugin for the
 * job, numbers every call, and turns plugin failures into messages a user can
 * act on.
 *
 * tdm_comm_new() selects the feature (spec, else TDM_COLLECTIVE, else the
 * highest priority plugin whose supports_device accepts the device and whose
 * supports_job accepts the job; supports_job runs on every rank and gives the
 * same answer everywhere, so all ranks pick the same plugin). Every call gets
 * the next sequence number (1, 2, ...) under a lock, so the order in which
 * calls reach the plugin is the order of their numbers. In debug mode
 * (TDM_DEBUG=collectives) each rank posts what it is about to run for that
 * number to the store and compares it with every other rank's before the
 * plugin sees the call: a mismatch names the first rank that differs from
 * rank 0, and a rank that never posts is named once the timeout passes (with
 * its last call, from a per-rank key), instead of a hang. A wait past the
 * timeout names the op, the number, the size and the ranks that never arrived
 * (from the plugin, else from those per-rank keys; both in comm-debug.c).
 * After any failure the communicator refuses further calls: the ranks are
 * no longer in step.
 * A work handle holds a reference to its tensors until tdm_comm_wait, so
 * a plugin whose op runs later on a device stream never finds its buffer
 * freed and reused by a caller that dropped the tensor early (PyTorch's
 * recordStream); plugins need not reference them themselves.
 * A plugin that moves host memory only (TDM_COMM_FLAG_HOST_STAGING) also
 * serves a device whose memory is not host memory: the plugin gets host
 * copies of the tensors and the wait writes the results back
 * (comm-stage.c), so no plugin stages on its own.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "comm-private.h"
#include "internal.h"

const char *tdm_coll_op_name(TdmCollOp op)
{
    static const char *const names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                        "barrier"};
    if ((unsigned)op < G_N_ELEMENTS(names)) {
        return names[op];
    }
    return "?";
}

const char *tdm_reduce_op_name(TdmReduceOp op)
{
    static const char *const names[] = {"sum", "avg", "max", "min"};
    if ((unsigned)op < G_N_ELEMENTS(names)) {
        return names[op];
    }
    return "?";
}

void tdm_comm_options_init(TdmCommOptions *opts)
{
    g_return_if_fail(opts != NULL);
    memset(opts, 0, sizeof(*opts));
    opts->timeout_s = TDM_COMM_DEFAULT_TIMEOUT;
    const char *timeout = g_getenv("TDM_TIMEOUT");
    if (timeout != NULL && timeout[0] != '\0') {
        char *end = NULL;
        errno = 0;
        double v = g_ascii_strtod(timeout, &end);
        if (errno == 0 && end != timeout && *end == '\0' && v > 0) {
            opts->timeout_s = v;
        } else {
            g_warning("TDM_TIMEOUT='%s' is not a positive number of seconds; using %.0f s", timeout,
                      opts->timeout_s);
        }
    }
    opts->debug = tdm_debug_flag("collectives");
}

/* ---- selection ---- */

typedef struct {
    const TdmDevice *device;
    GPtrArray *refused; /* features whose supports_job said no */
} SelectCtx;

/* Whether `klass` serves `dev` through host staging: it moves host memory
 * only, refuses the device, and the device's memory is not host memory. */
static gboolean comm_stages(const TdmCommClass *klass, const TdmDevice *dev)
{
    return dev != NULL && (klass->flags & TDM_COMM_FLAG_HOST_STAGING) != 0 &&
           klass->supports_device != NULL && !klass->supports_device(dev) &&
           !tdm_device_host_accessible(dev);
}

static gboolean comm_feature_accept(TdmFeature *feature, gpointer user_data)
{
    SelectCtx *ctx = user_data;
    const TdmCommClass *klass = tdm_feature_get_class(feature);
    for (guint i = 0; i < ctx->refused->len; i++) {
        if (g_ptr_array_index(ctx->refused, i) == feature) {
            return FALSE;
        }
    }
    return ctx->device == NULL || klass->supports_device == NULL ||
           klass->supports_device(ctx->device) || comm_stages(klass, ctx->device);
}

static gboolean comm_select(CommImpl *impl, const char *spec, GError **error)
{
    TdmComm *comm = &impl->pub;
    SelectCtx ctx = {comm->device, g_ptr_array_new()};
    GString *refusals = g_string_new(NULL);
    gboolean ok = FALSE;
    for (;;) {
        GError *local = NULL;
        TdmFeature *f =
            tdm_registry_select(TDM_FEATURE_COLLECTIVE, spec, comm_feature_accept, &ctx, &local);
        if (f == NULL) {
            if (refusals->len > 0) {
                g_propagate_prefixed_error(error, local, "%s; ", refusals->str);
            } else {
                g_propagate_error(error, local);
            }
            break;
        }
        const TdmCommClass *klass = tdm_feature_get_class(f);
        char *reason = NULL;
        comm->klass = klass;
        comm->feature = f;
        if (klass->supports_job == NULL || klass->supports_job(comm, &reason)) {
            g_free(reason);
            ok = TRUE;
            break;
        }
        g_string_append_printf(refusals, "%s'%s' cannot serve this job: %s",
                               refusals->len > 0 ? "; " : "", tdm_feature_get_name(f),
                               reason != NULL ? reason : "no reason given");
        g_free(reason);
        g_ptr_array_add(ctx.refused, f);
        comm->klass = NULL;
        comm->feature = NULL;
    }
    g_string_free(refusals, TRUE);
    g_ptr_array_unref(ctx.refused);
    return ok;
}

TdmComm *tdm_comm_new(const char *spec, TdmStore *store, const TdmDistEnv *env, TdmDevice *dev,
                      const TdmCommOptions *opts, GError **error)
{
    g_return_val_if_fail(env != NULL, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    static gint comm_counter = 0;

    if (env->world_size < 1 || env->rank < 0 || env->rank >= env->world_size) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "invalid rank %d for a world of size %d", env->rank, env->world_size);
        return NULL;
    }
    if (store == NULL && env->world_size > 1) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "a communicator for %d ranks needs a store (rank %d)", env->world_size,
                    env->rank);
        return NULL;
    }
    if (spec == NULL || spec[0] == '\0') {
        spec = g_getenv("TDM_COLLECTIVE");
    }

    CommImpl *impl = g_new0(CommImpl, 1);
    TdmComm *comm = &impl->pub;
    g_mutex_init(&impl->lock);
    comm->store = store;
    comm->rank = env->rank;
    comm->world = env->world_size;
    comm->local_rank = env->local_rank;
    comm->local_world = env->local_world_size > 0 ? env->local_world_size : 1;
    comm->device = dev;
    if (opts != NULL) {
        comm->opts = *opts;
    } else {
        tdm_comm_options_init(&comm->opts);
    }
    if (!(comm->opts.timeout_s > 0)) {
        comm->opts.timeout_s = TDM_COMM_DEFAULT_TIMEOUT;
    }
    /* Every rank creates its communicators in the same order, so a process
     * counter names the same communicator on every rank; the restart count
     * keeps a restarted job clear of the keys of the attempt before. */
    const char *gen = g_getenv("TDM_RESTART_COUNT");
    if (gen == NULL) {
        gen = g_getenv("TORCHELASTIC_RESTART_COUNT");
    }
    impl->key_prefix = g_strdup_printf("tdm/comm/%s/%d", gen != NULL ? gen : "0",
                                       g_atomic_int_add(&comm_counter, 1));

    if (!comm_select(impl, spec, error)) {
        tdm_comm_free(comm);
        return NULL;
    }
    if (comm_stages(comm->klass, dev)) {
        impl->stage = tdm_comm_stage_new(dev);
    }
    if (comm->klass->init != NULL && !comm->klass->init(comm, error)) {
        g_prefix_error(error, "collective '%s' on rank %d: ", tdm_feature_get_name(comm->feature),
                       comm->rank);
        comm->klass = NULL; /* init failed: no finalize */
        tdm_comm_free(comm);
        return NULL;
    }
    return comm;
}

void tdm_comm_free(TdmComm *comm)
{
    if (comm == NULL) {
        return;
    }
    CommImpl *impl = (CommImpl *)comm;
    if (comm->klass != NULL && comm->klass->finalize != NULL) {
        comm->klass->finalize(comm);
    }
    tdm_comm_stage_free(impl->stage); /* after finalize: no call holds a buffer */
    g_mutex_clear(&impl->lock);
    g_free(impl->key_prefix);
    g_free(impl->broken);
    g_free(impl);
}

gboolean tdm_comm_is_staged(const TdmComm *comm)
{
    g_return_val_if_fail(comm != NULL, FALSE);
    return ((const CommImpl *)comm)->stage != NULL;
}

/* ---- descriptions for messages ---- */

char *comm_work_describe_call(const TdmCommWork *w)
{
    switch (w->op) {
    case TDM_COLL_BARRIER:
        return g_strdup("barrier()");
    case TDM_COLL_BROADCAST:
        return g_strdup_printf("broadcast(%" G_GINT64_FORMAT " x %s, root %d)", w->count,
                               tdm_dtype_name(w->dtype), w->root);
    case TDM_COLL_ALLGATHER:
        return g_strdup_printf("allgather(%" G_GINT64_FORMAT " x %s)", w->count,
                               tdm_dtype_name(w->dtype));
    case TDM_COLL_ALLREDUCE:
    case TDM_COLL_REDUCE_SCATTER:
        return g_strdup_printf("%s(%" G_GINT64_FORMAT " x %s, %s)", tdm_coll_op_name(w->op),
                               w->count, tdm_dtype_name(w->dtype), tdm_reduce_op_name(w->rop));
    }
    return g_strdup("?");
}

/* "allreduce #42 (1048576 x f32)" */
static char *work_describe_short(const TdmCommWork *w)
{
    if (w->op == TDM_COLL_BARRIER) {
        return g_strdup_printf("barrier #%" G_GUINT64_FORMAT, w->seq);
    }
    return g_strdup_printf("%s #%" G_GUINT64_FORMAT " (%" G_GINT64_FORMAT " x %s)",
                           tdm_coll_op_name(w->op), w->seq, w->count, tdm_dtype_name(w->dtype));
}

static char *ranks_string(const int *ranks)
{
    GString *s = g_string_new(NULL);
    for (int i = 0; ranks[i] >= 0; i++) {
        g_string_append_printf(s, "%s%d", i > 0 ? ", " : "", ranks[i]);
    }
    return g_string_free(s, FALSE);
}

/* ---- issue and wait ---- */

static gboolean plugin_has_op(const TdmCommClass *k, TdmCollOp op)
{
    switch (op) {
    case TDM_COLL_ALLREDUCE:
        return k->allreduce != NULL;
    case TDM_COLL_BROADCAST:
        return k->broadcast != NULL;
    case TDM_COLL_ALLGATHER:
        return k->allgather != NULL;
    case TDM_COLL_REDUCE_SCATTER:
        return k->reduce_scatter != NULL;
    case TDM_COLL_BARRIER:
        return k->barrier != NULL;
    }
    return FALSE;
}

/* Reference the caller's tensors in `w` and, when the communicator stages,
 * point *a and *b at host copies for the plugin: inputs read from the
 * device, outputs only shaped; the wait writes back the one the op changes
 * (the tensor itself for allreduce and broadcast, `out` otherwise). */
static gboolean stage_inputs(CommImpl *impl, TdmCommWork *w, TdmTensor **a, TdmTensor **b,
                             GError **error)
{
    w->tensors[0] = *a != NULL ? tdm_tensor_ref(*a) : NULL;
    w->tensors[1] = *b != NULL ? tdm_tensor_ref(*b) : NULL;
    w->back = -1;
    if (impl->stage == NULL || w->op == TDM_COLL_BARRIER) {
        return TRUE;
    }
    w->back = *b != NULL ? 1 : 0;
    for (int i = 0; i < 2; i++) {
        TdmTensor *t = w->tensors[i];
        if (t == NULL) {
            continue;
        }
        /* An output that is not also an input needs no read. */
        gboolean copy_in = i == 0;
        w->staged[i] = tdm_comm_stage_acquire(impl->stage, t, copy_in, error);
        if (w->staged[i] == NULL) {
            return FALSE;
        }
    }
    *a = w->staged[0];
    *b = w->staged[1];
    return TRUE;
}

static void stage_release(CommImpl *impl, TdmCommWork *w)
{
    if (impl->stage != NULL) {
        tdm_comm_stage_release(impl->stage, w->staged[0]);
        tdm_comm_stage_release(impl->stage, w->staged[1]);
        w->staged[0] = w->staged[1] = NULL;
    }
    g_clear_pointer(&w->tensors[0], tdm_tensor_unref);
    g_clear_pointer(&w->tensors[1], tdm_tensor_unref);
}

static TdmCommWork *comm_issue(TdmComm *comm, TdmCommWork *w, TdmTensor *a, TdmTensor *b,
                               GError **error)
{
    CommImpl *impl = (CommImpl *)comm;
    const TdmCommClass *k = comm->klass;
    GError *local = NULL;

    g_mutex_lock(&impl->lock);
    w->seq = ++comm->seq;
    if (impl->broken != NULL) {
        g_autofree char *what = work_describe_short(w);
        g_set_error(&local, TDM_ERROR, TDM_ERROR_FAILED,
                    "%s on rank %d refused: the communicator is unusable after an earlier "
                    "failure (%s)",
                    what, comm->rank, impl->broken);
    } else if (comm->opts.debug && comm->world > 1 && comm->store != NULL) {
        if (!comm_debug_check(impl, w, &local)) {
            impl->broken = g_strdup(local->message);
        }
    }
    if (local == NULL && !plugin_has_op(k, w->op)) {
        g_set_error(&local, TDM_ERROR, TDM_ERROR_UNSUPPORTED, "collective '%s' has no %s",
                    tdm_feature_get_name(comm->feature), tdm_coll_op_name(w->op));
    } else if (local == NULL && !stage_inputs(impl, w, &a, &b, &local)) {
        g_autofree char *what = work_describe_short(w);
        g_prefix_error(&local, "%s failed on rank %d: ", what, comm->rank);
        impl->broken = g_strdup(local->message);
    } else if (local == NULL) {
        switch (w->op) {
        case TDM_COLL_ALLREDUCE:
            w->work = k->allreduce(comm, w->seq, a, w->rop, &local);
            break;
        case TDM_COLL_BROADCAST:
            w->work = k->broadcast(comm, w->seq, a, w->root, &local);
            break;
        case TDM_COLL_ALLGATHER:
            w->work = k->allgather(comm, w->seq, a, b, &local);
            break;
        case TDM_COLL_REDUCE_SCATTER:
            w->work = k->reduce_scatter(comm, w->seq, a, b, w->rop, &local);
            break;
        case TDM_COLL_BARRIER:
            w->work = k->barrier(comm, w->seq, &local);
            break;
        }
        if (w->work == NULL && local == NULL) {
            g_set_error(&local, TDM_ERROR, TDM_ERROR_FAILED, "plugin returned no work handle");
        }
        if (local != NULL) {
            g_autofree char *what = work_describe_short(w);
            g_prefix_error(&local, "%s failed on rank %d: ", what, comm->rank);
            /* A refused argument (every rank refuses it alike) leaves the
             * ranks in step; anything else may not. */
            if (!g_error_matches(local, TDM_ERROR, TDM_ERROR_UNSUPPORTED) &&
                !g_error_matches(local, TDM_ERROR, TDM_ERROR_INVALID_ARG) &&
                !g_error_matches(local, TDM_ERROR, TDM_ERROR_SHAPE)) {
                impl->broken = g_strdup(local->message);
            }
        }
    }
    g_mutex_unlock(&impl->lock);

    if (local != NULL) {
        stage_release(impl, w);
        g_propagate_error(error, local);
        g_free(w);
        return NULL;
    }
    return w;
}

gboolean tdm_comm_wait(TdmComm *comm, TdmCommWork *work, GError **error)
{
    g_return_val_if_fail(comm != NULL, FALSE);
    g_return_val_if_fail(work != NULL, FALSE);
    CommImpl *impl = (CommImpl *)comm;
    int *missing = NULL;
    GError *local = NULL;
    gboolean ok = comm->klass->wait(comm, work->work, comm->opts.timeout_s, &missing, &local);
    if (ok && local != NULL) {
        g_clear_error(&local); /* a plugin must not set both */
    }
    if (ok && work->back >= 0 && work->staged[work->back] != NULL &&
        !tdm_comm_stage_copy_back(work->staged[work->back], work->tensors[work->back], &local)) {
        ok = FALSE;
    }
    if (!ok) {
        if (local == NULL) {
            g_set_error(&local, TDM_ERROR, TDM_ERROR_FAILED, "no reason given by the plugin");
        }
        g_autofree char *what = work_describe_short(work);
        GError *outer = NULL;
        if (g_error_matches(local, TDM_ERROR, TDM_ERROR_TIMEOUT)) {
            if (missing == NULL) {
                missing = comm_missing_from_store(impl, work->seq);
            }
            g_autofree char *who = NULL;
            if (missing != NULL && missing[0] >= 0) {
                g_autofree char *list = ranks_string(missing);
                who = g_strdup_printf("ranks %s never arrived", list);
            } else if (missing != NULL) {
                who = g_strdup("every rank reached this call, yet it did not complete");
            } else {
                who = g_strdup("the ranks that never arrived are unknown");
            }
            g_set_error(&outer, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "%s timed out after %.1f s on rank %d: %s", what, comm->opts.timeout_s,
                        comm->rank, who);
        } else {
            g_set_error(&outer, TDM_ERROR, local->code, "%s failed on rank %d: %s", what,
                        comm->rank, local->message);
        }
        g_mutex_lock(&impl->lock);
        if (impl->broken == NULL) {
            impl->broken = g_strdup(outer->message);
        }
        g_mutex_unlock(&impl->lock);
        g_error_free(local);
        g_propagate_error(error, outer);
    }
    g_free(missing);
    comm->klass->work_free(comm, work->work);
    /* After work_free: the plugin is done with the buffers. */
    stage_release(impl, work);
    g_free(work);
    return ok;
}

/* ---- argument checks ---- */

static gboolean check_tensor(TdmComm *comm, const char *op, const char *name, TdmTensor *t,
                             gboolean need_plain, GError **error)
{
    if (t == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: tensor '%s' is NULL", op, name);
        return FALSE;
    }
    if (tdm_tensor_nbytes(t) > 0 && t->storage == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "%s: tensor '%s' has no storage", op,
                    name);
        return FALSE;
    }
    if (need_plain ? !tdm_tensor_is_contiguous(t)
                   : (tdm_tensor_is_plain(t) && !tdm_tensor_is_contiguous(t))) {
        g_autofree char *shape = tdm_tensor_shape_string(t);
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "%s: tensor '%s' %s must be contiguous%s", op, name, shape,
                    need_plain ? " in plain layout" : "");
        return FALSE;
    }
    return TRUE;
}

static int64_t reduce_count(const TdmTensor *t)
{
    /* A backend layout is reduced elementwise over its whole buffer. */
    if (!tdm_tensor_is_plain(t)) {
        return (int64_t)(tdm_tensor_nbytes(t) / tdm_dtype_size(t->dtype));
    }
    return tdm_tensor_numel(t);
}

static TdmCommWork *work_new(TdmCollOp op, int64_t count, TdmDType dtype, int root, TdmReduceOp rop)
{
    TdmCommWork *w = g_new0(TdmCommWork, 1);
    w->op = op;
    w->count = count;
    w->dtype = dtype;
    w->root = root;
    w->rop = rop;
    return w;
}

TdmCommWork *tdm_comm_allreduce_async(TdmComm *comm, TdmTensor *t, TdmReduceOp op, GError **error)
{
    g_return_val_if_fail(comm != NULL, NULL);
    if (!check_tensor(comm, "allreduce", "t", t, FALSE, error)) {
        return NULL;
    }
    if ((unsigned)op > TDM_REDUCE_MIN) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "allreduce: unknown reduce op %d", op);
        return NULL;
    }
    TdmCommWork *w = work_new(TDM_COLL_ALLREDUCE, reduce_count(t), t->dtype, 0, op);
    return comm_issue(comm, w, t, NULL, error);
}

TdmCommWork *tdm_comm_broadcast_async(TdmComm *comm, TdmTensor *t, int root, GError **error)
{
    g_return_val_if_fail(comm != NULL, NULL);
    if (!check_tensor(comm, "broadcast", "t", t, FALSE, error)) {
        return NULL;
    }
    if (root < 0 || root >= comm->world) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "broadcast: root %d is not a rank of this job (world %d)", root, comm->world);
        return NULL;
    }
    TdmCommWork *w = work_new(TDM_COLL_BROADCAST, reduce_count(t), t->dtype, root, TDM_REDUCE_SUM);
    return comm_issue(comm, w, t, NULL, error);
}

/* `whole` (named whole_name) has `part`'s dtype and world times its
 * elements, as allgather's out and reduce_scatter's in must. */
static gboolean check_world_times(TdmComm *comm, const char *op, const char *whole_name,
                                  const TdmTensor *whole, const char *part_name,
                                  const TdmTensor *part, GError **error)
{
    if (whole->dtype == part->dtype &&
        tdm_tensor_numel(whole) == (int64_t)comm->world * tdm_tensor_numel(part)) {
        return TRUE;
    }
    g_autofree char *sw = tdm_tensor_shape_string(whole);
    g_autofree char *sp = tdm_tensor_shape_string(part);
    g_set_error(error, TDM_ERROR, TDM_ERROR_SHAPE, "%s: %s %s %s must hold world (%d) x %s %s %s",
                op, whole_name, sw, tdm_dtype_name(whole->dtype), comm->world, part_name, sp,
                tdm_dtype_name(part->dtype));
    return FALSE;
}

TdmCommWork *tdm_comm_allgather_async(TdmComm *comm, TdmTensor *in, TdmTensor *out, GError **error)
{
    g_return_val_if_fail(comm != NULL, NULL);
    if (!check_tensor(comm, "allgather", "in", in, TRUE, error) ||
        !check_tensor(comm, "allgather", "out", out, TRUE, error)) {
        return NULL;
    }
    if (!check_world_times(comm, "allgather", "out", out, "in", in, error)) {
        return NULL;
    }
    TdmCommWork *w =
        work_new(TDM_COLL_ALLGATHER, tdm_tensor_numel(in), in->dtype, 0, TDM_REDUCE_SUM);
    return comm_issue(comm, w, in, out, error);
}

TdmCommWork *tdm_comm_reduce_scatter_async(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                           TdmReduceOp op, GError **error)
{
    g_return_val_if_fail(comm != NULL, NULL);
    if (!check_tensor(comm, "reduce_scatter", "in", in, TRUE, error) ||
        !check_tensor(comm, "reduce_scatter", "out", out, TRUE, error)) {
        return NULL;
    }
    if ((unsigned)op > TDM_REDUCE_MIN) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG, "reduce_scatter: unknown reduce op %d",
                    op);
        return NULL;
    }
    if (!check_world_times(comm, "reduce_scatter", "in", in, "out", out, error)) {
        return NULL;
    }
    TdmCommWork *w = work_new(TDM_COLL_REDUCE_SCATTER, tdm_tensor_numel(out), out->dtype, 0, op);
    return comm_issue(comm, w, in, out, error);
}

TdmCommWork *tdm_comm_barrier_async(TdmComm *comm, GError **error)
{
    g_return_val_if_fail(comm != NULL, NULL);
    TdmCommWork *w = work_new(TDM_COLL_BARRIER, 0, TDM_DTYPE_U8, 0, TDM_REDUCE_SUM);
    return comm_issue(comm, w, NULL, NULL, error);
}

static gboolean wait_or_fail(TdmComm *comm, TdmCommWork *w, GError **error)
{
    return w != NULL && tdm_comm_wait(comm, w, error);
}

gboolean tdm_comm_allreduce(TdmComm *comm, TdmTensor *t, TdmReduceOp op, GError **error)
{
    return wait_or_fail(comm, tdm_comm_allreduce_async(comm, t, op, error), error);
}

gboolean tdm_comm_broadcast(TdmComm *comm, TdmTensor *t, int root, GError **error)
{
    return wait_or_fail(comm, tdm_comm_broadcast_async(comm, t, root, error), error);
}

gboolean tdm_comm_allgather(TdmComm *comm, TdmTensor *in, TdmTensor *out, GError **error)
{
    return wait_or_fail(comm, tdm_comm_allgather_async(comm, in, out, error), error);
}

gboolean tdm_comm_reduce_scatter(TdmComm *comm, TdmTensor *in, TdmTensor *out, TdmReduceOp op,
                                 GError **error)
{
    return wait_or_fail(comm, tdm_comm_reduce_scatter_async(comm, in, out, op, error), error);
}

gboolean tdm_comm_barrier(TdmComm *comm, GError **error)
{
    return wait_or_fail(comm, tdm_comm_barrier_async(comm, error), error);
}

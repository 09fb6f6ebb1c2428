/* SPDX-License-Identifier: MIT */
/* plugins/nccl/nccl-comm.c - libtdm-nccl: the collective interface over
 * NCCL for tensors on cuda devices, one GPU per rank.
 *
 * Registration and probe (the driver present, the NCCL loaded no older in
 * its major than the one compiled against), the job check (every rank posts
 * its host and GPU and two ranks on one GPU are refused: NCCL does not allow
 * it), the rendezvous (nccl-rdzv.c: rank 0's unique id through Tandem's
 * store) and a non-blocking communicator initialisation polled against the
 * collective timeout. Each operation is ordered after the work queued so far
 * on the device's compute stream by an event, runs on the plugin's own
 * stream and records a completion event. A wait polls that event and NCCL's
 * asynchronous error on the host against the deadline; past it, or on an
 * error, the communicator is aborted (a dead peer would otherwise leave the
 * GPU spinning in a kernel that never ends) and every later call fails. The
 * compute stream never waits on an NCCL operation: the host has already
 * seen it complete when wait returns, so a lost peer cannot hang a later
 * synchronisation of compute. The cuda plugin and this one share one
 * dynamically linked CUDA runtime, so the backend's cudaStream_t
 * (tdm_device_native_stream) is valid here.
 *
 * Test hook (configure --enable-test-hooks only): TDM_TEST_NCCL_STALL=SEQ
 * holds operation SEQ back on the plugin's stream, as a peer that never
 * calls it would, so that one GPU can show the timeout and abort path: the
 * operation is not issued, a host function blocks the stream until the
 * communicator is aborted, and the wait times out as it would on a lost
 * peer.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl-rdzv.h"

/* Oldest NCCL with non-blocking communicators as used here (config). */
#define NCCL_MIN_CODE 21800
#define NCCL_PAUSE_MIN_US 20
#define NCCL_PAUSE_MAX_US 1000

G_STATIC_ASSERT(sizeof(ncclUniqueId) == NCCL_RDZV_ID_BYTES);

typedef struct {
    ncclComm_t nc;
    cudaStream_t stream;  /* the plugin's own */
    cudaStream_t compute; /* the device's, transfer none */
    int ordinal;
    int world;    /* the job's ranks (nccl_redop) */
    float *one;   /* the barrier's 1-float buffer */
    char *broken; /* why every call fails from now on */
    NcclRdzv rz;
    GArray *spare_events; /* cudaEvent_t, reused: no creation in a steady step */
    guint64 stall_seq;    /* test hook TDM_TEST_NCCL_STALL, 0 = off */
    gint released;        /* the stalled operation may go on */
    double stall_cap_s;
} NcclComm;

struct _TdmWork {
    NcclComm *s;
    TdmCollOp op;
    guint64 seq;
    size_t bytes;
    TdmTensor *a, *b;
    cudaEvent_t ready, done;
};

/* ---- probe ---- */

static char *version_text(int code)
{
    return g_strdup_printf("%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
}

static gboolean nccl_probe(gconstpointer klass, char **reason)
{
    (void)klass;
    /* As the cuda plugin: without the driver every CUDA call fails with a
     * less telling error. The handle stays open (the runtime loads it). */
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == NULL) {
        *reason = g_strdup("no NVIDIA driver (libcuda.so.1 not found)");
        return FALSE;
    }
    int loaded = 0;
    ncclResult_t rc = ncclGetVersion(&loaded);
    g_autofree char *built = version_text(NCCL_VERSION_CODE);
    if (rc != ncclSuccess) {
        *reason = g_strdup_printf("ncclGetVersion failed: %s", ncclGetErrorString(rc));
        return FALSE;
    }
    g_autofree char *now = version_text(loaded);
    if (loaded / 10000 != NCCL_VERSION_CODE / 10000 || loaded < NCCL_MIN_CODE) {
        *reason = g_strdup_printf("the NCCL loaded (%s) does not match the one the plugin was "
                                  "built with (%s; 2.18 or newer of the same major needed)",
                                  now, built);
        return FALSE;
    }
    if (loaded < NCCL_VERSION_CODE) {
        g_message("nccl: NCCL %s loaded, older than the %s the plugin was built with", now, built);
    }
    int count = 0;
    cudaError_t crc = cudaGetDeviceCount(&count);
    if (crc != cudaSuccess || count == 0) {
        *reason = crc != cudaSuccess
                      ? g_strdup_printf("cudaGetDeviceCount failed: %s", cudaGetErrorName(crc))
                      : g_strdup("no CUDA device visible");
        (void)cudaGetLastError();
        return FALSE;
    }
    return TRUE;
}

/* ---- which jobs ---- */

static gboolean nccl_supports_device(const TdmDevice *dev)
{
    const char *type = tdm_device_type(dev);
    return type != NULL && strcmp(type, "cuda") == 0;
}

/* The CUDA device behind a tandem device, from its compute stream. */
static gboolean device_ordinal(TdmDevice *dev, cudaStream_t *compute, int *ordinal, GError **error)
{
    *compute = tdm_device_native_stream(dev, TDM_STREAM_COMPUTE);
    if (*compute == NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED, "nccl: device '%s' has no CUDA stream",
                    tdm_device_type(dev));
        return FALSE;
    }
    cudaError_t rc = cudaStreamGetDevice(*compute, ordinal);
    if (rc != cudaSuccess) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "nccl: cudaStreamGetDevice: %s (%s)",
                    cudaGetErrorName(rc), cudaGetErrorString(rc));
        return FALSE;
    }
    return TRUE;
}

static gboolean seam_unique_id(gpointer ctx, guint8 id[NCCL_RDZV_ID_BYTES], GError **error)
{
    (void)ctx;
    ncclUniqueId uid;
    ncclResult_t rc = ncclGetUniqueId(&uid);
    if (rc != ncclSuccess) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "nccl: ncclGetUniqueId: %s",
                    ncclGetErrorString(rc));
        return FALSE;
    }
    memcpy(id, &uid, NCCL_RDZV_ID_BYTES);
    return TRUE;
}

static char *seam_gpu_bus_id(gpointer ctx, GError **error)
{
    TdmDevice *dev = ctx;
    cudaStream_t compute = NULL;
    int ordinal = 0;
    if (!device_ordinal(dev, &compute, &ordinal, error)) {
        return NULL;
    }
    char bus[64] = "";
    cudaError_t rc = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, ordinal);
    if (rc != cudaSuccess) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "nccl: cudaDeviceGetPCIBusId(%d): %s (%s)",
                    ordinal, cudaGetErrorName(rc), cudaGetErrorString(rc));
        return NULL;
    }
    return g_strdup(bus);
}

static char *seam_host_name(gpointer ctx)
{
    (void)ctx;
    return g_strdup(g_get_host_name());
}

static NcclRdzvSeam seam_for(TdmDevice *dev)
{
    NcclRdzvSeam seam = {seam_unique_id, seam_gpu_bus_id, seam_host_name, dev};
    return seam;
}

static gboolean nccl_supports_job(TdmComm *comm, char **reason)
{
    static gint probe_counter = 0;
    if (comm->world > 1 && comm->store == NULL) {
        *reason = g_strdup("no store to exchange the NCCL unique id through");
        return FALSE;
    }
    if (comm->world == 1) {
        return TRUE;
    }
    /* Every rank probes in the same order, so the counter names this probe. */
    NcclRdzv rz;
    nccl_rdzv_init(&rz, comm->store, comm->rank, comm->world, comm->opts.timeout_s,
                   g_atomic_int_add(&probe_counter, 1));
    NcclRdzvSeam seam = seam_for(comm->device);
    gboolean ok = nccl_rdzv_check_gpus(&rz, &seam, reason);
    nccl_rdzv_clear(&rz);
    return ok;
}

/* ---- set up ---- */

/* TDM_TEST_NCCL_STALL (the header says what it does). */
static void parse_stall_hook(NcclComm *s, double timeout_s)
{
    s->stall_seq = 0;
#ifdef TDM_ENABLE_TEST_HOOKS
    const char *env = g_getenv("TDM_TEST_NCCL_STALL");
    if (env != NULL && env[0] != '\0') {
        char *end = NULL;
        guint64 seq = g_ascii_strtoull(env, &end, 10);
        if (end != env && *end == '\0' && seq > 0) {
            s->stall_seq = seq;
            /* Never block past the point where the job is surely over. */
            s->stall_cap_s = timeout_s + 60.0;
        } else {
            g_warning("TDM_TEST_NCCL_STALL='%s' is not an operation number; ignored", env);
        }
    }
#else
    (void)timeout_s;
#endif
}

static void pause_step(gint64 *pause)
{
    g_usleep((gulong)*pause);
    *pause = MIN(*pause * 2, NCCL_PAUSE_MAX_US);
}

static gboolean cuda_ok(cudaError_t rc, const char *what, GError **error)
{
    if (rc == cudaSuccess) {
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "nccl: %s: %s (%s)", what,
                cudaGetErrorName(rc), cudaGetErrorString(rc));
    return FALSE;
}

static void nccl_comm_free(NcclComm *s)
{
    if (s->spare_events != NULL) {
        for (guint i = 0; i < s->spare_events->len; i++) {
            (void)cudaEventDestroy(g_array_index(s->spare_events, cudaEvent_t, i));
        }
        g_array_unref(s->spare_events);
    }
    if (s->one != NULL) {
        (void)cudaFree(s->one);
    }
    if (s->stream != NULL) {
        (void)cudaStreamDestroy(s->stream);
    }
    nccl_rdzv_clear(&s->rz);
    g_free(s->broken);
    g_free(s);
}

/* Wait while NCCL reports ncclInProgress on a non-blocking communicator,
 * at most until `deadline`. Returns the last state (ncclInProgress on
 * timeout). */
static ncclResult_t settle(ncclComm_t nc, gint64 deadline)
{
    gint64 pause = NCCL_PAUSE_MIN_US;
    ncclResult_t st = ncclInProgress;
    for (;;) {
        ncclResult_t rc = ncclCommGetAsyncError(nc, &st);
        if (rc != ncclSuccess) {
            return rc;
        }
        if (st != ncclInProgress || g_get_monotonic_time() >= deadline) {
            return st;
        }
        pause_step(&pause);
    }
}

static gboolean nccl_init(TdmComm *comm, GError **error)
{
    static gint init_counter = 0;
    NcclComm *s = g_new0(NcclComm, 1);
    s->world = comm->world;
    s->spare_events = g_array_new(FALSE, FALSE, sizeof(cudaEvent_t));
    nccl_rdzv_init(&s->rz, comm->store, comm->rank, comm->world, comm->opts.timeout_s,
                   g_atomic_int_add(&init_counter, 1));
    if (!device_ordinal(comm->device, &s->compute, &s->ordinal, error) ||
        !cuda_ok(cudaSetDevice(s->ordinal), "cudaSetDevice", error)) {
        nccl_comm_free(s);
        return FALSE;
    }
    NcclRdzvSeam seam = seam_for(comm->device);
    ncclUniqueId uid;
    guint8 id[NCCL_RDZV_ID_BYTES];
    if (comm->world == 1) {
        if (!seam_unique_id(NULL, id, error)) {
            nccl_comm_free(s);
            return FALSE;
        }
    } else if (!nccl_rdzv_exchange_id(&s->rz, &seam, id, error)) {
        nccl_comm_free(s);
        return FALSE;
    }
    memcpy(&uid, id, sizeof uid);
    /* One float for the barrier, made once here: no allocation in a step. */
    if (!cuda_ok(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags", error) ||
        !cuda_ok(cudaMalloc((void **)&s->one, sizeof(float)), "cudaMalloc(barrier)", error) ||
        (comm->store != NULL && !nccl_rdzv_arrive(&s->rz, error))) {
        nccl_comm_free(s);
        return FALSE;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    gint64 deadline = g_get_monotonic_time() + (gint64)(comm->opts.timeout_s * G_TIME_SPAN_SECOND);
    ncclResult_t rc = ncclCommInitRankConfig(&s->nc, comm->world, uid, comm->rank, &config);
    if ((rc == ncclSuccess || rc == ncclInProgress) && s->nc != NULL) {
        rc = settle(s->nc, deadline);
    }
    if (rc == ncclSuccess) {
        parse_stall_hook(s, comm->opts.timeout_s);
        comm->priv = s;
        return TRUE;
    }
    if (rc == ncclInProgress) {
        int *missing = comm->store != NULL ? nccl_rdzv_missing(&s->rz) : NULL;
        g_autofree char *list = nccl_rdzv_ranks_text(missing);
        g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                    "nccl: rank %d: communicator initialisation over %d ranks timed out after "
                    "%.1f s; %s%s",
                    comm->rank, comm->world, comm->opts.timeout_s,
                    missing == NULL  ? "the store cannot say which ranks are missing"
                    : missing[0] < 0 ? "every rank arrived (a peer is stuck in NCCL)"
                                     : "ranks that never arrived: ",
                    missing != NULL && missing[0] >= 0 ? list : "");
        g_free(missing);
    } else {
        g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND,
                    "nccl: rank %d: ncclCommInitRankConfig over %d ranks on GPU %d: %s (%s)",
                    comm->rank, comm->world, s->ordinal, ncclGetErrorString(rc),
                    s->nc != NULL ? ncclGetLastError(s->nc) : ncclGetLastError(NULL));
    }
    if (s->nc != NULL) {
        (void)ncclCommAbort(s->nc);
    }
    nccl_comm_free(s);
    return FALSE;
}

static void nccl_finalize(TdmComm *comm)
{
    NcclComm *s = comm->priv;
    if (s == NULL) {
        return;
    }
    (void)cudaSetDevice(s->ordinal);
    g_atomic_int_set(&s->released, 1);
    if (s->nc != NULL) {
        /* Flush what was issued, within the timeout; abort past it. */
        gint64 deadline =
            g_get_monotonic_time() + (gint64)(comm->opts.timeout_s * G_TIME_SPAN_SECOND);
        ncclResult_t rc = ncclCommFinalize(s->nc);
        if (rc == ncclSuccess || rc == ncclInProgress) {
            rc = settle(s->nc, deadline);
        }
        if (rc == ncclSuccess) {
            (void)ncclCommDestroy(s->nc);
        } else {
            g_warning("nccl: rank %d: finalize failed (%s): aborting the communicator", comm->rank,
                      ncclGetErrorString(rc));
            (void)ncclCommAbort(s->nc);
        }
    }
    nccl_comm_free(s);
    comm->priv = NULL;
}

/* ---- operations ---- */

static gboolean nccl_dtype(TdmDType dtype, ncclDataType_t *out)
{
    static const struct {
        TdmDType tdm;
        ncclDataType_t nccl;
    } map[] = {{TDM_DTYPE_F32, ncclFloat32}, {TDM_DTYPE_BF16, ncclBfloat16},
               {TDM_DTYPE_F16, ncclFloat16}, {TDM_DTYPE_I32, ncclInt32},
               {TDM_DTYPE_I64, ncclInt64},   {TDM_DTYPE_U8, ncclUint8}};
    for (size_t i = 0; i < G_N_ELEMENTS(map); i++) {
        if (map[i].tdm == dtype) {
            *out = map[i].nccl;
            return TRUE;
        }
    }
    return FALSE;
}

/* At world 1 an average is the sum of one value: ncclSum, which NCCL runs
 * as a plain copy. NCCL 2.27-2.29.6 run a one-rank ncclAvg through a
 * reduction kernel that leaves the last count % blocks elements of the
 * output unwritten (NVIDIA/nccl issue 1950, fixed in 2.29.7): an
 * out-of-place reduce-scatter (ZeRO-1 at world 1) then reads stale
 * gradients. */
static ncclRedOp_t nccl_redop(TdmReduceOp op, int world)
{
    switch (op) {
    case TDM_REDUCE_AVG:
        return world == 1 ? ncclSum : ncclAvg;
    case TDM_REDUCE_MAX:
        return ncclMax;
    case TDM_REDUCE_MIN:
        return ncclMin;
    case TDM_REDUCE_SUM:
    default:
        return ncclSum;
    }
}

/* An event from the spare ones, or a new one. */
static gboolean event_take(NcclComm *s, cudaEvent_t *ev, GError **error)
{
    if (s->spare_events->len > 0) {
        *ev = g_array_index(s->spare_events, cudaEvent_t, s->spare_events->len - 1);
        g_array_set_size(s->spare_events, s->spare_events->len - 1);
        return TRUE;
    }
    return cuda_ok(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), "cudaEventCreate", error);
}

static void work_destroy(TdmWork *w)
{
    if (w->a != NULL) {
        tdm_tensor_unref(w->a);
    }
    if (w->b != NULL) {
        tdm_tensor_unref(w->b);
    }
    /* Re-recording an event is allowed whatever its state: keep them. */
    if (w->ready != NULL) {
        g_array_append_val(w->s->spare_events, w->ready);
    }
    if (w->done != NULL) {
        g_array_append_val(w->s->spare_events, w->done);
    }
    g_free(w);
}

/* Mark the communicator unusable and abort it: its ranks are out of step. */
static void comm_break(TdmComm *comm, const char *why)
{
    NcclComm *s = comm->priv;
    if (s->broken == NULL) {
        s->broken = g_strdup(why);
    }
    /* First let the test hook's held-back stream go: ncclCommAbort frees
     * device memory, which waits for every stream of the device, that one
     * too (the hook's cap, the timeout + 60 s, later). */
    g_atomic_int_set(&s->released, 1);
    if (s->nc != NULL) {
        fprintf(stderr, "nccl: rank %d: aborting the communicator: %s\n", comm->rank, why);
        (void)ncclCommAbort(s->nc);
        s->nc = NULL;
    }
}

/* ---- test hook: an operation held back ---- */

/* Runs on CUDA's callback thread: blocks the plugin's stream until the
 * communicator is aborted (or the cap passes). */
static void CUDART_CB stall_host_fn(void *data)
{
    NcclComm *s = data;
    gint64 end = g_get_monotonic_time() + (gint64)(s->stall_cap_s * G_TIME_SPAN_SECOND);
    while (!g_atomic_int_get(&s->released) && g_get_monotonic_time() < end) {
        g_usleep(1000);
    }
}

/* TRUE when operation `seq` is the one the hook holds back: the stream is
 * blocked instead of issuing it. */
static gboolean stall_instead(TdmComm *comm, NcclComm *s, guint64 seq, GError **error)
{
    if (s->stall_seq == 0 || seq != s->stall_seq) {
        return FALSE;
    }
    fprintf(stderr,
            "nccl: TDM_TEST_NCCL_STALL: rank %d holds back operation #%" G_GUINT64_FORMAT
            ", as if a peer never called it\n",
            comm->rank, seq);
    (void)cuda_ok(cudaLaunchHostFunc(s->stream, stall_host_fn, s), "cudaLaunchHostFunc", error);
    return TRUE;
}

/* The common start: order after compute, leave the call to `issue`, then
 * record completion. */
typedef ncclResult_t (*IssueFn)(NcclComm *s, TdmWork *w, gconstpointer args);

static TdmWork *op_start(TdmComm *comm, TdmCollOp op, guint64 seq, TdmTensor *a, TdmTensor *b,
                         IssueFn issue, gconstpointer args, GError **error)
{
    NcclComm *s = comm->priv;
    const char *name = tdm_coll_op_name(op);
    if (s->broken != NULL) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "nccl: %s #%" G_GUINT64_FORMAT " refused: the communicator was aborted (%s)",
                    name, seq, s->broken);
        return NULL;
    }
    TdmWork *w = g_new0(TdmWork, 1);
    w->s = s;
    w->op = op;
    w->seq = seq;
    w->a = a != NULL ? tdm_tensor_ref(a) : NULL;
    w->b = b != NULL ? tdm_tensor_ref(b) : NULL;
    w->bytes = a != NULL ? tdm_tensor_nbytes(a) : sizeof(float);
    if (!cuda_ok(cudaSetDevice(s->ordinal), "cudaSetDevice", error) ||
        !event_take(s, &w->ready, error) || !event_take(s, &w->done, error) ||
        !cuda_ok(cudaEventRecord(w->ready, s->compute), "cudaEventRecord(compute)", error) ||
        !cuda_ok(cudaStreamWaitEvent(s->stream, w->ready, 0), "cudaStreamWaitEvent", error)) {
        work_destroy(w);
        return NULL;
    }
    ncclResult_t rc = ncclSuccess;
    GError *hook_error = NULL;
    if (!stall_instead(comm, s, seq, &hook_error)) {
        rc = issue(s, w, args);
    } else if (hook_error != NULL) {
        g_propagate_error(error, hook_error);
        work_destroy(w);
        return NULL;
    }
    if (rc == ncclInProgress) {
        /* A non-blocking communicator may still be enqueueing. */
        rc = settle(s->nc,
                    g_get_monotonic_time() + (gint64)(comm->opts.timeout_s * G_TIME_SPAN_SECOND));
    }
    if (rc != ncclSuccess) {
        g_autofree char *why = g_strdup_printf(
            "%s #%" G_GUINT64_FORMAT " of %" G_GSIZE_FORMAT " bytes failed on rank %d: %s (%s)",
            name, seq, w->bytes, comm->rank, ncclGetErrorString(rc), ncclGetLastError(s->nc));
        g_set_error(error, TDM_ERROR, rc == ncclInProgress ? TDM_ERROR_TIMEOUT : TDM_ERROR_BACKEND,
                    "nccl: %s", why);
        comm_break(comm, why);
        work_destroy(w);
        return NULL;
    }
    if (!cuda_ok(cudaEventRecord(w->done, s->stream), "cudaEventRecord(nccl)", error)) {
        work_destroy(w);
        return NULL;
    }
    return w;
}

typedef struct {
    TdmReduceOp rop;
    int root;
} OpArgs;

static size_t count_of(TdmTensor *t)
{
    return tdm_tensor_nbytes(t) / tdm_dtype_size(t->dtype);
}

static ncclResult_t issue_allreduce(NcclComm *s, TdmWork *w, gconstpointer p)
{
    const OpArgs *args = p;
    ncclDataType_t dt = ncclFloat32;
    (void)nccl_dtype(w->a->dtype, &dt);
    void *buf = tdm_tensor_data(w->a);
    return ncclAllReduce(buf, buf, count_of(w->a), dt, nccl_redop(args->rop, s->world), s->nc,
                         s->stream);
}

static ncclResult_t issue_broadcast(NcclComm *s, TdmWork *w, gconstpointer p)
{
    const OpArgs *args = p;
    ncclDataType_t dt = ncclFloat32;
    (void)nccl_dtype(w->a->dtype, &dt);
    void *buf = tdm_tensor_data(w->a);
    return ncclBroadcast(buf, buf, count_of(w->a), dt, args->root, s->nc, s->stream);
}

static ncclResult_t issue_allgather(NcclComm *s, TdmWork *w, gconstpointer p)
{
    (void)p;
    ncclDataType_t dt = ncclFloat32;
    (void)nccl_dtype(w->a->dtype, &dt);
    return ncclAllGather(tdm_tensor_data(w->a), tdm_tensor_data(w->b), count_of(w->a), dt, s->nc,
                         s->stream);
}

static ncclResult_t issue_reduce_scatter(NcclComm *s, TdmWork *w, gconstpointer p)
{
    const OpArgs *args = p;
    ncclDataType_t dt = ncclFloat32;
    (void)nccl_dtype(w->b->dtype, &dt);
    return ncclReduceScatter(tdm_tensor_data(w->a), tdm_tensor_data(w->b), count_of(w->b), dt,
                             nccl_redop(args->rop, s->world), s->nc, s->stream);
}

static ncclResult_t issue_barrier(NcclComm *s, TdmWork *w, gconstpointer p)
{
    (void)w;
    (void)p;
    /* llm.c's multi_gpu_barrier: a 1-float all-reduce (its value unused). */
    return ncclAllReduce(s->one, s->one, 1, ncclFloat32, ncclSum, s->nc, s->stream);
}

/* `reduces`: the op combines values, which bytes (u8) do not: refused as
 * shm and gloo refuse them, so a job behaves alike on every collective. */
static gboolean check_dtype(TdmCollOp op, guint64 seq, TdmTensor *t, gboolean reduces,
                            GError **error)
{
    ncclDataType_t dt;
    if (reduces && t->dtype == TDM_DTYPE_U8) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                    "nccl: %s #%" G_GUINT64_FORMAT ": dtype u8 cannot be reduced (f32, bf16, f16, "
                    "i32 and i64 can)",
                    tdm_coll_op_name(op), seq);
        return FALSE;
    }
    if (nccl_dtype(t->dtype, &dt) && (tdm_tensor_nbytes(t) == 0 || tdm_tensor_data(t) != NULL)) {
        return TRUE;
    }
    g_set_error(error, TDM_ERROR, TDM_ERROR_UNSUPPORTED,
                "nccl: %s #%" G_GUINT64_FORMAT ": dtype %s is not supported", tdm_coll_op_name(op),
                seq, tdm_dtype_name(t->dtype));
    return FALSE;
}

static TdmWork *nccl_allreduce(TdmComm *comm, guint64 seq, TdmTensor *t, TdmReduceOp op,
                               GError **error)
{
    OpArgs args = {op, 0};
    if (!check_dtype(TDM_COLL_ALLREDUCE, seq, t, TRUE, error)) {
        return NULL;
    }
    return op_start(comm, TDM_COLL_ALLREDUCE, seq, t, NULL, issue_allreduce, &args, error);
}

static TdmWork *nccl_broadcast(TdmComm *comm, guint64 seq, TdmTensor *t, int root, GError **error)
{
    OpArgs args = {TDM_REDUCE_SUM, root};
    if (!check_dtype(TDM_COLL_BROADCAST, seq, t, FALSE, error)) {
        return NULL;
    }
    return op_start(comm, TDM_COLL_BROADCAST, seq, t, NULL, issue_broadcast, &args, error);
}

static TdmWork *nccl_allgather(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                               GError **error)
{
    if (!check_dtype(TDM_COLL_ALLGATHER, seq, in, FALSE, error)) {
        return NULL;
    }
    return op_start(comm, TDM_COLL_ALLGATHER, seq, in, out, issue_allgather, NULL, error);
}

static TdmWork *nccl_reduce_scatter(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                                    TdmReduceOp op, GError **error)
{
    OpArgs args = {op, 0};
    if (!check_dtype(TDM_COLL_REDUCE_SCATTER, seq, out, TRUE, error)) {
        return NULL;
    }
    return op_start(comm, TDM_COLL_REDUCE_SCATTER, seq, in, out, issue_reduce_scatter, &args,
                    error);
}

static TdmWork *nccl_barrier(TdmComm *comm, guint64 seq, GError **error)
{
    return op_start(comm, TDM_COLL_BARRIER, seq, NULL, NULL, issue_barrier, NULL, error);
}

static gboolean nccl_wait(TdmComm *comm, TdmWork *w, double timeout_s, int **missing,
                          GError **error)
{
    (void)missing; /* NCCL cannot say which peer is late: the core asks the store */
    NcclComm *s = comm->priv;
    const char *name = tdm_coll_op_name(w->op);
    gint64 deadline = g_get_monotonic_time() + (gint64)(timeout_s * G_TIME_SPAN_SECOND);
    gint64 pause = NCCL_PAUSE_MIN_US;
    for (;;) {
        if (s->broken != NULL) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                        "nccl: %s #%" G_GUINT64_FORMAT ": the communicator was aborted (%s)", name,
                        w->seq, s->broken);
            return FALSE;
        }
        cudaError_t rc = cudaEventQuery(w->done);
        if (rc == cudaSuccess) {
            return TRUE;
        }
        if (rc != cudaErrorNotReady) {
            g_autofree char *why = g_strdup_printf(
                "%s #%" G_GUINT64_FORMAT " of %" G_GSIZE_FORMAT " bytes on rank %d: %s (%s)", name,
                w->seq, w->bytes, comm->rank, cudaGetErrorName(rc), cudaGetErrorString(rc));
            g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "nccl: %s", why);
            comm_break(comm, why);
            return FALSE;
        }
        ncclResult_t st = ncclSuccess;
        ncclResult_t qrc = ncclCommGetAsyncError(s->nc, &st);
        if (qrc != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
            ncclResult_t bad = qrc != ncclSuccess ? qrc : st;
            g_autofree char *why = g_strdup_printf(
                "%s #%" G_GUINT64_FORMAT " of %" G_GSIZE_FORMAT " bytes on rank %d: %s (%s)", name,
                w->seq, w->bytes, comm->rank, ncclGetErrorString(bad), ncclGetLastError(s->nc));
            g_set_error(error, TDM_ERROR, TDM_ERROR_BACKEND, "nccl: %s", why);
            comm_break(comm, why);
            return FALSE;
        }
        if (g_get_monotonic_time() >= deadline) {
            g_autofree char *why = g_strdup_printf("%s #%" G_GUINT64_FORMAT " of %" G_GSIZE_FORMAT
                                                   " bytes timed out after %.1f s "
                                                   "on rank %d",
                                                   name, w->seq, w->bytes, timeout_s, comm->rank);
            g_set_error(error, TDM_ERROR, TDM_ERROR_TIMEOUT,
                        "nccl: %s; the communicator was aborted", why);
            comm_break(comm, why);
            return FALSE;
        }
        pause_step(&pause);
    }
}

static void nccl_work_free(TdmComm *comm, TdmWork *w)
{
    (void)comm;
    if (w != NULL) {
        work_destroy(w);
    }
}

/* Two slots a line: the operations pair up (start, then wait and free). */
/* clang-format off */
static const TdmCommClass nccl_class = {
    TDM_CLASS_HEADER(TDM_COMM_IFACE_VERSION, TdmCommClass),
    .supports_device = nccl_supports_device, .supports_job = nccl_supports_job,
    .init = nccl_init, .finalize = nccl_finalize,
    .allreduce = nccl_allreduce, .broadcast = nccl_broadcast,
    .allgather = nccl_allgather, .reduce_scatter = nccl_reduce_scatter,
    .barrier = nccl_barrier, .wait = nccl_wait, .work_free = nccl_work_free,
};
/* clang-format on */

/* No CUDA or NCCL call here (the launcher forks after loading plugins):
 * the probe does the work when the collective is first considered. */
TDM_PLUGIN_INIT_FEATURE(nccl_plugin_init, TDM_FEATURE_COLLECTIVE, "nccl", 80, &nccl_class,
                        "collectives over NCCL between GPUs (one GPU per rank; cuda tensors)", NULL,
                        nccl_probe)

TDM_PLUGIN_DEFINE(nccl, "MIT", "NCCL collectives for tensors on cuda devices", "tandem",
                  nccl_plugin_init)

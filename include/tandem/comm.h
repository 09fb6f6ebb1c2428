/* SPDX-License-Identifier: MIT */
/**
 * SECTION:comm
 * @title: Collectives
 * @short_description: the job's processes and the collective interface
 * @include: tandem/tandem.h
 *
 * TdmDistEnv says who this process is in a distributed job, read from
 * Tandem's launcher (TDM_*), torchrun (RANK, WORLD_SIZE, ...), Open MPI
 * (OMPI_COMM_WORLD_*) or Slurm (SLURM_*).
 *
 * A collective plugin registers a TDM_FEATURE_COLLECTIVE feature whose class
 * is a TdmCommClass. The core front end (tdm_comm_*) numbers every call with
 * a sequence number, checks in debug mode (TDM_DEBUG=collectives) that all
 * ranks issue the same (op, dtype, count) before running it, and turns a wait
 * past the timeout into an error naming the op, the sequence number, the size
 * and the ranks that never arrived. Tensors are plain contiguous (arena
 * slices); collectives run in place where the op allows.
 */
#ifndef TANDEM_COMM_H
#define TANDEM_COMM_H

#include <tandem/tensor.h>
#include <tandem/store.h>

G_BEGIN_DECLS

/* ---- who am I ---- */

/**
 * TdmDistEnv:
 * @rank: this process's rank, 0 .. @world_size - 1
 * @world_size: the number of processes
 * @local_rank: its rank on its node
 * @local_world_size: the processes on its node
 * @node_rank: its node, 0 .. @nnodes - 1
 * @nnodes: the number of nodes
 * @master_addr: the store's host
 * @master_port: the store's port
 * @token: the store's token (TDM_STORE_TOKEN)
 * @source: "tandem", "torchrun", "openmpi", "slurm" or "none"
 * @reserved: zero
 *
 * Who this process is in a distributed job, read by tdm_dist_env_read()
 * from Tandem's launcher (TDM_*), torchrun (RANK, WORLD_SIZE, ...), Open
 * MPI (OMPI_COMM_WORLD_*) or Slurm (SLURM_*).
 */
typedef struct {
    int rank, world_size;
    int local_rank, local_world_size;
    int node_rank, nnodes;
    char *master_addr;  /* store host */
    int master_port;    /* store port */
    char *token;        /* store token (TDM_STORE_TOKEN) */
    const char *source; /* "tandem", "torchrun", "openmpi", "slurm" or "none" */
    gpointer reserved[4];
} TdmDistEnv;

/**
 * tdm_dist_env_read:
 * @env: (out caller-allocates): filled in; free its strings with
 *   tdm_dist_env_clear()
 * @error: return location for a #GError, or NULL
 *
 * Fills @env from the environment; a process started alone is rank 0 of 1
 * (source "none").
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG naming the variable
 * whose value is inconsistent
 */
TDM_API gboolean tdm_dist_env_read(TdmDistEnv *env, GError **error);
/**
 * tdm_dist_env_clear:
 * @env: a #TdmDistEnv that tdm_dist_env_read() filled
 *
 * Frees the strings of @env (not @env itself).
 */
TDM_API void tdm_dist_env_clear(TdmDistEnv *env);

/**
 * tdm_store_open_for_job:
 * @env: the job
 * @server_out: (out) (transfer full) (nullable): the store server this
 *   process serves, or NULL
 * @error: return location for a #GError, or NULL
 *
 * Connects to the job's store. Under `tandem run` the launcher serves it;
 * under mpirun, srun or torchrun (or a process started alone) rank 0 serves
 * it first and *@server_out gets the server (NULL on other ranks). The
 * caller frees the store first and the server only after a last barrier,
 * since the other ranks use it until then.
 *
 * Returns: (transfer full): the store, or NULL with @error set (the address,
 * and why it could not be reached within the timeout)
 */
TDM_API TdmStore *tdm_store_open_for_job(const TdmDistEnv *env, TdmStoreServer **server_out,
                                         GError **error);

/* ---- collectives ---- */

/**
 * TDM_COMM_IFACE_VERSION:
 *
 * The interface version of #TdmCommClass this core's headers describe.
 */
#define TDM_COMM_IFACE_VERSION TDM_IFACE_VERSION(1, 0)

/**
 * TdmReduceOp:
 * @TDM_REDUCE_SUM: the sum over the ranks
 * @TDM_REDUCE_AVG: the mean over the ranks
 * @TDM_REDUCE_MAX: the greatest value
 * @TDM_REDUCE_MIN: the least value
 *
 * How a reduction combines the ranks' values, element by element.
 */
typedef enum {
    TDM_REDUCE_SUM,
    TDM_REDUCE_AVG,
    TDM_REDUCE_MAX,
    TDM_REDUCE_MIN,
} TdmReduceOp;

/**
 * TdmCollOp:
 * @TDM_COLL_ALLREDUCE: every rank gets the reduction of all
 * @TDM_COLL_BROADCAST: every rank gets the root's tensor
 * @TDM_COLL_ALLGATHER: every rank gets every rank's part
 * @TDM_COLL_REDUCE_SCATTER: rank r gets the reduction of part r
 * @TDM_COLL_BARRIER: every rank waits for all
 *
 * The collective operations, as errors and the debug check name them.
 */
typedef enum {
    TDM_COLL_ALLREDUCE,
    TDM_COLL_BROADCAST,
    TDM_COLL_ALLGATHER,
    TDM_COLL_REDUCE_SCATTER,
    TDM_COLL_BARRIER,
} TdmCollOp;

/**
 * tdm_coll_op_name:
 * @op: an operation
 *
 * The operation's name, as errors write it.
 *
 * Returns: (transfer none): "allreduce", "broadcast", ...
 */
TDM_API const char *tdm_coll_op_name(TdmCollOp op);
/**
 * tdm_reduce_op_name:
 * @op: a reduction
 *
 * The reduction's name, as errors write it.
 *
 * Returns: (transfer none): "sum", "avg", "max" or "min"
 */
TDM_API const char *tdm_reduce_op_name(TdmReduceOp op);

/**
 * TdmCommClass:
 * @iface_version: %TDM_COMM_IFACE_VERSION
 * @struct_size: sizeof(TdmCommClass)
 * @supports_device: whether the plugin can move tensors of @dev (shm: host
 *   memory only, so tdm_device_host_accessible()); a plugin with
 *   %TDM_COMM_FLAG_HOST_STAGING is also chosen for a device it refuses
 *   whose memory is not host memory, and the core then stages its tensors
 *   (optional: NULL means every device)
 * @supports_job: whether it can serve this job (shm: all ranks on one
 *   host); called on every rank, which must all give the same answer; may
 *   use comm->store; on FALSE sets *@reason (transfer full, freed by the
 *   core) to why (optional: NULL means every job)
 * @init: sets up comm->priv, with the rendezvous through comm->store; on
 *   failure frees what it made and returns FALSE with the error set:
 *   finalize is not called then (optional: NULL means nothing to set up)
 * @finalize: frees comm->priv (optional: NULL means nothing to free)
 * @allreduce: starts an all-reduce of @t in place with @op; returns a
 *   work handle (transfer full, freed with @work_free) or NULL with the
 *   error set; @seq is the front end's sequence number of the call
 *   (optional: NULL means not offered: calling it fails with
 *   %TDM_ERROR_UNSUPPORTED naming the collective; so for the four below)
 * @broadcast: starts a broadcast of @t from rank @root, as @allreduce
 * @allgather: starts an all-gather: @out has world x numel(@in) elements,
 *   rank r's part at r x numel(@in); as @allreduce
 * @reduce_scatter: starts a reduce-scatter: @in has world x numel(@out)
 *   elements, and rank r gets the reduction of part r; as @allreduce
 * @barrier: starts a barrier, as @allreduce
 * @wait: waits for @work at most @timeout_s; on timeout sets
 *   %TDM_ERROR_TIMEOUT and, when the plugin knows them, puts the ranks
 *   that never arrived in *@missing (transfer full, -1 terminated; an empty
 *   list means all arrived) for the front end's message; never both TRUE
 *   and an error
 * @work_free: frees a work handle; the core calls it once per handle,
 *   after @wait, whether the wait succeeded or not
 * @flags: TDM_COMM_FLAG_* (0: none)
 * @reserved: NULL
 *
 * A collective's slots, in a static const struct the plugin gives to
 * tdm_plugin_add_feature() as a TDM_FEATURE_COLLECTIVE. The front ends
 * (tdm_comm_allreduce()...) check the arguments and number the calls
 * before a slot runs, and name the operation, the rank and the plugin's
 * message in their errors. Every slot is required unless its comment says
 * "(optional: NULL means ...)"; the registry refuses a collective with a
 * NULL required slot. The comment of each slot in the header says what it
 * must do.
 */
typedef struct _TdmCommClass TdmCommClass;

/**
 * TDM_COMM_FLAG_HOST_STAGING:
 *
 * A #TdmCommClass flag: the plugin moves host memory only, and the core may
 * run it for a device whose memory the host cannot reach (cuda) by staging,
 * as PyTorch's Gloo process group does for CUDA tensors: each input is read
 * into a pinned host buffer (after the work queued on the device), the
 * plugin runs on host views, and the result is written back at the wait.
 * The buffers are allocated once per size and reused. Automatic selection
 * still prefers a plugin of higher priority that accepts the device itself
 * (nccl for cuda).
 */
#define TDM_COMM_FLAG_HOST_STAGING (1u << 0)
/**
 * TdmWork:
 *
 * A collective plugin's handle of one started operation (defined by each
 * plugin, opaque to the core): returned by a start slot of #TdmCommClass,
 * waited for with its wait and freed with its work_free. Callers see
 * #TdmCommWork instead.
 */
typedef struct _TdmWork TdmWork; /* plugin-defined */

/**
 * TDM_COMM_DEFAULT_TIMEOUT:
 *
 * Seconds a collective waits when the options give no timeout.
 */
#define TDM_COMM_DEFAULT_TIMEOUT 300.0

/**
 * TdmCommOptions:
 * @timeout_s: every wait and the rendezvous; TDM_TIMEOUT overrides it
 *   (default %TDM_COMM_DEFAULT_TIMEOUT)
 * @debug: check (op, dtype, count) on all ranks first; TDM_DEBUG=collectives
 * @reserved: zero
 *
 * How a communicator waits and checks; tdm_comm_options_init() sets the
 * defaults.
 */
typedef struct {
    /* every wait and the rendezvous; TDM_TIMEOUT overrides
     * (TDM_COMM_DEFAULT_TIMEOUT) */
    double timeout_s;
    gboolean debug;     /* check (op, dtype, count) on all ranks first; TDM_DEBUG=collectives */
    gpointer reserved[4];
} TdmCommOptions;

/**
 * tdm_comm_options_init:
 * @opts: (out caller-allocates): the options
 *
 * Sets the defaults: the timeout from TDM_TIMEOUT or
 * %TDM_COMM_DEFAULT_TIMEOUT, debug from TDM_DEBUG.
 */
TDM_API void tdm_comm_options_init(TdmCommOptions *opts);

/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses a collective with a NULL required slot. */
struct _TdmCommClass {
    guint32 iface_version;  /* TDM_COMM_IFACE_VERSION */
    guint32 struct_size;    /* sizeof(TdmCommClass) */
    /* Can this plugin move tensors of `dev`? (shm: host memory only, so
     * tdm_device_host_accessible(dev)). A plugin with
     * TDM_COMM_FLAG_HOST_STAGING is also chosen for a device it refuses
     * whose memory is not host memory: the core then stages its tensors.
     * (optional: NULL means every device) */
    gboolean (*supports_device)(const TdmDevice *dev);
    /* Can it serve this job (shm: all ranks on one host)? Called on every
     * rank with the same answer; may use comm->store.
     * (optional: NULL means every job) */
    gboolean (*supports_job)(TdmComm *comm, char **reason);
    /* Set up comm->priv (rendezvous through comm->store). On failure, free
     * what it made: finalize is not called then.
     * (optional: NULL means there is nothing to set up) */
    gboolean (*init)(TdmComm *comm, GError **error);
    /* (optional: NULL means there is nothing to free) */
    void (*finalize)(TdmComm *comm);
    /* Start an operation; return a work handle (transfer full) or NULL with
     * the error set. `seq` is the front end's sequence number of the call.
     * (optional, each of the five: NULL means the operation is not offered:
     * calling it fails with TDM_ERROR_UNSUPPORTED naming the collective) */
    TdmWork *(*allreduce)(TdmComm *comm, guint64 seq, TdmTensor *t, TdmReduceOp op,
                          GError **error);
    TdmWork *(*broadcast)(TdmComm *comm, guint64 seq, TdmTensor *t, int root, GError **error);
    /* out has world * numel(in) elements, rank r's part at r * numel(in). */
    TdmWork *(*allgather)(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                          GError **error);
    /* in has world * numel(out) elements; rank r gets the reduction of part r. */
    TdmWork *(*reduce_scatter)(TdmComm *comm, guint64 seq, TdmTensor *in, TdmTensor *out,
                               TdmReduceOp op, GError **error);
    TdmWork *(*barrier)(TdmComm *comm, guint64 seq, GError **error);
    /* Wait at most timeout_s; on timeout set TDM_ERROR_TIMEOUT and, if the
     * plugin knows them, put the ranks that never arrived in *missing
     * (transfer full, -1 terminated; an empty list means all arrived) for
     * the front end's message. */
    gboolean (*wait)(TdmComm *comm, TdmWork *work, double timeout_s, int **missing,
                     GError **error);
    void (*work_free)(TdmComm *comm, TdmWork *work);
    /* TDM_COMM_FLAG_* (0: none). */
    guint32 flags;
    gpointer reserved[7];
};

/**
 * TdmComm:
 * @klass: its class
 * @feature: the collective feature
 * @store: the job's store (transfer none)
 * @rank: this process's rank
 * @world: the number of ranks
 * @local_rank: its rank on its node
 * @local_world: the ranks on its node
 * @device: the device whose tensors it moves
 * @opts: its options
 * @seq: the calls issued so far
 * @priv: the plugin's own state, set in init
 * @reserved: zero
 *
 * A communicator: one collective plugin serving the ranks of a job.
 */
struct _TdmComm {
    const TdmCommClass *klass;
    TdmFeature *feature;
    TdmStore *store;     /* transfer none */
    int rank, world;
    int local_rank, local_world;
    TdmDevice *device;
    TdmCommOptions opts;
    guint64 seq;         /* calls issued so far */
    gpointer priv;
    gpointer reserved[4];
};

/**
 * TdmCommWork:
 *
 * A pending operation of the front end, from a tdm_comm_*_async() call;
 * tdm_comm_wait() frees it.
 */
typedef struct _TdmCommWork TdmCommWork;

/**
 * tdm_comm_new:
 * @spec: (nullable): the collective: NULL for automatic (the highest
 *   priority whose supports_device and supports_job accept), "gloo",
 *   "^gloo"... (tdm_registry_select())
 * @store: the job's store (transfer none: it outlives the communicator)
 * @env: the job
 * @dev: the device whose tensors it moves
 * @opts: (nullable): its options; NULL: the defaults
 * @error: return location for a #GError, or NULL
 *
 * Makes a communicator, with a rendezvous of every rank through @store.
 *
 * Returns: (transfer full): the communicator, free it with tdm_comm_free();
 * or NULL with @error set: why each candidate was refused, or the plugin's
 * init error
 */
TDM_API TdmComm *tdm_comm_new(const char *spec, TdmStore *store, const TdmDistEnv *env,
                              TdmDevice *dev, const TdmCommOptions *opts, GError **error);
/**
 * tdm_comm_free:
 * @comm: (transfer full) (nullable): a communicator
 *
 * Finalizes the plugin's state and frees the communicator.
 */
TDM_API void tdm_comm_free(TdmComm *comm);
/**
 * tdm_comm_is_staged:
 * @comm: a communicator
 *
 * Whether the communicator stages its tensors through host memory (its
 * plugin has %TDM_COMM_FLAG_HOST_STAGING and refuses the device itself).
 *
 * Returns: TRUE when it does
 */
TDM_API gboolean tdm_comm_is_staged(const TdmComm *comm);

/**
 * tdm_comm_allreduce_async:
 * @comm: a communicator
 * @t: a plain contiguous tensor on the communicator's device, reduced in
 *   place
 * @op: the reduction
 * @error: return location for a #GError, or NULL
 *
 * Starts an all-reduce: every rank's @t becomes the reduction of all. Every
 * rank must issue the same calls in the same order.
 *
 * Returns: (transfer full): the work, for tdm_comm_wait(); or NULL with
 * @error set (%TDM_ERROR_UNSUPPORTED when the plugin does not offer it)
 */
TDM_API TdmCommWork *tdm_comm_allreduce_async(TdmComm *comm, TdmTensor *t, TdmReduceOp op,
                                              GError **error);
/**
 * tdm_comm_broadcast_async:
 * @comm: a communicator
 * @t: a plain contiguous tensor, sent from @root, written on the others
 * @root: the rank whose @t is sent
 * @error: return location for a #GError, or NULL
 *
 * Starts a broadcast from @root.
 *
 * Returns: (transfer full): the work, for tdm_comm_wait(); or NULL with
 * @error set
 */
TDM_API TdmCommWork *tdm_comm_broadcast_async(TdmComm *comm, TdmTensor *t, int root,
                                              GError **error);
/**
 * tdm_comm_allgather_async:
 * @comm: a communicator
 * @in: this rank's part
 * @out: world * numel(@in) elements; rank r's part lands at r * numel(@in)
 * @error: return location for a #GError, or NULL
 *
 * Starts an all-gather.
 *
 * Returns: (transfer full): the work, for tdm_comm_wait(); or NULL with
 * @error set (sizes that do not match, naming both)
 */
TDM_API TdmCommWork *tdm_comm_allgather_async(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                              GError **error);
/**
 * tdm_comm_reduce_scatter_async:
 * @comm: a communicator
 * @in: world * numel(@out) elements
 * @out: this rank's part of the result
 * @op: the reduction
 * @error: return location for a #GError, or NULL
 *
 * Starts a reduce-scatter: rank r gets the reduction of part r of every
 * rank's @in.
 *
 * Returns: (transfer full): the work, for tdm_comm_wait(); or NULL with
 * @error set
 */
TDM_API TdmCommWork *tdm_comm_reduce_scatter_async(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                                   TdmReduceOp op, GError **error);
/**
 * tdm_comm_barrier_async:
 * @comm: a communicator
 * @error: return location for a #GError, or NULL
 *
 * Starts a barrier.
 *
 * Returns: (transfer full): the work, for tdm_comm_wait(); or NULL with
 * @error set
 */
TDM_API TdmCommWork *tdm_comm_barrier_async(TdmComm *comm, GError **error);
/**
 * tdm_comm_wait:
 * @comm: a communicator
 * @work: (transfer full): the work of one of its calls; freed either way
 * @error: return location for a #GError, or NULL
 *
 * Waits for the work, at most the communicator's timeout.
 *
 * Returns: TRUE, or FALSE with @error set: on a timeout,
 * %TDM_ERROR_TIMEOUT naming the op, the sequence number, the size and the
 * ranks that never arrived
 */
TDM_API gboolean tdm_comm_wait(TdmComm *comm, TdmCommWork *work, GError **error);

/**
 * tdm_comm_allreduce:
 * @comm: a communicator
 * @t: as for tdm_comm_allreduce_async()
 * @op: the reduction
 * @error: return location for a #GError, or NULL
 *
 * tdm_comm_allreduce_async() and tdm_comm_wait().
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_comm_allreduce(TdmComm *comm, TdmTensor *t, TdmReduceOp op, GError **error);
/**
 * tdm_comm_broadcast:
 * @comm: a communicator
 * @t: as for tdm_comm_broadcast_async()
 * @root: the sending rank
 * @error: return location for a #GError, or NULL
 *
 * tdm_comm_broadcast_async() and tdm_comm_wait().
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_comm_broadcast(TdmComm *comm, TdmTensor *t, int root, GError **error);
/**
 * tdm_comm_allgather:
 * @comm: a communicator
 * @in: this rank's part
 * @out: as for tdm_comm_allgather_async()
 * @error: return location for a #GError, or NULL
 *
 * tdm_comm_allgather_async() and tdm_comm_wait().
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_comm_allgather(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                    GError **error);
/**
 * tdm_comm_reduce_scatter:
 * @comm: a communicator
 * @in: as for tdm_comm_reduce_scatter_async()
 * @out: this rank's part
 * @op: the reduction
 * @error: return location for a #GError, or NULL
 *
 * tdm_comm_reduce_scatter_async() and tdm_comm_wait().
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_comm_reduce_scatter(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                         TdmReduceOp op, GError **error);
/**
 * tdm_comm_barrier:
 * @comm: a communicator
 * @error: return location for a #GError, or NULL
 *
 * tdm_comm_barrier_async() and tdm_comm_wait().
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_comm_barrier(TdmComm *comm, GError **error);

G_END_DECLS

#endif /* TANDEM_COMM_H */

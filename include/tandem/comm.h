/* tandem/comm.h - the job's processes and the collective interface.
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

/* Fill `env` from the environment; a process started alone is rank 0 of 1
 * (source "none"). Inconsistent values are an error naming the variable. */
TDM_API gboolean tdm_dist_env_read(TdmDistEnv *env, GError **error);
TDM_API void tdm_dist_env_clear(TdmDistEnv *env);

/* Connect to the job's store. Under `tandem run` the launcher serves it;
 * under mpirun, srun or torchrun (or a process started alone) rank 0 serves
 * it first and *server_out gets the server (NULL on other ranks). The caller
 * frees the store first and the server only after a last barrier, since the
 * other ranks use it until then. Transfer full. */
TDM_API TdmStore *tdm_store_open_for_job(const TdmDistEnv *env, TdmStoreServer **server_out,
                                         GError **error);

/* ---- collectives ---- */
#define TDM_COMM_IFACE_VERSION TDM_IFACE_VERSION(1, 0)

typedef enum {
    TDM_REDUCE_SUM,
    TDM_REDUCE_AVG,
    TDM_REDUCE_MAX,
    TDM_REDUCE_MIN,
} TdmReduceOp;

typedef enum {
    TDM_COLL_ALLREDUCE,
    TDM_COLL_BROADCAST,
    TDM_COLL_ALLGATHER,
    TDM_COLL_REDUCE_SCATTER,
    TDM_COLL_BARRIER,
} TdmCollOp;

TDM_API const char *tdm_coll_op_name(TdmCollOp op);
TDM_API const char *tdm_reduce_op_name(TdmReduceOp op);

typedef struct _TdmCommClass TdmCommClass;

/* TdmCommClass.flags. HOST_STAGING: the plugin moves host memory only, and
 * the core may run it for a device whose memory the host cannot reach
 * (cuda) by staging, as PyTorch's Gloo process group does for CUDA tensors:
 * each input is read into a pinned host buffer (after the work queued on
 * the device), the plugin runs on host views, and the result is written
 * back at the wait. The buffers are allocated once per size and reused.
 * Automatic selection still prefers a plugin of higher priority that
 * accepts the device itself (nccl for cuda). */
#define TDM_COMM_FLAG_HOST_STAGING (1u << 0)
typedef struct _TdmWork TdmWork; /* plugin-defined */

/* Seconds a collective waits when the options give no timeout. */
#define TDM_COMM_DEFAULT_TIMEOUT 300.0

typedef struct {
    /* every wait and the rendezvous; TDM_TIMEOUT overrides
     * (TDM_COMM_DEFAULT_TIMEOUT) */
    double timeout_s;
    gboolean debug;     /* check (op, dtype, count) on all ranks first; TDM_DEBUG=collectives */
    gpointer reserved[4];
} TdmCommOptions;

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

/* A work handle of the front end (transfer full, free with tdm_comm_work_free). */
typedef struct _TdmCommWork TdmCommWork;

/* Create a communicator with the COLLECTIVE feature selected by `spec`
 * (NULL = automatic: highest priority whose supports_device and
 * supports_job accept; "gloo"; "^gloo"). Transfer full. */
TDM_API TdmComm *tdm_comm_new(const char *spec, TdmStore *store, const TdmDistEnv *env,
                              TdmDevice *dev, const TdmCommOptions *opts, GError **error);
TDM_API void tdm_comm_free(TdmComm *comm);
/* Whether the communicator stages its tensors through host memory (its
 * plugin has TDM_COMM_FLAG_HOST_STAGING and refuses the device itself). */
TDM_API gboolean tdm_comm_is_staged(const TdmComm *comm);

TDM_API TdmCommWork *tdm_comm_allreduce_async(TdmComm *comm, TdmTensor *t, TdmReduceOp op,
                                              GError **error);
TDM_API TdmCommWork *tdm_comm_broadcast_async(TdmComm *comm, TdmTensor *t, int root,
                                              GError **error);
TDM_API TdmCommWork *tdm_comm_allgather_async(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                              GError **error);
TDM_API TdmCommWork *tdm_comm_reduce_scatter_async(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                                   TdmReduceOp op, GError **error);
TDM_API TdmCommWork *tdm_comm_barrier_async(TdmComm *comm, GError **error);
/* Wait with the communicator's timeout; frees the work either way. */
TDM_API gboolean tdm_comm_wait(TdmComm *comm, TdmCommWork *work, GError **error);

/* Blocking forms: start + wait. */
TDM_API gboolean tdm_comm_allreduce(TdmComm *comm, TdmTensor *t, TdmReduceOp op, GError **error);
TDM_API gboolean tdm_comm_broadcast(TdmComm *comm, TdmTensor *t, int root, GError **error);
TDM_API gboolean tdm_comm_allgather(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                    GError **error);
TDM_API gboolean tdm_comm_reduce_scatter(TdmComm *comm, TdmTensor *in, TdmTensor *out,
                                         TdmReduceOp op, GError **error);
TDM_API gboolean tdm_comm_barrier(TdmComm *comm, GError **error);

G_END_DECLS

#endif /* TANDEM_COMM_H */

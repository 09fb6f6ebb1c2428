/* SPDX-License-Identifier: MIT */
/* plugins/nccl/nccl-rdzv.h - the nccl plugin's rendezvous through Tandem's
 * store, kept free of CUDA and NCCL so that a CPU test runs it with real
 * processes and a real store.
 *
 * Three steps, each against the communicator's deadline: every rank posts
 * its identity (host name and the PCI bus id of its GPU) and the job is
 * refused when two ranks share a GPU (NCCL does not allow it); rank 0 makes
 * NCCL's unique id and publishes it, the others wait for it; every rank
 * marks its arrival before the (collective) communicator initialisation, so
 * that a timeout there can name the ranks that never came. The GPU-facing
 * calls sit behind NcclRdzvSeam: the plugin fills it with NCCL and CUDA
 * calls, the test with plain functions. Keys carry a digest of the job's
 * store token, the restart generation and a per-process probe number (the
 * same on every rank, since all ranks create their communicators in the same
 * order), so two jobs or two communicators never read each other's values.
 */
#ifndef TDM_NCCL_RDZV_H
#define TDM_NCCL_RDZV_H

#include <tandem/tandem.h>

/* sizeof(ncclUniqueId): NCCL_UNIQUE_ID_BYTES */
#define NCCL_RDZV_ID_BYTES 128

typedef struct {
    /* Rank 0 only: a new unique id (ncclGetUniqueId). */
    gboolean (*unique_id)(gpointer ctx, guint8 id[NCCL_RDZV_ID_BYTES], GError **error);
    /* This rank's GPU as a PCI bus id ("0000:3b:00.0", cudaDeviceGetPCIBusId). */
    char *(*gpu_bus_id)(gpointer ctx, GError **error);
    /* This rank's host name (g_get_host_name). */
    char *(*host_name)(gpointer ctx);
    gpointer ctx;
} NcclRdzvSeam;

typedef struct {
    TdmStore *store;
    int rank, world;
    double timeout_s;
    char *prefix; /* "tdm/nccl/<token digest>/<generation>/<probe>" */
} NcclRdzv;

/* A rendezvous for the `probe`-th nccl communicator of this process
 * (the same number on every rank). Free with nccl_rdzv_clear. */
void nccl_rdzv_init(NcclRdzv *rz, TdmStore *store, int rank, int world, double timeout_s,
                    int probe);
void nccl_rdzv_clear(NcclRdzv *rz);

/* Post this rank's identity and compare all: FALSE with *reason when two
 * ranks are on one GPU of one host ("ranks 0 and 1 are both on GPU
 * 0000:3b:00.0 of host X: NCCL needs one GPU per rank; ..."), or when a
 * rank never posted within the timeout (naming it). */
gboolean nccl_rdzv_check_gpus(NcclRdzv *rz, const NcclRdzvSeam *seam, char **reason);

/* Rank 0 makes the unique id and publishes it; the others wait for it
 * within the timeout, the error naming rank 0. */
gboolean nccl_rdzv_exchange_id(NcclRdzv *rz, const NcclRdzvSeam *seam,
                               guint8 id[NCCL_RDZV_ID_BYTES], GError **error);

/* Mark this rank as arrived at the communicator initialisation. */
gboolean nccl_rdzv_arrive(NcclRdzv *rz, GError **error);

/* The ranks that have not arrived, -1 terminated (transfer full), or NULL
 * when the store cannot say. */
int *nccl_rdzv_missing(NcclRdzv *rz);

/* "0, 2" (transfer full). */
char *nccl_rdzv_ranks_text(const int *ranks);

#endif /* TDM_NCCL_RDZV_H */

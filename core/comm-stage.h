/* SPDX-License-Identifier: MIT */
/* core/comm-stage.h - the host staging buffers of a communicator whose
 * plugin moves host memory only (comm-stage.c), for comm.c. */
#ifndef TDM_CORE_COMM_STAGE_H
#define TDM_CORE_COMM_STAGE_H

#include <tandem/tandem.h>

typedef struct _TdmCommStage TdmCommStage;

TdmCommStage *tdm_comm_stage_new(TdmDevice *dev);
/* After the plugin's finalize: no call may hold a buffer any more. */
void tdm_comm_stage_free(TdmCommStage *s);
/* A plain 1-d host tensor of t's numel and dtype over a pool buffer (transfer
 * none: give it back with tdm_comm_stage_release); with copy_in, holding t's
 * values, read after the work queued on t's device. NULL with the error set
 * when the read fails. */
TdmTensor *tdm_comm_stage_acquire(TdmCommStage *s, TdmTensor *t, gboolean copy_in, GError **error);
/* t = host's values (tdm_tensor_write: synchronous, so the buffer may be
 * released at once). */
gboolean tdm_comm_stage_copy_back(TdmTensor *host, TdmTensor *t, GError **error);
/* NULL is ignored. */
void tdm_comm_stage_release(TdmCommStage *s, TdmTensor *host);
/* Buffers allocated so far (a steady job's count stops growing). */
guint tdm_comm_stage_buffer_count(TdmCommStage *s);

#endif /* TDM_CORE_COMM_STAGE_H */

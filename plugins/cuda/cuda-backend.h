/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-backend.h - what cuda-backend.c offers the other files
 * of the plugin besides the contracts of cuda.h: the current-device switch
 * and the streams by their core name; and what it calls of cuda-vector.c.
 */
#ifndef TDM_CUDA_BACKEND_H
#define TDM_CUDA_BACKEND_H

#include "cuda.h"

/* Make dev's CUDA device current on the calling thread (cudaSetDevice only
 * when another one is current). `op` names the caller in the error. Unlike
 * cuda_op_begin it does not refuse a broken device (closing one must
 * still work). */
gboolean cuda_set_current(TdmDevice *dev, const char *op, GError **error);

/* The CUDA stream behind a core stream of dev. */
cudaStream_t cuda_stream_of(TdmDevice *dev, TdmStream stream);

/* The loss state of cuda-vector.c (declared there in cuda-kernels.h, in
 * the same types): a bad label that softmax_xent_stats found on the device
 * and has not reported yet is reported at the next synchronisation (FALSE
 * with the error); cuda_vector_close releases the state at device_close. */
int cuda_vector_check_deferred(struct _TdmDevice *dev, struct _GError **error);
void cuda_vector_close(struct _TdmDevice *dev);

#endif /* TDM_CUDA_BACKEND_H */

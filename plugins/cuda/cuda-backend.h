/* plugins/cuda/cuda-backend.h - what cuda-backend.c offers the other files
 * of the plugin besides the contracts of cuda.h: the current-device switch
 * and the streams by their core name.
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

#endif /* TDM_CUDA_BACKEND_H */

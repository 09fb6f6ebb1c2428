/* SPDX-License-Identifier: MIT */
/* core/comm-private.h - the collective front end's own types, shared by
 * comm.c (selection, issue, wait) and comm-debug.c (the debug check and
 * the search for the ranks that never arrived). */
#ifndef TDM_CORE_COMM_PRIVATE_H
#define TDM_CORE_COMM_PRIVATE_H

#include <tandem/tandem.h>

#include "comm-stage.h"

typedef struct {
    TdmComm pub;         /* first: a TdmComm * is a CommImpl * */
    GMutex lock;         /* issue order == sequence order */
    char *key_prefix;    /* store namespace of this communicator */
    char *broken;        /* why later calls fail, once one did */
    TdmCommStage *stage; /* host staging; NULL when the plugin takes the device */
} CommImpl;

struct _TdmCommWork {
    TdmWork *work;
    TdmTensor *tensors[2]; /* referenced from issue to wait */
    TdmTensor *staged[2];  /* host views of tensors[] given to the plugin */
    int back;              /* index of the tensor the wait writes back, or -1 */
    TdmCollOp op;
    guint64 seq;
    int64_t count;
    TdmDType dtype;
    int root;
    TdmReduceOp rop;
};

/* "allreduce(1024 x f32, sum)" (transfer full). */
char *comm_work_describe_call(const TdmCommWork *w);
/* Debug mode (TDM_DEBUG=collectives): post what this rank is about to run
 * for w->seq and compare it with every other rank's post. */
gboolean comm_debug_check(CommImpl *impl, const TdmCommWork *w, GError **error);
/* After a timeout the plugin could not explain: the ranks that never
 * reached call `seq`, -1 terminated, or NULL when unknown. */
int *comm_missing_from_store(CommImpl *impl, guint64 seq);

#endif /* TDM_CORE_COMM_PRIVATE_H */

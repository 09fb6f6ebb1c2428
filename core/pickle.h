/* SPDX-License-Identifier: MIT */
/* core/pickle.h - a strict reader of the pickles torch.save writes for a
 * state dict (core/pickle.c), for the .pth reader (core/pth-read.c).
 *
 * The reader builds plain values (numbers, strings, tuples, lists, dicts,
 * storages, tensors) and never calls anything: the few globals it accepts
 * stand for fixed constructions (an OrderedDict, a tensor view of a
 * storage) done by the reader itself, and every other global, opcode or
 * argument shape is refused with an error naming it and its byte offset.
 */
#ifndef TDM_CORE_PICKLE_H
#define TDM_CORE_PICKLE_H

#include <tandem/tandem.h>

typedef enum {
    TDM_PV_NONE,
    TDM_PV_BOOL,
    TDM_PV_INT,
    TDM_PV_FLOAT,
    TDM_PV_STR,     /* UTF-8, NUL-terminated */
    TDM_PV_BYTES,
    TDM_PV_TUPLE,
    TDM_PV_LIST,
    TDM_PV_DICT,    /* dict or OrderedDict */
    TDM_PV_GLOBAL,  /* one of the allowed globals, not yet applied */
    TDM_PV_STORAGE, /* a persistent id: data/<key> in the archive */
    TDM_PV_TENSOR,
} TdmPvKind;

/* The storage classes torch.save names (torch.FloatStorage, ...). */
typedef struct {
    const char *name;  /* "FloatStorage" */
    int dtype;         /* a TdmDType, or -1 where Tandem has none */
    size_t elsize;     /* bytes per element */
} TdmPickleStorageType;

typedef struct TdmPv TdmPv;
struct TdmPv {
    TdmPvKind kind;
    size_t at;        /* byte offset in the pickle of the opcode that made it */
    gint64 i;         /* BOOL, INT */
    double f;         /* FLOAT */
    char *s;          /* STR, BYTES; STORAGE: its key */
    size_t len;       /* STR, BYTES: bytes in s */
    GPtrArray *items; /* TUPLE, LIST: the items; DICT: key, value, key, value, ... */
    int global;       /* GLOBAL: index in the allow-list (pickle.c) */
    /* STORAGE */
    const TdmPickleStorageType *storage_type;
    char *location;
    gint64 numel;
    /* TENSOR */
    TdmPv *storage;
    gint64 offset;
    int ndim;
    gint64 size[TDM_MAX_DIMS];
    gint64 stride[TDM_MAX_DIMS];
};

typedef struct TdmPickle TdmPickle;

/* Parse `len` bytes of pickle. `what` names them in errors ("f.pth
 * (archive/data.pkl)"); every error is TDM_ERROR_CORRUPT naming it, the
 * byte offset and the opcode or global. Transfer full. */
TdmPickle *tdm_pickle_parse(const char *what, const guint8 *data, size_t len, GError **error);
/* The value STOP returned (transfer none: owned by `p`). */
const TdmPv *tdm_pickle_root(const TdmPickle *p);
void tdm_pickle_free(TdmPickle *p);
/* "dict", "tensor", ...: what a value is, for messages. */
const char *tdm_pickle_kind_name(TdmPvKind kind);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmPickle, tdm_pickle_free)

#endif /* TDM_CORE_PICKLE_H */

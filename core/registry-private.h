/* SPDX-License-Identifier: MIT */
/* core/registry-private.h - the plugin registry's state, shared between
 * core/registry.c (loading, features, lookup), core/select.c (priority
 * overrides, ordering and selection) and core/class-check.c (each kind's
 * class contract); private to the core. Every function named *_locked
 * expects registry.lock to be held.
 */
#ifndef TDM_REGISTRY_PRIVATE_H
#define TDM_REGISTRY_PRIVATE_H

#include <gmodule.h>

#include "internal.h"

struct _TdmPlugin {
    char *name;
    char *filename;  /* NULL for the built-in plugin */
    GModule *module; /* NULL for the built-in plugin */
    const TdmPluginDesc *desc;
    gboolean in_init; /* features may be added only while init runs */
    char *refused;    /* why a class of its init was refused: the load fails */
};

struct _TdmFeature {
    TdmFeatureKind kind;
    char *name;
    int priority; /* as registered; overrides apply on read */
    gconstpointer klass;
    char *description;
    TdmParamSpec *params; /* a copy in the current layout, or NULL */
    TdmFeatureProbe probe;
    TdmPlugin *plugin;
    guint seq; /* registration order: the tie-break between equal priorities */
    gboolean probed;
    gboolean available;
    char *unavailable_reason;
};

typedef struct {
    GRecMutex lock; /* static storage: usable without init */
    gboolean core_loaded;
    gboolean scanned;
    GPtrArray *plugins;     /* TdmPlugin *, load order */
    GPtrArray *features;    /* TdmFeature *, registration order */
    GPtrArray *failures;    /* TdmPluginFailure * */
    GHashTable *basenames;  /* basename -> path of the file that claimed it */
    GHashTable *priorities; /* "name" or "kind/name" -> priority */
    guint next_seq;
} TdmRegistry;

extern TdmRegistry registry;

#define PRIORITY_MAX 100
#define PRIORITY_MIN (-100)

extern const char *const registry_kind_names[TDM_FEATURE_N_KINDS];

/* registry.c */
void registry_ensure_tables_locked(void);
void registry_ensure_init(void);
TdmFeature *registry_find_locked(TdmFeatureKind kind, const char *name);
gboolean registry_is_available_locked(TdmFeature *f, const char **reason);
/* "a, b, c": the names of KIND, sorted (transfer full). */
char *registry_known_names_locked(TdmFeatureKind kind);
void registry_set_not_found_locked(TdmFeatureKind kind, const char *name, GError **error);

/* class-check.c */
/* Checks KLASS against the contract of KIND: interface version, struct
 * size and required slots. FALSE with a TDM_ERROR_PLUGIN error naming the
 * kind, NAME and the slot. */
gboolean registry_check_class(TdmFeatureKind kind, const char *name, gconstpointer klass,
                              GError **error);

/* select.c */
int registry_effective_priority_locked(const TdmFeature *f);
/* The features of KIND (all with TDM_FEATURE_N_KINDS), best first. */
GPtrArray *registry_list_features_locked(TdmFeatureKind kind);
/* Parses "name:prio,kind/name:prio"; a malformed entry is skipped with a
 * warning rather than failing the whole program over a tuning knob. */
void registry_read_priority_env_locked(void);

#endif /* TDM_REGISTRY_PRIVATE_H */

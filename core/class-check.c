/* SPDX-License-Identifier: MIT */
/* core/class-check.c - the one check of every class struct a plugin fills,
 * run by tdm_plugin_add_feature before a feature is registered.
 *
 * Each kind has a contract: the interface version of this core's headers,
 * the struct's size, and a table of the slots the core calls without a NULL
 * test (an offset and a name each), plus pairs of optional slots that only
 * work together. A class of another major version, of a newer minor one, of
 * another size, or with a required slot left NULL is refused with a reason
 * naming the kind, the feature and the slot; the registry then fails the
 * whole plugin with it. Past this point the core trusts a registered class:
 * the front ends (device.c, comm.c, dataset.c, optim.c, strategy.c,
 * transform.c) call its required slots without checking them again, so a
 * slot the core starts calling unconditionally must be added to its table
 * here, and a slot the headers mark optional must never be listed.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "registry-private.h"

/* Slots are read as data pointers: GLib (GCallback <-> gpointer) and
 * dlsym already assume function pointers have that size. */
G_STATIC_ASSERT(sizeof(void (*)(void)) == sizeof(gpointer));

typedef struct {
    size_t offset;
    const char *name;
} Slot;

/* `slot` must be set whenever `with` is: the core uses them together. */
typedef struct {
    Slot slot;
    Slot with;
} SlotPair;

typedef struct {
    const char *struct_name;
    guint32 version;
    size_t size;
    const Slot *required;
    gsize n_required;
    const SlotPair *pairs;
    gsize n_pairs;
} Contract;

#define SLOT(type, field) {offsetof(type, field), #field}

static const Slot backend_required[] = {
    SLOT(TdmBackendClass, device_type),
    SLOT(TdmBackendClass, alloc),
    SLOT(TdmBackendClass, free),
    SLOT(TdmBackendClass, read),
    SLOT(TdmBackendClass, write),
    SLOT(TdmBackendClass, reorder),
    SLOT(TdmBackendClass, layout_name),
    SLOT(TdmBackendClass, gemm),
    SLOT(TdmBackendClass, bias_grad),
    SLOT(TdmBackendClass, conv2d_forward),
    SLOT(TdmBackendClass, conv2d_backward_data),
    SLOT(TdmBackendClass, conv2d_backward_filter),
    SLOT(TdmBackendClass, batchnorm_forward),
    SLOT(TdmBackendClass, batchnorm_backward),
    SLOT(TdmBackendClass, relu_forward),
    SLOT(TdmBackendClass, relu_backward),
    SLOT(TdmBackendClass, add),
    SLOT(TdmBackendClass, maxpool2d_forward),
    SLOT(TdmBackendClass, maxpool2d_backward),
    SLOT(TdmBackendClass, avgpool2d_forward),
    SLOT(TdmBackendClass, avgpool2d_backward),
    SLOT(TdmBackendClass, global_avgpool_forward),
    SLOT(TdmBackendClass, global_avgpool_backward),
    SLOT(TdmBackendClass, softmax_xent),
    SLOT(TdmBackendClass, dropout_forward),
    SLOT(TdmBackendClass, dropout_backward),
    SLOT(TdmBackendClass, fill),
    SLOT(TdmBackendClass, copy),
    SLOT(TdmBackendClass, scale),
    SLOT(TdmBackendClass, axpy),
    SLOT(TdmBackendClass, sum_squares),
    SLOT(TdmBackendClass, cast),
    SLOT(TdmBackendClass, sgd_update),
    SLOT(TdmBackendClass, adamw_update),
};

static const SlotPair backend_pairs[] = {
    /* The loader frees what it pinned with host_free. */
    {SLOT(TdmBackendClass, host_free), SLOT(TdmBackendClass, host_alloc)},
    /* A batch norm fused forward needs its fused backward, and back. */
    {SLOT(TdmBackendClass, batchnorm_relu_backward), SLOT(TdmBackendClass, batchnorm_relu_forward)},
    {SLOT(TdmBackendClass, batchnorm_relu_forward), SLOT(TdmBackendClass, batchnorm_relu_backward)},
    /* The backward without y is the fused pair's (its forward fills the
     * workspace). */
    {SLOT(TdmBackendClass, batchnorm_relu_backward),
     SLOT(TdmBackendClass, batchnorm_relu_backward_ws)},
};

/* A backend's stream table (optional) is a struct of its own, with its own
 * version: checked like a class when a backend offers one. */
static const Slot stream_ops_required[] = {
    SLOT(TdmStreamOps, event_new),
    SLOT(TdmStreamOps, event_free),
    SLOT(TdmStreamOps, event_record),
    SLOT(TdmStreamOps, stream_wait_event),
    SLOT(TdmStreamOps, event_query),
    SLOT(TdmStreamOps, event_synchronize),
    SLOT(TdmStreamOps, synchronize),
    SLOT(TdmStreamOps, copy_h2d_on),
    SLOT(TdmStreamOps, native_stream),
};

static const Slot comm_required[] = {
    SLOT(TdmCommClass, wait),
    SLOT(TdmCommClass, work_free),
};

static const Slot strategy_required[] = {
    SLOT(TdmStrategyClass, train_step),
};

static const SlotPair strategy_pairs[] = {
    /* A strategy that saves the optimizer state it keeps must restore it. */
    {SLOT(TdmStrategyClass, import_optimizer), SLOT(TdmStrategyClass, export_optimizer)},
    {SLOT(TdmStrategyClass, export_optimizer), SLOT(TdmStrategyClass, import_optimizer)},
};

static const Slot transform_required[] = {
    SLOT(TdmTransformClass, create),
    SLOT(TdmTransformClass, apply),
};

static const Slot dataset_required[] = {
    SLOT(TdmDatasetClass, open),
    SLOT(TdmDatasetClass, read),
};

static const Slot module_required[] = {
    SLOT(TdmModuleClass, type_name),
    SLOT(TdmModuleClass, forward),
};

static const Slot optimizer_required[] = {
    SLOT(TdmOptimizerClass, step),
};

#define CONTRACT(type, version, required) \
    {#type, version, sizeof(type), required, G_N_ELEMENTS(required), NULL, 0}

static const Contract contracts[TDM_FEATURE_N_KINDS] = {
    [TDM_FEATURE_BACKEND] = {"TdmBackendClass", TDM_BACKEND_IFACE_VERSION, sizeof(TdmBackendClass),
                             backend_required, G_N_ELEMENTS(backend_required), backend_pairs,
                             G_N_ELEMENTS(backend_pairs)},
    [TDM_FEATURE_COLLECTIVE] = CONTRACT(TdmCommClass, TDM_COMM_IFACE_VERSION, comm_required),
    [TDM_FEATURE_STRATEGY] = {"TdmStrategyClass", TDM_STRATEGY_IFACE_VERSION,
                              sizeof(TdmStrategyClass), strategy_required,
                              G_N_ELEMENTS(strategy_required), strategy_pairs,
                              G_N_ELEMENTS(strategy_pairs)},
    [TDM_FEATURE_TRANSFORM] =
        CONTRACT(TdmTransformClass, TDM_TRANSFORM_IFACE_VERSION, transform_required),
    [TDM_FEATURE_DATASET] = CONTRACT(TdmDatasetClass, TDM_DATASET_IFACE_VERSION, dataset_required),
    [TDM_FEATURE_MODULE] = CONTRACT(TdmModuleClass, TDM_MODULE_IFACE_VERSION, module_required),
    [TDM_FEATURE_OPTIMIZER] =
        CONTRACT(TdmOptimizerClass, TDM_OPTIMIZER_IFACE_VERSION, optimizer_required),
};

static const Contract stream_ops_contract =
    CONTRACT(TdmStreamOps, TDM_STREAM_OPS_IFACE_VERSION, stream_ops_required);

/* Every class struct starts with these two; they are read before anything
 * else, so that nothing past them is touched in a class of another layout. */
typedef struct {
    guint32 iface_version;
    guint32 struct_size;
} ClassHead;

static gboolean slot_is_set(gconstpointer klass, const Slot *slot)
{
    gpointer value;
    memcpy(&value, (const char *)klass + slot->offset, sizeof value);
    return value != NULL;
}

static gboolean check_version(const Contract *c, const char *what, const ClassHead *head,
                              GError **error)
{
    guint32 major = TDM_IFACE_VERSION_MAJOR(head->iface_version);
    guint32 minor = TDM_IFACE_VERSION_MINOR(head->iface_version);
    guint32 core_major = TDM_IFACE_VERSION_MAJOR(c->version);
    guint32 core_minor = TDM_IFACE_VERSION_MINOR(c->version);
    if (major != core_major) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "%s: interface version %u.%u, this core has %u.%u (another major version: "
                    "rebuild the plugin against this core's headers)",
                    what, major, minor, core_major, core_minor);
        return FALSE;
    }
    if (head->struct_size != c->size) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "%s: struct_size %u, expected %zu (sizeof(%s) in this core's headers)", what,
                    head->struct_size, c->size, c->struct_name);
        return FALSE;
    }
    if (minor > core_minor) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                    "%s: interface version %u.%u is newer than this core's %u.%u (the plugin "
                    "needs a newer Tandem)",
                    what, major, minor, core_major, core_minor);
        return FALSE;
    }
    return TRUE;
}

/* Lists every missing slot at once, so an author fixes them in one go. */
static gboolean check_slots(const Contract *c, const char *what, gconstpointer klass,
                            GError **error)
{
    GString *missing = g_string_new(NULL);
    guint n_missing = 0;
    for (gsize i = 0; i < c->n_required; i++) {
        if (!slot_is_set(klass, &c->required[i])) {
            g_string_append_printf(missing, "%s'%s'", n_missing > 0 ? ", " : "",
                                   c->required[i].name);
            n_missing++;
        }
    }
    if (n_missing > 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN, "%s: required slot%s %s %s NULL", what,
                    n_missing > 1 ? "s" : "", missing->str, n_missing > 1 ? "are" : "is");
        g_string_free(missing, TRUE);
        return FALSE;
    }
    g_string_free(missing, TRUE);
    for (gsize i = 0; i < c->n_pairs; i++) {
        const SlotPair *p = &c->pairs[i];
        if (slot_is_set(klass, &p->with) && !slot_is_set(klass, &p->slot)) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_PLUGIN,
                        "%s: slot '%s' is NULL while '%s' is set (the two come together)", what,
                        p->slot.name, p->with.name);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean check_struct(const Contract *c, const char *what, gconstpointer klass,
                             GError **error)
{
    ClassHead head;
    memcpy(&head, klass, sizeof head);
    return check_version(c, what, &head, error) && check_slots(c, what, klass, error);
}

/* Tables a class points to, checked once the class itself is known good. */
static gboolean check_sub_tables(TdmFeatureKind kind, const char *what, gconstpointer klass,
                                 GError **error)
{
    if (kind != TDM_FEATURE_BACKEND) {
        return TRUE;
    }
    const TdmStreamOps *ops = ((const TdmBackendClass *)klass)->stream_ops;
    if (ops == NULL) {
        return TRUE;
    }
    char *sub = g_strdup_printf("%s stream_ops", what);
    gboolean ok = check_struct(&stream_ops_contract, sub, ops, error);
    g_free(sub);
    return ok;
}

gboolean registry_check_class(TdmFeatureKind kind, const char *name, gconstpointer klass,
                              GError **error)
{
    char *what = g_strdup_printf("%s '%s'", registry_kind_names[kind], name);
    gboolean ok = check_struct(&contracts[kind], what, klass, error) &&
                  check_sub_tables(kind, what, klass, error);
    g_free(what);
    return ok;
}

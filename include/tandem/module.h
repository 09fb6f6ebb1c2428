/* tandem/module.h - modules (layers and containers), parameters and models.
 *
 * Modules have an explicit forward and backward (no tensor-level tape). A
 * module owns its output and input-gradient tensors (slots reused from step
 * to step, so a steady-state step allocates nothing) and keeps what backward
 * needs from forward. Gradients accumulate until tdm_model_zero_grad().
 *
 * Parameter and buffer names follow torchvision exactly ("conv1.weight",
 * "layer1.0.bn2.running_mean", "fc.bias"): a child's name is joined to its
 * parent's with a dot, and a child whose name is "" is transparent (its
 * children appear directly under its parent), which lets a Residual block hold
 * its body as a Sequential and still name things "layer1.0.conv1".
 *
 * A TdmModel wraps a root module bound to a device. It places every
 * parameter's value in one contiguous arena, and every gradient in a second
 * one, each parameter a view into them (DDP buckets and ZeRO shards are
 * slices of the gradient arena), and fires the grad-ready hook for each
 * parameter as soon as its gradient is final in the current backward pass.
 */
#ifndef TANDEM_MODULE_H
#define TANDEM_MODULE_H

#include <tandem/backend.h>

G_BEGIN_DECLS

#define TDM_MODULE_IFACE_VERSION TDM_IFACE_VERSION(1, 0)

struct _TdmParam {
    char *name;          /* local name: "weight", "bias", "running_mean" */
    char *full_name;     /* set by tdm_model_new: "layer1.0.conv1.weight" */
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    TdmTensor *value;    /* view into the model's value arena (plain f32) */
    TdmTensor *grad;     /* view into the grad arena; NULL for buffers */
    gboolean requires_grad; /* FALSE: frozen (grad neither computed nor reduced) */
    gboolean is_buffer;  /* running stats etc.: saved, not optimised */
    size_t arena_offset; /* byte offset of value (and grad) in their arenas */
    TdmModule *owner;
    gpointer reserved[4];
};

/* Every slot is required unless its comment says "(optional: NULL means
 * ...)"; the registry refuses a module class with a NULL required slot. */
struct _TdmModuleClass {
    guint32 iface_version; /* TDM_MODULE_IFACE_VERSION */
    guint32 struct_size;   /* sizeof(TdmModuleClass) */
    const char *type_name; /* "Conv2d", "Sequential", ... */
    /* y: transfer none, owned by the module, valid until the next forward. */
    gboolean (*forward)(TdmModule *self, TdmTensor *x, TdmTensor **y, GError **error);
    /* dy: gradient of the output; *dx (transfer none, may be set to NULL
     * when need_dx is FALSE) the gradient of the input. Accumulates into the
     * parameter grads and calls tdm_module_grad_ready() for each.
     * (optional: NULL means the module is forward-only: backward through it
     * fails with TDM_ERROR_UNSUPPORTED) */
    gboolean (*backward)(TdmModule *self, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                         GError **error);
    /* A new module of the same class and configuration (parameters created
     * but not placed; values are copied by TdmModel). Children are cloned by
     * the core, not here.
     * (optional: NULL means the module cannot be replicated: dp and
     * tdm_model_replicate fail naming it) */
    TdmModule *(*clone)(const TdmModule *self, GError **error);
    /* Drop slots and caches (not children/params, which the core frees).
     * (optional: NULL means g_free(priv) is all there is to free) */
    void (*finalize)(TdmModule *self);
    gpointer reserved[4];
};

struct _TdmModule {
    const TdmModuleClass *klass;
    gint ref_count;
    char *name;           /* name within the parent; "" = transparent */
    GPtrArray *children;  /* TdmModule * (owned) */
    GPtrArray *params;    /* TdmParam * (owned), parameters then buffers */
    TdmDevice *device;    /* set when the model is placed */
    TdmModel *model;      /* set when the model is placed (transfer none) */
    gboolean training;
    gpointer priv;        /* class-specific state (allocated by the constructor) */
    gpointer reserved[4];
};

/* ---- generic module API ---- */
/* A new module of class `klass` with `priv` (ownership passes to the
 * module, freed by klass->finalize). Transfer full. */
TDM_API TdmModule *tdm_module_new(const TdmModuleClass *klass, gpointer priv);
TDM_API TdmModule *tdm_module_ref(TdmModule *m);
TDM_API void tdm_module_unref(TdmModule *m);
/* Adds `child` under `name` (takes ownership). */
TDM_API void tdm_module_add_child(TdmModule *m, const char *name, TdmModule *child);
/* Declares a parameter (or buffer) of the given shape; storage comes later
 * from the model's arena. Returns it (transfer none). */
TDM_API TdmParam *tdm_module_add_param(TdmModule *m, const char *name, int ndim,
                                       const int64_t *shape, gboolean is_buffer);
TDM_API TdmParam *tdm_module_find_param(TdmModule *m, const char *local_name);
TDM_API gboolean tdm_module_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error);
TDM_API gboolean tdm_module_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx,
                                     TdmTensor **dx, GError **error);
/* Called by a module's backward once `p`'s gradient for this pass is final. */
TDM_API void tdm_module_grad_ready(TdmModule *m, TdmParam *p);
/* Recursively sets the training flag. */
TDM_API void tdm_module_set_training(TdmModule *m, gboolean training);

/* ---- layers (transfer full) ---- */
TDM_API TdmModule *tdm_linear_new(int in_features, int out_features, gboolean bias);
TDM_API TdmModule *tdm_conv2d_new(int in_channels, int out_channels, int kernel, int stride,
                                  int padding, gboolean bias);
TDM_API TdmModule *tdm_batchnorm2d_new(int num_features, float eps, float momentum);
TDM_API TdmModule *tdm_relu_new(void);
TDM_API TdmModule *tdm_maxpool2d_new(int kernel, int stride, int padding);
TDM_API TdmModule *tdm_avgpool2d_new(int kernel, int stride, int padding);
/* Output size (out_h, out_w); (1, 1) is global average pooling. */
TDM_API TdmModule *tdm_adaptive_avgpool2d_new(int out_h, int out_w);
TDM_API TdmModule *tdm_flatten_new(void);
TDM_API TdmModule *tdm_dropout_new(float p);
TDM_API TdmModule *tdm_sequential_new(void);
/* out = body(x) + (shortcut ? shortcut(x) : x), then ReLU if relu_after.
 * body is transparent (its children are named directly under the block);
 * shortcut is named "downsample" (torchvision). Takes ownership. */
TDM_API TdmModule *tdm_residual_new(TdmModule *body, TdmModule *shortcut, gboolean relu_after);

/* ---- model zoo ---- */
typedef struct {
    int in_channels;   /* 1 for Fashion-MNIST */
    int num_classes;   /* 10 */
    int image_size;    /* input height = width (28); used by mlp / lenet, checked by
                        * vgg* / alexnet (0: unknown) */
    gpointer reserved[4];
} TdmModelConfig;

/* "mlp" (784-512-256-10), "lenet", "resnet8", "resnet20", "resnet18",
 * "resnet34", "resnet50", "vgg11", "vgg16", "vgg16_bn", "alexnet" (the last
 * six as torchvision's, with its parameter names). An image_size below what
 * a VGG (32) or AlexNet (63) takes: TDM_ERROR_INVALID_ARG. Unknown name:
 * TDM_ERROR_NOT_FOUND listing the known ones. Transfer full. */
TDM_API TdmModule *tdm_model_zoo_create(const char *name, const TdmModelConfig *cfg,
                                        GError **error);
/* NULL-terminated list of zoo names (transfer none). */
TDM_API const char *const *tdm_model_zoo_names(void);

/* ---- model: root module + device + arenas ---- */
typedef void (*TdmGradReadyHook)(TdmModel *model, TdmParam *param, gpointer user_data);

struct _TdmModel {
    TdmModule *root;
    TdmDevice *device;
    GPtrArray *params;     /* TdmParam * (transfer none), parameters then buffers, in
                            * definition (forward) order, with full names */
    TdmTensor *value_arena; /* parameters first, then buffers, contiguous f32 */
    TdmTensor *grad_arena;  /* gradients of every parameter (not buffers), at the
                             * same offsets as in value_arena */
    size_t n_values, n_grads; /* element counts */
    TdmGradReadyHook grad_ready;
    gpointer grad_ready_data;
    gpointer priv;          /* core-private (the gradient buffer pool) */
    gpointer reserved[3];
};

/* Place `root` (takes ownership) on `dev`: allocate the arenas, assign full
 * names, and initialise parameters deterministically from `seed`
 * (PyTorch's default schemes: kaiming-uniform for conv/linear, ones/zeros for
 * BN). Transfer full. */
TDM_API TdmModel *tdm_model_new(TdmModule *root, TdmDevice *dev, guint64 seed, GError **error);
/* A copy on another device with the same values (for DataParallel). */
TDM_API TdmModel *tdm_model_replicate(TdmModel *model, TdmDevice *dev, GError **error);
TDM_API void tdm_model_free(TdmModel *model);
TDM_API gboolean tdm_model_forward(TdmModel *model, TdmTensor *x, TdmTensor **y, GError **error);
TDM_API gboolean tdm_model_backward(TdmModel *model, TdmTensor *dy, GError **error);
TDM_API gboolean tdm_model_zero_grad(TdmModel *model, GError **error);
TDM_API void tdm_model_set_training(TdmModel *model, gboolean training);
TDM_API TdmParam *tdm_model_find_param(TdmModel *model, const char *full_name);
/* Freeze (requires_grad = FALSE) every parameter whose full name starts with
 * one of the comma-separated prefixes; returns how many. A BatchNorm2d
 * whose weight and bias are both frozen then normalises with its running
 * statistics, and leaves them alone, in training mode too (PyTorch's
 * model.eval() on frozen batch norms when fine-tuning). */
TDM_API int tdm_model_freeze(TdmModel *model, const char *prefixes);
TDM_API void tdm_model_set_grad_ready_hook(TdmModel *model, TdmGradReadyHook hook,
                                           gpointer user_data);
/* Number of trainable parameters (elements). */
TDM_API int64_t tdm_model_num_parameters(const TdmModel *model);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmModule, tdm_module_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmModel, tdm_model_free)

G_END_DECLS

#endif /* TANDEM_MODULE_H */

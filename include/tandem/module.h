/* SPDX-License-Identifier: MIT */
/**
 * SECTION:module
 * @title: Modules and models
 * @short_description: modules (layers and containers), parameters and models
 * @include: tandem/tandem.h
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

/**
 * TDM_MODULE_IFACE_VERSION:
 *
 * The interface version of #TdmModuleClass this header describes (see
 * TDM_IFACE_VERSION()): a module class puts it in iface_version.
 */
#define TDM_MODULE_IFACE_VERSION TDM_IFACE_VERSION(1, 0)

/**
 * TdmParam:
 * @name: the local name: "weight", "bias", "running_mean"
 * @full_name: set by tdm_model_new(): "layer1.0.conv1.weight"
 * @ndim: the number of dimensions
 * @shape: the extents
 * @value: a view into the model's value arena (plain f32)
 * @grad: (nullable): a view into the grad arena; NULL for buffers
 * @requires_grad: FALSE: frozen (grad neither computed nor reduced)
 * @is_buffer: running statistics and such: saved, not optimised
 * @arena_offset: the byte offset of @value (and @grad) in their arenas
 * @owner: the module that declared it
 * @reserved: zero
 *
 * A parameter or buffer of a module.
 */
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

/**
 * TdmModuleClass:
 * @iface_version: %TDM_MODULE_IFACE_VERSION
 * @struct_size: sizeof(TdmModuleClass)
 * @type_name: the class's name, "Conv2d", "Sequential"...; a static string
 * @forward: computes the output of @x into *@y (transfer none: owned by
 *   the module, valid until its next forward) and keeps what backward
 *   needs; FALSE with the error set, naming the module and the shapes
 * @backward: from @dy, the gradient of the output, accumulates into the
 *   parameters' grads, calling tdm_module_grad_ready() for each, and sets
 *   *@dx (transfer none; may be set to NULL when @need_dx is FALSE) to the
 *   gradient of the input (optional: NULL means the module is forward-only:
 *   backward through it fails with %TDM_ERROR_UNSUPPORTED)
 * @clone: a new module of the same class and configuration, parameters
 *   declared but not placed (transfer full); TdmModel copies the values and
 *   the core clones the children; NULL with the error set on failure
 *   (optional: NULL means the module cannot be replicated: dp and
 *   tdm_model_replicate() fail with %TDM_ERROR_UNSUPPORTED naming it)
 * @finalize: frees the module's slots, caches and priv, not its children
 *   and parameters, which the core frees after it (optional: NULL means
 *   g_free(priv) is all there is to free)
 * @reserved: NULL
 *
 * A module class's slots: a static const struct a plugin gives to
 * tdm_plugin_add_feature() as a TDM_FEATURE_MODULE, or a constructor gives
 * to tdm_module_new(). Every slot is required unless its comment says
 * "(optional: NULL means ...)"; the registry refuses a module class with a
 * NULL required slot.
 */
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

/**
 * TdmModule:
 * @klass: its class
 * @ref_count: the reference count
 * @name: the name within the parent; "": transparent
 * @children: (element-type TdmModule): owned
 * @params: (element-type TdmParam): owned; parameters then buffers
 * @device: set when the model is placed
 * @model: set when the model is placed (transfer none)
 * @training: training or evaluation mode
 * @priv: class-specific state (allocated by the constructor)
 * @reserved: zero
 *
 * A layer or container, with an explicit forward and backward.
 */
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
/**
 * tdm_module_new:
 * @klass: the class; it must outlive the module
 * @priv: (transfer full): the class's state, freed by klass->finalize
 *
 * Makes a module of @klass.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_module_new(const TdmModuleClass *klass, gpointer priv);
/**
 * tdm_module_ref:
 * @m: a module
 *
 * Takes a reference.
 *
 * Returns: (transfer full): @m
 */
TDM_API TdmModule *tdm_module_ref(TdmModule *m);
/**
 * tdm_module_unref:
 * @m: (transfer full) (nullable): a module
 *
 * Drops a reference; the last one frees the module, its children and
 * parameters.
 */
TDM_API void tdm_module_unref(TdmModule *m);
/**
 * tdm_module_add_child:
 * @m: a module
 * @name: the child's name; "" makes it transparent
 * @child: (transfer full): the child
 *
 * Adds a child.
 */
TDM_API void tdm_module_add_child(TdmModule *m, const char *name, TdmModule *child);
/**
 * tdm_module_add_param:
 * @m: a module, not yet placed
 * @name: the local name
 * @ndim: the number of dimensions
 * @shape: (array length=ndim): the extents
 * @is_buffer: a buffer (saved, not optimised) rather than a parameter
 *
 * Declares a parameter or buffer; its storage comes later from the model's
 * arena.
 *
 * Returns: (transfer none): the parameter
 */
TDM_API TdmParam *tdm_module_add_param(TdmModule *m, const char *name, int ndim,
                                       const int64_t *shape, gboolean is_buffer);
/**
 * tdm_module_find_param:
 * @m: a module
 * @local_name: a parameter's local name
 *
 * Looks a parameter of @m (not of its children) up.
 *
 * Returns: (transfer none) (nullable): the parameter, or NULL
 */
TDM_API TdmParam *tdm_module_find_param(TdmModule *m, const char *local_name);
/**
 * tdm_module_forward:
 * @m: a module
 * @x: the input
 * @y: (out) (transfer none): the output, owned by the module, valid until
 *   the next forward
 * @error: return location for a #GError, or NULL
 *
 * Runs the module's forward.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_SHAPE naming the
 * module and the shapes, or the backend's error)
 */
TDM_API gboolean tdm_module_forward(TdmModule *m, TdmTensor *x, TdmTensor **y, GError **error);
/**
 * tdm_module_backward:
 * @m: a module after its forward
 * @dy: the gradient of the output
 * @need_dx: whether the input's gradient is wanted
 * @dx: (out) (transfer none) (nullable): the input's gradient; may be set to
 *   NULL when @need_dx is FALSE
 * @error: return location for a #GError, or NULL
 *
 * Runs the module's backward: accumulates into the parameters' gradients
 * and calls tdm_module_grad_ready() for each.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_UNSUPPORTED for a
 * forward-only module)
 */
TDM_API gboolean tdm_module_backward(TdmModule *m, TdmTensor *dy, gboolean need_dx,
                                     TdmTensor **dx, GError **error);
/**
 * tdm_module_grad_ready:
 * @m: a module
 * @p: one of its parameters
 *
 * Called by a module's backward once @p's gradient for this pass is final;
 * fires the model's grad-ready hook.
 */
TDM_API void tdm_module_grad_ready(TdmModule *m, TdmParam *p);
/**
 * tdm_module_set_training:
 * @m: a module
 * @training: training or evaluation mode
 *
 * Sets the training flag of @m and its children, recursively.
 */
TDM_API void tdm_module_set_training(TdmModule *m, gboolean training);

/* ---- layers (transfer full) ---- */

/**
 * tdm_linear_new:
 * @in_features: inputs
 * @out_features: outputs
 * @bias: with a bias
 *
 * A fully connected layer, as torch.nn.Linear.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_linear_new(int in_features, int out_features, gboolean bias);
/**
 * tdm_conv2d_new:
 * @in_channels: input channels
 * @out_channels: output channels
 * @kernel: the square kernel's size
 * @stride: the stride
 * @padding: zero padding on each side
 * @bias: with a bias
 *
 * A 2-D convolution, as torch.nn.Conv2d.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_conv2d_new(int in_channels, int out_channels, int kernel, int stride,
                                  int padding, gboolean bias);
/**
 * tdm_batchnorm2d_new:
 * @num_features: channels
 * @eps: added to the variance
 * @momentum: of the running statistics
 *
 * A batch norm over channels, as torch.nn.BatchNorm2d.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_batchnorm2d_new(int num_features, float eps, float momentum);
/**
 * tdm_relu_new:
 *
 * A ReLU.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_relu_new(void);
/**
 * tdm_maxpool2d_new:
 * @kernel: the window's size
 * @stride: the stride
 * @padding: the padding
 *
 * Max pooling, as torch.nn.MaxPool2d.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_maxpool2d_new(int kernel, int stride, int padding);
/**
 * tdm_avgpool2d_new:
 * @kernel: the window's size
 * @stride: the stride
 * @padding: the padding
 *
 * Average pooling, as torch.nn.AvgPool2d.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_avgpool2d_new(int kernel, int stride, int padding);
/**
 * tdm_adaptive_avgpool2d_new:
 * @out_h: the output height
 * @out_w: the output width
 *
 * Adaptive average pooling to (@out_h, @out_w); (1, 1) is global average
 * pooling.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_adaptive_avgpool2d_new(int out_h, int out_w);
/**
 * tdm_flatten_new:
 *
 * Flattens all dimensions after the batch.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_flatten_new(void);
/**
 * tdm_dropout_new:
 * @p: the probability of zeroing an element
 *
 * Dropout, active in training mode only.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_dropout_new(float p);
/**
 * tdm_sequential_new:
 *
 * A container running its children in order (tdm_module_add_child()).
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_sequential_new(void);
/**
 * tdm_residual_new:
 * @body: (transfer full): the body, transparent (its children are named
 *   directly under the block)
 * @shortcut: (transfer full) (nullable): the shortcut, named "downsample"
 *   (torchvision); NULL: the identity
 * @relu_after: whether a ReLU follows the sum
 *
 * A residual block: out = body(x) + (shortcut ? shortcut(x) : x), then
 * ReLU if @relu_after.
 *
 * Returns: (transfer full): the module
 */
TDM_API TdmModule *tdm_residual_new(TdmModule *body, TdmModule *shortcut, gboolean relu_after);

/* ---- model zoo ---- */

/**
 * TdmModelConfig:
 * @in_channels: 1 for Fashion-MNIST
 * @num_classes: 10
 * @image_size: the input's height = width (28); used by mlp and lenet,
 *   checked by vgg* and alexnet (0: unknown)
 * @reserved: zero
 *
 * What a model of the zoo is built for.
 */
typedef struct {
    int in_channels;   /* 1 for Fashion-MNIST */
    int num_classes;   /* 10 */
    int image_size;    /* input height = width (28); used by mlp / lenet, checked by
                        * vgg* / alexnet (0: unknown) */
    gpointer reserved[4];
} TdmModelConfig;

/**
 * tdm_model_zoo_create:
 * @name: "mlp" (784-512-256-10), "lenet", "resnet8", "resnet20",
 *   "resnet18", "resnet34", "resnet50", "vgg11", "vgg16", "vgg16_bn",
 *   "alexnet" (the last six as torchvision's, with its parameter names)
 * @cfg: the input and classes
 * @error: return location for a #GError, or NULL
 *
 * Builds a model of the zoo.
 *
 * Returns: (transfer full): the root module, or NULL with
 * %TDM_ERROR_NOT_FOUND listing the known names, or %TDM_ERROR_INVALID_ARG
 * for an image_size below what a VGG (32) or AlexNet (63) takes
 */
TDM_API TdmModule *tdm_model_zoo_create(const char *name, const TdmModelConfig *cfg,
                                        GError **error);
/**
 * tdm_model_zoo_names:
 *
 * The names of the zoo.
 *
 * Returns: (transfer none) (array zero-terminated=1): the names
 */
TDM_API const char *const *tdm_model_zoo_names(void);

/* ---- model: root module + device + arenas ---- */

/**
 * TdmGradReadyHook:
 * @model: the model
 * @param: a parameter whose gradient is final in this backward pass
 * @user_data: what tdm_model_set_grad_ready_hook() was given
 *
 * Called as soon as a parameter's gradient is final (ddp starts its bucket
 * all-reduce from here).
 */
typedef void (*TdmGradReadyHook)(TdmModel *model, TdmParam *param, gpointer user_data);

/**
 * TdmModel:
 * @root: the root module
 * @device: the device
 * @params: (element-type TdmParam): parameters then buffers, in definition
 *   (forward) order, with full names (transfer none)
 * @value_arena: parameters first, then buffers, contiguous f32
 * @grad_arena: the gradients of every parameter (not buffers), at the same
 *   offsets as in @value_arena
 * @n_values: elements of @value_arena
 * @n_grads: elements of @grad_arena
 * @grad_ready: (nullable): the grad-ready hook
 * @grad_ready_data: its data
 * @priv: core-private (the gradient buffer pool)
 * @reserved: zero
 *
 * A root module bound to a device, its parameters in two arenas.
 */
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

/**
 * tdm_model_new:
 * @root: (transfer full): the root module
 * @dev: the device
 * @seed: the seed of the initialisation
 * @error: return location for a #GError, or NULL
 *
 * Places @root on @dev: allocates the arenas, assigns full names, and
 * initialises parameters deterministically from @seed (PyTorch's default
 * schemes: kaiming-uniform for conv and linear, ones and zeros for batch
 * norm).
 *
 * Returns: (transfer full): the model, free it with tdm_model_free(); or
 * NULL with @error set (out of memory on the device)
 */
TDM_API TdmModel *tdm_model_new(TdmModule *root, TdmDevice *dev, guint64 seed, GError **error);
/**
 * tdm_model_replicate:
 * @model: a model
 * @dev: another device
 * @error: return location for a #GError, or NULL
 *
 * A copy on another device with the same values (for DataParallel).
 *
 * Returns: (transfer full): the copy, or NULL with an error naming a module
 * that cannot be cloned
 */
TDM_API TdmModel *tdm_model_replicate(TdmModel *model, TdmDevice *dev, GError **error);
/**
 * tdm_model_free:
 * @model: (transfer full) (nullable): a model
 *
 * Frees the model, its modules and arenas.
 */
TDM_API void tdm_model_free(TdmModel *model);
/**
 * tdm_model_forward:
 * @model: a model
 * @x: the input batch on the model's device
 * @y: (out) (transfer none): the output, owned by the model, valid until the
 *   next forward
 * @error: return location for a #GError, or NULL
 *
 * Runs the forward pass.
 *
 * Returns: TRUE, or FALSE with @error set (%TDM_ERROR_SHAPE naming the
 * module and the shapes, or the backend's error)
 */
TDM_API gboolean tdm_model_forward(TdmModel *model, TdmTensor *x, TdmTensor **y, GError **error);
/**
 * tdm_model_backward:
 * @model: a model after its forward
 * @dy: the gradient of the output
 * @error: return location for a #GError, or NULL
 *
 * Runs the backward pass, accumulating into the gradient arena and firing
 * the grad-ready hook.
 *
 * Returns: TRUE, or FALSE with @error set
 */
TDM_API gboolean tdm_model_backward(TdmModel *model, TdmTensor *dy, GError **error);
/**
 * tdm_model_zero_grad:
 * @model: a model
 * @error: return location for a #GError, or NULL
 *
 * Zeroes every gradient.
 *
 * Returns: TRUE, or FALSE with the device's error
 */
TDM_API gboolean tdm_model_zero_grad(TdmModel *model, GError **error);
/**
 * tdm_model_set_training:
 * @model: a model
 * @training: training or evaluation mode
 *
 * Sets the mode of every module.
 */
TDM_API void tdm_model_set_training(TdmModel *model, gboolean training);
/**
 * tdm_model_find_param:
 * @model: a model
 * @full_name: "layer1.0.conv1.weight"
 *
 * Looks a parameter or buffer up by its full name.
 *
 * Returns: (transfer none) (nullable): the parameter, or NULL
 */
TDM_API TdmParam *tdm_model_find_param(TdmModel *model, const char *full_name);
/**
 * tdm_model_freeze:
 * @model: a model
 * @prefixes: comma-separated prefixes of full names
 *
 * Freezes (requires_grad = FALSE) every parameter whose full name starts
 * with one of the prefixes. A BatchNorm2d whose weight and bias are both
 * frozen then normalises with its running statistics, and leaves them
 * alone, in training mode too (PyTorch's model.eval() on frozen batch norms
 * when fine-tuning).
 *
 * Returns: how many parameters were frozen
 */
TDM_API int tdm_model_freeze(TdmModel *model, const char *prefixes);
/**
 * TdmRecompute:
 * @TDM_RECOMPUTE_NONE: keep every activation the backward reads (the
 *   default)
 * @TDM_RECOMPUTE_POINTWISE: recompute the outputs of 1x1 convolutions
 *   (a bottleneck block's first and last, the downsample shortcuts)
 * @TDM_RECOMPUTE_ALL: recompute the outputs of every convolution
 * @TDM_RECOMPUTE_AUTO: choose the convolutions from the first training
 *   step (`tandem train`'s default): that step recomputes every one and
 *   measures, for each, the bytes its output holds and the multiply-adds
 *   of computing it again, and the memory held at the step's peak (the
 *   device's; on a device whose memory is the host's, the process's
 *   resident set when that is more); the steps after it recompute those
 *   whose output frees a share of the step's memory at least twice the
 *   share its recomputation adds to the step's convolution work, taken
 *   best first (memory times the square of the work goes down with
 *   each). Without a peak figure from the device nothing is chosen.
 *
 * Which activations a training step computes a second time in backward
 * instead of keeping them from the forward (the memory-for-time trade of
 * PyTorch's torch.utils.checkpoint). Only the output of a convolution
 * that a batch norm reads next is concerned: the batch norm's backward
 * needs it, nothing else does, and the convolution's forward is run again
 * just before, into a buffer of the model's gradient pool. The results
 * are those of keeping it, within the backend's conformance tolerance.
 */
typedef enum {
    TDM_RECOMPUTE_NONE,
    TDM_RECOMPUTE_POINTWISE,
    TDM_RECOMPUTE_ALL,
    TDM_RECOMPUTE_AUTO,
} TdmRecompute;

/**
 * tdm_model_set_recompute:
 * @model: a model
 * @what: which activations to compute again in backward
 *
 * Sets the memory-for-time trade of the training steps that follow
 * (under %TDM_RECOMPUTE_AUTO, the next training step chooses anew).
 */
TDM_API void tdm_model_set_recompute(TdmModel *model, TdmRecompute what);
/**
 * tdm_model_get_recompute:
 * @model: a model
 *
 * The memory-for-time trade set with tdm_model_set_recompute().
 *
 * Returns: the recompute policy of @model (%TDM_RECOMPUTE_NONE unless
 * set)
 */
TDM_API TdmRecompute tdm_model_get_recompute(TdmModel *model);
/**
 * tdm_model_set_grad_ready_hook:
 * @model: a model
 * @hook: (nullable): the hook; NULL: none
 * @user_data: passed to @hook
 *
 * Sets the hook called as each parameter's gradient becomes final.
 */
TDM_API void tdm_model_set_grad_ready_hook(TdmModel *model, TdmGradReadyHook hook,
                                           gpointer user_data);
/**
 * tdm_model_num_parameters:
 * @model: a model
 *
 * The number of trainable parameter elements.
 *
 * Returns: the count
 */
TDM_API int64_t tdm_model_num_parameters(const TdmModel *model);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmModule, tdm_module_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TdmModel, tdm_model_free)

G_END_DECLS

#endif /* TANDEM_MODULE_H */

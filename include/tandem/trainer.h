/* SPDX-License-Identifier: MIT */
/**
 * SECTION:trainer
 * @title: Training
 * @short_description: training configuration and the training loop
 * @include: tandem/tandem.h
 *
 * Training configuration and the training loop.
 *
 * TdmTrainConfig holds every knob of a run. It is filled from defaults, an
 * INI file (GKeyFile: [model] [data] [optim] [train] sections) and
 * "section.key=value" overrides, all through tdm_train_config_set(), which
 * validates each value and names the key (and the file) on error. The
 * trainer loop itself is tdm_trainer_run() in core/trainer.c.
 *
 * Every key is one entry of TDM_TRAIN_CONFIG_KEYS below, and everything
 * else is made from that list: the struct's fields, the defaults
 * (tdm_train_config_init), validation and the INI keys (core/config.c),
 * and the command line's flags with their --help text (`tandem train`,
 * `tandem eval`). So a new key is one entry, appended at the end: the
 * fields' order is the ABI, and a new field takes the room of one of
 * `reserved` (core/config.c checks the struct's size). An X-macro rather
 * than a table of offsets, because the fields themselves come from it.
 *
 * KEY(field, TYPE, "section.key", default, range, flag, short, ARG, scope, help):
 *   TYPE     STRING (char *; "" = unset), PATH (a file name; the same),
 *            NAME (char *, never empty), INT (int), INT64 (int64_t),
 *            UINT64 (guint64), FLOAT (float) or BOOL (gboolean: 1/0,
 *            true/false, yes/no, on/off)
 *   default  the value's text, set through tdm_train_config_set() by
 *            tdm_train_config_init(); NULL = 0, FALSE or unset
 *   range    "[min, max]", "(min, max]" or ">= min" for numbers, "a|b|c"
 *            for the names allowed; NULL = any value of the type
 *   flag     the long command-line flag ("batch-size"), NULL = none (INI
 *            and --set only), with its short letter (0 = none) and the
 *            name of its argument in --help; a BOOL key's flag takes no
 *            argument and sets true, or false when it starts with "no-"
 *   scope    TRAIN: `tandem train` only; TRAIN_EVAL: `tandem eval` too (it
 *            reads the test split as the training did); NONE: no flag
 *   help     the flag's --help text (the key is added to it)
 * ALIAS(flag, short, "section.key", value, ARG, scope, help): one more
 *   flag for a key: it sets `value`, or takes ARG when value is NULL.
 */
#ifndef TANDEM_TRAINER_H
#define TANDEM_TRAINER_H

#include <tandem/strategy.h>

G_BEGIN_DECLS

/**
 * TDM_TRAIN_CONFIG_KEYS:
 * @KEY: a macro taking (field, TYPE, "section.key", default, range, flag,
 *   short, ARG, scope, help)
 * @ALIAS: a macro taking (flag, short, "section.key", value, ARG, scope,
 *   help)
 *
 * The list of every configuration key (see this section's introduction
 * for the columns): expands to @KEY(...) once per key and @ALIAS(...) once
 * per extra flag, in order. #TdmTrainConfig's fields, the defaults,
 * validation, the INI keys and the command line's flags are all made from
 * it.
 */
/* clang-format off */
#define TDM_TRAIN_CONFIG_KEYS(KEY, ALIAS)                                                     \
    KEY(model, NAME, "model.name", "mlp", NULL,                                              \
        "model", 'm', "NAME", TRAIN_EVAL, "Model from the zoo")                              \
    KEY(in_channels, INT, "model.in_channels", NULL, "[0, 4]",                               \
        NULL, 0, NULL, NONE, "Input channels; 0 = the dataset's")                            \
    KEY(num_classes, INT, "model.num_classes", NULL, "[0, 1000000]",                         \
        NULL, 0, NULL, NONE, "Classes; 0 = the dataset's")                                   \
    KEY(init_path, PATH, "model.init", NULL, NULL,                                           \
        "init", 0, "FILE", TRAIN_EVAL, "Start from these weights (.safetensors or PyTorch .pth)")\
    KEY(freeze, STRING, "model.freeze", NULL, NULL,                                          \
        "freeze", 0, "PREFIXES", TRAIN,                                                      \
        "Freeze parameters with these comma-separated name prefixes; a batch norm frozen "   \
        "whole stays in eval mode (its running statistics) while the rest trains")           \
    KEY(dataset, NAME, "data.dataset", "fashion-mnist", NULL,                                \
        "dataset", 'd', "SPEC", TRAIN_EVAL,                                                  \
        "Dataset: fashion-mnist, mnist, \"KIND path=DIR key=value...\" or KIND:PATH")         \
    KEY(limit, INT64, "data.limit", NULL, ">= 0",                                            \
        "limit", 'n', "N", TRAIN, "Use the first N training images; 0 = all")                \
    KEY(batch_size, INT, "data.batch_size", "64", "[1, 1048576]",                            \
        "batch-size", 'b', "N", TRAIN_EVAL, "Batch size")                                    \
    KEY(workers, INT, "data.workers", NULL, "[0, 1024]",                                     \
        "workers", 0, "N", TRAIN_EVAL, "Loader threads")                                     \
    KEY(normalize, BOOL, "data.normalize", "true", NULL,                                     \
        NULL, 0, NULL, NONE, "Normalise images by the dataset's mean and std")               \
    KEY(prefetch, INT, "data.prefetch", "2", "[0, 1024]",                                    \
        "prefetch", 0, "N", TRAIN_EVAL, "Batches each loader thread prepares ahead")         \
    KEY(transforms, STRING, "data.transforms", NULL, NULL,                                   \
        "transforms", 0, "PIPELINE", TRAIN_EVAL,                                             \
        "Augmentation pipeline, e.g. \"random-crop 28 pad=2 | hflip\"")                      \
    KEY(pin_memory, BOOL, "data.pin_memory", NULL, NULL,                                     \
        "pin-memory", 0, NULL, TRAIN_EVAL, "Stage batches in the backend's pinned host memory") \
    KEY(optimizer, NAME, "optim.name", "sgd", NULL,                                          \
        "optimizer", 0, "SPEC", TRAIN,                                                       \
        "sgd, adamw or a plugin's, with hyperparameters: \"sgd momentum=0.9\" (they win)")    \
    KEY(lr, FLOAT, "optim.lr", "0.05", "[0, 1e6]",                                           \
        "lr", 0, "LR", TRAIN, "Learning rate")                                               \
    KEY(momentum, FLOAT, "optim.momentum", "0.9", "[0, 1]",                                  \
        "momentum", 0, "M", TRAIN, "SGD momentum")                                           \
    KEY(nesterov, BOOL, "optim.nesterov", NULL, NULL,                                        \
        "nesterov", 0, NULL, TRAIN, "Nesterov momentum")                                     \
    KEY(weight_decay, FLOAT, "optim.weight_decay", "5e-4", "[0, 1e6]",                       \
        "weight-decay", 0, "WD", TRAIN, "Weight decay")                                      \
    KEY(beta1, FLOAT, "optim.beta1", "0.9", "[0, 1]",                                        \
        NULL, 0, NULL, NONE, "AdamW's beta1")                                                \
    KEY(beta2, FLOAT, "optim.beta2", "0.999", "[0, 1]",                                      \
        NULL, 0, NULL, NONE, "AdamW's beta2")                                                \
    KEY(eps, FLOAT, "optim.eps", "1e-8", "(0, 1]",                                           \
        NULL, 0, NULL, NONE, "AdamW's epsilon")                                              \
    KEY(schedule, NAME, "optim.schedule", "constant", "constant|step|cosine",                \
        "schedule", 0, "KIND", TRAIN, "constant, step or cosine")                            \
    KEY(warmup_steps, INT64, "optim.warmup_steps", NULL, ">= 0",                             \
        "warmup-steps", 0, "N", TRAIN, "Linear warmup steps")                                \
    KEY(step_size, INT, "optim.step_size", "30", "[1, 2147483647]",                          \
        NULL, 0, NULL, NONE, "Epochs between the step schedule's decays")                    \
    KEY(gamma, FLOAT, "optim.gamma", "0.1", "(0, 1e6]",                                      \
        NULL, 0, NULL, NONE, "The step schedule's decay factor")                             \
    KEY(min_lr, FLOAT, "optim.min_lr", NULL, "[0, 1e6]",                                     \
        NULL, 0, NULL, NONE, "The cosine schedule's final learning rate")                    \
    KEY(label_smoothing, FLOAT, "optim.label_smoothing", NULL, "[0, 1]",                     \
        NULL, 0, NULL, NONE, "Label smoothing of the cross-entropy loss")                    \
    KEY(epochs, INT, "train.epochs", "1", "[1, 1000000]",                                    \
        "epochs", 'e', "N", TRAIN, "Epochs")                                                 \
    KEY(seed, UINT64, "train.seed", NULL, NULL,                                              \
        "seed", 0, "N", TRAIN_EVAL, "Random seed")                                           \
    KEY(threads, INT, "train.threads", NULL, "[0, 4096]",                                    \
        "threads", 't', "N", TRAIN_EVAL, "Compute threads, 0 = all cores")                   \
    KEY(device, NAME, "train.device", "auto", NULL,                                          \
        "device", 0, "SPEC", TRAIN_EVAL, "Device: auto, cpu, ref, cuda:1...")                \
    KEY(strategy, NAME, "train.strategy", "single", NULL,                                    \
        "strategy", 0, "SPEC", TRAIN,                                                        \
        "single, dp, ddp, zero1, with parameters: \"ddp bucket-mb=25\"")                      \
    KEY(accumulate, INT, "train.accumulate", "1", "[1, 1048576]",                            \
        "accumulate", 0, "N", TRAIN, "Micro-batches per optimizer step")                     \
    KEY(log_file, PATH, "train.log_file", NULL, NULL,                                        \
        "log-file", 'l', "FILE", TRAIN, "Write JSON lines here")                             \
    KEY(save_path, PATH, "train.save", NULL, NULL,                                           \
        "save", 'o', "FILE", TRAIN,                                                          \
        "Save the final weights as safetensors (rank 0; every rank when FILE has {rank})")   \
    KEY(eval, BOOL, "train.eval", "true", NULL,                                              \
        "no-eval", 0, NULL, TRAIN, "Skip evaluation")                                        \
    KEY(progress, INT, "train.progress", "50", "[0, 2147483647]",                            \
        "progress", 'p', "N", TRAIN, "Progress line every N steps, 0 = never")               \
    KEY(collective, STRING, "train.collective", NULL, NULL,                                  \
        "collective", 0, "SPEC", TRAIN,                                                      \
        "Collective plugin for ddp/zero1: shm, gloo, ^gloo...; unset: TDM_COLLECTIVE, "      \
        "else automatic")                                                                    \
    KEY(devices, STRING, "train.devices", NULL, NULL,                                        \
        "devices", 0, "LIST", TRAIN,                                                         \
        "Devices of a dp run, e.g. ref:0,ref:1; unset: TDM_DEVICES")                         \
    KEY(timeout, INT, "train.timeout", NULL, "[0, 1000000000]",                              \
        "timeout", 0, "S", TRAIN,                                                            \
        "Seconds before a collective or the rendezvous gives up; 0: TDM_TIMEOUT, else 300")  \
    KEY(test_transforms, STRING, "data.test_transforms", NULL, NULL,                         \
        "test-transforms", 0, "PIPELINE", TRAIN_EVAL,                                        \
        "Evaluation pipeline, e.g. \"resize 64 | center-crop 64\"; default: none, or "       \
        "resize and center-crop to the training size")                                       \
    KEY(init_skip, STRING, "model.init_skip", NULL, NULL,                                    \
        "init-skip", 0, "PREFIXES", TRAIN,                                                   \
        "Leave parameters with these name prefixes out of --init (they keep their fresh "    \
        "values), e.g. fc for a new classifier")                                             \
    KEY(log_every, INT, "train.log_every", "1", "[1, 2147483647]",                           \
        "log-every", 0, "N", TRAIN,                                                          \
        "A step event in the log every N steps, their figures added up (N > 1: fewer "       \
        "waits for an accelerator)")                                                         \
    KEY(precision, NAME, "train.precision", "fp32", "fp32|tf32|bf16",                        \
        "precision", 0, "NAME", TRAIN_EVAL,                                                  \
        "What GEMM and convolution compute in: fp32 (strict, every backend), tf32 or bf16 "  \
        "(cuda); weights, batch-norm statistics and the loss stay fp32")                     \
    KEY(lr_groups, STRING, "optim.lr_groups", NULL, NULL,                                    \
        "lr-group", 0, "PREFIX=LR,...", TRAIN,                                               \
        "Learning rates of parameter groups by name prefix, as --freeze matches them (the "  \
        "longest prefix wins), e.g. \"fc=0.01,layer4=0.001\"; the others train at --lr, "    \
        "and the schedule runs every group from its own rate")                               \
    KEY(clip_grad_norm, FLOAT, "optim.clip_grad_norm", NULL, "[0, 1e30]",                    \
        "clip-grad-norm", 0, "X", TRAIN,                                                     \
        "Clip the gradients to total 2-norm X before each update, as PyTorch's "             \
        "clip_grad_norm_ (the norm over every rank's); 0 = off")                             \
    KEY(early_stop_patience, INT, "train.early_stop_patience", NULL, "[0, 1000000]",         \
        "early-stop-patience", 0, "N", TRAIN,                                                \
        "Stop when the test accuracy has not improved for N evaluations (one per epoch); "   \
        "0 = never")                                                                         \
    KEY(checkpoint_dir, PATH, "train.checkpoint_dir", NULL, NULL,                            \
        "checkpoint-dir", 0, "DIR", TRAIN,                                                   \
        "Write checkpoints (weights, optimizer, data position, RNG) into DIR as "            \
        "ckpt-<step>.safetensors, with DIR/latest")                                          \
    KEY(checkpoint_every, INT64, "train.checkpoint_every", NULL, ">= 0",                     \
        "checkpoint-every", 0, "N", TRAIN,                                                   \
        "A checkpoint every N steps, and one at the end; 0 = at the end only")               \
    KEY(resume, PATH, "train.resume", NULL, NULL,                                            \
        "resume", 0, "PATH", TRAIN,                                                          \
        "Continue exactly from the newest checkpoint of directory PATH, or from file PATH")  \
    KEY(max_steps, INT64, "train.max_steps", NULL, ">= 0",                                   \
        "max-steps", 0, "N", TRAIN,                                                          \
        "Stop after global step N (counted across resumes); 0 = after train.epochs")         \
    KEY(keep_last, INT, "train.keep_last", "3", "[0, 2147483647]",                           \
        "keep-last", 0, "N", TRAIN, "Keep the N newest checkpoints; 0 = keep all")           \
    KEY(keep_best, BOOL, "train.keep_best", NULL, NULL,                                      \
        "keep-best", 0, NULL, TRAIN,                                                         \
        "Also keep the checkpoint of the best test accuracy, as DIR/best")                   \
    KEY(strategy_args, STRING, "strategy.args", NULL, NULL,                                  \
        NULL, 0, NULL, NONE,                                                                 \
        "Parameters of train.strategy, \"key=value ...\"; --set strategy.KEY=VALUE and a "    \
        "config's [strategy] KEY=VALUE add one each")                                        \
    KEY(recompute, NAME, "model.recompute", "auto", "auto|none|pointwise|all",               \
        "recompute", 0, "WHAT", TRAIN,                                                       \
        "Compute convolution outputs again in backward instead of keeping them: auto "       \
        "(chosen on the first step), none, pointwise (1x1 convolutions) or all: less "       \
        "memory for more time")                                                              \
    ALIAS("backend", 0, "train.device", NULL, "NAME", TRAIN_EVAL, "Same as --device")        \
    ALIAS("quiet", 'q', "train.progress", "0", NULL, TRAIN, "No progress output")
/* clang-format on */

/**
 * TDM_TRAIN_CONFIG_CTYPE_STRING:
 *
 * The C type of a STRING key's field: a string the struct owns ("" =
 * unset).
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_PATH:
 *
 * The C type of a PATH key's field: a file name the struct owns.
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_NAME:
 *
 * The C type of a NAME key's field: a string the struct owns, never empty.
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_INT:
 *
 * The C type of an INT key's field.
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_INT64:
 *
 * The C type of an INT64 key's field.
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_UINT64:
 *
 * The C type of a UINT64 key's field.
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_FLOAT:
 *
 * The C type of a FLOAT key's field.
 */
/**
 * TDM_TRAIN_CONFIG_CTYPE_BOOL:
 *
 * The C type of a BOOL key's field.
 */
/**
 * TDM_TRAIN_CONFIG_FIELD_:
 * @field: the field's name
 * @type: the key's TYPE
 * @...: the key's other columns, unused
 *
 * Not for use on its own: the KEY of TDM_TRAIN_CONFIG_KEYS() that declares
 * one field of #TdmTrainConfig.
 */
/**
 * TDM_TRAIN_CONFIG_NO_FIELD_:
 * @...: an alias's columns, unused
 *
 * Not for use on its own: the ALIAS of TDM_TRAIN_CONFIG_KEYS() when the
 * fields are declared (an alias has no field).
 */
#define TDM_TRAIN_CONFIG_CTYPE_STRING char *
#define TDM_TRAIN_CONFIG_CTYPE_PATH char *
#define TDM_TRAIN_CONFIG_CTYPE_NAME char *
#define TDM_TRAIN_CONFIG_CTYPE_INT int
#define TDM_TRAIN_CONFIG_CTYPE_INT64 int64_t
#define TDM_TRAIN_CONFIG_CTYPE_UINT64 guint64
#define TDM_TRAIN_CONFIG_CTYPE_FLOAT float
#define TDM_TRAIN_CONFIG_CTYPE_BOOL gboolean
#define TDM_TRAIN_CONFIG_FIELD_(field, type, ...) TDM_TRAIN_CONFIG_CTYPE_##type field;
#define TDM_TRAIN_CONFIG_NO_FIELD_(...)

/**
 * TdmTrainConfig:
 * @model: model.name (--model): Model from the zoo (default mlp)
 * @in_channels: model.in_channels: Input channels; 0 = the dataset's (range
 *   [0, 4])
 * @num_classes: model.num_classes: Classes; 0 = the dataset's (range [0,
 *   1000000])
 * @init_path: model.init (--init): Start from these weights (.safetensors
 *   or PyTorch .pth)
 * @freeze: model.freeze (--freeze): Freeze parameters with these
 *   comma-separated name prefixes; a batch norm frozen whole stays in eval
 *   mode (its running statistics) while the rest trains
 * @dataset: data.dataset (--dataset): Dataset: fashion-mnist, mnist, "KIND
 *   path=DIR key=value..." or KIND:PATH (default fashion-mnist)
 * @limit: data.limit (--limit): Use the first N training images; 0 = all
 *   (range >= 0)
 * @batch_size: data.batch_size (--batch-size): Batch size (range [1,
 *   1048576]; default 64)
 * @workers: data.workers (--workers): Loader threads (range [0, 1024])
 * @normalize: data.normalize: Normalise images by the dataset's mean and
 *   std (default true)
 * @prefetch: data.prefetch (--prefetch): Batches each loader thread
 *   prepares ahead (range [0, 1024]; default 2)
 * @transforms: data.transforms (--transforms): Augmentation pipeline, e.g.
 *   "random-crop 28 pad=2 | hflip"
 * @pin_memory: data.pin_memory (--pin-memory): Stage batches in the
 *   backend's pinned host memory
 * @optimizer: optim.name (--optimizer): sgd, adamw or a plugin's, with
 *   hyperparameters: "sgd momentum=0.9" (they win) (default sgd)
 * @lr: optim.lr (--lr): Learning rate (range [0, 1e6]; default 0.05)
 * @momentum: optim.momentum (--momentum): SGD momentum (range [0, 1];
 *   default 0.9)
 * @nesterov: optim.nesterov (--nesterov): Nesterov momentum
 * @weight_decay: optim.weight_decay (--weight-decay): Weight decay (range
 *   [0, 1e6]; default 5e-4)
 * @beta1: optim.beta1: AdamW's beta1 (range [0, 1]; default 0.9)
 * @beta2: optim.beta2: AdamW's beta2 (range [0, 1]; default 0.999)
 * @eps: optim.eps: AdamW's epsilon (range (0, 1]; default 1e-8)
 * @schedule: optim.schedule (--schedule): constant, step or cosine (range
 *   constant|step|cosine; default constant)
 * @warmup_steps: optim.warmup_steps (--warmup-steps): Linear warmup steps
 *   (range >= 0)
 * @step_size: optim.step_size: Epochs between the step schedule's decays
 *   (range [1, 2147483647]; default 30)
 * @gamma: optim.gamma: The step schedule's decay factor (range (0, 1e6];
 *   default 0.1)
 * @min_lr: optim.min_lr: The cosine schedule's final learning rate (range
 *   [0, 1e6])
 * @label_smoothing: optim.label_smoothing: Label smoothing of the
 *   cross-entropy loss (range [0, 1])
 * @epochs: train.epochs (--epochs): Epochs (range [1, 1000000]; default 1)
 * @seed: train.seed (--seed): Random seed
 * @threads: train.threads (--threads): Compute threads, 0 = all cores
 *   (range [0, 4096])
 * @device: train.device (--device): Device: auto, cpu, ref, cuda:1...
 *   (default auto)
 * @strategy: train.strategy (--strategy): single, dp, ddp, zero1, with
 *   parameters: "ddp bucket-mb=25" (default single)
 * @accumulate: train.accumulate (--accumulate): Micro-batches per optimizer
 *   step (range [1, 1048576]; default 1)
 * @log_file: train.log_file (--log-file): Write JSON lines here
 * @save_path: train.save (--save): Save the final weights as safetensors
 * @eval: train.eval (--no-eval): Skip evaluation (default true)
 * @progress: train.progress (--progress): Progress line every N steps, 0 =
 *   never (range [0, 2147483647]; default 50)
 * @collective: train.collective (--collective): Collective plugin for
 *   ddp/zero1: shm, gloo, ^gloo...; unset: TDM_COLLECTIVE, else automatic
 * @devices: train.devices (--devices): Devices of a dp run, e.g.
 *   ref:0,ref:1; unset: TDM_DEVICES
 * @timeout: train.timeout (--timeout): Seconds before a collective or the
 *   rendezvous gives up; 0: TDM_TIMEOUT, else 300 (range [0, 1000000000])
 * @test_transforms: data.test_transforms (--test-transforms): Evaluation
 *   pipeline, e.g. "resize 64 | center-crop 64"; default: none, or resize
 *   and center-crop to the training size
 * @init_skip: model.init_skip (--init-skip): Leave parameters with these
 *   name prefixes out of --init (they keep their fresh values), e.g. fc for
 *   a new classifier
 * @log_every: train.log_every (--log-every): A step event in the log every
 *   N steps, their figures added up (N > 1: fewer waits for an accelerator)
 *   (range [1, 2147483647]; default 1)
 * @precision: train.precision (--precision): What GEMM and convolution
 *   compute in: fp32 (strict, every backend), tf32 or bf16 (cuda); weights,
 *   batch-norm statistics and the loss stay fp32 (range fp32|tf32|bf16;
 *   default fp32)
 * @lr_groups: optim.lr_groups (--lr-group): Learning rates of parameter
 *   groups by name prefix, as --freeze matches them (the longest prefix
 *   wins), e.g. "fc=0.01,layer4=0.001"; the others train at --lr, and the
 *   schedule runs every group from its own rate
 * @clip_grad_norm: optim.clip_grad_norm (--clip-grad-norm): Clip the
 *   gradients to total 2-norm X before each update, as PyTorch's
 *   clip_grad_norm_ (the norm over every rank's); 0 = off (range [0, 1e30])
 * @early_stop_patience: train.early_stop_patience (--early-stop-patience):
 *   Stop when the test accuracy has not improved for N evaluations (one per
 *   epoch); 0 = never (range [0, 1000000])
 * @checkpoint_dir: train.checkpoint_dir (--checkpoint-dir): Write
 *   checkpoints (weights, optimizer, data position, RNG) into DIR as
 *   ckpt-<step>.safetensors, with DIR/latest
 * @checkpoint_every: train.checkpoint_every (--checkpoint-every): A
 *   checkpoint every N steps, and one at the end; 0 = at the end only
 *   (range >= 0)
 * @resume: train.resume (--resume): Continue exactly from the newest
 *   checkpoint of directory PATH, or from file PATH
 * @max_steps: train.max_steps (--max-steps): Stop after global step N
 *   (counted across resumes); 0 = after train.epochs (range >= 0)
 * @keep_last: train.keep_last (--keep-last): Keep the N newest checkpoints;
 *   0 = keep all (range [0, 2147483647]; default 3)
 * @keep_best: train.keep_best (--keep-best): Also keep the checkpoint of
 *   the best test accuracy, as DIR/best
 * @strategy_args: strategy.args: Parameters of train.strategy, "key=value
 *   ..."; --set strategy.KEY=VALUE and a config's [strategy] KEY=VALUE add
 *   one each
 * @recompute: model.recompute (--recompute): Compute convolution outputs
 *   again in backward instead of keeping them: auto (chosen on the first
 *   step), none, pointwise (1x1 convolutions) or all: less memory for more
 *   time (default auto)
 * @reserved: zero: room for new keys
 *
 * Every knob of a run: one field per key of TDM_TRAIN_CONFIG_KEYS, named as
 * its first column says (model.init is init_path, train.save save_path,
 * optim.name optimizer, model.name model). Fill it with
 * tdm_train_config_init(), then tdm_train_config_load() and
 * tdm_train_config_set(); free its strings with tdm_train_config_clear().
 * The strings belong to the struct: set them only through
 * tdm_train_config_set(). Each field above gives its key, its
 * command-line flag, its --help text, the range checked and the default.
 *
 * A new key takes the room of one of `reserved` (its field is the size of
 * a pointer or smaller), so that the struct's size, which core/config.c
 * checks, stays the ABI's.
 */
typedef struct {
    TDM_TRAIN_CONFIG_KEYS(TDM_TRAIN_CONFIG_FIELD_, TDM_TRAIN_CONFIG_NO_FIELD_)
    gpointer reserved[4];
} TdmTrainConfig;

/**
 * tdm_train_config_init:
 * @cfg: (out caller-allocates): the configuration
 *
 * Sets every key to its default.
 */
TDM_API void tdm_train_config_init(TdmTrainConfig *cfg);
/**
 * tdm_train_config_clear:
 * @cfg: a configuration
 *
 * Frees its strings (not @cfg itself).
 */
TDM_API void tdm_train_config_clear(TdmTrainConfig *cfg);
/**
 * tdm_train_config_set:
 * @cfg: a configuration
 * @key: "section.key", e.g. "optim.lr"
 * @value: the value as text
 * @error: return location for a #GError, or NULL
 *
 * Sets one value, checked against the key's type and range.
 * "strategy.KEY" (other than strategy.args) is a parameter of the strategy:
 * "KEY=VALUE" is added to strategy.args, replacing an earlier KEY, and is
 * checked against the strategy's specs when the trainer sets it up.
 *
 * Returns: TRUE, or FALSE with %TDM_ERROR_INVALID_ARG naming the key and
 * the value (an unknown key, an invalid value)
 */
TDM_API gboolean tdm_train_config_set(TdmTrainConfig *cfg, const char *key, const char *value,
                                      GError **error);
/**
 * tdm_train_config_load:
 * @cfg: a configuration
 * @path: an INI file ([model] [data] [optim] [train] sections)
 * @error: return location for a #GError, or NULL
 *
 * Reads an INI file through tdm_train_config_set().
 *
 * Returns: TRUE, or FALSE with an error naming the file and the key
 */
TDM_API gboolean tdm_train_config_load(TdmTrainConfig *cfg, const char *path, GError **error);
/**
 * tdm_train_config_keys:
 *
 * Every key.
 *
 * Returns: (transfer none) (array zero-terminated=1): "section.key" names
 */
TDM_API const char *const *tdm_train_config_keys(void);

/**
 * TdmTrainSummary:
 * @steps: the steps run
 * @images: training images processed
 * @train_seconds: time in the training loop (steps only)
 * @images_per_s: @images / @train_seconds
 * @first_step_s: from process start to the first step's start
 * @final_loss: the mean loss of the last epoch
 * @test_accuracy: -1 when not evaluated
 * @test_loss: the mean test loss
 * @peak_rss_bytes: the process's peak resident memory (getrusage)
 * @reserved: zero
 *
 * What tdm_trainer_run() reports.
 */
typedef struct {
    int64_t steps;
    int64_t images;         /* training images processed */
    double train_seconds;   /* time in the training loop (steps only) */
    double images_per_s;
    double first_step_s;    /* from process start to the first step's start */
    float final_loss;       /* mean loss of the last epoch */
    double test_accuracy;   /* -1 when not evaluated */
    double test_loss;
    guint64 peak_rss_bytes; /* the process's peak resident memory (getrusage) */
    gpointer reserved[3];
} TdmTrainSummary;

/**
 * tdm_trainer_run:
 * @cfg: the configuration
 * @summary: (out caller-allocates) (optional): what the run did
 * @error: return location for a #GError, or NULL
 *
 * Trains as configured, printing progress to stderr and a summary to
 * stdout.
 *
 * Returns: TRUE, or FALSE with the first error of the run (the dataset,
 * the model, a plugin, a step, a checkpoint), naming what failed
 */
TDM_API gboolean tdm_trainer_run(const TdmTrainConfig *cfg, TdmTrainSummary *summary,
                                 GError **error);

/**
 * tdm_trainer_open_test_loader:
 * @cfg: the configuration
 * @test_ds: the test split; it must outlive the loader
 * @dev: the device
 * @error: return location for a #GError, or NULL
 *
 * The loader tdm_trainer_run() evaluates with, over @test_ds: through
 * data.test_transforms when given; else, for test images not of the size
 * the model trains on, "resize | center-crop" to that size; normalised as
 * the training data is (by data.transforms' own normalize when it has one,
 * else by the training split's constants). The training split of
 * cfg->dataset is opened for its size and constants when it can be; the
 * test split stands in for it otherwise. The loader holds the pipelines it
 * runs.
 *
 * Returns: (transfer full): the loader, or NULL with @error set (a bad
 * pipeline, naming its token)
 */
TDM_API TdmLoader *tdm_trainer_open_test_loader(const TdmTrainConfig *cfg, TdmDataset *test_ds,
                                                TdmDevice *dev, GError **error);

/**
 * tdm_model_evaluate:
 * @model: a model
 * @loader: the test loader
 * @accuracy: (out): in [0, 1]
 * @loss: (out): the mean loss
 * @error: return location for a #GError, or NULL
 *
 * Evaluates @model on the whole of @loader.
 *
 * Returns: TRUE, or FALSE with the loader's or the device's error
 */
TDM_API gboolean tdm_model_evaluate(TdmModel *model, TdmLoader *loader, double *accuracy,
                                    double *loss, GError **error);

G_END_DECLS

#endif /* TANDEM_TRAINER_H */

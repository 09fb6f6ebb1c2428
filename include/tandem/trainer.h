/* tandem/trainer.h - training configuration and the training loop.
 *
 * TdmTrainConfig holds every knob of a run. It is filled from defaults, an
 * INI file (GKeyFile: [model] [data] [optim] [train] sections) and
 * "section.key=value" overrides, all through tdm_train_config_set(), which
 * validates each value and names the key (and the file) on error. The
 * trainer loop itself is tdm_trainer_run() in core/trainer.c.
 */
#ifndef TANDEM_TRAINER_H
#define TANDEM_TRAINER_H

#include <tandem/strategy.h>

G_BEGIN_DECLS

typedef struct {
    /* [model] */
    char *model;            /* model.name: "mlp" */
    int in_channels;        /* model.in_channels: 0 = from the dataset */
    int num_classes;        /* model.num_classes: 0 = from the dataset */
    char *init_path;        /* model.init: safetensors weights to start from */
    char *freeze;           /* model.freeze: comma-separated name prefixes */
    /* [data] */
    char *dataset;          /* data.dataset: "fashion-mnist" or KIND:PATH */
    int64_t limit;          /* data.limit: first N training images (0 = all) */
    int batch_size;         /* data.batch_size: 64 */
    int workers;            /* data.workers: 0 */
    gboolean normalize;     /* data.normalize: TRUE (dataset's mean/std) */
    int prefetch;           /* data.prefetch: batches queued ahead per worker (2) */
    char *transforms;       /* data.transforms: training augmentation pipeline ("" = none) */
    gboolean pin_memory;    /* data.pin_memory: stage batches in pinned memory (false) */
    /* [optim] */
    char *optimizer;        /* optim.name: "sgd" */
    float lr;               /* optim.lr: 0.05 */
    float momentum;         /* optim.momentum: 0.9 */
    gboolean nesterov;      /* optim.nesterov: false */
    float weight_decay;     /* optim.weight_decay: 5e-4 */
    float beta1, beta2, eps;/* optim.beta1 / beta2 / eps */
    char *schedule;         /* optim.schedule: constant | step | cosine */
    int64_t warmup_steps;   /* optim.warmup_steps: 0 */
    int step_size;          /* optim.step_size (epochs): 30 */
    float gamma;            /* optim.gamma: 0.1 */
    float min_lr;           /* optim.min_lr: 0 */
    float label_smoothing;  /* optim.label_smoothing: 0 */
    /* [train] */
    int epochs;             /* train.epochs: 1 */
    guint64 seed;           /* train.seed: 0 */
    int threads;            /* train.threads: 0 = all cores */
    char *device;           /* train.device: "auto", "cpu", "ref:0" */
    char *strategy;         /* train.strategy: "single" */
    int accumulate;         /* train.accumulate: 1 */
    char *log_file;         /* train.log_file: JSON lines, NULL = none */
    char *save_path;        /* train.save: safetensors of the final weights */
    gboolean eval;          /* train.eval: evaluate on the test split (true) */
    int progress;           /* train.progress: print every N steps (0 = never) */
    char *collective;       /* train.collective: "shm", "gloo", "^gloo"; NULL = automatic */
    char *devices;          /* train.devices: dp's device list "ref:0,ref:1" */
    int timeout;            /* train.timeout: seconds for collectives and the
                             * rendezvous; 0 = TDM_TIMEOUT or 300 */
    char *test_transforms;  /* data.test_transforms: evaluation pipeline (default:
                             * none, or resize + center-crop for mixed sizes) */
    char *init_skip;        /* model.init_skip: comma-separated name prefixes not taken
                             * from model.init (they keep their fresh values: a new
                             * classifier over pretrained features) */
    gpointer reserved[3];
} TdmTrainConfig;

TDM_API void tdm_train_config_init(TdmTrainConfig *cfg);
TDM_API void tdm_train_config_clear(TdmTrainConfig *cfg);
/* Set one value by "section.key" (e.g. "optim.lr"). An unknown key or an
 * invalid value is TDM_ERROR_INVALID_ARG naming the key and the value. */
TDM_API gboolean tdm_train_config_set(TdmTrainConfig *cfg, const char *key, const char *value,
                                      GError **error);
/* Read an INI file; errors name the file and the key. */
TDM_API gboolean tdm_train_config_load(TdmTrainConfig *cfg, const char *path, GError **error);
/* All keys, NULL-terminated "section.key" (transfer none). */
TDM_API const char *const *tdm_train_config_keys(void);

typedef struct {
    int64_t steps;
    int64_t images;         /* training images processed */
    double train_seconds;   /* time in the training loop (steps only) */
    double images_per_s;
    double first_step_s;    /* from process start to the first step's start */
    float final_loss;       /* mean loss of the last epoch */
    double test_accuracy;   /* -1 when not evaluated */
    double test_loss;
    gpointer reserved[4];
} TdmTrainSummary;

/* Train as configured, printing progress to stderr and a summary to stdout;
 * `summary` may be NULL. */
TDM_API gboolean tdm_trainer_run(const TdmTrainConfig *cfg, TdmTrainSummary *summary,
                                 GError **error);

/* The loader tdm_trainer_run evaluates with, over `test_ds`: through
 * data.test_transforms when given; else, for test images not of the size
 * the model trains on, "resize | center-crop" to that size; normalised as
 * the training data is (by data.transforms' own normalize when it has one,
 * else by the training split's constants). The training split of
 * cfg->dataset is opened for its size and constants when it can be; the
 * test split stands in for it otherwise.
 * The loader borrows the pipelines it runs: they are added to `keep` (a
 * GPtrArray created with tdm_transform_pipeline_free as its free function),
 * to be freed after the loader. */
TDM_API TdmLoader *tdm_trainer_open_test_loader(const TdmTrainConfig *cfg, TdmDataset *test_ds,
                                                TdmDevice *dev, GPtrArray *keep,
                                                GError **error);

/* Evaluate `model` on the whole `loader`: accuracy in [0, 1] and mean loss. */
TDM_API gboolean tdm_evaluate(TdmModel *model, TdmLoader *loader, double *accuracy,
                              double *loss, GError **error);

G_END_DECLS

#endif /* TANDEM_TRAINER_H */

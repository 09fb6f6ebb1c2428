/* SPDX-License-Identifier: MIT */
/* tests/test-ddp.c - the ddp and zero1 strategies' checks that need a hand-made model,
 * in one process (a world of one, over the shm collective and a private
 * store):
 *  - a trainable parameter that gets no gradient in backward is an error
 *    naming it (instead of a bucket that is never reduced, which would hang
 *    the other ranks);
 *  - the same parameter frozen is left out of the buckets (ddp) and of the
 *    optimizer shard (zero1), and the step trains the rest, leaving the
 *    frozen one untouched;
 *  - a step with ddp changes the parameters exactly as one with single;
 *  - only trainable parameters are communicated: the all-reduces of a ddp
 *    step over a partly frozen model add up to the trainable elements
 *    (seen by a collective class that counts and hands every call on);
 *  - "ddp bucket-mb=..." sets the bucket size (one all-reduce per bucket),
 *    and a bad value names the strategy, the key and the accepted range;
 *  - single, ddp and zero1 keep the loss statistics on the device and hand
 *    them over in one read (tdm_strategy_read_stats), the same figures for
 *    the three, zero again after it.
 */
#include <string.h>

#include <tandem/tandem.h>

#include "core-test-util.h"

/* A module with a parameter it never uses: y = x, dx = dy, no gradient. */
static gboolean idle_forward(TdmModule *self, TdmTensor *x, TdmTensor **y, GError **error)
{
    (void)self;
    (void)error;
    *y = x;
    return TRUE;
}

static gboolean idle_backward(TdmModule *self, TdmTensor *dy, gboolean need_dx, TdmTensor **dx,
                              GError **error)
{
    (void)self;
    (void)need_dx;
    (void)error;
    if (dx != NULL) {
        *dx = dy;
    }
    return TRUE;
}

static const TdmModuleClass idle_class = {
    TDM_CLASS_HEADER(TDM_MODULE_IFACE_VERSION, TdmModuleClass),
    .type_name = "Idle",
    .forward = idle_forward,
    .backward = idle_backward,
};

typedef struct {
    TdmDistEnv env;
    TdmStoreServer *server;
    TdmStore *store;
    TdmComm *comm;
    TdmDevice *dev;
    TdmModel *model;
    TdmOptimizer *opt;
    TdmTensor *images, *labels;
    TdmBatch batch;
} Fixture;

static void fixture_setup(Fixture *f, gboolean with_idle)
{
    GError *error = NULL;
    memset(f, 0, sizeof *f);
    g_assert_true(tdm_dist_env_read(&f->env, &error));
    g_assert_no_error(error);
    f->dev = test_ref_device();
    f->store = tdm_store_open_for_job(&f->env, &f->server, &error);
    g_assert_no_error(error);
    f->comm = tdm_comm_new("shm", f->store, &f->env, f->dev, NULL, &error);
    g_assert_no_error(error);

    TdmModule *root = tdm_sequential_new();
    tdm_module_add_child(root, "fc", tdm_linear_new(6, 3, TRUE));
    if (with_idle) {
        TdmModule *idle = tdm_module_new(&idle_class, NULL);
        int64_t shape[1] = {5};
        tdm_module_add_param(idle, "weight", 1, shape, FALSE);
        tdm_module_add_child(root, "idle", idle);
    }
    f->model = tdm_model_new(root, f->dev, 3, &error);
    g_assert_no_error(error);

    int64_t ishape[2] = {8, 6}, lshape[1] = {8};
    float x[48];
    test_fill_uniform(x, 48, 11, -1.0, 1.0);
    f->images = test_tensor_from(f->dev, 2, ishape, x);
    int32_t y[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    f->labels = tdm_tensor_new(f->dev, TDM_DTYPE_I32, 1, lshape, &error);
    g_assert_no_error(error);
    g_assert_true(tdm_tensor_write(f->labels, y, &error));
    f->batch.images = f->images;
    f->batch.labels = f->labels;
    f->batch.size = 8;
}

static TdmStrategy *fixture_strategy_with(Fixture *f, const char *name, TdmParams *params)
{
    GError *error = NULL;
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = 0.1f;
    oo.momentum = 0.9f;
    oo.weight_decay = 0.01f;
    f->opt = tdm_optimizer_new("sgd", f->model, NULL, &oo, &error);
    g_assert_no_error(error);
    TdmStrategyOptions so = {0};
    so.comm = f->comm;
    so.params = params;
    TdmStrategy *s = tdm_strategy_new(name, f->model, f->opt, &so, &error);
    g_assert_no_error(error);
    return s;
}

static TdmStrategy *fixture_strategy(Fixture *f, const char *name)
{
    return fixture_strategy_with(f, name, NULL);
}

static void fixture_teardown(Fixture *f, TdmStrategy *s)
{
    tdm_strategy_free(s);
    tdm_optimizer_free(f->opt);
    tdm_model_free(f->model);
    tdm_tensor_unref(f->images);
    tdm_tensor_unref(f->labels);
    tdm_comm_free(f->comm);
    tdm_store_free(f->store);
    tdm_store_server_free(f->server);
    tdm_dist_env_clear(&f->env);
}

static void test_unused_parameter(void)
{
    Fixture f;
    fixture_setup(&f, TRUE);
    TdmStrategy *s = fixture_strategy(&f, "ddp");
    GError *error = NULL;
    TdmStepResult r = {0};
    g_assert_false(tdm_strategy_train_step(s, &f.batch, TRUE, &r, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_FAILED);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, "got no gradient"));
    g_assert_nonnull(strstr(error->message, "idle.weight"));
    g_assert_null(strstr(error->message, "fc.weight"));
    g_clear_error(&error);
    /* No sync micro-batch: nothing is reduced, nothing is checked. */
    g_assert_true(tdm_strategy_train_step(s, &f.batch, FALSE, &r, &error));
    g_assert_no_error(error);
    fixture_teardown(&f, s);
}

static void test_frozen_parameter(gconstpointer data)
{
    const char *strategy = data;
    Fixture f;
    fixture_setup(&f, TRUE);
    g_assert_cmpint(tdm_model_freeze(f.model, "idle"), ==, 1);
    TdmParam *idle = tdm_model_find_param(f.model, "idle.weight");
    TdmParam *w = tdm_model_find_param(f.model, "fc.weight");
    float *idle0 = test_read(idle->value), *w0 = test_read(w->value);
    TdmStrategy *s = fixture_strategy(&f, strategy);
    GError *error = NULL;
    TdmStepResult r = {0};
    g_assert_true(tdm_strategy_train_step(s, &f.batch, TRUE, &r, &error));
    g_assert_no_error(error);
    float *idle1 = test_read(idle->value), *w1 = test_read(w->value);
    g_assert_cmpmem(idle0, 5 * sizeof(float), idle1, 5 * sizeof(float));
    g_assert_true(memcmp(w0, w1, 18 * sizeof(float)) != 0);
    g_free(idle0);
    g_free(idle1);
    g_free(w0);
    g_free(w1);
    fixture_teardown(&f, s);
}

/* Two steps of `s` on f's batch (8 samples), each updating or only the
 * second (`update_each`). */
static void two_fixture_steps(Fixture *f, TdmStrategy *s, gboolean update_each)
{
    GError *error = NULL;
    TdmStepResult r = {0};
    for (int i = 0; i < 2; i++) {
        g_assert_true(tdm_strategy_train_step(s, &f->batch, update_each || i == 1, &r, &error));
        g_assert_no_error(error);
        g_assert_cmpint(r.count, ==, 8);
    }
}

/* Two steps with `name`; the parameters afterwards (transfer full). */
static float *two_steps(const char *name, size_t *n)
{
    Fixture f;
    fixture_setup(&f, FALSE);
    TdmStrategy *s = fixture_strategy(&f, name);
    two_fixture_steps(&f, s, TRUE);
    *n = f.model->n_values;
    float *v = test_read(f.model->value_arena);
    fixture_teardown(&f, s);
    return v;
}

static void test_world_of_one(void)
{
    size_t n1 = 0, n2 = 0;
    float *single = two_steps("single", &n1);
    float *ddp = two_steps("ddp", &n2);
    float *zero1 = two_steps("zero1", &n2);
    g_assert_cmpuint(n1, ==, n2);
    /* Averaging over one rank changes nothing: bit for bit. */
    g_assert_cmpmem(single, n1 * sizeof(float), ddp, n2 * sizeof(float));
    g_assert_cmpmem(single, n1 * sizeof(float), zero1, n2 * sizeof(float));
    g_free(single);
    g_free(ddp);
    g_free(zero1);
}

/* All-reduces in one synchronising step of ddp over fc1 (6 -> 64) and
 * fc2 (64 -> 3): 2,572 bytes of gradients in four parameters, which fit
 * the default first bucket (1 MiB) but not one of 0.001 MiB (1,048 bytes:
 * fc2.bias, fc2.weight and fc1.bias, then fc1.weight alone). */
static guint64 ddp_step_collectives(const char *spec, TdmParams *params)
{
    Fixture f;
    fixture_setup(&f, FALSE);
    tdm_model_free(f.model);
    GError *error = NULL;
    TdmModule *root = tdm_sequential_new();
    tdm_module_add_child(root, "fc1", tdm_linear_new(6, 64, TRUE));
    tdm_module_add_child(root, "fc2", tdm_linear_new(64, 3, TRUE));
    f.model = tdm_model_new(root, f.dev, 3, &error);
    g_assert_no_error(error);
    TdmStrategy *s = fixture_strategy_with(&f, spec, params);
    g_assert_cmpstr(s->name, ==, "ddp");
    TdmStepResult r = {0};
    guint64 before = f.comm->seq;
    g_assert_true(tdm_strategy_train_step(s, &f.batch, TRUE, &r, &error));
    g_assert_no_error(error);
    guint64 calls = f.comm->seq - before;
    fixture_teardown(&f, s);
    return calls;
}

/* The shm collective's class with allreduce counting the elements it is
 * given, then running the real one. */
static TdmCommClass counting_class;
static const TdmCommClass *counted_class;
static int64_t allreduced;

static TdmWork *counting_allreduce(TdmComm *comm, guint64 seq, TdmTensor *t, TdmReduceOp op,
                                   GError **error)
{
    allreduced += tdm_tensor_numel(t);
    return counted_class->allreduce(comm, seq, t, op, error);
}

/* Elements all-reduced by one synchronising ddp step over fc1 (6 -> 64,
 * 448 elements), fc2 (64 -> 64, 4,160) and fc3 (64 -> 3, 195), with the
 * prefixes `freeze` frozen (NULL: none). */
static int64_t ddp_step_allreduced(const char *freeze)
{
    Fixture f;
    fixture_setup(&f, FALSE);
    tdm_model_free(f.model);
    GError *error = NULL;
    TdmModule *root = tdm_sequential_new();
    tdm_module_add_child(root, "fc1", tdm_linear_new(6, 64, TRUE));
    tdm_module_add_child(root, "fc2", tdm_linear_new(64, 64, TRUE));
    tdm_module_add_child(root, "fc3", tdm_linear_new(64, 3, TRUE));
    f.model = tdm_model_new(root, f.dev, 3, &error);
    g_assert_no_error(error);
    if (freeze != NULL) {
        g_assert_cmpint(tdm_model_freeze(f.model, freeze), >, 0);
    }
    counted_class = f.comm->klass;
    counting_class = *counted_class;
    counting_class.allreduce = counting_allreduce;
    f.comm->klass = &counting_class;
    TdmStrategy *s = fixture_strategy_with(&f, "ddp bucket-mb=0.001", NULL);
    TdmStepResult r = {0};
    allreduced = 0;
    g_assert_true(tdm_strategy_train_step(s, &f.batch, TRUE, &r, &error));
    g_assert_no_error(error);
    int64_t n = allreduced;
    g_assert_cmpint(n, ==, tdm_model_num_parameters(f.model));
    f.comm->klass = counted_class;
    fixture_teardown(&f, s);
    return n;
}

static void test_frozen_not_communicated(void)
{
    g_assert_cmpint(ddp_step_allreduced(NULL), ==, 448 + 4160 + 195);
    /* frozen at either end and in the middle: a bucket never spans the gap */
    g_assert_cmpint(ddp_step_allreduced("fc1"), ==, 4160 + 195);
    g_assert_cmpint(ddp_step_allreduced("fc3"), ==, 448 + 4160);
    g_assert_cmpint(ddp_step_allreduced("fc2"), ==, 448 + 195);
    g_assert_cmpint(ddp_step_allreduced("fc1,fc2.weight"), ==, 64 + 195);
}

static void test_bucket_size(void)
{
    g_assert_cmpuint(ddp_step_collectives("ddp", NULL), ==, 1);
    g_assert_cmpuint(ddp_step_collectives("ddp bucket-mb=0.001", NULL), ==, 2);
    /* PyTorch's name works too, and so do parameters bound by the caller. */
    g_assert_cmpuint(ddp_step_collectives("ddp bucket_cap_mb=0.001", NULL), ==, 2);
    GError *error = NULL;
    g_autoptr(TdmParams) params = tdm_params_parse(TDM_FEATURE_STRATEGY, "ddp bucket-mb=0.001",
                                                   &error);
    g_assert_no_error(error);
    g_assert_cmpuint(ddp_step_collectives(NULL, params), ==, 2);
}

static void test_bad_parameter(void)
{
    Fixture f;
    fixture_setup(&f, FALSE);
    GError *error = NULL;
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    f.opt = tdm_optimizer_new("sgd", f.model, NULL, &oo, &error);
    g_assert_no_error(error);
    TdmStrategyOptions so = {0};
    so.comm = f.comm;
    static const char *const bad[][2] = {
        {"ddp bucket-mb=-3", "ddp: bucket-mb=-3: expected a number in [0.001, 1024]"},
        {"ddp bucket-mb=lots", "ddp: bucket-mb=lots: expected a number in [0.001, 1024]"},
        {"ddp buckets=2", "ddp: unknown parameter 'buckets'; known: bucket-mb"},
        {"zero1 bucket-mb=25", "zero1: unknown parameter 'bucket-mb'; known: none"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_null(tdm_strategy_new(bad[i][0], f.model, f.opt, &so, &error));
        g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
        g_assert_cmpstr(error->message, ==, bad[i][1]);
        g_clear_error(&error);
    }
    fixture_teardown(&f, NULL);
}

/* Two steps with `name`, then two reads: the first gets both steps'
 * figures (into *first), the second nothing. */
static void two_steps_stats(const char *name, TdmStepStats *first)
{
    Fixture f;
    fixture_setup(&f, FALSE);
    TdmStrategy *s = fixture_strategy(&f, name);
    two_fixture_steps(&f, s, FALSE);
    GError *error = NULL;
    g_assert_true(tdm_strategy_read_stats(s, first, &error));
    g_assert_no_error(error);
    g_assert_cmpint(first->steps, ==, 2);
    g_assert_cmpint(first->count, ==, 16);
    g_assert_cmpint(first->correct, >=, 0);
    g_assert_cmpint(first->correct, <=, 16);
    /* three classes, near-uniform logits: about ln 3 per sample */
    g_assert_cmpfloat(first->loss_sum / 16, >, 0.5);
    g_assert_cmpfloat(first->loss_sum / 16, <, 2.0);
    TdmStepStats again;
    g_assert_true(tdm_strategy_read_stats(s, &again, &error));
    g_assert_no_error(error);
    g_assert_cmpint(again.steps, ==, 0);
    g_assert_cmpint(again.count, ==, 0);
    g_assert_cmpint(again.correct, ==, 0);
    g_assert_cmpfloat(again.loss_sum, ==, 0.0);
    fixture_teardown(&f, s);
}

static void test_read_stats(void)
{
    TdmStepStats single, ddp, zero1;
    two_steps_stats("single", &single);
    two_steps_stats("ddp", &ddp);
    two_steps_stats("zero1", &zero1);
    /* The same model, batch and updates: the same figures. */
    g_assert_cmpfloat(ddp.loss_sum, ==, single.loss_sum);
    g_assert_cmpfloat(zero1.loss_sum, ==, single.loss_sum);
    g_assert_cmpint(ddp.correct, ==, single.correct);
    g_assert_cmpint(zero1.correct, ==, single.correct);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* A process started alone: no launcher's variables. */
    const char *vars[] = {"TDM_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < G_N_ELEMENTS(vars); i++) {
        g_unsetenv(vars[i]);
    }
    g_test_add_func("/ddp/unused-parameter", test_unused_parameter);
    /* Weight decay would move a frozen parameter that an update reached. */
    g_test_add_data_func("/ddp/frozen-parameter", "ddp", test_frozen_parameter);
    g_test_add_data_func("/zero1/frozen-parameter", "zero1", test_frozen_parameter);
    g_test_add_func("/ddp/world-of-one", test_world_of_one);
    g_test_add_func("/ddp/bucket-size", test_bucket_size);
    g_test_add_func("/ddp/frozen-not-communicated", test_frozen_not_communicated);
    g_test_add_func("/ddp/bad-parameter", test_bad_parameter);
    g_test_add_func("/strategy/read-stats", test_read_stats);
    return g_test_run();
}

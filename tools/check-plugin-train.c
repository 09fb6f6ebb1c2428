/* SPDX-License-Identifier: MIT */
/* tools/check-plugin-train.c - `tandem check-plugin` on a strategy and on
 * a transform.
 *
 * A strategy, whatever it does across ranks, must train in a world of one
 * process exactly as `single` does: the same forward, loss, gradients
 * scaled by 1/accumulate, optimizer steps and end-of-training hook. The
 * check trains a small mlp on ref with each, from the same weights on the
 * same batches (8 steps, accumulating 2, SGD with momentum), and compares
 * the weights and the loss statistics. A strategy that needs a
 * communicator gets one of a world of one. The strategy's parameters are
 * its defaults, or those `--strategy "name key=value ..."` gives.
 *
 * Every strategy but single and dp (which get no communicator) must also
 * leave every rank with the same parameters and buffers at the end of
 * training. The check runs the same training on 2 processes (`tandem run`,
 * the shm collective), each rank on batches of its own, and each rank
 * writes its value arena to a file of a temporary directory, which this
 * process compares with rank 0's.
 *
 * A transform must give the same image for the same (seed, epoch, index)
 * (it draws only from the generator it is handed), other images for other
 * indices when it is random, and exactly the shape its output_shape
 * declares (the pipeline's, for a 3 x 40 x 48 input). Its parameters are
 * its defaults, and for a required one a small value in its range.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include "check-plugin.h"

#define STEPS 8
#define ACCUMULATE 2
#define BATCH 16
#define SIDE 8
/* How far a rank's weights may end from rank 0's, relative to the largest
 * weight: every rank applies the same averaged update, so any difference
 * is only the order of a sum. */
#define RANKS_TOLERANCE 1e-6

typedef struct {
    TdmModel *model;
    TdmOptimizer *opt;
    TdmStrategy *s;
    TdmTensor *images, *labels;
    double loss_sum;
} TrainRun;

static void train_run_clear(TrainRun *t)
{
    tdm_strategy_free(t->s);
    tdm_optimizer_free(t->opt);
    tdm_model_free(t->model);
    g_clear_pointer(&t->images, tdm_tensor_unref);
    g_clear_pointer(&t->labels, tdm_tensor_unref);
}

/* Trains with strategy `spec` on batches drawn from `data_seed`; the
 * weights end in t->model. `alone`: the loss statistics must count this
 * process's samples (on several ranks a strategy may add them up). */
static gboolean train_with(TrainRun *t, const char *spec, TdmDevice *dev, TdmComm *comm,
                           guint32 data_seed, gboolean alone, GError **error)
{
    TdmModelConfig mc = {.in_channels = 1, .num_classes = 10, .image_size = SIDE};
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = 0.05f;
    oo.momentum = 0.9f;
    TdmStrategyOptions so = {.accumulate = ACCUMULATE, .comm = comm, .total_steps = STEPS,
                             .steps_per_epoch = STEPS};
    int64_t xshape[4] = {BATCH, 1, SIDE, SIDE}, lshape[1] = {BATCH};
    TdmModule *root = tdm_model_zoo_create("mlp", &mc, error);
    if (root == NULL || (t->model = tdm_model_new(root, dev, 11, error)) == NULL ||
        (t->opt = tdm_optimizer_new("sgd", t->model, NULL, &oo, error)) == NULL ||
        (t->s = tdm_strategy_new(spec, t->model, t->opt, &so, error)) == NULL ||
        (t->images = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, xshape, error)) == NULL ||
        (t->labels = tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, error)) == NULL) {
        return FALSE;
    }
    GRand *rand = g_rand_new_with_seed(data_seed);
    float x[BATCH * SIDE * SIDE];
    int32_t y[BATCH];
    gboolean ok = TRUE;
    for (int step = 0; ok && step < STEPS; step++) {
        for (size_t i = 0; i < G_N_ELEMENTS(x); i++) {
            x[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
        }
        for (int i = 0; i < BATCH; i++) {
            y[i] = g_rand_int_range(rand, 0, 10);
        }
        TdmBatch batch = {.images = t->images, .labels = t->labels, .size = BATCH};
        TdmStepResult r = {0};
        ok = tdm_tensor_write(t->images, x, error) && tdm_tensor_write(t->labels, y, error) &&
             tdm_strategy_train_step(t->s, &batch, (step + 1) % ACCUMULATE == 0, &r, error);
    }
    g_rand_free(rand);
    TdmStepStats st = {0};
    ok = ok && tdm_strategy_end(t->s, TDM_STRATEGY_END_TRAINING, 0, error) &&
         tdm_strategy_read_stats(t->s, &st, error);
    if (ok && alone && (st.count != STEPS * BATCH || !(st.loss_sum > 0))) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                    "the loss statistics count %" G_GINT64_FORMAT " samples with a loss sum of "
                    "%g, expected %d samples and a positive sum",
                    st.count, st.loss_sum, STEPS * BATCH);
        ok = FALSE;
    }
    t->loss_sum = st.loss_sum;
    return ok;
}

/* ||a - b|| / ||b|| over the value arenas. */
static double arena_difference(TdmModel *a, TdmModel *b, GError **error)
{
    g_autofree float *va = tdm_tensor_read_f32(a->value_arena, error);
    g_autofree float *vb = va != NULL ? tdm_tensor_read_f32(b->value_arena, error) : NULL;
    if (vb == NULL) {
        return -1.0;
    }
    double d = 0.0, n = 0.0;
    for (size_t i = 0; i < a->n_values; i++) {
        d += ((double)va[i] - vb[i]) * ((double)va[i] - vb[i]);
        n += (double)vb[i] * vb[i];
    }
    return sqrt(d) / MAX(sqrt(n), 1e-30);
}

int check_strategy_worker(const char *spec, const char *dir, double timeout_s)
{
    GError *error = NULL;
    CheckWorker w;
    if (!check_worker_open(&w, "shm", timeout_s, &error)) {
        return 1;
    }
    TrainRun t = {0};
    gboolean ok = w.comm != NULL && train_with(&t, spec, w.dev, w.comm,
                                               5 + 1000 * (guint32)w.env.rank, FALSE, &error);
    g_autofree float *values = ok ? tdm_tensor_read_f32(t.model->value_arena, &error) : NULL;
    ok = values != NULL;
    if (ok) {
        g_autofree char *base = g_strdup_printf("rank-%d.f32", w.env.rank);
        g_autofree char *path = g_build_filename(dir, base, NULL);
        ok = g_file_set_contents(path, (const char *)values,
                                 (gssize)(t.model->n_values * sizeof(float)), &error);
    }
    train_run_clear(&t);
    return check_worker_close(&w, ok, error);
}

/* The largest |w_r - w_0| over the ranks' weights in `dir`, relative to
 * the largest |w_0|; -1 with an error when a file is missing or short. */
static double ranks_difference(const char *dir, int world, int *worst_rank, GError **error)
{
    g_autofree char *p0 = g_build_filename(dir, "rank-0.f32", NULL);
    g_autofree char *w0 = NULL;
    gsize n0 = 0;
    if (!g_file_get_contents(p0, &w0, &n0, error)) {
        return -1.0;
    }
    const float *a = (const float *)(void *)w0;
    double scale = 0.0, worst = 0.0;
    for (gsize i = 0; i < n0 / sizeof(float); i++) {
        scale = MAX(scale, fabs((double)a[i]));
    }
    *worst_rank = 0;
    for (int r = 1; r < world; r++) {
        g_autofree char *base = g_strdup_printf("rank-%d.f32", r);
        g_autofree char *path = g_build_filename(dir, base, NULL);
        g_autofree char *wr = NULL;
        gsize n = 0;
        if (!g_file_get_contents(path, &wr, &n, error)) {
            return -1.0;
        }
        if (n != n0) {
            g_set_error(error, TDM_ERROR, TDM_ERROR_FAILED,
                        "rank %d wrote %" G_GSIZE_FORMAT " bytes of weights, rank 0 %"
                        G_GSIZE_FORMAT, r, n, n0);
            return -1.0;
        }
        const float *b = (const float *)(void *)wr;
        for (gsize i = 0; i < n / sizeof(float); i++) {
            double d = fabs((double)b[i] - a[i]) / MAX(scale, 1e-30);
            if (d > worst) {
                worst = d;
                *worst_rank = r;
            }
        }
    }
    return worst;
}

/* Trains `spec` on 2 ranks and compares their weights at the end. */
static CheckResult check_ranks(const CheckOptions *o, const char *what, const char *spec)
{
    const int world = 2;
    GError *error = NULL;
    g_autofree char *dir = g_dir_make_tmp("tdm-check-XXXXXX", &error);
    if (dir == NULL) {
        CheckResult r = check_report(CHECK_FAIL, what, "a temporary directory: %s",
                                     error->message);
        g_error_free(error);
        return r;
    }
    char *args[] = {(char *)"--worker-strategy", (char *)spec, (char *)"--worker-dir", dir, NULL};
    g_autofree char *out = NULL;
    gboolean timed_out = FALSE;
    CheckResult r;
    int worst_rank = 0;
    if (!check_spawn_job(o, world, args, &out, &timed_out)) {
        r = check_report(CHECK_FAIL, what, "%d ranks (shm): %s%s", world,
                         timed_out ? "the job did not finish in time" : "failed:\n",
                         timed_out ? "" : out);
    } else {
        double d = ranks_difference(dir, world, &worst_rank, &error);
        if (d < 0) {
            r = check_report(CHECK_FAIL, what, "%d ranks (shm): %s", world, error->message);
        } else if (d > RANKS_TOLERANCE) {
            r = check_report(CHECK_FAIL, what,
                             "on %d ranks (shm) the ranks end with different weights: rank %d "
                             "differs from rank 0 by %.3g (largest difference relative to the "
                             "largest weight; tolerance %g): every rank must hold the same "
                             "parameters and buffers after the end of training",
                             world, worst_rank, d, RANKS_TOLERANCE);
        } else {
            r = check_report(CHECK_PASS, what,
                             "on %d ranks (shm, each on its own batches) every rank ends with "
                             "rank 0's weights (largest difference %.2g)",
                             world, d);
        }
    }
    g_clear_error(&error);
    for (int k = 0; k < world; k++) {
        g_autofree char *base = g_strdup_printf("rank-%d.f32", k);
        g_autofree char *path = g_build_filename(dir, base, NULL);
        g_unlink(path);
    }
    g_rmdir(dir);
    return r;
}

CheckResult check_strategy(const CheckOptions *o, TdmFeature *f)
{
    const char *name = tdm_feature_get_name(f);
    g_autofree char *given = o->strategy != NULL ? tdm_params_split_name(o->strategy, NULL) : NULL;
    const char *spec = g_strcmp0(given, name) == 0 ? o->strategy : name;
    g_autofree char *what = g_strcmp0(spec, name) == 0
                                ? g_strdup_printf("strategy %s", name)
                                : g_strdup_printf("strategy \"%s\"", spec);
    GError *error = NULL;
    TdmDistEnv env = {.rank = 0, .world_size = 1, .local_rank = 0, .local_world_size = 1,
                      .nnodes = 1, .source = "none"};
    TdmDevice *dev = tdm_device_get("ref", &error);
    TdmComm *comm = dev != NULL ? tdm_comm_new(NULL, NULL, &env, dev, NULL, &error) : NULL;
    TrainRun mine = {0}, single = {0};
    CheckResult r;
    if (comm == NULL) {
        r = check_report(CHECK_FAIL, what, "a communicator of one process: %s", error->message);
    } else if (!train_with(&mine, spec, dev, comm, 5, TRUE, &error)) {
        r = check_report(CHECK_FAIL, what, "training alone: %s", error->message);
    } else if (!train_with(&single, "single", dev, NULL, 5, TRUE, &error)) {
        r = check_report(CHECK_FAIL, what, "training with single: %s", error->message);
    } else {
        double d = arena_difference(mine.model, single.model, &error);
        double dl = fabs(mine.loss_sum - single.loss_sum) / MAX(fabs(single.loss_sum), 1e-30);
        if (d < 0) {
            r = check_report(CHECK_FAIL, what, "reading the weights: %s", error->message);
        } else if (d > 1e-5 || dl > 1e-5) {
            r = check_report(CHECK_FAIL, what,
                             "alone it trains otherwise than single: weights differ by %.3g, "
                             "loss sums by %.3g (relative; tolerance 1e-5)",
                             d, dl);
        } else {
            r = check_report(CHECK_PASS, what,
                             "alone it trains as single (%d steps, accumulating %d): weights "
                             "within %.2g, loss sums within %.2g",
                             STEPS, ACCUMULATE, d, dl);
        }
    }
    g_clear_error(&error);
    train_run_clear(&mine);
    train_run_clear(&single);
    tdm_comm_free(comm);
    if (r != CHECK_PASS) {
        return r;
    }
    g_autofree char *ranks = g_strdup_printf("%s, 2 ranks", what);
    if (strcmp(name, "single") == 0 || strcmp(name, "dp") == 0) {
        return check_report(CHECK_SKIP, ranks, "a one-process strategy (no communicator)");
    }
    return check_ranks(o, ranks, spec);
}

/* One run of `p` on `src`: the f32 result and its shape (transfer full). */
static float *apply_once(TdmTransformPipeline *p, const guint8 *src, guint64 seed,
                         guint64 index, int shape[3], GError **error)
{
    TdmImage img = {0}, scratch = {0};
    float *out = NULL;
    tdm_image_set_u8(&img, src, 3, 40, 48);
    if (tdm_transform_pipeline_apply(p, &img, &scratch, seed, 0, index, error)) {
        shape[0] = img.c;
        shape[1] = img.h;
        shape[2] = img.w;
        out = g_memdup2(img.data, sizeof(float) * (gsize)img.c * img.h * img.w);
    }
    tdm_image_clear(&img);
    tdm_image_clear(&scratch);
    return out;
}

/* A value for a required parameter the check must invent: a small number
 * inside the spec's range (8 for an integer, 10 for a number: an image
 * size, a padding, an angle), repeated as often as a list needs, or the
 * first choice; NULL for a string (transfer full). */
static char *invent_value(const TdmParamSpec *s)
{
    gboolean ints = s->type == TDM_PARAM_INT || s->type == TDM_PARAM_INTS;
    gboolean list = s->type == TDM_PARAM_INTS || s->type == TDM_PARAM_FLOATS;
    if (s->type == TDM_PARAM_CHOICE && s->choices != NULL) {
        return g_strndup(s->choices, strcspn(s->choices, "|"));
    }
    if (s->type == TDM_PARAM_BOOL) {
        return g_strdup("false");
    }
    if (!ints && s->type != TDM_PARAM_FLOAT && !list) {
        return NULL;
    }
    double v = ints ? 8 : 10;
    if (s->min != 0 || s->max != 0) {
        v = CLAMP(v, s->min, s->max);
    }
    GString *text = g_string_new(NULL);
    int count = list ? MAX(s->min_count, 1) : 1;
    for (int i = 0; i < count; i++) {
        g_string_append_printf(text, i > 0 ? ",%g" : "%g", ints ? floor(v) : v);
    }
    return g_string_free(text, FALSE);
}

CheckResult check_transform(const CheckOptions *o, TdmFeature *f)
{
    const char *name = tdm_feature_get_name(f);
    g_autofree char *what = g_strdup_printf("transform %s", name);
    GError *error = NULL;
    g_autoptr(GString) spec = g_string_new(name);
    for (const TdmParamSpec *s = tdm_feature_get_params(f); s != NULL && s->name != NULL; s++) {
        g_autofree char *v = (s->flags & TDM_PARAM_REQUIRED) ? invent_value(s) : NULL;
        if (v != NULL) {
            g_string_append_printf(spec, " %s=%s", s->name, v);
        }
    }
    g_autoptr(TdmTransformPipeline) p = tdm_transform_pipeline_parse(spec->str, &error);
    if (p == NULL) {
        CheckResult r = check_report(CHECK_SKIP, what, "cannot make \"%s\": %s", spec->str,
                                     error->message);
        g_error_free(error);
        return r;
    }
    static const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
    tdm_transform_pipeline_set_normalization(p, 3, mean, std);
    int want[3];
    if (!tdm_transform_pipeline_output_shape(p, 3, 40, 48, &want[0], &want[1], &want[2],
                                             &error)) {
        CheckResult r = check_report(CHECK_FAIL, what, "output_shape of 3x40x48: %s",
                                     error->message);
        g_error_free(error);
        return r;
    }
    guint8 src[3 * 40 * 48];
    GRand *rand = g_rand_new_with_seed(3);
    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (guint8)g_rand_int_range(rand, 0, 256);
    }
    g_rand_free(rand);
    CheckResult r = CHECK_PASS;
    g_autofree float *first = NULL;
    size_t n = (size_t)want[0] * want[1] * want[2];
    gboolean varies = FALSE;
    for (guint64 index = 0; r == CHECK_PASS && index < 16; index++) {
        int s1[3], s2[3];
        g_autofree float *a = apply_once(p, src, 7, index, s1, &error);
        g_autofree float *b = a != NULL ? apply_once(p, src, 7, index, s2, &error) : NULL;
        if (b == NULL) {
            r = check_report(CHECK_FAIL, what, "index %" G_GUINT64_FORMAT ": %s", index,
                             error->message);
        } else if (memcmp(s1, want, sizeof(want)) != 0 || memcmp(s2, want, sizeof(want)) != 0) {
            r = check_report(CHECK_FAIL, what,
                             "index %" G_GUINT64_FORMAT ": made %dx%dx%d, but output_shape "
                             "says %dx%dx%d",
                             index, s1[0], s1[1], s1[2], want[0], want[1], want[2]);
        } else if (memcmp(a, b, n * sizeof(float)) != 0) {
            r = check_report(CHECK_FAIL, what,
                             "seed 7, index %" G_GUINT64_FORMAT ": two runs give different "
                             "images (randomness not drawn from the generator it is handed?)",
                             index);
        } else if (first == NULL) {
            first = g_steal_pointer(&a);
        } else {
            varies = varies || memcmp(first, a, n * sizeof(float)) != 0;
        }
    }
    g_clear_error(&error);
    if (r != CHECK_PASS) {
        return r;
    }
    return check_report(CHECK_PASS, what,
                        "\"%s\": 16 indices, each the same twice; 3x40x48 -> %dx%dx%d as "
                        "declared; %s across indices",
                        spec->str, want[0], want[1], want[2],
                        varies ? "random" : "the same image");
}

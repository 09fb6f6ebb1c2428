/* SPDX-License-Identifier: MIT */
/* tests/strategy-ranks.c - one process of a job that trains with a strategy
 * and saves every rank's weights, which `tandem train --save` cannot (only
 * rank 0 saves). Run under `tandem run --nproc-per-node N`:
 *
 *   strategy-ranks "SPEC" OUT [STEPS] [noend]
 *
 * trains zoo model "mlp" on the ref device for STEPS (10) steps of random
 * batches that differ per rank, with SGD (momentum 0.9), through the
 * strategy SPEC ("localsgd sync-every=4"), over shm; then calls the
 * strategy's end of training (unless `noend`) and writes OUT-<rank>.
 * safetensors. Built by tests/install-plugins.sh against a staged install,
 * as a third party's program would be. */
#include <stdio.h>
#include <stdlib.h>

#include <tandem/tandem.h>

static int failed(const char *what, GError *error)
{
    fprintf(stderr, "strategy-ranks: %s: %s\n", what, error != NULL ? error->message : "failed");
    return 1;
}

int main(int argc, char **argv)
{
    GError *error = NULL;
    TdmDistEnv env;
    TdmStoreServer *server = NULL;
    if (argc < 3) {
        fprintf(stderr, "usage: strategy-ranks SPEC OUT [STEPS] [noend]\n");
        return 2;
    }
    const int steps = argc > 3 ? atoi(argv[3]) : 10;
    const gboolean end = argc <= 4 || g_strcmp0(argv[4], "noend") != 0;
    if (!tdm_dist_env_read(&env, &error)) {
        return failed("environment", error);
    }
    TdmStore *store = tdm_store_open_for_job(&env, &server, &error);
    TdmDevice *dev = store != NULL ? tdm_device_get("ref", &error) : NULL;
    TdmComm *comm = dev != NULL ? tdm_comm_new("shm", store, &env, dev, NULL, &error) : NULL;
    TdmModelConfig mc = {.in_channels = 1, .num_classes = 10, .image_size = 8};
    TdmModule *root = comm != NULL ? tdm_model_zoo_create("mlp", &mc, &error) : NULL;
    TdmModel *model = root != NULL ? tdm_model_new(root, dev, 7, &error) : NULL;
    TdmOptimizerOptions oo;
    tdm_optimizer_options_init(&oo);
    oo.lr = 0.05f;
    oo.momentum = 0.9f;
    TdmOptimizer *opt = model != NULL ? tdm_optimizer_new("sgd", model, NULL, &oo, &error) : NULL;
    TdmStrategyOptions so = {.accumulate = 1, .comm = comm, .total_steps = steps,
                             .steps_per_epoch = steps};
    TdmStrategy *s = opt != NULL ? tdm_strategy_new(argv[1], model, opt, &so, &error) : NULL;
    if (s == NULL) {
        return failed("setup", error);
    }
    int64_t xshape[4] = {16, 1, 8, 8}, lshape[1] = {16};
    float x[16 * 64];
    int32_t y[16];
    GRand *rand = g_rand_new_with_seed(100 + (guint32)env.rank);
    TdmTensor *images = tdm_tensor_new(dev, TDM_DTYPE_F32, 4, xshape, &error);
    TdmTensor *labels = images != NULL ? tdm_tensor_new(dev, TDM_DTYPE_I32, 1, lshape, &error)
                                       : NULL;
    for (int step = 0; labels != NULL && step < steps; step++) {
        for (int i = 0; i < 16 * 64; i++) {
            x[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
        }
        for (int i = 0; i < 16; i++) {
            y[i] = g_rand_int_range(rand, 0, 10);
        }
        TdmBatch batch = {.images = images, .labels = labels, .size = 16};
        TdmStepResult r = {0};
        if (!tdm_tensor_write(images, x, &error) || !tdm_tensor_write(labels, y, &error) ||
            !tdm_strategy_train_step(s, &batch, TRUE, &r, &error)) {
            return failed("step", error);
        }
    }
    if (labels == NULL || (end && !tdm_strategy_end(s, TDM_STRATEGY_END_TRAINING, 0, &error))) {
        return failed("end", error);
    }
    g_autofree char *out = g_strdup_printf("%s-%d.safetensors", argv[2], env.rank);
    if (!tdm_model_save(model, out, &error) || !tdm_comm_barrier(comm, &error)) {
        return failed(out, error);
    }
    g_rand_free(rand);
    tdm_tensor_unref(images);
    tdm_tensor_unref(labels);
    tdm_strategy_free(s);
    tdm_optimizer_free(opt);
    tdm_model_free(model);
    tdm_comm_free(comm);
    tdm_store_free(store);
    tdm_store_server_free(server);
    tdm_dist_env_clear(&env);
    return 0;
}

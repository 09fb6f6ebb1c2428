/* SPDX-License-Identifier: MIT */
/* tests/test-checkpoint.c - checkpoint files and directories
 * (<tandem/checkpoint.h>) and the trainer's refusal of a checkpoint it
 * cannot continue.
 *
 * Files written through tdm_checkpoint_save are read back; a flipped byte
 * in one tensor's data is an error naming that tensor and the file; a
 * truncated file is an error naming the file and a byte offset; a weights
 * file that is not a checkpoint is refused as such; the directory keeps
 * the N newest and the one `best` names (and none of the temporary files
 * of killed saves), `latest` names the newest, and
 * tdm_checkpoint_find takes the highest step (not a temporary file). The
 * last test trains mlp for a few steps through tdm_trainer_run and resumes
 * with another model, which must fail naming both. Runs on the `ref`
 * backend found through TDM_PLUGIN_SYSTEM_PATH, on the embedded data.
 */
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include <tandem/tandem.h>

typedef struct {
    char *dir;
} Fixture;

static void remove_tree(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d == NULL) {
        return;
    }
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK)) {
            remove_tree(p);
        } else {
            g_unlink(p);
        }
    }
    g_dir_close(d);
    g_rmdir(dir);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
    (void)data;
    f->dir = g_dir_make_tmp("tdm-test-checkpoint-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    (void)data;
    remove_tree(f->dir);
    g_free(f->dir);
}

/* A small checkpoint: two tensors of a "model" and one of Tandem's. */
static TdmSafeTensors *small_checkpoint(float base)
{
    TdmSafeTensors *st = tdm_safetensors_new();
    tdm_safetensors_set_metadata(st, "format", TDM_CHECKPOINT_FORMAT);
    tdm_safetensors_set_metadata(st, "format_version", TDM_CHECKPOINT_FORMAT_VERSION);
    float a[6], b[4], m[4];
    for (int i = 0; i < 6; i++) {
        a[i] = base + (float)i;
    }
    for (int i = 0; i < 4; i++) {
        b[i] = base - (float)i;
        m[i] = 0.5f * (float)i;
    }
    int64_t sa[2] = {2, 3}, sb[1] = {4};
    tdm_safetensors_add(st, "fc.weight", TDM_DTYPE_F32, 2, sa, a);
    tdm_safetensors_add(st, "fc.bias", TDM_DTYPE_F32, 1, sb, b);
    tdm_safetensors_add(st, "tandem.optim.fc.bias.momentum_buffer", TDM_DTYPE_F32, 1, sb, m);
    return st;
}

static void save_step(const char *dir, int64_t step)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmSafeTensors) st = small_checkpoint((float)step);
    g_assert_true(tdm_checkpoint_save(st, dir, step, &error));
    g_assert_no_error(error);
}

static void test_roundtrip(Fixture *f, gconstpointer data)
{
    (void)data;
    g_autoptr(GError) error = NULL;
    save_step(f->dir, 5);
    save_step(f->dir, 12);
    g_autofree char *path12 = g_build_filename(f->dir, "ckpt-000000012.safetensors", NULL);
    g_assert_true(g_file_test(path12, G_FILE_TEST_IS_REGULAR));
    g_autofree char *latest = g_build_filename(f->dir, "latest", NULL);
    g_autofree char *target = g_file_read_link(latest, NULL);
    g_assert_cmpstr(target, ==, "ckpt-000000012.safetensors"); /* relative */

    /* a stray temporary file of a save that did not finish is no checkpoint */
    g_autofree char *tmp = g_build_filename(f->dir, ".ckpt-000000099.safetensors.tmp-ABCDEF", NULL);
    g_assert_true(g_file_set_contents(tmp, "half", 4, NULL));
    g_autofree char *found = tdm_checkpoint_find(f->dir, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(found, ==, path12);

    g_autoptr(TdmSafeTensors) st = tdm_checkpoint_load(latest, &error);
    g_assert_no_error(error);
    const TdmSafeTensor *b = tdm_safetensors_get(st, "fc.bias");
    g_assert_nonnull(b);
    g_assert_cmpfloat(((const float *)b->data)[1], ==, 11.0f);
    g_assert_nonnull(tdm_safetensors_metadata(st, "checksums"));

    /* an empty directory has none, and says so */
    g_autofree char *empty = g_build_filename(f->dir, "empty", NULL);
    g_assert_cmpint(g_mkdir(empty, 0755), ==, 0);
    g_assert_null(tdm_checkpoint_find(empty, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, empty));
}

/* The offset of `name`'s first data byte in the file at `path`. */
static gsize data_offset_of(const char *path, const char *name)
{
    g_autofree char *contents = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
    guint64 hlen = 0;
    for (int i = 7; i >= 0; i--) {
        hlen = (hlen << 8) | (guint8)contents[i];
    }
    g_autoptr(TdmSafeTensors) st = tdm_safetensors_load(path, NULL);
    g_assert_nonnull(st);
    /* the writer lays tensors out in order: add up the sizes before it */
    gsize off = 8 + (gsize)hlen;
    for (guint i = 0; i < tdm_safetensors_count(st); i++) {
        const TdmSafeTensor *t = tdm_safetensors_index(st, i);
        if (strcmp(t->name, name) == 0) {
            return off;
        }
        off += t->nbytes;
    }
    g_assert_not_reached();
    return 0;
}

static void test_flipped_byte(Fixture *f, gconstpointer data)
{
    (void)data;
    g_autoptr(GError) error = NULL;
    save_step(f->dir, 3);
    g_autofree char *path = tdm_checkpoint_path(f->dir, 3);
    gsize off = data_offset_of(path, "fc.bias") + 5;
    g_autofree char *contents = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
    contents[off] ^= 0x10;
    g_assert_true(g_file_set_contents(path, contents, (gssize)len, NULL));
    /* the safetensors reader alone takes it: nothing but the checksum
     * tells */
    g_autoptr(TdmSafeTensors) plain = tdm_safetensors_load(path, &error);
    g_assert_no_error(error);
    g_assert_null(tdm_checkpoint_load(path, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_CORRUPT);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, "'fc.bias'"));
    g_assert_nonnull(strstr(error->message, path));
    g_assert_null(strstr(error->message, "fc.weight"));
}

static void test_truncated(Fixture *f, gconstpointer data)
{
    (void)data;
    g_autoptr(GError) error = NULL;
    save_step(f->dir, 4);
    g_autofree char *path = tdm_checkpoint_path(f->dir, 4);
    g_autofree char *contents = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
    g_assert_true(g_file_set_contents(path, contents, (gssize)(len - 7), NULL));
    g_assert_null(tdm_checkpoint_load(path, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_CORRUPT);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, "byte"));
    g_assert_nonnull(strstr(error->message, "momentum_buffer")); /* the last tensor */
}

static void test_not_checkpoint(Fixture *f, gconstpointer data)
{
    (void)data;
    g_autoptr(GError) error = NULL;
    g_autoptr(TdmSafeTensors) st = tdm_safetensors_new();
    tdm_safetensors_set_metadata(st, "format", "pt");
    float v = 1.0f;
    int64_t one[1] = {1};
    tdm_safetensors_add(st, "fc.bias", TDM_DTYPE_F32, 1, one, &v);
    g_autofree char *path = g_build_filename(f->dir, "weights.safetensors", NULL);
    g_assert_true(tdm_safetensors_save(st, path, &error));
    g_assert_null(tdm_checkpoint_load(path, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "not a Tandem checkpoint"));
    g_assert_nonnull(strstr(error->message, path));
}

static gboolean exists_step(const char *dir, int64_t step)
{
    g_autofree char *p = tdm_checkpoint_path(dir, step);
    return g_file_test(p, G_FILE_TEST_EXISTS);
}

static void test_prune(Fixture *f, gconstpointer data)
{
    (void)data;
    g_autoptr(GError) error = NULL;
    /* what a killed save leaves behind goes at the next prune */
    g_autofree char *stale =
        g_build_filename(f->dir, ".ckpt-000000001.safetensors.tmp-Q1W2E3", NULL);
    g_assert_true(g_file_set_contents(stale, "half", 4, NULL));
    for (int64_t step = 1; step <= 6; step++) {
        save_step(f->dir, step);
        if (step == 2) {
            g_assert_true(tdm_checkpoint_set_best(f->dir, 2, &error));
        }
        g_assert_true(tdm_checkpoint_prune(f->dir, 2, &error));
        g_assert_no_error(error);
    }
    g_assert_false(exists_step(f->dir, 1));
    g_assert_true(exists_step(f->dir, 2)); /* best */
    g_assert_false(exists_step(f->dir, 3));
    g_assert_false(exists_step(f->dir, 4));
    g_assert_true(exists_step(f->dir, 5));
    g_assert_true(exists_step(f->dir, 6));
    g_assert_false(g_file_test(stale, G_FILE_TEST_EXISTS));
    g_autofree char *best = g_build_filename(f->dir, "best", NULL);
    g_autoptr(TdmSafeTensors) st = tdm_checkpoint_load(best, &error);
    g_assert_no_error(error);
}

/* tdm_trainer_run of mlp on 256 embedded images into f->dir, with `model`
 * and train.resume when `resume`. */
static gboolean train(Fixture *f, const char *model, gboolean resume, GError **error)
{
    TdmTrainConfig cfg;
    tdm_train_config_init(&cfg);
    const char *const settings[][2] = {
        {"model.name", model},   {"data.limit", "256"},
        {"train.eval", "false"}, {"train.progress", "0"},
        {"train.device", "ref"}, {"train.max_steps", "3"},
        {"train.seed", "3"},     {"train.checkpoint_dir", f->dir},
    };
    gboolean ok = TRUE;
    for (gsize i = 0; ok && i < G_N_ELEMENTS(settings); i++) {
        ok = tdm_train_config_set(&cfg, settings[i][0], settings[i][1], error);
    }
    ok = ok && (!resume || tdm_train_config_set(&cfg, "train.resume", f->dir, error)) &&
         tdm_trainer_run(&cfg, NULL, error);
    tdm_train_config_clear(&cfg);
    return ok;
}

static void test_wrong_model(Fixture *f, gconstpointer data)
{
    (void)data;
    g_autoptr(GError) error = NULL;
    g_autofree char *src = g_strdup(g_getenv("TDM_TOP_SRCDIR"));
    if (src == NULL) {
        g_test_skip("TDM_TOP_SRCDIR is not set");
        return;
    }
    g_autofree char *data_dir = g_build_filename(src, "data", NULL);
    g_setenv("TDM_DATA_DIR", data_dir, TRUE);
    g_assert_true(train(f, "mlp", FALSE, &error));
    g_assert_no_error(error);
    g_assert_true(exists_step(f->dir, 3));
    g_assert_false(train(f, "lenet", TRUE, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, "'mlp'"));
    g_assert_nonnull(strstr(error->message, "'lenet'"));
    g_assert_nonnull(strstr(error->message, "ckpt-000000003.safetensors"));
    g_clear_error(&error);
    /* a fresh start into a directory with checkpoints is refused too */
    g_assert_false(train(f, "mlp", FALSE, &error));
    g_assert_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG);
    g_assert_nonnull(strstr(error->message, "already holds checkpoints"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/checkpoint/roundtrip", Fixture, NULL, fixture_setup, test_roundtrip,
               fixture_teardown);
    g_test_add("/checkpoint/flipped-byte", Fixture, NULL, fixture_setup, test_flipped_byte,
               fixture_teardown);
    g_test_add("/checkpoint/truncated", Fixture, NULL, fixture_setup, test_truncated,
               fixture_teardown);
    g_test_add("/checkpoint/not-a-checkpoint", Fixture, NULL, fixture_setup, test_not_checkpoint,
               fixture_teardown);
    g_test_add("/checkpoint/prune", Fixture, NULL, fixture_setup, test_prune, fixture_teardown);
    g_test_add("/checkpoint/wrong-model", Fixture, NULL, fixture_setup, test_wrong_model,
               fixture_teardown);
    return g_test_run();
}

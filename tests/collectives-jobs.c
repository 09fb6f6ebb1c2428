/* SPDX-License-Identifier: MIT */
/* tests/collectives-jobs.c - how tests/test-collectives.c starts its jobs:
 * through the launcher (`$TANDEM run`), as a user would, or by itself (a
 * store served in this process and N forked ranks given the launcher's
 * variables), each rank's output kept in a file and collected at the end. A
 * job that runs past its limit is killed and reported as failed.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <tandem/tandem.h>

#include "collectives-jobs.h"
#include "rank-env.h"

static char *self_exe(void)
{
    return g_file_read_link("/proc/self/exe", NULL);
}

gboolean tdm_test_use_launcher(void)
{
    const char *tandem = g_getenv("TANDEM");
    const char *mode = g_getenv("TDM_TEST_LAUNCHER");
    if (mode != NULL && strcmp(mode, "self") == 0) {
        return FALSE;
    }
    if (tandem == NULL || !g_file_test(tandem, G_FILE_TEST_IS_EXECUTABLE)) {
        return FALSE;
    }
    static int known = -1;
    if (known < 0) {
        char *argv[] = {(char *)tandem, "run", "--help", NULL};
        int status = -1;
        known =
            g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                         NULL, NULL, NULL, NULL, &status, NULL) &&
            g_spawn_check_wait_status(status, NULL);
    }
    return known == 1;
}

static char **job_env(char **extra)
{
    char **envp = g_get_environ();
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        char **kv = g_strsplit(extra[i], "=", 2);
        envp = g_environ_setenv(envp, kv[0], kv[1] != NULL ? kv[1] : "", TRUE);
        g_strfreev(kv);
    }
    return envp;
}

JobResult tdm_test_run_with_launcher(int world, const char *mode, char **extra, double limit)
{
    JobResult res = {.status = -1};
    g_autofree char *self = self_exe();
    g_autofree char *nproc = g_strdup_printf("%d", world);
    char *argv[] = {(char *)g_getenv("TANDEM"),
                    "run",
                    "--nproc-per-node",
                    nproc,
                    "--",
                    self,
                    "--worker",
                    (char *)mode,
                    NULL};
    char **envp = job_env(extra);
    g_autofree char *limit_s = g_strdup_printf("%d", (int)limit);
    char *timeout_argv[] = {"timeout", "-k", "2", limit_s, NULL};
    GPtrArray *args = g_ptr_array_new();
    for (int i = 0; timeout_argv[i] != NULL; i++) {
        g_ptr_array_add(args, timeout_argv[i]);
    }
    for (int i = 0; argv[i] != NULL; i++) {
        g_ptr_array_add(args, argv[i]);
    }
    g_ptr_array_add(args, NULL);
    char *out = NULL, *err = NULL;
    double t0 = tdm_time_now();
    GError *error = NULL;
    if (!g_spawn_sync(NULL, (char **)args->pdata, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                      &res.status, &error)) {
        res.output = g_strdup(error->message);
        g_error_free(error);
    } else {
        res.output = g_strconcat(out, err, NULL);
    }
    res.seconds = tdm_time_now() - t0;
    g_free(out);
    g_free(err);
    g_ptr_array_unref(args);
    g_strfreev(envp);
    return res;
}

JobResult tdm_test_run_self(int world, const char *mode, char **extra, double limit)
{
    JobResult res = {.status = 0};
    GError *error = NULL;
    g_autofree char *token = g_strdup_printf("%08x%08x", g_random_int(), g_random_int());
    TdmStoreServer *server = tdm_store_server_new("127.0.0.1", 0, token, &error);
    if (server == NULL) {
        res.status = -1;
        res.output = g_strdup_printf("store server: %s", error->message);
        g_error_free(error);
        return res;
    }
    g_autofree char *self = self_exe();
    g_autofree char *dir = g_dir_make_tmp("tdm-coll-XXXXXX", NULL);
    pid_t pids[16];
    double t0 = tdm_time_now();
    for (int r = 0; r < world; r++) {
        char **envp = rank_env(job_env(extra), r, world, tdm_store_server_get_port(server), token);
        g_autofree char *log = g_strdup_printf("%s/rank%d.log", dir, r);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, 1);
            dup2(fd, 2);
            char *argv[] = {self, "--worker", (char *)mode, NULL};
            execve(self, argv, envp);
            _exit(127);
        }
        pids[r] = pid;
        g_strfreev(envp);
    }
    int alive = world;
    gboolean killed = FALSE;
    while (alive > 0) {
        for (int r = 0; r < world; r++) {
            int status;
            if (pids[r] > 0 && waitpid(pids[r], &status, WNOHANG) == pids[r]) {
                pids[r] = 0;
                alive--;
                if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                    res.status = status != 0 ? status : 1;
                }
            }
        }
        if (alive > 0 && tdm_time_now() - t0 > limit && !killed) {
            for (int r = 0; r < world; r++) {
                if (pids[r] > 0) {
                    kill(pids[r], SIGKILL);
                }
            }
            killed = TRUE;
            res.status = -1;
        }
        g_usleep(2000);
    }
    res.seconds = tdm_time_now() - t0;
    GString *all = g_string_new(killed ? "(job killed: over the time limit)\n" : "");
    for (int r = 0; r < world; r++) {
        g_autofree char *log = g_strdup_printf("%s/rank%d.log", dir, r);
        char *text = NULL;
        if (g_file_get_contents(log, &text, NULL, NULL)) {
            g_string_append_printf(all, "[rank %d] %s", r, text);
            g_free(text);
        }
        g_unlink(log);
    }
    g_rmdir(dir);
    res.output = g_string_free(all, FALSE);
    tdm_store_server_free(server);
    return res;
}

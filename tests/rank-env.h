/* SPDX-License-Identifier: MIT */
/* tests/rank-env.h - the variables a single-host job gives each of its
 * ranks (rank, world, the store's address, port and token), as `tdm run`
 * sets them: shared by the collective tests' job runner
 * (tests/collectives-jobs.c) and bench/allreduce.c, which fork their ranks
 * themselves.
 */
#ifndef TDM_TEST_RANK_ENV_H
#define TDM_TEST_RANK_ENV_H

#include <glib.h>

/* `envp` (consumed) with rank `rank` of `world`'s variables set, the
 * store on 127.0.0.1:`port` with `token`. */
static inline char **rank_env(char **envp, int rank, int world, int port, const char *token)
{
    char buf[32];
    g_snprintf(buf, sizeof buf, "%d", rank);
    envp = g_environ_setenv(envp, "TDM_RANK", buf, TRUE);
    envp = g_environ_setenv(envp, "TDM_LOCAL_RANK", buf, TRUE);
    g_snprintf(buf, sizeof buf, "%d", world);
    envp = g_environ_setenv(envp, "TDM_WORLD_SIZE", buf, TRUE);
    envp = g_environ_setenv(envp, "TDM_LOCAL_WORLD_SIZE", buf, TRUE);
    g_snprintf(buf, sizeof buf, "%d", port);
    envp = g_environ_setenv(envp, "TDM_MASTER_PORT", buf, TRUE);
    envp = g_environ_setenv(envp, "TDM_MASTER_ADDR", "127.0.0.1", TRUE);
    return g_environ_setenv(envp, "TDM_STORE_TOKEN", token, TRUE);
}

#endif /* TDM_TEST_RANK_ENV_H */

/* SPDX-License-Identifier: MIT */
/* tests/collectives-jobs.h - start a job of N ranks of a test program and
 * collect its exit status and output (tests/collectives-jobs.c). */
#ifndef TDM_TEST_COLLECTIVES_JOBS_H
#define TDM_TEST_COLLECTIVES_JOBS_H

#include <glib.h>

typedef struct {
    int status;   /* 0 when every rank exited 0 */
    char *output; /* everything the ranks printed (transfer full) */
    double seconds;
} JobResult;

/* Is `$TANDEM run` there to start jobs (TDM_TEST_LAUNCHER=self says no)? */
gboolean tdm_test_use_launcher(void);
/* Run `/proc/self/exe --worker MODE` as `world` ranks, with the KEY=VALUE
 * strings of `extra` added to the environment, killed after `limit` s:
 * through `$TANDEM run --nproc-per-node`, or with a store served here. */
JobResult tdm_test_run_with_launcher(int world, const char *mode, char **extra, double limit);
JobResult tdm_test_run_self(int world, const char *mode, char **extra, double limit);

#endif

/* SPDX-License-Identifier: MIT */
/* tools/check-plugin.h - the parts of `tandem check-plugin` (tools/cmd-
 * check-plugin.c drives; one file per kind of check). Each check prints
 * its own "PASS ..."/"FAIL ..."/"SKIP ..." lines and returns which. */
#ifndef TDM_TOOLS_CHECK_PLUGIN_H
#define TDM_TOOLS_CHECK_PLUGIN_H

#include <stdio.h>

#include <tandem/tandem.h>

typedef enum { CHECK_PASS = 0, CHECK_FAIL, CHECK_SKIP } CheckResult;

typedef struct {
    const char *file;     /* the plugin file under test */
    const char *self;     /* this program's executable, for child processes */
    double timeout_s;     /* collectives and the rendezvous */
    int max_world;        /* collectives run on 2..max_world processes */
    gboolean verbose;     /* show the children's whole output */
} CheckOptions;

/* Prints "RESULT what: detail" and returns the result. */
CheckResult check_report(CheckResult r, const char *what, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* check-plugin-backend.c: the op-by-op conformance suite against ref, run
 * as the helper program tandem-conformance. */
CheckResult check_backend(const CheckOptions *o, TdmFeature *f);
/* check-plugin-collective.c: every op on 2..max_world local processes
 * (`tandem run`), and the worker those processes run. */
CheckResult check_collective(const CheckOptions *o, TdmFeature *f);
int check_collective_worker(const char *name, double timeout_s);
/* check-plugin-train.c: a strategy equals `single` in a world of one; a
 * transform is deterministic per (seed, epoch, index) and makes the shape
 * it declares. */
CheckResult check_strategy(const CheckOptions *o, TdmFeature *f);
CheckResult check_transform(const CheckOptions *o, TdmFeature *f);

#endif /* TDM_TOOLS_CHECK_PLUGIN_H */

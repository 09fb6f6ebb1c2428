/* SPDX-License-Identifier: MIT */
/* tests/oracle/oracle-util.h - TAP lines and tensor comparisons shared by
 * the oracle programs (test-oracle.c, test-torchvision.c).
 */
#ifndef TDM_TESTS_ORACLE_UTIL_H
#define TDM_TESTS_ORACLE_UTIL_H

#include <tandem/tandem.h>

/* Prints "ok N - name" or "not ok N - name", then diag's lines as "# ...". */
void tap_result(gboolean ok, const char *name, const char *diag);
void tap_skip(const char *name, const char *why);
/* How many tap_result lines were "not ok". */
int tap_failures(void);

/* A stage's set of comparisons; problems (missing tensors, read errors,
 * shape mismatches) are collected as text and make the stage fail. */
typedef struct {
    GPtrArray *cmp;
    GString *problems;
    double tolerance;
} Stage;

void stage_init(Stage *s, double tolerance);
/* Prints the stage's TAP line (`label`, the count and the worst error) and
 * frees what stage_init made. */
void stage_finish(Stage *s, const char *label);
/* One comparison of n host floats with the reference's. */
void stage_add(Stage *s, const char *name, const float *ours, const float *ref, size_t n);
/* Compare device tensor `t` with the f32 reference `key` of `expected`;
 * with `origin` (the initial value, same size) compare t - origin with
 * ref - origin instead. */
void stage_compare_from(Stage *s, const TdmSafeTensors *expected, const char *key, TdmTensor *t,
                        const TdmSafeTensor *origin);
void stage_compare(Stage *s, const TdmSafeTensors *expected, const char *key, TdmTensor *t);
/* Device tensor holding a host safetensors entry (transfer full). */
TdmTensor *upload(TdmDevice *dev, const TdmSafeTensors *st, const char *key, GError **error);

#endif /* TDM_TESTS_ORACLE_UTIL_H */

/* SPDX-License-Identifier: MIT */
/* tests/conformance-util.h - helpers of the backend conformance suite.
 *
 * The suite runs every op on the `ref` oracle and on the backend under test
 * with the same random inputs and compares what comes back through
 * tdm_tensor_read() (the tested backend may keep its own layouts). A Pair is
 * one logical tensor present on both devices; TRY() runs a call that takes
 * `&err` and, when it fails, marks the test failed with the error and jumps
 * to the test's `out:` label, so that one broken op does not stop the suite.
 */
#ifndef TDM_CONFORMANCE_UTIL_H
#define TDM_CONFORMANCE_UTIL_H

#include <tandem/tandem.h>

/* Tolerances: relative error of the norm, ||got - ref|| / ||ref||. */
#define TOL_EXACT 0.0        /* data movement, max, masks, integer casts */
#define TOL_ELEMENTWISE 1e-5 /* relu, add, dropout, vector ops, optimizer updates */
#define TOL_REDUCTION 1e-4   /* gemm, conv, batch norm, pooling, loss */

/* The oracle, set once by main (transfer none). */
extern TdmDevice *conf_ref;

typedef struct {
    TdmTensor *r; /* on conf_ref */
    TdmTensor *t; /* on the tested device */
} Pair;

/* What a registered test case gets: the tested device and its case. */
typedef struct {
    TdmDevice *dev;
    gconstpointer tcase;
} ConfData;

/* Uniform random f32 values in [lo, hi) (transfer full). */
float *conf_random(int64_t n, double lo, double hi);
/* Plain tensors holding the same host data on both devices. */
Pair conf_pair_from(TdmDevice *dev, TdmDType dtype, int ndim, const int64_t *shape,
                    const void *host);
/* Plain f32 tensors of random values in [lo, hi) on both devices. */
Pair conf_pair_random(TdmDevice *dev, int ndim, const int64_t *shape, double lo, double hi);
/* Empty output slots on both devices. */
Pair conf_pair_empty(TdmDevice *dev, TdmDType dtype);
void conf_pair_clear(Pair *p);
/* out (an empty pair) = a 1x1 convolution of a random plain tensor of
 * shape s, plus a random per-channel bias in [bias_lo, bias_hi] when
 * bias_hi > bias_lo, on ref and on the device: each side's tensor arrives in
 * the layout its backend keeps between layers, which the single-op tests
 * (plain inputs) never give. FALSE (and the test marked failed) on error. */
gboolean conf_pair_produced(TdmDevice *dev, const int64_t *s, double bias_lo, double bias_hi,
                            Pair *out);

/* Read any tensor, converted to f32 values (transfer full); NULL + test
 * failure if the read fails. */
float *conf_read_values(TdmTensor *t);
/* Compare the two tensors of a pair (shape, dtype, values); FALSE (and the
 * test marked failed, with details) when they differ by more than tol. */
gboolean conf_compare(const char *what, const Pair *p, double tol);
gboolean conf_compare_values(const char *what, const float *ref, const float *got, int64_t n,
                             double tol);
/* Compare one tensor with expected host values. */
gboolean conf_compare_host(const char *what, TdmTensor *t, const float *expect, double tol);

/* Whether the two sides' ReLU outputs in `p` disagree on the mask (output >
 * 0) only at elements where both lie within `margin` of 0: a random draw
 * with a pre-activation that close to 0, where rounding decides the mask and
 * the gradients behind it legitimately differ (a test message says so). */
gboolean conf_relu_ambiguous(const Pair *p, double margin);
/* The margin and the number of draws for tests that redraw such inputs. */
#define CONF_RELU_MARGIN 1e-4
#define CONF_DRAWS 8
/* Runs `once(data, last)` until it returns TRUE (compared, or failed), at
 * most CONF_DRAWS times; `last` is TRUE on the final draw, which compares
 * whatever it drew. */
void conf_redrawing(gboolean (*once)(gconstpointer data, gboolean last), gconstpointer data);

/* Marks the test failed when !ok (with err's message); returns ok. */
gboolean conf_check_ok(gboolean ok, GError *err, const char *expr);

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        GError *err = NULL;                                                                        \
        gboolean ok_ = (expr);                                                                     \
        if (!conf_check_ok(ok_, err, #expr)) {                                                     \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* Registers the test /conformance/GROUP/NAME+suffix, which gets a
 * ConfData with dev and tcase. */
void conf_add(const char *group, const char *name, const char *suffix, TdmDevice *dev,
              gconstpointer tcase, GTestDataFunc fn);

/* conformance-chain.c: chains of ops without host round trips, reorder,
 * read and write; conformance-vector.c: vector ops, loss and optimizer
 * updates; conformance-pool.c: max pooling on ties, NaNs and -inf, in the
 * backend's layout and plain. `suffix` is appended to each path ("" or
 * "/cpu"). */
void conf_add_chain_tests(TdmDevice *dev, const char *suffix);
void conf_add_vector_tests(TdmDevice *dev, const char *suffix);
void conf_add_pool_tests(TdmDevice *dev, const char *suffix);

#endif /* TDM_CONFORMANCE_UTIL_H */

/* SPDX-License-Identifier: MIT */
/* core/recompute-choice.h - which convolution outputs the "auto"
 * recompute policy computes again in backward (private to the core;
 * core/recompute-choice.c says how). Plain arithmetic on figures the model
 * measured on its first training step, so that a test can give it any.
 */
#ifndef TDM_RECOMPUTE_CHOICE_H
#define TDM_RECOMPUTE_CHOICE_H

#include <glib.h>

typedef struct {
    double bytes;    /* the output that recomputing it does not keep */
    double work;     /* multiply-adds of computing it again (its forward) */
    gboolean chosen; /* set by tdm_recompute_choose */
} TdmRecomputeCandidate;

/* Chooses the candidates to recompute so that the step's memory times the
 * square of its work becomes as small as one candidate at a time can make
 * it (recompute-choice.c says why squared): `memory`
 * is the step's peak with every candidate kept, `work` its multiply-adds
 * with none computed again. Sets each candidate's `chosen`; returns how
 * many are. Nothing is chosen when memory or work is not positive. */
guint tdm_recompute_choose(TdmRecomputeCandidate *c, guint n, double memory, double work);

#endif /* TDM_RECOMPUTE_CHOICE_H */

/* SPDX-License-Identifier: MIT */
/* plugins/cpu/cpu-tune.h - kernels chosen by measurement.
 *
 * A convolution pass can run on oneDNN's direct primitive, oneDNN's
 * Winograd one (AVX-512 only) or one of the backend's own loops
 * (cpu-conv-own.h), each but the first valid for some shapes only.
 * Which is fastest depends on the shape and the machine, so the backend
 * measures instead of guessing: the first calls of a shape (a stable text
 * key: pass, sizes, parameters, layouts, threads) run the valid candidates
 * in turn on the training's real tensors, each CPU_TUNE_RUNS times (runs
 * that paged memory in not counted), and
 * the one with the fastest run is kept for the rest of the process
 * (cpu-tune.c says how a run is timed on a shared machine, and why the
 * minimum); another kernel must beat oneDNN's direct one by
 * CPU_TUNE_MARGIN.
 * Every call computes with one candidate only, so results are what that
 * candidate computes. The choices are process-wide (every layer of a
 * shape shares them) and can be kept in a file (TDM_CPU_TUNE_CACHE=FILE,
 * keyed by CPU model, instruction set and oneDNN version), read at the
 * first convolution and rewritten atomically each time a new choice is
 * made (so a run killed later and resumed from a checkpoint finds them;
 * the trainer keeps one per rank in --checkpoint-dir). TDM_CPU_TUNE=off runs the fixed rules (the
 * first valid own kernel in the order stem, Winograd, bwf8, else oneDNN), TDM_CPU_TUNE=force:NAME
 * runs candidate NAME wherever it is valid (oneDNN elsewhere); the old
 * switches (TDM_CPU_STEM=0, TDM_CPU_BWF8=0, TDM_CPU_WINO=0, and
 * TDM_CPU_ONEDNN_WINO=0) still take a kernel out. TDM_CPU_PROFILE=1 lists each shape's choice and
 * the times measured. */
#ifndef TDM_CPU_TUNE_H
#define TDM_CPU_TUNE_H

#include <glib.h>
#include <stdio.h>

#include "cpu-cache.h"

/* Runs of each candidate timed before a choice (without page faults:
 * cpu-tune.c), and the most runs before a choice with faults counted. */
#define CPU_TUNE_RUNS 4
#define CPU_TUNE_MAX_RUNS 12
/* A run is clean (counts with its wall time, not its cpu time) when the
 * calling thread ran for this share of its wall time. */
#define CPU_TUNE_CLEAN 0.8
/* Another kernel is kept only when its time is this much below oneDNN's
 * direct one's. */
#define CPU_TUNE_MARGIN 0.05

#define CPU_CONV_BIT(impl) (1u << (impl))

typedef struct CpuTuneShape CpuTuneShape;

/* The shape `key` (copied) with the candidates `valid` (CpuConvImpl bits,
 * oneDNN always among them): *shape gets its process-wide state, and the
 * return value the candidates an entry of that shape must set up (the
 * choice alone once made, every valid one while timing). */
guint cpu_tune_plan(const char *key, guint valid, CpuTuneShape **shape);
/* The candidate to run now among those set up (`have`); *timed: whether
 * the call is to be timed and passed to cpu_tune_record. */
CpuConvImpl cpu_tune_pick(CpuTuneShape *shape, guint have, gboolean *timed);
/* The clocks at the start of a timed call. */
typedef struct {
    double wall, cpu; /* seconds: monotonic, and the calling thread's cpu time */
    long faults;      /* the calling thread's page faults */
} CpuTuneClock;
void cpu_tune_start(CpuTuneClock *c);
/* A timed call of candidate impl, started at `start`, has ended; makes the
 * choice once every candidate has been timed enough. */
void cpu_tune_record(CpuTuneShape *shape, CpuConvImpl impl, const CpuTuneClock *start);
/* Whether TDM_CPU_TUNE=force:NAME names impl: a candidate that a shape
 * would not be offered for its cost alone is then set up wherever it is
 * valid (the conformance tests run it on every shape). */
gboolean cpu_tune_forced(CpuConvImpl impl);
/* The candidate's name: "onednn", "stem", "bwf8", "wino", "onednn_wino",
 * "gemm". */
const char *cpu_tune_impl_name(CpuConvImpl impl);
/* At exit: TDM_CPU_PROFILE's table of choices (when profile), and the
 * cache file written when new choices were made. */
void cpu_tune_finish(gboolean profile, FILE *out);

#endif /* TDM_CPU_TUNE_H */

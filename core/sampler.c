/* SPDX-License-Identifier: MIT */
/* core/sampler.c - the order in which a loader visits a dataset.
 *
 * Every epoch has ONE global order: a permutation of the n samples (the
 * identity for the sequential kind, a Fisher-Yates shuffle driven by a
 * splitmix64 stream keyed by (seed, epoch) otherwise), extended by repeating
 * it from its start (padding, when drop_last is false) or cut (drop_last) so
 * that its length is a multiple of the world size. Rank r takes the global
 * positions r, r + world, r + 2*world, ... so with a per-rank batch B,
 * rank r's batch k holds the global positions k*B*world + r + j*world
 * (j < B): step k of all ranks together is always the slice
 * [k*B*world, (k+1)*B*world) of the global order, whatever the world size.
 * A 2-rank x 32 run therefore sees the same 64 samples per step as a
 * 1-rank x 64 run, and every rank gets the same number of samples.
 *
 * The state is (epoch, consumed): how many positions of the global order
 * all ranks have used. Restoring it splits what remains of the epoch,
 * starting at `consumed`, over the current ranks (padding or cutting the
 * remainder to a multiple of the new world size), so resuming with another
 * world size or worker count continues with exactly the samples an
 * uninterrupted run would have used next. The public struct is the first
 * member of a private one that remembers where the rank's order starts.
 */
#include "config.h"

#include "internal.h"

typedef struct {
    TdmSampler pub;
    int64_t start;  /* global position of this epoch's first remaining sample */
    int64_t *perm;  /* the epoch's global order (n entries) */
} SamplerImpl;

static guint64 splitmix64(guint64 *state)
{
    guint64 z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) without modulo bias (rejection of the short range). */
static guint64 uniform_below(guint64 *state, guint64 bound)
{
    guint64 threshold = (0 - bound) % bound;
    for (;;) {
        guint64 r = splitmix64(state);
        if (r >= threshold) {
            return r % bound;
        }
    }
}

static void shuffle_indices(int64_t *perm, int64_t n, guint64 seed, int64_t epoch)
{
    /* Mix seed and epoch through the generator once so that neighbouring
     * seeds or epochs do not start from neighbouring states. */
    guint64 state = seed ^ 0x5851f42d4c957f2dULL;
    guint64 mixed = splitmix64(&state) ^ ((guint64)epoch * 0xd1342543de82ef95ULL);
    state = mixed;
    (void)splitmix64(&state);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)uniform_below(&state, (guint64)i + 1);
        int64_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

/* This rank's share of the global order from `start` on. */
static void build_rank_order(SamplerImpl *impl)
{
    TdmSampler *s = &impl->pub;
    int64_t remaining = s->n - impl->start;
    int64_t count = 0;
    if (remaining > 0) {
        count = s->drop_last ? remaining / s->world : (remaining + s->world - 1) / s->world;
    }
    s->order_len = count;
    s->position = 0;
    for (int64_t j = 0; j < count; j++) {
        int64_t global = impl->start + s->rank + j * s->world;
        s->order[j] = impl->perm[global % s->n];
    }
}

TdmSampler *tdm_sampler_new(TdmSamplerKind kind, int64_t n, guint64 seed, int rank, int world,
                            gboolean drop_last)
{
    g_return_val_if_fail(n >= 0, NULL);
    g_return_val_if_fail(world >= 1 && rank >= 0 && rank < world, NULL);

    SamplerImpl *impl = g_new0(SamplerImpl, 1);
    TdmSampler *s = &impl->pub;
    s->kind = kind;
    s->n = n;
    s->seed = seed;
    s->rank = rank;
    s->world = world;
    s->drop_last = drop_last;
    /* Room for the longest share: all of a padded epoch on one rank. */
    impl->perm = g_new(int64_t, MAX(n, 1));
    s->order = g_new(int64_t, MAX(n / world + 1, 1));
    s->epoch = -1;
    tdm_sampler_set_epoch(s, 0);
    return s;
}

static void compute_global_order(SamplerImpl *impl, int64_t epoch)
{
    TdmSampler *s = &impl->pub;
    for (int64_t i = 0; i < s->n; i++) {
        impl->perm[i] = i;
    }
    if (s->kind != TDM_SAMPLER_SEQUENTIAL) {
        shuffle_indices(impl->perm, s->n, s->seed, epoch);
    }
    s->epoch = epoch;
}

void tdm_sampler_set_epoch(TdmSampler *s, int64_t epoch)
{
    g_return_if_fail(s != NULL);
    SamplerImpl *impl = (SamplerImpl *)s;
    if (epoch != s->epoch) {
        compute_global_order(impl, epoch);
    }
    impl->start = 0;
    build_rank_order(impl);
}

gboolean tdm_sampler_next(TdmSampler *s, int64_t *index)
{
    g_return_val_if_fail(s != NULL && index != NULL, FALSE);
    if (s->position >= s->order_len) {
        return FALSE;
    }
    *index = s->order[s->position++];
    return TRUE;
}

void tdm_sampler_get_state(const TdmSampler *s, TdmSamplerState *state)
{
    g_return_if_fail(s != NULL && state != NULL);
    const SamplerImpl *impl = (const SamplerImpl *)s;
    state->epoch = s->epoch;
    /* Ranks advance in lockstep: each sample this rank took stands for one
     * taken by every rank. Padding may carry the count past n. */
    state->consumed = MIN(impl->start + s->position * s->world, MAX(s->n, impl->start));
    state->reserved[0] = state->reserved[1] = NULL;
}

gboolean tdm_sampler_set_state(TdmSampler *s, const TdmSamplerState *state, GError **error)
{
    g_return_val_if_fail(s != NULL && state != NULL, FALSE);
    if (state->epoch < 0 || state->consumed < 0) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "sampler state: epoch %" G_GINT64_FORMAT ", consumed %" G_GINT64_FORMAT
                    " (both must be >= 0)", state->epoch, state->consumed);
        return FALSE;
    }
    if (state->consumed > s->n) {
        g_set_error(error, TDM_ERROR, TDM_ERROR_INVALID_ARG,
                    "sampler state: %" G_GINT64_FORMAT " samples consumed of an epoch of %"
                    G_GINT64_FORMAT " (was the dataset or --limit changed?)", state->consumed,
                    s->n);
        return FALSE;
    }
    SamplerImpl *impl = (SamplerImpl *)s;
    if (state->epoch != s->epoch) {
        compute_global_order(impl, state->epoch);
    }
    impl->start = state->consumed;
    build_rank_order(impl);
    return TRUE;
}

void tdm_sampler_free(TdmSampler *s)
{
    if (s == NULL) {
        return;
    }
    SamplerImpl *impl = (SamplerImpl *)s;
    g_free(impl->perm);
    g_free(s->order);
    g_free(impl);
}

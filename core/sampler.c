/* core/sampler.c - the order in which a loader visits a dataset.
 *
 * A sampler turns (kind, n, seed, epoch, rank, world) into this rank's list
 * of sample indices for the epoch. The order is a pure function of those
 * values (a Fisher-Yates shuffle driven by a splitmix64 stream keyed by seed
 * and epoch), so every rank of a distributed job computes the same global
 * permutation without talking to the others, and a resumed run sees the same
 * order as the original. The distributed kind deals the permutation out
 * round-robin, as PyTorch's DistributedSampler does, padding by wrapping
 * around (or dropping the tail with drop_last) so that every rank gets the
 * same number of samples and therefore the same number of steps.
 */
#include "config.h"

#include "internal.h"

static guint64 splitmix64(guint64 *state)
{
    guint64 z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) without modulo bias (Lemire's rejection). */
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

TdmSampler *tdm_sampler_new(TdmSamplerKind kind, int64_t n, guint64 seed, int rank, int world,
                            gboolean drop_last)
{
    g_return_val_if_fail(n >= 0, NULL);
    g_return_val_if_fail(world >= 1 && rank >= 0 && rank < world, NULL);

    TdmSampler *s = g_new0(TdmSampler, 1);
    s->kind = kind;
    s->n = n;
    s->seed = seed;
    s->rank = rank;
    s->world = world;
    s->drop_last = drop_last;
    tdm_sampler_set_epoch(s, 0);
    return s;
}

void tdm_sampler_set_epoch(TdmSampler *s, int64_t epoch)
{
    g_return_if_fail(s != NULL);

    s->epoch = epoch;
    s->position = 0;
    g_free(s->order);
    s->order = NULL;
    s->order_len = 0;
    if (s->n == 0) {
        return;
    }

    int64_t *perm = g_new(int64_t, s->n);
    for (int64_t i = 0; i < s->n; i++) {
        perm[i] = i;
    }
    if (s->kind != TDM_SAMPLER_SEQUENTIAL) {
        shuffle_indices(perm, s->n, s->seed, epoch);
    }
    if (s->kind != TDM_SAMPLER_DISTRIBUTED || s->world == 1) {
        s->order = perm;
        s->order_len = s->n;
        return;
    }

    int64_t per_rank = s->drop_last ? s->n / s->world : (s->n + s->world - 1) / s->world;
    s->order = g_new(int64_t, MAX(per_rank, 1));
    s->order_len = per_rank;
    for (int64_t k = 0; k < per_rank; k++) {
        int64_t global = k * s->world + s->rank;
        s->order[k] = perm[global % s->n];
    }
    g_free(perm);
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

void tdm_sampler_free(TdmSampler *s)
{
    if (s == NULL) {
        return;
    }
    g_free(s->order);
    g_free(s);
}

/* SPDX-License-Identifier: MIT */
/* plugins/cuda/cuda-cache.c - the cuda backend's op cache: a short list
 * of plans per call site, looked up by kind and key, least recently used
 * evicted (see cuda-cache.h). The plans' own contents are made and freed
 * by the files of their ops (cuda-blas.c, cuda-conv.c).
 *
 * No lock: a cache slot belongs to one call site, which one thread drives
 * (a dp replica has its own modules and so its own slots).
 */
#include "config.h"

#include <string.h>

#include "cuda-cache.h"

void cuda_key_init(CudaPlanKey *key)
{
    key->n = 0;
}

void cuda_key_add(CudaPlanKey *key, int64_t v)
{
    g_return_if_fail(key->n < CUDA_PLAN_KEY_MAX);
    key->v[key->n++] = v;
}

static gboolean key_equal(const CudaPlanKey *a, const CudaPlanKey *b)
{
    return a->n == b->n && memcmp(a->v, b->v, sizeof(int64_t) * (size_t)a->n) == 0;
}

CudaPlan *cuda_cache_find(TdmOpCache **cache, CudaPlanKind kind, const CudaPlanKey *key)
{
    if (cache == NULL || *cache == NULL) {
        return NULL;
    }
    CudaPlan **link = &(*cache)->plans;
    for (CudaPlan *p = *link; p != NULL; link = &p->next, p = p->next) {
        if (p->kind == kind && key_equal(&p->key, key)) {
            *link = p->next; /* to the front: the list stays in LRU order */
            p->next = (*cache)->plans;
            (*cache)->plans = p;
            return p;
        }
    }
    return NULL;
}

CudaPlan *cuda_plan_new(CudaPlanKind kind, const CudaPlanKey *key)
{
    CudaPlan *p = g_new0(CudaPlan, 1);
    p->kind = kind;
    p->key = *key;
    return p;
}

void cuda_plan_free(CudaPlan *plan)
{
    if (plan == NULL) {
        return;
    }
    if (plan->kind == CUDA_PLAN_GEMM) {
        cuda_gemm_plan_clear(&plan->gemm);
    } else {
        cuda_conv_plan_clear(&plan->conv);
    }
    g_free(plan);
}

void cuda_cache_insert(TdmOpCache **cache, CudaPlan *plan)
{
    if (cache == NULL) {
        return;
    }
    if (*cache == NULL) {
        *cache = g_new0(TdmOpCache, 1);
    }
    plan->next = (*cache)->plans;
    (*cache)->plans = plan;
    int n = 0;
    for (CudaPlan *p = plan; p != NULL; p = p->next) {
        if (++n == CUDA_PLANS_PER_CACHE && p->next != NULL) {
            CudaPlan *rest = p->next;
            p->next = NULL;
            while (rest != NULL) {
                CudaPlan *next = rest->next;
                cuda_plan_free(rest);
                rest = next;
            }
            break;
        }
    }
}

void cuda_plan_release(TdmOpCache **cache, CudaPlan *plan)
{
    if (cache == NULL) {
        cuda_plan_free(plan);
    }
}

void cuda_cache_free(TdmDevice *dev, TdmOpCache *cache)
{
    (void)dev;
    if (cache == NULL) {
        return;
    }
    CudaPlan *p = cache->plans;
    while (p != NULL) {
        CudaPlan *next = p->next;
        cuda_plan_free(p);
        p = next;
    }
    g_free(cache);
}

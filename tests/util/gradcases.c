/*
 * gradcases.c — see gradcases.h: the declared weights and the generator behind them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "gradcases.h"
#include "obload.h"

static const char *params[GC_MAX_PARAMS];
static int n_params;
static uint64_t rng_state;
static bool via_identity;
static char wnames[GC_MAX_PARAMS][64];

void
gc_set_via_identity(bool on)
{
    via_identity = on;
}

/* Declares weight name's initializer: name itself, or through an Identity "NAME.w". */
static const char *
declare(struct sim_ob *b, const char *name)
{
    char *w = wnames[n_params];

    assert_true(n_params < GC_MAX_PARAMS);
    if (!via_identity) {
        params[n_params++] = name;
        return name;
    }
    snprintf(w, sizeof(wnames[0]), "%s.w", name);
    sim_ob_node(b, "Identity", w, w, name);
    params[n_params++] = w;
    return w;
}

void
gc_reset(uint64_t seed)
{
    rng_state = seed;
    n_params = 0;
}

const char *const *
gc_params(int *n)
{
    *n = n_params;
    return params;
}

static float
urand(void)
{
    return test_urand01(&rng_state);     /* obload.h */
}

static int64_t
numel_of(int rank, const int64_t *d)
{
    int64_t n = 1;

    for (int i = 0; i < rank; i++)
        n *= d[i];
    return n;
}

static void
fill(float *v, int64_t n, enum dist dist)
{
    for (int64_t i = 0; i < n; i++) {
        float u = urand();
        switch (dist) {
        case D_POS: v[i] = 0.5f + u; break;
        case D_AWAY: v[i] = (0.2f + 0.8f * u) * (urand() < 0.5f ? -1.0f : 1.0f); break;
        case D_DISTINCT: v[i] = (float)i * 0.05f - (float)n * 0.025f; break;
        default: v[i] = 2.0f * u - 1.0f; break;
        }
    }
    if (dist == D_DISTINCT)
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(urand() * (float)(i + 1)) % (i + 1);
            float t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
}


void
gc_param_vals(struct sim_ob *b, const char *name, int rank, const int64_t *d, const float *v)
{
    sim_ob_initializer(b, declare(b, name), F32, rank, d, v);
}

void
gc_fconst(struct sim_ob *b, const char *name, int rank, const int64_t *d, enum dist dist)
{
    int64_t n = numel_of(rank, d);
    float *v = malloc((size_t)n * sizeof(float) + 4);

    assert_non_null(v);
    fill(v, n, dist);
    sim_ob_initializer(b, name, F32, rank, d, v);
    free(v);
}

void
gc_param(struct sim_ob *b, const char *name, int rank, const int64_t *d, enum dist dist)
{
    gc_fconst(b, declare(b, name), rank, d, dist);
}

void
gc_ints(struct sim_ob *b, const char *name, int rank, const int64_t *d, const int64_t *v)
{
    sim_ob_initializer(b, name, I64, rank, d, v);
}

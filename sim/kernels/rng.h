/*
 * rng.h — the simulator's one small pseudo-random generator: xorshift64* (Vigna, "An
 * experimental exploration of Marsaglia's xorshift generators, scrambled"), used where a
 * step draws from a generator reseeded per micro-batch (Dropout's masks, the Random* ops).
 * A state of 0 is replaced by a fixed non-zero one (xorshift has no other fixed point).
 */
#ifndef IPUOF_SIM_RNG_H
#define IPUOF_SIM_RNG_H

#include <stdint.h>

static inline uint64_t
sim_rand_next(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A double in [0, 1) from the next draw's top 53 bits. */
static inline double
sim_rand_unit(uint64_t *s)
{
    return (double)(sim_rand_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

#endif

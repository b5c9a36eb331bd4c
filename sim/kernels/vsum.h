/*
 * vsum.h — the float sum of a contiguous run, sixteen lanes at a time (the loop vectorizer
 * keeps a float sum in order, one addition after another, since reassociating it changes
 * the rounding). For the reductions of whole planes: a bias gradient, a global average.
 *
 * The order is fixed by n alone (lane j of two accumulators adds elements j, j + 16, ...;
 * the lanes are then summed pairwise in a fixed tree and the tail added in order), so the
 * result never depends on the thread or the level (hot.h) that computed it. Its rounding error
 * grows with n / 16 instead of n.
 */
#ifndef SIM_VSUM_H
#define SIM_VSUM_H

#include <stdint.h>

#include "vmath.h"

/* The sum of p[0 .. n) in the order above; 0 when n <= 0. p: borrowed, any alignment. */
static inline __attribute__((always_inline)) float
sim_vsumf(const float *p, int64_t n)
{
    sim_v8f a0 = SIM_V8(0.0f), a1 = SIM_V8(0.0f);
    int64_t i = 0;
    float s;

    for (; i + 16 <= n; i += 16) {
        a0 += *(const sim_v8f_u *)(p + i);
        a1 += *(const sim_v8f_u *)(p + i + 8);
    }
    if (i + 8 <= n) {
        a0 += *(const sim_v8f_u *)(p + i);
        i += 8;
    }
    a0 += a1;
    s = ((a0[0] + a0[4]) + (a0[2] + a0[6])) + ((a0[1] + a0[5]) + (a0[3] + a0[7]));
    for (; i < n; i++)
        s += p[i];
    return s;
}

#endif

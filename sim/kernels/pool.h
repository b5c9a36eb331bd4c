/*
 * pool.h — the host thread pool the simulator spreads one op over (an IPU has 1 472 tiles;
 * splitting an op over host threads is the simulator's analogue).
 *
 * One pool per process, sized to the machine's cores (sched_getaffinity; IPUOF_SIM_THREADS
 * overrides), started on first use and shared by every simulated IPU and every executable.
 * A parallel-for runs on the calling thread plus whichever workers are idle: when several
 * IPU threads call at once they share the workers, so the process never runs more compute
 * threads than callers + (cores - 1). Workers out of work spin up to IPUOF_SIM_SPIN_US
 * (default 50) before they sleep. Nothing is allocated per call. OpenBLAS is set to one
 * thread when the pool starts: large matrix products are split over the pool instead
 * (sim_pool_sgemm), so the two never compete for the cores.
 */
#ifndef SIM_POOL_H
#define SIM_POOL_H

#include <stdbool.h>
#include <stdint.h>

/* Work on the index range [lo, hi) of a parallel-for; ctx is the caller's. */
typedef void (*sim_pool_fn)(void *ctx, int64_t lo, int64_t hi);

/* Elements per piece of an elementwise map: below this a hand-off costs more than it saves. */
#define SIM_POOL_MAP_GRAIN 16384

/* Threads a parallel-for may use (callers included): the machine's cores, at least 1. */
int sim_pool_threads(void);

/*
 * Runs fn over [0, n) split into pieces of at least grain indices (grain < 1: 1), on the
 * calling thread and any idle workers, and returns when every piece is done. With n <=
 * grain, one thread, or a pool that failed to start, fn(ctx, 0, n) runs on the caller.
 * fn must not call sim_pool_for itself (it would run serially, which is correct but slow).
 */
void sim_pool_for(int64_t n, int64_t grain, sim_pool_fn fn, void *ctx);

/*
 * Zeroes bytes at p, split over the pool when large (a training step zeroes each gradient
 * buffer before its first writer adds into it: 2 % of the tutorial's cycles, on the IPU
 * thread alone before this). The result is the same whatever the split.
 */
void sim_pool_zero(void *p, size_t bytes);

/*
 * C (m x n, leading dim ldc) = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm, split
 * over the pool along the larger of m and n when the product is large enough to gain: in
 * whole register blocks (16 columns, 4 rows), or row by row (column by column) when there
 * are fewer than 4 blocks per thread, so the pieces stay even.
 * Dimensions must fit int (the callers check).
 */
void sim_pool_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                    float *c, int64_t ldc);

#endif

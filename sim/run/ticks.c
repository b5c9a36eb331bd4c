/*
 * ticks.c — the exchanges between the IPU threads of one run (ticks.h states the contract).
 * A count is an atomic the one thread that moves it stores with release order; a waiter
 * reads it with acquire order and sleeps only when it is short, on a condition variable of
 * its own, after raising its flag (which count it waits on): the poster stores the count,
 * then looks at the flag of the one thread that can wait for it (both sequentially
 * consistent, so either the poster sees the flag or the waiter sees the count) and signals
 * under the mutex only when it waits on that count. So a
 * thread is woken only for a count it waits on, by the thread that moved it.
 * Does not: copy anything, or decide which counts a step needs (ipus.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "ticks.h"

struct sim_ticks {
    unsigned units;
    int n_xfer;
    atomic_uint_fast64_t *cnt;  /* R x n_xfer x SIM_TK_N */
    atomic_size_t *waiting;     /* per thread: 1 + the count it is about to sleep on, or 0 */
    pthread_mutex_t mu;
    pthread_cond_t *cv;         /* per thread */
};

struct sim_ticks *
sim_ticks_new(unsigned R, unsigned ipr, int n_xfer)
{
    struct sim_ticks *t = calloc(1, sizeof(*t));
    size_t n = (size_t)R * (size_t)(n_xfer > 0 ? n_xfer : 1) * SIM_TK_N;

    if (t == NULL)
        return NULL;
    t->units = R * ipr;
    t->n_xfer = n_xfer;
    t->cnt = calloc(n, sizeof(*t->cnt));
    t->waiting = calloc(t->units, sizeof(*t->waiting));
    t->cv = calloc(t->units, sizeof(*t->cv));
    if (t->cnt == NULL || t->waiting == NULL || t->cv == NULL) {
        free(t->cnt);
        free(t->waiting);
        free(t->cv);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    for (unsigned u = 0; u < t->units; u++)
        pthread_cond_init(&t->cv[u], NULL);
    return t;
}

void
sim_ticks_free(struct sim_ticks *t)
{
    if (t == NULL)
        return;
    for (unsigned u = 0; u < t->units; u++)
        pthread_cond_destroy(&t->cv[u]);
    pthread_mutex_destroy(&t->mu);
    free(t->cnt);
    free(t->waiting);
    free(t->cv);
    free(t);
}

/* Count c of transfer x of replica r. */
static atomic_uint_fast64_t *
count_at(const struct sim_ticks *t, unsigned r, int x, int c)
{
    return &t->cnt[((size_t)r * (size_t)t->n_xfer + (size_t)x) * SIM_TK_N + (size_t)c];
}

uint64_t
sim_ticks_get(const struct sim_ticks *t, unsigned r, int x, int c)
{
    return atomic_load_explicit(count_at(t, r, x, c), memory_order_relaxed);
}

int
sim_ticks_wait(struct sim_ticks *t, unsigned u, unsigned r, int x, int c, uint64_t need,
               bool (*stop)(void *ud), void *ud, unsigned *wakes, unsigned *polls)
{
    atomic_uint_fast64_t *n = count_at(t, r, x, c);
    size_t which = (size_t)(n - t->cnt) + 1;
    int rc = 0;

    if (atomic_load_explicit(n, memory_order_acquire) >= need)
        return 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        struct timespec ts;
        atomic_store(&t->waiting[u], which);
        if (atomic_load(n) >= need)
            break;
        if (stop(ud)) {
            rc = -1;
            break;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&t->cv[u], &t->mu, &ts) == 0)
            ++*wakes;
        else
            ++*polls;
    }
    atomic_store(&t->waiting[u], 0);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void
sim_ticks_post(struct sim_ticks *t, unsigned r, int x, int c, uint64_t v, unsigned u)
{
    atomic_uint_fast64_t *n = count_at(t, r, x, c);

    atomic_store(n, v);
    if (atomic_load(&t->waiting[u]) != (size_t)(n - t->cnt) + 1)
        return;
    pthread_mutex_lock(&t->mu);
    pthread_cond_signal(&t->cv[u]);
    pthread_mutex_unlock(&t->mu);
}

void
sim_ticks_wake_all(struct sim_ticks *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    for (unsigned u = 0; u < t->units; u++)
        pthread_cond_signal(&t->cv[u]);
    pthread_mutex_unlock(&t->mu);
}

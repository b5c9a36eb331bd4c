/*
 * feed.c — a run's input arriving while it runs, its outputs leaving as they are done
 * (sim.h's "Transfers overlapped with computing" states the contract; feed.h the run side).
 * Input: one watermark, the steps present, stored with release order after the producer
 * wrote their bytes and read with acquire order by the host-input steps, which wait on a
 * condition variable of the input only when they are ahead of it (the outputs have their
 * own, so an output step done wakes no IPU thread waiting for input). Output: a counter per step of the
 * host-output steps done (R x N of them complete a step: every stage of every replica) and
 * the watermark of leading complete steps, advanced under the mutex.
 * Does not: decide where the bytes go (the caller writes the input buffers) or run anything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "exe.h"
#include "feed.h"

struct sim_feed {
    pthread_mutex_t mu;
    pthread_cond_t in_cv;       /* the input grew or closed: host-input steps wait on it */
    pthread_cond_t out_cv;      /* the outputs grew or the run ended: the caller waits */
    atomic_uint_fast64_t in;    /* steps [0, in) of every input are present */
    bool closed;                /* no more input will come */
    bool ended;                 /* the run returned */
    uint64_t steps;             /* D x A */
    unsigned per_step;          /* host-output steps that complete a step: R x N */
    uint64_t out;               /* steps [0, out) have every output row */
    atomic_uint *done;          /* per step: host-output steps done */
    void (*notify)(void *arg, uint64_t out); /* called as out grows (sim_feed_notify) */
    void *notify_arg;
};

struct sim_feed *
sim_feed_new(const struct sim_exe *e)
{
    struct sim_feed *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return NULL;
    f->steps = (uint64_t)e->D * e->A;
    f->per_step = e->R * (unsigned)e->n_stages;
    f->done = calloc(f->steps + 1, sizeof(*f->done));
    if (f->done == NULL) {
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->in_cv, NULL);
    pthread_cond_init(&f->out_cv, NULL);
    return f;
}

void
sim_feed_free(struct sim_feed *f)
{
    if (f == NULL)
        return;
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->in_cv);
    pthread_cond_destroy(&f->out_cv);
    free(f->done);
    free(f);
}

void
sim_feed_inputs(struct sim_feed *f, uint64_t n)
{
    if (n > f->steps)
        n = f->steps;
    pthread_mutex_lock(&f->mu);
    if (n > atomic_load_explicit(&f->in, memory_order_relaxed)) {
        atomic_store_explicit(&f->in, n, memory_order_release);
        pthread_cond_broadcast(&f->in_cv);
    }
    pthread_mutex_unlock(&f->mu);
}

void
sim_feed_close(struct sim_feed *f)
{
    if (f == NULL)
        return;
    pthread_mutex_lock(&f->mu);
    f->closed = true;
    pthread_cond_broadcast(&f->in_cv);
    pthread_mutex_unlock(&f->mu);
}

int
sim_feed_wait_in(struct sim_feed *f, uint64_t k, bool (*cancelled)(void *ud), void *ud,
                 struct sim_err *err)
{
    int rc = 0;

    if (atomic_load_explicit(&f->in, memory_order_acquire) > k)
        return 0;
    pthread_mutex_lock(&f->mu);
    while (atomic_load_explicit(&f->in, memory_order_acquire) <= k) {
        struct timespec ts;
        if (f->closed) {
            rc = sim_err_set(err, IPUOF_E_CLOSED, "the run's input stopped coming: "
                             "micro-batch step %llu of %llu never arrived",
                             (unsigned long long)k, (unsigned long long)f->steps);
            break;
        }
        if (cancelled(ud)) {
            rc = sim_err_set(err, IPUOF_E_CANCELLED, "the run was cancelled");
            break;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&f->in_cv, &f->mu, &ts);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void
sim_feed_out_done(struct sim_feed *f, uint64_t k)
{
    uint64_t out;

    if (k >= f->steps || atomic_fetch_add(&f->done[k], 1) + 1 != f->per_step)
        return;
    pthread_mutex_lock(&f->mu);
    while (f->out < f->steps && atomic_load(&f->done[f->out]) == f->per_step)
        f->out++;
    out = f->out;
    pthread_cond_broadcast(&f->out_cv);     /* not the IPU threads waiting for input */
    pthread_mutex_unlock(&f->mu);
    if (f->notify != NULL)
        f->notify(f->notify_arg, out);
}

void
sim_feed_notify(struct sim_feed *f, void (*fn)(void *arg, uint64_t out), void *arg)
{
    f->notify = fn;
    f->notify_arg = arg;
}

void
sim_feed_end(struct sim_feed *f)
{
    pthread_mutex_lock(&f->mu);
    f->ended = true;
    pthread_cond_broadcast(&f->in_cv);
    pthread_cond_broadcast(&f->out_cv);
    pthread_mutex_unlock(&f->mu);
}

uint64_t
sim_feed_outputs(struct sim_feed *f)
{
    uint64_t n;

    pthread_mutex_lock(&f->mu);
    n = f->out;
    pthread_mutex_unlock(&f->mu);
    return n;
}

uint64_t
sim_feed_wait_outputs(struct sim_feed *f, uint64_t n)
{
    uint64_t got;

    pthread_mutex_lock(&f->mu);
    while (f->out < n && !f->ended)
        pthread_cond_wait(&f->out_cv, &f->mu);
    got = f->out;
    pthread_mutex_unlock(&f->mu);
    return got;
}

uint64_t
sim_feed_wait_inputs(struct sim_feed *f, uint64_t n)
{
    uint64_t got;

    if (n > f->steps)
        n = f->steps;
    pthread_mutex_lock(&f->mu);
    while (atomic_load_explicit(&f->in, memory_order_relaxed) < n && !f->closed)
        pthread_cond_wait(&f->in_cv, &f->mu);
    got = atomic_load_explicit(&f->in, memory_order_relaxed);
    pthread_mutex_unlock(&f->mu);
    return got;
}

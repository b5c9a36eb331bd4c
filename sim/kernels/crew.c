/*
 * crew.c — the threads that run an executable: one per simulated IPU, (replica, IPU), a
 * one-replica one-IPU run included (beyond SIM_MAX_IPUS one-IPU replicas a thread takes
 * replicas r, r + T, r + 2T, ...; ipus.c), created once, at the executable's first run,
 * and joined when it is freed. The calling thread of sim_exe_run() is none of them: it
 * starts the run and waits for every thread to finish it. Threads wait for a run, run
 * their share of it and meet at barriers (the end of each device iteration of a training
 * run, where thread 0 performs the reduction across replicas and the weight update, the
 * collective step, while the others wait). Also per-replica barriers (sim_bar), which
 * agree on stopping as they meet: exec.c still makes one per replica, but the IPU threads
 * no longer meet at ticks (each waits only on the exchanges it reads, ticks.c).
 * Does not: decide what a thread runs (ipus.c gives it its IPU's program).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crew.h"

struct sim_crew {
    unsigned n;                 /* threads (the caller is not one of them) */
    pthread_t *th;              /* n workers */
    unsigned started;           /* workers created */
    pthread_mutex_t mu;
    pthread_cond_t wake, done_cv, bar_cv;
    uint64_t gen;               /* run generation: workers start a run when it changes */
    unsigned done;              /* workers finished with the current run */
    unsigned bar_count;
    uint64_t bar_gen;
    bool quit;
    sim_crew_job job;
    struct sim_exe *e;
    void *ud;
};

struct worker_arg {
    struct sim_crew *c;
    unsigned idx;
};

static void *
worker(void *p)
{
    struct worker_arg *a = p;
    struct sim_crew *c = a->c;
    unsigned idx = a->idx;
    uint64_t seen = 0;

    free(a);
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && c->gen == seen)
            pthread_cond_wait(&c->wake, &c->mu);
        if (c->quit)
            break;
        seen = c->gen;
        pthread_mutex_unlock(&c->mu);
        c->job(c->e, idx, c->n, c->ud);
        pthread_mutex_lock(&c->mu);
        c->done++;
        pthread_cond_signal(&c->done_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void
sim_crew_free(struct sim_crew *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->mu);
    for (unsigned i = 0; i < c->started; i++)
        pthread_join(c->th[i], NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->done_cv);
    pthread_cond_destroy(&c->bar_cv);
    free(c->th);
    free(c);
}

struct sim_crew *
sim_crew_new(unsigned n)
{
    struct sim_crew *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->n = n;
    c->th = calloc(n, sizeof(*c->th));
    if (c->th == NULL) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->done_cv, NULL);
    pthread_cond_init(&c->bar_cv, NULL);
    for (unsigned i = 0; i < n; i++) {
        struct worker_arg *a = malloc(sizeof(*a));
        if (a == NULL)
            break;
        a->c = c;
        a->idx = i;
        if (pthread_create(&c->th[c->started], NULL, worker, a) != 0) {
            free(a);
            break;
        }
        c->started++;
    }
    if (c->started != n) {
        sim_crew_free(c);
        return NULL;
    }
    return c;
}

void
sim_crew_run(struct sim_crew *c, struct sim_exe *e, sim_crew_job job, void *ud)
{
    pthread_mutex_lock(&c->mu);
    c->job = job;
    c->e = e;
    c->ud = ud;
    c->done = 0;
    c->gen++;
    pthread_cond_broadcast(&c->wake);
    while (c->done < c->n)
        pthread_cond_wait(&c->done_cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

unsigned
sim_crew_barrier(struct sim_crew *c)
{
    uint64_t gen;
    unsigned wakes = 0;

    if (c == NULL || c->n == 1)
        return 0;
    pthread_mutex_lock(&c->mu);
    gen = c->bar_gen;
    if (++c->bar_count == c->n) {
        c->bar_count = 0;
        c->bar_gen++;
        pthread_cond_broadcast(&c->bar_cv);
    } else {
        while (c->bar_gen == gen) {
            pthread_cond_wait(&c->bar_cv, &c->mu);
            wakes++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return wakes;
}

unsigned
sim_crew_size(const struct sim_crew *c)
{
    return c != NULL ? c->n : 1;
}

struct sim_bar {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned n, count;
    uint64_t gen;
    bool stop;                  /* some thread of the current round asked to stop */
    bool last_stop;             /* the verdict of the previous round */
};

struct sim_bar *
sim_bar_new(unsigned R, unsigned n)
{
    struct sim_bar *b = calloc(R, sizeof(*b));

    if (b == NULL)
        return NULL;
    for (unsigned r = 0; r < R; r++) {
        pthread_mutex_init(&b[r].mu, NULL);
        pthread_cond_init(&b[r].cv, NULL);
        b[r].n = n;
    }
    return b;
}

void
sim_bar_free(struct sim_bar *b, unsigned R)
{
    if (b == NULL)
        return;
    for (unsigned r = 0; r < R; r++) {
        pthread_mutex_destroy(&b[r].mu);
        pthread_cond_destroy(&b[r].cv);
    }
    free(b);
}

bool
sim_bar_wait(struct sim_bar *b, bool stop, unsigned *wakes)
{
    bool verdict;

    pthread_mutex_lock(&b->mu);
    b->stop = b->stop || stop;
    if (++b->count == b->n) {
        b->last_stop = b->stop;
        b->stop = false;
        b->count = 0;
        b->gen++;
        pthread_cond_broadcast(&b->cv);
    } else {
        uint64_t gen = b->gen;
        while (b->gen == gen) {
            pthread_cond_wait(&b->cv, &b->mu);
            ++*wakes;
        }
    }
    verdict = b->last_stop;
    pthread_mutex_unlock(&b->mu);
    return verdict;
}

struct sim_bar *
sim_bar_at(struct sim_bar *b, unsigned r)
{
    return &b[r];
}

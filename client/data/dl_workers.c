/*
 * dl_workers.c — the data loader's worker threads (see dl_workers.h). A batch is a
 * generation number: the caller publishes fn, ctx and count under mu and bumps gen; every
 * worker runs its share and counts itself done; the caller waits for all n. No thread
 * spins: both sides wait on condition variables.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "dl_workers.h"

struct worker {
    struct dl_workers *ws;
    unsigned id;
    pthread_t thread;
    int started;
    int rc;                      /* this batch's failure, or 0 */
    size_t failed_k;
};

struct dl_workers {
    unsigned n;
    struct worker *w;            /* n */
    pthread_mutex_t mu;
    pthread_cond_t go_cv, done_cv;
    uint64_t gen;                /* bumped per batch; under mu */
    unsigned done;               /* workers finished with gen; under mu */
    int stop;                    /* under mu */
    dl_sample_fn fn;
    void *ctx;
    size_t base, count;
    atomic_int failed;           /* a sample failed: stop early */
};

static void *
worker_main(void *arg)
{
    struct worker *me = arg;
    struct dl_workers *ws = me->ws;
    uint64_t seen = 0;

    pthread_mutex_lock(&ws->mu);
    for (;;) {
        while (!ws->stop && ws->gen == seen)
            pthread_cond_wait(&ws->go_cv, &ws->mu);
        if (ws->stop)
            break;
        seen = ws->gen;
        pthread_mutex_unlock(&ws->mu);
        me->rc = 0;
        for (size_t k = (me->id + ws->n - ws->base % ws->n) % ws->n;
             k < ws->count && !atomic_load(&ws->failed); k += ws->n) {
            int rc = ws->fn(ws->ctx, me->id, k);
            if (rc != 0) {
                me->rc = rc;
                me->failed_k = k;
                atomic_store(&ws->failed, 1);
                break;
            }
        }
        pthread_mutex_lock(&ws->mu);
        if (++ws->done == ws->n)
            pthread_cond_signal(&ws->done_cv);
    }
    pthread_mutex_unlock(&ws->mu);
    return NULL;
}

int
dl_workers_new(unsigned n, struct dl_workers **out)
{
    struct dl_workers *ws = calloc(1, sizeof *ws);

    *out = NULL;
    if (ws == NULL)
        return -1;
    ws->n = n;
    ws->w = calloc(n, sizeof *ws->w);
    atomic_init(&ws->failed, 0);
    if (ws->w == NULL || pthread_mutex_init(&ws->mu, NULL) != 0) {
        free(ws->w);
        free(ws);
        return -1;
    }
    pthread_cond_init(&ws->go_cv, NULL);
    pthread_cond_init(&ws->done_cv, NULL);
    for (unsigned i = 0; i < n; i++) {
        ws->w[i].ws = ws;
        ws->w[i].id = i;
        if (pthread_create(&ws->w[i].thread, NULL, worker_main, &ws->w[i]) != 0) {
            dl_workers_free(ws);
            return -1;
        }
        ws->w[i].started = 1;
    }
    *out = ws;
    return 0;
}

int
dl_workers_run(struct dl_workers *ws, dl_sample_fn fn, void *ctx, size_t base, size_t count,
               size_t *failed_k)
{
    int rc = 0;

    pthread_mutex_lock(&ws->mu);
    ws->fn = fn;
    ws->ctx = ctx;
    ws->base = base;
    ws->count = count;
    ws->done = 0;
    atomic_store(&ws->failed, 0);
    ws->gen++;
    pthread_cond_broadcast(&ws->go_cv);
    while (ws->done < ws->n)
        pthread_cond_wait(&ws->done_cv, &ws->mu);
    pthread_mutex_unlock(&ws->mu);
    for (unsigned i = 0; i < ws->n; i++) {
        if (ws->w[i].rc != 0 && (rc == 0 || ws->w[i].failed_k < *failed_k)) {
            rc = ws->w[i].rc;
            *failed_k = ws->w[i].failed_k;
        }
    }
    return rc;
}

void
dl_workers_free(struct dl_workers *ws)
{
    if (ws == NULL)
        return;
    pthread_mutex_lock(&ws->mu);
    ws->stop = 1;
    pthread_cond_broadcast(&ws->go_cv);
    pthread_mutex_unlock(&ws->mu);
    for (unsigned i = 0; i < ws->n; i++)
        if (ws->w[i].started)
            pthread_join(ws->w[i].thread, NULL);
    pthread_cond_destroy(&ws->go_cv);
    pthread_cond_destroy(&ws->done_cv);
    pthread_mutex_destroy(&ws->mu);
    free(ws->w);
    free(ws);
}

/*
 * work.c — see work.h. A mutex-protected FIFO of work items and a fixed set of threads.
 * Completion goes back to the loop with event_active(), which is thread-safe because the
 * loop enabled libevent's pthread locking (evthread_use_pthreads) before creating its base.
 */
#include "work.h"

#include <pthread.h>
#include <stdlib.h>

struct done_ctx;

struct work {
    struct event_base *base;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct work_item *head, *tail;
    int stop;
    unsigned pending;             /* loop thread only */
    struct done_ctx *outstanding; /* every item submitted whose done() has not run; loop only */
    unsigned nthreads;
    pthread_t *threads;
};

struct done_ctx {
    struct work *w;
    struct work_item *j;
    struct done_ctx *prev, *next; /* in w->outstanding */
};

/* Takes ctx off the outstanding list, frees it and the item's event. Loop thread. */
static void
ctx_finish(struct done_ctx *ctx)
{
    struct work *w = ctx->w;

    if (ctx->prev != NULL)
        ctx->prev->next = ctx->next;
    else
        w->outstanding = ctx->next;
    if (ctx->next != NULL)
        ctx->next->prev = ctx->prev;
    w->pending--;
    event_free(ctx->j->ev);
    ctx->j->ev = NULL;
    free(ctx);
}

static void *
worker(void *arg)
{
    struct work *w = arg;

    for (;;) {
        struct work_item *j;

        pthread_mutex_lock(&w->mu);
        while (w->head == NULL && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop) {
            pthread_mutex_unlock(&w->mu);
            return NULL;
        }
        j = w->head;
        w->head = j->next;
        if (w->head == NULL)
            w->tail = NULL;
        pthread_mutex_unlock(&w->mu);
        j->run(j);
        event_active(j->ev, 0, 0);
    }
}

static void
on_done(evutil_socket_t fd, short what, void *arg)
{
    struct done_ctx *ctx = arg;
    struct work_item *j = ctx->j;

    (void)fd;
    (void)what;
    ctx_finish(ctx);
    j->done(j);
}

struct work *
work_new(struct event_base *base, unsigned threads)
{
    struct work *w = calloc(1, sizeof *w);

    if (w == NULL)
        return NULL;
    w->base = base;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->threads = calloc(threads, sizeof *w->threads);
    if (w->threads == NULL) {
        work_free(w);
        return NULL;
    }
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&w->threads[i], NULL, worker, w) != 0) {
            work_free(w);
            return NULL;
        }
        w->nthreads++;
    }
    return w;
}

int
work_submit(struct work *w, struct work_item *j)
{
    struct done_ctx *ctx = malloc(sizeof *ctx);

    if (ctx == NULL)
        return -1;
    ctx->w = w;
    ctx->j = j;
    j->ev = event_new(w->base, -1, 0, on_done, ctx);
    if (j->ev == NULL) {
        free(ctx);
        return -1;
    }
    j->next = NULL;
    j->dropped = 0;
    ctx->prev = NULL;
    ctx->next = w->outstanding;
    if (w->outstanding != NULL)
        w->outstanding->prev = ctx;
    w->outstanding = ctx;
    w->pending++;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

unsigned
work_pending(const struct work *w)
{
    return w ? w->pending : 0;
}

void
work_free(struct work *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    for (struct work_item *j = w->head; j != NULL; j = j->next)
        j->dropped = 1; /* queued, never started */
    w->head = w->tail = NULL;
    /* The workers are gone: finish every item, run or not, whose done() the loop has not
     * delivered (the loop may no longer be running to deliver it). */
    while (w->outstanding != NULL) {
        struct work_item *j = w->outstanding->j;
        ctx_finish(w->outstanding);
        j->done(j);
    }
    free(w->threads);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

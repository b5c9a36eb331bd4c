/*
 * work.h — the worker threads that run compiles and runs off the event loop (the
 * simulated IPUs' "threads"). An item's run() executes on a worker; its done() then runs on
 * the event-loop thread, through a libevent event activated from the worker.
 */
#ifndef IPUOFD_WORK_H
#define IPUOFD_WORK_H

#include <event2/event.h>

struct work;

struct work_item {
    void (*run)(struct work_item *j);   /* on a worker thread; must not touch loop-owned state */
    void (*done)(struct work_item *j);  /* on the loop thread, after run() (or instead of it when
                                   * dropped); may free the item */
    int dropped;                  /* set when work_free() drops the item before it ran: done()
                                   * then answers it as interrupted and frees it */
    struct event *ev;             /* set by work_submit */
    struct work_item *next;
};

/* Starts threads workers (>= 1). NULL when a thread cannot be created. */
struct work *work_new(struct event_base *base, unsigned threads);

/* Queues j; run() starts when a worker is free. 0, or -1 when out of memory. */
int work_submit(struct work *w, struct work_item *j);

/* Items queued or running. Loop thread only. */
unsigned work_pending(const struct work *w);

/* Stops the workers after the items they are running, then calls done() on the loop thread
 * for every item not yet completed: those that ran, and those still queued (with dropped
 * set), so each item is answered or freed exactly once. NULL is a no-op. */
void work_free(struct work *w);

#endif

/*
 * work.h — the worker threads that run compiles and runs off the event loop (the
 * simulated IPUs' "threads"). A job's run() executes on a worker; its done() then runs on
 * the event-loop thread, through a libevent event activated from the worker.
 */
#ifndef IPUOFD_WORK_H
#define IPUOFD_WORK_H

#include <event2/event.h>

struct work;

struct job {
    void (*run)(struct job *j);   /* on a worker thread; must not touch loop-owned state */
    void (*done)(struct job *j);  /* on the loop thread, after run() (or instead of it when
                                   * dropped); may free the job */
    int dropped;                  /* set when work_free() drops the job before it ran: done()
                                   * then answers it as interrupted and frees it */
    struct event *ev;             /* set by work_submit */
    struct job *next;
};

/* Starts threads workers (>= 1). NULL when a thread cannot be created. */
struct work *work_new(struct event_base *base, unsigned threads);

/* Queues j; run() starts when a worker is free. 0, or -1 when out of memory. */
int work_submit(struct work *w, struct job *j);

/* Jobs queued or running. Loop thread only. */
unsigned work_pending(const struct work *w);

/* Stops the workers after the jobs they are running, then calls done() on the loop thread
 * for every job not yet completed: those that ran, and those still queued (with dropped
 * set), so each job is answered or freed exactly once. NULL is a no-op. */
void work_free(struct work *w);

#endif

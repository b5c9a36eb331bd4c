/*
 * test_daemon_work.c — the worker pool (daemon/base/work.c): every job's done() runs exactly once
 * on the loop thread, in submission order with one worker, and work_free() finishes the
 * jobs whose completion the loop never delivered: the one that ran, and those still queued
 * (marked dropped), so none is leaked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "work.h"

struct tjob {
    struct work_item item;
    atomic_int started;         /* set by the worker as the job begins */
    int ran;
    int done;
    int dropped;
    int order;
    int sleep_ms;
};

static int done_seq;

static void
tjob_run(struct work_item *j)
{
    struct tjob *t = (struct tjob *)j;
    struct timespec ts = {0, (long)t->sleep_ms * 1000000};

    atomic_store(&t->started, 1);
    if (t->sleep_ms > 0)
        nanosleep(&ts, NULL);
    t->ran = 1;
}

static void
tjob_done(struct work_item *j)
{
    struct tjob *t = (struct tjob *)j;

    t->done++;
    t->dropped = j->dropped;
    t->order = ++done_seq;
}

static void
test_done_once_in_order(void **state)
{
    struct event_base *base;
    struct work *w;
    struct tjob t[5] = {0};

    (void)state;
    evthread_use_pthreads();
    base = event_base_new();
    w = work_new(base, 1);
    assert_non_null(w);
    done_seq = 0;
    for (int i = 0; i < 5; i++) {
        t[i].item.run = tjob_run;
        t[i].item.done = tjob_done;
        assert_int_equal(work_submit(w, &t[i].item), 0);
    }
    assert_int_equal(work_pending(w), 5);
    for (int i = 0; i < 2000 && work_pending(w) > 0; i++) {
        struct timespec ts = {0, 1000000};
        event_base_loop(base, EVLOOP_NONBLOCK);
        nanosleep(&ts, NULL);
    }
    assert_int_equal(work_pending(w), 0);
    for (int i = 0; i < 5; i++) {
        assert_true(t[i].ran);
        assert_int_equal(t[i].done, 1);
        assert_int_equal(t[i].dropped, 0);
        assert_int_equal(t[i].order, i + 1);
    }
    work_free(w);
    for (int i = 0; i < 5; i++)
        assert_int_equal(t[i].done, 1); /* not a second time */
    event_base_free(base);
}

/* work_free with one job running and three queued, the loop no longer running: all four
 * get their done() once, the queued ones marked dropped and never run. On main the queued
 * jobs (and the one that ran) were never finished: whatever they held leaked. */
static void
test_free_finishes_every_job(void **state)
{
    struct event_base *base;
    struct work *w;
    struct tjob t[4] = {0};
    struct timespec ts = {0, 1000000};

    (void)state;
    base = event_base_new();
    w = work_new(base, 1);
    assert_non_null(w);
    done_seq = 0;
    for (int i = 0; i < 4; i++) {
        t[i].item.run = tjob_run;
        t[i].item.done = tjob_done;
        t[i].sleep_ms = i == 0 ? 300 : 0;
        assert_int_equal(work_submit(w, &t[i].item), 0);
    }
    /* wait until the worker has taken job 0 (it then sleeps in it for 300 ms), however
     * slowly a loaded machine starts the worker thread */
    for (int i = 0; i < 30000 && !atomic_load(&t[0].started); i++)
        nanosleep(&ts, NULL);
    assert_true(atomic_load(&t[0].started));
    work_free(w);
    assert_true(t[0].ran);
    assert_int_equal(t[0].done, 1);
    assert_int_equal(t[0].dropped, 0);
    for (int i = 1; i < 4; i++) {
        assert_false(t[i].ran);
        assert_int_equal(t[i].done, 1);
        assert_int_equal(t[i].dropped, 1);
    }
    print_message("work_free: 1 job ran and finished, 3 queued jobs finished as dropped\n");
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_done_once_in_order),
        cmocka_unit_test(test_free_finishes_every_job),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

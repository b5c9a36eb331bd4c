/*
 * test_jobs_sm.c — a job's state machine (daemon/jobs/jobs_sm.c) without sockets: every (phase,
 * event) pair against the table written out here again (the next phase and the action, or
 * "cannot happen"), the ended phase keeping every event, the lives of a job of one and of a
 * job of three walked event by event, and the gather helper (who has arrived, who is
 * missing, a process arriving twice or from outside refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "jobs_sm.h"

enum { P_ATT = JOB_GATHER_ATTACH, P_RDY = JOB_READY, P_GCO = JOB_GATHER_COMPILE,
       P_CMP = JOB_COMPILING, P_GRU = JOB_GATHER_RUN, P_RUN = JOB_RUNNING, P_END = JOB_ENDED };

/* The expected table: one row per pair that can happen (ended aside). */
static const struct {
    int from, ev, to, act;
} expect[] = {
    {P_ATT, JOB_EV_ATTACH, P_ATT, JOB_ACT_ARM},
    {P_ATT, JOB_EV_ATTACH_ALL, P_ATT, JOB_ACT_DISARM},
    {P_ATT, JOB_EV_FORMED, P_RDY, JOB_ACT_NONE},
    {P_ATT, JOB_EV_TIMEOUT, P_END, JOB_ACT_END},
    {P_ATT, JOB_EV_LEAVE, P_END, JOB_ACT_END},
    {P_ATT, JOB_EV_END, P_END, JOB_ACT_END},
    {P_RDY, JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},
    {P_RDY, JOB_EV_COMPILE_ALL, P_CMP, JOB_ACT_NONE},
    {P_RDY, JOB_EV_RUN, P_GRU, JOB_ACT_ARM},
    {P_RDY, JOB_EV_LEAVE, P_RDY, JOB_ACT_END_EMPTY},
    {P_RDY, JOB_EV_END, P_END, JOB_ACT_END},
    {P_GCO, JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},
    {P_GCO, JOB_EV_COMPILE_ALL, P_CMP, JOB_ACT_DISARM},
    {P_GCO, JOB_EV_TIMEOUT, P_END, JOB_ACT_END},
    {P_GCO, JOB_EV_LEAVE, P_END, JOB_ACT_END},
    {P_GCO, JOB_EV_END, P_END, JOB_ACT_END},
    {P_CMP, JOB_EV_COMPILE_FAIL, P_RDY, JOB_ACT_NONE},
    {P_CMP, JOB_EV_COMPILED, P_RDY, JOB_ACT_NONE},
    {P_CMP, JOB_EV_LEAVE, P_END, JOB_ACT_END},
    {P_CMP, JOB_EV_END, P_END, JOB_ACT_END},
    {P_GRU, JOB_EV_RUN, P_GRU, JOB_ACT_ARM},
    {P_GRU, JOB_EV_RUN_START, P_RUN, JOB_ACT_DISARM},
    {P_GRU, JOB_EV_TIMEOUT, P_END, JOB_ACT_END},
    {P_GRU, JOB_EV_LEAVE, P_GRU, JOB_ACT_END_SHARED},
    {P_GRU, JOB_EV_END, P_END, JOB_ACT_END},
    {P_RUN, JOB_EV_RUN_DONE, P_RDY, JOB_ACT_NONE},
    {P_RUN, JOB_EV_LEAVE, P_RUN, JOB_ACT_END_SHARED},
    {P_RUN, JOB_EV_END, P_END, JOB_ACT_END},
};

/* Every pair of a live phase and an event: the row above, or -1 with no action. */
static void
test_every_pair(void **state)
{
    unsigned legal = 0;

    (void)state;
    for (int p = 0; p < JOB_ENDED; p++) {
        for (int e = 0; e < JOB_NEVENTS; e++) {
            enum job_action act = JOB_ACT_END;
            int next = job_sm_next((enum job_phase)p, (enum job_event)e, &act);
            int want = -1, want_act = JOB_ACT_NONE;
            for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
                if (expect[i].from == p && expect[i].ev == e) {
                    want = expect[i].to;
                    want_act = expect[i].act;
                }
            }
            if (next != want || (int)act != want_act)
                print_error("%s + %s: got %s (action %d), want %s (action %d)\n",
                            job_phase_name(p), job_event_name(e), job_phase_name(next),
                            (int)act, job_phase_name(want), want_act);
            assert_int_equal(next, want);
            assert_int_equal(act, want_act);
            legal += next >= 0;
        }
    }
    assert_int_equal(legal, sizeof expect / sizeof expect[0]);
}

/* An ended job takes every event and stays ended, doing nothing. */
static void
test_ended_absorbs(void **state)
{
    (void)state;
    for (int e = 0; e < JOB_NEVENTS; e++) {
        enum job_action act = JOB_ACT_ARM;
        assert_int_equal(job_sm_next(JOB_ENDED, (enum job_event)e, &act), JOB_ENDED);
        assert_int_equal(act, JOB_ACT_NONE);
    }
}

/* Every path into ended goes through an event whose action ends (or may end) the job. */
static void
test_ending_acts(void **state)
{
    (void)state;
    for (int p = 0; p < JOB_ENDED; p++) {
        for (int e = 0; e < JOB_NEVENTS; e++) {
            enum job_action act;
            if (job_sm_next((enum job_phase)p, (enum job_event)e, &act) == JOB_ENDED)
                assert_int_equal(act, JOB_ACT_END);
        }
    }
}

static void
test_out_of_range(void **state)
{
    enum job_action act = JOB_ACT_ARM;

    (void)state;
    assert_int_equal(job_sm_next(JOB_NPHASES, JOB_EV_END, &act), -1);
    assert_int_equal(act, JOB_ACT_NONE);
    assert_int_equal(job_sm_next(JOB_READY, JOB_NEVENTS, &act), -1);
    assert_int_equal(job_sm_next((enum job_phase)-1, JOB_EV_END, &act), -1);
    assert_string_equal(job_phase_name(JOB_NPHASES), "?");
    assert_string_equal(job_event_name(-1), "?");
    assert_string_equal(job_phase_name(JOB_GATHER_RUN), "gather-run");
    assert_string_equal(job_event_name(JOB_EV_RUN_DONE), "run-done");
}

/* Walks events from phase `from`, checking each next phase and action. */
struct step {
    int ev, to, act;
};

static void
walk(int from, const struct step *s, size_t n)
{
    int p = from;

    for (size_t i = 0; i < n; i++) {
        enum job_action act;
        int next = job_sm_next((enum job_phase)p, (enum job_event)s[i].ev, &act);
        if (next != s[i].to)
            print_error("step %zu: %s + %s -> %s, want %s\n", i, job_phase_name(p),
                        job_event_name(s[i].ev), job_phase_name(next), job_phase_name(s[i].to));
        assert_int_equal(next, s[i].to);
        assert_int_equal(act, s[i].act);
        p = next;
    }
}

/* A process attached alone: compile, run twice, leave (the last: the job ends). */
static void
test_life_of_one(void **state)
{
    static const struct step s[] = {
        {JOB_EV_COMPILE_ALL, P_CMP, JOB_ACT_NONE}, {JOB_EV_COMPILED, P_RDY, JOB_ACT_NONE},
        {JOB_EV_RUN, P_GRU, JOB_ACT_ARM},          {JOB_EV_RUN_START, P_RUN, JOB_ACT_DISARM},
        {JOB_EV_RUN_DONE, P_RDY, JOB_ACT_NONE},    {JOB_EV_RUN, P_GRU, JOB_ACT_ARM},
        {JOB_EV_RUN_START, P_RUN, JOB_ACT_DISARM}, {JOB_EV_RUN_DONE, P_RDY, JOB_ACT_NONE},
        {JOB_EV_LEAVE, P_RDY, JOB_ACT_END_EMPTY},  {JOB_EV_END, P_END, JOB_ACT_END},
        {JOB_EV_RUN_DONE, P_END, JOB_ACT_NONE},
    };

    (void)state;
    walk(P_RDY, s, sizeof s / sizeof s[0]);
}

/* Three processes: attach, form, a refused compile, a compile, a run; one leaves while the
 * others wait for the next compile: the job ends. */
static void
test_life_of_three(void **state)
{
    static const struct step s[] = {
        {JOB_EV_ATTACH, P_ATT, JOB_ACT_ARM},        {JOB_EV_ATTACH, P_ATT, JOB_ACT_ARM},
        {JOB_EV_ATTACH_ALL, P_ATT, JOB_ACT_DISARM}, {JOB_EV_FORMED, P_RDY, JOB_ACT_NONE},
        {JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},       {JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},
        {JOB_EV_COMPILE_ALL, P_CMP, JOB_ACT_DISARM}, {JOB_EV_COMPILE_FAIL, P_RDY, JOB_ACT_NONE},
        {JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},       {JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},
        {JOB_EV_COMPILE_ALL, P_CMP, JOB_ACT_DISARM}, {JOB_EV_COMPILED, P_RDY, JOB_ACT_NONE},
        {JOB_EV_RUN, P_GRU, JOB_ACT_ARM},           {JOB_EV_RUN, P_GRU, JOB_ACT_ARM},
        {JOB_EV_RUN, P_GRU, JOB_ACT_ARM},           {JOB_EV_RUN_START, P_RUN, JOB_ACT_DISARM},
        {JOB_EV_LEAVE, P_RUN, JOB_ACT_END_SHARED},  {JOB_EV_RUN_DONE, P_RDY, JOB_ACT_NONE},
        {JOB_EV_COMPILE, P_GCO, JOB_ACT_ARM},       {JOB_EV_LEAVE, P_END, JOB_ACT_END},
    };

    (void)state;
    walk(P_ATT, s, sizeof s / sizeof s[0]);
}

/* A gathering of processes 2..4 (a Pod share): arrivals, the missing list, refusals. */
static void
test_gather(void **state)
{
    struct job_gather g;
    char who[64];

    (void)state;
    job_gather_begin(&g, 2, 3);
    assert_int_equal(job_gather_count(&g), 0);
    assert_false(job_gather_complete(&g));
    assert_int_equal(job_gather_missing(&g, 10, who, sizeof who), 3);
    assert_string_equal(who, "12, 13, 14");
    assert_int_equal(job_gather_arrive(&g, 3), 0);
    assert_true(job_gather_has(&g, 3));
    assert_false(job_gather_has(&g, 2));
    assert_int_equal(job_gather_arrive(&g, 3), -1); /* twice */
    assert_int_equal(job_gather_arrive(&g, 1), -1); /* not one of it */
    assert_int_equal(job_gather_arrive(&g, 5), -1);
    assert_int_equal(job_gather_count(&g), 1);
    assert_int_equal(job_gather_missing(&g, 0, who, sizeof who), 2);
    assert_string_equal(who, "2, 4");
    assert_int_equal(job_gather_arrive(&g, 2), 0);
    assert_int_equal(job_gather_arrive(&g, 4), 1);
    assert_true(job_gather_complete(&g));
    assert_int_equal(job_gather_missing(&g, 0, who, sizeof who), 0);
    assert_string_equal(who, "");
    job_gather_begin(&g, 0, 1); /* a gathering of one is complete at its first */
    assert_int_equal(job_gather_arrive(&g, 0), 1);
}

/* 64 processes (JOB_MAX_PROCS): the whole mask. */
static void
test_gather_64(void **state)
{
    struct job_gather g;
    char who[8];

    (void)state;
    job_gather_begin(&g, 0, 64);
    for (unsigned p = 0; p < 63; p++)
        assert_int_equal(job_gather_arrive(&g, p), 0);
    assert_int_equal(job_gather_missing(&g, 0, who, sizeof who), 1);
    assert_int_equal(job_gather_arrive(&g, 63), 1);
    assert_int_equal(job_gather_count(&g), 64);
    assert_int_equal(job_gather_arrive(&g, 64), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_pair),  cmocka_unit_test(test_ended_absorbs),
        cmocka_unit_test(test_ending_acts), cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_life_of_one), cmocka_unit_test(test_life_of_three),
        cmocka_unit_test(test_gather),      cmocka_unit_test(test_gather_64),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

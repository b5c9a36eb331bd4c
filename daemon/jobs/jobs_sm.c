/*
 * jobs_sm.c — the table of a job's life (see jobs_sm.h) and the gather helper. No I/O, no
 * job: jobs_life.c's job_step applies a transition to a job.
 */
#include "jobs_sm.h"

#include <stdio.h>

/* One transition: in phase `from`, event `ev` moves the job to `to` doing `act`. */
struct job_transition {
    enum job_phase from;
    enum job_event ev;
    enum job_phase to;
    enum job_action act;
};

/*
 * Every transition a job makes (in the style of dispatch.c's request table). A pair absent
 * here cannot happen; JOB_ENDED takes every event and stays (what comes back from a worker
 * or a socket after the end finds the job ended), which job_sm_next says without a row.
 */
static const struct job_transition table[] = {
    {JOB_GATHER_ATTACH, JOB_EV_ATTACH, JOB_GATHER_ATTACH, JOB_ACT_ARM},
    {JOB_GATHER_ATTACH, JOB_EV_ATTACH_ALL, JOB_GATHER_ATTACH, JOB_ACT_DISARM},
    {JOB_GATHER_ATTACH, JOB_EV_FORMED, JOB_READY, JOB_ACT_NONE},
    {JOB_GATHER_ATTACH, JOB_EV_TIMEOUT, JOB_ENDED, JOB_ACT_END},
    {JOB_GATHER_ATTACH, JOB_EV_LEAVE, JOB_ENDED, JOB_ACT_END},
    {JOB_GATHER_ATTACH, JOB_EV_END, JOB_ENDED, JOB_ACT_END},

    {JOB_READY, JOB_EV_COMPILE, JOB_GATHER_COMPILE, JOB_ACT_ARM},
    {JOB_READY, JOB_EV_COMPILE_ALL, JOB_COMPILING, JOB_ACT_NONE},
    {JOB_READY, JOB_EV_RUN, JOB_GATHER_RUN, JOB_ACT_ARM},
    {JOB_READY, JOB_EV_LEAVE, JOB_READY, JOB_ACT_END_EMPTY},
    {JOB_READY, JOB_EV_END, JOB_ENDED, JOB_ACT_END},

    {JOB_GATHER_COMPILE, JOB_EV_COMPILE, JOB_GATHER_COMPILE, JOB_ACT_ARM},
    {JOB_GATHER_COMPILE, JOB_EV_COMPILE_ALL, JOB_COMPILING, JOB_ACT_DISARM},
    {JOB_GATHER_COMPILE, JOB_EV_TIMEOUT, JOB_ENDED, JOB_ACT_END},
    {JOB_GATHER_COMPILE, JOB_EV_LEAVE, JOB_ENDED, JOB_ACT_END},
    {JOB_GATHER_COMPILE, JOB_EV_END, JOB_ENDED, JOB_ACT_END},

    {JOB_COMPILING, JOB_EV_COMPILE_FAIL, JOB_READY, JOB_ACT_NONE},
    {JOB_COMPILING, JOB_EV_COMPILED, JOB_READY, JOB_ACT_NONE},
    {JOB_COMPILING, JOB_EV_LEAVE, JOB_ENDED, JOB_ACT_END},
    {JOB_COMPILING, JOB_EV_END, JOB_ENDED, JOB_ACT_END},

    {JOB_GATHER_RUN, JOB_EV_RUN, JOB_GATHER_RUN, JOB_ACT_ARM},
    {JOB_GATHER_RUN, JOB_EV_RUN_START, JOB_RUNNING, JOB_ACT_DISARM},
    {JOB_GATHER_RUN, JOB_EV_TIMEOUT, JOB_ENDED, JOB_ACT_END},
    {JOB_GATHER_RUN, JOB_EV_LEAVE, JOB_GATHER_RUN, JOB_ACT_END_SHARED},
    {JOB_GATHER_RUN, JOB_EV_END, JOB_ENDED, JOB_ACT_END},

    {JOB_RUNNING, JOB_EV_RUN_DONE, JOB_READY, JOB_ACT_NONE},
    {JOB_RUNNING, JOB_EV_LEAVE, JOB_RUNNING, JOB_ACT_END_SHARED},
    {JOB_RUNNING, JOB_EV_END, JOB_ENDED, JOB_ACT_END},
};

int
job_sm_next(enum job_phase p, enum job_event e, enum job_action *act)
{
    *act = JOB_ACT_NONE;
    if ((unsigned)p >= JOB_NPHASES || (unsigned)e >= JOB_NEVENTS)
        return -1;
    if (p == JOB_ENDED)
        return JOB_ENDED;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].from == p && table[i].ev == e) {
            *act = table[i].act;
            return (int)table[i].to;
        }
    }
    return -1;
}

static const char *const phase_names[] = {
    "gather-attach", "ready", "gather-compile", "compiling", "gather-run", "running", "ended",
};
_Static_assert(sizeof phase_names / sizeof phase_names[0] == JOB_NPHASES,
               "a name for every phase");

static const char *const event_names[] = {
    "attach", "attach-all", "formed", "compile", "compile-all", "compile-fail", "compiled",
    "run", "run-start", "run-done", "timeout", "leave", "end",
};
_Static_assert(sizeof event_names / sizeof event_names[0] == JOB_NEVENTS,
               "a name for every event");

const char *
job_phase_name(int p)
{
    return p >= 0 && p < JOB_NPHASES ? phase_names[p] : "?";
}

const char *
job_event_name(int e)
{
    return e >= 0 && e < JOB_NEVENTS ? event_names[e] : "?";
}

int
job_phase_gathering(enum job_phase p)
{
    return p == JOB_GATHER_ATTACH || p == JOB_GATHER_COMPILE || p == JOB_COMPILING ||
           p == JOB_GATHER_RUN;
}

void
job_gather_begin(struct job_gather *g, unsigned first, unsigned n)
{
    g->arrived = 0;
    g->first = first;
    g->n = n > 64 ? 64 : n;
    g->deadline_ms = 0;
}

static uint64_t
all_bits(unsigned n)
{
    return n >= 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
}

int
job_gather_has(const struct job_gather *g, unsigned p)
{
    return p >= g->first && p - g->first < g->n && (g->arrived >> (p - g->first) & 1);
}

int
job_gather_arrive(struct job_gather *g, unsigned p)
{
    if (p < g->first || p - g->first >= g->n || job_gather_has(g, p))
        return -1;
    g->arrived |= (uint64_t)1 << (p - g->first);
    return job_gather_complete(g);
}

unsigned
job_gather_count(const struct job_gather *g)
{
    return (unsigned)__builtin_popcountll(g->arrived);
}

int
job_gather_complete(const struct job_gather *g)
{
    return g->arrived == all_bits(g->n);
}

unsigned
job_gather_missing(const struct job_gather *g, unsigned base, char *out, size_t len)
{
    size_t used = 0;
    unsigned k = 0;

    if (len > 0)
        out[0] = '\0';
    for (unsigned i = 0; i < g->n; i++) {
        if (g->arrived >> i & 1)
            continue;
        k++;
        if (used + 16 < len)
            used += (size_t)snprintf(out + used, len - used, "%s%u", used ? ", " : "",
                                     g->first + i + base);
    }
    return k;
}

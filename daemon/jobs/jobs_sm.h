/*
 * jobs_sm.h — a job's life as a state machine, with no I/O: its phases, the events that move
 * it, the one table of (phase, event) -> next phase + action (job_sm_next), and the gather
 * helper a gathering phase uses to know who has arrived and until when it waits. Pure data
 * and functions of it, so the transitions are tested from a table without sockets
 * (tests/unit/test_jobs_sm.c); jobs_life.c's job_step applies them to a job.
 */
#ifndef IPUOFD_JOBS_SM_H
#define IPUOFD_JOBS_SM_H

#include <stddef.h>
#include <stdint.h>

/* Where a job is. One at a time; a job is made in JOB_GATHER_ATTACH (or JOB_READY for a
 * process attaching alone) and ends in JOB_ENDED, which it never leaves. */
enum job_phase {
    JOB_GATHER_ATTACH,  /* its processes attach (and, across a Pod, the partition forms) */
    JOB_READY,          /* every process attached; nothing gathered or under way */
    JOB_GATHER_COMPILE, /* its processes' compiles arrive */
    JOB_COMPILING,      /* the compile is on a worker */
    JOB_GATHER_RUN,     /* the run input of the processes sharing a model arrives */
    JOB_RUNNING,        /* the run is on a worker (the rest of its input may still arrive) */
    JOB_ENDED,          /* ended: freed once nothing is in flight */
    JOB_NPHASES
};

/* What happens to a job. */
enum job_event {
    JOB_EV_ATTACH,       /* a process attached, others still to come */
    JOB_EV_ATTACH_ALL,   /* the last process attached: the partition forms (Pod) or is ready */
    JOB_EV_FORMED,       /* the partition formed: every process gets its attach reply */
    JOB_EV_COMPILE,      /* a process sent its compile, others still to send theirs */
    JOB_EV_COMPILE_ALL,  /* the last process sent its compile: compiled once, on a worker */
    JOB_EV_COMPILE_FAIL, /* the gathered compiles were refused before a worker took them */
    JOB_EV_COMPILED,     /* the compile came back from its worker */
    JOB_EV_RUN,          /* a process of the model sent its run request */
    JOB_EV_RUN_START,    /* every process sharing the model sent its first steps: runs */
    JOB_EV_RUN_DONE,     /* the run came back from its worker */
    JOB_EV_TIMEOUT,      /* job_timeout passed while gathering */
    JOB_EV_LEAVE,        /* a process left (detach, disconnect) */
    JOB_EV_END,          /* anything else ending it: a reset, a fault, a failure */
    JOB_NEVENTS
};

/* What job_step does besides moving the phase (the callers do the rest: reply, submit). */
enum job_action {
    JOB_ACT_NONE,
    JOB_ACT_ARM,        /* a gathering begins: its deadline (job_timeout) is armed */
    JOB_ACT_DISARM,     /* the gathering is complete: its deadline is disarmed */
    JOB_ACT_END,        /* the job ends now */
    JOB_ACT_END_SHARED, /* the job ends when the process left shares what is under way */
    JOB_ACT_END_EMPTY,  /* the job ends when no process is left */
};

/* The next phase of a job in phase p meeting event e, and *act what goes with it. -1 when e
 * cannot happen in p (*act is then JOB_ACT_NONE): the caller's bug, logged, never acted on. */
int job_sm_next(enum job_phase p, enum job_event e, enum job_action *act);

/* Names for logs and tests ("gather-attach", "attach-all", ...); "?" out of range. */
const char *job_phase_name(int p);
const char *job_event_name(int e);

/* 1 in the phases whose processes wait for each other (a gathering, a compile). */
int job_phase_gathering(enum job_phase p);

/* ---- the gather helper ---- */

/* Who of processes first .. first+n-1 has arrived for a gathering, and when it gives up. */
struct job_gather {
    uint64_t arrived;     /* bit p - first */
    unsigned first, n;    /* n <= 64 */
    uint64_t deadline_ms; /* when the gathering gives up (0: not armed) */
};

/* Begins a gathering of processes first .. first+n-1 (n <= 64), none arrived yet. */
void job_gather_begin(struct job_gather *g, unsigned first, unsigned n);

/* Process p arrived. 1 when every process has now arrived, 0 when some are still to come,
 * -1 when p is not one of the gathering's or arrived already (nothing changes). */
int job_gather_arrive(struct job_gather *g, unsigned p);

/* Whether p arrived; how many did; whether all did. */
int job_gather_has(const struct job_gather *g, unsigned p);
unsigned job_gather_count(const struct job_gather *g);
int job_gather_complete(const struct job_gather *g);

/* The processes still missing into out (", "-separated, each + base): "3, 5". Their count. */
unsigned job_gather_missing(const struct job_gather *g, unsigned base, char *out, size_t len);

#endif

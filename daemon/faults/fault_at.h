/*
 * fault_at.h — the one way into the fault code from a program's path: a job meets a trigger
 * point (it enters a phase, or one of its processes begins a step: a compile, a weights
 * write, a run), fault_at asks the fault table once (state/faults.c's faults_match) and
 * applies what matches (logs it, puts the IPUs in error as fault_fire.c says), and returns
 * the answer to give; fault_reply gives it to one request. Called from jobs/ only: no
 * request handler calls fault code (docs/architecture.md, "Faults").
 */
#ifndef IPUOFD_FAULT_AT_H
#define IPUOFD_FAULT_AT_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "faults.h"

struct conn;
struct srv;

/* Where a trigger point is met and by whom (all borrowed for the call). */
struct fault_point {
    enum fault_at at;
    unsigned first, count;     /* the partition's IPUs */
    const char *part;          /* its name */
    const struct conn *c;      /* the one client whose request meets it, or NULL: a job */
    unsigned nproc;            /* attach of a job: its processes (the log's) */
    const char *model;         /* load: the model being loaded (the log's) */
    const char *const *peers;  /* collective: the job's Pod hosts ("" this one), npeers */
    unsigned npeers;
};

/* What the point meets. */
enum fault_hit_what {
    FAULT_HIT_NONE = 0,  /* nothing: the program goes on */
    FAULT_HIT_IPU_ERROR, /* a request's trigger: an IPU of the partition is in error already
                          * (bad), the request gets its error */
    FAULT_HIT_FIRED,     /* fault f fired (the IPUs are in error as its kind says): the
                          * request(s) get what it says (fault_reply) */
    FAULT_HIT_CUT        /* collective: this daemon leaves the Pod job; msg says why */
};

/* The answer to give, filled by fault_at (owned by the caller; no pointer into the table). */
struct fault_hit {
    enum fault_hit_what what;
    struct fault f;              /* FIRED: the fault as it fired (a copy) */
    unsigned first, count, bad;  /* the point's IPUs; IPU_ERROR: the IPU in error */
    char part[DEV_NAME_MAX];     /* the point's partition name (a copy: an attach releases
                                  * the partition before answering) */
    char msg[400];               /* FIRED: the fault's sentence; CUT: why the job is left */
    unsigned delay_ms;           /* collective: link:latency before the run's collectives */
};

/*
 * Point pt is met now: one question to the fault table, in this order.
 *  - compile, weights, run (a process's request): an IPU of pt's partition already in error
 *    answers first (FAULT_HIT_IPU_ERROR), nothing is matched;
 *  - collective: the link faults on the links to pt's peers (a link:partition, or a
 *    link:reset-peer firing, cuts: FAULT_HIT_CUT; link:latency adds delay_ms), then a fault
 *    armed at collective (FAULT_HIT_CUT; its IPUs stay out of error);
 *  - else the first armed fault matching pt fires: logged, the IPUs go into error
 *    (fault_fire; daemon-kill does not return), FAULT_HIT_FIRED.
 * Returns hit->what (0: nothing met).
 */
int fault_at(struct srv *s, const struct fault_point *pt, struct fault_hit *hit);

/*
 * Gives c's request req_id the answer of hit (IPU_ERROR or FIRED): the IPU's error (its
 * class, recovery and reset), Poplar's out-of-memory error, the connection cut
 * (fabric-disconnect), or no answer yet (hang, host-sync-timeout with a wait: parked, c's
 * frames held). Returns 1 when the request was left waiting so (the caller must not
 * release c's frames), else 0.
 */
int fault_reply(struct conn *c, uint64_t req_id, const struct fault_hit *hit);

#endif

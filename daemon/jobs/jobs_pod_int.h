/*
 * jobs_pod_int.h — what jobs_pod.c (the partition, its rendezvous and its calls) and
 * jobs_pod_sync.c (what a call broadcasts and checks) share: the state of this daemon's
 * share of a partition spanning a Pod, and the failure helpers. Daemon-internal.
 */
#ifndef IPUOF_JOBS_POD_INT_H
#define IPUOF_JOBS_POD_INT_H

#include <stdint.h>

#include "config.h"
#include "pod_kv.h"
#include "sim.h"

struct model;

#define POD_MAX_HOSTS (CFG_POD_MAX_PEERS + 1)

struct pod_job {
    int rank, size;
    unsigned first, nlocal, nglobal;       /* processes */
    char hosts[POD_MAX_HOSTS][CFG_POD_NAME_MAX];
    char rdv[256];                         /* rank 0's Pod address (the store) */
    char bind[256];                        /* where this daemon's gloo listens */
    char self[CFG_POD_NAME_MAX];
    char token[CFG_TOKEN_MAX];
    int timeout_ms;                        /* [pod] timeout_ms */
    int sum_daemons;                       /* [pod] sum = daemons */
    int wait_ms;                           /* job_timeout: the other daemons' processes */
    char job[POD_KV_JOB_MAX + 1];          /* the store's namespace: the partition name */
    struct pod_kvc *kvc;                   /* the store, borrowed by coll */
    struct pod_coll *coll;                 /* NULL until formed */
    int broken;                            /* a collective failed: the job ends */
    int code;                              /* why, as a status (IPUOF_E_CLOSED, _INVAL) */
    uint64_t xr_calls, xr_floats, xr_ns;   /* all-reduces: count, floats, time (workers) */
    char why[768];                         /* what failed, naming the host */
};

/* Fills a simulator error (code and sentence) and returns code. */
int pod_xerr(struct sim_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records a failure as the job's reason; rank is the rank that went away (the
 * communicator's pod_coll_failed_rank), or -1 when none is known: then the partition as a
 * whole is named. Worker thread. */
void pod_fail(struct pod_job *pj, const char *what, const char *why, int rank);

/* This daemon fails a collective step on its own (err->msg says why: a mismatch, out of
 * memory): the job ends with code, and the others, which would wait for it, see it go away
 * at once (its communicator is closed). Returns code, err holding the job's reason. */
int pod_self_fail(struct pod_job *pj, const char *what, int code, struct sim_err *err);

/* Before a training call of m whose rank 0 changed (flags: MODEL_POD_*): rank 0's
 * changes to every daemon (jobs_pod_sync.c). 0 or a status, err filled. Worker thread. */
int pod_sync_weights(struct pod_job *pj, struct model *m, int flags, struct sim_err *err);

/* After a training call of e: rank 0's replica 0's buffers shown by the other daemons to
 * their processes. 0 or a status, err filled. Worker thread. */
int pod_show_buffers(struct pod_job *pj, struct sim_exe *e, struct sim_err *err);

/* The first call of m: every daemon compiled the same model with the same run shape. 0 or
 * a status (IPUOF_E_INVAL naming what differs), err filled. Worker thread. */
int pod_check_model(struct pod_job *pj, struct model *m, struct sim_err *err);

#endif

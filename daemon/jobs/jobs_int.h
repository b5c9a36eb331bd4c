/*
 * jobs_int.h — the inside of a job, shared by jobs_life.c (its life, leaving, the wait
 * queue), jobs_attach.c (attaching as one of several processes), jobs_compile.c,
 * jobs_run.c and jobs_status.c. Where a job is in its life is job->phase, moved only by
 * job_step through jobs_sm.c's table; job->gather is who arrived for the phase gathering.
 * Loop thread only, except where a field says otherwise.
 */
#ifndef IPUOFD_JOBS_INT_H
#define IPUOFD_JOBS_INT_H

#include <event2/event.h>
#include <stdint.h>

#include "devices.h"
#include "jobs.h"
#include "jobs_sm.h"
#include "models.h"
#include "slices.h"
#include "work.h"

struct job;
struct conn_iov;

/* One process of a job: its connection and what it is waiting for. */
struct job_proc {
    struct job *job;
    unsigned id;                 /* its process id */
    struct conn *conn;           /* NULL before it attaches and after it left */
    uint32_t pid;                /* for messages once the connection is gone */
    char peer[64];
    uint64_t attach_req;         /* attach held until every process came, or 0 */
    struct compile_task *ct;      /* compile held until every process sent one, or NULL */
    uint64_t compile_req;        /* compile waiting for its reply, or 0 */
    char left[32];               /* "detached" or "disconnected" once it left, else "" */
    uint64_t run_req;            /* run whose slice arrived or is arriving, or 0 */
    int run_arriving;            /* the slice's bytes are still being received */
    uint64_t steps_in;           /* micro-batch steps of its slice wholly received */
    struct slice_cursor cur;     /* where its slice's next bytes go */
    int stream;                  /* its run asked stream_outputs (jobs_out.c) */
    int stream_begun;            /* its first RunOutputs of the run went out */
    uint64_t sent;               /* steps of the run whose final rows it was sent */
};

/* The run of a job's model on a worker. */
struct run {
    struct work_item item;
    struct job *j;
    struct model *m;
    struct sim_feed *feed;       /* the steps of every process's slice received so far:
                                  * the run computes step k while k + 1 arrives */
    int rc;
    struct sim_err err;
    uint64_t us;
    char cut[256];  /* a fault fired at collective: why this daemon leaves the Pod job */
    unsigned delay_ms; /* link:latency faults on the job's links: the worker waits first */
    /* The outputs going back (jobs_out.c), loop thread only: allocated per run, never per
     * step; out_ev (NULL when no process streams) wakes the loop as steps end. */
    struct event *out_ev;
    _Atomic uint64_t wake_at;    /* the run's threads wake out_ev once this many steps ran */
    uint64_t chunk;              /* steps between two wake-ups (job_out_stream_start) */
    struct conn_iov *iov;        /* one per block of every output */
    Ipuof__TensorInfo *ti, **tp; /* one per output */
    int64_t (*dims)[2 * SIM_MAX_RANK];
    Ipuof__OutputPiece *pieces, **pp;
};

/* Why a job ended: set once, by job_end, and read by whoever answers after the end. */
struct job_end_reason {
    int code;                    /* IPUOF_E_* */
    int recovery;                /* what its processes are told to do (IPUOF_RECOVERY_*) */
    int reset;                   /* the partition is gone everywhere (a Pod job): the
                                  * Notice says PARTITION_RESET */
    char msg[768];
};

/*
 * What differs between a job on this daemon alone (job_scope_local, jobs_life.c) and one
 * whose partition spans the daemons of a Pod (job_scope_pod, jobs_pod.c). jobs_life.c and
 * jobs_attach.c call through it; jobs_life.c calls no file above it.
 */
struct job_scope {
    const char *name;
    /* Every local process attached: forms the partition (on a worker for a Pod), then calls
     * formed(j) on the loop thread, or ends j saying why. 0, or -1 when it cannot start. */
    int (*start)(struct job *j, void (*formed)(struct job *j));
    void (*end)(struct job *j);  /* j ends (its rendezvous entries dropped) */
    void (*free)(struct job *j); /* j is freed */
};
extern const struct job_scope job_scope_local, job_scope_pod;

struct job {
    struct srv *srv;
    char name[DEV_NAME_MAX];
    char key[JOB_KEY_MAX + 1];  /* the job key its processes share ("" when the job was
                                  * named explicitly without one); never shown */
    unsigned nproc, count;       /* processes; IPUs of the partition */
    unsigned proc_base, nproc_all; /* across a Pod: the job's id of process 0 here, and the
                                  * job's processes on every host (else 0 and nproc) */
    enum job_phase phase;        /* where it is (jobs_sm.h); moved only by job_step */
    struct job_gather gather;    /* who arrived for the phase gathering now (or last) */
    struct dev_partition *part;
    struct event *timer;         /* job_timeout for the phase now gathering (gather) */
    struct model *models;        /* the job's executables, shared by its processes */
    struct model *run_model;     /* the model whose processes' inputs are being gathered */
    struct run *inflight;  /* the run on a worker, or NULL */
    uint64_t fed;                /* steps of run_model's input every process has sent */
    int arriving;                /* processes whose slice is still arriving */
    int hold;                    /* loops over the processes under way that nothing else
                                  * keeps it for (they may end it), and tasks on workers
                                  * that refer to it (compile, Pod rendezvous, trace); a
                                  * run in flight and slices arriving count apart */
    struct job_end_reason end;   /* why it ended, recorded by job_end alone */
    const struct job_scope *scope; /* on this daemon alone, or spanning a Pod */
    struct pod_job *pod;         /* its share of a partition spanning a Pod (jobs_pod.c), or
                                  * NULL: process p of the job is process pod first + p */
    struct job *next;
    struct job_proc proc[];     /* nproc */
};

/* ---- the outputs of a run (jobs_out.c) ---- */

/* Process q's share of model m (the processes p0 .. p0+n-1 that share it): its index
 * among them, and the input groups, as slices.c plans them. */
struct slice_plan job_slice_plan(const struct job_proc *q, const struct model *m);

/* Allocates w's output arrays (for w->m's outputs) / frees them. 0, or -1 out of memory. */
int job_out_prepare(struct run *w);
void job_out_release(struct run *w);

/* Before w is submitted (w->feed made): when a process of w->m asked stream_outputs, makes
 * w->out_ev and has the feed wake it as steps end, so their rows go out while the run goes
 * on. 0, or -1 out of memory. */
int job_out_stream_start(struct run *w);

/* Loop thread, the run done well: answers q with the rest of its rows and the RunReply
 * (time, cost), or, when none went ahead, with one RunReply carrying every output. */
void job_out_reply(struct job_proc *q, struct run *w);

/* A job of nproc processes named name on count IPUs (fields zeroed, the processes
 * numbered, its job_timeout timer made), or NULL when out of memory. */
struct job *job_alloc(struct srv *s, const char *name, unsigned nproc, unsigned count);

/* Rewrites the "loaded" lists of j's IPUs from its models. */
void job_update_loaded(struct job *j);

/* Ends j: every process still there gets an error with the sentence fmt makes (and a
 * Notice when it had its partition); the partition is released; j is freed once nothing
 * is in flight. The reason (code, the recovery job_recovery says, the sentence) is
 * recorded in j->end. */
void job_end(struct job *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As job_end, for a partition that is gone on every daemon of its Pod: its processes are
 * told IPUOF_RECOVERY_PARTITION_RESET. */
void job_end_reset(struct job *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 once j has ended (it is freed when nothing is in flight). */
static inline int
job_ended(const struct job *j)
{
    return j->phase == JOB_ENDED;
}

/* Frees j when it has ended and nothing refers to it any more. */
void job_maybe_free(struct job *j);

/* Ends j when one of its processes p0 .. p0+n-1 has left. 1 when it ended. */
int job_end_if_left(struct job *j, unsigned p0, unsigned n);

/* The recovery a process is told for a job that ended with code: retry after a timeout or
 * a shutdown, attach again otherwise. */
int job_recovery(int code);

/* Moves j by event ev through jobs_sm.c's table (j->phase) and returns the action that goes
 * with it; an event its phase cannot meet is logged and changes nothing (JOB_ACT_NONE). */
enum job_action job_step(struct job *j, enum job_event ev);

/* j's gathering for the next phase is of processes first .. first+n-1: begun anew when j
 * is in phase `from` (it leaves it by the event that follows), else the one under way. */
void job_gather_for(struct job *j, enum job_phase from, unsigned first, unsigned n);

/* ---- a partition spanning the daemons of a Pod (jobs_pod.c) ---- */

struct pod_job;
struct sim_err;

/*
 * Plans this daemon's share of the job of attach a (a->n_pod_hosts > 0): its rank (its
 * [pod] name's place in a->pod_hosts), the processes it holds, where the rendezvous store
 * is. IPUOF_OK with *out (free with job_pod_free), or a status with a sentence naming what
 * does not fit (this daemon not listed, a host not a peer, a process of another host).
 */
int job_pod_plan(struct srv *s, const Ipuof__AttachRequest *a, struct pod_job **out,
                 char *err, size_t errlen);
/* 1 when two plans name the same hosts in the same order for as many processes. */
int job_pod_same(const struct pod_job *a, const struct pod_job *b);
unsigned job_pod_first(const struct pod_job *pj);   /* its first (global) process */
unsigned job_pod_nlocal(const struct pod_job *pj);  /* processes it holds */
unsigned job_pod_nglobal(const struct pod_job *pj); /* the job's processes */
int job_pod_size(const struct pod_job *pj);         /* daemons of the partition */

/* m was compiled for j: a training model every local process shares all-reduces its
 * gradients across the daemons (sim_exe_set_xreduce) and takes rank 0's weights first. */
void job_pod_model(struct job *j, struct model *m);

/* Around a run of m on a worker: before, rank 0's weights when they changed; after, the
 * barrier ending the call (rc: the run's; its error in err). A status (0: go on). */
int job_pod_before_run(struct job *j, struct model *m, struct sim_err *err);
/* Loop thread: 1 when a run of m makes collectives with the Pod's other daemons (j's
 * partition spans a Pod and m trains on all its processes), so a fault at collective may
 * fire on it; else 0. */
int job_pod_collective(const struct job *j, const struct model *m);
/* Worker: a fault fired at this run's collective: this daemon leaves the Pod job instead
 * (its communicator closed, so every other daemon's next collective fails at once naming
 * this host), and the job ends here as there, with PARTITION_RESET naming this host; why
 * says which fault. Returns IPUOF_E_CLOSED with the sentence in err. */
int job_pod_cut(struct job *j, const char *why, struct sim_err *err);
/* The other Pod hosts of pj by rank: i's name, "" for this daemon's own rank, NULL past
 * the last (for the link faults on this daemon's links to them). */
const char *job_pod_peer(const struct pod_job *pj, int i);
int job_pod_after_run(struct job *j, struct model *m, int rc, struct sim_err *err);

/* On the loop thread after a run: when a collective failed, ends j with PARTITION_RESET
 * naming the host that went away, and returns 1. */
int job_pod_check(struct job *j);

/* Closes the communicator and the store client; NULL is a no-op. */
void job_pod_free(struct pod_job *pj);

#endif

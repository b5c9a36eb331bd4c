/*
 * jobs_int.h — the inside of a job of several processes, shared by jobs.c (attach,
 * compile, leaving, status) and jobs_run.c (runs). Loop thread only, except where a field
 * says otherwise.
 */
#ifndef IPUOFD_JOBS_INT_H
#define IPUOFD_JOBS_INT_H

#include <event2/event.h>
#include <stdint.h>

#include "devices.h"
#include "jobs.h"
#include "models.h"
#include "slices.h"
#include "work.h"

struct djob;

/* One process of a job: its connection and what it is waiting for. */
struct djob_proc {
    struct djob *job;
    unsigned id;                 /* its process id */
    struct conn *conn;           /* NULL before it attaches and after it left */
    uint32_t pid;                /* for messages once the connection is gone */
    char peer[64];
    uint64_t attach_req;         /* attach held until every process came, or 0 */
    struct compile_job *cj;      /* compile held until every process sent one, or NULL */
    uint64_t compile_req;        /* compile waiting for its reply, or 0 */
    int compile_submitter;       /* its connection has the job's compile in flight */
    char left[32];               /* "detached" or "disconnected" once it left, else "" */
    uint64_t run_req;            /* run whose slice arrived or is arriving, or 0 */
    int run_arriving;            /* the slice's bytes are still being received */
    struct slice_cursor cur;     /* where its slice's next bytes go */
};

/* The run of a job's model on a worker. */
struct djob_work {
    struct job job;
    struct djob *j;
    struct model *m;
    int rc;
    struct sim_err err;
    uint64_t us;
};

struct djob {
    struct srv *srv;
    char name[DEV_NAME_MAX];
    char key[DJOB_KEY_MAX + 1];  /* the job key its processes share ("" when the job was
                                  * named explicitly without one); never shown */
    unsigned nproc, count;       /* processes; IPUs of the partition */
    unsigned nattached, ncompile, nrun;
    int started;                 /* every process attached */
    int dead;                    /* ended: freed once nothing is in flight */
    struct dev_partition *part;
    struct event *timer;         /* job_timeout for the phase now gathering */
    struct model *models;        /* the job's executables, shared by its processes */
    struct model *run_model;     /* the model whose slices are being gathered */
    struct djob_work *inflight;  /* the run on a worker, or NULL */
    int arriving;                /* processes whose slice is still arriving */
    int hold;                    /* loops over the processes under way (they may end it) */
    struct djob *next;
    struct djob_proc proc[];     /* nproc */
};

/* Ends j: every process still there gets an error with the sentence fmt makes (and a
 * Notice when it had its partition); the partition is released; j is freed once nothing
 * is in flight. */
void djob_end(struct djob *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Frees j when it has ended and nothing refers to it any more. */
void djob_maybe_free(struct djob *j);

/* Brackets a loop that talks to the processes' connections (see jobs.c). djob_unhold
 * returns 1 when the job ended meanwhile (it may be gone: do not touch it). */
void djob_hold(struct djob *j);
int djob_unhold(struct djob *j);

/* Ends j when one of its processes has left. 1 when it ended. */
int djob_end_if_left(struct djob *j);

/* Arms job_timeout for the phase now gathering. */
void djob_arm_timer(struct djob *j);

#endif

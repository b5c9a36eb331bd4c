/*
 * req_trace.c — the simulated clock as a client sees it: the cost figures that go with every
 * run reply, and the trace request that returns the execution trace of a model's last run
 * (Chrome trace-event JSON, recorded when the model was compiled with profile).
 *
 * The cost figures are read on the event-loop thread with the run's reply. A trace (tens of
 * megabytes, half a second to write for a long run) is written on a worker thread and sent
 * from the loop thread when it is done, so the loop serves every other client meanwhile.
 * While it is written the connection reads no more frames (as during its runs), so one
 * connection has at most one trace build in flight, and nothing runs the model meanwhile:
 * its own connection waits, and a job's run needs a slice from every process, this one
 * included.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"

/* A trace being written on a worker. json is the worker's result (owned by the task). */
struct trace_task {
    struct work_item item;
    struct srv *srv;
    struct conn *conn;           /* the requester; NULL once its connection is gone */
    uint64_t req_id;
    struct model *m;
    struct job *job;             /* the model's job, held until done */
    char name[sizeof ((struct model *)0)->name];
    uint32_t max_payload;        /* max_payload_bytes when the request came */
    int rc;
    struct sim_err err;
    char *json;
    size_t len;
};

/* On a worker: writes the trace. Reads only the executable, which nothing else touches
 * until trace_done() (see the file's comment). */
static void
trace_run(struct work_item *it)
{
    struct trace_task *t = (struct trace_task *)it;

    t->rc = sim_exe_trace_json(t->m->entry->exe, &t->json, &t->len, &t->err);
}

/* Answers request req_id on c with t's result (c alive, not dropped). */
static void
trace_reply(struct conn *c, const struct trace_task *t)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__TraceReply rep = IPUOF__TRACE_REPLY__INIT;
    uint64_t req_id = t->req_id;

    if (t->rc != IPUOF_OK) {
        conn_send_error(c, req_id, t->rc, 0, 0, "executor", "no trace of model '%s': %s",
                        t->name, t->err.msg);
        return;
    }
    if (t->len == 0 || t->len > t->max_payload) {
        conn_send_error(c, req_id, t->len ? IPUOF_E_TOO_LARGE : IPUOF_E_INTERNAL, 0, 0,
                        "executor", "the trace of model '%s' is %zu bytes; one frame carries 1 "
                        "to %u (max_payload_bytes): run fewer device iterations per call while "
                        "profiling", t->name, t->len, t->max_payload);
        return;
    }
    rep.bytes = t->len;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_TRACE_REPLY;
    r.trace_reply = &rep;
    conn_send(c, &r, t->json, (uint32_t)t->len);
}

/*
 * On the loop thread, after trace_run() (or instead of it when the daemon stops): answers
 * the client if it is still there, then lets the job go (its models live until then, even
 * when the job ended meanwhile).
 */
static void
trace_done(struct work_item *it)
{
    struct trace_task *t = (struct trace_task *)it;
    struct conn *c = t->conn;

    if (c != NULL) {
        c->trace = NULL;
        conn_enter(c);
        if (it->dropped)
            conn_send_error(c, t->req_id, IPUOF_E_SHUTDOWN, IPUOF_ERROR_RECOVERABLE,
                            IPUOF_RECOVERY_RETRY, "daemon", "the trace of model '%s' was not "
                            "written: ipuofd is stopping", t->name);
        else
            trace_reply(c, t);
        conn_release_frames(c);
        conn_leave(c);
    }
    job_unhold(t->job);
    free(t->json);
    free(t);
}

void
req_trace_forget(struct conn *c)
{
    if (c->trace != NULL)
        c->trace->conn = NULL; /* the trace is dropped when it comes back */
}

/*
 * Trace of a model: checked here, written on a worker (trace_run), answered by trace_done.
 * The connection reads no further frame until then.
 */
void
req_trace(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    struct model *m = job_find_model(c, h->trace->model_id);
    struct trace_task *t;

    (void)payload_len;
    if (m == NULL) {
        job_send_missing(c, req_id, h->trace->model_id, "");
        return;
    }
    t = calloc(1, sizeof *t);
    if (t == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        return;
    }
    t->srv = c->srv;
    t->conn = c;
    t->req_id = req_id;
    t->item.run = trace_run;
    t->item.done = trace_done;
    t->m = m;
    t->job = c->job;
    t->max_payload = c->srv->cfg.max_payload_bytes;
    snprintf(t->name, sizeof t->name, "%s", m->name);
    if (work_submit(c->srv->work, &t->item) < 0) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        free(t);
        return;
    }
    job_hold(t->job); /* its models stay until trace_done, even if the job ends */
    c->trace = t;
    conn_hold_frames(c);
}

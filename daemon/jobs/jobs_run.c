/*
 * jobs_run.c — the runs of a job's model (see jobs.h): each process's slice is received
 * straight into its replicas' rows (slices.c); the call starts on a worker once every
 * process has sent the first micro-batch step of its last input, and computes step k while
 * k + 1 arrives (a sim_feed told, at each refill of the receive, the steps every process
 * has sent); each process gets its own replicas' rows of every output (jobs_out.c): as the
 * steps holding them are final when it asked stream_outputs, else once the run is done (the
 * reply's header carries the run's time and cost, so it follows the run).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "fault_at.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"
#include "slices.h"
#include "metrics_count.h"

static void run_all(struct job *j);

/* The micro-batch steps of one run of exe: D x A. */
static uint64_t
run_steps(const struct sim_exe *exe)
{
    return (uint64_t)sim_exe_device_iterations(exe) * sim_exe_gradient_accumulation(exe);
}

/* The steps of run_model's input every process sharing it has sent grew: their input
 * groups' rows are copied, and the run starts (at the first step) or is told. */
static void
feed_progress(struct job *j)
{
    struct model *m = j->run_model;
    uint64_t fed = UINT64_MAX;

    for (unsigned p = m->proc0; p < m->proc0 + m->nproc; p++)
        fed = j->proc[p].steps_in < fed ? j->proc[p].steps_in : fed;
    if (fed <= j->fed)
        return;
    for (unsigned p = 0; p < m->nproc; p++) { /* input groups: one row to every replica */
        struct slice_plan pl = job_slice_plan(&j->proc[m->proc0 + p], m);
        slice_replicate(m->entry->exe, &pl, j->fed, fed);
    }
    j->fed = fed;
    if (j->inflight != NULL)
        sim_feed_inputs(j->inflight->feed, fed);
    else
        run_all(j);
}

/* Sets the next segments of a process's run input: straight into its rows of each input.
 * Every segment handed out before is full: the steps they complete go to the run. */
static int
slice_refill(struct conn *c, struct conn_sink *sink, void *arg)
{
    struct job_proc *q = arg;
    struct job *j = q->job;
    struct sim_exe *exe = j->run_model->entry->exe;
    struct slice_plan pl = job_slice_plan(q, j->run_model);

    (void)c;
    q->steps_in = slice_steps_in(exe, &q->cur);
    if (!job_ended(j))
        feed_progress(j);
    return slice_fill(exe, &pl, &q->cur, sink);
}

/* Worker: the run, reading each step's input as it arrives (w->feed). A run that failed
 * before its input was all in waits for the rest (or for the job's end), so that run_done
 * answers only once no byte of the call is still coming into the buffers. */
static void
run_work(struct work_item *it)
{
    struct run *w = (struct run *)it;
    struct sim_exe *exe = w->m->entry->exe;
    uint64_t t0 = models_now_us();

    if (w->delay_ms != 0 && w->cut[0] == '\0') { /* link:latency: the link is slow */
        struct timespec ts = {(time_t)(w->delay_ms / 1000),
                              (long)(w->delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (w->cut[0] != '\0')
        w->rc = job_pod_cut(w->j, w->cut, &w->err);
    else
        w->rc = job_pod_before_run(w->j, w->m, &w->err);
    if (w->rc == 0)
        w->rc = sim_exe_run_fed(exe, w->feed, &w->err);
    if (w->j->pod != NULL)
        w->rc = job_pod_after_run(w->j, w->m, w->rc, &w->err);
    w->us = models_now_us() - t0;
    if (w->rc != IPUOF_OK)
        sim_feed_wait_inputs(w->feed, run_steps(exe));
}

/* Loop thread: the run is done (or was dropped by a stopping daemon before it started).
 * Every process sharing the model gets its rows, or the error. On a job that has ended,
 * every process already had its error from job_end: the run is only freed. */
static void
run_done(struct work_item *it)
{
    struct run *w = (struct run *)it;
    struct job *j = w->j;
    struct model *m = w->m;

    m->busy = 0;
    if (!job_ended(j) && !it->dropped)
        job_pod_check(j); /* a collective failed: the job ends with PARTITION_RESET */
    if (w->out_ev != NULL)
        event_free(w->out_ev); /* the run's threads are done: nothing wakes it now */
    w->out_ev = NULL;
    sim_feed_free(w->feed);
    w->feed = NULL;
    for (unsigned p = m->proc0; p < m->proc0 + m->nproc; p++)
        j->proc[p].steps_in = 0;
    j->fed = 0;
    if (job_ended(j)) {
        j->inflight = NULL;
        job_out_release(w);
        free(w);
        job_maybe_free(j);
        return;
    }
    dev_set_busy(j->srv->inv, m->first_ipu, m->nipus, 0); /* still the job's IPUs */
    if (w->rc == IPUOF_OK && !it->dropped) {
        struct sim_cost_report cost;
        int have = sim_exe_cost(m->entry->exe, &cost) == IPUOF_OK;
        models_count_steps(j->srv->inv, m, sim_exe_device_iterations(m->entry->exe));
        metrics_run(j->srv->metrics, m->first_ipu, m->nipus, w->us, have ? &cost : NULL);
    }
    j->run_model = NULL;
    /* j->inflight stays w through the loop: a process leaving now ends the job, and the
     * run's reference keeps it until job_maybe_free below. */
    for (unsigned p = m->proc0; p < m->proc0 + m->nproc && !job_ended(j); p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *c = q->conn;
        conn_enter(c);
        if (it->dropped)
            conn_send_error(c, q->run_req, IPUOF_E_SHUTDOWN, IPUOF_ERROR_RECOVERABLE,
                            IPUOF_RECOVERY_RETRY, "daemon", "the run of model '%s' was not "
                            "started: ipuofd is stopping", m->name);
        else if (w->rc == IPUOF_OK)
            job_out_reply(q, w);
        else
            conn_send_error(c, q->run_req, w->rc, 0, 0, "executor", "%s", w->err.msg);
        q->run_req = 0;
        conn_release_frames(c);
        conn_leave(c); /* a kill here ends the job through job_leave */
    }
    j->inflight = NULL;
    if (!job_ended(j)) {
        job_step(j, JOB_EV_RUN_DONE);
    }
    job_out_release(w);
    free(w);
    job_maybe_free(j); /* the run was the last to refer to an ended job */
}

/* Loop thread: a training run of a Pod job meets the trigger point collective before its
 * first collective: when a link fault or a fault armed at collective cuts it, w->cut says
 * why and the worker leaves the Pod job instead of running; link:latency sets w->delay_ms. */
static void
collective_fault(struct job *j, struct run *w)
{
    const char *peers[CFG_POD_MAX_PEERS + 1]; /* a Pod's hosts (POD_MAX_HOSTS) */
    struct fault_point pt = {.at = FAULT_AT_COLLECTIVE, .first = j->part->first,
                             .count = j->part->count, .part = j->name, .peers = peers};
    struct fault_hit hit;

    while (pt.npeers < CFG_POD_MAX_PEERS + 1 &&
           (peers[pt.npeers] = job_pod_peer(j->pod, (int)pt.npeers)) != NULL)
        pt.npeers++;
    if (fault_at(j->srv, &pt, &hit) == FAULT_HIT_CUT) { /* cut to w->cut's size */
        size_t n = strnlen(hit.msg, sizeof w->cut - 1);
        memcpy(w->cut, hit.msg, n);
        w->cut[n] = '\0';
    }
    w->delay_ms = hit.delay_ms;
}

/* Every process has sent the first j->fed steps of its input: run once on a worker,
 * computing while the rest arrives. */
static void
run_all(struct job *j)
{
    struct run *w = calloc(1, sizeof *w);

    if (w != NULL) {
        w->j = j;
        w->m = j->run_model;
        w->feed = sim_feed_new(w->m->entry->exe);
    }
    if (w != NULL && (w->feed == NULL || job_out_prepare(w) < 0 ||
                      job_out_stream_start(w) < 0)) {
        if (w->out_ev != NULL)
            event_free(w->out_ev);
        sim_feed_free(w->feed);
        job_out_release(w);
        free(w);
        w = NULL;
    }
    if (w == NULL) {
        job_end(j, IPUOF_E_NOMEM, "out of memory starting the run of the job on partition "
                "'%s'", j->name);
        return;
    }
    if (job_pod_collective(j, w->m))
        collective_fault(j, w);
    w->item.run = run_work;
    w->item.done = run_done;
    sim_feed_inputs(w->feed, j->fed);
    if (work_submit(j->srv->work, &w->item) < 0) {
        if (w->out_ev != NULL)
            event_free(w->out_ev);
        sim_feed_free(w->feed);
        job_out_release(w);
        free(w);
        job_end(j, IPUOF_E_NOMEM, "out of memory starting the run of the job on partition "
                "'%s'", j->name);
        return;
    }
    j->inflight = w;
    job_step(j, JOB_EV_RUN_START);
    dev_set_busy(j->srv->inv, w->m->first_ipu, w->m->nipus, 1);
}

/* The last byte of q's run input is in. */
static void
on_input(struct conn *c, void *arg)
{
    struct job_proc *q = arg;
    struct job *j = q->job;

    q->run_arriving = 0;
    j->arriving--;
    if (job_ended(j)) { /* the job ended while the bytes arrived */
        conn_send_error(c, q->run_req, j->end.code, IPUOF_ERROR_RECOVERABLE,
                        j->end.recovery, "device", "the job on partition '%s' ended while "
                        "this process's run input arrived: %s", j->name, j->end.msg);
        q->run_req = 0;
        q->conn = NULL;
        conn_release_frames(c);
        job_maybe_free(j);
        return;
    }
    job_gather_arrive(&j->gather, q->id);
    q->steps_in = run_steps(j->run_model->entry->exe); /* every byte is in */
    feed_progress(j);
}

/* The connection died while q's run input arrived. */
static void
on_input_abort(struct conn *c, void *arg)
{
    struct job_proc *q = arg;
    struct job *j = q->job;

    (void)c;
    if (!q->run_arriving)
        return;
    q->run_arriving = 0;
    j->arriving--;
    if (job_ended(j)) {
        q->conn = NULL;
        job_maybe_free(j);
    }
}

void
job_run(struct conn *c, uint64_t req_id, const Ipuof__RunRequest *rq, uint32_t payload_len,
        struct model *m)
{
    struct job *j = c->job;
    struct job_proc *q = &j->proc[c->proc_id];
    struct conn_sink sink = {0};
    struct slice_plan pl;
    char msg[512];
    uint64_t total;
    int rc;

    if (q->run_req != 0) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u already sent its slice of a run", q->id);
        return;
    }
    if (j->phase != JOB_READY && j->phase != JOB_GATHER_RUN && j->phase != JOB_RUNNING) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u runs model %u while the job on partition '%s' is %s; "
                        "every process makes the same calls in the same order",
                        q->id + j->proc_base, m->id, j->name, job_phase_name(j->phase));
        return;
    }
    if (j->run_model != NULL && j->run_model != m) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "executor",
                        "process %u runs model %u while the job's other processes run model "
                        "%u; every process runs the same model in the same order", q->id,
                        m->id, j->run_model->id);
        return;
    }
    pl = job_slice_plan(q, m);
    rc = slice_check(m->entry->exe, &pl, rq->inputs, rq->n_inputs, m->name, &total, msg,
                     sizeof msg);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "executor", "%s", msg);
        return;
    }
    if (total != payload_len) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "run payload has %u bytes; the inputs described need %" PRIu64,
                        payload_len, total);
        return;
    }
    q->run_req = req_id; /* so that an end now answers it; its bytes are then dropped */
    conn_hold_frames(c);
    if (job_end_if_left(j, m->proc0, m->nproc))
        return;
    job_gather_for(j, JOB_READY, m->proc0, m->nproc);
    job_step(j, JOB_EV_RUN); /* the first of several arms job_timeout: wait for the others */
    j->run_model = m;
    m->busy = 1;
    memset(&q->cur, 0, sizeof q->cur);
    q->steps_in = 0;
    q->stream = rq->stream_outputs;
    q->stream_begun = 0;
    q->sent = 0;
    if (payload_len == 0) {
        job_gather_arrive(&j->gather, q->id);
        q->steps_in = run_steps(m->entry->exe); /* nothing to receive */
        feed_progress(j);
        return;
    }
    q->run_arriving = 1;
    j->arriving++;
    sink.refill = slice_refill;
    sink.done = on_input;
    sink.abort = on_input_abort;
    sink.arg = q;
    conn_set_sink(c, &sink); /* the first segments come from refill */
}

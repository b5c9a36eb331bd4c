/*
 * jobs_run.c — the runs of a job's model (see jobs.h): each process's slice is received
 * straight into its replicas' rows (slices.c), the call runs once every slice is in, and
 * each process is answered with its own replicas' rows of every output.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "log.h"
#include "models.h"
#include "server.h"
#include "slices.h"

/*
 * The rows of process q in buffer (io's run buffer): block k (one device iteration and
 * accumulation step, or one returned micro-batch for an output) holds R steps; q's
 * are steps q*Rl .. (q+1)*Rl-1.
 */
static void
slice_of(const struct job *j, const struct sim_exe *exe, const struct sim_io_info *io,
         unsigned q, size_t k, size_t *off, size_t *len)
{
    size_t R = sim_exe_replicas(exe), Rl = R / j->nproc;

    *off = (k * R + (size_t)q * Rl) * io->step_bytes;
    *len = Rl * io->step_bytes;
}

/* This process's share of the job's model m, as slices.c plans it. */
static struct slice_plan
plan_of(const struct job *j, const struct job_proc *q, const struct model *m)
{
    struct slice_plan pl = {j->nproc, q->id, m->group > 1 ? m->group : 1,
                            m->group_orthogonal};

    return pl;
}

/* Sets the next segments of a slice's receive: straight into its rows of each input. */
static int
slice_refill(struct conn *c, struct conn_sink *sink, void *arg)
{
    struct job_proc *q = arg;
    struct job *j = q->job;
    struct slice_plan pl = plan_of(j, q, j->run_model);

    (void)c;
    return slice_fill(j->run_model->entry->exe, &pl, &q->cur, sink);
}

static void
work_run(struct work_item *jb)
{
    struct run *w = (struct run *)jb;
    uint64_t t0 = models_now_us();

    for (unsigned p = 0; p < w->j->nproc; p++) { /* input groups: one row to every replica */
        struct slice_plan pl = plan_of(w->j, &w->j->proc[p], w->m);
        slice_replicate(w->m->entry->exe, &pl);
    }
    w->rc = sim_exe_run(w->m->entry->exe, &w->err);
    w->us = models_now_us() - t0;
}

/* Sends process q its replicas' outputs of the run just done. */
static void
reply_slice(struct job *j, struct job_proc *q, struct model *m, uint64_t us)
{
    struct sim_exe *exe = m->entry->exe;
    size_t no = sim_exe_output_count(exe), niov = 0, cap = 0;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunReply r = IPUOF__RUN_REPLY__INIT;
    Ipuof__TensorInfo *ti = calloc(no + 1, sizeof *ti);
    Ipuof__TensorInfo **tp = calloc(no + 1, sizeof *tp);
    int64_t(*dims)[2 * SIM_MAX_RANK] = calloc(no + 1, sizeof *dims);
    struct conn_iov *iov = NULL;

    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        sim_exe_output_info(exe, i, &io);
        cap += io.iterations;
    }
    iov = calloc(cap + 1, sizeof *iov);
    if (ti == NULL || tp == NULL || dims == NULL || iov == NULL) {
        conn_send_error(q->conn, q->run_req, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        const uint8_t *buf = sim_exe_output_buffer(exe, i);
        sim_exe_output_info(exe, i, &io);
        models_tensor_info(&ti[i], &io, dims[i], dims[i] + SIM_MAX_RANK, NULL);
        if (ti[i].n_dims > 0)
            dims[i][0] /= j->nproc;
        ti[i].bytes /= j->nproc;
        tp[i] = &ti[i];
        for (size_t k = 0; k < io.iterations && io.step_bytes > 0; k++) {
            size_t off, len;
            slice_of(j, exe, &io, q->id, k, &off, &len);
            iov[niov].base = buf + off;
            iov[niov++].len = len;
        }
    }
    r.n_outputs = no;
    r.outputs = tp;
    r.run_us = us;
    h.request_id = q->run_req;
    h.body_case = IPUOF__HEADER__BODY_RUN_REPLY;
    h.run_reply = &r;
    conn_sendv(q->conn, &h, iov, (int)niov);
out:
    free(ti);
    free(tp);
    free(dims);
    free(iov);
}

static void
work_done(struct work_item *jb)
{
    struct run *w = (struct run *)jb;
    struct job *j = w->j;
    struct model *m = w->m;

    m->busy = 0;
    if (j->dead) { /* every process had its error from job_end */
        j->inflight = NULL;
        free(w);
        job_maybe_free(j);
        return;
    }
    dev_set_busy(j->srv->inv, m->first_ipu, m->nipus, 0); /* still the job's IPUs */
    if (w->rc == IPUOF_OK)
        models_count_steps(j->srv, m, sim_exe_device_iterations(m->entry->exe));
    j->run_model = NULL;
    j->nrun = 0;
    job_hold(j); /* j->inflight stays set: a process leaving now ends the job */
    for (unsigned p = 0; p < j->nproc && !j->dead; p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *c = q->conn;
        conn_enter(c);
        if (w->rc == IPUOF_OK)
            reply_slice(j, q, m, w->us);
        else
            conn_send_error(c, q->run_req, w->rc, 0, 0, "executor", "%s", w->err.msg);
        q->run_req = 0;
        conn_release_frames(c);
        conn_leave(c); /* a kill here ends the job through job_leave */
    }
    j->inflight = NULL;
    free(w);
    job_unhold(j);
}

/* Every process's slice is in: run once on a worker. */
static void
run_all(struct job *j)
{
    struct run *w = calloc(1, sizeof *w);

    evtimer_del(j->timer);
    if (w == NULL) {
        job_end(j, IPUOF_E_NOMEM, "out of memory starting the run of the job on partition "
                "'%s'", j->name);
        return;
    }
    w->j = j;
    w->m = j->run_model;
    w->item.run = work_run;
    w->item.done = work_done;
    if (work_submit(j->srv->work, &w->item) < 0) {
        free(w);
        job_end(j, IPUOF_E_NOMEM, "out of memory starting the run of the job on partition "
                "'%s'", j->name);
        return;
    }
    j->inflight = w;
    dev_set_busy(j->srv->inv, w->m->first_ipu, w->m->nipus, 1);
}

/* The last byte of q's slice is in. */
static void
on_slice(struct conn *c, void *arg)
{
    struct job_proc *q = arg;
    struct job *j = q->job;

    q->run_arriving = 0;
    j->arriving--;
    if (j->dead) { /* the job ended while the bytes arrived */
        conn_send_error(c, q->run_req, IPUOF_E_CLOSED, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_REATTACH, "device", "the job on partition '%s' ended "
                        "while this process's slice of the run arrived", j->name);
        q->run_req = 0;
        q->conn = NULL;
        conn_release_frames(c);
        job_maybe_free(j);
        return;
    }
    if (++j->nrun == j->nproc)
        run_all(j);
}

/* The connection died while q's slice arrived. */
static void
on_slice_abort(struct conn *c, void *arg)
{
    struct job_proc *q = arg;
    struct job *j = q->job;

    (void)c;
    if (!q->run_arriving)
        return;
    q->run_arriving = 0;
    j->arriving--;
    if (j->dead) {
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

    if (q->run_req != 0) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u already sent its slice of a run", q->id);
        return;
    }
    if (j->run_model != NULL && j->run_model != m) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "executor",
                        "process %u runs model %u while the job's other processes run model "
                        "%u; every process runs the same model in the same order", q->id,
                        m->id, j->run_model->id);
        return;
    }
    pl = plan_of(j, q, m);
    if (slice_check(m->entry->exe, &pl, rq->inputs, rq->n_inputs, m->name, &total, msg,
                    sizeof msg) < 0) {
        conn_send_error(c, req_id, IPUOF_E_SHAPE, 0, 0, "executor", "process %u: %s", q->id,
                        msg);
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
    if (job_end_if_left(j))
        return;
    j->run_model = m;
    m->busy = 1;
    memset(&q->cur, 0, sizeof q->cur);
    if (j->nrun == 0 && j->arriving == 0)
        job_arm_timer(j);
    if (payload_len == 0) {
        if (++j->nrun == j->nproc)
            run_all(j);
        return;
    }
    q->run_arriving = 1;
    j->arriving++;
    sink.refill = slice_refill;
    sink.done = on_slice;
    sink.abort = on_slice_abort;
    sink.arg = q;
    conn_set_sink(c, &sink); /* the first segments come from refill */
}


/*
 * req_run.c — run and free_model: streaming batches through a compiled model.
 *
 * The input bytes are read from the socket straight into the executable's input buffers, a
 * worker runs the device iterations (and, for training, the accumulation steps and
 * optimizer steps) on every replica, and the outputs go back in one frame.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "ipuof/client.h"
#include "log.h"
#include "models.h"
#include "server.h"

struct run_job {
    struct req_job rj;
    struct model *m;
    int rc;
    struct sim_err err;
    uint64_t us;
};

static void
run_run(struct job *j)
{
    struct run_job *r = (struct run_job *)j;
    uint64_t t0 = models_now_us();

    r->rc = sim_exe_run(r->m->entry->exe, &r->err);
    r->us = models_now_us() - t0;
}

static void
reply_run(struct conn *c, uint64_t req_id, struct model *m, uint64_t us)
{
    struct sim_exe *exe = m->entry->exe;
    size_t no = sim_exe_output_count(exe);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunReply r = IPUOF__RUN_REPLY__INIT;
    Ipuof__TensorInfo ti[CONN_MAX_SEGS];
    Ipuof__TensorInfo *tp[CONN_MAX_SEGS];
    int64_t dims[CONN_MAX_SEGS][2 * SIM_MAX_RANK];
    struct conn_iov iov[CONN_MAX_SEGS];
    Ipuof__RunCost cost;
    double busy[SIM_MAX_IPUS];

    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        sim_exe_output_info(exe, i, &io);
        models_tensor_info(&ti[i], &io, dims[i], dims[i] + SIM_MAX_RANK, NULL);
        tp[i] = &ti[i];
        iov[i].base = sim_exe_output_buffer(exe, i);
        iov[i].len = io.run_bytes;
    }
    r.n_outputs = no;
    r.outputs = tp;
    r.run_us = us;
    req_run_cost(exe, &cost, busy);
    r.cost = &cost;
    h.request_id = req_id;
    h.body_case = IPUOF__HEADER__BODY_RUN_REPLY;
    h.run_reply = &r;
    conn_sendv(c, &h, iov, (int)no);
}

static void
run_done(struct job *j)
{
    struct run_job *r = (struct run_job *)j;
    struct model *m = r->m;
    struct srv *s = r->rj.srv;
    struct conn *c = r->rj.conn;

    m->busy = 0;
    m->job = NULL;
    if (c == NULL || m->owner == NULL) { /* the client went away during the run */
        model_free(s, m);
        free(r);
        return;
    }
    c->inflight = NULL;
    conn_enter(c);
    if (m->cancel_code != 0) {
        conn_send_error(c, r->rj.req_id, m->cancel_code, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_REATTACH, "device",
                        "the run of model '%s' was interrupted: %s", m->name,
                        m->cancel_code == IPUOF_E_SHUTDOWN ? "ipuofd is shutting down"
                                                           : "the partition was reset");
        model_free(s, m);
    } else if (r->rc != IPUOF_OK) {
        conn_send_error(c, r->rj.req_id, r->rc, 0, 0, "executor", "%s", r->err.msg);
    } else {
        unsigned D = sim_exe_device_iterations(m->entry->exe);
        for (unsigned i = 0; i < m->nipus; i++)
            s->inv->ipus[m->first_ipu + i].steps_run += D;
        reply_run(c, r->rj.req_id, m, r->us);
    }
    free(r);
    conn_job_end(c);
    conn_leave(c);
}

/* The inputs have arrived in the executable's buffers: run them on a worker. */
static void
on_run_payload(struct conn *c, void *arg)
{
    struct run_job *r = arg;
    struct model *m = r->m;

    if (m->cancel_code != 0) {
        conn_send_error(c, r->rj.req_id, m->cancel_code, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_REATTACH, "device",
                        "the partition was reset before model '%s' could run", m->name);
        model_free(c->srv, m);
        free(r);
        conn_job_end(c);
        return;
    }
    r->rj.job.run = run_run;
    r->rj.job.done = run_done;
    if (work_submit(c->srv->work, &r->rj.job) < 0) {
        m->busy = 0;
        conn_send_error(c, r->rj.req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        free(r);
        conn_job_end(c);
        return;
    }
    m->job = &r->rj;
    c->inflight = &r->rj;
}

/* The connection died while the inputs were arriving (the model is freed with it). */
static void
on_run_abort(struct conn *c, void *arg)
{
    (void)c;
    free(arg);
}

void
req_run(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__RunRequest *rq = h->run;
    struct conn_sink sink = {0};
    struct model *m = models_find(c, rq->model_id);
    struct sim_exe *exe;
    struct run_job *r;
    uint64_t total = 0;
    size_t n_in;

    if (m == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "executor",
                        "no model %u on this connection; compile one first", rq->model_id);
        return;
    }
    exe = m->entry->exe;
    n_in = sim_exe_input_count(exe);
    if (rq->n_inputs != n_in || n_in > CONN_MAX_SEGS) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor",
                        "run of model '%s' gives %zu inputs; the model takes %zu", m->name,
                        rq->n_inputs, n_in);
        return;
    }
    for (size_t i = 0; i < n_in; i++) {
        const Ipuof__TensorInfo *ti = rq->inputs[i];
        long idx = ti->name[0] ? sim_exe_input_index(exe, ti->name) : (long)i;
        struct sim_io_info io;
        struct sim_err err;
        int rc;

        if (idx < 0 || (size_t)idx != i) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor",
                            "run input %zu is '%s', but model '%s' takes '%s' there (inputs "
                            "go in the order of the compile reply)", i, ti->name, m->name,
                            sim_exe_input_info(exe, i, &io) == 0 ? io.name : "?");
            return;
        }
        if (ti->n_dims > SIM_MAX_RANK) {
            conn_send_error(c, req_id, IPUOF_E_SHAPE, 0, 0, "executor",
                            "input '%s' has rank %zu; at most %d is supported", ti->name,
                            ti->n_dims, SIM_MAX_RANK);
            return;
        }
        rc = sim_exe_check_input(exe, i, (int)ti->dtype, (int)ti->n_dims, ti->dims, &err);
        if (rc != IPUOF_OK) {
            conn_send_error(c, req_id, rc, 0, 0, "executor", "%s", err.msg);
            return;
        }
        sim_exe_input_info(exe, i, &io);
        sink.seg[i] = sim_exe_input_buffer(exe, i);
        sink.seg_len[i] = io.run_bytes;
        total += io.run_bytes;
    }
    if (total != payload_len) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "run payload has %u bytes; the inputs described need %" PRIu64,
                        payload_len, total);
        return;
    }
    r = calloc(1, sizeof *r);
    if (r == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        return;
    }
    r->rj.srv = c->srv;
    r->rj.conn = c;
    r->rj.req_id = req_id;
    r->m = m;
    m->busy = 1;
    sink.nseg = (int)n_in;
    sink.done = on_run_payload;
    sink.abort = on_run_abort;
    sink.arg = r;
    conn_job_begin(c);
    if (payload_len == 0)
        on_run_payload(c, r);
    else
        conn_set_sink(c, &sink);
}

void
req_free_model(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__FreeModelReply fr = IPUOF__FREE_MODEL_REPLY__INIT;
    struct model **pp, *m = NULL;

    (void)payload_len;
    for (pp = &c->models; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == h->free_model->model_id) {
            m = *pp;
            *pp = m->next;
            break;
        }
    }
    if (m == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "executor",
                        "no model %u on this connection", h->free_model->model_id);
        return;
    }
    model_free(c->srv, m);
    models_update_loaded(c->srv, c);
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_FREE_MODEL_REPLY;
    r.free_model_reply = &fr;
    conn_send(c, &r, NULL, 0);
}

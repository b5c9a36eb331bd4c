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
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "models.h"
#include "server.h"
#include "slices.h"
#include "wiremap.h"

struct run_job {
    struct req_task rt;
    struct model *m;
    struct slice_plan plan;       /* input replica groups: the rows the payload fills */
    struct slice_cursor cur;
    int rc;
    struct sim_err err;
    uint64_t us;
    uint8_t **seg;               /* the input buffers, one per model input (the sink's) */
    size_t *seg_len;
};

/* A run job with room for n inputs' sink entries, or NULL. Free with free(). */
static struct run_job *
run_job_new(size_t n)
{
    struct run_job *r = calloc(1, sizeof *r + n * (sizeof *r->seg + sizeof *r->seg_len));

    if (r == NULL)
        return NULL;
    r->seg = (uint8_t **)(r + 1);
    r->seg_len = (size_t *)(r->seg + n);
    return r;
}

static void
run_run(struct work_item *j)
{
    struct run_job *r = (struct run_job *)j;
    uint64_t t0 = models_now_us();

    slice_replicate(r->m->entry->exe, &r->plan); /* no-op without input groups */
    r->rc = sim_exe_run(r->m->entry->exe, &r->err);
    r->us = models_now_us() - t0;
}

/* Sends the outputs of m's last run: one TensorInfo and one payload piece per output (as
 * many as the model has; the compile refused models whose reply cannot be framed). */
static void
reply_run(struct conn *c, uint64_t req_id, struct model *m, uint64_t us)
{
    struct sim_exe *exe = m->entry->exe;
    size_t no = sim_exe_output_count(exe);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunReply r = IPUOF__RUN_REPLY__INIT;
    Ipuof__TensorInfo *ti = calloc(no + 1, sizeof *ti);
    Ipuof__TensorInfo **tp = calloc(no + 1, sizeof *tp);
    int64_t(*dims)[2 * SIM_MAX_RANK] = calloc(no + 1, sizeof *dims);
    struct conn_iov *iov = calloc(no + 1, sizeof *iov);
    Ipuof__RunCost cost;
    double busy[SIM_MAX_IPUS];

    if (ti == NULL || tp == NULL || dims == NULL || iov == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        goto out;
    }
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
out:
    free(ti);
    free(tp);
    free(dims);
    free(iov);
}

static void
run_done(struct work_item *j)
{
    struct run_job *r = (struct run_job *)j;
    struct model *m = r->m;
    struct srv *s = r->rt.srv;
    struct conn *c = r->rt.conn;

    m->busy = 0;
    m->task = NULL;
    dev_set_busy(s->inv, m->first_ipu, m->nipus, 0);
    if (c == NULL || m->owner == NULL) { /* the client went away during the run */
        model_free(s, m);
        free(r);
        return;
    }
    c->inflight = NULL;
    conn_enter(c);
    if (m->cancel_code != 0) {
        conn_send_error(c, r->rt.req_id, m->cancel_code, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_REATTACH, "device",
                        "the run of model '%s' was interrupted: %s", m->name,
                        m->cancel_code == IPUOF_E_SHUTDOWN ? "ipuofd is shutting down"
                                                           : "the partition was reset");
        model_free(s, m);
    } else if (j->dropped) {
        conn_send_error(c, r->rt.req_id, IPUOF_E_SHUTDOWN, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "daemon",
                        "the run of model '%s' was not started: ipuofd is stopping", m->name);
    } else if (r->rc != IPUOF_OK) {
        conn_send_error(c, r->rt.req_id, r->rc, 0, 0, "executor", "%s", r->err.msg);
    } else {
        models_count_steps(s, m, sim_exe_device_iterations(m->entry->exe));
        reply_run(c, r->rt.req_id, m, r->us);
    }
    free(r);
    conn_release_frames(c);
    conn_leave(c);
}

/* The inputs have arrived in the executable's buffers: run them on a worker. */
static void
on_run_payload(struct conn *c, void *arg)
{
    struct run_job *r = arg;
    struct model *m = r->m;

    if (m->cancel_code != 0) {
        conn_send_error(c, r->rt.req_id, m->cancel_code, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_REATTACH, "device",
                        "the partition was reset before model '%s' could run", m->name);
        model_free(c->srv, m);
        free(r);
        conn_release_frames(c);
        return;
    }
    r->rt.item.run = run_run;
    r->rt.item.done = run_done;
    if (work_submit(c->srv->work, &r->rt.item) < 0) {
        m->busy = 0;
        conn_send_error(c, r->rt.req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        free(r);
        conn_release_frames(c);
        return;
    }
    m->task = &r->rt;
    c->inflight = &r->rt;
    dev_set_busy(c->srv->inv, m->first_ipu, m->nipus, 1);
}

/* The connection died while the inputs were arriving. A model still on the connection is
 * freed with it; one already taken away (its partition was revoked: cancel_code set, off
 * the connection's list) waited for this payload to end and is freed here. */
static void
on_run_abort(struct conn *c, void *arg)
{
    struct run_job *r = arg;

    if (r->m->cancel_code != 0)
        model_free(c->srv, r->m);
    free(r);
}

static int
grouped_refill(struct conn *c, struct conn_sink *sink, void *arg)
{
    struct run_job *r = arg;

    (void)c;
    return slice_fill(r->m->entry->exe, &r->plan, &r->cur, sink);
}

/* A run of a model with input replica groups: the payload fills one row per group. */
static void
grouped_run(struct conn *c, uint64_t req_id, const Ipuof__RunRequest *rq, uint32_t payload_len,
            struct model *m)
{
    struct slice_plan pl = {1, 0, m->group, m->group_orthogonal};
    struct conn_sink sink = {0};
    struct run_job *r;
    uint64_t total;
    char msg[512];

    if (slice_check(m->entry->exe, &pl, rq->inputs, rq->n_inputs, m->name, &total, msg,
                    sizeof msg) < 0) {
        conn_send_error(c, req_id, IPUOF_E_SHAPE, 0, 0, "executor", "%s", msg);
        return;
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
    r->rt.srv = c->srv;
    r->rt.conn = c;
    r->rt.req_id = req_id;
    r->m = m;
    r->plan = pl;
    m->busy = 1;
    sink.refill = grouped_refill;
    sink.done = on_run_payload;
    sink.abort = on_run_abort;
    sink.arg = r;
    conn_hold_frames(c);
    if (payload_len == 0)
        on_run_payload(c, r);
    else
        conn_set_sink(c, &sink);
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
        models_send_missing(c, req_id, rq->model_id, "; compile one first");
        return;
    }
    if (m->nproc > 1) { /* this process's slice of a job's run */
        job_run(c, req_id, rq, payload_len, m);
        return;
    }
    if (m->group > 1) { /* one input per group of replicas */
        grouped_run(c, req_id, rq, payload_len, m);
        return;
    }
    exe = m->entry->exe;
    n_in = sim_exe_input_count(exe);
    if (rq->n_inputs != n_in) {
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
        if (wiremap_sim_dtype(ti->dtype) < 0) {
            wiremap_refuse(&wiremap_dtype, ti->dtype, "a run input", err.msg, sizeof err.msg);
            conn_send_error(c, req_id, IPUOF_E_DTYPE, 0, 0, "executor", "run input %zu ('%s'): "
                            "%s", i, ti->name, err.msg);
            return;
        }
        rc = sim_exe_check_input(exe, i, wiremap_sim_dtype(ti->dtype), (int)ti->n_dims,
                                 ti->dims, &err);
        if (rc != IPUOF_OK) {
            conn_send_error(c, req_id, rc, 0, 0, "executor", "%s", err.msg);
            return;
        }
        sim_exe_input_info(exe, i, &io);
        total += io.run_bytes;
    }
    if (total != payload_len) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "run payload has %u bytes; the inputs described need %" PRIu64,
                        payload_len, total);
        return;
    }
    r = run_job_new(n_in);
    if (r == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        return;
    }
    for (size_t i = 0; i < n_in; i++) {
        struct sim_io_info io;
        sim_exe_input_info(exe, i, &io);
        r->seg[i] = sim_exe_input_buffer(exe, i);
        r->seg_len[i] = io.run_bytes;
    }
    r->rt.srv = c->srv;
    r->rt.conn = c;
    r->rt.req_id = req_id;
    r->m = m;
    r->plan = (struct slice_plan){1, 0, 1, 0}; /* every row from the payload */
    m->busy = 1;
    sink.seg = r->seg;
    sink.seg_len = r->seg_len;
    sink.nseg = (int)n_in;
    sink.done = on_run_payload;
    sink.abort = on_run_abort;
    sink.arg = r;
    conn_hold_frames(c);
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
    if (job_shared(c)) { /* freed once every process of the job has freed it */
        if (job_free_model(c, h->free_model->model_id) < 0) {
            models_send_missing(c, req_id, h->free_model->model_id, "");
            return;
        }
    } else {
        for (pp = job_models(c); pp != NULL && *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->id == h->free_model->model_id) {
                m = *pp;
                *pp = m->next;
                break;
            }
        }
        if (m == NULL) {
            models_send_missing(c, req_id, h->free_model->model_id, "");
            return;
        }
        model_free(c->srv, m);
    }
    models_update_loaded(c->srv, c);
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_FREE_MODEL_REPLY;
    r.free_model_reply = &fr;
    conn_send(c, &r, NULL, 0);
}

/*
 * req_weights.c — set_optimizer, read_weights, write_weights, copy_weights and save_model:
 * what a training application does with its model between runs (PopTorch's setOptimizer,
 * copyWeightsToHost / copyWeightsToDevice, saving the trained model).
 *
 * read_weights also reads a trained weight's last applied gradient by the name
 * "gradient:<weight>" (PopTorch's Gradient___<weight> anchors); the reply names it so.
 *
 * These run on the event-loop thread: they copy at most a model's weights, and a
 * connection's model never runs while its next request is being served (requests of one
 * connection are answered in order, a run's reply first).
 */
#include <inttypes.h>
#include <stdbool.h>
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
#include "wiremap.h"

#define MAX_WEIGHTS_PER_REQUEST 64
#define GRADIENT_PREFIX "gradient:"

/* The model with id, or NULL with an error sent. */
static struct model *
find(struct conn *c, uint64_t req_id, uint32_t id)
{
    struct model *m = job_find_model(c, id);

    if (m == NULL)
        job_send_missing(c, req_id, id, "");
    return m;
}

/* Sends an empty reply of kind body (set_optimizer, write_weights, copy_weights). */
static void
reply_empty(struct conn *c, uint64_t req_id, Ipuof__Header__BodyCase body)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__SetOptimizerReply so = IPUOF__SET_OPTIMIZER_REPLY__INIT;
    Ipuof__WriteWeightsReply ww = IPUOF__WRITE_WEIGHTS_REPLY__INIT;
    Ipuof__CopyWeightsReply cw = IPUOF__COPY_WEIGHTS_REPLY__INIT;

    r.request_id = req_id;
    r.body_case = body;
    if (body == IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY)
        r.set_optimizer_reply = &so;
    else if (body == IPUOF__HEADER__BODY_WRITE_WEIGHTS_REPLY)
        r.write_weights_reply = &ww;
    else
        r.copy_weights_reply = &cw;
    conn_send(c, &r, NULL, 0);
}

void
req_set_optimizer(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__SetOptimizerRequest *rq = h->set_optimizer;
    const Ipuof__Optimizer *w = rq->optimizer;
    struct model *m = find(c, req_id, rq->model_id);
    struct sim_optimizer o;
    struct sim_err err;
    char *names = NULL;
    int rc;

    (void)payload_len;
    if (m == NULL)
        return;
    if (w == NULL) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor",
                        "set_optimizer carries no optimizer");
        return;
    }
    if (models_optimizer(w, &o, &names, err.msg, sizeof err.msg) < 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor", "%s", err.msg);
        return;
    }
    rc = sim_exe_set_optimizer(m->entry->exe, &o, &err);
    free(names);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "executor", "%s", err.msg);
        return;
    }
    log_debug("client %u: model %u optimizer set (lr %g)", c->id, m->id, (double)o.lr);
    reply_empty(c, req_id, IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY);
}

static void
weight_tensor(Ipuof__TensorInfo *ti, const struct sim_weight_info *w, int64_t *dims)
{
    ipuof__tensor_info__init(ti);
    ti->name = (char *)w->name;
    ti->dtype = (Ipuof__DType)wiremap_to_wire(&wiremap_dtype, w->dtype,
                                              IPUOF__DTYPE__DTYPE_UNDEFINED);
    for (int d = 0; d < w->rank; d++)
        dims[d] = w->dims[d];
    ti->n_dims = (size_t)w->rank;
    ti->dims = dims;
    ti->bytes = w->bytes;
}

void
req_read_weights(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__ReadWeightsRequest *rq = h->read_weights;
    struct model *m = find(c, req_id, rq->model_id);
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__ReadWeightsReply rep = IPUOF__READ_WEIGHTS_REPLY__INIT;
    Ipuof__TensorInfo ti[MAX_WEIGHTS_PER_REQUEST];
    Ipuof__TensorInfo *tp[MAX_WEIGHTS_PER_REQUEST];
    int64_t dims[MAX_WEIGHTS_PER_REQUEST][SIM_MAX_RANK];
    struct conn_iov iov[MAX_WEIGHTS_PER_REQUEST];
    struct sim_exe *exe;
    size_t n, total = 0;
    int rc = IPUOF_OK;

    (void)payload_len;
    if (m == NULL)
        return;
    exe = m->entry->exe;
    n = rq->n_names ? rq->n_names : sim_exe_weight_count(exe);
    if (n > MAX_WEIGHTS_PER_REQUEST) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "executor",
                        "%zu weights asked for in one request; at most %d: ask by name",
                        n, MAX_WEIGHTS_PER_REQUEST);
        return;
    }
    memset(iov, 0, sizeof iov);
    for (size_t i = 0; i < n; i++) {
        const char *name = rq->n_names ? rq->names[i] : NULL;
        bool grad = name != NULL && strncmp(name, GRADIENT_PREFIX, strlen(GRADIENT_PREFIX)) == 0;
        long idx = name == NULL ? (long)i
                   : sim_exe_weight_index(exe, grad ? name + strlen(GRADIENT_PREFIX) : name);
        struct sim_weight_info w;
        struct sim_err err;
        void *buf;

        if (grad && (idx < 0 || (size_t)idx >= sim_exe_weight_count(exe))) {
            conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "executor",
                            "model '%s', reading '%s': it has no weight called '%s' "
                            "(" GRADIENT_PREFIX "<weight> names a trained weight's gradient)",
                            m->name, name, name + strlen(GRADIENT_PREFIX));
            rc = IPUOF_E_NOTFOUND;
            goto out;
        }
        if (idx < 0) {
            sim_exe_read_weight(exe, rq->names[i], NULL, 0, &err);   /* says what is kept */
            conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "executor",
                            "model '%s', reading: %s", m->name, err.msg);
            rc = IPUOF_E_NOTFOUND;
            goto out;
        }
        sim_exe_weight_info(exe, (size_t)idx, &w);
        buf = malloc(w.bytes ? w.bytes : 1);
        if (buf == NULL) {
            conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
            rc = IPUOF_E_NOMEM;
            goto out;
        }
        iov[i].base = buf;
        iov[i].len = w.bytes;
        rc = grad ? sim_exe_read_gradient(exe, w.name, buf, w.bytes, &err)
                  : sim_exe_read_weight(exe, w.name, buf, w.bytes, &err);
        if (rc != IPUOF_OK) {
            conn_send_error(c, req_id, rc, 0, 0, "executor", "model '%s', reading '%s': %s",
                            m->name, grad ? name : w.name, err.msg);
            goto out;
        }
        weight_tensor(&ti[i], &w, dims[i]);
        if (grad)
            ti[i].name = (char *)name;
        tp[i] = &ti[i];
        total += w.bytes;
    }
    if (total > UINT32_MAX) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "executor",
                        "the weights asked for take %zu bytes, over one frame; ask by name", total);
        goto out;
    }
    rep.n_weights = n;
    rep.weights = tp;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_READ_WEIGHTS_REPLY;
    r.read_weights_reply = &rep;
    conn_sendv(c, &r, iov, (int)n);
out:
    for (size_t i = 0; i < n; i++)
        free((void *)iov[i].base);
}

/* What a write_weights request is writing while its payload arrives. */
struct weight_write {
    uint32_t model_id;            /* looked up again when the bytes are in */
    uint64_t req_id;
    size_t n;
    char *names[MAX_WEIGHTS_PER_REQUEST];
    uint8_t *bufs[MAX_WEIGHTS_PER_REQUEST];
    size_t bytes[MAX_WEIGHTS_PER_REQUEST];
};

static void
weight_write_free(struct weight_write *ww)
{
    for (size_t i = 0; i < ww->n; i++) {
        free(ww->names[i]);
        free(ww->bufs[i]);
    }
    free(ww);
}

static void
on_weights_abort(struct conn *c, void *arg)
{
    (void)c;
    weight_write_free(arg);
}

static void
on_weights_payload(struct conn *c, void *arg)
{
    struct weight_write *ww = arg;
    struct model *m = job_find_model(c, ww->model_id);

    if (m == NULL) {
        conn_send_error(c, ww->req_id, IPUOF_E_DEVICE_RESET, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_REATTACH, "device",
                        "the model was freed while its weights arrived");
        goto out;
    }
    for (size_t i = 0; i < ww->n; i++) {
        struct sim_err err;
        int rc = sim_exe_write_weight(m->entry->exe, ww->names[i], ww->bufs[i], ww->bytes[i],
                                      &err);
        if (rc != IPUOF_OK) {
            conn_send_error(c, ww->req_id, rc, 0, 0, "executor", "%s", err.msg);
            goto out;
        }
    }
    m->pod_sync |= MODEL_POD_WRITTEN; /* across a Pod, the next call broadcasts them */
    reply_empty(c, ww->req_id, IPUOF__HEADER__BODY_WRITE_WEIGHTS_REPLY);
out:
    weight_write_free(ww);
}

void
req_write_weights(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__WriteWeightsRequest *rq = h->write_weights;
    struct model *m = find(c, req_id, rq->model_id);
    struct conn_sink sink = {0};
    struct weight_write *ww;
    uint64_t total = 0;

    if (m == NULL)
        return;
    if (c->proc_id != m->proc0 || job_pod_rank(c) > 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor",
                        "process %u writes weights of model '%s', which its job's %u processes "
                        "share as one copy; only process 0 writes them (its weights are every "
                        "replica's, as PopDistStrategy broadcasts from instance 0)",
                        c->proc_id + job_pod_process_base(c), m->name,
                        m->nproc * (job_pod_rank(c) >= 0 ? (unsigned)job_pod_ranks(c) : 1));
        return;
    }
    if (job_begin_step(c, req_id, JOB_STEP_WEIGHTS))
        return;
    if (rq->n_weights == 0 || rq->n_weights > MAX_WEIGHTS_PER_REQUEST) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor",
                        "write_weights lists %zu weights; give 1 to %d", rq->n_weights,
                        MAX_WEIGHTS_PER_REQUEST);
        return;
    }
    ww = calloc(1, sizeof *ww);
    if (ww == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        return;
    }
    ww->model_id = m->id;
    ww->req_id = req_id;
    for (size_t i = 0; i < rq->n_weights; i++) {
        const Ipuof__TensorInfo *ti = rq->weights[i];
        long idx = sim_exe_weight_index(m->entry->exe, ti->name);
        struct sim_weight_info w;

        if (idx < 0) {
            struct sim_err err;
            sim_exe_read_weight(m->entry->exe, ti->name, NULL, 0, &err);  /* what is kept */
            conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "executor",
                            "model '%s', writing: %s", m->name, err.msg);
            goto fail;
        }
        sim_exe_weight_info(m->entry->exe, (size_t)idx, &w);
        if (ti->bytes != w.bytes || wiremap_sim_dtype(ti->dtype) != w.dtype) {
            conn_send_error(c, req_id, IPUOF_E_SHAPE, 0, 0, "executor",
                            "weight '%s' is %zu bytes of %s; the write gives %" PRIu64
                            " bytes of %s", w.name, w.bytes, sim_dtype_name(w.dtype), ti->bytes,
                            sim_dtype_name(wiremap_sim_dtype(ti->dtype)));
            goto fail;
        }
        ww->names[i] = strdup(w.name);
        ww->bufs[i] = malloc(w.bytes ? w.bytes : 1);
        ww->bytes[i] = w.bytes;
        ww->n = i + 1;
        if (ww->names[i] == NULL || ww->bufs[i] == NULL) {
            conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
            goto fail;
        }
        total += w.bytes;
    }
    if (total != payload_len) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "write_weights payload has %u bytes; the weights listed need %" PRIu64,
                        payload_len, total);
        goto fail;
    }
    sink.seg = ww->bufs;
    sink.seg_len = ww->bytes;
    sink.nseg = (int)ww->n;
    sink.done = on_weights_payload;
    sink.abort = on_weights_abort;
    sink.arg = ww;
    if (payload_len == 0)
        on_weights_payload(c, ww);
    else
        conn_set_sink(c, &sink);
    return;
fail:
    weight_write_free(ww);
}

void
req_copy_weights(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__CopyWeightsRequest *rq = h->copy_weights;
    struct model *dst = find(c, req_id, rq->dst_model_id), *src;
    struct sim_err err;
    int rc;

    (void)payload_len;
    if (dst == NULL)
        return;
    src = find(c, req_id, rq->src_model_id);
    if (src == NULL)
        return;
    if (job_pod_rank(c) > 0 && job_pod_shared(c, dst)) {
        /* It would change this daemon's copy only: the daemons' weights would part. */
        unsigned nlocal = job_pod_process_base(c) / (unsigned)job_pod_rank(c);
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "executor",
                        "process %u copies weights into model '%s', which its job's processes "
                        "on %d Pod hosts share; only the first host's processes (0-%u) change "
                        "them (its weights are every replica's, as PopDistStrategy broadcasts "
                        "from instance 0)", c->proc_id + job_pod_process_base(c), dst->name,
                        job_pod_ranks(c), nlocal - 1);
        return;
    }
    rc = sim_exe_copy_weights(dst->entry->exe, src->entry->exe, &err);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "executor", "%s", err.msg);
        return;
    }
    dst->pod_sync |= MODEL_POD_WRITTEN; /* across a Pod, the next call broadcasts them */
    reply_empty(c, req_id, IPUOF__HEADER__BODY_COPY_WEIGHTS_REPLY);
}

void
req_save_model(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__SaveModelReply rep = IPUOF__SAVE_MODEL_REPLY__INIT;
    struct model *m = find(c, req_id, h->save_model->model_id);
    struct sim_err err;
    void *bytes = NULL;
    size_t len = 0;
    int rc;

    (void)payload_len;
    if (m == NULL)
        return;
    rc = sim_exe_save_onnx(m->entry->exe, &bytes, &len, &err);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "executor", "%s", err.msg);
        return;
    }
    if (len > UINT32_MAX) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "executor",
                        "model '%s' is %zu bytes as ONNX, over one frame", m->name, len);
        free(bytes);
        return;
    }
    rep.bytes = len;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_SAVE_MODEL_REPLY;
    r.save_model_reply = &rep;
    conn_send(c, &r, bytes, (uint32_t)len);
    free(bytes);
}

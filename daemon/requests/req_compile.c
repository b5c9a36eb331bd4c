/*
 * req_compile.c — compile and model_chunk: the requests that put graphs on the simulated
 * IPUs, for inference or training (and inference models made from a training model).
 *
 * The model bytes arrive in the compile frame's payload and in model_chunk frames until
 * model_bytes are in; then the job gathers its processes' compiles (jobs_compile.c) and a
 * worker thread loads and compiles the model (compile_task.c), sending compile_progress
 * events meanwhile. While a job is in flight the
 * connection's further frames wait; other connections are served.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile_int.h"
#include "conn.h"
#include "dispatch.h"
#include "frame.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"
#include "wiremap.h"

/* The whole model has arrived: the job compiles it once every process has sent it. */
static void
upload_complete(struct conn *c)
{
    struct compile_task *ct = c->upload;

    c->upload = NULL;
    job_compile_ready(c, ct);
}

static void
on_chunk_received(struct conn *c, void *arg)
{
    struct compile_task *ct = arg;

    if (c->upload != ct)
        return;
    if (ct->got == ct->len)
        upload_complete(c);
}

/* Points the frame's payload at the upload buffer. 0, or -1 with an error sent. */
static int
take_chunk(struct conn *c, uint64_t req_id, struct compile_task *ct, uint64_t offset,
           uint32_t payload_len)
{
    struct conn_sink sink = {.nseg = 1, .done = on_chunk_received, .arg = ct};

    if (offset != ct->got || payload_len > ct->len - ct->got) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "model chunk at offset %" PRIu64 " with %u bytes does not continue the "
                        "upload (%zu of %zu bytes received)", offset, payload_len, ct->got,
                        ct->len);
        return -1;
    }
    ct->chunk = ct->bytes + offset;
    ct->chunk_len = payload_len;
    sink.seg = &ct->chunk;
    sink.seg_len = &ct->chunk_len;
    ct->got += payload_len;
    conn_set_sink(c, &sink);
    return 0;
}

/*
 * An inference model with the current weights of training model src_id, compiled here on
 * the loop thread (the graph is already loaded, so this takes milliseconds). 0, or -1 with
 * an error sent; ct is consumed either way.
 */
static int
compile_from_training(struct conn *c, uint64_t req_id, struct compile_task *ct, uint32_t src_id)
{
    struct model *src = job_find_model(c, src_id);
    struct cache_entry *e;
    uint64_t t0 = models_now_us();
    int rc;

    if (src == NULL || !sim_exe_is_training(src->entry->exe)) {
        conn_send_error(c, req_id, src ? IPUOF_E_INVAL : IPUOF_E_NOTFOUND, 0, 0, "compiler",
                        "model %u %s; an inference model is made from a training model of this "
                        "connection", src_id, src ? "is not a training model" : "does not exist");
        compile_task_free(ct);
        return -1;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        compile_task_free(ct);
        return -1;
    }
    ct->opts.progress = NULL; /* compiled here, at once: no progress events */
    ct->rc = sim_compile_inference_from(src->entry->model, &ct->opts, src->entry->exe, &e->exe,
                                        &ct->err);
    ct->us = models_now_us() - t0;
    if (ct->rc == IPUOF_OK) {
        e->parent = src->entry; /* borrows the training model's graph */
        snprintf(e->name, sizeof e->name, "%s", ct->name);
        e->key = strdup("");
        src->entry->refs++;
        cache_insert(&c->srv->cache, e); /* not reusable: its weights are the training's */
        ct->entry = e;
    } else {
        free(e);
    }
    rc = ct->rc;
    job_compile_here(c, req_id, ct); /* replies, and frees ct */
    return rc == IPUOF_OK ? 0 : -1;
}

static int compile_begin(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                         uint32_t payload_len);

void
req_compile(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    /* A refused compile's remaining model chunks are dropped without a second answer. */
    if (job_begin_step(c, req_id, JOB_STEP_COMPILE) ||
        compile_begin(c, req_id, h, payload_len) < 0)
        c->refused_upload = req_id;
}

/* Checks a compile request and starts receiving its model. 0, or -1 with an error sent. */
static int
compile_begin(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__CompileRequest *rq = h->compile;
    struct srv *s = c->srv;
    const struct dev_partition *part = conn_part(c);
    struct compile_task *ct = NULL;

    if (part == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOT_ATTACHED, 0, 0, "device",
                        "compiling needs IPUs: attach a partition first");
        return -1;
    }
    if (c->upload != NULL) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "a model upload is already in progress on this connection");
        return -1;
    }
    if (compile_request_check(c, part, req_id, rq, payload_len) < 0)
        return -1;
    ct = calloc(1, sizeof *ct);
    if (ct == NULL)
        goto oom;
    ct->bytes = malloc(rq->model_bytes ? rq->model_bytes : 1);
    if (ct->bytes == NULL)
        goto oom;
    ct->len = rq->model_bytes;
    ct->srv = s;
    ct->req_id = req_id;
    snprintf(ct->name, sizeof ct->name, "%s", rq->name[0] ? rq->name : "model");
    sim_compile_opts_init(&ct->opts);
    ct->opts.device_iterations = rq->device_iterations;
    ct->replicas_per_process = compile_replicas_per_process(rq);
    /* A model this process makes alone (an inference model from its training model) has
     * its replicas; the job's shared compile sets its total in compile_submit. */
    ct->opts.replicas = ct->replicas_per_process;
    ct->opts.micro_batch = rq->micro_batch;
    ct->opts.tiles = s->cfg.tiles;
    if (rq->default_mode != NULL &&
        compile_map_kind(rq->default_mode->kind, &ct->opts.default_mode, rq->default_mode->n) < 0)
        goto bad_mode;
    for (size_t i = 0; i < rq->n_output_modes; i++) {
        if (compile_name_check(c, req_id, "output mode", rq->output_modes[i]->name) < 0) {
            compile_task_free(ct);
            return -1;
        }
        ct->mode_names[i] = strdup(rq->output_modes[i]->name);
        if (ct->mode_names[i] == NULL)
            goto oom;
        ct->opts.n_output_modes = i + 1;
        ct->modes[i].name = ct->mode_names[i];
        if (compile_map_kind(rq->output_modes[i]->kind, &ct->modes[i].mode,
                             rq->output_modes[i]->n) < 0)
            goto bad_mode;
    }
    ct->opts.output_modes = ct->modes;
    ct->opts.progress = compile_task_progress;
    ct->opts.progress_ud = ct;
    ct->no_cache = rq->no_cache;
    ct->group = rq->input_group_type == IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE ||
                        rq->input_group_size == 0 ? 1 : rq->input_group_size;
    ct->group_orthogonal = rq->input_group_type == IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_ORTHOGONAL;
    ct->first_ipu = part->first;
    ct->part_count = part->count;
    ct->opts.ipu_memory_bytes = UINT64_MAX;
    for (unsigned i = 0; i < ct->part_count; i++) {
        const struct dev_ipu *d = &s->inv->ipus[ct->first_ipu + i];
        ct->remaining[i] = d->memory_capacity - d->memory_used;
        if (i < ct->replicas_per_process && ct->remaining[i] < ct->opts.ipu_memory_bytes)
            ct->opts.ipu_memory_bytes = ct->remaining[i];
    }
    {
        uint64_t used = models_host_used(*job_models(c));
        ct->host_memory = s->cfg.host_memory;
        ct->host_left = used < s->cfg.host_memory ? s->cfg.host_memory - used : 0;
        ct->opts.host_memory_bytes = ct->host_left ? ct->host_left : 1; /* 0 = no limit */
    }
    if (compile_copy_constants(c, req_id, ct, rq) < 0) {
        compile_task_free(ct);
        return -1;
    }
    if (compile_training_options(c, req_id, ct, rq) < 0) {
        compile_task_free(ct);
        return -1;
    }
    ct->opts.partition_ipus = ct->part_count;
    compile_cost_options(&s->cfg, &ct->opts.cost);
    if (compile_clock_options(c, req_id, ct, rq) < 0) {
        compile_task_free(ct);
        return -1;
    }
    if (compile_placement_options(c, req_id, ct, rq) < 0) {
        compile_task_free(ct);
        return -1;
    }
    ct->key = compile_options_key(ct);
    if (ct->key == NULL)
        goto oom;
    if (rq->from_model_id != 0)
        return compile_from_training(c, req_id, ct, rq->from_model_id);
    c->upload = ct;
    if (payload_len == 0 && ct->len > 0)
        return 0; /* everything comes in model_chunk frames */
    if (take_chunk(c, req_id, ct, 0, payload_len) < 0) {
        c->upload = NULL;
        compile_task_free(ct);
        return -1;
    }
    return 0;

bad_mode:
    conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "compiler",
                    "unknown output mode; use All, Final, Sum or EveryN");
    compile_task_free(ct);
    return -1;
oom:
    conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon",
                    "out of memory receiving a model of %" PRIu64 " bytes", rq->model_bytes);
    compile_task_free(ct);
    return -1;
}

void
req_model_chunk(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    struct compile_task *ct = c->upload;

    if (ct == NULL && req_id == c->refused_upload) {
        return; /* the rest of an upload already refused: the client has its one error */
    }
    if (ct == NULL || ct->req_id != req_id) {
        conn_send_error(c, req_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "model chunk for request %" PRIu64 ", which is not an upload in "
                        "progress", req_id);
        return;
    }
    if (take_chunk(c, req_id, ct, h->model_chunk->offset, payload_len) < 0) {
        c->upload = NULL;
        c->refused_upload = req_id;
        compile_task_free(ct);
    }
}

void
req_compile_drop_upload(struct conn *c)
{
    compile_task_free(c->upload);
    c->upload = NULL;
}

int
req_compile_refuse_upload(struct conn *c, int code, const char *why)
{
    if (c->upload == NULL)
        return 0;
    conn_send_error(c, c->upload->req_id, code, IPUOF_ERROR_RECOVERABLE,
                    IPUOF_RECOVERY_RETRY, "daemon", "the compile of '%s' was not served: %s",
                    c->upload->name, why);
    c->refused_upload = c->upload->req_id;
    req_compile_drop_upload(c);
    return 1;
}

/*
 * req_compile.c — compile and model_chunk: the requests that put graphs on the simulated
 * IPUs, for inference or training (and inference models made from a training model).
 *
 * The model bytes arrive in the compile frame's payload and in model_chunk frames until
 * model_bytes are in; then a worker thread loads and compiles them (or finds them in the
 * cache), sending compile_progress events meanwhile. While a job is in flight the
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
#include "server.h"
#include "wiremap.h"

/* ---- compile ------------------------------------------------------------------------------ */

static void
compile_task_free(struct compile_task *ct)
{
    if (ct == NULL)
        return;
    for (size_t i = 0; i < ct->opts.n_output_modes; i++)
        free(ct->mode_names[i]);
    for (size_t i = 0; i < ct->n_consts; i++) {
        free(ct->consts[i].name);
        free(ct->consts[i].data);
    }
    for (size_t i = 0; i < ct->opts.n_frozen_weights; i++)
        free(ct->frozen_w[i]);
    for (size_t i = 0; i < ct->opts.n_blocks; i++)
        free(ct->block_prefix[i]);
    free(ct->loss);
    if (ct->prog_ev)
        event_free(ct->prog_ev);
    free(ct->bytes);
    free(ct->key);
    free(ct);
}

static void
on_progress_cb(int done, int total, void *ud)
{
    struct compile_task *ct = ud;

    atomic_store(&ct->prog_done, done);
    atomic_store(&ct->prog_total, total);
    event_active(ct->prog_ev, 0, 0);
}

static void
on_progress_ev(evutil_socket_t fd, short what, void *arg)
{
    struct compile_task *ct = arg;
    Ipuof__CompileProgress p = IPUOF__COMPILE_PROGRESS__INIT;

    (void)fd;
    (void)what;
    p.done = (uint32_t)atomic_load(&ct->prog_done);
    p.total = (uint32_t)atomic_load(&ct->prog_total);
    if (!job_ended(ct->job)) /* every process of the job waits for this compile */
        job_compile_progress(ct->job, &p);
}

/* Worker thread: find the model in the cache or compile it. */
static void
compile_run(struct work_item *j)
{
    struct compile_task *ct = (struct compile_task *)j;
    struct cache *k = &ct->srv->cache;
    struct cache_entry *e = NULL;
    uint64_t t0 = models_now_us();

    ct->rc = IPUOF_OK;
    if (!ct->no_cache && ct->loss == NULL)
        e = cache_acquire(k, ct->bytes, ct->len, ct->key);
    if (e != NULL && sim_exe_ipu_count(e->exe) > ct->part_count) {
        cache_release(k, e); /* compiled for a larger partition: compile here to say why */
        e = NULL;
    }
    if (e != NULL && e->host_bytes > ct->host_left) {
        cache_release(k, e); /* compile here: the compiler says why it does not fit */
        e = NULL;
    }
    if (e != NULL) {
        size_t n = sim_exe_ipu_count(e->exe);
        ct->cached = 1;
        for (size_t i = 0; i < n; i++) {
            struct sim_mem_report rep;
            sim_exe_memory(e->exe, i, &rep);
            if (rep.total > ct->remaining[i]) {
                ct->rc = IPUOF_E_DEVICE_OOM;
                snprintf(ct->err.msg, sizeof ct->err.msg,
                         "model '%s' does not fit IPU %u: it needs %" PRIu64 " bytes, %" PRIu64
                         " are free (other models of this partition use the rest); free a "
                         "model or attach more IPUs", ct->name, ct->first_ipu + (unsigned)i,
                         rep.total, ct->remaining[i]);
                cache_release(k, e);
                return;
            }
        }
        ct->entry = e;
        on_progress_cb(1, 1, ct);
        ct->us = models_now_us() - t0;
        return;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL) {
        ct->rc = IPUOF_E_NOMEM;
        snprintf(ct->err.msg, sizeof ct->err.msg, "out of memory");
        return;
    }
    ct->rc = sim_model_load(ct->bytes, ct->len, &e->model, &ct->err);
    if (ct->rc == IPUOF_OK)
        compile_freeze_constants(ct, e->model);
    if (ct->rc == IPUOF_OK)
        ct->rc = sim_compile(e->model, &ct->opts, &e->exe, &ct->err);
    ct->us = models_now_us() - t0;
    if (ct->rc == IPUOF_E_TOO_LARGE && strncmp(ct->err.msg, "the run buffers", 15) == 0) {
        size_t used = strlen(ct->err.msg);
        snprintf(ct->err.msg + used, sizeof ct->err.msg - used, " (this partition's host "
                 "memory for run buffers: %" PRIu64 " bytes (host_memory), %" PRIu64
                 " of them free)", ct->host_memory, ct->host_left);
    }
    if (ct->rc != IPUOF_OK) {
        sim_model_free(e->model);
        free(e);
        return;
    }
    e->bytes = ct->bytes;
    e->len = ct->len;
    snprintf(e->name, sizeof e->name, "%s", ct->name);
    e->key = ct->key;
    e->hash = cache_hash(e->bytes, e->len, e->key);
    e->reusable = ct->loss == NULL; /* a training executable's weights change as it trains */
    ct->bytes = NULL;
    ct->key = NULL;
    cache_insert(k, e);
    ct->entry = e;
}


/*
 * Refuses (0 = fits) a compiled model whose description cannot cross the wire: more inputs,
 * outputs or weights than a repeated field may hold, or a compile reply over the header
 * limit both ends accept (the run request and reply describe a subset of it). The
 * sentence goes to err.
 */
static int
reply_too_large(const struct conn *c, const Ipuof__Header *h, const Ipuof__CompileReply *r,
                const char *name, char *err, size_t errlen)
{
    uint32_t lim = c->srv->cfg.max_header_bytes < IPUOF_DEFAULT_MAX_HEADER
                       ? c->srv->cfg.max_header_bytes : IPUOF_DEFAULT_MAX_HEADER;
    size_t most = r->n_inputs > r->n_outputs ? r->n_inputs : r->n_outputs;
    size_t bytes;

    if (r->n_weights > most)
        most = r->n_weights;
    if (most > IPUOF_DEFAULT_MAX_REPEATED) {
        snprintf(err, errlen, "model '%s' has %zu inputs, %zu outputs and %zu weights; at most "
                 "%u of each can be described in a frame", name, r->n_inputs, r->n_outputs,
                 r->n_weights, IPUOF_DEFAULT_MAX_REPEATED);
        return 1;
    }
    bytes = ipuof__header__get_packed_size(h);
    if (bytes > lim) {
        snprintf(err, errlen, "model '%s' has %zu inputs, %zu outputs and %zu weights, whose "
                 "description takes %zu bytes, over the frame header limit of %u bytes "
                 "(max_header_bytes, and the client's limit); shorten the tensor names or "
                 "split the model", name, r->n_inputs, r->n_outputs, r->n_weights, bytes, lim);
        return 1;
    }
    return 0;
}

/* Sends the compile reply of m (for a job's process, the shapes of its own slice). 0, or
 * -1 with an error sent (out of memory, or a model too large to describe: see
 * reply_too_large). */
int
compile_reply_send(struct conn *c, uint64_t req_id, const struct model *m, int cached,
                   uint64_t us)
{
    unsigned P = m->nproc; /* a process sees its own share of the model's replicas */
    unsigned G = m->group > 1 ? m->group : 1; /* and one input per group of replicas */
    int rc = -1;
    char err[512];

    struct sim_exe *exe = m->entry->exe;
    size_t ni = sim_exe_input_count(exe), no = sim_exe_output_count(exe), nt = ni + no;
    size_t nm = sim_exe_ipu_count(exe);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__CompileReply r = IPUOF__COMPILE_REPLY__INIT;
    Ipuof__TensorInfo *ti = calloc(nt + 1, sizeof *ti);
    Ipuof__TensorInfo **tp = calloc(nt + 1, sizeof *tp);
    Ipuof__OutputMode *modes = calloc(no + 1, sizeof *modes);
    int64_t(*dims)[2 * SIM_MAX_RANK] = calloc(nt + 1, sizeof *dims);
    Ipuof__MemoryReport *mr = calloc(nm + 1, sizeof *mr);
    Ipuof__MemoryReport **mp = calloc(nm + 1, sizeof *mp);
    size_t nw = sim_exe_weight_count(exe);
    Ipuof__WeightInfo *wi = calloc(nw + 1, sizeof *wi);
    Ipuof__WeightInfo **wp = calloc(nw + 1, sizeof *wp);
    Ipuof__TensorInfo *wt = calloc(nw + 1, sizeof *wt);
    int64_t(*wd)[SIM_MAX_RANK] = calloc(nw + 1, sizeof *wd);

    if (!ti || !tp || !modes || !dims || !mr || !mp || !wi || !wp || !wt || !wd) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nt; i++) {
        struct sim_io_info io;
        if (i < ni)
            sim_exe_input_info(exe, i, &io);
        else
            sim_exe_output_info(exe, i - ni, &io);
        models_tensor_info(&ti[i], &io, dims[i], dims[i] + SIM_MAX_RANK,
                         i < ni ? NULL : &modes[i - ni]);
        if (ti[i].n_dims > 0)
            dims[i][0] /= i < ni ? P * G : P;
        ti[i].bytes /= i < ni ? P * G : P;
        tp[i] = &ti[i];
    }
    for (size_t i = 0; i < nm; i++) {
        struct sim_mem_report rep;
        sim_exe_memory(exe, i, &rep);
        ipuof__memory_report__init(&mr[i]);
        mr[i].ipu = m->first_ipu + rep.ipu;
        mr[i].replica = rep.replica;
        mr[i].weights_bytes = rep.weights;
        mr[i].activations_bytes = rep.activations;
        mr[i].code_bytes = rep.code;
        mr[i].total_bytes = rep.total;
        mr[i].capacity_bytes = c->srv->cfg.ipu_memory;
        mr[i].gradients_bytes = rep.gradients;
        mr[i].optimizer_bytes = rep.optimizer;
        mr[i].stash_bytes = rep.stash;
        mr[i].offchip_bytes = rep.offchip;
        mr[i].peak_not_always_live_bytes = rep.peak_not_always_live;
        mr[i].host_stream_bytes = i == 0 ? m->host : 0;
        mp[i] = &mr[i];
    }
    for (size_t i = 0; i < nw; i++) {
        struct sim_weight_info w;
        sim_exe_weight_info(exe, i, &w);
        ipuof__weight_info__init(&wi[i]);
        ipuof__tensor_info__init(&wt[i]);
        wt[i].name = (char *)w.name;
        wt[i].dtype = (Ipuof__DType)wiremap_to_wire(&wiremap_dtype, w.dtype,
                                                    IPUOF__DTYPE__DTYPE_UNDEFINED);
        for (int d = 0; d < w.rank; d++)
            wd[i][d] = w.dims[d];
        wt[i].n_dims = (size_t)w.rank;
        wt[i].dims = wd[i];
        wt[i].bytes = w.bytes;
        wi[i].tensor = &wt[i];
        wi[i].kind = (Ipuof__WeightKind)wiremap_to_wire(&wiremap_weight_kind, w.kind,
                                                        IPUOF__WEIGHT_KIND__WEIGHT_UNKNOWN);
        wp[i] = &wi[i];
    }
    r.model_id = m->id;
    r.cached = cached;
    r.n_inputs = ni;
    r.inputs = tp;
    r.n_outputs = no;
    r.outputs = tp + ni;
    r.n_memory = nm;
    r.memory = mp;
    r.compile_us = us;
    r.device_iterations = sim_exe_device_iterations(exe);
    r.replicas = sim_exe_replicas(exe) / P;
    r.micro_batch = sim_exe_micro_batch(exe);
    r.training = sim_exe_is_training(exe);
    r.gradient_accumulation = sim_exe_gradient_accumulation(exe);
    r.n_weights = nw;
    r.weights = wp;
    h.request_id = req_id;
    h.body_case = IPUOF__HEADER__BODY_COMPILE_REPLY;
    h.compile_reply = &r;
    if (reply_too_large(c, &h, &r, m->name, err, sizeof err)) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "compiler", "%s", err);
        goto out;
    }
    conn_send(c, &h, NULL, 0);
    rc = 0;
out:
    free(ti);
    free(tp);
    free(modes);
    free(dims);
    free(mr);
    free(mp);
    free(wi);
    free(wp);
    free(wt);
    free(wd);
    return rc;
}

/* The model ct made (ct->rc IPUOF_OK) on its job's partition, placed on its IPUs; or NULL with
 * ct->rc and ct->err set. */
static struct model *
compile_model(struct compile_task *ct)
{
    struct srv *s = ct->srv;
    struct model *m = calloc(1, sizeof *m);

    if (m == NULL) {
        cache_release(&s->cache, ct->entry);
        ct->rc = IPUOF_E_NOMEM;
        snprintf(ct->err.msg, sizeof ct->err.msg, "out of memory");
        return NULL;
    }
    m->id = ++s->next_model_id;
    snprintf(m->name, sizeof m->name, "%s", ct->name);
    m->entry = ct->entry;
    m->first_ipu = ct->first_ipu;
    m->proc0 = ct->proc0;
    m->nproc = ct->nproc;
    m->group = ct->group;
    m->group_orthogonal = ct->group_orthogonal;
    m->nipus = (unsigned)sim_exe_ipu_count(m->entry->exe);
    if (m->nipus > ct->part_count) {
        /* the compiler checks this (partition_ipus) */
        ct->rc = IPUOF_E_INTERNAL;
        snprintf(ct->err.msg, sizeof ct->err.msg, "model '%s' was placed on %u IPUs, but the "
                 "partition has %u", ct->name, m->nipus, ct->part_count);
        model_free(s, m);
        return NULL;
    }
    for (unsigned i = 0; i < m->nipus && i < CFG_MAX_IPUS; i++) {
        struct sim_mem_report rep;
        sim_exe_memory(m->entry->exe, i, &rep);
        m->mem[i] = rep.total;
        m->stash[i] = rep.stash;
        m->offchip[i] = rep.offchip;
    }
    m->host = m->entry->host_bytes;
    model_place(s, m);
    return m;
}

/* Loop thread: the compile finished (or was dropped by a stopping daemon before it
 * started). Answers the job's processes unless the job ended meanwhile (they had their
 * error then). */
static void
compile_done(struct work_item *it)
{
    struct compile_task *ct = (struct compile_task *)it;
    struct job *j = ct->job;
    struct model *m = NULL;

    if (ct->prog_ev != NULL) /* it went to a worker (see compile_start) */
        dev_set_busy(ct->srv->inv, ct->first_ipu, ct->part_count, 0);
    job_compile_end(j);
    if (job_ended(j)) {
        cache_release(&ct->srv->cache, ct->entry);
        goto out;
    }
    if (it->dropped) {
        ct->rc = IPUOF_E_SHUTDOWN;
        snprintf(ct->err.msg, sizeof ct->err.msg,
                 "the compile of '%s' was not started: ipuofd is stopping", ct->name);
    }
    if (ct->rc == IPUOF_OK)
        m = compile_model(ct);
    if (m == NULL)
        log_info("job '%s': compile of '%s' failed: %s", job_name(j), ct->name, ct->err.msg);
    job_compiled(j, ct->proc0, ct->nproc, m, ct->rc, ct->err.msg, ct->cached, ct->us);
out:
    job_unhold(j);
    compile_task_free(ct);
}

/* Hands ct to a worker for job j, held until compile_done. 0, or -1 when out of memory (ct
 * is then still the caller's). */
static int
compile_start(struct job *j, struct compile_task *ct)
{
    ct->item.run = compile_run;
    ct->item.done = compile_done;
    ct->prog_ev = event_new(ct->srv->base, -1, 0, on_progress_ev, ct);
    if (ct->prog_ev == NULL || work_submit(ct->srv->work, &ct->item) < 0)
        return -1;
    ct->job = j;
    job_compile_begin(j);
    dev_set_busy(ct->srv->inv, ct->first_ipu, ct->part_count, 1);
    return 0;
}

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
    struct model *src = models_find(c, src_id);
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
    ct->proc0 = c->proc_id; /* this process's own model */
    ct->nproc = 1;
    job_compile_here(c, req_id);
    ct->job = c->job;
    job_compile_begin(c->job);
    compile_done(&ct->item); /* replies, and frees ct */
    return rc == IPUOF_OK ? 0 : -1;
}

static int compile_begin(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                         uint32_t payload_len);

void
req_compile(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    /* A refused compile's remaining model chunks are dropped without a second answer. */
    if (compile_begin(c, req_id, h, payload_len) < 0)
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
    unsigned R = rq->replicas ? rq->replicas : 1;

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
    if (compile_request_check(c, req_id, rq, payload_len) < 0)
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
    ct->opts.replicas = R;
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
    ct->opts.progress = on_progress_cb;
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
        if (i < R && ct->remaining[i] < ct->opts.ipu_memory_bytes)
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
models_drop_upload(struct conn *c)
{
    compile_task_free(c->upload);
    c->upload = NULL;
}

int
models_refuse_upload(struct conn *c, int code, const char *why)
{
    if (c->upload == NULL)
        return 0;
    conn_send_error(c, c->upload->req_id, code, IPUOF_ERROR_RECOVERABLE,
                    IPUOF_RECOVERY_RETRY, "daemon", "the compile of '%s' was not served: %s",
                    c->upload->name, why);
    c->refused_upload = c->upload->req_id;
    models_drop_upload(c);
    return 1;
}

/* ---- for jobs of several processes (jobs.c) ------------------------------------------------ */

uint64_t
compile_task_req_id(const struct compile_task *ct)
{
    return ct->req_id;
}

void
compile_task_discard(struct compile_task *ct)
{
    compile_task_free(ct);
}

int
compile_task_submit(struct job *j, struct compile_task *ct, char *msg, size_t len)
{
    unsigned nproc = job_processes(j), R = ct->opts.replicas * nproc;
    char *key;

    if (R > ct->part_count) {
        snprintf(msg, len, "%u processes x %u replicas need %u IPUs, but partition '%s' has "
                 "%u; attach a partition of %u IPUs or lower the replication factor", nproc,
                 ct->opts.replicas, R, job_name(j), ct->part_count, dev_round_pow2(R));
        return IPUOF_E_INVAL;
    }
    ct->opts.replicas = R;
    ct->proc0 = 0;
    ct->nproc = nproc;
    for (unsigned i = 0; i < R; i++)
        if (ct->remaining[i] < ct->opts.ipu_memory_bytes)
            ct->opts.ipu_memory_bytes = ct->remaining[i];
    key = compile_options_key(ct);
    if (key == NULL) {
        snprintf(msg, len, "out of memory");
        return IPUOF_E_NOMEM;
    }
    free(ct->key);
    ct->key = key;
    if (compile_start(j, ct) < 0) {
        snprintf(msg, len, "out of memory");
        return IPUOF_E_NOMEM;
    }
    return IPUOF_OK;
}

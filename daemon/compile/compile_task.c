/*
 * compile_task.c — a compile on a worker thread, below the jobs: the task's life (freed
 * with compile_task_free), its progress, the worker's search of the cache or compile
 * (compile_task_run), the model it makes on the partition (compile_task_model) and the
 * compile reply (compile_reply_send). The job that waits for it is told through the
 * callbacks its caller gives compile_task_queue (jobs_compile.c): nothing here calls up.
 */
#include <event2/event.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "compile_int.h"
#include "conn.h"
#include "frame.h"
#include "ipuof/status.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"
#include "wiremap.h"

void
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
    free(ct->opt_names);
    if (ct->prog_ev)
        event_free(ct->prog_ev);
    free(ct->bytes);
    free(ct->key);
    free(ct);
}

void
compile_task_progress(int done, int total, void *ud)
{
    struct compile_task *ct = ud;

    atomic_store(&ct->prog_done, done);
    atomic_store(&ct->prog_total, total);
    event_active(ct->prog_ev, 0, 0);
}

/* Refuses (ct->rc) an executable whose arenas could take more host memory than
 * arena_memory leaves beside the cached executables' (the cache evicts unused ones first):
 * the daemon says so rather than let the kernel's OOM killer end it and every client. */
static void
arena_check(struct compile_task *ct, struct cache *k, const struct sim_exe *x)
{
    uint64_t need = sim_exe_host_arena_bytes(x), held, limit;
    int fits = cache_arena_room(k, need, &held, &limit);

    log_debug("model '%s': its arenas may take %" PRIu64 " bytes of host memory; the cached "
              "executables' take %" PRIu64 " of arena_memory's %" PRIu64, ct->name, need, held,
              limit);
    if (fits)
        return;
    ct->rc = IPUOF_E_TOO_LARGE;
    snprintf(ct->err.msg, sizeof ct->err.msg, "model '%s' needs up to %" PRIu64 " bytes of "
             "host memory for its IPUs' arenas (each pipeline micro-batch in flight holds "
             "its own), and the daemon's executables in use take %" PRIu64 " of the %" PRIu64
             " that arena_memory allows: ask for fewer micro-batches in flight (gradient "
             "accumulation, pipeline stages), use recomputation, free a model, or raise "
             "arena_memory ([devices] in the daemon's config file)", ct->name, need, held,
             limit);
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
        compile_task_progress(1, 1, ct);
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
    if (ct->rc == IPUOF_OK)
        arena_check(ct, k, e->exe);
    if (ct->rc != IPUOF_OK) {
        sim_exe_free(e->exe);
        sim_model_free(e->model);
        free(e);
        return;
    }
    e->bytes = ct->bytes;
    e->len = ct->len;
    snprintf(e->name, sizeof e->name, "%s", ct->name);
    e->key = ct->key;
    e->hash = cache_hash(e->bytes, e->len, e->key);
    /* a training executable's weights change as it trains; buffer updates change buffers;
     * random ops advance their generators */
    e->reusable = ct->loss == NULL && sim_buffer_update_count(e->model) == 0 &&
                  sim_random_op_count(e->model) == 0;
    ct->bytes = NULL;
    ct->key = NULL;
    cache_insert(k, e);
    ct->entry = e;
}

int
compile_task_queue(struct compile_task *ct, void (*done)(struct work_item *),
                   event_callback_fn on_progress)
{
    ct->item.run = compile_run;
    ct->item.done = done;
    ct->prog_ev = event_new(ct->srv->base, -1, 0, on_progress, ct);
    if (ct->prog_ev == NULL || work_submit(ct->srv->work, &ct->item) < 0)
        return -1;
    return 0;
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

/* The prediction of m's speed for the reply: pr points into *sp and the caller-freed
 * report strings *txt and *js; false when there is none or memory ran out (the reply then
 * goes without). */
static bool
prediction_fill(const struct model *m, Ipuof__Prediction *pr, struct sim_prediction *sp,
                char **txt, char **js)
{
    const struct sim_exe *exe = m->entry->exe;
    size_t len;

    *txt = *js = NULL;
    if (sim_exe_predict(exe, m->predict_replicas, sp) != 0 ||
        sim_prediction_format(sp, exe, 0, txt, &len) != 0 ||
        sim_prediction_format(sp, exe, 1, js, &len) != 0) {
        free(*txt);
        *txt = NULL;
        return false;
    }
    pr->samples_per_s = sp->samples_per_s;
    pr->step_seconds = sp->step_seconds;
    pr->samples_per_step = sp->samples_per_step;
    pr->replicas = sp->replicas;
    pr->ipu = sp->ipu;
    pr->parts = sp->part;
    pr->n_parts = SIM_PARTS;
    pr->pct_peak = sp->pct_peak;
    pr->op_class = sp->op_class;
    pr->layer = sp->layer;
    pr->report = *txt;
    pr->report_json = *js;
    pr->ipu_type = (char *)sim_ipu_type_name(sim_exe_ipu_type(exe));
    pr->clock_hz = sim_exe_clock_hz(exe);
    return true;
}

/* The inputs' and outputs' descriptions of exe into ti (ni inputs, then the outputs;
 * tp pointing at each, modes the outputs' modes, dims their storage): a process of P sees
 * its own share of the replicas, an input also one per group of G replicas. */
static void
fill_tensor_infos(const struct sim_exe *exe, unsigned P, unsigned G, Ipuof__TensorInfo *ti,
                  Ipuof__TensorInfo **tp, Ipuof__OutputMode *modes,
                  int64_t (*dims)[2 * SIM_MAX_RANK])
{
    size_t ni = sim_exe_input_count(exe), nt = ni + sim_exe_output_count(exe);

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
}

/* exe's memory per IPU into mr (mp pointing at each), its IPUs numbered from m's first;
 * the host stream bytes on the first. */
static void
fill_memory_reports(const struct conn *c, const struct model *m, const struct sim_exe *exe,
                    Ipuof__MemoryReport *mr, Ipuof__MemoryReport **mp)
{
    size_t nm = sim_exe_ipu_count(exe);

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
}

/* exe's weights into wi (wp pointing at each), their tensors in wt and dims in wd. */
static void
fill_weight_infos(const struct sim_exe *exe, Ipuof__WeightInfo *wi, Ipuof__WeightInfo **wp,
                  Ipuof__TensorInfo *wt, int64_t (*wd)[SIM_MAX_RANK])
{
    size_t nw = sim_exe_weight_count(exe);

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
    Ipuof__Prediction pr = IPUOF__PREDICTION__INIT;
    struct sim_prediction sp;
    char *ptxt = NULL, *pjs = NULL;
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
    fill_tensor_infos(exe, P, G, ti, tp, modes, dims);
    fill_memory_reports(c, m, exe, mr, mp);
    fill_weight_infos(exe, wi, wp, wt, wd);
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
    if (prediction_fill(m, &pr, &sp, &ptxt, &pjs))
        r.prediction = &pr;
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
    free(ptxt);
    free(pjs);
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
struct model *
compile_task_model(struct compile_task *ct)
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
    m->predict_replicas = ct->predict_replicas;
    m->group_orthogonal = ct->group_orthogonal;
    m->nipus = (unsigned)sim_exe_ipu_count(m->entry->exe);
    if (m->nipus > ct->part_count) {
        /* the compiler checks this (partition_ipus) */
        ct->rc = IPUOF_E_INTERNAL;
        snprintf(ct->err.msg, sizeof ct->err.msg, "model '%s' was placed on %u IPUs, but the "
                 "partition has %u", ct->name, m->nipus, ct->part_count);
        model_free(s->inv, &s->cache, m);
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
    model_place(s->inv, m);
    return m;
}

/*
 * compile.c — compiling a model on the attached partition: the upload in chunks that fit
 * the daemon's frame payload limit, progress events, and the CompileReply copied into a
 * handle the caller owns.
 *
 * A compile is one exchange (xchg.c) of many frames: CompileRequest with the first part of
 * the model, ModelChunk frames with the rest, then CompileProgress events and a CompileReply
 * or an Error. The request timeout bounds the gap between two frames, not the compile, so a
 * long compile that reports progress never times out. Between chunks the socket is polled
 * without waiting, so an upload the daemon rejects (model too large, partition reset) stops
 * at the next chunk. The protobuf reply is freed before the call returns: the handle keeps
 * plain copies (model.c frees them and answers questions about them).
 *
 * Training compiles and inference models made from a training model (train.c) go through
 * the same exchange, ipuof_compile_request(), with the CompileRequest's training fields or
 * from_model_id set (the latter with no model bytes at all).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

#define DEFAULT_MODEL_NAME "model"

/* IPUOF_OK when c is connected and holds a partition; else why not, with a sentence (a
 * notice that took the partition away is reported once). */
static int
partition_ready(ipuof_client *c)
{
    int poll_rc;
    int rc;

    rc = ipuof_require_connection(c);
    if (rc != IPUOF_OK)
        return rc;
    poll_rc = ipuof_conn_poll_notices(c); /* a partition reset while idle */
    rc = ipuof_take_notice(c);
    if (rc != IPUOF_OK)
        return rc;
    if (poll_rc != IPUOF_OK)
        return poll_rc;
    if (!c->attached)
        return ipuof_err_set(c, IPUOF_E_NOT_ATTACHED, "client",
                             "this connection holds no partition; attach one with ipuof_attach() "
                             "before compiling a model");
    return IPUOF_OK;
}

/* ---- the request -------------------------------------------------------------------- */

/* The CompileRequest's output mode list: *modes and *ptrs are caller-owned (free()), their
 * names borrowed from o. */
static int
build_modes(ipuof_client *c, const struct ipuof_model_opts *o, Ipuof__OutputMode **modes,
            Ipuof__OutputMode ***ptrs)
{
    size_t n = o->n_output_modes;

    *modes = calloc(n != 0 ? n : 1, sizeof **modes);
    *ptrs = calloc(n != 0 ? n : 1, sizeof **ptrs);
    if (*modes == NULL || *ptrs == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory for %zu output modes",
                             n);
    for (size_t i = 0; i < n; i++) {
        ipuof__output_mode__init(&(*modes)[i]);
        (*modes)[i].name = (char *)o->output_modes[i].name;
        (*modes)[i].kind = (Ipuof__OutputKind)ipuof_wm_to_wire(
            &ipuof_wm_output_kind, o->output_modes[i].kind, IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT);
        (*modes)[i].n = o->output_modes[i].n;
        (*ptrs)[i] = &(*modes)[i];
    }
    return IPUOF_OK;
}

/* The CompileRequest's constant inputs: *cis and *ptrs are caller-owned (free()); names, dims
 * and data are borrowed from o (a handle's, so checked). */
static int
build_consts(ipuof_client *c, const struct ipuof_model_opts *o, Ipuof__ConstantInput **cis,
             Ipuof__ConstantInput ***ptrs)
{
    size_t n = o->n_constant_inputs;

    *cis = calloc(n != 0 ? n : 1, sizeof **cis);
    *ptrs = calloc(n != 0 ? n : 1, sizeof **ptrs);
    if (*cis == NULL || *ptrs == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory for %zu constant inputs",
                             n);
    for (size_t i = 0; i < n; i++) {
        const struct ipuof_tensor *t = &o->constant_inputs[i]; /* checked by its setter */

        ipuof__constant_input__init(&(*cis)[i]);
        (*cis)[i].name = (char *)t->name;
        (*cis)[i].dtype = (Ipuof__DType)ipuof_wm_to_wire(&ipuof_wm_dtype, t->dtype,
                                                         IPUOF__DTYPE__DTYPE_UNDEFINED);
        (*cis)[i].n_dims = (size_t)t->rank;
        (*cis)[i].dims = (int64_t *)t->dims;
        (*cis)[i].data.data = (uint8_t *)t->data;
        (*cis)[i].data.len = t->bytes;
        (*ptrs)[i] = &(*cis)[i];
    }
    return IPUOF_OK;
}

/* Hands a CompileProgress to the caller's callback, if any. */
static void
report_progress(const struct ipuof_model_opts *o, const Ipuof__CompileProgress *p)
{
    if (o->progress == NULL || p == NULL)
        return;
    o->progress(p->done > INT_MAX ? INT_MAX : (int)p->done,
                p->total > INT_MAX ? INT_MAX : (int)p->total, o->progress_user);
}

/* Reads what the daemon sent about x while the model was uploading, without waiting:
 * progress goes to the callback, an Error ends the upload. */
static int
check_early(struct ipuof_xchg *x, const struct ipuof_model_opts *o)
{
    for (;;) {
        Ipuof__Header *h = NULL;
        int rc = ipuof_xchg_recv(x, NULL, 1, &h);

        if (rc != IPUOF_OK || h == NULL)
            return rc;
        if (h->body_case != IPUOF__HEADER__BODY_COMPILE_PROGRESS)
            rc = ipuof_xchg_unexpected(x, h);
        else
            report_progress(o, h->compile_progress);
        ipuof_frame_header_free(h);
        if (rc != IPUOF_OK)
            return rc;
    }
}

/* Model bytes a frame with a protobuf header of hdr_len bytes may carry: frame head, header
 * and payload together stay within the daemon's max_payload_bytes. */
static size_t
frame_room(const ipuof_client *c, size_t hdr_len)
{
    uint64_t max = c->peer_max_payload != 0 ? c->peer_max_payload : IPUOF_DEFAULT_MAX_PAYLOAD;

    if (max > UINT32_MAX)
        max = UINT32_MAX;
    if (max <= IPUOF_FRAME_HEAD_LEN + (uint64_t)hdr_len)
        return 0;
    return (size_t)(max - IPUOF_FRAME_HEAD_LEN - hdr_len);
}

/* Sends req with the first part of model[0..len) (borrowed), then ModelChunk frames with
 * the rest. */
static int
upload(struct ipuof_xchg *x, const Ipuof__Header *req, const uint8_t *model, size_t len,
       const struct ipuof_model_opts *o)
{
    ipuof_client *c = x->io.c;
    Ipuof__Header ch = IPUOF__HEADER__INIT;
    Ipuof__ModelChunk mc = IPUOF__MODEL_CHUNK__INIT;
    size_t off = 0;
    int rc;

    ch.request_id = x->id;
    ch.body_case = IPUOF__HEADER__BODY_MODEL_CHUNK;
    ch.model_chunk = &mc;
    for (int first = 1; first || off < len; first = 0) {
        const Ipuof__Header *h = first ? req : &ch;
        struct iovec piece;
        size_t hdr_len;
        size_t room;

        if (!first) {
            rc = check_early(x, o);
            if (rc != IPUOF_OK)
                return rc;
            mc.offset = off;
        }
        hdr_len = ipuof__header__get_packed_size(h);
        room = frame_room(c, hdr_len);
        if (room == 0) {
            x->broken = x->frames_sent > 0;
            return ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                                 "a %s header of %zu bytes leaves no room for model bytes under "
                                 "the frame payload limit of ipuofd at %s (%llu bytes); send "
                                 "smaller constant inputs or raise max_payload_bytes",
                                 ipuof_frame_body_name(h), hdr_len, c->address,
                                 (unsigned long long)c->peer_max_payload);
        }
        piece.iov_base = (void *)(model + off);
        piece.iov_len = len - off < room ? len - off : room;
        rc = ipuof_xchg_send(x, h, &piece, 1);
        if (rc != IPUOF_OK)
            return rc;
        ipuof_io_rearm(&x->io);
        off += piece.iov_len;
    }
    return IPUOF_OK;
}

/* Reads progress events until the CompileReply (*out, caller-owned) or an Error. */
static int
await_reply(struct ipuof_xchg *x, const struct ipuof_model_opts *o, Ipuof__Header **out)
{
    *out = NULL;
    for (;;) {
        Ipuof__Header *h = NULL;
        int rc = ipuof_xchg_recv(x, NULL, 0, &h);

        if (rc != IPUOF_OK)
            return rc;
        if (h->body_case == IPUOF__HEADER__BODY_COMPILE_REPLY) {
            *out = h;
            return IPUOF_OK;
        }
        if (h->body_case == IPUOF__HEADER__BODY_COMPILE_PROGRESS) {
            report_progress(o, h->compile_progress);
            ipuof_io_rearm(&x->io);
            rc = IPUOF_OK;
        } else {
            rc = ipuof_xchg_unexpected(x, h);
        }
        ipuof_frame_header_free(h);
        if (rc != IPUOF_OK)
            return rc;
    }
}

/* ---- the reply ------------------------------------------------------------------------ */

/* n zeroed entries of size bytes (at least one entry, so that NULL means out of memory);
 * caller-owned. */
static void *
zalloc(size_t n, size_t size)
{
    return calloc(n != 0 ? n : 1, size);
}

/* Gives m its run state: the per-call arrays, and the output buffers when the outputs fit
 * one reply (a run that could not receive them fails before sending anything). */
static int
alloc_run_state(ipuof_client *c, ipuof_model *m)
{
    uint64_t total = 0;

    m->order = zalloc(m->n_inputs, sizeof *m->order);
    m->req_info = zalloc(m->n_inputs, sizeof *m->req_info);
    m->req_ptrs = zalloc(m->n_inputs, sizeof *m->req_ptrs);
    m->in_iov = zalloc(m->n_inputs, sizeof *m->in_iov);
    m->out = zalloc(m->n_outputs, sizeof *m->out);
    m->out_iov = zalloc(m->n_outputs, sizeof *m->out_iov);
    if (m->order == NULL || m->req_info == NULL || m->req_ptrs == NULL || m->in_iov == NULL ||
        m->out == NULL || m->out_iov == NULL)
        goto nomem;
    for (size_t i = 0; i < m->n_outputs; i++)
        total += m->outputs[i].bytes;
    if (total > c->lim.max_payload)
        return IPUOF_OK;
    for (size_t i = 0; i < m->n_outputs; i++) {
        m->out[i].cap = (size_t)m->outputs[i].bytes;
        m->out[i].buf = malloc(m->out[i].cap != 0 ? m->out[i].cap : 1);
        if (m->out[i].buf == NULL)
            goto nomem;
    }
    return IPUOF_OK;
nomem:
    return ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                         "out of memory for the run buffers of a model with %zu inputs and "
                         "%zu outputs",
                         m->n_inputs, m->n_outputs);
}

/* Builds a caller-owned model handle from cr (only read); name is copied. */
static int
model_from_reply(ipuof_client *c, const Ipuof__CompileReply *cr, const char *name,
                 ipuof_model **out)
{
    ipuof_model *m = calloc(1, sizeof *m);
    int rc = IPUOF_E_NOMEM;

    *out = NULL;
    if (m != NULL) {
        m->name = strdup(name);
        m->inputs = zalloc(cr->n_inputs, sizeof *m->inputs);
        m->outputs = zalloc(cr->n_outputs, sizeof *m->outputs);
        m->memory = zalloc(cr->n_memory, sizeof *m->memory);
    }
    if (m == NULL || m->name == NULL || m->inputs == NULL || m->outputs == NULL ||
        m->memory == NULL) {
        ipuof_err_set(c, rc, "client", "out of memory for a compiled model");
        goto fail;
    }
    m->c = c;
    m->conn_gen = c->conn_gen;
    m->attach_gen = c->attach_gen;
    m->id = cr->model_id;
    m->cached = cr->cached;
    m->compile_us = cr->cached ? 0 : cr->compile_us;
    m->device_iterations = cr->device_iterations != 0 ? cr->device_iterations : 1;
    m->replicas = cr->replicas != 0 ? cr->replicas : 1;
    m->micro_batch = cr->micro_batch;
    m->n_inputs = cr->n_inputs;
    m->n_outputs = cr->n_outputs;
    m->n_memory = cr->n_memory;
    for (size_t i = 0; i < cr->n_inputs; i++) {
        rc = ipuof_tinfo_from_wire(c, &m->inputs[i], cr->inputs[i], "input", i);
        if (rc != IPUOF_OK)
            goto fail;
    }
    for (size_t i = 0; i < cr->n_outputs; i++) {
        rc = ipuof_tinfo_from_wire(c, &m->outputs[i], cr->outputs[i], "output", i);
        if (rc != IPUOF_OK)
            goto fail;
    }
    for (size_t i = 0; i < cr->n_memory; i++) {
        const Ipuof__MemoryReport *r = cr->memory[i];

        m->host_bytes += r->host_stream_bytes;

        m->memory[i] = (struct ipuof_mem){r->ipu, r->replica, r->weights_bytes,
                                          r->activations_bytes, r->code_bytes, r->total_bytes,
                                          r->capacity_bytes, r->gradients_bytes,
                                          r->optimizer_bytes, r->stash_bytes, r->offchip_bytes,
                                          r->peak_not_always_live_bytes};
    }
    if (cr->prediction != NULL) {
        const Ipuof__Prediction *p = cr->prediction;
        m->has_prediction = 1;
        m->pred_samples_per_s = p->samples_per_s;
        m->pred_step_seconds = p->step_seconds;
        for (size_t k = 0; k < 5 && k < p->n_parts; k++)
            m->pred_parts[k] = p->parts[k];
        m->pred_report = strdup(p->report != NULL ? p->report : "");
        m->pred_json = strdup(p->report_json != NULL ? p->report_json : "{}");
        if (m->pred_report == NULL || m->pred_json == NULL) {
            rc = IPUOF_E_NOMEM;
            ipuof_err_set(c, rc, "client", "out of memory for a compiled model");
            goto fail;
        }
    }
    rc = ipuof_model_take_training(c, m, cr);
    if (rc == IPUOF_OK)
        rc = alloc_run_state(c, m);
    if (rc != IPUOF_OK)
        goto fail;
    *out = m;
    return IPUOF_OK;
fail:
    if (m != NULL)
        ipuof_model_destroy(m);
    return rc;
}

/* Copies the fields of extra (only read) that a plain compile leaves unset into cr; the
 * pointers stay borrowed from extra. */
static void
add_extra(Ipuof__CompileRequest *cr, const Ipuof__CompileRequest *extra)
{
    if (extra == NULL)
        return;
    cr->loss = extra->loss;
    cr->optimizer = extra->optimizer;
    cr->gradient_accumulation = extra->gradient_accumulation;
    cr->accumulation_reduction = extra->accumulation_reduction;
    cr->seed = extra->seed;
    cr->n_frozen_weights = extra->n_frozen_weights;
    cr->frozen_weights = extra->frozen_weights;
    cr->from_model_id = extra->from_model_id;
}

int
ipuof_compile_request(ipuof_client *c, const void *onnx, size_t len,
                      const struct ipuof_model_opts *opts, const char *name,
                      const Ipuof__CompileRequest *extra, ipuof_model **out)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__OutputMode dm = IPUOF__OUTPUT_MODE__INIT;
    Ipuof__OutputMode *modes = NULL;
    Ipuof__OutputMode **mode_ptrs = NULL;
    Ipuof__ConstantInput *consts = NULL;
    Ipuof__ConstantInput **const_ptrs = NULL;
    Ipuof__Block *blocks = NULL;
    Ipuof__Block **block_ptrs = NULL;
    char *trace_dir = NULL;
    Ipuof__Header *reply = NULL;
    ipuof_model *m = NULL;
    struct ipuof_xchg x;
    int begun = 0;
    int rc;

    *out = NULL;
    if (name == NULL)
        name = opts->name != NULL ? opts->name : DEFAULT_MODEL_NAME;
    rc = partition_ready(c);
    if (rc == IPUOF_OK)
        rc = build_modes(c, opts, &modes, &mode_ptrs);
    if (rc == IPUOF_OK)
        rc = build_consts(c, opts, &consts, &const_ptrs);
    if (rc == IPUOF_OK)
        rc = ipuof_placement_build(c, opts, &cr, &blocks, &block_ptrs, &trace_dir);
    if (rc != IPUOF_OK)
        goto out;
    cr.model_bytes = len;
    cr.name = (char *)name;
    cr.device_iterations = opts->device_iterations; /* >= 1: the handle's setters say so */
    cr.replicas = opts->replicas;
    cr.micro_batch = opts->micro_batch;
    cr.input_group_size = opts->input_group_size;
    cr.num_io_tiles = c->clock_io_tiles;
    cr.synthetic_data = c->clock_synthetic != 0;
    cr.available_memory_proportion = (float)c->clock_amp;
    cr.predict_replicas = c->clock_predict_replicas;
    cr.input_group_type = (Ipuof__InputGroupType)ipuof_wm_to_wire(
        &ipuof_wm_group, opts->input_group_type, IPUOF__INPUT_GROUP_TYPE__INPUT_GROUP_NONE);
    dm.kind = (Ipuof__OutputKind)ipuof_wm_to_wire(&ipuof_wm_output_kind,
                                                  opts->default_output_kind,
                                                  IPUOF__OUTPUT_KIND__OUTPUT_DEFAULT);
    dm.n = opts->default_output_n;
    cr.default_mode = &dm;
    cr.n_output_modes = opts->n_output_modes;
    cr.output_modes = mode_ptrs;
    cr.no_cache = opts->no_cache != 0;
    cr.n_constant_inputs = opts->n_constant_inputs;
    cr.constant_inputs = const_ptrs;
    add_extra(&cr, extra);
    req.body_case = IPUOF__HEADER__BODY_COMPILE;
    req.compile = &cr;
    rc = ipuof_xchg_begin(c, &x, &req, c->request_ms);
    begun = 1;
    if (rc == IPUOF_OK)
        rc = upload(&x, &req, onnx, len, opts);
    if (rc == IPUOF_OK)
        rc = await_reply(&x, opts, &reply);
    if (rc == IPUOF_OK)
        rc = model_from_reply(c, reply->compile_reply, cr.name, &m);
    if (rc == IPUOF_OK && trace_dir != NULL) {
        rc = ipuof_trace_path_set(m, trace_dir);
        if (rc != IPUOF_OK) {
            ipuof_model_destroy(m);
            m = NULL;
        }
    }
out:
    if (begun && rc != IPUOF_OK && !x.broken && x.frames_sent > 1)
        c->abandoned_id = x.id; /* chunks sent after the daemon refused get an Error each */
    if (begun)
        rc = ipuof_xchg_end(&x, rc);
    if (rc != IPUOF_OK && reply != NULL)
        ipuof_model_forget(c, reply->compile_reply->model_id); /* compiled, but unusable here */
    if (rc == IPUOF_OK)
        *out = m;
    ipuof_frame_header_free(reply);
    free(modes);
    free(mode_ptrs);
    free(consts);
    free(const_ptrs);
    free(blocks);
    free(block_ptrs);
    free(trace_dir);
    return ipuof_model_settle(c, rc);
}

int
ipuof_compile_bytes_check(ipuof_client *c, const char *fn, const void *onnx, size_t len,
                          ipuof_model **out)
{
    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (out == NULL || onnx == NULL || len == 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "%s() needs the model's bytes (not %s) and a place for the model "
                             "handle",
                             fn, onnx == NULL ? "NULL" : "0 bytes");
    return IPUOF_OK;
}

int
ipuof_compile_file_check(ipuof_client *c, const char *fn, const char *path,
                         ipuof_model **out)
{
    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (path == NULL || out == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "%s() needs a file name and a place for the model handle", fn);
    return IPUOF_OK;
}

int
ipuof_compile_file(ipuof_client *c, const char *path, const struct ipuof_model_opts *opts,
                   const Ipuof__CompileRequest *extra, ipuof_model **out)
{
    char name[IPUOF_MODEL_NAME_MAX];
    void *buf = NULL;
    size_t len = 0;
    int rc;

    rc = ipuof_model_file_read(c, path, &buf, &len, name, sizeof name);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_request(c, buf, len, opts,
                                   opts != NULL && opts->name != NULL ? opts->name : name,
                                   extra, out);
    free(buf);
    /* The daemon only saw bytes: a refusal of the bytes as a whole names the file they came
     * from, so that a user who gave the wrong file sees which. */
    if (rc == IPUOF_E_INVAL && strncmp(c->err.msg, "the bytes are not", 17) == 0) {
        char msg[sizeof c->err.msg];

        memcpy(msg, c->err.msg, sizeof msg);
        if (snprintf(c->err.msg, sizeof c->err.msg, "%s is not an ONNX model: %s", path, msg) >=
            (int)sizeof c->err.msg)
            c->err.msg[sizeof c->err.msg - 1] = '\0'; /* a long path: the end is cut */
    }
    return rc;
}

/* The compile of h's options (training when h->t.loss is set): of onnx[0..len), or of the
 * file at path when path is not NULL. */
static int
compile_opts_run(ipuof_client *c, const void *onnx, size_t len, const char *path,
                 const ipuof_compile_opts *h, ipuof_model **out)
{
    Ipuof__CompileRequest extra;
    struct ipuof_opt_wire opt;
    const Ipuof__CompileRequest *x = &extra;

    if (h->t.loss != NULL) {
        ipuof_training_fields(&h->t, &h->half, &extra, &opt);
    } else { /* inference: the seed of its random ops (RandomUniform, ...), nothing else */
        ipuof__compile_request__init(&extra);
        extra.seed = h->t.seed;
    }
    if (path != NULL)
        return ipuof_compile_file(c, path, &h->mo, x, out);
    return ipuof_compile_request(c, onnx, len, &h->mo, NULL, x, out);
}

int
ipuof_compile_structs(ipuof_client *c, const void *onnx, size_t len, const char *path,
                      const struct ipuof_model_opts *opts, const struct ipuof_training_opts *t,
                      ipuof_model **out)
{
    ipuof_compile_opts *h = NULL;
    int rc = ipuof_compile_opts_from_struct(c, opts, t, &h);

    if (rc == IPUOF_OK)
        rc = compile_opts_run(c, onnx, len, path, h, out);
    ipuof_compile_opts_free(h);
    return rc;
}

/* h, or a handle of defaults in *own (caller-owned) when h is NULL. */
static int
opts_or_defaults(ipuof_client *c, const ipuof_compile_opts *h, const ipuof_compile_opts **use,
                 ipuof_compile_opts **own)
{
    *own = NULL;
    *use = h;
    if (h != NULL)
        return IPUOF_OK;
    *own = ipuof_compile_opts_new();
    *use = *own;
    return *own != NULL ? IPUOF_OK
                        : ipuof_err_set(c, IPUOF_E_NOMEM, "client",
                                        "out of memory for compile options");
}

int
ipuof_model_compile_with(ipuof_client *c, const void *onnx, size_t len,
                         const ipuof_compile_opts *opts, ipuof_model **out)
{
    const ipuof_compile_opts *use;
    ipuof_compile_opts *own = NULL;
    int rc = ipuof_compile_bytes_check(c, "ipuof_model_compile_with", onnx, len, out);

    if (rc == IPUOF_OK)
        rc = opts_or_defaults(c, opts, &use, &own);
    if (rc == IPUOF_OK)
        rc = compile_opts_run(c, onnx, len, NULL, use, out);
    ipuof_compile_opts_free(own);
    return rc;
}

int
ipuof_model_compile_file_with(ipuof_client *c, const char *path, const ipuof_compile_opts *opts,
                              ipuof_model **out)
{
    const ipuof_compile_opts *use;
    ipuof_compile_opts *own = NULL;
    int rc = ipuof_compile_file_check(c, "ipuof_model_compile_file_with", path, out);

    if (rc == IPUOF_OK)
        rc = opts_or_defaults(c, opts, &use, &own);
    if (rc == IPUOF_OK)
        rc = compile_opts_run(c, NULL, 0, path, use, out);
    ipuof_compile_opts_free(own);
    return rc;
}

/* The struct-based calls: their options through the handle's setters (compile_opts.c). */
int
ipuof_model_compile(ipuof_client *c, const void *onnx, size_t len,
                    const struct ipuof_model_opts *opts, ipuof_model **out)
{
    int rc = ipuof_compile_bytes_check(c, "ipuof_model_compile", onnx, len, out);

    if (rc != IPUOF_OK)
        return rc;
    return ipuof_compile_structs(c, onnx, len, NULL, opts, NULL, out);
}

int
ipuof_model_compile_file(ipuof_client *c, const char *path,
                         const struct ipuof_model_opts *opts, ipuof_model **out)
{
    int rc = ipuof_compile_file_check(c, "ipuof_model_compile_file", path, out);

    if (rc != IPUOF_OK)
        return rc;
    return ipuof_compile_structs(c, NULL, 0, path, opts, NULL, out);
}

int
ipuof_client_set_clock_options(ipuof_client *c, unsigned num_io_tiles, int synthetic_data,
                               double available_memory_proportion, unsigned predict_replicas)
{
    if (c == NULL)
        return IPUOF_E_INVAL;
    if (num_io_tiles != 0 && (num_io_tiles % 2 != 0 || num_io_tiles < 32 || num_io_tiles > 192))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "num_io_tiles %u: give 0 (none) or "
                             "an even number from 32 to 192", num_io_tiles);
    if (!(available_memory_proportion >= 0 && available_memory_proportion <= 1))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "available_memory_proportion %g: "
                             "give a proportion in (0, 1], or 0 for 0.6",
                             available_memory_proportion);
    if (predict_replicas > 65536)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "predict_replicas %u: at most 65536 "
                             "(0: the compile's replicas)", predict_replicas);
    c->clock_io_tiles = num_io_tiles;
    c->clock_synthetic = synthetic_data != 0;
    c->clock_amp = available_memory_proportion;
    c->clock_predict_replicas = predict_replicas;
    return IPUOF_OK;
}

int
ipuof_model_prediction(const ipuof_model *m, double *samples_per_s, double *step_seconds,
                       double *parts)
{
    if (m == NULL)
        return IPUOF_E_INVAL;
    if (!m->has_prediction)
        return ipuof_err_set(m->c, IPUOF_E_STATE, "client", "the daemon sent no prediction "
                             "for model '%s' (a daemon older than the prediction)", m->name);
    if (samples_per_s != NULL)
        *samples_per_s = m->pred_samples_per_s;
    if (step_seconds != NULL)
        *step_seconds = m->pred_step_seconds;
    if (parts != NULL)
        memcpy(parts, m->pred_parts, sizeof(m->pred_parts));
    return IPUOF_OK;
}

const char *
ipuof_model_prediction_report(const ipuof_model *m, int json)
{
    if (m == NULL || !m->has_prediction)
        return NULL;
    return json ? m->pred_json : m->pred_report;
}

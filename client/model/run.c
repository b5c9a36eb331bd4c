/*
 * run.c — one run call of a compiled model, and its outputs.
 *
 * The caller's tensors are matched to the model's inputs and checked here (count, dtype,
 * shape, bytes, the frame payload limit) before anything is sent, so a mistake costs no
 * round trip and its sentence names the input and both shapes. The RunRequest goes out with
 * the inputs' bytes sent straight from the caller's buffers (one sendmsg over all of them);
 * it asks the daemon to stream the outputs (RunRequest.stream_outputs; IPUOF_STREAM_OUTPUTS=0
 * in the environment turns that off), so their bytes come in RunOutputs frames while later
 * steps compute, then the RunReply with the time and cost; a daemon that does not stream
 * answers with one RunReply carrying them all. Either way the bytes are read straight into
 * per-model output buffers (outputs.c places them), allocated at compile time and grown
 * only when a frame announces more. A run allocates nothing else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

/* 1 unless IPUOF_STREAM_OUTPUTS is "0" (the outputs then come in the RunReply alone, as
 * from a daemon that does not stream: for comparing and measuring). */
static int
stream_wanted(void)
{
    const char *v = getenv("IPUOF_STREAM_OUTPUTS");

    return v == NULL || strcmp(v, "0") != 0;
}

/* Checks what one call sends and receives against the frame payload limits of both sides;
 * in_bytes is the inputs' total. */
static int
check_sizes(ipuof_model *m, uint64_t in_bytes)
{
    ipuof_client *c = m->c;
    uint64_t max_in = c->peer_max_payload != 0 ? c->peer_max_payload : UINT32_MAX;
    uint64_t out_bytes = 0;

    if (max_in > UINT32_MAX)
        max_in = UINT32_MAX;
    if (in_bytes > max_in)
        return ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                             "the inputs of one call of model '%s' take %llu bytes but ipuofd "
                             "at %s accepts at most %llu per frame (its max_payload_bytes); "
                             "run fewer device iterations per call or raise max_payload_bytes",
                             m->name, (unsigned long long)in_bytes, c->address,
                             (unsigned long long)max_in);
    for (size_t i = 0; i < m->n_outputs; i++)
        out_bytes += m->outputs[i].bytes;
    if (out_bytes > c->lim.max_payload)
        return ipuof_err_set(c, IPUOF_E_TOO_LARGE, "client",
                             "the outputs of one call of model '%s' take %llu bytes but this "
                             "library accepts at most %u per reply; run fewer device "
                             "iterations per call or return fewer outputs (output modes "
                             "final, sum or every:N)",
                             m->name, (unsigned long long)out_bytes, c->lim.max_payload);
    return IPUOF_OK;
}

/* Fills the RunRequest's input descriptions and the payload's pieces from m->order (the
 * caller's tensors, borrowed for the call) and returns the payload's length. */
static uint64_t
describe_inputs(ipuof_model *m)
{
    uint64_t total = 0;

    for (size_t i = 0; i < m->n_inputs; i++) {
        const struct ipuof_tensor *t = m->order[i];
        Ipuof__TensorInfo *ti = &m->req_info[i];

        ipuof__tensor_info__init(ti);
        ti->name = m->inputs[i].name;
        ti->dtype = (Ipuof__DType)ipuof_wm_to_wire(&ipuof_wm_dtype, t->dtype,
                                                   IPUOF__DTYPE__DTYPE_UNDEFINED);
        ti->n_dims = (size_t)t->rank;
        ti->dims = (int64_t *)t->dims;
        ti->bytes = t->bytes;
        m->req_ptrs[i] = ti;
        m->in_iov[i].iov_base = (void *)t->data;
        m->in_iov[i].iov_len = t->bytes;
        total += t->bytes;
    }
    return total;
}

/* Profiling asked by POPLAR_ENGINE_OPTIONS: writes the run's trace to m->trace_path. The
 * outputs stay available when this fails; the error says the run itself completed. */
static int
auto_report(ipuof_model *m)
{
    int rc = ipuof_model_write_trace(m, m->trace_path);
    char why[512];

    if (rc != IPUOF_OK) {
        snprintf(why, sizeof why, "%s", ipuof_client_errmsg(m->c));
        ipuof_err_set(m->c, rc, "client",
                      "the run of model '%s' completed, but its trace could not be written to "
                      "'%s' (POPLAR_ENGINE_OPTIONS asks for it): %s", m->name, m->trace_path,
                      why);
    }
    return rc;
}

int
ipuof_model_run(ipuof_model *m, const struct ipuof_tensor *inputs, size_t n)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__RunRequest rr = IPUOF__RUN_REQUEST__INIT;
    struct ipuof_sink sink;
    Ipuof__Header *h = NULL;
    struct ipuof_xchg x;
    ipuof_client *c;
    int begun = 0;
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    c = m->c;
    ipuof_err_clear(c);
    m->have_outputs = 0;
    rc = ipuof_model_usable(m);
    if (rc == IPUOF_OK)
        rc = ipuof_inputs_match(m, inputs, n);
    for (size_t i = 0; rc == IPUOF_OK && i < m->n_inputs; i++)
        rc = ipuof_input_check(m, i, m->order[i]);
    if (rc == IPUOF_OK)
        rc = check_sizes(m, describe_inputs(m));
    if (rc != IPUOF_OK)
        goto out;
    rr.model_id = m->id;
    rr.n_inputs = m->n_inputs;
    rr.inputs = m->req_ptrs;
    req.body_case = IPUOF__HEADER__BODY_RUN;
    req.run = &rr;
    rr.stream_outputs = stream_wanted();
    sink.place = ipuof_outputs_place;
    sink.arg = m;
    ipuof_outputs_reset(m);
    rc = ipuof_xchg_begin(c, &x, &req, c->request_ms);
    begun = 1;
    if (rc == IPUOF_OK)
        rc = ipuof_xchg_send(&x, &req, m->in_iov, (int)m->n_inputs);
    if (rc != IPUOF_OK)
        goto out;
    ipuof_io_rearm(&x.io); /* the timeout bounds the wait for the reply, not the upload */
    for (;;) {
        rc = ipuof_xchg_recv(&x, &sink, 0, &h);
        if (m->out_refused)
            x.broken = 1; /* a RunOutputs frame was refused: the rest is not in step */
        if (rc != IPUOF_OK || h->body_case != IPUOF__HEADER__BODY_RUN_OUTPUTS)
            break;
        ipuof_frame_header_free(h); /* its bytes are in the output buffers */
        h = NULL;
    }
    if (rc != IPUOF_OK)
        goto out;
    if (h->body_case != IPUOF__HEADER__BODY_RUN_REPLY) {
        rc = ipuof_xchg_unexpected(&x, h);
        goto out;
    }
    m->run_us = h->run_reply->run_us;
    ipuof_model_take_cost(m, h->run_reply->cost);
    m->have_outputs = 1;
out:
    if (begun)
        rc = ipuof_xchg_end(&x, rc);
    ipuof_frame_header_free(h);
    if (rc == IPUOF_OK && m->trace_path != NULL)
        rc = auto_report(m);
    return ipuof_model_settle(c, rc);
}

int
ipuof_model_output(const ipuof_model *m, size_t i, struct ipuof_tensor *t)
{
    const struct ipuof_outbuf *ob;

    if (m == NULL || t == NULL || i >= m->n_outputs)
        return IPUOF_E_INVAL;
    if (!m->have_outputs)
        return IPUOF_E_STATE;
    ob = &m->out[i];
    memset(t, 0, sizeof *t);
    t->name = m->outputs[i].name;
    t->dtype = ob->dtype;
    t->rank = ob->rank;
    memcpy(t->dims, ob->dims, sizeof t->dims);
    t->data = ob->buf;
    t->bytes = ob->bytes;
    return IPUOF_OK;
}

uint64_t
ipuof_model_run_us(const ipuof_model *m)
{
    return m != NULL && m->have_outputs ? m->run_us : 0;
}

/*
 * faults.c — ipuctl fault's requests: inject, list, clear. Each builds one FaultRequest,
 * lets conn.c run the exchange and copies the reply into the caller's structs; no
 * protobuf message outlives the call. The daemon alone parses kinds and triggers.
 */
#include <string.h>

#include "client_internal.h"

static void
from_wire(struct ipuof_fault *out, const Ipuof__FaultSpec *w)
{
    memset(out, 0, sizeof *out);
    out->id = w->id;
    out->has_ipu = w->has_ipu != 0;
    out->ipu = w->ipu;
    ipuof_copy_str(out->partition, sizeof out->partition, w->partition);
    ipuof_copy_str(out->kind, sizeof out->kind, w->kind);
    ipuof_copy_str(out->at, sizeof out->at, w->at);
    out->after_runs = w->after;
    out->count = w->count;
    out->probability = w->probability;
    out->seed = w->seed;
    out->fired = w->fired;
    out->seen = w->seen;
    out->duration_ms = w->duration_ms;
    out->wait_ms = w->wait_ms;
    out->rearm_on_reset = w->rearm_on_reset != 0;
    out->rearmed = w->rearmed;
    out->expired = w->expired != 0;
    ipuof_copy_str(out->host, sizeof out->host, w->host);
}

/* Sends a FaultRequest and returns the reply (caller frees) in *reply. */
static int
fault_call(ipuof_client *c, Ipuof__FaultVerb verb, const struct ipuof_fault *f, unsigned id,
           Ipuof__Header **reply)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__FaultRequest fr = IPUOF__FAULT_REQUEST__INIT;
    Ipuof__FaultSpec w = IPUOF__FAULT_SPEC__INIT;

    *reply = NULL;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    fr.verb = verb;
    fr.id = id;
    if (f != NULL) {
        w.has_ipu = f->has_ipu != 0;
        w.ipu = f->ipu;
        w.partition = (char *)f->partition;
        w.host = (char *)f->host;
        w.kind = (char *)f->kind;
        w.at = (char *)f->at;
        w.after = f->after_runs;
        w.count = f->count;
        w.probability = f->probability;
        w.seed = f->seed;
        w.duration_ms = f->duration_ms;
        w.wait_ms = f->wait_ms;
        w.rearm_on_reset = f->rearm_on_reset != 0;
        fr.spec = &w;
    }
    req.body_case = IPUOF__HEADER__BODY_FAULT;
    req.fault = &fr;
    return ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_FAULT_REPLY, c->request_ms, NULL, NULL,
                           reply);
}

int
ipuof_fault_inject(ipuof_client *c, const struct ipuof_fault *f, unsigned *id)
{
    Ipuof__Header *reply = NULL;
    int rc;

    if (c != NULL && f == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "fault inject needs a fault");
    rc = fault_call(c, IPUOF__FAULT_VERB__FAULT_INJECT, f, 0, &reply);
    if (rc == IPUOF_OK && id != NULL)
        *id = reply->fault_reply->n_faults > 0 ? reply->fault_reply->faults[0]->id : 0;
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_fault_list(ipuof_client *c, struct ipuof_fault *out, size_t max, size_t *n)
{
    Ipuof__Header *reply = NULL;
    int rc = fault_call(c, IPUOF__FAULT_VERB__FAULT_LIST, NULL, 0, &reply);

    if (n != NULL)
        *n = 0;
    if (rc == IPUOF_OK) {
        const Ipuof__FaultReply *fr = reply->fault_reply;
        for (size_t i = 0; out != NULL && i < fr->n_faults && i < max; i++)
            from_wire(&out[i], fr->faults[i]);
        if (n != NULL)
            *n = fr->n_faults;
    }
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_fault_clear(ipuof_client *c, unsigned id, size_t *n)
{
    Ipuof__Header *reply = NULL;
    int rc = fault_call(c, IPUOF__FAULT_VERB__FAULT_CLEAR, NULL, id, &reply);

    if (rc == IPUOF_OK && n != NULL)
        *n = reply->fault_reply->cleared;
    ipuof_frame_header_free(reply);
    return rc;
}

/*
 * req_fault.c — ipuctl fault's requests: inject, list, clear (the table and its matching
 * are state/faults.c, which does no I/O). Faults fire where a job meets a trigger point
 * (jobs/ -> faults/fault_at.c), never from a request handler.
 */
#include <stdio.h>
#include <string.h>

#include "dispatch.h"
#include "fault_fire.h"
#include "faults.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "srv_state.h"
#include "wiremap.h"

/* One table entry as a wire FaultSpec (strings borrowed from f and kind). */
static void
to_wire(Ipuof__FaultSpec *w, const struct fault *f, char *kind, size_t kindlen)
{
    ipuof__fault_spec__init(w);
    w->id = f->id;
    w->has_ipu = f->has_ipu;
    w->ipu = f->ipu;
    w->partition = (char *)f->partition;
    w->host = (char *)f->host;
    w->kind = (char *)faults_kind_name(f, kind, kindlen);
    w->at = (char *)faults_at_name(f->at);
    w->after = f->after;
    w->count = f->count;
    w->probability = f->probability;
    w->seed = f->seed;
    w->fired = f->fired;
    w->seen = f->seen;
    w->duration_ms = f->duration_ms;
    w->wait_ms = f->wait_ms;
    w->rearm_on_reset = f->rearm;
    w->rearmed = f->rearmed;
    w->expired = faults_expired(f, srv_now_ms());
}

void
req_fault(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__FaultRequest *rq = h->fault;
    struct srv *s = c->srv;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__FaultReply fr = IPUOF__FAULT_REPLY__INIT;
    Ipuof__FaultSpec w[FAULTS_MAX];
    Ipuof__FaultSpec *wp[FAULTS_MAX];
    char kinds[FAULTS_MAX][FAULTS_KIND_MAX];
    char err[600];
    unsigned id = 0;

    (void)payload_len;
    switch (rq->verb) {
    case IPUOF__FAULT_VERB__FAULT_INJECT: {
        const Ipuof__FaultSpec *sp = rq->spec;
        struct fault_spec spec = {0};
        if (sp == NULL) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "daemon",
                            "fault inject without a fault: give its kind and target");
            return;
        }
        spec.has_ipu = sp->has_ipu;
        spec.ipu = sp->ipu;
        spec.partition = sp->partition;
        spec.host = sp->host;
        spec.kind = sp->kind;
        spec.at = sp->at;
        spec.after = sp->after;
        spec.count = sp->count;
        spec.probability = sp->probability;
        spec.seed = sp->seed;
        spec.duration_ms = sp->duration_ms;
        spec.wait_ms = sp->wait_ms;
        spec.rearm = sp->rearm_on_reset;
        if (faults_add(&s->faults, &spec, s->inv->n, srv_now_ms(), &id, err, sizeof err) < 0) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "daemon", "%s", err);
            return;
        }
        fault_links_sync(s);
        for (unsigned i = 0; i < s->faults.n; i++)
            if (s->faults.f[i].id == id) {
                to_wire(&w[0], &s->faults.f[i], kinds[0], sizeof kinds[0]);
                wp[0] = &w[0];
                fr.n_faults = 1;
                fr.faults = wp;
                log_warn("client %u (%s, %s) armed fault %u: %s at %s", c->id, c->name,
                         c->peer, id, w[0].kind, w[0].at);
            }
        break;
    }
    case IPUOF__FAULT_VERB__FAULT_LIST:
        for (unsigned i = 0; i < s->faults.n; i++) {
            to_wire(&w[i], &s->faults.f[i], kinds[i], sizeof kinds[i]);
            wp[i] = &w[i];
        }
        fr.n_faults = s->faults.n;
        fr.faults = wp;
        break;
    case IPUOF__FAULT_VERB__FAULT_CLEAR:
        fr.cleared = faults_clear(&s->faults, rq->id);
        fault_links_sync(s);
        if (rq->id != 0 && fr.cleared == 0) {
            conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "daemon",
                            "no fault %u; ipuctl fault list shows the faults", rq->id);
            return;
        }
        log_warn("client %u (%s, %s) cleared %u fault%s", c->id, c->name, c->peer, fr.cleared,
                 fr.cleared == 1 ? "" : "s");
        break;
    default:
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "daemon",
                        "fault verb %d is not known (inject, list, clear)", (int)rq->verb);
        return;
    }
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_FAULT_REPLY;
    r.fault_reply = &fr;
    conn_send(c, &r, NULL, 0);
}

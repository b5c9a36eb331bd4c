/*
 * req_fault.c — injected faults: ipuctl fault's requests (inject, list, clear), and what a
 * fault does when it fires at a trigger point (the table and its matching are faults.c,
 * which does no I/O). A fired fault puts IPUs in error (devices.c's DEV_ERROR, shown by
 * ipuctl status with the recovery they need) and answers the request with PopTorch's
 * error class and recovery action, or cuts the client's connection.
 */
#include <stdio.h>
#include <string.h>

#include "dispatch.h"
#include "faults.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "srv_state.h"
#include "wiremap.h"

/* The reset that clears an error needing recovery, as ipuctl says it, for IPU ipu of
 * partition part. */
static void
reset_cmd(char *out, size_t len, int recovery, unsigned ipu, const char *part)
{
    switch (recovery) {
    case IPUOF_RECOVERY_IPU_RESET:
        snprintf(out, len, "ipuctl reset --ipu %u", ipu);
        break;
    case IPUOF_RECOVERY_LINK_RESET:
    case IPUOF_RECOVERY_PARTITION_RESET:
        snprintf(out, len, "ipuctl reset --partition %s", part);
        break;
    default:
        snprintf(out, len, "ipuctl reset --all");
        break;
    }
}

/* Sends c the error for IPU ipu (in error) of partition part, for request req_id. */
static void
send_ipu_error(struct conn *c, uint64_t req_id, const struct dev_ipu *d, const char *part)
{
    char cmd[128];

    reset_cmd(cmd, sizeof cmd, d->recovery, d->id, part);
    conn_send_error(c, req_id, IPUOF_E_DEVICE_FAULT,
                    d->unrecoverable ? IPUOF_ERROR_UNRECOVERABLE : IPUOF_ERROR_RECOVERABLE,
                    d->unrecoverable ? IPUOF_RECOVERY_NONE : d->recovery, "device",
                    "%s; IPU %u stays in error until %s", d->error, d->id, cmd);
}

/*
 * Fires f on partition IPUs first .. first + count - 1 named part: the IPUs it hits go
 * into error (with the sentence it makes, also written to msg). The IPUs: the fault's own
 * IPU, or the partition's first, for an IPU-level error; the whole partition for link,
 * partition and full resets and an unrecoverable error not aimed at one IPU.
 */
static void
fire(struct srv *s, const struct fault *f, unsigned first, unsigned count, const char *part,
     char *msg, size_t len)
{
    char kind[48];
    int whole = faults_level(f->recovery) >= 2 && f->kind != FAULT_UNRECOVERABLE;
    unsigned lo = f->has_ipu ? f->ipu : first, n = 1;

    if (whole || (f->kind == FAULT_UNRECOVERABLE && !f->has_ipu)) {
        lo = first;
        n = count;
    }
    faults_kind_name(f, kind, sizeof kind);
    if (f->kind == FAULT_HOST_SYNC_TIMEOUT)
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: IPU_RESET] timed out "
                 "waiting for host sync on IPU %u (injected fault %u, %s at %s)", lo, f->id,
                 kind, faults_at_name(f->at));
    else if (f->kind == FAULT_UNRECOVERABLE)
        snprintf(msg, len, "unrecoverable_runtime_error: IPU %u of partition '%s' is out of "
                 "service (injected fault %u, %s at %s)", lo, part, f->id, kind,
                 faults_at_name(f->at));
    else
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: %s] error on IPU %u "
                 "of partition '%s' (injected fault %u, %s at %s)",
                 ipuof_recovery_name(f->recovery), lo, part, f->id, kind,
                 faults_at_name(f->at));
    for (unsigned i = lo; i < lo + n && i < s->inv->n; i++) {
        dev_set_error(s->inv, i, f->recovery, f->kind == FAULT_UNRECOVERABLE, part, msg);
        s->inv->ipus[i].error_ms = srv_now_ms();
    }
}

/* Logs that f fired on c's request at partition part. */
static void
log_fired(const struct conn *c, const struct fault *f, const char *part)
{
    char kind[48];

    log_warn("fault %u (%s at %s) fired on client %u (%s, pid %u, %s), partition '%s' "
             "(%u of %u)", f->id, faults_kind_name(f, kind, sizeof kind), faults_at_name(f->at),
             c->id, c->name, c->pid, c->peer, part, f->fired, f->count);
}

int
fault_hook(struct conn *c, uint64_t req_id, int at)
{
    struct srv *s = c->srv;
    const struct dev_partition *p = conn_part(c);
    struct fault *f;
    char msg[256];
    unsigned bad = 0;

    if (p == NULL)
        return 0;
    if (dev_error_need(s->inv, p->first, p->count, &bad) != IPUOF_RECOVERY_NONE) {
        send_ipu_error(c, req_id, &s->inv->ipus[bad], p->name);
        return 1;
    }
    f = faults_match(&s->faults, (enum fault_at)at, p->first, p->count, p->name);
    if (f == NULL)
        return 0;
    log_fired(c, f, p->name);
    if (f->kind == FAULT_FABRIC_DISCONNECT) {
        conn_kill(c, "injected fabric-disconnect");
        return 1;
    }
    fire(s, f, p->first, p->count, p->name, msg, sizeof msg);
    dev_error_need(s->inv, p->first, p->count, &bad);
    send_ipu_error(c, req_id, &s->inv->ipus[bad], p->name);
    return 1;
}

int
fault_attach_hook(struct conn *c, uint64_t req_id, struct dev_partition *p)
{
    struct srv *s = c->srv;
    struct fault *f = faults_match(&s->faults, FAULT_AT_ATTACH, p->first, p->count, p->name);
    char msg[256], name[DEV_NAME_MAX];
    unsigned first = p->first, count = p->count, bad = first;

    if (f == NULL)
        return 0;
    snprintf(name, sizeof name, "%s", p->name);
    log_fired(c, f, name);
    dev_release(s->inv, p);
    if (f->kind == FAULT_FABRIC_DISCONNECT) {
        conn_kill(c, "injected fabric-disconnect");
        return 1;
    }
    fire(s, f, first, count, name, msg, sizeof msg);
    dev_error_need(s->inv, first, count, &bad);
    send_ipu_error(c, req_id, &s->inv->ipus[bad], name);
    return 1;
}

/* One table entry as a wire FaultSpec (strings borrowed from f and kind). */
static void
to_wire(Ipuof__FaultSpec *w, const struct fault *f, char *kind, size_t kindlen)
{
    ipuof__fault_spec__init(w);
    w->id = f->id;
    w->has_ipu = f->has_ipu;
    w->ipu = f->ipu;
    w->partition = (char *)f->partition;
    w->kind = (char *)faults_kind_name(f, kind, kindlen);
    w->at = (char *)faults_at_name(f->at);
    w->after = f->after;
    w->count = f->count;
    w->probability = f->probability;
    w->seed = f->seed;
    w->fired = f->fired;
    w->seen = f->seen;
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
    char kinds[FAULTS_MAX][48];
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
        spec.kind = sp->kind;
        spec.at = sp->at;
        spec.after = sp->after;
        spec.count = sp->count;
        spec.probability = sp->probability;
        spec.seed = sp->seed;
        if (faults_add(&s->faults, &spec, s->inv->n, &id, err, sizeof err) < 0) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "daemon", "%s", err);
            return;
        }
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

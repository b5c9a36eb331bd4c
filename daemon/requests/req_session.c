/*
 * req_session.c — hello, attach and detach: a client's life with its partition.
 */
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "frame.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"

/* Compares tokens in time independent of where they differ. */
static int
token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);

    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

void
req_hello(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__Hello *hi = h->hello;
    const struct cfg *cfg = &c->srv->cfg;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__HelloReply hr = IPUOF__HELLO_REPLY__INIT;

    (void)payload_len;
    if (c->hello_done) {
        conn_send_error(c, req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "hello sent twice on one connection; it is the first request only");
        return;
    }
    if (hi->protocol_version != IPUOF_PROTOCOL_VERSION) {
        conn_send_error(c, req_id, IPUOF_E_VERSION, 0, 0, "protocol",
                        "client speaks protocol version %u, ipuofd %s speaks version %u; use a "
                        "client library and daemon of the same protocol version",
                        hi->protocol_version, IPUOF_VERSION_STR, IPUOF_PROTOCOL_VERSION);
        conn_close_after_write(c);
        return;
    }
    if (c->pod) {
        /* A peer daemon: the Pod's token, never admin rights. */
        if (cfg->pod_token[0] != '\0' && !token_equal(hi->auth_token, cfg->pod_token)) {
            log_warn("pod: %s: hello with a %s Pod token; closing", c->peer,
                     hi->auth_token[0] ? "wrong" : "missing");
            conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "pod",
                            "%s Pod token: this daemon's Pod port takes the token set in "
                            "[pod] token, the same on every host of the Pod",
                            hi->auth_token[0] ? "wrong" : "missing");
            conn_close_after_write(c);
            return;
        }
        if (hi->admin_token[0] != '\0') {
            conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "pod",
                            "the Pod port grants no admin rights; send the admin token to the "
                            "client port ([server] listen)");
            conn_close_after_write(c);
            return;
        }
    } else if (!c->via_admin_socket && cfg->auth_token[0] != '\0' &&
        !token_equal(hi->auth_token, cfg->auth_token)) {
        log_warn("client %u (%s): hello with a %s auth token; closing", c->id, c->peer,
                 hi->auth_token[0] ? "wrong" : "missing");
        conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "daemon",
                        "%s auth token: this daemon requires the token set in its auth_token "
                        "(IPUOF_AUTH_TOKEN for the client tools)",
                        hi->auth_token[0] ? "wrong" : "missing");
        conn_close_after_write(c);
        return;
    }
    if (hi->admin_token[0] != '\0') {
        if (cfg->admin_token[0] == '\0' || !token_equal(hi->admin_token, cfg->admin_token)) {
            log_warn("client %u (%s): hello with a wrong admin token; closing", c->id, c->peer);
            conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "daemon",
                            "wrong admin token%s", cfg->admin_token[0] ? ""
                            : ": this daemon has no admin_token; use the admin socket");
            conn_close_after_write(c);
            return;
        }
        c->admin = 1;
    }
    snprintf(c->name, sizeof c->name, "%s", hi->client_name[0] ? hi->client_name : "client");
    for (char *p = c->name; *p; p++) /* shown in logs and ipuctl: printable only */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    c->pid = hi->pid;
    c->hello_done = 1;
    evtimer_del(c->handshake_timer);
    conn_apply_timeouts(c);
    log_info("%s %u: hello from %s (pid %u, %s)%s", c->pod ? "pod peer" : "client", c->id,
             c->name, c->pid, c->peer, c->admin ? " with admin rights" : "");

    hr.protocol_version = IPUOF_PROTOCOL_VERSION;
    hr.server_version = (char *)IPUOF_VERSION_STR;
    hr.server_name = (char *)"ipuofd";
    hr.admin = c->admin;
    hr.num_ipus = c->srv->inv->n;
    hr.client_id = c->id;
    hr.max_payload_bytes = cfg->max_payload_bytes;
    hr.max_header_bytes = cfg->max_header_bytes;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_HELLO_REPLY;
    r.hello_reply = &hr;
    conn_send(c, &r, NULL, 0);
}

void
req_attach(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__AttachRequest *a = h->attach;
    struct srv *s = c->srv;
    struct dev_holder holder;
    struct dev_partition *p;
    unsigned count = a->num_ipus;
    char err[1024];
    int rc;

    (void)payload_len;
    if (c->job != NULL || c->waiter != NULL) {
        conn_send_error(c, req_id, IPUOF_E_ALREADY_ATTACHED, 0, 0, "device",
                        "this connection %s partition '%s'; detach first",
                        c->job ? "already holds" : "is already waiting for a",
                        c->job ? conn_part(c)->name : "");
        return;
    }
    if (count == 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "attach asks for 0 IPUs; ask for 1 or more (a power of two)");
        return;
    }
    if (a->num_processes > 1 && a->process_id >= a->num_processes) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process_id %u is out of range for %u processes (0..%u)", a->process_id,
                        a->num_processes, a->num_processes - 1);
        return;
    }
    for (const char *ch = a->partition_name; *ch; ch++) {
        if (!((*ch >= 'a' && *ch <= 'z') || (*ch >= 'A' && *ch <= 'Z') ||
              (*ch >= '0' && *ch <= '9') || *ch == '-' || *ch == '_' || *ch == '.')) {
            conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                            "partition name has the character 0x%02x; use letters, digits, "
                            "'-', '_' and '.'", (unsigned char)*ch);
            return;
        }
    }
    if (a->auto_round)
        count = dev_round_pow2(count);
    /* A partition spanning a Pod may be larger than this daemon: job_attach checks this
     * daemon's share of it (num_ipus / hosts, by dev_attach) once the Pod's plan is known. */
    if (dev_check_count(s->inv, count, err, sizeof err) != IPUOF_OK &&
        !(a->n_pod_hosts > 0 && a->num_processes > 1 && dev_is_pow2(count))) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device", "%s", err);
        return;
    }
    if (a->num_processes > 1) { /* one of several processes sharing the partition */
        job_attach(c, req_id, a, count);
        return;
    }
    conn_holder(c, &holder);
    /* Clients already waiting come first: no attach jumps the queue. */
    if (s->wait_head == NULL) {
        rc = dev_attach(s->inv, count, a->partition_name, &holder, c, &p, err, sizeof err);
        if (rc == IPUOF_OK) { /* the job of one enters ready (or meets a fault at attach) */
            job_attached_one(c, req_id, p, 0);
            return;
        }
        if (rc == IPUOF_E_BUSY && !a->wait) {
            unsigned bad = 0;
            int need = dev_error_blocks(s->inv, count, a->partition_name, &bad);
            if (need != IPUOF_RECOVERY_NONE) {
                const struct dev_ipu *d = &s->inv->ipus[bad];
                conn_send_error(c, req_id, IPUOF_E_DEVICE_FAULT, d->unrecoverable ?
                                IPUOF_ERROR_UNRECOVERABLE : IPUOF_ERROR_RECOVERABLE,
                                d->unrecoverable ? IPUOF_RECOVERY_NONE : need, "device",
                                "%s; IPU %u is in error (%s) and needs %s before it can be "
                                "attached", err, bad, d->error, ipuof_recovery_name(need));
                return;
            }
        }
        if (rc != IPUOF_E_BUSY || !a->wait) {
            conn_send_error(c, req_id, rc, rc == IPUOF_E_BUSY ? IPUOF_ERROR_RECOVERABLE : 0,
                            rc == IPUOF_E_BUSY ? IPUOF_RECOVERY_RETRY : 0, "device", "%s%s", err,
                            rc == IPUOF_E_BUSY ? "; retry later or ask to wait for IPUs" : "");
            return;
        }
    } else if (!a->wait) {
        conn_send_error(c, req_id, IPUOF_E_BUSY, IPUOF_ERROR_RECOVERABLE, IPUOF_RECOVERY_RETRY,
                        "device", "cannot attach %u IPU%s at once: %u client%s already waiting "
                        "for IPUs come first; retry later or ask to wait", count,
                        count == 1 ? "" : "s", s->nwaiting, s->nwaiting == 1 ? " is" : "s are");
        return;
    }
    if (job_wait_enqueue(s, c, req_id, count, a->partition_name, a->wait_timeout_ms, err,
                         sizeof err) < 0)
        conn_send_error(c, req_id, IPUOF_E_TOO_MANY, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "device", "%s", err);
}

void
req_detach(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    struct dev_partition *p = conn_part(c);

    (void)payload_len;
    (void)h;
    if (p == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOT_ATTACHED, 0, 0, "device",
                        "this connection holds no partition; attach first");
        return;
    }
    log_info("client %u (%s, pid %u) detached from the job on partition '%s'", c->id, c->name,
             c->pid, p->name);
    job_detach(c, req_id); /* the job decides what its process leaving means */
    job_serve_waiters(c->srv);
}

void
revoke_partition(struct conn *c, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (c->job == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    job_revoke(c, code, msg); /* every process of the job is told */
}

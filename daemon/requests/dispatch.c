/*
 * dispatch.c — the request table (tmux cmd_entry style) and the checks every request
 * passes before its handler runs: hello first, admin rights, shutdown.
 */
#include "dispatch.h"

#include <stddef.h>

#include "frame.h"
#include "ipuof/status.h"
#include "log.h"
#include "srv_state.h"
#include "metrics_count.h"

static const struct req_entry table[] = {
    {IPUOF__HEADER__BODY_HELLO, "hello", 1, 0, 0, req_hello, REQ_BOTH},
    {IPUOF__HEADER__BODY_HEALTH, "health", 1, 0, 0, req_health, REQ_BOTH},
    {IPUOF__HEADER__BODY_ATTACH, "attach", 0, 0, 0, req_attach},
    {IPUOF__HEADER__BODY_DETACH, "detach", 0, 0, 0, req_detach},
    {IPUOF__HEADER__BODY_STATUS, "status", 0, 0, 0, req_status},
    {IPUOF__HEADER__BODY_RESET, "reset", 0, 1, 0, req_reset},
    {IPUOF__HEADER__BODY_COMPILE, "compile", 0, 0, 1, req_compile},
    {IPUOF__HEADER__BODY_MODEL_CHUNK, "model_chunk", 0, 0, 1, req_model_chunk},
    {IPUOF__HEADER__BODY_RUN, "run", 0, 0, 1, req_run},
    {IPUOF__HEADER__BODY_FREE_MODEL, "free_model", 0, 0, 0, req_free_model},
    {IPUOF__HEADER__BODY_SET_OPTIMIZER, "set_optimizer", 0, 0, 0, req_set_optimizer},
    {IPUOF__HEADER__BODY_READ_WEIGHTS, "read_weights", 0, 0, 0, req_read_weights},
    {IPUOF__HEADER__BODY_WRITE_WEIGHTS, "write_weights", 0, 0, 1, req_write_weights},
    {IPUOF__HEADER__BODY_COPY_WEIGHTS, "copy_weights", 0, 0, 0, req_copy_weights},
    {IPUOF__HEADER__BODY_SAVE_MODEL, "save_model", 0, 0, 0, req_save_model},
    {IPUOF__HEADER__BODY_TRACE, "trace", 0, 0, 0, req_trace},
    {IPUOF__HEADER__BODY_VIPU, "vipu", 0, 0, 0, req_vipu}, /* rights per verb: req_vipu.c */
    {IPUOF__HEADER__BODY_FAULT, "fault", 0, 1, 0, req_fault},
    {IPUOF__HEADER__BODY_POD_HELLO, "pod_hello", 0, 0, 0, req_pod_hello, REQ_POD},
    {IPUOF__HEADER__BODY_KV_SET, "kv_set", 0, 0, 1, req_kv_set, REQ_POD},
    {IPUOF__HEADER__BODY_KV_GET, "kv_get", 0, 0, 0, req_kv_get, REQ_POD},
    {IPUOF__HEADER__BODY_KV_DROP, "kv_drop", 0, 0, 0, req_kv_drop, REQ_POD},
};

void
dispatch(struct conn *c, const Ipuof__Header *h, uint32_t payload_len)
{
    const struct req_entry *e = NULL;

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].body == h->body_case)
            e = &table[i];
    if (e == NULL) {
        conn_send_error(c, h->request_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "'%s' is not a request this daemon serves (protocol version %u)",
                        ipuof_frame_body_name(h), IPUOF_PROTOCOL_VERSION);
        if (!c->hello_done)
            conn_close_after_write(c);
        return;
    }
    if (h->request_id == 0) {
        conn_send_error(c, 0, IPUOF_E_PROTO, 0, 0, "protocol",
                        "%s request has request_id 0; every request needs a non-zero id",
                        e->name);
        return;
    }
    if (!c->hello_done && !e->before_hello) {
        conn_send_error(c, h->request_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "%s request before the hello; the first request must be a hello",
                        e->name);
        conn_close_after_write(c);
        return;
    }
    if (e->port != REQ_BOTH && e->port != (c->pod ? REQ_POD : REQ_CLIENT)) {
        conn_send_error(c, h->request_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "%s is a request of %s, not of this connection's %s",
                        e->name, e->port == REQ_POD ? "a Pod port ([pod] listen)"
                                                    : "the client port ([server] listen)",
                        c->pod ? "Pod port" : "client port");
        return;
    }
    if (e->admin && !c->admin) {
        conn_send_error(c, h->request_id, IPUOF_E_AUTH, 0, 0, "daemon",
                        "%s needs admin rights: connect through the admin socket%s%s or present "
                        "the admin token", e->name, c->srv->cfg.admin_socket[0] ? " " : "",
                        c->srv->cfg.admin_socket);
        return;
    }
    if (c->srv->stopping && e->body != IPUOF__HEADER__BODY_HEALTH &&
        e->body != IPUOF__HEADER__BODY_STATUS && e->body != IPUOF__HEADER__BODY_DETACH) {
        conn_send_error(c, h->request_id, IPUOF_E_SHUTDOWN, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "daemon",
                        "ipuofd is shutting down and takes no new %s requests", e->name);
        return;
    }
    if (payload_len > 0 && !e->payload) {
        conn_send_error(c, h->request_id, IPUOF_E_PROTO, 0, 0, "protocol",
                        "a %s request carries no payload, but %u payload bytes came with it",
                        e->name, payload_len);
        return;
    }
    log_debug("client %u: %s (request %llu)", c->id, e->name,
              (unsigned long long)h->request_id);
    metrics_request(c->srv->metrics, e->name);
    e->fn(c, h->request_id, h, payload_len);
}

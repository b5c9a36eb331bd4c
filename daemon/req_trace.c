/*
 * req_trace.c — the simulated clock as a client sees it: the cost figures that go with every
 * run reply, and the trace request that returns the execution trace of a model's last run
 * (Chrome trace-event JSON, recorded when the model was compiled with profile).
 *
 * Both run on the event-loop thread: a connection's model never runs while its next request
 * is being served (requests of one connection are answered in order, a run's reply first).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "ipuof/status.h"
#include "log.h"
#include "models.h"
#include "server.h"

void
req_run_cost(const struct sim_exe *e, Ipuof__RunCost *rc, double *busy)
{
    struct sim_cost_report rep;
    int code;

    ipuof__run_cost__init(rc);
    memset(&rep, 0, sizeof rep);
    code = sim_exe_cost(e, &rep);
    if (code != IPUOF_OK) {
        rc->code = (uint32_t)code;
        rc->reason = (char *)(code == IPUOF_E_UNSUPPORTED
                                  ? "this ipuofd's simulator does not model device time yet"
                                  : "the simulator has no cost figures for this run");
        return;
    }
    if (rep.n_ipus > SIM_MAX_IPUS)
        rep.n_ipus = SIM_MAX_IPUS;
    memcpy(busy, rep.busy, rep.n_ipus * sizeof *busy);
    rc->device_seconds = rep.device_seconds;
    rc->samples_per_s = rep.samples_per_s;
    rc->n_busy = rep.n_ipus;
    rc->busy = busy;
    rc->bottleneck_stage = rep.bottleneck_stage;
}

void
req_trace(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__TraceReply rep = IPUOF__TRACE_REPLY__INIT;
    struct model *m = models_find(c, h->trace->model_id);
    struct sim_err err = {0};
    char *json = NULL;
    size_t len = 0;
    int rc;

    (void)payload_len;
    if (m == NULL) {
        models_send_missing(c, req_id, h->trace->model_id, "");
        return;
    }
    rc = sim_exe_trace_json(m->entry->exe, &json, &len, &err);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "executor", "no trace of model '%s': %s", m->name,
                        err.msg);
        goto out;
    }
    if (len == 0 || len > c->srv->cfg.max_payload_bytes) {
        conn_send_error(c, req_id, len ? IPUOF_E_TOO_LARGE : IPUOF_E_INTERNAL, 0, 0, "executor",
                        "the trace of model '%s' is %zu bytes; one frame carries 1 to %u "
                        "(max_payload_bytes): run fewer device iterations per call while "
                        "profiling", m->name, len, c->srv->cfg.max_payload_bytes);
        goto out;
    }
    rep.bytes = len;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_TRACE_REPLY;
    r.trace_reply = &rep;
    conn_send(c, &r, json, (uint32_t)len);
out:
    free(json);
}

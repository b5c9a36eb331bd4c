/*
 * trace.c — what the simulated clock reports (schedule.c's walk of the IPUs' programs,
 * priced by cost.c): the figures of the last run (sim_exe_cost) and its Chrome trace-event
 * JSON (sim_exe_trace_json), one span per step of work.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#define TRACE_MAX_EVENTS (1 << 18)

int
sim_exe_cost(const struct sim_exe *e, struct sim_cost_report *rep)
{
    const struct sim_clock *c = e->clock;
    double comp_max = -1;

    memset(rep, 0, sizeof(*rep));
    if (c == NULL || !atomic_load(&e->ran))
        return IPUOF_E_INVAL;
    rep->device_seconds = c->device_seconds;
    rep->samples_per_s = c->device_seconds > 0
                             ? (double)e->D * e->A * e->R * (e->B ? e->B : 1) /
                                   c->device_seconds
                             : 0;
    rep->n_ipus = e->R * e->ipr < SIM_MAX_IPUS ? e->R * e->ipr : SIM_MAX_IPUS;
    for (unsigned i = 0; i < rep->n_ipus; i++)
        rep->busy[i] = c->device_seconds > 0 ? c->busy[i % e->ipr] / c->device_seconds : 0;
    for (int s = 0; s < c->n_stages; s++)
        if (c->fwd[s] + c->bwd[s] > comp_max) {
            comp_max = c->fwd[s] + c->bwd[s];
            rep->bottleneck_stage = s;
        }
    return 0;
}

/* ---- the trace ------------------------------------------------------------------------ */

struct buf {
    char *p;
    size_t len, cap;
    bool oom;
    size_t events;
    unsigned replicas, ipr;
};

static void
put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        {
            size_t cap = b->cap * 2 + (size_t)n + 1;
            char *p = realloc(b->p, cap);
            if (p == NULL) {
                b->oom = true;
                return;
            }
            b->p = p;
            b->cap = cap;
        }
    }
}

static const char *const ev_names[SIM_EV_KINDS] = { "F", "B", "exchange", "host-in",
                                                    "host-out", "weight-update", "reduce",
                                                    "stream" };
static const char *const ev_kinds[SIM_EV_KINDS] = { "fwd", "bwd", "exchange", "host-in",
                                                    "host-out", "weight-update", "reduce",
                                                    "stream" };

static bool
trace_ev(const struct sim_ev *ev, void *ud)
{
    struct buf *b = ud;

    for (unsigned r = 0; r < b->replicas; r++) {
        char name[64];
        if (b->events >= TRACE_MAX_EVENTS)
            return false;
        if (ev->kind == SIM_EV_FWD || ev->kind == SIM_EV_BWD)
            snprintf(name, sizeof(name), "%s%d.%lld", ev_names[ev->kind], ev->stage, ev->mb);
        else
            snprintf(name, sizeof(name), "%s", ev_names[ev->kind]);
        put(b, "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%u,\"ts\":%.4f,"
            "\"dur\":%.4f,\"args\":{\"stage\":%d,\"mb\":%lld,\"iter\":%lld,\"kind\":\"%s\"}}",
            ",\n", name, r * b->ipr + (unsigned)ev->ipu, ev->t0 * 1e6, ev->dur * 1e6,
            ev->stage, ev->mb, ev->iter, ev_kinds[ev->kind]);
        b->events++;
    }
    return !b->oom;
}

int
sim_exe_trace_json(const struct sim_exe *e, char **json, size_t *len, struct sim_err *err)
{
    struct buf b = { NULL, 0, 0, false, 0, e->R, e->ipr };
    struct sim_clock *c = e->clock;
    double end;

    *json = NULL;
    *len = 0;
    if (!e->profile)
        return sim_err_set(err, IPUOF_E_INVAL, "no trace: the executable was compiled "
                           "without profiling (set profile = 1)");
    if (c == NULL || !atomic_load(&e->ran))
        return sim_err_set(err, IPUOF_E_INVAL, "no trace yet: the executable has not run");
    b.cap = 1 << 16;
    b.p = malloc(b.cap);
    if (b.p == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory writing the trace");
    put(&b, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
        "\"args\":{\"name\":\"ipuofd simulated IPUs\"}}");
    for (unsigned i = 0; i < e->R * e->ipr; i++)
        put(&b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%u,"
            "\"args\":{\"name\":\"IPU %u\"}}", i, i);
    /* the events' times are those of sim_sched_walk, the same walk that timed the run */
    end = sim_sched_walk(e, c, trace_ev, &b);
    (void)end;
    put(&b, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"device_seconds\":%.9g,"
        "\"truncated\":%s}}\n", c->device_seconds,
        b.events >= TRACE_MAX_EVENTS ? "true" : "false");
    if (b.oom) {
        free(b.p);
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory writing the trace");
    }
    *json = b.p;
    *len = b.len;
    return 0;
}

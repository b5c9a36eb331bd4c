/*
 * cost.c — the simulated clock: the rates an IPU's work is charged at, the FLOPs and bytes
 * of each node, and the figures and trace of the last run. The rates default to the
 * GC200's published figures (Graphcore, "IPU-M2000 / GC200 datasheet"): 62.5 TFLOPS FP32
 * peak, 47.5 TB/s on-chip memory bandwidth, 8 TB/s IPU-Exchange, 320 GB/s IPU-Links per
 * IPU, PCIe Gen4 x16 64 GB/s to the host. schedule.c turns them into the schedule's clock.
 * FLOPs per node come from the op name and the shapes here, not from the op tables.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#define TRACE_MAX_EVENTS (1 << 18)

void
sim_cost_cfg_init(struct sim_cost_cfg *c)
{
    c->flops_per_s = 62.5e12;
    c->mem_bytes_per_s = 47.5e12;
    c->exchange_bytes_per_s = 8e12;
    c->link_bytes_per_s = 320e9;
    c->host_bytes_per_s = 64e9;
    c->sync_s = 1e-6;
    c->efficiency = 0.25;
}

static double
numel_of(const struct sim_exe *e, int v)
{
    return v >= 0 ? (double)e->vals[v].ti.numel : 0.0;
}

static bool
is_op(const char *op, const char *const *names)
{
    for (; *names != NULL; names++)
        if (strcmp(op, *names) == 0)
            return true;
    return false;
}

void
sim_cost_node(const struct sim_exe *e, int s, double *flops, double *bytes)
{
    static const char *const moves[] = { "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                         "Identity", "Transpose", "Concat", "Slice", "Gather",
                                         "Shape", "Constant", "Cast", NULL };
    static const char *const transcendental[] = { "Exp", "Log", "Erf", "Sqrt", "Pow",
                                                  "Sigmoid", "SiLU", "Tanh", "Softmax",
                                                  "LogSoftmax", NULL };
    static const char *const losses[] = { "SoftmaxCrossEntropyLoss",
                                          "NegativeLogLikelihoodLoss", "CtcLoss", NULL };
    const struct sim_enode *n = &e->nodes[s];
    const struct sim_mnode *mn = &e->m->nodes[n->mnode];
    const char *op = n->op->name;
    double out = n->n_out > 0 ? numel_of(e, n->out[0]) : 0.0;
    double in0 = n->n_in > 0 ? numel_of(e, n->in[0]) : 0.0;

    *bytes = 0;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0)
            *bytes += (double)e->vals[n->in[j]].bytes;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] >= 0)
            *bytes += (double)e->vals[n->out[j]].bytes;
    if (strcmp(op, "Conv") == 0 && n->n_in >= 2) {
        const struct sim_shape *w = &e->vals[n->in[1]].ti.shape;
        double per_out = w->d[0] > 0 ? numel_of(e, n->in[1]) / (double)w->d[0] : 0;
        *flops = 2.0 * out * per_out + (n->n_in > 2 ? out : 0);
    } else if ((strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0) && n->n_in >= 2) {
        const struct sim_shape *a = &e->vals[n->in[0]].ti.shape;
        const struct sim_attr *ta = sim_attr_find(mn, "transA");
        int k = a->rank - 1;
        if (strcmp(op, "Gemm") == 0 && ta != NULL && ta->i != 0)
            k = 0;
        *flops = 2.0 * out * (double)(k >= 0 ? a->d[k] : 1) + (n->n_in > 2 ? out : 0);
    } else if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) {
        const struct sim_attr *ks = sim_attr_find(mn, "kernel_shape");
        double window = 1;
        for (int i = 0; ks != NULL && i < (int)ks->n; i++)
            window *= (double)ks->ints[i];
        *flops = out * window;
    } else if (is_op(op, moves)) {
        *flops = 0;
    } else if (is_op(op, transcendental) || is_op(op, losses)) {
        *flops = 4.0 * (in0 > out ? in0 : out);
    } else if (strcmp(op, "BatchNormalization") == 0 ||
               strcmp(op, "LayerNormalization") == 0) {
        *flops = 8.0 * out;
    } else {
        *flops = in0 > out ? in0 : out;     /* elementwise, reductions, global pools */
    }
    *flops += n->fused_flops;
    *bytes += n->fused_bytes;
}

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

/*
 * cost_report.c — the prediction of an executable's steady-state speed from its compile
 * alone (sim_exe_predict) and its report as text or JSON (sim_prediction_format).
 *
 * The prediction builds the clock again for the replicas asked (the host link's sharing
 * and the collectives depend on them; one replica's compile predicts a Pod) and walks the
 * schedule once without a callback: the step is one run of D device iterations, its parts
 * those of the IPU with the most busy time. The bottleneck op class and layer are those
 * with the most time (forward and backward of one micro-batch) on that IPU.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

static const char *const part_names[SIM_PARTS] = { "compute", "exchange", "sync", "host_io",
                                                   "collectives" };

/* The op class and the node with the most time on IPU ipu (own[]: each node's time). */
static void
bottlenecks(const struct sim_exe *e, unsigned ipu, const double *own, struct sim_prediction *p)
{
    double best_node = -1, best_class = -1;

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        double cls = 0;
        bool first = true;
        if ((unsigned)n->ipu != ipu)
            continue;
        if (own[s] > best_node) {
            best_node = own[s];
            snprintf(p->layer, sizeof p->layer, "%s", n->label);
            p->layer_seconds = own[s];
        }
        for (int q = 0; q < s && first; q++)
            first = !((unsigned)e->nodes[q].ipu == ipu &&
                      strcmp(e->nodes[q].op->name, n->op->name) == 0);
        if (!first)
            continue;
        for (int q = s; q < e->n_nodes; q++)
            if ((unsigned)e->nodes[q].ipu == ipu &&
                strcmp(e->nodes[q].op->name, n->op->name) == 0)
                cls += own[q];
        if (cls > best_class) {
            best_class = cls;
            snprintf(p->op_class, sizeof p->op_class, "%s", n->op->name);
            p->op_class_seconds = cls;
        }
    }
}

/* Each node's time for one micro-batch, forward and backward; NULL when out of memory. */
static double *
node_times(const struct sim_exe *e)
{
    double *own = calloc((size_t)e->n_nodes + 1, sizeof(double));

    for (int s = 0; own != NULL && s < e->n_nodes; s++) {
        struct sim_node_cost t;
        sim_cost_node_time(e, s, &t);
        for (int k = 0; k < 3; k++)
            own[s] += t.fwd[k] + (e->nodes[s].bstep >= 0 ? t.bwd[k] : 0);
    }
    return own;
}

int
sim_exe_predict(const struct sim_exe *e, unsigned replicas, struct sim_prediction *p)
{
    struct sim_clock *c;
    double best = -1, comp = -1, *own;
    unsigned R = replicas > 0 ? replicas : e->R;

    memset(p, 0, sizeof(*p));
    p->stage = -1;
    if (e->clock == NULL || R > 65536)
        return IPUOF_E_INVAL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return IPUOF_E_NOMEM;
    if (sim_clock_build(e, R, c) != 0) {
        sim_clock_free(c);
        return IPUOF_E_NOMEM;
    }
    p->replicas = R;
    p->step_seconds = c->device_seconds;
    p->samples_per_step = (double)e->D * e->A * (e->B ? e->B : 1) * R;
    p->samples_per_s = c->device_seconds > 0 ? p->samples_per_step / c->device_seconds : 0;
    for (unsigned i = 0; i < c->n_ipus; i++)
        if (c->busy[i] > best) {
            best = c->busy[i];
            p->ipu = i;
        }
    memcpy(p->part, &c->part[(size_t)p->ipu * SIM_PARTS], sizeof(p->part));
    if (c->device_seconds > 0 && c->peak_flops_per_s > 0)
        p->pct_peak = 100.0 * (c->flops * (double)e->D * e->A) /
                      c->device_seconds / ((double)e->ipr * c->peak_flops_per_s);
    for (int s = 0; s < c->n_stages; s++)
        if (c->fwd[s] + c->bwd[s] > comp) {
            bool here = false;
            for (int q = 0; q < e->n_nodes && !here; q++)
                here = e->nodes[q].stage == s && (unsigned)e->nodes[q].ipu == p->ipu;
            if (here) {
                comp = c->fwd[s] + c->bwd[s];
                p->stage = s;
            }
        }
    sim_clock_free(c);
    own = node_times(e);
    if (own == NULL)
        return IPUOF_E_NOMEM;
    bottlenecks(e, p->ipu, own, p);
    free(own);
    return 0;
}

int
sim_exe_ipu_type(const struct sim_exe *e)
{
    return e->cost.ipu_type;
}

double
sim_exe_clock_hz(const struct sim_exe *e)
{
    return e->cost.clock_hz;
}

struct out {
    char *p;
    size_t len, cap;
    bool oom;
};

static void
put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        char *q = realloc(o->p, o->cap * 2 + (size_t)n + 1);
        if (q == NULL) {
            o->oom = true;
            return;
        }
        o->p = q;
        o->cap = o->cap * 2 + (size_t)n + 1;
    }
}

/* s as a JSON string's contents (quotes, backslashes and control bytes escaped). */
static void
put_json_str(struct out *o, const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            put(o, "\\%c", ch);
        else if (ch < 0x20)
            put(o, "\\u%04x", ch);
        else
            put(o, "%c", ch);
    }
}

static void
format_text(struct out *o, const struct sim_prediction *p, const struct sim_exe *e)
{
    double sum = 0;

    put(o, "predicted on %s IPUs (%.2f GHz): %.1f samples/s for %u replica%s "
        "(%.1f per replica), one step (%u device iteration%s x %u micro-batch%s of %u) "
        "%.6f s\n", sim_ipu_type_name(e->cost.ipu_type), e->cost.clock_hz / 1e9,
        p->samples_per_s, p->replicas, p->replicas == 1 ? "" : "s",
        p->samples_per_s / p->replicas, e->D, e->D == 1 ? "" : "s", e->A,
        e->A == 1 ? "" : "es", e->B ? e->B : 1, p->step_seconds);
    put(o, "bottleneck: IPU %u of each replica", p->ipu);
    if (p->stage >= 0)
        put(o, ", stage %d", p->stage);
    put(o, "; %.1f %% of peak\n", p->pct_peak);
    put(o, "time per step on IPU %u:\n", p->ipu);
    for (int k = 0; k < SIM_PARTS; k++) {
        put(o, "  %-12s %12.6f s  %5.1f %%\n", part_names[k], p->part[k],
            p->step_seconds > 0 ? 100.0 * p->part[k] / p->step_seconds : 0.0);
        sum += p->part[k];
    }
    put(o, "  %-12s %12.6f s  %5.1f %%\n", "waiting",
        p->step_seconds > sum ? p->step_seconds - sum : 0.0,
        p->step_seconds > sum && p->step_seconds > 0 ? 100.0 * (p->step_seconds - sum) /
                                                           p->step_seconds : 0.0);
    put(o, "op class with the most time: %s (%.6f s per micro-batch)\n", p->op_class,
        p->op_class_seconds);
    put(o, "layer with the most time: %s (%.6f s per micro-batch)\n", p->layer,
        p->layer_seconds);
}

static void
format_json(struct out *o, const struct sim_prediction *p, const struct sim_exe *e)
{
    put(o, "{\"ipu_type\":\"%s\",\"clock_hz\":%.17g,\"replicas\":%u,"
        "\"device_iterations\":%u,\"gradient_accumulation\":%u,\"micro_batch\":%u,"
        "\"samples_per_step\":%.17g,\"step_seconds\":%.17g,\"samples_per_s\":%.17g,"
        "\"bottleneck_ipu\":%u,\"bottleneck_stage\":%d,\"pct_peak\":%.17g,\"parts\":{",
        sim_ipu_type_name(e->cost.ipu_type), e->cost.clock_hz, p->replicas, e->D, e->A,
        e->B ? e->B : 1, p->samples_per_step, p->step_seconds, p->samples_per_s, p->ipu,
        p->stage, p->pct_peak);
    for (int k = 0; k < SIM_PARTS; k++)
        put(o, "%s\"%s\":%.17g", k ? "," : "", part_names[k], p->part[k]);
    put(o, "},\"op_class\":\"");
    put_json_str(o, p->op_class);
    put(o, "\",\"op_class_seconds\":%.17g,\"layer\":\"", p->op_class_seconds);
    put_json_str(o, p->layer);
    put(o, "\",\"layer_seconds\":%.17g}\n", p->layer_seconds);
}

int
sim_prediction_format(const struct sim_prediction *p, const struct sim_exe *e, int json,
                      char **out, size_t *len)
{
    struct out o = { malloc(1024), 0, 1024, false };

    *out = NULL;
    *len = 0;
    if (o.p == NULL)
        return IPUOF_E_NOMEM;
    o.p[0] = '\0';
    if (json)
        format_json(&o, p, e);
    else
        format_text(&o, p, e);
    if (o.oom) {
        free(o.p);
        return IPUOF_E_NOMEM;
    }
    *out = o.p;
    *len = o.len;
    return 0;
}

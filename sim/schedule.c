/*
 * schedule.c — the schedule of a run and its simulated clock (see schedule.h for the model).
 *
 * Schedules, per replica (N stages, A micro-batches per device iteration when training, D
 * micro-batches per run for inference):
 *   pipelined training  per device iteration A + 2N - 1 ticks; micro-batch m runs the
 *                       forward of stage s in tick m + s and its backward in tick
 *                       m + 2N - 1 - s: ramp-up (forwards only, one more IPU each tick),
 *                       steady state (every IPU runs a forward and a backward of different
 *                       micro-batches), ramp-down; then the reduction across replicas and
 *                       the weight update. Forward and backward of a stage share its IPU.
 *   pipelined inference D + N - 1 ticks; micro-batch m runs stage s in tick m + s.
 *   sharded             one micro-batch at a time: one tick per stage forward, then (when
 *                       training) one per stage backward in reverse order.
 *   serial phased       as sharded, each tick first loading its phase's weights from off
 *                       chip (the weights of the phases not running are held off chip).
 * Costs of one micro-batch per stage come from cost.c's FLOPs and bytes per node at the
 * executable's rates (sim_cost_cfg): compute = FLOPs / (peak x efficiency) + memory bytes /
 * on-chip bandwidth + input bytes / IPU-Exchange bandwidth; a backward costs twice its
 * forward for MatMul, Gemm and Conv (gradients of both operands) and once for other ops;
 * tensors that cross IPUs go over the IPU-Links, host streams over the host link, and each
 * tick ends with one sync.
 * Does not: run kernels. The executor (exec.c, train.c) computes the numbers; the figures
 * here depend only on shapes, placement and rates, so they are computed once at compile
 * time and the trace is replayed from the same walk.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

void
sim_clock_free(struct sim_clock *c)
{
    if (c == NULL)
        return;
    free(c->fwd);
    free(c->bwd);
    free(c->xfwd);
    free(c->xbwd);
    free(c->hin);
    free(c->hout);
    free(c->wload);
    free(c->update);
    free(c->stream);
    free(c->reduce);
    free(c->busy);
    free(c);
}

static double
compute_s(const struct sim_cost_cfg *r, double flops, double bytes, double in_bytes)
{
    return flops / (r->flops_per_s * r->efficiency) + bytes / r->mem_bytes_per_s +
           in_bytes / r->exchange_bytes_per_s;
}

static bool
two_operand_grad(const struct sim_enode *n)
{
    const char *op = n->op->name;

    return strcmp(op, "MatMul") == 0 || strcmp(op, "Gemm") == 0 || strcmp(op, "Conv") == 0;
}

/* Tensors crossing IPUs, per micro-batch: each IPU other than the producer's that reads an
 * activation receives it once, and sends its gradient back when it carries one. */
static int
exchange_bytes(const struct sim_exe *e, struct sim_clock *c, const struct sim_cost_cfg *r)
{
    uint64_t *sent = calloc((size_t)e->m->n_vals + 1, sizeof(*sent));  /* IPU bit masks */

    if (sent == NULL)
        return IPUOF_E_NOMEM;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            const struct sim_val *val = v >= 0 ? &e->vals[v] : NULL;
            double t;
            if (val == NULL || val->kind != SIM_V_ACT || val->producer < 0 ||
                val->ipu == n->ipu || (sent[v] >> n->ipu) & 1u)
                continue;
            sent[v] |= (uint64_t)1 << n->ipu;
            t = (double)val->bytes / r->link_bytes_per_s;
            c->xfwd[e->nodes[val->producer].stage] += t;
            if (val->grad)
                c->xbwd[n->stage] += t;
        }
    }
    free(sent);
    return 0;
}

/* Host streams: an input goes to the stage of its first reader, an output comes from the
 * stage of its producer (per returned micro-batch; Final and Sum once per run). */
static void
host_bytes(const struct sim_exe *e, struct sim_clock *c, const struct sim_cost_cfg *r)
{
    for (int i = 0; i < e->n_in; i++) {
        int stage = -1;
        for (int s = 0; s < e->n_nodes && stage < 0; s++)
            for (int j = 0; j < e->nodes[s].n_in; j++)
                if (e->nodes[s].in[j] == e->in[i].val)
                    stage = e->nodes[s].stage;
        if (stage >= 0)
            c->hin[stage] += (double)e->in[i].step_bytes / r->host_bytes_per_s;
    }
    for (int i = 0; i < e->n_out; i++) {
        const struct sim_exe_io *o = &e->out[i];
        const struct sim_val *v = &e->vals[o->val];
        int stage = v->kind == SIM_V_ACT && v->producer >= 0 ? e->nodes[v->producer].stage : 0;
        double t = (double)o->step_bytes / r->host_bytes_per_s;
        if (o->mode.kind == SIM_OUTPUT_FINAL || o->mode.kind == SIM_OUTPUT_SUM)
            c->hout_final += t;
        else
            c->hout[stage] += t * (double)o->iters / ((double)e->D * e->A);
    }
}

/* The weight update of each IPU, off-chip streaming around it, the all-reduce, and the
 * phased weight loads. */
static void
update_costs(const struct sim_exe *e, struct sim_clock *c, const struct sim_cost_cfg *r)
{
    for (int i = 0; i < e->n_w; i++) {
        const struct sim_weight *w = &e->w[i];
        double b = (double)w->bytes, state = 0;
        if (e->tr != NULL && w->kind == SIM_WEIGHT_TRAINABLE) {
            bool adam = e->tr->opt.kind != SIM_OPT_SGD;
            state = adam ? 2 : (e->tr->opt.momentum != 0.0f ? 1 : 0);
            /* read weight, gradient and state, write weight and state; ~4 FLOPs per state */
            c->update[w->ipu] += compute_s(r, (b / 4) * (2 + 4 * state),
                                           b * (3 + 2 * state), 0);
            if (e->location[SIM_LOC_OPTIMIZER])
                c->stream[w->ipu] += 2 * state * b / r->host_bytes_per_s;
            if (e->location[SIM_LOC_ACCUMULATORS])
                c->stream[w->ipu] += 2 * b / r->host_bytes_per_s;
            if (e->location[SIM_LOC_WEIGHTS])
                c->stream[w->ipu] += 2 * b / r->host_bytes_per_s;
            if (e->R > 1)
                c->reduce[w->ipu] += 2.0 * (e->R - 1) / e->R * b / r->link_bytes_per_s;
        }
    }
    if (e->strategy != SIM_STRATEGY_PHASED)
        return;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++) {
            const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
            if (v != NULL && (v->kind == SIM_V_WEIGHT || v->kind == SIM_V_CONST))
                c->wload[n->stage] += (double)v->bytes / r->host_bytes_per_s;
        }
    }
}

static int
stage_costs(const struct sim_exe *e, struct sim_clock *c)
{
    const struct sim_cost_cfg *r = &e->cost;
    size_t N = (size_t)e->n_stages, P = e->ipr;

    c->n_stages = e->n_stages;
    c->n_ipus = e->ipr;
    c->fwd = calloc(N, sizeof(double));
    c->bwd = calloc(N, sizeof(double));
    c->xfwd = calloc(N, sizeof(double));
    c->xbwd = calloc(N, sizeof(double));
    c->hin = calloc(N, sizeof(double));
    c->hout = calloc(N, sizeof(double));
    c->wload = calloc(N, sizeof(double));
    c->update = calloc(P, sizeof(double));
    c->stream = calloc(P, sizeof(double));
    c->reduce = calloc(P, sizeof(double));
    c->busy = calloc(P, sizeof(double));
    if (c->fwd == NULL || c->bwd == NULL || c->xfwd == NULL || c->xbwd == NULL ||
        c->hin == NULL || c->hout == NULL || c->wload == NULL || c->update == NULL ||
        c->stream == NULL || c->reduce == NULL || c->busy == NULL)
        return IPUOF_E_NOMEM;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        double flops, bytes, in_bytes = 0, t;
        sim_cost_node(e, s, &flops, &bytes);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0)
                in_bytes += (double)e->vals[n->in[j]].bytes;
        in_bytes += n->fused_in_bytes;
        t = compute_s(r, flops, bytes, in_bytes);
        c->fwd[n->stage] += t;
        if (n->bstep >= 0)
            c->bwd[n->stage] += two_operand_grad(n) ? 2 * t : t;
    }
    if (exchange_bytes(e, c, r) != 0)
        return IPUOF_E_NOMEM;
    host_bytes(e, c, r);
    update_costs(e, c, r);
    return 0;
}

/* ---- the walk ------------------------------------------------------------------------ */

struct item {
    int stage;
    bool bwd;
    long long mb;
};

struct walk {
    const struct sim_exe *e;
    struct sim_clock *c;
    sim_ev_fn fn;
    void *ud;
    double t;                   /* start of the next tick */
    double *end;                /* per IPU: end of its last span in this tick */
    long long iter;
    bool stopped;
};

static void
span(struct walk *w, int ipu, int kind, int stage, long long mb, double dur)
{
    struct sim_ev ev;

    if (dur <= 0)
        return;
    if (w->fn == NULL) {
        if (kind == SIM_EV_FWD || kind == SIM_EV_BWD || kind == SIM_EV_UPDATE)
            w->c->busy[ipu] += dur;
    } else if (!w->stopped) {
        ev = (struct sim_ev){ w->end[ipu], dur, ipu, kind, stage, mb, w->iter };
        w->stopped = !w->fn(&ev, w->ud);
    }
    w->end[ipu] += dur;
}

static void
tick_begin(struct walk *w)
{
    for (unsigned p = 0; p < w->c->n_ipus; p++)
        w->end[p] = w->t;
}

/* Ends a tick: the next starts after the slowest IPU and one sync. */
static void
tick_end(struct walk *w)
{
    double m = w->t;

    for (unsigned p = 0; p < w->c->n_ipus; p++)
        if (w->end[p] > m)
            m = w->end[p];
    w->t = m + w->e->cost.sync_s;
}

static void
tick(struct walk *w, const struct item *it, int n)
{
    const struct sim_clock *c = w->c;

    tick_begin(w);
    for (int i = 0; i < n; i++) {
        int s = it[i].stage, p = w->e->stage_ipu[s];
        if (w->e->strategy == SIM_STRATEGY_PHASED)
            span(w, p, SIM_EV_STREAM, s, it[i].mb, c->wload[s]);
        if (!it[i].bwd) {
            span(w, p, SIM_EV_HOST_IN, s, it[i].mb, c->hin[s]);
            span(w, p, SIM_EV_FWD, s, it[i].mb, c->fwd[s]);
            span(w, p, SIM_EV_EXCHANGE, s, it[i].mb, c->xfwd[s]);
            span(w, p, SIM_EV_HOST_OUT, s, it[i].mb, c->hout[s]);
        } else {
            span(w, p, SIM_EV_BWD, s, it[i].mb, c->bwd[s]);
            span(w, p, SIM_EV_EXCHANGE, s, it[i].mb, c->xbwd[s]);
        }
    }
    tick_end(w);
}

/* One device iteration of a training run (or the whole of an inference run). */
static void
micro_batches(struct walk *w, long long M)
{
    const struct sim_exe *e = w->e;
    int N = e->n_stages;
    bool train = e->tr != NULL;
    struct item it[2 * SIM_MAX_IPUS + 2];

    if (e->strategy == SIM_STRATEGY_PIPELINED) {
        int V = train ? 2 * N : N;
        long long ticks = M + V - 1;
        for (long long t = 0; t < ticks && !w->stopped; t++) {
            int n = 0;
            /* steady ticks are all alike: without a callback, time one and multiply */
            if (w->fn == NULL && t == V && ticks - V > V) {
                double t0 = w->t, *b0 = w->c->busy, saved[SIM_MAX_IPUS];
                long long reps = ticks - 2 * V;
                memcpy(saved, b0, sizeof(double) * w->c->n_ipus);
                for (int v = 0; v < V; v++)
                    it[n++] = (struct item){ v < N ? v : 2 * N - 1 - v, v >= N, t - v };
                tick(w, it, n);
                w->t = t0 + (w->t - t0) * (double)reps;
                for (unsigned p = 0; p < w->c->n_ipus; p++)
                    b0[p] = saved[p] + (b0[p] - saved[p]) * (double)reps;
                t += reps - 1;
                continue;
            }
            for (int v = 0; v < V; v++) {
                long long m = t - v;
                if (m >= 0 && m < M)
                    it[n++] = (struct item){ v < N ? v : 2 * N - 1 - v, v >= N, m };
            }
            tick(w, it, n);
        }
        return;
    }
    for (long long m = 0; m < M && !w->stopped; m++) {
        for (int s = 0; s < N; s++) {
            it[0] = (struct item){ s, false, m };
            tick(w, it, 1);
        }
        for (int s = N - 1; train && s >= 0; s--) {
            it[0] = (struct item){ s, true, m };
            tick(w, it, 1);
        }
        if (w->fn == NULL && m == 0 && M > 2) {
            /* every micro-batch costs the same (the walk started at 0) */
            w->t *= (double)M;
            for (unsigned p = 0; p < w->c->n_ipus; p++)
                w->c->busy[p] *= (double)M;
            break;
        }
    }
}

/* The reduction across replicas and the weight update closing a device iteration. */
static void
weight_update(struct walk *w)
{
    const struct sim_clock *c = w->c;

    if (w->e->R > 1) {
        tick_begin(w);
        for (unsigned p = 0; p < c->n_ipus; p++)
            span(w, (int)p, SIM_EV_REDUCE, -1, -1, c->reduce[p]);
        tick_end(w);
    }
    tick_begin(w);
    for (unsigned p = 0; p < c->n_ipus; p++) {
        span(w, (int)p, SIM_EV_STREAM, -1, -1, c->stream[p] / 2);
        span(w, (int)p, SIM_EV_UPDATE, -1, -1, c->update[p]);
        span(w, (int)p, SIM_EV_STREAM, -1, -1, c->stream[p] / 2);
    }
    tick_end(w);
}

double
sim_sched_walk(const struct sim_exe *e, struct sim_clock *c, sim_ev_fn fn, void *ud)
{
    double end[SIM_MAX_IPUS];
    struct walk w = { e, c, fn, ud, 0.0, end, 0, false };

    if (fn == NULL)
        memset(c->busy, 0, sizeof(double) * c->n_ipus);
    if (e->tr == NULL) {
        micro_batches(&w, e->D);
    } else {
        for (long long d = 0; d < e->D && !w.stopped; d++) {
            double t0 = w.t;
            w.iter = d;
            micro_batches(&w, e->A);
            weight_update(&w);
            if (fn == NULL && d == 0 && e->D > 1) {
                /* every device iteration costs the same */
                w.t = t0 + (w.t - t0) * (double)e->D;
                for (unsigned p = 0; p < c->n_ipus; p++)
                    c->busy[p] *= (double)e->D;
                break;
            }
        }
    }
    if (c->hout_final > 0) {
        tick_begin(&w);
        span(&w, 0, SIM_EV_HOST_OUT, -1, -1, c->hout_final);
        tick_end(&w);
    }
    return w.t;
}

int
sim_sched_build(struct sim_exe *e, struct sim_err *err)
{
    const struct sim_cost_cfg *r = &e->cost;
    struct sim_clock *c;

    if (!(r->flops_per_s > 0) || !(r->mem_bytes_per_s > 0) ||
        !(r->exchange_bytes_per_s > 0) || !(r->link_bytes_per_s > 0) ||
        !(r->host_bytes_per_s > 0) || !(r->sync_s >= 0) || !(r->efficiency > 0) ||
        r->efficiency > 1)
        return sim_err_set(err, IPUOF_E_INVAL, "the cost rates must be positive (the sync "
                           "time may be 0) and the efficiency in (0, 1]; "
                           "sim_cost_cfg_init() sets the GC200's figures");
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    e->clock = c;
    if (stage_costs(e, c) != 0)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    c->device_seconds = sim_sched_walk(e, c, NULL, NULL);
    return 0;
}

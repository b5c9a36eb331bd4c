/*
 * schedule.c — the schedule of a run and its simulated clock (see schedule.h for the model).
 *
 * The schedule is each IPU's program (program.h states every strategy's step formula; built
 * by program.c): the walk replays the programs of one replica's IPUs tick by tick, each step
 * a span of its cost (a stage's forward, backward, host streams, sends; the phased weight
 * loads; the reduction, the streamed state and the update), so the clock and the IPU
 * threads (ipus.c), which interpret the same programs, cannot disagree about the schedule.
 * Costs of one micro-batch per stage come from cost.c's FLOPs and bytes per node at the
 * executable's rates (sim_cost_cfg): compute = FLOPs / (peak x efficiency) + memory bytes /
 * on-chip bandwidth + input bytes / IPU-Exchange bandwidth; a backward costs twice its
 * forward for MatMul, Gemm and Conv (gradients of both operands) and once for other ops;
 * tensors that cross IPUs go over the IPU-Links, host streams over the host link, and each
 * tick ends with one sync.
 * Does not: run kernels or decide the schedule. The executor (exec.c, train.c, ipus.c)
 * computes the numbers; the figures here depend only on shapes, placement and rates, so
 * they are computed once at compile time and the trace is replayed from the same walk.
 */
#include <stdlib.h>
#include <string.h>

#include "program.h"
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
    free(c->fpart);
    free(c->bpart);
    free(c->part);
    free(c->io);
    free(c);
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

/* The host link's rate for one IPU: the machine's link shared by the IPUs of the job on
 * it (at most host_ipus). */
static double
host_rate(const struct sim_exe *e, const struct sim_clock *c)
{
    const struct sim_cost_cfg *r = &e->cost;
    unsigned ipus = c->R * e->ipr, share = r->host_ipus > 0 ? r->host_ipus : 1;

    return r->host_bytes_per_s / (double)(ipus < share ? ipus : share);
}

/* Host streams: an input goes to the stage of its first reader, an output comes from the
 * stage of its producer (per returned micro-batch; Final and Sum once per run); each
 * transfer also pays the fixed cost of a host exchange. Synthetic data: none. */
static void
host_bytes(const struct sim_exe *e, struct sim_clock *c, const struct sim_cost_cfg *r)
{
    double rate = host_rate(e, c);

    if (r->synthetic)
        return;
    for (int i = 0; i < e->n_in; i++) {
        int stage = -1;
        for (int s = 0; s < e->n_nodes && stage < 0; s++)
            for (int j = 0; j < e->nodes[s].n_in; j++)
                if (e->nodes[s].in[j] == e->in[i].val)
                    stage = e->nodes[s].stage;
        if (stage >= 0)
            c->hin[stage] += (double)e->in[i].step_bytes / rate + r->host_xfer_s;
    }
    for (int i = 0; i < e->n_out; i++) {
        const struct sim_exe_io *o = &e->out[i];
        const struct sim_val *v = &e->vals[o->val];
        int stage = v->kind == SIM_V_ACT && v->producer >= 0 ? e->nodes[v->producer].stage : 0;
        double t = (double)o->step_bytes / rate + r->host_xfer_s;
        if (o->mode.kind == SIM_OUTPUT_FINAL || o->mode.kind == SIM_OUTPUT_SUM)
            c->hout_final += t;
        else
            c->hout[stage] += t * (double)o->iters / ((double)e->D * e->A);
    }
}

/* The all-reduce of b bytes over R replicas of `ipr` IPUs each, as a ring (2 (R-1)/R of
 * the bytes through each IPU): over IPU-Links within a Pod, and through the GW-Links
 * (a machine's, shared by its IPUs) between Pods. */
static double
allreduce_s(const struct sim_cost_cfg *r, unsigned R, unsigned ipr, double b)
{
    double t, pods, per_pod = r->ipus_per_pod > 0 ? r->ipus_per_pod : 1;

    if (R <= 1)
        return 0;
    t = 2.0 * (R - 1) / R * b / r->link_bytes_per_s + r->sync_s;
    pods = (double)R * ipr / per_pod;
    if (pods > 1 && r->gw_link_bytes_per_s > 0) {
        double h = (double)(long long)pods + ((double)(long long)pods < pods ? 1 : 0);
        double gw = r->gw_link_bytes_per_s / (r->host_ipus > 0 ? r->host_ipus : 1);
        t += 2.0 * (h - 1) / h * b / gw + r->sync_s;
    }
    return t;
}

/* The weight update of each IPU (vector work, a compute set per weight), off-chip
 * streaming around it, the all-reduce, and the phased weight loads. */
static void
update_costs(const struct sim_exe *e, struct sim_clock *c, const struct sim_cost_cfg *r)
{
    double vec = (double)(e->tiles > 0 ? e->tiles : 1) * 2 * r->clock_hz;
    double rate = host_rate(e, c);

    for (int i = 0; i < e->n_w; i++) {
        const struct sim_weight *w = &e->w[i];
        double b = (double)w->bytes, state = 0;
        if (e->tr != NULL && w->kind == SIM_WEIGHT_TRAINABLE) {
            bool adam = e->tr->opt.kind != SIM_OPT_SGD;
            state = adam ? 2 : (e->tr->opt.momentum != 0.0f ? 1 : 0);
            /* read weight, gradient and state, write weight and state; ~4 FLOPs per state */
            c->update[w->ipu] += (b / 4) * (2 + 4 * state) / vec +
                                 b * (3 + 2 * state) / r->mem_bytes_per_s +
                                 r->cs_cycles / r->clock_hz;
            if (e->location[SIM_LOC_OPTIMIZER])
                c->stream[w->ipu] += 2 * state * b / rate;
            if (e->location[SIM_LOC_ACCUMULATORS])
                c->stream[w->ipu] += 2 * b / rate;
            if (e->location[SIM_LOC_WEIGHTS])
                c->stream[w->ipu] += 2 * b / rate;
            c->reduce[w->ipu] += allreduce_s(r, c->R, e->ipr, b);
            if (e->tr->xr.fn != NULL && e->tr->xr.bytes_per_s > 0) { /* between executables */
                double h = (double)e->tr->xr.replicas / e->R;
                c->reduce[w->ipu] += 2.0 * (h - 1) / h * b / e->tr->xr.bytes_per_s;
            }
        }
    }
    if (e->strategy != SIM_STRATEGY_PHASED)
        return;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++) {
            const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
            if (v != NULL && (v->kind == SIM_V_WEIGHT || v->kind == SIM_V_CONST))
                c->wload[n->stage] += (double)v->bytes / rate;
        }
    }
}

/* The FLOPs of one micro-batch and the peak rate of the class of AMP work with the most. */
static void
flop_totals(const struct sim_exe *e, struct sim_clock *c)
{
    double by_rate[3] = { 0, 0, 0 }, best = -1;     /* 32.32, 16.32, 16.16 */
    const double mul[3] = { 1, 2, 4 };

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        double flops, bytes;
        int k = !n->half ? 0 : e->partials_half ? 2 : 1;
        sim_cost_node(e, s, &flops, &bytes);
        if (n->bstep >= 0 && e->tr != NULL)
            flops *= strcmp(n->op->name, "Conv") == 0 || strcmp(n->op->name, "MatMul") == 0 ||
                     strcmp(n->op->name, "Gemm") == 0 ? 3 : 2;
        by_rate[k] += flops;
        c->flops += flops;
    }
    for (int k = 0; k < 3; k++)
        if (by_rate[k] > best) {
            best = by_rate[k];
            c->peak_flops_per_s = e->cost.flops_per_s * mul[k];
        }
}

static int
stage_alloc(struct sim_clock *c, size_t N, size_t P)
{
    c->fwd = calloc(N, sizeof(double));
    c->bwd = calloc(N, sizeof(double));
    c->xfwd = calloc(N, sizeof(double));
    c->xbwd = calloc(N, sizeof(double));
    c->hin = calloc(N, sizeof(double));
    c->hout = calloc(N, sizeof(double));
    c->wload = calloc(N, sizeof(double));
    c->fpart = calloc(N, sizeof(*c->fpart));
    c->bpart = calloc(N, sizeof(*c->bpart));
    c->update = calloc(P, sizeof(double));
    c->stream = calloc(P, sizeof(double));
    c->reduce = calloc(P, sizeof(double));
    c->busy = calloc(P, sizeof(double));
    c->io = calloc(P, sizeof(double));
    c->part = calloc(P * SIM_PARTS, sizeof(double));
    if (c->fwd == NULL || c->bwd == NULL || c->xfwd == NULL || c->xbwd == NULL ||
        c->hin == NULL || c->hout == NULL || c->wload == NULL || c->update == NULL ||
        c->stream == NULL || c->reduce == NULL || c->busy == NULL || c->fpart == NULL ||
        c->bpart == NULL || c->io == NULL || c->part == NULL)
        return IPUOF_E_NOMEM;
    return 0;
}

static int
stage_costs(const struct sim_exe *e, struct sim_clock *c)
{
    const struct sim_cost_cfg *r = &e->cost;

    c->n_stages = e->n_stages;
    c->n_ipus = e->ipr;
    c->fixed = r->step_s;
    if (stage_alloc(c, (size_t)e->n_stages, e->ipr) != 0)
        return IPUOF_E_NOMEM;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        struct sim_node_cost t;
        sim_cost_node_time(e, s, &t);
        for (int k = 0; k < 3; k++) {
            c->fpart[n->stage][k] += t.fwd[k];
            c->fwd[n->stage] += t.fwd[k];
            if (n->bstep >= 0) {
                c->bpart[n->stage][k] += t.bwd[k];
                c->bwd[n->stage] += t.bwd[k];
            }
            if (n->rstep >= 0) {        /* its forward again, in the backward (recompute.c) */
                c->bpart[n->stage][k] += t.fwd[k];
                c->bwd[n->stage] += t.fwd[k];
            }
        }
    }
    if (exchange_bytes(e, c, r) != 0)
        return IPUOF_E_NOMEM;
    host_bytes(e, c, r);
    update_costs(e, c, r);
    flop_totals(e, c);
    return 0;
}

/* ---- the walk: the IPUs' programs replayed with durations ---------------------------- */

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

/* Adds dur to IPU p's parts: a stage's forward or backward by its split, the rest by
 * its kind. */
static void
add_part(struct walk *w, int p, int kind, int stage, double dur)
{
    double *pt = &w->c->part[(size_t)p * SIM_PARTS];
    const double *sp = NULL;
    double whole;

    if (kind == SIM_EV_FWD || kind == SIM_EV_BWD) {
        sp = kind == SIM_EV_FWD ? w->c->fpart[stage] : w->c->bpart[stage];
        whole = sp[0] + sp[1] + sp[2];
        for (int k = 0; k < 3 && whole > 0; k++)
            pt[k] += dur * (sp[k] / whole);
    } else if (kind == SIM_EV_UPDATE) {
        pt[SIM_PART_COMPUTE] += dur;
    } else if (kind == SIM_EV_EXCHANGE) {
        pt[SIM_PART_EXCHANGE] += dur;
    } else if (kind == SIM_EV_REDUCE) {
        pt[SIM_PART_COLLECTIVE] += dur;
    } else {
        pt[SIM_PART_HOST] += dur;
    }
}

static void
span(struct walk *w, int ipu, int kind, int stage, long long mb, double dur)
{
    struct sim_ev ev;
    bool io = (kind == SIM_EV_HOST_IN || kind == SIM_EV_HOST_OUT) && w->e->cost.io_tiles > 0;

    if (dur <= 0)
        return;
    if (w->fn == NULL) {
        if (kind == SIM_EV_FWD || kind == SIM_EV_BWD || kind == SIM_EV_UPDATE)
            w->c->busy[ipu] += dur;
    } else if (!w->stopped) {
        ev = (struct sim_ev){ io ? w->t + w->c->io[ipu] : w->end[ipu], dur, ipu, kind, stage,
                              mb, w->iter };
        w->stopped = !w->fn(&ev, w->ud);
    }
    if (io) {                   /* the IO tiles move it while the others compute */
        w->c->io[ipu] += dur;
        return;
    }
    if (w->fn == NULL)
        add_part(w, ipu, kind, stage, dur);
    w->end[ipu] += dur;
}

static void
tick_begin(struct walk *w)
{
    for (unsigned p = 0; p < w->c->n_ipus; p++) {
        w->end[p] = w->t;
        w->c->io[p] = 0;
    }
}

/* Ends a tick: the next starts after the slowest IPU (or its IO tiles' transfers, when
 * they take longer) and one sync. */
static void
tick_end(struct walk *w)
{
    double m = w->t;

    for (unsigned p = 0; p < w->c->n_ipus; p++) {
        double end = w->end[p];
        if (w->t + w->c->io[p] > end) {
            if (w->fn == NULL)
                w->c->part[(size_t)p * SIM_PARTS + SIM_PART_HOST] += w->t + w->c->io[p] - end;
            end = w->t + w->c->io[p];
        }
        if (end > m)
            m = end;
        if (w->fn == NULL)
            w->c->part[(size_t)p * SIM_PARTS + SIM_PART_SYNC] += w->e->cost.sync_s;
    }
    w->t = m + w->e->cost.sync_s;
}

/* The span of step st of IPU p in repetition i of its segment (none for the steps that
 * take no time on the clock: receives, which the sender's exchange pays, and the sync). */
static void
step_span(struct walk *w, int p, const struct sim_step *st, unsigned i)
{
    const struct sim_clock *c = w->c;
    int s = st->stage;
    long long mb = s >= 0 ? (long long)st->mb + i : -1;

    switch (st->kind) {
    case SIM_STEP_LOAD:
        span(w, p, SIM_EV_STREAM, s, mb, c->wload[s]);
        break;
    case SIM_STEP_HOST_IN:
        span(w, p, SIM_EV_HOST_IN, s, mb, c->hin[s]);
        break;
    case SIM_STEP_FWD:
        span(w, p, SIM_EV_FWD, s, mb, c->fwd[s]);
        break;
    case SIM_STEP_SEND:
        span(w, p, SIM_EV_EXCHANGE, s, mb, c->xfwd[s]);
        break;
    case SIM_STEP_HOST_OUT:
        span(w, p, SIM_EV_HOST_OUT, s, mb, c->hout[s]);
        break;
    case SIM_STEP_BWD:
        span(w, p, SIM_EV_BWD, s, mb, c->bwd[s]);
        break;
    case SIM_STEP_GSEND:
        span(w, p, SIM_EV_EXCHANGE, s, mb, c->xbwd[s]);
        break;
    case SIM_STEP_REDUCE:
        span(w, p, SIM_EV_REDUCE, -1, -1, c->reduce[p]);
        break;
    case SIM_STEP_STREAM:
        span(w, p, SIM_EV_STREAM, -1, -1, c->stream[p] / 2);
        break;
    case SIM_STEP_UPDATE:
        span(w, p, SIM_EV_UPDATE, -1, -1, c->update[p]);
        break;
    default:
        break;
    }
}

/* A work of a tick: IPU p's steps [lo, hi), all with the same key. */
struct work {
    int key;
    int p, lo, hi;
};

/* Replays the next tick of every IPU's block (cur[p]: its next step), the works laid out
 * in key order (program.h), and moves each cursor past its IPU's end of the tick. */
static void
replay_tick(struct walk *w, const struct sim_step *const *st, const int *n, int *cur,
            unsigned i)
{
    struct work wk[2 * SIM_MAX_IPUS];
    int nw = 0;

    for (unsigned p = 0; p < w->c->n_ipus; p++) {
        int j = cur[p];
        while (j < n[p] && st[p][j].kind != SIM_STEP_TICK) {
            struct work x = { st[p][j].key, (int)p, j, j };
            int at = nw;
            while (j < n[p] && st[p][j].kind != SIM_STEP_TICK && st[p][j].key == x.key)
                j++;
            x.hi = j;
            while (at > 0 && wk[at - 1].key > x.key) {      /* stable insertion */
                wk[at] = wk[at - 1];
                at--;
            }
            wk[at] = x;
            nw++;
        }
        cur[p] = j + 1;
    }
    tick_begin(w);
    for (int k = 0; k < nw; k++)
        for (int j = wk[k].lo; j < wk[k].hi; j++)
            step_span(w, wk[k].p, &st[wk[k].p][j], i);
    tick_end(w);
}

/* The program once: one device iteration of a training run, or an inference run. */
static void
replay(struct walk *w)
{
    const struct sim_prog *g = w->e->prog;
    unsigned P = w->c->n_ipus;

    for (int s = 0; s < g->n_seg && !w->stopped; s++) {
        const struct sim_seg *sg = &g->seg[s];
        const struct sim_step *st[SIM_MAX_IPUS];
        int n[SIM_MAX_IPUS], cur[SIM_MAX_IPUS];
        for (unsigned p = 0; p < P; p++)
            st[p] = sim_prog_steps(g, p, s, &n[p]);
        for (unsigned i = 0; i < sg->reps && !w->stopped; i++) {
            /* without a callback, time one repetition and multiply: they cost the same */
            bool once = w->fn == NULL && sg->scale;
            double t0 = w->t, *b0 = w->c->busy, saved[SIM_MAX_IPUS];
            double *p0 = w->c->part, psaved[SIM_MAX_IPUS * SIM_PARTS];
            if (once) {
                memcpy(saved, b0, sizeof(double) * P);
                memcpy(psaved, p0, sizeof(double) * P * SIM_PARTS);
            }
            memset(cur, 0, sizeof(int) * P);
            while (cur[0] < n[0])
                replay_tick(w, st, n, cur, i);
            if (once) {
                w->t = t0 + (w->t - t0) * (double)sg->reps;
                for (unsigned p = 0; p < P; p++)
                    b0[p] = saved[p] + (b0[p] - saved[p]) * (double)sg->reps;
                for (unsigned k = 0; k < P * SIM_PARTS; k++)
                    p0[k] = psaved[k] + (p0[k] - psaved[k]) * (double)sg->reps;
                break;
            }
        }
    }
}

double
sim_sched_walk(const struct sim_exe *e, struct sim_clock *c, sim_ev_fn fn, void *ud)
{
    double end[SIM_MAX_IPUS];
    struct walk w = { e, c, fn, ud, 0.0, end, 0, false };
    unsigned iters = e->tr != NULL ? e->D : 1;

    if (fn == NULL) {
        memset(c->busy, 0, sizeof(double) * c->n_ipus);
        memset(c->part, 0, sizeof(double) * c->n_ipus * SIM_PARTS);
    }
    /* the fixed cost of a run: the host starts the program and waits for its end */
    w.t += c->fixed;
    if (fn == NULL)
        for (unsigned p = 0; p < c->n_ipus; p++)
            c->part[(size_t)p * SIM_PARTS + SIM_PART_HOST] += c->fixed;
    for (unsigned d = 0; d < iters && !w.stopped; d++) {
        double t0 = w.t;
        w.iter = e->tr != NULL ? d : 0;
        replay(&w);
        if (fn == NULL && d == 0 && iters > 1) {
            /* every device iteration costs the same */
            w.t = t0 + (w.t - t0) * (double)iters;
            for (unsigned p = 0; p < c->n_ipus; p++)
                c->busy[p] *= (double)iters;
            for (unsigned p = 0; p < c->n_ipus; p++)
                for (int k = 0; k < SIM_PARTS; k++) {
                    double *x = &c->part[(size_t)p * SIM_PARTS + k];
                    double f = k == SIM_PART_HOST ? c->fixed : 0;
                    *x = f + (*x - f) * (double)iters;
                }
            break;
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
sim_clock_build(const struct sim_exe *e, unsigned R, struct sim_clock *c)
{
    c->R = R > 0 ? R : e->R;
    if (stage_costs(e, c) != 0)
        return IPUOF_E_NOMEM;
    c->device_seconds = sim_sched_walk(e, c, NULL, NULL);
    return 0;
}

int
sim_sched_build(struct sim_exe *e, struct sim_err *err)
{
    const struct sim_cost_cfg *r = &e->cost;
    struct sim_clock *c;

    if (!(r->flops_per_s > 0) || !(r->mem_bytes_per_s > 0) ||
        !(r->exchange_bytes_per_s > 0) || !(r->link_bytes_per_s > 0) ||
        !(r->host_bytes_per_s > 0) || !(r->sync_s >= 0) || !(r->efficiency > 0) ||
        r->efficiency > 1 || !(r->matmul_efficiency > 0) || r->matmul_efficiency > 1 ||
        !(r->clock_hz > 0) || !(r->cs_cycles >= 0) ||
        !(r->host_xfer_s >= 0) || !(r->step_s >= 0) || !(r->amp > 0) || r->amp > 1 ||
        !(r->gw_link_bytes_per_s >= 0))
        return sim_err_set(err, IPUOF_E_INVAL, "the cost rates must be positive (the sync "
                           "time, fixed costs and GW-Link rate may be 0), the efficiencies and "
                           "the available memory proportion in (0, 1]; "
                           "sim_cost_cfg_init() sets the GC200's figures");
    if (r->io_tiles > 0 && r->io_tiles >= e->tiles)
        return sim_err_set(err, IPUOF_E_INVAL, "numIOTiles %u leaves no compute tiles of the "
                           "IPU's %u; use fewer IO tiles (PopTorch: 32 to 192)",
                           r->io_tiles, e->tiles);
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    e->clock = c;
    if (e->prog == NULL) {
        int rc = sim_prog_build(e, err);
        if (rc != 0)
            return rc;
    }
    if (sim_clock_build(e, e->R, c) != 0)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    return 0;
}

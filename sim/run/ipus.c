/*
 * ipus.c — the one executor of every run: each simulated IPU, (replica, IPU), is a thread
 * of the crew (crew.c), created at the first run and joined when the executable is freed;
 * a model on one IPU, one replica or many, inference or training, runs here as a model
 * over several IPUs does (one-IPU replicas beyond SIM_MAX_IPUS share the threads, each
 * running its replicas' programs one after another, segment by segment). The threads of a
 * replica do not meet at ticks: each steps through its own program and waits only where a
 * step needs another IPU (ticks.c): the IPU that holds a stage's work receives the
 * activations (forward) or gradients (backward) other IPUs sent it through the exchange
 * buffers (e->xbuf, owned by neither arena) once they were sent, runs the stage's kernels
 * on its own arena, then sends what other IPUs will read (struct sim_xfer) once the buffer
 * it writes was read; the n-th send of a transfer writes its buffer n % depth, read by the
 * n-th receive. So a thread is woken only when a step it can run became runnable, by the
 * thread that made it so (sim_exe_thread_wakes counts the wakes), and the tick's order is
 * kept where it matters: every step runs after the steps it reads, as in the schedule. A
 * thread that stops sets abort_run and wakes the others, which stop at their next tick or
 * wait (a cancel is seen within 20 ms by a waiting thread). Host input and output views of a stage are patched by the IPU that
 * runs it, and outputs are copied to the host by the IPU that holds them. In training,
 * after the micro-batches of a device iteration, all threads of all replicas meet at the
 * crew's barrier for the collective (thread 0 reduces the accumulators across replicas,
 * sim_train_reduce, and updates the weights, sim_optim_step).
 *
 * Each thread interprets its own IPU's program (program.h: the steps of each strategy, built
 * once at compile time; the simulated clock replays the same program): a stage's work is
 * its receive, host-input, run, send and host-output steps (forward) or its gradient
 * receive, run and gradient send steps (backward), and training's collective segment is run
 * by every thread, stopped or not.
 * An IPU holds each micro-batch in flight in a slot of its own (e->slots[p] copies of its
 * arena, each with its own kernel bindings: micro-batch m uses slot m % slots[p]), and an
 * exchange buffer has depth copies (a sender runs at most depth sends ahead of its reader).
 * Nothing is allocated here: every buffer and view is bound at compile time.
 * Does not: decide placement (place.c), the schedule (program.c), memory (plan.c) or time
 * (schedule.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "half.h"
#include "feed.h"
#include "pool.h"
#include "program.h"
#include "ticks.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

/* Where IPU src's kernel wrote value v in lane L (its arena, or an output slot). */
static const void *
produced(const struct sim_exe *e, const struct sim_xfer *x, unsigned L)
{
    const struct sim_val *v = &e->vals[x->val];
    const struct sim_kern *k = &e->kern[(size_t)L * e->n_nodes + (size_t)v->producer];

    for (int j = 0; j < k->n_out; j++)
        if (e->nodes[v->producer].out[j] == x->val)
            return k->out[j].data;
    return NULL;
}

/* One micro-batch's work of a stage, as a thread runs it. */
struct item {
    unsigned r;
    int k;
    unsigned d, a;              /* device iteration, accumulation step */
    unsigned m;                 /* micro-batch: a (training) or d (inference) */
    long long t;                /* the logged schedule step (program.h) */
};

/* Appends an item to the step log (tests), when one is set. */
static void
log_item(struct sim_exe *e, const struct item *it, bool bwd, double t0, double c0)
{
    size_t i = atomic_fetch_add(&e->log_n, 1);
    struct sim_step_rec *rec;

    if (i >= e->log_cap)
        return;
    rec = &e->log[i];
    rec->replica = it->r;
    rec->ipu = (unsigned)e->stage_ipu[it->k];
    rec->stage = it->k;
    rec->backward = bwd;
    rec->iteration = it->d;
    rec->micro_batch = it->m;
    rec->step = it->t;
    rec->thread = (unsigned long)pthread_self();
    rec->t0 = t0;
    rec->t1 = sim_now_s(CLOCK_MONOTONIC);
    rec->cpu = sim_now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
}

/* The lane of IPU p for micro-batch m of replica r. */
static unsigned
lane(const struct sim_exe *e, unsigned r, int p, unsigned m)
{
    return r * e->S + m % e->slots[p];
}

/* Whether this thread should stop before the next step. */
static bool
must_stop(struct sim_exe *e, int rc, uint_fast64_t id)
{
    return rc != 0 || atomic_load_explicit(&e->abort_run, memory_order_relaxed) ||
           sim_exe_cancelled(e, id);
}

/* The state of one simulated IPU as a crew thread interprets its program. */
struct ipu_thread {
    struct sim_exe *e;
    const struct sim_prog *g;
    uint_fast64_t id;
    unsigned idx;               /* the crew thread */
    unsigned u;                 /* the simulated IPU: r x ipr + p (e->trc, e->terr) */
    unsigned r;
    int p;
    struct sim_ticks *tk;       /* the run's exchange counts; NULL without transfers */
    struct sim_err *err;
    int rc;
    bool stop;                  /* this replica stopped at the last tick */
    bool abort_all;             /* the collective: some thread stopped, nobody updates */
    struct item last;           /* the last work, for messages */
    double t0, c0;              /* its start, for the step log */
    unsigned wakes, polls;      /* added to e->wakes, e->polls when the run ends */
};

/* Whether the run of thread ud was cancelled (sim_feed_wait_in asks while waiting). */
static bool
thread_cancelled(void *ud)
{
    const struct ipu_thread *th = ud;

    return sim_exe_cancelled(th->e, th->id) ||
           atomic_load_explicit(&th->e->abort_run, memory_order_relaxed);
}

/* What a step returns when another thread stopped the run while it waited. */
#define STOPPED (-1000)

/* Thread th waits until count c of transfer x of its replica reaches need: 0, or STOPPED. */
static int
await_count(struct ipu_thread *th, int x, int c, uint64_t need)
{
    return sim_ticks_wait(th->tk, th->u, th->r, x, c, need, thread_cancelled, th, &th->wakes,
                          &th->polls) == 0 ? 0 : STOPPED;
}

/* The thread of IPU p of th's replica. */
static unsigned
peer(const struct ipu_thread *th, int p)
{
    return th->r * th->e->ipr + (unsigned)p;
}

/* The forward's steps of a stage's work (program.h): receive, host input, run, send,
 * host output; it is micro-batch it->m in lane L. */
static int
fwd_step(struct ipu_thread *th, const struct sim_step *st, const struct item *it,
         unsigned L)
{
    struct sim_exe *e = th->e;
    char *ar = e->arenas[L * e->ipr + (unsigned)th->p];
    char *xb = e->xbuf + (size_t)it->r * e->xbytes;
    const struct sim_kern *kn = &e->kern[(size_t)L * e->n_nodes];
    int rc = 0;

    switch (st->kind) {
    case SIM_STEP_RECV:     /* the n-th receive reads what the n-th send wrote */
        for (int i = st->lo; i < st->hi; i++) {
            int xi = th->g->xi[i];
            const struct sim_xfer *x = &e->xfer[xi];
            size_t bytes = e->vals[x->val].bytes;
            uint64_t n = sim_ticks_get(th->tk, it->r, xi, SIM_TK_RECVD);
            if (await_count(th, xi, SIM_TK_SENT, n + 1) != 0)
                return STOPPED;
            memcpy(ar + x->off, xb + x->xoff + n % x->depth * sim_align(bytes), bytes);
            sim_ticks_post(th->tk, it->r, xi, SIM_TK_RECVD, n + 1, peer(th, x->src));
        }
        break;
    case SIM_STEP_HOST_IN:
        if (e->feed != NULL) {      /* the step's rows may still be arriving */
            rc = sim_feed_wait_in(e->feed, (uint64_t)it->d * e->A + it->a, thread_cancelled,
                                  th, th->err);
            if (rc != 0)
                return rc;
        }
        sim_exec_patch_stage(e, it->d, it->a, it->r, L, it->k);
        break;
    case SIM_STEP_FWD:
        for (int s = e->stage_node[it->k], end = sim_stage_end(e, it->k); s < end && rc == 0;
             s++) {
            if (sim_exe_cancelled(e, th->id))
                return sim_err_set(th->err, IPUOF_E_CANCELLED, "the run was cancelled");
            rc = sim_exec_node_forward(e, s, &kn[s], th->err);
        }
        break;
    case SIM_STEP_SEND:     /* once the buffer's previous micro-batch was read */
        for (int i = st->lo; i < st->hi; i++) {
            int xi = th->g->xi[i];
            const struct sim_xfer *x = &e->xfer[xi];
            size_t bytes = e->vals[x->val].bytes;
            uint64_t n = sim_ticks_get(th->tk, it->r, xi, SIM_TK_SENT);
            if (n >= x->depth && await_count(th, xi, SIM_TK_RECVD, n + 1 - x->depth) != 0)
                return STOPPED;
            memcpy(xb + x->xoff + n % x->depth * sim_align(bytes), produced(e, x, L), bytes);
            sim_ticks_post(th->tk, it->r, xi, SIM_TK_SENT, n + 1, peer(th, x->dst));
        }
        break;
    case SIM_STEP_HOST_OUT:
        sim_exec_outputs(e, it->d, it->a, it->r, L, it->k);
        if (e->feed != NULL)
            sim_feed_out_done(e->feed, (uint64_t)it->d * e->A + it->a);
        if (e->log != NULL)
            log_item(e, it, false, th->t0, th->c0);
        break;
    default:
        break;
    }
    return rc;
}

/* Whether value v is an activation of an arena (what plan.c frees). */
static bool
arena_act(const struct sim_exe *e, int v)
{
    return v >= 0 && e->vals[v].kind == SIM_V_ACT && e->vals[v].out_io < 0;
}

/* The kernel node s's gradient rule runs with in lane L: src (its bound backward
 * kernel) when nothing changes, else dst, a copy with its views in views[]
 * (SIM_RC_MAX_VIEWS): repointed at the recomputed copies (sim_recompute_kern) when the
 * node's are, and NULL for each activation the rule does not read (the op table's
 * bwd_reads): plan.c frees those before the backward step, so a rule reading one fails
 * loudly rather than reading another tensor. */
static const struct sim_kern *
bwd_kern(const struct sim_exe *e, unsigned L, int s, const struct sim_kern *src,
                   struct sim_kern *dst, struct sim_tensor *views)
{
    const struct sim_enode *n = &e->nodes[s];
    int ni = n->n_in, no = n->n_out;
    uint32_t reads = sim_node_bwd_reads(e, s);

    if (ni + no > SIM_RC_MAX_VIEWS || (!n->rviews && reads == SIM_BWD_ALL))
        return src;
    if (n->rviews) {
        sim_recompute_kern(e, L, n, src, dst, views);
    } else {
        *dst = *src;
        memcpy(views, src->in, (size_t)ni * sizeof(*views));
        memcpy(views + ni, src->out, (size_t)no * sizeof(*views));
        dst->in = views;
        dst->out = views + ni;
    }
    for (int j = 0; j < ni; j++)
        if (!sim_bwd_reads_in(reads, j) && arena_act(e, n->in[j]))
            views[j].data = NULL;
    for (int j = 0; j < no; j++)
        if (!sim_bwd_reads_out(reads, j) && arena_act(e, n->out[j]))
            views[ni + j].data = NULL;
    return dst;
}

/* The backward's steps of a stage's work: receive gradients, run, send gradients. */
static int
bwd_step(struct ipu_thread *th, const struct sim_step *st, const struct item *it,
         unsigned L)
{
    struct sim_exe *e = th->e;
    struct sim_train *tr = e->tr;
    char *ar = e->arenas[L * e->ipr + (unsigned)th->p];
    char *xb = e->xbuf + (size_t)it->r * e->xbytes;
    const struct sim_bkern *bk = &tr->bkern[(size_t)L * (size_t)tr->n_bsteps];

    switch (st->kind) {
    case SIM_STEP_GRECV:
        if (tr->loss_grad[L] != NULL && e->nodes[e->vals[tr->loss].producer].stage == it->k)
            *tr->loss_grad[L] = sim_half_loss_seed(e);     /* 1, or loss_scaling */
        for (int i = st->lo; i < st->hi; i++) {
            int xi = th->g->xi[i];
            const struct sim_xfer *x = &e->xfer[xi];
            const struct sim_val *v = &e->vals[x->val];
            float *dst = (float *)(ar + v->goff);
            uint64_t n = sim_ticks_get(th->tk, it->r, xi, SIM_TK_GRECVD);
            const float *src = (const float *)(xb + x->gxoff +
                                               n % x->depth * sim_align(v->bytes));
            if (await_count(th, xi, SIM_TK_GSENT, n + 1) != 0)
                return STOPPED;
            if (x->gassign)
                memcpy(dst, src, v->bytes);
            else if (v->ti.dtype == SIM_DTYPE_FLOAT16)   /* a float16 gradient, as stored */
                for (int64_t j = 0; j < v->ti.numel; j++)
                    ((uint16_t *)dst)[j] = sim_half_from_float(
                        sim_half_to_float(((uint16_t *)dst)[j]) +
                        sim_half_to_float(((const uint16_t *)src)[j]));
            else
                for (int64_t j = 0; j < v->ti.numel; j++)
                    dst[j] += src[j];
            sim_ticks_post(th->tk, it->r, xi, SIM_TK_GRECVD, n + 1, peer(th, x->dst));
        }
        break;
    case SIM_STEP_BWD:
        for (int b = tr->stage_b[it->k + 1]; b < tr->stage_b[it->k]; b++) {
            const struct sim_bstep *bs = &tr->bsteps[b];
            int rc;
            if (sim_exe_cancelled(e, th->id))
                return sim_err_set(th->err, IPUOF_E_CANCELLED, "the run was cancelled");
            const struct sim_kern *kp = &bk[b].k;
            struct sim_kern kk;
            struct sim_tensor vv[SIM_RC_MAX_VIEWS];
            if (bs->recompute) {    /* the forward again, reseeded as it ran (recompute.c) */
                if (e->nodes[bs->node].rnd)
                    sim_exec_seed(e, it->d, it->a, it->r, L, bs->node, bs->node + 1);
                rc = sim_recompute_run(e, bs->node, L, th->err);
                if (rc != 0)
                    return rc;
                continue;
            }
            /* recomputed copies, and NULL for what the rule does not read */
            kp = bwd_kern(e, L, bs->node, kp, &kk, vv);
            for (int z = bs->zero_start; z < bs->zero_end; z++) {
                const struct sim_gzero *gz = &tr->zero[z];
                sim_pool_zero(ar + *gz->off, gz->bytes);   /* gz->ipu == p: a stage's own */
            }
            rc = sim_exec_node_backward(e, bs->node, kp, bk[b].dout, bk[b].din, th->err);
            if (rc != 0)
                return rc;
        }
        break;
    case SIM_STEP_GSEND:
        for (int i = st->lo; i < st->hi; i++) {
            int xi = th->g->xi[i];
            const struct sim_xfer *x = &e->xfer[xi];
            size_t bytes = e->vals[x->val].bytes;
            uint64_t n = sim_ticks_get(th->tk, it->r, xi, SIM_TK_GSENT);
            if (n >= x->depth && await_count(th, xi, SIM_TK_GRECVD, n + 1 - x->depth) != 0)
                return STOPPED;
            memcpy(xb + x->gxoff + n % x->depth * sim_align(bytes), ar + x->goff, bytes);
            sim_ticks_post(th->tk, it->r, xi, SIM_TK_GSENT, n + 1, peer(th, x->src));
        }
        if (e->log != NULL)
            log_item(e, it, true, th->t0, th->c0);
        break;
    default:
        break;
    }
    return 0;
}

/* The reason a thread stopped, worded as the single-thread runs word it. */
static int
stopped(struct sim_exe *e, int rc, const struct item *it, uint_fast64_t id,
        struct sim_err *err)
{
    unsigned d = it->d, a = it->a, r = it->r;

    if (rc == 0 && sim_exe_cancelled(e, id))
        rc = IPUOF_E_CANCELLED;
    if (rc == IPUOF_E_CANCELLED && e->tr != NULL)
        return sim_err_set(err, rc, "the run was cancelled at device iteration %u of %u "
                           "(accumulation step %u, replica %u); %u optimizer steps were "
                           "taken", d, e->D, a, r, d);
    if (rc == IPUOF_E_CANCELLED)
        return sim_err_set(err, rc, "the run was cancelled at device iteration %u of %u, "
                           "replica %u", d, e->D, r);
    if (rc != 0 && e->tr != NULL && (e->D > 1 || e->A > 1 || e->R > 1))
        sim_err_prefix(err, "device iteration %u, accumulation step %u, replica %u (%u "
                       "optimizer steps taken): ", d, a, r, d);
    else if (rc != 0 && (e->R > 1 || e->D > 1))
        sim_err_prefix(err, "device iteration %u, replica %u: ", d, r);
    return rc;
}

/* A thread that stopped says why, once, and stops every other. */
static void
note_stop(struct ipu_thread *th)
{
    struct sim_exe *e = th->e;

    if (th->stop && e->trc[th->u] == 0) {
        e->trc[th->u] = stopped(e, th->rc, &th->last, th->id, th->err);
        atomic_store(&e->abort_run, 1);
        sim_ticks_wake_all(th->tk);     /* whoever waits on this thread stops too */
    }
}

/* After stage k's forward (bwd false) or backward work in lane L of IPU p: the lane's
 * pages dead until written again go back to the host (plan.c's release_plan). */
static void
release_lane(const struct sim_exe *e, unsigned L, int p, int k, bool bwd)
{
    char *ar = e->arenas[L * e->ipr + (unsigned)p];
    int i = 2 * k + (bwd ? 1 : 0);

    for (int j = e->rel_start[i]; ar != NULL && j < e->rel_start[i + 1]; j++)
        if (e->rel_poison)
            memset(ar + e->rel[j].off, 0xff, (size_t)e->rel[j].len);
        else
            madvise(ar + e->rel[j].off, (size_t)e->rel[j].len, MADV_DONTNEED);
}

/* Whether step j of the ns at st ends its stage's forward or backward work (the next is
 * of another work, or there is none). */
static bool
work_end(const struct sim_step *st, int j, int ns)
{
    bool bwd = st[j].kind >= SIM_STEP_GRECV;

    if (st[j].stage < 0 || st[j].kind < SIM_STEP_RECV || st[j].kind > SIM_STEP_GSEND)
        return false;
    return j + 1 == ns || st[j + 1].stage != st[j].stage || st[j + 1].key != st[j].key ||
           st[j + 1].kind < SIM_STEP_RECV || st[j + 1].kind > SIM_STEP_GSEND ||
           (st[j + 1].kind >= SIM_STEP_GRECV) != bwd;
}

/* Runs step st of repetition i of segment sg in device iteration d (training); `end`: it
 * ends its stage's work (work_end). */
static void
run_step(struct ipu_thread *th, const struct sim_seg *sg, const struct sim_step *st,
         unsigned i, unsigned d, bool end)
{
    struct sim_exe *e = th->e;
    unsigned m = st->mb + i;
    struct item it;
    unsigned L;

    switch (st->kind) {
    case SIM_STEP_TICK:
        if (st->all) {
            th->wakes += sim_crew_barrier(e->crew);
            /* a failed cross-executable reduce (written before this barrier only): every
             * thread leaves after this iteration, as thread 0 does */
            if (e->tr != NULL && atomic_load(&e->tr->xfailed))
                th->abort_all = true;
            return;
        }
        th->stop = must_stop(e, th->rc, th->id);
        if (th->stop)
            note_stop(th);      /* the others stop at their next tick, or wait */
        return;
    case SIM_STEP_SYNC:
        note_stop(th);
        th->wakes += sim_crew_barrier(e->crew);
        th->abort_all = atomic_load(&e->abort_run) != 0;  /* nobody writes it until the next */
        return;
    case SIM_STEP_REDUCE:
        /* A failed cross-executable reduce: no update, and every thread leaves after the
         * collective's closing tick (above). */
        if (th->idx == 0 && !th->abort_all && sim_train_reduce(e, &e->terr[0]) != 0) {
            e->trc[0] = e->terr[0].code;
            atomic_store(&e->abort_run, 1);
            th->abort_all = 1;
        }
        return;
    case SIM_STEP_UPDATE:
        if (th->idx == 0 && !th->abort_all)
            sim_train_update(e, d + 1 == e->D);
        return;
    case SIM_STEP_LOAD:         /* the simulator keeps every weight resident */
    case SIM_STEP_STREAM:
        return;
    default:
        break;
    }
    if (th->rc != 0)
        return;
    it = (struct item){ th->r, st->stage, e->tr != NULL ? d : m, e->tr != NULL ? m : 0, m,
                        st->tick + (long long)i * sg->tick_stride };
    L = lane(e, th->r, th->p, m);
    if (st->kind == SIM_STEP_RECV || st->kind == SIM_STEP_GRECV) {     /* a work begins */
        th->last = it;
        if (e->log != NULL) {
            th->t0 = sim_now_s(CLOCK_MONOTONIC);
            th->c0 = sim_now_s(CLOCK_THREAD_CPUTIME_ID);
        }
    }
    th->rc = st->kind >= SIM_STEP_GRECV ? bwd_step(th, st, &it, L) : fwd_step(th, st, &it, L);
    if (th->rc == 0 && end && e->rel != NULL)
        release_lane(e, L, th->p, st->stage, st->kind >= SIM_STEP_GRECV);
    if (th->rc == STOPPED) {    /* another thread stopped while this one waited */
        th->rc = 0;
        th->stop = true;
        note_stop(th);
    }
}

/* The most simulated IPUs one crew thread runs: one-IPU replicas beyond SIM_MAX_IPUS
 * (place.c allows R x ipr <= 16 x SIM_MAX_IPUS). */
#define UNITS_MAX 16

/* One segment of the program for the simulated IPUs th[0 .. nu) of a crew thread in
 * device iteration d. A collective segment is run once by the thread (its IPUs are one-IPU
 * replicas with the same program), each of its IPUs saying first why it stopped. */
static void
run_seg(struct ipu_thread *th, unsigned nu, int s, unsigned d)
{
    const struct sim_prog *g = th[0].g;
    const struct sim_seg *sg = &g->seg[s];
    int ns;

    if (sg->collective) {
        const struct sim_step *st = sim_prog_steps(g, (unsigned)th[0].p, s, &ns);
        for (unsigned u = 1; u < nu; u++)
            note_stop(&th[u]);
        for (int j = 0; j < ns; j++)        /* run by every thread, stopped or not */
            run_step(&th[0], sg, &st[j], 0, d, false);
        for (unsigned u = 1; u < nu; u++)
            th[u].abort_all = th[0].abort_all;
        return;
    }
    for (unsigned u = 0; u < nu; u++) {
        const struct sim_step *st = sim_prog_steps(g, (unsigned)th[u].p, s, &ns);
        for (unsigned i = 0; i < sg->reps && !th[u].stop; i++)
            for (int j = 0; j < ns && !th[u].stop; j++)
                run_step(&th[u], sg, &st[j], i, d, work_end(st, j, ns));
    }
}

/* Crew thread idx of n: the simulated IPUs u = idx, idx + n, ... (u = r x ipr + p: IPU p
 * of replica r; more than one only for one-IPU replicas beyond n) interpret their program,
 * D times when training. */
struct run_arg {
    uint_fast64_t id;
    struct sim_ticks *tk;
};

static void
ipu_job(struct sim_exe *e, unsigned idx, unsigned n, void *ud)
{
    const struct run_arg *ra = ud;
    struct ipu_thread th[UNITS_MAX];
    unsigned nu = 0, iters = e->tr != NULL ? e->D : 1;

    for (unsigned u = idx; u < e->R * e->ipr && nu < UNITS_MAX; u += n, nu++) {
        th[nu] = (struct ipu_thread){ .e = e, .g = e->prog, .id = ra->id, .tk = ra->tk,
                                      .idx = idx, .u = u, .r = u / e->ipr,
                                      .p = (int)(u % e->ipr), .err = &e->terr[u] };
        th[nu].last = (struct item){ th[nu].r, 0, 0, 0, 0, 0 };
    }
    for (unsigned d = 0; d < iters && !th[0].abort_all; d++)
        for (int s = 0; s < e->prog->n_seg; s++)
            run_seg(th, nu, s, d);
    for (unsigned u = 0; u < nu; u++) {
        note_stop(&th[u]);
        atomic_fetch_add(&e->wakes, th[u].wakes);
        atomic_fetch_add(&e->polls, th[u].polls);
    }
}

/* One run: every simulated IPU of the crew interprets its program; the caller holds
 * e->busy and the crew exists. */
static int
sim_ipus_run(struct sim_exe *e, uint_fast64_t id, struct sim_err *err)
{
    unsigned n = e->R * e->ipr;
    struct run_arg ra = { id, NULL };

    if (e->ipr > 1 && e->n_xfer > 0 && (ra.tk = sim_ticks_new(e->R, e->ipr, e->n_xfer)) == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "no memory for the exchange counts of %u "
                           "simulated IPUs", n);
    memset(e->trc, 0, n * sizeof(*e->trc));
    if (e->tr != NULL) {
        memset(e->tr->grads, 0, (size_t)e->R * e->n_train * sizeof(float));
        atomic_store(&e->tr->xfailed, 0);
    }
    sim_crew_run(e->crew, e, ipu_job, &ra);
    sim_ticks_free(ra.tk);
    return sim_exe_crew_status(e, n, err);
}

int
sim_exe_run(struct sim_exe *e, struct sim_err *err)
{
    return sim_exe_run_fed(e, NULL, err);
}

int
sim_exe_run_fed(struct sim_exe *e, struct sim_feed *f, struct sim_err *err)
{
    int expected = 0, rc = 0;
    uint_fast64_t id;

    if (!atomic_compare_exchange_strong(&e->busy, &expected, 1)) {
        if (f != NULL)
            sim_feed_end(f);
        return sim_err_set(err, IPUOF_E_BUSY, "the executable is already running");
    }
    id = atomic_fetch_add(&e->run_id, 1) + 1;
    rc = sim_exe_crew(e, err);
    if (rc != 0) {
        if (f != NULL)
            sim_feed_end(f);
        atomic_store(&e->busy, 0);
        return rc;
    }
    atomic_store(&e->abort_run, 0);
    sim_weights_unshow(e);
    e->feed = f;
    rc = sim_ipus_run(e, id, err);
    e->feed = NULL;
    if (f != NULL)
        sim_feed_end(f);
    if (rc == 0)
        atomic_store(&e->ran, 1);
    e->mb_done += (uint64_t)e->D * e->A;
    atomic_store(&e->busy, 0);
    return rc;
}

void
sim_exe_idle(struct sim_exe *e)
{
    int expected = 0;

    if (e == NULL || !atomic_compare_exchange_strong(&e->busy, &expected, 1))
        return;
    sim_crew_free(e->crew);
    e->crew = NULL;
    sim_bar_free(e->rbar, e->R);
    e->rbar = NULL;
    free(e->terr);
    free(e->trc);
    e->terr = NULL;
    e->trc = NULL;
    atomic_store(&e->busy, 0);
}

void
sim_exe_cancel(struct sim_exe *e)
{
    if (atomic_load(&e->busy))
        atomic_store(&e->cancel_id, atomic_load(&e->run_id));
}

void
sim_exe_log_steps(struct sim_exe *e, struct sim_step_rec *log, size_t cap)
{
    e->log = log;
    e->log_cap = log != NULL ? cap : 0;
    atomic_store(&e->log_n, 0);
}

uint64_t
sim_exe_thread_wakes(const struct sim_exe *e, uint64_t *polls)
{
    if (polls != NULL)
        *polls = atomic_load(&e->polls);
    return atomic_load(&e->wakes);
}

size_t
sim_exe_logged_steps(const struct sim_exe *e)
{
    size_t n = atomic_load(&e->log_n);

    return n < e->log_cap ? n : e->log_cap;
}

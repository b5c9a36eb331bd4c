/*
 * ipus.c — running an executable whose replicas span several IPUs: each simulated IPU is
 * a thread of the crew (crew.c), one per (replica, IPU), created at the first run and
 * joined when the executable is freed. The threads of a replica step through the stage
 * schedule together, meeting at the replica's barrier after every step (sim_bar, which
 * also agrees on stopping): in a step, the IPU that holds the step's stage receives the
 * activations (forward) or gradients (backward) other IPUs sent it through the exchange
 * buffers (e->xbuf, owned by neither arena), runs the stage's kernels on its own arena,
 * then sends what other IPUs will read (struct sim_xfer). Host input and output views of
 * a stage are patched by the IPU that runs it, and outputs are copied to the host by the
 * IPU that holds them. In training, after the micro-batches of a device iteration, all
 * threads of all replicas meet at the crew's barrier for the collective step (thread 0
 * reduces the accumulators across replicas and updates the weights) as train.c does.
 *
 * Steps (schedule.c has the same on the simulated clock):
 *   sharded, phased     one micro-batch at a time: stage 0 .. N-1 forward, then (training)
 *                       stage N-1 .. 0 backward; one stage works per step.
 *   pipelined training  A + 2N - 1 steps per device iteration; in step t stage k runs the
 *                       backward of micro-batch t - (2N - 1 - k) and then the forward of
 *                       micro-batch t - k, so every IPU works at once in the steady state.
 *   pipelined inference D + N - 1 steps per run; stage k runs micro-batch t - k.
 * An IPU holds each micro-batch in flight in a slot of its own (e->slots[p] copies of its
 * arena, each with its own kernel bindings: micro-batch m uses slot m % slots[p]), and an
 * exchange buffer has one copy per micro-batch between its send and its receive (depth).
 * Nothing is allocated here: every buffer and view is bound at compile time.
 * Does not: decide placement (place.c), memory (plan.c) or time (schedule.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"

#include <pthread.h>
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
    long long t;                /* the step */
};

static double
now_s(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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
    rec->t1 = now_s(CLOCK_MONOTONIC);
    rec->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
}

/* The lane of IPU p for micro-batch m of replica r. */
static unsigned
lane(const struct sim_exe *e, unsigned r, int p, unsigned m)
{
    return r * e->S + m % e->slots[p];
}

/* The forward of stage k for one micro-batch: receive, patch, run, send, outputs. */
static int
fwd_stage(struct sim_exe *e, const struct item *it, uint_fast64_t id, struct sim_err *err)
{
    int p = e->stage_ipu[it->k], end = sim_stage_end(e, it->k), rc = 0;
    unsigned L = lane(e, it->r, p, it->m);
    char *ar = e->arenas[L * e->ipr + (unsigned)p];
    char *xb = e->xbuf + (size_t)it->r * e->xbytes;
    const struct sim_kern *kn = &e->kern[(size_t)L * e->n_nodes];
    double t0 = e->log != NULL ? now_s(CLOCK_MONOTONIC) : 0;
    double c0 = e->log != NULL ? now_s(CLOCK_THREAD_CPUTIME_ID) : 0;

    for (int i = 0; i < e->n_xfer; i++) {       /* receive */
        const struct sim_xfer *x = &e->xfer[i];
        size_t bytes = e->vals[x->val].bytes;
        if (x->rstage == it->k)
            memcpy(ar + x->off, xb + x->xoff + it->m % x->depth * sim_align(bytes), bytes);
    }
    sim_exec_patch_stage(e, it->d, it->a, it->r, L, it->k);
    for (int s = e->stage_node[it->k]; s < end && rc == 0; s++) {
        if (sim_exe_cancelled(e, id))
            return sim_err_set(err, IPUOF_E_CANCELLED, "the run was cancelled");
        rc = sim_exec_node_forward(e, s, &kn[s], err);
    }
    if (rc != 0)
        return rc;
    for (int i = 0; i < e->n_xfer; i++) {       /* send */
        const struct sim_xfer *x = &e->xfer[i];
        size_t bytes = e->vals[x->val].bytes;
        if (x->sstage == it->k)
            memcpy(xb + x->xoff + it->m % x->depth * sim_align(bytes), produced(e, x, L), bytes);
    }
    sim_exec_outputs(e, it->d, it->a, it->r, L, it->k);
    if (e->log != NULL)
        log_item(e, it, false, t0, c0);
    return 0;
}

/* The backward of stage k for one micro-batch. */
static int
bwd_stage(struct sim_exe *e, const struct item *it, uint_fast64_t id, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    int p = e->stage_ipu[it->k];
    unsigned L = lane(e, it->r, p, it->m);
    char *ar = e->arenas[L * e->ipr + (unsigned)p];
    char *xb = e->xbuf + (size_t)it->r * e->xbytes;
    const struct sim_bkern *bk = &tr->bkern[(size_t)L * (size_t)tr->n_bsteps];
    double t0 = e->log != NULL ? now_s(CLOCK_MONOTONIC) : 0;
    double c0 = e->log != NULL ? now_s(CLOCK_THREAD_CPUTIME_ID) : 0;

    if (e->nodes[e->vals[tr->loss].producer].stage == it->k)
        *tr->loss_grad[L] = 1.0f;
    for (int i = 0; i < e->n_xfer; i++) {       /* receive gradients */
        const struct sim_xfer *x = &e->xfer[i];
        const struct sim_val *v = &e->vals[x->val];
        float *dst;
        const float *src;
        if (x->sstage != it->k || x->goff < 0)
            continue;
        dst = (float *)(ar + v->goff);
        src = (const float *)(xb + x->gxoff + it->m % x->depth * sim_align(v->bytes));
        if (x->gassign)
            memcpy(dst, src, v->bytes);
        else
            for (int64_t j = 0; j < v->ti.numel; j++)
                dst[j] += src[j];
    }
    for (int b = tr->stage_b[it->k + 1]; b < tr->stage_b[it->k]; b++) {
        const struct sim_bstep *st = &tr->bsteps[b];
        int rc;
        if (sim_exe_cancelled(e, id))
            return sim_err_set(err, IPUOF_E_CANCELLED, "the run was cancelled");
        for (int z = st->zero_start; z < st->zero_end; z++) {
            const struct sim_gzero *g = &tr->zero[z];
            memset(ar + *g->off, 0, g->bytes);      /* g->ipu == p: a stage's own */
        }
        rc = sim_exec_node_backward(e, st->node, &bk[b].k, bk[b].dout, bk[b].din, err);
        if (rc != 0)
            return rc;
    }
    for (int i = 0; i < e->n_xfer; i++) {       /* send gradients */
        const struct sim_xfer *x = &e->xfer[i];
        size_t bytes = e->vals[x->val].bytes;
        if (x->rstage == it->k && x->goff >= 0)
            memcpy(xb + x->gxoff + it->m % x->depth * sim_align(bytes), ar + x->goff, bytes);
    }
    if (e->log != NULL)
        log_item(e, it, true, t0, c0);
    return 0;
}

/* Whether this thread should stop before the next step. */
static bool
must_stop(struct sim_exe *e, int rc, uint_fast64_t id)
{
    return rc != 0 || atomic_load_explicit(&e->abort_run, memory_order_relaxed) ||
           sim_exe_cancelled(e, id);
}

/* The state of one IPU thread. */
struct ipu_thread {
    struct sim_exe *e;
    uint_fast64_t id;
    unsigned r;
    int p;
    struct sim_bar *bar;
    struct sim_err *err;
    int rc;
    bool stop;
    struct item last;           /* the last item, for messages */
};

/* Runs IPU p's share of step t (items: this IPU's stages' work in it), then meets the
 * replica's other IPUs. */
static void
step(struct ipu_thread *th, const struct item *items, int n, const bool *bwd)
{
    struct sim_exe *e = th->e;

    for (int i = 0; i < n && th->rc == 0; i++) {
        th->last = items[i];
        th->rc = bwd[i] ? bwd_stage(e, &items[i], th->id, th->err)
                        : fwd_stage(e, &items[i], th->id, th->err);
    }
    th->stop = sim_bar_wait(th->bar, must_stop(e, th->rc, th->id));
}

/* One device iteration (training) or the whole run (pipelined inference) of one IPU. */
static void
pipelined(struct ipu_thread *th, unsigned d)
{
    struct sim_exe *e = th->e;
    int N = e->n_stages, n;
    bool train = e->tr != NULL;
    long long M = train ? e->A : e->D, T = M + (train ? 2 * N - 1 : N - 1);
    struct item items[2 * SIM_MAX_IPUS];
    bool bwd[2 * SIM_MAX_IPUS];

    for (long long t = 0; t < T && !th->stop; t++) {
        n = 0;
        for (int k = N - 1; train && k >= 0; k--) {     /* backwards first: frees a slot */
            long long m = t - (2 * N - 1 - k);
            if (e->stage_ipu[k] != th->p || m < 0 || m >= M)
                continue;
            items[n] = (struct item){ th->r, k, d, (unsigned)m, (unsigned)m, t };
            bwd[n++] = true;
        }
        for (int k = 0; k < N; k++) {
            long long m = t - k;
            if (e->stage_ipu[k] != th->p || m < 0 || m >= M)
                continue;
            items[n] = train ? (struct item){ th->r, k, d, (unsigned)m, (unsigned)m, t }
                             : (struct item){ th->r, k, (unsigned)m, 0, (unsigned)m, t };
            bwd[n++] = false;
        }
        step(th, items, n, bwd);
    }
}

/* One micro-batch (d, a) at a time: a step per stage forward, then per stage backward. */
static void
sharded(struct ipu_thread *th, unsigned d, unsigned a)
{
    struct sim_exe *e = th->e;
    int N = e->n_stages;
    unsigned m = e->tr != NULL ? a : d;
    long long t0 = (long long)m * 2 * N;
    bool f = false, b = true;

    for (int k = 0; k < N && !th->stop; k++) {
        struct item it = { th->r, k, d, a, m, t0 + k };
        step(th, &it, e->stage_ipu[k] == th->p, &f);
    }
    for (int k = N - 1; e->tr != NULL && k >= 0 && !th->stop; k--) {
        struct item it = { th->r, k, d, a, m, t0 + 2 * N - 1 - k };
        step(th, &it, e->stage_ipu[k] == th->p, &b);
    }
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
    if (rc != 0 && e->tr != NULL)
        sim_err_prefix(err, "device iteration %u, accumulation step %u, replica %u (%u "
                       "optimizer steps taken): ", d, a, r, d);
    else if (rc != 0 && (e->R > 1 || e->D > 1))
        sim_err_prefix(err, "device iteration %u, replica %u: ", d, r);
    return rc;
}

/* A thread of the run: IPU idx % ipr of replica idx / ipr. */
static void
ipu_job(struct sim_exe *e, unsigned idx, unsigned n, void *ud)
{
    struct ipu_thread th = { .e = e, .id = *(const uint_fast64_t *)ud, .r = idx / e->ipr,
                             .p = (int)(idx % e->ipr), .err = &e->terr[idx] };
    bool pipe = e->strategy == SIM_STRATEGY_PIPELINED;

    (void)n;
    th.bar = sim_bar_at(e->rbar, th.r);
    th.last = (struct item){ th.r, 0, 0, 0, 0, 0 };
    for (unsigned d = 0; d < e->D; d++) {
        bool abort_all;
        if (pipe && e->tr == NULL) {
            pipelined(&th, 0);
            d = e->D;
        } else if (pipe) {
            pipelined(&th, d);
        } else {
            for (unsigned a = 0; a < e->A && !th.stop; a++)
                sharded(&th, d, a);
        }
        if (th.stop && e->trc[idx] == 0) {
            e->trc[idx] = stopped(e, th.rc, &th.last, th.id, th.err);
            atomic_store(&e->abort_run, 1);
        }
        if (e->tr == NULL) {
            if (th.stop)
                break;
            continue;
        }
        sim_crew_barrier(e->crew);
        abort_all = atomic_load(&e->abort_run) != 0;   /* nobody writes it until the next */
        if (idx == 0 && !abort_all) {
            sim_train_reduce(e);
            sim_optim_step(e);
            memset(e->tr->grads, 0, (size_t)e->R * e->n_train * sizeof(float));
        }
        sim_crew_barrier(e->crew);
        if (abort_all)
            break;
    }
}

int
sim_ipus_run(struct sim_exe *e, uint_fast64_t id, struct sim_err *err)
{
    unsigned n = e->R * e->ipr;

    memset(e->trc, 0, n * sizeof(*e->trc));
    if (e->tr != NULL)
        memset(e->tr->grads, 0, (size_t)e->R * e->n_train * sizeof(float));
    sim_crew_run(e->crew, e, ipu_job, &id);
    return sim_exe_crew_status(e, n, err);
}

void
sim_exe_log_steps(struct sim_exe *e, struct sim_step_rec *log, size_t cap)
{
    e->log = log;
    e->log_cap = log != NULL ? cap : 0;
    atomic_store(&e->log_n, 0);
}

size_t
sim_exe_logged_steps(const struct sim_exe *e)
{
    size_t n = atomic_load(&e->log_n);

    return n < e->log_cap ? n : e->log_cap;
}

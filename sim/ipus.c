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
 * Order of steps: one micro-batch at a time, stage 0 .. N-1 forward, then (training)
 * stage N-1 .. 0 backward. Pipelined executables run in this order too for now: their
 * numbers are the same, their simulated clock (schedule.c) is the pipelined one, but the
 * host threads do not yet overlap micro-batches (that needs a stash slot per in-flight
 * micro-batch).
 * Nothing is allocated here: every buffer and view is bound at compile time.
 * Does not: decide placement (place.c), memory (plan.c) or time (schedule.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"

/* Where IPU src's kernel wrote value v for replica r (its arena, or an output slot). */
static const void *
produced(const struct sim_exe *e, const struct sim_xfer *x, unsigned r)
{
    const struct sim_val *v = &e->vals[x->val];
    const struct sim_kern *k = &e->kern[(size_t)r * e->n_nodes + (size_t)v->producer];

    for (int j = 0; j < k->n_out; j++)
        if (e->nodes[v->producer].out[j] == x->val)
            return k->out[j].data;
    return NULL;
}

/* The forward of stage k for micro-batch (d, a) of replica r. */
static int
fwd_stage(struct sim_exe *e, unsigned r, int k, unsigned d, unsigned a, uint_fast64_t id,
          struct sim_err *err)
{
    void *const *ar = e->arenas + (size_t)r * e->ipr;
    char *xb = e->xbuf + (size_t)r * e->xbytes;
    const struct sim_kern *kn = &e->kern[(size_t)r * e->n_nodes];
    int end = sim_stage_end(e, k), rc = 0;

    for (int i = 0; i < e->n_xfer; i++) {       /* receive */
        const struct sim_xfer *x = &e->xfer[i];
        if (x->rstage == k)
            memcpy((char *)ar[x->dst] + x->off, xb + x->xoff, e->vals[x->val].bytes);
    }
    sim_exec_patch_stage(e, d, a, r, k);
    for (int s = e->stage_node[k]; s < end && rc == 0; s++) {
        if (sim_exe_cancelled(e, id))
            return sim_err_set(err, IPUOF_E_CANCELLED, "the run was cancelled");
        rc = e->nodes[s].op->forward(&kn[s], err);
    }
    for (int i = 0; i < e->n_xfer && rc == 0; i++) {   /* send */
        const struct sim_xfer *x = &e->xfer[i];
        if (x->sstage == k)
            memcpy(xb + x->xoff, produced(e, x, r), e->vals[x->val].bytes);
    }
    return rc;
}

/* The backward of stage k of replica r. */
static int
bwd_stage(struct sim_exe *e, unsigned r, int k, uint_fast64_t id, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    void *const *ar = e->arenas + (size_t)r * e->ipr;
    char *xb = e->xbuf + (size_t)r * e->xbytes;
    const struct sim_bkern *bk = &tr->bkern[(size_t)r * (size_t)tr->n_bsteps];

    if (e->nodes[e->vals[tr->loss].producer].stage == k)
        *tr->loss_grad[r] = 1.0f;
    for (int i = 0; i < e->n_xfer; i++) {       /* receive gradients */
        const struct sim_xfer *x = &e->xfer[i];
        const struct sim_val *v = &e->vals[x->val];
        float *dst;
        const float *src;
        if (x->sstage != k || x->goff < 0)
            continue;
        dst = (float *)((char *)ar[x->src] + v->goff);
        src = (const float *)(xb + x->gxoff);
        if (x->gassign)
            memcpy(dst, src, v->bytes);
        else
            for (int64_t j = 0; j < v->ti.numel; j++)
                dst[j] += src[j];
    }
    for (int b = tr->stage_b[k + 1]; b < tr->stage_b[k]; b++) {
        const struct sim_bstep *st = &tr->bsteps[b];
        int rc;
        if (sim_exe_cancelled(e, id))
            return sim_err_set(err, IPUOF_E_CANCELLED, "the run was cancelled");
        for (int z = st->zero_start; z < st->zero_end; z++) {
            const struct sim_gzero *g = &tr->zero[z];
            memset((char *)ar[g->ipu] + *g->off, 0, g->bytes);
        }
        rc = e->nodes[st->node].op->backward(&bk[b].k, bk[b].dout, bk[b].din, err);
        if (rc != 0)
            return rc;
    }
    for (int i = 0; i < e->n_xfer; i++) {       /* send gradients */
        const struct sim_xfer *x = &e->xfer[i];
        if (x->rstage == k && x->goff >= 0)
            memcpy(xb + x->gxoff, (char *)ar[x->dst] + x->goff, e->vals[x->val].bytes);
    }
    return 0;
}

/* Whether this thread should stop before the next step. */
static bool
must_stop(struct sim_exe *e, int rc, uint_fast64_t id)
{
    return rc != 0 || atomic_load_explicit(&e->abort_run, memory_order_relaxed) ||
           sim_exe_cancelled(e, id);
}

/* Micro-batch (d, a) of replica r as IPU p sees it: every step, p working in those of its
 * stages. Returns rc; *stop when the replica's threads agreed to stop. */
static int
micro_batch(struct sim_exe *e, unsigned r, int p, unsigned d, unsigned a, uint_fast64_t id,
            bool *stop, struct sim_err *err)
{
    struct sim_bar *bar = sim_bar_at(e->rbar, r);
    int N = e->n_stages, rc = 0;

    for (int k = 0; k < N && !*stop; k++) {
        if (e->stage_ipu[k] == p)
            rc = fwd_stage(e, r, k, d, a, id, err);
        *stop = sim_bar_wait(bar, must_stop(e, rc, id));
    }
    for (int k = N - 1; e->tr != NULL && k >= 0 && !*stop; k--) {
        if (e->stage_ipu[k] == p)
            rc = bwd_stage(e, r, k, id, err);
        *stop = sim_bar_wait(bar, must_stop(e, rc, id));
    }
    if (!*stop)
        sim_exec_outputs(e, d, a, r, p);
    return rc;
}

/* The reason a thread stopped, worded as the single-thread runs word it. */
static int
stopped(struct sim_exe *e, int rc, unsigned r, unsigned d, unsigned a, uint_fast64_t id,
        struct sim_err *err)
{
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
    uint_fast64_t id = *(const uint_fast64_t *)ud;
    unsigned r = idx / e->ipr;
    int p = (int)(idx % e->ipr), rc = 0;
    bool stop = false;

    (void)n;
    for (unsigned d = 0; d < e->D; d++) {
        bool abort_all;
        for (unsigned a = 0; a < e->A && !stop; a++) {
            rc = micro_batch(e, r, p, d, a, id, &stop, &e->terr[idx]);
            if (stop) {
                rc = stopped(e, rc, r, d, a, id, &e->terr[idx]);
                e->trc[idx] = rc;
                atomic_store(&e->abort_run, 1);
            }
        }
        if (e->tr == NULL) {
            if (stop)
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

/*
 * plan.c — the static memory plan of an executable, as Poplar makes one at compile time.
 *
 * Does: compute each activation's lifetime over the schedule (from the step that produces
 * it to the last step that reads it; outputs copied after the step live to the end), give
 * every activation and every node's scratch one offset in its IPU's arena with first-fit
 * reuse of memory whose lifetime has ended, and add up the memory of each IPU:
 *   weights     constants read by the IPU's nodes (each counted once per IPU);
 *   activations the arena plus one step of every input stream the IPU reads and every
 *               output it writes straight to the host;
 *   code        SIM_CODE_BASE_BYTES of control program plus, per node, the op table's
 *               code_bytes estimate (vertex code and state of a typical Poplar lowering,
 *               a constant per op kind, independent of tensor sizes; a node with a
 *               backward step counts twice).
 * An activation read on another IPU lives in its producer's arena until the send after
 * the producing stage's forward, and in a copy in the reader's arena from the receive
 * before the first reading stage to its last reader there (struct sim_xfer).
 * Training adds the backward timeline (exe.h): a forward node's inputs and outputs that its
 * gradient rule reads (the op table's bwd_reads) live until its backward step, gradients of activations, saved state and backward scratch get
 * arena blocks like activations do, and each IPU also accounts the gradient accumulators
 * and optimizer state of the trainable weights it holds.
 * A value a recomputed node produces (recompute.c) has two blocks: the forward's copy until
 * its last forward reader, and the recomputed copy (roff) from the recompute step to its
 * last backward reader; the node's saved state and scratch one block with two lifetimes.
 * A graph that does not fit an IPU is refused with IPUOF_E_DEVICE_OOM.
 * Does not: allocate the arenas (exec.c does) or model tile-level layout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"

struct block {
    size_t size;
    int first, last;
    int ipu;
    int64_t *off;
    int first2, last2;          /* a second lifetime at the same offset (a recomputed
                                 * node's saved state and scratch), or -1 */
    size_t ipu_size;            /* on the IPU, when not size (a convolution's or matmul's
                                 * temporaries within its memory proportion); 0: size */
};

/* The last step of a block's lifetimes. */
static int
block_end(const struct block *b)
{
    return b->first2 >= 0 && b->last2 > b->last ? b->last2 : b->last;
}

static bool
spans_meet(int f1, int l1, int f2, int l2)
{
    return f1 <= l2 && f2 <= l1;
}

/* Whether two blocks are live at a common step. */
static bool
blocks_meet(const struct block *a, const struct block *b)
{
    return spans_meet(a->first, a->last, b->first, b->last) ||
           (b->first2 >= 0 && spans_meet(a->first, a->last, b->first2, b->last2)) ||
           (a->first2 >= 0 && spans_meet(a->first2, a->last2, b->first, b->last)) ||
           (a->first2 >= 0 && b->first2 >= 0 &&
            spans_meet(a->first2, a->last2, b->first2, b->last2));
}

static int
cmp_block(const void *a, const void *b)
{
    const struct block *x = a, *y = b;

    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return 0;
}

static size_t
align_up(size_t n)
{
    return (n + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
}

/* First-fit placement of the blocks of one IPU (sorted by first use): a block takes the
 * lowest offset free of every placed block it meets (blocks_meet). Returns the arena
 * size, or SIZE_MAX when out of memory. */
static size_t
place_blocks(struct block *b, size_t n, int ipu)
{
    struct block **active = malloc((n + 1) * sizeof(*active));
    size_t n_active = 0, top = 0;

    if (active == NULL)
        return SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t size, cand = 0, pos, k = 0;
        if (b[i].ipu != ipu)
            continue;
        size = align_up(b[i].size ? b[i].size : 1);
        for (size_t j = 0; j < n_active; j++)
            if (block_end(active[j]) >= b[i].first)
                active[k++] = active[j];
        n_active = k;
        for (size_t j = 0; j < n_active; j++) {     /* sorted by offset */
            size_t aoff = (size_t)*active[j]->off;
            if (!blocks_meet(active[j], &b[i]))
                continue;
            if (aoff >= cand && aoff - cand >= size)
                break;
            if (aoff + align_up(active[j]->size ? active[j]->size : 1) > cand)
                cand = aoff + align_up(active[j]->size ? active[j]->size : 1);
        }
        for (pos = 0; pos < n_active && (size_t)*active[pos]->off <= cand; pos++)
            ;
        *b[i].off = (int64_t)cand;
        memmove(&active[pos + 1], &active[pos], (n_active - pos) * sizeof(*active));
        active[pos] = &b[i];
        n_active++;
        if (cand + size > top)
            top = cand + size;
    }
    free(active);
    return top;
}

/* Widens block r's lifetimes to cover block w's (w's first span during r's first, its
 * second, the recomputed copy's, during r's second when r has one). */
static void
cover(struct block *r, const struct block *w)
{
    int f[2] = { w->first, w->first2 }, l[2] = { w->last, w->last2 };

    for (int i = 0; i < 2; i++) {
        if (f[i] < 0)
            continue;
        if (r->first2 >= 0 && f[i] >= r->first2)
            r->last2 = l[i] > r->last2 ? l[i] : r->last2;
        else
            r->last = l[i] > r->last ? l[i] : r->last;
    }
}

/*
 * The blocks as the IPU holds them, in c (nb of them, offsets into offs): a convolution's
 * or matmul's temporaries at their IPU size, and the output of a view op (SIM_OPF_VIEW:
 * Poplar aliases it) no block of its own: the block of the value it views (its root,
 * through chains of views) lives until the view's last reader instead. vb[v] is the block
 * of value v's forward copy and vrb[v] of its recomputed copy (-1: none); c[i] of a view's
 * recomputed copy becomes its root's second lifetime's extension. A view of a value with
 * no block (an input stream, a weight) takes nothing either.
 */
static void
ipu_blocks(const struct sim_exe *e, const struct block *b, size_t nb, const int *vb,
           const int *vrb, int *root, struct block *c, int64_t *offs)
{
    for (size_t i = 0; i < nb; i++) {
        c[i] = b[i];
        if (c[i].ipu_size != 0)
            c[i].size = c[i].ipu_size;
        c[i].off = &offs[i];
    }
    for (int v = 0; v < e->m->n_vals; v++)
        root[v] = v;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        int in = n->n_in > 0 ? n->in[0] : -1, out = n->n_out > 0 ? n->out[0] : -1, r, w;
        if (!(n->op->flags & SIM_OPF_VIEW) || in < 0 || out < 0 || vb[out] < 0 ||
            (e->vals[in].kind == SIM_V_ACT && e->vals[in].ipu != n->ipu))
            continue;
        r = root[out] = root[in];
        w = vb[out];
        c[w].ipu = -1;                  /* placed nowhere */
        if (vrb[out] >= 0) {
            c[vrb[out]].ipu = -1;
            c[w].first2 = c[vrb[out]].first;
            c[w].last2 = c[vrb[out]].last;
        }
        if (vb[r] < 0)
            continue;                   /* a view of a stream or a weight */
        if (vrb[r] >= 0 && c[vb[r]].first2 < 0) {   /* r's two copies as one block */
            c[vb[r]].first2 = c[vrb[r]].first;
            c[vb[r]].last2 = c[vrb[r]].last;
            c[vrb[r]].ipu = -1;
        }
        cover(&c[vb[r]], &c[w]);
    }
}

/* Steps of the timeline: forward nodes, then backward steps when training. */
static int
timeline_end(const struct sim_exe *e)
{
    return e->n_nodes + (e->tr != NULL ? e->tr->n_bsteps : 0);
}

static void
liveness(struct sim_exe *e)
{
    int F = e->n_nodes;

    for (int v = 0; v < e->m->n_vals; v++) {
        e->vals[v].first = -1;
        e->vals[v].last = -1;
        e->vals[v].rfirst = -1;
        e->vals[v].rlast = -1;
    }
    for (int i = 0; i < e->n_xfer; i++) {
        e->xfer[i].first = e->stage_node[e->xfer[i].rstage];   /* received before it */
        e->xfer[i].last = e->xfer[i].first;
    }
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        /* a node's recompute reads its inputs; its backward step what its rule reads */
        int bs = n->bstep >= 0 ? F + n->bstep : -1, rs = n->rstep >= 0 ? F + n->rstep : s;
        uint32_t reads = bs >= 0 ? sim_node_bwd_reads(e, s) : 0;
        for (int j = 0; j < n->n_in; j++) {
            struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
            int until = bs >= 0 && sim_bwd_reads_in(reads, j) ? bs : rs, u = until;
            if (v == NULL || v->kind != SIM_V_ACT)
                continue;
            if (v->producer >= 0 && e->nodes[v->producer].rstep >= 0) {
                /* recomputed: the forward's copy until its forward readers, the backward's
                 * from its recompute (recompute.c keeps the readers in one segment) */
                if (v->last < s)
                    v->last = s;
                if (until > s && v->rlast < until)
                    v->rlast = until;
                continue;
            }
            if (v->ipu != n->ipu) {     /* read from its exchange copy on n's IPU */
                struct sim_xfer *x = &e->xfer[sim_xfer_find(e, n->in[j], n->ipu)];
                if (x->last < until)
                    x->last = until;
                /* the producer keeps it until the send after its stage's forward */
                u = sim_stage_end(e, x->sstage) - 1;
            }
            if (v->last < u)
                v->last = u;
        }
        for (int j = 0; j < n->n_out; j++) {
            struct sim_val *v = n->out[j] >= 0 ? &e->vals[n->out[j]] : NULL;
            int until = bs >= 0 && sim_bwd_reads_out(reads, j) ? bs : rs;
            if (v == NULL || v->kind != SIM_V_ACT)
                continue;
            v->first = s;
            if (v->last < s)
                v->last = s;
            if (n->rstep >= 0) {
                v->rfirst = rs;
                if (v->rlast < until)
                    v->rlast = until;
            } else if (v->last < until) {
                v->last = until;
            }
        }
    }
    for (int i = 0; i < e->n_out; i++) {
        struct sim_val *v = &e->vals[e->out[i].val];
        if (v->kind == SIM_V_ACT && !e->out[i].zero_copy)
            v->last = timeline_end(e);
    }
}

/* Optimizer state floats per trainable float (optim_state.c knows which the kind keeps). */
static unsigned
state_per_weight(const struct sim_exe *e)
{
    return e->tr != NULL ? sim_optim_state_floats(&e->tr->opt) : 0;
}

/* The bytes weight w takes on the IPU: a float16 weight is held as floats on the host
 * (half_train.c) but 2 bytes per element on the IPU, as is its gradient. */
static uint64_t
ipu_bytes(const struct sim_weight *w)
{
    return w->half ? w->bytes / 2 : w->bytes;
}

/* Weights, streams, code, gradient accumulators and optimizer state of IPU p. */
static void
account(struct sim_exe *e, unsigned p, int *seen, struct sim_mem_report *r)
{
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        if ((unsigned)n->ipu != p)
            continue;
        r->code += n->op->code_bytes * (n->bstep >= 0 ? 2u : 1u);
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j];
            if (v < 0 || seen[v] == (int)p + 1 || e->vals[v].kind == SIM_V_WEIGHT)
                continue;     /* weights are counted below, on the IPU that holds them */
            seen[v] = (int)p + 1;
            if (e->vals[v].kind == SIM_V_CONST)
                r->weights += e->vals[v].bytes;
            else if (e->vals[v].kind == SIM_V_INPUT)
                r->activations += e->vals[v].bytes;
        }
    }
    for (int i = 0; i < e->n_w; i++) {
        const struct sim_weight *w = &e->w[i];
        if ((unsigned)w->ipu != p)
            continue;
        if (seen[w->val] != (int)p + 1)
            r->weights += ipu_bytes(w);
        seen[w->val] = (int)p + 1;
        if (w->kind == SIM_WEIGHT_TRAINABLE) {
            r->gradients += ipu_bytes(w);
            r->optimizer += (uint64_t)w->bytes * state_per_weight(e);
        }
    }
    for (int i = 0; i < e->n_out; i++) {
        const struct sim_val *v = &e->vals[e->out[i].val];
        unsigned ipu = v->kind == SIM_V_ACT ? (unsigned)v->ipu : 0;
        if (ipu != p)
            continue;
        if (e->out[i].zero_copy || v->kind == SIM_V_INPUT)
            r->activations += e->out[i].step_bytes;
        else if ((v->kind == SIM_V_CONST || v->kind == SIM_V_WEIGHT) &&
                 seen[e->out[i].val] != (int)p + 1) {
            seen[e->out[i].val] = (int)p + 1;
            r->weights += v->kind == SIM_V_WEIGHT ? ipu_bytes(&e->w[v->weight]) : v->bytes;
        }
    }
}

/* Weights the nodes of stage k read (phased: what one phase needs on chip); mark has
 * e->n_w entries. */
static uint64_t
stage_weights(const struct sim_exe *e, int k, int *mark)
{
    uint64_t b = 0;

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        if (n->stage != k)
            continue;
        for (int j = 0; j < n->n_in; j++) {
            const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
            if (v == NULL || v->kind != SIM_V_WEIGHT || mark[v->weight] == k + 1)
                continue;
            mark[v->weight] = k + 1;
            b += ipu_bytes(&e->w[v->weight]);
        }
    }
    return b;
}

/* Whether value v, produced in stage k, is read on stage k's IPU by a node from step
 * `from` on. */
static bool
read_here_from(const struct sim_exe *e, int v, int k, int from)
{
    int ipu = e->stage_ipu[k];

    for (int s = from; s < e->n_nodes; s++)
        for (int j = 0; j < e->nodes[s].n_in; j++)
            if (e->nodes[s].in[j] == v && e->nodes[s].ipu == ipu)
                return true;
    return false;
}

/* The bytes of the input streams stage k reads first on its IPU in a node whose gradient
 * rule (bwd_reads) or recompute reads them again: inputs of the stage, stashed with it under Pipeline
 * recomputation. */
static uint64_t
stage_streams(const struct sim_exe *e, int k)
{
    uint64_t b = 0;

    for (int s = e->stage_node[k]; s < sim_stage_end(e, k); s++) {
        const struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++) {
            int v = n->in[j], t = 0, i;
            if (v < 0 || e->vals[v].kind != SIM_V_INPUT)
                continue;
            for (t = 0; t < e->n_nodes; t++) {          /* its first reader here */
                for (i = 0; i < e->nodes[t].n_in && e->nodes[t].in[i] != v; i++)
                    ;
                if (i < e->nodes[t].n_in && e->nodes[t].ipu == n->ipu)
                    break;
            }
            for (i = 0; i < j && n->in[i] != v; i++)
                ;
            if (t == s && i == j &&
                ((n->bstep >= 0 && sim_bwd_reads_in(sim_node_bwd_reads(e, s), j)) ||
                 n->rstep >= 0))
                b += align_up(e->vals[v].bytes);
        }
    }
    return b;
}

/* Whether stage k's values and saved state other than its inputs and checkpoints are
 * recomputed on the IPU: Pipeline recomputation
 * (PopART's RecomputationType::Pipeline recomputes every forward op of a stage but the
 * loss's from what the stage stashes). The host may keep more of them (recompute.c
 * keeps a node whose output another segment reads, or whose views are too many). */
static bool
ipu_recomputes(const struct sim_exe *e, int k)
{
    int loss_stage = e->nodes[e->vals[e->tr->loss].producer].stage;

    return e->recompute == SIM_RECOMPUTE_PIPELINE && k != loss_stage;
}

/* The IPU bytes stage k's micro-batch keeps from its forward into its backward (training):
 * its values, saved state and received copies live across the boundary (step n_nodes);
 * under Pipeline recomputation only its received copies and input streams, the values a
 * later stage of its IPU reads, and the checkpoints a later node of the stage reads (what
 * PopART stashes: a stage's inputs, and the checkpoints its recomputation starts from; a
 * checkpoint only another IPU reads is sent, not stashed). */
static uint64_t
stage_kept(const struct sim_exe *e, int k)
{
    int F = e->n_nodes;
    bool rec = ipu_recomputes(e, k);
    uint64_t b = 0;

    for (int v = 0; v < e->m->n_vals; v++) {
        const struct sim_val *val = &e->vals[v];
        if (val->kind != SIM_V_ACT || val->out_io >= 0 || val->producer < 0 ||
            e->nodes[val->producer].stage != k || val->first >= F || val->last < F)
            continue;
        if (rec && !read_here_from(e, v, k, sim_stage_end(e, k)) &&
            !(sim_recompute_is_checkpoint(e, val->producer) &&
              read_here_from(e, v, k, val->producer + 1)))
            continue;
        b += align_up(val->bytes ? val->bytes : 1);
    }
    for (int s = e->stage_node[k]; s < sim_stage_end(e, k); s++) {
        const struct sim_enode *n = &e->nodes[s];
        if (n->saved > 0 && n->bstep >= 0 && n->rstep < 0 &&
            (!rec || sim_recompute_is_checkpoint(e, s)))
            b += align_up(n->saved);
    }
    if (rec)
        b += stage_streams(e, k);
    for (int i = 0; i < e->n_xfer; i++)
        if (e->xfer[i].rstage == k && e->xfer[i].first < F && e->xfer[i].last >= F)
            b += align_up(e->vals[e->xfer[i].val].bytes);
    return b;
}

/* Pipelining stashes: when pipelined, IPU p holds several micro-batches at once, each in
 * a slot of its own (a whole copy of its arena on the host; on the IPU, training, what
 * each stage keeps across the forward/backward boundary: stage_kept): training, its first stage k has
 * min(A, 2(N-k)-1) between the forward and the backward (the backward of the oldest runs
 * before the forward of the newest in a step); inference, one per stage it holds. Then
 * the tensors held off chip, and the totals. */
static int
stash_and_locations(struct sim_exe *e, struct sim_err *err)
{
    int N = e->n_stages;
    int *mark = calloc((size_t)e->n_w + 1, sizeof(*mark));

    if (mark == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory planning the executable");

    e->slots = calloc(e->ipr, sizeof(*e->slots));
    if (e->slots == NULL) {
        free(mark);
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory planning the executable");
    }
    e->S = 1;
    for (unsigned p = 0; p < e->ipr; p++) {
        struct sim_mem_report *r = &e->mem[p];
        uint64_t phase_w = 0;
        int first = -1;
        e->slots[p] = 1;
        for (int k = 0; k < N; k++) {
            unsigned flight;
            if (e->stage_ipu[k] != (int)p)
                continue;
            if (e->strategy == SIM_STRATEGY_PHASED) {
                uint64_t w = stage_weights(e, k, mark);
                phase_w = w > phase_w ? w : phase_w;
            }
            if (e->strategy != SIM_STRATEGY_PIPELINED)
                continue;
            if (e->tr != NULL) {
                flight = 2u * (unsigned)(N - k) - 1u;   /* forward to backward */
                if (flight > e->A)
                    flight = e->A;
            } else {
                flight = 1;
            }
            if (first < 0)
                first = k;
            if (flight < (unsigned)(k - first) + 1u)    /* stages after the first on p */
                flight = (unsigned)(k - first) + 1u;
            if (flight > e->slots[p])
                e->slots[p] = flight;
        }
        /* a slot is a whole copy of the IPU's arena on the host (its own kernel bindings);
         * on the IPU, training, each of stage k's micro-batches in flight beyond the first
         * holds what it keeps from its forward to its backward (with recomputation, the
         * checkpoints and the stage's inputs) */
        r->stash = e->tr != NULL ? 0 : (uint64_t)(e->slots[p] - 1) * e->arena_bytes[p];
        for (int k = 0; e->tr != NULL && e->strategy == SIM_STRATEGY_PIPELINED && k < N; k++) {
            unsigned fl = 2u * (unsigned)(N - k) - 1u;  /* stage k's micro-batches in flight */
            if (e->stage_ipu[k] == (int)p && (fl = fl < e->A ? fl : e->A) > 1)
                r->stash += (uint64_t)(fl - 1) * stage_kept(e, k);
        }
        if (e->slots[p] > e->S)
            e->S = e->slots[p];
        if (e->strategy == SIM_STRATEGY_PHASED && phase_w < r->weights) {
            r->offchip += r->weights - phase_w;     /* phases not running: off chip */
            r->weights = phase_w;
        }
        if (e->location[SIM_LOC_WEIGHTS]) {
            r->offchip += r->weights;
            r->weights = 0;
        }
        if (e->location[SIM_LOC_ACTIVATIONS]) {
            r->offchip += r->stash;
            r->stash = 0;
        }
        if (e->location[SIM_LOC_ACCUMULATORS]) {
            r->offchip += r->gradients;
            r->gradients = 0;
        }
        if (e->location[SIM_LOC_OPTIMIZER]) {
            r->offchip += r->optimizer;
            r->optimizer = 0;
        }
        r->total = r->weights + r->activations + r->code + r->gradients + r->optimizer +
                   r->stash;
    }
    free(mark);
    return 0;
}

/* Collects into b the blocks of the executable's arenas (values and their recomputed
 * copies, scratch, saved state, gradients, exchange copies); vb[v] and vrb[v] the index of
 * value v's and of its recomputed copy's, or -1. Returns how many. */
static size_t
collect_blocks(struct sim_exe *e, struct block *b, int *vb, int *vrb)
{
    size_t nb = 0;

    for (int v = 0; v < e->m->n_vals; v++) {
        struct sim_val *val = &e->vals[v];
        vb[v] = vrb[v] = -1;
        if (val->kind != SIM_V_ACT || val->out_io >= 0)
            continue;
        vb[v] = (int)nb;
        b[nb++] = (struct block){ val->bytes, val->first, val->last, val->ipu, &val->off,
                                  -1, -1 };
        val->roff = -1;
        if (val->rfirst >= 0) {     /* the recomputed copy the backward reads */
            vrb[v] = (int)nb;
            b[nb++] = (struct block){ val->bytes, val->rfirst, val->rlast, val->ipu,
                                      &val->roff, -1, -1 };
        }
    }
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        int bs = n->bstep >= 0 ? e->n_nodes + n->bstep : -1;
        int rs = n->rstep >= 0 ? e->n_nodes + n->rstep : -1;     /* recomputed there */
        n->scratch_off = -1;
        n->saved_off = -1;
        n->bwd_scratch_off = -1;
        if (n->scratch > 0)
            b[nb++] = (struct block){ n->scratch, s, s, n->ipu, &n->scratch_off, rs, rs,
                                      sim_temp_ipu_bytes(e, n, n->scratch) };
        if (e->tr == NULL)
            continue;
        if (n->saved > 0 && rs >= 0)
            b[nb++] = (struct block){ n->saved, s, s, n->ipu, &n->saved_off, rs,
                                      bs >= 0 ? bs : rs };
        else if (n->saved > 0)
            b[nb++] = (struct block){ n->saved, s, bs >= 0 ? bs : s, n->ipu, &n->saved_off,
                                      -1, -1 };
        if (n->bwd_scratch > 0 && bs >= 0)
            b[nb++] = (struct block){ n->bwd_scratch, bs, bs, n->ipu, &n->bwd_scratch_off,
                                      -1, -1, sim_temp_ipu_bytes(e, n, n->bwd_scratch) };
    }
    for (int v = 0; e->tr != NULL && v < e->m->n_vals; v++) {
        struct sim_val *val = &e->vals[v];
        if (!val->grad || val->kind != SIM_V_ACT)
            continue;
        b[nb++] = (struct block){ val->bytes, val->gfirst, val->glast, val->ipu, &val->goff,
                                  -1, -1 };
    }
    for (int i = 0; i < e->n_xfer; i++) {
        struct sim_xfer *x = &e->xfer[i];
        size_t bytes = e->vals[x->val].bytes;
        b[nb++] = (struct block){ bytes, x->first, x->last, x->dst, &x->off, -1, -1 };
        if (e->tr != NULL && x->gfirst >= 0)
            b[nb++] = (struct block){ bytes, x->gfirst, x->glast, x->dst, &x->goff, -1, -1 };
    }
    return nb;
}

struct span {
    int64_t lo, hi;
};

static int
cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

#define RELEASE_PAGE 4096
#define RELEASE_MIN (64 * 1024)     /* smaller gaps are not worth a system call */

/* Appends to e->rel the whole pages of [0, top) that none of the n spans (sorted) covers,
 * in gaps of RELEASE_MIN or more (poisoning: every gap, to SIM_ALIGN). 0 or -1 (out of
 * memory). */
static int
release_gaps(struct sim_exe *e, const struct span *sp, size_t n, int64_t top, size_t *nrel,
             size_t *cap)
{
    int64_t cur = 0, page = e->rel_poison ? SIM_ALIGN : RELEASE_PAGE;
    int64_t least = e->rel_poison ? SIM_ALIGN : RELEASE_MIN;

    for (size_t i = 0; i <= n; i++) {
        int64_t end = i < n ? sp[i].lo : top;
        int64_t a = (cur + page - 1) / page * page;
        int64_t z = end / page * page;
        if (z - a >= least) {
            if (*nrel == *cap) {
                size_t nc = *cap * 2 + 16;
                struct sim_release *r = realloc(e->rel, nc * sizeof(*r));
                if (r == NULL)
                    return -1;
                e->rel = r;
                *cap = nc;
            }
            e->rel[(*nrel)++] = (struct sim_release){ a, z - a };
        }
        if (i < n && sp[i].hi > cur)
            cur = sp[i].hi;
    }
    return 0;
}

/*
 * Pipelined training: an IPU holds slots[p] copies of its arena, one per micro-batch in
 * flight, but between a stage's forward and its backward a micro-batch needs only what
 * crosses (its stash: under recomputation its inputs and checkpoints). So after the last
 * step t of stage k's forward work (its last node) and of its backward work (its last
 * backward step), ipus.c releases the lane's whole pages that no block of the IPU live
 * across t (a lifetime with first <= t < last) holds: they are dead until written again
 * (the plan itself lets another block overwrite them) and read as zero, as at bind, and
 * take no host memory until then. Only where the slots past each IPU's first map at least
 * SIM_RELEASE_MIN_BYTES in all: a release costs a madvise and, when the lane runs again, a
 * page fault and a zeroed page for each page written; the MNIST tutorial pipelined over 4
 * IPUs (a few MiB a slot) trained at 0.49x of its speed without releases with them.
 * IPUOF_SIM_RELEASE=0 turns it off, =1 on whatever the size; =poison (tests, also on
 * whatever the size) fills the ranges with 0xff instead. Fills e->rel, e->rel_start and
 * e->rel_held (what a lane waiting between two works may hold, for
 * sim_exe_host_arena_bytes); 0 or IPUOF_E_NOMEM.
 */
#define SIM_RELEASE_MIN_BYTES (1ull << 30)

static int
release_plan(struct sim_exe *e, const struct block *b, size_t nb, struct sim_err *err)
{
    const char *env = getenv("IPUOF_SIM_RELEASE");
    int K = e->n_stages, *tb = NULL;
    struct span *sp = calloc(nb + 1, sizeof(*sp));
    size_t nrel = 0, cap = 0;
    bool any = false;
    uint64_t extra = 0;     /* bytes the slots past each IPU's first map */

    e->rel_poison = env != NULL && strcmp(env, "poison") == 0;
    for (unsigned p = 0; e->tr != NULL && p < e->ipr && !(env && strcmp(env, "0") == 0); p++) {
        any = any || e->slots[p] > 1;
        if (e->slots[p] > 1)
            extra += (uint64_t)(e->slots[p] - 1) * e->arena_bytes[p];
    }
    if (env == NULL && extra < SIM_RELEASE_MIN_BYTES)
        any = false;    /* auto: small slots cost more to release than they hold */
    if (!any) {
        free(sp);
        return 0;
    }
    tb = malloc(((size_t)K + 1) * sizeof(*tb));
    e->rel_start = calloc(2 * (size_t)K + 1, sizeof(*e->rel_start));
    e->rel_held = calloc(e->ipr, sizeof(*e->rel_held));
    if (sp == NULL || tb == NULL || e->rel_start == NULL || e->rel_held == NULL)
        goto oom;
    for (int k = 0; k < K; k++)
        tb[k] = -1;
    for (int i = 0; i < e->tr->n_bsteps; i++) {
        int k = e->nodes[e->tr->bsteps[i].node].stage;
        tb[k] = e->n_nodes + i;
    }
    for (int k = 0; k < K; k++)
        for (int bwd = 0; bwd < 2; bwd++) {
            int t = bwd ? tb[k] : sim_stage_end(e, k) - 1;
            int p = e->stage_node[k] >= 0 ? e->nodes[e->stage_node[k]].ipu : -1;
            size_t n = 0;
            e->rel_start[2 * k + bwd] = (int)nrel;
            if (p < 0 || t < 0 || e->slots[p] <= 1)
                continue;
            for (size_t i = 0; i < nb; i++)
                if (b[i].ipu == p && ((b[i].first <= t && b[i].last > t) ||
                                      (b[i].first2 >= 0 && b[i].first2 <= t &&
                                       b[i].last2 > t)))
                    sp[n++] = (struct span){ *b[i].off,
                                             *b[i].off + (int64_t)align_up(b[i].size ? b[i].size
                                                                                    : 1) };
            qsort(sp, n, sizeof(*sp), cmp_span);
            size_t r0 = nrel;
            if (release_gaps(e, sp, n, (int64_t)e->arena_bytes[p], &nrel, &cap) != 0)
                goto oom;
            uint64_t held = e->arena_bytes[p];
            for (size_t j = r0; j < nrel; j++)
                held -= (uint64_t)e->rel[j].len;
            if (held > e->rel_held[p])
                e->rel_held[p] = held;
        }
    e->rel_start[2 * K] = (int)nrel;
    free(sp);
    free(tb);
    return 0;
oom:
    free(sp);
    free(tb);
    return sim_err_set(err, IPUOF_E_NOMEM, "out of memory planning the executable");
}

int
sim_plan_memory(struct sim_exe *e, struct sim_err *err)
{
    struct block *b = NULL, *c = NULL;
    int *seen = NULL, *vb = NULL, *vrb = NULL, *root = NULL;
    int64_t *offs = NULL;
    size_t nb = 0, cap = 3 * (size_t)e->m->n_vals + 3 * (size_t)e->n_nodes +
                         2 * (size_t)e->n_xfer + 1;
    int rc = 0;
    uint64_t cross[SIM_MAX_IPUS] = { 0 };

    rc = sim_temp_check(e, err);
    if (rc != 0)
        return rc;
    liveness(e);
    b = calloc(cap, sizeof(*b));
    c = calloc(cap, sizeof(*c));
    offs = calloc(cap, sizeof(*offs));
    seen = calloc((size_t)e->m->n_vals + 1, sizeof(*seen));
    vb = calloc(3 * (size_t)e->m->n_vals + 3, sizeof(*vb));
    e->arena_bytes = calloc(e->ipr, sizeof(*e->arena_bytes));
    e->mem = calloc((size_t)e->ipr * e->R, sizeof(*e->mem));
    vrb = vb != NULL ? vb + e->m->n_vals + 1 : NULL;
    root = vb != NULL ? vb + 2 * (size_t)e->m->n_vals + 2 : NULL;
    if (b == NULL || c == NULL || offs == NULL || seen == NULL || vb == NULL ||
        e->arena_bytes == NULL || e->mem == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory planning the executable");
        goto out;
    }
    nb = collect_blocks(e, b, vb, vrb);
    ipu_blocks(e, b, nb, vb, vrb, root, c, offs);
    qsort(c, nb, sizeof(*c), cmp_block);
    qsort(b, nb, sizeof(*b), cmp_block);
    for (unsigned p = 0; p < e->ipr; p++) {
        struct sim_mem_report *r = &e->mem[p];
        size_t top = place_blocks(b, nb, (int)p);
        size_t itop = place_blocks(c, nb, (int)p);
        if (top == SIZE_MAX || itop == SIZE_MAX) {
            rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory planning the executable");
            goto out;
        }
        for (size_t i = 0; i < nb; i++)     /* live from the forward into the backward */
            if (b[i].ipu == (int)p && b[i].first < e->n_nodes && b[i].last >= e->n_nodes)
                cross[p] += align_up(b[i].size ? b[i].size : 1);
        e->arena_bytes[p] = top;
        r->ipu = p;
        r->tiles = e->tiles;
        r->capacity = e->capacity;
        r->code = SIM_CODE_BASE_BYTES;
        r->activations = itop;
        r->peak_not_always_live = itop;
        account(e, p, seen, r);
    }
    rc = stash_and_locations(e, err);
    if (rc == 0)
        rc = release_plan(e, b, nb, err);
    if (rc != 0)
        goto out;
    for (unsigned p = 0; p < e->ipr; p++)
        if (e->mem[p].total > e->mem[p].capacity) {
            rc = sim_plan_no_fit(e, p, cross[p], err);
            goto out;
        }
    for (unsigned r = 1; r < e->R; r++)
        for (unsigned p = 0; p < e->ipr; p++) {
            e->mem[r * e->ipr + p] = e->mem[p];
            e->mem[r * e->ipr + p].ipu = r * e->ipr + p;
            e->mem[r * e->ipr + p].replica = r;
        }
out:
    free(b);
    free(c);
    free(offs);
    free(vb);
    free(seen);
    return rc;
}

size_t
sim_exe_ipu_count(const struct sim_exe *e)
{
    return (size_t)e->R * e->ipr;
}

int
sim_exe_memory(const struct sim_exe *e, size_t ipu, struct sim_mem_report *rep)
{
    if (ipu >= (size_t)e->R * e->ipr)
        return IPUOF_E_INVAL;
    *rep = e->mem[ipu];
    return 0;
}

uint64_t
sim_exe_host_arena_bytes(const struct sim_exe *e)
{
    uint64_t sum = 0;

    for (unsigned p = 0; p < e->ipr; p++) {
        uint64_t one = e->arena_bytes[p], rest = e->slots[p] > 1 ? e->slots[p] - 1 : 0;
        /* a lane that waits between two works holds at most what the last release left */
        sum += one + rest * (e->rel_held != NULL ? e->rel_held[p] : one);
    }
    return sum * e->R;
}

/*
 * recompute.c — recomputation as PopART does it for PopTorch: the backward pass runs the
 * forward of a segment again instead of keeping its activations from the forward.
 *
 * Does: read the memory options of the model's metadata (sim_memory_meta); resolve the
 * mode (PopART's RecomputationType; unset: Pipeline for pipelined training over more than
 * one IPU, as PopTorch's compiler sets it, else None); pick the nodes to recompute:
 *   None        only nodes whose __recompute_output_in_backward attribute is 2 (Recompute);
 *   Standard    every node, with a checkpoint after every ~sqrt(n) nodes of a stage;
 *   NormOnly    norms (BatchNormalization, LayerNormalization, GroupNormalization,
 *               InstanceNormalization) and an activation reading a norm's output;
 *   Pipeline    every node of every forward stage but the last (the loss's), when pipelined;
 *   RecomputeAll every node;
 * never a checkpoint (attribute 1: its outputs are kept), a node writing a graph output or
 * the loss, a node of an If's branch, a BufferUpdate, or a node reading an updated buffer
 * (other than a BatchNormalization in training mode, whose results do not read it).
 * Segments are the runs of nodes of one stage between checkpoints; a node whose output is
 * read outside its segment is kept. A recomputed node is run again only when a gradient
 * rule of its segment reads its outputs (the op table's bwd_reads) (or a node run again reads them); its recompute
 * step goes before the first gradient step of its segment, in forward order. The step
 * reruns the same kernel on the same (kept) inputs, reseeded as the forward was, so its
 * results are the forward's bits.
 * The recompute step and the gradient steps that read its values use views repointed at
 * the recomputed copies (sim_recompute_kern; plan.c places those copies apart from the
 * forward's, which die after their last forward reader).
 * Does not: place anything (plan.c) or schedule the steps (ipus.c runs them).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"

/* Parses a proportion in [0, 1]: true when s is one. */
static bool
parse_prop(const char *s, char **end, float *out)
{
    double v = strtod(s, end);

    if (*end == s || !(v >= 0.0 && v <= 1.0))
        return false;
    *out = (float)v;
    return true;
}

int
sim_memory_meta(struct sim_model *m, const char *key, const char *value, struct sim_err *err)
{
    char *end;

    if (strcmp(key, "ipuof.recomputation") == 0) {
        long v = strtol(value, &end, 10);
        if (end == value || *end != '\0' || v < 0 || v > SIM_RECOMPUTE_ALL)
            return sim_err_set(err, IPUOF_E_INVAL, "metadata ipuof.recomputation is '%.40s'; "
                               "it is PopART's RecomputationType: 0 (None), 1 (Standard), 2 "
                               "(NormOnly), 3 (Pipeline) or 4 (RecomputeAll)", value);
        m->recompute = (int)v;
    } else if (strcmp(key, "ipuof.available_memory_proportion") == 0) {
        const char *p = value;
        unsigned n = 0;
        float f;
        while (*p != '\0') {
            if (n >= SIM_MAX_IPUS || !parse_prop(p, &end, &f) || (*end != ',' && *end != '\0'))
                return sim_err_set(err, IPUOF_E_INVAL, "metadata "
                                   "ipuof.available_memory_proportion is '%.60s'; it is one "
                                   "proportion in [0, 1] per IPU, separated by commas (at "
                                   "most %d)", value, SIM_MAX_IPUS);
            m->mem_prop[n++] = f;
            p = *end == ',' ? end + 1 : end;
        }
        for (unsigned i = n == 1 ? 1 : SIM_MAX_IPUS; i < SIM_MAX_IPUS; i++)
            m->mem_prop[i] = m->mem_prop[0];
    } else if (strcmp(key, "ipuof.io_tiles") == 0) {
        long v = strtol(value, &end, 10);
        if (end == value || *end != '\0' || v < 0 || v >= SIM_DEFAULT_TILES)
            return sim_err_set(err, IPUOF_E_INVAL, "metadata ipuof.io_tiles is '%.40s'; it is "
                               "the tiles kept for I/O, 0 to %d (PopTorch takes an even number "
                               "from 32 to 192)", value, SIM_DEFAULT_TILES - 1);
        m->io_tiles = (unsigned)v;
    }
    return 0;
}

static int
ckpt_attr(const struct sim_exe *e, int s)
{
    const struct sim_attr *a = sim_attr_find(&e->m->nodes[e->nodes[s].mnode],
                                             "__recompute_output_in_backward");

    return a != NULL && a->type == SIM_ATTR_INT ? (int)a->i : 0;
}

bool
sim_recompute_is_checkpoint(const struct sim_exe *e, int s)
{
    return ckpt_attr(e, s) == 1;
}

static bool
is_norm(const struct sim_enode *n)
{
    static const char *const norms[] = { "BatchNormalization", "LayerNormalization",
                                         "GroupNormalization", "InstanceNormalization" };

    for (size_t i = 0; i < sizeof(norms) / sizeof(norms[0]); i++)
        if (strcmp(n->op->name, norms[i]) == 0)
            return true;
    return false;
}

/* Whether value v is a graph output. */
static bool
is_graph_output(const struct sim_exe *e, int v)
{
    for (int i = 0; i < e->m->n_out; i++)
        if (e->m->outputs[i] == v)
            return true;
    return false;
}

#define SNAP_BYTES 16384      /* per buffer a recompute restores (sim_recompute_run) */
#define SNAP_MAX 2

/* Whether output j > 0 of node s has no reader. */
static bool
extra_outputs_unread(const struct sim_exe *e, int s)
{
    const struct sim_enode *n = &e->nodes[s];

    for (int t = s + 1; t < e->n_nodes; t++)
        for (int i = 0; i < e->nodes[t].n_in; i++)
            for (int j = 1; j < n->n_out; j++)
                if (n->out[j] >= 0 && e->nodes[t].in[i] == n->out[j])
                    return false;
    return true;
}

/* Whether node s may be recomputed: running it again gives the forward's results and
 * changes nothing else (a training BatchNormalization updates its running statistics
 * in place: sim_recompute_run restores them, and its statistics outputs must be unread). */
static bool
eligible(const struct sim_exe *e, int s)
{
    const struct sim_enode *n = &e->nodes[s];
    const struct sim_mnode *mn = &e->m->nodes[n->mnode];

    if (mn->guard != 0 || ckpt_attr(e, s) == 1 || strcmp(n->op->name, "BufferUpdate") == 0)
        return false;
    for (int j = 0; j < n->n_out; j++) {
        int v = n->out[j];
        if (v >= 0 && (v == e->tr->loss || is_graph_output(e, v)))
            return false;
    }
    for (int j = 0, k = 0; j < n->n_in; j++) {
        const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
        if (v == NULL || v->kind != SIM_V_WEIGHT || e->w[v->weight].kind != SIM_WEIGHT_BUFFER)
            continue;
        if (strcmp(n->op->name, "BatchNormalization") != 0 || ++k > SNAP_MAX ||
            e->w[v->weight].bytes > SNAP_BYTES || !extra_outputs_unread(e, s))
            return false;
    }
    return true;
}

/* The resolved mode: PopTorch sets Pipeline for pipelined training over several IPUs. */
static int
resolve_mode(const struct sim_exe *e)
{
    if (e->m->recompute != SIM_RECOMPUTE_UNSET)
        return e->m->recompute;
    return e->strategy == SIM_STRATEGY_PIPELINED && e->ipr > 1 ? SIM_RECOMPUTE_PIPELINE
                                                                : SIM_RECOMPUTE_NONE;
}

/* Marks rec[s] (chosen by the mode) and seg[s] (segment numbers, increasing). */
static void
choose(const struct sim_exe *e, int mode, unsigned char *rec, int *seg)
{
    int g = 0, k = -1, in_stage = 0, loss_stage = e->nodes[e->vals[e->tr->loss].producer].stage;
    int every = 0;

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        bool pick = false;
        if (n->stage != k) {
            int len = sim_stage_end(e, n->stage) - s;
            k = n->stage;
            g++;
            in_stage = 0;
            every = (int)ceil(sqrt((double)(len > 0 ? len : 1)));
        } else if (s > 0 && (ckpt_attr(e, s - 1) == 1 ||
                             (mode == SIM_RECOMPUTE_STANDARD && in_stage % every == 0))) {
            g++;
        }
        in_stage++;
        seg[s] = g;
        switch (mode) {
        case SIM_RECOMPUTE_STANDARD:
        case SIM_RECOMPUTE_ALL:
            pick = true;
            break;
        case SIM_RECOMPUTE_NORMONLY:
            pick = is_norm(n);
            for (int j = 0; !pick && j < n->n_in && n->n_in == 1; j++) {
                int p = n->in[j] >= 0 ? e->vals[n->in[j]].producer : -1;
                pick = p >= 0 && is_norm(&e->nodes[p]) && sim_op_grad_input(n->op, j);
            }
            break;
        case SIM_RECOMPUTE_PIPELINE:
            pick = e->strategy == SIM_STRATEGY_PIPELINED && e->n_stages > 1 &&
                   n->stage != loss_stage;
            break;
        default:
            break;
        }
        rec[s] = (pick || ckpt_attr(e, s) == 2) && eligible(e, s);
    }
}

/* Keeps every node with an output read outside its segment; then marks run[s] for the
 * recomputed nodes whose outputs the gradient rules (what their bwd_reads declare) or
 * other recomputed nodes read. */
static void
needed(const struct sim_exe *e, unsigned char *rec, const int *seg, unsigned char *need,
       unsigned char *run)
{
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        bool wide = n->n_in + n->n_out > SIM_RC_MAX_VIEWS;    /* views copied on the stack */
        if (wide)
            rec[s] = 0;
        for (int j = 0; j < n->n_in; j++) {
            int p = n->in[j] >= 0 ? e->vals[n->in[j]].producer : -1;
            if (p >= 0 && rec[p] && (seg[p] != seg[s] || wide))
                rec[p] = 0;
        }
    }
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        if (n->bstep < 0)
            continue;
        uint32_t reads = sim_node_bwd_reads(e, s);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && sim_bwd_reads_in(reads, j))
                need[n->in[j]] = 1;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && sim_bwd_reads_out(reads, j))
                need[n->out[j]] = 1;
    }
    for (int s = e->n_nodes - 1; s >= 0; s--) {
        const struct sim_enode *n = &e->nodes[s];
        bool want = false;
        if (!rec[s])
            continue;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && need[n->out[j]])
                want = true;
        if (!want)
            continue;
        run[s] = 1;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0)
                need[n->in[j]] = 1;
    }
}

/* Rebuilds tr->bsteps with the recompute steps of each segment before its first gradient
 * step, renumbering every node's bstep and rstep. */
static int
insert_steps(struct sim_exe *e, const unsigned char *run, const int *seg, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    int n_run = 0, nb = 0, last_seg = -1;
    struct sim_bstep *b;

    for (int s = 0; s < e->n_nodes; s++)
        n_run += run[s];
    if (n_run == 0)
        return 0;
    b = calloc((size_t)tr->n_bsteps + (size_t)n_run + 1, sizeof(*b));
    if (b == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int i = 0; i < tr->n_bsteps; i++) {
        int s = tr->bsteps[i].node, g = seg[s];
        if (g != last_seg) {
            for (int t = 0; t < e->n_nodes; t++) {
                if (seg[t] != g || !run[t])
                    continue;
                e->nodes[t].rstep = nb;
                b[nb].node = t;
                b[nb++].recompute = true;
            }
            last_seg = g;
        }
        e->nodes[s].bstep = nb;
        b[nb++] = tr->bsteps[i];
    }
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && e->vals[n->in[j]].producer >= 0 &&
                run[e->vals[n->in[j]].producer])
                n->rviews = true;
        if (run[s])
            n->rviews = true;
    }
    free(tr->bsteps);
    tr->bsteps = b;
    tr->n_bsteps = nb;
    e->n_recomputed = n_run;
    return 0;
}

/* Whether value v (an input or output of a node) is written by a recompute step. */
static bool
recomputed_val(const struct sim_exe *e, int v)
{
    return v >= 0 && e->vals[v].kind == SIM_V_ACT && e->vals[v].producer >= 0 &&
           e->nodes[e->vals[v].producer].rstep >= 0 && e->vals[v].roff >= 0;
}

void
sim_recompute_kern(const struct sim_exe *e, unsigned L, const struct sim_enode *n,
                   const struct sim_kern *src, struct sim_kern *dst, struct sim_tensor *views)
{
    char *ar = e->arenas[L * e->ipr + (unsigned)n->ipu];

    *dst = *src;
    for (int j = 0; j < src->n_in; j++) {
        views[j] = src->in[j];
        if (recomputed_val(e, n->in[j]))
            views[j].data = ar + e->vals[n->in[j]].roff;
    }
    for (int j = 0; j < src->n_out; j++) {
        views[src->n_in + j] = src->out[j];
        if (recomputed_val(e, n->out[j]))
            views[src->n_in + j].data = ar + e->vals[n->out[j]].roff;
    }
    dst->in = views;
    dst->out = views + src->n_in;
}

int
sim_recompute_run(struct sim_exe *e, int s, unsigned L, struct sim_err *err)
{
    const struct sim_enode *n = &e->nodes[s];
    unsigned char snap[SNAP_MAX][SNAP_BYTES];
    struct sim_tensor views[SIM_RC_MAX_VIEWS];
    struct sim_kern kk, *k = &kk;
    int idx[SNAP_MAX], ns = 0, rc;

    sim_recompute_kern(e, L, n, &e->kern[(size_t)L * (size_t)e->n_nodes + (size_t)s], &kk,
                       views);

    for (int j = 0; j < n->n_in && ns < SNAP_MAX; j++) {
        const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
        if (v != NULL && v->kind == SIM_V_WEIGHT && e->w[v->weight].kind == SIM_WEIGHT_BUFFER &&
            e->w[v->weight].bytes <= SNAP_BYTES) {
            memcpy(snap[ns], k->in[j].data, e->w[v->weight].bytes);
            idx[ns++] = j;
        }
    }
    rc = sim_exec_node_forward(e, s, k, err);
    for (int i = 0; i < ns; i++)
        memcpy(k->in[idx[i]].data, snap[i], e->w[e->vals[n->in[idx[i]]].weight].bytes);
    return rc;
}

int
sim_recompute_steps(struct sim_exe *e, struct sim_err *err)
{
    size_t n = (size_t)e->n_nodes + 1, nv = (size_t)e->m->n_vals + 1;
    unsigned char *rec = calloc(n, 1), *run = calloc(n, 1), *need = calloc(nv, 1);
    int *seg = calloc(n, sizeof(*seg));
    int rc = 0;

    e->recompute = resolve_mode(e);
    if (rec == NULL || run == NULL || need == NULL || seg == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    } else {
        choose(e, e->recompute, rec, seg);
        needed(e, rec, seg, need, run);
        rc = insert_steps(e, run, seg, err);
    }
    free(rec);
    free(run);
    free(need);
    free(seg);
    return rc;
}

/*
 * fuse_int.h — what fuse.c and fuse_norm.c share: the pass's view of the schedule and the
 * small tests and moves every pattern uses. Internal to the fusion pass.
 */
#ifndef SIM_FUSE_INT_H
#define SIM_FUSE_INT_H

#include <string.h>

#include "exe.h"
#include "schedule.h"

/* What the pass knows about the schedule. */
struct fuse {
    struct sim_exe *e;
    int *reads;                 /* per value: how many input slots of live nodes read it */
    bool *is_out;               /* per value: a graph output */
    int *reader;                /* per value: the last node found reading it */
    bool *gone;                 /* per node: fused into another */
    bool train;                 /* a training executable: only GELU fuses (sim_fuse) */
    int dt;                     /* the float type the pattern being matched computes in:
                                 * SIM_DTYPE_FLOAT, or in training the chain's x's (float16
                                 * too) */
};

static inline bool
same_place(const struct sim_enode *a, const struct sim_enode *b)
{
    return a->ipu == b->ipu && a->stage == b->stage;
}

/* Whether node s is op `name` (by its table entry's name). */
static inline bool
is(const struct fuse *f, int s, const char *name)
{
    return strcmp(f->e->nodes[s].op->name, name) == 0;
}

/* Value v is an activation read by exactly `n` input slots and not a graph output. */
static inline bool
private_to(const struct fuse *f, int v, int n)
{
    return v >= 0 && f->e->vals[v].kind == SIM_V_ACT && !f->is_out[v] && f->reads[v] == n;
}

/* The node reading value v (valid when reads[v] >= 1). */
static inline int
reader_of(const struct fuse *f, int v)
{
    return f->reader[v];
}

/* Adds the cost of node `from` to node `to` and removes `from`. */
static inline void
absorb(struct fuse *f, int to, int from)
{
    struct sim_enode *t = &f->e->nodes[to], *n = &f->e->nodes[from];
    double flops, bytes, in_bytes = 0;
    struct sim_node_cost nt;

    sim_cost_node(f->e, from, &flops, &bytes);
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0)
            in_bytes += (double)f->e->vals[n->in[j]].bytes;
    t->fused_flops += flops;
    t->fused_bytes += bytes;
    t->fused_in_bytes += in_bytes + n->fused_in_bytes;
    sim_cost_node_time(f->e, from, &nt);
    for (int k = 0; k < 3; k++) {
        t->fused_t[k] += nt.fwd[k];
        t->fused_t[3 + k] += nt.bwd[k];
    }
    f->gone[from] = true;
}

/* The patterns of fuse_norm.c (LayerNorm, GELU, ConvNeXt's block end as exported): each
 * looks at node s, and when the pattern starting there holds, rewrites it and marks the
 * nodes it absorbs gone. f->reads and f->reader must be current for the live nodes. */
void sim_fuse_layernorm(struct fuse *f, int s);
void sim_fuse_ln_transpose(struct fuse *f, int s);
void sim_fuse_gelu(struct fuse *f, int s);
void sim_fuse_tail(struct fuse *f, int s);

#endif

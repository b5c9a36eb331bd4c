/*
 * layout.c — the layout plan of an inference executable: which activations stay in
 * oneDNN's blocked layout (nChw8c at AVX2 and baseline, nChw16c at AVX-512) instead of
 * plain NCHW.
 *
 * A oneDNN convolution (conv_dnnl.c) reads plain NCHW by reordering it into the layout its
 * kernel wants and writes plain by reordering back, every layer. When a tensor goes from
 * oneDNN convolutions only to oneDNN convolutions, both reorders between them are skipped:
 * the writers leave it blocked and the readers take it as it is. A same-shape float Add
 * (fused activation or not: fuse.c runs first) computes element by element, so it computes
 * the same in any layout its operands and result share: its values form one group with it
 * (resnet's residual stream: conv3 + identity -> Add -> next block's convs). A group is
 * blocked when
 *   - each of its values is an activation, not a graph output, written by a oneDNN Conv
 *     (2-D or 1-D) or by an Add of the group;
 *   - each reader is such an Add or a oneDNN Conv reading it as its data input (never as
 *     weights or bias), once, and all are on one IPU;
 *   - at least one Conv writes into it and one reads from it, and every writer's blocked
 *     layout is every reader's and takes the bytes of plain NCHW (sim_dnnl_conv_chains:
 *     the same batch split, channels a multiple of the block), so the memory plan (plan.c,
 *     after this pass) is unchanged.
 * Any other reader (a pool, an op of this simulator, another IPU, the host) sees plain
 * NCHW: the whole group stays plain. The activation fused into a Conv is elementwise, so
 * it applies to the blocked tensor as to the plain one.
 * 1x1 convolutions that op_conv.c's rule gives OpenBLAS (measured with oneDNN's reorders on
 * both sides) move to oneDNN first, and back when their input is no candidate (written by
 * neither a oneDNN Conv nor an Add) and larger than their output, or when neither side is
 * blocked (demote).
 * A Conv oneDNN cannot make with a blocked side makes its groups plain (the pass repeats
 * until none is refused). Training keeps plain tensors (autodiff and the backward kernels
 * read them). The outputs are bit-identical to every Conv on oneDNN with the pass off:
 * reorders only copy.
 * IPUOF_SIM_LAYOUT=0 turns the pass off (for measuring and for the tests), =keep keeps the
 * 1x1 convolutions where op_conv.c's rule put them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv_dnnl.h"
#include "exe.h"

/* What the pass knows about the schedule. */
struct lay {
    struct sim_exe *e;
    int *root;                  /* per value: union-find parent (a group of values that
                                 * elementwise nodes tie to one layout) */
    bool *is_out;               /* per value: a graph output */
    bool *bad;                  /* per group root: stays plain */
    bool *xb, *yb;              /* per node: reads / writes blocked */
    size_t *own_scratch;        /* per node promoted to oneDNN: its own kernels' scratch;
                                 * SIZE_MAX: not promoted */
};

/* Node s's oneDNN forward, or -1 when s is not a 1-D/2-D Conv on oneDNN. */
static int
dnnl_conv(const struct sim_exe *e, int s)
{
    const struct sim_enode *n = &e->nodes[s];
    int x = n->n_in > 0 ? n->in[0] : -1;

    if (strcmp(n->op->name, "Conv") != 0 || x < 0 || e->vals[x].ti.shape.rank > 4 ||
        n->half)    /* a float16 Conv runs on widened plain copies (half_exec.c) */
        return -1;
    return sim_conv_dnnl_id(n->params);
}

/* Whether node s computes each element of its output from the same element of each input
 * only: a float Add (fused activation or not) whose inputs have the output's shape. Such a
 * node computes the same in any layout its inputs and output share. */
static bool
elementwise(const struct sim_exe *e, int s)
{
    const struct sim_enode *n = &e->nodes[s];

    if (strcmp(n->op->name, "Add") != 0 || n->n_out != 1 || n->out[0] < 0 || n->n_in != 2)
        return false;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] < 0 || e->vals[n->in[j]].ti.dtype != SIM_DTYPE_FLOAT ||
            !sim_shape_eq(&e->vals[n->in[j]].ti.shape, &e->vals[n->out[0]].ti.shape))
            return false;
    return true;
}

/* The group of value v, or -1 when v is in none. */
static int
find(struct lay *l, int v)
{
    if (v < 0 || l->root[v] < 0)
        return -1;
    while (l->root[v] != v)
        v = l->root[v] = l->root[l->root[v]];
    return v;
}

/*
 * bad[g] for every group g: whether it must stay plain. It can be blocked when every value
 * is an activation, not a graph output, produced by a oneDNN Conv or an elementwise node;
 * every reader is an elementwise node or a oneDNN Conv reading it as its data input only,
 * all on one IPU; at least one Conv writes into it and one reads from it, and every writer
 * chains to every reader (sim_dnnl_conv_chains; the layouts are equal, so checking each
 * against one of the other side suffices). A few passes over the values and nodes.
 * Returns 0 or -1 (out of memory).
 */
static int
groups_check(struct lay *l)
{
    struct sim_exe *e = l->e;
    size_t nv = (size_t)e->m->n_vals + 1;
    int *ipu = malloc(nv * sizeof(int)), *p0 = malloc(nv * sizeof(int)),
        *r0 = malloc(nv * sizeof(int));
    int rc = -1;

    if (ipu == NULL || p0 == NULL || r0 == NULL)
        goto out;
    for (int v = 0; v < e->m->n_vals; v++) {
        ipu[v] = p0[v] = r0[v] = -1;
        l->bad[v] = false;
    }
    for (int v = 0; v < e->m->n_vals; v++) {
        int g = find(l, v), p = e->vals[v].producer;
        if (g < 0)
            continue;
        if (e->vals[v].kind != SIM_V_ACT || l->is_out[v] || p < 0 ||
            (dnnl_conv(e, p) < 0 && !elementwise(e, p))) {
            l->bad[g] = true;
            continue;
        }
        if (ipu[g] >= 0 && ipu[g] != e->nodes[p].ipu)
            l->bad[g] = true;
        ipu[g] = e->nodes[p].ipu;
        if (dnnl_conv(e, p) >= 0 && p0[g] < 0)
            p0[g] = p;
    }
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        bool ew = elementwise(e, s), conv = !ew && dnnl_conv(e, s) >= 0;
        for (int j = 0; j < n->n_in; j++) {
            int g = find(l, n->in[j]);
            if (g < 0)
                continue;
            if (n->ipu != ipu[g] || (!ew && !(conv && j == 0)))
                l->bad[g] = true;
            else if (conv && r0[g] < 0)
                r0[g] = s;
        }
    }
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        int gi, go;
        if (dnnl_conv(e, s) < 0)
            continue;
        gi = find(l, n->in[0]);
        go = find(l, n->out[0]);
        if (go >= 0 && r0[go] >= 0 &&
            !sim_dnnl_conv_chains(dnnl_conv(e, s), dnnl_conv(e, r0[go])))
            l->bad[go] = true;
        if (gi >= 0 && p0[gi] >= 0 &&
            !sim_dnnl_conv_chains(dnnl_conv(e, p0[gi]), dnnl_conv(e, s)))
            l->bad[gi] = true;
    }
    for (int v = 0; v < e->m->n_vals; v++)
        if (find(l, v) == v && (p0[v] < 0 || r0[v] < 0))
            l->bad[v] = true;
    rc = 0;
out:
    free(ipu);
    free(p0);
    free(r0);
    return rc;
}

/* 1x1 convolutions that op_conv.c's rule gave its own kernels (measured with oneDNN's
 * reorders on both sides) move to oneDNN for the plan, as candidates to chain;
 * IPUOF_SIM_LAYOUT=keep leaves every Conv where the rule put it (for measuring). */
static void
promote(struct lay *l)
{
    struct sim_exe *e = l->e;

    const char *env = getenv("IPUOF_SIM_LAYOUT");
    bool keep = env != NULL && strcmp(env, "keep") == 0;

    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        size_t need;
        l->own_scratch[s] = SIZE_MAX;
        if (keep || strcmp(n->op->name, "Conv") != 0 || n->n_in < 1 || n->in[0] < 0 ||
            e->vals[n->in[0]].ti.shape.rank != 4 || !sim_conv_dnnl_promotable(n->params) ||
            sim_conv_dnnl_set(n->params, true, &need) != 0)
            continue;
        l->own_scratch[s] = n->scratch;
        n->scratch = need;
    }
}

/*
 * Promoted convolutions go back to their own kernels where the plan cannot save what
 * oneDNN costs them. With fed_only: those whose input no oneDNN Conv or Add writes (a Mul,
 * a pool) and is larger than their output, so the reorder of the input stays and is the
 * larger one: efficientnet_b0's projections after its squeeze-excitation (96-1152 channels
 * in, 16-320 out), where keeping them on oneDNN lost to OpenBLAS, 0.27 against 0.24 CPU s a
 * step at avx2. (Demoting resnet50's first 1x1s after its MaxPool instead, 64 channels in,
 * 64 and 256 out, took the whole first stage's residual group plain with them: 0.58-0.62
 * against 0.50-0.52 at avx512.) Else: those with neither side blocked (their groups are
 * plain either way, so no other group changes).
 */
static void
demote(struct lay *l, bool fed_only)
{
    struct sim_exe *e = l->e;

    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        int gi, go;
        if (l->own_scratch[s] == SIZE_MAX)
            continue;
        gi = find(l, n->in[0]);
        go = find(l, n->out[0]);
        if (fed_only ? gi >= 0 || e->vals[n->in[0]].ti.numel <= e->vals[n->out[0]].ti.numel
                     : (gi >= 0 && !l->bad[gi]) || (go >= 0 && !l->bad[go]))
            continue;
        sim_conv_dnnl_set(n->params, false, NULL);
        n->scratch = l->own_scratch[s];
        l->own_scratch[s] = SIZE_MAX;
    }
}

/* The nodes' flags from the groups that are not bad; the values' blocked marks. */
static void
flags_from_groups(struct lay *l)
{
    struct sim_exe *e = l->e;

    for (int v = 0; v < e->m->n_vals; v++)
        e->vals[v].blocked = find(l, v) >= 0 && !l->bad[find(l, v)];
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        l->xb[s] = l->yb[s] = false;
        if (dnnl_conv(e, s) < 0)
            continue;
        l->xb[s] = e->vals[n->in[0]].blocked;
        l->yb[s] = n->out[0] >= 0 && e->vals[n->out[0]].blocked;
    }
}

/* Every oneDNN Conv whose weights are constants reads them reordered once, here, instead of
 * every run; own gives the copies to the executable, whose host_copy_bytes counts them (the
 * daemon's cache counts them against cache_bytes). Returns 0 or IPUOF_E_NOMEM. */
static int
weights_once(struct sim_exe *e, sim_exe_own_fn own, struct sim_err *err)
{
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        float *bw = NULL;
        size_t bytes = 0;
        if (dnnl_conv(e, s) < 0 || n->n_in < 2 || n->in[1] < 0 ||
            e->vals[n->in[1]].kind != SIM_V_CONST)
            continue;
        if (sim_conv_dnnl_weights(n->params, e->vals[n->in[1]].ti.cdata, &bw, &bytes) != 0)
            return sim_err_set(err, IPUOF_E_NOMEM, "out of memory (reordering the weights "
                               "of Conv '%s' for oneDNN)", n->label);
        if (bw != NULL && !own(e, bw))      /* own frees bw when it fails */
            return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        e->host_copy_bytes += bytes;
    }
    return 0;
}

int
sim_layout_plan(struct sim_exe *e, sim_exe_own_fn own, struct sim_err *err)
{
    const char *env = getenv("IPUOF_SIM_LAYOUT");
    size_t nv = (size_t)e->m->n_vals + 1, nn = (size_t)e->n_nodes + 1;
    struct lay l = { e, malloc(nv * sizeof(int)), calloc(nv, sizeof(bool)),
                     calloc(nv, sizeof(bool)), calloc(nn, sizeof(bool)),
                     calloc(nn, sizeof(bool)), malloc(nn * sizeof(size_t)) };
    int rc = 0;

    if (e->tr != NULL || (env != NULL && strcmp(env, "0") == 0))
        goto out;
    if (l.root == NULL || l.is_out == NULL || l.bad == NULL || l.xb == NULL || l.yb == NULL ||
        l.own_scratch == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    for (int v = 0; v < e->m->n_vals; v++)
        l.root[v] = -1;         /* -1: in no group (not a candidate) */
    for (int i = 0; i < e->m->n_out; i++)
        l.is_out[e->m->outputs[i]] = true;
    promote(&l);
    /* candidates: the outputs of oneDNN Convs and of elementwise nodes, and what the
     * elementwise nodes read; an elementwise node ties its values into one group */
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        bool ew = elementwise(e, s);
        if (!ew && dnnl_conv(e, s) < 0)
            continue;
        if (n->out[0] >= 0 && l.root[n->out[0]] < 0)
            l.root[n->out[0]] = n->out[0];
        for (int j = 0; ew && j < n->n_in; j++) {
            int a = n->in[j];
            if (l.root[a] < 0)
                l.root[a] = a;
            l.root[find(&l, a)] = find(&l, n->out[0]);
        }
    }
    demote(&l, true);
    if (groups_check(&l) != 0) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    demote(&l, false);
    /* Each oneDNN Conv again with its layouts (an unchanged one finds its entry). A Conv
     * oneDNN cannot serve so makes its groups plain, and the pass repeats until every
     * Conv is served (bad only grows, so it ends). */
    for (bool changed = true; changed;) {
        changed = false;
        flags_from_groups(&l);
        for (int s = 0; s < e->n_nodes; s++) {
            struct sim_enode *n = &e->nodes[s];
            size_t need;
            if (dnnl_conv(e, s) < 0)
                continue;
            if (sim_conv_dnnl_relayout(n->params, l.xb[s], l.yb[s], &need) == 0) {
                n->scratch = need;
                continue;
            }
            if (!l.xb[s] && !l.yb[s])
                continue;       /* cannot happen: the plain entry exists; it stays */
            if (l.xb[s])
                l.bad[find(&l, n->in[0])] = true;
            if (l.yb[s])
                l.bad[find(&l, n->out[0])] = true;
            changed = true;
        }
    }
    rc = weights_once(e, own, err);
out:
    free(l.root);
    free(l.is_out);
    free(l.bad);
    free(l.xb);
    free(l.yb);
    free(l.own_scratch);
    return rc;
}

int
sim_exe_tensor_blocked(const struct sim_exe *e, const char *name)
{
    for (int v = 0; v < e->m->n_vals; v++)
        if (e->m->vals[v].name != NULL && strcmp(e->m->vals[v].name, name) == 0)
            return e->vals[v].kind == SIM_V_NONE ? -1 : e->vals[v].blocked;
    return -1;
}

uint64_t
sim_exe_host_copy_bytes(const struct sim_exe *e)
{
    return e->host_copy_bytes;
}

/*
 * half_exec.c — float16 ops as the IPU computes them (sim/README.md "Dtypes"): an op
 * given float16 tensors reads them widened to float (exact), runs its float kernel, and
 * each float16 result is rounded to float16 as it is written (round to nearest even, or
 * stochastically when the executable asks for it). The arena holds the 2-byte halves, so
 * the memory plan counts what the IPU would.
 *
 * The widened copies live in one block per simulated IPU thread (replica r, IPU p),
 * planned and allocated once when the executable is bound (sim_half_bind): its size is
 * the most any float16 node on that IPU needs (sim_half_wide_bytes, for the memory plan),
 * so a step allocates nothing. A thread runs one node at a time, so its block is free
 * between nodes.
 *
 * Stochastic rounding (half_sr.c) is keyed by the node's random state for the micro-batch
 * (k->rng, sim_exec_seed) and the result: forward output j is stream j, the gradient of
 * input j is stream 0x10000 + j; element i draws hash(key, i). The state is not advanced,
 * so a forward recomputed in the backward pass rounds to the same bits.
 *
 * Does: widen the node's float16 views into its thread's float block, call the op's
 * forward or backward with float views, narrow the float16 outputs (forward) or the
 * float16 input gradients (backward, which adds into them) back into the arena.
 * Data-movement ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose: no arithmetic)
 * move the 2-byte halves themselves in the forward pass, and their backward widens only
 * the gradients (it adds dy into dx, then rounds, as any float16 op): the same bits as
 * widening, copying and rounding, since a half widens and narrows back to itself (but a
 * signalling NaN, which the widening quieted, now moves unchanged, as the IPU copies it).
 * Does not: decide which nodes are float16 (compile.c).
 */
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "half.h"

#define SR_TAG_DIN 0x10000u     /* stream of input j's gradient: SR_TAG_DIN + j */

/* The earlier of views v[0 .. j) that has the same float16 data as v[j] (Mul(h, h): both
 * inputs, and both their gradients, are one tensor), or -1. orig: the views before
 * widening. */
static int
alias_of(const struct sim_tensor *orig, int j)
{
    for (int i = 0; i < j; i++)
        if (orig[i].data == orig[j].data && orig[i].dtype == SIM_DTYPE_FLOAT16)
            return i;
    return -1;
}

/* Float16 views among the n views at v (orig a copy of them) are pointed at float copies
 * in blk, one per distinct tensor. copy: widen the halves (false: left as they are, the
 * op writes every element: a forward output, which in float32 lands in an arena slot
 * holding a dead value's bytes, so no op reads it before writing it). blk holds at least
 * the sum of their elements. */
static void
widen(struct sim_tensor *v, const struct sim_tensor *orig, int n, const bool *copy,
      float *blk)
{
    int64_t at = 0;

    for (int j = 0; j < n; j++) {
        int a;
        if (v[j].data == NULL || v[j].dtype != SIM_DTYPE_FLOAT16)
            continue;
        a = alias_of(orig, j);
        if (a >= 0) {
            v[j].data = v[a].data;
            v[j].dtype = SIM_DTYPE_FLOAT;
            continue;
        }
        if (copy[j])
            sim_half_to_float_n(v[j].data, blk + at, v[j].numel);
        v[j].data = blk + at;
        v[j].dtype = SIM_DTYPE_FLOAT;
        at += v[j].numel;
    }
}

/* Narrows the float copies in wide[j] back into the halves of orig[j], for j < n, once
 * per distinct tensor; stochastically (stream tag0 + j under state *sr) when sr. */
static void
narrow(const struct sim_tensor *orig, const struct sim_tensor *wide, int n,
       const uint64_t *sr, unsigned tag0)
{
    for (int j = 0; j < n; j++) {
        if (orig[j].data == NULL || orig[j].dtype != SIM_DTYPE_FLOAT16 ||
            alias_of(orig, j) >= 0)
            continue;
        if (sr != NULL)
            sim_half_from_float_sr_n(wide[j].data, orig[j].data, orig[j].numel,
                                     sim_half_sr_key(*sr, tag0 + (unsigned)j));
        else
            sim_half_from_float_n(wide[j].data, orig[j].data, orig[j].numel);
    }
}

/* Whether node n's op only moves its input's elements (its forward reads no value as a
 * number): its kernels are written for any element size. */
static bool
moves_only(const struct sim_enode *n)
{
    static const char *const names[] = { "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                         "Transpose" };

    if (n->op->domain != NULL)
        return false;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(n->op->name, names[i]) == 0)
            return true;
    return false;
}

/* Elements of node n's float16 values (inputs and outputs, each counted once per view). */
static int64_t
half_numel(const struct sim_exe *e, const struct sim_enode *n)
{
    int64_t t = 0;

    for (int j = 0; j < n->n_in + n->n_out; j++) {
        int v = j < n->n_in ? n->in[j] : n->out[j - n->n_in];
        if (v >= 0 && e->vals[v].ti.dtype == SIM_DTYPE_FLOAT16)
            t += e->vals[v].ti.numel;
    }
    return t;
}

/* Bytes of the view arrays at the head of a block (views and copy flags for nv views,
 * twice: widened and original), 64-aligned. */
static size_t
head_bytes(int nv)
{
    size_t b = 2 * (size_t)nv * sizeof(struct sim_tensor) + (size_t)nv;

    return (b + 63) & ~(size_t)63;
}

size_t
sim_half_wide_bytes(const struct sim_exe *e, int ipu)
{
    size_t most = 0;
    /* training widens forward inputs, outputs, their gradients: twice the forward's */
    int64_t mult = e->tr != NULL ? 2 : 1;

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        size_t b;
        if (!n->half || (ipu >= 0 && n->ipu != ipu))
            continue;
        b = head_bytes(2 * (n->n_in + n->n_out)) +
            (size_t)(mult * half_numel(e, n)) * sizeof(float);
        most = b > most ? b : most;
    }
    return most;
}

int
sim_half_bind(struct sim_exe *e, struct sim_err *err)
{
    size_t nb = (size_t)e->R * e->ipr;

    sim_half_unbind(e);
    e->half_wide = calloc(nb + 1, sizeof(*e->half_wide));
    if (e->half_wide == NULL)
        goto oom;
    for (size_t i = 0; i < nb; i++) {
        size_t b = sim_half_wide_bytes(e, (int)(i % e->ipr));
        if (b == 0)
            continue;
        e->half_wide[i] = sim_aligned_alloc(b);
        if (e->half_wide[i] == NULL)
            goto oom;
    }
    return 0;
oom:
    return sim_err_set(err, IPUOF_E_NOMEM, "out of memory allocating the float16 widening "
                       "buffers (%zu bytes for each of %zu simulated IPUs)",
                       sim_half_wide_bytes(e, -1), nb);
}

void
sim_half_unbind(struct sim_exe *e)
{
    if (e->half_wide == NULL)
        return;
    for (size_t i = 0; i < (size_t)e->R * e->ipr; i++)
        free(e->half_wide[i]);
    free(e->half_wide);
    e->half_wide = NULL;
}

/* The block of the thread running node n in k's lane (from k->rng, which points at the
 * lane's state of the node), or NULL when k is not one of e's bound kernels. */
static char *
block_of(const struct sim_exe *e, const struct sim_enode *n, const struct sim_kern *k)
{
    size_t L;

    if (e->half_wide == NULL || k->rng == NULL || k->rng < e->rng ||
        k->rng >= e->rng + (size_t)e->R * e->S * (size_t)e->n_nodes)
        return NULL;
    L = (size_t)(k->rng - e->rng) / (size_t)e->n_nodes;
    return e->half_wide[L / e->S * e->ipr + (size_t)n->ipu];
}

/* Whether input j of node n holds float16 values: a float16 view, or a float16 weight
 * (held as floats of float16 values, half_train.c). */
static bool
holds_halves(const struct sim_exe *e, const struct sim_enode *n, const struct sim_kern *k,
             int j)
{
    int v = n->in[j];

    if (k->in[j].dtype == SIM_DTYPE_FLOAT16)
        return true;
    return v >= 0 && e->vals[v].kind == SIM_V_WEIGHT && e->w[e->vals[v].weight].half;
}

int
sim_half_forward(const struct sim_exe *e, const struct sim_enode *n, const struct sim_kern *k,
                 struct sim_err *err)
{
    int nv = k->n_in + k->n_out, rc;
    char *blk = block_of(e, n, k);
    struct sim_tensor *v;
    struct sim_kern k2 = *k;
    bool *copy;

    if (blk == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: float16 node run outside its "
                           "executable's bound kernels", n->label);
    /* the halves move as they are; not a float16 weight, held as floats (half_train.c),
     * whose move into a float16 value is a narrowing: below, as any op's output */
    if (moves_only(n) && k->in[0].dtype == k->out[0].dtype)
        return n->op->forward(k, err);
    v = (struct sim_tensor *)(void *)blk;
    copy = (bool *)(v + 2 * nv);
    memcpy(v, k->in, (size_t)k->n_in * sizeof(*v));
    memcpy(v + k->n_in, k->out, (size_t)k->n_out * sizeof(*v));
    for (int j = 0; j < nv; j++)
        copy[j] = j < k->n_in;
    memcpy(v + nv, v, (size_t)nv * sizeof(*v));
    widen(v, v + nv, nv, copy, (float *)(void *)(blk + head_bytes(nv)));
    k2.in = v;
    k2.out = v + k->n_in;
    rc = 1;
    if (e->partials_half && k2.act == NULL)     /* float16 partials: half_partials.c */
        rc = sim_half_partials(&e->m->nodes[n->mnode], &k2,
                               holds_halves(e, n, k, 0) && holds_halves(e, n, k, 1));
    if (rc != 0)
        rc = n->op->forward(&k2, err);
    if (rc == 0)
        narrow(k->out, k2.out, k->n_out, e->stochastic ? k->rng : NULL, 0);
    return rc;
}

int
sim_half_backward(const struct sim_exe *e, const struct sim_enode *n, const struct sim_kern *k,
                  const struct sim_tensor *dout, struct sim_tensor *din, struct sim_err *err)
{
    int ni = k->n_in, no = k->n_out, nv = 2 * (ni + no), rc;
    char *blk = block_of(e, n, k);
    struct sim_tensor *v;
    struct sim_kern k2 = *k;
    bool *copy;

    if (blk == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: float16 node run outside its "
                           "executable's bound kernels", n->label);
    v = (struct sim_tensor *)(void *)blk;
    copy = (bool *)(v + 2 * nv);
    /* v: forward inputs, forward outputs, output gradients, input gradients (added to,
     * so widened too) */
    memcpy(v, k->in, (size_t)ni * sizeof(*v));
    memcpy(v + ni, k->out, (size_t)no * sizeof(*v));
    memcpy(v + ni + no, dout, (size_t)no * sizeof(*v));
    memcpy(v + ni + 2 * no, din, (size_t)ni * sizeof(*v));
    memset(copy, 1, (size_t)nv);
    memcpy(v + nv, v, (size_t)nv * sizeof(*v));
    if (moves_only(n))  /* its backward reads no forward value: widen the gradients only */
        widen(v + ni + no, v + nv + ni + no, ni + no, copy,
              (float *)(void *)(blk + head_bytes(nv)));
    else
        widen(v, v + nv, nv, copy, (float *)(void *)(blk + head_bytes(nv)));
    k2.in = v;
    k2.out = v + ni;
    rc = n->op->backward(&k2, v + ni + no, v + ni + 2 * no, err);
    if (rc == 0)
        narrow(din, v + ni + 2 * no, ni, e->stochastic ? k->rng : NULL, SR_TAG_DIN);
    return rc;
}

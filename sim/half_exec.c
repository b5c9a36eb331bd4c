/*
 * half_exec.c — float16 ops as the IPU computes them (sim/README.md "Dtypes"): an op
 * given float16 tensors reads them widened to float (exact), runs its float kernel, and
 * each float16 result is rounded to float16 as it is written (round to nearest even, or
 * stochastically when the executable asks for it). The arena holds the 2-byte halves, so
 * the memory plan counts what the IPU would; the float copies live only for the call.
 *
 * Does: widen the node's float16 views into one temporary float block, call the op's
 * forward or backward with float views, narrow the float16 outputs (forward) or the
 * float16 input gradients (backward, which adds into them) back into the arena.
 * Does not: decide which nodes are float16 (compile.c), or hold any state between calls.
 */
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "half.h"

/* xorshift64* (Vigna): the draw of one stochastic rounding; *s is never 0. */
static inline uint64_t
sr_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint16_t
sim_half_from_float_sr(float f, uint64_t *state)
{
    uint16_t h = sim_half_from_float(f), lo, hi;
    float fh = sim_half_to_float(h), flo, fhi, af = f < 0 ? -f : f;
    double frac, u;

    if (fh == f || f != f || af > 65504.0f)
        return h;           /* exact, NaN, or past the largest half: as nearest-even */
    /* lo and hi: the halves either side of f (same sign), by magnitude */
    if ((fh < 0 ? -fh : fh) < af) {
        lo = h;
        hi = (uint16_t)(h + 1u);
    } else {
        hi = h;
        lo = (uint16_t)(h - 1u);       /* |fh| > |f| > 0: h is not a zero */
    }
    flo = sim_half_to_float(lo);
    fhi = sim_half_to_float(hi);
    flo = flo < 0 ? -flo : flo;
    fhi = fhi < 0 ? -fhi : fhi;
    frac = ((double)af - flo) / ((double)fhi - flo);
    u = (double)(sr_next(state) >> 11) * 0x1.0p-53;
    return u < frac ? hi : lo;
}

void
sim_half_from_float_sr_n(const float *src, uint16_t *dst, int64_t n, uint64_t *state)
{
    if (*state == 0)
        *state = 0x853c49e6748fea9bull;
    for (int64_t i = 0; i < n; i++)
        dst[i] = sim_half_from_float_sr(src[i], state);
}

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

/* Float16 views of k (n views at v; orig a copy of them) are given float copies in one
 * block, one per distinct tensor: returns the block (caller frees; NULL with *fail set
 * when out of memory). copy: widen the halves (false: the op writes them). */
static float *
widen(struct sim_tensor *v, const struct sim_tensor *orig, int n, const bool *copy,
      bool *fail)
{
    int64_t total = 0, at = 0;
    float *blk;

    for (int j = 0; j < n; j++)
        if (v[j].data != NULL && v[j].dtype == SIM_DTYPE_FLOAT16 && alias_of(orig, j) < 0)
            total += v[j].numel;
    if (total == 0)
        return NULL;
    blk = sim_aligned_alloc((size_t)total * sizeof(float));
    if (blk == NULL) {
        *fail = true;
        return NULL;
    }
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
        else
            memset(blk + at, 0, (size_t)v[j].numel * sizeof(float));
        v[j].data = blk + at;
        v[j].dtype = SIM_DTYPE_FLOAT;
        at += v[j].numel;
    }
    return blk;
}

/* Narrows the float copies in wide[j] back into the halves of orig[j], for j < n, once
 * per distinct tensor. */
static void
narrow(const struct sim_tensor *orig, const struct sim_tensor *wide, int n, uint64_t *sr)
{
    for (int j = 0; j < n; j++) {
        if (orig[j].data == NULL || orig[j].dtype != SIM_DTYPE_FLOAT16 ||
            alias_of(orig, j) >= 0)
            continue;
        if (sr != NULL)
            sim_half_from_float_sr_n(wide[j].data, orig[j].data, orig[j].numel, sr);
        else
            sim_half_from_float_n(wide[j].data, orig[j].data, orig[j].numel);
    }
}

int
sim_half_forward(const struct sim_exe *e, const struct sim_enode *n, const struct sim_kern *k,
                 struct sim_err *err)
{
    bool stochastic = e->stochastic;
    int nv = k->n_in + k->n_out;
    struct sim_tensor *v = malloc(2 * (size_t)nv * sizeof(*v) + 1);
    bool *copy = malloc((size_t)nv + 1), fail = false;
    struct sim_kern k2 = *k;
    float *blk = NULL;
    int rc;

    if (v == NULL || copy == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "%s: out of memory widening float16", n->label);
        goto out;
    }
    memcpy(v, k->in, (size_t)k->n_in * sizeof(*v));
    memcpy(v + k->n_in, k->out, (size_t)k->n_out * sizeof(*v));
    for (int j = 0; j < nv; j++)
        copy[j] = j < k->n_in;
    memcpy(v + nv, v, (size_t)nv * sizeof(*v));
    blk = widen(v, v + nv, nv, copy, &fail);
    if (fail) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "%s: out of memory widening float16", n->label);
        goto out;
    }
    k2.in = v;
    k2.out = v + k->n_in;
    rc = 1;
    if (e->partials_half && k2.act == NULL)     /* float16 partials: half_partials.c */
        rc = sim_half_partials(&e->m->nodes[n->mnode], &k2);
    if (rc != 0)
        rc = n->op->forward(&k2, err);
    if (rc == 0)
        narrow(k->out, k2.out, k->n_out, stochastic ? k->rng : NULL);
out:
    free(blk);
    free(copy);
    free(v);
    return rc;
}

int
sim_half_backward(const struct sim_enode *n, const struct sim_kern *k,
                  const struct sim_tensor *dout, struct sim_tensor *din, bool stochastic,
                  struct sim_err *err)
{
    int ni = k->n_in, no = k->n_out, nv = 2 * (ni + no);
    struct sim_tensor *v = malloc(2 * (size_t)nv * sizeof(*v) + 1);
    bool *copy = malloc((size_t)nv + 1), fail = false;
    struct sim_kern k2 = *k;
    float *blk = NULL;
    int rc;

    if (v == NULL || copy == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "%s: out of memory widening float16", n->label);
        goto out;
    }
    /* v: forward inputs, forward outputs, output gradients, input gradients (added to,
     * so widened too) */
    memcpy(v, k->in, (size_t)ni * sizeof(*v));
    memcpy(v + ni, k->out, (size_t)no * sizeof(*v));
    memcpy(v + ni + no, dout, (size_t)no * sizeof(*v));
    memcpy(v + ni + 2 * no, din, (size_t)ni * sizeof(*v));
    memset(copy, 1, (size_t)nv);
    memcpy(v + nv, v, (size_t)nv * sizeof(*v));
    blk = widen(v, v + nv, nv, copy, &fail);
    if (fail) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "%s: out of memory widening float16", n->label);
        goto out;
    }
    k2.in = v;
    k2.out = v + ni;
    rc = n->op->backward(&k2, v + ni + no, v + ni + 2 * no, err);
    if (rc == 0)
        narrow(din, v + ni + 2 * no, ni, stochastic ? k->rng : NULL);
out:
    free(blk);
    free(copy);
    free(v);
    return rc;
}

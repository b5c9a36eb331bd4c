/*
 * mem_prop.c — the available memory proportion, as PopLibs plans convolutions and matmuls.
 *
 * Does: give each Conv, ConvTranspose, MatMul and Gemm node its proportion (the node's
 * __available_memory_proportion attribute, from set_available_memory; else its IPU's entry
 * of the model's ipuof.available_memory_proportion, from setAvailableMemoryProportion;
 * else PopLibs' default 0.6) of its IPU's memory for compute (IO tiles excluded) as the
 * budget of its temporary memory (the forward's and the backward's scratch): PopLibs
 * serialises the op until its temporaries fit, at most over the first two dimensions of
 * its output (batch and channels, or batch and rows), so the plan counts at most the
 * budget for them; an op that cannot fit even so is a compile error naming the op, the
 * proportion and the bytes.
 * Does not: change the host's scratch (the kernels run unserialised: plan.c places the
 * host's arena with the real sizes and reports the IPU's figure with these) or the clock.
 */
#include <stdio.h>
#include <string.h>

#include "exe.h"

#define DEFAULT_PROPORTION 0.6f     /* PopLibs' availableMemoryProportion default */

static bool
planned_op(const struct sim_enode *n)
{
    const char *op = n->op->name;

    return strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0 ||
           strcmp(op, "MatMul") == 0 || strcmp(op, "Gemm") == 0;
}

/* The proportion that bounds node n's temporaries. */
static float
proportion(const struct sim_exe *e, const struct sim_enode *n)
{
    const struct sim_attr *a = sim_attr_find(&e->m->nodes[n->mnode],
                                             "__available_memory_proportion");
    float p;

    if (a != NULL && a->type == SIM_ATTR_FLOAT && a->f > 0.0f && a->f <= 1.0f)
        return a->f;
    p = n->ipu >= 0 && n->ipu < SIM_MAX_IPUS ? e->m->mem_prop[n->ipu] : 0.0f;
    return p > 0.0f ? p : DEFAULT_PROPORTION;
}

static uint64_t
budget(const struct sim_exe *e, const struct sim_enode *n)
{
    return (uint64_t)((double)proportion(e, n) * (double)e->capacity);
}

/* The most ways PopLibs can serialise node n: its output's first two dimensions. */
static uint64_t
max_split(const struct sim_exe *e, const struct sim_enode *n)
{
    const struct sim_val *o = n->n_out > 0 && n->out[0] >= 0 ? &e->vals[n->out[0]] : NULL;
    uint64_t f = 1;

    for (int d = 0; o != NULL && d < 2 && d < o->ti.shape.rank; d++)
        f *= o->ti.shape.d[d] > 0 ? (uint64_t)o->ti.shape.d[d] : 1u;
    return f;
}

size_t
sim_temp_ipu_bytes(const struct sim_exe *e, const struct sim_enode *n, size_t bytes)
{
    uint64_t b;

    if (!planned_op(n))
        return bytes;
    b = budget(e, n);
    return bytes > b ? (size_t)b : bytes;
}

int
sim_temp_check(const struct sim_exe *e, struct sim_err *err)
{
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        size_t t = n->scratch > n->bwd_scratch ? n->scratch : n->bwd_scratch;
        uint64_t b, f, least;
        if (!planned_op(n) || t == 0)
            continue;
        b = budget(e, n);
        f = max_split(e, n);
        least = ((uint64_t)t + f - 1) / f;
        if (least > b)
            return sim_err_set(err, IPUOF_E_DEVICE_OOM, "%s: its temporary memory does not "
                               "fit the available memory proportion %.3g of IPU %d (%llu "
                               "bytes): it needs %zu bytes, at least %llu even serialised "
                               "%llu ways; raise the proportion (set_available_memory on its "
                               "output, or setAvailableMemoryProportion) to %.3g or more, or "
                               "use a smaller micro-batch", n->label, (double)proportion(e, n),
                               n->ipu, (unsigned long long)b, t, (unsigned long long)least,
                               (unsigned long long)f,
                               (double)least / (double)(e->capacity ? e->capacity : 1));
    }
    return 0;
}

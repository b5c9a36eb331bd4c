/*
 * cost.c — the simulated clock's inputs: the rates an IPU's work is charged at and the
 * FLOPs and bytes of each node (trace.c reports the figures and the trace). The rates default to the
 * GC200's published figures (Graphcore, "IPU-M2000 / GC200 datasheet"): 62.5 TFLOPS FP32
 * peak, 47.5 TB/s on-chip memory bandwidth, 8 TB/s IPU-Exchange, 320 GB/s IPU-Links per
 * IPU, PCIe Gen4 x16 64 GB/s to the host. schedule.c turns them into the schedule's clock.
 * FLOPs per node come from the op name and the shapes here, not from the op tables.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

void
sim_cost_cfg_init(struct sim_cost_cfg *c)
{
    c->flops_per_s = 62.5e12;
    c->mem_bytes_per_s = 47.5e12;
    c->exchange_bytes_per_s = 8e12;
    c->link_bytes_per_s = 320e9;
    c->host_bytes_per_s = 64e9;
    c->sync_s = 1e-6;
    c->efficiency = 0.25;
}

static double
numel_of(const struct sim_exe *e, int v)
{
    return v >= 0 ? (double)e->vals[v].ti.numel : 0.0;
}

static bool
is_op(const char *op, const char *const *names)
{
    for (; *names != NULL; names++)
        if (strcmp(op, *names) == 0)
            return true;
    return false;
}

void
sim_cost_node(const struct sim_exe *e, int s, double *flops, double *bytes)
{
    static const char *const moves[] = { "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                         "Identity", "Transpose", "Concat", "Slice", "Gather",
                                         "Shape", "Constant", "Cast", NULL };
    static const char *const transcendental[] = { "Exp", "Log", "Erf", "Sqrt", "Pow",
                                                  "Sigmoid", "SiLU", "Tanh", "Softmax",
                                                  "LogSoftmax", NULL };
    static const char *const losses[] = { "SoftmaxCrossEntropyLoss",
                                          "NegativeLogLikelihoodLoss", "CtcLoss", NULL };
    const struct sim_enode *n = &e->nodes[s];
    const struct sim_mnode *mn = &e->m->nodes[n->mnode];
    const char *op = n->op->name;
    double out = n->n_out > 0 ? numel_of(e, n->out[0]) : 0.0;
    double in0 = n->n_in > 0 ? numel_of(e, n->in[0]) : 0.0;

    *bytes = 0;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0)
            *bytes += (double)e->vals[n->in[j]].bytes;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] >= 0)
            *bytes += (double)e->vals[n->out[j]].bytes;
    if (strcmp(op, "Conv") == 0 && n->n_in >= 2) {
        const struct sim_shape *w = &e->vals[n->in[1]].ti.shape;
        double per_out = w->d[0] > 0 ? numel_of(e, n->in[1]) / (double)w->d[0] : 0;
        *flops = 2.0 * out * per_out + (n->n_in > 2 ? out : 0);
    } else if ((strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0) && n->n_in >= 2) {
        const struct sim_shape *a = &e->vals[n->in[0]].ti.shape;
        const struct sim_attr *ta = sim_attr_find(mn, "transA");
        int k = a->rank - 1;
        if (strcmp(op, "Gemm") == 0 && ta != NULL && ta->i != 0)
            k = 0;
        *flops = 2.0 * out * (double)(k >= 0 ? a->d[k] : 1) + (n->n_in > 2 ? out : 0);
    } else if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) {
        const struct sim_attr *ks = sim_attr_find(mn, "kernel_shape");
        double window = 1;
        for (int i = 0; ks != NULL && i < (int)ks->n; i++)
            window *= (double)ks->ints[i];
        *flops = out * window;
    } else if (is_op(op, moves)) {
        *flops = 0;
    } else if (is_op(op, transcendental) || is_op(op, losses)) {
        *flops = 4.0 * (in0 > out ? in0 : out);
    } else if (strcmp(op, "BatchNormalization") == 0 ||
               strcmp(op, "LayerNormalization") == 0) {
        *flops = 8.0 * out;
    } else {
        *flops = in0 > out ? in0 : out;     /* elementwise, reductions, global pools */
    }
    *flops += n->fused_flops;
    *bytes += n->fused_bytes;
}

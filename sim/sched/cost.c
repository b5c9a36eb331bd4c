/*
 * cost.c — the simulated clock's inputs: the rates an IPU's work is charged at (per device
 * type; docs/cost-model.md gives each constant's source) and the FLOPs and bytes of each
 * node (trace.c reports the figures and the trace). cost_node.c turns a node's FLOPs, bytes
 * and shapes into its time; schedule.c turns those into the schedule's clock.
 * FLOPs per node come from the op name and the shapes here, not from the op tables.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

/* The clocks of the device types (docs/cost-model.md): GC200 1.33 GHz, Bow 1.85 GHz. */
static const double type_hz[] = { 1.33e9, 1.85e9 };
static const char *const type_names[] = { "gc200", "bow" };

void
sim_cost_cfg_init(struct sim_cost_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->link_bytes_per_s = 320e9;        /* 10 IPU-Links, 320 GB/s per IPU */
    c->host_bytes_per_s = 12.5e9;       /* one 100 GbE RoCE link per machine */
    c->host_ipus = 4;                   /* ... shared by its four IPUs */
    c->gw_link_bytes_per_s = 25e9;      /* 2 GW-Links of 100 Gbit/s per machine */
    c->ipus_per_pod = 64;               /* IPU-Links join up to an IPU-POD64 */
    c->sync_s = 1e-6;                   /* an estimate: docs/cost-model.md */
    c->efficiency = 0.25;               /* convolutions, calibrated: docs/cost-model.md */
    c->matmul_efficiency = 0.40;        /* matrix products, calibrated: docs/cost-model.md */
    /* a compute set's fixed cycles, from PopLibs' own planners (docs/cost-model.md): a
     * sync (90) and an exchange's fixed overhead (100), popnn/CTCLossPlan.cpp; a popops
     * vertex's fixed cycles, 20 on each of the 6 workers and 11 of the supervisor's,
     * popops/popopsCycleEstimators.cpp and PerformanceEstimation.cpp */
    c->cs_cycles = 90 + 100 + 20 * 6 + 11;
    c->host_xfer_s = 5e-6;              /* an estimate: docs/cost-model.md */
    c->step_s = 60e-6;                  /* an estimate: docs/cost-model.md */
    c->amp = 0.6;                       /* PopLibs' default availableMemoryProportion */
    sim_cost_cfg_type(c, SIM_IPU_GC200);
}

int
sim_cost_cfg_type(struct sim_cost_cfg *c, int t)
{
    double hz;

    if (t < 0 || t > SIM_IPU_BOW)
        return IPUOF_E_INVAL;
    hz = type_hz[t];
    c->ipu_type = t;
    c->clock_hz = hz;
    /* the GC200's published rates scale with the clock: float32 62.5 TFLOPS, tile memory
     * 47.5 TB/s, exchange 8 TB/s at 1.33 GHz (Bow's: 87, 65 and 11 TB/s published) */
    c->flops_per_s = 62.5e12 / type_hz[0] * hz;
    c->mem_bytes_per_s = 47.5e12 / type_hz[0] * hz;
    c->exchange_bytes_per_s = 8e12 / type_hz[0] * hz;
    return 0;
}

const char *
sim_ipu_type_name(int t)
{
    return t >= 0 && t <= SIM_IPU_BOW ? type_names[t] : "?";
}

int
sim_ipu_type_parse(const char *name)
{
    for (int t = 0; t <= SIM_IPU_BOW; t++)
        if (name != NULL && strcmp(name, type_names[t]) == 0)
            return t;
    return -1;
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

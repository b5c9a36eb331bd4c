/*
 * cost_node.c — the time of one node on the simulated IPU, split into compute, exchange
 * and sync (docs/cost-model.md gives the model and each constant's source).
 *
 * - Convolutions and matrix products run on the AMP units at the rate of their data type
 *   and partials type (32.32: flops_per_s; 16.32: 2x; 16.16: 4x), times the calibrated
 *   efficiency of its class (convolutions: efficiency; MatMul and Gemm:
 *   matmul_efficiency), times the shape's efficiency: the AMP works on groups of the reduction
 *   dimension (a convolution's input channels per group x its kernel window) and of output
 *   channels (16 and 16 in float16, 8 and 8 in float32); the work is spread over the tiles in
 *   units of (rows x output-channel groups x input-channel groups), so a layer with fewer
 *   units than tiles leaves tiles idle; when the vector units (below) would be faster,
 *   as for a depthwise convolution, PopLibs' planner uses them and so does the clock.
 *   Their operands are exchanged to the tiles that use them. A layer whose operands do
 *   not fit the available memory proportion of the tiles runs in serial splits, each a
 *   compute set of its own.
 * - Every other op runs on the tiles' vector units (64 bits a cycle a tile: 2 float32 or 4
 *   float16 FLOPs) and reads and writes tile memory at its rate; the two add (a worker
 *   thread issues both). Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape,
 *   Constant) cost nothing; data movement (Transpose, Concat, Slice, Gather) is exchange.
 * - Each compute set (a conv or matmul: 2, their backward 4; a normalisation 2 and 3;
 *   other ops 1 and 1) costs cs_cycles of sync and vertex start-up.
 * A backward costs twice its forward's compute for Conv, MatMul and Gemm (the gradients
 * of both operands), once for other ops. Only +, -, *, / on doubles in a fixed order, so
 * the figures are the same on every host and ISA (compiled with -ffp-contract=off).
 */
#include <string.h>

#include "schedule.h"

static bool
op_is(const char *op, const char *const *names)
{
    for (; *names != NULL; names++)
        if (strcmp(op, *names) == 0)
            return true;
    return false;
}

static double
round_up(double x, double g)
{
    double q = (double)(long long)(x / g);

    return (q * g < x ? q + 1 : q) * g;
}

/* The shape of a convolution or matrix product: rows (output positions x batch), the
 * reduction length per output (cin) and the outputs per row (cout). False for others. */
static bool
amp_shape(const struct sim_exe *e, int s, double *rows, double *cin, double *cout)
{
    const struct sim_enode *n = &e->nodes[s];
    const struct sim_mnode *mn = &e->m->nodes[n->mnode];
    const char *op = n->op->name;
    double out;

    if (n->n_in < 2 || n->n_out < 1 || n->in[0] < 0 || n->in[1] < 0 || n->out[0] < 0)
        return false;
    out = (double)e->vals[n->out[0]].ti.numel;
    if (strcmp(op, "Conv") == 0) {
        const struct sim_shape *w = &e->vals[n->in[1]].ti.shape;
        const struct sim_attr *g = sim_attr_find(mn, "group");
        double groups = g != NULL && g->i > 1 ? (double)g->i : 1;
        if (w->rank < 2 || w->d[0] <= 0)
            return false;
        *cout = (double)w->d[0] / groups;
        *cin = (double)e->vals[n->in[1]].ti.numel / (double)w->d[0];
        *rows = out / *cout;
        return true;
    }
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0) {
        const struct sim_shape *a = &e->vals[n->in[0]].ti.shape;
        const struct sim_shape *o = &e->vals[n->out[0]].ti.shape;
        const struct sim_attr *ta = sim_attr_find(mn, "transA");
        int k = a->rank - 1;
        if (strcmp(op, "Gemm") == 0 && ta != NULL && ta->i != 0)
            k = 0;
        if (k < 0 || o->rank < 1 || o->d[o->rank - 1] <= 0)
            return false;
        *cin = (double)a->d[k];
        *cout = (double)o->d[o->rank - 1];
        *rows = out / *cout;
        return true;
    }
    return false;
}

/* The AMP's rate for node n in FLOPs per second: by data type and partials type. */
static double
amp_rate(const struct sim_exe *e, const struct sim_enode *n)
{
    const struct sim_cost_cfg *r = &e->cost;

    if (!n->half)
        return r->flops_per_s;                          /* 32.32 */
    return e->partials_half ? 4 * r->flops_per_s : 2 * r->flops_per_s;  /* 16.16, 16.32 */
}

static double
val_bytes(const struct sim_exe *e, int v)
{
    return v >= 0 ? (double)e->vals[v].bytes : 0.0;
}

/* A convolution or matrix product (see the file comment). */
static void
amp_time(const struct sim_exe *e, int s, double flops, double rows, double cin, double cout,
         struct sim_node_cost *t)
{
    const struct sim_cost_cfg *r = &e->cost;
    const struct sim_enode *n = &e->nodes[s];
    double gi = n->half ? 16 : 8, go = n->half ? 16 : 8;
    double tiles = (double)(e->tiles > r->io_tiles ? e->tiles - r->io_tiles : 1);
    double gran = (cin / round_up(cin, gi)) * (cout / round_up(cout, go));
    double units = rows * (round_up(cout, go) / go) * (round_up(cin, gi) / gi);
    double spread = units / (round_up(units, tiles));
    double in_b = 0, need, budget, splits, sync, vec, eff;

    for (int j = 0; j < n->n_in; j++)
        in_b += val_bytes(e, n->in[j]);
    need = in_b + val_bytes(e, n->out[0]);
    budget = r->amp * tiles * SIM_TILE_BYTES;
    splits = budget > 0 && need > budget ? round_up(need, budget) / budget : 1;
    sync = splits * r->cs_cycles / r->clock_hz;
    /* a matrix product's long rows reach a higher share of the AMP than a convolution's
     * short 2-D fields: each class has its own calibrated efficiency (docs/cost-model.md) */
    eff = strcmp(n->op->name, "Conv") == 0 ? r->efficiency : r->matmul_efficiency;
    t->fwd[0] = flops / (amp_rate(e, n) * eff * gran * spread);
    /* PopLibs plans a convolution too narrow for the AMP (a depthwise one: 9 of 16 inputs
     * and 1 of 16 outputs used) on the vector units instead: the faster of the two */
    vec = tiles * (n->half ? 4 : 2) * r->clock_hz;
    if (flops / vec < t->fwd[0])
        t->fwd[0] = flops / vec;
    t->fwd[1] = in_b / r->exchange_bytes_per_s;
    t->fwd[2] = 2 * sync;
    t->bwd[0] = 2 * t->fwd[0];
    t->bwd[1] = 2 * t->fwd[1] + val_bytes(e, n->out[0]) / r->exchange_bytes_per_s;
    t->bwd[2] = 4 * sync;
}

void
sim_cost_node_time(const struct sim_exe *e, int s, struct sim_node_cost *t)
{
    static const char *const views[] = { "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                         "Identity", "Shape", "Constant", NULL };
    static const char *const moves[] = { "Transpose", "Concat", "Slice", "Gather", "Cast",
                                         NULL };
    static const char *const norms[] = { "BatchNormalization", "LayerNormalization",
                                         "GroupNormalization", "InstanceNormalization",
                                         "Softmax", "LogSoftmax", NULL };
    const struct sim_cost_cfg *r = &e->cost;
    const struct sim_enode *n = &e->nodes[s];
    const char *op = n->op->name;
    double flops, bytes, rows, cin, cout, vec, cs;

    memset(t, 0, sizeof(*t));
    sim_cost_node(e, s, &flops, &bytes);
    flops -= n->fused_flops;            /* the fused nodes' time is in fused_t */
    bytes -= n->fused_bytes;
    if (amp_shape(e, s, &rows, &cin, &cout) && rows > 0 && cin > 0 && cout > 0) {
        amp_time(e, s, flops, rows, cin, cout, t);
    } else if (op_is(op, views)) {
        /* a view: no work on the IPU */
    } else if (op_is(op, moves)) {
        t->fwd[1] = bytes / 2 / r->exchange_bytes_per_s;
        t->fwd[2] = r->cs_cycles / r->clock_hz;
    } else {
        vec = (double)(e->tiles > 0 ? e->tiles : 1) * (n->half ? 4 : 2) * r->clock_hz;
        cs = op_is(op, norms) ? 2 : 1;
        t->fwd[0] = flops / vec + bytes / r->mem_bytes_per_s;
        t->fwd[2] = cs * r->cs_cycles / r->clock_hz;
        if (strncmp(op, "Reduce", 6) == 0 || strcmp(op, "GlobalAveragePool") == 0)
            t->fwd[1] = val_bytes(e, n->out[0]) * 2 / r->exchange_bytes_per_s;
    }
    if (t->bwd[0] == 0 && t->bwd[1] == 0 && t->bwd[2] == 0) {
        t->bwd[0] = t->fwd[0];
        t->bwd[1] = t->fwd[1];
        t->bwd[2] = op_is(op, norms) ? t->fwd[2] * 3 / 2 : t->fwd[2];
    }
    for (int k = 0; k < 3; k++) {
        t->fwd[k] += n->fused_t[k];
        t->bwd[k] += n->fused_t[3 + k];
    }
}

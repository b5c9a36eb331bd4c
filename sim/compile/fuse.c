/*
 * fuse.c — activations fused into the node that produces their input, in inference
 * executables; in a training one only exact-erf GELU, into a Gelu node with its own
 * backward (autodiff needs every other op's output; the Gelu's rule reads only its input,
 * where the five exported nodes' rules keep three tensors of its size, as PopART's Gelu).
 *
 * Every CNN exported from PyTorch runs Conv (BatchNorm folded) then an activation, which
 * re-reads the whole convolution output from memory after the convolution wrote it; SiLU
 * is exported as Sigmoid then Mul(x, sigmoid(x)), three reads and two writes of the tensor.
 * After placement (so stages and IPUs are final) this pass rewrites:
 *   - Conv -> A, A one of act.h's activations (Relu, Clip with compile-time bounds,
 *     LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Elu, Softplus): the Conv writes A's
 *     output, applying A to each piece of it as it computes it (op_conv.c, conv_dnnl.c);
 *   - Conv -> Sigmoid -> Mul(conv, sigmoid) (either operand order): the same with SiLU;
 *     Conv -> HardSigmoid -> Mul(conv, hardsigmoid): with HardSwish (HardSwish at opset 13,
 *     mobilenet_v3's activation);
 *   - Add (same-shape float operands) -> one of those activations: one node computing
 *     act(a + b) (sim_op_add_act; resnet's residual Add -> Relu);
 *   - Sigmoid -> Mul(x, sigmoid(x)) after anything else: one SiLU node (sim_op_silu);
 *   - LayerNorm over the last axis as torch.onnx.export writes it below opset 17 (ReduceMean,
 *     Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias): one LayerNorm node,
 *     which also takes in a Transpose from channels first before it (ConvNeXt);
 *   - exact-erf GELU as exported (Div sqrt 2, Erf, Add 1, Mul x, Mul 0.5), with the bias Add
 *     of a Linear before it: one Gelu node (within 5e-7 of the unfused graph, not its bits);
 *   - the end of a ConvNeXt block (bias Add, Transpose to channels first, Mul by the layer
 *     scale, residual Add): one TransposeScaleAdd node (these three patterns are in
 *     fuse_norm.c, their kernels in op_layernorm.c).
 *   ConvNeXt's LayerNorms, GELUs and block ends were over half of its host time as 21 nodes
 *   a block, each a pass over memory (issue 18).
 * Conditions: the intermediate tensors are read only by the fused nodes, are not graph
 * outputs, and every node involved has the same stage and IPU. The removed nodes' FLOPs
 * and bytes move to the surviving node (cost.c), so the simulated clock does not change;
 * the intermediates are no longer tensors, so the memory plan has fewer activations.
 * IPUOF_SIM_FUSE=0 turns the pass off (for measuring and for the tests).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_int.h"

/* Names node n after the op and the activation fused into it ("Conv+Relu"). */
static void
name_fused(struct sim_enode *n, const char *op)
{
    snprintf(n->fused_op, sizeof(n->fused_op), "%s+%s", op, sim_act_name(n->act.kind));
}

/* Node `to` now writes value v (the output of a node fused into it) instead of its own
 * output, which stops being a tensor. */
static void
retarget(struct fuse *f, int to, const int *out)
{
    struct sim_enode *t = &f->e->nodes[to];

    f->e->vals[t->out[0]].kind = SIM_V_NONE;
    f->e->vals[t->out[0]].producer = -1;
    t->out = out;
    f->e->vals[out[0]].producer = to;
    f->e->vals[out[0]].ipu = t->ipu;
}

/* If node m is Mul(x, s) or Mul(s, x), both same-shape floats: true. */
static bool
is_mul_of(const struct fuse *f, int m, int x, int s)
{
    const struct sim_enode *n = &f->e->nodes[m];

    return is(f, m, "Mul") && n->n_in == 2 && n->n_out == 1 && n->out[0] >= 0 &&
           ((n->in[0] == x && n->in[1] == s) || (n->in[0] == s && n->in[1] == x));
}

/* The activation node n computes (act.h), when a producer can apply it; with clip, Clip
 * with compile-time bounds too. The op files see only n's sim_act_node, not e. */
static bool
act_of_node(const struct sim_exe *e, const struct sim_enode *n, struct sim_act *act, bool clip)
{
    struct sim_act_node v = { .op = n->op, .params = n->params, .n_in = n->n_in };

    v.float_in = n->n_in >= 1 && n->in[0] >= 0 && e->vals[n->in[0]].ti.dtype == SIM_DTYPE_FLOAT;
    v.one_out = n->n_out == 1 && n->out[0] >= 0;
    for (int i = 1; i < 3 && i < n->n_in; i++) {
        const struct sim_val *x = n->in[i] >= 0 ? &e->vals[n->in[i]] : NULL;
        v.has_in[i] = x != NULL;
        v.cdata[i] = x != NULL && x->kind == SIM_V_CONST ? x->ti.cdata : NULL;
    }
    return sim_activation_act(&v, act) || (clip && sim_clip_act(&v, act));
}

static bool
act_of(const struct sim_exe *e, const struct sim_enode *n, struct sim_act *act)
{
    return act_of_node(e, n, act, true);
}

/* Conv c -> activation, or Conv c -> Sigmoid -> Mul(conv, sigmoid). */
static void
fuse_conv(struct fuse *f, int c)
{
    struct sim_exe *e = f->e;
    struct sim_enode *cn = &e->nodes[c];
    int y = cn->n_out == 1 ? cn->out[0] : -1;
    struct sim_act act;

    if (y < 0 || e->vals[y].ti.dtype != SIM_DTYPE_FLOAT)
        return;
    if (private_to(f, y, 1)) {
        int a = reader_of(f, y);
        struct sim_enode *an = &e->nodes[a];
        if (!same_place(cn, an) || an->in[0] != y ||
            !(act_of(e, an, &act)))
            return;
        cn->act = act;
        name_fused(cn, "Conv");
        absorb(f, c, a);
        retarget(f, c, an->out);
        return;
    }
    if (private_to(f, y, 2)) {
        /* the (Hard)Sigmoid and the Mul both read y: find it among the later nodes */
        for (int s = c + 1; s < e->n_nodes; s++) {
            struct sim_enode *sn = &e->nodes[s];
            struct sim_act g;
            int sv, m;
            if (f->gone[s] || !(is(f, s, "Sigmoid") || is(f, s, "HardSigmoid")) ||
                sn->in[0] != y || sn->n_out != 1 || !act_of_node(e, sn, &g, false))
                continue;
            sv = sn->out[0];
            if (!private_to(f, sv, 1))
                return;
            m = reader_of(f, sv);
            if (!is_mul_of(f, m, y, sv) || !same_place(cn, sn) || !same_place(cn, &e->nodes[m]))
                return;
            /* x sigmoid(x) is SiLU; x hardsigmoid(x; a, b) is HardSwish with a and b (opset
             * 13 exports HardSwish so): the same float operations, so the same bits */
            cn->act = g.kind == SIM_ACT_SIGMOID ? (struct sim_act){ SIM_ACT_SILU, 0.0f, 0.0f }
                                                : (struct sim_act){ SIM_ACT_HSWISH, g.a, g.b };
            name_fused(cn, "Conv");
            absorb(f, c, s);
            absorb(f, c, m);
            e->vals[sv].kind = SIM_V_NONE;
            e->vals[sv].producer = -1;
            retarget(f, c, e->nodes[m].out);
            return;
        }
    }
}

/* Add (two float operands of the output's shape) -> activation, as one node. */
static void
fuse_add(struct fuse *f, int s)
{
    struct sim_exe *e = f->e;
    struct sim_enode *n = &e->nodes[s];
    int y = n->n_out == 1 ? n->out[0] : -1, a;
    struct sim_act act;

    if (y < 0 || n->n_in != 2 || e->vals[y].ti.dtype != SIM_DTYPE_FLOAT ||
        !private_to(f, y, 1))
        return;
    for (int j = 0; j < 2; j++) {
        const struct sim_val *v = n->in[j] >= 0 ? &e->vals[n->in[j]] : NULL;
        if (v == NULL || v->ti.dtype != SIM_DTYPE_FLOAT ||
            !sim_shape_eq(&v->ti.shape, &e->vals[y].ti.shape))
            return;
    }
    a = reader_of(f, y);
    if (!same_place(n, &e->nodes[a]) || e->nodes[a].in[0] != y ||
        !(act_of(e, &e->nodes[a], &act)))
        return;
    n->act = act;
    name_fused(n, "Add");
    absorb(f, s, a);
    n->op = &sim_op_add_act;
    retarget(f, s, e->nodes[a].out);
}

/* Sigmoid s -> Mul(x, sigmoid(x)) as one SiLU node. */
static void
fuse_silu(struct fuse *f, int s)
{
    struct sim_exe *e = f->e;
    struct sim_enode *sn = &e->nodes[s];
    int x = sn->in[0], sv = sn->n_out == 1 ? sn->out[0] : -1, m;

    if (sv < 0 || x < 0 || e->vals[x].ti.dtype != SIM_DTYPE_FLOAT || !private_to(f, sv, 1))
        return;
    m = reader_of(f, sv);
    if (!is_mul_of(f, m, x, sv) || !same_place(sn, &e->nodes[m]))
        return;
    absorb(f, s, m);
    sn->op = &sim_op_silu;
    e->vals[sv].kind = SIM_V_NONE;
    e->vals[sv].producer = -1;
    sn->out = e->nodes[m].out;
    e->vals[sn->out[0]].producer = s;
    e->vals[sn->out[0]].ipu = sn->ipu;
}

/* Counts the input slots of the live nodes reading each value, and the last such node. */
static void
count_reads(struct fuse *f)
{
    memset(f->reads, 0, ((size_t)f->e->m->n_vals + 1) * sizeof(int));
    for (int s = 0; s < f->e->n_nodes; s++)
        for (int j = 0; !f->gone[s] && j < f->e->nodes[s].n_in; j++) {
            int v = f->e->nodes[s].in[j];
            if (v >= 0) {
                f->reads[v]++;
                f->reader[v] = s;
            }
        }
}

/* Drops the fused nodes from the schedule: producers and stage starts follow. */
static void
compact(struct fuse *f)
{
    struct sim_exe *e = f->e;
    int kept = 0;

    for (int k = 0; k < e->n_stages; k++)
        e->stage_node[k] = -1;
    for (int s = 0; s < e->n_nodes; s++) {
        struct sim_enode *n = &e->nodes[s];
        if (f->gone[s]) {
            free(n->params);
            n->params = NULL;
            continue;
        }
        e->nodes[kept] = *n;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && e->vals[n->out[j]].kind == SIM_V_ACT)
                e->vals[n->out[j]].producer = kept;
        if (e->stage_node[n->stage] < 0)
            e->stage_node[n->stage] = kept;
        kept++;
    }
    e->n_nodes = kept;
}

int
sim_fuse(struct sim_exe *e, struct sim_err *err)
{
    const char *env = getenv("IPUOF_SIM_FUSE");
    size_t nv = (size_t)e->m->n_vals + 1, nn = (size_t)e->n_nodes + 1;
    struct fuse f = { e, calloc(nv, sizeof(int)), calloc(nv, sizeof(bool)),
                      calloc(nv, sizeof(int)), calloc(nn, sizeof(bool)), e->tr != NULL,
                      SIM_DTYPE_FLOAT };
    int rc = 0, n_gone = 0;

    if (env != NULL && strcmp(env, "0") == 0)
        goto out;
    if (f.reads == NULL || f.is_out == NULL || f.reader == NULL || f.gone == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < e->m->n_out; i++)
        f.is_out[e->m->outputs[i]] = true;
    count_reads(&f);
    if (f.train) {
        for (int s = 0; s < e->n_nodes; s++)
            if (!f.gone[s] && is(&f, s, "Div"))
                sim_fuse_gelu(&f, s);
        goto compact;
    }
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && is(&f, s, "Conv"))
            fuse_conv(&f, s);
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && is(&f, s, "Add") && e->nodes[s].op != &sim_op_add_act)
            fuse_add(&f, s);
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && is(&f, s, "Sigmoid"))
            fuse_silu(&f, s);
    count_reads(&f);
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && is(&f, s, "ReduceMean"))
            sim_fuse_layernorm(&f, s);
    count_reads(&f);
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && e->nodes[s].op == &sim_op_layernorm)
            sim_fuse_ln_transpose(&f, s);
    count_reads(&f);
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && is(&f, s, "Div"))
            sim_fuse_gelu(&f, s);
    count_reads(&f);
    for (int s = 0; s < e->n_nodes; s++)
        if (!f.gone[s] && is(&f, s, "Transpose"))
            sim_fuse_tail(&f, s);
compact:
    for (int s = 0; s < e->n_nodes; s++)
        n_gone += f.gone[s];
    if (n_gone > 0)
        compact(&f);
out:
    free(f.reads);
    free(f.is_out);
    free(f.reader);
    free(f.gone);
    return rc;
}

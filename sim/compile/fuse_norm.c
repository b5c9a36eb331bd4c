/*
 * fuse_norm.c — the fusion pass's patterns for what torch.onnx.export writes in many nodes
 * below opset 17 (fuse.c runs them; op_layernorm.c has the kernels): LayerNorm over the last
 * axis (and the Transpose from channels first before it), exact-erf GELU (and a Linear's
 * bias Add before it), and the end of a ConvNeXt block. Each fused node stands in the last
 * replaced node's place, where all its inputs are ready; its charge on the simulated clock
 * is the replaced nodes' (rewrite, absorb).
 */
#include <stdlib.h>
#include <string.h>

#include "fuse_int.h"
#include "half.h"

/* Value v is no longer a tensor (an intermediate of fused nodes). */
static void
drop_val(struct fuse *f, int v)
{
    f->e->vals[v].kind = SIM_V_NONE;
    f->e->vals[v].producer = -1;
}

/* The float value of v when it is a compile-time float scalar (one element). */
static bool
const_scalar(const struct fuse *f, int v, float *out)
{
    const struct sim_val *x = v >= 0 ? &f->e->vals[v] : NULL;

    uint16_t h;

    if (x == NULL || x->kind != SIM_V_CONST || x->ti.numel != 1 || x->ti.cdata == NULL)
        return false;
    if (x->ti.dtype == SIM_DTYPE_FLOAT) {
        memcpy(out, x->ti.cdata, sizeof(*out));
        return true;
    }
    if (x->ti.dtype != SIM_DTYPE_FLOAT16 || f->dt != SIM_DTYPE_FLOAT16)
        return false;
    memcpy(&h, x->ti.cdata, sizeof(h));     /* a float16 graph's constant: widened, exact */
    *out = sim_half_to_float(h);
    return true;
}

/* The operand of two-input node s other than v; -1 when v is not an operand. */
static int
other_in(const struct fuse *f, int s, int v)
{
    const struct sim_enode *n = &f->e->nodes[s];

    if (n->n_in != 2)
        return -1;
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

/* Whether value v is of the pattern's float type (f->dt) with shape sh. */
static bool
float_of_shape(const struct fuse *f, int v, const struct sim_shape *sh)
{
    return v >= 0 && f->e->vals[v].ti.dtype == f->dt &&
           sim_shape_eq(&f->e->vals[v].ti.shape, sh);
}

/*
 * The node reading value v when v is an activation read by that node alone and not a graph
 * output, that node being op `name` with one output of shape sh (float), in the place of
 * node `at`; else -1.
 */
static int
only_reader(const struct fuse *f, int v, const char *name, const struct sim_shape *sh, int at)
{
    int r;

    if (!private_to(f, v, 1))
        return -1;
    r = reader_of(f, v);
    if (f->gone[r] || !is(f, r, name) || f->e->nodes[r].n_out != 1 ||
        !float_of_shape(f, f->e->nodes[r].out[0], sh) ||
        !same_place(&f->e->nodes[at], &f->e->nodes[r]))
        return -1;
    return r;
}

/* Whether value v is a float per-column operand for rows of `cols`: one value, or cols
 * values laid along the last axis. */
static bool
per_column(const struct fuse *f, int v, int64_t cols)
{
    const struct sim_tinfo *t = v >= 0 ? &f->e->vals[v].ti : NULL;

    if (t == NULL || t->dtype != SIM_DTYPE_FLOAT)
        return false;
    return t->numel == 1 || (t->numel == cols && t->shape.rank >= 1 &&
                             t->shape.d[t->shape.rank - 1] == cols);
}

static double
in_bytes_of(const struct sim_exe *e, const struct sim_enode *n)
{
    double b = 0;

    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0)
            b += (double)e->vals[n->in[j]].bytes;
    return b;
}

/* Node s becomes op `op` reading in[0 .. n_in) with `params` (owned by the node; its old
 * ones are freed), its output unchanged. Its fused costs take the difference between its
 * old own cost and its new one, so its charge on the simulated clock does not change. */
static void
rewrite(struct fuse *f, int s, const struct sim_op *op, void *params, int n_in, const int *in)
{
    struct sim_enode *n = &f->e->nodes[s];
    double of, ob, nf, nb, sf = n->fused_flops, sb = n->fused_bytes;
    double oi = in_bytes_of(f->e, n), st[6];
    struct sim_node_cost ot, nt;

    memcpy(st, n->fused_t, sizeof(st));
    memset(n->fused_t, 0, sizeof(n->fused_t));
    n->fused_flops = n->fused_bytes = 0;
    sim_cost_node(f->e, s, &of, &ob);
    sim_cost_node_time(f->e, s, &ot);
    free(n->params);
    n->params = params;
    n->op = op;
    n->n_in = n_in;
    n->in = in;
    sim_cost_node(f->e, s, &nf, &nb);
    n->fused_flops = sf + (of - nf);
    n->fused_bytes = sb + (ob - nb);
    n->fused_in_bytes += oi - in_bytes_of(f->e, n);
    memset(n->fused_t, 0, sizeof(n->fused_t));
    sim_cost_node_time(f->e, s, &nt);
    for (int k = 0; k < 3; k++) {
        n->fused_t[k] = st[k] + (ot.fwd[k] - nt.fwd[k]);
        n->fused_t[3 + k] = st[3 + k] + (ot.bwd[k] - nt.bwd[k]);
    }
}

/*
 * ReduceMean r1 starting LayerNorm over the last axis as torch.onnx.export writes it:
 *   m = ReduceMean(x), d = Sub(x, m), p = Pow(d, 2), v = ReduceMean(p), a = Add(v, eps),
 *   s = Sqrt(a), n = Div(d, s), g = Mul(n, scale), y = Add(g, bias)
 * (Add and Mul operands in either order; scale and bias one value or one per column).
 * The reductions are recognised by their shapes: m has x's shape with the last dim 1, so
 * any other reduced dim has size 1 and the mean is over the last axis. Becomes one
 * LayerNorm node in the final Add's place (scale and bias are known by then).
 */
void
sim_fuse_layernorm(struct fuse *f, int r1)
{
    struct sim_exe *e = f->e;
    struct sim_enode *n1 = &e->nodes[r1];
    int x = n1->n_in >= 1 ? n1->in[0] : -1, m = n1->n_out == 1 ? n1->out[0] : -1;
    int sub, pw, r2, add, sq, div = -1, mul, fin, d, sc, bi;
    int nodes[9];
    float two, eps;
    struct sim_shape xs, ms;
    struct sim_ln_params *p;
    int64_t cols;

    if (x < 0 || m < 0 || e->vals[x].ti.dtype != SIM_DTYPE_FLOAT || e->vals[x].ti.shape.rank < 1)
        return;
    xs = e->vals[x].ti.shape;
    ms = xs;
    ms.d[ms.rank - 1] = 1;
    cols = xs.d[xs.rank - 1];
    if (cols < 1 || !float_of_shape(f, m, &ms))
        return;
    sub = only_reader(f, m, "Sub", &xs, r1);
    if (sub < 0 || e->nodes[sub].in[0] != x || e->nodes[sub].in[1] != m)
        return;
    d = e->nodes[sub].out[0];
    if (!private_to(f, d, 2))
        return;
    /* d's two readers: Pow(d, 2) and Div(d, s), later in the schedule */
    pw = -1;
    for (int s = sub + 1; s < e->n_nodes && (pw < 0 || div < 0); s++) {
        const struct sim_enode *n = &e->nodes[s];
        if (f->gone[s] || n->n_in < 1 || n->in[0] != d)
            continue;
        if (is(f, s, "Pow") && pw < 0)
            pw = s;
        else if (is(f, s, "Div") && div < 0)
            div = s;
        else
            return;
    }
    if (pw < 0 || div < 0 || e->nodes[pw].n_in != 2 || !const_scalar(f, e->nodes[pw].in[1], &two) ||
        two != 2.0f || e->nodes[pw].n_out != 1 || !float_of_shape(f, e->nodes[pw].out[0], &xs) ||
        !same_place(n1, &e->nodes[pw]))
        return;
    r2 = only_reader(f, e->nodes[pw].out[0], "ReduceMean", &ms, r1);
    if (r2 < 0 || e->nodes[r2].in[0] != e->nodes[pw].out[0])
        return;
    add = only_reader(f, e->nodes[r2].out[0], "Add", &ms, r1);
    if (add < 0 || !const_scalar(f, other_in(f, add, e->nodes[r2].out[0]), &eps))
        return;
    sq = only_reader(f, e->nodes[add].out[0], "Sqrt", &ms, r1);
    if (sq < 0 || only_reader(f, e->nodes[sq].out[0], "Div", &xs, r1) != div ||
        e->nodes[div].n_in != 2 || e->nodes[div].in[1] != e->nodes[sq].out[0])
        return;
    mul = only_reader(f, e->nodes[div].out[0], "Mul", &xs, r1);
    sc = mul >= 0 ? other_in(f, mul, e->nodes[div].out[0]) : -1;
    if (sc < 0 || !per_column(f, sc, cols))
        return;
    fin = only_reader(f, e->nodes[mul].out[0], "Add", &xs, r1);
    bi = fin >= 0 ? other_in(f, fin, e->nodes[mul].out[0]) : -1;
    if (bi < 0 || !per_column(f, bi, cols))
        return;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return;                 /* left unfused: the same results, only slower */
    *p = (struct sim_ln_params){ .in = { x, sc, bi }, .rows = e->vals[x].ti.numel / cols,
                                 .cols = cols, .hw = 0, .eps = eps,
                                 .scalar_scale = e->vals[sc].ti.numel == 1,
                                 .scalar_bias = e->vals[bi].ti.numel == 1 };
    rewrite(f, fin, &sim_op_layernorm, p, 3, p->in);
    nodes[0] = r1, nodes[1] = sub, nodes[2] = pw, nodes[3] = r2, nodes[4] = add;
    nodes[5] = sq, nodes[6] = div, nodes[7] = mul, nodes[8] = -1;
    for (int i = 0; nodes[i] >= 0; i++) {
        absorb(f, fin, nodes[i]);
        drop_val(f, e->nodes[nodes[i]].out[0]);
    }
}

/* Whether node s carries PopART's recomputation attribute (a checkpoint, or a node to
 * recompute): a training fusion keeps such a node as it is. */
static bool
recompute_marked(const struct fuse *f, int s)
{
    return sim_attr_find(&f->e->m->nodes[f->e->nodes[s].mnode],
                         "__recompute_output_in_backward") != NULL;
}

/* The bias Add before GELU's x (Add(z, bias), bias one value per column of z, read by
 * nothing else, in node n's place), its node, with *z and *bias; else -1. Inference only. */
static int
bias_add_of(struct fuse *f, const struct sim_enode *n, int x, const struct sim_shape *xs,
            int64_t cols, int *z, int *bias)
{
    struct sim_exe *e = f->e;
    int pa;

    if (!private_to(f, x, 2) || e->vals[x].producer < 0 || cols < 1)
        return -1;
    pa = e->vals[x].producer;
    if (f->gone[pa] || !is(f, pa, "Add") || e->nodes[pa].n_in != 2 ||
        !same_place(n, &e->nodes[pa]))
        return -1;
    for (int j = 0; j < 2; j++) {
        int a = e->nodes[pa].in[j], b = e->nodes[pa].in[1 - j];
        if (a >= 0 && a != b && float_of_shape(f, a, xs) && per_column(f, b, cols) &&
            e->vals[b].ti.numel == cols) {
            *z = a;
            *bias = b;
            return pa;
        }
    }
    return -1;
}

/*
 * Div dv starting exact-erf GELU as torch.onnx.export writes it:
 *   t = Div(x, sqrt(2)), r = Erf(t), a = Add(r, 1), m = Mul(x, a), y = Mul(m, 0.5)
 * (Add and Mul operands in either order; sqrt(2) within two float steps). Becomes one Gelu
 * node in the last Mul's place. Inference: whose results are within 5e-7 of these
 * (op_layernorm.c); when x is Add(z, bias) read by nothing else, bias one value per column
 * of z (a Linear's MatMul then bias), that Add joins it too. Training (f->train): the
 * chain's own operations, so its bits (float; float16 too, where it rounds once instead of
 * five times), with a backward reading x alone, and no bias; a node of the chain carrying
 * a recomputation attribute keeps it unfused.
 */
void
sim_fuse_gelu(struct fuse *f, int dv)
{
    struct sim_exe *e = f->e;
    struct sim_enode *n = &e->nodes[dv];
    int x = n->n_in == 2 ? n->in[0] : -1, er, ad, mu, mh, pa = -1, z = -1, bias = -1;
    float c, one, half;
    struct sim_shape xs;
    struct sim_gelu_params *p;
    int64_t cols;

    f->dt = SIM_DTYPE_FLOAT;
    if (x >= 0 && f->train && e->vals[x].ti.dtype == SIM_DTYPE_FLOAT16)
        f->dt = SIM_DTYPE_FLOAT16;
    if (x < 0 || n->n_out != 1 || e->vals[x].ti.dtype != f->dt ||
        !const_scalar(f, n->in[1], &c) || !(c >= 1.4140625f && c <= 1.4142138f) ||
        (f->dt == SIM_DTYPE_FLOAT && c < 1.4142133f))
        return;     /* float: sqrt 2 within two steps; float16: also its own sqrt 2 */
    xs = e->vals[x].ti.shape;
    if (!float_of_shape(f, n->out[0], &xs))
        return;
    er = only_reader(f, n->out[0], "Erf", &xs, dv);
    ad = er >= 0 ? only_reader(f, e->nodes[er].out[0], "Add", &xs, dv) : -1;
    if (ad < 0 || !const_scalar(f, other_in(f, ad, e->nodes[er].out[0]), &one) || one != 1.0f)
        return;
    mu = only_reader(f, e->nodes[ad].out[0], "Mul", &xs, dv);
    if (mu < 0 || other_in(f, mu, e->nodes[ad].out[0]) != x)
        return;
    mh = only_reader(f, e->nodes[mu].out[0], "Mul", &xs, dv);
    if (mh < 0 || !const_scalar(f, other_in(f, mh, e->nodes[mu].out[0]), &half) || half != 0.5f)
        return;
    if (f->train && (recompute_marked(f, dv) || recompute_marked(f, er) ||
                     recompute_marked(f, ad) || recompute_marked(f, mu)))
        return;
    cols = xs.rank >= 1 ? xs.d[xs.rank - 1] : 1;
    if (!f->train)
        pa = bias_add_of(f, n, x, &xs, cols, &z, &bias);
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return;                 /* left unfused: the same results, only slower */
    *p = (struct sim_gelu_params){ .in = { pa >= 0 ? z : x, pa >= 0 ? bias : -1 }, .cols = cols,
                                   .chain = f->train, .c = c };
    rewrite(f, mh, &sim_op_gelu, p, pa >= 0 ? 2 : 1, p->in);
    if (f->train)       /* the Mul's scratch and saved state: the Gelu needs none */
        e->nodes[mh].scratch = e->nodes[mh].saved = e->nodes[mh].bwd_scratch = 0;
    absorb(f, mh, dv);
    absorb(f, mh, er);
    absorb(f, mh, ad);
    absorb(f, mh, mu);
    drop_val(f, e->nodes[dv].out[0]);
    drop_val(f, e->nodes[er].out[0]);
    drop_val(f, e->nodes[ad].out[0]);
    drop_val(f, e->nodes[mu].out[0]);
    if (pa >= 0) {
        absorb(f, mh, pa);
        drop_val(f, x);
    }
}

/*
 * Transpose tr from channels last back to channels first, the end of a ConvNeXt block:
 *   h = Add(z, bias), c = Transpose(h, perm 0 3 1 2), r = Mul(c, scale), y = Add(r, res)
 * (Add and Mul operands in either order; the bias Add may be absent; bias (C), scale
 * (C, 1, 1), res of y's shape, C at most 4096). Becomes one TransposeScaleAdd node in the
 * last Add's place.
 */
void
sim_fuse_tail(struct fuse *f, int tr)
{
    struct sim_exe *e = f->e;
    struct sim_enode *n = &e->nodes[tr];
    const struct sim_attr *perm = sim_attr_find(&e->m->nodes[n->mnode], "perm");
    int h = n->n_in == 1 ? n->in[0] : -1, z = h, bias = -1, ba = -1, mul, sc, fin, res;
    struct sim_shape zs, cs;
    struct sim_tail_params *p;

    if (h < 0 || n->n_out != 1 || perm == NULL || perm->n != 4 || perm->ints[0] != 0 ||
        perm->ints[1] != 3 || perm->ints[2] != 1 || perm->ints[3] != 2 ||
        e->vals[h].ti.dtype != SIM_DTYPE_FLOAT || e->vals[h].ti.shape.rank != 4)
        return;
    zs = e->vals[h].ti.shape;
    cs = e->vals[n->out[0]].ti.shape;
    if (zs.d[3] < 1 || zs.d[3] > 4096 || zs.d[1] * zs.d[2] < 1)
        return;
    mul = only_reader(f, n->out[0], "Mul", &cs, tr);
    sc = mul >= 0 ? other_in(f, mul, n->out[0]) : -1;
    if (sc < 0 || e->vals[sc].ti.dtype != SIM_DTYPE_FLOAT || e->vals[sc].ti.numel != zs.d[3] ||
        e->vals[sc].ti.shape.rank < 3 ||
        e->vals[sc].ti.shape.d[e->vals[sc].ti.shape.rank - 3] != zs.d[3])
        return;
    fin = only_reader(f, e->nodes[mul].out[0], "Add", &cs, tr);
    res = fin >= 0 ? other_in(f, fin, e->nodes[mul].out[0]) : -1;
    if (res < 0 || res == e->nodes[mul].out[0] || !float_of_shape(f, res, &cs))
        return;
    /* the bias Add before the Transpose, when only the Transpose reads its sum */
    if (private_to(f, h, 1) && e->vals[h].producer >= 0) {
        ba = e->vals[h].producer;
        if (f->gone[ba] || !is(f, ba, "Add") || e->nodes[ba].n_in != 2 ||
            !same_place(n, &e->nodes[ba]))
            ba = -1;
        for (int j = 0; ba >= 0 && j < 2; j++) {
            int a = e->nodes[ba].in[j], b = e->nodes[ba].in[1 - j];
            if (a >= 0 && a != b && float_of_shape(f, a, &zs) && per_column(f, b, zs.d[3]) &&
                e->vals[b].ti.numel == zs.d[3]) {
                z = a;
                bias = b;
                break;
            }
        }
        if (bias < 0)
            ba = -1;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return;                 /* left unfused: the same results, only slower */
    *p = (struct sim_tail_params){ .in = { z, bias, sc, res }, .n = zs.d[0],
                                   .hw = zs.d[1] * zs.d[2], .c = zs.d[3] };
    rewrite(f, fin, &sim_op_tail, p, 4, p->in);
    absorb(f, fin, tr);
    absorb(f, fin, mul);
    drop_val(f, n->out[0]);
    drop_val(f, e->nodes[mul].out[0]);
    if (ba >= 0) {
        absorb(f, fin, ba);
        drop_val(f, h);
    }
}

/* LayerNorm node s (fuse_layernorm's) whose x is Transpose(src, perm 0 2 3 1) of a rank-4
 * src read by nothing else: the node reads src channels first and the Transpose goes. */
void
sim_fuse_ln_transpose(struct fuse *f, int s)
{
    struct sim_exe *e = f->e;
    struct sim_enode *n = &e->nodes[s];
    struct sim_ln_params *p = n->params;
    int x = p->in[0], tr = e->vals[x].producer, src;
    const struct sim_attr *perm;
    const struct sim_shape *ss;

    if (p->hw != 0 || !private_to(f, x, 1) || tr < 0 || f->gone[tr] || !is(f, tr, "Transpose") ||
        e->nodes[tr].n_in != 1 || !same_place(n, &e->nodes[tr]))
        return;
    perm = sim_attr_find(&e->m->nodes[e->nodes[tr].mnode], "perm");
    src = e->nodes[tr].in[0];
    if (perm == NULL || perm->n != 4 || perm->ints[0] != 0 || perm->ints[1] != 2 ||
        perm->ints[2] != 3 || perm->ints[3] != 1 || src < 0 ||
        e->vals[src].ti.dtype != SIM_DTYPE_FLOAT || e->vals[src].ti.shape.rank != 4)
        return;
    ss = &e->vals[src].ti.shape;
    if (ss->d[1] != p->cols || p->cols > 4096 || ss->d[2] * ss->d[3] < 1)
        return;
    /* src has x's bytes: the node's own cost does not change */
    p->in[0] = src;
    p->hw = ss->d[2] * ss->d[3];
    absorb(f, s, tr);
    drop_val(f, x);
}

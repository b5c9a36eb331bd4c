/*
 * op_pad.c — Pad, forward and backward, for any dtype: constant (a value), reflect (mirror
 * without repeating the edge, as numpy's 'reflect') and edge modes; pads as an attribute
 * before opset 11 ('paddings' in opset 1) and as a compile-time input from opset 11, with
 * the optional constant_value input read at run time. Negative pads crop.
 *
 * At compile time every output coordinate of every dim is mapped to the input coordinate it
 * copies (-1: the constant), so a step is a walk over the output rows, each copying its
 * interior with one memcpy. The backward (float)
 * walks the same maps and adds dy into the element it was copied from, so reflected and
 * edge elements collect every copy's gradient.
 * Does not: the opset-18 axes input, 'wrap' mode.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

struct pad_params {
    int rank;                       /* >= 1 (a scalar is padded as nothing to do) */
    int mode;
    double value;                   /* the constant before opset 11 */
    int64_t out[SIM_MAX_RANK];
    int64_t in_stride[SIM_MAX_RANK];
    int64_t map_at[SIM_MAX_RANK];   /* offset of dim k's map in map[] */
    int64_t lo, hi;                 /* innermost dim: outputs [lo, hi) copy inputs
                                     * [lo - pad, hi - pad) in order (one memcpy) */
    int64_t map[];                  /* output coordinate -> input coordinate or -1 */
};

/* The input coordinate output coordinate o of a dim of n inputs copies, or -1. */
static int64_t
pad_source(int mode, int64_t o, int64_t pb, int64_t n)
{
    int64_t i = o - pb, period;

    if (i >= 0 && i < n)
        return i;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE)
        return i < 0 ? 0 : n - 1;
    if (n == 1)
        return 0;
    period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

/* Reads the pads (2 * rank values) from the attribute or the input. */
static int
read_pads(struct sim_infer *c, int rank, int64_t *pads)
{
    int n, rc;

    if (c->version >= 11) {
        if (!sim_has_in(c, 1))
            return sim_infer_fail(c, IPUOF_E_INVAL, "input 1 (pads) is required from opset 11");
        rc = sim_in_const_ints(c, 1, "pads", pads, 2 * SIM_MAX_RANK, &n);
        if (rc != 0)
            return rc;
    } else {
        const int64_t *v;
        if (c->n_in > 1)
            return sim_infer_fail(c, IPUOF_E_INVAL, "takes one input before opset 11");
        rc = sim_ia_ints(c, c->version < 2 ? "paddings" : "pads", &v, &n);
        if (rc != 0)
            return rc;
        if (n < 0)
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'pads' is required");
        if (n > 2 * SIM_MAX_RANK)
            n = 2 * SIM_MAX_RANK + 1;
        for (int i = 0; i < n && i < 2 * SIM_MAX_RANK; i++)
            pads[i] = v[i];
    }
    if (n != 2 * rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "pads has %d values; the input of rank %d needs "
                              "%d (all begins, then all ends)", n, rank, 2 * rank);
    for (int i = 0; i < n; i++)
        if (pads[i] > SIM_MAX_ELEMS || pads[i] < -SIM_MAX_ELEMS)
            return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "pad %lld is too large",
                                  (long long)pads[i]);
    return 0;
}

static int
infer_pad(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct pad_params *p;
    const char *mode;
    float value_attr;
    int64_t pads[2 * SIM_MAX_RANK], maps = 0, acc = 1;
    struct sim_shape o = x->shape;
    int rank = x->shape.rank, rc;

    rc = sim_in_dtype(c, 0, sim_dt_any);
    if (rc == 0)
        rc = sim_ia_str(c, "mode", "constant", &mode);
    if (rc == 0)
        rc = sim_ia_float(c, "value", 0.0f, &value_attr);
    if (rc == 0)
        rc = read_pads(c, rank, pads);
    if (rc != 0)
        return rc;
    for (int d = 0; d < rank; d++) {
        o.d[d] = x->shape.d[d] + pads[d] + pads[rank + d];
        if (o.d[d] < 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "pads %lld and %lld crop dim %d of %lld "
                                  "below nothing", (long long)pads[d],
                                  (long long)pads[rank + d], d, (long long)x->shape.d[d]);
        maps += o.d[d];
    }
    rc = sim_set_out(c, 0, x->dtype, &o);
    if (rc != 0)
        return rc;
    if (sim_has_in(c, 2) && (c->in[2]->dtype != x->dtype || c->in[2]->numel != 1))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "constant_value must be one %s value",
                              sim_dtype_name(x->dtype));
    p = sim_params(c, sizeof(*p) + (size_t)(maps + 1) * sizeof(int64_t));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    if (strcmp(mode, "constant") == 0)
        p->mode = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0)
        p->mode = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0)
        p->mode = PAD_EDGE;
    else
        return sim_infer_fail(c, IPUOF_E_UNSUPPORTED, "mode '%s' is not one of constant, "
                              "reflect, edge", mode);
    for (int d = 0; d < rank; d++)
        if (p->mode != PAD_CONSTANT && x->shape.d[d] == 0 && o.d[d] > 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "%s padding of the empty dim %d", mode, d);
    p->value = value_attr;
    p->rank = rank > 0 ? rank : 1;
    maps = 0;
    for (int d = rank - 1; d >= 0; d--) {
        p->in_stride[d] = acc;
        acc *= x->shape.d[d];
    }
    for (int d = 0; d < rank; d++) {
        p->out[d] = o.d[d];
        p->map_at[d] = maps;
        for (int64_t i = 0; i < o.d[d]; i++)
            p->map[maps + i] = pad_source(p->mode, i, pads[d], x->shape.d[d]);
        maps += o.d[d];
    }
    p->lo = p->hi = 0;
    if (rank > 0) {
        int64_t pb = pads[rank - 1], n = x->shape.d[rank - 1];
        p->lo = pb > 0 ? pb : 0;
        p->hi = pb + n < o.d[rank - 1] ? pb + n : o.d[rank - 1];
        if (p->hi < p->lo)
            p->hi = p->lo;
    }
    if (rank == 0) {
        p->out[0] = 1;
        p->in_stride[0] = 1;
        p->map_at[0] = 0;
        p->map[0] = 0;
    }
    return 0;
}

/*
 * Walks the output rows: calls row(ctx, out_row, in_off) for every row of the innermost dim,
 * in_off < 0 when an outer coordinate is padding (constant mode).
 */
static void
pad_walk(const struct pad_params *p, void (*row)(void *ctx, int64_t r, int64_t in_off),
         void *ctx)
{
    int64_t idx[SIM_MAX_RANK] = { 0 }, rows = 1;
    int r = p->rank;

    for (int d = 0; d < r - 1; d++)
        rows *= p->out[d];
    if (p->out[r - 1] == 0)
        return;
    for (int64_t k = 0; k < rows; k++) {
        int64_t off = 0;
        for (int d = 0; d < r - 1 && off >= 0; d++) {
            int64_t s = p->map[p->map_at[d] + idx[d]];
            off = s < 0 ? -1 : off + s * p->in_stride[d];
        }
        row(ctx, k, off);
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < p->out[d])
                break;
            idx[d] = 0;
        }
    }
}

struct pad_fwd {
    const struct pad_params *p;
    const char *x;
    char *y;
    const char *value;              /* one element of the dtype */
    size_t es;
};

static void
pad_fwd_row(void *ctx, int64_t r, int64_t off)
{
    const struct pad_fwd *f = ctx;
    const struct pad_params *p = f->p;
    int64_t n = p->out[p->rank - 1];
    const int64_t *map = p->map + p->map_at[p->rank - 1];
    char *y = f->y + r * n * (int64_t)f->es;

    int64_t es = (int64_t)f->es;

    if (off >= 0 && p->hi > p->lo)
        memcpy(y + p->lo * es, f->x + (off + map[p->lo]) * es, (size_t)((p->hi - p->lo) * es));
    for (int64_t i = 0; i < n; i++) {
        const char *src;
        if (off >= 0 && i >= p->lo && i < p->hi) {
            i = p->hi - 1;
            continue;
        }
        src = off < 0 || map[i] < 0 ? f->value : f->x + (off + map[i]) * es;
        memcpy(y + i * es, src, f->es);
    }
}

/* x: any shape; y: x padded */
static int
fwd_pad(const struct sim_kern *k, struct sim_err *err)
{
    const struct pad_params *p = k->params;
    int dt = k->in[0].dtype;
    char value[8] = { 0 };
    struct pad_fwd f = { p, k->in[0].data, k->out[0].data, value, sim_dtype_size(dt) };

    (void)err;
    if (k->n_in > 2 && k->in[2].data != NULL)
        memcpy(value, k->in[2].data, f.es);
    else
        sim_put_f64(dt, value, 0, p->value);
    pad_walk(p, pad_fwd_row, &f);
    return 0;
}

struct pad_bwd {
    const struct pad_params *p;
    const float *g;
    float *dx;
};

static void
pad_bwd_row(void *ctx, int64_t r, int64_t off)
{
    const struct pad_bwd *b = ctx;
    const struct pad_params *p = b->p;
    int64_t n = p->out[p->rank - 1];
    const int64_t *map = p->map + p->map_at[p->rank - 1];
    const float *g = b->g + r * n;

    if (off < 0)
        return;
    for (int64_t i = 0; i < n; i++)
        if (map[i] >= 0)
            b->dx[off + map[i]] += g[i];
}

/* dx += every dy element copied from x's element (none for the constant) */
static int
bwd_pad(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
        struct sim_err *err)
{
    struct pad_bwd b = { k->params, dout[0].data, din[0].data };

    (void)err;
    if (b.g == NULL || b.dx == NULL)
        return 0;
    pad_walk(b.p, pad_bwd_row, &b);
    return 0;
}

const struct sim_op sim_ops_pad[] = {
    { "Pad", 1, 1, 3, 1, 1, 1u << 1, 0, 4096u, infer_pad, fwd_pad, bwd_pad, 1u, NULL, SIM_BWD_ALL },
};

const int sim_ops_pad_count = (int)(sizeof(sim_ops_pad) / sizeof(sim_ops_pad[0]));

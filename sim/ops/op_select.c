/*
 * op_select.c — ops that select or join data without arithmetic, for any dtype, forward
 * and backward: Concat, Slice (bounds known at compile time, any steps), Gather (indices
 * checked at run time: an index out of range is an error naming it, never a read out of
 * bounds).
 *
 * Backward (float data): each op's gradient walks the same index pattern as its forward and
 * adds dy into the element of x it was copied from (Gather: w.r.t. the data, summing over
 * repeated indices).
 * Does not: Tile, string tensors (Split and ScatterND are in op_split.c, Expand in op_gen.c,
 * Pad in op_pad.c).
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- Concat --------------------------------------------------------------------------- */

struct concat_params {
    int64_t outer;                  /* product of dims before axis */
};

static int
infer_concat(struct sim_infer *c)
{
    const struct sim_tinfo *x0 = c->in[0];
    struct concat_params *p;
    int64_t axis;
    struct sim_shape o = x0->shape;
    int ax, rc = sim_ia_int(c, "axis", c->version < 4 ? 1 : INT64_MIN, &axis);
    char s1[128], s2[128];

    if (rc != 0)
        return rc;
    if (axis == INT64_MIN)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'axis' is required");
    if (!sim_axis(axis, x0->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, x0->shape.rank);
    o.d[ax] = 0;
    for (int i = 0; i < c->n_in; i++) {
        const struct sim_tinfo *t = c->in[i];
        if (t == NULL)
            return sim_infer_fail(c, IPUOF_E_INVAL, "input %d is missing", i);
        if (t->dtype != x0->dtype || t->shape.rank != x0->shape.rank)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d (%s %s) does not match input 0 "
                                  "(%s %s)", i, sim_dtype_name(t->dtype),
                                  sim_shape_fmt(&t->shape, s1, sizeof(s1)),
                                  sim_dtype_name(x0->dtype),
                                  sim_shape_fmt(&x0->shape, s2, sizeof(s2)));
        for (int d = 0; d < o.rank; d++)
            if (d != ax && t->shape.d[d] != x0->shape.d[d])
                return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d %s differs from input 0 %s "
                                      "outside axis %d", i,
                                      sim_shape_fmt(&t->shape, s1, sizeof(s1)),
                                      sim_shape_fmt(&x0->shape, s2, sizeof(s2)), ax);
        o.d[ax] += t->shape.d[ax];
    }
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->outer = sim_shape_span(&x0->shape, 0, ax);
    return sim_set_out(c, 0, x0->dtype, &o);
}

/* inputs: (outer, d_i, inner...); y: (outer, sum d_i, inner...) */
static int
fwd_concat(const struct sim_kern *k, struct sim_err *err)
{
    const struct concat_params *p = k->params;
    size_t es = sim_dtype_size(k->out[0].dtype);
    char *y = k->out[0].data;

    (void)err;
    for (int64_t o = 0; o < p->outer; o++)
        for (int i = 0; i < k->n_in; i++) {
            size_t chunk = p->outer > 0 ? (size_t)(k->in[i].numel / p->outer) * es : 0;
            if (chunk > 0)
                memcpy(y, (const char *)k->in[i].data + (size_t)o * chunk, chunk);
            y += chunk;
        }
    return 0;
}

/* ---- Slice ---------------------------------------------------------------------------- */

struct slice_params {
    int rank;
    int64_t start[SIM_MAX_RANK], step[SIM_MAX_RANK], len[SIM_MAX_RANK];
    int64_t istr[SIM_MAX_RANK];
};

static int
infer_slice(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct slice_params *p;
    int64_t starts[SIM_MAX_RANK], ends[SIM_MAX_RANK], axes[SIM_MAX_RANK], steps[SIM_MAX_RANK];
    int ns, ne, na = -1, nst = -1, r = x->shape.rank, rc = 0;
    bool seen[SIM_MAX_RANK] = { false };
    struct sim_shape o = x->shape;
    int64_t acc = 1;

    if (c->version < 10) {
        const int64_t *v;
        int n = -1; /* "axes" absent: -1, as sim_ia_ints says */
        rc = sim_ia_ints(c, "starts", &v, &ns);
        for (int i = 0; rc == 0 && i < ns && i < SIM_MAX_RANK; i++)
            starts[i] = v[i];
        if (rc == 0)
            rc = sim_ia_ints(c, "ends", &v, &ne);
        for (int i = 0; rc == 0 && i < ne && i < SIM_MAX_RANK; i++)
            ends[i] = v[i];
        if (rc == 0)
            rc = sim_ia_ints(c, "axes", &v, &n);
        na = n;
        for (int i = 0; rc == 0 && i < n && i < SIM_MAX_RANK; i++)
            axes[i] = v[i];
        if (rc == 0 && (ns < 0 || ns > SIM_MAX_RANK || ne > SIM_MAX_RANK || na > SIM_MAX_RANK))
            return sim_infer_fail(c, IPUOF_E_INVAL, "starts and ends are required (at most %d)",
                                  SIM_MAX_RANK);
    } else {
        if (c->n_in < 3)
            return sim_infer_fail(c, IPUOF_E_INVAL, "needs data, starts and ends");
        rc = sim_in_const_ints(c, 1, "starts", starts, SIM_MAX_RANK, &ns);
        if (rc == 0)
            rc = sim_in_const_ints(c, 2, "ends", ends, SIM_MAX_RANK, &ne);
        if (rc == 0 && sim_has_in(c, 3))
            rc = sim_in_const_ints(c, 3, "axes", axes, SIM_MAX_RANK, &na);
        if (rc == 0 && sim_has_in(c, 4))
            rc = sim_in_const_ints(c, 4, "steps", steps, SIM_MAX_RANK, &nst);
    }
    if (rc != 0)
        return rc;
    if (ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "starts, ends, axes and steps differ in length");
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->rank = r;
    for (int i = r - 1; i >= 0; i--) {
        p->istr[i] = acc;
        acc *= x->shape.d[i];
        p->start[i] = 0;
        p->step[i] = 1;
        p->len[i] = x->shape.d[i];
    }
    for (int i = 0; i < ns; i++) {
        int ax;
        int64_t dim, st, en, step = nst >= 0 ? steps[i] : 1;
        if (!sim_axis(na >= 0 ? axes[i] : i, r, &ax) || seen[ax])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d or "
                                  "repeated", (long long)(na >= 0 ? axes[i] : i), r);
        seen[ax] = true;
        if (step == 0)
            return sim_infer_fail(c, IPUOF_E_INVAL, "step 0 on axis %d", ax);
        dim = x->shape.d[ax];
        /* a step longer than the dim selects at most the start: clamp it so that offset
         * arithmetic stays far from overflow */
        if (step > dim)
            step = dim > 0 ? dim : 1;
        if (step < -dim)
            step = dim > 0 ? -dim : -1;
        st = starts[i];
        en = ends[i];
        if (st < 0)
            st = st < -dim ? 0 : st + dim;
        if (en < 0)
            en = en < -dim ? -1 : en + dim;
        if (step > 0) {
            st = st > dim ? dim : st;
            en = en < 0 ? 0 : en > dim ? dim : en;
            p->len[ax] = en > st ? (en - st + step - 1) / step : 0;
        } else {
            st = st > dim - 1 ? dim - 1 : st;
            en = en > dim - 1 ? dim - 1 : en;
            p->len[ax] = st > en ? (st - en + (-step) - 1) / (-step) : 0;
        }
        p->start[ax] = st;
        p->step[ax] = step;
        o.d[ax] = p->len[ax];
    }
    return sim_set_out(c, 0, x->dtype, &o);
}

/* The selection as a strided view of x (sim_strided_copy): str[d] = step x x's stride;
 * returns the offset of the first selected element. */
static int64_t
slice_view(const struct slice_params *p, int64_t *str)
{
    int64_t off = 0;

    for (int d = 0; d < p->rank; d++) {
        off += p->start[d] * p->istr[d];
        str[d] = p->step[d] * p->istr[d];
    }
    return off;
}

/* x: any shape; y: the selected elements */
static int
fwd_slice(const struct sim_kern *k, struct sim_err *err)
{
    const struct slice_params *p = k->params;
    int64_t str[SIM_MAX_RANK], off = slice_view(p, str);

    (void)err;
    sim_strided_copy(k->out[0].data, k->in[0].data, sim_dtype_size(k->in[0].dtype), p->rank,
                     p->len, str, off);
    return 0;
}

/* ---- Gather --------------------------------------------------------------------------- */

struct gather_params {
    int64_t outer, dim, inner;      /* data viewed as (outer, dim, inner) */
};

static int
infer_gather(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *ind = c->in[1];
    struct gather_params *p;
    int64_t axis;
    struct sim_shape o;
    int ax, rc = sim_ia_int(c, "axis", 0, &axis);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_index);
    if (rc != 0)
        return rc;
    if (!sim_axis(axis, x->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    if (x->shape.rank - 1 + ind->shape.rank > SIM_MAX_RANK)
        return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "the result rank exceeds %d", SIM_MAX_RANK);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->outer = sim_shape_span(&x->shape, 0, ax);
    p->dim = x->shape.d[ax];
    p->inner = sim_shape_span(&x->shape, ax + 1, x->shape.rank);
    o.rank = 0;
    for (int i = 0; i < ax; i++)
        o.d[o.rank++] = x->shape.d[i];
    for (int i = 0; i < ind->shape.rank; i++)
        o.d[o.rank++] = ind->shape.d[i];
    for (int i = ax + 1; i < x->shape.rank; i++)
        o.d[o.rank++] = x->shape.d[i];
    return sim_set_out(c, 0, x->dtype, &o);
}

/* data: (outer, dim, inner), indices: any shape (m values), y: (outer, m, inner) */
static int
fwd_gather(const struct sim_kern *k, struct sim_err *err)
{
    const struct gather_params *p = k->params;
    size_t es = sim_dtype_size(k->in[0].dtype), row = (size_t)p->inner * es;
    const struct sim_tensor *ind = &k->in[1];
    const char *x = k->in[0].data;
    char *y = k->out[0].data;

    for (int64_t j = 0; j < ind->numel; j++) {
        int64_t v = sim_get_i64(ind->dtype, ind->data, j);
        if (v < -p->dim || v >= p->dim)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: index %lld (element %lld of the "
                               "indices) is out of range [%lld, %lld)", k->label, (long long)v,
                               (long long)j, (long long)-p->dim, (long long)p->dim);
    }
    if (row == 0)
        return 0;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < ind->numel; j++) {
            int64_t v = sim_get_i64(ind->dtype, ind->data, j);
            if (v < 0)
                v += p->dim;
            memcpy(y, x + (size_t)(o * p->dim + v) * row, row);
            y += row;
        }
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/* dy: (outer, sum d_i, inner...) split back into dx_i: (outer, d_i, inner...) */
static int
bwd_concat(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct concat_params *p = k->params;
    const float *g = dout[0].data;

    (void)err;
    if (g == NULL)
        return 0;
    for (int64_t o = 0; o < p->outer; o++)
        for (int i = 0; i < k->n_in; i++) {
            int64_t chunk = k->in[i].numel / p->outer;
            float *dx = din[i].data;
            if (dx != NULL)
                for (int64_t j = 0; j < chunk; j++)
                    dx[o * chunk + j] += g[j];
            g += chunk;
        }
    return 0;
}

/* dx[selected element] += dy, walking the selection as the forward does */
static int
bwd_slice(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct slice_params *p = k->params;
    int64_t str[SIM_MAX_RANK], off;

    (void)err;
    if (dout[0].data == NULL || din[0].data == NULL)
        return 0;
    off = slice_view(p, str);
    sim_strided_add_f32(din[0].data, dout[0].data, p->rank, p->len, str, off);
    return 0;
}

/* data, ddata: (outer, dim, inner); indices: m values (checked by the forward of the same
 * step); dy: (outer, m, inner). ddata[o, idx_j, :] += dy[o, j, :]. */
static int
bwd_gather(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct gather_params *p = k->params;
    const struct sim_tensor *ind = &k->in[1];
    const float *g = dout[0].data;
    float *dx = din[0].data;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < ind->numel; j++, g += p->inner) {
            int64_t v = sim_get_i64(ind->dtype, ind->data, j);
            float *row;
            if (v < 0)
                v += p->dim;
            if (v < 0 || v >= p->dim)
                continue;
            row = dx + (o * p->dim + v) * p->inner;
            for (int64_t i = 0; i < p->inner; i++)
                row[i] += g[i];
        }
    return 0;
}

#define CODE_COPY 2048u

const struct sim_op sim_ops_select[] = {
    { "Concat", 1, 1, -1, 1, 1, 0, 0, CODE_COPY, infer_concat, fwd_concat, bwd_concat,
      0xffffffffu, NULL, SIM_BWD_NONE },
    { "Slice", 1, 1, 5, 1, 1, 0x1eu, SIM_OPF_VIEW, 4096u, infer_slice, fwd_slice, bwd_slice, 1u,
      NULL, SIM_BWD_NONE },
    { "Gather", 1, 2, 2, 1, 1, 0, 0, 4096u, infer_gather, fwd_gather, bwd_gather, 1u, NULL,
      SIM_BWD_IN(1) },
};

const int sim_ops_select_count = (int)(sizeof(sim_ops_select) / sizeof(sim_ops_select[0]));

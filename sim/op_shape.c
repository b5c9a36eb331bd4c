/*
 * op_shape.c — ops that move or select data without arithmetic, for any dtype: Reshape,
 * Flatten, Squeeze, Unsqueeze, Transpose, Concat, Slice, Gather, Shape, Constant.
 *
 * Shape operands (Reshape's shape, Slice's bounds, axes inputs) must be known at compile
 * time; the compiler folds Shape and everything computed from shapes, so PyTorch-style
 * Shape -> Gather -> Concat -> Reshape chains become constants. Gather checks its indices at
 * run time and fails with an error naming the bad index instead of reading out of bounds.
 * Does not: Expand, Tile, Pad, Split, ConstantOfShape, string tensors.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static size_t
bytes_of(const struct sim_tensor *t)
{
    return (size_t)t->numel * sim_dtype_size(t->dtype);
}

/* Output 0 has input 0's data in the same order (Reshape, Flatten, Squeeze, Unsqueeze). */
static int
fwd_copy_data(const struct sim_kern *k, struct sim_err *err)
{
    (void)err;
    if (bytes_of(&k->in[0]) > 0 && k->out[0].data != k->in[0].data)
        memcpy(k->out[0].data, k->in[0].data, bytes_of(&k->in[0]));
    return 0;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze --------------------------------------------- */

static int
infer_reshape(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t spec[SIM_MAX_RANK], allowzero = 0, known = 1;
    int n, infer_at = -1, rc;
    struct sim_shape o;
    char s1[128], s2[128];

    if (c->version < 5) {
        const int64_t *v;
        rc = sim_ia_ints(c, "shape", &v, &n);
        if (rc == 0 && (n < 0 || n > SIM_MAX_RANK))
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'shape' is required (at most "
                                  "%d dims)", SIM_MAX_RANK);
        for (int i = 0; rc == 0 && i < n; i++)
            spec[i] = v[i];
    } else if (c->n_in < 2 || c->in[1] == NULL) {
        return sim_infer_fail(c, IPUOF_E_INVAL, "input 1 (shape) is required");
    } else {
        rc = sim_in_const_ints(c, 1, "shape", spec, SIM_MAX_RANK, &n);
    }
    if (rc == 0)
        rc = sim_ia_int(c, "allowzero", 0, &allowzero);
    if (rc != 0)
        return rc;
    o.rank = n;
    for (int i = 0; i < n; i++) {
        int64_t d = spec[i];
        if (d == 0 && !allowzero) {
            if (i >= x->shape.rank)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "shape[%d] = 0 copies a dim the input "
                                      "%s does not have", i,
                                      sim_shape_fmt(&x->shape, s1, sizeof(s1)));
            d = x->shape.d[i];
        }
        if (d == -1) {
            if (infer_at >= 0)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "shape has more than one -1");
            infer_at = i;
            d = 1;
        } else if (d < 0) {
            return sim_infer_fail(c, IPUOF_E_SHAPE, "shape[%d] = %lld is invalid", i,
                                  (long long)d);
        }
        o.d[i] = d;
        if (!sim_mul_ok((uint64_t)known, (uint64_t)d, (uint64_t *)&known) ||
            known > SIM_MAX_ELEMS)
            return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "shape is too large");
    }
    if (infer_at >= 0) {
        if (known == 0 || x->numel % known != 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot reshape %s (%lld elements) with "
                                  "a -1 in %s", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                                  (long long)x->numel, sim_shape_fmt(&o, s2, sizeof(s2)));
        o.d[infer_at] = x->numel / known;
        known = x->numel;
    }
    if (known != x->numel)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot reshape %s (%lld elements) to %s "
                              "(%lld elements)", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              (long long)x->numel, sim_shape_fmt(&o, s2, sizeof(s2)),
                              (long long)known);
    return sim_set_out(c, 0, x->dtype, &o);
}

static int
infer_flatten(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t axis;
    struct sim_shape o;
    int rc = sim_ia_int(c, "axis", 1, &axis);

    if (rc != 0)
        return rc;
    if (axis < 0)
        axis += x->shape.rank;
    if (axis < 0 || axis > x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis is out of range for rank %d",
                              x->shape.rank);
    o.rank = 2;
    o.d[0] = sim_shape_span(&x->shape, 0, (int)axis);
    o.d[1] = sim_shape_span(&x->shape, (int)axis, x->shape.rank);
    return sim_set_out(c, 0, x->dtype, &o);
}

/* Reads axes from the attribute (opset < 13) or the optional input 1; *n = -1 if none. */
static int
axes_operand(struct sim_infer *c, int64_t *axes, int *n)
{
    if (c->version >= 13) {
        *n = -1;
        if (!sim_has_in(c, 1))
            return 0;
        return sim_in_const_ints(c, 1, "axes", axes, SIM_MAX_RANK, n);
    } else {
        const int64_t *v;
        int rc = sim_ia_ints(c, "axes", &v, n);
        if (rc != 0)
            return rc;
        if (*n > SIM_MAX_RANK)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "too many axes (%d)", *n);
        for (int i = 0; i < *n; i++)
            axes[i] = v[i];
        return 0;
    }
}

static int
infer_squeeze(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t axes[SIM_MAX_RANK];
    bool drop[SIM_MAX_RANK] = { false };
    struct sim_shape o;
    int n, rc = axes_operand(c, axes, &n);

    if (rc != 0)
        return rc;
    for (int i = 0; i < n; i++) {
        int ax;
        if (!sim_axis(axes[i], x->shape.rank, &ax))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                                  (long long)axes[i], x->shape.rank);
        if (x->shape.d[ax] != 1)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot squeeze dim %d of size %lld", ax,
                                  (long long)x->shape.d[ax]);
        drop[ax] = true;
    }
    o.rank = 0;
    for (int i = 0; i < x->shape.rank; i++)
        if (!(n < 0 ? x->shape.d[i] == 1 : drop[i]))
            o.d[o.rank++] = x->shape.d[i];
    return sim_set_out(c, 0, x->dtype, &o);
}

static int
infer_unsqueeze(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t axes[SIM_MAX_RANK];
    bool ins[SIM_MAX_RANK] = { false };
    struct sim_shape o;
    int n, r, rc = axes_operand(c, axes, &n);

    if (rc != 0)
        return rc;
    if (n < 0)
        return sim_infer_fail(c, IPUOF_E_INVAL, "axes are required");
    r = x->shape.rank + n;
    if (r > SIM_MAX_RANK)
        return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "the result would have rank %d, over the "
                              "limit of %d", r, SIM_MAX_RANK);
    for (int i = 0; i < n; i++) {
        int ax;
        if (!sim_axis(axes[i], r, &ax) || ins[ax])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d or "
                                  "repeated", (long long)axes[i], r);
        ins[ax] = true;
    }
    o.rank = r;
    for (int i = 0, j = 0; i < r; i++)
        o.d[i] = ins[i] ? 1 : x->shape.d[j++];
    return sim_set_out(c, 0, x->dtype, &o);
}

/* ---- Transpose ------------------------------------------------------------------------ */

struct transpose_params {
    int rank;
    int64_t odims[SIM_MAX_RANK];    /* output dims */
    int64_t istr[SIM_MAX_RANK];     /* input stride (elements) of each output dim */
};

static int
infer_transpose(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct transpose_params *p;
    const int64_t *perm;
    int np, r = x->shape.rank, rc = sim_ia_ints(c, "perm", &perm, &np);
    bool used[SIM_MAX_RANK] = { false };
    int64_t stride[SIM_MAX_RANK], acc = 1;
    struct sim_shape o;

    if (rc != 0)
        return rc;
    if (np >= 0 && np != r)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "perm has %d entries for rank %d", np, r);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    for (int i = r - 1; i >= 0; i--) {
        stride[i] = acc;
        acc *= x->shape.d[i];
    }
    p->rank = r;
    o.rank = r;
    for (int i = 0; i < r; i++) {
        int64_t src = np >= 0 ? perm[i] : r - 1 - i;
        if (src < 0 || src >= r || used[src])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "perm is not a permutation of 0..%d",
                                  r - 1);
        used[src] = true;
        o.d[i] = x->shape.d[src];
        p->odims[i] = o.d[i];
        p->istr[i] = stride[src];
    }
    return sim_set_out(c, 0, x->dtype, &o);
}

/* x: any shape; y: x with dims permuted */
static int
fwd_transpose(const struct sim_kern *k, struct sim_err *err)
{
    const struct transpose_params *p = k->params;
    size_t es = sim_dtype_size(k->in[0].dtype);
    const char *x = k->in[0].data;
    char *y = k->out[0].data;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off = 0, n = k->out[0].numel;
    int last = p->rank - 1;

    (void)err;
    if (n == 0)
        return 0;
    if (p->rank == 0) {
        memcpy(y, x, es);
        return 0;
    }
    for (int64_t o = 0; o < n; o += p->odims[last]) {
        int64_t s = p->istr[last];
        if (es == 4) {
            const float *xf = (const float *)x + off;
            float *yf = (float *)y + o;
            for (int64_t i = 0; i < p->odims[last]; i++)
                yf[i] = xf[i * s];
        } else {
            for (int64_t i = 0; i < p->odims[last]; i++)
                memcpy(y + (o + i) * (int64_t)es, x + (off + i * s) * (int64_t)es, es);
        }
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            off += p->istr[d];
            if (idx[d] < p->odims[d])
                break;
            off -= p->istr[d] * p->odims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

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
        int n;
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

/* x: any shape; y: the selected elements */
static int
fwd_slice(const struct sim_kern *k, struct sim_err *err)
{
    const struct slice_params *p = k->params;
    size_t es = sim_dtype_size(k->in[0].dtype);
    const char *x = k->in[0].data;
    char *y = k->out[0].data;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off = 0, n = k->out[0].numel;
    int last = p->rank - 1;

    (void)err;
    if (n == 0)
        return 0;
    if (p->rank == 0) {
        memcpy(y, x, es);
        return 0;
    }
    for (int d = 0; d < p->rank; d++)
        off += p->start[d] * p->istr[d];
    for (int64_t o = 0; o < n; o += p->len[last]) {
        int64_t s = p->step[last] * p->istr[last];
        if (s == 1)
            memcpy(y + o * (int64_t)es, x + off * (int64_t)es, (size_t)p->len[last] * es);
        else
            for (int64_t i = 0; i < p->len[last]; i++)
                memcpy(y + (o + i) * (int64_t)es, x + (off + i * s) * (int64_t)es, es);
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            off += p->step[d] * p->istr[d];
            if (idx[d] < p->len[d])
                break;
            off -= p->step[d] * p->istr[d] * p->len[d];
            idx[d] = 0;
        }
    }
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

/* ---- Shape and Constant --------------------------------------------------------------- */

struct shape_params {
    int start, end;
};

static int
infer_shape(struct sim_infer *c)
{
    struct shape_params *p;
    int64_t start, end, r = c->in[0]->shape.rank;
    struct sim_shape o;
    int rc = sim_ia_int(c, "start", 0, &start);

    if (rc == 0)
        rc = sim_ia_int(c, "end", r, &end);
    if (rc != 0)
        return rc;
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->start = (int)start;
    p->end = (int)(end > start ? end : start);
    o.rank = 1;
    o.d[0] = p->end - p->start;
    return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
}

/* x: any (only its shape is read); y: (end - start) int64 */
static int
fwd_shape(const struct sim_kern *k, struct sim_err *err)
{
    const struct shape_params *p = k->params;
    int64_t *y = k->out[0].data;

    (void)err;
    for (int i = p->start; i < p->end; i++)
        y[i - p->start] = k->in[0].shape.d[i];
    return 0;
}

struct constant_params {
    const void *data;               /* borrowed from the model's attribute, or NULL */
    size_t bytes;
    float f;                        /* value_float / value_int as the only element */
    int64_t i;
};

static int
infer_constant(struct sim_infer *c)
{
    struct constant_params *p = sim_params(c, sizeof(*p));
    const struct sim_attr *a;
    struct sim_shape o = { 0 };

    if (p == NULL)
        return IPUOF_E_NOMEM;
    if (c->mn->n_attr != 1)
        return sim_infer_fail(c, IPUOF_E_INVAL, "needs exactly one value attribute");
    a = &c->mn->attr[0];
    if (strcmp(a->name, "value") == 0 && a->type == SIM_ATTR_TENSOR) {
        p->data = a->t->data;
        p->bytes = a->t->bytes;
        return sim_set_out(c, 0, a->t->dtype, &a->t->shape);
    }
    if (strcmp(a->name, "value_float") == 0 && a->type == SIM_ATTR_FLOAT) {
        p->f = a->f;
        p->data = &p->f;
        p->bytes = sizeof(float);
        return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    }
    if (strcmp(a->name, "value_int") == 0 && a->type == SIM_ATTR_INT) {
        p->i = a->i;
        p->data = &p->i;
        p->bytes = sizeof(int64_t);
        return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
    }
    if (strcmp(a->name, "value_floats") == 0 && a->type == SIM_ATTR_FLOATS) {
        p->data = a->floats;
        p->bytes = a->n * sizeof(float);
        o.rank = 1;
        o.d[0] = (int64_t)a->n;
        return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    }
    if (strcmp(a->name, "value_ints") == 0 && a->type == SIM_ATTR_INTS) {
        p->data = a->ints;
        p->bytes = a->n * sizeof(int64_t);
        o.rank = 1;
        o.d[0] = (int64_t)a->n;
        return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
    }
    return sim_infer_unsupported(c, "Constant with attribute '%s' (value, value_float, "
                                 "value_floats, value_int and value_ints are supported)",
                                 a->name);
}

/* y: the attribute's value */
static int
fwd_constant(const struct sim_kern *k, struct sim_err *err)
{
    const struct constant_params *p = k->params;

    (void)err;
    if (p->data != NULL && p->bytes > 0)
        memcpy(k->out[0].data, p->data, p->bytes);
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/* Reshape, Flatten, Squeeze, Unsqueeze: the data keeps its order, dx += dy */
static int
bwd_copy_data(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
              struct sim_err *err)
{
    const float *g = dout[0].data;
    float *dx = din[0].data;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t i = 0; i < k->in[0].numel; i++)
        dx[i] += g[i];
    return 0;
}

/* dx[permuted index] += dy, walking dy in order as the forward walks y */
static int
bwd_transpose(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
              struct sim_err *err)
{
    const struct transpose_params *p = k->params;
    const float *g = dout[0].data;
    float *dx = din[0].data;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off = 0, n = k->out[0].numel;
    int last = p->rank - 1;

    (void)err;
    if (g == NULL || dx == NULL || n == 0)
        return 0;
    if (p->rank == 0) {
        dx[0] += g[0];
        return 0;
    }
    for (int64_t o = 0; o < n; o += p->odims[last]) {
        int64_t s = p->istr[last];
        for (int64_t i = 0; i < p->odims[last]; i++)
            dx[off + i * s] += g[o + i];
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            off += p->istr[d];
            if (idx[d] < p->odims[d])
                break;
            off -= p->istr[d] * p->odims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

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
    const float *g = dout[0].data;
    float *dx = din[0].data;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off = 0, n = k->out[0].numel;
    int last = p->rank - 1;

    (void)err;
    if (g == NULL || dx == NULL || n == 0)
        return 0;
    if (p->rank == 0) {
        dx[0] += g[0];
        return 0;
    }
    for (int d = 0; d < p->rank; d++)
        off += p->start[d] * p->istr[d];
    for (int64_t o = 0; o < n; o += p->len[last]) {
        int64_t s = p->step[last] * p->istr[last];
        for (int64_t i = 0; i < p->len[last]; i++)
            dx[off + i * s] += g[o + i];
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            off += p->step[d] * p->istr[d];
            if (idx[d] < p->len[d])
                break;
            off -= p->step[d] * p->istr[d] * p->len[d];
            idx[d] = 0;
        }
    }
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

const struct sim_op sim_ops_shape[] = {
    { "Reshape", 1, 1, 2, 1, 1, 1u << 1, 0, CODE_COPY, infer_reshape, fwd_copy_data,
      bwd_copy_data, 1u, NULL },
    { "Flatten", 1, 1, 1, 1, 1, 0, 0, CODE_COPY, infer_flatten, fwd_copy_data, bwd_copy_data,
      1u, NULL },
    { "Squeeze", 1, 1, 2, 1, 1, 1u << 1, 0, CODE_COPY, infer_squeeze, fwd_copy_data,
      bwd_copy_data, 1u, NULL },
    { "Unsqueeze", 1, 1, 2, 1, 1, 1u << 1, 0, CODE_COPY, infer_unsqueeze, fwd_copy_data,
      bwd_copy_data, 1u, NULL },
    { "Transpose", 1, 1, 1, 1, 1, 0, 0, 4096u, infer_transpose, fwd_transpose, bwd_transpose,
      1u, NULL },
    { "Concat", 1, 1, -1, 1, 1, 0, 0, CODE_COPY, infer_concat, fwd_concat, bwd_concat,
      0xffffffffu, NULL },
    { "Slice", 1, 1, 5, 1, 1, 0x1eu, 0, 4096u, infer_slice, fwd_slice, bwd_slice, 1u, NULL },
    { "Gather", 1, 2, 2, 1, 1, 0, 0, 4096u, infer_gather, fwd_gather, bwd_gather, 1u, NULL },
    { "Shape", 1, 1, 1, 1, 1, 0, SIM_OPF_SHAPE_ONLY, 512u, infer_shape, fwd_shape, NULL, 0u,
      NULL },
    { "Constant", 1, 0, 0, 1, 1, 0, 0, 512u, infer_constant, fwd_constant, NULL, 0u, NULL },
};

const int sim_ops_shape_count = (int)(sizeof(sim_ops_shape) / sizeof(sim_ops_shape[0]));

/*
 * op_split.c — Split (sizes from the 'split' attribute before opset 13, from a compile-time
 * input from opset 13, equal parts when absent), ScatterND and ScatterElements (and its
 * opset-9 name Scatter; reduction none, add or mul; indices checked at run time: one out
 * of range is an error naming it, never a write out of bounds), for any dtype, forward and
 * backward.
 *
 * Backward (float data): Split adds each output's gradient into its part of dx; ScatterND
 * and ScatterElements pass dy to the data where nothing was scattered (reduction none;
 * everywhere with add) and gather dy at the scattered places into d updates (PyTorch's
 * scatter and scatter_add backward).
 * Does not: the opset-18 num_outputs attribute, the max/min reductions, the gradient of a
 * reduction mul.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- Split ---------------------------------------------------------------------------- */

struct split_params {
    int64_t outer, inner, dim;      /* x viewed as (outer, dim, inner) */
    int n;
    int64_t size[];                 /* n part sizes along the axis */
};

static int
infer_split(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct split_params *p;
    const int64_t *attr = NULL;
    int64_t axis, total = 0, *sizes;
    int ax, n_attr = -1, n = c->n_out, rc;

    rc = sim_in_dtype(c, 0, sim_dt_any);
    if (rc == 0)
        rc = sim_ia_int(c, "axis", 0, &axis);
    if (rc != 0)
        return rc;
    if (!sim_axis(axis, x->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    p = sim_params(c, sizeof(*p) + (size_t)n * sizeof(int64_t));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    sizes = p->size;
    if (c->version >= 13) {
        if (sim_has_in(c, 1)) {
            const struct sim_tinfo *s = c->in[1];
            if (s->cdata == NULL || s->dtype != SIM_DTYPE_INT64 || s->shape.rank != 1)
                return sim_infer_fail(c, IPUOF_E_UNSUPPORTED, "input 1 (split) must be a 1-D "
                                      "int64 tensor known at compile time");
            if (s->numel != n)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "split has %lld sizes for %d outputs",
                                      (long long)s->numel, n);
            memcpy(sizes, s->cdata, (size_t)n * sizeof(int64_t));
            n_attr = n;
        }
    } else {
        if (c->n_in > 1)
            return sim_infer_fail(c, IPUOF_E_INVAL, "takes one input before opset 13");
        rc = sim_ia_ints(c, "split", &attr, &n_attr);
        if (rc != 0)
            return rc;
        if (n_attr >= 0 && n_attr != n)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "split has %d sizes for %d outputs",
                                  n_attr, n);
        for (int i = 0; i < n_attr; i++)
            sizes[i] = attr[i];
    }
    if (n_attr < 0) {
        if (x->shape.d[ax] % n != 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "dim %d (%lld) does not split into %d "
                                  "equal parts; give the sizes", ax,
                                  (long long)x->shape.d[ax], n);
        for (int i = 0; i < n; i++)
            sizes[i] = x->shape.d[ax] / n;
    }
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > x->shape.d[ax])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "split size %lld is out of range",
                                  (long long)sizes[i]);
        total += sizes[i];
    }
    if (total != x->shape.d[ax])
        return sim_infer_fail(c, IPUOF_E_SHAPE, "split sizes add up to %lld, not dim %d's "
                              "%lld", (long long)total, ax, (long long)x->shape.d[ax]);
    p->n = n;
    p->dim = x->shape.d[ax];
    p->outer = sim_shape_span(&x->shape, 0, ax);
    p->inner = sim_shape_span(&x->shape, ax + 1, x->shape.rank);
    for (int i = 0; i < n; i++) {
        struct sim_shape o = x->shape;
        o.d[ax] = sizes[i];
        if (c->mn->out[i] < 0)
            continue;
        rc = sim_set_out(c, i, x->dtype, &o);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* x: (outer, dim, inner); output i: (outer, size[i], inner) */
static int
fwd_split(const struct sim_kern *k, struct sim_err *err)
{
    const struct split_params *p = k->params;
    size_t es = sim_dtype_size(k->in[0].dtype);
    const char *x = k->in[0].data;

    (void)err;
    for (int64_t o = 0; o < p->outer; o++) {
        int64_t at = 0;
        for (int i = 0; i < p->n; i++) {
            size_t chunk = (size_t)(p->size[i] * p->inner) * es;
            if (k->out[i].data != NULL && chunk > 0)
                memcpy((char *)k->out[i].data + (size_t)o * chunk,
                       x + (size_t)((o * p->dim + at) * p->inner) * es, chunk);
            at += p->size[i];
        }
    }
    return 0;
}

/* dx's part i += dy_i */
static int
bwd_split(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct split_params *p = k->params;
    float *dx = din[0].data;

    (void)err;
    if (dx == NULL)
        return 0;
    for (int64_t o = 0; o < p->outer; o++) {
        int64_t at = 0;
        for (int i = 0; i < p->n; i++) {
            int64_t chunk = p->size[i] * p->inner;
            const float *g = dout[i].data;
            float *d = dx + (o * p->dim + at) * p->inner;
            for (int64_t j = 0; g != NULL && j < chunk; j++)
                d[j] += g[o * chunk + j];
            at += p->size[i];
        }
    }
    return 0;
}

/* ---- ScatterND ------------------------------------------------------------------------ */

enum { SC_NONE, SC_ADD, SC_MUL };

/* The reduction attribute red of ScatterND and ScatterElements into *out (SC_*), for data of
 * dtype: 0, or the failure recorded on c (an unknown name; add or mul on bool data). */
static int
scatter_reduction(struct sim_infer *c, const char *red, int dtype, int *out)
{
    if (strcmp(red, "none") == 0)
        *out = SC_NONE;
    else if (strcmp(red, "add") == 0)
        *out = SC_ADD;
    else if (strcmp(red, "mul") == 0)
        *out = SC_MUL;
    else
        return sim_infer_unsupported(c, "reduction '%s' (none, add and mul are supported)", red);
    if (*out != SC_NONE && dtype == SIM_DTYPE_BOOL)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "reduction '%s' on bool data", red);
    return 0;
}

struct scatter_params {
    int reduction;
    int q;                          /* index tuple length (last dim of indices) */
    int64_t tuples, slice;          /* tuple count, elements per scattered slice */
    int64_t dims[SIM_MAX_RANK];     /* data's first q dims */
    int64_t stride[SIM_MAX_RANK];   /* data element strides of those dims */
};

static int
infer_scatternd(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *ix = c->in[1], *u = c->in[2];
    struct scatter_params *p;
    const char *red;
    struct sim_shape want = { 0 };
    char s1[128], s2[128];
    int q, rc = sim_in_dtype(c, 0, sim_dt_any);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_index);
    if (rc == 0)
        rc = sim_ia_str(c, "reduction", "none", &red);
    if (rc != 0)
        return rc;
    if (u->dtype != x->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "updates (%s) and data (%s) differ in dtype",
                              sim_dtype_name(u->dtype), sim_dtype_name(x->dtype));
    if (ix->shape.rank < 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "indices must have rank >= 1");
    q = (int)ix->shape.d[ix->shape.rank - 1];
    if (q < 0 || q > x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "index tuples of %d values for data of rank %d",
                              q, x->shape.rank);
    for (int i = 0; i + 1 < ix->shape.rank; i++)
        want.d[want.rank++] = ix->shape.d[i];
    for (int i = q; i < x->shape.rank; i++)
        want.d[want.rank++] = x->shape.d[i];
    if (want.rank > SIM_MAX_RANK || !sim_shape_eq(&want, &u->shape))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "updates have shape %s; indices and data ask "
                              "for %s", sim_shape_fmt(&u->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&want, s2, sizeof(s2)));
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = scatter_reduction(c, red, x->dtype, &p->reduction);
    if (rc != 0)
        return rc;
    p->q = q;
    p->slice = sim_shape_span(&x->shape, q, x->shape.rank);
    p->tuples = sim_shape_span(&ix->shape, 0, ix->shape.rank - 1);
    for (int i = 0; i < q; i++) {
        p->dims[i] = x->shape.d[i];
        p->stride[i] = sim_shape_span(&x->shape, i + 1, x->shape.rank);
    }
    c->bwd_scratch_bytes = (size_t)x->numel;
    return sim_set_out(c, 0, x->dtype, &x->shape);
}

/* The data offset of index tuple t, or -1 with err set when an index is out of range. */
static int64_t
scatter_offset(const struct sim_kern *k, int64_t t, struct sim_err *err)
{
    const struct scatter_params *p = k->params;
    const struct sim_tensor *ix = &k->in[1];
    int64_t off = 0;

    for (int i = 0; i < p->q; i++) {
        int64_t v = sim_get_i64(ix->dtype, ix->data, t * p->q + i);
        if (v < -p->dims[i] || v >= p->dims[i]) {
            sim_err_set(err, IPUOF_E_INVAL, "%s: index %lld of tuple %lld is out of range "
                        "for dim %d of size %lld", k->label, (long long)v, (long long)t, i,
                        (long long)p->dims[i]);
            return -1;
        }
        off += (v < 0 ? v + p->dims[i] : v) * p->stride[i];
    }
    return off;
}

/* data: any shape; indices: (..., q); updates: indices' dims but the last + data's from q */
static int
fwd_scatternd(const struct sim_kern *k, struct sim_err *err)
{
    const struct scatter_params *p = k->params;
    const struct sim_tensor *x = &k->in[0], *u = &k->in[2];
    int dt = x->dtype;
    size_t es = sim_dtype_size(dt);
    char *y = k->out[0].data;

    if (y != x->data && x->numel > 0)
        memcpy(y, x->data, (size_t)x->numel * es);
    for (int64_t t = 0; t < p->tuples; t++) {
        int64_t off = scatter_offset(k, t, err), src = t * p->slice;
        if (off < 0)
            return err->code;
        if (p->reduction == SC_NONE) {
            memcpy(y + off * (int64_t)es, (const char *)u->data + src * (int64_t)es,
                   (size_t)p->slice * es);
            continue;
        }
        for (int64_t j = 0; j < p->slice; j++) {
            if (dt == SIM_DTYPE_FLOAT) {
                float *d = (float *)y + off + j, v = ((const float *)u->data)[src + j];
                *d = p->reduction == SC_ADD ? *d + v : *d * v;
            } else {
                uint64_t a = (uint64_t)sim_get_i64(dt, y, off + j);
                uint64_t b = (uint64_t)sim_get_i64(dt, u->data, src + j);
                sim_put_i64(dt, y, off + j, (int64_t)(p->reduction == SC_ADD ? a + b : a * b));
            }
        }
    }
    return 0;
}

/* d data += dy where nothing was scattered (everywhere with add); d updates += dy gathered */
static int
bwd_scatternd(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
              struct sim_err *err)
{
    const struct scatter_params *p = k->params;
    const float *g = dout[0].data;
    float *dx = din[0].data, *du = din[2].data;
    unsigned char *hit = k->scratch;
    int64_t n = k->in[0].numel;

    if (g == NULL)
        return 0;
    if (p->reduction == SC_MUL)
        return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: ScatterND with reduction mul has "
                           "no gradient rule", k->label);
    if (n > 0)
        memset(hit, 0, (size_t)n);
    for (int64_t t = 0; t < p->tuples; t++) {
        int64_t off = scatter_offset(k, t, err);
        if (off < 0)
            return err->code;
        for (int64_t j = 0; j < p->slice; j++) {
            if (du != NULL)
                du[t * p->slice + j] += g[off + j];
            hit[off + j] = 1;
        }
    }
    for (int64_t i = 0; dx != NULL && i < n; i++)
        if (p->reduction == SC_ADD || !hit[i])
            dx[i] += g[i];
    return 0;
}

/* ---- ScatterElements ------------------------------------------------------------------ */

/* data, indices and updates of rank r; indices and updates of one shape, no larger than
 * data's on any dim but the axis (PyTorch's scatter) */
struct scatter_el_params {
    int reduction;                  /* SC_NONE, SC_ADD or SC_MUL */
    int rank, axis;
    int64_t n;                      /* indices' element count */
    int64_t idims[SIM_MAX_RANK];    /* indices' dims */
    int64_t dstride[SIM_MAX_RANK];  /* data's element strides */
    int64_t axis_dim;               /* data's dim at the axis */
};

static int
infer_scatter_el(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *ix = c->in[1], *u = c->in[2];
    struct scatter_el_params *p;
    const char *red = "none";
    int64_t axis;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, sim_dt_any);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_index);
    if (rc == 0)
        rc = sim_ia_int(c, "axis", 0, &axis);
    if (rc == 0 && strcmp(c->mn->op_type, "ScatterElements") == 0)
        rc = sim_ia_str(c, "reduction", "none", &red);
    if (rc != 0)
        return rc;
    if (u->dtype != x->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "updates (%s) and data (%s) differ in dtype",
                              sim_dtype_name(u->dtype), sim_dtype_name(x->dtype));
    if (x->shape.rank < 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "data must have rank >= 1");
    if (axis < -x->shape.rank || axis >= x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_INVAL, "axis %lld is out of range for data of rank "
                              "%d", (long long)axis, x->shape.rank);
    if (ix->shape.rank != x->shape.rank || !sim_shape_eq(&ix->shape, &u->shape))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "indices %s and updates %s must have one "
                              "shape, of data's rank %d",
                              sim_shape_fmt(&ix->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&u->shape, s2, sizeof(s2)), x->shape.rank);
    axis = axis < 0 ? axis + x->shape.rank : axis;
    for (int i = 0; i < x->shape.rank; i++)
        if (i != axis && ix->shape.d[i] > x->shape.d[i])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "indices %s are larger than data %s on "
                                  "dim %d (only the axis, %lld, may be)",
                                  sim_shape_fmt(&ix->shape, s1, sizeof(s1)),
                                  sim_shape_fmt(&x->shape, s2, sizeof(s2)), i,
                                  (long long)axis);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = scatter_reduction(c, red, x->dtype, &p->reduction);
    if (rc != 0)
        return rc;
    p->rank = x->shape.rank;
    p->axis = (int)axis;
    p->n = ix->numel;
    p->axis_dim = x->shape.d[axis];
    for (int i = 0; i < p->rank; i++) {
        p->idims[i] = ix->shape.d[i];
        p->dstride[i] = sim_shape_span(&x->shape, i + 1, x->shape.rank);
    }
    c->bwd_scratch_bytes = (size_t)x->numel;
    return sim_set_out(c, 0, x->dtype, &x->shape);
}

/*
 * Calls visit(k, t, off, ctx) for every element t of indices (row-major) with off the data
 * element it addresses; 0, or an error naming the index when one is out of range.
 */
static int
scatter_el_walk(const struct sim_kern *k, struct sim_err *err,
                void (*visit)(const struct sim_kern *k, int64_t t, int64_t off, void *ctx),
                void *ctx)
{
    const struct scatter_el_params *p = k->params;
    const struct sim_tensor *ix = &k->in[1];
    int64_t pos[SIM_MAX_RANK] = { 0 }, base = 0;

    for (int64_t t = 0; t < p->n; t++) {
        int64_t v = sim_get_i64(ix->dtype, ix->data, t);
        if (v < -p->axis_dim || v >= p->axis_dim)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: index %lld at element %lld is out of "
                               "range for axis %d of size %lld (valid: %lld to %lld)",
                               k->label, (long long)v, (long long)t, p->axis,
                               (long long)p->axis_dim, (long long)-p->axis_dim,
                               (long long)p->axis_dim - 1);
        v = v < 0 ? v + p->axis_dim : v;
        visit(k, t, base + v * p->dstride[p->axis], ctx);
        /* the next element of indices: base is the data offset of pos without the axis */
        for (int d = p->rank - 1; d >= 0; d--) {
            if (++pos[d] < p->idims[d]) {
                if (d != p->axis)
                    base += p->dstride[d];
                break;
            }
            if (d != p->axis)
                base -= (pos[d] - 1) * p->dstride[d];
            pos[d] = 0;
        }
    }
    return 0;
}

static void
scatter_el_put(const struct sim_kern *k, int64_t t, int64_t off, void *ctx)
{
    const struct scatter_el_params *p = k->params;
    const struct sim_tensor *u = &k->in[2];
    int dt = u->dtype;
    char *y = ctx;

    if (p->reduction == SC_NONE) {
        size_t es = sim_dtype_size(dt);
        memcpy(y + off * (int64_t)es, (const char *)u->data + t * (int64_t)es, es);
    } else if (dt == SIM_DTYPE_FLOAT) {
        float *d = (float *)y + off, v = ((const float *)u->data)[t];
        *d = p->reduction == SC_ADD ? *d + v : *d * v;
    } else {
        uint64_t a = (uint64_t)sim_get_i64(dt, y, off);
        uint64_t b = (uint64_t)sim_get_i64(dt, u->data, t);
        sim_put_i64(dt, y, off, (int64_t)(p->reduction == SC_ADD ? a + b : a * b));
    }
}

/* data: any shape; indices, updates: data's rank, one shape; y: data's shape. Elements are
 * written in indices' row-major order: with reduction none a duplicate index keeps the
 * last update (ONNX leaves the order undefined; PyTorch's CPU kernel does this). */
static int
fwd_scatter_el(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_tensor *x = &k->in[0];
    char *y = k->out[0].data;

    if (y != x->data && x->numel > 0)
        memcpy(y, x->data, (size_t)x->numel * sim_dtype_size(x->dtype));
    return scatter_el_walk(k, err, scatter_el_put, y);
}

struct scatter_el_grad {
    const float *g;
    float *du;
    unsigned char *hit;
};

static void
scatter_el_gather(const struct sim_kern *k, int64_t t, int64_t off, void *ctx)
{
    struct scatter_el_grad *r = ctx;

    (void)k;
    if (r->du != NULL)
        r->du[t] += r->g[off];
    r->hit[off] = 1;
}

/* d data += dy where nothing was scattered (everywhere with add); d updates += dy gathered
 * at each update's place (PyTorch's scatter / scatter_add backward) */
static int
bwd_scatter_el(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
               struct sim_err *err)
{
    const struct scatter_el_params *p = k->params;
    struct scatter_el_grad r = { dout[0].data, din[2].data, k->scratch };
    float *dx = din[0].data;
    int64_t n = k->in[0].numel;
    int rc;

    if (r.g == NULL)
        return 0;
    if (p->reduction == SC_MUL)
        return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: ScatterElements with reduction mul "
                           "has no gradient rule", k->label);
    if (n > 0)
        memset(r.hit, 0, (size_t)n);
    rc = scatter_el_walk(k, err, scatter_el_gather, &r);
    if (rc != 0)
        return rc;
    for (int64_t i = 0; dx != NULL && i < n; i++)
        if (p->reduction == SC_ADD || !r.hit[i])
            dx[i] += r.g[i];
    return 0;
}

const struct sim_op sim_ops_split[] = {
    { "Split", 2, 1, 2, 1, 1 << 16, 1u << 1, 0, 3072u, infer_split, fwd_split, bwd_split, 1u,
      NULL, SIM_BWD_NONE },
    { "ScatterND", 11, 3, 3, 1, 1, 0, 0, 4096u, infer_scatternd, fwd_scatternd, bwd_scatternd,
      5u, NULL, SIM_BWD_ALL },
    { "ScatterElements", 11, 3, 3, 1, 1, 0, 0, 4096u, infer_scatter_el, fwd_scatter_el,
      bwd_scatter_el, 5u, NULL, SIM_BWD_ALL },
    { "Scatter", 9, 3, 3, 1, 1, 0, 0, 4096u, infer_scatter_el, fwd_scatter_el, bwd_scatter_el,
      5u, NULL, SIM_BWD_ALL },
    /* ai.graphcore::ScatterElements: opset 16's reduction attribute at any opset (the Python
     * package's symbolic for torch.scatter(..., reduce=) exports at opset 14) */
    { "ScatterElements", 1, 3, 3, 1, 1, 0, 0, 4096u, infer_scatter_el, fwd_scatter_el,
      bwd_scatter_el, 5u, "ai.graphcore", SIM_BWD_ALL },
};

const int sim_ops_split_count = (int)(sizeof(sim_ops_split) / sizeof(sim_ops_split[0]));

/*
 * op_scan.c — ops that run along one axis, forward and backward side by side:
 *   CumSum  (opset 11+: float, int32, int64; the axis a compile-time scalar input; the
 *            exclusive and reverse attributes). Float sums run in double. Backward: the
 *            cumulative sum of dy in the other direction, with the same exclusive;
 *   TopK    (opset 1's k attribute, opset 10+'s K input known at compile time, opset 11's
 *            largest and sorted; float and the integer dtypes): values and int64 indices
 *            along the axis, equal values in the order of their indices (ONNX's rule), NaN
 *            above every number (as torch.topk). Results are always sorted, which
 *            sorted = 0 allows. Backward: the values' gradient added at the indices.
 * Does not: an axis or K known only at run time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const int dt_cumsum[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };

struct axis_params {
    int dtype;
    int64_t outer, len, inner;      /* x viewed as (outer, len, inner), len along the axis */
    int64_t k;                      /* TopK: outputs hold (outer, k, inner) */
    bool exclusive, reverse;        /* CumSum */
    bool largest;                   /* TopK */
};

/* Views x as (outer, len, inner) around axis (negative counts from the end), normalized
 * into *ax. */
static int
axis_view(struct sim_infer *c, int64_t axis, struct axis_params *p, int *ax_out)
{
    const struct sim_tinfo *x = c->in[0];
    int ax;

    if (!sim_axis(axis, x->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_INVAL, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    p->dtype = x->dtype;
    p->outer = sim_shape_span(&x->shape, 0, ax);
    p->len = x->shape.d[ax];
    p->inner = sim_shape_span(&x->shape, ax + 1, x->shape.rank);
    *ax_out = ax;
    return 0;
}

static int
infer_cumsum(struct sim_infer *c)
{
    struct axis_params *p;
    int64_t axis, excl, rev;
    int n, rc = sim_in_dtype(c, 0, dt_cumsum);

    if (rc == 0)
        rc = sim_in_const_ints(c, 1, "axis", &axis, 1, &n);
    if (rc == 0)
        rc = sim_ia_int(c, "exclusive", 0, &excl);
    if (rc == 0)
        rc = sim_ia_int(c, "reverse", 0, &rev);
    if (rc != 0)
        return rc;
    if (n != 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis must hold one value, not %d", n);
    if ((excl != 0 && excl != 1) || (rev != 0 && rev != 1))
        return sim_infer_fail(c, IPUOF_E_INVAL, "attributes exclusive and reverse must be 0 "
                              "or 1 (got %lld and %lld)", (long long)excl, (long long)rev);
    if (c->in[0]->shape.rank == 0)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input must have rank 1 or more, not 0");
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = axis_view(c, axis, p, &n);
    if (rc != 0)
        return rc;
    p->exclusive = excl != 0;
    p->reverse = rev != 0;
    return sim_set_out(c, 0, p->dtype, &c->in[0]->shape);
}

/* y = cumsum of x (both (outer, len, inner)) along len as exclusive / reverse say */
static void
cumsum_f(const struct axis_params *p, const float *x, float *y, bool exclusive, bool reverse,
         bool add)
{
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->inner; i++) {
            double s = 0.0;
            for (int64_t t = 0; t < p->len; t++) {
                int64_t a = (o * p->len + (reverse ? p->len - 1 - t : t)) * p->inner + i;
                float v = x[a];
                if (!exclusive)
                    s += v;
                if (add)
                    y[a] += (float)s;
                else
                    y[a] = (float)s;
                if (exclusive)
                    s += v;
            }
        }
}

/* x, y: same shape */
static int
fwd_cumsum(const struct sim_kern *k, struct sim_err *err)
{
    const struct axis_params *p = k->params;

    (void)err;
    if (p->dtype == SIM_DTYPE_FLOAT) {
        cumsum_f(p, k->in[0].data, k->out[0].data, p->exclusive, p->reverse, false);
        return 0;
    }
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->inner; i++) {
            uint64_t s = 0;         /* wraps on overflow as the dtype would, without UB */
            for (int64_t t = 0; t < p->len; t++) {
                int64_t a = (o * p->len + (p->reverse ? p->len - 1 - t : t)) * p->inner + i;
                uint64_t v = (uint64_t)sim_get_i64(p->dtype, k->in[0].data, a);
                if (!p->exclusive)
                    s += v;
                sim_put_i64(p->dtype, k->out[0].data, a,
                            p->dtype == SIM_DTYPE_INT32 ? (int64_t)(int32_t)(uint32_t)s
                                                        : (int64_t)s);
                if (p->exclusive)
                    s += v;
            }
        }
    return 0;
}

/* dx += cumsum(dy) in the opposite direction, exclusive as the forward */
static int
bwd_cumsum(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct axis_params *p = k->params;

    (void)err;
    if (dout[0].data != NULL && din[0].data != NULL)
        cumsum_f(p, dout[0].data, din[0].data, p->exclusive, !p->reverse, true);
    return 0;
}

/* ---- TopK ------------------------------------------------------------------------------- */

struct topk_item {
    double f;                       /* float key */
    int64_t i;                      /* integer key */
    int64_t idx;                    /* position along the axis */
};

static int
infer_topk(struct sim_infer *c)
{
    struct axis_params *p;
    struct sim_shape o;
    int64_t axis, largest, sorted, kv;
    int n, ax, rc = sim_in_dtype(c, 0, sim_dt_numeric);

    if (rc == 0)
        rc = sim_ia_int(c, "axis", -1, &axis);
    if (rc == 0)
        rc = sim_ia_int(c, "largest", 1, &largest);
    if (rc == 0)
        rc = sim_ia_int(c, "sorted", 1, &sorted);
    if (rc != 0)
        return rc;
    if (c->version < 10) {
        if (sim_attr_find(c->mn, "k") == NULL)
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute k is required before opset 10");
        rc = sim_ia_int(c, "k", 0, &kv);
    } else if (!sim_has_in(c, 1)) {
        return sim_infer_fail(c, IPUOF_E_INVAL, "input K is required from opset 10");
    } else {
        rc = sim_in_const_ints(c, 1, "K", &kv, 1, &n);
        if (rc == 0 && n != 1)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "K must hold one value, not %d", n);
    }
    if (rc != 0)
        return rc;
    if ((largest != 0 && largest != 1) || (sorted != 0 && sorted != 1))
        return sim_infer_fail(c, IPUOF_E_INVAL, "attributes largest and sorted must be 0 or "
                              "1 (got %lld and %lld)", (long long)largest, (long long)sorted);
    if (c->in[0]->shape.rank == 0)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input must have rank 1 or more, not 0");
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = axis_view(c, axis, p, &ax);
    if (rc != 0)
        return rc;
    if (kv < 0 || kv > p->len)
        return sim_infer_fail(c, IPUOF_E_INVAL, "K is %lld but the axis has %lld elements; "
                              "K must be in [0, %lld]", (long long)kv, (long long)p->len,
                              (long long)p->len);
    p->k = kv;
    p->largest = largest != 0;
    o = c->in[0]->shape;
    o.d[ax] = kv;
    c->scratch_bytes = 2 * (size_t)p->len * sizeof(struct topk_item);
    rc = sim_set_out(c, 0, p->dtype, &o);
    return rc != 0 ? rc : sim_set_out(c, 1, SIM_DTYPE_INT64, &o);
}

/* Whether key a is above key b: NaN above every number, then by value. */
static inline bool
topk_above(bool is_float, const struct topk_item *a, const struct topk_item *b)
{
    if (!is_float)
        return a->i > b->i;
    if (isnan(a->f))
        return !isnan(b->f);
    return !isnan(b->f) && a->f > b->f;
}

/* Whether a comes before b in the result: the larger (smaller) key, then the lower index. */
static inline bool
topk_before(const struct axis_params *p, const struct topk_item *a, const struct topk_item *b)
{
    bool fl = p->dtype == SIM_DTYPE_FLOAT;

    if (topk_above(fl, a, b))
        return p->largest;
    if (topk_above(fl, b, a))
        return !p->largest;
    return a->idx < b->idx;
}

/* Stable bottom-up merge sort of v[0..n) with tmp[0..n) as room; returns the sorted run. */
static struct topk_item *
topk_sort(const struct axis_params *p, struct topk_item *v, struct topk_item *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                tmp[o++] = topk_before(p, &v[b], &v[a]) ? v[b++] : v[a++];
            while (a < mid)
                tmp[o++] = v[a++];
            while (b < hi)
                tmp[o++] = v[b++];
        }
        struct topk_item *t = v;
        v = tmp;
        tmp = t;
    }
    return v;
}

/* x: (outer, len, inner); values, indices: (outer, k, inner); scratch: 2 len items */
static int
fwd_topk(const struct sim_kern *k, struct sim_err *err)
{
    const struct axis_params *p = k->params;
    struct topk_item *v = k->scratch, *tmp, *s;
    int64_t *ind = k->out[1].data;

    (void)err;
    if (p->len == 0 || p->k == 0)
        return 0;   /* empty outputs; the scratch may be NULL (no NULL + 0) */
    tmp = v + p->len;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->inner; i++) {
            for (int64_t t = 0; t < p->len; t++) {
                int64_t a = (o * p->len + t) * p->inner + i;
                v[t].idx = t;
                if (p->dtype == SIM_DTYPE_FLOAT)
                    v[t].f = ((const float *)k->in[0].data)[a];
                else
                    v[t].i = sim_get_i64(p->dtype, k->in[0].data, a);
            }
            s = topk_sort(p, v, tmp, p->len);
            for (int64_t t = 0; t < p->k; t++) {
                int64_t a = (o * p->k + t) * p->inner + i;
                if (p->dtype == SIM_DTYPE_FLOAT)
                    ((float *)k->out[0].data)[a] = (float)s[t].f;
                else
                    sim_put_i64(p->dtype, k->out[0].data, a, s[t].i);
                if (ind != NULL)
                    ind[a] = s[t].idx;
            }
        }
    return 0;
}

/* dx (outer, len, inner) += dvalues (outer, k, inner) at the indices the forward chose */
static int
bwd_topk(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct axis_params *p = k->params;
    const float *g = dout[0].data;
    const int64_t *ind = k->out[1].data;
    float *dx = din[0].data;

    if (g == NULL || dx == NULL)
        return 0;
    if (ind == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: the indices output was not kept",
                           k->label);
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t t = 0; t < p->k; t++)
            for (int64_t i = 0; i < p->inner; i++) {
                int64_t a = (o * p->k + t) * p->inner + i;
                dx[(o * p->len + ind[a]) * p->inner + i] += g[a];
            }
    return 0;
}

#define CODE_SCAN 3072u

const struct sim_op sim_ops_scan[] = {
    { "CumSum", 11, 2, 2, 1, 1, 2u, 0, CODE_SCAN, infer_cumsum, fwd_cumsum, bwd_cumsum, 1u,
      NULL, SIM_BWD_ALL },
    { "TopK", 1, 1, 2, 2, 2, 2u, 0, CODE_SCAN, infer_topk, fwd_topk, bwd_topk, 1u, NULL,
      SIM_BWD_ALL },
};

const int sim_ops_scan_count = (int)(sizeof(sim_ops_scan) / sizeof(sim_ops_scan[0]));

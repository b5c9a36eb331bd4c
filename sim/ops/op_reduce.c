/*
 * op_reduce.c — reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL1, ReduceL2,
 * ReduceSumSquare, ReduceLogSumExp, ReduceProd over any set of axes (attribute before
 * opset 13 for ReduceSum / always for the others up to opset 17; a compile-time input for
 * ReduceSum from opset 13), keepdims, noop_with_empty_axes; and ArgMax / ArgMin over one
 * axis (keepdims, select_last_index), int64 results.
 *
 * The input's dims are coalesced into alternating runs of kept and reduced dims, and the
 * step walks the input once, accumulating in double in the scratch buffer (LogSumExp keeps a
 * running maximum and a rescaled sum, so it cannot overflow). The backward walks the input
 * the same way, adding to every element the gradient of the output it was reduced into
 * times the element's partial derivative: 1 (sum), 1/count (mean), sign(x) (L1), 2x (sum
 * of squares), x/y (L2), e^(x-y) (log-sum-exp), the product of the other elements (prod:
 * counted with the zeros apart, so a zero element gets the product of the rest), and for
 * max / min 1/count for each of the count elements equal to the output, else 0 (ties share
 * the gradient equally, as torch.amax / amin and the full x.max() do; a NaN output's
 * gradient goes to the NaNs). torch.max(x, dim) exports as ReduceMax + ArgMax and gives a
 * tied gradient to one index only: with ties its gradient differs (the sum is the same).
 * Does not: ReduceLogSum, gradients of ArgMax / ArgMin.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "ops.h"
#include "pool.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_L1, R_L2, R_SSQ, R_LSE, R_PROD };

struct reduce_params {
    int kind;
    bool noop;                      /* identity (empty axes with noop_with_empty_axes) */
    int nd;                         /* coalesced dims */
    int64_t dims[SIM_MAX_RANK];
    int64_t so[SIM_MAX_RANK];       /* output strides, 0 on reduced dims */
    int64_t out_n, count;           /* output elements, elements reduced into each */
};

static int
infer_reduce(struct sim_infer *c, int kind)
{
    const struct sim_tinfo *x = c->in[0];
    struct reduce_params *p;
    int64_t keepdims, noop_empty, axes[SIM_MAX_RANK];
    bool red[SIM_MAX_RANK] = { false };
    int n_axes = -1, rc;
    struct sim_shape o;
    int64_t acc = 1, so[SIM_MAX_RANK];
    static const int types[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };

    rc = sim_in_dtype(c, 0, types);
    if (rc == 0)
        rc = sim_ia_int(c, "keepdims", 1, &keepdims);
    if (rc == 0)
        rc = sim_ia_int(c, "noop_with_empty_axes", 0, &noop_empty);
    if (rc != 0)
        return rc;
    if (kind == R_SUM && c->version >= 13) {
        if (sim_has_in(c, 1)) {
            rc = sim_in_const_ints(c, 1, "axes", axes, SIM_MAX_RANK, &n_axes);
            if (rc != 0)
                return rc;
        }
    } else {
        const int64_t *v;
        int n;
        if (c->n_in > 1)
            return sim_infer_fail(c, IPUOF_E_INVAL, "takes one input in opset %d", c->version);
        rc = sim_ia_ints(c, "axes", &v, &n);
        if (rc != 0)
            return rc;
        if (n > SIM_MAX_RANK)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "%d axes for rank %d", n, x->shape.rank);
        for (int i = 0; i < n; i++)
            axes[i] = v[i];
        n_axes = n;
    }
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->kind = kind;
    if (n_axes <= 0) {
        if (noop_empty && n_axes <= 0) {
            p->noop = true;
            return sim_set_out(c, 0, x->dtype, &x->shape);
        }
        for (int i = 0; i < x->shape.rank; i++)
            red[i] = true;
    }
    for (int i = 0; i < n_axes; i++) {
        int ax;
        if (!sim_axis(axes[i], x->shape.rank, &ax))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                                  (long long)axes[i], x->shape.rank);
        red[ax] = true;
    }
    o.rank = 0;
    p->count = 1;
    for (int i = 0; i < x->shape.rank; i++) {
        if (red[i])
            p->count *= x->shape.d[i];
        if (!red[i] || keepdims)
            o.d[o.rank++] = red[i] ? 1 : x->shape.d[i];
    }
    if ((kind == R_MAX || kind == R_MIN) && p->count == 0 && sim_shape_count(&x->shape) == 0 &&
        x->shape.rank > 0)
        return sim_infer_unsupported(c, "max/min over an empty set");
    for (int i = x->shape.rank - 1; i >= 0; i--) {
        so[i] = red[i] ? 0 : acc;
        if (!red[i])
            acc *= x->shape.d[i];
    }
    p->nd = 0;
    for (int i = 0; i < x->shape.rank; i++) {
        int64_t d = x->shape.d[i];
        if (d == 1)
            continue;
        if (p->nd > 0 && so[i] == p->so[p->nd - 1] * d &&
            (so[i] == 0) == (p->so[p->nd - 1] == 0)) {
            p->dims[p->nd - 1] *= d;
            p->so[p->nd - 1] = so[i];
            continue;
        }
        p->dims[p->nd] = d;
        p->so[p->nd] = so[i];
        p->nd++;
    }
    if (p->nd == 0) {
        p->dims[0] = 1;
        p->so[0] = 0;
        p->nd = 1;
    }
    p->out_n = sim_shape_count(&o);
    c->scratch_bytes = (size_t)p->out_n * 2 * sizeof(double);
    if (kind == R_PROD || kind == R_MAX || kind == R_MIN)
        c->bwd_scratch_bytes = (size_t)p->out_n * 2 * sizeof(double);
    return sim_set_out(c, 0, x->dtype, &o);
}

static int infer_rsum(struct sim_infer *c) { return infer_reduce(c, R_SUM); }
static int infer_rmean(struct sim_infer *c) { return infer_reduce(c, R_MEAN); }
static int infer_rmax(struct sim_infer *c) { return infer_reduce(c, R_MAX); }
static int infer_rmin(struct sim_infer *c) { return infer_reduce(c, R_MIN); }
static int infer_rl1(struct sim_infer *c) { return infer_reduce(c, R_L1); }
static int infer_rl2(struct sim_infer *c) { return infer_reduce(c, R_L2); }
static int infer_rssq(struct sim_infer *c) { return infer_reduce(c, R_SSQ); }
static int infer_rlse(struct sim_infer *c) { return infer_reduce(c, R_LSE); }
static int infer_rprod(struct sim_infer *c) { return infer_reduce(c, R_PROD); }

/* What the pieces of a row reduction share. */
struct rows_run {
    const float *x;
    float *y;
    int64_t n;                      /* row length */
    double scale;                   /* 1, or 1 / count for a mean */
};

/* y[r] = scale x sum of row r of x, for rows [lo, hi); in double, four partial sums. */
SIM_HOT_FN(rows_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct rows_run *r = ctx;
    int64_t n = r->n;

    for (int64_t row = lo; row < hi; row++) {
        const float *x = r->x + row * n;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            s0 += x[i];
            s1 += x[i + 1];
            s2 += x[i + 2];
            s3 += x[i + 3];
        }
        for (; i < n; i++)
            s0 += x[i];
        r->y[row] = (float)(((s0 + s1) + (s2 + s3)) * r->scale);
    }
}

/* x: any shape; y: x with the reduced dims removed or kept as 1 */
static int
fwd_reduce(const struct sim_kern *k, struct sim_err *err)
{
    const struct reduce_params *p = k->params;
    const struct sim_tensor *x = &k->in[0];
    double *acc = k->scratch, *acc2 = acc != NULL ? acc + p->out_n : NULL; /* NULL: no output */
    int64_t idx[SIM_MAX_RANK] = { 0 }, oo = 0, n, inner_so, total = x->numel;
    bool isf = x->dtype == SIM_DTYPE_FLOAT;
    double init = p->kind == R_MAX || p->kind == R_LSE ? -INFINITY
                  : p->kind == R_MIN ? INFINITY : p->kind == R_PROD ? 1.0 : 0.0;

    (void)err;
    if (p->noop) {
        if (total > 0)
            memcpy(k->out[0].data, x->data, (size_t)total * sim_dtype_size(x->dtype));
        return 0;
    }
    n = p->dims[p->nd - 1];
    inner_so = p->so[p->nd - 1];
    if (isf && (p->kind == R_SUM || p->kind == R_MEAN) && p->count > 0) {
        /* every reduced dim trailing: sums of contiguous rows (LayerNorm's mean) */
        int64_t row = 1;
        int d = p->nd - 1;
        for (; d >= 0 && p->so[d] == 0; d--)
            row *= p->dims[d];
        if (row == p->count && p->out_n * row == total) {
            struct rows_run r = { x->data, k->out[0].data, row,
                                  p->kind == R_MEAN ? 1.0 / (double)p->count : 1.0 };
            sim_pool_for(p->out_n, SIM_POOL_MAP_GRAIN / row + 1, rows_piece, &r);
            return 0;
        }
    }
    for (int64_t i = 0; i < p->out_n; i++) {
        acc[i] = init;
        acc2[i] = 0.0;
    }
    for (int64_t base = 0; base < total; base += n) {
        for (int64_t i = 0; i < n; i++) {
            double v = isf ? ((const float *)x->data)[base + i]
                           : sim_get_f64(x->dtype, x->data, base + i);
            double *a = &acc[oo + i * inner_so];
            switch (p->kind) {
            case R_MAX: if (v > *a || v != v) *a = v; break;
            case R_MIN: if (v < *a || v != v) *a = v; break;
            case R_L1: *a += fabs(v); break;
            case R_L2:
            case R_SSQ: *a += v * v; break;
            case R_PROD: *a *= v; break;
            case R_LSE: {
                double *s = &acc2[oo + i * inner_so];
                if (v > *a) {
                    *s = *s * exp(*a - v) + 1.0;
                    *a = v;
                } else {
                    *s += exp(v - *a);
                }
                break;
            }
            default: *a += v; break;
            }
        }
        for (int d = p->nd - 2; d >= 0; d--) {
            idx[d]++;
            oo += p->so[d];
            if (idx[d] < p->dims[d])
                break;
            oo -= p->so[d] * p->dims[d];
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < p->out_n; i++) {
        double v = acc[i];
        if (p->kind == R_MEAN)
            v = p->count > 0 ? v / (double)p->count : NAN;
        else if (p->kind == R_L2)
            v = sqrt(v);
        else if (p->kind == R_LSE)
            v = acc2[i] > 0.0 ? v + log(acc2[i]) : -INFINITY;
        sim_put_f64(x->dtype, k->out[0].data, i, v);
    }
    return 0;
}

/* Whether x is one of the elements ReduceMax / ReduceMin picked as y: equal, or a NaN
 * when y is NaN. */
static inline bool
is_pick(float x, float y)
{
    return x == y || (y != y && x != x);
}

/* ReduceProd: the product of the non-zero elements reduced into each output (prod[o]) and
 * their count of zeros (zeros[o]). ReduceMax / ReduceMin (y the output): the count of
 * elements equal to their output (prod[o]; a NaN output counts the NaNs). */
static void
prod_parts(const struct reduce_params *p, const float *x, const float *y, int64_t total,
           double *prod, double *zeros)
{
    bool ties = p->kind == R_MAX || p->kind == R_MIN;

    int64_t idx[SIM_MAX_RANK] = { 0 }, oo = 0, n = p->dims[p->nd - 1];
    int64_t inner_so = p->so[p->nd - 1];

    for (int64_t i = 0; i < p->out_n; i++) {
        prod[i] = ties ? 0.0 : 1.0;
        zeros[i] = 0.0;
    }
    for (int64_t base = 0; base < total; base += n) {
        for (int64_t i = 0; i < n; i++) {
            int64_t o = oo + i * inner_so;
            if (ties)
                prod[o] += is_pick(x[base + i], y[o]);
            else if (x[base + i] == 0.0f)
                zeros[o] += 1.0;
            else
                prod[o] *= x[base + i];
        }
        for (int d = p->nd - 2; d >= 0; d--) {
            idx[d]++;
            oo += p->so[d];
            if (idx[d] < p->dims[d])
                break;
            oo -= p->so[d] * p->dims[d];
            idx[d] = 0;
        }
    }
}

/* d y[o] / d x for one element x reduced into output o. */
static float
reduce_partial(const struct reduce_params *p, float x, float y, int64_t o, const double *prod,
               const double *zeros)
{
    switch (p->kind) {
    case R_MEAN: return p->count > 0 ? 1.0f / (float)p->count : 0.0f;
    case R_L1: return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f;
    case R_SSQ: return 2.0f * x;
    case R_L2: return y != 0.0f ? x / y : 0.0f;
    case R_LSE: return expf(x - y);
    case R_PROD:
        if (zeros[o] == 0.0)
            return (float)(prod[o] / x);
        return zeros[o] == 1.0 && x == 0.0f ? (float)prod[o] : 0.0f;
    case R_MAX:
    case R_MIN: return is_pick(x, y) ? (float)(1.0 / prod[o]) : 0.0f;
    default: return 1.0f;
    }
}

/* x, dx: any shape; dy, y: the reduced shape (float) */
static int
bwd_reduce(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct reduce_params *p = k->params;
    const float *g = dout[0].data, *x = k->in[0].data, *y = k->out[0].data;
    float *dx = din[0].data;
    bool parts = p->kind == R_PROD || p->kind == R_MAX || p->kind == R_MIN;
    double *prod = parts ? k->scratch : NULL;
    double *zeros = prod != NULL ? prod + p->out_n : NULL;  /* no scratch: out_n is 0 */
    int64_t idx[SIM_MAX_RANK] = { 0 }, oo = 0, n, inner_so, total = k->in[0].numel;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    if (p->noop) {
        for (int64_t i = 0; i < total; i++)
            dx[i] += g[i];
        return 0;
    }
    if (parts)
        prod_parts(p, x, y, total, prod, zeros);
    n = p->dims[p->nd - 1];
    inner_so = p->so[p->nd - 1];
    for (int64_t base = 0; base < total; base += n) {
        if (p->kind == R_SUM && inner_so == 0) {
            float gv = g[oo];
            for (int64_t i = 0; i < n; i++)
                dx[base + i] += gv;
        } else {
            bool flat = p->kind == R_SUM || p->kind == R_MEAN;     /* reads neither x nor y */
            for (int64_t i = 0; i < n; i++) {
                int64_t o = oo + i * inner_so;
                dx[base + i] += g[o] * (flat ? reduce_partial(p, 0.0f, 0.0f, o, prod, zeros)
                                             : reduce_partial(p, x[base + i], y[o], o, prod,
                                                              zeros));
            }
        }
        for (int d = p->nd - 2; d >= 0; d--) {
            idx[d]++;
            oo += p->so[d];
            if (idx[d] < p->dims[d])
                break;
            oo -= p->so[d] * p->dims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------ */

struct arg_params {
    bool max, last;
    int64_t outer, n, inner;        /* x viewed as (outer, n, inner) */
};

static int
infer_arg(struct sim_infer *c, bool max)
{
    const struct sim_tinfo *x = c->in[0];
    struct arg_params *p;
    int64_t axis, keepdims, last;
    struct sim_shape o;
    int ax, rc = sim_in_dtype(c, 0, sim_dt_numeric);

    if (rc == 0)
        rc = sim_ia_int(c, "axis", 0, &axis);
    if (rc == 0)
        rc = sim_ia_int(c, "keepdims", 1, &keepdims);
    if (rc == 0)
        rc = sim_ia_int(c, "select_last_index", 0, &last);
    if (rc != 0)
        return rc;
    if (!sim_axis(axis, x->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    if (x->shape.d[ax] == 0)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %d has no elements to choose from", ax);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->max = max;
    p->last = last != 0;
    p->outer = sim_shape_span(&x->shape, 0, ax);
    p->n = x->shape.d[ax];
    p->inner = sim_shape_span(&x->shape, ax + 1, x->shape.rank);
    o = x->shape;
    if (keepdims) {
        o.d[ax] = 1;
    } else {
        for (int i = ax; i + 1 < o.rank; i++)
            o.d[i] = o.d[i + 1];
        o.rank--;
    }
    return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
}

static int infer_argmax(struct sim_infer *c) { return infer_arg(c, true); }
static int infer_argmin(struct sim_infer *c) { return infer_arg(c, false); }

/* x: (outer, n, inner); y: (outer, inner) int64, the first (or last) extreme's index */
static int
fwd_arg(const struct sim_kern *k, struct sim_err *err)
{
    const struct arg_params *p = k->params;
    const struct sim_tensor *x = &k->in[0];
    int64_t *y = k->out[0].data;

    (void)err;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->inner; i++) {
            int64_t base = o * p->n * p->inner + i, best = 0;
            double bv = sim_get_f64(x->dtype, x->data, base);
            for (int64_t j = 1; j < p->n; j++) {
                double v = sim_get_f64(x->dtype, x->data, base + j * p->inner);
                bool better = p->max ? v > bv : v < bv;
                if (better || (p->last && v == bv)) {
                    bv = v;
                    best = j;
                }
            }
            y[o * p->inner + i] = best;
        }
    return 0;
}

#define CODE_RED 6144u

const struct sim_op sim_ops_reduce[] = {
    { "ReduceSum", 1, 1, 2, 1, 1, 1u << 1, 0, CODE_RED, infer_rsum, fwd_reduce, bwd_reduce,
      1u, NULL, SIM_BWD_NONE },
    { "ReduceMean", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rmean, fwd_reduce, bwd_reduce, 1u,
      NULL, SIM_BWD_NONE },
    { "ReduceMax", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rmax, fwd_reduce, bwd_reduce, 1u,
      NULL, SIM_BWD_ALL },
    { "ReduceMin", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rmin, fwd_reduce, bwd_reduce, 1u,
      NULL, SIM_BWD_ALL },
    { "ReduceL1", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rl1, fwd_reduce, bwd_reduce, 1u, NULL,
      SIM_BWD_ALL },
    { "ReduceL2", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rl2, fwd_reduce, bwd_reduce, 1u, NULL,
      SIM_BWD_ALL },
    { "ReduceSumSquare", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rssq, fwd_reduce, bwd_reduce,
      1u, NULL, SIM_BWD_ALL },
    { "ReduceLogSumExp", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rlse, fwd_reduce, bwd_reduce,
      1u, NULL, SIM_BWD_ALL },
    { "ReduceProd", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_rprod, fwd_reduce, bwd_reduce, 1u,
      NULL, SIM_BWD_ALL },
    { "ArgMax", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_argmax, fwd_arg, NULL, 0u, NULL },
    { "ArgMin", 1, 1, 1, 1, 1, 0, 0, CODE_RED, infer_argmin, fwd_arg, NULL, 0u, NULL },
};

const int sim_ops_reduce_count = (int)(sizeof(sim_ops_reduce) / sizeof(sim_ops_reduce[0]));

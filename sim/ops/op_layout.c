/*
 * op_layout.c — ops that move elements without arithmetic, forward and backward side by
 * side, for every dtype (the backward, float only, adds each output gradient to the input
 * element it came from):
 *   Tile          (opset 6+: repeats a compile-time int64 input, one count >= 0 per dim;
 *                  Tensor.repeat exports Expand then Tile);
 *   DepthToSpace  (opset 1+, modes DCR (default) and CRD as of opset 11; PixelShuffle
 *                  exports CRD) and SpaceToDepth (its inverse in DCR order): 4-D (N, C, H, W)
 *                  with blocksize >= 1;
 *   Trilu         (opset 14: the upper (attribute upper = 1, default) or lower triangle of
 *                  the last two dims from diagonal k, an optional compile-time int64 scalar;
 *                  torch.triu / tril). The rest is zero, and so is its gradient.
 * Does not: Tile with repeats known only at run time (a static-shape compiler needs them).
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- Tile ------------------------------------------------------------------------------- */

struct tile_params {
    int rank;
    size_t es;
    int64_t in[SIM_MAX_RANK], out[SIM_MAX_RANK], stride[SIM_MAX_RANK]; /* stride: of x */
};

static int
infer_tile(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t rep[SIM_MAX_RANK];
    struct tile_params *p;
    struct sim_shape o = x->shape;
    int n, rc = sim_in_dtype(c, 0, sim_dt_any);

    if (rc == 0)
        rc = sim_in_const_ints(c, 1, "repeats", rep, SIM_MAX_RANK, &n);
    if (rc != 0)
        return rc;
    if (n != x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "repeats has %d values but the input has "
                              "rank %d; give one count per dim", n, x->shape.rank);
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0)
            return sim_infer_fail(c, IPUOF_E_INVAL, "repeats[%d] is %lld; each count must be "
                                  ">= 0", i, (long long)rep[i]);
        if (x->shape.d[i] > 0 && rep[i] > SIM_MAX_ELEMS / x->shape.d[i])
            return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "repeats[%d] = %lld makes dim %d "
                                  "longer than %lld elements", i, (long long)rep[i], i,
                                  (long long)SIM_MAX_ELEMS);
        o.d[i] = x->shape.d[i] * rep[i];    /* <= SIM_MAX_ELEMS: no overflow */
    }
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->rank = x->shape.rank;
    p->es = sim_dtype_size(x->dtype);
    for (int i = p->rank - 1; i >= 0; i--) {
        p->in[i] = x->shape.d[i];
        p->out[i] = o.d[i];
        p->stride[i] = i == p->rank - 1 ? 1 : p->stride[i + 1] * p->in[i + 1];
    }
    return sim_set_out(c, 0, x->dtype, &o);
}

/*
 * Walks y in rows of its last dim: calls fn(ctx, y_offset, x_offset) for every copy of a
 * row of x's last dim (x->d[last] elements) that y holds. A scalar is one copy.
 */
static void
tile_walk(const struct tile_params *p, int64_t out_numel,
          void (*fn)(void *ctx, int64_t yo, int64_t xo, int64_t len), void *ctx)
{
    int64_t idx[SIM_MAX_RANK] = { 0 }, last, rows;

    if (out_numel == 0)
        return;
    if (p->rank == 0) {
        fn(ctx, 0, 0, 1);
        return;
    }
    last = p->in[p->rank - 1];
    rows = out_numel / p->out[p->rank - 1];
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = 0;
        for (int k = 0; k < p->rank - 1; k++)
            xo += (idx[k] % p->in[k]) * p->stride[k];
        for (int64_t rep = 0; rep * last < p->out[p->rank - 1]; rep++)
            fn(ctx, r * p->out[p->rank - 1] + rep * last, xo, last);
        for (int k = p->rank - 2; k >= 0; k--) {
            if (++idx[k] < p->out[k])
                break;
            idx[k] = 0;
        }
    }
}

struct tile_run {
    const char *x;
    char *y;
    const float *g;
    float *dx;
    size_t es;
};

static void
tile_copy(void *ctx, int64_t yo, int64_t xo, int64_t len)
{
    struct tile_run *t = ctx;

    memcpy(t->y + (size_t)yo * t->es, t->x + (size_t)xo * t->es, (size_t)len * t->es);
}

static void
tile_add(void *ctx, int64_t yo, int64_t xo, int64_t len)
{
    struct tile_run *t = ctx;

    for (int64_t i = 0; i < len; i++)
        t->dx[xo + i] += t->g[yo + i];
}

/* x: any shape; y: x repeated along every dim */
static int
fwd_tile(const struct sim_kern *k, struct sim_err *err)
{
    const struct tile_params *p = k->params;
    struct tile_run t = { k->in[0].data, k->out[0].data, NULL, NULL, p->es };

    (void)err;
    tile_walk(p, k->out[0].numel, tile_copy, &t);
    return 0;
}

/* dx (x's shape) += the sum of dy over every copy of each element */
static int
bwd_tile(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct tile_params *p = k->params;
    struct tile_run t = { NULL, NULL, dout[0].data, din[0].data, sizeof(float) };

    (void)err;
    if (t.g != NULL && t.dx != NULL)
        tile_walk(p, k->out[0].numel, tile_add, &t);
    return 0;
}

/* ---- DepthToSpace, SpaceToDepth --------------------------------------------------------- */

enum { D2S_DCR, D2S_CRD, S2D };

struct d2s_params {
    int mode;
    int64_t n, c, h, w, b;          /* of the output */
    size_t es;
};

static int
infer_d2s_common(struct sim_infer *c, bool to_space)
{
    const struct sim_tinfo *x = c->in[0];
    struct d2s_params *p;
    struct sim_shape o = x->shape;
    const char *mode;
    int64_t b;
    char s[128];
    int rc = sim_in_dtype(c, 0, sim_dt_any);

    if (rc == 0)
        rc = sim_ia_int(c, "blocksize", 0, &b);
    if (rc == 0)
        rc = sim_ia_str(c, "mode", "DCR", &mode);
    if (rc != 0)
        return rc;
    if (sim_attr_find(c->mn, "blocksize") == NULL)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute blocksize is required");
    if (b < 1 || b > (1 << 16))
        return sim_infer_fail(c, IPUOF_E_INVAL, "blocksize is %lld; it must be in [1, 65536]",
                              (long long)b);
    if (x->shape.rank != 4)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s must be 4-D (N, C, H, W)",
                              sim_shape_fmt(&x->shape, s, sizeof(s)));
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->b = b;
    p->es = sim_dtype_size(x->dtype);
    if (!to_space) {
        p->mode = S2D;
        if (x->shape.d[2] % b != 0 || x->shape.d[3] % b != 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "H and W of input %s must be multiples "
                                  "of blocksize %lld", sim_shape_fmt(&x->shape, s, sizeof(s)),
                                  (long long)b);
        o.d[1] = x->shape.d[1] * b * b;
        o.d[2] = x->shape.d[2] / b;
        o.d[3] = x->shape.d[3] / b;
    } else {
        if (strcmp(mode, "DCR") == 0)
            p->mode = D2S_DCR;
        else if (strcmp(mode, "CRD") == 0 && c->version >= 11)
            p->mode = D2S_CRD;
        else if (strcmp(mode, "CRD") == 0)
            return sim_infer_fail(c, IPUOF_E_INVAL, "mode CRD needs opset 11 or later (this "
                                  "model's opset is %d, which has DCR only)", c->version);
        else
            return sim_infer_fail(c, IPUOF_E_INVAL, "mode '%s' is not one of DCR, CRD", mode);
        if (x->shape.d[1] % (b * b) != 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "C of input %s must be a multiple of "
                                  "blocksize^2 = %lld", sim_shape_fmt(&x->shape, s, sizeof(s)),
                                  (long long)(b * b));
        o.d[1] = x->shape.d[1] / (b * b);
        o.d[2] = x->shape.d[2] * b;
        o.d[3] = x->shape.d[3] * b;
    }
    p->n = o.d[0];
    p->c = o.d[1];
    p->h = o.d[2];
    p->w = o.d[3];
    return sim_set_out(c, 0, x->dtype, &o);
}

static int infer_d2s(struct sim_infer *c) { return infer_d2s_common(c, true); }
static int infer_s2d(struct sim_infer *c) { return infer_d2s_common(c, false); }

/* The offset in x of output element (n, co, ho, wo). */
static inline int64_t
d2s_src(const struct d2s_params *p, int64_t n, int64_t co, int64_t ho, int64_t wo)
{
    int64_t b = p->b, ci, hi, wi, cin;

    if (p->mode == S2D) {       /* x is (n, c / b^2, h b, w b) */
        int64_t cx = p->c / (b * b), ij = co / cx;
        cin = cx;
        ci = co % cx;
        hi = ho * b + ij / b;
        wi = wo * b + ij % b;
        return ((n * cin + ci) * (p->h * b) + hi) * (p->w * b) + wi;
    }
    cin = p->c * b * b;         /* x is (n, c b^2, h / b, w / b) */
    hi = ho / b;
    wi = wo / b;
    ci = p->mode == D2S_DCR ? ((ho % b) * b + wo % b) * p->c + co
                            : co * b * b + (ho % b) * b + wo % b;
    return ((n * cin + ci) * (p->h / b) + hi) * (p->w / b) + wi;
}

/* x: (N, C, H, W); y: the rearranged (N, C', H', W') */
static int
fwd_d2s(const struct sim_kern *k, struct sim_err *err)
{
    const struct d2s_params *p = k->params;
    const char *x = k->in[0].data;
    char *y = k->out[0].data;
    int64_t o = 0;

    (void)err;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->c; c++)
            for (int64_t h = 0; h < p->h; h++)
                for (int64_t w = 0; w < p->w; w++, o++)
                    memcpy(y + (size_t)o * p->es, x + (size_t)d2s_src(p, n, c, h, w) * p->es,
                           p->es);
    return 0;
}

/* dx[source of y element] += dy (a permutation: every element of x is used once) */
static int
bwd_d2s(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
        struct sim_err *err)
{
    const struct d2s_params *p = k->params;
    const float *g = dout[0].data;
    float *dx = din[0].data;
    int64_t o = 0;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->c; c++)
            for (int64_t h = 0; h < p->h; h++)
                for (int64_t w = 0; w < p->w; w++, o++)
                    dx[d2s_src(p, n, c, h, w)] += g[o];
    return 0;
}

/* ---- Trilu ------------------------------------------------------------------------------ */

struct trilu_params {
    bool upper;
    int64_t k, mats, rows, cols;
    size_t es;
};

static int
infer_trilu(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct trilu_params *p;
    int64_t upper, kv = 0;
    int n, rc = sim_in_dtype(c, 0, sim_dt_any);
    char s[128];

    if (rc == 0)
        rc = sim_ia_int(c, "upper", 1, &upper);
    if (rc == 0 && sim_has_in(c, 1)) {
        rc = sim_in_const_ints(c, 1, "k", &kv, 1, &n);
        if (rc == 0 && n != 1)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "k must hold one value, not %d", n);
    }
    if (rc != 0)
        return rc;
    if (upper != 0 && upper != 1)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute upper must be 0 or 1, not %lld",
                              (long long)upper);
    if (x->shape.rank < 2)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s must have rank 2 or more",
                              sim_shape_fmt(&x->shape, s, sizeof(s)));
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->upper = upper != 0;
    p->k = kv;
    p->rows = x->shape.d[x->shape.rank - 2];
    p->cols = x->shape.d[x->shape.rank - 1];
    p->mats = sim_shape_span(&x->shape, 0, x->shape.rank - 2);
    p->es = sim_dtype_size(x->dtype);
    return sim_set_out(c, 0, x->dtype, &x->shape);
}

/* Whether element (i, j) of a matrix is kept: j - i >= k (upper) or <= k (lower). */
static inline bool
trilu_keep(const struct trilu_params *p, int64_t i, int64_t j)
{
    int64_t d = j - i;  /* i, j are dims, so no overflow; k is any int64 */

    return p->upper ? d >= p->k : d <= p->k;
}

/* x, y: (..., rows, cols) */
static int
fwd_trilu(const struct sim_kern *k, struct sim_err *err)
{
    const struct trilu_params *p = k->params;
    const char *x = k->in[0].data;
    char *y = k->out[0].data;
    int64_t o = 0;

    (void)err;
    for (int64_t m = 0; m < p->mats; m++)
        for (int64_t i = 0; i < p->rows; i++)
            for (int64_t j = 0; j < p->cols; j++, o++) {
                if (trilu_keep(p, i, j))
                    memcpy(y + (size_t)o * p->es, x + (size_t)o * p->es, p->es);
                else
                    memset(y + (size_t)o * p->es, 0, p->es);
            }
    return 0;
}

/* dx += dy where the element is kept */
static int
bwd_trilu(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct trilu_params *p = k->params;
    const float *g = dout[0].data;
    float *dx = din[0].data;
    int64_t o = 0;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t m = 0; m < p->mats; m++)
        for (int64_t i = 0; i < p->rows; i++)
            for (int64_t j = 0; j < p->cols; j++, o++)
                if (trilu_keep(p, i, j))
                    dx[o] += g[o];
    return 0;
}

#define CODE_LAYOUT 2048u

const struct sim_op sim_ops_layout[] = {
    { "Tile", 6, 2, 2, 1, 1, 2u, 0, CODE_LAYOUT, infer_tile, fwd_tile, bwd_tile, 1u, NULL,
      SIM_BWD_ALL },
    { "DepthToSpace", 1, 1, 1, 1, 1, 0, 0, CODE_LAYOUT, infer_d2s, fwd_d2s, bwd_d2s, 1u,
      NULL, SIM_BWD_ALL },
    { "SpaceToDepth", 1, 1, 1, 1, 1, 0, 0, CODE_LAYOUT, infer_s2d, fwd_d2s, bwd_d2s, 1u,
      NULL, SIM_BWD_ALL },
    { "Trilu", 14, 1, 2, 1, 1, 2u, 0, CODE_LAYOUT, infer_trilu, fwd_trilu, bwd_trilu, 1u,
      NULL, SIM_BWD_ALL },
};

const int sim_ops_layout_count = (int)(sizeof(sim_ops_layout) / sizeof(sim_ops_layout[0]));

/*
 * op_elementwise.c — binary elementwise ops with ONNX multidirectional broadcasting: Add,
 * Sub, Mul, Div, Pow, forward and backward (op_unary.c has the one-input ops).
 *
 * Broadcasting is planned once at compile time: the output's dims are coalesced so that a
 * step walks rows of the innermost dim with each input's stride 0 or 1, split over the
 * pool by rows, or by segments of rows when there are too few rows to go round it.
 * Integer arithmetic wraps (computed unsigned) and integer division by zero gives 0, so no
 * input can trap.
 * Before opset 7, broadcasting follows the legacy broadcast / axis attributes.
 * The backward walks the same rows and adds each output's contribution into the input
 * element it came from, so a broadcast input's gradient is summed over the broadcast dims.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "ops.h"
#include "pool.h"

/* ---- broadcasting plan ---------------------------------------------------------------- */

struct bcast {
    int nd;                         /* coalesced rank, >= 1 */
    int64_t dims[SIM_MAX_RANK];
    int64_t sa[SIM_MAX_RANK];       /* element strides of a and b, 0 where broadcast */
    int64_t sb[SIM_MAX_RANK];
    int64_t total;
};

static void
bcast_plan(const struct sim_shape *a, const struct sim_shape *b, const struct sim_shape *o,
           struct bcast *bc)
{
    int64_t da[SIM_MAX_RANK], db[SIM_MAX_RANK], sa[SIM_MAX_RANK], sb[SIM_MAX_RANK];
    int64_t acc_a = 1, acc_b = 1;
    int r = o->rank, nd = 0;

    for (int k = r - 1; k >= 0; k--) {
        int ia = k - (r - a->rank), ib = k - (r - b->rank);
        da[k] = ia >= 0 ? a->d[ia] : 1;
        db[k] = ib >= 0 ? b->d[ib] : 1;
        sa[k] = da[k] == 1 ? 0 : acc_a;
        sb[k] = db[k] == 1 ? 0 : acc_b;
        acc_a *= da[k];
        acc_b *= db[k];
    }
    bc->total = sim_shape_count(o);
    for (int k = 0; k < r; k++) {
        if (o->d[k] == 1)
            continue;
        if (nd > 0 && sa[k] * o->d[k] == bc->sa[nd - 1] && sb[k] * o->d[k] == bc->sb[nd - 1]) {
            bc->dims[nd - 1] *= o->d[k];
            bc->sa[nd - 1] = sa[k];
            bc->sb[nd - 1] = sb[k];
            continue;
        }
        bc->dims[nd] = o->d[k];
        bc->sa[nd] = sa[k];
        bc->sb[nd] = sb[k];
        nd++;
    }
    if (nd == 0) {
        bc->dims[0] = 1;
        bc->sa[0] = 0;
        bc->sb[0] = 0;
        nd = 1;
    }
    bc->nd = nd;
}

/* One row: n outputs from a (stride ia) and b (stride ib). */
typedef void (*row_fn)(const void *a, const void *b, void *o, int64_t n, int64_t ia,
                       int64_t ib);

/* How rows of n outputs are cut for the pool: each into nseg segments of seg outputs
 * (nseg 1, seg n: whole rows). */
struct seg_plan {
    int64_t seg, nseg;
};

/* Whole rows, or, when may_cut, the rows are too few to go round the pool and each is
 * long enough for two pieces, segments of SIM_POOL_MAP_GRAIN outputs. */
static struct seg_plan
seg_plan(int64_t rows, int64_t n, bool may_cut)
{
    struct seg_plan sp = { n, 1 };

    if (may_cut && n >= 2 * SIM_POOL_MAP_GRAIN && rows < 2 * (int64_t)sim_pool_threads()) {
        sp.seg = SIM_POOL_MAP_GRAIN;
        sp.nseg = (n + sp.seg - 1) / sp.seg;
    }
    return sp;
}

/* What the pieces of one broadcast run share. */
struct bcast_job {
    const struct bcast *bc;
    const char *a, *b;
    char *o;
    size_t ea, eb, eo;
    row_fn fn;
    struct seg_plan sp;
};

/* The element offsets into a and b of output row r's first element. */
static void
bcast_row_offsets(const struct bcast *bc, int64_t r, int64_t *idx, int64_t *offa,
                  int64_t *offb)
{
    *offa = 0;
    *offb = 0;
    for (int k = bc->nd - 2; k >= 0; k--) {
        idx[k] = r % bc->dims[k];
        r /= bc->dims[k];
        *offa += idx[k] * bc->sa[k];
        *offb += idx[k] * bc->sb[k];
    }
}

/* Segment u of bc's rows cut by sp: its row *r, first output *c0 in the row, length *len,
 * and the element offsets into a and b of that first output. */
static void
seg_at(const struct seg_plan *sp, const struct bcast *bc, int64_t u, int64_t *r, int64_t *c0,
       int64_t *len, int64_t *offa, int64_t *offb)
{
    int64_t n = bc->dims[bc->nd - 1], idx[SIM_MAX_RANK] = { 0 };

    *r = u / sp->nseg;
    *c0 = (u % sp->nseg) * sp->seg;
    *len = n - *c0 < sp->seg ? n - *c0 : sp->seg;
    bcast_row_offsets(bc, *r, idx, offa, offb);
    *offa += *c0 * bc->sa[bc->nd - 1];
    *offb += *c0 * bc->sb[bc->nd - 1];
}

/* Segments [u0, u1) of a broadcast run whose rows are long: segment u is outputs
 * [(u % nseg) seg, ...) of row u / nseg, at most seg of them. */
static void
bcast_segments(void *ctx, int64_t u0, int64_t u1)
{
    const struct bcast_job *j = ctx;
    const struct bcast *bc = j->bc;
    int64_t n = bc->dims[bc->nd - 1];

    for (int64_t u = u0; u < u1; u++) {
        int64_t r, c0, len, oa, ob;
        seg_at(&j->sp, bc, u, &r, &c0, &len, &oa, &ob);
        j->fn(j->a + oa * (int64_t)j->ea, j->b + ob * (int64_t)j->eb,
              j->o + (r * n + c0) * (int64_t)j->eo, len, bc->sa[bc->nd - 1], bc->sb[bc->nd - 1]);
    }
}

/* Output rows [r0, r1) of a broadcast run (a row: the innermost coalesced dim). */
static void
bcast_rows(void *ctx, int64_t r0, int64_t r1)
{
    const struct bcast_job *j = ctx;
    const struct bcast *bc = j->bc;
    int nd = bc->nd;
    int64_t n = bc->dims[nd - 1], offa, offb;
    int64_t idx[SIM_MAX_RANK] = { 0 };

    bcast_row_offsets(bc, r0, idx, &offa, &offb);
    for (int64_t r = r0; r < r1; r++) {
        j->fn(j->a + offa * (int64_t)j->ea, j->b + offb * (int64_t)j->eb,
              j->o + r * n * (int64_t)j->eo, n, bc->sa[nd - 1], bc->sb[nd - 1]);
        for (int k = nd - 2; k >= 0; k--) {
            idx[k]++;
            offa += bc->sa[k];
            offb += bc->sb[k];
            if (idx[k] < bc->dims[k])
                break;
            offa -= bc->sa[k] * bc->dims[k];
            offb -= bc->sb[k] * bc->dims[k];
            idx[k] = 0;
        }
    }
}

/*
 * Every output row, spread over the host thread pool when the output is large: by rows,
 * or, when rows are too few to go round the pool (equal shapes coalesce into one row), by
 * segments of rows. Each output element is computed by the same row function from the
 * same operands either way.
 */
static void
bcast_run(const struct bcast *bc, const char *a, const char *b, char *o, size_t ea, size_t eb,
          size_t eo, row_fn fn)
{
    struct bcast_job j = { bc, a, b, o, ea, eb, eo, fn, { 0, 1 } };
    int64_t n = bc->dims[bc->nd - 1], rows;

    if (bc->total == 0)
        return;
    rows = bc->total / n;
    j.sp = seg_plan(rows, n, true);
    if (j.sp.nseg > 1)
        sim_pool_for(rows * j.sp.nseg, 1, bcast_segments, &j);
    else
        sim_pool_for(rows, SIM_POOL_MAP_GRAIN / n + 1, bcast_rows, &j);
}

/* Row functions for (op, type). The three common stride patterns get their own loops so
 * the compiler can vectorise them. */
#define ROW_FN(name, T, EXPR)                                                              \
    SIM_HOT_FN(name,                                                                       \
               (const void *va, const void *vb, void *vo, int64_t n, int64_t ia, int64_t ib), \
               (va, vb, vo, n, ia, ib))                                                    \
    {                                                                                      \
        const T *pa = va, *pb = vb;                                                        \
        T *po = vo;                                                                        \
        if (ia == 1 && ib == 1) {                                                          \
            for (int64_t i = 0; i < n; i++) { T x = pa[i], y = pb[i]; po[i] = (EXPR); }    \
        } else if (ia == 1 && ib == 0) {                                                   \
            T y = pb[0];                                                                   \
            for (int64_t i = 0; i < n; i++) { T x = pa[i]; po[i] = (EXPR); }               \
        } else if (ia == 0 && ib == 1) {                                                   \
            T x = pa[0];                                                                   \
            for (int64_t i = 0; i < n; i++) { T y = pb[i]; po[i] = (EXPR); }               \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = pa[i * ia], y = pb[i * ib];                                          \
                po[i] = (EXPR);                                                            \
            }                                                                              \
        }                                                                                  \
    }

/* Integer ops wrap like two's complement hardware; division by 0 gives 0 and the one
 * overflowing quotient (MIN / -1) wraps. */
#define IADD(T, U) (T)((U)x + (U)y)
#define ISUB(T, U) (T)((U)x - (U)y)
#define IMUL(T, U) (T)((U)x * (U)y)
#define IDIV(T, U) (y == 0 ? (T)0 : y == -1 ? (T)(0 - (U)x) : (T)(x / y))

ROW_FN(add_f32, float, x + y)
ROW_FN(sub_f32, float, x - y)
ROW_FN(mul_f32, float, x * y)
ROW_FN(div_f32, float, x / y)
ROW_FN(add_i64, int64_t, IADD(int64_t, uint64_t))
ROW_FN(sub_i64, int64_t, ISUB(int64_t, uint64_t))
ROW_FN(mul_i64, int64_t, IMUL(int64_t, uint64_t))
ROW_FN(div_i64, int64_t, IDIV(int64_t, uint64_t))
ROW_FN(add_i32, int32_t, IADD(int32_t, uint32_t))
ROW_FN(sub_i32, int32_t, ISUB(int32_t, uint32_t))
ROW_FN(mul_i32, int32_t, IMUL(int32_t, uint32_t))
ROW_FN(div_i32, int32_t, IDIV(int32_t, uint32_t))
ROW_FN(add_i8, int8_t, IADD(int8_t, uint8_t))
ROW_FN(sub_i8, int8_t, ISUB(int8_t, uint8_t))
ROW_FN(mul_i8, int8_t, IMUL(int8_t, uint8_t))
ROW_FN(div_i8, int8_t, IDIV(int8_t, uint8_t))
ROW_FN(add_u8, uint8_t, (uint8_t)(x + y))
ROW_FN(sub_u8, uint8_t, (uint8_t)(x - y))
ROW_FN(mul_u8, uint8_t, (uint8_t)(x * y))
ROW_FN(div_u8, uint8_t, y == 0 ? 0 : (uint8_t)(x / y))
ROW_FN(pow_f32, float, (y == 2.0f ? x * x : powf(x, y)))

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW };

static const row_fn rows_f32[] = { add_f32, sub_f32, mul_f32, div_f32, pow_f32 };
static const row_fn rows_i64[] = { add_i64, sub_i64, mul_i64, div_i64, NULL };
static const row_fn rows_i32[] = { add_i32, sub_i32, mul_i32, div_i32, NULL };
static const row_fn rows_i8[] = { add_i8, sub_i8, mul_i8, div_i8, NULL };
static const row_fn rows_u8[] = { add_u8, sub_u8, mul_u8, div_u8, NULL };

struct bin_params {
    struct bcast bc;
    row_fn fn;                      /* NULL: the generic (Pow on mixed types) path */
    int op;
};

static row_fn
pick_row(int dtype, int op)
{
    switch (dtype) {
    case SIM_DTYPE_FLOAT: return rows_f32[op];
    case SIM_DTYPE_INT64: return rows_i64[op];
    case SIM_DTYPE_INT32: return rows_i32[op];
    case SIM_DTYPE_INT8: return rows_i8[op];
    case SIM_DTYPE_UINT8: return rows_u8[op];
    default: return NULL;
    }
}

/* Opset < 7 broadcasting: with broadcast=0 the shapes must be equal; with broadcast=1, B
 * lines up with A's dims from `axis` (default: A's trailing dims). *bs becomes B's shape
 * with trailing 1s, which numpy broadcasting then treats the same way. */
static int
legacy_broadcast(struct sim_infer *c, const struct sim_shape *as, struct sim_shape *bs)
{
    int64_t bcast, axis;
    char s1[128], s2[128];
    int rc = sim_ia_int(c, "broadcast", 0, &bcast);

    if (rc == 0)
        rc = sim_ia_int(c, "axis", INT64_MIN, &axis);
    if (rc != 0)
        return rc;
    if (bcast == 0) {
        if (!sim_shape_eq(as, bs))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "shapes %s and %s differ and broadcast "
                                  "is 0", sim_shape_fmt(as, s1, sizeof(s1)),
                                  sim_shape_fmt(bs, s2, sizeof(s2)));
        return 0;
    }
    if (axis == INT64_MIN)
        return 0;
    if (axis < 0)
        axis += as->rank;
    if (axis < 0 || axis + bs->rank > as->rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot broadcast %s into %s at axis %lld",
                              sim_shape_fmt(bs, s2, sizeof(s2)),
                              sim_shape_fmt(as, s1, sizeof(s1)), (long long)axis);
    while (bs->rank < as->rank - axis)
        bs->d[bs->rank++] = 1;
    return 0;
}

static int
infer_binary(struct sim_infer *c, int op)
{
    const struct sim_tinfo *a = c->in[0], *b = c->in[1];
    struct sim_shape o, bs;
    struct bin_params *p;
    int rc;
    char sa[128], sb[128];
    static const int pow_types[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };

    if (!sim_has_in(c, 0) || !sim_has_in(c, 1))
        return sim_infer_fail(c, IPUOF_E_INVAL, "needs two inputs");
    rc = sim_in_dtype(c, 0, op == OP_POW ? pow_types : sim_dt_numeric);
    if (rc == 0)
        rc = sim_in_dtype(c, 1, op == OP_POW ? pow_types : sim_dt_numeric);
    if (rc != 0)
        return rc;
    if (op != OP_POW && a->dtype != b->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "inputs have different dtypes (%s and %s)",
                              sim_dtype_name(a->dtype), sim_dtype_name(b->dtype));
    bs = b->shape;
    if (c->version < 7) {
        rc = legacy_broadcast(c, &a->shape, &bs);
        if (rc != 0)
            return rc;
    }
    if (!sim_shape_broadcast(&a->shape, &bs, &o) ||
        (c->version < 7 && !sim_shape_eq(&o, &a->shape)))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "shapes %s and %s do not broadcast",
                              sim_shape_fmt(&a->shape, sa, sizeof(sa)),
                              sim_shape_fmt(&b->shape, sb, sizeof(sb)));
    rc = sim_set_out(c, 0, a->dtype, &o);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->op = op;
    bcast_plan(&a->shape, &bs, &o, &p->bc);
    p->fn = a->dtype == b->dtype ? pick_row(a->dtype, op) : NULL;
    return 0;
}

/* Pow over any pair of supported types, through double. */
static void
pow_generic(const struct bcast *bc, const struct sim_tensor *a, const struct sim_tensor *b,
            struct sim_tensor *o)
{
    int nd = bc->nd;
    int64_t n = bc->dims[nd - 1], offa = 0, offb = 0, out = 0;
    int64_t idx[SIM_MAX_RANK] = { 0 };

    if (bc->total == 0)
        return;
    for (int64_t r = 0; r < bc->total / n; r++) {
        for (int64_t i = 0; i < n; i++) {
            double x = sim_get_f64(a->dtype, a->data, offa + i * bc->sa[nd - 1]);
            double y = sim_get_f64(b->dtype, b->data, offb + i * bc->sb[nd - 1]);
            if (o->dtype == SIM_DTYPE_FLOAT)
                ((float *)o->data)[out++] = powf((float)x, (float)y);
            else
                sim_put_f64(o->dtype, o->data, out++, pow(x, y));
        }
        for (int k = nd - 2; k >= 0; k--) {
            idx[k]++;
            offa += bc->sa[k];
            offb += bc->sb[k];
            if (idx[k] < bc->dims[k])
                break;
            offa -= bc->sa[k] * bc->dims[k];
            offb -= bc->sb[k] * bc->dims[k];
            idx[k] = 0;
        }
    }
}

/* a, b: shapes that broadcast to y's */
static int
fwd_binary(const struct sim_kern *k, struct sim_err *err)
{
    const struct bin_params *p = k->params;
    const struct sim_tensor *a = &k->in[0], *b = &k->in[1];
    struct sim_tensor *o = &k->out[0];

    (void)err;
    if (p->fn == NULL) {
        pow_generic(&p->bc, a, b, o);
        return 0;
    }
    bcast_run(&p->bc, a->data, b->data, o->data, sim_dtype_size(a->dtype),
              sim_dtype_size(b->dtype), sim_dtype_size(o->dtype), p->fn);
    return 0;
}

static int infer_add(struct sim_infer *c) { return infer_binary(c, OP_ADD); }
static int infer_sub(struct sim_infer *c) { return infer_binary(c, OP_SUB); }
static int infer_mul(struct sim_infer *c) { return infer_binary(c, OP_MUL); }
static int infer_div(struct sim_infer *c) { return infer_binary(c, OP_DIV); }
static int infer_pow(struct sim_infer *c) { return infer_binary(c, OP_POW); }

/* ---- backward ------------------------------------------------------------------------- */

/* The exponent at element i of b, whatever b's dtype (Pow allows integer exponents). */
static float
exponent_at(const struct sim_tensor *b, int64_t i)
{
    return b->dtype == SIM_DTYPE_FLOAT ? ((const float *)b->data)[i]
                                       : (float)sim_get_f64(b->dtype, b->data, i);
}

/*
 * One row of n outputs: a, da at stride ia, b, db at stride ib (from offsets oa, ob), y and
 * g contiguous. d(a+b) = (1, 1); d(a-b) = (1, -1); d(a*b) = (b, a); d(a/b) = (1/b, -a/b^2);
 * d(a^b) = (b a^(b-1), a^b ln a), with PyTorch's zero where the exponent is 0 (for da) or
 * the base is 0 with a non-negative exponent (for db). Rows without broadcasting (both
 * strides 1) of Add, Sub and Mul get loops of their own, which the compiler vectorizes;
 * each element sees the same operations either way.
 */
SIM_HOT_FN(bwd_row,
           (int op, const float *a, const struct sim_tensor *bt, const float *y,
            const float *g, float *da, float *db, int64_t oa, int64_t ob, int64_t n,
            int64_t ia, int64_t ib),
           (op, a, bt, y, g, da, db, oa, ob, n, ia, ib))
{
    const float *b = bt->data;

    if (ia == 1 && ib == 1 && (op == OP_ADD || op == OP_SUB || op == OP_MUL)) {
        /* a, b: NULL where the gradient does not read them (sim_node_bwd_reads) */
        const float *pa = a != NULL ? a + oa : NULL, *pb = b != NULL ? b + ob : NULL;
        float *pda = da != NULL ? da + oa : NULL, *pdb = db != NULL ? db + ob : NULL;
        if (pda != NULL && op == OP_MUL)
            for (int64_t i = 0; i < n; i++)
                pda[i] += g[i] * pb[i];
        else if (pda != NULL)
            for (int64_t i = 0; i < n; i++)
                pda[i] += g[i];
        if (pdb != NULL && op == OP_MUL)
            for (int64_t i = 0; i < n; i++)
                pdb[i] += g[i] * pa[i];
        else if (pdb != NULL && op == OP_SUB)
            for (int64_t i = 0; i < n; i++)
                pdb[i] += -1.0f * g[i];
        else if (pdb != NULL)
            for (int64_t i = 0; i < n; i++)
                pdb[i] += 1.0f * g[i];
        return;
    }
    switch (op) {
    case OP_ADD:
    case OP_SUB: {
        float sign = op == OP_SUB ? -1.0f : 1.0f;
        for (int64_t i = 0; da != NULL && i < n; i++)
            da[oa + i * ia] += g[i];
        for (int64_t i = 0; db != NULL && i < n; i++)
            db[ob + i * ib] += sign * g[i];
        break;
    }
    case OP_MUL:
        for (int64_t i = 0; da != NULL && i < n; i++)
            da[oa + i * ia] += g[i] * b[ob + i * ib];
        for (int64_t i = 0; db != NULL && i < n; i++)
            db[ob + i * ib] += g[i] * a[oa + i * ia];
        break;
    case OP_DIV:
        for (int64_t i = 0; da != NULL && i < n; i++)
            da[oa + i * ia] += g[i] / b[ob + i * ib];
        for (int64_t i = 0; db != NULL && i < n; i++) {
            float z = b[ob + i * ib];
            db[ob + i * ib] -= g[i] * a[oa + i * ia] / (z * z);
        }
        break;
    case OP_POW:
        for (int64_t i = 0; da != NULL && i < n; i++) {
            float z = exponent_at(bt, ob + i * ib);
            if (z != 0.0f)
                da[oa + i * ia] += g[i] * z * powf(a[oa + i * ia], z - 1.0f);
        }
        for (int64_t i = 0; db != NULL && i < n; i++) {
            float x = a[oa + i * ia];
            if (!(x == 0.0f && b[ob + i * ib] >= 0.0f))
                db[ob + i * ib] += g[i] * y[i] * logf(x);
        }
        break;
    default:
        break;
    }
}

/* What the pieces of one binary backward share. */
struct bwd_job {
    const struct bin_params *p;
    const float *a, *y, *g;
    const struct sim_tensor *bt;
    float *da, *db;
    struct seg_plan sp;
};

/* Segments [u0, u1) of the output's rows (segment u: outputs [(u % nseg) seg, ...) of
 * row u / nseg), their gradients added into da and db. */
static void
bwd_segments(void *ctx, int64_t u0, int64_t u1)
{
    const struct bwd_job *j = ctx;
    const struct bcast *bc = &j->p->bc;
    int64_t n = bc->dims[bc->nd - 1];

    for (int64_t u = u0; u < u1; u++) {
        int64_t r, c0, len, oa, ob;
        seg_at(&j->sp, bc, u, &r, &c0, &len, &oa, &ob);
        /* y is NULL where the op's gradient does not read it (Add, Sub: sim_node_bwd_reads) */
        bwd_row(j->p->op, j->a, j->bt, j->y != NULL ? j->y + r * n + c0 : NULL,
                j->g + r * n + c0, j->da, j->db, oa, ob, len, bc->sa[bc->nd - 1],
                bc->sb[bc->nd - 1]);
    }
}

/* Whether every element of the operand (strides s) that has a gradient is written by one
 * row only (no broadcast over the outer dims), and by one segment only (nor the inner). */
static void
bwd_split_ok(const struct bcast *bc, const int64_t *s, bool *rows, bool *segs)
{
    for (int k = 0; k < bc->nd - 1; k++)
        *rows = *rows && s[k] != 0;
    *segs = *rows && *segs && s[bc->nd - 1] != 0;
}

/* a, b: shapes that broadcast to y's; dy like y; da, db like a, b (float only). Split over
 * the pool by rows or segments of rows where no two pieces add into one element, so each
 * element of da and db receives its terms in the same order on any thread. */
static int
bwd_binary(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct bin_params *p = k->params;
    const struct bcast *bc = &p->bc;
    struct bwd_job j = { p, k->in[0].data, k->out[0].data, dout[0].data, &k->in[1],
                         din[0].data, din[1].data, { 0, 1 } };
    int64_t n = bc->dims[bc->nd - 1], rows;
    bool rows_ok = true, segs_ok = true;

    (void)err;
    if (j.g == NULL || bc->total == 0 || (j.da == NULL && j.db == NULL))
        return 0;
    rows = bc->total / n;
    if (j.da != NULL)
        bwd_split_ok(bc, bc->sa, &rows_ok, &segs_ok);
    if (j.db != NULL)
        bwd_split_ok(bc, bc->sb, &rows_ok, &segs_ok);
    j.sp = seg_plan(rows, n, segs_ok);
    if (!rows_ok)
        bwd_segments(&j, 0, rows);
    else if (j.sp.nseg > 1)
        sim_pool_for(rows * j.sp.nseg, 1, bwd_segments, &j);
    else
        sim_pool_for(rows, SIM_POOL_MAP_GRAIN / n + 1, bwd_segments, &j);
    return 0;
}

/* Code-size estimates (bytes per node): a vertex codelet plus its state. */
#define CODE_EW 3072u

/* Mul's rule: dA = dY B reads B, dB = dY A reads A. */
static uint32_t
reads_mul(uint32_t wanted)
{
    return (wanted & 1u ? SIM_BWD_IN(1) : 0) | (wanted & 2u ? SIM_BWD_IN(0) : 0);
}

/* Pow's rule: dA = dY B A^(B-1) reads A and B, dB = dY Y ln A reads them and Y. */
static uint32_t
reads_pow(uint32_t wanted)
{
    return (wanted & 3u ? SIM_BWD_IN(0) | SIM_BWD_IN(1) : 0) | (wanted & 2u ? SIM_BWD_OUT(0) : 0);
}

/* Div's rule: dA = dY / B reads B, dB = -dY A / B^2 reads both. */
static uint32_t
reads_div(uint32_t wanted)
{
    return (wanted & 1u ? SIM_BWD_IN(1) : 0) | (wanted & 2u ? SIM_BWD_IN(0) | SIM_BWD_IN(1) : 0);
}

const struct sim_op sim_ops_elementwise[] = {
    { "Add", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_add, fwd_binary, bwd_binary, 3u, NULL,
      SIM_BWD_NONE },
    { "Sub", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_sub, fwd_binary, bwd_binary, 3u, NULL,
      SIM_BWD_NONE },
    { "Mul", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_mul, fwd_binary, bwd_binary, 3u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1), reads_mul },
    { "Div", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_div, fwd_binary, bwd_binary, 3u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1), reads_div },
    { "Pow", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_pow, fwd_binary, bwd_binary, 3u, NULL,
      SIM_BWD_ALL, reads_pow },
};

const int sim_ops_elementwise_count =
    (int)(sizeof(sim_ops_elementwise) / sizeof(sim_ops_elementwise[0]));

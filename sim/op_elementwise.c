/*
 * op_elementwise.c — elementwise ops: Add, Sub, Mul, Div, Pow (ONNX multidirectional
 * broadcasting), Neg, Abs, Sqrt, Exp, Log, Erf, Clip, Identity, Cast.
 *
 * Broadcasting is planned once at compile time: the output's dims are coalesced so that a
 * step walks rows of the innermost dim with each input's stride 0 or 1. Integer arithmetic
 * wraps (computed unsigned) and integer division by zero gives 0, so no input can trap.
 * Before opset 7, broadcasting follows the legacy broadcast / axis attributes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

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

static void
bcast_run(const struct bcast *bc, const char *a, const char *b, char *o, size_t ea, size_t eb,
          size_t eo, row_fn fn)
{
    int nd = bc->nd;
    int64_t n = bc->dims[nd - 1], rows, offa = 0, offb = 0;
    int64_t idx[SIM_MAX_RANK] = { 0 };

    if (bc->total == 0)
        return;
    rows = bc->total / n;
    for (int64_t r = 0; r < rows; r++) {
        fn(a + offa * (int64_t)ea, b + offb * (int64_t)eb, o + r * n * (int64_t)eo, n,
           bc->sa[nd - 1], bc->sb[nd - 1]);
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

/* Row functions for (op, type). The three common stride patterns get their own loops so
 * the compiler can vectorise them. */
#define ROW_FN(name, T, EXPR)                                                              \
    static void name(const void *va, const void *vb, void *vo, int64_t n, int64_t ia,      \
                     int64_t ib)                                                           \
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
ROW_FN(pow_f32, float, powf(x, y))

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

/* ---- unary ---------------------------------------------------------------------------- */

enum { U_NEG, U_ABS, U_SQRT, U_EXP, U_LOG, U_ERF };

struct unary_params {
    int op;
};

static int
infer_unary(struct sim_infer *c, int op)
{
    struct unary_params *p;
    int rc;
    static const int neg_types[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT8, SIM_DTYPE_INT32,
                                     SIM_DTYPE_INT64, 0 };

    rc = sim_in_dtype(c, 0, op == U_NEG ? neg_types : op == U_ABS ? sim_dt_numeric
                                                                  : sim_dt_float);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->op = op;
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

/* x, y: same shape and dtype */
static int
fwd_unary(const struct sim_kern *k, struct sim_err *err)
{
    const struct unary_params *p = k->params;
    const struct sim_tensor *x = &k->in[0];
    int64_t n = x->numel;

    (void)err;
    if (x->dtype == SIM_DTYPE_FLOAT) {
        const float *in = x->data;
        float *out = k->out[0].data;
        switch (p->op) {
        case U_NEG: for (int64_t i = 0; i < n; i++) out[i] = -in[i]; break;
        case U_ABS: for (int64_t i = 0; i < n; i++) out[i] = fabsf(in[i]); break;
        case U_SQRT: for (int64_t i = 0; i < n; i++) out[i] = sqrtf(in[i]); break;
        case U_EXP: for (int64_t i = 0; i < n; i++) out[i] = expf(in[i]); break;
        case U_LOG: for (int64_t i = 0; i < n; i++) out[i] = logf(in[i]); break;
        case U_ERF: for (int64_t i = 0; i < n; i++) out[i] = erff(in[i]); break;
        default: break;
        }
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = sim_get_i64(x->dtype, x->data, i);
        if (p->op == U_NEG || (p->op == U_ABS && v < 0))
            v = (int64_t)(0 - (uint64_t)v);
        sim_put_i64(x->dtype, k->out[0].data, i, v);
    }
    return 0;
}

static int infer_neg(struct sim_infer *c) { return infer_unary(c, U_NEG); }
static int infer_abs(struct sim_infer *c) { return infer_unary(c, U_ABS); }
static int infer_sqrt(struct sim_infer *c) { return infer_unary(c, U_SQRT); }
static int infer_exp(struct sim_infer *c) { return infer_unary(c, U_EXP); }
static int infer_log(struct sim_infer *c) { return infer_unary(c, U_LOG); }
static int infer_erf(struct sim_infer *c) { return infer_unary(c, U_ERF); }

/* ---- Clip ----------------------------------------------------------------------------- */

struct clip_params {
    bool attr_bounds;               /* opset < 11: bounds are attributes */
    double lo, hi;                  /* attribute bounds / dtype limits */
};

static void
dtype_limits(int dtype, double *lo, double *hi)
{
    switch (dtype) {
    case SIM_DTYPE_UINT8: *lo = 0; *hi = 255; break;
    case SIM_DTYPE_INT8: *lo = -128; *hi = 127; break;
    case SIM_DTYPE_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    case SIM_DTYPE_INT64: *lo = -9223372036854775808.0; *hi = 9223372036854775807.0; break;
    default: *lo = -INFINITY; *hi = INFINITY; break;
    }
}

static int
infer_clip(struct sim_infer *c)
{
    struct clip_params *p;
    int rc = sim_in_dtype(c, 0, sim_dt_numeric);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    dtype_limits(c->in[0]->dtype, &p->lo, &p->hi);
    if (c->version < 11) {
        float lo, hi;
        p->attr_bounds = true;
        rc = sim_ia_float(c, "min", -INFINITY, &lo);
        if (rc == 0)
            rc = sim_ia_float(c, "max", INFINITY, &hi);
        if (rc != 0)
            return rc;
        p->lo = lo;
        p->hi = hi;
    } else {
        for (int i = 1; i < 3; i++) {
            if (!sim_has_in(c, i))
                continue;
            if (c->in[i]->dtype != c->in[0]->dtype || c->in[i]->numel != 1)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d (%s) must be a single %s "
                                      "value", i, i == 1 ? "min" : "max",
                                      sim_dtype_name(c->in[0]->dtype));
        }
    }
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

/* x, y: same shape; min, max: one element each or absent */
static int
fwd_clip(const struct sim_kern *k, struct sim_err *err)
{
    const struct clip_params *p = k->params;
    const struct sim_tensor *x = &k->in[0];
    double lo = p->lo, hi = p->hi;

    (void)err;
    if (!p->attr_bounds) {
        if (k->n_in > 1 && k->in[1].data != NULL)
            lo = sim_get_f64(x->dtype, k->in[1].data, 0);
        if (k->n_in > 2 && k->in[2].data != NULL)
            hi = sim_get_f64(x->dtype, k->in[2].data, 0);
    }
    if (x->dtype == SIM_DTYPE_FLOAT) {
        const float *in = x->data;
        float *out = k->out[0].data, flo = (float)lo, fhi = (float)hi;
        for (int64_t i = 0; i < x->numel; i++) {
            float v = in[i] < flo ? flo : in[i];
            out[i] = v > fhi ? fhi : v;
        }
        return 0;
    }
    for (int64_t i = 0; i < x->numel; i++) {
        double v = sim_get_f64(x->dtype, x->data, i);
        v = v < lo ? lo : v;
        sim_put_f64(x->dtype, k->out[0].data, i, v > hi ? hi : v);
    }
    return 0;
}

/* ---- Identity and Cast ---------------------------------------------------------------- */

static int
infer_identity(struct sim_infer *c)
{
    if (!sim_has_in(c, 0))
        return sim_infer_fail(c, IPUOF_E_INVAL, "needs an input");
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

/* x, y: same shape and dtype */
static int
fwd_copy(const struct sim_kern *k, struct sim_err *err)
{
    size_t n = (size_t)k->in[0].numel * sim_dtype_size(k->in[0].dtype);

    (void)err;
    if (n > 0 && k->out[0].data != k->in[0].data)
        memcpy(k->out[0].data, k->in[0].data, n);
    return 0;
}

static int
infer_cast(struct sim_infer *c)
{
    int64_t to;
    int rc = sim_ia_int(c, "to", 0, &to);

    if (rc != 0)
        return rc;
    if (sim_attr_find(c->mn, "to") == NULL)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'to' is required");
    if (!sim_dtype_ok((int)to) || to != (int)to)
        return sim_infer_unsupported(c, "Cast to %s (supported: float, uint8, int8, int32, "
                                     "int64, bool)", sim_onnx_dtype_name((int)to));
    return sim_set_out(c, 0, (int)to, &c->in[0]->shape);
}

/* x, y: same shape, y of the target dtype */
static int
fwd_cast(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_tensor *x = &k->in[0];
    struct sim_tensor *y = &k->out[0];

    if (x->dtype == y->dtype)
        return fwd_copy(k, err);
    if (x->dtype == SIM_DTYPE_FLOAT) {
        for (int64_t i = 0; i < x->numel; i++)
            sim_put_f64(y->dtype, y->data, i, ((const float *)x->data)[i]);
    } else if (y->dtype == SIM_DTYPE_FLOAT) {
        for (int64_t i = 0; i < x->numel; i++)
            ((float *)y->data)[i] = (float)sim_get_i64(x->dtype, x->data, i);
    } else {
        for (int64_t i = 0; i < x->numel; i++)
            sim_put_i64(y->dtype, y->data, i, sim_get_i64(x->dtype, x->data, i));
    }
    return 0;
}

/* Code-size estimates (bytes per node): a vertex codelet plus its state. */
#define CODE_EW 3072u

const struct sim_op sim_ops_elementwise[] = {
    { "Add", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_add, fwd_binary, NULL },
    { "Sub", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_sub, fwd_binary, NULL },
    { "Mul", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_mul, fwd_binary, NULL },
    { "Div", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_div, fwd_binary, NULL },
    { "Pow", 1, 2, 2, 1, 1, 0, 0, CODE_EW, infer_pow, fwd_binary, NULL },
    { "Neg", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_neg, fwd_unary, NULL },
    { "Abs", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_abs, fwd_unary, NULL },
    { "Sqrt", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_sqrt, fwd_unary, NULL },
    { "Exp", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_exp, fwd_unary, NULL },
    { "Log", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_log, fwd_unary, NULL },
    { "Erf", 9, 1, 1, 1, 1, 0, 0, CODE_EW, infer_erf, fwd_unary, NULL },
    { "Clip", 1, 1, 3, 1, 1, 0, 0, CODE_EW, infer_clip, fwd_clip, NULL },
    { "Identity", 1, 1, 1, 1, 1, 0, 0, 1024u, infer_identity, fwd_copy, NULL },
    { "Cast", 6, 1, 1, 1, 1, 0, 0, CODE_EW, infer_cast, fwd_cast, NULL },
};

const int sim_ops_elementwise_count =
    (int)(sizeof(sim_ops_elementwise) / sizeof(sim_ops_elementwise[0]));

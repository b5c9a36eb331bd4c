/*
 * op_logic.c — comparisons, logic and selection with numpy broadcasting: Greater, Less,
 * Equal, GreaterOrEqual, LessOrEqual (bool results), Not, And, Or, Xor (bool), Where, and
 * Mod (integer modulus with the divisor's sign, or C's fmod with fmod = 1).
 *
 * Integers are compared as int64 and floats as floats, so no precision is lost. Integer Mod
 * by zero gives 0 and MIN % -1 gives 0, so no input can trap. Like every op, these fold at
 * compile time when their inputs are known (PyTorch's shape arithmetic).
 * Backward: Where sends dy to x where the condition holds and to y elsewhere; Mod (float,
 * which ONNX allows only with fmod = 1) gives dx += dy and d_divisor -= dy * trunc(x / y);
 * comparisons and logic produce bools, which carry no gradient.
 * Does not: string tensors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"
#include "ops.h"

enum { L_GT, L_LT, L_EQ, L_GE, L_LE, L_AND, L_OR, L_XOR, L_MOD, L_WHERE };

struct logic_params {
    int kind;
    int dtype;                      /* of the compared / selected / divided inputs */
    bool fmod;
    struct sim_bcast bc;
};

/* Broadcasts inputs [first, first + n) into output 0 of dtype out_dtype. */
static int
infer_bcast(struct sim_infer *c, int kind, int first, int n, int out_dtype)
{
    const struct sim_shape *sh[SIM_BCAST_MAX];
    struct logic_params *p;
    struct sim_shape o;
    char s1[128], s2[128];

    for (int i = 0; i < n; i++)
        sh[i] = &c->in[first + i]->shape;
    if (!sim_bcast_shapes(n, sh, &o))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input shapes %s and %s%s do not broadcast",
                              sim_shape_fmt(sh[0], s1, sizeof(s1)),
                              sim_shape_fmt(sh[1], s2, sizeof(s2)), n > 2 ? " (and more)" : "");
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->kind = kind;
    p->dtype = c->in[first]->dtype;
    sim_bcast_plan(&p->bc, n, sh, &o);
    return sim_set_out(c, 0, out_dtype < 0 ? p->dtype : out_dtype, &o);
}

/* Two inputs of one dtype from allowed. */
static int
infer_pair(struct sim_infer *c, int kind, const int *allowed, int out_dtype)
{
    int rc = sim_in_dtype(c, 0, allowed);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, allowed);
    if (rc != 0)
        return rc;
    if (c->in[0]->dtype != c->in[1]->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "inputs have different dtypes (%s and %s)",
                              sim_dtype_name(c->in[0]->dtype), sim_dtype_name(c->in[1]->dtype));
    return infer_bcast(c, kind, 0, 2, out_dtype);
}

static const int dt_bool[] = { SIM_DTYPE_BOOL, 0 };

static int infer_gt(struct sim_infer *c) { return infer_pair(c, L_GT, sim_dt_numeric, SIM_DTYPE_BOOL); }
static int infer_lt(struct sim_infer *c) { return infer_pair(c, L_LT, sim_dt_numeric, SIM_DTYPE_BOOL); }
static int infer_ge(struct sim_infer *c) { return infer_pair(c, L_GE, sim_dt_numeric, SIM_DTYPE_BOOL); }
static int infer_le(struct sim_infer *c) { return infer_pair(c, L_LE, sim_dt_numeric, SIM_DTYPE_BOOL); }
static int infer_eq(struct sim_infer *c) { return infer_pair(c, L_EQ, sim_dt_any, SIM_DTYPE_BOOL); }
static int infer_and(struct sim_infer *c) { return infer_pair(c, L_AND, dt_bool, SIM_DTYPE_BOOL); }
static int infer_or(struct sim_infer *c) { return infer_pair(c, L_OR, dt_bool, SIM_DTYPE_BOOL); }
static int infer_xor(struct sim_infer *c) { return infer_pair(c, L_XOR, dt_bool, SIM_DTYPE_BOOL); }

static int
infer_mod(struct sim_infer *c)
{
    struct logic_params *p;
    int64_t fmod_attr;
    int rc = sim_ia_int(c, "fmod", 0, &fmod_attr);

    if (rc == 0)
        rc = infer_pair(c, L_MOD, sim_dt_numeric, -1);
    if (rc != 0)
        return rc;
    p = c->params;
    if (fmod_attr != 0 && fmod_attr != 1)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute fmod must be 0 or 1, not %lld",
                              (long long)fmod_attr);
    if (fmod_attr == 0 && p->dtype == SIM_DTYPE_FLOAT)
        return sim_infer_fail(c, IPUOF_E_INVAL, "float inputs need fmod = 1 (ONNX Mod)");
    p->fmod = fmod_attr == 1;
    return 0;
}

/* Where; one made from an ONNX If on data (onnx_ctrl.c sets __if_branches) selects
 * between the two branches' outputs, which must have one shape (ONNX If gives one branch's
 * output, where Where would broadcast them). */
static int
infer_where(struct sim_infer *c)
{
    int64_t branches = 0;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, dt_bool);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_any);
    if (rc == 0)
        rc = sim_ia_int(c, "__if_branches", 0, &branches);
    if (rc != 0)
        return rc;
    if (branches && c->in[0]->numel != 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "the If's condition holds %lld values; it "
                              "must hold one", (long long)c->in[0]->numel);
    if (branches && !sim_shape_eq(&c->in[1]->shape, &c->in[2]->shape))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "an If on data runs both branches and "
                              "selects each output, so they must have one shape; the then "
                              "branch gives %s and the else branch %s",
                              sim_shape_fmt(&c->in[1]->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&c->in[2]->shape, s2, sizeof(s2)));
    if (c->in[1]->dtype != c->in[2]->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "x and y have different dtypes (%s and %s)",
                              sim_dtype_name(c->in[1]->dtype), sim_dtype_name(c->in[2]->dtype));
    rc = infer_bcast(c, L_WHERE, 0, 3, c->in[1]->dtype);
    if (rc == 0)
        ((struct logic_params *)c->params)->dtype = c->in[1]->dtype;
    return rc;
}

static int
infer_not(struct sim_infer *c)
{
    int rc = sim_in_dtype(c, 0, dt_bool);

    return rc != 0 ? rc : sim_set_out(c, 0, SIM_DTYPE_BOOL, &c->in[0]->shape);
}

/* x, y: same shape (bool) */
static int
fwd_not(const struct sim_kern *k, struct sim_err *err)
{
    const uint8_t *x = k->in[0].data;
    uint8_t *y = k->out[0].data;

    (void)err;
    for (int64_t i = 0; i < k->in[0].numel; i++)
        y[i] = !x[i];
    return 0;
}

/* One comparison of elements ia of a and ib of b (same dtype). */
static bool
compare(int kind, int dtype, const void *a, int64_t ia, const void *b, int64_t ib)
{
    if (dtype == SIM_DTYPE_FLOAT) {
        float x = ((const float *)a)[ia], y = ((const float *)b)[ib];
        switch (kind) {
        case L_GT: return x > y;
        case L_LT: return x < y;
        case L_GE: return x >= y;
        case L_LE: return x <= y;
        default: return x == y;
        }
    } else {
        int64_t x = sim_get_i64(dtype, a, ia), y = sim_get_i64(dtype, b, ib);
        switch (kind) {
        case L_GT: return x > y;
        case L_LT: return x < y;
        case L_GE: return x >= y;
        case L_LE: return x <= y;
        case L_AND: return x && y;
        case L_OR: return x || y;
        case L_XOR: return (x != 0) != (y != 0);
        default: return x == y;
        }
    }
}

/* Integer modulus that cannot trap: the sign of the divisor (or of x with fmod). */
static int64_t
imod(int64_t x, int64_t y, bool fmod_)
{
    int64_t r;

    if (y == 0 || y == -1)
        return 0;
    r = x % y;
    if (!fmod_ && r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}

/* a, b (and c for Where): shapes that broadcast to y's */
static int
fwd_logic(const struct sim_kern *k, struct sim_err *err)
{
    const struct logic_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
    const void *a = k->in[0].data, *b = k->in[1].data;
    void *y = k->out[0].data;
    size_t es = sim_dtype_size(p->dtype);

    (void)err;
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off)) {
        int64_t base = r * n;
        for (int64_t i = 0; i < n; i++) {
            int64_t ia = off[0] + i * bc->inner[0], ib = off[1] + i * bc->inner[1];
            if (p->kind == L_WHERE) {
                const uint8_t *cond = a;
                int64_t ic = off[2] + i * bc->inner[2];
                const char *src = cond[ia] ? (const char *)b + ib * (int64_t)es
                                           : (const char *)k->in[2].data + ic * (int64_t)es;
                memcpy((char *)y + (base + i) * (int64_t)es, src, es);
            } else if (p->kind == L_MOD) {
                if (p->dtype == SIM_DTYPE_FLOAT) {
                    float x = ((const float *)a)[ia], d = ((const float *)b)[ib];
                    ((float *)y)[base + i] = fmodf(x, d);
                } else {
                    sim_put_i64(p->dtype, y, base + i,
                                imod(sim_get_i64(p->dtype, a, ia), sim_get_i64(p->dtype, b, ib),
                                     p->fmod));
                }
            } else {
                ((uint8_t *)y)[base + i] = compare(p->kind, p->dtype, a, ia, b, ib);
            }
        }
    }
    return 0;
}

/*
 * Where: dx += dy where cond, dy += dy where !cond. Mod (float, fmod): dx += dy,
 * dd -= dy * trunc(x / d). Both sum over broadcast dims.
 */
static int
bwd_logic(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct logic_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
    const float *g = dout[0].data;

    (void)err;
    if (g == NULL)
        return 0;
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off)) {
        const float *gr = g + r * n;
        for (int64_t i = 0; i < n; i++) {
            int64_t ia = off[0] + i * bc->inner[0], ib = off[1] + i * bc->inner[1];
            if (p->kind == L_WHERE) {
                int64_t ic = off[2] + i * bc->inner[2];
                bool cnd = ((const uint8_t *)k->in[0].data)[ia] != 0;
                float *dx = din[1].data, *dy = din[2].data;
                if (cnd && dx != NULL)
                    dx[ib] += gr[i];
                if (!cnd && dy != NULL)
                    dy[ic] += gr[i];
            } else {
                const float *x = k->in[0].data, *d = k->in[1].data;
                float *dx = din[0].data, *dd = din[1].data;
                if (dx != NULL)
                    dx[ia] += gr[i];
                if (dd != NULL)
                    dd[ib] -= gr[i] * truncf(x[ia] / d[ib]);
            }
        }
    }
    return 0;
}

#define CODE_LOGIC 3072u

const struct sim_op sim_ops_logic[] = {
    { "Greater", 7, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_gt, fwd_logic, NULL, 0u, NULL },
    { "Less", 7, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_lt, fwd_logic, NULL, 0u, NULL },
    { "Equal", 7, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_eq, fwd_logic, NULL, 0u, NULL },
    { "GreaterOrEqual", 12, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_ge, fwd_logic, NULL, 0u, NULL },
    { "LessOrEqual", 12, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_le, fwd_logic, NULL, 0u, NULL },
    { "And", 7, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_and, fwd_logic, NULL, 0u, NULL },
    { "Or", 7, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_or, fwd_logic, NULL, 0u, NULL },
    { "Xor", 7, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_xor, fwd_logic, NULL, 0u, NULL },
    { "Not", 1, 1, 1, 1, 1, 0, 0, CODE_LOGIC, infer_not, fwd_not, NULL, 0u, NULL },
    { "Where", 9, 3, 3, 1, 1, 0, 0, CODE_LOGIC, infer_where, fwd_logic, bwd_logic, 6u, NULL,
      SIM_BWD_IN(0) },
    { "Mod", 10, 2, 2, 1, 1, 0, 0, CODE_LOGIC, infer_mod, fwd_logic, bwd_logic, 3u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1) },
};

const int sim_ops_logic_count = (int)(sizeof(sim_ops_logic) / sizeof(sim_ops_logic[0]));

/*
 * test_sim_elem.c — the vectorized, pool-split paths of the elementwise and reduction
 * kernels against the plain per-element definition, on sizes that exercise every edge:
 * vector tails (1, 7, 8, 9 elements), runs long enough to be split over the pool (more
 * than two pieces of SIM_POOL_MAP_GRAIN), 1-element planes, and broadcasting on each axis.
 *
 * - Backward maps (Relu, LeakyRelu, Clip, HardSwish, HardSigmoid, Elu, Sigmoid): the
 *   gradient a training executable applies to x for loss = ReduceSum(op(x) * r) must equal,
 *   bit for bit, the scalar rule computed here with the same float operations.
 * - GlobalAveragePool and a whole-plane AveragePool (the sixteen-lane sum): within 2e-6
 *   relative of a double-precision mean and of ReduceMean; its gradient bit for bit.
 * - MaxPool's float 1-/2-D path (no Indices output) against the general one (with
 *   Indices): values bit for bit, and the training gradient against dy scattered to the
 *   general path's indices, on pads, strides, dilations, ceil_mode and ties.
 * - Add, Sub, Mul, Div with every broadcast pattern of a (N, C, H, W) tensor, in both
 *   operand orders, and equal shapes long enough to be cut into row segments: bit for bit
 *   the per-element result, and both operands' gradients bit for bit the terms added in
 *   output order.
 *
 * The pool is given three threads (IPUOF_SIM_THREADS, unless already set) so the split
 * paths run whatever the machine's core count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [lo, hi). */
static float
urand(float lo, float hi)
{
    return lo + (hi - lo) * test_urand01(&rng_state);
}

static float *
rand_vec(int64_t n, float lo, float hi)
{
    float *v = malloc((size_t)n * sizeof(float) + 4);

    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = urand(lo, hi);
    return v;
}

/* Loads b (freed) and compiles it with o; fails the test on an error. */
static struct sim_exe *
compile(struct sim_ob *b, const struct sim_compile_opts *o, struct sim_model **m)
{
    *m = test_ob_load(b);
    return test_compile_ok(*m, o);
}

/* Appends loss = ReduceSum(y * r) (r: a frozen weight the caller declares). */
static void
add_loss(struct sim_ob *b)
{
    sim_ob_node(b, "Mul", "weigh", "y,r", "yr");
    sim_ob_node(b, "ReduceSum", "total", "yr", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
}

/* Training options: the loss above, SGD with lr 0 (the weights never change), r frozen. */
static void
train_opts(struct sim_compile_opts *o)
{
    static const char *frozen[] = { "r" };

    sim_compile_opts_init(o);
    o->loss = "loss";
    sim_optimizer_init(&o->optimizer, SIM_OPT_SGD);
    o->optimizer.lr = 0.0f;
    o->frozen_weights = frozen;
    o->n_frozen_weights = 1;
}

/* ---- backward maps ---------------------------------------------------------------------- */

enum act { A_RELU, A_LEAKY, A_CLIP, A_HSWISH, A_HSIGMOID, A_ELU, A_SIGMOID };

static const char *const act_names[] = { "Relu", "LeakyRelu", "Clip", "HardSwish",
                                         "HardSigmoid", "Elu", "Sigmoid" };

/* The scalar rule: what dx[i] must be after one backward (dx starts at 0, dy = r). */
static float
want_grad(enum act a, float v, float r)
{
    float h, y;

    switch (a) {
    case A_RELU: return v > 0.0f ? r : 0.0f;
    case A_LEAKY: return v > 0.0f ? r : 0.1f * r;
    case A_CLIP: return v >= -0.5f && v <= 0.75f ? r : 0.0f;
    case A_HSWISH:
        h = 1.0f / 6.0f * v + 0.5f;
        return h < 0.0f ? 0.0f : h <= 1.0f ? r * (2.0f * (1.0f / 6.0f) * v + 0.5f) : r;
    case A_HSIGMOID:
        h = 0.2f * v + 0.5f;
        return h > 0.0f && h < 1.0f ? r * 0.2f : 0.0f;
    case A_ELU:
        y = 0.7f * expm1f(v);
        return v > 0.0f ? r : r * (y + 0.7f);
    default:
        return -1.0f;   /* Sigmoid: compared against y (1 - y) r below */
    }
}

/* loss = ReduceSum(act(x) * r) over n elements; checks d loss / dx. */
static void
check_act_grad(enum act a, int64_t n)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    float *x = rand_vec(n, -4.0f, 4.0f), *r = rand_vec(n, -1.0f, 1.0f);
    float *g = malloc((size_t)n * sizeof(float) + 4), lo = -0.5f, hi = 0.75f, *y = NULL;
    int64_t bad = 0;

    assert_non_null(g);
    sim_ob_initializer(b, "x", F32, 1, DIMS(n), x);
    sim_ob_initializer(b, "r", F32, 1, DIMS(n), r);
    if (a == A_CLIP) {
        sim_ob_initializer(b, "lo", F32, 0, NULL, &lo);
        sim_ob_initializer(b, "hi", F32, 0, NULL, &hi);
        sim_ob_node(b, "Clip", "act", "x,lo,hi", "y");
    } else {
        sim_ob_node(b, act_names[a], "act", "x", "y");
        if (a == A_LEAKY)
            sim_ob_attr_float(b, "alpha", 0.1f);
        if (a == A_ELU)
            sim_ob_attr_float(b, "alpha", 0.7f);
    }
    add_loss(b);
    if (a == A_SIGMOID)
        sim_ob_output(b, "y", F32);
    train_opts(&o);
    e = compile(b, &o, &m);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    assert_int_equal(sim_exe_read_gradient(e, "x", g, (size_t)n * sizeof(float), &err), 0);
    if (a == A_SIGMOID)
        y = (float *)sim_exe_output_buffer(e, (size_t)sim_exe_output_index(e, "y"));
    for (int64_t i = 0; i < n; i++) {
        float w = a == A_SIGMOID ? r[i] * y[i] * (1.0f - y[i]) : want_grad(a, x[i], r[i]);
        if (memcmp(&w, &g[i], sizeof(w)) != 0 && bad++ < 3)
            printf("  %s n=%lld: dx[%lld] = %.9g, want %.9g\n", act_names[a], (long long)n,
                   (long long)i, g[i], w);
    }
    assert_int_equal(bad, 0);
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
    free(r);
    free(g);
}

static void
test_backward_maps(void **state)
{
    static const int64_t sizes[] = { 1, 7, 8, 9, 40003 };

    (void)state;
    for (int a = A_RELU; a <= A_SIGMOID; a++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
            check_act_grad((enum act)a, sizes[s]);
        printf("  %s backward: bit for bit at n = 1, 7, 8, 9, 40003\n", act_names[a]);
    }
}

/* ---- whole-plane averages --------------------------------------------------------------- */

/* GlobalAveragePool of x (N, C, H, W) against a double mean, ReduceMean, and AveragePool
 * with the whole plane as its kernel. */
static void
check_mean(int64_t N, int64_t C, int64_t H, int64_t W, double *worst)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    int64_t planes = N * C, plane = H * W, axes[2] = { 2, 3 };
    float *x = rand_vec(planes * plane, -2.0f, 3.0f);
    const float *gap, *avg, *red;

    sim_ob_input(b, "x", F32, 4, DIMS(N, C, H, W));
    sim_ob_node(b, "GlobalAveragePool", "gap", "x", "g");
    sim_ob_node(b, "AveragePool", "avg", "x", "a");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(H, W), 2);
    sim_ob_node(b, "ReduceMean", "red", "x", "r");
    sim_ob_attr_ints(b, "axes", axes, 2);
    sim_ob_output(b, "g", F32);
    sim_ob_output(b, "a", F32);
    sim_ob_output(b, "r", F32);
    sim_compile_opts_init(&o);
    e = compile(b, &o, &m);
    memcpy(sim_exe_input_buffer(e, 0), x, (size_t)(planes * plane) * sizeof(float));
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    gap = sim_exe_output_buffer(e, 0);
    avg = sim_exe_output_buffer(e, 1);
    red = sim_exe_output_buffer(e, 2);
    for (int64_t pl = 0; pl < planes; pl++) {
        double s = 0.0, d;
        for (int64_t i = 0; i < plane; i++)
            s += x[pl * plane + i];
        s /= (double)plane;
        d = fabs(gap[pl] - s) / (1.0 + fabs(s));
        if (d > *worst)
            *worst = d;
        d = fabs(gap[pl] - red[pl]) / (1.0 + fabs(s));
        if (d > *worst)
            *worst = d;
        assert_memory_equal(&gap[pl], &avg[pl], sizeof(float));
    }
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
}

static void
test_global_average(void **state)
{
    double worst = 0.0;

    (void)state;
    check_mean(2, 3, 1, 1, &worst);
    check_mean(1, 2, 1, 7, &worst);
    check_mean(1, 2, 5, 7, &worst);
    check_mean(3, 5, 17, 9, &worst);
    check_mean(8, 40, 7, 7, &worst);
    check_mean(2, 3, 112, 112, &worst);
    printf("  GlobalAveragePool: max relative difference from the double mean and "
           "ReduceMean %.2e (limit 2e-6)\n", worst);
    assert_true(worst <= 2e-6);
}

/* d loss / dx of loss = ReduceSum(GlobalAveragePool(x) * r): r[plane] / plane size. */
static void
check_mean_grad(int64_t N, int64_t C, int64_t H, int64_t W)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    int64_t planes = N * C, plane = H * W;
    float *x = rand_vec(planes * plane, -1.0f, 1.0f), *r = rand_vec(planes, -1.0f, 1.0f);
    float *g = malloc((size_t)(planes * plane) * sizeof(float) + 4);

    assert_non_null(g);
    sim_ob_initializer(b, "x", F32, 4, DIMS(N, C, H, W), x);
    sim_ob_initializer(b, "r", F32, 4, DIMS(N, C, 1, 1), r);
    sim_ob_node(b, "GlobalAveragePool", "gap", "x", "y");
    add_loss(b);
    train_opts(&o);
    e = compile(b, &o, &m);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    assert_int_equal(sim_exe_read_gradient(e, "x", g, (size_t)(planes * plane) * sizeof(float),
                                           &err), 0);
    for (int64_t i = 0; i < planes * plane; i++) {
        float w = r[i / plane] / (float)plane;
        assert_memory_equal(&w, &g[i], sizeof(w));
    }
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
    free(r);
    free(g);
}

static void
test_global_average_grad(void **state)
{
    (void)state;
    check_mean_grad(2, 3, 1, 1);
    check_mean_grad(1, 3, 5, 7);
    check_mean_grad(4, 16, 33, 31);
    printf("  GlobalAveragePool backward: bit for bit (1x1, 5x7, 33x31 planes)\n");
}

/* ---- broadcast binary ops --------------------------------------------------------------- */

/* Two shapes of rank <= 4 broadcast against each other: the output's dims, each input's
 * element strides in them (0 where broadcast) and the element counts. */
struct bshape {
    int64_t od[4], sa[4], sb[4], na, nb, no;
};

static void
bshape_of(int ra, const int64_t *da, int rb, const int64_t *db, struct bshape *bs)
{
    int64_t fa[4], fb[4];

    bs->na = bs->nb = bs->no = 1;
    for (int k = 0; k < 4; k++) {
        fa[k] = k - (4 - ra) >= 0 ? da[k - (4 - ra)] : 1;
        fb[k] = k - (4 - rb) >= 0 ? db[k - (4 - rb)] : 1;
        bs->od[k] = fa[k] > fb[k] ? fa[k] : fb[k];
    }
    for (int k = 3; k >= 0; k--) {
        bs->sa[k] = fa[k] == 1 ? 0 : bs->na;
        bs->sb[k] = fb[k] == 1 ? 0 : bs->nb;
        bs->na *= fa[k];
        bs->nb *= fb[k];
        bs->no *= bs->od[k];
    }
}

/* The elements of a (*ia) and b (*ib) that output element i reads. */
static void
bshape_at(const struct bshape *bs, int64_t i, int64_t *ia, int64_t *ib)
{
    *ia = *ib = 0;
    for (int k = 3; k >= 0; k--) {
        *ia += (i % bs->od[k]) * bs->sa[k];
        *ib += (i % bs->od[k]) * bs->sb[k];
        i /= bs->od[k];
    }
}

/* a (shape da, rank ra) op b (db, rb), numpy broadcasting to rank 4 at most; the result
 * must equal the per-element operation bit for bit. */
static void
check_binary(const char *op, int ra, const int64_t *da, int rb, const int64_t *db)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    struct bshape bs;
    float *x, *y;
    const float *out;
    int64_t bad = 0;

    bshape_of(ra, da, rb, db, &bs);
    x = rand_vec(bs.na, -2.0f, 2.0f);
    y = rand_vec(bs.nb, 0.5f, 2.0f);
    sim_ob_input(b, "a", F32, ra, da);
    sim_ob_input(b, "b", F32, rb, db);
    sim_ob_node(b, op, "n", "a,b", "y");
    sim_ob_output(b, "y", F32);
    sim_compile_opts_init(&o);
    e = compile(b, &o, &m);
    memcpy(sim_exe_input_buffer(e, 0), x, (size_t)bs.na * sizeof(float));
    memcpy(sim_exe_input_buffer(e, 1), y, (size_t)bs.nb * sizeof(float));
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    out = sim_exe_output_buffer(e, 0);
    for (int64_t i = 0; i < bs.no; i++) {
        int64_t ia, ib;
        float p, q, w;
        bshape_at(&bs, i, &ia, &ib);
        p = x[ia];
        q = y[ib];
        w = op[0] == 'A' ? p + q : op[0] == 'S' ? p - q : op[0] == 'M' ? p * q : p / q;
        if (memcmp(&w, &out[i], sizeof(w)) != 0 && bad++ < 3)
            printf("  %s: y[%lld] = %.9g, want %.9g\n", op, (long long)i, out[i], w);
    }
    assert_int_equal(bad, 0);
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
    free(y);
}

/* The gradients of a and b for loss = ReduceSum((a op b) * r): each element of da and db
 * must be the sum of its terms added in output order, with the rule's float operations. */
static void
check_binary_grad(const char *op, int ra, const int64_t *da, int rb, const int64_t *db)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    struct bshape bs;
    float *x, *y, *r, *ga, *gb, *wa, *wb;

    bshape_of(ra, da, rb, db, &bs);
    x = rand_vec(bs.na, -2.0f, 2.0f);
    y = rand_vec(bs.nb, 0.5f, 2.0f);
    r = rand_vec(bs.no, -1.0f, 1.0f);
    ga = malloc((size_t)bs.na * sizeof(float) + 4);
    gb = malloc((size_t)bs.nb * sizeof(float) + 4);
    wa = calloc((size_t)bs.na, sizeof(float));
    wb = calloc((size_t)bs.nb, sizeof(float));
    assert_true(ga != NULL && gb != NULL && wa != NULL && wb != NULL);
    sim_ob_initializer(b, "a", F32, ra, da, x);
    sim_ob_initializer(b, "b", F32, rb, db, y);
    sim_ob_initializer(b, "r", F32, 4, bs.od, r);
    sim_ob_node(b, op, "n", "a,b", "y");
    add_loss(b);
    train_opts(&o);
    e = compile(b, &o, &m);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    assert_int_equal(sim_exe_read_gradient(e, "a", ga, (size_t)bs.na * sizeof(float), &err), 0);
    assert_int_equal(sim_exe_read_gradient(e, "b", gb, (size_t)bs.nb * sizeof(float), &err), 0);
    for (int64_t i = 0; i < bs.no; i++) {
        int64_t ia, ib;
        float g = r[i], p, q;
        bshape_at(&bs, i, &ia, &ib);
        p = x[ia];
        q = y[ib];
        switch (op[0]) {
        case 'A': wa[ia] += g; wb[ib] += 1.0f * g; break;
        case 'S': wa[ia] += g; wb[ib] += -1.0f * g; break;
        case 'M': wa[ia] += g * q; wb[ib] += g * p; break;
        default: wa[ia] += g / q; wb[ib] -= g * p / (q * q); break;
        }
    }
    assert_memory_equal(ga, wa, (size_t)bs.na * sizeof(float));
    assert_memory_equal(gb, wb, (size_t)bs.nb * sizeof(float));
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
    free(y);
    free(r);
    free(ga);
    free(gb);
    free(wa);
    free(wb);
}

static void
test_broadcast_binary(void **state)
{
    static const char *const ops[] = { "Add", "Sub", "Mul", "Div" };
    const int64_t big[4] = { 2, 3, 97, 131 };
    const int64_t *shapes[] = { DIMS(2, 3, 97, 131), DIMS(2, 3, 1, 1), DIMS(1, 3, 1, 1),
                                DIMS(2, 1, 97, 131), DIMS(1, 1, 1, 131), DIMS(2, 1, 1, 1),
                                DIMS(1, 3, 97, 1), DIMS(1, 1, 1, 1) };

    (void)state;
    for (size_t o = 0; o < 4; o++) {
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            check_binary(ops[o], 4, big, 4, shapes[s]);
            check_binary(ops[o], 4, shapes[s], 4, big);
        }
        check_binary(ops[o], 1, DIMS(1), 4, big);                  /* a scalar first */
        check_binary(ops[o], 2, DIMS(3, 40000), 2, DIMS(3, 1));    /* long rows, ib 0 */
        check_binary(ops[o], 2, DIMS(1, 40000), 2, DIMS(2, 40000)); /* long rows, ia 0 */
        check_binary(ops[o], 1, DIMS(70001), 1, DIMS(70001));      /* one row, cut */
        check_binary(ops[o], 2, DIMS(1, 9), 2, DIMS(1, 9));        /* tails */
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            check_binary_grad(ops[o], 4, big, 4, shapes[s]);
            check_binary_grad(ops[o], 4, shapes[s], 4, big);
        }
        check_binary_grad(ops[o], 2, DIMS(3, 40000), 2, DIMS(3, 1));
        check_binary_grad(ops[o], 2, DIMS(1, 40000), 2, DIMS(2, 40000));
        check_binary_grad(ops[o], 1, DIMS(70001), 1, DIMS(70001));
        check_binary_grad(ops[o], 2, DIMS(1, 9), 2, DIMS(1, 9));
        printf("  %s: values and both gradients bit for bit over %zu broadcast patterns in "
               "both orders, long rows cut into segments, tails\n", ops[o],
               sizeof(shapes) / sizeof(shapes[0]));
    }
}

/* ---- MaxPool ----------------------------------------------------------------------------- */

struct mp_case {
    int64_t n, c, h, w;             /* h 0: 1-D pooling over w */
    int64_t k[2], s[2], d[2], pads[4], ceil;
};

/* Adds MaxPool node `name` of case mc reading x, writing outs ("y" or "y,ind"). */
static void
mp_node(struct sim_ob *b, const struct mp_case *mc, const char *name, const char *outs)
{
    int nsp = mc->h > 0 ? 2 : 1;
    int64_t pads[4] = { mc->pads[0], mc->pads[1], mc->pads[2], mc->pads[3] };

    if (nsp == 1) {
        pads[0] = mc->pads[1];
        pads[1] = mc->pads[3];
    }
    sim_ob_node(b, "MaxPool", name, "x", outs);
    sim_ob_attr_ints(b, "kernel_shape", mc->k + 2 - nsp, (size_t)nsp);
    sim_ob_attr_ints(b, "strides", mc->s + 2 - nsp, (size_t)nsp);
    sim_ob_attr_ints(b, "dilations", mc->d + 2 - nsp, (size_t)nsp);
    sim_ob_attr_ints(b, "pads", pads, 2 * (size_t)nsp);
    sim_ob_attr_int(b, "ceil_mode", mc->ceil);
}

/* Values on a coarse grid, so windows hold ties (the first maximum must win). */
static float *
tie_vec(int64_t n)
{
    float *v = rand_vec(n, -3.0f, 3.0f);

    for (int64_t i = 0; i < n; i++)
        v[i] = floorf(v[i] * 2.0f) * 0.5f;
    return v;
}

/*
 * MaxPool without an Indices output (the float 1-/2-D path) against MaxPool with one (the
 * general path): the same values bit for bit; then the gradient of a training MaxPool (the
 * saved maxima) against dy scattered to the general path's indices.
 */
static void
check_maxpool(const struct mp_case *mc)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e, *t;
    struct sim_err err;
    int rank = mc->h > 0 ? 4 : 3, dtype, orank;
    int64_t xd[4] = { mc->n, mc->c, mc->h > 0 ? mc->h : mc->w, mc->w }, od[4], nx, ny = 1;
    float *x, *r, *g, *want;
    const float *y1, *y2;
    const int64_t *ind;

    nx = mc->n * mc->c * (mc->h > 0 ? mc->h : 1) * mc->w;
    x = tie_vec(nx);
    sim_ob_input(b, "x", F32, rank, xd);
    mp_node(b, mc, "fast", "y1");
    mp_node(b, mc, "general", "y2,ind");
    sim_ob_output(b, "y1", F32);
    sim_ob_output(b, "y2", F32);
    sim_ob_output(b, "ind", SIM_DTYPE_INT64);
    sim_compile_opts_init(&o);
    e = compile(b, &o, &m);
    assert_int_equal(sim_exe_tensor_info(e, "y1", &dtype, &orank, od), 0);
    for (int i = 0; i < orank; i++)
        ny *= od[i];
    memcpy(sim_exe_input_buffer(e, 0), x, (size_t)nx * sizeof(float));
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    y1 = sim_exe_output_buffer(e, 0);
    y2 = sim_exe_output_buffer(e, 1);
    ind = sim_exe_output_buffer(e, 2);
    assert_memory_equal(y1, y2, (size_t)ny * sizeof(float));

    r = rand_vec(ny, -1.0f, 1.0f);
    want = calloc((size_t)nx, sizeof(float));
    g = malloc((size_t)nx * sizeof(float) + 4);
    assert_non_null(want);
    assert_non_null(g);
    for (int64_t i = 0; i < ny; i++)
        if (y2[i] > -INFINITY)
            want[ind[i]] += r[i];
    b = sim_ob_new(17);
    sim_ob_initializer(b, "x", F32, rank, xd, x);
    sim_ob_initializer(b, "r", F32, orank, od, r);
    mp_node(b, mc, "fast", "y");
    add_loss(b);
    train_opts(&o);
    sim_exe_free(e);
    sim_model_free(m);
    t = compile(b, &o, &m);
    if (sim_exe_run(t, &err) != 0)
        fail_msg("run: %s", err.msg);
    assert_int_equal(sim_exe_read_gradient(t, "x", g, (size_t)nx * sizeof(float), &err), 0);
    assert_memory_equal(g, want, (size_t)nx * sizeof(float));
    sim_exe_free(t);
    sim_model_free(m);
    free(x);
    free(r);
    free(g);
    free(want);
}

static void
test_maxpool(void **state)
{
    static const struct mp_case cases[] = {
        { 2, 3, 17, 19, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 1, 1, 1, 1 }, 0 },  /* resnet stem */
        { 1, 2, 9, 13, { 3, 2 }, { 1, 3 }, { 1, 1 }, { 0, 1, 2, 0 }, 1 },
        { 2, 2, 11, 12, { 2, 3 }, { 2, 2 }, { 2, 2 }, { 1, 2, 0, 1 }, 0 },
        { 1, 1, 5, 40, { 5, 5 }, { 1, 1 }, { 1, 1 }, { 2, 2, 2, 2 }, 0 },
        { 1, 3, 4, 4, { 4, 4 }, { 1, 1 }, { 1, 1 }, { 0, 0, 0, 0 }, 0 },    /* one output */
        { 1, 2, 3, 2, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 1, 1, 1, 1 }, 1 },    /* W < kernel */
        { 3, 2, 0, 29, { 1, 3 }, { 1, 2 }, { 1, 2 }, { 0, 1, 0, 2 }, 1 },   /* 1-D */
        { 2, 3, 9, 70, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 1, 1, 1, 1 }, 0 },   /* 8 at once */
        { 1, 2, 7, 71, { 3, 3 }, { 2, 2 }, { 1, 1 }, { 1, 1, 1, 1 }, 1 },
        { 1, 2, 6, 53, { 2, 4 }, { 1, 1 }, { 1, 1 }, { 0, 1, 1, 2 }, 0 },
        { 1, 1, 5, 90, { 3, 3 }, { 3, 3 }, { 1, 1 }, { 1, 1, 1, 1 }, 0 },   /* stride 3 */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_maxpool(&cases[i]);
    printf("  MaxPool (1-D, 2-D; pads, strides, dilations, ceil_mode, ties): values and "
           "training gradients bit for bit those of the general path, %zu cases\n",
           sizeof(cases) / sizeof(cases[0]));
}

/* ai.graphcore Detach: y = x + Detach(x) is 2x forward, but d loss / dx is r (not 2r). */
static void
test_detach(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    struct sim_compile_opts o;
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    const int64_t n = 37;
    float *x = rand_vec(n, -4.0f, 4.0f), *r = rand_vec(n, -1.0f, 1.0f), g[37];
    const float *y;

    (void)state;
    sim_ob_initializer(b, "x", F32, 1, DIMS(n), x);
    sim_ob_initializer(b, "r", F32, 1, DIMS(n), r);
    sim_ob_node(b, "Detach", "stop", "x", "xd");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_node(b, "Add", "sum", "x,xd", "y");
    add_loss(b);
    sim_ob_output(b, "y", F32);
    train_opts(&o);
    e = compile(b, &o, &m);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    y = (const float *)sim_exe_output_buffer(e, (size_t)sim_exe_output_index(e, "y"));
    assert_int_equal(sim_exe_read_gradient(e, "x", g, sizeof g, &err), 0);
    for (int64_t i = 0; i < n; i++) {
        assert_float_equal(y[i], 2.0f * x[i], 0.0f);
        assert_float_equal(g[i], r[i], 0.0f);
    }
    sim_exe_free(e);
    sim_model_free(m);
    free(x);
    free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_maps),
        cmocka_unit_test(test_global_average),
        cmocka_unit_test(test_global_average_grad),
        cmocka_unit_test(test_broadcast_binary),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_detach),
    };

    setenv("IPUOF_SIM_THREADS", "3", 0);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

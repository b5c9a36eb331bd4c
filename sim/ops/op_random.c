/*
 * op_random.c — ONNX's random generators, forward only (no input carries a gradient):
 * RandomUniform and RandomNormal (the shape attribute) and RandomUniformLike and
 * RandomNormalLike (the shape of input 0, whose values are not read). What torch.rand,
 * torch.randn, torch.normal, torch.distributions' sample() and Tensor.normal_ /
 * Tensor.uniform_ inside a PopTorch model export.
 *
 * Attributes: low / high (0, 1) or mean / scale (0, 1); dtype float (1) or float16 (10):
 * RandomUniform / RandomNormal default to float, the Like ops to input 0's dtype (which
 * must then be a float type); seed (optional).
 * Draws: each node draws from its own generator (k->rng), seeded for each micro-batch
 * from the executable's seed (PopTorch's Options.randomSeed / poptorch.manualSeed, see
 * sim_exec_seed), the replica and the node, so one seed gives the same values on every
 * run of a fresh executable and on every ISA (integer arithmetic and correctly rounded
 * double operations only: sqrt, log, cos of glibc's libm as the IEEE rounding of the
 * double result makes no ISA-dependent choice here). A seed attribute fixes the draws of
 * the node: the same values at every micro-batch and run, as ONNX runtimes give them.
 * Uniform: u = (53 random bits) 2^-53 in [0, 1), y = low + (high - low) u. Normal:
 * Box-Muller on two such draws (1 - u1 in (0, 1]), y = mean + scale sqrt(-2 ln(1 - u1))
 * cos(2 pi u2). float16 outputs are the float results rounded to nearest even.
 * Does not: double outputs, gradients (none flow: PyTorch's samples are not
 * differentiable either).
 */
#include <math.h>
#include <string.h>

#include "half.h"
#include "ops.h"
#include "rng.h"

struct rand_params {
    bool normal;
    float a, b;                     /* low, high or mean, scale */
    bool fixed;                     /* a seed attribute was given */
    uint64_t seed;                  /* the attribute's bits, when fixed */
};

static int
rand_dtype(struct sim_infer *c, int64_t def, int *dtype)
{
    int64_t dt;
    int rc = sim_ia_int(c, "dtype", def, &dt);

    if (rc != 0)
        return rc;
    if (dt == SIM_DTYPE_FLOAT || dt == SIM_DTYPE_FLOAT16) {
        *dtype = (int)dt;
        return 0;
    }
    if (dt == 11)
        return sim_infer_unsupported(c, "dtype double (11): the IPU has no float64; "
                                     "supported: float (1), float16 (10)");
    return sim_infer_fail(c, IPUOF_E_INVAL, "dtype %lld is not a float type (supported: "
                          "float (1), float16 (10))", (long long)dt);
}

/* Common attributes; like: the shape is input 0's, else the shape attribute's. */
static int
infer_random(struct sim_infer *c, bool normal, bool like)
{
    struct rand_params *p = sim_params(c, sizeof(*p));
    struct sim_shape o = { 0 };
    const struct sim_attr *sa = sim_attr_find(c->mn, "seed");
    int dtype = SIM_DTYPE_FLOAT, rc;

    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->normal = normal;
    rc = sim_ia_float(c, normal ? "mean" : "low", 0.0f, &p->a);
    if (rc == 0)
        rc = sim_ia_float(c, normal ? "scale" : "high", 1.0f, &p->b);
    if (rc != 0)
        return rc;
    if (!isfinite(p->a) || !isfinite(p->b) || (!normal && p->b < p->a) ||
        (normal && p->b < 0.0f))
        return sim_infer_fail(c, IPUOF_E_INVAL, normal ? "mean %g and scale %g must be "
                              "finite, scale >= 0" : "low %g and high %g must be finite, "
                              "low <= high", (double)p->a, (double)p->b);
    if (sa != NULL) {
        float f;
        if (sa->type != SIM_ATTR_FLOAT)
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'seed' must be a float");
        f = sa->f;
        memcpy(&p->seed, &f, sizeof(f));
        p->seed = p->seed * 0x9e3779b97f4a7c15ull + 0x6a09e667f3bcc909ull;
        p->fixed = true;
    }
    if (like) {
        int def = c->in[0]->dtype;
        if (sim_attr_find(c->mn, "dtype") == NULL && def != SIM_DTYPE_FLOAT &&
            def != SIM_DTYPE_FLOAT16)
            return sim_infer_fail(c, IPUOF_E_INVAL, "input 0 is %s and no dtype is given: "
                                  "the output takes the input's dtype, which must be float "
                                  "or float16 (or set dtype)", sim_dtype_name(def));
        rc = rand_dtype(c, def, &dtype);
        o = c->in[0]->shape;
    } else {
        const int64_t *d;
        int n;
        rc = sim_ia_ints(c, "shape", &d, &n);
        if (rc == 0 && n < 0)
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'shape' is required");
        if (rc == 0 && n > SIM_MAX_RANK)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "shape has %d dims, more than %d", n,
                                  SIM_MAX_RANK);
        for (int i = 0; rc == 0 && i < n; i++) {
            if (d[i] < 0)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "shape value %lld is negative",
                                      (long long)d[i]);
            o.d[i] = d[i];
        }
        o.rank = n;
        if (rc == 0)
            rc = rand_dtype(c, SIM_DTYPE_FLOAT, &dtype);
    }
    if (rc != 0)
        return rc;
    return sim_set_out(c, 0, dtype, &o);
}

static int infer_ru(struct sim_infer *c) { return infer_random(c, false, false); }
static int infer_rn(struct sim_infer *c) { return infer_random(c, true, false); }
static int infer_rul(struct sim_infer *c) { return infer_random(c, false, true); }
static int infer_rnl(struct sim_infer *c) { return infer_random(c, true, true); }

/* y: the output's shape, float or float16 (written as halves) */
static int
fwd_random(const struct sim_kern *k, struct sim_err *err)
{
    const struct rand_params *p = k->params;
    uint64_t local = p->seed, *s = p->fixed || k->rng == NULL ? &local : k->rng;
    int64_t n = k->out[0].numel;
    bool half = k->out[0].dtype == SIM_DTYPE_FLOAT16;
    void *y = k->out[0].data;

    (void)err;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (p->normal) {
            double u1 = 1.0 - sim_rand_unit(s), u2 = sim_rand_unit(s);
            v = p->a + p->b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        } else {
            v = p->a + ((double)p->b - p->a) * sim_rand_unit(s);
        }
        if (half)
            ((uint16_t *)y)[i] = sim_half_from_float((float)v);
        else
            ((float *)y)[i] = (float)v;
    }
    return 0;
}

#define CODE_RAND 2048u

const struct sim_op sim_ops_random[] = {
    { "RandomUniform", 1, 0, 0, 1, 1, 0u, SIM_OPF_NOFOLD | SIM_OPF_RANDOM, CODE_RAND,
      infer_ru, fwd_random, NULL, 0u, NULL },
    { "RandomNormal", 1, 0, 0, 1, 1, 0u, SIM_OPF_NOFOLD | SIM_OPF_RANDOM, CODE_RAND,
      infer_rn, fwd_random, NULL, 0u, NULL },
    { "RandomUniformLike", 1, 1, 1, 1, 1, 0u, SIM_OPF_NOFOLD | SIM_OPF_RANDOM, CODE_RAND,
      infer_rul, fwd_random, NULL, 0u, NULL },
    { "RandomNormalLike", 1, 1, 1, 1, 1, 0u, SIM_OPF_NOFOLD | SIM_OPF_RANDOM, CODE_RAND,
      infer_rnl, fwd_random, NULL, 0u, NULL },
};

const int sim_ops_random_count = (int)(sizeof(sim_ops_random) / sizeof(sim_ops_random[0]));

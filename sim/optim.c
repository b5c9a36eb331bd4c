/*
 * optim.c — the optimizers of training executables, with torch.optim's definitions and
 * defaults, as flat loops over the trainable floats (every trainable weight lives in one
 * buffer, e->params[0 .. n_train), with its reduced gradient in e->tr->grads[0 .. n_train)).
 *
 * Does: defaults and range checks (the checks torch.optim's constructors make, plus eps > 0),
 * one optimizer step, changing hyper-parameters between runs (PopTorch's setOptimizer), and
 * restarting the random generators. The update is split over the host thread pool.
 * Does not: reduce gradients (train.c) or plan optimizer state (plan.c accounts for it,
 * train.c allocates it).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exe.h"
#include "hot.h"
#include "pool.h"

static const char *
kind_name(int kind)
{
    switch (kind) {
    case SIM_OPT_SGD: return "SGD";
    case SIM_OPT_ADAM: return "Adam";
    case SIM_OPT_ADAMW: return "AdamW";
    default: return "unknown";
    }
}

int
sim_optimizer_init(struct sim_optimizer *o, int kind)
{
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->lr = 1e-3f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    switch (kind) {
    case SIM_OPT_SGD:
    case SIM_OPT_ADAM:
        return 0;
    case SIM_OPT_ADAMW:
        o->weight_decay = 1e-2f;
        return 0;
    default:
        return IPUOF_E_INVAL;
    }
}

int
sim_optimizer_check(const struct sim_optimizer *o, struct sim_err *err)
{
    const char *k = kind_name(o->kind);

    if (o->kind != SIM_OPT_SGD && o->kind != SIM_OPT_ADAM && o->kind != SIM_OPT_ADAMW)
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer kind %d is not SGD (%d), Adam (%d) "
                           "or AdamW (%d)", o->kind, SIM_OPT_SGD, SIM_OPT_ADAM, SIM_OPT_ADAMW);
    if (!(o->lr >= 0.0f) || isinf(o->lr))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid learning rate %g (lr "
                           "must be >= 0 and finite)", k, (double)o->lr);
    if (!(o->weight_decay >= 0.0f) || isinf(o->weight_decay))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid weight_decay %g (must "
                           "be >= 0 and finite)", k, (double)o->weight_decay);
    if (o->kind == SIM_OPT_SGD) {
        if (!(o->momentum >= 0.0f) || isinf(o->momentum))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer SGD: invalid momentum %g (must "
                               "be >= 0 and finite)", (double)o->momentum);
        if (!isfinite(o->dampening))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer SGD: dampening %g is not "
                               "finite", (double)o->dampening);
        if (o->nesterov && (o->momentum <= 0.0f || o->dampening != 0.0f))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer SGD: Nesterov momentum requires "
                               "a momentum > 0 and zero dampening (momentum %g, dampening %g)",
                               (double)o->momentum, (double)o->dampening);
        return 0;
    }
    if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid beta1 %g (must be in "
                           "[0, 1))", k, (double)o->beta1);
    if (!(o->beta2 >= 0.0f && o->beta2 < 1.0f))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid beta2 %g (must be in "
                           "[0, 1))", k, (double)o->beta2);
    if (!(o->eps > 0.0f) || isinf(o->eps))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid eps %g (must be > 0 "
                           "and finite)", k, (double)o->eps);
    return 0;
}

/* One optimizer step's constants, shared by the pieces of the update (split over the pool;
 * every element is independent, so the result does not depend on the split). */
struct step_run {
    float *p, *m, *v;
    const float *grad;
    float lr, wd, mu, damp, b1, b2, eps, step_size, bc2_sqrt, decay;
    bool first, nesterov, decoupled;
};

/*
 * SGD, https://pytorch.org/docs/stable/generated/torch.optim.SGD.html:
 *   g = grad + weight_decay * p
 *   if momentum != 0: b = g on the first step, else momentum * b + (1 - dampening) * g;
 *                     g = g + momentum * b if nesterov else b
 *   p = p - lr * g
 */
SIM_HOT_FN(sgd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct step_run *s = ctx;
    float *p = s->p, *b = s->m;
    const float *grad = s->grad;

    for (int64_t i = lo; i < hi; i++) {
        float g = grad[i];
        if (s->wd != 0.0f)
            g += s->wd * p[i];
        if (s->mu != 0.0f && b != NULL) {
            b[i] = s->first ? g : s->mu * b[i] + s->damp * g;
            g = s->nesterov ? g + s->mu * b[i] : b[i];
        }
        p[i] -= s->lr * g;
    }
}

static void
step_sgd(struct sim_exe *e)
{
    const struct sim_optimizer *o = &e->tr->opt;
    struct step_run s = { .p = e->params, .m = e->tr->mom1, .grad = e->tr->grads,
                          .lr = o->lr, .wd = o->weight_decay, .mu = o->momentum,
                          .damp = 1.0f - o->dampening, .first = !e->tr->mom_started,
                          .nesterov = o->nesterov };

    sim_pool_for((int64_t)e->n_train, SIM_POOL_MAP_GRAIN, sgd_piece, &s);
    if (s.mu != 0.0f && s.m != NULL)
        e->tr->mom_started = true;
}

/*
 * Adam, https://pytorch.org/docs/stable/generated/torch.optim.Adam.html, and AdamW,
 * https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html (t = step count):
 *   Adam:  g = grad + weight_decay * p          AdamW: p = p - lr * weight_decay * p
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g^2
 *   p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 * computed as torch.optim's implementation does: step size lr / (1 - beta1^t), and
 * denominator sqrt(v) / sqrt(1 - beta2^t) + eps.
 */
SIM_HOT_FN(adam_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct step_run *s = ctx;
    float *p = s->p, *m = s->m, *v = s->v;
    const float *grad = s->grad;

    for (int64_t i = lo; i < hi; i++) {
        float g = grad[i], denom;
        if (s->decoupled)
            p[i] *= s->decay;
        else if (s->wd != 0.0f)
            g += s->wd * p[i];
        m[i] = m[i] * s->b1 + g * (1.0f - s->b1);
        v[i] = v[i] * s->b2 + g * g * (1.0f - s->b2);
        denom = sqrtf(v[i]) / s->bc2_sqrt + s->eps;
        p[i] -= s->step_size * m[i] / denom;
    }
}

static void
step_adam(struct sim_exe *e, bool decoupled)
{
    const struct sim_optimizer *o = &e->tr->opt;
    double t = (double)e->tr->steps;
    struct step_run s = { .p = e->params, .m = e->tr->mom1, .v = e->tr->mom2,
                          .grad = e->tr->grads, .wd = o->weight_decay, .b1 = o->beta1,
                          .b2 = o->beta2, .eps = o->eps,
                          .step_size = (float)((double)o->lr / (1.0 - pow(o->beta1, t))),
                          .bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t)),
                          .decay = 1.0f - o->lr * o->weight_decay, .decoupled = decoupled };

    sim_pool_for((int64_t)e->n_train, SIM_POOL_MAP_GRAIN, adam_piece, &s);
}

void
sim_optim_step(struct sim_exe *e)
{
    e->tr->steps++;
    switch (e->tr->opt.kind) {
    case SIM_OPT_SGD: step_sgd(e); break;
    case SIM_OPT_ADAM: step_adam(e, false); break;
    case SIM_OPT_ADAMW: step_adam(e, true); break;
    default: break;
    }
}

/* Takes e->busy for a call that must not overlap a run. */
static int
lock(struct sim_exe *e, struct sim_err *err)
{
    int expected = 0;

    if (!atomic_compare_exchange_strong(&e->busy, &expected, 1))
        return sim_err_set(err, IPUOF_E_BUSY, "the executable is running");
    return 0;
}

int
sim_exe_set_optimizer(struct sim_exe *e, const struct sim_optimizer *o, struct sim_err *err)
{
    int rc;

    if (e->tr == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "not a training executable (compile with a "
                           "loss to train)");
    rc = sim_optimizer_check(o, err);
    if (rc != 0)
        return rc;
    if (o->kind != e->tr->opt.kind)
        return sim_err_set(err, IPUOF_E_INVAL, "the executable was compiled for %s; switching "
                           "to %s needs a new compile (its state is planned at compile time)",
                           kind_name(e->tr->opt.kind), kind_name(o->kind));
    if (o->kind == SIM_OPT_SGD && o->momentum != 0.0f && e->tr->mom1 == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "SGD was compiled without momentum, so no "
                           "momentum buffer was planned; compile with a non-zero momentum to "
                           "change it later");
    rc = lock(e, err);
    if (rc != 0)
        return rc;
    e->tr->opt = *o;
    atomic_store(&e->busy, 0);
    return 0;
}

int
sim_exe_get_optimizer(const struct sim_exe *e, struct sim_optimizer *o)
{
    if (e->tr == NULL)
        return IPUOF_E_INVAL;
    *o = e->tr->opt;
    return 0;
}

uint64_t
sim_exe_optimizer_steps(const struct sim_exe *e)
{
    return e->tr != NULL ? e->tr->steps : 0;
}

int
sim_exe_set_seed(struct sim_exe *e, uint64_t seed, struct sim_err *err)
{
    int rc = lock(e, err);

    if (rc != 0)
        return rc;
    e->seed = seed;
    e->mb_done = 0;     /* the generators restart from the first micro-batch */
    atomic_store(&e->busy, 0);
    return 0;
}

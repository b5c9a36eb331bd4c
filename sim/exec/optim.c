/*
 * optim.c — the optimizers of training executables, with PopTorch's definitions (which are
 * torch.optim's for SGD, Adam, AdamW and RMSprop) and defaults, as flat loops over each
 * trainable weight's floats (every trainable weight lives in one buffer,
 * e->params[0 .. n_train), with its reduced gradient in e->tr->grads[0 .. n_train)).
 *
 * Does: defaults and range checks (the checks torch.optim's constructors make, plus eps > 0),
 * clipping by the global gradient norm, one optimizer step with each weight's parameter
 * group's hyper-parameters. The element-wise updates are split over the host thread pool;
 * LAMB's per-weight norms are summed in double, serially, so the result never depends on
 * the split.
 * Does not: reduce gradients (train.c), plan optimizer state (plan.c accounts for it), or
 * allocate, resolve groups, read or write the state (optim_state.c).
 *
 * Loss scaling and velocity scaling (PopTorch's loss_scaling, velocity_scaling) exist for
 * float16 arithmetic: the loss's gradient is multiplied by loss_scaling and the update
 * divides it out again, and SGD's velocity is kept multiplied by velocity_scaling and
 * divided out when applied. With float32 state both cancel: they are checked (> 0,
 * finite) and change no number, as on the IPU in float32. A state kept in float16
 * (accum_half, first_half, second_half: PopTorch's accumulator dtypes) is rounded to
 * float16 after every update, stored scaled as the IPU stores it (the accumulated gradient
 * times loss_scaling, SGD's velocity times velocity_scaling), so there the scalings decide
 * what underflows or overflows, as they do on an IPU.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exe.h"
#include "half.h"
#include "hot.h"
#include "optim_internal.h"
#include "pool.h"

const char *
sim_optim_kind_name(int kind)
{
    switch (kind) {
    case SIM_OPT_SGD: return "SGD";
    case SIM_OPT_ADAM: return "Adam";
    case SIM_OPT_ADAMW: return "AdamW";
    case SIM_OPT_RMSPROP: return "RMSprop";
    case SIM_OPT_LAMB: return "LAMB";
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
    o->alpha = 0.99f;
    o->bias_correction = 1;
    o->loss_scaling = 1.0f;
    o->velocity_scaling = 1.0f;
    o->als_period = 1;          /* PopART's AutomaticLossScalingSettings defaults */
    o->als_bin_edge = 0.125f;
    o->als_threshold = 1e-7f;
    switch (kind) {
    case SIM_OPT_SGD:
    case SIM_OPT_ADAM:
        return 0;
    case SIM_OPT_ADAMW:
        o->weight_decay = 1e-2f;
        return 0;
    case SIM_OPT_RMSPROP:
        o->lr = 1e-2f;
        return 0;
    case SIM_OPT_LAMB:
        o->weight_decay = 1e-2f;
        o->max_weight_norm = 65500.0f;
        return 0;
    default:
        return IPUOF_E_INVAL;
    }
}

void
sim_optim_hyper(const struct sim_optimizer *o, int g, struct sim_opt_hyper *h)
{
    if (g <= 0 || g > o->n_groups) {
        *h = (struct sim_opt_hyper){ o->lr, o->weight_decay, o->momentum, o->dampening,
                                     o->beta1, o->beta2, o->eps, o->alpha, o->nesterov != 0 };
        return;
    }
    const struct sim_opt_group *p = &o->groups[g - 1];
    *h = (struct sim_opt_hyper){ p->lr, p->weight_decay, p->momentum, p->dampening, p->beta1,
                                 p->beta2, p->eps, p->alpha, p->nesterov != 0 };
}

/* Checks the hyper-parameters of group g (0: the top-level ones) of an optimizer of kind. */
static int
check_hyper(int kind, int g, const struct sim_opt_hyper *h, struct sim_err *err)
{
    const char *k = sim_optim_kind_name(kind);
    char grp[32] = "";

    if (g > 0)
        snprintf(grp, sizeof grp, " (parameter group %d)", g);
    if (!(h->lr >= 0.0f) || isinf(h->lr))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s%s: invalid learning rate %g (lr "
                           "must be >= 0 and finite)", k, grp, (double)h->lr);
    if (!(h->wd >= 0.0f) || isinf(h->wd))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s%s: invalid weight_decay %g (must "
                           "be >= 0 and finite)", k, grp, (double)h->wd);
    if (kind == SIM_OPT_SGD || kind == SIM_OPT_RMSPROP) {
        if (!(h->mu >= 0.0f) || isinf(h->mu))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s%s: invalid momentum %g (must "
                               "be >= 0 and finite)", k, grp, (double)h->mu);
    }
    if (kind == SIM_OPT_SGD) {
        if (!isfinite(h->damp))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer SGD%s: dampening %g is not "
                               "finite", grp, (double)h->damp);
        if (h->nesterov && (h->mu <= 0.0f || h->damp != 0.0f))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer SGD%s: Nesterov momentum "
                               "requires a momentum > 0 and zero dampening (momentum %g, "
                               "dampening %g)", grp, (double)h->mu, (double)h->damp);
        return 0;
    }
    if (kind == SIM_OPT_RMSPROP) {
        /* torch.optim.RMSprop checks alpha >= 0 only (above 1 the mean of g^2 may turn
         * negative and the update NaN, as in torch) */
        if (!(h->alpha >= 0.0f) || isinf(h->alpha))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer RMSprop%s: invalid alpha %g "
                               "(must be >= 0 and finite, as torch.optim.RMSprop's)", grp,
                               (double)h->alpha);
    } else {
        if (!(h->b1 >= 0.0f && h->b1 < 1.0f))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s%s: invalid beta1 %g (must "
                               "be in [0, 1))", k, grp, (double)h->b1);
        if (!(h->b2 >= 0.0f && h->b2 < 1.0f))
            return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s%s: invalid beta2 %g (must "
                               "be in [0, 1))", k, grp, (double)h->b2);
    }
    if (!(h->eps > 0.0f) || isinf(h->eps))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s%s: invalid eps %g (must be > 0 "
                           "and finite)", k, grp, (double)h->eps);
    return 0;
}

int
sim_optimizer_check(const struct sim_optimizer *o, struct sim_err *err)
{
    const char *k = sim_optim_kind_name(o->kind);
    struct sim_opt_hyper h;
    size_t names = 0;
    int rc;

    if (o->kind < SIM_OPT_SGD || o->kind > SIM_OPT_LAMB)
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer kind %d is not SGD (%d), Adam (%d), "
                           "AdamW (%d), RMSprop (%d) or LAMB (%d)", o->kind, SIM_OPT_SGD,
                           SIM_OPT_ADAM, SIM_OPT_ADAMW, SIM_OPT_RMSPROP, SIM_OPT_LAMB);
    if (o->n_groups < 0 || o->n_groups > SIM_OPT_MAX_GROUPS)
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: %d parameter groups besides the "
                           "first; at most %d", k, o->n_groups, SIM_OPT_MAX_GROUPS);
    for (int g = 0; g <= o->n_groups; g++) {
        sim_optim_hyper(o, g, &h);
        rc = check_hyper(o->kind, g, &h, err);
        if (rc != 0)
            return rc;
        if (g > 0) {
            const struct sim_opt_group *p = &o->groups[g - 1];
            if (p->n_weights > 0 && p->weights == NULL)
                return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: parameter group %d "
                                   "lists %zu weights but no names", k, g, p->n_weights);
            names += p->n_weights;
        }
    }
    if (names > SIM_OPT_MAX_GROUP_WEIGHTS)
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: its parameter groups list %zu "
                           "weights; at most %d", k, names, SIM_OPT_MAX_GROUP_WEIGHTS);
    if (!(o->max_grad_norm >= 0.0f) || isnan(o->max_grad_norm))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid max_grad_norm %g (must "
                           "be > 0, or 0 or inf for no clipping)", k, (double)o->max_grad_norm);
    if (!(o->max_weight_norm >= 0.0f) || isnan(o->max_weight_norm))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid max_weight_norm %g "
                           "(must be > 0, or 0 or inf for no clipping)", k,
                           (double)o->max_weight_norm);
    if (!(o->loss_scaling > 0.0f) || isinf(o->loss_scaling))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid loss_scaling %g (must "
                           "be > 0 and finite)", k, (double)o->loss_scaling);
    if (!(o->velocity_scaling > 0.0f) || isinf(o->velocity_scaling))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: invalid velocity_scaling %g "
                           "(must be > 0 and finite)", k, (double)o->velocity_scaling);
    if (o->auto_loss_scaling &&
        (o->als_period < 1 || !(o->als_bin_edge > 0.0f && o->als_bin_edge <= 1.0f) ||
         !(o->als_threshold >= 0.0f && o->als_threshold <= 1.0f)))
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: automatic loss scaling needs "
                           "an update period >= 1 (%u), a bin edge in (0, 1] (%g) and a "
                           "threshold proportion in [0, 1] (%g)", k, o->als_period,
                           (double)o->als_bin_edge, (double)o->als_threshold);
    if (o->bias_correction != 0 && o->bias_correction != 1)
        return sim_err_set(err, IPUOF_E_INVAL, "optimizer %s: bias_correction is %d; 0 or 1",
                           k, o->bias_correction);
    return 0;
}

/* One weight's update constants, shared by the pieces of its update (split over the pool;
 * every element is independent, so the result does not depend on the split). */
struct step_run {
    float *p, *m, *v, *c;
    const float *grad;
    float gscale;               /* gradient clipping factor (1: none) */
    float lr, wd, mu, damp, b1, b2, eps, alpha, step_size, bc2_sqrt, decay;
    bool first, nesterov, decoupled, centered, tf;
};

/*
 * SGD, https://pytorch.org/docs/stable/generated/torch.optim.SGD.html (PopTorch's
 * poptorch.optim.SGD has torch's definition; its velocity and loss scaling cancel in float32):
 *   g = grad + weight_decay * p
 *   if momentum != 0: b = g on the first step, else momentum * b + (1 - dampening) * g;
 *                     g = g + momentum * b if nesterov else b
 *   p = p - lr * g
 */
SIM_HOT_FN(sgd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    /* the constants in locals and the loop split by them: read through s, each was
     * reloaded per element (a store to p[i] may alias *s) and the branches kept the loop
     * scalar, 19 instructions an element; the same operations in the same order */
    const struct step_run *s = ctx;
    float *p = s->p, *b = s->m;
    const float *grad = s->grad;
    const float gs = s->gscale, wd = s->wd, mu = s->mu, damp = s->damp, lr = s->lr;
    const bool first = s->first, nesterov = s->nesterov;

    if ((mu == 0.0f || b == NULL) && wd == 0.0f) {
        for (int64_t i = lo; i < hi; i++)
            p[i] -= lr * (grad[i] * gs);
        return;
    }
    if (mu == 0.0f || b == NULL) {
        for (int64_t i = lo; i < hi; i++)
            p[i] -= lr * (grad[i] * gs + wd * p[i]);
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        float g = grad[i] * gs;
        if (wd != 0.0f)
            g += wd * p[i];
        b[i] = first ? g : mu * b[i] + damp * g;
        g = nesterov ? g + mu * b[i] : b[i];
        p[i] -= lr * g;
    }
}

/*
 * Adam, https://pytorch.org/docs/stable/generated/torch.optim.Adam.html, and AdamW,
 * https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html (t = step count):
 *   Adam:  g = grad + weight_decay * p          AdamW: p = p - lr * weight_decay * p
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g^2
 *   p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 * computed as torch.optim's implementation does: step size lr / (1 - beta1^t), and
 * denominator sqrt(v) / sqrt(1 - beta2^t) + eps. PopTorch's bias_correction=False drops both
 * corrections (step size lr, denominator sqrt(v) + eps): poptorch.optim.Adam's docs.
 */
typedef float mp_v4f __attribute__((vector_size(16)));
typedef float mp_v4f_u __attribute__((vector_size(16), aligned(4), may_alias)); /* unaligned */

SIM_HOT_FN(adam_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct step_run *s = ctx;
    float *p = s->p, *m = s->m, *v = s->v;
    const float *grad = s->grad;
    /* the hyperparameters in locals: read through s, every store to p, m or v (floats too)
     * might change them, and each was reloaded per weight */
    const float gscale = s->gscale, b1 = s->b1, b2 = s->b2, c1 = 1.0f - s->b1;
    const float c2 = 1.0f - s->b2, bc2 = s->bc2_sqrt, eps = s->eps, step = s->step_size;
    const float decay = s->decay, wd = s->decoupled ? 0.0f : s->wd;
    int64_t i = lo;

    if (s->decoupled)
        for (int64_t j = lo; j < hi; j++)
            p[j] *= decay;
#if defined(__SSE2__) && defined(__GNUC__) && !defined(__clang__)
    /* four weights at a time by hand: GCC keeps sqrtf's errno path (a call on a negative
     * input) despite SIM_HOT_OPT's no-math-errno, so the loop below never vectorizes;
     * SSE's sqrtps is on every x86-64 level. The same operations in the same order. */
    for (; i + 4 <= hi; i += 4) {
        mp_v4f g = *(const mp_v4f_u *)(grad + i) * gscale, pv = *(const mp_v4f_u *)(p + i);
        mp_v4f mv, vv, denom;
        if (wd != 0.0f)
            g = g + wd * pv;
        mv = *(const mp_v4f_u *)(m + i) * b1 + g * c1;
        vv = *(const mp_v4f_u *)(v + i) * b2 + g * g * c2;
        *(mp_v4f_u *)(m + i) = mv;
        *(mp_v4f_u *)(v + i) = vv;
        denom = __builtin_ia32_sqrtps(vv) / bc2 + eps;
        *(mp_v4f_u *)(p + i) = pv - step * mv / denom;
    }
#endif
    for (; i < hi; i++) {
        float g = grad[i] * gscale, denom;
        if (wd != 0.0f)
            g += wd * p[i];
        m[i] = m[i] * b1 + g * c1;
        v[i] = v[i] * b2 + g * g * c2;
        denom = sqrtf(v[i]) / bc2 + eps;
        p[i] -= step * m[i] / denom;
    }
}

/*
 * RMSprop, https://pytorch.org/docs/stable/generated/torch.optim.RMSprop.html:
 *   g = grad + weight_decay * p
 *   v = alpha * v + (1 - alpha) * g^2
 *   centered: ga = alpha * ga + (1 - alpha) * g;  d = sqrt(v - ga^2) + eps
 *   else:     d = sqrt(v) + eps
 *   momentum > 0: b = momentum * b + g / d;  p = p - lr * b
 *   else:         p = p - lr * g / d
 * With a momentum buffer planned (plan_momentum, or momentum in another group) and momentum
 * 0, the buffer holds the step's g / d (p = p - lr * b, torch's p - lr * (g / d)), as
 * PopART's velocity with a variable momentum of 0 does; a previous NaN or inf in b does not
 * carry over.
 * PopTorch's use_tf_variant=True is TensorFlow's (tf.raw_ops.ApplyRMSProp and
 * ApplyCenteredRMSProp): eps inside the square root and the learning rate inside the
 * momentum, d = sqrt(v [- ga^2] + eps); b = momentum * b + lr * g / d; p = p - b. The state
 * starts at zero in both variants.
 */
SIM_HOT_FN(rmsprop_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct step_run *s = ctx;
    float *p = s->p, *b = s->m, *v = s->v, *ga = s->c;
    const float *grad = s->grad;

    for (int64_t i = lo; i < hi; i++) {
        float g = grad[i] * s->gscale, var, d;
        if (s->wd != 0.0f)
            g += s->wd * p[i];
        v[i] = v[i] * s->alpha + g * g * (1.0f - s->alpha);
        var = v[i];
        if (s->centered) {
            ga[i] = ga[i] * s->alpha + g * (1.0f - s->alpha);
            var -= ga[i] * ga[i];
        }
        if (s->tf) {
            d = sqrtf(var + s->eps);
            if (b != NULL) {
                b[i] = (s->mu != 0.0f ? s->mu * b[i] : 0.0f) + s->lr * g / d;
                p[i] -= b[i];
            } else {
                p[i] -= s->lr * g / d;
            }
            continue;
        }
        d = sqrtf(var) + s->eps;
        if (b != NULL) {
            b[i] = (s->mu != 0.0f ? s->mu * b[i] : 0.0f) + g / d;
            p[i] -= s->lr * b[i];
        } else {
            p[i] -= s->lr * g / d;
        }
    }
}

/*
 * LAMB, You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76
 * minutes" (2019), algorithm 2, as PopTorch's poptorch.optim.LAMB defines it (t = step
 * count, c1 = 1 - beta1^t and c2 = 1 - beta2^t, or 1 without bias correction, as
 * LAMBNoBias), per weight tensor w:
 *   m = beta1 * m + (1 - beta1) * g,   v = beta2 * v + (1 - beta2) * g^2
 *   u = (m / c1) / (sqrt(v / c2) + eps) + weight_decay * w
 *   r1 = min(||w||, max_weight_norm),   r2 = ||u||
 *   w = w - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1) * u
 * Two passes: the first updates m and v and sums ||w||^2 and ||u||^2 (double), the second
 * applies u (recomputed from the new m and v and the unchanged w).
 */
static void
lamb_weight(const struct step_run *s, int64_t n, float max_weight_norm)
{
    double w2 = 0.0, u2 = 0.0, r1, r2;
    float trust = 1.0f;

    for (int64_t i = 0; i < n; i++) {
        float g = s->grad[i] * s->gscale, u;
        s->m[i] = s->m[i] * s->b1 + g * (1.0f - s->b1);
        s->v[i] = s->v[i] * s->b2 + g * g * (1.0f - s->b2);
        u = s->step_size * s->m[i] / (sqrtf(s->v[i]) / s->bc2_sqrt + s->eps) +
            s->wd * s->p[i];
        w2 += (double)s->p[i] * (double)s->p[i];
        u2 += (double)u * (double)u;
    }
    r1 = sqrt(w2);
    if (max_weight_norm > 0.0f && r1 > (double)max_weight_norm)
        r1 = (double)max_weight_norm;
    r2 = sqrt(u2);
    if (r1 > 0.0 && r2 > 0.0)
        trust = (float)(r1 / r2);
    for (int64_t i = 0; i < n; i++) {
        float u = s->step_size * s->m[i] / (sqrtf(s->v[i]) / s->bc2_sqrt + s->eps) +
                  s->wd * s->p[i];
        s->p[i] -= s->lr * trust * u;
    }
}

/*
 * The factor clip_grad_norm_ (torch.nn.utils, which PopTorch's max_grad_norm follows)
 * scales every gradient by: total = ||all gradients||_2, coef = max_norm / (total + 1e-6),
 * applied only when coef < 1. 1 when clipping is off.
 */
static float
clip_factor(const struct sim_exe *e, float max_norm)
{
    const float *g = e->tr->grads;
    double sum = 0.0, coef;

    if (!(max_norm > 0.0f) || isinf(max_norm))
        return 1.0f;
    for (size_t i = 0; i < e->n_train; i++)
        sum += (double)g[i] * (double)g[i];
    coef = (double)max_norm / (sqrt(sum) + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

/* The update of floats [lo, hi) of the flat buffers: trainable weights that share the
 * group and the momentum state of weight wi (LAMB: weight wi alone), and the alignment
 * padding between them, which holds zeros and zero gradients and stays zero. */
static void
step_span(struct sim_exe *e, int wi, size_t lo, size_t hi, float gscale)
{
    const struct sim_optimizer *o = &e->tr->opt;
    int64_t n = (int64_t)(hi - lo);
    double t = (double)e->tr->steps;
    struct sim_opt_hyper h;
    struct step_run s;

    sim_optim_hyper(o, e->tr->wgroup[wi], &h);
    s = (struct step_run){ .p = e->params + lo, .grad = e->tr->grads + lo, .gscale = gscale,
                           .lr = h.lr, .wd = h.wd, .mu = h.mu, .damp = 1.0f - h.damp,
                           .b1 = h.b1, .b2 = h.b2, .eps = h.eps, .alpha = h.alpha,
                           .step_size = 1.0f, .bc2_sqrt = 1.0f, .first = !e->tr->mstarted[wi],
                           .nesterov = h.nesterov, .centered = o->centered != 0,
                           .tf = o->tf_variant != 0 };
    s.m = e->tr->mom1 != NULL ? e->tr->mom1 + lo : NULL;
    s.v = e->tr->mom2 != NULL ? e->tr->mom2 + lo : NULL;
    s.c = e->tr->mom3 != NULL ? e->tr->mom3 + lo : NULL;
    switch (o->kind) {
    case SIM_OPT_SGD:
        sim_pool_for(n, SIM_POOL_MAP_GRAIN, sgd_piece, &s);
        break;
    case SIM_OPT_ADAM:
    case SIM_OPT_ADAMW:
        s.decoupled = o->kind == SIM_OPT_ADAMW;
        s.decay = 1.0f - h.lr * h.wd;
        s.step_size = h.lr;
        if (o->bias_correction) {
            s.step_size = (float)((double)h.lr / (1.0 - pow(h.b1, t)));
            s.bc2_sqrt = (float)sqrt(1.0 - pow(h.b2, t));
        }
        sim_pool_for(n, SIM_POOL_MAP_GRAIN, adam_piece, &s);
        break;
    case SIM_OPT_RMSPROP:
        sim_pool_for(n, SIM_POOL_MAP_GRAIN, rmsprop_piece, &s);
        break;
    case SIM_OPT_LAMB:
        if (o->bias_correction) {
            s.step_size = (float)(1.0 / (1.0 - pow(h.b1, t)));
            s.bc2_sqrt = (float)sqrt(1.0 - pow(h.b2, t));
        }
        lamb_weight(&s, n, o->max_weight_norm);
        break;
    default:
        break;
    }
}

/* x[0 .. n) as a float16 accumulator holding x * scale keeps it: x = half(x * scale) /
 * scale (scale 1: half(x)). */
static void
round_half_scaled(float *x, size_t n, float scale)
{
    if (x == NULL || n == 0)
        return;
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++)
            x[i] *= scale;
    sim_half_round_n(x, (int64_t)n);
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++)
            x[i] /= scale;
}

/* The float16 accumulators after a step (see sim_optimizer's accum_half): first order is
 * SGD's velocity, Adam's/LAMB's m, RMSprop's mean of g^2 (mom2 there); second order is
 * Adam's/LAMB's v, centered RMSprop's mean of g (mom3). */
static void
round_half_state(struct sim_exe *e)
{
    struct sim_train *tr = e->tr;
    const struct sim_optimizer *o = &tr->opt;
    float *first = o->kind == SIM_OPT_RMSPROP ? tr->mom2 : tr->mom1;
    float *second = o->kind == SIM_OPT_RMSPROP ? tr->mom3 :
                    o->kind == SIM_OPT_SGD ? NULL : tr->mom2;

    if (o->first_half)
        round_half_scaled(first, e->n_train,
                          o->kind == SIM_OPT_SGD ? o->velocity_scaling : 1.0f);
    if (o->second_half)
        round_half_scaled(second, e->n_train, 1.0f);
}

/*
 * Automatic loss scaling, as PopART defines it (automaticLossScalingSettings): the trained
 * gradients scaled by this step's loss scale, as float16 values, counted against a bin edge
 * at als_bin_edge x 65504 (float16's largest value); every als_period steps the factor is
 * halved when the proportion at or above the edge (overflows included) exceeds
 * als_threshold, and doubled otherwise, within float16's range of loss scales [2^-24,
 * 65504]. Only the weights' own elements count (not the alignment padding).
 */
static void
als_update(struct sim_exe *e)
{
    struct sim_train *tr = e->tr;
    const struct sim_optimizer *o = &tr->opt;
    double edge = (double)o->als_bin_edge * 65504.0, ls = (double)tr->final_ls;
    uint64_t above = 0, total = 0;
    unsigned period = o->als_period != 0 ? o->als_period : 1;

    for (int i = 0; i < e->n_w; i++) {
        const struct sim_weight *w = &e->w[i];
        const float *g;
        size_t n;
        if (w->kind != SIM_WEIGHT_TRAINABLE)
            continue;
        g = tr->grads + w->off / sizeof(float);
        n = w->bytes / sizeof(float);
        for (size_t k = 0; k < n; k++) {
            float h = sim_half_to_float(sim_half_from_float((float)((double)g[k] * ls)));
            if (!isfinite(h) || fabs((double)h) >= edge)
                above++;
        }
        total += n;
    }
    tr->als_steps++;
    if (total == 0 || tr->als_steps % period != 0)
        return;
    if ((double)above / (double)total > (double)o->als_threshold) {
        if (ls / 2.0 >= 0x1p-24)
            tr->ls_factor *= 0.5f;
    } else if (ls * 2.0 <= 65504.0) {
        tr->ls_factor *= 2.0f;
    }
}

/*
 * One step over every trainable weight. Consecutive trainable weights (weights.c lays them
 * out in e->w order) of one group and one momentum state are updated as one span, so many small
 * weights still split over the pool; LAMB, whose trust ratio is per tensor, takes each
 * weight alone. SGD's momentum buffers count as started once a step with momentum ran.
 */
void
sim_optim_step(struct sim_exe *e)
{
    struct sim_train *tr = e->tr;
    float gscale;
    int first = -1;
    size_t lo = 0, hi = 0;

    /* the loss scale of this step: loss_scaling, times automatic loss scaling's factor */
    tr->final_ls = tr->opt.loss_scaling * (tr->opt.auto_loss_scaling ? tr->ls_factor : 1.0f);
    if (tr->opt.accum_half)     /* the accumulated gradient, as a float16 buffer holds it */
        round_half_scaled(tr->grads, e->n_train, tr->final_ls);
    if (tr->opt.auto_loss_scaling)
        als_update(e);
    gscale = clip_factor(e, tr->opt.max_grad_norm);
    tr->steps++;
    for (int i = 0; i <= e->n_w; i++) {
        const struct sim_weight *w = i < e->n_w ? &e->w[i] : NULL;
        size_t off;
        if (w != NULL && w->kind != SIM_WEIGHT_TRAINABLE)
            continue;
        off = w != NULL ? w->off / sizeof(float) : 0;
        if (first >= 0 && w != NULL && tr->opt.kind != SIM_OPT_LAMB && off >= hi &&
            tr->wgroup[i] == tr->wgroup[first] && tr->mstarted[i] == tr->mstarted[first]) {
            hi = off + w->bytes / sizeof(float);        /* joins the span */
            continue;
        }
        if (first >= 0)
            step_span(e, first, lo, hi, gscale);
        if (w == NULL)
            break;
        first = i;
        lo = off;
        hi = off + w->bytes / sizeof(float);
    }
    if (tr->opt.kind == SIM_OPT_SGD && tr->mom1 != NULL)
        for (int i = 0; i < e->n_w; i++) {
            struct sim_opt_hyper h;
            sim_optim_hyper(&tr->opt, tr->wgroup[i], &h);
            if (e->w[i].kind == SIM_WEIGHT_TRAINABLE && h.mu != 0.0f)
                tr->mstarted[i] = true;   /* torch keeps a momentum_buffer from now on */
        }
    round_half_state(e);
}

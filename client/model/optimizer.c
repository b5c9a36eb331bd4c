/*
 * optimizer.c — an optimizer and the training fields of a compile, below every call that
 * uses them: torch.optim's defaults (ipuof_optimizer_init), the check of an optimizer's
 * kind and groups, its wire form, and the CompileRequest's training fields of a checked
 * struct ipuof_training_opts. A leaf beside err.c and wiremap.c: the options handle
 * (compile_opts.c), the compile (compile.c) and setOptimizer (train.c) call it, and it
 * calls none of them.
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

/* PyTorch's defaults (torch.optim, torch >= 2.0 for SGD's lr; PopTorch's for LAMB). */
#define DEFAULT_LR 1e-3f
#define DEFAULT_BETA1 0.9f
#define DEFAULT_BETA2 0.999f
#define DEFAULT_EPS 1e-8f
#define ADAMW_WEIGHT_DECAY 1e-2f
#define RMSPROP_LR 1e-2f
#define RMSPROP_ALPHA 0.99f
#define LAMB_MAX_WEIGHT_NORM 65500.0f

int
ipuof_optimizer_init(struct ipuof_optimizer *o, int kind)
{
    if (o == NULL)
        return IPUOF_E_INVAL;
    if (kind < IPUOF_OPTIMIZER_SGD || kind > IPUOF_OPTIMIZER_LAMB)
        return IPUOF_E_INVAL;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == IPUOF_OPTIMIZER_RMSPROP ? RMSPROP_LR : DEFAULT_LR;
    o->loss_scaling = 1.0f;
    o->velocity_scaling = 1.0f;
    o->alpha = RMSPROP_ALPHA;
    o->beta1 = DEFAULT_BETA1;
    o->beta2 = DEFAULT_BETA2;
    o->eps = DEFAULT_EPS;
    if (kind == IPUOF_OPTIMIZER_SGD) {
        o->beta1 = o->beta2 = o->eps = 0.0f;
        return IPUOF_OK;
    }
    if (kind == IPUOF_OPTIMIZER_ADAMW || kind == IPUOF_OPTIMIZER_LAMB)
        o->weight_decay = ADAMW_WEIGHT_DECAY;
    if (kind == IPUOF_OPTIMIZER_LAMB)
        o->max_weight_norm = LAMB_MAX_WEIGHT_NORM;
    return IPUOF_OK;
}

/* The kind: one of IPUOF_OPTIMIZER_*, or 0 when allow_default; the groups: at most
 * IPUOF_OPTIMIZER_MAX_GROUPS, names given. The ranges of the hyper-parameters are the
 * daemon's to check. */
int
ipuof_optimizer_check(struct ipuof_err_info *e, const struct ipuof_optimizer *o,
                      int allow_default)
{
    if (!((o->kind == 0 && allow_default) ||
          (o->kind >= IPUOF_OPTIMIZER_SGD && o->kind <= IPUOF_OPTIMIZER_LAMB)))
        return ipuof_err_info_set(e, IPUOF_E_INVAL, "client",
                                  "optimizer kind %d is not one of IPUOF_OPTIMIZER_SGD (1), "
                                  "_ADAM (2), _ADAMW (3), _RMSPROP (4) or _LAMB (5)%s", o->kind,
                                  allow_default ? ", nor 0 for PopTorch's default SGD" : "");
    if (o->n_groups > IPUOF_OPTIMIZER_MAX_GROUPS || (o->n_groups > 0 && o->groups == NULL))
        return ipuof_err_info_set(e, IPUOF_E_INVAL, "client",
                                  "the optimizer has %zu parameter groups besides the first%s; "
                                  "at most %d", o->n_groups,
                                  o->groups == NULL ? " and groups is NULL" : "",
                                  IPUOF_OPTIMIZER_MAX_GROUPS);
    for (size_t g = 0; g < o->n_groups; g++) {
        const struct ipuof_optimizer_group *p = &o->groups[g];
        if (p->n_weights > IPUOF_DEFAULT_MAX_REPEATED || (p->n_weights > 0 && p->weights == NULL))
            return ipuof_err_info_set(e, IPUOF_E_INVAL, "client",
                                      "optimizer parameter group %zu lists %zu weights%s (at most "
                                      "%u)", g + 1, p->n_weights,
                                      p->weights == NULL ? " but no names" : "",
                                      IPUOF_DEFAULT_MAX_REPEATED);
        for (size_t j = 0; j < p->n_weights; j++)
            if (p->weights[j] == NULL || p->weights[j][0] == '\0')
                return ipuof_err_info_set(e, IPUOF_E_INVAL, "client",
                                          "optimizer parameter group %zu: weight %zu has no name",
                                          g + 1, j);
    }
    return IPUOF_OK;
}

/* Fills the wire form of o (checked) into *ow (o is only read). */
void
ipuof_optimizer_to_wire(const struct ipuof_optimizer *o, struct ipuof_opt_wire *ow)
{
    Ipuof__Optimizer *w = &ow->w;

    ipuof__optimizer__init(w);
    w->kind = (Ipuof__OptimizerKind)ipuof_wm_to_wire(&ipuof_wm_optimizer, o->kind,
                                                     IPUOF__OPTIMIZER_KIND__OPTIMIZER_DEFAULT);
    w->lr = o->lr;
    w->weight_decay = o->weight_decay;
    w->momentum = o->momentum;
    w->dampening = o->dampening;
    w->nesterov = o->nesterov != 0;
    w->beta1 = o->beta1;
    w->beta2 = o->beta2;
    w->eps = o->eps;
    w->alpha = o->alpha;
    w->centered = o->centered != 0;
    w->tf_variant = o->tf_variant != 0;
    w->no_bias_correction = o->no_bias_correction != 0;
    w->max_grad_norm = o->max_grad_norm;
    w->max_weight_norm = o->max_weight_norm;
    w->loss_scaling = o->loss_scaling;
    w->velocity_scaling = o->velocity_scaling;
    w->plan_momentum = o->plan_momentum != 0;
    for (size_t i = 0; i < o->n_groups; i++) {
        const struct ipuof_optimizer_group *p = &o->groups[i];
        Ipuof__OptimizerGroup *g = &ow->g[i];
        ipuof__optimizer_group__init(g);
        g->lr = p->lr;
        g->weight_decay = p->weight_decay;
        g->momentum = p->momentum;
        g->dampening = p->dampening;
        g->nesterov = p->nesterov != 0;
        g->beta1 = p->beta1;
        g->beta2 = p->beta2;
        g->eps = p->eps;
        g->alpha = p->alpha;
        g->n_weights = p->n_weights;
        g->weights = (char **)p->weights;
        ow->gp[i] = g;
    }
    w->n_groups = o->n_groups;
    w->groups = o->n_groups > 0 ? ow->gp : NULL;
}

void
ipuof_optimizer_half_to_wire(const struct ipuof_optimizer_half *a, Ipuof__Optimizer *w)
{
    if (a == NULL)
        return;
    w->accum_float16 = a->accum_float16 != 0;
    w->first_order_float16 = a->first_order_float16 != 0;
    w->second_order_float16 = a->second_order_float16 != 0;
    w->auto_loss_scaling = a->auto_loss_scaling != 0;
    w->als_update_period = a->als_update_period;
    w->als_bin_edge = a->als_bin_edge;
    w->als_threshold = a->als_threshold;
}

void
ipuof_training_fields(const struct ipuof_training_opts *t,
                      const struct ipuof_optimizer_half *half, Ipuof__CompileRequest *extra,
                      struct ipuof_opt_wire *opt)
{
    ipuof__compile_request__init(extra);
    ipuof_optimizer_to_wire(&t->optimizer, opt);
    ipuof_optimizer_half_to_wire(half, &opt->w);
    extra->loss = (char *)t->loss;
    extra->optimizer = &opt->w;
    extra->gradient_accumulation = t->gradient_accumulation; /* >= 1: its setter says so */
    extra->accumulation_reduction = (Ipuof__ReductionType)ipuof_wm_to_wire(
        &ipuof_wm_reduction, t->accumulation_reduction, IPUOF__REDUCTION_TYPE__REDUCTION_MEAN);
    extra->seed = t->seed;
    extra->n_frozen_weights = t->n_frozen_weights;
    extra->frozen_weights = (char **)t->frozen_weights;
}

/*
 * compile_opts_optim.c — the optimizer of a compile options handle, one hyper-parameter at
 * a time (ipuof_compile_opts_set_optimizer_kind / _param, _add_optimizer_group / _weight),
 * as zstd's ZSTD_CCtx_setParameter takes a compression level: a new optimizer option is a
 * new IPUOF_OPT_PARAM_* and a row of the table below, never a public struct layout. The
 * same optimizer is what ipuof_model_set_optimizer_with() (client/train.c) sends between
 * runs, float16 parameters (h->half) included.
 *
 * Each value is checked where it enters, against the row of its parameter: which kinds
 * have it, whether it is each group's or the whole optimizer's, and its range (the ranges
 * torch.optim's constructors check, as the daemon's sim/exec/optim.c does again). What
 * depends on two values is the daemon's to check. The handle keeps the optimizer as a
 * private struct ipuof_optimizer (t.optimizer) with its groups and their weights' names
 * owned by the handle, so optimizer.c sends it as before.
 *
 * ipuof_compile_opts_set_optimizer(), for programs written against the public struct, puts
 * a whole struct into the same place: its kind and groups' shape checked here (the ranges
 * stay the daemon's, as they always were for it), its names copied.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* Records a refusal on h and returns code. */
#define fail(h, code, ...) ipuof_err_info_set(&(h)->err, (code), "client", __VA_ARGS__)

#define KIND(k) (1u << (k))
#define K_ALL (KIND(IPUOF_OPTIMIZER_SGD) | KIND(IPUOF_OPTIMIZER_ADAM) | \
               KIND(IPUOF_OPTIMIZER_ADAMW) | KIND(IPUOF_OPTIMIZER_RMSPROP) | \
               KIND(IPUOF_OPTIMIZER_LAMB))
#define K_ADAMS (KIND(IPUOF_OPTIMIZER_ADAM) | KIND(IPUOF_OPTIMIZER_ADAMW) | \
                 KIND(IPUOF_OPTIMIZER_LAMB))
#define K_MOMENTUM (KIND(IPUOF_OPTIMIZER_SGD) | KIND(IPUOF_OPTIMIZER_RMSPROP))

/* The ranges a value may take. */
enum range {
    R_NONNEG,   /* >= 0, finite as a float */
    R_POS,      /* > 0, finite as a float */
    R_UNIT,     /* in [0, 1) */
    R_FINITE,   /* finite as a float */
    R_NORM,     /* >= 0 or inf (0 and inf: no clipping) */
    R_FLAG,     /* 0 or 1 */
    R_PERIOD,   /* a whole number from 1 to 2^32 - 1 */
    R_EDGE,     /* in (0, 1] */
    R_PROP      /* in [0, 1] */
};

/* One parameter: its name as torch.optim / PopTorch call it, the kinds that have it, 1 when
 * it is the whole optimizer's (group 0 only), its range. */
struct param_row {
    const char *name;
    unsigned kinds;
    int whole;
    enum range range;
};

static const struct param_row params[] = {
    [IPUOF_OPT_PARAM_LR] = {"lr", K_ALL, 0, R_NONNEG},
    [IPUOF_OPT_PARAM_WEIGHT_DECAY] = {"weight_decay", K_ALL, 0, R_NONNEG},
    [IPUOF_OPT_PARAM_MOMENTUM] = {"momentum", K_MOMENTUM, 0, R_NONNEG},
    [IPUOF_OPT_PARAM_DAMPENING] = {"dampening", KIND(IPUOF_OPTIMIZER_SGD), 0, R_FINITE},
    [IPUOF_OPT_PARAM_NESTEROV] = {"nesterov", KIND(IPUOF_OPTIMIZER_SGD), 0, R_FLAG},
    [IPUOF_OPT_PARAM_BETA1] = {"beta1", K_ADAMS, 0, R_UNIT},
    [IPUOF_OPT_PARAM_BETA2] = {"beta2", K_ADAMS, 0, R_UNIT},
    [IPUOF_OPT_PARAM_EPS] = {"eps", K_ADAMS | KIND(IPUOF_OPTIMIZER_RMSPROP), 0, R_POS},
    [IPUOF_OPT_PARAM_ALPHA] = {"alpha", KIND(IPUOF_OPTIMIZER_RMSPROP), 0, R_NONNEG},
    [IPUOF_OPT_PARAM_CENTERED] = {"centered", KIND(IPUOF_OPTIMIZER_RMSPROP), 1, R_FLAG},
    [IPUOF_OPT_PARAM_TF_VARIANT] = {"tf_variant", KIND(IPUOF_OPTIMIZER_RMSPROP), 1, R_FLAG},
    [IPUOF_OPT_PARAM_BIAS_CORRECTION] = {"bias_correction", K_ADAMS, 1, R_FLAG},
    [IPUOF_OPT_PARAM_MAX_GRAD_NORM] = {"max_grad_norm", K_ALL, 1, R_NORM},
    [IPUOF_OPT_PARAM_MAX_WEIGHT_NORM] = {"max_weight_norm", KIND(IPUOF_OPTIMIZER_LAMB), 1,
                                         R_NORM},
    [IPUOF_OPT_PARAM_LOSS_SCALING] = {"loss_scaling", K_ALL, 1, R_POS},
    [IPUOF_OPT_PARAM_VELOCITY_SCALING] = {"velocity_scaling", KIND(IPUOF_OPTIMIZER_SGD), 1,
                                          R_POS},
    [IPUOF_OPT_PARAM_PLAN_MOMENTUM] = {"plan_momentum", K_MOMENTUM, 1, R_FLAG},
    [IPUOF_OPT_PARAM_ACCUM_FLOAT16] = {"accum_float16", K_ALL, 1, R_FLAG},
    [IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16] = {"first_order_float16", K_ALL, 1, R_FLAG},
    [IPUOF_OPT_PARAM_SECOND_ORDER_FLOAT16] = {"second_order_float16", K_ALL, 1, R_FLAG},
    [IPUOF_OPT_PARAM_AUTO_LOSS_SCALING] = {"auto_loss_scaling", K_ALL, 1, R_FLAG},
    [IPUOF_OPT_PARAM_ALS_UPDATE_PERIOD] = {"als_update_period", K_ALL, 1, R_PERIOD},
    [IPUOF_OPT_PARAM_ALS_BIN_EDGE] = {"als_bin_edge", K_ALL, 1, R_EDGE},
    [IPUOF_OPT_PARAM_ALS_THRESHOLD] = {"als_threshold", K_ALL, 1, R_PROP},
};
#define N_PARAMS ((int)(sizeof params / sizeof params[0]))

static const char *const kind_names[] = {
    [IPUOF_OPTIMIZER_SGD] = "SGD", [IPUOF_OPTIMIZER_ADAM] = "Adam",
    [IPUOF_OPTIMIZER_ADAMW] = "AdamW", [IPUOF_OPTIMIZER_RMSPROP] = "RMSprop",
    [IPUOF_OPTIMIZER_LAMB] = "LAMB",
};

/* "SGD, RMSprop": the kinds of mask, in buf. */
static const char *
kinds_list(unsigned mask, char *buf, size_t size)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int k = IPUOF_OPTIMIZER_SGD; k <= IPUOF_OPTIMIZER_LAMB; k++)
        if (mask & KIND(k))
            n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n > 0 ? ", " : "",
                                  kind_names[k]);
    return buf;
}

/* IPUOF_OK when v is in range r for parameter name, else a refusal saying the range. */
static int
check_range(ipuof_compile_opts *h, const char *name, enum range r, double v)
{
    float f = (float)v;
    int ok = 0;
    const char *want = "";

    switch (r) {
    case R_NONNEG: ok = v >= 0.0 && isfinite(f); want = ">= 0 and finite"; break;
    case R_POS: ok = v > 0.0 && isfinite(f) && f > 0.0f; want = "> 0 and finite"; break;
    case R_UNIT: ok = v >= 0.0 && v < 1.0 && f < 1.0f; want = "in [0, 1)"; break;
    case R_FINITE: ok = isfinite(f); want = "finite"; break;
    case R_NORM: ok = v >= 0.0; want = ">= 0 (0 or inf: no clipping)"; break;
    case R_FLAG: ok = v == 0.0 || v == 1.0; want = "0 or 1"; break;
    case R_PERIOD:
        ok = v >= 1.0 && v <= 4294967295.0 && v == floor(v);
        want = "a whole number of steps from 1 to 2^32 - 1";
        break;
    case R_EDGE: ok = v > 0.0 && v <= 1.0 && f > 0.0f; want = "in (0, 1]"; break;
    case R_PROP: ok = v >= 0.0 && v <= 1.0; want = "in [0, 1]"; break;
    }
    if (ok)
        return IPUOF_OK;
    return fail(h, IPUOF_E_INVAL, "optimizer %s %g is out of range: it must be %s%s", name, v,
                want, r == R_NONNEG || r == R_POS || r == R_FINITE ? " as a float" : "");
}

/* IPUOF_OK when group g of h's optimizer (0: the first) is there to set, else a refusal. */
static int
check_group(ipuof_compile_opts *h, unsigned g, int first_too)
{
    const struct ipuof_optimizer *o = &h->t.optimizer;

    if (o->kind == 0)
        return fail(h, IPUOF_E_INVAL, "the optimizer is PopTorch's default (kind 0: SGD with "
                    "lr 0.01), which takes no parameter or group: choose a kind with "
                    "ipuof_compile_opts_set_optimizer_kind() first");
    if (((g == 0 && !first_too) || g > o->n_groups) && o->n_groups == 0)
        return fail(h, IPUOF_E_INVAL, "optimizer parameter group %u is not there: %s"
                    "(ipuof_compile_opts_add_optimizer_group() appends one)", g,
                    first_too ? "there is only group 0, the first " : "there is none yet ");
    if ((g == 0 && !first_too) || g > o->n_groups)
        return fail(h, IPUOF_E_INVAL, "optimizer parameter group %u is not there: the groups "
                    "are %s1 .. %zu (ipuof_compile_opts_add_optimizer_group() appends one)", g,
                    first_too ? "0 (the first), " : "", o->n_groups);
    return IPUOF_OK;
}

/* Stores v (checked) as parameter p of group g (0: the optimizer's own fields). */
static void
store(ipuof_compile_opts *h, unsigned g, int p, double v)
{
    struct ipuof_optimizer *o = &h->t.optimizer;
    struct ipuof_optimizer_group *q = g > 0 ? &h->groups[g - 1] : NULL;
    float f = (float)v;

    switch (p) {
    case IPUOF_OPT_PARAM_LR: *(q ? &q->lr : &o->lr) = f; break;
    case IPUOF_OPT_PARAM_WEIGHT_DECAY: *(q ? &q->weight_decay : &o->weight_decay) = f; break;
    case IPUOF_OPT_PARAM_MOMENTUM: *(q ? &q->momentum : &o->momentum) = f; break;
    case IPUOF_OPT_PARAM_DAMPENING: *(q ? &q->dampening : &o->dampening) = f; break;
    case IPUOF_OPT_PARAM_NESTEROV: *(q ? &q->nesterov : &o->nesterov) = v != 0.0; break;
    case IPUOF_OPT_PARAM_BETA1: *(q ? &q->beta1 : &o->beta1) = f; break;
    case IPUOF_OPT_PARAM_BETA2: *(q ? &q->beta2 : &o->beta2) = f; break;
    case IPUOF_OPT_PARAM_EPS: *(q ? &q->eps : &o->eps) = f; break;
    case IPUOF_OPT_PARAM_ALPHA: *(q ? &q->alpha : &o->alpha) = f; break;
    case IPUOF_OPT_PARAM_CENTERED: o->centered = v != 0.0; break;
    case IPUOF_OPT_PARAM_TF_VARIANT: o->tf_variant = v != 0.0; break;
    case IPUOF_OPT_PARAM_BIAS_CORRECTION: o->no_bias_correction = v == 0.0; break;
    case IPUOF_OPT_PARAM_MAX_GRAD_NORM: o->max_grad_norm = f; break;
    case IPUOF_OPT_PARAM_MAX_WEIGHT_NORM: o->max_weight_norm = f; break;
    case IPUOF_OPT_PARAM_LOSS_SCALING: o->loss_scaling = f; break;
    case IPUOF_OPT_PARAM_VELOCITY_SCALING: o->velocity_scaling = f; break;
    case IPUOF_OPT_PARAM_PLAN_MOMENTUM: o->plan_momentum = v != 0.0; break;
    case IPUOF_OPT_PARAM_ACCUM_FLOAT16: h->half.accum_float16 = v != 0.0; break;
    case IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16: h->half.first_order_float16 = v != 0.0; break;
    case IPUOF_OPT_PARAM_SECOND_ORDER_FLOAT16: h->half.second_order_float16 = v != 0.0; break;
    case IPUOF_OPT_PARAM_AUTO_LOSS_SCALING: h->half.auto_loss_scaling = v != 0.0; break;
    case IPUOF_OPT_PARAM_ALS_UPDATE_PERIOD: h->half.als_update_period = (unsigned)v; break;
    case IPUOF_OPT_PARAM_ALS_BIN_EDGE: h->half.als_bin_edge = f; break;
    case IPUOF_OPT_PARAM_ALS_THRESHOLD: h->half.als_threshold = f; break;
    default: break;
    }
}

void
ipuof_copts_optimizer_clear(ipuof_compile_opts *h)
{
    for (size_t g = 0; g < h->t.optimizer.n_groups; g++) {
        for (size_t j = 0; j < h->groups[g].n_weights; j++)
            free(h->weights[g][j]);
        free(h->weights[g]);
        h->weights[g] = NULL;
    }
    memset(h->groups, 0, sizeof h->groups);
    memset(&h->half, 0, sizeof h->half);
    h->t.optimizer.n_groups = 0;
    h->t.optimizer.groups = NULL;
}

int
ipuof_compile_opts_set_optimizer_kind(ipuof_compile_opts *h, int kind)
{
    int rc = ipuof_copts_begin(h);

    if (rc != IPUOF_OK)
        return rc;
    if (kind < 0 || kind > IPUOF_OPTIMIZER_LAMB)
        return fail(h, IPUOF_E_INVAL, "optimizer kind %d is not one of IPUOF_OPTIMIZER_SGD (1), "
                    "_ADAM (2), _ADAMW (3), _RMSPROP (4) or _LAMB (5), nor 0 for PopTorch's "
                    "default SGD", kind);
    ipuof_copts_optimizer_clear(h);
    if (kind == 0)
        memset(&h->t.optimizer, 0, sizeof h->t.optimizer);
    else
        ipuof_optimizer_init(&h->t.optimizer, kind);
    return IPUOF_OK;
}

int
ipuof_compile_opts_set_optimizer_param(ipuof_compile_opts *h, unsigned group, int param,
                                       double value)
{
    const struct param_row *row = param > 0 && param < N_PARAMS ? &params[param] : NULL;
    int rc = ipuof_copts_begin(h), kind = h != NULL ? h->t.optimizer.kind : 0;
    char kinds[64];

    if (rc == IPUOF_OK)
        rc = check_group(h, group, 1);
    if (rc != IPUOF_OK)
        return rc;
    if (row == NULL || row->name == NULL)
        return fail(h, IPUOF_E_INVAL, "optimizer parameter %d is not one of IPUOF_OPT_PARAM_* "
                    "(1 .. %d)", param, N_PARAMS - 1);
    if (!(row->kinds & KIND(kind)))
        return fail(h, IPUOF_E_INVAL, "optimizer parameter %s applies to %s only; this "
                    "optimizer is %s (IPUOF_OPT_PARAM_* lists the kinds of each)",
                    row->name, kinds_list(row->kinds, kinds, sizeof kinds), kind_names[kind]);
    if (row->whole && group != 0)
        return fail(h, IPUOF_E_INVAL, "optimizer parameter %s is the whole optimizer's: set it "
                    "on group 0, not on parameter group %u", row->name, group);
    rc = check_range(h, row->name, row->range, value);
    if (rc == IPUOF_OK)
        store(h, group, param, value);
    return rc;
}

int
ipuof_compile_opts_add_optimizer_group(ipuof_compile_opts *h)
{
    const struct ipuof_optimizer *o = h != NULL ? &h->t.optimizer : NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        rc = check_group(h, 0, 1);
    if (rc != IPUOF_OK)
        return rc;
    if (o->n_groups >= IPUOF_OPTIMIZER_MAX_GROUPS)
        return fail(h, IPUOF_E_INVAL, "the optimizer has %d parameter groups besides the "
                    "first already, the most it can have", IPUOF_OPTIMIZER_MAX_GROUPS);
    h->groups[o->n_groups] = (struct ipuof_optimizer_group){
        o->lr, o->weight_decay, o->momentum, o->dampening, o->nesterov,
        o->beta1, o->beta2, o->eps, o->alpha, NULL, 0};
    h->t.optimizer.n_groups++;
    h->t.optimizer.groups = h->groups;
    return IPUOF_OK;
}

int
ipuof_compile_opts_add_optimizer_weight(ipuof_compile_opts *h, unsigned group,
                                        const char *weight)
{
    struct ipuof_optimizer_group *q;
    char *s = NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        rc = check_group(h, group, 0);
    if (rc != IPUOF_OK)
        return rc;
    q = &h->groups[group - 1];
    rc = ipuof_copts_grow(h, (void **)&h->weights[group - 1], q->n_weights,
                          sizeof *h->weights[group - 1], IPUOF_DEFAULT_MAX_REPEATED,
                          "weights in one optimizer parameter group");
    if (rc == IPUOF_OK)
        rc = ipuof_copts_copy_name(h, weight, "an optimizer parameter group's weight", &s);
    if (rc != IPUOF_OK)
        return rc;
    h->weights[group - 1][q->n_weights++] = s;
    q->weights = (const char *const *)h->weights[group - 1];
    return IPUOF_OK;
}

/* Copies the weights' names of o's groups into names[g] (caller-owned); on failure none. */
static int
copy_group_names(ipuof_compile_opts *h, const struct ipuof_optimizer *o,
                 char **names[IPUOF_OPTIMIZER_MAX_GROUPS])
{
    size_t g, j;

    for (g = 0; g < o->n_groups; g++) {
        const struct ipuof_optimizer_group *p = &o->groups[g];
        names[g] = calloc(p->n_weights > 0 ? p->n_weights : 1, sizeof *names[g]);
        for (j = 0; names[g] != NULL && j < p->n_weights; j++)
            if ((names[g][j] = strdup(p->weights[j])) == NULL)
                break;
        if (names[g] == NULL || j < p->n_weights)
            break;
    }
    if (g == o->n_groups)
        return IPUOF_OK;
    for (size_t k = 0; k <= g && k < o->n_groups; k++) {
        for (j = 0; names[k] != NULL && j < o->groups[k].n_weights; j++)
            free(names[k][j]);
        free(names[k]);
    }
    return fail(h, IPUOF_E_NOMEM, "out of memory for the optimizer's parameter groups");
}

int
ipuof_compile_opts_set_optimizer(ipuof_compile_opts *h, const struct ipuof_optimizer *o)
{
    char **names[IPUOF_OPTIMIZER_MAX_GROUPS] = {NULL};
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && o == NULL)
        rc = fail(h, IPUOF_E_INVAL, "no optimizer (NULL); fill one with ipuof_optimizer_init()");
    if (rc == IPUOF_OK)
        rc = ipuof_optimizer_check(&h->err, o, 1);
    if (rc == IPUOF_OK)
        rc = copy_group_names(h, o, names);
    if (rc != IPUOF_OK)
        return rc;
    ipuof_copts_optimizer_clear(h);
    h->t.optimizer = *o;  /* scalings of 0 sent as 0: the daemon reads them as 1 (unset) */
    for (size_t g = 0; g < o->n_groups; g++) {
        h->groups[g] = o->groups[g];
        h->weights[g] = names[g];
        h->groups[g].weights = (const char *const *)names[g];
    }
    h->t.optimizer.groups = o->n_groups > 0 ? h->groups : NULL;
    return IPUOF_OK;
}

/*
 * train.c — training models (PopTorch's trainingModel): torch.optim's defaults, the
 * training compile, the inference model made from a training model, setOptimizer, and what
 * the CompileReply says about training (whether the model trains, its gradient
 * accumulation, the weights it can read and write).
 *
 * Both compiles are compile.c's exchange (ipuof_compile_request()) with the CompileRequest's
 * training fields set, or with from_model_id set and no model bytes. Reading, writing,
 * copying and saving weights is weights.c's job.
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

/* Checks an optimizer's kind: one of IPUOF_OPTIMIZER_*, or 0 (PopTorch's default SGD) when
 * allow_default, and its groups' shape (at most IPUOF_OPTIMIZER_MAX_GROUPS, names given).
 * The ranges of the hyper-parameters are the daemon's to check. */
static int
check_optimizer(ipuof_client *c, const struct ipuof_optimizer *o, int allow_default)
{
    if (!((o->kind == 0 && allow_default) ||
          (o->kind >= IPUOF_OPTIMIZER_SGD && o->kind <= IPUOF_OPTIMIZER_LAMB)))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "optimizer kind %d is not one of IPUOF_OPTIMIZER_SGD (1), _ADAM "
                             "(2), _ADAMW (3), _RMSPROP (4) or _LAMB (5)%s",
                             o->kind, allow_default ? ", nor 0 for PopTorch's default SGD" : "");
    if (o->n_groups > IPUOF_OPTIMIZER_MAX_GROUPS || (o->n_groups > 0 && o->groups == NULL))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "the optimizer has %zu parameter groups besides the first%s; at "
                             "most %d", o->n_groups, o->groups == NULL ? " and groups is NULL" : "",
                             IPUOF_OPTIMIZER_MAX_GROUPS);
    for (size_t g = 0; g < o->n_groups; g++) {
        const struct ipuof_optimizer_group *p = &o->groups[g];
        if (p->n_weights > IPUOF_DEFAULT_MAX_REPEATED || (p->n_weights > 0 && p->weights == NULL))
            return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                                 "optimizer parameter group %zu lists %zu weights%s (at most "
                                 "%u)", g + 1, p->n_weights,
                                 p->weights == NULL ? " but no names" : "",
                                 IPUOF_DEFAULT_MAX_REPEATED);
        for (size_t j = 0; j < p->n_weights; j++)
            if (p->weights[j] == NULL || p->weights[j][0] == '\0')
                return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                                     "optimizer parameter group %zu: weight %zu has no name",
                                     g + 1, j);
    }
    return IPUOF_OK;
}

/* An optimizer's wire form with room for its groups (o's strings stay borrowed). */
struct opt_wire {
    Ipuof__Optimizer w;
    Ipuof__OptimizerGroup g[IPUOF_OPTIMIZER_MAX_GROUPS];
    Ipuof__OptimizerGroup *gp[IPUOF_OPTIMIZER_MAX_GROUPS];
};

/* Fills the wire form of o (checked) into *ow (o is only read). */
static void
optimizer_to_wire(const struct ipuof_optimizer *o, struct opt_wire *ow)
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

/* Checks the training options before anything is sent. */
static int
check_training(ipuof_client *c, const struct ipuof_training_opts *t)
{
    if (t == NULL || t->loss == NULL || t->loss[0] == '\0')
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "a training compile needs the name of the graph output to "
                             "minimise in ipuof_training_opts.loss");
    if (strlen(t->loss) > IPUOF_DEFAULT_MAX_STRING)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "the loss name is %zu bytes long; the limit is %u",
                             strlen(t->loss), IPUOF_DEFAULT_MAX_STRING);
    if (ipuof_wm_to_wire(&ipuof_wm_reduction, t->accumulation_reduction, -1) < 0)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "accumulation_reduction %d is neither IPUOF_REDUCTION_MEAN (0) nor "
                             "IPUOF_REDUCTION_SUM (1)",
                             t->accumulation_reduction);
    if (t->n_frozen_weights > 0 && t->frozen_weights == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "n_frozen_weights is %zu but frozen_weights is NULL",
                             t->n_frozen_weights);
    if (t->n_frozen_weights > IPUOF_DEFAULT_MAX_REPEATED)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "%zu frozen weights given; the limit is %u", t->n_frozen_weights,
                             IPUOF_DEFAULT_MAX_REPEATED);
    for (size_t i = 0; i < t->n_frozen_weights; i++) {
        if (t->frozen_weights[i] == NULL || t->frozen_weights[i][0] == '\0')
            return ipuof_err_set(c, IPUOF_E_INVAL, "client", "frozen weight %zu has no name",
                                 i);
    }
    return check_optimizer(c, &t->optimizer, 1);
}

/* The CompileRequest fields of t (checked) in *extra, with its optimizer in *opt; strings
 * stay borrowed from t. */
static void
training_fields(const struct ipuof_training_opts *t, Ipuof__CompileRequest *extra,
                struct opt_wire *opt)
{
    ipuof__compile_request__init(extra);
    optimizer_to_wire(&t->optimizer, opt);
    extra->loss = (char *)t->loss;
    extra->optimizer = &opt->w;
    extra->gradient_accumulation = t->gradient_accumulation != 0 ? t->gradient_accumulation : 1;
    extra->accumulation_reduction = (Ipuof__ReductionType)ipuof_wm_to_wire(
        &ipuof_wm_reduction, t->accumulation_reduction, IPUOF__REDUCTION_TYPE__REDUCTION_MEAN);
    extra->seed = t->seed;
    extra->n_frozen_weights = t->n_frozen_weights;
    extra->frozen_weights = (char **)t->frozen_weights;
}

int
ipuof_model_compile_training(ipuof_client *c, const void *onnx, size_t len,
                             const struct ipuof_model_opts *opts,
                             const struct ipuof_training_opts *t, ipuof_model **out)
{
    Ipuof__CompileRequest extra;
    struct opt_wire opt;
    int rc;

    rc = ipuof_compile_bytes_check(c, "ipuof_model_compile_training", onnx, len, out);
    if (rc != IPUOF_OK)
        return rc;
    rc = check_training(c, t);
    if (rc != IPUOF_OK)
        return rc;
    training_fields(t, &extra, &opt);
    return ipuof_compile_request(c, onnx, len, opts, NULL, &extra, out);
}

int
ipuof_model_compile_training_file(ipuof_client *c, const char *path,
                                  const struct ipuof_model_opts *opts,
                                  const struct ipuof_training_opts *t, ipuof_model **out)
{
    Ipuof__CompileRequest extra;
    struct opt_wire opt;
    int rc;

    rc = ipuof_compile_file_check(c, "ipuof_model_compile_training_file", path, out);
    if (rc != IPUOF_OK)
        return rc;
    rc = check_training(c, t);
    if (rc != IPUOF_OK)
        return rc;
    training_fields(t, &extra, &opt);
    return ipuof_compile_file(c, path, opts, &extra, out);
}

int
ipuof_model_inference_from(ipuof_model *training, const struct ipuof_model_opts *opts,
                           ipuof_model **out)
{
    static const uint8_t no_bytes[1];
    struct ipuof_model_opts o = {0};
    Ipuof__CompileRequest extra;
    ipuof_client *c;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (training == NULL)
        return IPUOF_E_INVAL;
    c = training->c;
    ipuof_err_clear(c);
    if (out == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_inference_from() needs a place for the model handle");
    rc = ipuof_model_usable(training);
    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    if (opts != NULL)
        o = *opts;
    /* A symbolic batch dimension needs a size: the training model's unless opts says. */
    if (o.micro_batch == 0)
        o.micro_batch = training->micro_batch;
    ipuof__compile_request__init(&extra);
    extra.from_model_id = training->id;
    return ipuof_compile_request(c, no_bytes, 0, &o, o.name != NULL ? o.name : training->name,
                                 &extra, out);
}

int
ipuof_model_set_optimizer(ipuof_model *m, const struct ipuof_optimizer *o)
{
    return ipuof_model_set_optimizer_half(m, o, NULL);
}

int
ipuof_model_set_optimizer_half(ipuof_model *m, const struct ipuof_optimizer *o,
                               const struct ipuof_optimizer_half *a)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__SetOptimizerRequest so = IPUOF__SET_OPTIMIZER_REQUEST__INIT;
    struct opt_wire opt;
    Ipuof__Header *reply = NULL;
    ipuof_client *c;
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    c = m->c;
    ipuof_err_clear(c);
    if (o == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_set_optimizer() needs an optimizer");
    rc = check_optimizer(c, o, 0);
    if (rc == IPUOF_OK && a != NULL && a->auto_loss_scaling &&
        (!(a->als_bin_edge >= 0.0f && a->als_bin_edge <= 1.0f) ||
         !(a->als_threshold >= 0.0f && a->als_threshold <= 1.0f)))
        rc = ipuof_err_set(c, IPUOF_E_INVAL, "client", "automatic loss scaling: the bin edge "
                           "(%g) must be in (0, 1] (0: 0.125) and the threshold proportion "
                           "(%g) in [0, 1]", (double)a->als_bin_edge,
                           (double)a->als_threshold);
    if (rc == IPUOF_OK)
        rc = ipuof_model_usable(m);
    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    optimizer_to_wire(o, &opt);
    if (a != NULL) {
        opt.w.accum_float16 = a->accum_float16 != 0;
        opt.w.first_order_float16 = a->first_order_float16 != 0;
        opt.w.second_order_float16 = a->second_order_float16 != 0;
        opt.w.auto_loss_scaling = a->auto_loss_scaling != 0;
        opt.w.als_update_period = a->als_update_period;
        opt.w.als_bin_edge = a->als_bin_edge;
        opt.w.als_threshold = a->als_threshold;
    }
    so.model_id = m->id;
    so.optimizer = &opt.w;
    req.body_case = IPUOF__HEADER__BODY_SET_OPTIMIZER;
    req.set_optimizer = &so;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY, c->request_ms, NULL,
                         NULL, &reply);
    ipuof_frame_header_free(reply);
    return ipuof_model_settle(c, rc);
}

/* ---- what the daemon reported ------------------------------------------------------- */

int
ipuof_model_is_training(const ipuof_model *m)
{
    return m != NULL && m->training;
}

unsigned
ipuof_model_gradient_accumulation(const ipuof_model *m)
{
    return m != NULL ? m->gradient_accumulation : 0;
}

size_t
ipuof_model_weight_count(const ipuof_model *m)
{
    return m != NULL ? m->n_weights : 0;
}

int
ipuof_model_weight_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t, int *kind)
{
    const struct ipuof_tinfo *w;

    if (m == NULL || i >= m->n_weights || t == NULL)
        return IPUOF_E_INVAL;
    w = &m->weights[i].t;
    memset(t, 0, sizeof *t);
    t->name = w->name;
    t->dtype = w->dtype;
    t->rank = w->rank;
    memcpy(t->dims, w->dims, sizeof t->dims);
    t->bytes = (size_t)w->bytes;
    if (kind != NULL)
        *kind = m->weights[i].kind;
    return IPUOF_OK;
}

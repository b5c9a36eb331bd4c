/*
 * train.c — training models (PopTorch's trainingModel): the struct-based training compile,
 * the inference model made from a training model, setOptimizer, and what the CompileReply
 * says about training (whether the model trains, its gradient accumulation, the weights it
 * can read and write). torch.optim's defaults and the optimizer's wire form: optimizer.c.
 *
 * Both compiles are compile.c's exchange (ipuof_compile_request()) with the CompileRequest's
 * training fields set (optimizer.c), or with from_model_id set and no model bytes. Reading,
 * writing, copying and saving weights is weights.c's job.
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

/* The loss a struct-based training compile needs (the rest is checked by the options
 * handle's setters, compile_opts.c). */
static int
check_loss(ipuof_client *c, const struct ipuof_training_opts *t)
{
    if (t == NULL || t->loss == NULL || t->loss[0] == '\0')
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "a training compile needs the name of the graph output to "
                             "minimise in ipuof_training_opts.loss");
    return IPUOF_OK;
}

int
ipuof_model_compile_training(ipuof_client *c, const void *onnx, size_t len,
                             const struct ipuof_model_opts *opts,
                             const struct ipuof_training_opts *t, ipuof_model **out)
{
    int rc = ipuof_compile_bytes_check(c, "ipuof_model_compile_training", onnx, len, out);

    if (rc == IPUOF_OK)
        rc = check_loss(c, t);
    if (rc != IPUOF_OK)
        return rc;
    return ipuof_compile_structs(c, onnx, len, NULL, opts, t, out);
}

int
ipuof_model_compile_training_file(ipuof_client *c, const char *path,
                                  const struct ipuof_model_opts *opts,
                                  const struct ipuof_training_opts *t, ipuof_model **out)
{
    int rc = ipuof_compile_file_check(c, "ipuof_model_compile_training_file", path, out);

    if (rc == IPUOF_OK)
        rc = check_loss(c, t);
    if (rc != IPUOF_OK)
        return rc;
    return ipuof_compile_structs(c, NULL, 0, path, opts, t, out);
}

/* The checks both forms of inference_from make (what names the call): IPUOF_OK, or the
 * error on training's client (*out NULL). */
static int
inference_from_begin(ipuof_model *training, ipuof_model **out, const char *what)
{
    int rc;

    if (out != NULL)
        *out = NULL;
    if (training == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(training->c);
    if (out == NULL)
        return ipuof_err_set(training->c, IPUOF_E_INVAL, "client",
                             "%s() needs a place for the model handle", what);
    rc = ipuof_model_usable(training);
    return rc != IPUOF_OK ? ipuof_model_settle(training->c, rc) : IPUOF_OK;
}

/* The inference model of training's graph with h's model options (h only read). */
static int
inference_from(ipuof_model *training, const ipuof_compile_opts *h, ipuof_model **out)
{
    static const uint8_t no_bytes[1];
    struct ipuof_model_opts mo = h->mo;
    Ipuof__CompileRequest extra;

    /* A symbolic batch dimension needs a size: the training model's unless h says. */
    if (mo.micro_batch == 0)
        mo.micro_batch = training->micro_batch;
    ipuof__compile_request__init(&extra);
    extra.from_model_id = training->id;
    return ipuof_compile_request(training->c, no_bytes, 0, &mo,
                                 mo.name != NULL ? mo.name : training->name, &extra, out);
}

int
ipuof_model_inference_from(ipuof_model *training, const struct ipuof_model_opts *opts,
                           ipuof_model **out)
{
    ipuof_compile_opts *h = NULL;
    int rc = inference_from_begin(training, out, "ipuof_model_inference_from");

    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_from_struct(training->c, opts, NULL, &h);
    if (rc == IPUOF_OK)
        rc = inference_from(training, h, out);
    ipuof_compile_opts_free(h);
    return rc;
}

int
ipuof_model_inference_from_with(ipuof_model *training, const ipuof_compile_opts *opts,
                                ipuof_model **out)
{
    ipuof_compile_opts *own = NULL;
    int rc = inference_from_begin(training, out, "ipuof_model_inference_from_with");

    if (rc == IPUOF_OK && opts != NULL && opts->t.loss != NULL)
        rc = ipuof_err_set(training->c, IPUOF_E_INVAL, "client",
                           "ipuof_model_inference_from_with() makes an inference model, but "
                           "the options have a loss ('%s'); set_loss(NULL) makes them "
                           "inference options", opts->t.loss);
    if (rc == IPUOF_OK && opts == NULL && (own = ipuof_compile_opts_new()) == NULL)
        rc = ipuof_err_set(training->c, IPUOF_E_NOMEM, "client",
                           "out of memory for compile options");
    if (rc == IPUOF_OK)
        rc = inference_from(training, opts != NULL ? opts : own, out);
    ipuof_compile_opts_free(own);
    return rc;
}

/* Sends the checked optimizer o with float16 settings a (NULL: none) as m's setOptimizer. */
static int
send_optimizer(ipuof_model *m, const struct ipuof_optimizer *o,
               const struct ipuof_optimizer_half *a)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__SetOptimizerRequest so = IPUOF__SET_OPTIMIZER_REQUEST__INIT;
    struct ipuof_opt_wire opt;
    Ipuof__Header *reply = NULL;
    ipuof_client *c = m->c;
    int rc = ipuof_model_usable(m);

    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    ipuof_optimizer_to_wire(o, &opt);
    ipuof_optimizer_half_to_wire(a, &opt.w);
    so.model_id = m->id;
    so.optimizer = &opt.w;
    req.body_case = IPUOF__HEADER__BODY_SET_OPTIMIZER;
    req.set_optimizer = &so;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_SET_OPTIMIZER_REPLY, c->request_ms, NULL,
                         NULL, &reply);
    ipuof_frame_header_free(reply);
    return ipuof_model_settle(c, rc);
}

int
ipuof_model_set_optimizer_with(ipuof_model *m, const ipuof_compile_opts *o)
{
    if (m == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(m->c);
    if (o == NULL)
        return ipuof_err_set(m->c, IPUOF_E_INVAL, "client", "ipuof_model_set_optimizer_with() "
                             "needs compile options holding the optimizer (NULL given)");
    if (o->t.optimizer.kind == 0)
        return ipuof_err_set(m->c, IPUOF_E_INVAL, "client", "ipuof_model_set_optimizer_with(): "
                             "the options' optimizer is PopTorch's default (kind 0), which "
                             "names no kind; choose the compile's kind with "
                             "ipuof_compile_opts_set_optimizer_kind() and set its parameters");
    /* the setters checked every value; the kind and groups as set_optimizer_half does */
    int rc = ipuof_optimizer_check(&m->c->err, &o->t.optimizer, 0);
    return rc == IPUOF_OK ? send_optimizer(m, &o->t.optimizer, &o->half) : rc;
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
    ipuof_client *c;
    int rc;

    if (m == NULL)
        return IPUOF_E_INVAL;
    c = m->c;
    ipuof_err_clear(c);
    if (o == NULL)
        return ipuof_err_set(c, IPUOF_E_INVAL, "client",
                             "ipuof_model_set_optimizer() needs an optimizer");
    rc = ipuof_optimizer_check(&c->err, o, 0);
    if (rc == IPUOF_OK && a != NULL && a->auto_loss_scaling &&
        (!(a->als_bin_edge >= 0.0f && a->als_bin_edge <= 1.0f) ||
         !(a->als_threshold >= 0.0f && a->als_threshold <= 1.0f)))
        rc = ipuof_err_set(c, IPUOF_E_INVAL, "client", "automatic loss scaling: the bin edge "
                           "(%g) must be in (0, 1] (0: 0.125) and the threshold proportion "
                           "(%g) in [0, 1]", (double)a->als_bin_edge,
                           (double)a->als_threshold);
    if (rc != IPUOF_OK)
        return ipuof_model_settle(c, rc);
    return send_optimizer(m, o, a);
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

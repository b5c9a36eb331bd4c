/*
 * compile_opts.c — the compile options as an opaque handle (ipuof_compile_opts, the way
 * curl's easy handle and zstd's CCtx take parameters): one setter per option, each checking
 * its value where it enters and saying what was wrong and what is right; the defaults are
 * applied once, in ipuof_compile_opts_new(). A new option is one setter here and a field
 * in struct ipuof_compile_opts (model_internal.h), never a public struct layout, so programs
 * built against an older header keep working without a compat copy.
 *
 * The struct-based calls (ipuof_model_compile(), ..._training(), ipuof_model_inference_from;
 * their handle forms are ..._with) go through ipuof_compile_opts_from_struct(), which feeds
 * every field to the same setters (and is where the structs' "0 means 1" is read, once);
 * every compile then sends the handle's options as they are (compile.c).
 *
 * Everything a setter takes is copied. The optimizer's setters are in compile_opts_optim.c,
 * the helpers both use (begin, copy a name, grow an array) in compile_opts_base.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "wiremap.h"

/* Records a refusal on h (when not NULL) and returns code. */
#define fail(h, code, ...) \
    ((h) != NULL ? ipuof_err_info_set(&(h)->err, (code), "client", __VA_ARGS__) : (code))

/* ---- the handle ------------------------------------------------------------------------ */

ipuof_compile_opts *
ipuof_compile_opts_new(void)
{
    ipuof_compile_opts *h = calloc(1, sizeof *h);

    if (h == NULL)
        return NULL;
    /* The defaults, here and nowhere else: one micro-batch per call and one replica per
     * process, outputs by the model's kind, gradients of one micro-batch per step (mean),
     * PopTorch's default SGD (kind 0), one IPU per replica, tensors on chip, no trace. */
    h->mo.device_iterations = 1;
    h->mo.replicas = 1;
    h->mo.default_output_kind = IPUOF_OUTPUT_DEFAULT;
    h->mo.strategy = IPUOF_STRATEGY_DEFAULT;
    h->mo.input_group_type = IPUOF_GROUP_NONE;
    for (int k = 0; k < IPUOF_TENSOR_KINDS; k++)
        h->mo.locations[k] = IPUOF_LOCATION_ON_CHIP;
    h->t.gradient_accumulation = 1;
    h->t.accumulation_reduction = IPUOF_REDUCTION_MEAN;
    return h;
}

void
ipuof_compile_opts_free(ipuof_compile_opts *h)
{
    if (h == NULL)
        return;
    free(h->name);
    free(h->loss);
    for (size_t i = 0; i < h->mo.n_output_modes; i++)
        free((char *)h->modes[i].name);
    free(h->modes);
    for (size_t i = 0; i < h->mo.n_constant_inputs; i++) {
        free((char *)h->consts[i].name);
        free((void *)h->consts[i].data);
    }
    free(h->consts);
    for (size_t i = 0; i < h->mo.n_blocks; i++)
        free((char *)h->blocks[i].prefix);
    free(h->blocks);
    for (size_t i = 0; i < h->t.n_frozen_weights; i++)
        free(h->frozen[i]);
    free(h->frozen);
    ipuof_copts_optimizer_clear(h);
    free(h);
}

const char *
ipuof_compile_opts_errmsg(const ipuof_compile_opts *h)
{
    return h != NULL ? h->err.msg : "no options handle (NULL)";
}

/* ---- model options --------------------------------------------------------------------- */

int
ipuof_compile_opts_set_name(ipuof_compile_opts *h, const char *name)
{
    char *s = NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && name != NULL)
        rc = ipuof_copts_copy_name(h, name, "the model name", &s);
    if (rc != IPUOF_OK)
        return rc;
    free(h->name);
    h->name = s;
    h->mo.name = s;
    return IPUOF_OK;
}

/* A count of at least 1; what names it, hint says what it counts. */
static int
set_count(ipuof_compile_opts *h, unsigned *field, unsigned n, const char *what, const char *hint)
{
    int rc = ipuof_copts_begin(h);

    if (rc != IPUOF_OK)
        return rc;
    if (n == 0)
        return fail(h, IPUOF_E_INVAL, "%s 0: it must be at least 1 (%s)", what, hint);
    *field = n;
    return IPUOF_OK;
}

int
ipuof_compile_opts_set_device_iterations(ipuof_compile_opts *h, unsigned n)
{
    return set_count(h, h != NULL ? &h->mo.device_iterations : NULL, n, "device_iterations",
                     "each call runs that many micro-batches per replica");
}

int
ipuof_compile_opts_set_replicas(ipuof_compile_opts *h, unsigned n)
{
    return set_count(h, h != NULL ? &h->mo.replicas : NULL, n, "replicas",
                     "this process's replication factor; a job of several processes has "
                     "that many per process");
}

int
ipuof_compile_opts_set_micro_batch(ipuof_compile_opts *h, unsigned n)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        h->mo.micro_batch = n;
    return rc;
}

/* Checks an output kind and its n; what names it in the sentence. */
static int
check_mode(ipuof_compile_opts *h, int kind, unsigned n, const char *what)
{
    int w;

    if (enummap_a_to_b(&ipuof_wm_output_kind, kind, &w) != 0)
        return fail(h, IPUOF_E_INVAL, "%s has output kind %d, which is not one of IPUOF_OUTPUT_*",
                    what, kind);
    if (kind == IPUOF_OUTPUT_EVERYN && n == 0)
        return fail(h, IPUOF_E_INVAL,
                    "%s is IPUOF_OUTPUT_EVERYN with n = 0; n must be at least 1", what);
    return IPUOF_OK;
}

int
ipuof_compile_opts_set_output_default(ipuof_compile_opts *h, int kind, unsigned n)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        rc = check_mode(h, kind, n, "the default output mode");
    if (rc != IPUOF_OK)
        return rc;
    h->mo.default_output_kind = kind;
    h->mo.default_output_n = n;
    return IPUOF_OK;
}

int
ipuof_compile_opts_add_output(ipuof_compile_opts *h, const char *name, int kind, unsigned n)
{
    size_t i = h != NULL ? h->mo.n_output_modes : 0;
    char what[64];
    char *s = NULL;
    int rc = ipuof_copts_begin(h);

    snprintf(what, sizeof what, "output mode %zu", i);
    if (rc == IPUOF_OK && (name == NULL || name[0] == '\0'))
        rc = fail(h, IPUOF_E_INVAL, "output mode %zu names no output", i);
    if (rc == IPUOF_OK)
        rc = check_mode(h, kind, n, what);
    if (rc == IPUOF_OK)
        rc = ipuof_copts_grow(h, (void **)&h->modes, i, sizeof *h->modes,
                              IPUOF_DEFAULT_MAX_REPEATED, "output modes");
    if (rc == IPUOF_OK)
        rc = ipuof_copts_copy_name(h, name, "an output mode's output name", &s);
    if (rc != IPUOF_OK)
        return rc;
    h->modes[i] = (struct ipuof_output_mode){s, kind, n};
    h->mo.output_modes = h->modes;
    h->mo.n_output_modes = i + 1;
    return IPUOF_OK;
}

int
ipuof_compile_opts_set_no_cache(ipuof_compile_opts *h, int on)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        h->mo.no_cache = on != 0;
    return rc;
}

int
ipuof_compile_opts_set_progress(ipuof_compile_opts *h, ipuof_progress_fn fn, void *user)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK) {
        h->mo.progress = fn;
        h->mo.progress_user = user;
    }
    return rc;
}

/* Checks constant input t (its index i) before it is copied. */
static int
check_constant(ipuof_compile_opts *h, size_t i, const struct ipuof_tensor *t)
{
    uint64_t want;

    if (t == NULL || t->name == NULL || ipuof_shape_bytes(t->dtype, t->rank, t->dims, &want) != 0)
        return fail(h, IPUOF_E_INVAL, "constant input %zu needs a name, a rank of 0 to 8, dims "
                    "of at least 0 and a known dtype", i);
    if (want != t->bytes || (want > 0 && t->data == NULL))
        return fail(h, IPUOF_E_SHAPE, "constant input '%s' has %zu bytes; its shape and dtype "
                    "need %llu", t->name, t->bytes, (unsigned long long)want);
    return IPUOF_OK;
}

int
ipuof_compile_opts_add_constant_input(ipuof_compile_opts *h, const struct ipuof_tensor *t)
{
    size_t i = h != NULL ? h->mo.n_constant_inputs : 0;
    struct ipuof_tensor c;
    char *name = NULL;
    void *data = NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        rc = check_constant(h, i, t);
    if (rc == IPUOF_OK)
        rc = ipuof_copts_grow(h, (void **)&h->consts, i, sizeof *h->consts,
                              IPUOF_DEFAULT_MAX_REPEATED, "constant inputs");
    if (rc == IPUOF_OK)
        rc = ipuof_copts_copy_name(h, t->name, "a constant input", &name);
    if (rc == IPUOF_OK && (data = malloc(t->bytes != 0 ? t->bytes : 1)) == NULL)
        rc = fail(h, IPUOF_E_NOMEM, "out of memory for constant input '%s'", t->name);
    if (rc != IPUOF_OK) {
        free(name);
        return rc;
    }
    if (t->bytes != 0)
        memcpy(data, t->data, t->bytes);
    c = *t;
    c.name = name;
    c.data = data;
    h->consts[i] = c;
    h->mo.constant_inputs = h->consts;
    h->mo.n_constant_inputs = i + 1;
    return IPUOF_OK;
}

/* ---- placement and profiling ----------------------------------------------------------- */

int
ipuof_compile_opts_set_strategy(ipuof_compile_opts *h, int strategy)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && ipuof_wm_to_wire(&ipuof_wm_strategy, strategy, -1) < 0)
        rc = fail(h, IPUOF_E_INVAL, "execution strategy %d is not one of IPUOF_STRATEGY_* "
                  "(0 default, 1 pipelined, 2 sharded, 3 phased)", strategy);
    if (rc == IPUOF_OK)
        h->mo.strategy = strategy;
    return rc;
}

int
ipuof_compile_opts_add_block(ipuof_compile_opts *h, const char *prefix, int stage, unsigned ipu)
{
    size_t i = h != NULL ? h->mo.n_blocks : 0;
    char *s = NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && stage < IPUOF_STAGE_AUTO)
        rc = fail(h, IPUOF_E_INVAL, "block %zu needs a stage of at least IPUOF_STAGE_AUTO (-1), "
                  "not %d", i, stage);
    if (rc == IPUOF_OK)
        rc = ipuof_copts_grow(h, (void **)&h->blocks, i, sizeof *h->blocks, IPUOF_MAX_BLOCKS,
                              "blocks");
    if (rc == IPUOF_OK)
        rc = ipuof_copts_copy_name(h, prefix, "a block's node-name prefix", &s);
    if (rc != IPUOF_OK)
        return rc;
    h->blocks[i] = (struct ipuof_block){s, stage, ipu};
    h->mo.blocks = h->blocks;
    h->mo.n_blocks = i + 1;
    return IPUOF_OK;
}

int
ipuof_compile_opts_set_location(ipuof_compile_opts *h, int kind, int location)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && (kind < 0 || kind >= IPUOF_TENSOR_KINDS))
        rc = fail(h, IPUOF_E_INVAL, "tensor kind %d is not one of IPUOF_TENSORS_* (0 to %d)",
                  kind, IPUOF_TENSOR_KINDS - 1);
    if (rc == IPUOF_OK && ipuof_wm_to_wire(&ipuof_wm_location, location, -1) < 0)
        rc = fail(h, IPUOF_E_INVAL, "tensor location %d of kind %d is not one of "
                  "IPUOF_LOCATION_* (0 on chip, 1 off chip)", location, kind);
    if (rc == IPUOF_OK)
        h->mo.locations[kind] = location;
    return rc;
}

int
ipuof_compile_opts_set_profile(ipuof_compile_opts *h, int on)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        h->mo.profile = on != 0;
    return rc;
}

int
ipuof_compile_opts_set_input_group(ipuof_compile_opts *h, unsigned size, int type)
{
    int rc = ipuof_copts_begin(h);
    char known[200];

    if (rc == IPUOF_OK && ipuof_wm_to_wire(&ipuof_wm_group, type, -1) < 0)
        rc = fail(h, IPUOF_E_INVAL, "input_group_type %d is unknown; use %s", type,
                  enummap_known(&ipuof_wm_group, known, sizeof known));
    if (rc == IPUOF_OK) {
        h->mo.input_group_size = size;
        h->mo.input_group_type = type;
    }
    return rc;
}

/* ---- training -------------------------------------------------------------------------- */

int
ipuof_compile_opts_set_loss(ipuof_compile_opts *h, const char *loss)
{
    char *s = NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && loss != NULL)
        rc = ipuof_copts_copy_name(h, loss, "the loss (the graph output to minimise)", &s);
    if (rc != IPUOF_OK)
        return rc;
    free(h->loss);
    h->loss = s;
    h->t.loss = s;
    return IPUOF_OK;
}

int
ipuof_compile_opts_set_gradient_accumulation(ipuof_compile_opts *h, unsigned n)
{
    return set_count(h, h != NULL ? &h->t.gradient_accumulation : NULL, n,
                     "gradient_accumulation", "an optimizer step accumulates the gradients of "
                     "that many micro-batches");
}

int
ipuof_compile_opts_set_accumulation_reduction(ipuof_compile_opts *h, int reduction)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && ipuof_wm_to_wire(&ipuof_wm_reduction, reduction, -1) < 0)
        rc = fail(h, IPUOF_E_INVAL, "accumulation_reduction %d is neither IPUOF_REDUCTION_MEAN "
                  "(0) nor IPUOF_REDUCTION_SUM (1)", reduction);
    if (rc == IPUOF_OK)
        h->t.accumulation_reduction = reduction;
    return rc;
}

int
ipuof_compile_opts_set_seed(ipuof_compile_opts *h, uint64_t seed)
{
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK)
        h->t.seed = seed;
    return rc;
}

int
ipuof_compile_opts_add_frozen_weight(ipuof_compile_opts *h, const char *name)
{
    size_t i = h != NULL ? h->t.n_frozen_weights : 0;
    char *s = NULL;
    int rc = ipuof_copts_begin(h);

    if (rc == IPUOF_OK && (name == NULL || name[0] == '\0'))
        rc = fail(h, IPUOF_E_INVAL, "frozen weight %zu has no name", i);
    if (rc == IPUOF_OK)
        rc = ipuof_copts_grow(h, (void **)&h->frozen, i, sizeof *h->frozen,
                              IPUOF_DEFAULT_MAX_REPEATED, "frozen weights");
    if (rc == IPUOF_OK)
        rc = ipuof_copts_copy_name(h, name, "a frozen weight", &s);
    if (rc != IPUOF_OK)
        return rc;
    h->frozen[i] = s;
    h->t.frozen_weights = (const char *const *)h->frozen;
    h->t.n_frozen_weights = i + 1;
    return IPUOF_OK;
}

/* ---- from the public structs ----------------------------------------------------------- */

/* The fields of struct ipuof_model_opts o (not NULL) through the setters. */
static int
model_from_struct(ipuof_compile_opts *h, const struct ipuof_model_opts *o)
{
    /* The structs' "0 means 1", read here only: the setters take counts of at least 1. */
    int rc = ipuof_compile_opts_set_device_iterations(h, o->device_iterations ? o->device_iterations
                                                                              : 1);

    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_replicas(h, o->replicas != 0 ? o->replicas : 1);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_name(h, o->name);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_micro_batch(h, o->micro_batch);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_output_default(h, o->default_output_kind, o->default_output_n);
    if (rc == IPUOF_OK && o->n_output_modes > 0 && o->output_modes == NULL)
        rc = fail(h, IPUOF_E_INVAL, "n_output_modes is %zu but output_modes is NULL",
                  o->n_output_modes);
    if (rc == IPUOF_OK && o->n_output_modes > IPUOF_DEFAULT_MAX_REPEATED)
        rc = fail(h, IPUOF_E_INVAL, "%zu output modes given; the limit is %u", o->n_output_modes,
                  IPUOF_DEFAULT_MAX_REPEATED);
    for (size_t i = 0; rc == IPUOF_OK && i < o->n_output_modes; i++)
        rc = ipuof_compile_opts_add_output(h, o->output_modes[i].name, o->output_modes[i].kind,
                                           o->output_modes[i].n);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_no_cache(h, o->no_cache);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_progress(h, o->progress, o->progress_user);
    if (rc == IPUOF_OK && o->n_constant_inputs > 0 && o->constant_inputs == NULL)
        rc = fail(h, IPUOF_E_INVAL, "n_constant_inputs is %zu but constant_inputs is NULL",
                  o->n_constant_inputs);
    if (rc == IPUOF_OK && o->n_constant_inputs > IPUOF_DEFAULT_MAX_REPEATED)
        rc = fail(h, IPUOF_E_INVAL, "%zu constant inputs given; the limit is %u",
                  o->n_constant_inputs, IPUOF_DEFAULT_MAX_REPEATED);
    for (size_t i = 0; rc == IPUOF_OK && i < o->n_constant_inputs; i++)
        rc = ipuof_compile_opts_add_constant_input(h, &o->constant_inputs[i]);
    return rc;
}

/* The placement fields of o (not NULL) through the setters. */
static int
placement_from_struct(ipuof_compile_opts *h, const struct ipuof_model_opts *o)
{
    int rc = ipuof_compile_opts_set_strategy(h, o->strategy);

    if (rc == IPUOF_OK &&
        (o->n_blocks > IPUOF_MAX_BLOCKS || (o->n_blocks > 0 && o->blocks == NULL)))
        rc = fail(h, IPUOF_E_INVAL, "%zu blocks given%s; a placement has at most %d", o->n_blocks,
                  o->blocks == NULL ? " with blocks NULL" : "", IPUOF_MAX_BLOCKS);
    for (size_t i = 0; rc == IPUOF_OK && i < o->n_blocks; i++)
        rc = ipuof_compile_opts_add_block(h, o->blocks[i].prefix, o->blocks[i].stage,
                                          o->blocks[i].ipu);
    for (int k = 0; rc == IPUOF_OK && k < IPUOF_TENSOR_KINDS; k++)
        rc = ipuof_compile_opts_set_location(h, k, o->locations[k]);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_profile(h, o->profile);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_input_group(h, o->input_group_size, o->input_group_type);
    return rc;
}

/* The fields of struct ipuof_training_opts t (not NULL) through the setters. */
static int
training_from_struct(ipuof_compile_opts *h, const struct ipuof_training_opts *t)
{
    int rc = ipuof_compile_opts_set_loss(h, t->loss);

    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_optimizer(h, &t->optimizer);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_gradient_accumulation(
            h, t->gradient_accumulation != 0 ? t->gradient_accumulation : 1);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_accumulation_reduction(h, t->accumulation_reduction);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_seed(h, t->seed);
    if (rc == IPUOF_OK && t->n_frozen_weights > 0 && t->frozen_weights == NULL)
        rc = fail(h, IPUOF_E_INVAL, "n_frozen_weights is %zu but frozen_weights is NULL",
                  t->n_frozen_weights);
    if (rc == IPUOF_OK && t->n_frozen_weights > IPUOF_DEFAULT_MAX_REPEATED)
        rc = fail(h, IPUOF_E_INVAL, "%zu frozen weights given; the limit is %u",
                  t->n_frozen_weights, IPUOF_DEFAULT_MAX_REPEATED);
    for (size_t i = 0; rc == IPUOF_OK && i < t->n_frozen_weights; i++)
        rc = ipuof_compile_opts_add_frozen_weight(h, t->frozen_weights[i]);
    return rc;
}

int
ipuof_compile_opts_from_struct(ipuof_client *c, const struct ipuof_model_opts *o,
                               const struct ipuof_training_opts *t, ipuof_compile_opts **out)
{
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    int rc = IPUOF_OK;

    *out = NULL;
    if (h == NULL)
        return ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory for compile options");
    if (o != NULL)
        rc = model_from_struct(h, o);
    if (rc == IPUOF_OK && o != NULL)
        rc = placement_from_struct(h, o);
    if (rc == IPUOF_OK && t != NULL)
        rc = training_from_struct(h, t);
    if (rc != IPUOF_OK) {
        rc = ipuof_err_report(c, &h->err);
        ipuof_compile_opts_free(h);
        return rc;
    }
    *out = h;
    return IPUOF_OK;
}

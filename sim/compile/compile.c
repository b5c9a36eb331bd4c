/*
 * compile.c — from a model and run options to an executable: resolve input shapes for one
 * micro-batch, infer every node's outputs through the op table, fold nodes whose inputs are
 * all known, drop nodes nothing reads, place nodes on IPUs, lay out the input and output
 * run buffers, then hand over to plan.c (memory) and exec.c (binding). For a training
 * compile, weights.c decides which initializers become weights before inference and lays
 * them out after autodiff.c has built the backward schedule.
 *
 * Does not: execute anything at run time, or know any op's semantics (ops.h does).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "half.h"
#include "program.h"

#define MAX_DEVICE_ITERATIONS (1u << 24)
#define MAX_REPLICAS 1024u
#define MAX_ACCUMULATION (1u << 20)

void
sim_compile_opts_init(struct sim_compile_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->device_iterations = 1;
    o->replicas = 1;
    o->ipu_memory_bytes = SIM_DEFAULT_IPU_MEMORY;
    o->tiles = SIM_DEFAULT_TILES;
    o->default_mode.kind = SIM_OUTPUT_DEFAULT;
    o->gradient_accumulation = 1;
    o->accumulation_reduction = SIM_REDUCE_MEAN;
    sim_optimizer_init(&o->optimizer, SIM_OPT_SGD);
    o->optimizer.lr = 0.01f;
    sim_cost_cfg_init(&o->cost);
}

bool
sim_exe_own(struct sim_exe *e, void *p)
{
    if (e->n_owned == e->cap_owned) {
        int cap = e->cap_owned ? e->cap_owned * 2 : 16;
        void **n = realloc(e->owned, (size_t)cap * sizeof(*n));
        if (n == NULL) {
            free(p);
            return false;
        }
        e->owned = n;
        e->cap_owned = cap;
    }
    e->owned[e->n_owned++] = p;
    return true;
}

void
sim_exe_free(struct sim_exe *e)
{
    if (e == NULL)
        return;
    sim_crew_free(e->crew);
    free(e->host);
    free(e->terr);
    free(e->trc);
    for (int i = 0; i < e->n_nodes; i++)
        free(e->nodes[i].params);
    free(e->nodes);
    for (int i = 0; i < e->n_owned; i++)
        free(e->owned[i]);
    free(e->owned);
    for (int i = 0; i < e->n_in; i++)
        free(e->in[i].buf);
    for (int i = 0; i < e->n_out; i++)
        free(e->out[i].buf);
    free(e->in);
    free(e->out);
    if (e->arenas != NULL)
        for (unsigned i = 0; i < e->R * e->S * e->ipr; i++)
            sim_zeroed_free(e->arenas[i], e->arena_bytes[i % e->ipr]);
    free(e->arenas);
    free(e->rel);
    free(e->rel_start);
    free(e->rel_held);
    free(e->arena_bytes);
    free(e->slots);
    free(e->mem);
    free(e->kern);
    free(e->views);
    free(e->patches);
    free(e->patch_start);
    free(e->rng);
    sim_half_unbind(e);
    free(e->stage_ipu);
    free(e->stage_node);
    free(e->xfer);
    free(e->xbuf);
    sim_bar_free(e->rbar, e->R);
    sim_clock_free(e->clock);
    sim_prog_free(e->prog);
    free(e->vals);
    free(e->w);
    free(e->params);
    free(e->bufs);
    free(e->shown);
    sim_train_free(e->tr);
    free(e);
}

static void
view_of(struct sim_tensor *t, const struct sim_val *v)
{
    t->dtype = v->ti.dtype;
    t->shape = v->ti.shape;
    t->numel = v->ti.numel;
    t->data = v->kind == SIM_V_CONST ? (void *)v->ti.cdata : NULL;
}

/* Freezes model input i to the caller's value (copied). */
static int
freeze_input(struct sim_exe *e, int v, const struct sim_frozen_input *f, struct sim_err *err)
{
    const struct sim_mval *mv = &e->m->vals[v];
    struct sim_val *val = &e->vals[v];
    struct sim_shape s;
    int64_t numel;
    void *copy;

    if (f->dtype != mv->dtype)
        return sim_err_set(err, IPUOF_E_DTYPE, "frozen input '%s' is %s but the graph "
                           "declares %s", mv->name, sim_dtype_name(f->dtype),
                           sim_dtype_name(mv->dtype));
    if (f->rank < 0 || f->rank > SIM_MAX_RANK || (f->rank > 0 && f->dims == NULL))
        return sim_err_set(err, IPUOF_E_INVAL, "frozen input '%s' has an invalid rank %d",
                           mv->name, f->rank);
    s.rank = f->rank;
    for (int i = 0; i < f->rank; i++)
        s.d[i] = f->dims[i];
    if (!sim_shape_numel(&s, &numel))
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "frozen input '%s' is too large",
                           mv->name);
    if (mv->rank >= 0) {
        bool ok = mv->rank == s.rank;
        for (int i = 0; ok && i < s.rank; i++)
            ok = mv->dims[i] < 0 || mv->dims[i] == s.d[i];
        if (!ok) {
            char a[128];
            return sim_err_set(err, IPUOF_E_SHAPE, "frozen input '%s' has shape %s, which "
                               "the graph's declared shape does not allow", mv->name,
                               sim_shape_fmt(&s, a, sizeof(a)));
        }
    }
    if (numel > 0 && f->data == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "frozen input '%s' has no data", mv->name);
    copy = sim_aligned_alloc((size_t)numel * sim_dtype_size(f->dtype));
    if (copy == NULL || !sim_exe_own(e, copy))
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    if (numel > 0)
        memcpy(copy, f->data, (size_t)numel * sim_dtype_size(f->dtype));
    val->kind = SIM_V_CONST;
    val->ti.dtype = f->dtype;
    val->ti.shape = s;
    val->ti.numel = numel;
    val->ti.cdata = copy;
    val->bytes = (size_t)numel * sim_dtype_size(f->dtype);
    return 0;
}

/* Sets up a runtime input: its step shape for one micro-batch and its run shape. */
static int
setup_input(struct sim_exe *e, int v, unsigned micro_batch, struct sim_err *err)
{
    const struct sim_mval *mv = &e->m->vals[v];
    struct sim_val *val = &e->vals[v];
    struct sim_exe_io *io = &e->in[e->n_in];
    struct sim_shape s;
    uint64_t reps = (uint64_t)e->D * e->A * e->R, run;

    if (mv->rank < 0)
        return sim_err_set(err, IPUOF_E_SHAPE, "graph input '%s' has no declared shape; "
                           "export the model with input shapes", mv->name);
    s.rank = mv->rank;
    for (int i = 0; i < mv->rank; i++) {
        s.d[i] = mv->dims[i];
        if (i == 0 && mv->dims[0] < 0) {
            if (micro_batch == 0)
                return sim_err_set(err, IPUOF_E_SHAPE, "graph input '%s' has a symbolic "
                                   "batch dimension '%s'; set the micro-batch size in the "
                                   "compile options", mv->name,
                                   mv->dim0_param != NULL ? mv->dim0_param : "?");
            s.d[0] = micro_batch;
        } else if (i == 0 && micro_batch != 0 && mv->dims[0] != (int64_t)micro_batch) {
            return sim_err_set(err, IPUOF_E_SHAPE, "graph input '%s' has a fixed batch "
                               "dimension of %lld but the micro-batch size is %u", mv->name,
                               (long long)mv->dims[0], micro_batch);
        } else if (mv->dims[i] < 0) {
            return sim_err_set(err, IPUOF_E_SHAPE, "graph input '%s' dim %d is symbolic; "
                               "only dim 0 (the batch) may be", mv->name, i);
        }
    }
    val->kind = SIM_V_INPUT;
    val->ti.dtype = mv->dtype;
    val->ti.shape = s;
    if (!sim_shape_numel(&s, &val->ti.numel))
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "graph input '%s' is too large", mv->name);
    val->bytes = (size_t)val->ti.numel * sim_dtype_size(mv->dtype);
    val->in_io = e->n_in;
    io->name = mv->name;
    io->val = v;
    io->dtype = mv->dtype;
    io->step = s;
    io->step_bytes = val->bytes;
    io->run = s;
    if (s.rank == 0) {
        io->run.rank = 1;
        io->run.d[0] = (int64_t)reps;
    } else if (!sim_mul_ok(reps, (uint64_t)s.d[0], &run) || run > (uint64_t)SIM_MAX_ELEMS) {
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "input '%s': the run is too large", mv->name);
    } else {
        io->run.d[0] = (int64_t)run;
    }
    if (!sim_mul_ok(reps, io->step_bytes, &run) || run > ((uint64_t)1 << 40))
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "input '%s': the run buffer would exceed "
                           "1 TiB", mv->name);
    io->run_bytes = (size_t)run;
    if (s.rank > 0 && e->B == 0)
        e->B = (unsigned)s.d[0];
    e->n_in++;
    return 0;
}

static int
setup_inputs(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err)
{
    const struct sim_model *m = e->m;
    int rc;

    for (size_t f = 0; f < o->n_frozen; f++) {
        bool found = false;
        for (int i = 0; i < m->n_in; i++)
            if (o->frozen[f].name != NULL &&
                strcmp(m->vals[m->inputs[i]].name, o->frozen[f].name) == 0)
                found = true;
        if (!found)
            return sim_err_set(err, IPUOF_E_NOTFOUND, "frozen input '%s' is not a graph input",
                               o->frozen[f].name != NULL ? o->frozen[f].name : "(null)");
    }
    for (int i = 0; i < m->n_in; i++) {
        int v = m->inputs[i];
        const struct sim_frozen_input *fz = NULL;
        for (size_t f = 0; f < o->n_frozen; f++)
            if (strcmp(m->vals[v].name, o->frozen[f].name) == 0)
                fz = &o->frozen[f];
        rc = fz != NULL ? freeze_input(e, v, fz, err) : setup_input(e, v, o->micro_batch, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/*
 * Refuses a model with ops the op tables lack, naming every one of them once with its
 * count and first node, in order of first appearance: "unsupported ops: Expand x3 (first:
 * node 5 'e'), LSTM x1 (first: node 9 'l'); supported: Abs, Add, ..." (custom-domain ops as
 * domain.op). 0 when every op is known (variants and opset versions are the infer pass's).
 */
static int
check_ops_known(const struct sim_model *m, struct sim_err *err)
{
    int *first = calloc((size_t)m->n_nodes + 1, sizeof(*first));
    int *count = calloc((size_t)m->n_nodes + 1, sizeof(*count));
    int n = 0, rc = 0;
    char text[sizeof(err->msg)];
    size_t used = 0;

    if (first == NULL || count == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < m->n_nodes; k++) {
        const struct sim_mnode *mn = &m->nodes[k];
        int j;
        if (sim_op_find_in(mn->domain, mn->op_type) != NULL)
            continue;
        for (j = 0; j < n; j++)
            if (strcmp(m->nodes[first[j]].op_type, mn->op_type) == 0 &&
                strcmp(m->nodes[first[j]].domain, mn->domain) == 0)
                break;
        if (j == n)
            first[n++] = k;
        count[j]++;
    }
    if (n == 0)
        goto out;
    used = (size_t)snprintf(text, sizeof(text), "unsupported ops: ");
    for (int j = 0; j < n && used < sizeof(text); j++) {
        const struct sim_mnode *mn = &m->nodes[first[j]];
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s%s%s x%d (first: node "
                                 "%d%s%s%s)", j ? ", " : "", mn->domain, mn->domain[0] ? "." : "",
                                 mn->op_type, count[j], first[j], mn->name[0] ? " '" : "",
                                 mn->name, mn->name[0] ? "'" : "");
    }
    rc = sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s; supported: %s", text, sim_supported_ops());
out:
    free(first);
    free(count);
    return rc;
}

/* Evaluates a node whose inputs are all known, at compile time. */
static int
fold_node(struct sim_exe *e, const struct sim_enode *n, struct sim_infer *c,
          struct sim_err *err)
{
    struct sim_kern k;
    struct sim_tensor *views = calloc((size_t)n->n_in + (size_t)n->n_out + 1, sizeof(*views));
    void *scratch = NULL;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int rc = 0;

    if (views == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    sim_kern_init(&k, n, views);
    k.params = c->params;
    k.rng = &rng;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0)
            view_of(&views[j], &e->vals[n->in[j]]);
    for (int j = 0; j < n->n_out; j++) {
        struct sim_val *v;
        void *buf;
        if (n->out[j] < 0)
            continue;
        v = &e->vals[n->out[j]];
        buf = sim_aligned_alloc(v->bytes);
        if (buf == NULL || !sim_exe_own(e, buf)) {
            rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory folding %s", n->label);
            goto out;
        }
        v->kind = SIM_V_CONST;
        v->ti.cdata = buf;
        view_of(&views[n->n_in + j], v);
        views[n->n_in + j].data = buf;
    }
    scratch = sim_aligned_alloc(c->scratch_bytes);
    if (scratch == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory folding %s", n->label);
        goto out;
    }
    k.scratch = scratch;
    rc = n->op->forward(&k, err);
out:
    free(scratch);
    free(views);
    return rc;
}


/*
 * float16 per op (sim/README.md "Dtypes"): an op other than Cast, Identity and the
 * shape-only ops that is given a float16 input (or a float16 weight, which training holds
 * as floats of float16 values: a weight-only float16 op of a float input, as x @ W of a
 * .half() model given float32 x, is a float16 op) is inferred as if the input were float
 * (wide[j], a float copy of a known value owned by e), and its float outputs are then typed
 * float16 (half_outputs); the node runs through half_exec.c. Sets *half. Returns 0 or
 * IPUOF_E_NOMEM.
 */
static int
half_inputs(struct sim_exe *e, const struct sim_enode *n, const struct sim_mnode *mn,
            const struct sim_tinfo **ins, struct sim_tinfo *wide, bool *half,
            struct sim_err *err)
{
    *half = false;
    if (strcmp(mn->domain, "") == 0 &&
        (strcmp(mn->op_type, "Cast") == 0 || strcmp(mn->op_type, "Identity") == 0))
        return 0;
    if (n->op->flags & SIM_OPF_SHAPE_ONLY)
        return 0;
    if (n->op->domain == NULL && strcmp(n->op->name, "Identity") == 0)
        return 0;   /* an If's Where made the Identity of the branch taken */
    for (int j = 0; j < n->n_in; j++) {
        float *f;
        int v = n->in[j];
        if (ins[j] != NULL && v >= 0 && e->vals[v].kind == SIM_V_WEIGHT &&
            e->w[e->vals[v].weight].half) {
            *half = true;   /* a float16 weight, held as floats of float16 values */
            continue;
        }
        if (ins[j] == NULL || ins[j]->dtype != SIM_DTYPE_FLOAT16)
            continue;
        *half = true;
        wide[j] = *ins[j];
        wide[j].dtype = SIM_DTYPE_FLOAT;
        if (ins[j]->cdata != NULL) {
            f = malloc((size_t)ins[j]->numel * sizeof(float) + 1);
            if (f == NULL || !sim_exe_own(e, f))
                return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
            sim_half_to_float_n(ins[j]->cdata, f, ins[j]->numel);
            wide[j].cdata = f;
        }
        ins[j] = &wide[j];
    }
    return 0;
}

/* The float outputs of a float16 node are float16 (what the IPU stores). */
static void
half_outputs(struct sim_tinfo *outs, int n_out)
{
    for (int j = 0; j < n_out; j++)
        if (outs[j].dtype == SIM_DTYPE_FLOAT)
            outs[j].dtype = SIM_DTYPE_FLOAT16;
}

/* What value v, an If's condition, says at compile time: IF_SKIPPED (its own node was
 * skipped, being in a branch not taken), IF_TRUE / IF_FALSE (known), or IF_DATA. */
enum { IF_DATA = -1, IF_FALSE = 0, IF_TRUE = 1, IF_SKIPPED = 2 };

static int
if_cond_state(const struct sim_exe *e, int v)
{
    const struct sim_val *c = &e->vals[v];
    const void *d = c->ti.cdata;

    if (c->kind == SIM_V_NONE)
        return IF_SKIPPED;
    if (c->kind != SIM_V_CONST || d == NULL || c->ti.numel != 1)
        return IF_DATA;
    switch (c->ti.dtype) {
    case SIM_DTYPE_BOOL:
    case SIM_DTYPE_UINT8: return *(const uint8_t *)d != 0;
    case SIM_DTYPE_INT8: return *(const int8_t *)d != 0;
    case SIM_DTYPE_INT32: return *(const int32_t *)d != 0;
    case SIM_DTYPE_INT64: return *(const int64_t *)d != 0;
    case SIM_DTYPE_FLOAT: return *(const float *)d != 0.0f;
    default: return IF_DATA;
    }
}

/* Whether model node mn is skipped, being in an If's branch the known condition does not
 * take (or whose condition was itself skipped); *taken: for an If's Where (__if_branches)
 * whose condition is known, the input of the branch taken (1 or 2), else -1. */
static bool
node_skipped(const struct sim_exe *e, const struct sim_mnode *mn, int *taken)
{
    const struct sim_attr *ifb = sim_attr_find(mn, "__if_branches");

    *taken = -1;
    if (mn->guard > 0) {
        int st = if_cond_state(e, mn->guard - 1);
        if (st == IF_SKIPPED || (st != IF_DATA && (st == IF_TRUE) != mn->guard_then))
            return true;
    }
    if (ifb != NULL && ifb->i != 0 && mn->n_in == 3 && mn->in[0] >= 0) {
        int st = if_cond_state(e, mn->in[0]);
        if (st == IF_SKIPPED)
            return true;
        if (st != IF_DATA)
            *taken = st == IF_TRUE ? 1 : 2;
    }
    return false;
}

/* Node n for model node k (an Identity of input `taken` when taken > 0): its operands,
 * placement, label and op, checked against the op's opset and operand counts. 0, or the
 * error set. */
static int
node_setup(const struct sim_exe *e, int k, int taken, struct sim_enode *n,
           struct sim_err *err)
{
    const struct sim_model *m = e->m;
    const struct sim_mnode *mn = &m->nodes[k];

    n->mnode = k;
    n->in = taken > 0 ? &mn->in[taken] : mn->in;
    n->out = mn->out;
    n->n_in = taken > 0 ? 1 : mn->n_in;
    n->n_out = mn->n_out;
    n->ipu = mn->ipu;
    n->stage = mn->stage;
    sim_node_label(m, k, n->label, sizeof(n->label));
    n->bstep = -1;
    n->rstep = -1;
    n->op = taken > 0 ? sim_op_find_in("", "Identity") : sim_op_find_in(mn->domain, mn->op_type);
    if (n->op == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: no op table entry (checked by "
                           "check_ops_known)", n->label);
    if (n->op->domain == NULL && m->opset < n->op->since)
        return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: unsupported variant: %s as defined "
                           "by opset %lld (the oldest supported version is opset %d). "
                           "Supported ops: %s", n->label, mn->op_type, (long long)m->opset,
                           n->op->since, sim_supported_ops());
    if (n->n_in < n->op->min_in || (n->op->max_in >= 0 && n->n_in > n->op->max_in) ||
        mn->n_out < n->op->min_out || mn->n_out > n->op->max_out)
        return sim_err_set(err, IPUOF_E_INVAL, "%s has %d inputs and %d outputs; %s takes "
                           "%d to %d inputs and %d to %d outputs", n->label, n->n_in, mn->n_out,
                           mn->op_type, n->op->min_in, n->op->max_in < 0 ? 65536 : n->op->max_in,
                           n->op->min_out, n->op->max_out);
    for (int j = 0; j < n->op->min_out; j++)
        if (mn->out[j] < 0)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: required output %d has no name",
                               n->label, j);
    return 0;
}

/* Node n's inputs' tensor infos into ins (n->n_in entries; NULL for an absent optional
 * one); which are weights into c->weight_inputs; *fold cleared unless all are constants.
 * 0, or the error set (a required input missing or without a value). */
static int
node_inputs(const struct sim_exe *e, const struct sim_enode *n, const struct sim_tinfo **ins,
            struct sim_infer *c, bool *fold, struct sim_err *err)
{
    for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j];
        if (v < 0 && j < n->op->min_in)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: required input %d is missing",
                               n->label, j);
        if (v < 0)
            continue;
        if (e->vals[v].kind == SIM_V_NONE)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: input '%s' has no value", n->label,
                               e->m->vals[v].name);
        ins[j] = &e->vals[v].ti;
        if (e->vals[v].kind != SIM_V_CONST)
            *fold = false;
        if (e->vals[v].kind == SIM_V_WEIGHT && j < 32)
            c->weight_inputs |= 1u << j;
    }
    return 0;
}

/* The inferred outputs outs of model node mn become its values: activations, sized. */
static void
node_outputs(struct sim_exe *e, const struct sim_mnode *mn, const struct sim_tinfo *outs)
{
    for (int j = 0; j < mn->n_out; j++) {
        struct sim_val *v;
        if (mn->out[j] < 0)
            continue;
        v = &e->vals[mn->out[j]];
        v->ti = outs[j];
        v->ti.cdata = NULL;
        v->bytes = (size_t)outs[j].numel * sim_dtype_size(outs[j].dtype);
        v->kind = SIM_V_ACT;
    }
}


/*
 * Infers (and folds, or schedules) model node k. A node of an If's branch (mn->guard, from
 * onnx_ctrl.c) whose condition is known here and picks the other branch, or whose
 * condition was itself skipped, is skipped: its outputs stay SIM_V_NONE and only the If's
 * Where (__if_branches) reads them, which then becomes an Identity of the branch taken.
 */
static int
infer_node(struct sim_exe *e, int k, struct sim_err *err)
{
    const struct sim_model *m = e->m;
    const struct sim_mnode *mn = &m->nodes[k];
    struct sim_enode n = { 0 };
    const struct sim_tinfo **ins = NULL;
    struct sim_tinfo *outs = NULL, *wide = NULL;
    struct sim_infer c = { 0 };
    int taken;
    bool fold = true, half = false;
    int rc = 0;

    if (node_skipped(e, mn, &taken))
        return 0;
    rc = node_setup(e, k, taken, &n, err);
    if (rc != 0)
        return rc;
    ins = calloc((size_t)n.n_in + 1, sizeof(*ins));
    outs = calloc((size_t)mn->n_out + 1, sizeof(*outs));
    wide = calloc((size_t)mn->n_in + 1, sizeof(*wide));
    if (ins == NULL || outs == NULL || wide == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    rc = node_inputs(e, &n, ins, &c, &fold, err);
    if (rc == 0)
        rc = half_inputs(e, &n, mn, ins, wide, &half, err);
    if (rc != 0)
        goto out;
    c.mn = mn;
    c.label = n.label;
    c.version = (int)m->opset;
    c.n_in = n.n_in;
    c.n_out = mn->n_out;
    c.in = ins;
    c.out = outs;
    c.err = err;
    c.training = e->tr != NULL;
    c.eval = e->eval;
    c.supported_ops = sim_supported_ops();
    rc = n.op->infer(&c);
    if (rc != 0)
        goto out;
    if (half)
        half_outputs(outs, mn->n_out);
    n.half = half;
    node_outputs(e, mn, outs);
    if (n.op->flags & SIM_OPF_SHAPE_ONLY)
        fold = true;
    if ((n.op->flags & SIM_OPF_NOFOLD) || half)
        fold = false;   /* a float16 node computes through half_exec.c at run time */
    n.params = c.params;
    n.scratch = c.scratch_bytes;
    n.saved = c.saved_bytes;
    n.bwd_scratch = c.bwd_scratch_bytes;
    if (fold) {
        uint64_t bytes = c.scratch_bytes;
        for (int j = 0; j < mn->n_out; j++)
            if (mn->out[j] >= 0)
                bytes += e->vals[mn->out[j]].bytes;
        if (bytes > e->capacity) {
            rc = sim_err_set(err, IPUOF_E_DEVICE_OOM, "%s: folding it into a constant would "
                             "take %llu bytes, more than the IPU memory (%llu bytes)", n.label,
                             (unsigned long long)bytes, (unsigned long long)e->capacity);
            goto out;
        }
        rc = fold_node(e, &n, &c, err);
        goto out;
    }
    for (int j = 0; j < mn->n_out; j++)
        if (mn->out[j] >= 0) {
            e->vals[mn->out[j]].producer = e->n_nodes;
            e->vals[mn->out[j]].ipu = n.ipu;
        }
    e->nodes[e->n_nodes++] = n;
    c.params = NULL;
out:
    free(c.params);
    free(ins);
    free(outs);
    free(wide);
    return rc;
}

/* Drops scheduled nodes none of whose outputs is read by a later node or an output. */
static void
drop_dead_nodes(struct sim_exe *e)
{
    const struct sim_model *m = e->m;
    unsigned char *needed = calloc((size_t)m->n_vals + 1, 1);
    int kept = 0;

    if (needed == NULL)
        return;     /* keeping dead nodes is correct, only slower */
    for (int i = 0; i < m->n_out; i++)
        needed[m->outputs[i]] = 1;
    for (int s = e->n_nodes - 1; s >= 0; s--) {
        struct sim_enode *n = &e->nodes[s];
        bool live = false;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && needed[n->out[j]])
                live = true;
        if (!live) {
            free(n->params);
            n->params = NULL;
            n->op = NULL;
            for (int j = 0; j < n->n_out; j++)
                if (n->out[j] >= 0) {
                    e->vals[n->out[j]].kind = SIM_V_NONE;
                    e->vals[n->out[j]].producer = -1; /* else it names a node gone */
                }
            continue;
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0)
                needed[n->in[j]] = 1;
    }
    for (int s = 0; s < e->n_nodes; s++) {
        if (e->nodes[s].op == NULL)
            continue;
        e->nodes[kept] = e->nodes[s];
        for (int j = 0; j < e->nodes[kept].n_out; j++)
            if (e->nodes[kept].out[j] >= 0)
                e->vals[e->nodes[kept].out[j]].producer = kept;
        kept++;
    }
    e->n_nodes = kept;
    free(needed);
}

/* The mode of output `name`, DEFAULT resolved: All for inference, Final for training. */
static void
output_mode(const struct sim_exe *e, const struct sim_compile_opts *o, const char *name,
            struct sim_output_mode *mode)
{
    *mode = o->default_mode;
    for (size_t i = 0; i < o->n_output_modes; i++)
        if (o->output_modes[i].name != NULL && strcmp(o->output_modes[i].name, name) == 0)
            *mode = o->output_modes[i].mode;
    if (mode->kind == SIM_OUTPUT_DEFAULT) {
        mode->kind = e->tr != NULL ? SIM_OUTPUT_FINAL : SIM_OUTPUT_ALL;
        mode->n = 0;
    }
}

static int
setup_outputs(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err)
{
    const struct sim_model *m = e->m;

    for (size_t i = 0; i < o->n_output_modes; i++) {
        bool found = false;
        for (int j = 0; j < m->n_out; j++)
            if (o->output_modes[i].name != NULL &&
                strcmp(o->output_modes[i].name, m->vals[m->outputs[j]].name) == 0)
                found = true;
        if (!found)
            return sim_err_set(err, IPUOF_E_NOTFOUND, "an output mode is given for '%s', "
                               "which is not a graph output",
                               o->output_modes[i].name ? o->output_modes[i].name : "(null)");
    }
    for (int i = 0; i < m->n_out; i++) {
        int v = m->outputs[i];
        struct sim_val *val = &e->vals[v];
        struct sim_exe_io *io = &e->out[i];
        uint64_t slots, bytes;

        io->name = m->vals[v].name;
        io->val = v;
        output_mode(e, o, io->name, &io->mode);
        switch (io->mode.kind) {
        case SIM_OUTPUT_ALL: io->iters = e->D * e->A; break;
        case SIM_OUTPUT_FINAL: case SIM_OUTPUT_SUM: io->iters = 1; break;
        case SIM_OUTPUT_EVERYN:
            if (io->mode.n == 0 || e->D % io->mode.n != 0)
                return sim_err_set(err, IPUOF_E_INVAL, "output '%s': EveryN(%u) needs a "
                                   "period that divides the device iterations (%u)", io->name,
                                   io->mode.n, e->D);
            io->iters = e->D / io->mode.n * e->A;
            break;
        default:
            return sim_err_set(err, IPUOF_E_INVAL, "output '%s': unknown output mode %d",
                               io->name, io->mode.kind);
        }
        if (val->kind == SIM_V_NONE)
            return sim_err_set(err, IPUOF_E_INTERNAL, "output '%s' has no value", io->name);
        if (m->vals[v].kind == SIM_MV_NODE && m->vals[v].dtype != 0 &&
            m->vals[v].dtype != val->ti.dtype)
            return sim_err_set(err, IPUOF_E_DTYPE, "graph output '%s' is declared %s but "
                               "computes %s", io->name, sim_onnx_dtype_name(m->vals[v].dtype),
                               sim_dtype_name(val->ti.dtype));
        if (io->mode.kind == SIM_OUTPUT_SUM && val->ti.dtype == SIM_DTYPE_FLOAT16 &&
            (e->D > 1 || e->A > 1))
            return sim_err_set(err, IPUOF_E_UNSUPPORTED, "output '%s' is float16 and its "
                               "output mode is Sum, which is summed in float, int and bool "
                               "only; Cast it to float, or ask for All or Final", io->name);
        io->dtype = val->ti.dtype;
        io->step = val->ti.shape;
        io->step_bytes = val->bytes;
        slots = (uint64_t)io->iters * e->R;
        io->run = io->step;
        if (io->step.rank == 0) {
            io->run.rank = 1;
            io->run.d[0] = (int64_t)slots;
        } else {
            io->run.d[0] = (int64_t)(slots * (uint64_t)io->step.d[0]);
        }
        if (!sim_mul_ok(slots, io->step_bytes, &bytes) || bytes > ((uint64_t)1 << 40))
            return sim_err_set(err, IPUOF_E_TOO_LARGE, "output '%s': the run buffer would "
                               "exceed 1 TiB", io->name);
        io->run_bytes = (size_t)bytes;
        io->zero_copy = val->kind == SIM_V_ACT && val->out_io < 0 &&
                        (io->mode.kind == SIM_OUTPUT_ALL || io->mode.kind == SIM_OUTPUT_FINAL);
        if (io->zero_copy)
            val->out_io = i;
        e->n_out++;
    }
    return 0;
}

static int
check_opts(const struct sim_compile_opts *o, struct sim_err *err)
{
    if (o->device_iterations < 1 || o->device_iterations > MAX_DEVICE_ITERATIONS)
        return sim_err_set(err, IPUOF_E_INVAL, "device_iterations must be in [1, %u], not %u",
                           MAX_DEVICE_ITERATIONS, o->device_iterations);
    if (o->replicas < 1 || o->replicas > MAX_REPLICAS)
        return sim_err_set(err, IPUOF_E_INVAL, "replicas must be in [1, %u], not %u",
                           MAX_REPLICAS, o->replicas);
    if (o->gradient_accumulation < 1 || o->gradient_accumulation > MAX_ACCUMULATION)
        return sim_err_set(err, IPUOF_E_INVAL, "gradient_accumulation must be in [1, %u], "
                           "not %u", MAX_ACCUMULATION, o->gradient_accumulation);
    if (o->loss == NULL && o->gradient_accumulation != 1)
        return sim_err_set(err, IPUOF_E_INVAL, "gradient_accumulation is %u but no loss is "
                           "named: an inference compile must use 1 (gradients are only "
                           "accumulated when training)", o->gradient_accumulation);
    if (o->loss == NULL)
        return 0;
    if (o->accumulation_reduction != SIM_REDUCE_MEAN &&
        o->accumulation_reduction != SIM_REDUCE_SUM)
        return sim_err_set(err, IPUOF_E_INVAL, "accumulation_reduction %d is neither mean "
                           "(%d) nor sum (%d)", o->accumulation_reduction, SIM_REDUCE_MEAN,
                           SIM_REDUCE_SUM);
    return sim_optimizer_check(&o->optimizer, err);
}

/* The run buffers of one call (every input and output, D x R micro-batches) against
 * o->host_memory_bytes, before they are allocated. 0 or IPUOF_E_TOO_LARGE. */
static int
check_host_memory(const struct sim_exe *e, const struct sim_compile_opts *o,
                  struct sim_err *err)
{
    uint64_t total = 0;

    for (int i = 0; i < e->n_in; i++)
        total += e->in[i].run_bytes;
    for (int i = 0; i < e->n_out; i++)
        total += e->out[i].run_bytes;
    if (o->host_memory_bytes == 0 || total <= o->host_memory_bytes)
        return 0;
    return sim_err_set(err, IPUOF_E_TOO_LARGE, "the run buffers of one call (%u device "
                       "iterations x %u replicas x micro-batch %u, inputs and outputs) take "
                       "%llu bytes of host memory, over the %llu bytes available to them; "
                       "run fewer device iterations per call", e->D, e->R, e->B,
                       (unsigned long long)total, (unsigned long long)o->host_memory_bytes);
}

/* The training state of a compile with a loss: the loss must be a graph output. */
static int
setup_training(struct sim_exe *e, const struct sim_model *m, const struct sim_compile_opts *o,
               struct sim_err *err)
{
    struct sim_train *tr = calloc(1, sizeof(*tr));

    if (tr == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    e->tr = tr;
    tr->A = o->gradient_accumulation;
    tr->reduction = o->accumulation_reduction;
    tr->opt = o->optimizer;
    tr->loss = -1;
    for (int i = 0; i < m->n_out; i++)
        if (strcmp(m->vals[m->outputs[i]].name, o->loss) == 0)
            tr->loss = m->outputs[i];
    if (tr->loss < 0) {
        char list[512];
        size_t used = 0;
        list[0] = '\0';
        for (int i = 0; i < m->n_out && used < sizeof(list); i++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s'%s'",
                                     i ? ", " : "", m->vals[m->outputs[i]].name);
        return sim_err_set(err, IPUOF_E_INVAL, "the loss '%s' is not a graph output (the "
                           "outputs are %s); export the model with the loss as an output",
                           o->loss, list);
    }
    return 0;
}

/* Whether executables record the host time of each node (IPUOF_SIM_PROFILE=1). */
static bool
host_clock_wanted(void)
{
    const char *v = getenv("IPUOF_SIM_PROFILE");

    return v != NULL && strcmp(v, "1") == 0;
}

/* A new executable for model m under options o (checked): its figures from o, training
 * set up when o has a loss, its value, node and operand arrays made. 0 with *out, or the
 * error set (nothing to free). */
static int
exe_new(const struct sim_model *m, const struct sim_compile_opts *o, struct sim_exe **out,
        struct sim_err *err)
{
    struct sim_exe *e = calloc(1, sizeof(*e));
    int rc = 0;

    if (e == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    e->A = o->gradient_accumulation;
    e->seed = o->seed;
    e->stochastic = m->stochastic_rounding;
    e->partials_half = m->partials_half;
    e->eval = o->eval_mode && o->loss == NULL;
    if (o->loss != NULL) {
        rc = setup_training(e, m, o, err);
        if (rc != 0)
            goto fail;
    }
    atomic_init(&e->busy, 0);
    atomic_init(&e->run_id, 0);
    atomic_init(&e->cancel_id, 0);
    e->m = m;
    e->D = o->device_iterations;
    e->R = o->replicas;
    e->capacity = o->ipu_memory_bytes ? o->ipu_memory_bytes : SIM_DEFAULT_IPU_MEMORY;
    e->tiles = o->tiles ? o->tiles : SIM_DEFAULT_TILES;
    if (m->io_tiles >= e->tiles) {
        rc = sim_err_set(err, IPUOF_E_INVAL, "numIOTiles %u leaves no compute tiles: the "
                         "IPU has %u tiles", m->io_tiles, e->tiles);
        goto fail;
    }
    e->io_bytes = e->capacity / e->tiles * m->io_tiles;     /* memory is per tile */
    e->capacity -= e->io_bytes;
    e->profile = o->profile != 0;
    e->cost = o->cost;
    atomic_init(&e->ran, 0);
    atomic_init(&e->abort_run, 0);
    e->vals = calloc((size_t)m->n_vals + 1, sizeof(*e->vals));
    e->nodes = calloc((size_t)m->n_nodes + 1, sizeof(*e->nodes));
    e->in = calloc((size_t)m->n_in + 1, sizeof(*e->in));
    e->out = calloc((size_t)m->n_out + 1, sizeof(*e->out));
    if (e->vals == NULL || e->nodes == NULL || e->in == NULL || e->out == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto fail;
    }
    *out = e;
    return 0;
fail:
    sim_exe_free(e);
    return rc;
}

/* Every value of e starts unplaced and unproduced; an initializer is a constant. */
static void
exe_init_values(struct sim_exe *e)
{
    const struct sim_model *m = e->m;

    for (int v = 0; v < m->n_vals; v++) {
        struct sim_val *val = &e->vals[v];
        val->producer = -1;
        val->off = -1;
        val->in_io = -1;
        val->out_io = -1;
        val->weight = -1;
        val->goff = -1;
        val->roff = -1;
        if (m->vals[v].kind == SIM_MV_INIT) {
            const struct sim_const *c = m->vals[v].init;
            val->kind = SIM_V_CONST;
            val->ti.dtype = c->dtype;
            val->ti.shape = c->shape;
            val->ti.numel = c->numel;
            val->ti.cdata = c->data;
            val->bytes = c->bytes;
        }
    }
}

/* Infers every node of e's model in order (infer_node), telling o->progress after each
 * of total steps. 0, or the error set. */
static int
infer_nodes(struct sim_exe *e, const struct sim_compile_opts *o, int total,
            struct sim_err *err)
{
    for (int k = 0; k < e->m->n_nodes; k++) {
        int rc = infer_node(e, k, err);
        if (rc != 0)
            return rc;
        if (o->progress != NULL)
            o->progress(k + 1, total, o->progress_ud);
    }
    return 0;
}

/* The passes after inference, in order: dead nodes dropped, float16 noted, placement,
 * fusion (GELU only in training), layout (inference) or autodiff (training), buffer
 * updates, weights' layout,
 * outputs, host memory, the memory plan, the schedule, binding, the host clock. 0, or
 * the error set. */
static int
compile_passes(struct sim_exe *e, const struct sim_compile_opts *o,
               struct sim_err *err)
{
    int rc;

    drop_dead_nodes(e);
    for (int s = 0; s < e->n_nodes; s++)
        e->computes_half |= e->nodes[s].half;
    for (int i = 0; i < e->n_w; i++)
        e->computes_half |= e->w[i].half;
    e->half_rng = sim_half_rng_seed(e->seed);
    rc = sim_place(e, o, err);
    if (rc == 0)
        rc = sim_fuse(e, err);  /* training: GELU only */
    if (rc == 0 && e->tr == NULL)
        rc = sim_layout_plan(e, sim_exe_own, err);
    if (rc == 0 && e->tr != NULL)
        rc = sim_autodiff(e, err);
    if (rc == 0)
        rc = sim_buffer_updates_check(e, err);
    if (rc == 0)
        rc = sim_weights_layout(e, err);
    if (rc == 0)
        rc = setup_outputs(e, o, err);
    if (rc == 0)
        rc = check_host_memory(e, o, err);
    if (rc == 0)
        rc = sim_plan_memory(e, err);
    if (rc == 0)
        rc = sim_sched_build(e, err);
    if (rc == 0)
        rc = sim_exec_bind(e, err);
    if (rc == 0 && e->tr != NULL)
        rc = sim_train_bind(e, err);
    if (rc == 0 && host_clock_wanted()) {
        e->host = calloc((size_t)e->n_nodes + 1, sizeof(*e->host));
        if (e->host == NULL)
            rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    }
    return rc;
}

int
sim_compile(const struct sim_model *m, const struct sim_compile_opts *o,
            struct sim_exe **out, struct sim_err *err)
{
    struct sim_exe *e = NULL;
    int rc = 0, total;

    *out = NULL;
    if (m == NULL || o == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "no model or no options");
    rc = sim_isa_check(err);    /* a bad IPUOF_SIM_ISA is refused; fixes the level first */
    if (rc != 0)
        return rc;
    rc = check_opts(o, err);
    if (rc != 0)
        return rc;
    rc = exe_new(m, o, &e, err);
    if (rc != 0)
        return rc;
    exe_init_values(e);
    rc = check_ops_known(m, err);
    if (rc == 0)
        rc = setup_inputs(e, o, err);
    if (rc == 0 && (o->loss != NULL || o->updatable_weights || sim_buffer_update_count(m) > 0))
        rc = sim_weights_mark(e, o, err);
    if (rc != 0)
        goto fail;
    total = m->n_nodes + 1;
    rc = infer_nodes(e, o, total, err);
    if (rc == 0)
        rc = compile_passes(e, o, err);
    if (rc != 0)
        goto fail;
    if (o->progress != NULL)
        o->progress(total, total, o->progress_ud);
    *out = e;
    return 0;
fail:
    sim_exe_free(e);
    return rc;
}

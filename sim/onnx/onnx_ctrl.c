/*
 * onnx_ctrl.c — ONNX control flow (Loop, If) made into plain graph nodes before the loader
 * reads the graph, so every op's forward and backward kernel applies and training through
 * a loop or a branch is training through ordinary ops.
 *
 *  - Loop with a trip count known when the model loads (an initializer or a Constant, as
 *    poptorch.for_loop and a scripted `for i in range(4)` export it) and a condition that
 *    is a constant or the body's own condition passed through: unrolled, one copy of the
 *    body per iteration, the loop-carried values chained from one copy to the next, each
 *    scan output the Concat of its per-iteration values (each Unsqueezed on axis 0). The
 *    copies are values of their own, so a loop-carried value may change shape from one
 *    iteration to the next (only scan outputs must keep theirs, as Concat wants).
 *  - If with a condition known when the model loads: the branch taken, its outputs copied
 *    to the If's (Identity).
 *  - If with a data-dependent condition: both branches are computed and each output is
 *    Where(Squeeze(cond), then, else). Cost: the work and memory of both branches, always;
 *    valid because ONNX If's branches give outputs of one type, and here they must also
 *    have one shape: the Where carries __if_branches, and its infer (op_logic.c) refuses
 *    branches of two shapes, which it would otherwise broadcast. Each branch node carries
 *    __if_guard (the condition's name) and __if_side: when the condition turns out to be
 *    known at compile time (computed from shapes only, as the exporter's "squeeze this
 *    dimension if it is 1" is: nn.LocalResponseNorm), the compiler skips the other
 *    branch's nodes and the Where becomes an Identity of the branch taken, so the branches
 *    may then differ in shape and the branch not taken may hold ops that would fail.
 *
 * Refused, each naming the node and what would work: a Loop without a trip count, a trip
 * count or loop condition computed at run time, a negative trip count, scan outputs of a
 * loop that runs zero times, subgraphs nested deeper than MAX_DEPTH, and an unrolled graph
 * over SIM_MAX_NODES nodes (checked before each copy is made) or MAX_NAME_BYTES of names.
 *
 * The flat graph is a shallow copy of the protobuf graph: copied nodes share the original
 * attributes and strings; everything made here is on the flattening's owned list and freed
 * by sim_onnx_flat_fini. Names made here ("loop/it2/x") are checked for uniqueness by the
 * loader like any other.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ctrl.h"
#include "onnx_ctrl_int.h"
#include "pb_int.h"

#define MAX_DEPTH 16            /* Loop/If nested inside Loop/If bodies */
#define MAX_PREFIX_NAME 64      /* a longer Loop/If name is replaced by its index */

/* One scope of names: a subgraph being copied maps its own names to new ones; names it
 * does not define resolve in the enclosing scope (the top scope maps nothing). */
struct scope {
    const struct scope *parent;
    const Onnx__GraphProto *g;  /* the graph whose names these are */
    bool sub;                   /* a subgraph copy: its names are renamed (not the top) */
    struct sim_strmap map;      /* original name -> index into to[] */
    const char **to;
    int64_t *known;             /* scalar value of to[i] when it is a known constant */
    bool *is_known;
    size_t n, cap;
};

static bool
is_onnx(const Onnx__NodeProto *np)
{
    const char *d = ctrl_nz(np->domain);

    return d[0] == '\0' || strcmp(d, "ai.onnx") == 0;
}

static bool
is_ctrl(const Onnx__NodeProto *np)
{
    return np != NULL && is_onnx(np) &&
           (strcmp(ctrl_nz(np->op_type), "Loop") == 0 || strcmp(ctrl_nz(np->op_type), "If") == 0);
}

/* A node the flattening rewrites: Loop, If, or a sequence op (onnx_ctrl_seq.c). */
static bool
is_rewritten(const Onnx__NodeProto *np)
{
    return is_ctrl(np) || (np != NULL && is_onnx(np) &&
                           (strcmp(ctrl_nz(np->op_type), "SplitToSequence") == 0 ||
                            strcmp(ctrl_nz(np->op_type), "SequenceAt") == 0));
}

static void
label_of(const Onnx__NodeProto *np, char *buf, size_t n)
{
    snprintf(buf, n, "node '%s' (%s)", ctrl_nz(np->name), ctrl_nz(np->op_type));
}

static int
scope_init(struct flat *F, struct scope *s, const struct scope *parent,
           const Onnx__GraphProto *g, size_t expected)
{
    memset(s, 0, sizeof(*s));
    s->parent = parent;
    s->g = g;
    s->cap = expected;
    s->to = calloc(expected + 1, sizeof(*s->to));
    s->known = calloc(expected + 1, sizeof(*s->known));
    s->is_known = calloc(expected + 1, sizeof(*s->is_known));
    if (s->to == NULL || s->known == NULL || s->is_known == NULL ||
        !sim_strmap_init(&s->map, expected))
        return ctrl_nomem(F);
    return 0;
}

static void
scope_fini(struct scope *s)
{
    sim_strmap_fini(&s->map);
    free(s->to);
    free(s->known);
    free(s->is_known);
}

/* Maps name (borrowed: the protobuf's, alive for the flattening) to `to` in s. A name
 * defined twice in one subgraph is an error. */
static int
scope_put(struct flat *F, struct scope *s, const char *name, const char *to,
          const int64_t *known)
{
    if (s->n >= s->cap)
        return sim_err_set(F->err, IPUOF_E_INTERNAL, "control-flow scope overflow");
    if (!sim_strmap_put(&s->map, name, (int)s->n))
        return sim_err_set(F->err, IPUOF_E_INVAL, "a subgraph defines '%s' twice (ONNX names "
                           "are single-assignment)", name);
    s->to[s->n] = to;
    if (known != NULL) {
        s->is_known[s->n] = true;
        s->known[s->n] = *known;
    }
    s->n++;
    return 0;
}

/* The name `name` has in the flat graph, seen from scope s ("" stays ""). */
static const char *
resolve(const struct scope *s, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return "";
    for (; s != NULL; s = s->parent) {
        int k = sim_strmap_get(&s->map, name);
        if (k >= 0)
            return s->to[k];
    }
    return name;
}

/* The value of a one-element int/bool tensor, if t is one. */
static bool
tensor_scalar(const Onnx__TensorProto *t, int64_t *v)
{
    struct sim_const *c = NULL;
    struct sim_err e = { 0 };
    bool ok = false;

    if (t == NULL || sim_const_from_pb(t, "constant", NULL, &c, &e) != 0)
        return false;
    if (c->numel == 1) {
        ok = true;
        switch (c->dtype) {
        case SIM_DTYPE_INT64: *v = *(const int64_t *)c->data; break;
        case SIM_DTYPE_INT32: *v = *(const int32_t *)c->data; break;
        case SIM_DTYPE_BOOL:
        case SIM_DTYPE_UINT8: *v = *(const uint8_t *)c->data; break;
        case SIM_DTYPE_INT8: *v = *(const int8_t *)c->data; break;
        default: ok = false; break;
        }
    }
    sim_const_free(c);
    return ok;
}

/*
 * The value of `name` (an original name in scope s's graph) when it is known while
 * loading: a body input set per iteration (iteration number, condition), an initializer,
 * or a Constant (value attribute) reached through Identity / Cast / Squeeze / Unsqueeze.
 * depth bounds the walk.
 */
static bool
known_scalar(const struct scope *s, const char *name, int64_t *v, int depth)
{
    if (depth > 64 || name == NULL || name[0] == '\0')
        return false;
    for (; s != NULL; s = s->parent) {
        const Onnx__GraphProto *g = s->g;
        int k = sim_strmap_get(&s->map, name);
        if (k >= 0 && s->is_known[k]) {
            *v = s->known[k];
            return true;
        }
        for (size_t i = 0; g != NULL && i < g->n_initializer; i++)
            if (g->initializer[i] != NULL && strcmp(ctrl_nz(g->initializer[i]->name), name) == 0)
                return tensor_scalar(g->initializer[i], v);
        for (size_t i = 0; g != NULL && i < g->n_node; i++) {
            const Onnx__NodeProto *np = g->node[i];
            const char *op;
            if (np == NULL || np->n_output < 1 || strcmp(ctrl_nz(np->output[0]), name) != 0)
                continue;
            op = ctrl_nz(np->op_type);
            if (!is_onnx(np))
                return false;
            if (strcmp(op, "Constant") == 0) {
                for (size_t a = 0; a < np->n_attribute; a++)
                    if (np->attribute[a] != NULL &&
                        strcmp(ctrl_nz(np->attribute[a]->name), "value") == 0)
                        return tensor_scalar(np->attribute[a]->t, v);
                return false;
            }
            if ((strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0 ||
                 strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0) &&
                np->n_input >= 1) {
                if (!known_scalar(s, np->input[0], v, depth + 1))
                    return false;
                if (strcmp(op, "Cast") == 0)
                    for (size_t a = 0; a < np->n_attribute; a++)
                        if (np->attribute[a] != NULL &&
                            strcmp(ctrl_nz(np->attribute[a]->name), "to") == 0 &&
                            np->attribute[a]->i == SIM_DTYPE_BOOL)
                            *v = *v != 0;
                return true;
            }
            return false;
        }
        if (k >= 0)
            return false;   /* a graph input or a name of this graph: not known */
    }
    return false;
}

/* The rank of `name` when it is an initializer or a Constant's value seen from scope s,
 * else -1. */
static int
known_rank(const struct scope *s, const char *name)
{
    for (; s != NULL && name != NULL && name[0] != '\0'; s = s->parent) {
        const Onnx__GraphProto *g = s->g;
        for (size_t i = 0; g != NULL && i < g->n_initializer; i++)
            if (g->initializer[i] != NULL && strcmp(ctrl_nz(g->initializer[i]->name), name) == 0)
                return (int)g->initializer[i]->n_dims;
        for (size_t i = 0; g != NULL && i < g->n_node; i++) {
            const Onnx__NodeProto *np = g->node[i];
            if (np == NULL || np->n_output < 1 || strcmp(ctrl_nz(np->output[0]), name) != 0)
                continue;
            if (strcmp(ctrl_nz(np->op_type), "Constant") != 0)
                return -1;
            for (size_t a = 0; a < np->n_attribute; a++)
                if (np->attribute[a] != NULL && np->attribute[a]->t != NULL &&
                    strcmp(ctrl_nz(np->attribute[a]->name), "value") == 0)
                    return (int)np->attribute[a]->t->n_dims;
            return -1;
        }
        if (sim_strmap_get(&s->map, name) >= 0)
            return -1;
    }
    return -1;
}

static int emit_graph(struct flat *F, struct scope *s, const Onnx__GraphProto *g,
                      const char *prefix, int depth);

/* The graph attribute `name` of np, or NULL. */
static const Onnx__GraphProto *
graph_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a] != NULL && strcmp(ctrl_nz(np->attribute[a]->name), name) == 0)
            return np->attribute[a]->g;
    return NULL;
}

/* Registers g's initializers (hoisted once into the flat graph under prefix) in s. */
static int
hoist_inits(struct flat *F, struct scope *s, const Onnx__GraphProto *g, const char *prefix)
{
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *src = g->initializer[i];
        Onnx__TensorProto *t = ctrl_calloc(F, 1, sizeof(*t));
        int rc;
        if (src == NULL || ctrl_nz(src->name)[0] == '\0')
            return sim_err_set(F->err, IPUOF_E_INVAL, "a subgraph initializer has no name");
        if (t == NULL)
            return ctrl_nomem(F);
        *t = *src;
        t->name = ctrl_cat(F, prefix, src->name, "");
        if (t->name == NULL)
            return ctrl_nomem(F);
        rc = ctrl_push_init(F, t);
        if (rc == 0)
            rc = scope_put(F, s, src->name, t->name, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Emits one copy of body g: its names in a new scope under s mapped to prefix-named ones,
 * its inputs bound to in[] (with known values where kin[] says), its initializers to the
 * hoisted names. Writes the flat names of g's outputs to outs[]. */
static int
emit_body(struct flat *F, const struct scope *s, const Onnx__GraphProto *g,
          const char *prefix, const char *const *in, const int64_t *const *kin,
          const struct scope *hoisted, const char **outs, int depth)
{
    struct scope b;
    size_t expected = g->n_input + g->n_initializer + 1;
    int rc;

    for (size_t k = 0; k < g->n_node; k++)
        expected += g->node[k] != NULL ? g->node[k]->n_output : 0;
    rc = scope_init(F, &b, s, g, expected);
    b.sub = true;
    for (size_t i = 0; rc == 0 && i < g->n_input; i++)
        if (g->input[i] != NULL && ctrl_nz(g->input[i]->name)[0] != '\0')
            rc = scope_put(F, &b, g->input[i]->name, in[i], kin[i]);
    if (rc == 0 && hoisted != NULL)
        for (size_t i = 0; rc == 0 && i < g->n_initializer; i++)
            rc = scope_put(F, &b, g->initializer[i]->name,
                           resolve(hoisted, g->initializer[i]->name), NULL);
    if (rc == 0)
        rc = emit_graph(F, &b, g, prefix, depth);
    for (size_t i = 0; rc == 0 && i < g->n_output; i++) {
        if (g->output[i] == NULL || ctrl_nz(g->output[i]->name)[0] == '\0') {
            rc = sim_err_set(F->err, IPUOF_E_INVAL, "a subgraph output has no name");
            break;
        }
        outs[i] = resolve(&b, g->output[i]->name);
    }
    scope_fini(&b);
    return rc;
}

/* Checks Loop node np (labelled label) and its body: their operand counts, named body
 * outputs, a trip count and initial condition known when the model loads, and the unrolled
 * size. *trips (0 when the initial condition is false), *n_carried and *n_scan filled.
 * 0, or the error set on F. */
static int
loop_check(struct flat *F, const struct scope *s, const Onnx__NodeProto *np,
           const Onnx__GraphProto *body, const char *label, int64_t *trips,
           size_t *n_carried, size_t *n_scan)
{
    int64_t cond = 1;

    if (np->n_input < 2 || body->n_input != np->n_input || body->n_output < 1 ||
        body->n_output < body->n_input - 1 || np->n_output != body->n_output - 1)
        return sim_err_set(F->err, IPUOF_E_INVAL, "%s: the body takes %zu inputs and gives "
                           "%zu outputs for a node of %zu inputs and %zu outputs; ONNX wants "
                           "2 + N inputs (M, cond, N carried) and 1 + N + K outputs in the "
                           "body (cond, N carried, K scan) for N + K outputs of the node",
                           label, body->n_input, body->n_output, np->n_input, np->n_output);
    for (size_t i = 0; i < body->n_output; i++)
        if (body->output[i] == NULL || ctrl_nz(body->output[i]->name)[0] == '\0')
            return sim_err_set(F->err, IPUOF_E_INVAL, "%s: body output %zu has no name",
                               label, i);
    *n_carried = np->n_input - 2;
    *n_scan = body->n_output - 1 - *n_carried;
    if (np->input[0] == NULL || ctrl_nz(np->input[0])[0] == '\0')
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "%s has no trip count: a loop that "
                           "runs until a data-dependent condition cannot be unrolled; give it "
                           "a trip count that is a Constant or an initializer (poptorch."
                           "for_loop's count)", label);
    if (!known_scalar(s, np->input[0], trips, 0))
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "%s: its trip count '%s' is computed "
                           "at run time (a graph input or from data); loops are unrolled when "
                           "the model loads, so the trip count must be a Constant or an "
                           "initializer (poptorch.for_loop's count is a Python int)", label,
                           np->input[0]);
    if (*trips < 0)
        return sim_err_set(F->err, IPUOF_E_INVAL, "%s: trip count %" PRId64 " is negative; "
                           "it must be 0 or more", label, *trips);
    if (ctrl_nz(np->input[1])[0] != '\0' && !known_scalar(s, np->input[1], &cond, 0))
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "%s: its initial condition '%s' is "
                           "computed at run time; only loops whose condition is known when "
                           "the model loads (a Constant, or none) can be unrolled", label,
                           np->input[1]);
    if (cond == 0)
        *trips = 0;
    if (*trips > 0 && (size_t)*trips > SIM_MAX_NODES / (body->n_node + *n_scan + 2))
        return sim_err_set(F->err, IPUOF_E_TOO_LARGE, "%s: %" PRId64 " iterations of a body "
                           "of %zu nodes unroll past the limit of %d nodes; use fewer "
                           "iterations", label, *trips, body->n_node, SIM_MAX_NODES);
    if (*trips == 0 && *n_scan > 0)
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "%s runs zero times and has %zu scan "
                           "outputs, which would be empty tensors of unknown shape; give it "
                           "a trip count of 1 or more", label, *n_scan);
    return 0;
}

/* After iteration it of the Loop labelled label, whose body ran on inputs bin (known
 * values kin): the body's condition output must be known; when it is false the loop stops
 * after this iteration (*trips = it + 1). 0, or the error set on F. */
static int
loop_cond_after(struct flat *F, const struct scope *s, const Onnx__GraphProto *body,
                const char **bin, const int64_t **kin, const char *label, int64_t it,
                int64_t *trips)
{
    struct scope probe;
    int64_t c_out;
    int rc = scope_init(F, &probe, s, body, body->n_input + 1);

    for (size_t i = 0; rc == 0 && i < body->n_input; i++)
        if (body->input[i] != NULL && ctrl_nz(body->input[i]->name)[0] != '\0')
            rc = scope_put(F, &probe, body->input[i]->name, bin[i], kin[i]);
    if (rc == 0 && !known_scalar(&probe, body->output[0]->name, &c_out, 0))
        rc = sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "%s: the body's condition "
                         "output '%s' is computed from data, so the number of "
                         "iterations is only known at run time; loops are unrolled "
                         "when the model loads: make the condition a Constant true "
                         "or the body's condition input passed through, and set the "
                         "trip count", label, body->output[0]->name);
    else if (rc == 0 && c_out == 0 && it + 1 < *trips)
        *trips = it + 1;     /* stops after this iteration */
    scope_fini(&probe);
    return rc;
}

/* Loop -> `trips` copies of the body (see the file comment). in/out are the node's operands
 * as flat names. */
static int
expand_loop(struct flat *F, const struct scope *s, const Onnx__NodeProto *np,
            const char *const *in, const char *const *out, const char *prefix, int depth)
{
    const Onnx__GraphProto *body = graph_attr(np, "body");
    char label[300];
    size_t n_carried = 0, n_scan = 0;
    int64_t trips = 0, yes = 1;
    const char **cur = NULL, **bin = NULL, **bout = NULL, ***scan = NULL;
    const int64_t **kin = NULL;
    int64_t *iters = NULL;
    struct scope hoisted;
    bool have_hoisted = false;
    int rc = 0;

    label_of(np, label, sizeof(label));
    if (body == NULL)
        return sim_err_set(F->err, IPUOF_E_INVAL, "%s has no 'body' graph attribute", label);
    rc = loop_check(F, s, np, body, label, &trips, &n_carried, &n_scan);
    if (rc != 0)
        return rc;
    cur = calloc(n_carried + 1, sizeof(*cur));
    bin = calloc(body->n_input + 1, sizeof(*bin));
    bout = calloc(body->n_output + 1, sizeof(*bout));
    kin = calloc(body->n_input + 1, sizeof(*kin));
    iters = calloc((size_t)trips + 1, sizeof(*iters));
    scan = calloc(n_scan + 1, sizeof(*scan));
    if (cur == NULL || bin == NULL || bout == NULL || kin == NULL || iters == NULL ||
        scan == NULL) {
        rc = ctrl_nomem(F);
        goto out;
    }
    for (size_t j = 0; j < n_scan; j++) {
        scan[j] = calloc((size_t)trips + 1, sizeof(**scan));
        if (scan[j] == NULL) {
            rc = ctrl_nomem(F);
            goto out;
        }
    }
    for (size_t j = 0; j < n_carried; j++)
        cur[j] = in[2 + j];
    rc = scope_init(F, &hoisted, NULL, NULL, body->n_initializer + 1);
    have_hoisted = true;
    if (rc == 0)
        rc = hoist_inits(F, &hoisted, body, prefix);
    for (int64_t it = 0; rc == 0 && it < trips; it++) {
        char tag[48];
        const char *iprefix, *iname, *cname;
        snprintf(tag, sizeof(tag), "it%" PRId64 "/", it);
        iprefix = ctrl_cat(F, prefix, tag, "");
        iname = ctrl_fresh(F, prefix, "iter");
        cname = ctrl_fresh(F, prefix, "cond");
        if (iprefix == NULL || iname == NULL || cname == NULL) {
            rc = ctrl_nomem(F);
            break;
        }
        iters[it] = it;
        rc = ctrl_emit_const(F, iname, SIM_DTYPE_INT64, 0, it);
        if (rc == 0)
            rc = ctrl_emit_const(F, cname, SIM_DTYPE_BOOL, 0, 1);
        if (rc != 0)
            break;
        bin[0] = iname;
        kin[0] = &iters[it];
        bin[1] = cname;
        kin[1] = &yes;
        for (size_t j = 0; j < n_carried; j++) {
            bin[2 + j] = cur[j];
            kin[2 + j] = NULL;
        }
        rc = emit_body(F, s, body, iprefix, bin, kin, &hoisted, bout, depth + 1);
        if (rc == 0)
            rc = loop_cond_after(F, s, body, bin, kin, label, it, &trips);
        for (size_t j = 0; rc == 0 && j < n_carried; j++)
            cur[j] = bout[1 + j];
        for (size_t j = 0; rc == 0 && j < n_scan; j++)
            scan[j][it] = bout[1 + n_carried + j];
    }
    for (size_t j = 0; rc == 0 && j < n_carried; j++)
        if (ctrl_nz(out[j])[0] != '\0')
            rc = ctrl_emit_simple(F, "Identity", ctrl_fresh(F, prefix, "final"), &cur[j], 1, out[j]);
    for (size_t j = 0; rc == 0 && j < n_scan; j++)
        if (ctrl_nz(out[n_carried + j])[0] != '\0')
            rc = ctrl_emit_stack(F, prefix, scan[j], trips, out[n_carried + j]);
out:
    if (have_hoisted)
        scope_fini(&hoisted);
    for (size_t j = 0; scan != NULL && j < n_scan; j++)
        free(scan[j]);
    free(scan);
    free(cur);
    free(bin);
    free(bout);
    free(kin);
    free(iters);
    return rc;
}

/* If -> the branch taken, or both branches and a Where per output (see the file comment). */
static int
expand_if(struct flat *F, const struct scope *s, const Onnx__NodeProto *np,
          const char *const *in, const char *const *out, const char *prefix, int depth)
{
    const Onnx__GraphProto *br[2] = { graph_attr(np, "then_branch"),
                                      graph_attr(np, "else_branch") };
    const char **res[2] = { NULL, NULL }, *cname = NULL;
    char label[300];
    int64_t cond = 0;
    bool known;
    int rc = 0;

    label_of(np, label, sizeof(label));
    if (br[0] == NULL || br[1] == NULL)
        return sim_err_set(F->err, IPUOF_E_INVAL, "%s needs 'then_branch' and 'else_branch' "
                           "graph attributes", label);
    if (np->n_input != 1 || ctrl_nz(in[0])[0] == '\0')
        return sim_err_set(F->err, IPUOF_E_INVAL, "%s takes one input (the condition), not "
                           "%zu", label, np->n_input);
    for (int b = 0; b < 2; b++)
        if (br[b]->n_output != np->n_output || br[b]->n_input != 0)
            return sim_err_set(F->err, IPUOF_E_INVAL, "%s: its %s branch takes %zu inputs and "
                               "gives %zu outputs; it must take none and give the node's %zu",
                               label, b == 0 ? "then" : "else", br[b]->n_input,
                               br[b]->n_output, np->n_output);
    known = known_scalar(s, np->input[0], &cond, 0);
    if (!known) {   /* the condition as a scalar, so Where gives the branches' shape */
        cname = ctrl_fresh(F, prefix, "cond");
        rc = cname != NULL ? ctrl_emit_simple(F, "Squeeze", cname, in, 1, cname)
                           : ctrl_nomem(F);
        if (rc != 0)
            goto out;
    }
    for (int b = 0; b < 2; b++) {
        size_t first = F->out->graph.n_node;
        if (known && (b == 0) != (cond != 0))
            continue;
        res[b] = calloc(np->n_output + 1, sizeof(*res[b]));
        if (res[b] == NULL) {
            rc = ctrl_nomem(F);
            goto out;
        }
        {
            const char *bp = ctrl_cat(F, prefix, b == 0 ? "then/" : "else/", "");
            struct scope hoisted = { 0 };
            rc = bp != NULL ? scope_init(F, &hoisted, NULL, NULL, br[b]->n_initializer + 1)
                            : ctrl_nomem(F);
            if (rc == 0)
                rc = hoist_inits(F, &hoisted, br[b], bp);
            if (rc == 0)
                rc = emit_body(F, s, br[b], bp, NULL, NULL, &hoisted, res[b], depth + 1);
            scope_fini(&hoisted);
        }
        /* a condition computed from shapes only is known at compile time: the compiler
         * then skips the other branch's nodes (see the file comment) */
        for (size_t k = first; rc == 0 && !known && k < F->out->graph.n_node; k++)
            rc = ctrl_guard_node(F, F->out->graph.node[k], cname, b == 0);
        if (rc != 0)
            goto out;
    }
    for (size_t j = 0; rc == 0 && j < np->n_output; j++) {
        if (ctrl_nz(out[j])[0] == '\0')
            continue;
        if (known) {
            rc = ctrl_emit_simple(F, "Identity", ctrl_fresh(F, prefix, "taken"),
                             &res[cond != 0 ? 0 : 1][j], 1, out[j]);
        } else {
            /* __if_branches: Where's infer then wants equal shapes, naming the If */
            const char *w[3] = { cname, res[0][j], res[1][j] };
            rc = ctrl_emit_simple(F, "Where", ctrl_fresh(F, prefix, "select"), w, 3, out[j]);
            if (rc == 0)
                rc = ctrl_set_int_attr(F, F->out->graph.node[F->out->graph.n_node - 1],
                                  "__if_branches", false, 1);
        }
    }
out:
    free(res[0]);
    free(res[1]);
    return rc;
}

/*
 * Emits graph g's nodes into the flat graph. In a subgraph copy (s->sub) every output is
 * renamed prefix + name and registered in s first, so nodes may appear in any order; at
 * the top names stay as they are.
 */
static int
emit_graph(struct flat *F, struct scope *s, const Onnx__GraphProto *g, const char *prefix,
           int depth)
{
    int rc = 0;

    if (depth > MAX_DEPTH)
        return sim_err_set(F->err, IPUOF_E_TOO_LARGE, "%s: Loop/If subgraphs are nested "
                           "more than %d deep; flatten the model's control flow", F->label,
                           MAX_DEPTH);
    if (s->sub) {
        if (g->n_node > SIM_MAX_NODES)
            return sim_err_set(F->err, IPUOF_E_TOO_LARGE, "a subgraph has %zu nodes, over "
                               "the limit of %d", g->n_node, SIM_MAX_NODES);
        for (size_t k = 0; rc == 0 && k < g->n_node; k++) {
            const Onnx__NodeProto *np = g->node[k];
            if (np == NULL)
                return sim_err_set(F->err, IPUOF_E_INVAL, "a subgraph node is empty");
            for (size_t j = 0; rc == 0 && j < np->n_output; j++) {
                const char *o = ctrl_nz(np->output[j]), *to;
                if (o[0] == '\0')
                    continue;
                to = ctrl_cat(F, prefix, o, "");
                rc = to != NULL ? scope_put(F, s, o, to, NULL) : ctrl_nomem(F);
            }
        }
    }
    for (size_t k = 0; rc == 0 && k < g->n_node; k++) {
        const Onnx__NodeProto *np = g->node[k];
        Onnx__NodeProto *cp;
        char **ins, **outs;
        if (np == NULL)
            return sim_err_set(F->err, IPUOF_E_INVAL, "node %zu is empty", k);
        ins = ctrl_calloc(F, np->n_input, sizeof(char *));
        outs = ctrl_calloc(F, np->n_output, sizeof(char *));
        if (ins == NULL || outs == NULL)
            return ctrl_nomem(F);
        for (size_t j = 0; j < np->n_input; j++)
            ins[j] = (char *)resolve(s, np->input[j]);
        for (size_t j = 0; j < np->n_output; j++)
            outs[j] = (char *)(s->sub ? resolve(s, np->output[j]) : ctrl_nz(np->output[j]));
        if (is_ctrl(np)) {
            char num[48], label[300];
            const char *sub, *outer = F->label;
            snprintf(num, sizeof(num), "#%zu", k);
            sub = ctrl_cat(F, prefix, ctrl_nz(np->name)[0] != '\0' &&
                                     strlen(np->name) <= MAX_PREFIX_NAME ? np->name : num, "/");
            if (sub == NULL)
                return ctrl_nomem(F);
            label_of(np, label, sizeof(label));
            F->label = label;
            if (strcmp(np->op_type, "Loop") == 0)
                rc = expand_loop(F, s, np, (const char *const *)ins,
                                 (const char *const *)outs, sub, depth);
            else
                rc = expand_if(F, s, np, (const char *const *)ins,
                               (const char *const *)outs, sub, depth);
            F->label = outer;
            continue;
        }
        if (is_onnx(np) && strcmp(ctrl_nz(np->op_type), "SplitToSequence") == 0) {
            rc = ctrl_seq_split(F, np, (const char *const *)ins, (const char *const *)outs,
                                np->n_input > 1 ? known_rank(s, np->input[1]) : -1);
            continue;
        }
        if (is_onnx(np) && strcmp(ctrl_nz(np->op_type), "SequenceAt") == 0) {
            int64_t pos = 0;
            bool known = np->n_input > 1 && known_scalar(s, np->input[1], &pos, 0);
            rc = ctrl_seq_at(F, np, (const char *const *)ins, (const char *const *)outs,
                             known, pos, prefix);
            continue;
        }
        rc = ctrl_seq_check_use(F, np, (const char *const *)ins);
        if (rc != 0)
            return rc;
        cp = ctrl_calloc(F, 1, sizeof(*cp));
        if (cp == NULL)
            return ctrl_nomem(F);
        *cp = *np;
        cp->input = ins;
        cp->output = outs;
        if (s->sub && ctrl_nz(np->name)[0] != '\0') {
            cp->name = ctrl_cat(F, prefix, np->name, "");
            if (cp->name == NULL)
                return ctrl_nomem(F);
        }
        rc = ctrl_push_node(F, cp);
    }
    return rc;
}

int
sim_onnx_flatten(const Onnx__GraphProto *g, int64_t opset, struct sim_onnx_flat *out,
                 struct sim_err *err)
{
    struct flat F = { out, err, opset, 0, 0, 0, 0, false, "control flow" };
    struct scope top;
    bool any = false;
    int rc;

    memset(out, 0, sizeof(*out));
    out->graph = *g;
    for (size_t k = 0; k < g->n_node; k++)
        any = any || is_rewritten(g->node[k]);
    if (!any)
        return 0;
    out->graph.node = NULL;
    out->graph.n_node = 0;
    out->graph.initializer = NULL;
    out->graph.n_initializer = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        rc = ctrl_push_init(&F, g->initializer[i]);
        if (rc != 0)
            return rc;
    }
    out->flattened = true;
    rc = scope_init(&F, &top, NULL, g, 1);
    if (rc == 0)
        rc = emit_graph(&F, &top, g, "", 0);
    if (rc == 0)
        rc = ctrl_seq_check_outputs(&F, g);
    scope_fini(&top);
    ctrl_seq_free(&F);
    return rc;
}

void
sim_onnx_flat_fini(struct sim_onnx_flat *f)
{
    for (size_t i = 0; i < f->n_owned; i++)
        free(f->owned[i]);
    free(f->owned);
    if (f->flattened) {
        free(f->graph.node);
        free(f->graph.initializer);
    }
    memset(f, 0, sizeof(*f));
}

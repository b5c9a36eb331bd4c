/*
 * onnx_ctrl_emit.c — the flat graph that onnx_ctrl.c builds: its nodes and initializers
 * (grown arrays, SIM_MAX_NODES checked), the nodes it makes (Constant, Identity, Where,
 * Squeeze, Unsqueeze + Concat for scan outputs) and the names, every allocation on the
 * flattening's owned list (freed at once by sim_onnx_flat_fini), the names capped at
 * MAX_NAME_BYTES in all.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ctrl.h"
#include "onnx_ctrl_int.h"

int
ctrl_nomem(struct flat *F)
{
    if (F->names_full)  /* own_cat refused a name past MAX_NAME_BYTES and said so */
        return IPUOF_E_TOO_LARGE;
    return sim_err_set(F->err, IPUOF_E_NOMEM, "out of memory unrolling control flow");
}

/* Remembers p (malloc'd) for sim_onnx_flat_fini; returns p, or NULL (p freed) when out of
 * memory. */
void *
ctrl_own(struct flat *F, void *p)
{
    struct sim_onnx_flat *o = F->out;

    if (p == NULL)
        return NULL;
    if (o->n_owned == o->cap_owned) {
        size_t cap = o->cap_owned ? o->cap_owned * 2 : 64;
        void **n = realloc(o->owned, cap * sizeof(*n));
        if (n == NULL) {
            free(p);
            return NULL;
        }
        o->owned = n;
        o->cap_owned = cap;
    }
    o->owned[o->n_owned++] = p;
    return p;
}

void *
ctrl_calloc(struct flat *F, size_t n, size_t sz)
{
    return ctrl_own(F, calloc(n + 1, sz));
}

/* An owned string "a" "b" "c" joined; NULL when out of memory or past MAX_NAME_BYTES in
 * all (each body copy repeats its names, so a long name times many iterations is refused
 * before it is made; the error is then set here). */
char *
ctrl_cat(struct flat *F, const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s;

    F->name_bytes += la + lb + lc + 1;
    if (F->name_bytes > MAX_NAME_BYTES) {
        if (!F->names_full)
            sim_err_set(F->err, IPUOF_E_TOO_LARGE, "unrolling %s makes more than %zu MiB of "
                        "tensor and node names; use fewer iterations or shorter names",
                        F->label, MAX_NAME_BYTES >> 20);
        F->names_full = true;
        return NULL;
    }
    s = ctrl_own(F, malloc(la + lb + lc + 1));

    if (s != NULL) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb);
        memcpy(s + la + lb, c, lc + 1);
    }
    return s;
}

/* Appends a node to the flat graph. */
int
ctrl_push_node(struct flat *F, Onnx__NodeProto *np)
{
    struct sim_onnx_flat *o = F->out;

    if (o->graph.n_node >= SIM_MAX_NODES)
        return sim_err_set(F->err, IPUOF_E_TOO_LARGE, "unrolling control flow makes more "
                           "than %d nodes (the graph limit); use a smaller trip count",
                           SIM_MAX_NODES);
    if (o->graph.n_node == F->cap_nodes) {
        size_t cap = F->cap_nodes ? F->cap_nodes * 2 : 256;
        Onnx__NodeProto **n = realloc(o->graph.node, (cap + 1) * sizeof(*n));
        if (n == NULL)
            return ctrl_nomem(F);
        o->graph.node = n;
        F->cap_nodes = cap;
    }
    o->graph.node[o->graph.n_node++] = np;
    return 0;
}

int
ctrl_push_init(struct flat *F, Onnx__TensorProto *t)
{
    struct sim_onnx_flat *o = F->out;

    if (o->graph.n_initializer == F->cap_inits) {
        size_t cap = F->cap_inits ? F->cap_inits * 2 : 64;
        Onnx__TensorProto **n = realloc(o->graph.initializer, (cap + 1) * sizeof(*n));
        if (n == NULL)
            return ctrl_nomem(F);
        o->graph.initializer = n;
        F->cap_inits = cap;
    }
    o->graph.initializer[o->graph.n_initializer++] = t;
    return 0;
}

/* A new node op_type named name with n_in / n_out operand slots (filled by the caller). */
Onnx__NodeProto *
ctrl_new_node(struct flat *F, const char *op, const char *name, size_t n_in, size_t n_out)
{
    Onnx__NodeProto *np = ctrl_calloc(F, 1, sizeof(*np));

    if (np == NULL)
        return NULL;
    onnx__node_proto__init(np);
    np->op_type = (char *)op;
    np->name = (char *)name;
    np->domain = (char *)"";
    np->input = ctrl_calloc(F, n_in, sizeof(char *));
    np->output = ctrl_calloc(F, n_out, sizeof(char *));
    if (np->input == NULL || np->output == NULL)
        return NULL;
    np->n_input = n_in;
    np->n_output = n_out;
    return np;
}

/* A fresh name "prefix#N" no graph name has (the loader refuses duplicates anyway). */
const char *
ctrl_fresh(struct flat *F, const char *prefix, const char *what)
{
    char num[48];

    snprintf(num, sizeof(num), "#%u/", F->serial++);
    return ctrl_cat(F, prefix, num, what);
}

/* Emits a Constant node named out holding one int64 (dtype INT64, rank 0 or 1) or bool. */
int
ctrl_emit_const(struct flat *F, const char *out, int dtype, int rank, int64_t v)
{
    Onnx__NodeProto *np = ctrl_new_node(F, "Constant", out, 0, 1);
    Onnx__AttributeProto *ap = ctrl_calloc(F, 1, sizeof(*ap));
    Onnx__AttributeProto **aps = ctrl_calloc(F, 1, sizeof(*aps));
    Onnx__TensorProto *t = ctrl_calloc(F, 1, sizeof(*t));
    int64_t *dims = ctrl_calloc(F, 1, sizeof(*dims));
    uint8_t *raw = ctrl_calloc(F, 1, sizeof(int64_t));

    if (np == NULL || ap == NULL || aps == NULL || t == NULL || dims == NULL || raw == NULL)
        return ctrl_nomem(F);
    np->output[0] = (char *)out;
    onnx__attribute_proto__init(ap);
    onnx__tensor_proto__init(t);
    ap->name = (char *)"value";
    ap->has_type = 1;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    ap->t = t;
    aps[0] = ap;
    np->attribute = aps;
    np->n_attribute = 1;
    t->has_data_type = 1;
    t->data_type = dtype;
    dims[0] = 1;
    t->dims = dims;
    t->n_dims = (size_t)rank;
    t->has_raw_data = 1;
    if (dtype == SIM_DTYPE_BOOL) {
        raw[0] = v != 0;
        t->raw_data.len = 1;
    } else {
        memcpy(raw, &v, sizeof(v));     /* little-endian hosts only, as tensor_pb.c */
        t->raw_data.len = sizeof(v);
    }
    t->raw_data.data = raw;
    return ctrl_push_node(F, np);
}

/* Emits op(in...) -> out with the given inputs. */
int
ctrl_emit_simple(struct flat *F, const char *op, const char *name, const char *const *in,
            size_t n_in, const char *out)
{
    Onnx__NodeProto *np = ctrl_new_node(F, op, name, n_in, 1);

    if (np == NULL)
        return ctrl_nomem(F);
    for (size_t i = 0; i < n_in; i++)
        np->input[i] = (char *)in[i];
    np->output[0] = (char *)out;
    return ctrl_push_node(F, np);
}

/* Sets np's only attribute: an INT (ints NULL) or an INTS of one value. */
int
ctrl_set_int_attr(struct flat *F, Onnx__NodeProto *np, const char *name, bool ints, int64_t v)
{
    Onnx__AttributeProto *ap = ctrl_calloc(F, 1, sizeof(*ap));
    Onnx__AttributeProto **aps = ctrl_calloc(F, 1, sizeof(*aps));
    int64_t *vals = ctrl_calloc(F, 1, sizeof(*vals));

    if (ap == NULL || aps == NULL || vals == NULL)
        return ctrl_nomem(F);
    onnx__attribute_proto__init(ap);
    ap->name = (char *)name;
    ap->has_type = 1;
    if (ints) {
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        vals[0] = v;
        ap->n_ints = 1;
        ap->ints = vals;
    } else {
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        ap->i = v;
    }
    aps[0] = ap;
    np->attribute = aps;
    np->n_attribute = 1;
    return 0;
}

/* out = Concat(Unsqueeze(parts[i], axis 0) for i < n), axis 0: a scan output. */
int
ctrl_emit_stack(struct flat *F, const char *prefix, const char *const *parts, int64_t n,
           const char *out)
{
    const char *axes = NULL, **un = ctrl_calloc(F, (size_t)n, sizeof(*un));
    Onnx__NodeProto *c;
    int rc = 0;

    if (un == NULL)
        return ctrl_nomem(F);
    if (F->opset >= 13) {       /* axes an input from opset 13, an attribute before */
        axes = ctrl_fresh(F, prefix, "axes0");
        rc = axes != NULL ? ctrl_emit_const(F, axes, SIM_DTYPE_INT64, 1, 0) : ctrl_nomem(F);
    }
    for (int64_t it = 0; rc == 0 && it < n; it++) {
        Onnx__NodeProto *u;
        un[it] = ctrl_fresh(F, prefix, "scan");
        u = un[it] != NULL ? ctrl_new_node(F, "Unsqueeze", un[it], axes != NULL ? 2 : 1, 1) : NULL;
        if (u == NULL)
            return ctrl_nomem(F);
        u->input[0] = (char *)parts[it];
        u->output[0] = (char *)un[it];
        if (axes != NULL)
            u->input[1] = (char *)axes;
        else
            rc = ctrl_set_int_attr(F, u, "axes", true, 0);
        if (rc == 0)
            rc = ctrl_push_node(F, u);
    }
    if (rc != 0)
        return rc;
    c = ctrl_new_node(F, "Concat", ctrl_fresh(F, prefix, "stack"), (size_t)n, 1);
    if (c == NULL)
        return ctrl_nomem(F);
    for (int64_t it = 0; it < n; it++)
        c->input[it] = (char *)un[it];
    c->output[0] = (char *)out;
    rc = ctrl_set_int_attr(F, c, "axis", false, 0);
    return rc != 0 ? rc : ctrl_push_node(F, c);
}


/*
 * Marks np (a node of an If's branch) with the branch's guard: __if_guard, the flat name of
 * the If's condition (a scalar), and __if_side, 1 for then, 0 for else. The compiler skips
 * the node when the condition is known at compile time and picks the other side
 * (compile.c). A node already marked (an inner If's branch) keeps its own guard: the inner
 * condition is itself in the outer branch, so skipping the outer skips it too. A node
 * without inputs (Constant, which wants its one attribute alone) is left as it is: it
 * cannot fail on the other branch's shapes and, read by nothing, is dropped. np's
 * attribute array may be the protobuf's: a new one (owned) replaces it.
 */
int
ctrl_guard_node(struct flat *F, Onnx__NodeProto *np, const char *cond, bool then)
{
    Onnx__AttributeProto *ap, **aps;

    if (np->n_input == 0)
        return 0;
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a] != NULL &&
            strcmp(ctrl_nz(np->attribute[a]->name), "__if_guard") == 0)
            return 0;
    ap = ctrl_calloc(F, 2, sizeof(*ap));
    aps = ctrl_calloc(F, np->n_attribute + 2, sizeof(*aps));
    if (ap == NULL || aps == NULL)
        return ctrl_nomem(F);
    for (size_t a = 0; a < np->n_attribute; a++)
        aps[a] = np->attribute[a];
    onnx__attribute_proto__init(&ap[0]);
    ap[0].name = (char *)"__if_guard";
    ap[0].has_type = 1;
    ap[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    ap[0].has_s = 1;
    ap[0].s.data = (uint8_t *)cond;
    ap[0].s.len = strlen(cond);
    onnx__attribute_proto__init(&ap[1]);
    ap[1].name = (char *)"__if_side";
    ap[1].has_type = 1;
    ap[1].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    ap[1].has_i = 1;
    ap[1].i = then ? 1 : 0;
    aps[np->n_attribute] = &ap[0];
    aps[np->n_attribute + 1] = &ap[1];
    np->attribute = aps;
    np->n_attribute += 2;
    return 0;
}

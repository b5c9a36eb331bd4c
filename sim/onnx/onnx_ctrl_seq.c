/*
 * onnx_ctrl_seq.c — ONNX SplitToSequence read through SequenceAt, made into plain nodes
 * when the model loads (with Loop and If, onnx_ctrl.c), as PyTorch exports torch.chunk and
 * torch.split when the last piece is smaller ("uneven chunks"):
 *
 *   seq = SplitToSequence(x, split, axis, keepdims);  y = SequenceAt(seq, k)
 *
 * becomes, for a 1-D `split` S of L sizes (computed or constant; known at compile time,
 * where these nodes fold to constants):
 *
 *   P = Concat([0], S)                         (L + 1: never empty)
 *   start = ReduceSum(Slice(P, 0, k + 1))      (k >= 0; Slice(P, 0, k) for k < 0)
 *   end = start + Slice(S, k, k + 1)           (k = -1: to the end)
 *   y = Slice(x, start, end, axis)
 *
 * and without `split`, the size-1 piece k: Slice(x, k, k + 1, axis), Squeezed on the axis
 * when keepdims is 0. So each SequenceAt is a Slice of x, whose forward and backward apply
 * (training through torch.chunk). The position k must be known when the model loads (a
 * Constant or an initializer, as the exporter makes it).
 *
 * Refused, naming the node: a sequence read by anything but SequenceAt (ConcatFromSequence,
 * SequenceLength, ...) or given as a graph output, a position computed at run time, a
 * `split` of rank 0 (equal pieces of a run-time size: give the sizes as a list). A split
 * of an unknown size or out of range is refused by Slice and ReduceSum at compile time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ctrl.h"
#include "onnx_ctrl_int.h"

/* One sequence made by a SplitToSequence: its flat name (the key) and what it splits. */
struct seq_entry {
    const char *name, *x, *split, *node;
    int64_t axis, keepdims;
    int split_rank;             /* of a split known when loading: 0 or 1; -1 unknown */
};

struct seq_tab {
    struct seq_entry *e;
    size_t n, cap;
    struct sim_strmap map;      /* name -> index into e */
};

/* The int attribute name of np, or dflt. */
static int64_t
int_attr(const Onnx__NodeProto *np, const char *name, int64_t dflt)
{
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a] != NULL && strcmp(ctrl_nz(np->attribute[a]->name), name) == 0)
            return np->attribute[a]->i;
    return dflt;
}

/* Grows the table (and rebuilds its map) for one entry more. */
static int
seq_grow(struct flat *F)
{
    struct seq_tab *t = F->seq;

    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t == NULL)
            return ctrl_nomem(F);
        F->seq = t;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct seq_entry *e = realloc(t->e, cap * sizeof(*e));
        if (e == NULL)
            return ctrl_nomem(F);
        t->e = e;
        t->cap = cap;
        sim_strmap_fini(&t->map);
        if (!sim_strmap_init(&t->map, cap))
            return ctrl_nomem(F);
        for (size_t i = 0; i < t->n; i++)
            sim_strmap_put(&t->map, t->e[i].name, (int)i);
    }
    return 0;
}

static const struct seq_entry *
seq_find(const struct flat *F, const char *name)
{
    int i;

    if (F->seq == NULL || name == NULL || name[0] == '\0')
        return NULL;
    i = sim_strmap_get(&F->seq->map, name);
    return i >= 0 ? &F->seq->e[i] : NULL;
}

int
ctrl_seq_split(struct flat *F, const Onnx__NodeProto *np, const char *const *in,
               const char *const *out, int split_rank)
{
    struct seq_entry *e;
    int rc;

    if (np->n_input < 1 || np->n_input > 2 || np->n_output != 1 ||
        ctrl_nz(in[0])[0] == '\0' || ctrl_nz(out[0])[0] == '\0')
        return sim_err_set(F->err, IPUOF_E_INVAL, "node '%s' (SplitToSequence) takes an input "
                           "and an optional split and gives one sequence (it has %zu inputs "
                           "and %zu outputs)", ctrl_nz(np->name), np->n_input, np->n_output);
    if (split_rank == 0)
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "node '%s' (SplitToSequence): a "
                           "scalar split (equal pieces of that size) is not supported; give "
                           "the sizes as a 1-D split, as torch.chunk and torch.split export "
                           "them", ctrl_nz(np->name));
    rc = seq_grow(F);
    if (rc != 0)
        return rc;
    e = &F->seq->e[F->seq->n];
    e->name = out[0];
    e->x = in[0];
    e->split = np->n_input > 1 ? ctrl_nz(in[1]) : "";
    e->node = ctrl_nz(np->name);
    e->axis = int_attr(np, "axis", 0);
    e->keepdims = int_attr(np, "keepdims", 1);
    e->split_rank = split_rank;
    if (!sim_strmap_put(&F->seq->map, e->name, (int)F->seq->n))
        return sim_err_set(F->err, IPUOF_E_INVAL, "the sequence '%s' is made twice", e->name);
    F->seq->n++;
    return 0;
}

/* Emits a Slice(data, starts, ends, axes) -> out with 1-element starts/ends/axes. */
static int
emit_slice(struct flat *F, const char *prefix, const char *data, const char *starts,
           const char *ends, const char *axes, const char *out)
{
    const char *in[4] = { data, starts, ends, axes };

    return ctrl_emit_simple(F, "Slice", ctrl_fresh(F, prefix, "slice"), in, 4, out);
}

/* A fresh name holding the 1-D int64 constant [v]. */
static const char *
const1(struct flat *F, const char *prefix, int64_t v)
{
    const char *n = ctrl_fresh(F, prefix, "k");

    if (n == NULL || ctrl_emit_const(F, n, SIM_DTYPE_INT64, 1, v) != 0)
        return NULL;
    return n;
}

int
ctrl_seq_at(struct flat *F, const Onnx__NodeProto *np, const char *const *in,
            const char *const *out, bool known, int64_t k, const char *prefix)
{
    const struct seq_entry *s = np->n_input >= 1 ? seq_find(F, in[0]) : NULL;
    const char *name = ctrl_nz(np->name), *axes, *lo, *hi, *sliced;
    int rc;

    if (s == NULL)
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "node '%s' (SequenceAt): its "
                           "sequence '%s' does not come from a SplitToSequence; only "
                           "sequences made by SplitToSequence are supported", name,
                           np->n_input >= 1 ? ctrl_nz(in[0]) : "");
    if (np->n_input != 2 || np->n_output != 1 || ctrl_nz(out[0])[0] == '\0')
        return sim_err_set(F->err, IPUOF_E_INVAL, "node '%s' (SequenceAt) takes a sequence "
                           "and a position and gives one tensor", name);
    if (!known)
        return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "node '%s' (SequenceAt): its "
                           "position '%s' is computed at run time; it must be a Constant or "
                           "an initializer (as torch.chunk and torch.split export it)", name,
                           ctrl_nz(in[1]));
    axes = const1(F, prefix, s->axis);
    if (axes == NULL)
        return ctrl_nomem(F);
    if (s->split[0] == '\0') {          /* pieces of size 1 */
        lo = const1(F, prefix, k);
        hi = const1(F, prefix, k == -1 ? INT64_MAX : k + 1);
        sliced = s->keepdims ? out[0] : ctrl_fresh(F, prefix, "piece");
        if (lo == NULL || hi == NULL || sliced == NULL)
            return ctrl_nomem(F);
        rc = emit_slice(F, prefix, s->x, lo, hi, axes, sliced);
        if (rc == 0 && !s->keepdims) {
            const char *sq[2] = { sliced, axes };
            rc = ctrl_emit_simple(F, "Squeeze", ctrl_fresh(F, prefix, "squeeze"), sq,
                                  F->opset >= 13 ? 2 : 1, out[0]);
            if (rc == 0 && F->opset < 13)
                rc = ctrl_set_int_attr(F, F->out->graph.node[F->out->graph.n_node - 1],
                                       "axes", true, s->axis);
        }
        return rc;
    }
    {
        const char *zero = const1(F, prefix, 0), *p = ctrl_fresh(F, prefix, "padded");
        const char *head = ctrl_fresh(F, prefix, "head"), *start = ctrl_fresh(F, prefix, "start");
        const char *len = ctrl_fresh(F, prefix, "len"), *end = ctrl_fresh(F, prefix, "end");
        const char *pend = const1(F, prefix, k >= 0 ? k + 1 : k);
        const char *k0 = const1(F, prefix, k), *k1 = const1(F, prefix, k == -1 ? INT64_MAX : k + 1);
        const char *axis0 = const1(F, prefix, 0);
        const char *cat[2] = { zero, s->split }, *sum[2], *add[2];
        if (zero == NULL || p == NULL || head == NULL || start == NULL || len == NULL ||
            end == NULL || pend == NULL || k0 == NULL || k1 == NULL || axis0 == NULL)
            return ctrl_nomem(F);
        rc = ctrl_emit_simple(F, "Concat", ctrl_fresh(F, prefix, "pad"), cat, 2, p);
        if (rc == 0)
            rc = ctrl_set_int_attr(F, F->out->graph.node[F->out->graph.n_node - 1], "axis",
                                   false, 0);
        if (rc == 0)
            rc = emit_slice(F, prefix, p, zero, pend, axis0, head);
        sum[0] = head;
        if (rc == 0)     /* every axis, keepdims 1: shape (1) */
            rc = ctrl_emit_simple(F, "ReduceSum", ctrl_fresh(F, prefix, "sum"), sum, 1, start);
        if (rc == 0)
            rc = emit_slice(F, prefix, s->split, k0, k1, axis0, len);
        add[0] = start;
        add[1] = len;
        if (rc == 0)
            rc = ctrl_emit_simple(F, "Add", ctrl_fresh(F, prefix, "add"), add, 2, end);
        if (rc == 0)
            rc = emit_slice(F, prefix, s->x, start, end, axes, out[0]);
        return rc;
    }
}

int
ctrl_seq_check_use(struct flat *F, const Onnx__NodeProto *np, const char *const *in)
{
    for (size_t j = 0; j < np->n_input; j++) {
        const struct seq_entry *s = seq_find(F, in[j]);
        if (s != NULL)
            return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "node '%s' (%s) reads the "
                               "sequence '%s' of node '%s' (SplitToSequence); only SequenceAt "
                               "at a constant position can read one (each becomes a Slice)",
                               ctrl_nz(np->name), ctrl_nz(np->op_type), s->name, s->node);
    }
    return 0;
}

int
ctrl_seq_check_outputs(struct flat *F, const Onnx__GraphProto *g)
{
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i] != NULL && seq_find(F, g->output[i]->name) != NULL)
            return sim_err_set(F->err, IPUOF_E_UNSUPPORTED, "graph output '%s' is a "
                               "sequence (of a SplitToSequence); outputs must be tensors: "
                               "give each piece (SequenceAt) as an output instead",
                               g->output[i]->name);
    return 0;
}

void
ctrl_seq_free(struct flat *F)
{
    if (F->seq == NULL)
        return;
    sim_strmap_fini(&F->seq->map);
    free(F->seq->e);
    free(F->seq);
    F->seq = NULL;
}

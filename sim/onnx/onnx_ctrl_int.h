/*
 * onnx_ctrl_int.h — what onnx_ctrl.c (Loop and If expansion) and onnx_ctrl_emit.c (the
 * flat graph's nodes, names and allocations) share. Internal to those two files.
 */
#ifndef SIM_ONNX_CTRL_INT_H
#define SIM_ONNX_CTRL_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "sim_int.h"

struct sim_onnx_flat;           /* defined in onnx_ctrl.h (its users include both) */
struct seq_tab;                 /* onnx_ctrl_seq.c's */

#define MAX_NAME_BYTES ((size_t)128 << 20)  /* names made while unrolling, in all */

/* The flattening under way: the flat graph (out), its allocations and limits. */
struct flat {
    struct sim_onnx_flat *out;
    struct sim_err *err;
    int64_t opset;
    size_t cap_nodes, cap_inits;
    unsigned serial;
    size_t name_bytes;          /* bytes of the names made so far (MAX_NAME_BYTES) */
    bool names_full;            /* the cap was hit: the error is set once */
    const char *label;          /* the Loop/If being expanded, innermost ("" at the top) */
    struct seq_tab *seq;        /* SplitToSequence's sequences (onnx_ctrl_seq.c), or NULL */
};

static inline const char *
ctrl_nz(const char *s)
{
    return s != NULL ? s : "";
}

/* Sets the out-of-memory error (or keeps the names-cap error) and returns its code. */
int ctrl_nomem(struct flat *F);
/* p (malloc'd) on F's owned list, freed by sim_onnx_flat_fini; NULL (p freed) on failure. */
void *ctrl_own(struct flat *F, void *p);
/* calloc(n + 1, sz) on the owned list. */
void *ctrl_calloc(struct flat *F, size_t n, size_t sz);
/* "a" "b" "c" joined, owned; NULL when out of memory or past MAX_NAME_BYTES (error set). */
char *ctrl_cat(struct flat *F, const char *a, const char *b, const char *c);
/* Append a node / an initializer to the flat graph (SIM_MAX_NODES checked). */
int ctrl_push_node(struct flat *F, Onnx__NodeProto *np);
int ctrl_push_init(struct flat *F, Onnx__TensorProto *t);
/* A new owned node with n_in / n_out operand slots for the caller to fill. */
Onnx__NodeProto *ctrl_new_node(struct flat *F, const char *op, const char *name, size_t n_in,
                               size_t n_out);
/* A fresh owned name "prefix#N/what". */
const char *ctrl_fresh(struct flat *F, const char *prefix, const char *what);
/* Emits a Constant named out: one int64 (rank 0 or 1) or bool. */
int ctrl_emit_const(struct flat *F, const char *out, int dtype, int rank, int64_t v);
/* Emits op(in...) -> out. */
int ctrl_emit_simple(struct flat *F, const char *op, const char *name, const char *const *in,
                     size_t n_in, const char *out);
/* Sets np's only attribute: an INT, or (ints) an INTS of one value. */
int ctrl_set_int_attr(struct flat *F, Onnx__NodeProto *np, const char *name, bool ints,
                      int64_t v);
/* Marks np as a node of an If's then (or else) branch on condition cond (__if_guard,
 * __if_side); a node already marked keeps its mark. */
int ctrl_guard_node(struct flat *F, Onnx__NodeProto *np, const char *cond, bool then);
/* out = Concat(Unsqueeze(parts[i], axis 0) for i < n), axis 0: a scan output. */
int ctrl_emit_stack(struct flat *F, const char *prefix, const char *const *parts, int64_t n,
                    const char *out);

/* onnx_ctrl_seq.c: SplitToSequence + SequenceAt as Slices (see that file). */
/* Records the sequence out[0] of SplitToSequence np (inputs in[], flat names); split_rank:
 * its split's rank when known at load (0 is refused), else -1. */
int ctrl_seq_split(struct flat *F, const Onnx__NodeProto *np, const char *const *in,
                   const char *const *out, int split_rank);
/* Emits SequenceAt np (piece k of its sequence, known says k is known) as a Slice. */
int ctrl_seq_at(struct flat *F, const Onnx__NodeProto *np, const char *const *in,
                const char *const *out, bool known, int64_t k, const char *prefix);
/* Refuses np when one of its inputs is a sequence (only SequenceAt reads them). */
int ctrl_seq_check_use(struct flat *F, const Onnx__NodeProto *np, const char *const *in);
/* Refuses a graph output that is a sequence. */
int ctrl_seq_check_outputs(struct flat *F, const Onnx__GraphProto *g);
/* Frees the sequence table (NULL: nothing). */
void ctrl_seq_free(struct flat *F);

#endif /* SIM_ONNX_CTRL_INT_H */

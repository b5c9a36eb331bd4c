/*
 * exe.h — the compiled executable, shared by compile.c (inference, folding, placement,
 * input/output layout), plan.c (memory plan, fit check) and exec.c (binding and running).
 *
 * Values are indexed exactly as the model's values. Only nodes that survive constant
 * folding are in the schedule. Memory: one arena per IPU (replica r, IPU p within the
 * replica: arenas[r * ipr + p]); every activation gets one offset in its IPU's arena,
 * reused between tensors whose lifetimes do not overlap.
 */
#ifndef SIM_EXE_H
#define SIM_EXE_H

#include <stdatomic.h>

#include "ops.h"

enum sim_val_kind {
    SIM_V_NONE = 0,             /* not reached (an unused output of a node) */
    SIM_V_CONST = 1,            /* known at compile time: cdata */
    SIM_V_INPUT = 2,            /* a runtime graph input: lives in the input run buffer */
    SIM_V_ACT = 3               /* produced by a scheduled node */
};

struct sim_val {
    int kind;                   /* enum sim_val_kind */
    struct sim_tinfo ti;        /* dtype, shape, numel; cdata when SIM_V_CONST */
    size_t bytes;
    int producer;               /* schedule index of the producing node, -1 */
    int ipu;                    /* IPU within the replica that holds it */
    int first, last;            /* schedule steps during which it is live */
    int64_t off;                /* arena offset, -1 when not in an arena */
    int in_io;                  /* input index when SIM_V_INPUT, else -1 */
    int out_io;                 /* output index when written straight to an output slot */
};

struct sim_enode {
    int mnode;                  /* index in the model */
    const struct sim_op *op;
    int n_in, n_out;
    const int *in, *out;        /* value indices, borrowed from the model node */
    void *params;               /* owned */
    size_t scratch;
    int64_t scratch_off;
    int ipu;
    int stage;
    char label[160];
};

struct sim_exe_io {
    const char *name;           /* borrowed from the model */
    int val;
    int dtype;
    struct sim_shape step, run;
    size_t step_bytes, run_bytes;
    void *buf;                  /* run buffer, owned */
    struct sim_output_mode mode;
    unsigned iters;
    bool zero_copy;             /* outputs: the producer writes straight into buf */
};

/* A kernel view whose data pointer moves every step (it points into a run buffer). */
struct sim_patch {
    struct sim_tensor *view;
    int io;
    bool is_out;
};

struct sim_exe {
    const struct sim_model *m;
    unsigned D, R, B;
    unsigned ipr;               /* IPUs per replica */
    uint64_t capacity;
    unsigned tiles;

    struct sim_val *vals;       /* m->n_vals */
    int n_nodes;
    struct sim_enode *nodes;    /* the schedule */
    int n_in, n_out;
    struct sim_exe_io *in, *out;

    void **owned;               /* folded / frozen constant buffers */
    int n_owned, cap_owned;

    size_t *arena_bytes;        /* per IPU within a replica */
    void **arenas;              /* R * ipr */
    struct sim_mem_report *mem; /* R * ipr */

    struct sim_kern *kern;      /* R * n_nodes */
    struct sim_tensor *views;   /* backing store of every kernel's in/out views */
    struct sim_patch *patches;  /* grouped by replica: patch_start[r] .. patch_start[r+1] */
    int *patch_start;
    uint64_t *rng;              /* per replica */
    atomic_int busy;            /* a run is in progress */
    atomic_uint_fast64_t run_id;    /* id of the latest run */
    atomic_uint_fast64_t cancel_id; /* run to stop at the next node boundary */
};

/* Keeps p (malloc'd) until the executable is freed. Returns false when out of memory
 * (p is then freed). */
bool sim_exe_own(struct sim_exe *e, void *p);

/* plan.c: liveness, arena offsets per IPU, memory figures and the fit check. */
int sim_plan_memory(struct sim_exe *e, struct sim_err *err);

/* exec.c: allocates arenas and run buffers and binds every kernel view. */
int sim_exec_bind(struct sim_exe *e, struct sim_err *err);

/* Fills the views of kernel k for node n from value data pointers (used by folding). */
void sim_kern_init(struct sim_kern *k, const struct sim_enode *n, struct sim_tensor *views);

#endif /* SIM_EXE_H */

/*
 * exe.h — the compiled executable, shared by compile.c (inference, folding, placement,
 * input/output layout), weights.c (which initializers become weights the executable owns,
 * their storage), autodiff.c (the backward schedule), plan.c (memory plan, fit check),
 * exec.c (binding and running inference), train.c (training runs, the optimizers) and
 * weights_io.c (reading, writing, copying and saving weights).
 *
 * Values are indexed exactly as the model's values. Only nodes that survive constant
 * folding are in the schedule. Memory: one arena per IPU (replica r, IPU p within the
 * replica: arenas[r * ipr + p]); every activation gets one offset in its IPU's arena,
 * reused between tensors whose lifetimes do not overlap.
 *
 * Training timeline of one micro-batch: forward steps 0 .. n_nodes-1, then backward steps
 * n_nodes .. n_nodes+n_bsteps-1 (the gradient rules of the forward nodes that need one, in
 * reverse order). Gradients of activations live in the arena from their first writer to
 * their producer's backward step; weights, gradient accumulators and optimizer state are
 * flat buffers (llm.c style) so the optimizer is one loop over all trainable floats.
 */
#ifndef SIM_EXE_H
#define SIM_EXE_H

#include <stdatomic.h>

#include "ops.h"

enum sim_val_kind {
    SIM_V_NONE = 0,             /* not reached (an unused output of a node) */
    SIM_V_CONST = 1,            /* known at compile time: cdata */
    SIM_V_INPUT = 2,            /* a runtime graph input: lives in the input run buffer */
    SIM_V_ACT = 3,              /* produced by a scheduled node */
    SIM_V_WEIGHT = 4            /* an initializer the executable owns (e->w[weight]) */
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
    int weight;                 /* index in e->w when SIM_V_WEIGHT, else -1 */
    bool grad;                  /* training: carries a gradient (from a trainable weight
                                 * to the loss) */
    int gfirst, glast;          /* training: timeline steps the gradient lives (ACT) */
    int64_t goff;               /* training: arena offset of the gradient (ACT), or -1 */
    bool blocked;               /* in oneDNN's blocked layout, not plain (layout.c) */
    int rfirst, rlast;          /* training, produced by a recomputed node: timeline steps
                                 * its recomputed copy lives (first..last is then the
                                 * forward's copy only), else -1 */
    int64_t roff;               /* arena offset of the recomputed copy, which the backward
                                 * reads (recompute.c), or -1 */
};

/* A weight the executable owns (training, or inference with updatable_weights). */
struct sim_weight {
    int val;
    int kind;                   /* enum sim_weight_kind */
    size_t bytes;
    size_t off;                 /* byte offset in e->params (trainable and frozen) or in
                                 * one replica's block of e->bufs (buffers) */
    int ipu;                    /* IPU of its first reader */
    bool half;                  /* a float16 initializer: its floats hold float16 values
                                 * (half_train.c), 2 bytes each in the plan */
    bool shown;                 /* a buffer the host sees in e->shown rather than in
                                 * replica 0's block (sim_exe_show_buffer) */
    uint64_t written;           /* e->writes at its last write (0: none since compiling) */
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
    size_t saved;               /* training: bytes kept from forward to backward */
    int64_t saved_off;
    size_t bwd_scratch;         /* training: backward scratch bytes */
    int64_t bwd_scratch_off;
    int bstep;                  /* training: index of its backward step, or -1 */
    int rstep;                  /* training: index of the backward step that recomputes
                                 * its forward (recompute.c), or -1 */
    bool rviews;                /* training: its backward reads a recomputed copy (its
                                 * views are repointed: sim_recompute_kern) */
    bool rnd;                   /* draws random numbers (Dropout): seeded per micro-batch */
    bool half;                  /* reads or writes float16 (other than Cast, Identity and
                                 * shape-only ops): run by half_exec.c through its float
                                 * kernel, each float16 result rounded as it is written */
    struct sim_act act;         /* an activation fused into it (fuse.c), applied to out[0];
                                 * kind SIM_ACT_NONE: none */
    char fused_op[40];          /* "Conv+Relu", "Add+Relu" when an activation is fused
                                 * into it (sim_exe_node_times reports it), else "" */
    double fused_flops, fused_bytes, fused_in_bytes;    /* the cost of the nodes fused into
                                 * it (cost.c, schedule.c), so fusing moves their time to
                                 * it and changes no total */
    double fused_t[6];          /* the time of the nodes fused into it (cost_node.c):
                                 * forward compute, exchange, sync, then backward's */
};

/* An activation read on an IPU other than its producer's (place.c): the producer's IPU
 * sends it after the forward of the producing stage, out of its arena into an exchange
 * buffer owned by neither arena; the reader's IPU receives it into its own copy before
 * the forward of the first stage there that reads it. Its gradient goes the other way:
 * the reader's copy is zeroed by its first local writer and sent after that stage's
 * backward; the producer receives it before the producing stage's backward, adding it to
 * (or, when it is the first writer, copying it over) its own gradient. */
struct sim_xfer {
    int val;
    int src, dst;               /* IPUs within a replica */
    int sstage;                 /* the producing stage (on src) */
    int rstage;                 /* the first stage on dst that reads it */
    int first, last;            /* timeline steps the copy lives on dst (plan.c) */
    int64_t off;                /* the copy's offset in dst's arena */
    int gfirst, glast;          /* training: its gradient's copy on dst (autodiff.c) */
    int64_t goff;               /* dst arena offset of that gradient, -1 when no reader on
                                 * dst writes one (then nothing goes back) */
    bool gassign;               /* the received gradient is the producer's first writer */
    unsigned depth;             /* exchange buffers of each direction: micro-batch m uses
                                 * buffer m % depth (rstage - sstage + 1 in flight) */
    size_t xoff, gxoff;         /* its exchange buffers in one replica's block of e->xbuf */
};

/* A gradient zeroed before a backward step: its IPU and its arena offset (a value's or an
 * exchange copy's, known once plan.c has run). */
struct sim_gzero {
    int ipu;
    const int64_t *off;
    size_t bytes;
};

/* A training executable's backward step: the gradient rule of one forward node. */
struct sim_bstep {
    int node;                   /* schedule index of the forward node */
    bool recompute;             /* runs the node's forward again (recompute.c), not its
                                 * gradient rule; zeroes nothing */
    int zero_start, zero_end;   /* e->tr->zero[start..end): gradients first written here,
                                 * zeroed before the rule runs */
};

/* One backward kernel of one replica: the forward kernel (backward scratch) and the
 * gradient views of its outputs and inputs. */
struct sim_bkern {
    struct sim_kern k;
    struct sim_tensor *dout;    /* k.n_out views */
    struct sim_tensor *din;     /* k.n_in views */
};

/* Training state (NULL for inference executables). */
struct sim_train {
    unsigned A;                 /* gradient accumulation */
    int reduction;              /* enum sim_reduction */
    int loss;                   /* value index of the loss */
    struct sim_optimizer opt;
    uint64_t steps;             /* optimizer steps taken */
    float ls_factor;            /* automatic loss scaling's update factor (1 without) */
    float final_ls;             /* the loss scale of the last step (loss_scaling x factor) */
    uint64_t als_steps;         /* steps since automatic loss scaling was enabled */
    int n_bsteps;
    struct sim_bstep *bsteps;
    struct sim_gzero *zero;     /* grouped by backward step */
    int *stage_b;               /* n_stages + 1: stage k's backward steps are
                                 * [stage_b[k + 1], stage_b[k]) (reverse order) */
    struct sim_bkern *bkern;    /* per lane, n_bsteps each */
    struct sim_tensor *gviews;  /* backing store of every backward kernel's dout/din */
    float *grads;               /* R * n_train floats: per-replica accumulators; replica
                                 * 0's holds the reduced gradient after each step */
    float *mom1, *mom2, *mom3;  /* optimizer state (n_train floats each), NULL when unused;
                                 * which holds what: optim_state.c */
    unsigned char *wgroup;      /* per weight of e->w: its parameter group (0: the first) */
    bool *mstarted;             /* per weight: SGD's momentum buffer holds a value */
    struct sim_opt_state *state;    /* the state tensors by name (optim_state.c) */
    long n_state;
    float **loss_grad;          /* per lane: the loss's gradient, seeded with 1 */
    struct sim_xreduce xr;      /* the cross-executable all-reduce (fn NULL: none) */
    atomic_int xfailed;         /* it failed in this run: written by the reducing thread
                                 * between the step's barriers only */
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
    unsigned A;                 /* gradient accumulation, 1 for inference */
    uint64_t seed;              /* of the per-replica random generators */
    bool stochastic;            /* float16 results round stochastically (the model's
                                 * ipuof.stochastic_rounding; half_exec.c) */
    bool computes_half;         /* a node runs in float16 or a weight is float16: loss
                                 * scaling applies (half_train.c) */
    uint64_t half_rng;          /* stochastic rounding of float16 weight updates */
    bool partials_half;         /* MatMul and Gemm accumulate in float16 (the model's
                                 * ipuof.partials_type "half"; half_partials.c) */
    char **half_wide;           /* per simulated IPU (r * ipr + p): the block its float16
                                 * nodes widen into (half_exec.c, sim_half_bind) */
    bool eval;                  /* inference with module.eval() semantics (eval_mode) */
    unsigned ipr;               /* IPUs per replica */
    uint64_t capacity;          /* per IPU, for the model: IO tiles' share excluded */
    uint64_t io_bytes;          /* per IPU: the IO tiles' share (ipuof.io_tiles) */
    unsigned tiles;

    struct sim_val *vals;       /* m->n_vals */
    int n_nodes;
    struct sim_enode *nodes;    /* the schedule */
    int n_in, n_out;
    struct sim_exe_io *in, *out;

    void **owned;               /* folded / frozen constant buffers */
    int n_owned, cap_owned;
    uint64_t host_copy_bytes;       /* compile-time copies among owned (layout.c's reordered
                                     * Conv weights): sim_exe_host_copy_bytes */

    int n_w;                    /* weights the executable owns, in initializer order */
    struct sim_weight *w;
    float *params;              /* trainable weights (n_train floats, aligned slots), then
                                 * frozen ones: one copy shared by every replica */
    size_t n_train;             /* floats of the trainable part (with alignment gaps) */
    size_t params_bytes;
    char *bufs;                 /* R blocks of bufs_bytes: per-replica buffers */
    size_t bufs_bytes;
    char *shown;                /* one block of bufs_bytes: what the host sees of the
                                 * buffers marked shown; NULL until one is */
    uint64_t writes;            /* weight writes taken (sim_exe_weight_written) */
    struct sim_train *tr;

    size_t *arena_bytes;        /* per IPU within a replica */
    unsigned *slots;            /* per IPU within a replica: its stash slots, the
                                 * micro-batches it holds at once (pipelined; else 1) */
    unsigned S;                 /* the most slots of any IPU; a lane is (replica r, slot j),
                                 * numbered r * S + j */
    void **arenas;              /* per lane and IPU: arenas[lane * ipr + p]; NULL for the
                                 * slots an IPU does not use (j >= slots[p]) */
    struct sim_release {
        int64_t off, len;
    } *rel;                     /* pipelined training: the arena ranges (whole pages) of a
                                 * lane dead after a stage's work, released to the host
                                 * (plan.c's release_plan, ipus.c); NULL: none */
    bool rel_poison;            /* IPUOF_SIM_RELEASE=poison (tests): the ranges, to 64
                                 * bytes, are filled with 0xff instead, so a read of a
                                 * released byte changes the results */
    uint64_t *rel_held;         /* per IPU (with rel): the most bytes of its arena a
                                 * lane keeps after any release (the arena less the
                                 * ranges released there); NULL: no release */
    int *rel_start;             /* 2 n_stages + 1: stage k's forward ranges are
                                 * rel[rel_start[2k] .. rel_start[2k + 1]), its backward's
                                 * rel[rel_start[2k + 1] .. rel_start[2k + 2]) */
    struct sim_mem_report *mem; /* R * ipr */

    struct sim_kern *kern;      /* per lane, n_nodes each (R * S * n_nodes) */
    struct sim_tensor *views;   /* backing store of every kernel's in/out views */
    struct sim_patch *patches;  /* grouped by lane and stage: patch_start[L * N + k] ..
                                 * patch_start[L * N + k + 1] (N = n_stages) */
    int *patch_start;
    uint64_t *rng;              /* per lane and node: the random state of each kernel,
                                 * reseeded for each micro-batch (sim_exec_seed) */
    uint64_t mb_done;           /* micro-batches per replica run before this run */
    int n_rnd;                  /* nodes that draw random numbers */
    int n_xfer;
    struct sim_xfer *xfer;      /* activations crossing IPUs (place.c) */
    char *xbuf;                 /* R blocks of xbytes: the exchange buffers */
    size_t xbytes;
    struct sim_bar *rbar;       /* per replica: the barrier of its IPU threads */
    struct sim_step_rec *log;   /* the IPU threads' step log (sim_exe_log_steps), borrowed */
    size_t log_cap;
    atomic_size_t log_n;
    atomic_uint_fast64_t wakes; /* IPU threads woken from a wait (sim_exe_thread_wakes) */
    atomic_uint_fast64_t polls; /* waits that timed out to look for a cancel instead */
    /* placement (place.c), schedule and simulated clock (schedule.c, cost.c) */
    int strategy;               /* enum sim_strategy, resolved (never DEFAULT) */
    int n_stages;               /* pipeline stages (phases when phased), >= 1 */
    int *stage_ipu;             /* n_stages: the IPU within a replica of each stage */
    int *stage_node;            /* n_stages: the first node of each stage */
    int location[SIM_LOC_KINDS];    /* enum sim_location per enum sim_tensor_kind */
    int profile;                /* record a trace of each run */
    int recompute;              /* enum sim_recompute, resolved (recompute.c) */
    int n_recomputed;           /* forward nodes the backward runs again */
    struct sim_cost_cfg cost;
    struct sim_prog *prog;      /* each IPU's program of steps (program.c), owned */
    struct sim_feed *feed;      /* the run's feed (sim_exe_run_fed), borrowed; NULL: none */
    struct sim_clock *clock;    /* the simulated clock of one run (schedule.c), owned */
    atomic_int ran;             /* a run has completed: the cost report is valid */
    struct sim_crew *crew;      /* the run's threads (crew.c): one per simulated IPU,
                                 * (replica, IPU); created at the first run; NULL before */
    struct sim_err *terr;       /* per simulated IPU (r x ipr + p): its error */
    int *trc;                   /* per simulated IPU: its status */
    atomic_int abort_run;       /* an IPU thread failed or was cancelled: stop */
    atomic_int busy;            /* a run is in progress */
    atomic_uint_fast64_t run_id;    /* id of the latest run */
    atomic_uint_fast64_t cancel_id; /* run to stop at the next node boundary */
    struct sim_node_clock *host;    /* per node, or NULL: host time of its kernels
                                     * (IPUOF_SIM_PROFILE=1 at compile; sim_exe_node_times) */
};

/* What node s's gradient rule reads of its forward values: sim_op_bwd_reads for the inputs
 * whose gradients are wanted (differentiable and carrying one). */
static inline uint32_t
sim_node_bwd_reads(const struct sim_exe *e, int s)
{
    const struct sim_enode *n = &e->nodes[s];
    uint32_t wanted = 0;

    for (int j = 0; j < n->n_in && j < 32; j++)
        if (n->in[j] >= 0 && sim_op_grad_input(n->op, j) && e->vals[n->in[j]].grad)
            wanted |= 1u << j;
    return sim_op_bwd_reads(n->op, wanted);
}

/* The host time a node's kernels took (wall clock of the calling thread, the pool's helpers
 * included), summed over every run, replica and micro-batch; [0] forward, [1] backward. */
struct sim_node_clock {
    atomic_uint_fast64_t ns[2], calls[2];
};

/* Runs node s's forward kernel k, timing it when e->host is set. */
int sim_exec_node_forward(struct sim_exe *e, int s, const struct sim_kern *k,
                          struct sim_err *err);

/* Runs node s's backward kernel k (dout, din), timing it when e->host is set. */
int sim_exec_node_backward(struct sim_exe *e, int s, const struct sim_kern *k,
                           const struct sim_tensor *dout, struct sim_tensor *din,
                           struct sim_err *err);

/* half_exec.c: node n's forward / backward with its float16 views widened to float and
 * its float16 results (forward outputs, backward input gradients) rounded back as written,
 * stochastically from k->rng's state when e->stochastic. k is one of e's bound kernels
 * (the widened copies go in its thread's block). Returns the op's status. */
int sim_half_forward(const struct sim_exe *e, const struct sim_enode *n,
                     const struct sim_kern *k, struct sim_err *err);
int sim_half_backward(const struct sim_exe *e, const struct sim_enode *n,
                      const struct sim_kern *k, const struct sim_tensor *dout,
                      struct sim_tensor *din, struct sim_err *err);

/* half_exec.c: bytes of the widening block of one simulated IPU: the most any float16 node
 * on IPU ipu (within a replica; -1: any IPU) needs, its backward's included when training;
 * 0 without float16 nodes there. Valid once the schedule, values and training state are
 * built; host memory, one block per (replica, IPU) (for the memory plan). */
size_t sim_half_wide_bytes(const struct sim_exe *e, int ipu);

/* half_exec.c: allocates the widening blocks (at bind, once); IPUOF_E_NOMEM. unbind frees
 * them (NULL-safe, idempotent). */
int sim_half_bind(struct sim_exe *e, struct sim_err *err);
void sim_half_unbind(struct sim_exe *e);

/* half_partials.c: MatMul or Gemm node mn's forward on widened float views with float16
 * partials; 0 when done, 1 when the op or its shapes are not covered (the caller runs the
 * float kernel). halves: both operands were float16 (so every product is exact in float and
 * the fused multiply-add kernel gives the same bits); else the multiply-and-add kernel. */
int sim_half_partials(const struct sim_mnode *mn, const struct sim_kern *k, bool halves);
/* half_train.c (training with float16, see there): the value the loss's gradient is
 * seeded with (loss_scaling when the executable computes in float16, else 1); before the
 * optimizer's update, float16 weights' gradients rounded to float16 and every gradient
 * divided by loss_scaling; after it, float16 weights and buffers rounded back to float16;
 * weight i (written from the host) rounded to float16 values when it is float16. */
float sim_half_loss_seed(const struct sim_exe *e);
/* The state of the generator that rounds float16 weight updates, for a random seed. */
uint64_t sim_half_rng_seed(uint64_t seed);
void sim_half_before_update(struct sim_exe *e);
void sim_half_after_update(struct sim_exe *e);
void sim_half_round_weight(struct sim_exe *e, int i);

/* Keeps p (malloc'd) until the executable is freed. Returns false when out of memory
 * (p is then freed). */
bool sim_exe_own(struct sim_exe *e, void *p);

/* weights.c: before inference, turns the float initializers the executable will own into
 * SIM_V_WEIGHT values (o->loss: those reaching the loss, running statistics and frozen
 * weights; o->updatable_weights: all), and the buffers of BufferUpdate nodes (any dtype,
 * training or not) into per-replica buffers. */
int sim_weights_mark(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err);

/* weights.c: after autodiff, refuses buffer updates the executable cannot order: a model
 * in several pipeline stages, or a buffer read directly by a node whose gradient rule
 * runs after the update (it would read the new value). */
int sim_buffer_updates_check(const struct sim_exe *e, struct sim_err *err);

/* weights.c: after autodiff, lays out and fills e->params and e->bufs. */
int sim_weights_layout(struct sim_exe *e, struct sim_err *err);

/* autodiff.c: which values carry gradients, which weights train, the backward steps and
 * the gradient lifetimes; errors for ops without a gradient on the way to the loss. */
int sim_autodiff(struct sim_exe *e, struct sim_err *err);


/* recompute.c: after autodiff.c's build of the gradient steps and before their lifetimes,
 * picks the nodes the backward recomputes (e->m->recompute, the checkpoints: node attribute
 * __recompute_output_in_backward 1, PopART's RecomputeType::Checkpoint; 2 forces a node's
 * recomputation) and inserts a recompute step before the gradient steps of each segment
 * that reads them (node->rstep; the gradient steps' indices move). 0 or IPUOF_E_NOMEM. */
int sim_recompute_steps(struct sim_exe *e, struct sim_err *err);

/* recompute.c: whether node s is a user checkpoint (attribute
 * __recompute_output_in_backward 1: its outputs are kept for the backward). */
bool sim_recompute_is_checkpoint(const struct sim_exe *e, int s);

/* recompute.c: a recompute step of lane L: node s's forward kernel again, reading and
 * writing the recomputed copies, the buffers it updates in place (a training
 * BatchNormalization's running statistics) restored after it. */
int sim_recompute_run(struct sim_exe *e, int s, unsigned L, struct sim_err *err);

/* recompute.c: *dst = *src with the views (in views[], SIM_RC_MAX_VIEWS of them) of the
 * values node n's recompute writes repointed at their recomputed copies in lane L. */
#define SIM_RC_MAX_VIEWS 64
void sim_recompute_kern(const struct sim_exe *e, unsigned L, const struct sim_enode *n,
                        const struct sim_kern *src, struct sim_kern *dst,
                        struct sim_tensor *views);

/* mem_prop.c: the bytes node n's temporaries (`bytes` of scratch) take on the IPU: for a
 * convolution or matmul at most its available memory proportion of the IPU's memory, as
 * PopLibs serialises it; and the check that each such op fits its proportion at all
 * (IPUOF_E_DEVICE_OOM naming the op, the proportion and the bytes). */
size_t sim_temp_ipu_bytes(const struct sim_exe *e, const struct sim_enode *n, size_t bytes);
int sim_temp_check(const struct sim_exe *e, struct sim_err *err);

/* place.c: the stage and IPU of every node, e->ipr, the strategy, and their checks. */
int sim_place(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err);

/* schedule.c: the schedule of one run and its simulated clock (e->clock). */
int sim_sched_build(struct sim_exe *e, struct sim_err *err);
void sim_clock_free(struct sim_clock *c);

#include "crew.h"

/* place.c: the exchange copies of activations that cross IPUs (e->xfer), the index of
 * the copy of value v on IPU ipu or -1. */
int sim_xfer_find(const struct sim_exe *e, int v, int ipu);

/* exec.c: the crew of a run (created at the first run): a thread per simulated IPU, R x
 * ipr of them (one-IPU replicas beyond SIM_MAX_IPUS share SIM_MAX_IPUS threads), and the
 * per-IPU status and error (e->trc, e->terr: R x ipr). IPUOF_E_NOMEM when the threads
 * cannot be started. */
int sim_exe_crew(struct sim_exe *e, struct sim_err *err);

/* exec.c: after a crew run of n simulated IPUs, the first failure (a real error before a
 * cancellation) copied to err, or 0. */
int sim_exe_crew_status(struct sim_exe *e, unsigned n, struct sim_err *err);

/* fuse.c: in an inference executable (after placement), folds activations into the node
 * that produces their input (Conv -> Relu, ..., Conv -> Sigmoid -> Mul as SiLU) and
 * Sigmoid -> Mul(x, sigmoid(x)) into one SiLU node; in a training one (before autodiff)
 * only exact-erf GELU into a Gelu node; IPUOF_SIM_FUSE=0 turns it off. */
int sim_fuse(struct sim_exe *e, struct sim_err *err);

/* How a pass hands a malloc'd buffer to the executable (sim_exe_own), passed in so that
 * the pass does not call back into compile.c. */
typedef bool (*sim_exe_own_fn)(struct sim_exe *e, void *p);

/* layout.c: in an inference executable (after fuse.c), the activations that pass from one
 * oneDNN convolution to others only stay in oneDNN's blocked layout (no reorders between),
 * and constant Conv weights are reordered for oneDNN once (the copies given to e by own);
 * IPUOF_SIM_LAYOUT=0 turns it off. Returns 0 (a shape oneDNN refuses stays plain) or
 * IPUOF_E_NOMEM. */
int sim_layout_plan(struct sim_exe *e, sim_exe_own_fn own, struct sim_err *err);

/* plan_fit.c: IPUOF_E_DEVICE_OOM for IPU p, which does not fit (e->mem filled), with the
 * remedies and their figures; kept: the bytes p keeps from the forward for the backward. */
int sim_plan_no_fit(const struct sim_exe *e, unsigned p, uint64_t kept, struct sim_err *err);

/* plan.c: liveness, arena offsets per IPU, memory figures and the fit check. */
int sim_plan_memory(struct sim_exe *e, struct sim_err *err);

/* exec.c: allocates arenas and run buffers and binds every kernel view. */
int sim_exec_bind(struct sim_exe *e, struct sim_err *err);

/* train.c: allocates the accumulators and optimizer state, binds the backward kernels. */
int sim_train_bind(struct sim_exe *e, struct sim_err *err);


/* train.c: replica 0's accumulator becomes the reduced gradient of all replicas (and, with
 * e->tr->xr, of every executable's). 0, or the xreduce's error (e->tr->xfailed set). */
int sim_train_reduce(struct sim_exe *e, struct sim_err *err);

/* train.c: the UPDATE step (program.h) of a device iteration: one optimizer step over the
 * reduced gradient, then every replica's accumulators zeroed for the next iteration, unless
 * it is the run's last (its reduced gradient stays readable: sim_exe_read_gradient). */
void sim_train_update(struct sim_exe *e, bool last);

/* weights_io.c: the host sees every buffer's replica 0 copy again (no shown copies; a run
 * calls it, as its buffers move on). Caller holds e->busy. */
void sim_weights_unshow(struct sim_exe *e);

/* train.c: frees e->tr. */
void sim_train_free(struct sim_train *tr);

/* optim.c: one optimizer step over e->params with the reduced gradient e->tr->grads. */
void sim_optim_step(struct sim_exe *e);

/* optim_state.c: allocates the optimizer state e->tr->opt needs (called by sim_train_bind)
 * and resolves its parameter groups; frees it (sim_train_free). */
int sim_optim_bind(struct sim_exe *e, struct sim_err *err);
unsigned sim_optim_state_floats(const struct sim_optimizer *o);  /* per trainable float */
void sim_optim_free(struct sim_train *tr);

/* optim_state.c: the optimizer state seen as extra weights after e->w (weights_io.c asks):
 * the index (>= e->n_w) of state tensor `name`, or -1; its description; a read or write of
 * it (takes e->busy). */
long sim_optim_state_index(const struct sim_exe *e, const char *name);
int sim_optim_state_info(const struct sim_exe *e, long idx, struct sim_weight_info *info);
int sim_optim_state_io(struct sim_exe *e, long idx, void *buf, size_t bytes, bool write,
                       struct sim_err *err);
/* optim_state.c: e->writes at the last write of state tensor idx (0: none, or no such). */
uint64_t sim_optim_state_written(const struct sim_exe *e, long idx);
/* IPUOF_E_NOTFOUND for a name under "optimizer:" that e (training) does not keep, the
 * message listing what it keeps. */
int sim_optim_state_missing(const struct sim_exe *e, const char *name, struct sim_err *err);

/* Fills the views of kernel k for node n from value data pointers (used by folding). */
void sim_kern_init(struct sim_kern *k, const struct sim_enode *n, struct sim_tensor *views);

/* exec.c: data pointer of value v for replica r in lane L (NULL for inputs and zero-copy
 * outputs, which are patched per step). */
void *sim_val_ptr(const struct sim_exe *e, int v, unsigned r, unsigned L);

/* exec.c: points the views of stage k in lane L of replica r that read inputs or write
 * outputs at micro-batch (d, a) and reseeds its random nodes; copies or sums the outputs
 * produced by stage k (k -1: all) from lane L into their slots. */
void sim_exec_patch_stage(struct sim_exe *e, unsigned d, unsigned a, unsigned r, unsigned L,
                          int k);
void sim_exec_outputs(struct sim_exe *e, unsigned d, unsigned a, unsigned r, unsigned L,
                      int k);

/* exec.c: reseeds the random nodes in [s0, s1) of lane L (replica r) for micro-batch
 * (d, a) of this run: a generator per node, from the seed, replica, node and micro-batch. */
void sim_exec_seed(struct sim_exe *e, unsigned d, unsigned a, unsigned r, unsigned L, int s0,
                   int s1);

/* exec.c: n rounded up to SIM_ALIGN. */
static inline size_t
sim_align(size_t n)
{
    return (n + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
}

/* Whether the run id has been cancelled. */
bool sim_exe_cancelled(const struct sim_exe *e, uint_fast64_t id);

/* Per-replica generator state for a seed. */
uint64_t sim_rng_seed(uint64_t seed, unsigned replica);

/* The first node of stage k (k == n_stages: n_nodes); nodes are sorted by stage. */
int sim_stage_end(const struct sim_exe *e, int k);

#endif /* SIM_EXE_H */

/*
 * ops.h — the op table: how the compiler and the executor talk to ops.
 *
 * Every op is one `struct sim_op` entry in its family's table (op_elementwise.c,
 * op_unary.c, op_activation.c, op_matmul.c, op_conv.c, op_pool.c, op_reduce.c, op_norm.c,
 * op_shape.c, op_select.c, op_loss.c, op_logic.c, op_pad.c, op_gen.c, op_split.c,
 * op_convt.c, op_resize.c, op_rnn.c, op_instnorm.c, op_arith.c, op_layout.c, op_scan.c,
 * op_onehot.c):
 *   infer    — at compile time: validate attributes and inputs, set every output's dtype and
 *              shape, build the op's private parameters and ask for scratch memory;
 *   forward  — at run time: compute outputs from inputs, allocating nothing;
 *   backward — the gradient rule (NULL for ops without one): given the forward kernel
 *              (its inputs, outputs, params and saved state) and the gradients of its
 *              outputs, accumulate (+=) the gradients of its differentiable inputs.
 * In a training executable (infer's c->training) an op may ask for `saved` memory that
 * lives from its forward to its backward step (BatchNormalization's batch statistics,
 * Dropout's mask, MaxPool's argmax) and for backward scratch. autodiff.c builds the
 * backward schedule from these entries; grad_inputs says which inputs carry a gradient.
 * Ops never see protobuf or the memory plan; they get tensor views.
 */
#ifndef SIM_OPS_H
#define SIM_OPS_H

#include "act.h"
#include "model.h"

/* What the compiler knows about a tensor while inferring. */
struct sim_tinfo {
    int dtype;
    struct sim_shape shape;
    int64_t numel;
    const void *cdata;          /* the value when known at compile time, else NULL */
};

/* The context of one infer call. */
struct sim_infer {
    const struct sim_mnode *mn; /* attributes */
    const char *label;          /* "node 3 'conv1' (Conv)" */
    int version;                /* the model's ai.onnx opset */
    int n_in, n_out;
    const struct sim_tinfo *const *in;  /* n_in entries; NULL for an omitted input */
    struct sim_tinfo *out;      /* n_out entries to fill (dtype, shape) */
    void *params;               /* set by infer: malloc'd, freed by the compiler */
    size_t scratch_bytes;       /* set by infer: per-step scratch the forward needs */
    struct sim_err *err;
    const char *supported_ops;  /* the registry's list (sim_supported_ops()), for the
                                 * message of sim_infer_unsupported */
    bool eval;                  /* an inference executable with PyTorch's module.eval()
                                 * semantics (sim_compile_opts.eval_mode): BatchNormalization
                                 * uses running statistics, Dropout is the identity, whatever
                                 * the node's training flags say */
    /* training executables only */
    bool training;              /* PyTorch's module.train(): BatchNormalization uses batch
                                 * statistics, Dropout drops, forward keeps what backward
                                 * needs in `saved` */
    uint32_t weight_inputs;     /* bit i: input i is an updatable weight of the executable
                                 * (BatchNormalization updates its running statistics in
                                 * place only when they are) */
    size_t saved_bytes;         /* set by infer: kept from forward to backward */
    size_t bwd_scratch_bytes;   /* set by infer: scratch the backward needs */
};

/* The context of one forward call: bound once at compile time, per replica. */
struct sim_kern {
    const char *label;
    const void *params;
    int n_in, n_out;
    const struct sim_tensor *in;  /* n_in views; data NULL for an omitted input */
    struct sim_tensor *out;       /* n_out views; data NULL for an omitted output */
    void *scratch;                /* scratch_bytes (backward: bwd_scratch_bytes), aligned */
    void *saved;                  /* saved_bytes, from forward to backward; NULL in an
                                   * inference executable */
    uint64_t *rng;                /* per-replica random state (Dropout in training mode) */
    const struct sim_act *act;    /* an activation fused into this node (fuse.c): the
                                   * forward applies it to out[0] as it writes it; NULL:
                                   * none. Only ops that fuse.c fuses (Conv) see one. */
};

typedef int (*sim_infer_fn)(struct sim_infer *c);
typedef int (*sim_forward_fn)(const struct sim_kern *k, struct sim_err *err);
/*
 * dout has n_out gradients of the outputs (same shapes; data NULL: that output has no
 * gradient, i.e. zero); din has n_in gradient views of the inputs (data NULL: not wanted).
 * The rule adds (+=) into every wanted din; the caller zeroes them once per micro-batch.
 * k is the forward kernel except that k->scratch is the backward scratch.
 */
typedef int (*sim_backward_fn)(const struct sim_kern *k, const struct sim_tensor *dout,
                               struct sim_tensor *din, struct sim_err *err);

enum sim_op_flags {
    SIM_OPF_NOFOLD = 1u << 0,     /* never evaluate at compile time (random ops) */
    SIM_OPF_SHAPE_ONLY = 1u << 1, /* needs only the input's shape (Shape): always folds */
    SIM_OPF_VIEW = 1u << 2,       /* out[0] is a view of in[0] that Poplar aliases (reshape,
                                   * dimShuffle, slice: no copy on the IPU), so the IPU
                                   * figure of the plan counts it in in[0]'s memory (plan.c);
                                   * the host still copies */
    SIM_OPF_RANDOM = 1u << 3      /* draws from k->rng, reseeded per micro-batch */
};

struct sim_op {
    const char *name;           /* ONNX op_type */
    int since;                  /* oldest ai.onnx opset implemented */
    int min_in, max_in;         /* max_in < 0: variadic */
    int min_out, max_out;
    uint32_t const_inputs;      /* bit i: input i must be known at compile time */
    unsigned flags;             /* enum sim_op_flags */
    uint32_t code_bytes;        /* code-size estimate per node, see plan.c */
    sim_infer_fn infer;
    sim_forward_fn forward;
    sim_backward_fn backward;
    uint32_t grad_inputs;       /* bit i: input i is differentiable (bit 31 covers every
                                 * input from 31 on, for variadic ops) */
    const char *domain;         /* NULL: ai.onnx; else the custom domain ("ai.graphcore") */
    uint32_t bwd_reads;         /* what backward reads of the forward's values (enum
                                 * sim_bwd_reads) when every input's gradient is wanted:
                                 * every op with a backward declares it
                                 * (tests/unit/test_sim_train_grad.c checks the tables) */
    uint32_t (*bwd_reads_for)(uint32_t wanted);     /* NULL, or what the rule reads when
                                 * only the gradients of the inputs in `wanted` (bit i:
                                 * input i) are (a Mul's dA reads only B) */
};

/*
 * What an op's gradient rule reads of its forward's inputs and outputs (its saved state
 * is read anyway): the memory plan keeps a forward value alive until the backward step
 * of a node only when that node's rule reads it, as PopART keeps what each op's grad op
 * reads (a MatMul's inputs, a Softmax's output, nothing of an Add). A rule reads no other
 * forward value than it declares; the gradient tests run with that plan, so a missing bit
 * is a wrong gradient. SIM_BWD_DECL marks a declaration (SIM_BWD_NONE: reads nothing);
 * 0 (undeclared) is taken as SIM_BWD_ALL. Bit SIM_BWD_IN(11) covers inputs 11 on, and
 * SIM_BWD_OUT(11) outputs 11 on.
 */
enum sim_bwd_reads {
    SIM_BWD_DECL = 1u << 31,
    SIM_BWD_NONE = SIM_BWD_DECL,
    SIM_BWD_INS = SIM_BWD_DECL | 0xfffu,
    SIM_BWD_OUTS = SIM_BWD_DECL | 0xfff0000u,
    SIM_BWD_ALL = SIM_BWD_INS | SIM_BWD_OUTS
};

#define SIM_BWD_IN(i) (SIM_BWD_DECL | 1u << (i))
#define SIM_BWD_OUT(j) (SIM_BWD_DECL | 1u << (16 + (j)))

/* What op's gradient rule reads when the gradients of the inputs in `wanted` are wanted. */
static inline uint32_t
sim_op_bwd_reads(const struct sim_op *op, uint32_t wanted)
{
    if (!(op->bwd_reads & SIM_BWD_DECL))
        return SIM_BWD_ALL;
    return op->bwd_reads_for != NULL ? op->bwd_reads_for(wanted) | SIM_BWD_DECL
                                     : op->bwd_reads;
}

/* Whether a record r (sim_op_bwd_reads) reads forward input i, or output j. */
static inline bool
sim_bwd_reads_in(uint32_t r, int i)
{
    return (r >> (i < 11 ? i : 11)) & 1u;
}

static inline bool
sim_bwd_reads_out(uint32_t r, int j)
{
    return (r >> (16 + (j < 11 ? j : 11))) & 1u;
}

/* Whether input i of op carries a gradient. */
static inline bool
sim_op_grad_input(const struct sim_op *op, int i)
{
    return (op->grad_inputs >> (i < 31 ? i : 31)) & 1u;
}

/* Family tables; each ends where its _count says. */
extern const struct sim_op sim_ops_elementwise[];
extern const int sim_ops_elementwise_count;
extern const struct sim_op sim_ops_unary[];
extern const int sim_ops_unary_count;
extern const struct sim_op sim_ops_math[];
extern const int sim_ops_math_count;
extern const struct sim_op sim_ops_activation[];
extern const int sim_ops_activation_count;
extern const struct sim_op sim_ops_matmul[];
extern const int sim_ops_matmul_count;
extern const struct sim_op sim_ops_conv[];
extern const int sim_ops_conv_count;
extern const struct sim_op sim_ops_pool[];
extern const int sim_ops_pool_count;
extern const struct sim_op sim_ops_reduce[];
extern const int sim_ops_reduce_count;
extern const struct sim_op sim_ops_norm[];
extern const int sim_ops_norm_count;
extern const struct sim_op sim_ops_shape[];
extern const int sim_ops_shape_count;
extern const struct sim_op sim_ops_select[];
extern const int sim_ops_select_count;
extern const struct sim_op sim_ops_loss[];
extern const int sim_ops_loss_count;
extern const struct sim_op sim_ops_logic[];
extern const int sim_ops_logic_count;
extern const struct sim_op sim_ops_pad[];
extern const int sim_ops_pad_count;
extern const struct sim_op sim_ops_gen[];
extern const int sim_ops_gen_count;
extern const struct sim_op sim_ops_split[];
extern const int sim_ops_split_count;
/* ConvTranspose (op_convt.c), Resize (op_resize.c), LSTM and GRU (op_rnn.c) */
extern const struct sim_op sim_ops_convt[];
extern const int sim_ops_convt_count;
extern const struct sim_op sim_ops_resize[];
extern const int sim_ops_resize_count;
extern const struct sim_op sim_ops_rnn[];
extern const int sim_ops_rnn_count;
/* InstanceNormalization (op_instnorm.c); Max Min PRelu Selu Celu Sign Round IsNaN
 * (op_arith.c); Tile DepthToSpace SpaceToDepth Trilu (op_layout.c); CumSum TopK (op_scan.c) */
extern const struct sim_op sim_ops_instnorm[];
/* The mean of xr[0..len), accumulated in double, and 1 / sqrt(biased variance + eps) in
 * *inv (mean 0 and variance 0 when len is 0): the statistics of one LayerNormalization row
 * or InstanceNormalization plane (op_norm.c). */
double sim_norm_stats(const float *xr, int64_t len, float eps, double *inv);
extern const int sim_ops_instnorm_count;
extern const struct sim_op sim_ops_arith[];
extern const int sim_ops_arith_count;
extern const struct sim_op sim_ops_layout[];
extern const int sim_ops_layout_count;
extern const struct sim_op sim_ops_scan[];
extern const int sim_ops_scan_count;
/* OneHot (op_onehot.c) */
extern const struct sim_op sim_ops_random[];
extern const int sim_ops_random_count;
extern const struct sim_op sim_ops_onehot[];
extern const int sim_ops_onehot_count;

/* The op for an ONNX op_type in the default domain, or NULL. */
const struct sim_op *sim_op_find(const char *op_type);

/* The op for op_type in domain ("" or "ai.onnx" for the default one), or NULL. */
const struct sim_op *sim_op_find_in(const char *domain, const char *op_type);

/* The ops with a gradient rule, sorted, as "Abs, Add, ..." (static storage). */
const char *sim_gradient_ops(void);

/* Calls fn for every op of every family (for tests and listings). */
void sim_op_foreach(void (*fn)(const struct sim_op *op, void *ud), void *ud);

/* ---- helpers for infer functions (each returns 0 or an error set on c->err) ---------- */

/* "<label>: <formatted text>" with code. */
int sim_infer_fail(struct sim_infer *c, int code, const char *fmt, ...) SIM_PRINTF(3, 4);

/* An unsupported variant: IPUOF_E_UNSUPPORTED naming the node and the variant. */
int sim_infer_unsupported(struct sim_infer *c, const char *fmt, ...) SIM_PRINTF(2, 3);

/* Typed attribute getters: *out = def when absent; wrong type -> IPUOF_E_INVAL. */
int sim_ia_int(struct sim_infer *c, const char *name, int64_t def, int64_t *out);
int sim_ia_float(struct sim_infer *c, const char *name, float def, float *out);
int sim_ia_str(struct sim_infer *c, const char *name, const char *def, const char **out);
/* *n = -1 when absent; otherwise the count and *v borrowed from the model. */
int sim_ia_ints(struct sim_infer *c, const char *name, const int64_t **v, int *n);

/* Input i present? */
static inline bool
sim_has_in(const struct sim_infer *c, int i)
{
    return i < c->n_in && c->in[i] != NULL;
}

/* Requires input i to have a compile-time value; reads up to max integers of it (int32 or
 * int64) into v and their count into *n. */
int sim_in_const_ints(struct sim_infer *c, int i, const char *what, int64_t *v, int max,
                      int *n);

/* Requires the dtype of input i to be one of the listed ones (terminated by 0). */
int sim_in_dtype(struct sim_infer *c, int i, const int *allowed);

/* Sets output i to dtype and shape (numel computed and checked). */
int sim_set_out(struct sim_infer *c, int i, int dtype, const struct sim_shape *s);

/* Allocates zeroed params of n bytes into c->params. */
void *sim_params(struct sim_infer *c, size_t n);

/* Sliding-window geometry shared by Conv and the pools (up to 3 spatial dims). */
struct sim_window {
    int nsp;                        /* spatial dims */
    int64_t in[3], k[3], s[3], d[3];
    int64_t pb[3], pe[3];           /* padding at the beginning / end of each dim */
    int64_t out[3];
};

/*
 * Reads auto_pad, pads, strides and dilations (dilations only when allow_dilations) for
 * input spatial dims in[] and kernel k[], and computes the output dims (rounding up when
 * ceil_mode, as PyTorch does: a last window starting in the end padding is dropped).
 */
int sim_window_infer(struct sim_infer *c, int nsp, const int64_t *in, const int64_t *k,
                     bool ceil_mode, bool allow_dilations, struct sim_window *w);

/*
 * Copies a strided view of src into dense dst (both element size es, neither overlapping):
 * dst[i0, .., ir-1] (row-major over dims[0..rank)) = src[off + sum_d i_d * str[d]], with off
 * and the strides str[0..rank) counted in elements (a stride may be negative). Slice
 * (strides step x the input's, off at the start) and Transpose (the input's strides
 * permuted) both run it. rank 0 copies one element.
 */
void sim_strided_copy(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                      const int64_t *str, int64_t off);

/* The backward of sim_strided_copy for floats: dst[off + sum_d i_d * str[d]] += src[i0, ..]
 * for every element of the dense src (dims[0..rank)), in src's order. */
void sim_strided_add_f32(float *dst, const float *src, int rank, const int64_t *dims,
                         const int64_t *str, int64_t off);

/* dtype lists for sim_in_dtype. */
extern const int sim_dt_float[];
extern const int sim_dt_numeric[];   /* float, uint8, int8, int32, int64 */
extern const int sim_dt_index[];     /* int32, int64 */
extern const int sim_dt_any[];

#endif /* SIM_OPS_H */

/*
 * sim.h — the simulated-IPU library: import an ONNX model, compile it for simulated IPUs,
 * run it. This is the whole interface the daemon (and the unit tests) use.
 *
 * What it does: parses ONNX ModelProto bytes into a model (sim_model_load), compiles a model
 * with run options into an executable (sim_compile: shape inference for one micro-batch,
 * constant folding, placement of every node on an IPU, a static memory plan with a fit
 * check), and runs an executable over one "run" of device_iterations x replicas
 * micro-batches (sim_exe_run) without allocating anything per step. With a loss named in
 * the compile options the executable trains (see "Training" below): one run is then
 * device_iterations x gradient_accumulation x replicas micro-batches, each device
 * iteration ending with one optimizer step.
 * What it does not do: no network, no files (the caller reads bytes; tensor_pb.h has the
 * TensorProto file helpers), no logging (errors come back in struct sim_err).
 * See sim/README.md for the design.
 *
 * Threading: a model is immutable after sim_model_load(); any number of threads may compile
 * from one model at once. An executable may be used by one thread at a time; different
 * executables are independent and may run concurrently. sim_exe_run() refuses (IPUOF_E_BUSY)
 * when the same executable is already running in another thread, and so do the calls that
 * read or change an executable's weights or optimizer while it runs. Matrix work uses
 * OpenBLAS, which may start its own threads.
 *
 * Errors: every function that can fail returns 0 or an IPUOF_E_* code from
 * <ipuof/status.h> and, when err is not NULL, fills err->code and a one-sentence err->msg
 * saying what was wrong (naming the node, input, shape or limit involved).
 *
 * Ownership: the library copies what it needs from arguments before returning, unless a
 * function says "borrowed". Pointers returned by accessors are borrowed from the object they
 * came from and stay valid until it is freed. Every _free() accepts NULL.
 *
 * Run layout (the "PopART layout", see DESIGN.md section 2): one run consumes, for every
 * input, device_iterations (D) x gradient_accumulation (A) x replicas (R) per-step tensors
 * laid out iteration-major (A is 1 for inference):
 *
 *     run buffer = step[d=0][a=0][r=0], step[0][0][1], ..., step[0][0][R-1], step[0][1][0], ...
 *                  ..., step[0][A-1][R-1], step[d=1][a=0][r=0], ...
 *
 * i.e. the shape [D, A, R, *step_shape] flattened, as PopART expects an input of shape
 * [batchesPerStep, accumulationFactor, replicationFactor, micro-batch, ...] and lays out
 * its anchors. For an input whose step shape is [B, ...] the run shape is [D*A*R*B, ...]:
 * samples 0..B-1 of the combined batch go to replica 0 at iteration 0 (accumulation step 0),
 * samples B..2B-1 to replica 1, and so on. A rank-0 input has run shape [D*A*R] (with
 * D = A = R = 1 a rank-0 tensor is accepted too). Outputs use the same order over the
 * micro-batches they return:
 *   SIM_OUTPUT_ALL     every micro-batch:          [D, A, R, *step] -> run shape [D*A*R*B, ...]
 *   SIM_OUTPUT_FINAL   the last one:               [R, *step]       -> run shape [R*B, ...]
 *   SIM_OUTPUT_SUM     summed over iterations and accumulation steps: [R, *step]
 *                      (not summed over the batch)
 *   SIM_OUTPUT_EVERYN  iterations n-1, 2n-1, ..:  [D/n, A, R, *step] (n must divide D)
 * A rank-0 output (a scalar loss) comes back as one value per replica and returned
 * micro-batch. The default mode (SIM_OUTPUT_DEFAULT) is All for inference and Final for
 * training, as PopTorch's OutputMode.Default.
 *
 * Training (PopTorch's trainingModel on an ONNX graph that computes its own loss):
 *   - The loss is a graph output holding one float per replica and micro-batch (rank 0 or
 *     one element). Its gradient is seeded with 1 for every micro-batch.
 *   - Trainable weights are the float initializers from which the loss can be reached
 *     through differentiable operands (not through labels, indices, shapes, Clip bounds,
 *     running statistics), minus those named in sim_compile_opts.frozen_weights (PyTorch's
 *     requires_grad=False). PopTorch trains every parameter of the module; an ONNX export
 *     keeps exactly those as initializers. Other float initializers stay constant.
 *   - BatchNormalization and Dropout run in training mode (PyTorch's module.train()),
 *     whatever their attributes say. BatchNormalization normalises with the statistics of
 *     each replica's micro-batch only and updates its running mean and variance (when they
 *     are initializers) once per micro-batch: running = momentum * running +
 *     (1 - momentum) * batch, with ONNX's momentum (= 1 - PyTorch's) and, as PyTorch does,
 *     the unbiased batch variance. Each replica keeps its own running statistics; reading
 *     them returns replica 0's. Dropout draws its masks from a per-replica generator seeded
 *     from sim_compile_opts.seed (same seed -> same masks -> same weights).
 *   - Per device iteration: each replica computes the gradients of its A micro-batches,
 *     accumulated; the accumulated gradients of all replicas are reduced once (mean over
 *     accumulation steps and replicas by default, or sum: PopTorch's
 *     accumulationAndReplicationReductionType) and one optimizer step updates the single
 *     copy of the weights every replica reads, so replicas stay bit-identical.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include <ipuof/status.h>

/* One error: an IPUOF_E_* code and the sentence that explains it. */
struct sim_err {
    int code;
    char msg[1024];
};

/* Element types, numbered as ONNX's TensorProto.DataType. Others are unsupported. */
enum sim_dtype {
    SIM_DTYPE_FLOAT = 1,
    SIM_DTYPE_UINT8 = 2,
    SIM_DTYPE_INT8 = 3,
    SIM_DTYPE_INT32 = 6,
    SIM_DTYPE_INT64 = 7,
    SIM_DTYPE_BOOL = 9,
    SIM_DTYPE_FLOAT16 = 10      /* IEEE half, 2 bytes (half.h); ops compute in float */
};

/* Limits applied to every model (hostile input is checked against them). */
#define SIM_MAX_RANK 8                       /* dimensions per tensor */
#define SIM_MAX_NODES 100000                 /* nodes per graph */
#define SIM_MAX_VALUES 400000                /* named tensors per graph */
#define SIM_MAX_ELEMS ((int64_t)1 << 34)     /* elements per tensor */
#define SIM_MAX_MODEL_BYTES ((size_t)2 << 30)/* protobuf's own 2 GiB limit */
#define SIM_OPSET_MIN 1                      /* ai.onnx opsets accepted by sim_model_load */
#define SIM_OPSET_MAX 17                     /* (each op also has its own oldest version) */

#define SIM_DEFAULT_IPU_MEMORY ((uint64_t)900 << 20) /* 900 MiB, as an IPU Mk2 */
#define SIM_DEFAULT_TILES 1472

/* Static name of a dtype ("float", "int64", ...; "unsupported" otherwise). */
const char *sim_dtype_name(int dtype);

/* Bytes per element of a supported dtype; 0 for an unsupported one. */
size_t sim_dtype_size(int dtype);

/* Comma-separated list of the supported ONNX ops. Static. */
const char *sim_supported_ops(void);

/* ---- models ------------------------------------------------------------------------- */

struct sim_model;

/*
 * Parses ONNX ModelProto bytes (borrowed for the call; nothing keeps a pointer to them).
 * Checks every count and size against the SIM_MAX_* limits, resolves initializers
 * (raw_data or typed fields), graph inputs (initializers listed as inputs are weights, not
 * inputs) and outputs, sorts nodes topologically and reads placement attributes
 * (__ipu_number, __pipeline_stage). Op support is checked later, by sim_compile().
 * On success *out is a caller-owned model (free with sim_model_free()).
 * Errors: IPUOF_E_INVAL (not a ModelProto, broken graph), IPUOF_E_UNSUPPORTED (opset out of
 * range, external data, unsupported dtype), IPUOF_E_TOO_LARGE (a limit), IPUOF_E_NOMEM.
 */
int sim_model_load(const void *onnx, size_t len, struct sim_model **out, struct sim_err *err);

/* Frees a model (NULL is a no-op). Executables compiled from it must be freed first. */
void sim_model_free(struct sim_model *m);

/* The ai.onnx opset the model imports. */
int64_t sim_model_opset(const struct sim_model *m);

/* Nodes in the graph as loaded (before folding). */
size_t sim_model_node_count(const struct sim_model *m);

/* Graph inputs that are not initializers, in graph order. Names are borrowed. */
size_t sim_model_input_count(const struct sim_model *m);
const char *sim_model_input_name(const struct sim_model *m, size_t i);

/*
 * The declared dtype and shape of graph input i (before compiling): dims must hold
 * SIM_MAX_RANK entries; a symbolic or unknown dim is -1; *rank is -1 when the model
 * declares no shape. IPUOF_E_INVAL when i is out of range.
 */
int sim_model_input_decl(const struct sim_model *m, size_t i, int *dtype, int *rank,
                         int64_t *dims);

/*
 * 1 when graph input i decides a shape (it reaches a Reshape shape, a Slice bound, an
 * axes operand, ...). A static-shape compiler needs its value at compile time: pass it in
 * sim_compile_opts.frozen, or the compile fails naming the node that needs it.
 */
int sim_model_input_needs_constant(const struct sim_model *m, size_t i);

/* Graph outputs in graph order; names are borrowed, NULL when i is out of range. */
size_t sim_model_output_count(const struct sim_model *m);
const char *sim_model_output_name(const struct sim_model *m, size_t i);

/* ---- compiling ---------------------------------------------------------------------- */

enum sim_output_kind {
    SIM_OUTPUT_ALL = 0,     /* every micro-batch */
    SIM_OUTPUT_FINAL = 1,   /* the last micro-batch (last device iteration and accumulation
                             * step) */
    SIM_OUTPUT_SUM = 2,     /* summed over device iterations and accumulation steps, not
                             * over the batch */
    SIM_OUTPUT_EVERYN = 3,  /* every n-th device iteration (all its accumulation steps) */
    SIM_OUTPUT_DEFAULT = 4  /* All for inference, Final for training */
};

struct sim_output_mode {
    int kind;               /* enum sim_output_kind */
    unsigned n;             /* SIM_OUTPUT_EVERYN only: period, >= 1, divides D */
};

/* The mode of one output, by name (copied by sim_compile). */
struct sim_output_opt {
    const char *name;
    struct sim_output_mode mode;
};

/*
 * A graph input whose value is fixed at compile time (copied by sim_compile). It stops
 * being an input of the executable and is treated as a constant (and folded).
 * dims has rank entries; data holds numel * sim_dtype_size(dtype) bytes.
 */
struct sim_frozen_input {
    const char *name;
    int dtype;
    int rank;
    const int64_t *dims;
    const void *data;
};

/* Called during compilation with done <= total; may be NULL. Must not call into sim. */
typedef void (*sim_progress_fn)(int done, int total, void *ud);

/* ---- optimizers ---------------------------------------------------------------------- */

/* The optimizers, with torch.optim's definitions (see sim_optimizer_init). */
enum sim_optimizer_kind {
    SIM_OPT_SGD = 1,        /* torch.optim.SGD */
    SIM_OPT_ADAM = 2,       /* torch.optim.Adam (weight decay is L2 added to the gradient) */
    SIM_OPT_ADAMW = 3,      /* torch.optim.AdamW (decoupled weight decay) */
    SIM_OPT_RMSPROP = 4,    /* torch.optim.RMSprop, or TensorFlow's with tf_variant */
    SIM_OPT_LAMB = 5        /* PopTorch's LAMB (LAMBNoBias: bias_correction 0) */
};

/* Parameter groups besides the first: at most this many (PopTorch programs use a few). */
#define SIM_OPT_MAX_GROUPS 32
/* Weight names all groups of one optimizer may list together. */
#define SIM_OPT_MAX_GROUP_WEIGHTS 65536

/*
 * A parameter group's own hyper-parameters (torch.optim's param_groups[i]) and the
 * trainable weights it holds, by name (borrowed for the call that takes the optimizer;
 * the executable keeps the membership it resolved, not the names).
 */
struct sim_opt_group {
    float lr, weight_decay, momentum, dampening;
    int nesterov;
    float beta1, beta2, eps, alpha;
    const char *const *weights;
    size_t n_weights;
};

/*
 * The top-level hyper-parameters are the first parameter group's: every trainable weight
 * that no entry of groups[] lists is in it. The rest (centered, tf_variant,
 * bias_correction, max_grad_norm, max_weight_norm, the scalings) hold for every group.
 */
struct sim_optimizer {
    int kind;               /* enum sim_optimizer_kind */
    float lr;               /* >= 0 */
    float weight_decay;     /* >= 0 */
    float momentum;         /* SGD, RMSprop: >= 0 */
    float dampening;        /* SGD */
    int nesterov;           /* SGD: needs momentum > 0 and dampening 0 */
    float beta1, beta2;     /* Adam, AdamW, LAMB: each in [0, 1) */
    float eps;              /* Adam, AdamW, LAMB, RMSprop: > 0 */
    float alpha;            /* RMSprop: smoothing constant, in [0, 1] */
    int centered;           /* RMSprop: normalise by the variance estimate */
    int tf_variant;         /* RMSprop: TensorFlow's definition (PopTorch use_tf_variant) */
    int bias_correction;    /* Adam, AdamW, LAMB: 1 (default) or 0 */
    float max_grad_norm;    /* clip by the global gradient norm; 0: none */
    float max_weight_norm;  /* LAMB: clip ||w|| in the trust ratio; 0: none */
    float loss_scaling;     /* > 0; in float32 the scaling cancels (see optim.c) */
    float velocity_scaling; /* SGD, > 0; likewise */
    int plan_momentum;      /* SGD, RMSprop: plan the momentum buffer even when every
                             * momentum is 0 (PopTorch: momentum is a variable attribute),
                             * so that set_optimizer may raise it later */
    /* Accumulator dtypes (PopTorch's accum_type, first_order_momentum_accum_type /
     * velocity_accum_type, second_order_momentum_accum_type): 1 keeps that state rounded
     * to float16 after every update (stored scaled: the gradient by loss_scaling, SGD's
     * velocity by velocity_scaling), so the numbers are a float16 accumulator's. accum:
     * the reduced gradient; first: SGD's velocity, Adam's/LAMB's m, RMSprop's mean of
     * g^2; second: Adam's/LAMB's v, centered RMSprop's mean of g. 0: float32. */
    int accum_half, first_half, second_half;
    /* Automatic loss scaling (PopART's automaticLossScalingSettings, PopTorch's
     * Training.setAutomaticLossScaling): every als_period steps the loss scale
     * (loss_scaling x the update factor the executable keeps, from 1) is halved when more
     * than als_threshold of the trained gradients' elements, as float16 values scaled by it,
     * lie at or above als_bin_edge x 65504 (or overflow), and doubled otherwise; the
     * factor keeps the loss scale within float16's range [2^-24, 65504]. Every trained
     * weight's gradient is counted (the package enables it for all-float16 models). */
    int auto_loss_scaling;
    unsigned als_period;        /* >= 1 */
    float als_bin_edge;         /* (0, 1] */
    float als_threshold;        /* [0, 1] */
    int n_groups;           /* entries of groups[], 0 .. SIM_OPT_MAX_GROUPS */
    struct sim_opt_group groups[SIM_OPT_MAX_GROUPS];
};

/*
 * Fills o with PyTorch's defaults for kind: SGD lr=1e-3 (torch >= 2.0; earlier versions
 * require it), momentum=0, dampening=0, weight_decay=0, nesterov=False; Adam lr=1e-3,
 * betas=(0.9, 0.999), eps=1e-8, weight_decay=0; AdamW the same with weight_decay=1e-2;
 * RMSprop lr=1e-2, alpha=0.99, eps=1e-8; LAMB (PopTorch's) lr=1e-3, betas=(0.9, 0.999),
 * eps=1e-8, weight_decay=1e-2, max_weight_norm=65500. Every kind: bias_correction 1,
 * loss_scaling and velocity_scaling 1, no clipping, no extra groups.
 * IPUOF_E_INVAL for an unknown kind.
 */
int sim_optimizer_init(struct sim_optimizer *o, int kind);

/* Checks o's kind and ranges, and every group's; IPUOF_E_INVAL with a message naming the
 * bad parameter (and its group). */
int sim_optimizer_check(const struct sim_optimizer *o, struct sim_err *err);

/* How the gradients of the accumulation steps and replicas are combined. */
enum sim_reduction {
    SIM_REDUCE_MEAN = 0,    /* the default */
    SIM_REDUCE_SUM = 1
};

/* Execution strategies (PopTorch's setExecutionStrategy). */
enum sim_strategy {
    SIM_STRATEGY_DEFAULT = 0,     /* pipelined when the model has more than one stage */
    SIM_STRATEGY_PIPELINED = 1,   /* every IPU on a different micro-batch at once */
    SIM_STRATEGY_SHARDED = 2,     /* stages one after another, one micro-batch at a time */
    SIM_STRATEGY_PHASED = 3       /* serial phased: phases in turn, weights streamed */
};

/*
 * One block of a placement given by option: the nodes whose name starts with prefix
 * (torch 1.13 names nodes after the module path, "/layer1/conv/Conv"). stage -1: auto (one
 * stage per block in block order; consecutive stages on one IPU are allowed); ipu >= 0.
 * A prefix that matches no node is a compile error. Strings are borrowed for the compile.
 */
struct sim_block_opt {
    const char *prefix;
    int stage;
    int ipu;
};

/* What a tensor location setting applies to (PopTorch's TensorLocations). */
enum sim_tensor_kind {
    SIM_LOC_WEIGHTS = 0,
    SIM_LOC_ACTIVATIONS = 1,
    SIM_LOC_ACCUMULATORS = 2,
    SIM_LOC_OPTIMIZER = 3,
    SIM_LOC_KINDS = 4
};

enum sim_location {
    SIM_LOC_ON_CHIP = 0,
    SIM_LOC_OFF_CHIP = 1          /* remote buffers in the daemon's host memory */
};

/*
 * Rates of the simulated clock (docs/cost-model.md states each with its source);
 * sim_cost_cfg_init() sets the GC200's figures, sim_cost_cfg_type() those of a device type.
 * The daemon's configuration file can override each.
 */
enum sim_ipu_type {
    SIM_IPU_GC200 = 0,            /* Mk2 GC200 (IPU-M2000), 1.33 GHz */
    SIM_IPU_BOW = 1               /* Bow IPU (Bow-2000), 1.85 GHz */
};

struct sim_cost_cfg {
    double flops_per_s;           /* float32 (32.32) AMP peak per IPU; float16 with float
                                   * partials (16.32) is 2x, with float16 partials (16.16) 4x */
    double mem_bytes_per_s;       /* tile memory bandwidth per IPU */
    double exchange_bytes_per_s;  /* IPU-Exchange (tile to tile, on chip) */
    double link_bytes_per_s;      /* IPU-Links, per IPU */
    double host_bytes_per_s;      /* the machine's host link (RoCE), shared by host_ipus */
    double sync_s;                /* one bulk-synchronous sync between IPUs */
    double efficiency;            /* the AMP's efficiency on convolutions (calibrated) */
    /* since issue 28 */
    int ipu_type;                 /* enum sim_ipu_type */
    double clock_hz;              /* the tiles' clock */
    unsigned host_ipus;           /* IPUs sharing one host link (4 per machine) */
    double gw_link_bytes_per_s;   /* GW-Links between Pods, per machine */
    unsigned ipus_per_pod;        /* IPUs joined by IPU-Links (beyond: GW-Links) */
    double cs_cycles;             /* fixed cycles of one compute set (its sync, vertices) */
    double host_xfer_s;           /* fixed cost of one host exchange (a stream's turn-around) */
    double step_s;                /* fixed cost of one run (host to device and back) */
    unsigned io_tiles;            /* numIOTiles: 0, or tiles that overlap host I/O */
    int synthetic;                /* 1: no host I/O (synthetic data) */
    double amp;                   /* available memory proportion, (0, 1] */
    double matmul_efficiency;     /* the AMP's efficiency on matrix products (MatMul, Gemm;
                                   * calibrated apart from convolutions' `efficiency`) */
};

void sim_cost_cfg_init(struct sim_cost_cfg *c);

/* Sets the rates of device type t (enum sim_ipu_type): the clock and every rate it
 * implies; the calibrated constants stay. Returns IPUOF_E_INVAL for another t. */
int sim_cost_cfg_type(struct sim_cost_cfg *c, int t);

/* "gc200", "bow" ("?" otherwise); sim_ipu_type_parse: the type or -1. */
const char *sim_ipu_type_name(int t);
int sim_ipu_type_parse(const char *name);

struct sim_compile_opts {
    unsigned device_iterations;   /* D, >= 1 */
    unsigned replicas;            /* R, >= 1: replica r runs on IPU r */
    unsigned micro_batch;         /* B for inputs whose dim 0 is symbolic; 0: from graph */
    uint64_t ipu_memory_bytes;    /* capacity of each IPU */
    unsigned tiles;               /* tiles per IPU (reported; the plan is per IPU) */
    struct sim_output_mode default_mode;        /* outputs not named below */
    const struct sim_output_opt *output_modes;  /* n_output_modes entries, may be NULL */
    size_t n_output_modes;
    const struct sim_frozen_input *frozen;      /* n_frozen entries, may be NULL */
    size_t n_frozen;
    sim_progress_fn progress;
    void *progress_ud;

    /* Training: a training executable when loss is not NULL (see "Training" above). */
    const char *loss;                 /* name of the graph output to minimise */
    struct sim_optimizer optimizer;   /* checked by sim_optimizer_check() */
    unsigned gradient_accumulation;   /* A, >= 1; must be 1 without a loss */
    int accumulation_reduction;       /* enum sim_reduction, over accumulation and replicas */
    uint64_t seed;                    /* Dropout masks (PopTorch's randomSeed) */
    const char *const *frozen_weights;  /* float initializers not to train, may be NULL */
    size_t n_frozen_weights;
    /* Inference: keep every float initializer as a weight the executable owns, so that
     * sim_exe_write_weight() and sim_exe_copy_weights() can change it (nodes reading
     * weights are then not folded). Training executables always own their weights. */
    int updatable_weights;
    /* Inference: PyTorch's module.eval() whatever the graph's flags say (a training graph's
     * training_mode attributes and inputs, its statistics outputs): BatchNormalization
     * uses the running statistics and Dropout is the identity. sim_compile_inference_from()
     * always sets it; ignored with a loss. */
    int eval_mode;

    /* Multi-IPU placement, execution strategy, tensor locations, cost model and trace. */
    unsigned partition_ipus;      /* IPUs of the partition compiled for; 0: no check. A
                                   * placement needing more (replicas x IPUs per replica, or
                                   * an __ipu_number / block IPU at or beyond it) is a compile
                                   * error naming the node, its IPU and the partition size. */
    int strategy;                 /* enum sim_strategy */
    const struct sim_block_opt *blocks;   /* n_blocks entries, may be NULL */
    size_t n_blocks;
    int location[SIM_LOC_KINDS];  /* enum sim_location per enum sim_tensor_kind */
    int profile;                  /* 1: record an execution trace on the simulated clock */
    struct sim_cost_cfg cost;     /* simulated-clock rates (sim_cost_cfg_init) */

    /* Host memory the run buffers (inputs and outputs of a whole call: D x R micro-batches,
     * the host-side streams) may take; 0: no limit. Over it the compile fails with
     * IPUOF_E_TOO_LARGE before they are allocated; the message starts "the run buffers". */
    uint64_t host_memory_bytes;
};

/* Fills o with the defaults: D=1, R=1, B from graph, 900 MiB, 1472 tiles, mode DEFAULT,
 * no loss; for training A=1, mean reduction, seed 0 and SGD with lr=0.01 (PopTorch's
 * trainingModel default when no optimizer is given). */
void sim_compile_opts_init(struct sim_compile_opts *o);

struct sim_exe;

/*
 * Compiles m for o (borrowed for the call; m must outlive the executable, which borrows
 * its initializer data). Infers the dtype and shape of every tensor for one micro-batch,
 * folds constants, places every node on an IPU, plans memory and checks that it fits.
 * With o->loss set it also builds the backward graph (each op's gradient rule, in reverse
 * order), and plans gradients, gradient accumulators and optimizer state in the same plan.
 * On success *out is a caller-owned executable (free with sim_exe_free()).
 * Errors: IPUOF_E_UNSUPPORTED (ops the tables lack: all of them, each with its count and
 * first node; an op version or variant: the message names the node, the op and the
 * variant; both list the supported ops; an op without a gradient between a weight
 * and the loss; a CtcLoss limit), IPUOF_E_SHAPE / IPUOF_E_DTYPE (inconsistent graph),
 * IPUOF_E_INVAL (bad options: the loss is not a graph output or not one value per replica,
 * an optimizer parameter out of range, gradient_accumulation 0 or > 1 without a loss, no
 * trainable weight), IPUOF_E_NOTFOUND (a frozen weight or output mode names nothing),
 * IPUOF_E_DEVICE_OOM (does not fit: the message names the IPU, the bytes needed and
 * available and what would help), IPUOF_E_NOMEM.
 */
int sim_compile(const struct sim_model *m, const struct sim_compile_opts *o,
                struct sim_exe **out, struct sim_err *err);

/*
 * Compiles m (for instance the inference export of a trained module, or the training
 * model itself) for inference with updatable weights (o->loss must be NULL; o may be NULL
 * for the defaults) and copies src's current weights into it (sim_exe_copy_weights()),
 * without serialising anything. It runs as PyTorch's eval() does (eval_mode): the running
 * statistics of BatchNormalization, no Dropout, whatever the training graph says. src (usually a training executable) must not be running;
 * m must outlive the new executable. *out is caller-owned.
 */
int sim_compile_inference_from(const struct sim_model *m, const struct sim_compile_opts *o,
                               struct sim_exe *src, struct sim_exe **out, struct sim_err *err);

/* Frees an executable and its buffers (NULL is a no-op); it must not be running. */
void sim_exe_free(struct sim_exe *e);

/* ---- executables: inputs and outputs ------------------------------------------------ */

/* Description of one input or output of an executable. name is borrowed from the exe. */
struct sim_io_info {
    const char *name;
    int dtype;                          /* enum sim_dtype */
    int rank;                           /* one step (one micro-batch on one replica) */
    int64_t dims[SIM_MAX_RANK];
    int run_rank;                       /* the whole run buffer (see "Run layout") */
    int64_t run_dims[SIM_MAX_RANK];
    size_t step_bytes;
    size_t run_bytes;                   /* size of the buffer sim_exe_*_buffer returns */
    struct sim_output_mode mode;        /* outputs only, resolved (never DEFAULT) */
    unsigned iterations;                /* micro-batches per replica in the run buffer:
                                         * inputs D*A; outputs those returned (All: D*A,
                                         * Final and Sum: 1, EveryN(n): D/n*A) */
};

/* Inputs (graph inputs not frozen) and outputs of the executable, in graph order. */
size_t sim_exe_input_count(const struct sim_exe *e);
size_t sim_exe_output_count(const struct sim_exe *e);

/* Fill *info for input / output i. IPUOF_E_INVAL when i is out of range. */
int sim_exe_input_info(const struct sim_exe *e, size_t i, struct sim_io_info *info);
int sim_exe_output_info(const struct sim_exe *e, size_t i, struct sim_io_info *info);

/* Index of the input / output called name, or -1. */
long sim_exe_input_index(const struct sim_exe *e, const char *name);
long sim_exe_output_index(const struct sim_exe *e, const char *name);

/*
 * The run buffer of input i (run_bytes long, 64-byte aligned), owned by the executable.
 * The caller writes a whole run into it (e.g. receives socket bytes straight into it)
 * before sim_exe_run(). NULL when i is out of range.
 */
void *sim_exe_input_buffer(struct sim_exe *e, size_t i);

/* The run buffer of output i, filled by sim_exe_run(); owned by the executable. */
const void *sim_exe_output_buffer(const struct sim_exe *e, size_t i);

/*
 * Checks that a tensor the caller is about to supply for input i has the dtype and the run
 * shape (rank, dims) the executable expects. On mismatch returns IPUOF_E_DTYPE or
 * IPUOF_E_SHAPE with a message naming the input, the expected and the received shape and,
 * for a wrong dim 0, the D x R x B arithmetic.
 */
int sim_exe_check_input(const struct sim_exe *e, size_t i, int dtype, int rank,
                        const int64_t *dims, struct sim_err *err);

/*
 * The dtype and per-step shape the compiler inferred for any tensor of the graph, by name
 * (inputs, weights, intermediates, outputs). dims must hold SIM_MAX_RANK entries.
 * IPUOF_E_NOTFOUND when no tensor has that name or nothing computes it.
 */
int sim_exe_tensor_info(const struct sim_exe *e, const char *name, int *dtype, int *rank,
                        int64_t *dims);

/* Nodes left to run each step after constant folding and dead-code removal. */
size_t sim_exe_node_count(const struct sim_exe *e);

/* Whether the tensor `name` is kept in oneDNN's blocked layout between convolutions
 * (sim/compile/layout.c): 1, 0 (plain NCHW), or -1 when no tensor has that name or it is not
 * one (fused away, folded). */
int sim_exe_tensor_blocked(const struct sim_exe *e, const char *name);

/* Host bytes the executable holds beyond its weights, arenas and run buffers: copies made
 * at compile time (an inference executable's Conv weights reordered once for oneDNN,
 * sim/compile/layout.c). 0 when there are none. The daemon's cache counts them. */
uint64_t sim_exe_host_copy_bytes(const struct sim_exe *e);

/* The most host memory the executable's arenas can take while it runs, in bytes: each IPU's
 * arena per replica, and for pipelined training each further micro-batch slot either whole
 * or, where released pages go back to the host (sim/compile/plan.c release_plan), what a
 * slot keeps after its last release. Arenas are mapped untouched (no page until written),
 * so an executable that has not run holds less. The daemon counts it against
 * arena_memory. */
uint64_t sim_exe_host_arena_bytes(const struct sim_exe *e);

/* Run options as resolved by the compiler: D, R and the micro-batch (dim 0 of the first
 * input of rank >= 1, or 0 when there is none), A (1 for inference). */
unsigned sim_exe_device_iterations(const struct sim_exe *e);
unsigned sim_exe_replicas(const struct sim_exe *e);
unsigned sim_exe_micro_batch(const struct sim_exe *e);
unsigned sim_exe_gradient_accumulation(const struct sim_exe *e);

/* 1 for a training executable (compiled with a loss), else 0. */
int sim_exe_is_training(const struct sim_exe *e);

/* ---- executables: memory ------------------------------------------------------------ */

/*
 * The memory of one IPU, in bytes. weights: constants and weights the IPU holds;
 * activations: the arena of intermediate tensors (forward and, when training, backward:
 * gradients of activations, state kept for the backward, scratch; after liveness-based
 * reuse) plus one step of every input and output stream; code: the estimate of the
 * compiled program (a per-op constant from the op table, plus SIM_CODE_BASE_BYTES of
 * control code per IPU); gradients: the gradient accumulators of the trainable weights the
 * IPU holds; optimizer: their optimizer state (SGD momentum, Adam's two moments).
 * total = weights + activations + code + gradients + optimizer.
 */
struct sim_mem_report {
    unsigned ipu;                 /* IPU index within the executable's partition */
    unsigned replica;             /* the replica the IPU runs */
    unsigned tiles;
    uint64_t weights;
    uint64_t activations;
    uint64_t code;
    uint64_t total;
    uint64_t capacity;
    uint64_t gradients;
    uint64_t optimizer;
    uint64_t stash;               /* stashed for in-flight micro-batches (pipelining) */
    uint64_t offchip;             /* held in the daemon's host memory; not in total */
    uint64_t peak_not_always_live;
};

#define SIM_CODE_BASE_BYTES ((uint64_t)256 << 10)

/* IPUs the executable occupies (replicas x IPUs per replica). */
size_t sim_exe_ipu_count(const struct sim_exe *e);

/* Fills *rep for IPU ipu. IPUOF_E_INVAL when ipu is out of range. */
int sim_exe_memory(const struct sim_exe *e, size_t ipu, struct sim_mem_report *rep);

/* ---- executables: running ----------------------------------------------------------- */

/*
 * Runs D x A x R micro-batches over the input buffers and fills the output buffers (see
 * "Run layout"); a training executable takes D optimizer steps. Allocates nothing.
 * Errors: IPUOF_E_INVAL (input data out of range, e.g. a Gather index or a label: the
 * message names the node and the value), IPUOF_E_BUSY (already running in another
 * thread), IPUOF_E_CANCELLED (sim_exe_cancel). After an error the output buffers hold
 * unspecified values; the executable stays usable, but a training run stopped by an error
 * may have taken some of its optimizer steps (the error message says which iteration).
 */
int sim_exe_run(struct sim_exe *e, struct sim_err *err);

/*
 * Transfers overlapped with computing: a feed lets a run start before all of its input is
 * in the input buffers, and tells which outputs are done before the run ends. Micro-batch
 * steps are numbered k = d x A + a (device iteration d, accumulation step a; inference:
 * k = d), step k holding every replica's rows of every input and output ([steps][R][step],
 * "Run layout").
 *   - The producer writes every input's rows of steps [0, n), then calls
 *     sim_feed_inputs(f, n) (from any thread; n never decreases: a smaller n is ignored, a
 *     larger one than D x A is taken as D x A). A simulated IPU's host-input step for step k
 *     waits until k < n, so step k computes while k + 1 arrives. sim_feed_close(f) says no
 *     more will come: a host-input step still waiting, or arriving later, fails the run with
 *     IPUOF_E_CLOSED naming the step.
 *   - sim_feed_outputs(f) is the number of leading steps whose forward has run on every
 *     stage of every replica, so their rows of every output with mode All or EveryN are in
 *     the output buffers (Final and Sum outputs are complete only when the run returns);
 *     sim_feed_wait_outputs(f, n) blocks until that number is at least n or the run ended,
 *     and returns it.
 * A cancellation (sim_exe_cancel) also ends a wait for input, within about 10 ms.
 * sim_feed_new(e): a feed for one run of e, nothing present; NULL when out of memory.
 * sim_feed_free(NULL) and sim_feed_close(NULL) are no-ops; free a feed only after its run
 * returned.
 * sim_exe_run_fed(e, f, err) is sim_exe_run() reading its input as f says (f NULL: all of
 * it is there); f must be new, for this run of e.
 */
struct sim_feed;
struct sim_feed *sim_feed_new(const struct sim_exe *e);
void sim_feed_free(struct sim_feed *f);
void sim_feed_inputs(struct sim_feed *f, uint64_t n);
void sim_feed_close(struct sim_feed *f);
uint64_t sim_feed_outputs(struct sim_feed *f);
uint64_t sim_feed_wait_outputs(struct sim_feed *f, uint64_t n);
/* Has fn(arg, out) called, from the run's threads and without the feed's lock, each time
 * sim_feed_outputs(f) grows, out being its new value (e.g. to wake an event loop that
 * sends those rows); calls from two threads may arrive out of order, so the largest out
 * told is the count. Set it before the run starts; fn must be thread-safe, cheap, and must
 * not block. */
void sim_feed_notify(struct sim_feed *f, void (*fn)(void *arg, uint64_t out), void *arg);
/* Blocks until steps [0, n) of the input are present or the feed is closed; returns the
 * steps present (a run that failed early can wait here for the rest of its input before
 * the caller lets its buffers go). */
uint64_t sim_feed_wait_inputs(struct sim_feed *f, uint64_t n);
int sim_exe_run_fed(struct sim_exe *e, struct sim_feed *f, struct sim_err *err);

/*
 * Asks the run in progress on e (if any) to stop at the next node boundary; that
 * sim_exe_run() then returns IPUOF_E_CANCELLED and the outputs hold unspecified values.
 * Safe to call from any thread at any time (e.g. for `ipuctl reset`); without a run in
 * progress it does nothing. A single kernel already started is finished first.
 */
void sim_exe_cancel(struct sim_exe *e);

/* Stops the threads of the simulated IPUs of an executable that is not running, and frees
 * their per-thread state; its next run starts them again (a cached executable that nobody
 * uses holds no thread). Does nothing while a run is in progress. Thread-safe against
 * sim_exe_run on the same executable. */
void sim_exe_idle(struct sim_exe *e);

/* One step of the work of a simulated IPU thread, as the step log records it. */
struct sim_step_rec {
    unsigned replica, ipu;
    int stage;
    int backward;                 /* 1: the stage's backward, 0: its forward */
    unsigned iteration;           /* device iteration */
    unsigned micro_batch;         /* within the device iteration (training) or the run */
    long long step;               /* the schedule step within the iteration (or the run) */
    unsigned long thread;         /* the host thread that ran it (pthread_self) */
    double t0, t1;                /* host monotonic clock, seconds */
    double cpu;                   /* CPU seconds the thread spent on it (not counting
                                   * host pool workers it used) */
};

/* Records the steps the simulated IPU threads of an executable take (a stage's forward or
 * backward of one micro-batch, one record each) in its following runs into log (cap entries, owned by the caller, which keeps it until
 * it calls this again with NULL or frees the executable); call between runs. For tests and
 * tools: it costs four clock reads per step. sim_exe_logged_steps() is the count so far. */
void sim_exe_log_steps(struct sim_exe *e, struct sim_step_rec *log, size_t cap);
size_t sim_exe_logged_steps(const struct sim_exe *e);

/* The times the simulated IPU threads of an executable were woken from a wait (a barrier or
 * an exchange they waited on; not counting the start and end of each run), summed over every
 * run so far; *polls (when not NULL) the waits that timed out to look for a cancel. For tests
 * and benchmarks: a count of work, independent of timing. */
uint64_t sim_exe_thread_wakes(const struct sim_exe *e, uint64_t *polls);

/* Host time of one node of the schedule, summed over every run so far: [0] its forward,
 * [1] its backward (training); the wall clock of the thread that ran it, the host thread
 * pool's help included. op and label are borrowed from the executable. */
struct sim_node_time {
    const char *op, *label;
    uint64_t ns[2], calls[2];
};

/*
 * Where the host's time goes, node by node: fills rows[0 .. max) in schedule order and
 * returns how many it filled, or 0 when the executable does not record it. It records it
 * when IPUOF_SIM_PROFILE=1 is in the environment at sim_compile() (two clock reads per
 * kernel call). For tools and benchmarks (bench/ipuof-cpu.c prints it by op type).
 */
size_t sim_exe_node_times(const struct sim_exe *e, struct sim_node_time *rows, size_t max);

/* ---- executables: training ---------------------------------------------------------- */

/*
 * Replaces the optimizer's hyper-parameters between runs, without recompiling (PopTorch's
 * setOptimizer). The kind must be the one compiled; SGD's momentum can only become
 * non-zero if it was non-zero at compile time (the momentum buffer is planned then).
 * Optimizer state (moments, step count) is kept. Errors: IPUOF_E_INVAL (not a training
 * executable, range, kind), IPUOF_E_BUSY (running).
 */
int sim_exe_set_optimizer(struct sim_exe *e, const struct sim_optimizer *o,
                          struct sim_err *err);

/*
 * A collective across executables (the daemons of a Pod, each running some replicas of one
 * partition) at the training REDUCE step: instead of summing its own replicas' accumulated
 * gradients, the executable hands them to fn: g holds R buffers of n floats (replica r's at
 * g + r * n, the order of the trainable weights), and fn writes into g[0..n) the sum over
 * every replica of every executable of the partition (it may sum its R first, or pass them
 * all to a sum in a fixed order); the mean then divides by replicas (the partition's
 * replicas, >= the executable's) instead of the executable's own. fn runs on one thread
 * of the run, once per device iteration; a non-zero return with err filled fails the run
 * with that error (no optimizer step taken at that iteration). With bytes_per_s > 0 the
 * simulated clock charges it, on each IPU for its trainable weights, at that rate as a
 * ring over H = replicas / the executable's replicas executables (2(H-1)/H of the bytes;
 * in the "reduce" span of the trace). NULL x (or fn) removes it. IPUOF_E_INVAL when e does not train, replicas is below
 * the executable's or bytes_per_s is negative or not finite, IPUOF_E_BUSY while it runs.
 */
struct sim_xreduce {
    int (*fn)(void *ctx, float *g, unsigned R, size_t n, struct sim_err *err);
    void *ctx;
    unsigned replicas;
    double bytes_per_s;           /* the links between executables (GW-Links); 0: free */
};
int sim_exe_set_xreduce(struct sim_exe *e, const struct sim_xreduce *x, struct sim_err *err);

/* The current optimizer (IPUOF_E_INVAL when e does not train). */
int sim_exe_get_optimizer(const struct sim_exe *e, struct sim_optimizer *o);

/* Optimizer steps taken since compiling (Adam's bias correction uses it). */
uint64_t sim_exe_optimizer_steps(const struct sim_exe *e);

/* Restarts every replica's random generator from seed, as if compiled with it.
 * IPUOF_E_BUSY when running. */
int sim_exe_set_seed(struct sim_exe *e, uint64_t seed, struct sim_err *err);

/* The number of ai.graphcore::BufferUpdate nodes of model m: an executable of such a model
 * keeps state from run to run (the updated buffers), so it is never shared through a cache. */
int sim_buffer_update_count(const struct sim_model *m);

/* The number of random nodes of model m (RandomUniform, RandomNormal and their Like forms):
 * an executable of such a model advances its generators from run to run (each model its
 * own, as PopTorch's), so it is never shared through a cache either. */
int sim_random_op_count(const struct sim_model *m);

/* ---- executables: weights ----------------------------------------------------------- */

enum sim_weight_kind {
    SIM_WEIGHT_TRAINABLE = 1,   /* updated by the optimizer */
    SIM_WEIGHT_BUFFER = 2,      /* updated by the graph (BatchNormalization running
                                 * statistics), per replica */
    SIM_WEIGHT_FROZEN = 3,      /* only changed by sim_exe_write_weight / copy_weights */
    SIM_WEIGHT_OPTIMIZER_STATE = 4  /* an optimizer state tensor (never listed, see below) */
};

/* One weight of an executable; name is borrowed from the executable's model. */
struct sim_weight_info {
    const char *name;
    int kind;                   /* enum sim_weight_kind */
    int dtype;
    int rank;
    int64_t dims[SIM_MAX_RANK];
    size_t bytes;
};

/*
 * The weights an executable owns, in graph order of their initializers: for a training
 * executable its trainable weights, running statistics and the other weights it keeps
 * writable (frozen_weights, and float initializers that do not reach the loss); for an
 * inference executable compiled with updatable_weights, every float initializer; else none.
 */
size_t sim_exe_weight_count(const struct sim_exe *e);
int sim_exe_weight_info(const struct sim_exe *e, size_t i, struct sim_weight_info *info);
long sim_exe_weight_index(const struct sim_exe *e, const char *name);

/*
 * Copies the current value of weight `name` into dst (bytes must equal its size; buffers:
 * replica 0's, or the copy sim_exe_show_buffer gave) / from src into the weight (buffers: every replica's copy), like PopTorch's
 * copyWeightsToHost / copyWeightsToDevice. Errors: IPUOF_E_NOTFOUND (no such weight),
 * IPUOF_E_SHAPE (wrong size), IPUOF_E_BUSY (running).
 */
int sim_exe_read_weight(struct sim_exe *e, const char *name, void *dst, size_t bytes,
                        struct sim_err *err);
/*
 * A training executable's optimizer state is read and written by the same calls, under
 * names sim_exe_weight_count() does not count: "optimizer:step" (one int64, the steps
 * taken) and "optimizer:<slot>:<weight>" (float32, the weight's shape), slot as torch.optim's
 * state_dict names it: momentum_buffer (SGD with momentum, RMSprop with momentum),
 * exp_avg and exp_avg_sq (Adam, AdamW, LAMB), square_avg and grad_avg (RMSprop, centered).
 * sim_exe_weight_index() finds them (an index >= the count) and sim_exe_weight_info()
 * describes them (kind SIM_WEIGHT_OPTIMIZER_STATE). Writing a momentum_buffer makes SGD use
 * it from the next step, as torch's load_state_dict does.
 */
int sim_exe_write_weight(struct sim_exe *e, const char *name, const void *src, size_t bytes,
                         struct sim_err *err);

/*
 * The gradient of trainable weight `name` that the last optimizer step applied (after the
 * reduction over accumulation steps and replicas); zeros before the first run. For tests
 * and debugging (PopART's gradient anchors). Errors as sim_exe_read_weight.
 */
int sim_exe_read_gradient(struct sim_exe *e, const char *name, void *dst, size_t bytes,
                          struct sim_err *err);

/*
 * When weight i (any index sim_exe_weight_info describes, optimizer state included) was
 * last written by sim_exe_write_weight or a copy into e: a count of e's weight writes,
 * increasing with every write, so a caller that kept the largest value it saw tells the
 * weights written since; 0 when never written since compiling (or no such index).
 */
uint64_t sim_exe_weight_written(const struct sim_exe *e, size_t i);

/*
 * Across executables (the daemons of a Pod, each running some replicas of one partition):
 * what the host sees of buffer `name` of e (a per-replica SIM_WEIGHT_BUFFER, e.g. a
 * running mean) becomes the bytes of src, the partition's replica 0's copy held by another
 * executable, while e's replicas keep their own copies for their runs. Reads
 * (sim_exe_read_weight), copies from e (sim_exe_copy_weights) and saves
 * (sim_exe_save_onnx) take it until e runs again or the buffer is written. Errors:
 * IPUOF_E_NOTFOUND, IPUOF_E_SHAPE (wrong size), IPUOF_E_INVAL (not a buffer),
 * IPUOF_E_BUSY (running), IPUOF_E_NOMEM.
 */
int sim_exe_show_buffer(struct sim_exe *e, const char *name, const void *src, size_t bytes,
                        struct sim_err *err);

/*
 * Copies every weight of src into the weight of the same name of dst (training -> an
 * inference executable compiled with updatable_weights, or between any two executables
 * that own weights). Weights only one of them has are left alone. Errors: IPUOF_E_INVAL
 * (dst owns no weights, dst == src, no weight in common), IPUOF_E_SHAPE / IPUOF_E_DTYPE
 * (same name, different tensor), IPUOF_E_BUSY (either is running).
 */
int sim_exe_copy_weights(struct sim_exe *dst, struct sim_exe *src, struct sim_err *err);

/*
 * Serialises the executable's model as ONNX ModelProto bytes whose initializers hold the
 * executable's current weights (others as loaded), loadable by onnx.load and
 * sim_model_load. *bytes is caller-owned (free()). Attributes of types sim does not keep
 * (graphs, string lists) and doc strings are not written. IPUOF_E_BUSY while running.
 */
int sim_exe_save_onnx(struct sim_exe *e, void **bytes, size_t *len, struct sim_err *err);

/* ---- executables: simulated clock and trace ------------------------------------------ */

#define SIM_MAX_IPUS 64

/* The simulated-clock figures of the last sim_exe_run(). */
struct sim_cost_report {
    double device_seconds;        /* simulated time of the whole run */
    double samples_per_s;         /* samples of the run / device_seconds */
    unsigned n_ipus;              /* entries of busy[] in use (<= SIM_MAX_IPUS) */
    double busy[SIM_MAX_IPUS];    /* each IPU's busy fraction of device_seconds */
    int bottleneck_stage;         /* the stage with the most compute time */
};

/* Fills *rep for the last run. IPUOF_E_INVAL before the first run. */
int sim_exe_cost(const struct sim_exe *e, struct sim_cost_report *rep);

/* The parts of a step's time (docs/cost-model.md). */
enum sim_part {
    SIM_PART_COMPUTE = 0,         /* the tiles computing (AMP and vector work) */
    SIM_PART_EXCHANGE = 1,        /* on-chip exchange and sends between a replica's IPUs */
    SIM_PART_SYNC = 2,            /* compute-set and inter-IPU syncs */
    SIM_PART_HOST = 3,            /* host I/O not hidden by IO tiles, fixed host costs */
    SIM_PART_COLLECTIVE = 4,      /* the all-reduce across replicas */
    SIM_PARTS = 5
};

/* The prediction of an executable's steady-state speed, from its compile alone. */
struct sim_prediction {
    unsigned replicas;            /* the replicas it is for */
    double step_seconds;          /* one run: D device iterations */
    double samples_per_step;      /* D x A x B x replicas */
    double samples_per_s;         /* samples_per_step / step_seconds, all replicas */
    unsigned ipu;                 /* the bottleneck IPU of a replica (most busy time) */
    double part[SIM_PARTS];       /* that IPU's seconds per step by part; the rest of
                                   * step_seconds it waits for the others */
    double pct_peak;              /* FLOPs per second of a replica / (its IPUs x peak of
                                   * the data type that has most FLOPs), in percent */
    int stage;                    /* the stage with the most compute on that IPU */
    char op_class[32];            /* the op class with the most time on that IPU */
    double op_class_seconds;      /* its time per micro-batch (forward and backward) */
    char layer[160];              /* the node with the most time on that IPU */
    double layer_seconds;         /* its time per micro-batch */
};

/* Predicts e's speed as if compiled for `replicas` replicas (0: its own), the host link's
 * sharing and the collectives scaled to them. No run needed. IPUOF_E_INVAL when e has no
 * clock or replicas is over 65536. */
int sim_exe_predict(const struct sim_exe *e, unsigned replicas, struct sim_prediction *p);

/* The device type (enum sim_ipu_type) and clock the executable was compiled for. */
int sim_exe_ipu_type(const struct sim_exe *e);
double sim_exe_clock_hz(const struct sim_exe *e);

/* The prediction as text a person reads (json = 0) or as one JSON object (json = 1):
 * *out is caller-owned (free()), NUL-terminated. IPUOF_E_NOMEM. */
int sim_prediction_format(const struct sim_prediction *p, const struct sim_exe *e, int json,
                          char **out, size_t *len);

/*
 * The trace of the last run of an executable compiled with profile = 1, as Chrome
 * trace-event JSON: one tid per IPU ("IPU n"), complete events ("ph":"X", ts/dur in
 * simulated microseconds) named "F<stage>.<mb>" / "B<stage>.<mb>" for the forward /
 * backward of a micro-batch, "exchange", "host-in", "host-out", "weight-update", "reduce";
 * args {"stage","mb","kind"}. *json is caller-owned (free()). IPUOF_E_INVAL when
 * profiling was off.
 */
int sim_exe_trace_json(const struct sim_exe *e, char **json, size_t *len, struct sim_err *err);

/* ---- the instruction set of the kernels (sim/kernels/hot.h states the contract) --------------- */

/* Instruction-set levels of the simulator's kernels, lowest first. */
enum sim_isa {
    SIM_ISA_BASELINE = 1,         /* x86-64's baseline (SSE2); any other CPU */
    SIM_ISA_AVX2 = 2,
    SIM_ISA_AVX512 = 3            /* AVX-512F */
};

/* Fixes the level in use if not yet (the CPU's best, capped by IPUOF_SIM_ISA) and checks
 * the variable: 0, or IPUOF_E_INVAL with err naming the accepted values when it was set to
 * something else when the level was fixed (the level is then the CPU's best). */
int sim_isa_check(struct sim_err *err);

/* The level in use (fixed by this call if not yet). */
enum sim_isa sim_isa_current(void);

/* The CPU's best level. */
enum sim_isa sim_isa_cpu_best(void);

/* "baseline", "avx2", "avx512" ("?" for anything else). */
const char *sim_isa_name(enum sim_isa level);

/* Whether this build has a copy of each kernel per level (GCC on x86-64, no sanitizer);
 * when not, IPUOF_SIM_ISA caps only oneDNN. */
int sim_isa_dispatches(void);

/* One line for a log or a report: the level in use and where it comes from, e.g.
 * "avx2 (IPUOF_SIM_ISA=avx2; this CPU has avx512)" or "avx2 (IPUOF_SIM_ISA=avx512 is above
 * this CPU's best: using avx2)". Fixes the level if not yet. Returns buf (n > 0). */
const char *sim_isa_describe(char *buf, size_t n);

#endif /* SIM_SIM_H */

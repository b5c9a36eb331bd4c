/*
 * sim.h — the simulated-IPU library: import an ONNX model, compile it for simulated IPUs,
 * run it. This is the whole interface the daemon (and the unit tests) use.
 *
 * What it does: parses ONNX ModelProto bytes into a model (sim_model_load), compiles a model
 * with run options into an executable (sim_compile: shape inference for one micro-batch,
 * constant folding, placement of every node on an IPU, a static memory plan with a fit
 * check), and runs an executable over one "run" of device_iterations x replicas
 * micro-batches (sim_exe_run) without allocating anything per step.
 * What it does not do: no network, no files (the caller reads bytes; tensor_pb.h has the
 * TensorProto file helpers), no logging (errors come back in struct sim_err), no training
 * yet (the op table has room for backward rules). See sim/README.md for the design.
 *
 * Threading: a model is immutable after sim_model_load(); any number of threads may compile
 * from one model at once. An executable may be used by one thread at a time; different
 * executables are independent and may run concurrently. sim_exe_run() refuses (IPUOF_E_BUSY)
 * when the same executable is already running in another thread. Matrix work uses OpenBLAS,
 * which may start its own threads.
 *
 * Errors: every function that can fail returns 0 or an IPUOF_E_* code from
 * <ipuof/client.h> and, when err is not NULL, fills err->code and a one-sentence err->msg
 * saying what was wrong (naming the node, input, shape or limit involved).
 *
 * Ownership: the library copies what it needs from arguments before returning, unless a
 * function says "borrowed". Pointers returned by accessors are borrowed from the object they
 * came from and stay valid until it is freed. Every _free() accepts NULL.
 *
 * Run layout (the "PopART layout", see DESIGN.md section 2): one run consumes, for every
 * input, device_iterations (D) x replicas (R) per-step tensors laid out iteration-major:
 *
 *     run buffer = step[d=0][r=0], step[d=0][r=1], ..., step[d=0][r=R-1], step[d=1][r=0], ...
 *
 * i.e. the shape [D, R, *step_shape] flattened, as PopART expects an input of shape
 * [batchesPerStep, (accumulationFactor,) replicationFactor, micro-batch, ...] and lays out
 * its anchors. For an input whose step shape is [B, ...] the run shape is [D*R*B, ...]:
 * samples 0..B-1 of the combined batch go to replica 0 at iteration 0, samples B..2B-1 to
 * replica 1 at iteration 0, and so on. A rank-0 input has run shape [D*R] (with D = R = 1 a
 * rank-0 tensor is accepted too). Outputs use the same order over the iterations they return:
 *   SIM_OUTPUT_ALL     every iteration:          [D, R, *step]  -> run shape [D*R*B, ...]
 *   SIM_OUTPUT_FINAL   the last iteration:       [R, *step]     -> run shape [R*B, ...]
 *   SIM_OUTPUT_SUM     summed over iterations:   [R, *step]     (not summed over the batch)
 *   SIM_OUTPUT_EVERYN  iterations n-1, 2n-1, ..: [D/n, R, *step] (D must be a multiple of n)
 * A rank-0 output (a scalar loss) comes back as one value per replica and returned iteration.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include <ipuof/client.h>

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
    SIM_DTYPE_BOOL = 9
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
    SIM_OUTPUT_ALL = 0,     /* every micro-batch (the default, as for inference models) */
    SIM_OUTPUT_FINAL = 1,   /* the last device iteration */
    SIM_OUTPUT_SUM = 2,     /* summed over device iterations, not over the batch */
    SIM_OUTPUT_EVERYN = 3   /* every n-th device iteration */
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
};

/* Fills o with the defaults: D=1, R=1, B from graph, 900 MiB, 1472 tiles, mode ALL. */
void sim_compile_opts_init(struct sim_compile_opts *o);

struct sim_exe;

/*
 * Compiles m for o (borrowed for the call; m must outlive the executable, which borrows
 * its initializer data). Infers the dtype and shape of every tensor for one micro-batch,
 * folds constants, places every node on an IPU, plans memory and checks that it fits.
 * On success *out is a caller-owned executable (free with sim_exe_free()).
 * Errors: IPUOF_E_UNSUPPORTED (op, op version or variant: the message names the node, the
 * op, the variant and lists the supported ops), IPUOF_E_SHAPE / IPUOF_E_DTYPE (inconsistent
 * graph), IPUOF_E_INVAL (bad options), IPUOF_E_DEVICE_OOM (does not fit: the message names
 * the IPU, the bytes needed and available and what would help), IPUOF_E_NOMEM.
 */
int sim_compile(const struct sim_model *m, const struct sim_compile_opts *o,
                struct sim_exe **out, struct sim_err *err);

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
    struct sim_output_mode mode;        /* outputs only */
    unsigned iterations;                /* outputs: device iterations returned per replica */
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

/* Run options as resolved by the compiler: D, R and the micro-batch (dim 0 of the first
 * input of rank >= 1, or 0 when there is none). */
unsigned sim_exe_device_iterations(const struct sim_exe *e);
unsigned sim_exe_replicas(const struct sim_exe *e);
unsigned sim_exe_micro_batch(const struct sim_exe *e);

/* ---- executables: memory ------------------------------------------------------------ */

/*
 * The memory of one IPU, in bytes. weights: constants the IPU holds; activations: the
 * arena of intermediate tensors (after liveness-based reuse) plus one step of every input
 * and output stream; code: the estimate of the compiled program (a per-op constant from
 * the op table, plus SIM_CODE_BASE_BYTES of control code per IPU).
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
};

#define SIM_CODE_BASE_BYTES ((uint64_t)256 << 10)

/* IPUs the executable occupies (replicas x IPUs per replica). */
size_t sim_exe_ipu_count(const struct sim_exe *e);

/* Fills *rep for IPU ipu. IPUOF_E_INVAL when ipu is out of range. */
int sim_exe_memory(const struct sim_exe *e, size_t ipu, struct sim_mem_report *rep);

/* ---- executables: running ----------------------------------------------------------- */

/*
 * Runs D x R steps over the input buffers and fills the output buffers (see "Run layout").
 * Allocates nothing. Errors: IPUOF_E_INVAL (input data out of range, e.g. a Gather index:
 * the message names the node and the value), IPUOF_E_BUSY (already running in another
 * thread), IPUOF_E_CANCELLED (sim_exe_cancel). After an error the output buffers hold
 * unspecified values; the executable stays usable.
 */
int sim_exe_run(struct sim_exe *e, struct sim_err *err);

/*
 * Asks the run in progress on e (if any) to stop at the next node boundary; that
 * sim_exe_run() then returns IPUOF_E_CANCELLED and the outputs hold unspecified values.
 * Safe to call from any thread at any time (e.g. for `ipuctl reset`); without a run in
 * progress it does nothing. A single kernel already started is finished first.
 */
void sim_exe_cancel(struct sim_exe *e);

#endif /* SIM_SIM_H */

/*
 * model_internal.h — the layout of a compiled model handle and the helpers model.c (compile,
 * free, information), run.c (run calls, outputs) and tensor.c (dtypes, shapes, input
 * checks) share. Not installed; nothing here is exported from the shared library.
 *
 * A model is used from one thread at a time, like the client it belongs to; it borrows the
 * client, which must outlive it.
 */
#ifndef IPUOF_MODEL_INTERNAL_H
#define IPUOF_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client_internal.h"

#define IPUOF_MAX_RANK 8 /* as struct ipuof_tensor.dims */
#define IPUOF_MODEL_NAME_MAX 128 /* a model name made from a file name */

/* One input or output as the daemon described it at compile time (a TensorInfo copied). */
struct ipuof_tinfo {
    char *name;                      /* owned, never NULL */
    int dtype;                       /* enum ipuof_dtype */
    int rank;
    int64_t dims[IPUOF_MAX_RANK];    /* the run shape */
    int step_rank;
    int64_t step_dims[IPUOF_MAX_RANK]; /* one micro-batch on one replica */
    uint64_t bytes;                  /* bytes of the run tensor */
    int mode_kind;                   /* outputs: enum ipuof_output_kind */
    unsigned mode_n;
};

/* One output of the last run: its bytes live in buf, read straight from the socket. */
struct ipuof_outbuf {
    void *buf;                       /* owned; grown only when a reply announces more */
    size_t cap;
    int dtype;
    int rank;
    int64_t dims[IPUOF_MAX_RANK];
    size_t bytes;
    size_t got;                      /* of those, received in this run (outputs.c) */
};

/* One weight a model can read and write (a WeightInfo copied). */
struct ipuof_winfo {
    struct ipuof_tinfo t;            /* dims: the weight's shape; owns its name */
    int kind;                        /* enum ipuof_weight_kind, 0 when the daemon left it out */
};

/* Memory the model uses on one IPU (a MemoryReport copied). */
struct ipuof_mem {
    unsigned ipu;
    unsigned replica;
    uint64_t weights, activations, code, total, capacity;
    uint64_t gradients, optimizer, stash, offchip, peak_not_always_live;
};

#define IPUOF_MAX_BUSY 64 /* IPUs a run's busy fractions describe (the daemon's limit) */

struct ipuof_model {
    ipuof_client *c;                 /* borrowed: must outlive the model */
    uint64_t conn_gen;               /* c->conn_gen and c->attach_gen at compile time */
    uint64_t attach_gen;
    uint32_t id;                     /* the daemon's model id */
    char *name;                      /* owned */
    int cached;
    int has_prediction;              /* the compile reply carried one */
    double pred_samples_per_s, pred_step_seconds, pred_parts[5];
    char *pred_report, *pred_json;   /* owned, NULL without a prediction */
    uint64_t compile_us;
    unsigned device_iterations;
    unsigned replicas;
    unsigned micro_batch;
    size_t n_inputs;
    struct ipuof_tinfo *inputs;      /* owned, n_inputs */
    size_t n_outputs;
    struct ipuof_tinfo *outputs;     /* owned, n_outputs */
    size_t n_memory;
    struct ipuof_mem *memory;        /* owned, n_memory */
    uint64_t host_bytes;             /* run buffers in the daemon's host memory */
    int training;                    /* compiled with a loss (CompileReply.training) */
    unsigned gradient_accumulation;  /* A: 1 for inference */
    size_t n_weights;
    struct ipuof_winfo *weights;     /* owned, n_weights */

    /* Run state, allocated once at compile so a run call allocates nothing. */
    const struct ipuof_tensor **order; /* n_inputs: the caller's tensor for each input */
    Ipuof__TensorInfo *req_info;     /* n_inputs, the RunRequest's descriptions */
    Ipuof__TensorInfo **req_ptrs;    /* n_inputs, pointing into req_info */
    struct iovec *in_iov;            /* n_inputs, the caller's input bytes */
    struct ipuof_outbuf *out;        /* n_outputs */
    struct iovec *out_iov;           /* n_outputs, where a reply's payload goes */
    int have_outputs;                /* 1 after a run that completed */
    int out_streamed;                /* this run's outputs are coming in RunOutputs frames */
    int out_refused;                 /* a RunOutputs frame was refused: more may follow, so
                                      * the stream is out of step */
    uint64_t run_us;

    /* The simulated clock's figures of the last run (RunReply.cost; profile.c). */
    int cost_code;                   /* IPUOF_OK, or why there are none */
    char cost_reason[256];
    double device_seconds, samples_per_s;
    int bottleneck_stage;
    size_t n_busy;
    double busy[IPUOF_MAX_BUSY];
    char *trace_path;                /* owned: where every run's trace goes (from
                                      * POPLAR_ENGINE_OPTIONS), or NULL */
};

/* ---- tensor.c ------------------------------------------------------------------------- */

/* Bytes of a tensor of dtype and shape dims[0..rank) into *bytes. Returns 0, or -1 for an
 * unknown dtype, a negative dimension or a size past UINT64_MAX. */
int ipuof_shape_bytes(int dtype, int rank, const int64_t *dims, uint64_t *bytes);

/* Writes dims[0..rank) as "[8, 1, 28, 28]" ("[]" for a scalar) into buf[0..len). */
void ipuof_shape_format(char *buf, size_t len, int rank, const int64_t *dims);

/*
 * Copies the TensorInfo src (only read) into *dst, checking it: a known dtype, at most
 * IPUOF_MAX_RANK dims, none negative, and bytes that match dtype and shape. role and index
 * ("input", 2) name it in the sentence. Returns IPUOF_OK, IPUOF_E_PROTO or IPUOF_E_NOMEM
 * with a sentence on c; *dst owns its name either way (free with ipuof_tinfo_fini()).
 */
int ipuof_tinfo_from_wire(ipuof_client *c, struct ipuof_tinfo *dst, const Ipuof__TensorInfo *src,
                          const char *role, size_t index);

/* Frees what t owns; t may be zeroed. */
void ipuof_tinfo_fini(struct ipuof_tinfo *t);

/* Index of the entry of ti[0..n) (only read) called name, or -1 (also for a NULL ti or
 * name). */
long ipuof_tinfo_index(const struct ipuof_tinfo *ti, size_t n, const char *name);

/* Copies the training fields of the CompileReply cr (only read) into m: whether it trains,
 * its gradient accumulation and its weight list. Returns IPUOF_OK, or IPUOF_E_PROTO /
 * IPUOF_E_NOMEM with a sentence on c (what was copied stays owned by m). */
int ipuof_model_take_training(ipuof_client *c, ipuof_model *m, const Ipuof__CompileReply *cr);

/*
 * Matches the caller's tensors in[0..n) (borrowed for the run) to m's inputs, by name or,
 * when every name is NULL, in order, and writes the match to m->order. Returns IPUOF_OK or
 * IPUOF_E_INVAL (count, unknown or repeated name, some names missing) with a sentence.
 */
int ipuof_inputs_match(ipuof_model *m, const struct ipuof_tensor *in, size_t n);

/* Checks the caller's tensor t against m's input i: IPUOF_E_DTYPE, IPUOF_E_SHAPE (naming the
 * input, both shapes and the batch arithmetic) or IPUOF_E_INVAL (bytes, no data). */
int ipuof_input_check(ipuof_model *m, size_t i, const struct ipuof_tensor *t);

/* ---- compile.c ------------------------------------------------------------------------ */

/*
 * The compile exchange behind every public compile call: sends a CompileRequest built from
 * opts (an options handle's fields: checked, defaults applied) with onnx[0..len) as its model
 * bytes (borrowed; len 0 sends none), plus the fields of extra (may be NULL; only read) that a
 * plain compile leaves unset: the training fields (loss, optimizer, gradient_accumulation,
 * accumulation_reduction, seed, frozen_weights) and from_model_id. name is the model's name
 * when opts gives none. On success *out is a caller-owned model. Errors as
 * ipuof_model_compile(), with a sentence on c; the caller has cleared c's last error.
 */
int ipuof_compile_request(ipuof_client *c, const void *onnx, size_t len,
                          const struct ipuof_model_opts *opts, const char *name,
                          const Ipuof__CompileRequest *extra, ipuof_model **out);

/*
 * The argument checks that open a public compile call from model bytes, fn naming it
 * ("ipuof_model_compile") in the sentence: sets *out (when out is not NULL) to NULL and
 * clears c's last error. IPUOF_OK when the call can go on; IPUOF_E_INVAL when c is NULL, or
 * with a sentence on c when onnx is NULL, len is 0 or out is NULL.
 */
int ipuof_compile_bytes_check(ipuof_client *c, const char *fn, const void *onnx, size_t len,
                              ipuof_model **out);

/* As ipuof_compile_bytes_check() for a public compile call from a file: IPUOF_E_INVAL with a
 * sentence when path or out is NULL. */
int ipuof_compile_file_check(ipuof_client *c, const char *fn, const char *path,
                             ipuof_model **out);

/* The struct-based compile calls' common part: opts and t (either may be NULL) become an
 * options handle through its setters (a sentence on c for a refused value), then compiled
 * from onnx[0..len), or from the file at path when path is not NULL. The caller has
 * checked the arguments. */
int ipuof_compile_structs(ipuof_client *c, const void *onnx, size_t len, const char *path,
                          const struct ipuof_model_opts *opts, const struct ipuof_training_opts *t,
                          ipuof_model **out);

/* Reads the model file at path (modelfile.c) and compiles it with ipuof_compile_request()
 * (opts, extra as there), named opts->name or, without one, after the file. The caller has
 * checked the arguments with ipuof_compile_file_check(). Errors as the two calls. */
int ipuof_compile_file(ipuof_client *c, const char *path, const struct ipuof_model_opts *opts,
                       const Ipuof__CompileRequest *extra, ipuof_model **out);

/* ---- modelfile.c ---------------------------------------------------------------------- */

/* Reads the file at path into *buf (caller-owned, free()) of *len bytes, and writes the
 * model name made from its base name (without ".onnx") into name[0..name_len). Errors
 * IPUOF_E_NOTFOUND, IPUOF_E_IO, IPUOF_E_INVAL (empty, not a regular file), IPUOF_E_NOMEM,
 * with a sentence on c. */
int ipuof_model_file_read(ipuof_client *c, const char *path, void **buf, size_t *len,
                          char *name, size_t name_len);

/* ---- weights.c ----------------------------------------------------------------------- */

/* One request of m and its reply of body want, whose payload goes where sink says (sink may
 * be NULL: discarded); payload[0..n_payload) is sent after req (borrowed). Returns IPUOF_OK
 * with *reply caller-owned, or the failure with a sentence on m's client. */
int ipuof_model_call(ipuof_model *m, Ipuof__Header *req, Ipuof__Header__BodyCase want,
                     const struct ipuof_sink *sink, const struct iovec *payload, int n_payload,
                     Ipuof__Header **reply);

/* Sends req for m and receives the one payload its reply (body want: a SaveModelReply or a
 * TraceReply) announces, into a new allocation of that size plus a NUL: *bytes (caller
 * frees) and *len. noun names the bytes in errors ("model", "trace"). Returns IPUOF_OK, or
 * the failure with a sentence on m's client (a reply whose byte count is not its payload's
 * is IPUOF_E_PROTO). */
int ipuof_model_fetch_bytes(ipuof_model *m, Ipuof__Header *req, Ipuof__Header__BodyCase want,
                            const char *noun, char **bytes, size_t *len);

/* Writes buf[0..len) to the file at path: into a new file beside it, renamed over it
 * (proto/freshfile.h), so a symlink at path is replaced, never written through, and a file
 * that could not be written whole leaves the old one as it was. Errors IPUOF_E_NOTFOUND
 * (no such directory), IPUOF_E_IO, with a sentence on c. */
int ipuof_file_write(ipuof_client *c, const char *path, const void *buf, size_t len);

/* ---- engine_opts.c ------------------------------------------------------------------- */

/* Longest POPLAR_ENGINE_OPTIONS value read (bytes). */
#define IPUOF_ENGINE_OPTIONS_MAX 4096

/*
 * Reads POPLAR_ENGINE_OPTIONS's value v by the rule in engine_opts.c (shared with the
 * Python package): *profile is set when autoReport.all or autoReport.outputExecutionProfile
 * is true; dir[0..dir_len) receives autoReport.directory ("." by default). Returns 0, or -1
 * with the sentence saying what is wrong and what would be right in why[0..why_len) (700
 * bytes hold every one).
 */
int ipuof_engine_options(const char *v, int *profile, char *dir, size_t dir_len, char *why,
                         size_t why_len);

/* ---- profile.c ----------------------------------------------------------------------- */

/* Sets cr's placement fields from o (already checked); *blocks and *ptrs are caller-owned
 * (free()), the prefixes borrowed from o. Reads POPLAR_ENGINE_OPTIONS: with profiling asked
 * there, cr->profile is set and *trace_dir receives the directory (caller-owned, free()).
 * Errors IPUOF_E_NOMEM, IPUOF_E_INVAL (POPLAR_ENGINE_OPTIONS breaks ipuof_engine_options'
 * rule) with a sentence on c. */
int ipuof_placement_build(ipuof_client *c, const struct ipuof_model_opts *o,
                          Ipuof__CompileRequest *cr, Ipuof__Block **blocks, Ipuof__Block ***ptrs,
                          char **trace_dir);

/* Makes m->trace_path from the trace directory dir (borrowed) and m's name: IPUOF_OK or
 * IPUOF_E_NOMEM / IPUOF_E_IO (the directory cannot be made) with a sentence on m->c. */
int ipuof_trace_path_set(ipuof_model *m, const char *dir);

/* Copies a RunReply's cost (may be NULL: a daemon without it) into m. */
void ipuof_model_take_cost(ipuof_model *m, const Ipuof__RunCost *cost);

/* ---- outputs.c: where a run's output bytes go (no I/O) ---- */

/* A run begins: no RunOutputs frame has come. */
void ipuof_outputs_reset(ipuof_model *m);

/* place() of a run's sink (struct ipuof_sink, arg m): a RunOutputs frame or the RunReply,
 * checked against m and payload_len, its payload pointed at m's output buffers (grown to
 * the sizes the first description of the run gives). Other bodies: IPUOF_OK, nothing
 * placed. IPUOF_E_PROTO (the frame does not fit the outputs: the stream cannot be trusted)
 * or IPUOF_E_NOMEM, with a sentence on m->c. */
int ipuof_outputs_place(void *arg, ipuof_client *c, const char *what, const Ipuof__Header *h,
                        uint32_t payload_len, struct iovec **iov, int *iovcnt);

/* ---- model.c -------------------------------------------------------------------------- */

/* IPUOF_OK when m can run: its connection and partition are the ones it was compiled on.
 * Otherwise the reason (a notice that took the partition away, IPUOF_E_CLOSED,
 * IPUOF_E_NOT_ATTACHED, IPUOF_E_STATE) with a sentence on m->c. */
int ipuof_model_usable(ipuof_model *m);

/* Asks the daemon to free its model id, if the connection is up; the outcome is ignored
 * and c's last error is left as it was. */
void ipuof_model_forget(ipuof_client *c, uint32_t id);

/* Frees m and everything it owns (a partly built model included), without telling the
 * daemon. */
void ipuof_model_destroy(ipuof_model *m);

/* After a compile or run that failed with rc: when the daemon's answer repeats a notice the
 * handle holds (same code), the caller has been told, so the notice is dropped. Returns rc. */
int ipuof_model_settle(ipuof_client *c, int rc);

/* ---- compile_opts.c ------------------------------------------------------------------- */

/* The compile options behind the public opaque handle: the public structs' fields as the
 * setters left them (checked, defaults applied by ipuof_compile_opts_new()), their
 * pointers into the owned copies below. t.loss NULL: an inference compile. */
struct ipuof_compile_opts {
    struct ipuof_model_opts mo;
    struct ipuof_training_opts t;     /* t.optimizer.groups: groups below */
    char *name, *loss;                /* owned: mo.name, t.loss */
    struct ipuof_output_mode *modes;  /* owned, names too: mo.output_modes */
    struct ipuof_tensor *consts;      /* owned, names and data too: mo.constant_inputs */
    struct ipuof_block *blocks;       /* owned, prefixes too: mo.blocks */
    char **frozen;                    /* owned: t.frozen_weights */
    /* the optimizer's groups besides the first (t.optimizer.n_groups of them), each
     * group's weights' names owned in weights[g] (groups[g].weights) */
    struct ipuof_optimizer_group groups[IPUOF_OPTIMIZER_MAX_GROUPS];
    char **weights[IPUOF_OPTIMIZER_MAX_GROUPS];
    struct ipuof_optimizer_half half; /* the optimizer's float16 parameters */
    struct ipuof_err_info err;        /* the last refusal of a setter */
};

/* The helpers the setters share (compile_opts_base.c): begin clears
 * h's last refusal (IPUOF_E_INVAL for NULL h); copy_name puts a copy of s (1 to
 * IPUOF_DEFAULT_MAX_STRING bytes; `what` names it in the refusal) in *out, caller-owned;
 * grow makes room for entry n of *arr (entries of size bytes, at most max). */
int ipuof_copts_begin(ipuof_compile_opts *h);
int ipuof_copts_copy_name(ipuof_compile_opts *h, const char *s, const char *what, char **out);
int ipuof_copts_grow(ipuof_compile_opts *h, void **arr, size_t n, size_t size, size_t max,
                     const char *what);

/* Frees the optimizer's groups of h (compile_opts_optim.c) and leaves none, and resets its
 * float16 parameters (h->half). */
void ipuof_copts_optimizer_clear(ipuof_compile_opts *h);

/* A new handle in *out (caller-owned: ipuof_compile_opts_free()) holding the fields of o
 * and t (either may be NULL: defaults), each through its setter; a count of 0 in the
 * structs means 1. Errors as the setters', with the sentence on c. */
int ipuof_compile_opts_from_struct(ipuof_client *c, const struct ipuof_model_opts *o,
                                   const struct ipuof_training_opts *t, ipuof_compile_opts **out);

/* ---- optimizer.c ----------------------------------------------------------------------- */

/* An optimizer's wire form with room for its groups (the optimizer's strings borrowed). */
struct ipuof_opt_wire {
    Ipuof__Optimizer w;
    Ipuof__OptimizerGroup g[IPUOF_OPTIMIZER_MAX_GROUPS];
    Ipuof__OptimizerGroup *gp[IPUOF_OPTIMIZER_MAX_GROUPS];
};

/* The wire form of optimizer o (checked) in *ow; o's strings stay borrowed. */
void ipuof_optimizer_to_wire(const struct ipuof_optimizer *o, struct ipuof_opt_wire *ow);

/* The float16 settings a (NULL: none) into the wire optimizer w. */
void ipuof_optimizer_half_to_wire(const struct ipuof_optimizer_half *a, Ipuof__Optimizer *w);

/* The CompileRequest's training fields of t (a handle's, so checked) and the optimizer's
 * float16 settings half (NULL: none) in *extra, with its optimizer in *opt; strings stay
 * borrowed from t. */
void ipuof_training_fields(const struct ipuof_training_opts *t,
                           const struct ipuof_optimizer_half *half,
                           Ipuof__CompileRequest *extra, struct ipuof_opt_wire *opt);

/* Checks an optimizer's kind (0, PopTorch's default SGD, only when allow_default) and the
 * shape of its groups, with a sentence in *e: IPUOF_OK or IPUOF_E_INVAL. */
int ipuof_optimizer_check(struct ipuof_err_info *e, const struct ipuof_optimizer *o,
                          int allow_default);

#endif /* IPUOF_MODEL_INTERNAL_H */

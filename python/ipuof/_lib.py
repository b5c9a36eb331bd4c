"""The binding to libipuof-client: cffi in ABI mode over the declarations of
client/include/ipuof/client.h that this package uses (copied by hand, kept in the
header's order). The protocol is never spoken here: every request goes through the C
library.

The library is found, in order, at IPUOF_CLIENT_LIB (a path), in the build tree named by
IPUOF_BUILD or the one this checkout holds (build/lib/libipuof-client.so), then as the
system's: PREFIX/lib/libipuof-client.so.0 next to the installed package, then whatever the
dynamic linker finds for libipuof-client.so.0.
"""
import os

import cffi

CDEF = r"""
enum { IPUOF_OK = 0 };
const char *ipuof_strerror(int status);
const char *ipuof_status_name(int status);
const char *ipuof_recovery_name(int recovery);
const char *ipuof_version(void);

typedef struct ipuof_client ipuof_client;
ipuof_client *ipuof_client_new(void);
void ipuof_client_free(ipuof_client *c);
int ipuof_client_set_timeouts(ipuof_client *c, int connect_ms, int request_ms);
int ipuof_client_set_name(ipuof_client *c, const char *name);
int ipuof_client_connect(ipuof_client *c, const char *address);
const char *ipuof_client_errmsg(const ipuof_client *c);
int ipuof_client_last_error(const ipuof_client *c, int *error_class, int *recovery,
                            const char **component);

struct ipuof_attach_opts {
    unsigned num_ipus;
    const char *partition_name;
    unsigned process_id;
    unsigned num_processes;
    int wait;
    unsigned wait_timeout_ms;
    int auto_round;
};
int ipuof_attach(ipuof_client *c, const struct ipuof_attach_opts *opts,
                 unsigned *ipu_ids, size_t max_ids, size_t *n_ids);
const char *ipuof_partition_name(const ipuof_client *c);
int ipuof_detach(ipuof_client *c);

struct ipuof_output_mode {
    const char *name;
    int kind;
    unsigned n;
};
struct ipuof_tensor {
    const char *name;
    int dtype;
    int rank;
    int64_t dims[8];
    const void *data;
    size_t bytes;
};
typedef void (*ipuof_progress_fn)(int done, int total, void *user);
struct ipuof_model_opts {
    const char *name;
    unsigned device_iterations;
    unsigned replicas;
    unsigned micro_batch;
    int default_output_kind;
    unsigned default_output_n;
    const struct ipuof_output_mode *output_modes;
    size_t n_output_modes;
    int no_cache;
    ipuof_progress_fn progress;
    void *progress_user;
    const struct ipuof_tensor *constant_inputs;
    size_t n_constant_inputs;
    /* Newer libraries append fields here (placement, input groups); zero is the default
     * of each. This package sets them only through the library's setters, which write at
     * the library's own offsets, so the room below only has to be large enough. */
    char reserved[1024];
};
typedef struct ipuof_model ipuof_model;
int ipuof_model_compile(ipuof_client *c, const void *onnx, size_t len,
                        const struct ipuof_model_opts *opts, ipuof_model **out);
void ipuof_model_free(ipuof_model *m);
size_t ipuof_model_input_count(const ipuof_model *m);
size_t ipuof_model_output_count(const ipuof_model *m);
int ipuof_model_input_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                           int64_t *step_dims);
int ipuof_model_output_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                            int64_t *step_dims);
int ipuof_model_cached(const ipuof_model *m);
uint64_t ipuof_model_compile_us(const ipuof_model *m);
int ipuof_model_run(ipuof_model *m, const struct ipuof_tensor *inputs, size_t n);
int ipuof_model_output(const ipuof_model *m, size_t i, struct ipuof_tensor *t);
uint64_t ipuof_model_run_us(const ipuof_model *m);

struct ipuof_optimizer_group {
    float lr, weight_decay, momentum, dampening;
    int nesterov;
    float beta1, beta2, eps, alpha;
    const char *const *weights;
    size_t n_weights;
};
struct ipuof_optimizer {
    int kind;
    float lr;
    float weight_decay;
    float momentum;
    float dampening;
    int nesterov;
    float beta1, beta2;
    float eps;
    float alpha;
    int centered;
    int tf_variant;
    int no_bias_correction;
    float max_grad_norm;
    float max_weight_norm;
    float loss_scaling;
    float velocity_scaling;
    int plan_momentum;
    size_t n_groups;
    const struct ipuof_optimizer_group *groups;
};
int ipuof_optimizer_init(struct ipuof_optimizer *o, int kind);
struct ipuof_training_opts {
    const char *loss;
    struct ipuof_optimizer optimizer;
    unsigned gradient_accumulation;
    int accumulation_reduction;
    uint64_t seed;
    const char *const *frozen_weights;
    size_t n_frozen_weights;
};
int ipuof_model_compile_training(ipuof_client *c, const void *onnx, size_t len,
                                 const struct ipuof_model_opts *opts,
                                 const struct ipuof_training_opts *t, ipuof_model **out);
int ipuof_model_set_optimizer(ipuof_model *m, const struct ipuof_optimizer *o);
struct ipuof_optimizer_half {
    int accum_float16;
    int first_order_float16;
    int second_order_float16;
    int auto_loss_scaling;
    unsigned als_update_period;
    float als_bin_edge;
    float als_threshold;
};
int ipuof_model_set_optimizer_half(ipuof_model *m, const struct ipuof_optimizer *o,
                                    const struct ipuof_optimizer_half *a);
size_t ipuof_model_weight_count(const ipuof_model *m);
int ipuof_model_weight_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                            int *kind);
int ipuof_model_read_weight(ipuof_model *m, const char *name, void *dst, size_t bytes);
int ipuof_model_write_weight(ipuof_model *m, const char *name, const void *src,
                             size_t bytes);
int ipuof_model_read_state(ipuof_model *m, const char *name, void *dst, size_t bytes);
int ipuof_model_read_gradient(ipuof_model *m, const char *weight, void *dst, size_t bytes);
int ipuof_model_write_state(ipuof_model *m, const char *name, const void *src,
                            size_t bytes);
"""

# Status codes used by name in this package (client.h, enum ipuof_status).
E_INVAL = 1
E_IO = 3
E_CLOSED = 4
E_TIMEOUT = 7
E_NOTFOUND = 9
E_BUSY = 10
E_DEVICE_RESET = 13
E_NOT_ATTACHED = 14
E_UNSUPPORTED = 16
E_SHUTDOWN = 21
E_STATE = 25

# enum ipuof_error_class and enum ipuof_recovery.
ERROR_PLAIN, ERROR_RECOVERABLE, ERROR_UNRECOVERABLE = 0, 1, 2

DTYPE_FLOAT, DTYPE_UINT8, DTYPE_INT8, DTYPE_INT32, DTYPE_INT64, DTYPE_BOOL = 1, 2, 3, 6, 7, 9
DTYPE_FLOAT16 = 10
OUTPUT_DEFAULT, OUTPUT_ALL, OUTPUT_FINAL, OUTPUT_SUM, OUTPUT_EVERYN = 0, 1, 2, 3, 4
OPTIMIZER_SGD, OPTIMIZER_ADAM, OPTIMIZER_ADAMW, OPTIMIZER_RMSPROP, OPTIMIZER_LAMB = 1, 2, 3, 4, 5
REDUCTION_MEAN, REDUCTION_SUM = 0, 1
WEIGHT_TRAINABLE, WEIGHT_BUFFER, WEIGHT_FROZEN = 1, 2, 3

# The placement options (strategy, blocks, tensor locations, profiling) of newer libraries,
# set through setters (see struct ipuof_model_opts.reserved).
PLACEMENT_CDEF = r"""
struct ipuof_block {
    const char *prefix;
    int stage;
    unsigned ipu;
};
int ipuof_model_opts_set_strategy(struct ipuof_model_opts *o, int strategy);
int ipuof_model_opts_set_blocks(struct ipuof_model_opts *o, const struct ipuof_block *blocks,
                                size_t n);
int ipuof_model_opts_set_location(struct ipuof_model_opts *o, int kind, int location);
int ipuof_model_opts_set_profile(struct ipuof_model_opts *o, int on);
int ipuof_client_set_seed(ipuof_client *c, uint64_t seed);
int ipuof_model_trace(ipuof_model *m, char **json, size_t *len);
"""
# enum ipuof_tensor_kind, in the order of struct ipuof_model_opts.locations.
TENSOR_KINDS = ("weights", "activations", "accumulators", "optimizer")


def _candidates():
    """Paths to try for the library, most specific first."""
    env = os.environ.get("IPUOF_CLIENT_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    build = os.environ.get("IPUOF_BUILD")
    if build:
        out.append(os.path.join(os.path.abspath(build), "lib", "libipuof-client.so"))
    # python/ipuof/_lib.py in a checkout: the build tree is ../../build.
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", "lib",
                                             "libipuof-client.so")))
    # Installed: PREFIX/lib/python3*/dist-packages/ipuof/ next to PREFIX/lib/.
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..", "libipuof-client.so.0")))
    out.append("libipuof-client.so.0")
    return out


def _find():
    """The path of the first library that loads, whether it has the placement options and
    whether it has jobs of several processes; ImportError listing every attempt."""
    probe = cffi.FFI()
    probe.cdef("int ipuof_model_opts_set_strategy(void *o, int strategy);"
               "int ipuof_process_env(unsigned *p, unsigned *n, char *err, size_t len);")
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path}: no such file")
            continue
        try:
            handle = probe.dlopen(path)
        except OSError as exc:
            tried.append(f"{path}: {exc}")
            continue
        return path, _exports(handle, "ipuof_model_opts_set_strategy"), \
            _exports(handle, "ipuof_process_env")
    raise ImportError("cannot load libipuof-client (set IPUOF_CLIENT_LIB to its path, or "
                      "install the library): " + "; ".join(tried))


def _exports(handle, name):
    try:
        getattr(handle, name)
    except AttributeError:
        return False
    return True


path, PLACEMENT, JOBS = _find()
ffi = cffi.FFI()
ffi.cdef(CDEF)
if PLACEMENT:
    ffi.cdef(PLACEMENT_CDEF)
if JOBS:
    ffi.cdef("int ipuof_process_env(unsigned *process_id, unsigned *num_processes, "
             "char *err, size_t errlen);")
# The daemon's IPU count (ipuHardwareIsAvailable) and the simulated clock's figures of a
# run (perf counters, cycleCount); has() tells whether the loaded library exports them.
ffi.cdef("""
typedef struct ipuof_status_report ipuof_status_report;
int ipuof_status(ipuof_client *c, ipuof_status_report **out);
void ipuof_status_report_free(ipuof_status_report *r);
size_t ipuof_status_report_ipu_count(const ipuof_status_report *r);
int ipuof_model_run_cost(const ipuof_model *m, double *device_seconds,
                         double *samples_per_s, int *bottleneck_stage);
""")
# The simulated clock's prediction from a compile (issue 28; docs/cost-model.md).
ffi.cdef("""
int ipuof_client_set_clock_options(ipuof_client *c, unsigned num_io_tiles,
                                   int synthetic_data, double available_memory_proportion,
                                   unsigned predict_replicas);
int ipuof_model_prediction(const ipuof_model *m, double *samples_per_s,
                           double *step_seconds, double *parts);
const char *ipuof_model_prediction_report(const ipuof_model *m, int json);
""")
# The memory plan's figures per IPU of a compiled model (docs/memory.md).
ffi.cdef("""
size_t ipuof_model_ipu_count(const ipuof_model *m);
int ipuof_model_memory(const ipuof_model *m, size_t i, unsigned *ipu_id, uint64_t *weights,
                       uint64_t *activations, uint64_t *code, uint64_t *total,
                       uint64_t *capacity);
int ipuof_model_memory_detail(const ipuof_model *m, size_t i, uint64_t *gradients,
                              uint64_t *optimizer, uint64_t *stash, uint64_t *offchip,
                              uint64_t *peak_not_always_live);
""")
lib = ffi.dlopen(path)


def string(p):
    """A C string (borrowed) as a Python str; "" for NULL."""
    return "" if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def has(name):
    """True when the loaded library exports the declared function name (a library older
    than the declarations this package knows about lacks the newest calls)."""
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True

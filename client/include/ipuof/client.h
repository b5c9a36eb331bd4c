/*
 * ipuof/client.h — libipuof-client, the C library that talks to ipuofd.
 *
 * One header, opaque handles, every call returns an int status (IPUOF_OK == 0 or an
 * IPUOF_E_* code). The sentence that explains the last failure on a handle is returned
 * by ipuof_client_errmsg(); the daemon's own sentence is passed through verbatim.
 *
 * Thread-safety: a handle may be used by one thread at a time. Different handles are
 * independent and may be used from different threads at once. The library keeps no
 * global state, never prints, and never calls exit() or abort().
 *
 * Ownership: strings passed in are copied before the call returns. Pointers returned by
 * the library are borrowed from the handle they came from and stay valid until the next
 * call on that handle or until it is freed, unless the function says otherwise.
 * Every _free() accepts NULL.
 *
 * Linking: pkg-config --cflags --libs ipuof-client
 */
#ifndef IPUOF_CLIENT_H
#define IPUOF_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IPUOF_VERSION_MAJOR 0
#define IPUOF_VERSION_MINOR 1
#define IPUOF_VERSION_PATCH 0

/* Default TCP port of ipuofd (the port IPU-over-Fabric servers use). */
#define IPUOF_DEFAULT_PORT 50052

#if defined(__GNUC__) && defined(IPUOF_BUILDING_LIBRARY)
#define IPUOF_API __attribute__((visibility("default")))
#else
#define IPUOF_API
#endif

/*
 * Status codes, shared by the wire protocol (Error.code) and the library.
 * Numbers are stable and never reused; a retired code keeps its number.
 */
enum ipuof_status {
    IPUOF_OK = 0,
    IPUOF_E_INVAL = 1,           /* an argument or request field is invalid */
    IPUOF_E_NOMEM = 2,           /* out of host memory */
    IPUOF_E_IO = 3,              /* socket error */
    IPUOF_E_CLOSED = 4,          /* the peer closed the connection */
    IPUOF_E_PROTO = 5,           /* protocol violation: bad frame or message */
    IPUOF_E_VERSION = 6,         /* protocol versions differ */
    IPUOF_E_TIMEOUT = 7,         /* a connect, request or wait timed out */
    IPUOF_E_AUTH = 8,            /* not authorised (bad token, admin right needed) */
    IPUOF_E_NOTFOUND = 9,        /* no such IPU, partition or object */
    IPUOF_E_BUSY = 10,           /* not enough free IPUs, or the IPU is in use */
    IPUOF_E_TOO_MANY = 11,       /* too many connections or waiters */
    IPUOF_E_TOO_LARGE = 12,      /* a frame, string or list is over its limit */
    IPUOF_E_DEVICE_RESET = 13,   /* the partition was reset by an administrator */
    IPUOF_E_NOT_ATTACHED = 14,   /* the request needs an attached partition */
    IPUOF_E_ALREADY_ATTACHED = 15, /* this connection already holds a partition */
    IPUOF_E_UNSUPPORTED = 16,    /* an op, dtype, opset or option is not supported */
    IPUOF_E_SHAPE = 17,          /* a tensor shape does not match */
    IPUOF_E_DTYPE = 18,          /* a tensor dtype does not match */
    IPUOF_E_DEVICE_OOM = 19,     /* the graph does not fit the IPU's memory */
    IPUOF_E_COMPILE = 20,        /* the graph cannot be compiled */
    IPUOF_E_SHUTDOWN = 21,       /* the daemon is shutting down */
    IPUOF_E_INTERNAL = 22,       /* a bug in ipuofd; please report it */
    IPUOF_E_CONFIG = 23,         /* invalid configuration */
    IPUOF_E_CANCELLED = 24,      /* the operation was cancelled */
    IPUOF_E_STATE = 25           /* the call is not valid in the handle's current state */
    /* next: 26 */
};
#define IPUOF_STATUS_COUNT 26

/* Recovery actions (Error.recovery), as poptorch.RecoverableError.recovery_action. */
enum ipuof_recovery {
    IPUOF_RECOVERY_NONE = 0,
    IPUOF_RECOVERY_RETRY = 1,
    IPUOF_RECOVERY_REATTACH = 2,
    IPUOF_RECOVERY_IPU_RESET = 3,
    IPUOF_RECOVERY_PARTITION_RESET = 4
};

/* Error classes (Error.error_class). */
enum ipuof_error_class {
    IPUOF_ERROR_PLAIN = 0,         /* poptorch.Error */
    IPUOF_ERROR_RECOVERABLE = 1,   /* poptorch.RecoverableError */
    IPUOF_ERROR_UNRECOVERABLE = 2  /* poptorch.UnrecoverableError */
};

/* Static text for a status code ("no such IPU, partition or object"); never NULL. */
IPUOF_API const char *ipuof_strerror(int status);

/* Static name of a status code ("IPUOF_E_NOTFOUND"); never NULL. */
IPUOF_API const char *ipuof_status_name(int status);

/* Static name of a recovery action ("IPU_RESET"); never NULL. */
IPUOF_API const char *ipuof_recovery_name(int recovery);

/* The library's version as "MAJOR.MINOR.PATCH". */
IPUOF_API const char *ipuof_version(void);

/* ---- connection --------------------------------------------------------------------- */

typedef struct ipuof_client ipuof_client;

/* A new, unconnected handle, or NULL when out of memory. */
IPUOF_API ipuof_client *ipuof_client_new(void);

/* Closes the connection (the daemon frees whatever the handle held) and frees the handle. */
IPUOF_API void ipuof_client_free(ipuof_client *c);

/* Timeouts in milliseconds; 0 means wait for ever. Defaults: connect 5000, request 60000.
 * The connect timeout bounds the TCP connect and the hello exchange (name resolution is
 * not bounded by it); the request timeout bounds each later request. An attach that waits
 * for IPUs gets wait_timeout_ms plus the request timeout (no limit when either is 0).
 * A request that times out closes the connection: later calls return IPUOF_E_CLOSED.
 * Errors: IPUOF_E_INVAL (negative). */
IPUOF_API int ipuof_client_set_timeouts(ipuof_client *c, int connect_ms, int request_ms);

/* Name shown by `ipuctl status` (default: the program name). Copied. The three settings
 * below travel in the hello, so they return IPUOF_E_STATE once the handle is connected. */
IPUOF_API int ipuof_client_set_name(ipuof_client *c, const char *name);

/* Token sent in the hello when the daemon requires one. Copied. Without one, the
 * IPUOF_AUTH_TOKEN environment variable is sent, if set. */
IPUOF_API int ipuof_client_set_auth_token(ipuof_client *c, const char *token);

/* Admin token: lets a TCP connection reset devices. Copied. */
IPUOF_API int ipuof_client_set_admin_token(ipuof_client *c, const char *token);

/*
 * Connects and performs the hello. address is "HOST:PORT", "[V6]:PORT", "HOST" (default
 * port) or "unix:/path/to/socket". NULL means the IPUOF_SERVER environment variable, or
 * 127.0.0.1:50052 when it is unset.
 * Errors: IPUOF_E_IO (unreachable), IPUOF_E_TIMEOUT, IPUOF_E_VERSION (the message names
 * both versions), IPUOF_E_AUTH, IPUOF_E_TOO_MANY (connection limit), IPUOF_E_INVAL,
 * IPUOF_E_STATE (already connected). A handle whose connection was closed (by an error or
 * the daemon) may connect again.
 */
IPUOF_API int ipuof_client_connect(ipuof_client *c, const char *address);

/* The sentence explaining the last failure on c ("" after success). Borrowed. */
IPUOF_API const char *ipuof_client_errmsg(const ipuof_client *c);

/* Details of the last failure: status code, error class, recovery action, component
 * ("protocol", "device", "client", ...). Any out-pointer may be NULL. Returns the code. */
IPUOF_API int ipuof_client_last_error(const ipuof_client *c, int *error_class,
                                      int *recovery, const char **component);

/* True when the daemon granted admin rights on this connection. */
IPUOF_API int ipuof_client_is_admin(const ipuof_client *c);

/* ---- devices ------------------------------------------------------------------------ */

struct ipuof_attach_opts {
    unsigned num_ipus;          /* a power of two unless auto_round */
    const char *partition_name; /* NULL or "": the daemon names it */
    unsigned process_id;        /* distributed use: this process's index */
    unsigned num_processes;     /* 0 or 1: not distributed */
    int wait;                   /* 0: fail at once when too few are free; 1: queue */
    unsigned wait_timeout_ms;   /* with wait: give up after this long (0: for ever) */
    int auto_round;             /* round num_ipus up to a power of two */
};

/*
 * Attaches this connection to a partition of opts->num_ipus free IPUs. On success the
 * partition's IPU ids are written to ipu_ids (up to max_ids of them) and their count (all
 * of them, even past max_ids) to *n_ids; either may be NULL.
 * Errors: IPUOF_E_BUSY (too few free: the message says how many are free and who holds
 * the rest), IPUOF_E_TIMEOUT (waited wait_timeout_ms), IPUOF_E_INVAL (not a power of two,
 * more than the daemon has), IPUOF_E_ALREADY_ATTACHED.
 */
IPUOF_API int ipuof_attach(ipuof_client *c, const struct ipuof_attach_opts *opts,
                           unsigned *ipu_ids, size_t max_ids, size_t *n_ids);

/* Name of the attached partition, or NULL when not attached (also once the daemon has
 * said the partition was reset or is shutting down). Borrowed. */
IPUOF_API const char *ipuof_partition_name(const ipuof_client *c);

/* Returns the partition's IPUs to the pool. Errors: IPUOF_E_NOT_ATTACHED; the daemon's
 * IPUOF_E_DEVICE_RESET or IPUOF_E_SHUTDOWN (with its sentence) when it took the partition
 * away since the last call. */
IPUOF_API int ipuof_detach(ipuof_client *c);

/* Liveness and readiness of the daemon: IPUOF_OK when it answered, with *ready (may be
 * NULL) set to 1 when it is live and ready to accept work. */
IPUOF_API int ipuof_health(ipuof_client *c, int *ready);

/* Why the daemon said it was not ready in the last ipuof_health() on c ("" when it was
 * ready). Borrowed. */
IPUOF_API const char *ipuof_health_reason(const ipuof_client *c);

/* ---- status ------------------------------------------------------------------------- */

typedef struct ipuof_status_report ipuof_status_report;

enum ipuof_ipu_state {
    IPUOF_IPU_FREE = 0,
    IPUOF_IPU_ATTACHED = 1,
    IPUOF_IPU_BUSY = 2,
    IPUOF_IPU_ERROR = 3
};

/* One IPU as the daemon reports it. Strings are borrowed from the report; "" when empty. */
struct ipuof_ipu_info {
    unsigned id;
    int state;                   /* enum ipuof_ipu_state */
    unsigned tiles;
    uint64_t memory_capacity_bytes;
    uint64_t memory_used_bytes;
    const char *partition;
    int held;                    /* 1 when the fields below describe a holder */
    unsigned holder_client_id;
    const char *holder_name;
    unsigned holder_pid;
    const char *holder_peer;
    const char *loaded;
    uint64_t steps_run;
    const char *error;
};

/* Asks the daemon for the state of every IPU. *out is caller-owned: free it with
 * ipuof_status_report_free(). */
IPUOF_API int ipuof_status(ipuof_client *c, ipuof_status_report **out);
IPUOF_API void ipuof_status_report_free(ipuof_status_report *r);
IPUOF_API size_t ipuof_status_report_ipu_count(const ipuof_status_report *r);
/* Fills *info for IPU i (0-based index into the report); IPUOF_E_INVAL when out of range. */
IPUOF_API int ipuof_status_report_ipu(const ipuof_status_report *r, size_t i,
                                      struct ipuof_ipu_info *info);
IPUOF_API const char *ipuof_status_report_server_version(const ipuof_status_report *r);
IPUOF_API uint64_t ipuof_status_report_uptime_ms(const ipuof_status_report *r);
IPUOF_API unsigned ipuof_status_report_clients(const ipuof_status_report *r);
IPUOF_API unsigned ipuof_status_report_waiting(const ipuof_status_report *r);

/* Static name of an IPU state ("free", "attached", "busy", "error"). */
IPUOF_API const char *ipuof_ipu_state_name(int state);

/* ---- administration ----------------------------------------------------------------- */

enum ipuof_reset_scope {
    IPUOF_RESET_ALL = 0,
    IPUOF_RESET_IPU = 1,
    IPUOF_RESET_PARTITION = 2
};

/*
 * Resets IPUs to free (admin only). scope selects all IPUs, the IPU ipu_id, or the
 * partition named partition. Without force, IPUs someone holds are refused with
 * IPUOF_E_BUSY and nothing is reset; with force their holder is told its partition was
 * reset (it receives IPUOF_E_DEVICE_RESET). The number of IPUs reset goes to *n_reset
 * (may be NULL).
 * Errors: IPUOF_E_AUTH (not admin), IPUOF_E_NOTFOUND (no such IPU or partition), IPUOF_E_BUSY.
 */
IPUOF_API int ipuof_reset(ipuof_client *c, int scope, unsigned ipu_id, const char *partition,
                          int force, size_t *n_reset);

/* As ipuof_reset(), and the ids of the IPUs reset are written to ipu_ids (up to max_ids of
 * them; ipu_ids may be NULL). *n_reset counts them all, even past max_ids. */
IPUOF_API int ipuof_reset_ids(ipuof_client *c, int scope, unsigned ipu_id,
                              const char *partition, int force, unsigned *ipu_ids,
                              size_t max_ids, size_t *n_reset);

/* ---- models: compile and run ---------------------------------------------------------- */

/* Element types, numbered as ONNX's TensorProto.DataType. */
enum ipuof_dtype {
    IPUOF_DTYPE_FLOAT = 1,
    IPUOF_DTYPE_UINT8 = 2,
    IPUOF_DTYPE_INT8 = 3,
    IPUOF_DTYPE_INT32 = 6,
    IPUOF_DTYPE_INT64 = 7,
    IPUOF_DTYPE_BOOL = 9
};

/* Static name of a dtype ("float", "int64", ...). */
IPUOF_API const char *ipuof_dtype_name(int dtype);
/* Bytes per element, 0 for an unknown dtype. */
IPUOF_API size_t ipuof_dtype_size(int dtype);

/* PopTorch's OutputMode for one output. */
enum ipuof_output_kind {
    IPUOF_OUTPUT_DEFAULT = 0,   /* All for inference models, Final for training models */
    IPUOF_OUTPUT_ALL = 1,       /* every micro-batch */
    IPUOF_OUTPUT_FINAL = 2,     /* the last micro-batch of the call */
    IPUOF_OUTPUT_SUM = 3,       /* summed over device iterations, not over the batch */
    IPUOF_OUTPUT_EVERYN = 4     /* every n-th device iteration */
};

struct ipuof_output_mode {
    const char *name;           /* the output it applies to */
    int kind;                   /* enum ipuof_output_kind */
    unsigned n;                 /* IPUOF_OUTPUT_EVERYN only */
};

/* A tensor: its description and, for run inputs and outputs, its bytes (little-endian,
 * row-major). In a tensor the library returns, pointers are borrowed from the model. */
struct ipuof_tensor {
    const char *name;
    int dtype;                  /* enum ipuof_dtype */
    int rank;
    int64_t dims[8];
    const void *data;
    size_t bytes;
};

/* Called while the daemon compiles: done <= total. It runs inside ipuof_model_compile() and
 * must not call the library on the same client handle. */
typedef void (*ipuof_progress_fn)(int done, int total, void *user);

struct ipuof_model_opts {
    const char *name;                 /* shown in ipuctl status; NULL: "model" */
    unsigned device_iterations;       /* 0 means 1 */
    unsigned replicas;                /* 0 means 1; at most the partition's IPUs */
    unsigned micro_batch;             /* for a symbolic batch dimension; 0: from the graph */
    int default_output_kind;          /* enum ipuof_output_kind, for outputs not listed */
    unsigned default_output_n;
    const struct ipuof_output_mode *output_modes; /* n_output_modes entries, may be NULL */
    size_t n_output_modes;
    int no_cache;                     /* compile even when the daemon has it cached */
    ipuof_progress_fn progress;       /* may be NULL */
    void *progress_user;
    /* Values for graph inputs that decide shapes (a Reshape's shape, Slice bounds, axes):
     * the compiler plans static shapes and fixes these inputs to the values given; they
     * are then no longer inputs of the model. A tensor given here for an input that decides
     * no shape is ignored and the input stays a run input. Copied by the compile call. */
    const struct ipuof_tensor *constant_inputs;
    size_t n_constant_inputs;
};

typedef struct ipuof_model ipuof_model;

/*
 * Compiles an ONNX model (bytes borrowed for the call) on the attached partition; opts may
 * be NULL (all defaults). Uploads larger than the daemon's frame payload limit are sent in
 * chunks. The request timeout bounds the wait between two frames (progress events
 * included), not the whole compile. On success *out is caller-owned: free it with
 * ipuof_model_free() before freeing the client. The model belongs to this connection and
 * partition: after a detach, a reset or a new connection it can only be freed.
 * Errors: IPUOF_E_NOT_ATTACHED (or the reset/shutdown that took the partition away),
 * IPUOF_E_UNSUPPORTED (op, opset: the message names the node), IPUOF_E_DEVICE_OOM (the
 * message names the IPU, bytes needed and available), IPUOF_E_INVAL (bad options, malformed
 * model), IPUOF_E_SHAPE, IPUOF_E_DTYPE, IPUOF_E_TOO_LARGE (the daemon's model size limit).
 */
IPUOF_API int ipuof_model_compile(ipuof_client *c, const void *onnx, size_t len,
                                  const struct ipuof_model_opts *opts, ipuof_model **out);

/* Reads an ONNX file and compiles it as ipuof_model_compile() does. When opts or
 * opts->name is NULL the model is named after the file ("mnist" for "data/mnist.onnx").
 * Errors, besides those of ipuof_model_compile(): IPUOF_E_NOTFOUND (no such file),
 * IPUOF_E_IO (unreadable), IPUOF_E_INVAL (empty or not a regular file). */
IPUOF_API int ipuof_model_compile_file(ipuof_client *c, const char *path,
                                       const struct ipuof_model_opts *opts, ipuof_model **out);

/* Frees the model on the daemon (when its connection and partition are still there; errors
 * are ignored and the client's last error is left as it was) and the handle. NULL is a
 * no-op. */
IPUOF_API void ipuof_model_free(ipuof_model *m);


IPUOF_API size_t ipuof_model_input_count(const ipuof_model *m);
IPUOF_API size_t ipuof_model_output_count(const ipuof_model *m);

/* The run shape of input / output i (data NULL); step_dims, when not NULL, receives the
 * shape of one micro-batch on one replica (8 entries, -1 past its rank). IPUOF_E_INVAL when
 * out of range. */
IPUOF_API int ipuof_model_input_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                                     int64_t *step_dims);
IPUOF_API int ipuof_model_output_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                                      int64_t *step_dims);

/* 1 when the daemon answered the compile from its executable cache. */
IPUOF_API int ipuof_model_cached(const ipuof_model *m);
/* Microseconds the daemon spent compiling (0 when cached). */
IPUOF_API uint64_t ipuof_model_compile_us(const ipuof_model *m);
IPUOF_API unsigned ipuof_model_device_iterations(const ipuof_model *m);
IPUOF_API unsigned ipuof_model_replicas(const ipuof_model *m);
IPUOF_API unsigned ipuof_model_micro_batch(const ipuof_model *m);

/* Memory the model uses on the i-th IPU it occupies (bytes); any pointer may be NULL. */
IPUOF_API size_t ipuof_model_ipu_count(const ipuof_model *m);
IPUOF_API int ipuof_model_memory(const ipuof_model *m, size_t i, unsigned *ipu_id,
                                 uint64_t *weights, uint64_t *activations, uint64_t *code,
                                 uint64_t *total, uint64_t *capacity);

/*
 * Runs one call. inputs holds one tensor per model input, matched by name (or, when every
 * name is NULL, in order), each with the run shape: micro-batch x device iterations x
 * replicas samples along dim 0. The tensors' bytes are borrowed for the call and sent
 * without a copy. Count, dtypes, shapes and sizes are checked before anything is sent: a
 * mismatch is IPUOF_E_SHAPE / IPUOF_E_DTYPE / IPUOF_E_INVAL naming the input, the expected
 * and the received shape. IPUOF_E_TOO_LARGE when the inputs exceed the daemon's frame
 * payload limit (max_payload_bytes): run fewer device iterations per call. Outputs are then
 * available with ipuof_model_output() until the next run or free.
 */
IPUOF_API int ipuof_model_run(ipuof_model *m, const struct ipuof_tensor *inputs, size_t n);

/* Output i of the last run (data and bytes set; borrowed until the next run or free).
 * IPUOF_E_INVAL when out of range, IPUOF_E_STATE when no run has completed. */
IPUOF_API int ipuof_model_output(const ipuof_model *m, size_t i, struct ipuof_tensor *t);

/* Index of the input / output called name, or -1. */
IPUOF_API long ipuof_model_input_index(const ipuof_model *m, const char *name);
IPUOF_API long ipuof_model_output_index(const ipuof_model *m, const char *name);

/* Microseconds the daemon's simulated IPUs spent in the last run. */
IPUOF_API uint64_t ipuof_model_run_us(const ipuof_model *m);

#ifdef __cplusplus
}
#endif

#endif /* IPUOF_CLIENT_H */

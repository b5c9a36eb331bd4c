/*
 * ipuof/client.h — libipuof-client, the C library that talks to ipuofd.
 *
 * One header to include (it brings ipuof/status.h: the version, status codes and dtypes it
 * shares with the daemon), opaque handles, every call returns an int status (IPUOF_OK == 0
 * or an IPUOF_E_* code). The sentence that explains the last failure on a handle is returned
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

/* Version, default port, IPUOF_API, status codes, recovery actions, error classes and
 * dtypes: shared with the daemon and the simulator, so kept in their own header. */
#include <ipuof/status.h>

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
 * The connect timeout also paces a liveness check: when a request has heard nothing for
 * that long, the library asks the daemon on a second connection whether it is alive (a
 * health request, bounded by the connect timeout); when it does not answer, the request
 * fails with IPUOF_E_CLOSED and a sentence saying so, and the connection is closed. A
 * connect timeout of 0 turns the check off.
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
 * port) or "unix:/path/to/socket". NULL means: the IPUoF config file IPUOF_CONFIG_PATH
 * names, else PopRun's IPUOF_VIPU_API_HOST:IPUOF_VIPU_API_PORT (with
 * IPUOF_VIPU_API_PARTITION_ID), else the one file of ~/.ipuof.conf.d/ for
 * IPUOF_VIPU_API_PARTITION_ID and GCD IPUOF_VIPU_API_GCD_ID (0 when unset), else the
 * IPUOF_SERVER environment variable, else 127.0.0.1:50052 (docs/pod-tools.md); the
 * partition found on the way is the one ipuof_attach() takes when it is given none. A
 * broken config file fails with IPUOF_E_INVAL naming the file and the field.
 * Errors: IPUOF_E_IO (unreachable), IPUOF_E_TIMEOUT, IPUOF_E_VERSION (the message names
 * both versions), IPUOF_E_AUTH, IPUOF_E_TOO_MANY (connection limit), IPUOF_E_INVAL,
 * IPUOF_E_STATE (already connected). A handle whose connection was closed (by an error or
 * the daemon) may connect again.
 */
IPUOF_API int ipuof_client_connect(ipuof_client *c, const char *address);

/*
 * Connects without a hello, for ipuof_health() only (no token needed: the daemon answers
 * a health request before the hello, then closes the connection). address as for
 * ipuof_client_connect(). Errors: IPUOF_E_IO, IPUOF_E_TIMEOUT, IPUOF_E_INVAL,
 * IPUOF_E_STATE (already connected).
 */
IPUOF_API int ipuof_client_connect_probe(ipuof_client *c, const char *address);

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
    unsigned num_ipus;          /* a power of two unless auto_round; in a job of several
                                 * processes, the whole partition (the same in each) */
    const char *partition_name; /* NULL or "": the partition the connect's lookup found
                                 * (a config file, IPUOF_VIPU_API_PARTITION_ID), else the
                                 * daemon names it; in a job of several processes:
                                 * IPUOF_PARTITION, else the lookup's, else one made from
                                 * the launcher's job id, else one made from the job key
                                 * (ipuof_client_set_job_key) */
    unsigned process_id;        /* distributed use: this process's index */
    unsigned num_processes;     /* 0: from the environment (ipuof_process_env); 1: not
                                 * distributed */
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

/*
 * The key the processes of one job of several share (at most IPUOF_JOB_KEY_MAX bytes;
 * copied; NULL or "" clears it). A job is joined by its partition name and this key
 * together, so unrelated programs never join each other's job and a process without the
 * key is refused. Unset, ipuof_attach() takes IPUOF_JOB_KEY, else the launcher's (Open
 * MPI's mpirun, and so PopRun: PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid,
 * OMPI_MCA_orte_ess_jobid, OMPI_MCA_orte_precondition_transports). With neither a key nor
 * a partition name of its own, an attach of several processes fails with IPUOF_E_INVAL
 * saying how to give one. Errors: IPUOF_E_INVAL (too long).
 */
#define IPUOF_JOB_KEY_MAX 256
IPUOF_API int ipuof_client_set_job_key(ipuof_client *c, const char *key);

/*
 * Which process of a job this is, from the environment: IPUOF_PROCESS_ID and
 * IPUOF_NUM_PROCESSES, else Open MPI's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (so
 * `mpirun -np 2 app` works unchanged), else PopRun's POPDIST_REPLICA_INDEX_OFFSET /
 * POPDIST_NUM_LOCAL_REPLICAS and POPDIST_NUM_TOTAL_REPLICAS / POPDIST_NUM_LOCAL_REPLICAS.
 * None set: 0 of 1. Either out-pointer may be NULL. IPUOF_E_INVAL when a variable is not a
 * number, only one of a pair is set, or the id is out of range; err (may be NULL) then says
 * which.
 */
IPUOF_API int ipuof_process_env(unsigned *process_id, unsigned *num_processes, char *err,
                                size_t errlen);

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

/* ---- partitions: V-IPU's verbs (the partition service, docs/pod-tools.md) ------------ */

/* A V-IPU partition reserves IPUs by name until it is removed or the daemon stops; an
 * attach giving its name (ipuof_attach_opts.partition_name, a config file, poprun's
 * IPUOF_VIPU_API_PARTITION_ID) takes them. */
enum ipuof_vipu_state {
    IPUOF_VIPU_PS_ACTIVE = 1, /* reserved and ready */
    IPUOF_VIPU_PS_FAILED = 2  /* one of its IPUs is in error: reset it */
};

#define IPUOF_VIPU_NAME_MAX 64

struct ipuof_vipu_partition {
    char name[IPUOF_VIPU_NAME_MAX];
    unsigned size;              /* IPUs */
    unsigned num_gcds;          /* GCDs; each holds size / num_gcds consecutive IPUs */
    unsigned first_ipu;         /* the daemon's IPUs first_ipu .. first_ipu + size - 1 */
    int reconfigurable;
    int state;                  /* enum ipuof_vipu_state */
    int held;                   /* 1 when a program holds it; then the three below */
    char holder_name[64];
    unsigned holder_pid;
    char holder_peer[64];
};

/*
 * The daemon's partitions, oldest first: up to max written to out, the count (all of them)
 * to *n; the daemon's IPU count to *num_ipus. Any out-pointer may be NULL.
 */
IPUOF_API int ipuof_vipu_list(ipuof_client *c, struct ipuof_vipu_partition *out, size_t max,
                              size_t *n, unsigned *num_ipus);

/* Partition name into *out. Errors: IPUOF_E_NOTFOUND (the sentence lists the partitions). */
IPUOF_API int ipuof_vipu_get(ipuof_client *c, const char *name,
                             struct ipuof_vipu_partition *out);

/*
 * Creates partition name of size IPUs (a power of two) in num_gcds GCDs (0 or 1: one),
 * PS_ACTIVE at once; *out (may be NULL) describes it. Needs admin rights.
 * Errors: IPUOF_E_AUTH, IPUOF_E_INVAL (size, GCDs or name: the sentence says what is
 * right), IPUOF_E_BUSY (the name exists, or too few free IPUs: who holds them).
 */
IPUOF_API int ipuof_vipu_create(ipuof_client *c, const char *name, unsigned size,
                                unsigned num_gcds, int reconfigurable,
                                struct ipuof_vipu_partition *out);

/* Resets the partition's IPUs (their state and error cleared). Nobody holding it: anybody
 * may; somebody holding it: admin rights and force (the holder is told). Errors:
 * IPUOF_E_NOTFOUND, IPUOF_E_AUTH, IPUOF_E_BUSY (held, no force). */
IPUOF_API int ipuof_vipu_reset(ipuof_client *c, const char *name, int force);

/* Removes the partition; its IPUs return to the pool. Needs admin rights; a partition
 * somebody holds needs force (the holder is told it was reset). Errors as for reset. */
IPUOF_API int ipuof_vipu_remove(ipuof_client *c, const char *name, int force);

/* One agent of the daemon's allocation: the daemon itself, or another host of its Pod. */
struct ipuof_vipu_agent {
    char name[64];              /* its [pod] name ("" for a daemon in no Pod) */
    char address[256];          /* where clients reach it, "HOST:PORT" ("" not known yet;
                                 * for the daemon asked: what its listen address says) */
    unsigned num_ipus, free_ipus; /* as its last hello said (free: 0 outside a Pod) */
    int reachable;              /* 1: the daemon asked, or a peer that answered its hello */
    char error[256];            /* why it is unreachable */
};

/*
 * The agents of the daemon's allocation: the hosts of its Pod, itself first (one, itself,
 * when it is in no Pod). Up to max written to out, the count to *n.
 */
IPUOF_API int ipuof_vipu_agents(ipuof_client *c, struct ipuof_vipu_agent *out, size_t max,
                                size_t *n);

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
    uint64_t memory_stash_bytes;   /* of memory_used_bytes: pipeline stashes */
    uint64_t memory_offchip_bytes; /* loaded models' state held off chip, not in used */
    uint64_t host_memory_used_bytes; /* run buffers in the daemon's host memory of the
                                      * models of the partition starting at this IPU */
};

/* Asks the daemon for the state of every IPU. *out is caller-owned: free it with
 * ipuof_status_report_free(). */
IPUOF_API int ipuof_status(ipuof_client *c, ipuof_status_report **out);
IPUOF_API void ipuof_status_report_free(ipuof_status_report *r);
IPUOF_API size_t ipuof_status_report_ipu_count(const ipuof_status_report *r);
/* Fills *info for IPU i (0-based index into the report); IPUOF_E_INVAL when out of range. */
IPUOF_API int ipuof_status_report_ipu(const ipuof_status_report *r, size_t i,
                                      struct ipuof_ipu_info *info);
/* For IPU i in error: the reset that clears it (IPUOF_RECOVERY_IPU_RESET, _LINK_RESET,
 * _PARTITION_RESET, _FULL_RESET), with *unrecoverable (may be NULL) set to 1 for an
 * unrecoverable error (then _FULL_RESET: ipuctl reset --all). IPUOF_RECOVERY_NONE when the
 * IPU is not in error or i is out of range. */
IPUOF_API int ipuof_status_report_ipu_recovery(const ipuof_status_report *r, size_t i,
                                               int *unrecoverable);
IPUOF_API const char *ipuof_status_report_server_version(const ipuof_status_report *r);
IPUOF_API uint64_t ipuof_status_report_uptime_ms(const ipuof_status_report *r);
IPUOF_API unsigned ipuof_status_report_clients(const ipuof_status_report *r);
IPUOF_API unsigned ipuof_status_report_waiting(const ipuof_status_report *r);
/* Host memory each partition may use for its models' run buffers (bytes). */
IPUOF_API uint64_t ipuof_status_report_host_memory(const ipuof_status_report *r);
/* The level the daemon's simulator kernels run at ("baseline", "avx2", "avx512": the CPU's
 * best, capped by the daemon's IPUOF_SIM_ISA); "" from a daemon that does not say. Borrowed
 * from the report. */
IPUOF_API const char *ipuof_status_report_sim_isa(const ipuof_status_report *r);
/* Bytes the daemon's executable cache holds; its budget (cache_bytes) in *budget unless
 * budget is NULL. 0 from a daemon that does not say. */
IPUOF_API uint64_t ipuof_status_report_cache_bytes(const ipuof_status_report *r,
                                                   uint64_t *budget);
/* Host memory the cached executables' arenas may take (their bound, counted when each is
 * compiled); what they may take in all (arena_memory) in *budget unless budget is NULL.
 * 0 from a daemon that does not say. */
IPUOF_API uint64_t ipuof_status_report_arena_bytes(const ipuof_status_report *r,
                                                   uint64_t *budget);
/* The device type the daemon's simulated clock models ("gc200", "bow"; "" from a daemon
 * that does not say), its clock in *clock_hz unless NULL (0 when not said). Borrowed. */
IPUOF_API const char *ipuof_status_report_ipu_type(const ipuof_status_report *r,
                                                   double *clock_hz);

/* One process of a job of several processes sharing a partition (configureProcessId), as
 * the daemon reports it. Strings are borrowed from the report; "" when empty. */
struct ipuof_job_process {
    const char *partition;
    unsigned process_id;
    unsigned num_processes;
    const char *state;          /* "attaching", "attached", "detached", "disconnected",
                                 * "absent" (not come yet) */
    int present;                /* 1 when the fields below describe its connection */
    unsigned client_id;
    const char *name;
    unsigned pid;
    const char *peer;
};

/* The processes of the daemon's jobs, partition by partition. */
IPUOF_API size_t ipuof_status_report_process_count(const ipuof_status_report *r);
/* Fills *p for process i (0-based index into the report); IPUOF_E_INVAL when out of range. */
IPUOF_API int ipuof_status_report_process(const ipuof_status_report *r, size_t i,
                                          struct ipuof_job_process *p);
/* The phase of process i's job: "gather-attach" (its processes attach), "ready",
 * "gather-compile", "compiling", "gather-run", "running", "ended"; "" from a daemon that
 * does not say, or when i is out of range. Borrowed from the report. (A function rather
 * than a field of struct ipuof_job_process, whose layout old binaries hold.) */
IPUOF_API const char *ipuof_status_report_process_phase(const ipuof_status_report *r,
                                                        size_t i);

/* A host of the daemon's Pod ([pod] in its config), as it reports it. */
enum ipuof_pod_host_state {
    IPUOF_POD_HOST_UNKNOWN = 0,     /* no hello answered yet */
    IPUOF_POD_HOST_REACHABLE = 1,
    IPUOF_POD_HOST_UNREACHABLE = 2,
    IPUOF_POD_HOST_SELF = 3         /* the daemon that answered */
};

/* Strings are borrowed from the report; "" when empty. */
struct ipuof_pod_host {
    const char *name;
    const char *address;            /* its Pod port, HOST:PORT */
    int state;                      /* enum ipuof_pod_host_state */
    unsigned num_ipus;              /* as its last hello said (the daemon's own: now) */
    unsigned free_ipus;
    uint64_t seen_ms_ago;           /* since its last answered hello; 0 for self, unknown */
    const char *error;              /* why unreachable */
};

/* The hosts of the daemon's Pod, the daemon itself first; 0 without a Pod. */
IPUOF_API size_t ipuof_status_report_pod_host_count(const ipuof_status_report *r);
/* Fills *h for host i; IPUOF_E_INVAL when out of range. */
IPUOF_API int ipuof_status_report_pod_host(const ipuof_status_report *r, size_t i,
                                           struct ipuof_pod_host *h);
/* Static name of a Pod host state ("unknown", "reachable", "unreachable", "self"). */
IPUOF_API const char *ipuof_pod_host_state_name(int state);

/* Static name of an IPU state ("free", "attached", "busy", "error"). */
IPUOF_API const char *ipuof_ipu_state_name(int state);

/* IPU i's busy time since the daemon started, in microseconds: *host_us the simulator's
 * time on the daemon's host, *sim_us the simulated clock's (either may be NULL); 0 from a
 * daemon that does not say. IPUOF_E_INVAL when i is out of range. (ipuctl top's use.) */
IPUOF_API int ipuof_status_report_ipu_busy(const ipuof_status_report *r, size_t i,
                                           uint64_t *host_us, uint64_t *sim_us);

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

/* ---- injected faults (ipuctl fault; docs/faults.md) ---------------------------------- */

#define IPUOF_FAULT_NAME_MAX 64

/* A fault to inject, or one the daemon lists. Kinds: "recoverable:IPU_RESET" (also
 * LINK_RESET, PARTITION_RESET, FULL_RESET), "unrecoverable", "host-sync-timeout",
 * "fabric-disconnect"; at: "attach", "compile", "weights", "run" ("" = run). */
struct ipuof_fault {
    unsigned id;                 /* list, inject: given by the daemon */
    int has_ipu;                 /* target: IPU ipu, else partition, else any IPU */
    unsigned ipu;
    char partition[IPUOF_FAULT_NAME_MAX];
    char kind[IPUOF_FAULT_NAME_MAX];
    char at[16];
    unsigned after_runs;         /* matching events skipped before it may fire */
    unsigned count;              /* fires at most this often (0: once) */
    double probability;          /* chance per matching event (0: 1) */
    uint64_t seed;               /* of its reproducible draws */
    unsigned fired, seen;        /* list: times fired, matching events seen */
    uint64_t duration_ms;        /* armed this long after inject (0: until cleared) */
    unsigned wait_ms;            /* host-sync-timeout: the request waits this long first */
    int rearm_on_reset;          /* a reset of the IPUs it put in error arms it again */
    unsigned rearmed;            /* list: times re-armed by a reset */
    int expired;                 /* list: its duration has passed */
    char host[IPUOF_FAULT_NAME_MAX]; /* target: the IPUs of this Pod host (may be combined
                                  * with ipu or partition); "" = the daemon's own. A
                                  * daemon arms faults on its own IPUs only: another
                                  * host's fault is refused, naming the daemon to give it */
};

/* Arms fault f (admin only); its id to *id (may be NULL). Errors: IPUOF_E_AUTH,
 * IPUOF_E_INVAL (the daemon's sentence says which field and what is right). */
IPUOF_API int ipuof_fault_inject(ipuof_client *c, const struct ipuof_fault *f, unsigned *id);

/* The daemon's faults, armed and fired, oldest first: up to max to out, the count to *n. */
IPUOF_API int ipuof_fault_list(ipuof_client *c, struct ipuof_fault *out, size_t max,
                               size_t *n);

/* Removes fault id (0: all); how many were removed to *n (may be NULL). IPUs already in
 * error stay so until reset. Errors: IPUOF_E_AUTH, IPUOF_E_NOTFOUND (no fault id). */
IPUOF_API int ipuof_fault_clear(ipuof_client *c, unsigned id, size_t *n);

/* ---- models: compile and run ---------------------------------------------------------- */

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

/* Execution strategies (PopTorch's setExecutionStrategy). */
enum ipuof_strategy {
    IPUOF_STRATEGY_DEFAULT = 0,   /* pipelined when the model has more than one stage */
    IPUOF_STRATEGY_PIPELINED = 1, /* every IPU on a different micro-batch at once */
    IPUOF_STRATEGY_SHARDED = 2,   /* stages one after another, one micro-batch at a time */
    IPUOF_STRATEGY_PHASED = 3     /* serial phased: phases in turn, weights streamed */
};

/* What a tensor location applies to (PopTorch's TensorLocations). */
enum ipuof_tensor_kind {
    IPUOF_TENSORS_WEIGHTS = 0,
    IPUOF_TENSORS_ACTIVATIONS = 1,
    IPUOF_TENSORS_ACCUMULATORS = 2,
    IPUOF_TENSORS_OPTIMIZER = 3,  /* optimizer state (setOptimizerLocation) */
    IPUOF_TENSOR_KINDS = 4
};

enum ipuof_location {
    IPUOF_LOCATION_ON_CHIP = 0,
    IPUOF_LOCATION_OFF_CHIP = 1   /* remote buffers in the daemon's host memory */
};

#define IPUOF_MAX_BLOCKS 256     /* blocks of one placement */
#define IPUOF_STAGE_AUTO (-1)    /* one stage per block, in block order */

/* A block of a placement (PopTorch's poptorch.Block): the nodes whose name starts with
 * prefix (torch 1.13 names nodes after the module path, "/layer1/conv/Conv"), on pipeline
 * stage `stage` (or IPUOF_STAGE_AUTO) of IPU `ipu` of each replica. Nodes no block matches
 * stay with the block of their producer. */
struct ipuof_block {
    const char *prefix;
    int stage;
    unsigned ipu;
};

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
    /* Placement over several IPUs and profiling: set them with the setters below. A zeroed
     * struct means one IPU per replica, on-chip tensors, no trace. */
    int strategy;                     /* enum ipuof_strategy */
    const struct ipuof_block *blocks; /* n_blocks entries, borrowed until the compile call */
    size_t n_blocks;
    int locations[IPUOF_TENSOR_KINDS]; /* enum ipuof_location per enum ipuof_tensor_kind */
    int profile;                      /* 1: the daemon records a trace of every run */
    /* inputReplicaGrouping(size, type): the replicas of a group receive the same input, so
     * a call carries B x D x (replicas / input_group_size) x A samples of each input (the
     * compile reply's input shapes say so). The size divides replicas; 0 or 1: none. */
    unsigned input_group_size;
    int input_group_type;             /* enum ipuof_group_type */
};

/* PopTorch's CommGroupType, for ipuof_model_opts.input_group_type. */
enum ipuof_group_type {
    IPUOF_GROUP_CONSECUTIVE = 0,      /* groups of consecutive replicas */
    IPUOF_GROUP_ORTHOGONAL = 1,       /* replicas replicas/size apart in one group */
    IPUOF_GROUP_ALL = 2,              /* refused for inputs, as PopTorch does */
    IPUOF_GROUP_NONE = 3              /* NoGrouping: size 1 */
};

/*
 * Setters of the placement options, checking each value (IPUOF_E_INVAL, and o unchanged,
 * for a NULL o, an unknown strategy, kind or location, more than IPUOF_MAX_BLOCKS blocks,
 * a block without a prefix, a stage below IPUOF_STAGE_AUTO). Blocks are borrowed, not
 * copied, until the compile call. The compile checks them again with a sentence, and the
 * daemon checks IPUs against the partition and prefixes against the model's node names.
 *
 * Profiling is also switched on without changing a program by the environment variable
 * POPLAR_ENGINE_OPTIONS, read at each compile as Poplar reads it: a JSON object whose
 * "autoReport.all" or "autoReport.outputExecutionProfile" is "true" (or true) compiles with
 * profile, and whose "autoReport.directory" (default ".") receives, after every run of the
 * model, its trace as <directory>/<model name>.trace.json. The value is UTF-8 JSON of at
 * most 4096 bytes whose values are strings, numbers or true/false; strings are decoded
 * whole (\u escapes too); the last of a repeated key counts; those two keys take true or
 * false only ("True" is refused, as by Poplar's boolean options). The Python package
 * reads it by the same rule (client/model/engine_opts.c; tests/data/engine_options.tsv).
 */
IPUOF_API int ipuof_model_opts_set_strategy(struct ipuof_model_opts *o, int strategy);
IPUOF_API int ipuof_model_opts_set_blocks(struct ipuof_model_opts *o,
                                          const struct ipuof_block *blocks, size_t n);
IPUOF_API int ipuof_model_opts_set_location(struct ipuof_model_opts *o, int kind, int location);
IPUOF_API int ipuof_model_opts_set_profile(struct ipuof_model_opts *o, int on);

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
 * model), IPUOF_E_SHAPE, IPUOF_E_DTYPE, IPUOF_E_TOO_LARGE (the daemon's model size limit; the host
 * memory its run buffers (host_memory) or its arenas (arena_memory) would take).
 */
IPUOF_API int ipuof_model_compile(ipuof_client *c, const void *onnx, size_t len,
                                  const struct ipuof_model_opts *opts, ipuof_model **out);

/* Reads an ONNX file and compiles it as ipuof_model_compile() does. When opts or
 * opts->name is NULL the model is named after the file ("mnist" for "data/mnist.onnx").
 * Errors, besides those of ipuof_model_compile(): IPUOF_E_NOTFOUND (no such file),
 * IPUOF_E_IO (unreadable), IPUOF_E_INVAL (empty or not a regular file). */
IPUOF_API int ipuof_model_compile_file(ipuof_client *c, const char *path,
                                       const struct ipuof_model_opts *opts, ipuof_model **out);

/*
 * Compile options as an opaque handle (the way to set them; the structs above and below
 * are kept for programs written against them, and go through these setters). A new option
 * is a new setter, never a new struct layout.
 *
 * ipuof_compile_opts_new() returns a handle holding every default (NULL when out of
 * memory): device iterations 1, replicas 1 (per process), micro-batch from the graph,
 * outputs IPUOF_OUTPUT_DEFAULT, cache on, no progress callback, no constant inputs,
 * strategy default, no blocks, tensors on chip, no profile, no input groups; an inference
 * compile until a loss is set, then gradient accumulation 1 (mean), seed 0, PopTorch's
 * default SGD (optimizer kind 0), nothing frozen. ipuof_compile_opts_free(NULL) is a no-op.
 *
 * Each setter checks its value and returns IPUOF_OK, or IPUOF_E_INVAL (IPUOF_E_SHAPE for a
 * constant input whose bytes do not match its shape, IPUOF_E_NOMEM) with the handle
 * unchanged and a sentence saying what was wrong and what is right in
 * ipuof_compile_opts_errmsg() (borrowed until the next call on the handle; "" after a
 * success). Counts (device iterations, replicas, gradient accumulation) are at least 1.
 * Names, strings, constant inputs' bytes, blocks' prefixes and the optimizer's groups and
 * their weights' names are copied. set_name(NULL) and set_loss(NULL)
 * restore the defaults (named after the file or "model"; inference). The add_ calls append
 * (at most 65536 output modes, constant inputs and frozen weights; IPUOF_MAX_BLOCKS blocks).
 * The daemon checks what only it can (IPUs against the partition, names against the model).
 */
typedef struct ipuof_compile_opts ipuof_compile_opts;
struct ipuof_optimizer; /* below, with training */
IPUOF_API ipuof_compile_opts *ipuof_compile_opts_new(void);
IPUOF_API void ipuof_compile_opts_free(ipuof_compile_opts *o);
IPUOF_API const char *ipuof_compile_opts_errmsg(const ipuof_compile_opts *o);
IPUOF_API int ipuof_compile_opts_set_name(ipuof_compile_opts *o, const char *name);
IPUOF_API int ipuof_compile_opts_set_device_iterations(ipuof_compile_opts *o, unsigned n);
/* This process's replicas; a job of N processes compiles N times as many in all. */
IPUOF_API int ipuof_compile_opts_set_replicas(ipuof_compile_opts *o, unsigned n);
IPUOF_API int ipuof_compile_opts_set_micro_batch(ipuof_compile_opts *o, unsigned n);
IPUOF_API int ipuof_compile_opts_set_output_default(ipuof_compile_opts *o, int kind, unsigned n);
IPUOF_API int ipuof_compile_opts_add_output(ipuof_compile_opts *o, const char *name, int kind,
                                            unsigned n);
IPUOF_API int ipuof_compile_opts_set_no_cache(ipuof_compile_opts *o, int on);
IPUOF_API int ipuof_compile_opts_set_progress(ipuof_compile_opts *o, ipuof_progress_fn fn,
                                              void *user);
IPUOF_API int ipuof_compile_opts_add_constant_input(ipuof_compile_opts *o,
                                                    const struct ipuof_tensor *t);
IPUOF_API int ipuof_compile_opts_set_strategy(ipuof_compile_opts *o, int strategy);
IPUOF_API int ipuof_compile_opts_add_block(ipuof_compile_opts *o, const char *prefix, int stage,
                                           unsigned ipu);
IPUOF_API int ipuof_compile_opts_set_location(ipuof_compile_opts *o, int kind, int location);
IPUOF_API int ipuof_compile_opts_set_profile(ipuof_compile_opts *o, int on);
IPUOF_API int ipuof_compile_opts_set_input_group(ipuof_compile_opts *o, unsigned size, int type);
/* Training (see ipuof_model_compile_training below for what a training model does). */
IPUOF_API int ipuof_compile_opts_set_loss(ipuof_compile_opts *o, const char *loss);
/*
 * The optimizer, one hyper-parameter at a time (as ZSTD_CCtx_setParameter takes them): the
 * handle starts with PopTorch's default (kind 0: SGD with lr 0.01, which takes no
 * parameter). set_optimizer_kind() chooses one of IPUOF_OPTIMIZER_* with torch.optim's
 * defaults for it (as ipuof_optimizer_init() lists them) and no parameter groups besides
 * the first, dropping what was set before; 0 restores PopTorch's default.
 *
 * set_optimizer_param() sets one hyper-parameter of group `group`: 0 is the first group
 * (the top-level hyper-parameters, which hold every trainable weight no other group lists),
 * 1 .. n the groups add_optimizer_group() appended. A value is refused (IPUOF_E_INVAL, the
 * sentence in ipuof_compile_opts_errmsg()) when the kind has no such parameter (alpha of
 * Adam), when the parameter is the whole optimizer's and group is not 0, or when it is out
 * of range: lr, weight_decay, momentum and alpha >= 0, beta1 and beta2 in [0, 1), eps > 0,
 * loss_scaling and velocity_scaling > 0, all finite as a float; dampening finite;
 * max_grad_norm and max_weight_norm >= 0, 0 or inf for no clipping; the flags 0 or 1.
 * What depends on two values (Nesterov momentum needs momentum > 0 and no dampening) the
 * daemon checks at the compile.
 *
 * add_optimizer_group() appends a parameter group holding the first group's
 * hyper-parameters as they are at the call and no weight (at most
 * IPUOF_OPTIMIZER_MAX_GROUPS); add_optimizer_weight() lists trainable weight `weight`
 * (copied) in group 1 .. n. Added in IPUOF_CLIENT_0.10.
 *
 * The same calls make the optimizer of ipuof_model_set_optimizer_with() (setOptimizer
 * between runs). set_optimizer_kind() and set_optimizer() also reset the float16
 * parameters (IPUOF_OPT_PARAM_ACCUM_FLOAT16 ..) to all float32, no automatic loss scaling.
 */
enum ipuof_optimizer_param {
    /* each group's (group 0 .. n) */
    IPUOF_OPT_PARAM_LR = 1,             /* every kind */
    IPUOF_OPT_PARAM_WEIGHT_DECAY = 2,   /* every kind */
    IPUOF_OPT_PARAM_MOMENTUM = 3,       /* SGD, RMSprop */
    IPUOF_OPT_PARAM_DAMPENING = 4,      /* SGD */
    IPUOF_OPT_PARAM_NESTEROV = 5,       /* SGD: 0 or 1 */
    IPUOF_OPT_PARAM_BETA1 = 6,          /* Adam, AdamW, LAMB */
    IPUOF_OPT_PARAM_BETA2 = 7,          /* Adam, AdamW, LAMB */
    IPUOF_OPT_PARAM_EPS = 8,            /* Adam, AdamW, LAMB, RMSprop */
    IPUOF_OPT_PARAM_ALPHA = 9,          /* RMSprop */
    /* the whole optimizer's (group 0 only) */
    IPUOF_OPT_PARAM_CENTERED = 10,      /* RMSprop: 0 or 1 */
    IPUOF_OPT_PARAM_TF_VARIANT = 11,    /* RMSprop: 0 or 1 (PopTorch's use_tf_variant) */
    IPUOF_OPT_PARAM_BIAS_CORRECTION = 12,   /* Adam, AdamW, LAMB: 1 (the default) or 0 */
    IPUOF_OPT_PARAM_MAX_GRAD_NORM = 13,     /* every kind: clip by the global gradient norm */
    IPUOF_OPT_PARAM_MAX_WEIGHT_NORM = 14,   /* LAMB: clip of ||w|| in the trust ratio */
    IPUOF_OPT_PARAM_LOSS_SCALING = 15,      /* every kind; float16 only, cancels in float32 */
    IPUOF_OPT_PARAM_VELOCITY_SCALING = 16,  /* SGD; likewise */
    IPUOF_OPT_PARAM_PLAN_MOMENTUM = 17,     /* SGD, RMSprop: 0 or 1, keep a momentum buffer
                                             * even at momentum 0, so set_optimizer may raise
                                             * it (PopTorch: momentum marked variable) */
    /* float16 training, the whole optimizer's, every kind (struct ipuof_optimizer_half
     * says what each does; a kind without that state ignores it). Added in
     * IPUOF_CLIENT_0.11. */
    IPUOF_OPT_PARAM_ACCUM_FLOAT16 = 18,         /* 0 or 1 (PopTorch's accum_type) */
    IPUOF_OPT_PARAM_FIRST_ORDER_FLOAT16 = 19,   /* 0 or 1 (first_order_momentum_accum_type,
                                                 * SGD's velocity_accum_type) */
    IPUOF_OPT_PARAM_SECOND_ORDER_FLOAT16 = 20,  /* 0 or 1 (second_order_momentum_accum_type) */
    IPUOF_OPT_PARAM_AUTO_LOSS_SCALING = 21,     /* 0 or 1 (automaticLossScalingSettings) */
    IPUOF_OPT_PARAM_ALS_UPDATE_PERIOD = 22,     /* steps, a whole number >= 1 (default 1) */
    IPUOF_OPT_PARAM_ALS_BIN_EDGE = 23,          /* in (0, 1], of 65504 (default 0.125) */
    IPUOF_OPT_PARAM_ALS_THRESHOLD = 24          /* in [0, 1] (PopART's default 1e-7; here 0
                                                 * until set) */
};
IPUOF_API int ipuof_compile_opts_set_optimizer_kind(ipuof_compile_opts *o, int kind);
IPUOF_API int ipuof_compile_opts_set_optimizer_param(ipuof_compile_opts *o, unsigned group,
                                                     int param, double value);
IPUOF_API int ipuof_compile_opts_add_optimizer_group(ipuof_compile_opts *o);
IPUOF_API int ipuof_compile_opts_add_optimizer_weight(ipuof_compile_opts *o, unsigned group,
                                                      const char *weight);
/* The optimizer of a filled struct ipuof_optimizer (for programs written against it; the
 * calls above are the way to set one): its kind (0 allowed) and groups' shape checked here,
 * its ranges by the daemon (loss_scaling and velocity_scaling 0 mean 1 there). The groups'
 * names are copied. */
IPUOF_API int ipuof_compile_opts_set_optimizer(ipuof_compile_opts *o,
                                               const struct ipuof_optimizer *opt);
IPUOF_API int ipuof_compile_opts_set_gradient_accumulation(ipuof_compile_opts *o, unsigned n);
IPUOF_API int ipuof_compile_opts_set_accumulation_reduction(ipuof_compile_opts *o,
                                                            int reduction);
/* The seed of the model's draws: a training model's Dropout masks, and the random ops
 * (RandomUniform, RandomNormal and their Like forms) of any model (PopTorch's
 * Options.randomSeed). 0 at first. */
IPUOF_API int ipuof_compile_opts_set_seed(ipuof_compile_opts *o, uint64_t seed);
IPUOF_API int ipuof_compile_opts_add_frozen_weight(ipuof_compile_opts *o, const char *name);

/* ipuof_model_compile() and ipuof_model_compile_file() with the options of a handle (NULL:
 * every default; only read, so one handle may serve many compiles): a training compile
 * when it has a loss. Errors as theirs and ipuof_model_compile_training()'s. */
IPUOF_API int ipuof_model_compile_with(ipuof_client *c, const void *onnx, size_t len,
                                       const ipuof_compile_opts *opts, ipuof_model **out);
IPUOF_API int ipuof_model_compile_file_with(ipuof_client *c, const char *path,
                                            const ipuof_compile_opts *opts, ipuof_model **out);

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
/* Bytes of the model's run buffers (one call's inputs and outputs) in the daemon's host
 * memory; they count against the partition's host memory limit. */
IPUOF_API uint64_t ipuof_model_host_bytes(const ipuof_model *m);
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
 * available with ipuof_model_output() until the next run or free. The daemon sends the
 * output rows of each device iteration while later ones compute (IPUOF_STREAM_OUTPUTS=0 in
 * the environment: all of them after the run, as one reply); the call returns once every
 * row and the run's figures are in. IPUOF_E_PROTO when a daemon's output frames do not fit
 * the outputs it described (the connection is then closed).
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

/*
 * The simulated clock's figures for the last run: what it would take on IPUs (simulated
 * device seconds), the samples per second that makes, and the pipeline stage with the most
 * compute; any pointer may be NULL. Errors: IPUOF_E_STATE (no run yet), or the daemon's
 * reason for having none (IPUOF_E_UNSUPPORTED from a simulator without a cost model), with
 * its sentence.
 */
IPUOF_API int ipuof_model_run_cost(const ipuof_model *m, double *device_seconds,
                                   double *samples_per_s, int *bottleneck_stage);
/* IPUs the last run's busy fractions describe (0 without cost figures). */
IPUOF_API size_t ipuof_model_run_ipu_count(const ipuof_model *m);
/* The fraction of the last run's device time IPU i (of the model's IPUs) was busy.
 * IPUOF_E_INVAL when i is out of range. */
IPUOF_API int ipuof_model_run_busy(const ipuof_model *m, size_t i, double *fraction);

/*
 * The execution trace of the last run of a model compiled with profile on: Chrome
 * trace-event JSON (Perfetto and chrome://tracing open it), in *json (caller-owned,
 * free(); NUL-terminated, *len bytes without the NUL) or written to the file at path.
 * Errors: the daemon's (IPUOF_E_INVAL when profiling was off or before a run,
 * IPUOF_E_UNSUPPORTED from a simulator without traces), IPUOF_E_IO, IPUOF_E_NOTFOUND.
 */
IPUOF_API int ipuof_model_trace(ipuof_model *m, char **json, size_t *len);
IPUOF_API int ipuof_model_write_trace(ipuof_model *m, const char *path);

/* Memory of the model on its i-th IPU beyond ipuof_model_memory(): gradient accumulators,
 * optimizer state, pipeline stashes (all in total), bytes held off chip (not in total) and
 * the peak of what is not always live. Any pointer may be NULL; IPUOF_E_INVAL out of range. */
IPUOF_API int ipuof_model_memory_detail(const ipuof_model *m, size_t i, uint64_t *gradients,
                                        uint64_t *optimizer, uint64_t *stash,
                                        uint64_t *offchip, uint64_t *peak_not_always_live);

/*
 * The simulated clock's inputs of this client's later compiles (docs/cost-model.md):
 * num_io_tiles (PopTorch's numIOTiles: 0, or an even number from 32 to 192; host I/O then
 * overlaps compute), synthetic_data (1: no host I/O), available_memory_proportion ((0, 1];
 * 0: PopLibs' default 0.6) and predict_replicas (the prediction's replicas; 0: the
 * compile's). IPUOF_E_INVAL with a sentence for a value out of range.
 */
IPUOF_API int ipuof_client_set_clock_options(ipuof_client *c, unsigned num_io_tiles,
                                             int synthetic_data,
                                             double available_memory_proportion,
                                             unsigned predict_replicas);

/*
 * The prediction of m's steady-state speed, from its compile alone (no run): samples per
 * second of all replicas, seconds of one step (device_iterations x the micro-batches of
 * each), and that step's parts on the bottleneck IPU in parts[0..5): compute, exchange,
 * sync, host I/O, collectives (the rest of the step it waits). Any pointer may be NULL.
 * IPUOF_E_STATE when the daemon sent none.
 */
IPUOF_API int ipuof_model_prediction(const ipuof_model *m, double *samples_per_s,
                                     double *step_seconds, double *parts);
/* The prediction's report as text (json = 0) or one JSON object (json = 1), owned by m;
 * NULL when there is none. */
IPUOF_API const char *ipuof_model_prediction_report(const ipuof_model *m, int json);

/* ---- training -------------------------------------------------------------------------- */

/* Optimizers, with PopTorch's definitions (torch.optim's for SGD, Adam, AdamW, RMSprop). */
enum ipuof_optimizer_kind {
    IPUOF_OPTIMIZER_SGD = 1,    /* torch.optim.SGD */
    IPUOF_OPTIMIZER_ADAM = 2,   /* torch.optim.Adam (weight decay added to the gradient) */
    IPUOF_OPTIMIZER_ADAMW = 3,  /* torch.optim.AdamW (decoupled weight decay) */
    IPUOF_OPTIMIZER_RMSPROP = 4,    /* torch.optim.RMSprop; TensorFlow's with tf_variant */
    IPUOF_OPTIMIZER_LAMB = 5    /* poptorch.optim.LAMB (LAMBNoBias: no_bias_correction 1) */
};

/* Parameter groups besides the first, at most. */
#define IPUOF_OPTIMIZER_MAX_GROUPS 32

/* A parameter group besides the first (torch.optim's param_groups[1:]): its
 * hyper-parameters and the names of the trainable weights it holds (borrowed for the call). */
struct ipuof_optimizer_group {
    float lr, weight_decay, momentum, dampening;
    int nesterov;
    float beta1, beta2, eps, alpha;
    const char *const *weights;
    size_t n_weights;
};

/* The top-level hyper-parameters are the first group's: it holds every trainable weight no
 * entry of groups lists. */
struct ipuof_optimizer {
    int kind;                   /* enum ipuof_optimizer_kind */
    float lr;
    float weight_decay;
    float momentum;             /* SGD, RMSprop */
    float dampening;            /* SGD */
    int nesterov;               /* SGD */
    float beta1, beta2;         /* Adam, AdamW, LAMB */
    float eps;                  /* Adam, AdamW, LAMB, RMSprop */
    float alpha;                /* RMSprop */
    int centered;               /* RMSprop */
    int tf_variant;             /* RMSprop: PopTorch's use_tf_variant */
    int no_bias_correction;     /* Adam, AdamW, LAMB: 1 drops the bias correction
                                 * (PopTorch's bias_correction=False); 0, the default,
                                 * keeps it, so a zeroed struct is torch's Adam */
    float max_grad_norm;        /* clip by the global gradient norm; 0 or inf: none */
    float max_weight_norm;      /* LAMB: clip of ||w|| in the trust ratio; 0 or inf: none */
    float loss_scaling;         /* > 0 (0 means 1); float16 only, cancels in float32 */
    float velocity_scaling;     /* SGD, > 0 (0 means 1); likewise */
    int plan_momentum;          /* SGD, RMSprop: keep a momentum buffer even at momentum 0,
                                 * so set_optimizer may raise it (PopTorch: momentum marked
                                 * variable) */
    size_t n_groups;            /* 0 .. IPUOF_OPTIMIZER_MAX_GROUPS */
    const struct ipuof_optimizer_group *groups;     /* borrowed for the call */
};

/* Fills o with PyTorch's defaults for kind (SGD lr 1e-3; Adam lr 1e-3, betas (0.9, 0.999),
 * eps 1e-8; AdamW the same with weight_decay 1e-2; RMSprop lr 1e-2, alpha 0.99, eps 1e-8;
 * LAMB as Adam with weight_decay 1e-2 and max_weight_norm 65500), bias correction on,
 * loss_scaling and velocity_scaling 1, no clipping, no groups. IPUOF_E_INVAL for an
 * unknown kind. */
IPUOF_API int ipuof_optimizer_init(struct ipuof_optimizer *o, int kind);

/* How gradients of accumulation steps and replicas combine before the optimizer step. */
enum ipuof_reduction {
    IPUOF_REDUCTION_MEAN = 0,   /* the default, as PopTorch's */
    IPUOF_REDUCTION_SUM = 1
};

struct ipuof_training_opts {
    const char *loss;                   /* the graph output to minimise (required) */
    struct ipuof_optimizer optimizer;   /* kind 0: SGD with lr 0.01, as PopTorch's default */
    unsigned gradient_accumulation;     /* 0 means 1 */
    int accumulation_reduction;         /* enum ipuof_reduction */
    uint64_t seed;                      /* randomSeed: Dropout masks are reproducible */
    const char *const *frozen_weights;  /* float initializers not to train; may be NULL */
    size_t n_frozen_weights;
};

/*
 * Compiles a training model (PopTorch's trainingModel): the forward ONNX graph ends in the
 * loss named in t->loss; the daemon builds the backward graph and the optimizer. One run
 * consumes micro-batch x device_iterations x gradient_accumulation x replicas samples and
 * takes device_iterations optimizer steps. Outputs default to Final. Errors as
 * ipuof_model_compile(), plus IPUOF_E_INVAL for a loss that is not a graph output or not
 * one value per replica, or an optimizer parameter out of range. A loss no trainable
 * weight reaches compiles (PopTorch's TrainingSession): the runs change no weight.
 */
IPUOF_API int ipuof_model_compile_training(ipuof_client *c, const void *onnx, size_t len,
                                           const struct ipuof_model_opts *opts,
                                           const struct ipuof_training_opts *t,
                                           ipuof_model **out);
IPUOF_API int ipuof_model_compile_training_file(ipuof_client *c, const char *path,
                                                const struct ipuof_model_opts *opts,
                                                const struct ipuof_training_opts *t,
                                                ipuof_model **out);

/*
 * An inference model (PopTorch's inferenceModel) of the same graph with training's current
 * weights, copied inside the daemon (no round trip through the client). opts gives its
 * device iterations, replicas, micro-batch and output modes (outputs default to All); a
 * micro_batch of 0 and a NULL name mean the training model's. Later training does not
 * change it until ipuof_model_copy_weights(inference, training).
 */
IPUOF_API int ipuof_model_inference_from(ipuof_model *training,
                                         const struct ipuof_model_opts *opts,
                                         ipuof_model **out);
/* The same with the model options of a compile options handle (NULL: every default; only
 * read): its device iterations, replicas, micro-batch (the training model's when not set),
 * output modes and name (the training model's when not set). IPUOF_E_INVAL for a handle
 * with a loss. Added in IPUOF_CLIENT_0.10. */
IPUOF_API int ipuof_model_inference_from_with(ipuof_model *training,
                                              const ipuof_compile_opts *opts,
                                              ipuof_model **out);

IPUOF_API int ipuof_model_is_training(const ipuof_model *m);
IPUOF_API unsigned ipuof_model_gradient_accumulation(const ipuof_model *m);

/* PopTorch's setOptimizer: new hyper-parameters and parameter groups between runs, without
 * recompiling. The kind cannot change, nor can momentum (SGD, RMSprop) or centered
 * (RMSprop) become non-zero when they were zero at compile (their state is planned then).
 *
 * ipuof_model_set_optimizer_with() (the way to call it) takes the optimizer of a compile
 * options handle as its optimizer setters left it (kind, parameters, groups and their
 * weights, the float16 parameters; only read, so one handle may serve many calls); the
 * handle's other options are not read. IPUOF_E_INVAL for a NULL handle or one whose
 * optimizer is PopTorch's default (kind 0: set_optimizer_kind() first), and what the
 * daemon refuses (a kind other than the compile's), with the sentence on m's client.
 * Added in IPUOF_CLIENT_0.11.
 *
 * ipuof_model_set_optimizer() and ipuof_model_set_optimizer_half() below do the same from
 * the public structs, for programs written against them. */
IPUOF_API int ipuof_model_set_optimizer_with(ipuof_model *m, const ipuof_compile_opts *o);
IPUOF_API int ipuof_model_set_optimizer(ipuof_model *m, const struct ipuof_optimizer *o);

/* What an optimizer does for float16 training, beyond struct ipuof_optimizer.
 * Accumulators kept in float16 rather than float32 (PopTorch's accum_type,
 * first_order_momentum_accum_type (SGD: velocity_accum_type) and
 * second_order_momentum_accum_type = torch.float16): each non-zero field rounds that state
 * to float16 after every step, stored scaled (the gradient by the loss scale, SGD's
 * velocity by velocity_scaling). accum: the accumulated gradient; first_order: SGD's
 * velocity, Adam's, AdamW's and LAMB's first moment, RMSprop's mean of g^2; second_order:
 * Adam's, AdamW's and LAMB's second moment, centered RMSprop's mean of g.
 * Automatic loss scaling (PopART's automaticLossScalingSettings): every als_update_period
 * steps (0 means 1) the loss scale (loss_scaling x a factor the model keeps, from 1; read
 * as the state tensors optimizer:loss_scale_update_factor and optimizer:final_loss_scale)
 * is halved when more than als_threshold of the trained gradients' elements, scaled by it
 * as float16, are at or above als_bin_edge x 65504 (0 means 0.125) or overflow, and
 * doubled otherwise. Every trained weight's gradient is counted. */
struct ipuof_optimizer_half {
    int accum_float16;
    int first_order_float16;
    int second_order_float16;
    int auto_loss_scaling;
    unsigned als_update_period;
    float als_bin_edge;
    float als_threshold;        /* PopART's default: 1e-7 */
};

/* ipuof_model_set_optimizer with the float16 settings h (NULL: all float32, no automatic
 * loss scaling, which is what ipuof_model_set_optimizer and a training compile set). */
IPUOF_API int ipuof_model_set_optimizer_half(ipuof_model *m, const struct ipuof_optimizer *o,
                                             const struct ipuof_optimizer_half *h);

/*
 * The optimizer state of a training model (PopTorch's optimizer.state_dict() after
 * training, load_state_dict() before the next run): "optimizer:step" (one int64, the steps
 * taken) and "optimizer:<slot>:<weight>" (float32 of the weight's shape), slot as
 * torch.optim names it: momentum_buffer (SGD, RMSprop with momentum), exp_avg and
 * exp_avg_sq (Adam, AdamW, LAMB), square_avg and grad_avg (RMSprop; grad_avg when centered).
 * bytes must be the tensor's size. Errors: IPUOF_E_NOTFOUND (no such state: a wrong slot or
 * weight, or the optimizer keeps none), IPUOF_E_SHAPE (wrong size), IPUOF_E_INVAL (a negative
 * step count), as ipuof_model_read_weight otherwise.
 */
IPUOF_API int ipuof_model_read_state(ipuof_model *m, const char *name, void *dst,
                                     size_t bytes);
IPUOF_API int ipuof_model_write_state(ipuof_model *m, const char *name, const void *src,
                                      size_t bytes);

/*
 * The gradient of trainable weight `weight` (float32 of its shape) that the last optimizer
 * step applied, after the reduction over accumulation steps and replicas (PopTorch's
 * Gradient___<weight> anchor); zeros before the first run. On the wire a read_weights of
 * "gradient:<weight>". Errors: IPUOF_E_INVAL (the model does not train, or the weight is
 * frozen or a buffer), as ipuof_model_read_weight otherwise.
 */
IPUOF_API int ipuof_model_read_gradient(ipuof_model *m, const char *weight, void *dst,
                                        size_t bytes);

/* The weights a model can read and write: name, dtype, shape (data NULL) and kind
 * (enum ipuof_weight_kind). Borrowed from the model. */
enum ipuof_weight_kind {
    IPUOF_WEIGHT_TRAINABLE = 1,
    IPUOF_WEIGHT_BUFFER = 2,    /* BatchNormalization running statistics */
    IPUOF_WEIGHT_FROZEN = 3
};
IPUOF_API size_t ipuof_model_weight_count(const ipuof_model *m);
IPUOF_API int ipuof_model_weight_info(const ipuof_model *m, size_t i, struct ipuof_tensor *t,
                                      int *kind);

/* Reads weight name into dst (bytes must be its size) / writes it from src, like PopTorch's
 * copyWeightsToHost / copyWeightsToDevice. Errors: IPUOF_E_NOTFOUND, IPUOF_E_SHAPE. */
IPUOF_API int ipuof_model_read_weight(ipuof_model *m, const char *name, void *dst,
                                      size_t bytes);
IPUOF_API int ipuof_model_write_weight(ipuof_model *m, const char *name, const void *src,
                                       size_t bytes);

/* Copies every weight of src into the same-named weight of dst, inside the daemon. */
IPUOF_API int ipuof_model_copy_weights(ipuof_model *dst, ipuof_model *src);

/* The model as ONNX bytes whose initializers are the current (trained) weights: to a file,
 * or to *bytes (caller-owned, free()). */
IPUOF_API int ipuof_model_save_onnx(ipuof_model *m, const char *path);
IPUOF_API int ipuof_model_save_onnx_buffer(ipuof_model *m, void **bytes, size_t *len);

/* ---- data loading --------------------------------------------------------------------- */

/*
 * A host data loader with poptorch.DataLoader's semantics, and a reader for IDX (MNIST
 * format) files that plugs into it.
 *
 * A dataset is a set of callbacks, as a torch Dataset: length() and get(index), plus the
 * description of one item's fields (name, dtype, per-sample shape). The loader asks it for
 * the items of one combined batch of B x D x A x R samples (micro-batch x device
 * iterations x gradient accumulation x replicas, PopTorch's combinedBatchSize) and hands
 * them back as one contiguous tensor per field, of shape [B*D*A*R, *sample_shape], ready
 * for ipuof_model_run(). Sample k of a combined batch is the k-th item of the epoch's order
 * (the dataset order, or its shuffled permutation); the daemon splits dim 0
 * iteration-major, [D][A][R][B]: sample k goes to device iteration k / (A*R*B),
 * accumulation step (k / (R*B)) % A, replica (k / B) % R, position k % B of the micro-batch.
 *
 * Epochs. An epoch has floor(N / (B*D*A*R)) batches for a dataset of N items (with
 * num_processes P > 1: floor(N / (B*D*A*R*P)), see ipuof_dataloader_opts): the last
 * N mod (B*D*A*R) items of the epoch's order are dropped, as PopTorch's default
 * drop_last=True does, because the IPU needs complete combined batches. With keep_last the
 * epoch has one more, short batch holding the rest (struct ipuof_batch.samples says how
 * many); it is meant for host-side use only: ipuof_model_run() refuses it (IPUOF_E_SHAPE).
 *
 * Shuffle. The order of epoch e is a permutation of 0..N-1, the same on every machine for
 * the same seed: a Fisher-Yates shuffle of the identity (for i from N-1 down to 1, swap
 * entries i and j) where j is drawn from xoshiro256** as r mod (i+1) for the first output r
 * >= 2^64 mod (i+1) (unbiased). The generator's four state words are four successive
 * outputs of splitmix64 started at splitmix64(seed) ^ e, splitmix64 being the usual
 * "state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
 * z = (z ^ z >> 27) * 0x94D049BB133111EB; return z ^ z >> 31". Integer arithmetic only.
 *
 * Threading. A loader is used by one thread at a time, like every handle. In
 * IPUOF_DATALOADER_SYNC mode the dataset's callbacks run inside ipuof_dataloader_next(), on
 * the caller's thread. In IPUOF_DATALOADER_ASYNC mode (poptorch's AsynchronousDataAccessor)
 * one background thread owned by the loader calls get() (and errmsg()) to prepare the next
 * combined batch while the caller uses the current one (double buffering: two batches in
 * memory). get() is then called from that thread, while the caller's thread runs, but never
 * from two threads at once; a dataset that the caller also touches itself meanwhile must
 * lock. length() is only called by ipuof_dataloader_new(), on the caller's thread. No
 * thread waits by spinning: the two sides wait on condition variables.
 */

/* At most this many fields per item. */
#define IPUOF_DATASET_MAX_FIELDS 16

/* Room for any sentence a constructor writes to its errbuf (a longer one, which only a
 * very long file name makes, is cut). */
#define IPUOF_ERRBUF_SIZE 512

/* One field of an item: a name (the name the batch's tensor carries, see
 * ipuof_dataloader_opts.names), an element type and the shape of one sample, without the
 * batch dimension: rank 0 (a scalar) to 7, every dim >= 1. */
struct ipuof_field {
    const char *name;
    int dtype;                  /* enum ipuof_dtype */
    int rank;
    int64_t dims[8];
};

struct ipuof_dataset_ops {
    /* The number of items. Called once, by ipuof_dataloader_new(). */
    size_t (*length)(void *ds);
    /*
     * Writes item index (0 <= index < length) of ds: for each field f, exactly one sample's
     * bytes (little-endian, row-major; dims product x dtype size) to outs[f]. The buffers
     * belong to the loader, are aligned for their dtype and are borrowed for the call. user
     * is ipuof_dataloader_opts.user. Returns IPUOF_OK, or an IPUOF_E_* code to fail the
     * batch (any other value is reported as IPUOF_E_IO).
     */
    int (*get)(void *ds, size_t index, void *const *outs, void *user);
    /* Optional (may be NULL): a sentence saying why the last get() failed, called on the
     * thread that called get(), right after it failed. Borrowed; the loader copies it. */
    const char *(*errmsg)(void *ds, void *user);
};

/* A dataset as the loader takes it. Every pointer is borrowed: ds and ops must outlive the
 * loaders that use them; fields (and their names) are copied by ipuof_dataloader_new(). */
struct ipuof_dataset {
    const struct ipuof_dataset_ops *ops;
    void *ds;
    const struct ipuof_field *fields;
    size_t n_fields;            /* 1 to IPUOF_DATASET_MAX_FIELDS */
};

/* poptorch.DataLoaderMode. */
enum ipuof_dataloader_mode {
    IPUOF_DATALOADER_SYNC = 0,  /* get() runs inside ipuof_dataloader_next() */
    IPUOF_DATALOADER_ASYNC = 1, /* a background thread prepares the next combined batch */
    /* PopTorch's AsyncRebatched: as ASYNC, and ipuof_dataloader_opts.workers threads
     * produce single samples (worker w: samples w, w + workers, ... of the epoch) while
     * the loader builds the batches, so no worker's remainder is dropped: an epoch holds
     * floor(N / combined) batches whatever the workers. get() is then called from several
     * threads at once: the dataset must allow that. */
    IPUOF_DATALOADER_ASYNC_REBATCHED = 2
};

/* At most this many workers per loader. */
#define IPUOF_DATALOADER_MAX_WORKERS 64

/* Options of a loader; zero is the default of every field (PopTorch's defaults). */
struct ipuof_dataloader_opts {
    unsigned batch_size;            /* B, the micro-batch; 0 means 1 */
    unsigned device_iterations;     /* D; 0 means 1; as ipuof_model_opts.device_iterations */
    unsigned gradient_accumulation; /* A; 0 means 1, which inference needs; as
                                       ipuof_training_opts.gradient_accumulation */
    unsigned replicas;              /* R; 0 means 1; as ipuof_model_opts.replicas */
    int shuffle;                    /* a new permutation every epoch (see above) */
    uint64_t seed;                  /* the shuffle's seed */
    int keep_last;                  /* 0: drop the incomplete last batch (drop_last=True);
                                       1: return it short (drop_last=False), host use only */
    int mode;                       /* enum ipuof_dataloader_mode */
    const char *const *names;       /* NULL, or one name per field (a NULL entry keeps the
                                       field's name) for the batch's tensors, e.g. the
                                       model's input names; copied */
    void *user;                     /* passed to get() and errmsg() */
    /* A job of several processes (configureProcessId): every process shuffles the same way
     * (same seed) and takes its share: of the job's combined batch of
     * B x D x A x R x num_processes samples in the epoch's order, laid out [D][A][P][R][B],
     * process p takes the rows of its replicas (p x R .. (p+1) x R - 1) of every (d, a)
     * step, so the processes together cover each epoch once, exactly as one process with
     * R x num_processes replicas would. num_processes 0: from the environment, as
     * ipuof_process_env(); 1: not distributed. keep_last is refused with several. */
    unsigned process_id;
    unsigned num_processes;
    unsigned workers;               /* IPUOF_DATALOADER_ASYNC_REBATCHED: threads producing
                                       samples (0 means 1; at most
                                       IPUOF_DATALOADER_MAX_WORKERS); ignored otherwise */
};

/* One combined batch. Borrowed from the loader, with the tensors and their bytes: valid
 * until the next call to ipuof_dataloader_next(), _reset(), _set_epoch() or _free() on the
 * loader it came from. Copy what must live longer. */
struct ipuof_batch {
    uint64_t epoch;
    size_t index;               /* the batch's number in its epoch, from 0 */
    size_t samples;             /* B*D*A*R; fewer only in a short last batch (keep_last) */
    size_t n_tensors;           /* one per field, in the dataset's field order */
    const struct ipuof_tensor *tensors; /* shape [samples, *sample_shape]; pass to
                                           ipuof_model_run(m, b->tensors, b->n_tensors) */
};

typedef struct ipuof_dataloader ipuof_dataloader;

/*
 * A loader over dataset (opts may be NULL: all defaults). It calls dataset->ops->length()
 * once, allocates the batch buffers (two in async mode) and, in async mode, starts its
 * thread, which begins preparing the first batch of epoch 0 at once. On success *out is
 * caller-owned: free it with ipuof_dataloader_free() before the dataset.
 * Errors (a sentence in errbuf[0..errlen), which may be NULL): IPUOF_E_INVAL (a NULL
 * callback, a field with an unknown dtype, a bad rank or dim, two fields with one name, an
 * empty dataset, fewer items than one combined batch without keep_last, an unknown mode),
 * IPUOF_E_NOMEM (the buffers, or the thread could not be started).
 */
IPUOF_API int ipuof_dataloader_new(const struct ipuof_dataset *dataset,
                                   const struct ipuof_dataloader_opts *opts,
                                   ipuof_dataloader **out, char *errbuf, size_t errlen);

/* Stops the thread (waiting for a get() in progress to return; items not yet fetched are
 * not fetched), even in the middle of an epoch, and frees the loader. NULL is a no-op. */
IPUOF_API void ipuof_dataloader_free(ipuof_dataloader *dl);

/*
 * The next combined batch of the current epoch in *out (see struct ipuof_batch for how long
 * it stays valid). After the epoch's last batch, one call returns IPUOF_OK with *out NULL;
 * the call after that starts the next epoch (with its own permutation), as a new
 * `for batch in loader:` does in Python. So a loop "while next() == IPUOF_OK and *out" reads
 * one epoch.
 * Errors: the code get() returned, with a sentence naming the item, the batch and the
 * epoch, followed by errmsg()'s sentence when the dataset has one. In async mode an error
 * of the background thread is returned by the call that would have returned that batch.
 * A failed call does not move the loader: the next call tries the same batch again,
 * calling get() for each of its items again. IPUOF_E_INVAL when dl or out is NULL.
 */
IPUOF_API int ipuof_dataloader_next(ipuof_dataloader *dl, const struct ipuof_batch **out);

/* Goes to the first batch of epoch epoch (whose permutation depends on seed and epoch),
 * dropping what the background thread prepared for another position. Setting the epoch
 * the next batch belongs to anyway (the usual "for each epoch: set_epoch(e); read it"
 * loop) keeps what was prepared. */
IPUOF_API int ipuof_dataloader_set_epoch(ipuof_dataloader *dl, uint64_t epoch);

/* As ipuof_dataloader_set_epoch(dl, 0): the loader starts again as it was created. */
IPUOF_API int ipuof_dataloader_reset(ipuof_dataloader *dl);

/* The current epoch: that of the batches returned since the last end of an epoch (0 for a
 * new loader); the call that reports an epoch's end moves it to the next. */
IPUOF_API uint64_t ipuof_dataloader_epoch(const ipuof_dataloader *dl);

/* Samples per combined batch, B*D*A*R (poptorch's combinedBatchSize). */
IPUOF_API size_t ipuof_dataloader_combined_batch_size(const ipuof_dataloader *dl);

/* Batches per epoch: floor(N / combined), + 1 with keep_last when N is not a multiple; in a
 * job of P processes floor(N / (combined x P)). */
IPUOF_API size_t ipuof_dataloader_batches_per_epoch(const ipuof_dataloader *dl);

/* The number of items, N, length() returned. */
IPUOF_API size_t ipuof_dataloader_length(const ipuof_dataloader *dl);

/* The sentence explaining the last failure on dl ("" after success). Borrowed until the
 * next call on dl. */
IPUOF_API const char *ipuof_dataloader_errmsg(const ipuof_dataloader *dl);

/* ---- IDX (MNIST format) datasets ---- */

typedef struct ipuof_idx_dataset ipuof_idx_dataset;

struct ipuof_idx_opts {
    float mean;                 /* pixels become (x / 255 - mean) / std, in float; */
    float std;                  /* defaults 0 and 1 (std 0 means 1); MNIST's usual
                                   normalisation is mean 0.1307, std 0.3081 */
    size_t limit;               /* keep only the first limit items; 0: all of them */
};

/*
 * Reads an IDX image file (magic 0x00000803: unsigned bytes, dims [N, rows, cols]) and,
 * unless labels_path is NULL, an IDX label file (0x00000801: unsigned bytes, [N]), each
 * plain or gzip-compressed (told apart by content, not by name), such as MNIST's and
 * Fashion-MNIST's train-images-idx3-ubyte.gz. Both are read whole and checked: magic, equal
 * counts, a length that matches the header exactly (no missing or extra bytes), caps (at
 * most 2^28 items and 2^24 pixels per image). Only the first opts->limit items are kept.
 * opts may be NULL. Items have two fields: "image", float [1, rows, cols], normalised as
 * opts says, and "label", int64 [] (just "image" without a label file). On success *out is
 * caller-owned (ipuof_idx_dataset_free()); the dataset is read-only from then on, so its
 * get() may run on any thread, even several at once.
 * Errors (a sentence naming the file and what is wrong in errbuf[0..errlen), which may be
 * NULL): IPUOF_E_NOTFOUND (no such file), IPUOF_E_IO (unreadable, corrupt compressed data),
 * IPUOF_E_INVAL (not an IDX file of the kind wanted, truncated, extra bytes, counts that
 * differ, empty, over a cap, a mean or std that is not finite), IPUOF_E_UNSUPPORTED (an IDX
 * element type other than unsigned byte), IPUOF_E_NOMEM.
 */
IPUOF_API int ipuof_idx_dataset_open(const char *images_path, const char *labels_path,
                                     const struct ipuof_idx_opts *opts,
                                     ipuof_idx_dataset **out, char *errbuf, size_t errlen);

/* Frees the dataset; loaders using it must be freed first. NULL is a no-op. */
IPUOF_API void ipuof_idx_dataset_free(ipuof_idx_dataset *d);

/* Fills *out with d's callbacks and fields (borrowed from d) for ipuof_dataloader_new(). */
IPUOF_API void ipuof_idx_dataset_describe(ipuof_idx_dataset *d, struct ipuof_dataset *out);

/* Items kept (after opts->limit). */
IPUOF_API size_t ipuof_idx_dataset_length(const ipuof_idx_dataset *d);

#ifdef __cplusplus
}
#endif

#endif /* IPUOF_CLIENT_H */

/*
 * config.h — ipuofd's configuration: defaults, the INI file (libinih), command-line
 * overrides, validation and the reload rules for SIGHUP.
 *
 * A struct cfg is a plain value: load into a fresh one, validate, then swap. Nothing here
 * touches the running server; config.c has no globals.
 */
#ifndef IPUOFD_CONFIG_H
#define IPUOFD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CFG_MAX_IPUS 64
#define CFG_TOKEN_MAX 256
#define CFG_POD_MAX_PEERS 16       /* peers of one daemon's Pod ([pod] peers) */
#define CFG_POD_NAME_MAX 64        /* a host's name in the Pod, terminator included */

/* One peer of the Pod: "NAME=HOST:PORT" of [pod] peers. */
struct cfg_pod_peer {
    char name[CFG_POD_NAME_MAX];
    char addr[256];                /* HOST:PORT of its Pod port */
};

struct cfg {
    /* [server] */
    char listen[256];            /* HOST:PORT; port 0 = ephemeral */
    char admin_socket[108];      /* "" = none */
    int admin_socket_default;    /* not set by the file or a flag: failing to create it only
                                  * warns (a daemon run by hand may not write /run) */
    char port_file[4096];        /* command line only: where to write the bound port */
    unsigned max_connections;
    uint32_t max_header_bytes;
    uint32_t max_payload_bytes;
    uint32_t prehello_max_bytes;
    unsigned handshake_timeout;  /* seconds */
    unsigned idle_timeout;       /* seconds, 0 = never; applies to clients holding nothing */
    unsigned admin_connections;  /* admin-socket connections allowed beyond max_connections */
    int allow_unauthenticated;   /* 1: a non-loopback listen without auth_token is meant */
    uint64_t max_output_bytes;
    unsigned frames_per_read;
    char auth_token[CFG_TOKEN_MAX];
    char admin_token[CFG_TOKEN_MAX];
    unsigned drain_timeout;      /* seconds */
    unsigned max_waiters;
    unsigned max_waiters_per_client; /* of them, from one process (pid and peer host) */
    unsigned job_timeout;        /* seconds a job of several processes waits for all of them */
    uint64_t max_model_bytes;    /* largest ONNX model accepted */
    unsigned cache_entries;      /* compiled executables kept for reuse */
    uint64_t cache_bytes;        /* bytes the executable cache's entries may hold in all */
    unsigned worker_threads;     /* 0 = one per CPU */
    /* [devices] */
    unsigned ipus;
    uint64_t ipu_memory;         /* bytes */
    uint64_t arena_memory;       /* bytes of host memory the executables' arenas may take
                                  * in all (sim_exe_host_arena_bytes); 0: three quarters
                                  * of the host's physical memory */
    uint64_t host_memory;        /* bytes of run buffers (host-side streams) per partition,
                                  * and of cached executables not in use */
    unsigned tiles;
    /* [cost]: the simulated clock's rates (sim's struct sim_cost_cfg) */
    double cost_flops_per_s;
    double cost_mem_bytes_per_s;
    double cost_exchange_bytes_per_s;
    double cost_link_bytes_per_s;
    double cost_gw_link_bytes_per_s; /* between the daemons of a Pod (GW-Links) */
    double cost_host_bytes_per_s;
    double cost_sync_seconds;
    double cost_efficiency;      /* convolutions */
    double cost_matmul_efficiency; /* MatMul and Gemm */
    char cost_ipu_type[16];      /* "gc200" or "bow": the clock and the rates it implies */
    double cost_cs_cycles;       /* fixed cycles of a compute set (sim_cost_cfg.cs_cycles) */
    double cost_host_xfer_seconds; /* fixed cost of a host exchange */
    double cost_step_seconds;    /* fixed cost of a run */
    /* [pod]: daemons of several hosts (docs/pod-tools.md); none without peers */
    char pod_name[CFG_POD_NAME_MAX]; /* this host's name in the Pod; default: gethostname */
    char pod_listen[256];        /* HOST:PORT of the Pod port (peers, the rendezvous store) */
    char pod_peers[4096];        /* "NAME=HOST:PORT, ..." ("" = no Pod) */
    char pod_token[CFG_TOKEN_MAX]; /* what peers present in their hello (and this daemon in
                                  * its); needed when pod_listen is not loopback */
    unsigned pod_hello_interval; /* seconds between hellos to each peer */
    unsigned pod_timeout_ms;     /* a peer silent this long is unreachable; a collective
                                  * or rendezvous waits at most this long */
    int pod_sum_daemons;         /* [pod] sum = daemons: each daemon sums its replicas, then
                                  * gloo's ring sums the daemons' sums (less traffic, other
                                  * rounding); replicas (0, the default): every replica's
                                  * gradient in one left-to-right sum, the bits of one daemon */
    unsigned pod_kv_max_keys;    /* rendezvous entries per job */
    uint32_t pod_kv_max_value_bytes; /* largest value of one entry */
    uint64_t pod_kv_max_bytes;   /* every byte of every job together, records and replies
                                  * queued to waiting gets included */
    unsigned pod_max_connections; /* Pod-port connections, apart from [server]
                                   * max_connections; each may have 4096 / this gets waiting */
    /* [log] */
    int log_level;
    /* [server] service keys: metrics (daemon/metrics.c), TLS (daemon/conn/tls.c); docs/service.md */
    char metrics_listen[256];    /* HOST:PORT or PORT (127.0.0.1) of /metrics; "" = off */
    char tls_cert_file[1024];    /* PEM certificate chain of the client port; "" = no TLS */
    char tls_key_file[1024];     /* its private key (PEM) */
    char tls_ca_file[1024];      /* CAs that sign client certificates (tls_auth_clients) */
    char tls_auth_clients[16];   /* "no", "optional" or "yes" */
    char tls_admin_subjects[1024]; /* client certificate subjects (RFC 2253 strings,
                                  * separated by ';') that carry admin rights */
    /* [faults] */
    char faults[4096];           /* each "inject = JSON" line, '\n'-terminated, in file order:
                                  * read by main() as IPUOF_FAULTS is (daemon/state/faults.h) */
};

/* Fills c with the documented defaults. */
void cfg_defaults(struct cfg *c);

/*
 * Reads the INI file at path into c (which holds defaults or earlier values). On error
 * returns -1 with a sentence naming the file, line, key and what is accepted in err;
 * c may then be partly updated and must be discarded.
 */
int cfg_load_file(struct cfg *c, const char *path, char *err, size_t errlen);

/*
 * Sets one key from a "section.key" or bare key name (used for command-line flags and by
 * the file loader). Returns 0, or -1 with a sentence in err.
 */
int cfg_set(struct cfg *c, const char *section, const char *key, const char *value, char *err,
            size_t errlen);

/* 1 when the host of a "HOST:PORT" listen address is a loopback address (127.0.0.0/8,
 * ::1, localhost); 0 for any other address, a name, or an empty host (every address). */
int cfg_listen_is_loopback(const char *listen);

/* Cross-field checks (e.g. prehello cap below the header cap; a non-loopback listen
 * address needs auth_token or allow_unauthenticated). 0 or -1 with err. */
int cfg_validate(const struct cfg *c, char *err, size_t errlen);

/*
 * Parses c->pod_peers into out[0..CFG_POD_MAX_PEERS): each "NAME=HOST:PORT" (names of
 * letters, digits, '.', '_', '-'; distinct, and not this daemon's pod_name), separated by
 * commas or spaces. The count (0: no Pod), or -1 with a sentence naming the entry in err.
 */
int cfg_pod_peers(const struct cfg *c, struct cfg_pod_peer *out, char *err, size_t errlen);

/*
 * Copies the keys that a reload may change from next into cur, and writes to ignored a
 * comma-separated list of keys that differ but need a restart ("" when none).
 */
void cfg_apply_reload(struct cfg *cur, const struct cfg *next, char *ignored, size_t len);

/* The service keys' cross-field checks (daemon/conn/tls.c): tls_auth_clients is no, optional or
 * yes; a key file with the certificate; client certificates need tls_ca_file; the files
 * are readable; metrics_listen parses. 0 or -1 with err. cfg_validate calls it. */
int svc_cfg_validate(const struct cfg *c, char *err, size_t errlen);

/* Parses "123", "900MiB", "1GiB", "64KiB", "2MB"... into bytes. 0 or -1. */
int cfg_parse_bytes(const char *s, uint64_t *out);

#endif

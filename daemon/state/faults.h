/*
 * faults.h — the table of injected faults (ipuctl fault, IPUOF_FAULTS) and their matching.
 *
 * No I/O, no event loop, no allocation: a fixed table the event-loop thread owns, fed the
 * events of the trigger points (an attach, a compile, a weights write, a run on some IPUs)
 * and answering which fault fires. faults/fault_at.c asks it at each trigger point a job
 * meets and does what a fired fault does (the error reply, the IPUs in error, the cut
 * connection); req_fault.c serves ipuctl fault's requests.
 */
#ifndef IPUOFD_FAULTS_H
#define IPUOFD_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#define FAULTS_MAX 64
#define FAULTS_NAME_MAX 64

enum fault_kind {
    FAULT_RECOVERABLE = 0,       /* recoverable:ACTION: RecoverableError(ACTION) */
    FAULT_UNRECOVERABLE = 1,     /* UnrecoverableError; the IPU is out of service */
    FAULT_HOST_SYNC_TIMEOUT = 2, /* recoverable, IPU_RESET: a host sync timed out */
    FAULT_FABRIC_DISCONNECT = 3, /* the client's connection is cut */
    FAULT_SOC_ERROR = 4,         /* recoverable, IPU_RESET: CIUERRVR.IPUSOFTERR (GCDA's) */
    FAULT_HANG = 5,              /* the IPU stops answering: the request waits for a reset
                                  * (or the client's own timeout); IPU_RESET clears it */
    FAULT_TILE_OOM = 6,          /* poplar_graph_memory_allocation_error; the IPU is fine */
    FAULT_STREAM_OOM = 7,        /* poplar_stream_memory_allocation_error; the IPU is fine */
    FAULT_DAEMON_KILL = 8,       /* the daemon dies as if killed (SIGKILL) */
    /* Link faults: the link from this daemon to one Pod peer (fault.peer); see
     * docs/faults.md "Link faults". Not matched by faults_match: faults_link reads them. */
    FAULT_LINK_PARTITION = 9,    /* link:partition:PEER: the peer is unreachable (hellos, the
                                  * collective of a Pod job it is in) while armed */
    FAULT_LINK_LATENCY = 10,     /* link:latency=MS:PEER: each hello and each collective run
                                  * of a Pod job with the peer is delayed MS first */
    FAULT_LINK_RESET_PEER = 11   /* link:reset-peer:PEER: the next collective run of a Pod
                                  * job with the peer fails once (count times) */
};

/* The longest kind name faults_kind_name writes ("link:latency=MS:" and a peer name). */
#define FAULTS_KIND_MAX 96
#define FAULTS_LINK_MS_MAX 60000

/* The trigger points, in the order a program meets them (load: a compiled executable is
 * placed on the IPUs, as Poplar's Engine::load; collective: a training run of a job whose
 * partition spans a Pod, before its first collective with the other daemons). The values
 * are not the order. */
enum fault_at { FAULT_AT_ATTACH = 0, FAULT_AT_COMPILE = 1, FAULT_AT_WEIGHTS = 2,
                FAULT_AT_RUN = 3, FAULT_AT_LOAD = 4, FAULT_AT_COLLECTIVE = 5 };
#define FAULT_AT_COUNT 6

struct fault {
    unsigned id;                 /* 1, 2, ...; never reused while the daemon runs */
    enum fault_kind kind;
    int recovery;                /* IPUOF_RECOVERY_*: what the error says and the IPU needs */
    int has_ipu;                 /* target: IPU ipu, else partition, else (both empty) any */
    unsigned ipu;
    char partition[FAULTS_NAME_MAX];
    char host[FAULTS_NAME_MAX];  /* --host: this daemon's Pod name, given so ("" none) */
    char peer[FAULTS_NAME_MAX];  /* link faults: the other Pod host of the link */
    unsigned link_ms;            /* link:latency: the delay */
    enum fault_at at;
    unsigned after;              /* matching events skipped before it may fire */
    unsigned count;              /* fires at most this often (>= 1) */
    double probability;          /* (0, 1]: chance each eligible event fires */
    uint64_t seed;
    uint64_t rng;                /* xorshift64* state, from seed */
    unsigned seen, fired;
    uint64_t armed_ms;           /* when it was added (srv_now_ms's clock) */
    uint64_t duration_ms;        /* armed for this long after armed_ms; 0: until cleared */
    unsigned wait_ms;            /* host-sync-timeout: how long the run waits first */
    int rearm;                   /* --rearm-on-reset: a reset of the IPUs it hit re-arms it */
    unsigned rearmed;            /* times re-armed so */
    uint64_t hit;                /* bit i: IPU i is in error from it (for rearm) */
};

#define FAULTS_PEERS_MAX 1200

struct fault_table {
    struct fault f[FAULTS_MAX];
    unsigned n;
    unsigned next_id;
    uint64_t fired_total;        /* times any fault fired (faults_match), for /metrics */
    char self[FAULTS_NAME_MAX];  /* this daemon's Pod host name ("" none): --host's own */
    char peers[FAULTS_PEERS_MAX]; /* the other Pod hosts' names, each followed by ' ' */
};

/* What a fault asks for, before it is in a table (the strings as ipuctl fault takes them). */
struct fault_spec {
    int has_ipu;
    unsigned ipu;
    const char *partition;       /* NULL or "": none */
    const char *host;            /* NULL or "": this daemon's; else its Pod name (checked) */
    const char *kind;            /* "recoverable:IPU_RESET", "unrecoverable", ... */
    const char *at;              /* NULL or "": "run" */
    unsigned after, count;       /* count 0: 1 */
    double probability;          /* 0: 1 */
    uint64_t seed;
    uint64_t duration_ms;        /* 0: armed until cleared */
    unsigned wait_ms;            /* host-sync-timeout only */
    int rearm;                   /* rearm on reset */
};

/* An empty table (in no Pod: a --host is refused until faults_set_pod). */
void faults_init(struct fault_table *t);

/* The Pod this daemon is in, for --host: self its host name, peers the names of the other
 * hosts (n of them; may be NULL when n is 0). Longer names than the table keeps are cut. */
void faults_set_pod(struct fault_table *t, const char *self, const char *const *peers,
                    unsigned n);

/*
 * Checks spec and adds it as an armed fault; its id in *id (may be NULL). 0, or -1 with a
 * sentence in err saying what was wrong and what would be right (a kind or trigger not
 * known, a host that is not this daemon's (another Pod host's: give it to that host's
 * daemon; or no such host), a kind that cannot happen at its trigger (at collective: only
 * recoverable:PARTITION_RESET, without rearm), both an IPU and a partition, a
 * probability outside (0, 1], a wait for a kind that does not wait, a full table); nothing
 * is added then. n_ipus bounds the IPU id; now_ms starts its duration.
 */
int faults_add(struct fault_table *t, const struct fault_spec *spec, unsigned n_ipus,
               uint64_t now_ms, unsigned *id, char *err, size_t errlen);

/*
 * The link faults armed on the link to Pod host peer at now_ms: returns the id of a
 * link:partition cutting it (0: none) and puts in *latency_ms the sum of the
 * link:latency delays on it (0 none; at most FAULTS_LINK_MS_MAX). Nothing is counted: a
 * partition or a latency is a state while armed, not an event.
 */
unsigned faults_link(struct fault_table *t, const char *peer, uint64_t now_ms,
                     unsigned *latency_ms);

/*
 * A collective run of a Pod job with Pod host peer: the first armed link:reset-peer on
 * that link past its after runs fires (counted; returned) or NULL.
 */
struct fault *faults_link_reset(struct fault_table *t, const char *peer, uint64_t now_ms);

/* Removes fault id (0: every fault). Returns how many were removed. */
unsigned faults_clear(struct fault_table *t, unsigned id);

/*
 * An event at trigger point at on IPUs first .. first + count - 1 of partition part: the
 * first armed fault (oldest first) whose trigger and target match it counts the event and,
 * past its after events, fires when its draw (probability) says so. Returns the fault that
 * fires (borrowed from t; its fired counted), or NULL. A fault that has fired count times
 * no longer matches (it stays listed as fired until cleared), nor does one whose duration
 * has passed at now_ms.
 */
struct fault *faults_match(struct fault_table *t, enum fault_at at, unsigned first,
                           unsigned count, const char *part, uint64_t now_ms);

/* 1 when f's duration has passed at now_ms (it no longer fires; listed until cleared). */
int faults_expired(const struct fault *f, uint64_t now_ms);

/*
 * IPU ipu was reset: a fault armed with rearm that put it in error forgets it, and once
 * no IPU it hit is in error any more it is armed again (fired and seen back to 0, as
 * GCDA's simulateSOCError.rearmOnReset). Returns how many faults were re-armed.
 */
unsigned faults_rearm(struct fault_table *t, unsigned ipu);

/* 1 when f has fired as often as it may. */
int faults_spent(const struct fault *f);

/*
 * Parses IPUOF_FAULTS: a JSON array of objects {"ipu": N | "partition": "NAME", "host":
 * "POD-HOST", "kind":
 * "...", "at": "...", "after_runs": K, "count": N, "probability": P, "seed": S,
 * "duration_ms": D, "wait_ms": W, "rearm_on_reset": true} (a single
 * object is taken as an array of one), adding each; read by proto/jsonparse.c, so its
 * limits hold (64 KiB of text, nesting, a key given twice refused). what names the source
 * in messages ("IPUOF_FAULTS", "the config's [faults] inject"). 0, or -1 with a sentence in
 * err naming the entry and what was wrong; entries before it stay added.
 */
int faults_parse_json(struct fault_table *t, const char *json, const char *what,
                      unsigned n_ipus, uint64_t now_ms, char *err, size_t errlen);

#define FAULTS_LINE_MAX 4096

/*
 * The faults a daemon starts with: each '\n'-terminated line of cfg_lines (the config's
 * [faults] inject lines, may be NULL) and then env (IPUOF_FAULTS, may be NULL or ""), each
 * read by faults_parse_json. 0, or -1 with a sentence in err naming the line or variable.
 */
int faults_load(struct fault_table *t, const char *cfg_lines, const char *env, unsigned n_ipus,
                uint64_t now_ms, char *err, size_t errlen);

/* "recoverable:IPU_RESET", "unrecoverable", ... of a fault, written to buf[0..len) (which
 * is returned). */
const char *faults_kind_name(const struct fault *f, char *buf, size_t len);
/* "attach", "compile", "load", "weights", "run", "collective". */
const char *faults_at_name(enum fault_at at);

/*
 * How strong a reset a recovery action asks for: IPU_RESET 1 < LINK_RESET 2 <
 * PARTITION_RESET 3 < FULL_RESET 4; anything else 0. A reset clears an IPU's error when
 * its level is at least the error's.
 */
int faults_level(int recovery);

#endif

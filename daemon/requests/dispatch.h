/*
 * dispatch.h — the request table: which handler serves each Header body, and what the
 * request needs first (a completed hello, admin rights).
 */
#ifndef IPUOFD_DISPATCH_H
#define IPUOFD_DISPATCH_H

#include <stdint.h>

#include "conn.h"
#include "ipuof.pb-c.h"

struct sim_exe;

/* A handler answers the request itself (reply or error); it never frees h. payload_len raw
 * bytes follow the header: a handler that wants them calls conn_set_sink(), otherwise they
 * are discarded. */
typedef void (*req_fn)(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                       uint32_t payload_len);

struct req_entry {
    Ipuof__Header__BodyCase body;
    const char *name;
    int before_hello;            /* allowed before the hello */
    int admin;                   /* needs admin rights */
    int payload;                 /* takes a raw payload */
    req_fn fn;
    int port;                    /* REQ_CLIENT (0): client connections only; REQ_POD: the Pod
                                  * port's only; REQ_BOTH */
};

enum { REQ_CLIENT = 0, REQ_POD = 1, REQ_BOTH = 2 };

/* Checks the request against its entry and runs the handler. */
void dispatch(struct conn *c, const Ipuof__Header *h, uint32_t payload_len);

/* Handlers, one file per family. */
void req_hello(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_attach(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_detach(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_status(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_health(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_reset(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_vipu(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);

/*
 * Resets the IPUs marked in sel[] (CFG_MAX_IPUS entries, widened to whole partitions where
 * one is held), on behalf of c: each holder's job is told its partition was reset. level
 * (IPUOF_RECOVERY_IPU_RESET for IPUs named by id, _PARTITION_RESET for a partition,
 * _FULL_RESET for all) must clear every selected IPU in error (faults_level), else
 * IPUOF_E_STATE with the reset it needs in err, nothing reset. A held IPU without force is
 * refused: IPUOF_E_BUSY with a sentence naming the holders in err, nothing reset. IPUOF_OK with the reset ids in ids (may be NULL) and their count in
 * *n_ids (may be NULL). The caller serves the waiters afterwards.
 */
int admin_reset_ipus(struct conn *c, unsigned char *sel, int force, int level, uint32_t *ids,
                     unsigned *n_ids, char *err, size_t errlen);

/* The Pod port's requests (req_pod.c): a peer's hello, the rendezvous store. */
void req_pod_hello(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_kv_set(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_kv_get(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_kv_drop(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
/* c is going away: its rendezvous gets stop waiting. */
void req_pod_forget(struct conn *c);
/* Frees every waiting rendezvous get (exit path). */
void req_pod_free_all(struct srv *s);

/* Serves ipuctl fault (inject, list, clear): req_fault.c. */
void req_fault(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);


void req_compile(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_model_chunk(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                     uint32_t payload_len);
void req_run(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_free_model(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                    uint32_t payload_len);
void req_set_optimizer(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                       uint32_t payload_len);
void req_read_weights(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                      uint32_t payload_len);
void req_write_weights(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                       uint32_t payload_len);
void req_copy_weights(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                      uint32_t payload_len);
void req_save_model(struct conn *c, uint64_t req_id, const Ipuof__Header *h,
                    uint32_t payload_len);
void req_trace(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);

/* Drops an unfinished model upload of c, if any (req_compile.c). */
void req_compile_drop_upload(struct conn *c);

/* Answers c's unfinished model upload, if any, with error code and the sentence why, and
 * drops it. 1 when there was one, else 0. */
int req_compile_refuse_upload(struct conn *c, int code, const char *why);

/* c's connection is going away: its trace on a worker, if any, is dropped when done. */
void req_trace_forget(struct conn *c);

/* Takes conn's partition away and tells it why with a Notice (code, sentence). */
void revoke_partition(struct conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

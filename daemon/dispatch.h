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
};

/* Checks the request against its entry and runs the handler. */
void dispatch(struct conn *c, const Ipuof__Header *h, uint32_t payload_len);

/* Handlers, one file per family. */
void req_hello(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_attach(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_detach(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_status(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_health(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
void req_reset(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len);
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

/* Fills *rc with the cost figures of e's last run (or the code and reason why there are
 * none); busy (SIM_MAX_IPUS entries) is caller storage rc points into. */
void req_run_cost(const struct sim_exe *e, Ipuof__RunCost *rc, double *busy);

/* c's connection is going away: its trace on a worker, if any, is dropped when done. */
void req_trace_forget(struct conn *c);

/* Replies to an attach (used by the wait queue too). */
void reply_attached(struct conn *c, uint64_t req_id, const struct dev_partition *p,
                    uint32_t waited_ms);

/* Takes conn's partition away and tells it why with a Notice (code, sentence). */
void revoke_partition(struct conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

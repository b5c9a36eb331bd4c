/*
 * compile_int.h — the inside of a compile, shared by req_compile.c (the requests and the
 * upload), compile_task.c (the worker and the reply), jobs_compile.c (gathering a job's
 * compiles), compile_opts.c (the request's options: checked,
 * decoded into sim_compile_opts, keyed for the cache) and compile_diff.c (compared between
 * a job's processes).
 * Loop thread only, except where a field says otherwise.
 */
#ifndef IPUOFD_COMPILE_INT_H
#define IPUOFD_COMPILE_INT_H

#include <event2/event.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "models.h"
#include "sim.h"

#define MAX_MODE_OPTS 256
#define MAX_CONSTS 64
#define MAX_FROZEN_WEIGHTS 4096 /* weights not to train: ResNet-50's 53 BatchNormalizations
                                 * freeze 106 running statistics */
#define MAX_BLOCKS 256      /* blocks of a placement (PopTorch models use a handful) */
#define MAX_BLOCK_STAGE 4096
#define MAX_NAME_BYTES 4096 /* a tensor, output, loss or block-prefix name in a compile */

/* A value offered for an input that may decide shapes (copied from the request). */
struct constant_in {
    char *name;
    int dtype;
    int rank;
    int64_t dims[SIM_MAX_RANK];
    void *data;
};

/* A compile in progress: the request's options, the model bytes as they arrive, and (once
 * the worker is done) the result. Owned by the connection while uploading, then by the job. */
struct compile_task {
    struct work_item item;
    struct srv *srv;
    uint64_t req_id;                   /* the request of the process that sent it */
    struct job *job;                   /* the job it compiles for, held, once submitted */
    uint8_t *bytes;                    /* model_bytes, filled by the upload */
    size_t len, got;
    uint8_t *chunk;                    /* the sink of the chunk being read: where it goes */
    size_t chunk_len;
    char name[64];
    char *key;                         /* serialised options, for the cache */
    /* The replication factor has two names, one meaning each: replicas_per_process is the
     * request's (one process's replicas, >= 1); opts.replicas is the model's replicas in
     * all: replicas_per_process for a model one process makes alone (compile_begin; an
     * inference model from its training model), replicas_per_process x its processes for
     * the job's shared compile (compile_submit). */
    unsigned replicas_per_process;
    struct sim_compile_opts opts;
    unsigned predict_replicas;         /* the prediction's replicas (0: the compile's) */
    struct sim_output_opt modes[MAX_MODE_OPTS];
    char *mode_names[MAX_MODE_OPTS];
    struct constant_in consts[MAX_CONSTS];
    size_t n_consts;
    struct sim_frozen_input frozen[MAX_CONSTS];
    char *loss;                        /* training when not NULL */
    char *frozen_w[MAX_FROZEN_WEIGHTS]; /* weights not to train */
    char *opt_names;                   /* the optimizer groups' weight names (models.c) */
    struct sim_block_opt blocks[MAX_BLOCKS];
    char *block_prefix[MAX_BLOCKS];    /* owned: blocks[i].prefix */
    int no_cache;
    unsigned proc0, nproc;             /* the processes that share the model it makes */
    unsigned group;                    /* inputReplicaGrouping size (1: none) */
    int group_orthogonal;
    unsigned first_ipu, part_count;
    uint64_t remaining[CFG_MAX_IPUS];  /* free memory of each partition IPU at submit */
    uint64_t host_left;                /* host_memory the partition's models leave free */
    uint64_t host_memory;              /* host_memory at submit (a reload may change the
                                        * configuration while the worker reads this) */
    atomic_int prog_done, prog_total;
    struct event *prog_ev;
    /* results */
    struct cache_entry *entry;
    int cached;
    int rc;
    struct sim_err err;
    uint64_t us;
};

/* ---- compile_task.c: the task on a worker, below the jobs ---- */

/* Frees ct and everything it owns (its bytes, options, progress event). NULL is a no-op. */
void compile_task_free(struct compile_task *ct);
/* The compiler's progress callback (any thread): records done/total and wakes ct's progress
 * event on the loop. ud is ct. */
void compile_task_progress(int done, int total, void *ud);
/* Hands ct to a worker, which finds it in the cache or compiles it; then done(&ct->item)
 * runs on the loop thread, with it->dropped set when a stopping daemon never started it.
 * Progress meanwhile runs on_progress(-1, 0, ct) on the loop. 0, or -1 when out of memory
 * (ct is then still the caller's). */
int compile_task_queue(struct compile_task *ct, void (*done)(struct work_item *),
                       event_callback_fn on_progress);
/* The model ct made (ct->rc IPUOF_OK) on its partition, placed on its IPUs; or NULL with
 * ct->rc and ct->err set. */
struct model *compile_task_model(struct compile_task *ct);
/* Sends the compile reply for m to c (the local shapes of c's slice for a job's model).
 * 0, or -1 with an error sent (out of memory, or a model too large to describe). */
int compile_reply_send(struct conn *c, uint64_t req_id, const struct model *m, int cached,
                       uint64_t us);

/* ---- compile_diff.c ---- */

/* 0 when a and b compile the same model the same way; else 1 and a sentence in msg
 * naming the first option that differs and both values (a is process pa's, b pb's). */
int compile_task_diff(const struct compile_task *a, unsigned pa, const struct compile_task *b,
                      unsigned pb, char *msg, size_t len);

/* ---- compile_opts.c ------------------------------------------------------------------------- */

/* The request's replication factor, a process's replicas: its replicas field, where an
 * old client's 0 means 1 (the one place that rule is read in the daemon). */
unsigned compile_replicas_per_process(const Ipuof__CompileRequest *rq);
/* Checks a compile request's sizes and counts against the daemon's limits and c's
 * partition part before anything is allocated. 0, or -1 with an error sent. */
int compile_request_check(struct conn *c, const struct dev_partition *part, uint64_t req_id,
                          const Ipuof__CompileRequest *rq, uint32_t payload_len);
/* 0 when name (what it names: "output mode", "block prefix", ...) has at most
 * MAX_NAME_BYTES bytes; else -1 with an error sent to c. */
int compile_name_check(struct conn *c, uint64_t req_id, const char *what, const char *name);
/* The wire's output kind k (with EveryN's n) as the simulator's; 0, or -1 for a kind this
 * daemon does not know. */
int compile_map_kind(Ipuof__OutputKind k, struct sim_output_mode *m, unsigned n);
void compile_freeze_constants(struct compile_task *ct, const struct sim_model *m);
int compile_copy_constants(struct conn *c, uint64_t req_id, struct compile_task *ct,
                           const Ipuof__CompileRequest *rq);
/* Caller-owned (free()), or NULL when out of memory. */
char *compile_options_key(const struct compile_task *ct);
/* Bytes of constant input k's value. */
size_t compile_constant_bytes(const struct constant_in *k);
int compile_training_options(struct conn *c, uint64_t req_id, struct compile_task *ct,
                             const Ipuof__CompileRequest *rq);
int compile_placement_options(struct conn *c, uint64_t req_id, struct compile_task *ct,
                              const Ipuof__CompileRequest *rq);
void compile_cost_options(const struct cfg *cfg, struct sim_cost_cfg *k);
/* The request's inputs of the simulated clock (fields 70-73) into ct->opts.cost and
 * ct->predict_replicas; 0, or -1 with an error sent naming the bad value. */
int compile_clock_options(struct conn *c, uint64_t req_id, struct compile_task *ct,
                          const Ipuof__CompileRequest *rq);

#endif

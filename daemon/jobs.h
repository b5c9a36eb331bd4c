/*
 * jobs.h — a job: what one or several host processes hold together, apart from their
 * connections: the partition and the compiled executables with their weights. Every
 * attached connection belongs to a job.
 *
 * A single process attaching alone gets a job of its own (one process, djob_solo): its
 * calls are its job's whole calls, so they run straight from its connection (req_compile.c,
 * req_run.c) and the job ends when the process detaches, disconnects or loses the
 * partition.
 *
 * A job of several processes (PopTorch's configureProcessId) is named by its partition and
 * gathers its processes' calls. One executable is compiled with replicas = local replicas x
 * processes (the global replicas). Process p owns replicas p*Rl .. (p+1)*Rl-1, so in the run
 * layout [D][A][R][B..] its slice of each (d, a) block is Rl contiguous steps: its run bytes
 * are received straight into those rows, and its outputs are gathered from them. A call runs
 * when every process has sent its slice; gradients are then reduced over all global replicas
 * by the executable itself and the one copy of the weights is updated.
 *
 * Everything here runs on the event-loop thread, except the run of a job's work.
 */
#ifndef IPUOFD_JOBS_H
#define IPUOFD_JOBS_H

#include <stdint.h>

#include "ipuof.pb-c.h"

struct conn;
struct srv;
struct model;
struct compile_job;

#define DJOB_MAX_PROCS 64
#define DJOB_KEY_MAX 256               /* bytes of a job key */
#define DJOB_DEFAULT_NAME "ipuof-job"  /* the client's name for a job it was given no name
                                        * for: never joined without a key */

struct dev_partition;

/* Makes c (attached alone to partition p, taken) the one process of a job of its own. 0,
 * or -1 when out of memory (p is then still the caller's). */
int djob_solo(struct conn *c, struct dev_partition *p);

/* Ends the job of one process c belongs to: its models are released (a run in flight is
 * cancelled with cancel_code and freed when it comes back; conn_dying: c is going away),
 * the partition goes back to the pool and the job is freed. */
void djob_solo_end(struct conn *c, int cancel_code, int conn_dying);

/* 1 when c belongs to a job of several processes. */
int djob_shared(const struct conn *c);

/* The partition c's job holds, or NULL (c is not attached). */
struct dev_partition *conn_part(const struct conn *c);

/* The head of the list of c's job's compiled models, or NULL (c is not attached). */
struct model **djob_models(const struct conn *c);

/*
 * Attaches c as process a->process_id of the job named a->partition_name with the key
 * a->job_key (a->num_processes > 1), creating the job and its partition of count IPUs when
 * c comes first. A job is joined by its name and key together: a process with another key
 * is refused without being told anything of the job, so it can neither take a free slot
 * nor end the job; the default name (DJOB_DEFAULT_NAME) without a key is refused, saying
 * how to give one. The attach is answered when every process has come, or with an error
 * to each of them when job_timeout passes first. A process with the right key whose
 * count, process count or id does not fit the job gets an error naming both values.
 */
void djob_attach(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a,
                 unsigned count);

/* c detaches: it gets its reply, and the job ends for the others (an error naming c's
 * process). */
void djob_detach(struct conn *c, uint64_t req_id);

/* c is going away (its connection closes): the job ends for the others. */
void djob_leave(struct conn *c);

/* The job's partition is taken away (reset, shutdown): every process gets a Notice with
 * code and msg, and errors for what it waited for. */
void djob_revoke(struct conn *c, int code, const char *msg);

/* The whole model of c's compile has arrived; cj is taken (held until every process has
 * sent its compile, then compiled once for all of them, or refused naming the difference). */
void djob_compile_ready(struct conn *c, struct compile_job *cj);

/* The job's compile, submitted by c, finished: m (NULL on failure; taken) is the job's
 * model; rc/msg the failure. Replies to every process. */
void djob_compiled(struct conn *c, struct model *m, int rc, const char *msg, int cached,
                   uint64_t us);

/* The job's compile, submitted by c, reports progress p: every process waiting for the
 * compile gets it under its own request id (a client's wait for a long compile is kept
 * alive by progress, so every process needs it, not only the submitter). */
void djob_compile_progress(struct conn *c, const Ipuof__CompileProgress *p);

/* The job's model with this id for c, or NULL. */
struct model *djob_find_model(const struct conn *c, uint32_t id);

/* c frees the job's model id: it is freed once every process has freed it. 0, or -1 when
 * there is no such model. */
int djob_free_model(struct conn *c, uint32_t id);

/* Runs c's slice of a call of the job's model m (checked against the local shapes). */
void djob_run(struct conn *c, uint64_t req_id, const Ipuof__RunRequest *rq,
              uint32_t payload_len, struct model *m);

/* The processes of every job for a status reply: *out (caller frees with free(); its
 * messages point into the jobs, valid until the loop runs again) and its count. 0, or -1
 * when out of memory. */
int djob_status(const struct srv *s, Ipuof__JobProcess ***out, size_t *n);

/* ---- implemented by req_compile.c for this file ---- */

uint64_t compile_job_req_id(const struct compile_job *cj);
void compile_job_discard(struct compile_job *cj);
/* 0 when a and b compile the same model the same way; else 1 and a sentence in msg
 * naming the first option that differs and both values (a is process pa's, b pb's). */
int compile_job_diff(const struct compile_job *a, unsigned pa, const struct compile_job *b,
                     unsigned pb, char *msg, size_t len);
/* Compiles cj for nproc processes (replicas x nproc) on a worker for c. 0, or an IPUOF_E_*
 * code with a sentence in msg (cj is then still the caller's). */
int compile_job_submit(struct conn *c, struct compile_job *cj, unsigned nproc, char *msg,
                       size_t len);
/* Sends the compile reply for m to c (the local shapes of c's slice for a job's model).
 * 0, or -1 with an error sent. */
int compile_reply_send(struct conn *c, uint64_t req_id, const struct model *m, int cached,
                        uint64_t us);

#endif

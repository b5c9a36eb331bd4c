/*
 * jobs.h — a job: what one or several host processes hold together, apart from their
 * connections: the partition and the compiled executables with their weights. Every
 * attached connection belongs to a job.
 *
 * A job has n processes: a process attaching alone gets a job of its own (n = 1,
 * job_attached_one); a job of several processes (PopTorch's configureProcessId) is named by its
 * partition and its processes find each other by that name and a job key (job_attach).
 * Either way the job gathers its processes' calls, compiles once and runs once; with n = 1
 * each gathering is complete at its first process. The job, not the connection, decides
 * what a process leaving means. One executable is compiled with replicas = local replicas
 * x processes (the global replicas). Process p owns replicas p*Rl .. (p+1)*Rl-1, so in the run
 * layout [D][A][R][B..] its slice of each (d, a) block is Rl contiguous steps: its run bytes
 * are received straight into those rows, and its outputs are gathered from them. A call runs
 * when every process has sent its slice; gradients are then reduced over all global replicas
 * by the executable itself and the one copy of the weights is updated.
 *
 * Everything here runs on the event-loop thread, except a run or compile on a worker.
 */
#ifndef IPUOFD_JOBS_H
#define IPUOFD_JOBS_H

#include <stdint.h>

#include "ipuof.pb-c.h"

struct conn;
struct srv;
struct model;
struct compile_task;
struct job;

#define JOB_MAX_PROCS 64
#define JOB_KEY_MAX 256               /* bytes of a job key */
#define JOB_DEFAULT_NAME "ipuof-job"  /* the client's name for a job it was given no name
                                        * for: never joined without a key */

struct dev_partition;

/*
 * c's attach req_id has just taken partition p alone (waited_ms: how long it waited in the
 * attach queue, 0 not at all): its job of one enters JOB_READY, meeting the trigger point
 * attach first. When a fault armed for attach fires, p is released, its IPUs go into error
 * as the fault says and the attach gets the error (or c is cut); else c becomes the one
 * process of a job of its own and the attach is answered (job_reply_attached; out of
 * memory: p released, the error sent). p is not the caller's afterwards.
 */
void job_attached_one(struct conn *c, uint64_t req_id, struct dev_partition *p,
                      uint32_t waited_ms);

/* The steps of the step program a process of a job begins by a request. */
enum job_req_step { JOB_STEP_COMPILE, JOB_STEP_WEIGHTS, JOB_STEP_RUN };

/*
 * c's request req_id begins a step of its job's program: the trigger point of that step
 * (compile, weights, run) is met. When an IPU of the job's partition is in error, the
 * request gets its error and the recovery it needs; else when an armed fault fires, it
 * does what its kind says (the IPUs go into error and the request gets the error, or c is
 * cut, or the request waits for a reset). 1 when the request was answered so (or c is
 * being closed: touch nothing of it), 0 when it proceeds. c not attached: 0 (the handler
 * says so).
 */
int job_begin_step(struct conn *c, uint64_t req_id, enum job_req_step step);

/* The partition c's job holds, or NULL (c is not attached). */
struct dev_partition *conn_part(const struct conn *c);

/* The head of the list of c's job's compiled models, or NULL (c is not attached). */
struct model **job_models(const struct conn *c);

/*
 * Attaches c as process a->process_id of the job named a->partition_name with the key
 * a->job_key (a->num_processes > 1), creating the job and its partition of count IPUs when
 * c comes first. A job is joined by its name and key together: a process with another key
 * is refused without being told anything of the job, so it can neither take a free slot
 * nor end the job; the default name (JOB_DEFAULT_NAME) without a key is refused, saying
 * how to give one. The attach is answered when every process has come, or with an error
 * to each of them when job_timeout passes first. A process with the right key whose
 * count, process count or id does not fit the job gets an error naming both values.
 */
void job_attach(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a,
                 unsigned count);

/* c detaches: it gets its reply; when the others wait for it, the job ends for them (an
 * error naming c's process), and when it was the last the job ends: its partition and
 * models are released. */
void job_detach(struct conn *c, uint64_t req_id);

/* c is going away (its connection closes): what leaving means for its job is decided as
 * for a detach. */
void job_leave(struct conn *c);

/* The job's partition is taken away (reset, shutdown): every process gets a Notice with
 * code and msg, and errors for what it waited for (a run on a worker is cancelled, and
 * freed when it comes back). */
void job_revoke(struct conn *c, int code, const char *msg);

/* The whole model of c's compile has arrived; ct is taken (held until every process has
 * sent its compile, then compiled once for all of them, or refused naming the difference). */
void job_compile_ready(struct conn *c, struct compile_task *ct);

/* c's compile req_id was made here, at once, for c alone (an inference model from a
 * training model): ct (taken; ct->rc, ct->err, ct->entry, ct->us set) becomes c's own
 * model, or its error, and c gets the reply. */
void job_compile_here(struct conn *c, uint64_t req_id, struct compile_task *ct);

/* Holds j while something refers to it (a loop over its processes that no task or run
 * already keeps it for, a compile, Pod rendezvous or trace on a worker): an end meanwhile
 * frees it only at the last job_unhold, which returns 1 when the job has ended (it may be
 * gone then: do not touch it). A job is freed once it has ended and nothing refers to it
 * (job_maybe_free): its holds, its run in flight, its slices arriving. */
void job_hold(struct job *j);
int job_unhold(struct job *j);

/* The job's model with this id for c, or NULL. */
struct model *job_find_model(const struct conn *c, uint32_t id);

/*
 * Answers request req_id, which names model id that c does not have: with the reason its
 * partition was taken away (recoverable, re-attach) when a reset or shutdown freed its
 * models since its last attach, else IPUOF_E_NOTFOUND. what ends the sentence ("; compile
 * one first") and may be "".
 */
void job_send_missing(struct conn *c, uint64_t req_id, uint32_t id, const char *what);

/* c frees the job's model id: it is freed once every process has freed it. 0, or -1 when
 * there is no such model. */
int job_free_model(struct conn *c, uint32_t id);

/* Runs c's share of a call of the job's model m (checked against the local shapes): the
 * model runs once every process sharing it has sent its input. */
void job_run(struct conn *c, uint64_t req_id, const Ipuof__RunRequest *rq,
              uint32_t payload_len, struct model *m);

/* The processes of every job for a status reply: *out (caller frees with free(); its
 * messages point into the jobs, valid until the loop runs again) and its count. 0, or -1
 * when out of memory. */
int job_status(const struct srv *s, Ipuof__JobProcess ***out, size_t *n);

/* c's job across a Pod (jobs_pod.c): this daemon's rank in it and the number of daemons,
 * or -1 (and 1) when c's job is on this daemon alone; the global id of c's local process 0
 * (0 when not across a Pod). */
int job_pod_rank(const struct conn *c);
int job_pod_ranks(const struct conn *c);
unsigned job_pod_process_base(const struct conn *c);
/* Whether m is a training model every process of c's job across a Pod shares (rank 0's
 * weights are every daemon's: jobs_pod.c broadcasts them); 0 when not across a Pod. */
int job_pod_shared(const struct conn *c, const struct model *m);

/* ---- the attach wait queue (its state is in struct srv) ---- */

/* Queues conn's attach request; replies when IPUs free up or the timeout passes. */
int job_wait_enqueue(struct srv *s, struct conn *c, uint64_t req_id, unsigned count,
                     const char *name, unsigned timeout_ms, char *err, size_t errlen);
/* Drops conn's queued attach, if any, without replying. */
void job_wait_cancel(struct srv *s, struct conn *c);
/* The daemon is stopping: every queued attach is answered (IPUOF_E_SHUTDOWN) and dropped. */
void job_wait_shutdown(struct srv *s);
/* Serves queued attaches, first come first served, after IPUs were returned: each is
 * attached as a job of one and answered (job_reply_attached). */
void job_serve_waiters(struct srv *s);

/* Replies to c's attach req_id of partition p (after waiting waited_ms, 0: at once). */
void job_reply_attached(struct conn *c, uint64_t req_id, const struct dev_partition *p,
                        uint32_t waited_ms);

#endif

/*
 * pod/coll.h — the collective engine between the daemons of a Pod: one communicator of
 * `size` ranks (one rank per daemon) formed through a rendezvous key-value store, with
 * all-reduce (float32 sum), broadcast and barrier run by gloo (Debian's libgloo-dev) over
 * TCP. gloo is C++; it lives in pod/coll_gloo.cc alone, and nothing thrown there (gloo's
 * IoException, EnforceNotMet, std::bad_alloc, ...) crosses into C: every call returns 0, or
 * -1 with a sentence in err.
 *
 * Use (a daemon's partition across daemons): open one communicator per partition and
 * formation, prefix "<partition>/<epoch>", on a thread of its own (calls block); run the
 * collectives there; on -1 turn err into the jobs' PARTITION_RESET error, close the
 * communicator, and form it again under "<partition>/<epoch+1>". A replica grouping
 * (CommGroup) is a communicator per group under its own prefix.
 *
 * Threads. A communicator is used by one thread at a time (calls on one communicator are
 * not concurrent); different communicators are independent. Every rank must make the same
 * calls in the same order with the same sizes (as with MPI). Each call starts with a small
 * fixed-size exchange of what it is (kind, size, root, sum order, call number): a rank
 * whose call differs is named ("rank 1 (...) made an all-reduce of 20 floats (ring) as its
 * call 1, this rank an all-reduce of 10 floats (ring)") and the call fails, where gloo
 * itself would end the process (its I/O thread asserts on a message longer than the
 * receive posted for it). This costs one all-gather of 40 bytes per rank per call.
 *
 * Failures. A peer that dies, closes its end or does not answer makes the call fail within
 * timeout_ms (a peer whose process dies is seen at once: the kernel closes its sockets),
 * with an error that names the rank and its address as this rank knows it, e.g.
 *   "rank 1 (10.0.0.2:41234) closed the connection during all-reduce"
 *   "rank 2 (10.0.0.3:40007) did not answer within 5000 ms during all-reduce (seen by rank 1)"
 * How: a rank whose call fails writes what it saw to the store under "<prefix>/abort/<rank>"
 * ("W C ADDR": the rank W it holds responsible, 1 if W's connection broke, W's address),
 * then closes all its connections, so its other peers fail at once rather than at their
 * timeout. A rank then follows the chain: the rank it waited for (or that closed on it),
 * if that rank wrote a record, the rank that one blames, and so on, to a rank that wrote
 * none: the one that went away ("(seen by rank k)" names the last rank of the chain when it
 * is not this one). With 3 or more ranks, min(1000, timeout_ms / 4) ms of the timeout are
 * kept for these records to appear (each wait inside a call is timeout_ms minus that), so
 * a rank that died is told from one that gave up; with 2 there is nobody else to blame.
 * After such a failure the communicator is broken: every later call fails at once,
 * repeating the first error; close it and open a new one under a new prefix (a new
 * rendezvous; the store keeps the old keys until its owner drops them). A bad argument
 * (NULL buffer, root out of range) is refused without breaking it.
 * SIGPIPE: writes to a closed peer never raise it in the calling process (it is blocked
 * around gloo's writes, and gloo's I/O thread starts with it blocked).
 *
 * Security. gloo's TCP transport has no encryption and no authentication: each pair's port
 * accepts whoever connects first. pod_coll_open makes every rank send each peer, over the new
 * connection, a random token that peer published in the store, and refuses a connection
 * that does not (naming the rank it stood in for): only a process that can read the store
 * joins. The store must therefore be readable by the Pod's daemons alone, and the address
 * bound should be the Pod's network (loopback by default). Between the accept and the token,
 * and afterwards from a rank of the communicator, gloo trusts the bytes it reads: a hostile
 * peer there can make gloo's I/O thread fail an assertion, which ends the process.
 *
 * Sum order (all-reduce). POD_COLL_SUM_RING (the default): gloo's ring. The buffer is cut
 * into `size` chunks (of gloo's segments); the chunk that rank g ends up owning is summed
 * along the ring as x_g + (x_{g+1} + (... + (x_{g-2} + x_{g-1}))), ranks mod size, then
 * copied to every rank. So every rank gets identical bits, but the order depends on where an
 * element falls: for 2 ranks it is x0 + x1 everywhere (addition is commutative), for 3 or
 * more it differs between chunks from the rank order (x0 + x1) + x2 + ... .
 * POD_COLL_SUM_RANK_ORDER: each rank gathers every rank's slice of one part of the buffer,
 * sums it as ((x0 + x1) + x2) + ... in rank order, and sends the sum to every rank (a
 * reduce-scatter and an all-gather by direct exchange over gloo's transport, in windows of
 * at most POD_COLL_WINDOW_FLOATS elements, the next window's exchange travelling while this
 * one's sum goes back). Every rank gets identical bits, and they are the
 * bits of the plain left-to-right sum in rank order whatever the size and the split: the
 * result does not depend on the ring. Both modes move 2(n-1)/n of the buffer per rank.
 * The sum is IEEE float addition, no fused or reassociated arithmetic; NaN and infinities
 * propagate as in C.
 */
#ifndef IPUOF_POD_COLL_H
#define IPUOF_POD_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The rendezvous key-value store, provided by the caller (the daemon serves it over ipuofd's
 * protocol; pod/store_mem.c and pod/store_file.c are two for tests and benchmarks). Keys are
 * NUL-terminated strings of at most POD_STORE_KEY_MAX bytes; values at most
 * POD_STORE_VALUE_MAX bytes. Both callbacks may be called from the thread that calls
 * pod_coll_open or a collective, never from another thread. */
#define POD_STORE_KEY_MAX 256
#define POD_STORE_VALUE_MAX (1u << 20)
struct pod_store {
    void *ctx;
    /* set key to (v, n) (v borrowed for the call; n may be 0). Returns 0 once the value is
     * stored (a later get from any rank sees it), or -1 with err filled. Should return
     * within the communicator's timeout. */
    int (*set)(void *ctx, const char *key, const void *v, size_t n, char *err, size_t errlen);
    /* wait up to timeout_ms (0: do not wait) for key; on 0, *v is malloc'd (caller frees;
     * it may be NULL when *n is 0) and *n its length. Returns 0, or 1 when the key did not
     * appear within timeout_ms, or -1 on any other error; err is filled on 1 and -1. (A store
     * that returns -1 for a timeout works too; its err is then what the caller reports.) */
    int (*get)(void *ctx, const char *key, void **v, size_t *n, int timeout_ms,
               char *err, size_t errlen);
};

struct pod_coll; /* one communicator: rank `rank` of `size` */

enum pod_coll_sum_order {
    POD_COLL_SUM_RING = 0,       /* gloo's ring all-reduce (see the top) */
    POD_COLL_SUM_RANK_ORDER = 1  /* ((x0 + x1) + x2) + ... on every rank (see the top) */
};

#define POD_COLL_MAX_RANKS 1024
#define POD_COLL_PREFIX_MAX 200
#define POD_COLL_WINDOW_FLOATS ((size_t)1 << 20) /* 4 MiB of float32 per window */

/* Forms the communicator: rank `rank` (0 <= rank < size <= POD_COLL_MAX_RANKS) listens on
 * bind_addr (an IP address or host name of this machine; NULL means 127.0.0.1), publishes
 * its addresses in the store under "<prefix>/addr/<rank>", reads every other rank's and
 * connects to all of them. Every rank calls it with the same prefix and size; prefix is
 * 1..POD_COLL_PREFIX_MAX bytes of printable ASCII without spaces, and must be new in the
 * store (a re-rendezvous after a failure uses a new one). timeout_ms (1..86400000) bounds
 * the wait for the other ranks here (the store's waits share one deadline; connecting to a
 * rank that published its address and then died may take one more timeout_ms) and every
 * later call's wait for a peer (see Failures). The store is
 * borrowed until pod_coll_close. On 0, *out is the communicator (caller owns it: close it
 * with pod_coll_close); on -1, *out is NULL, err says why (which rank did not come, what
 * the store said, which address could not be bound) and nothing is left allocated. */
int pod_coll_open(struct pod_coll **out, const struct pod_store *st, const char *prefix,
                  int rank, int size, const char *bind_addr, int timeout_ms,
                  char *err, size_t errlen);

/* Sets the all-reduce's sum order for this communicator (every rank must set the same).
 * 0, or -1 for a value not in the enum. */
int pod_coll_set_sum_order(struct pod_coll *c, enum pod_coll_sum_order order,
                           char *err, size_t errlen);

/* In-place sum of buf[0..n) (caller-owned, n float32 elements, n may be 0) over every rank:
 * on 0 every rank's buf holds the same sum (order: see the top). On -1, buf's contents are
 * unspecified and the communicator is broken (but for a NULL buf with n > 0). */
int pod_coll_allreduce_f32(struct pod_coll *c, float *buf, size_t n, char *err, size_t errlen);

/* Sums nin buffers of every rank into out on every rank (n float32 elements each; in[] and
 * out caller-owned; out may be one of in[]; nin may differ between ranks, 1..
 * POD_COLL_MAX_INPUTS): out = (((a_0 + a_1) + a_2) + ...) over every rank's buffers in
 * rank-major order (rank 0's in[0], in[1], ..., then rank 1's, ...), the left-to-right sum,
 * whatever the sum order set; every rank gets identical bits. So 2 ranks of 2 buffers give
 * the bits of one rank summing the same 4 buffers left to right: a daemon passes one
 * buffer per replica and the result does not depend on how replicas are spread over
 * daemons. Moves nin x 2(n-1)/n of a buffer per rank. 0, or -1 (err; out unspecified; the
 * communicator is broken, but for bad arguments). */
#define POD_COLL_MAX_INPUTS 256
int pod_coll_allreduce_f32_multi(struct pod_coll *c, const float *const *in, int nin, float *out,
                                 size_t n, char *err, size_t errlen);

/* Copies root's buf[0..bytes) to every rank's buf (caller-owned; bytes may be 0; the same
 * bytes and root on every rank). 0, or -1 (err; buf unspecified on non-root ranks). */
int pod_coll_broadcast(struct pod_coll *c, void *buf, size_t bytes, int root,
                       char *err, size_t errlen);

/* Returns once every rank has entered the barrier (the exchange every call starts with).
 * 0, or -1 (err). */
int pod_coll_barrier(struct pod_coll *c, char *err, size_t errlen);

/* This rank's and the communicator's size, and whether it is broken (1) or usable (0). */
int pod_coll_rank(const struct pod_coll *c);
int pod_coll_size(const struct pod_coll *c);
int pod_coll_broken(const struct pod_coll *c);

/* The rank a failed call found had gone away (closed its connections or did not answer:
 * the one its error names first, found through the abort records as under Failures), or -1
 * when unknown: c NULL, not broken, or broken by a rank whose call differed, a bad store or
 * an error that names no rank. Set once, by the first failure; later calls keep it. */
int pod_coll_failed_rank(const struct pod_coll *c);

/* Closes the connections, stops gloo's I/O thread and frees c. NULL is a no-op. Peers that
 * are still inside a call see this rank close the connection. */
void pod_coll_close(struct pod_coll *c);

/* ---- stores ----------------------------------------------------------------------------- */

/* An in-process store (pod/store_mem.c): a mutex + condition variable hash map, for ranks
 * that are threads of one process. pod_store_mem_new returns NULL when out of memory; the
 * pod_store it fills borrows the map until pod_store_mem_free (NULL is a no-op), which must
 * come after every communicator using it is closed. */
struct pod_store_mem;
struct pod_store_mem *pod_store_mem_new(void);
void pod_store_mem_fill(struct pod_store_mem *m, struct pod_store *st);
void pod_store_mem_free(struct pod_store_mem *m);

/* A directory store (pod/store_file.c), for ranks that are processes (tests, benchmarks):
 * a key is a file in dir (the key with '/' turned into '%'), written to a temporary name and
 * renamed, so a reader never sees half a value; get polls every millisecond or so. dir must
 * exist; it and the key string are borrowed. The caller removes the files. */
struct pod_store_file {
    const char *dir;
};
void pod_store_file_fill(struct pod_store_file *f, struct pod_store *st);

#ifdef __cplusplus
}
#endif

#endif

/*
 * pod/coll.h — the collective engine between the daemons of a Pod: one communicator of
 * `size` ranks (one rank per daemon) formed through a rendezvous key-value store, with
 * all-reduce (float32 sum), broadcast and barrier run by gloo (Debian's libgloo-dev) over
 * TCP. gloo is C++; it lives in pod/coll_gloo.cc alone, and nothing thrown there (gloo's
 * IoException, EnforceNotMet, std::bad_alloc, ...) crosses into C: every call returns 0, or
 * -1 with a sentence in err.
 *
 * Threads. A communicator is used by one thread at a time (calls on one communicator are
 * not concurrent); different communicators are independent. Every rank must make the same
 * calls in the same order with the same sizes (as with MPI): a call whose size differs
 * between ranks fails or times out, it does not corrupt memory.
 *
 * Failures. A peer that dies, closes its end or does not answer makes the call fail within
 * timeout_ms (a peer whose process dies is seen at once: the kernel closes its sockets), with
 * an error that names the rank and its address, e.g.
 *   "rank 1 (10.0.0.2:41234) closed the connection during all-reduce"
 *   "rank 2 (10.0.0.3:40007) did not answer within 5000 ms during all-reduce"
 * A rank that fails a call closes all its connections, so its other peers fail at once too
 * rather than at their timeout, and writes its reason to the store under
 * "<prefix>/abort/<rank>"; a peer that sees that rank go away reports that reason (the rank
 * that really went away) followed by "(seen by rank k)". After a failure the communicator is
 * broken: every later call fails at once, repeating the first error; close it and open a
 * new one under a new prefix (a new rendezvous; the store keeps the old keys until its owner
 * drops them). SIGPIPE: writes to a closed peer never raise it in the calling process (it is
 * blocked around gloo's writes and gloo's I/O thread starts with it blocked).
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
 * at most POD_COLL_WINDOW_FLOATS elements). Every rank gets identical bits, and they are the
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
#define POD_COLL_WINDOW_FLOATS ((size_t)1 << 22) /* 16 MiB of float32 per window */

/* Forms the communicator: rank `rank` (0 <= rank < size <= POD_COLL_MAX_RANKS) listens on
 * bind_addr (an IP address or host name of this machine; NULL means 127.0.0.1), publishes
 * its addresses in the store under "<prefix>/addr/<rank>", reads every other rank's and
 * connects to all of them. Every rank calls it with the same prefix and size; prefix is
 * 1..POD_COLL_PREFIX_MAX bytes of printable ASCII without spaces, and must be new in the
 * store (a re-rendezvous after a failure uses a new one). timeout_ms (1..86400000) bounds
 * the wait for the other ranks here and every later wait of a collective. The store is
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
 * unspecified and the communicator is broken. */
int pod_coll_allreduce_f32(struct pod_coll *c, float *buf, size_t n, char *err, size_t errlen);

/* Copies root's buf[0..bytes) to every rank's buf (caller-owned; bytes may be 0; the same
 * bytes and root on every rank). 0, or -1 (err; buf unspecified on non-root ranks). */
int pod_coll_broadcast(struct pod_coll *c, void *buf, size_t bytes, int root,
                       char *err, size_t errlen);

/* Returns once every rank has entered the barrier. 0, or -1 (err). */
int pod_coll_barrier(struct pod_coll *c, char *err, size_t errlen);

/* This rank's and the communicator's size, and whether it is broken (1) or usable (0). */
int pod_coll_rank(const struct pod_coll *c);
int pod_coll_size(const struct pod_coll *c);
int pod_coll_broken(const struct pod_coll *c);

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

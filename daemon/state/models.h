/*
 * models.h — compiled models on the daemon: the executable cache shared by all clients,
 * the models each connection owns, their place on the partition's IPUs (memory, "loaded",
 * steps run), and the tasks that compile and run them on worker threads.
 *
 * Threading: the cache is shared with worker threads and has its own mutex; everything
 * else is owned by the event-loop thread.
 */
#ifndef IPUOFD_MODELS_H
#define IPUOFD_MODELS_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "ipuof.pb-c.h"
#include "sim.h"
#include "work.h"

struct dev_inventory;
struct dev_partition;

/* A compiled executable, kept for reuse after its model is freed. */
struct cache_entry {
    uint64_t hash;               /* of bytes + key, to narrow the search */
    uint8_t *bytes;              /* the ONNX model it was compiled from (owned) */
    size_t len;
    char *key;                   /* the compile options, serialised (owned) */
    struct sim_model *model;
    struct sim_exe *exe;
    int in_use;                  /* a live model uses it */
    int reusable;                /* may serve a later compile (not a training executable,
                                  * nor one that updates buffers) */
    uint64_t host_bytes;         /* its run buffers (models_host_bytes), set by cache_insert */
    uint64_t held;               /* every byte it keeps (cache_entry_bytes), set by
                                  * cache_insert */
    uint64_t arena;              /* the most host memory its arenas take
                                  * (sim_exe_host_arena_bytes), set by cache_insert */
    char name[64];               /* the model's name, for the log */
    int refs;                    /* executables made from this one's model (inference_from) */
    struct cache_entry *parent;  /* the entry whose model this one borrows, or NULL */
    uint64_t last_use;           /* the cache's release count when last released: the LRU
                                  * order (a count, not a clock: two releases within one
                                  * millisecond stay ordered) */
    struct cache_entry *next;
};

struct cache {
    pthread_mutex_t mu;
    struct cache_entry *head;
    unsigned n, max;
    uint64_t max_idle_host;      /* run-buffer bytes unused entries may keep (host_memory) */
    uint64_t max_bytes;          /* bytes all entries may hold (cache_bytes) */
    uint64_t bytes;              /* bytes all entries hold: the sum of their held */
    uint64_t max_arena;          /* arena bytes all entries may take (arena_memory);
                                  * UINT64_MAX until cache_set_arena_limit */
    uint64_t arena;              /* the sum of the entries' arena */
    uint64_t hits, misses, evictions;
    uint64_t inserted;           /* executables compiled and put in (cache_insert calls) */
    uint64_t releases;           /* cache_release calls so far: entries' last_use */
};

/* An empty cache keeping at most max entries, unused entries whose run buffers total at
 * most max_idle_host bytes, and entries holding at most max_bytes in all (unused entries
 * are evicted least recently used first beyond any of the three; entries in use count
 * but stay). */
void cache_init(struct cache *k, unsigned max, uint64_t max_idle_host, uint64_t max_bytes);

/* Changes the limits on unused entries' run buffers and on the bytes of all entries (a
 * reload) and evicts beyond them. */
void cache_set_limits(struct cache *k, uint64_t max_idle_host, uint64_t max_bytes);

/*
 * The bytes an entry keeps in the daemon's memory, from what the simulator reports: the
 * ONNX bytes it was compiled from, the loaded model's weights and the constants folded
 * from them (once: replicas share them; none for an entry borrowing its parent's model),
 * the executable's own copy of the weights it trains or updates, every IPU's activations
 * arena, gradient accumulators, optimizer state and pipeline stashes, and the run buffers.
 */
uint64_t cache_entry_bytes(const struct cache_entry *e);
/* Frees every entry (at exit). */
void cache_destroy(struct cache *k);

uint64_t cache_hash(const uint8_t *bytes, size_t len, const char *key);

/* An unused entry compiled from exactly these bytes and options, marked in use; or NULL.
 * Any thread. */
struct cache_entry *cache_acquire(struct cache *k, const uint8_t *bytes, size_t len,
                                  const char *key);

/* Adds a new entry (in use); evicts beyond max. Any thread. */
/* Sets arena_memory: the host memory all entries' arenas may take (0: three quarters of
 * the host's physical memory). Evicts unused entries beyond it. */
void cache_set_arena_limit(struct cache *k, uint64_t max_arena);

/* Whether an executable whose arenas take up to `need` bytes fits beside the entries'
 * (evicting unused ones, least recently used first, to make room); *held gets what the
 * entries then take and *limit arena_memory. 1 = fits, 0 = does not. */
int cache_arena_room(struct cache *k, uint64_t need, uint64_t *held, uint64_t *limit);

void cache_insert(struct cache *k, struct cache_entry *e);

/* The model using e is gone; e stays for reuse until evicted. NULL is a no-op. Any thread. */
void cache_release(struct cache *k, struct cache_entry *e);

struct model {
    uint32_t id;
    char name[64];
    struct cache_entry *entry;   /* holds the executable */
    unsigned first_ipu, nipus;   /* daemon IPU ids it occupies */
    uint64_t mem[CFG_MAX_IPUS];  /* bytes on each of them */
    uint64_t stash[CFG_MAX_IPUS];   /* of mem: pipeline stashes */
    uint64_t offchip[CFG_MAX_IPUS]; /* held in host memory, not in mem */
    uint64_t host;               /* its run buffers in host memory (charged to first_ipu) */
    int placed;                  /* counted in the IPUs' memory_used */
    int busy;                    /* run input arriving or a run in flight */
    unsigned proc0, nproc;       /* the processes of its job that share it: proc0 ..
                                  * proc0+nproc-1 (all of them, but for an inference model
                                  * made from a training model by one process) */
    uint64_t freed_by;           /* bit p set once process p freed it */
    unsigned group;              /* inputReplicaGrouping: replicas per input group (0/1: none) */
    int group_orthogonal;        /* its groups are orthogonal, not consecutive */
    int pod_sync;                /* a Pod job's: MODEL_POD_* bits, what changed on this
                                  * daemon since the last call (rank 0's are broadcast then,
                                  * jobs_pod.c) */
    uint64_t pod_written;        /* a Pod job's: the latest sim_exe_weight_written stamp the
                                  * last broadcast covered */
    unsigned predict_replicas;   /* its compile's: the replicas to predict for (0: its own) */
    int pod_checked;             /* a Pod job's: every daemon compiled the same model */
    struct model *next;
};

#define MODEL_POD_WRITTEN 1      /* pod_sync: process 0 wrote or copied weights into it */
#define MODEL_POD_COMPILED 2     /* pod_sync: compiled: every weight and buffer goes */

/* Bytes of an executable's run buffers: every input and output of one call, held in the
 * daemon's host memory (the host-side streams). */
uint64_t models_host_bytes(const struct sim_exe *e);

/* Run-buffer bytes of the models of a list (a job's: what its partition uses of
 * host_memory). */
uint64_t models_host_used(const struct model *list);

/* Counts m's memory on its IPUs, and its run buffers on its first IPU (only IPUs of the
 * inventory: a number past it is ignored, never indexed). */
void model_place(struct dev_inventory *inv, struct model *m);

/* Uncounts m's memory on its IPUs (when counted). */
void model_unplace(struct dev_inventory *inv, struct model *m);

/* Adds steps to the steps_run of m's IPUs (bounded as model_place). */
void models_count_steps(struct dev_inventory *inv, const struct model *m, uint64_t steps);

/* Uncounts m on inv and frees it, returning its executable to cache k. NULL is a no-op. */
void model_free(struct dev_inventory *inv, struct cache *k, struct model *m);

/* Rewrites each IPU's "loaded" list of partition p from the models of list. */
void models_update_loaded(struct dev_inventory *inv, const struct dev_partition *p,
                          const struct model *list);

/* sim's optimizer from the wire's; NULL or kind 0 is PopTorch's default, SGD with lr 0.01.
 * The groups' weight names are copied into one block, *names (caller-owned, free() it
 * after the optimizer's last use; NULL without groups). 0, or -1 with the sentence in
 * msg[0..len) for a kind the daemon does not know, too many groups or names, or no memory. */
int models_optimizer(const Ipuof__Optimizer *w, struct sim_optimizer *o, char **names,
                     char *msg, size_t len);

/* Microseconds on a monotonic clock. */
uint64_t models_now_us(void);

/* Fills a wire TensorInfo from an executable's input or output description; dims and step
 * (SIM_MAX_RANK entries each) and mode (outputs only; NULL for inputs) are caller storage
 * the message points into. */
void models_tensor_info(Ipuof__TensorInfo *ti, const struct sim_io_info *io, int64_t *dims,
                        int64_t *step, Ipuof__OutputMode *mode);

/* Fills *rc with the cost figures of e's last run (or the code and reason why there are
 * none); busy (SIM_MAX_IPUS entries) is caller storage rc points into. */
void models_run_cost(const struct sim_exe *e, Ipuof__RunCost *rc, double *busy);

#endif

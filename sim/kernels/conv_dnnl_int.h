/*
 * conv_dnnl_int.h — what conv_dnnl.c (forward) shares with conv_dnnl_bwd.c (backward): the
 * engine, the per-thread streams, reorders, the memory-object sets concurrent pieces take
 * in turn, and the cache of primitives per shape (struct sim_dnnl_kind: one per direction,
 * the direction giving how a part is made). Private to those two files.
 */
#ifndef SIM_CONV_DNNL_INT_H
#define SIM_CONV_DNNL_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>

#include <oneapi/dnnl/dnnl.h>

/* struct sim_dnnl_conv and SIM_DNNL_MAX_SHAPES: conv_dnnl.h, which its two users include
 * first (including it here would make a header circle with conv_dnnl.c, tools/dep_cycles.sh) */

#define SIM_DNNL_ALIGN 64
#define SIM_DNNL_NSETS 8        /* memory-object sets per primitive: pieces running at once */
#define SIM_DNNL_SET_MAX 16     /* memory objects in a set */

/* Memory objects one piece binds to its buffers; busy while a piece uses them. */
struct sim_dnnl_set {
    atomic_int busy;
    dnnl_memory_t m[SIM_DNNL_SET_MAX];
};

/* What a direction's part (the primitives for one sub-batch size) starts with. */
struct sim_dnnl_part {
    int64_t nb;                     /* images; 0: the entry's second part is not used */
    size_t bytes;                   /* its slice of a run's scratch */
    struct sim_dnnl_set sets[SIM_DNNL_NSETS];
};

/*
 * One shape's primitives in a direction, split into up to `cut` pieces: part[0] for nb
 * images, part[1] for the last piece's when it has fewer (else its nb is 0); the weights'
 * reorder rw into the layout the direction's primitive reads (NULL: plain) with its sets
 * (m[SIM_DNNL_W] plain, m[SIM_DNNL_BW] blocked). A run's scratch: [the reordered weights,
 * off_slices bytes][one slice of `slice` bytes per piece].
 */
struct sim_dnnl_entry {
    struct sim_dnnl_conv key;
    int cut;                        /* the pieces asked for (SIM_DNNL_PIECES) */
    int64_t pieces;
    dnnl_primitive_t rw;
    struct sim_dnnl_set wsets[SIM_DNNL_NSETS];
    size_t off_slices, slice;
    struct sim_dnnl_part *part[2];
};

enum { SIM_DNNL_W, SIM_DNNL_BW };   /* rw's memory objects in an entry's wsets */

/* A direction's cache of entries, keyed by (shape, cut); entries live for the process. */
struct sim_dnnl_kind {
    size_t part_size;               /* of the direction's part, which starts with the above */
    /* Makes pt's primitives and sets for nb images of d, on one thread; *bw gets the
     * weights' layout its primitive reads. Returns 0 or -1 (what it made is freed by
     * part_free and the sets' clean-up). */
    int (*part_make)(const struct sim_dnnl_conv *d, int64_t nb, struct sim_dnnl_part *pt,
                     dnnl_memory_desc_t *bw);
    void (*part_free)(struct sim_dnnl_part *pt);  /* its primitives (NULL ones skipped) */
    struct sim_dnnl_entry *table[SIM_DNNL_MAX_SHAPES];
    int n;
};

/*
 * Finds or builds k's entry for d cut into up to `cut` pieces (clamped to 1..NSETS): *id
 * gets its index in k->table, *scratch the bytes a run needs. Returns 0, or -1 when oneDNN
 * cannot serve the shape or the table is full. Thread-safe (takes sim_dnnl_lock).
 */
int sim_dnnl_prepare(struct sim_dnnl_kind *k, const struct sim_dnnl_conv *d, int cut, int *id,
                     size_t *scratch);

/* The part piece i of e runs. */
struct sim_dnnl_part *sim_dnnl_part_of(const struct sim_dnnl_entry *e, int64_t i);

/* bw = w (plain) in the layout e's primitive reads, on s (e->rw != NULL), waited for.
 * Returns 0 or -1. */
int sim_dnnl_weights_reorder(const struct sim_dnnl_entry *e, dnnl_stream_t s, const float *w,
                             void *bw);

extern pthread_mutex_t sim_dnnl_lock;   /* guards the tables and the engine's creation */
extern dnnl_engine_t sim_dnnl_engine;   /* valid once sim_dnnl_engine_get returned 0 */

/* n rounded up to SIM_DNNL_ALIGN. */
size_t sim_dnnl_align(size_t n);

/* Bytes of md rounded up to SIM_DNNL_ALIGN (0 for NULL). */
size_t sim_dnnl_md_bytes(const dnnl_memory_desc_t *md);

/* A batch of n images cut into up to `cut` pieces: *nb images in every piece but the
 * last, which has *last, in *pieces pieces. */
void sim_dnnl_split(int64_t n, int cut, int64_t *nb, int64_t *pieces, int64_t *last);

/* Whether two shapes are the same convolution. */
bool sim_dnnl_key_equal(const struct sim_dnnl_conv *a, const struct sim_dnnl_conv *b);

/* Makes the CPU engine once (sim_dnnl_lock held). Returns 0, or -1 when oneDNN has none. */
int sim_dnnl_engine_get(void);

/*
 * A reorder primitive from md a to md b into *out (caller-owned). Without sum, *out is NULL
 * when the layouts are the same; with sum the reorder adds into its destination (b += a) and
 * is always made. Returns 0 or -1.
 */
int sim_dnnl_reorder(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, bool sum,
                     dnnl_primitive_t *out);

/* Plain descriptors of d's weights (OIHW, or GOIHW when grouped; tag dnnl_format_tag_any
 * asks for "any" layout instead) and bias (M). Returns 0 or -1. */
int sim_dnnl_weight_mds(const struct sim_dnnl_conv *d, dnnl_memory_desc_t *w_md,
                        dnnl_memory_desc_t *b_md, dnnl_format_tag_t tag);

/* The calling thread's stream (made on its first call, freed when the thread ends), with
 * the thread's OpenMP team set to one; NULL when oneDNN cannot make one. */
dnnl_stream_t sim_dnnl_stream(void);

/* Runs p with one source and one destination argument on s. Returns 0 or -1. */
int sim_dnnl_exec2(dnnl_primitive_t p, dnnl_stream_t s, dnnl_memory_t from, dnnl_memory_t to);

/* Takes a free set of sets[SIM_DNNL_NSETS] (spinning while all are in use, which needs more
 * than SIM_DNNL_NSETS callers of one primitive at once); give it back by storing 0 in busy. */
struct sim_dnnl_set *sim_dnnl_set_take(struct sim_dnnl_set *sets);

#endif

/*
 * devices.h — the inventory of simulated IPUs and the partition allocator.
 *
 * Pure bookkeeping: no I/O, no event loop, no locking (the event-loop thread owns the
 * inventory). A partition is an aligned group of a power-of-two count of IPUs, as on an
 * IPU-Machine, where IPU-Link topology makes {0,1}, {2,3} and {0..3} the groups of 2 and 4.
 */
#ifndef IPUOFD_DEVICES_H
#define IPUOFD_DEVICES_H

#include <stddef.h>
#include <stdint.h>

enum dev_state { DEV_FREE = 0, DEV_ATTACHED = 1, DEV_BUSY = 2, DEV_ERROR = 3 };

#define DEV_NAME_MAX 64

/* Who holds a partition, as ipuctl status shows it (copied into the partition). */
struct dev_holder {
    uint32_t client_id;
    char name[DEV_NAME_MAX];
    uint32_t pid;
    char peer[64];
};

struct dev_partition;
struct dev_vpart;

struct dev_ipu {
    unsigned id;
    enum dev_state state;
    unsigned tiles;
    uint64_t memory_capacity;
    uint64_t memory_used;
    uint64_t host_used;          /* run buffers in host memory of the models whose partition
                                  * starts here (a partition's host-side streams) */
    uint64_t memory_stash;       /* of memory_used: loaded models' pipeline stashes */
    uint64_t memory_offchip;     /* loaded models' state in host memory (not in used) */
    struct dev_partition *part;  /* NULL when free */
    struct dev_vpart *vpart;     /* the V-IPU partition that reserves it, NULL when none */
    char loaded[DEV_NAME_MAX];   /* what is loaded, "" when nothing */
    uint64_t steps_run;
    char error[256];             /* for DEV_ERROR */
    int recovery;                /* for DEV_ERROR: the IPUOF_RECOVERY_* reset that clears it */
    int unrecoverable;           /* for DEV_ERROR: an unrecoverable error (FULL_RESET clears) */
    uint64_t error_ms;           /* for DEV_ERROR: when it began (srv_now_ms), set by caller */
    char error_part[DEV_NAME_MAX]; /* for DEV_ERROR: the partition it was in ("" none): a
                                    * reset of that name reaches it after its holder left */
};

struct dev_partition {
    char name[DEV_NAME_MAX];
    unsigned first;              /* IPU ids first .. first + count - 1 */
    unsigned count;
    struct dev_holder holder;
    void *owner;                 /* the connection holding it (opaque here) */
    struct dev_partition *next;
};

/*
 * A V-IPU partition (vipu create partition): an aligned power-of-two group of IPUs reserved
 * by name until it is removed or the daemon stops (the inventory lives in memory only).
 * Its IPUs are attached only by an attach that gives its name; an attach without a name
 * never takes them. num_gcds divides the IPUs into consecutive GCDs of count / num_gcds.
 */
struct dev_vpart {
    char name[DEV_NAME_MAX];
    unsigned first, count, num_gcds;
    int reconfigurable;
    struct dev_vpart *next;
};

struct dev_inventory {
    unsigned n;
    struct dev_ipu *ipus;
    struct dev_partition *parts; /* attached partitions */
    struct dev_vpart *vparts;    /* V-IPU partitions, newest first */
    unsigned next_seq;           /* for generated partition names */
};

/* A new inventory of n free IPUs, or NULL when out of memory. Free with dev_inventory_free. */
struct dev_inventory *dev_inventory_new(unsigned n, uint64_t memory, unsigned tiles);
void dev_inventory_free(struct dev_inventory *inv);

unsigned dev_free_count(const struct dev_inventory *inv);

/*
 * Attaches count IPUs (a power of two, at most inv->n) as a new partition named name
 * ("" = generated "pN"). A name of a V-IPU partition attaches that partition's IPUs (the
 * first count of them; count at most its size); any other attach takes only IPUs no
 * V-IPU partition reserves. Returns IPUOF_OK and *out, or IPUOF_E_INVAL (bad count or
 * name, more IPUs than the V-IPU partition has), IPUOF_E_BUSY (name taken, the V-IPU
 * partition held by someone else or in error, or no aligned group of count free IPUs: err
 * says how many are free and who holds the rest). The partition belongs to the inventory;
 * release it with dev_release().
 */
int dev_attach(struct dev_inventory *inv, unsigned count, const char *name,
               const struct dev_holder *holder, void *owner, struct dev_partition **out,
               char *err, size_t errlen);

/* IPUOF_OK when count IPUs can ever be attached (a power of two, at most inv->n);
 * IPUOF_E_INVAL with a sentence saying what to ask for instead. */
int dev_check_count(const struct dev_inventory *inv, unsigned count, char *err, size_t errlen);

/* Writes the partition's IPU ids to ids (room for p->count) and returns their count. */
unsigned dev_partition_ids(const struct dev_partition *p, uint32_t *ids);

/* Writes why count IPUs cannot be attached: "N of M IPUs are free (a, b); IPUs x-y held by
 * NAME (pid P, PEER) in partition 'Q'; ...". */
void dev_describe_busy(const struct dev_inventory *inv, unsigned count, char *err, size_t errlen);

/* True when an attach of count IPUs would succeed now. */
int dev_can_attach(const struct dev_inventory *inv, unsigned count);

/* Returns the partition's IPUs to free and frees the partition. NULL is a no-op. */
void dev_release(struct dev_inventory *inv, struct dev_partition *p);

struct dev_partition *dev_find_partition(const struct dev_inventory *inv, const char *name);

/* Clears a free IPU's state (error, loaded, memory, steps). The IPU must not be held. */
void dev_clear(struct dev_inventory *inv, unsigned id);

/* Puts IPU id in error: msg (copied, truncated) is what status shows, recovery the
 * IPUOF_RECOVERY_* reset that clears it, part the partition it is in ("" or NULL: none).
 * A held IPU stays held (its holder is refused until the reset); a released one stays in
 * error, not free, until dev_clear. An IPU already in error keeps the stronger need. */
void dev_set_error(struct dev_inventory *inv, unsigned id, int recovery, int unrecoverable,
                   const char *part, const char *msg);

/* The strongest recovery (by faults_level) IPUs first .. first + count - 1 in error need,
 * with the first such IPU's id in *ipu; IPUOF_RECOVERY_NONE when none is in error. */
int dev_error_need(const struct dev_inventory *inv, unsigned first, unsigned count,
                   unsigned *ipu);

/* When an attach of count IPUs (named name, may be NULL or "") fails only because IPUs
 * are in error (it would succeed were they reset): the strongest recovery they need, the
 * first such IPU in *ipu (may be NULL). Else IPUOF_RECOVERY_NONE. */
int dev_error_blocks(const struct dev_inventory *inv, unsigned count, const char *name,
                     unsigned *ipu);

/* Shows IPUs first .. first + count - 1 busy (a compile or run executes on them: attached
 * ones become DEV_BUSY) or no longer (DEV_BUSY ones become DEV_ATTACHED). Ids outside the
 * inventory and IPUs in another state (freed, reset, in error meanwhile) are left alone. */
void dev_set_busy(struct dev_inventory *inv, unsigned first, unsigned count, int busy);

/*
 * Reserves count IPUs (a power of two, at most inv->n) as V-IPU partition name with
 * num_gcds GCDs (a power of two, at most count): the first aligned group of free IPUs that
 * no other V-IPU partition reserves. name must be 1 to DEV_NAME_MAX - 1 of letters, digits,
 * '-', '_', '.' and not the name of a V-IPU partition or an attached partition. Returns
 * IPUOF_OK and *out (owned by the inventory), or IPUOF_E_INVAL / IPUOF_E_BUSY with a
 * sentence in err saying what was wrong and what would be right.
 */
int dev_vpart_create(struct dev_inventory *inv, const char *name, unsigned count,
                     unsigned num_gcds, int reconfigurable, struct dev_vpart **out, char *err,
                     size_t errlen);

/* The V-IPU partition named name, or NULL. */
struct dev_vpart *dev_vpart_find(const struct dev_inventory *inv, const char *name);

/* The attached partition on vp's IPUs, or NULL when nobody holds them. */
struct dev_partition *dev_vpart_holder(const struct dev_inventory *inv,
                                       const struct dev_vpart *vp);

/* 1 when one of vp's IPUs is in error (PS_FAILED), else 0 (PS_ACTIVE). */
int dev_vpart_failed(const struct dev_inventory *inv, const struct dev_vpart *vp);

/* Frees vp and returns its IPUs to the pool. Its IPUs must not be attached (the caller
 * revokes the holder first). */
void dev_vpart_remove(struct dev_inventory *inv, struct dev_vpart *vp);

/* Rounds n up to a power of two (n >= 1). */
unsigned dev_round_pow2(unsigned n);
int dev_is_pow2(unsigned n);

#endif

/*
 * devices.c — see devices.h.
 */
#include "devices.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "faults.h"
#include "ipuof/status.h"

struct dev_inventory *
dev_inventory_new(unsigned n, uint64_t memory, unsigned tiles)
{
    struct dev_inventory *inv = calloc(1, sizeof *inv);

    if (inv == NULL)
        return NULL;
    inv->ipus = calloc(n, sizeof *inv->ipus);
    if (inv->ipus == NULL) {
        free(inv);
        return NULL;
    }
    inv->n = n;
    for (unsigned i = 0; i < n; i++) {
        inv->ipus[i].id = i;
        inv->ipus[i].state = DEV_FREE;
        inv->ipus[i].tiles = tiles;
        inv->ipus[i].memory_capacity = memory;
    }
    return inv;
}

void
dev_inventory_free(struct dev_inventory *inv)
{
    if (inv == NULL)
        return;
    while (inv->parts != NULL)
        dev_release(inv, inv->parts);
    while (inv->vparts != NULL)
        dev_vpart_remove(inv, inv->vparts);
    free(inv->ipus);
    free(inv);
}

int
dev_is_pow2(unsigned n)
{
    return n != 0 && (n & (n - 1)) == 0;
}

unsigned
dev_round_pow2(unsigned n)
{
    unsigned p = 1;

    while (p < n && p < (1u << 31))
        p <<= 1;
    return p;
}

unsigned
dev_free_count(const struct dev_inventory *inv)
{
    unsigned k = 0;

    for (unsigned i = 0; i < inv->n; i++)
        k += inv->ipus[i].state == DEV_FREE && inv->ipus[i].vpart == NULL;
    return k;
}

/* First IPU of an aligned group of count free IPUs no V-IPU partition reserves, or -1. */
static int
find_group(const struct dev_inventory *inv, unsigned count)
{
    for (unsigned first = 0; first + count <= inv->n; first += count) {
        unsigned k = 0;
        while (k < count && inv->ipus[first + k].state == DEV_FREE &&
               inv->ipus[first + k].vpart == NULL)
            k++;
        if (k == count)
            return (int)first;
    }
    return -1;
}

int
dev_can_attach(const struct dev_inventory *inv, unsigned count)
{
    return dev_is_pow2(count) && count <= inv->n && find_group(inv, count) >= 0;
}

struct dev_partition *
dev_find_partition(const struct dev_inventory *inv, const char *name)
{
    for (struct dev_partition *p = inv->parts; p != NULL; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

void
dev_describe_busy(const struct dev_inventory *inv, unsigned count, char *err, size_t errlen)
{
    size_t used;
    unsigned nfree = dev_free_count(inv);
    const char *sep = "";

    used = (size_t)snprintf(err, errlen, "cannot attach %u IPU%s: %u of %u IPUs are free", count,
                            count == 1 ? "" : "s", nfree, inv->n);
    if (nfree > 0 && used < errlen) {
        used += (size_t)snprintf(err + used, errlen - used, " (");
        for (unsigned i = 0; i < inv->n && used < errlen; i++) {
            if (inv->ipus[i].state != DEV_FREE || inv->ipus[i].vpart != NULL)
                continue;
            used += (size_t)snprintf(err + used, errlen - used, "%s%u", sep, i);
            sep = ", ";
        }
        if (used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, ")%s",
                                     nfree >= count ? " but not as an aligned group" : "");
    }
    for (const struct dev_partition *p = inv->parts; p != NULL && used < errlen; p = p->next) {
        char range[32];
        if (p->count == 1)
            snprintf(range, sizeof range, "IPU %u", p->first);
        else
            snprintf(range, sizeof range, "IPUs %u-%u", p->first, p->first + p->count - 1);
        used += (size_t)snprintf(err + used, errlen - used,
                                 "; %s held by %s (pid %u, %s) in partition '%s'", range,
                                 p->holder.name[0] ? p->holder.name : "client", p->holder.pid,
                                 p->holder.peer, p->name);
    }
    for (const struct dev_vpart *v = inv->vparts; v != NULL && used < errlen; v = v->next)
        if (dev_vpart_holder(inv, v) == NULL) {
            char range[32];
            if (v->count == 1)
                snprintf(range, sizeof range, "IPU %u", v->first);
            else
                snprintf(range, sizeof range, "IPUs %u-%u", v->first, v->first + v->count - 1);
            used += (size_t)snprintf(err + used, errlen - used, "; %s reserved for partition "
                                     "'%s' (vipu list partitions), attached by its name only",
                                     range, v->name);
        }
    for (unsigned i = 0; i < inv->n && used < errlen; i++)
        if (inv->ipus[i].state == DEV_ERROR)
            used += (size_t)snprintf(err + used, errlen - used,
                                     "; IPU %u is in error and needs %s", i,
                                     ipuof_recovery_name(inv->ipus[i].recovery));
}

int
dev_check_count(const struct dev_inventory *inv, unsigned count, char *err, size_t errlen)
{
    if (!dev_is_pow2(count)) {
        errbuf_set(err, errlen,
               "cannot attach %u IPUs: partitions are a power of two IPUs (1, 2, 4, ...); "
               "ask for %u or set auto-rounding", count, dev_round_pow2(count ? count : 1));
        return IPUOF_E_INVAL;
    }
    if (count > inv->n) {
        errbuf_set(err, errlen, "cannot attach %u IPUs: this daemon has %u IPUs", count, inv->n);
        return IPUOF_E_INVAL;
    }
    return IPUOF_OK;
}

unsigned
dev_partition_ids(const struct dev_partition *p, uint32_t *ids)
{
    for (unsigned i = 0; i < p->count; i++)
        ids[i] = p->first + i;
    return p->count;
}

int
dev_attach(struct dev_inventory *inv, unsigned count, const char *name,
           const struct dev_holder *holder, void *owner, struct dev_partition **out, char *err,
           size_t errlen)
{
    struct dev_partition *p;
    struct dev_vpart *vp;
    int first;

    *out = NULL;
    if (dev_check_count(inv, count, err, errlen) != IPUOF_OK)
        return IPUOF_E_INVAL;
    if (name != NULL && strlen(name) >= DEV_NAME_MAX) {
        errbuf_set(err, errlen, "partition name is %zu bytes long; at most %d are allowed",
               strlen(name), DEV_NAME_MAX - 1);
        return IPUOF_E_INVAL;
    }
    if (name != NULL && name[0] != '\0' && dev_find_partition(inv, name) != NULL) {
        errbuf_set(err, errlen, "partition name '%s' is already in use; choose another name", name);
        return IPUOF_E_BUSY;
    }
    vp = name != NULL && name[0] != '\0' ? dev_vpart_find(inv, name) : NULL;
    if (vp != NULL) {
        const struct dev_partition *h = dev_vpart_holder(inv, vp);
        if (count > vp->count) {
            errbuf_set(err, errlen, "partition '%s' has %u IPU%s; this attach asks for %u "
                       "(vipu create partition %s --size %u makes one that large)", name,
                       vp->count, vp->count == 1 ? "" : "s", count, name, count);
            return IPUOF_E_INVAL;
        }
        if (h != NULL) {
            errbuf_set(err, errlen, "partition '%s' is in use: IPUs %u-%u held by %s (pid %u, "
                       "%s) as '%s'", name, h->first, h->first + h->count - 1,
                       h->holder.name[0] ? h->holder.name : "client", h->holder.pid,
                       h->holder.peer, h->name);
            return IPUOF_E_BUSY;
        }
        if (dev_vpart_failed(inv, vp)) {
            errbuf_set(err, errlen, "partition '%s' is PS_FAILED: one of its IPUs %u-%u is in "
                       "error; vipu reset partition %s", name, vp->first,
                       vp->first + vp->count - 1, name);
            return IPUOF_E_BUSY;
        }
        first = (int)vp->first;
    } else {
        first = find_group(inv, count);
    }
    if (first < 0) {
        dev_describe_busy(inv, count, err, errlen);
        return IPUOF_E_BUSY;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return IPUOF_E_NOMEM;
    }
    if (name != NULL && name[0] != '\0') {
        snprintf(p->name, sizeof p->name, "%s", name);
    } else {
        do
            snprintf(p->name, sizeof p->name, "p%u", inv->next_seq++);
        while (dev_find_partition(inv, p->name) != NULL);
    }
    p->first = (unsigned)first;
    p->count = count;
    if (holder != NULL)
        p->holder = *holder;
    p->owner = owner;
    p->next = inv->parts;
    inv->parts = p;
    for (unsigned i = 0; i < count; i++) {
        struct dev_ipu *d = &inv->ipus[p->first + i];
        d->state = DEV_ATTACHED;
        d->part = p;
    }
    *out = p;
    return IPUOF_OK;
}

void
dev_release(struct dev_inventory *inv, struct dev_partition *p)
{
    struct dev_partition **pp;

    if (p == NULL)
        return;
    for (pp = &inv->parts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    for (unsigned i = 0; i < p->count; i++) {
        struct dev_ipu *d = &inv->ipus[p->first + i];
        d->part = NULL;
        d->memory_used = 0;
        d->memory_stash = 0;
        d->memory_offchip = 0;
        d->loaded[0] = '\0';
        if (d->state != DEV_ERROR)
            d->state = DEV_FREE;
    }
    free(p);
}

void
dev_set_busy(struct dev_inventory *inv, unsigned first, unsigned count, int busy)
{
    enum dev_state from = busy ? DEV_ATTACHED : DEV_BUSY;

    for (unsigned i = first; i < inv->n && i - first < count; i++)
        if (inv->ipus[i].state == from)
            inv->ipus[i].state = busy ? DEV_BUSY : DEV_ATTACHED;
}

void
dev_clear(struct dev_inventory *inv, unsigned id)
{
    struct dev_ipu *d = &inv->ipus[id];

    d->state = DEV_FREE;
    d->memory_used = 0;
    d->host_used = 0;
    d->memory_stash = 0;
    d->memory_offchip = 0;
    d->loaded[0] = '\0';
    d->steps_run = 0;
    d->error[0] = '\0';
    d->recovery = 0;
    d->unrecoverable = 0;
    d->error_part[0] = '\0';
}

void
dev_set_error(struct dev_inventory *inv, unsigned id, int recovery, int unrecoverable,
              const char *part, const char *msg)
{
    struct dev_ipu *d = &inv->ipus[id];

    if (d->state == DEV_ERROR && faults_level(d->recovery) >= faults_level(recovery))
        return;
    d->state = DEV_ERROR;
    d->recovery = recovery;
    d->unrecoverable = unrecoverable != 0;
    snprintf(d->error, sizeof d->error, "%s", msg);
    snprintf(d->error_part, sizeof d->error_part, "%s", part != NULL ? part : "");
}

int
dev_error_blocks(const struct dev_inventory *inv, unsigned count, const char *name,
                 unsigned *ipu)
{
    const struct dev_vpart *vp = name != NULL && name[0] ? dev_vpart_find(inv, name) : NULL;

    if (!dev_is_pow2(count) || count > inv->n)
        return IPUOF_RECOVERY_NONE;
    if (vp != NULL)
        return dev_vpart_holder(inv, vp) == NULL && count <= vp->count
               ? dev_error_need(inv, vp->first, vp->count, ipu) : IPUOF_RECOVERY_NONE;
    if (find_group(inv, count) >= 0)
        return IPUOF_RECOVERY_NONE;
    for (unsigned first = 0; first + count <= inv->n; first += count) {
        unsigned k = 0;
        while (k < count && inv->ipus[first + k].vpart == NULL &&
               (inv->ipus[first + k].state == DEV_FREE ||
                (inv->ipus[first + k].state == DEV_ERROR && inv->ipus[first + k].part == NULL)))
            k++;
        if (k == count)
            return dev_error_need(inv, first, count, ipu);
    }
    return IPUOF_RECOVERY_NONE;
}

int
dev_error_need(const struct dev_inventory *inv, unsigned first, unsigned count, unsigned *ipu)
{
    int need = IPUOF_RECOVERY_NONE;

    for (unsigned i = first; i < inv->n && i - first < count; i++) {
        const struct dev_ipu *d = &inv->ipus[i];
        if (d->state != DEV_ERROR || faults_level(d->recovery) <= faults_level(need))
            continue;
        need = d->recovery;
        if (ipu != NULL)
            *ipu = i;
    }
    return need;
}

/* ---- V-IPU partitions ------------------------------------------------------------------- */

struct dev_vpart *
dev_vpart_find(const struct dev_inventory *inv, const char *name)
{
    for (struct dev_vpart *v = inv->vparts; v != NULL; v = v->next)
        if (strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

struct dev_partition *
dev_vpart_holder(const struct dev_inventory *inv, const struct dev_vpart *vp)
{
    for (unsigned i = 0; i < vp->count; i++)
        if (inv->ipus[vp->first + i].part != NULL)
            return inv->ipus[vp->first + i].part;
    return NULL;
}

int
dev_vpart_failed(const struct dev_inventory *inv, const struct dev_vpart *vp)
{
    for (unsigned i = 0; i < vp->count; i++)
        if (inv->ipus[vp->first + i].state == DEV_ERROR)
            return 1;
    return 0;
}

int
dev_vpart_create(struct dev_inventory *inv, const char *name, unsigned count,
                 unsigned num_gcds, int reconfigurable, struct dev_vpart **out, char *err,
                 size_t errlen)
{
    struct dev_vpart *v;
    size_t n = strlen(name);
    int first;

    *out = NULL;
    if (n == 0 || n >= DEV_NAME_MAX) {
        errbuf_set(err, errlen, "a partition name has 1 to %d characters, not %zu",
                   DEV_NAME_MAX - 1, n);
        return IPUOF_E_INVAL;
    }
    for (const char *c = name; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.')) {
            errbuf_set(err, errlen, "partition name '%s' has the character 0x%02x; use letters, "
                       "digits, '-', '_' and '.'", name, (unsigned char)*c);
            return IPUOF_E_INVAL;
        }
    }
    if (!dev_is_pow2(count) || count > inv->n) {
        errbuf_set(err, errlen, "--size %u: a partition is a power of two IPUs (1, 2, 4, ...) "
                   "of at most this daemon's %u", count, inv->n);
        return IPUOF_E_INVAL;
    }
    if (!dev_is_pow2(num_gcds) || num_gcds > count) {
        errbuf_set(err, errlen, "--num-gcds %u: the GCDs divide the partition's %u IPUs "
                   "evenly, so their count is a power of two of at most %u", num_gcds, count,
                   count);
        return IPUOF_E_INVAL;
    }
    if (dev_vpart_find(inv, name) != NULL || dev_find_partition(inv, name) != NULL) {
        errbuf_set(err, errlen, "partition '%s' already exists%s; choose another name or "
                   "remove it first", name, dev_vpart_find(inv, name) ? "" :
                   " (attached by a program: ipuctl status shows it)");
        return IPUOF_E_BUSY;
    }
    first = find_group(inv, count);
    if (first < 0) {
        dev_describe_busy(inv, count, err, errlen);
        return IPUOF_E_BUSY;
    }
    v = calloc(1, sizeof *v);
    if (v == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return IPUOF_E_NOMEM;
    }
    memcpy(v->name, name, n + 1);
    v->first = (unsigned)first;
    v->count = count;
    v->num_gcds = num_gcds;
    v->reconfigurable = reconfigurable != 0;
    v->next = inv->vparts;
    inv->vparts = v;
    for (unsigned i = 0; i < count; i++)
        inv->ipus[v->first + i].vpart = v;
    *out = v;
    return IPUOF_OK;
}

void
dev_vpart_remove(struct dev_inventory *inv, struct dev_vpart *vp)
{
    for (struct dev_vpart **pp = &inv->vparts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == vp) {
            *pp = vp->next;
            break;
        }
    }
    for (unsigned i = 0; i < vp->count; i++)
        inv->ipus[vp->first + i].vpart = NULL;
    free(vp);
}

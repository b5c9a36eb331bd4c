/*
 * conv_dnnl.c — 2-D convolution forward through oneDNN's C API (see conv_dnnl.h), and the
 * engine, streams, reorders, memory-object sets and cache of primitives per shape it
 * shares with conv_dnnl_bwd.c (conv_dnnl_int.h).
 *
 * Threads: Debian's libdnnl 2.6 is built with the OpenMP runtime, and a primitive fixes the
 * split of its work for the OpenMP team size it sees when it is made. Measured on the
 * shared 2-core machine, an OpenMP team of 2 beside the simulator's pool cost resnet18 38 %
 * more CPU time than the hand-written kernels (its barriers spin while the other core is
 * busy), so every primitive here is made and run for one thread (omp_set_num_threads(1) on
 * the calling thread) and the batch is split over the simulator's pool instead (sim/kernels/pool.c):
 * the batch is cut into SIM_DNNL_PIECES pieces (conv_dnnl.h: the cut, and so the bits, do
 * not depend on the pool's size) that the pool's threads take in turn, and
 * piece i convolves images [i * nb, (i + 1) * nb) with its own stream (per thread), memory
 * objects and slice of scratch. The weights are reordered once per run, before the pieces.
 */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "conv_dnnl.h"
#include "conv_dnnl_int.h"
#include "hot.h"
#include "pool.h"
#include "sim_int.h"

#define NSETS SIM_DNNL_NSETS

enum { M_X, M_W, M_B, M_Y, M_BX, M_BW, M_BY, M_PAD, M_COUNT };
_Static_assert(M_COUNT <= SIM_DNNL_SET_MAX, "a set holds every memory object of a piece");


/* The forward's primitives for one sub-batch size. */
struct part {
    struct sim_dnnl_part base;          /* nb, its slice's bytes, its sets */
    dnnl_primitive_t conv, rx, ry;      /* rx, ry: reorders, NULL where the layout is plain
                                         * or the neighbour takes the blocked one */
    dnnl_memory_desc_t bx, by;          /* the layouts conv reads and writes */
    size_t off_bx, off_by, off_pad;     /* within the piece's slice of scratch */
};

static int part_make(const struct sim_dnnl_conv *d, int64_t nb, struct sim_dnnl_part *base,
                     dnnl_memory_desc_t *bw_out);
static void part_free(struct sim_dnnl_part *base);

static struct sim_dnnl_kind fwd = { sizeof(struct part), part_make, part_free, { NULL }, 0 };

pthread_mutex_t sim_dnnl_lock = PTHREAD_MUTEX_INITIALIZER;
dnnl_engine_t sim_dnnl_engine;
static pthread_key_t stream_key;
static int engine_ok = -1;          /* -1: not tried; 0: failed; 1: ready */

size_t
sim_dnnl_align(size_t n)
{
    return (n + SIM_DNNL_ALIGN - 1) / SIM_DNNL_ALIGN * SIM_DNNL_ALIGN;
}

size_t
sim_dnnl_md_bytes(const dnnl_memory_desc_t *md)
{
    return md != NULL ? sim_dnnl_align(dnnl_memory_desc_get_size(md)) : 0;
}

void
sim_dnnl_split(int64_t n, int cut, int64_t *nb, int64_t *pieces, int64_t *last)
{
    *nb = (n + cut - 1) / cut;
    *nb = *nb < 1 ? 1 : *nb;
    *pieces = (n + *nb - 1) / *nb;
    *last = n - (*pieces - 1) * *nb;
}

bool
sim_dnnl_key_equal(const struct sim_dnnl_conv *a, const struct sim_dnnl_conv *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->m == b->m &&
           a->oh == b->oh && a->ow == b->ow && a->kh == b->kh && a->kw == b->kw &&
           a->sh == b->sh && a->sw == b->sw && a->dh == b->dh && a->dw == b->dw &&
           a->ph == b->ph && a->pw == b->pw && a->group == b->group && a->bias == b->bias &&
           a->x_blocked == b->x_blocked && a->y_blocked == b->y_blocked;
}

static void
stream_free(void *s)
{
    dnnl_stream_destroy(s);
}

int
sim_dnnl_engine_get(void)
{
    sim_isa_level();    /* oneDNN's ISA cap (hot.h) goes in before its first use */
    if (engine_ok < 0)
        engine_ok = dnnl_engine_create(&sim_dnnl_engine, dnnl_cpu, 0) == dnnl_success &&
                    pthread_key_create(&stream_key, stream_free) == 0;
    return engine_ok ? 0 : -1;
}

/* Destroys the memory objects of sets[NSETS] (NULL ones skipped). */
static void
sets_free(struct sim_dnnl_set *sets)
{
    for (int s = 0; s < NSETS; s++)
        for (int i = 0; i < SIM_DNNL_SET_MAX; i++)
            if (sets[s].m[i] != NULL)
                dnnl_memory_destroy(sets[s].m[i]);
}

/* Frees what e holds (e itself too); NULL members are skipped. */
static void
entry_free(const struct sim_dnnl_kind *k, struct sim_dnnl_entry *e)
{
    if (e == NULL)
        return;
    for (int i = 0; i < 2; i++)
        if (e->part[i] != NULL) {
            sets_free(e->part[i]->sets);
            k->part_free(e->part[i]);
            free(e->part[i]);
        }
    if (e->rw != NULL)
        dnnl_primitive_destroy(e->rw);
    sets_free(e->wsets);
    free(e);
}

int
sim_dnnl_reorder(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, bool sum,
                 dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    int rc = -1;

    *out = NULL;
    if (!sum && dnnl_memory_desc_equal(a, b))
        return 0;
    if (sum && (dnnl_primitive_attr_create(&attr) != dnnl_success ||
                dnnl_post_ops_create(&po) != dnnl_success ||
                dnnl_post_ops_append_sum(po, 1.0f) != dnnl_success ||
                dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success))
        goto out;
    if (dnnl_reorder_primitive_desc_create(&pd, a, sim_dnnl_engine, b, sim_dnnl_engine,
                                           attr) == dnnl_success &&
        dnnl_primitive_create(out, pd) == dnnl_success)
        rc = 0;
out:
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    if (po != NULL)
        dnnl_post_ops_destroy(po);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

int
sim_dnnl_weight_mds(const struct sim_dnnl_conv *d, dnnl_memory_desc_t *w_md,
                    dnnl_memory_desc_t *b_md, dnnl_format_tag_t tag)
{
    dnnl_dims_t wd = { d->group, d->m / d->group, d->c / d->group, d->kh, d->kw };
    dnnl_dims_t bd = { d->m };
    int wn = d->group > 1 ? 5 : 4;

    if (wn == 4)
        memmove(wd, wd + 1, 4 * sizeof(wd[0]));
    if (tag != dnnl_format_tag_any)
        tag = wn == 5 ? dnnl_goihw : dnnl_oihw;
    return dnnl_memory_desc_init_by_tag(w_md, wn, wd, dnnl_f32, tag) == dnnl_success &&
                   dnnl_memory_desc_init_by_tag(b_md, 1, bd, dnnl_f32, dnnl_a) == dnnl_success
               ? 0
               : -1;
}

/* Builds k's entry for d split into up to `cut` pieces (sim_dnnl_lock held), or NULL. */
static struct sim_dnnl_entry *
entry_make(const struct sim_dnnl_kind *k, const struct sim_dnnl_conv *d, int cut)
{
    struct sim_dnnl_entry *e = calloc(1, sizeof(*e));
    dnnl_memory_desc_t w_md, b_md, bw0, bw1;
    int64_t nb, last;
    int omp_was = omp_get_max_threads();
    bool ok = false;

    if (e == NULL)
        return NULL;
    e->key = *d;
    e->cut = cut;
    sim_dnnl_split(d->n, cut, &nb, &e->pieces, &last);
    omp_set_num_threads(1);
    e->part[0] = calloc(1, k->part_size);
    e->part[1] = calloc(1, k->part_size);
    if (e->part[0] == NULL || e->part[1] == NULL ||
        k->part_make(d, nb, e->part[0], &bw0) != 0 ||
        (last != nb && (k->part_make(d, last, e->part[1], &bw1) != 0 ||
                        !dnnl_memory_desc_equal(&bw0, &bw1))) ||
        sim_dnnl_weight_mds(d, &w_md, &b_md, dnnl_oihw) != 0 ||
        sim_dnnl_reorder(&w_md, &bw0, false, &e->rw) != 0)
        goto out;
    for (int s = 0; e->rw != NULL && s < NSETS; s++)
        if (dnnl_memory_create(&e->wsets[s].m[SIM_DNNL_W], &w_md, sim_dnnl_engine,
                               DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&e->wsets[s].m[SIM_DNNL_BW], &bw0, sim_dnnl_engine,
                               DNNL_MEMORY_NONE) != dnnl_success)
            goto out;
    e->off_slices = e->rw != NULL ? sim_dnnl_md_bytes(&bw0) : 0;
    e->slice = e->part[0]->bytes > e->part[1]->bytes ? e->part[0]->bytes : e->part[1]->bytes;
    ok = true;
out:
    omp_set_num_threads(omp_was);
    if (!ok) {
        entry_free(k, e);
        return NULL;
    }
    return e;
}

int
sim_dnnl_prepare(struct sim_dnnl_kind *k, const struct sim_dnnl_conv *d, int cut, int *id,
                 size_t *scratch)
{
    struct sim_dnnl_entry *e = NULL;
    int rc = -1;

    cut = cut < 1 ? 1 : cut > NSETS ? NSETS : cut;
    pthread_mutex_lock(&sim_dnnl_lock);
    if (sim_dnnl_engine_get() != 0)
        goto out;
    for (int i = 0; i < k->n; i++)
        if (sim_dnnl_key_equal(&k->table[i]->key, d) && k->table[i]->cut == cut) {
            e = k->table[i];
            *id = i;
            goto found;
        }
    if (k->n >= SIM_DNNL_MAX_SHAPES)
        goto out;
    e = entry_make(k, d, cut);
    if (e == NULL)
        goto out;
    k->table[k->n] = e;
    *id = k->n++;
found:
    *scratch = e->off_slices + e->slice * (size_t)e->pieces;
    rc = 0;
out:
    pthread_mutex_unlock(&sim_dnnl_lock);
    return rc;
}

struct sim_dnnl_part *
sim_dnnl_part_of(const struct sim_dnnl_entry *e, int64_t i)
{
    return e->part[i == e->pieces - 1 && e->part[1]->nb > 0];
}

int
sim_dnnl_weights_reorder(const struct sim_dnnl_entry *e, dnnl_stream_t s, const float *w,
                         void *bw)
{
    struct sim_dnnl_set *ws = sim_dnnl_set_take((struct sim_dnnl_set *)e->wsets);
    int rc;

    dnnl_memory_set_data_handle(ws->m[SIM_DNNL_W], (void *)w);
    dnnl_memory_set_data_handle(ws->m[SIM_DNNL_BW], bw);
    rc = sim_dnnl_exec2(e->rw, s, ws->m[SIM_DNNL_W], ws->m[SIM_DNNL_BW]);
    if (rc == 0)
        rc = dnnl_stream_wait(s) == dnnl_success ? 0 : -1;
    atomic_store(&ws->busy, 0);
    return rc;
}

/* The forward's primitives (conv, rx, ry) of a part. */
static void
part_free(struct sim_dnnl_part *base)
{
    struct part *pt = (struct part *)base;

    if (pt->conv != NULL)
        dnnl_primitive_destroy(pt->conv);
    if (pt->rx != NULL)
        dnnl_primitive_destroy(pt->rx);
    if (pt->ry != NULL)
        dnnl_primitive_destroy(pt->ry);
}

/*
 * Makes the forward's primitives for nb images of d, on one thread (fwd.part_make). *bw gets
 * the weights' layout the convolution wants (the caller checks both parts agree). Returns 0
 * or -1.
 */
static int
part_make(const struct sim_dnnl_conv *d, int64_t nb, struct sim_dnnl_part *base,
          dnnl_memory_desc_t *bw_out)
{
    struct part *pt = (struct part *)base;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_convolution_desc_t cd;
    dnnl_memory_desc_t x_md, w_md, b_md, y_md, any_x, any_w, any_y, bias_md;
    const dnnl_memory_desc_t *bx, *bw, *by, *pad;
    dnnl_dims_t xd = { nb, d->c, d->h, d->w }, yd = { nb, d->m, d->oh, d->ow };
    dnnl_dims_t st = { d->sh, d->sw }, dil = { d->dh - 1, d->dw - 1 };
    dnnl_dims_t pl = { d->ph, d->pw }, pr;
    int rc = -1;

    base->nb = nb;
    /* the end padding that gives exactly (oh, ow) */
    pr[0] = (d->oh - 1) * d->sh + (d->kh - 1) * d->dh + 1 - d->h - d->ph;
    pr[1] = (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1 - d->w - d->pw;
    /* a stride that skips the last rows (1x1 stride 2 over an even size: -1) needs no end
     * padding: oneDNN's (h + pl + pr - k) / s + 1 rounds down to oh with pr = 0 too */
    pr[0] = pr[0] < 0 && pr[0] > -d->sh ? 0 : pr[0];
    pr[1] = pr[1] < 0 && pr[1] > -d->sw ? 0 : pr[1];
    if (pr[0] < 0 || pr[1] < 0)
        return -1;
    if (sim_dnnl_weight_mds(d, &w_md, &b_md, dnnl_oihw) != 0 ||
        sim_dnnl_weight_mds(d, &any_w, &bias_md, dnnl_format_tag_any) != 0 ||
        dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&any_x, 4, xd, dnnl_f32, dnnl_format_tag_any) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_tag(&any_y, 4, yd, dnnl_f32, dnnl_format_tag_any) !=
            dnnl_success)
        return -1;
    if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                   dnnl_convolution_direct, &any_x, &any_w,
                                                   d->bias ? &b_md : NULL, &any_y, st, dil,
                                                   pl, pr) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success ||
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) !=
            dnnl_success ||
        dnnl_primitive_desc_create(&pd, &cd, attr, sim_dnnl_engine, NULL) != dnnl_success ||
        dnnl_primitive_create(&pt->conv, pd) != dnnl_success)
        goto out;
    bx = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    bw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    by = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    pad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (bx == NULL || bw == NULL || by == NULL ||
        (!d->x_blocked && sim_dnnl_reorder(&x_md, bx, false, &pt->rx) != 0) ||
        (!d->y_blocked && sim_dnnl_reorder(by, &y_md, false, &pt->ry) != 0))
        goto out;
    pt->bx = *bx;
    pt->by = *by;
    *bw_out = *bw;
    pt->off_bx = 0;
    pt->off_by = pt->rx != NULL ? sim_dnnl_md_bytes(bx) : 0;
    pt->off_pad = pt->off_by + (pt->ry != NULL ? sim_dnnl_md_bytes(by) : 0);
    base->bytes = pt->off_pad + sim_dnnl_md_bytes(pad);
    for (int s = 0; s < NSETS; s++) {
        dnnl_memory_t *m = base->sets[s].m;
        if (dnnl_memory_create(&m[M_X], &x_md, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&m[M_B], &b_md, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&m[M_Y], &y_md, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&m[M_BX], bx, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&m[M_BW], bw, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&m[M_BY], by, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success ||
            (pad != NULL && dnnl_memory_desc_get_size(pad) > 0 &&
             dnnl_memory_create(&m[M_PAD], pad, sim_dnnl_engine, DNNL_MEMORY_NONE) != dnnl_success))
            goto out;
    }
    rc = 0;
out:
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

int
sim_dnnl_conv_prepare(const struct sim_dnnl_conv *d, int cut, int *id, size_t *scratch)
{
    return sim_dnnl_prepare(&fwd, d, cut, id, scratch);
}

bool
sim_dnnl_conv_chains(int from, int to)
{
    bool ok = false;

    pthread_mutex_lock(&sim_dnnl_lock);
    if (from >= 0 && from < fwd.n && to >= 0 && to < fwd.n) {
        const struct sim_dnnl_entry *a = fwd.table[from], *b = fwd.table[to];
        ok = a->cut == b->cut && a->pieces == b->pieces &&
             a->key.n == b->key.n && a->key.m == b->key.c && a->key.oh == b->key.h &&
             a->key.ow == b->key.w;
        for (int i = 0; ok && i < 2; i++) {
            const struct part *pa = (const struct part *)a->part[i];
            const struct part *pb = (const struct part *)b->part[i];
            size_t plain =
                (size_t)(pa->base.nb * a->key.m * a->key.oh * a->key.ow) * sizeof(float);
            ok = pa->base.nb == pb->base.nb &&
                 (pa->base.nb == 0 || (dnnl_memory_desc_equal(&pa->by, &pb->bx) &&
                                  dnnl_memory_desc_get_size(&pa->by) == plain));
        }
    }
    pthread_mutex_unlock(&sim_dnnl_lock);
    return ok;
}

dnnl_stream_t
sim_dnnl_stream(void)
{
    dnnl_stream_t s = pthread_getspecific(stream_key);

    if (s == NULL &&
        dnnl_stream_create(&s, sim_dnnl_engine, dnnl_stream_default_flags) == dnnl_success &&
        pthread_setspecific(stream_key, s) != 0) {
        dnnl_stream_destroy(s);
        s = NULL;
    }
    if (s != NULL && omp_get_max_threads() != 1)
        omp_set_num_threads(1);
    return s;
}

int
sim_dnnl_exec2(dnnl_primitive_t p, dnnl_stream_t s, dnnl_memory_t from, dnnl_memory_t to)
{
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };

    return dnnl_primitive_execute(p, s, 2, a) == dnnl_success ? 0 : -1;
}

/* What the pieces of one run share. */
struct run {
    const struct sim_dnnl_entry *e;
    const float *x, *bw, *bias;         /* bw: the weights in the layout conv wants */
    float *y;
    const struct sim_act *act;          /* applied to each piece's y, or NULL */
    char *scratch;
    atomic_int failed;
};

struct sim_dnnl_set *
sim_dnnl_set_take(struct sim_dnnl_set *sets)
{
    for (int k = 0;; k = (k + 1) % NSETS) {
        int z = 0;
        if (atomic_compare_exchange_strong(&sets[k].busy, &z, 1))
            return &sets[k];
    }
}

/* Convolves piece i (images [i * nb, ...)) on the calling thread. Returns 0 or -1. */
static int
piece_run(const struct run *r, int64_t i)
{
    const struct sim_dnnl_entry *e = r->e;
    struct part *pt = (struct part *)sim_dnnl_part_of(e, i);
    struct sim_dnnl_set *set;
    dnnl_stream_t s = sim_dnnl_stream();
    const struct sim_dnnl_conv *d = &e->key;
    char *sc = r->scratch + e->off_slices + e->slice * (size_t)i;
    const float *x = r->x + i * e->part[0]->nb * d->c * d->h * d->w;
    float *y = r->y + i * e->part[0]->nb * d->m * d->oh * d->ow;
    dnnl_exec_arg_t a[5];
    dnnl_memory_t *m;
    int na = 0, rc = -1;

    if (s == NULL)
        return -1;
    set = sim_dnnl_set_take(pt->base.sets);
    m = set->m;
    dnnl_memory_set_data_handle(m[M_X], (void *)x);
    dnnl_memory_set_data_handle(m[M_Y], y);
    dnnl_memory_set_data_handle(m[M_BX], pt->rx != NULL ? sc + pt->off_bx : (void *)x);
    dnnl_memory_set_data_handle(m[M_BW], (void *)r->bw);
    dnnl_memory_set_data_handle(m[M_BY], pt->ry != NULL ? sc + pt->off_by : (void *)y);
    if (pt->rx != NULL && sim_dnnl_exec2(pt->rx, s, m[M_X], m[M_BX]) != 0)
        goto out;
    a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, m[M_BX] };
    a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, m[M_BW] };
    a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_DST, m[M_BY] };
    if (r->bias != NULL) {
        dnnl_memory_set_data_handle(m[M_B], (void *)r->bias);
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, m[M_B] };
    }
    if (m[M_PAD] != NULL) {
        dnnl_memory_set_data_handle(m[M_PAD], sc + pt->off_pad);
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, m[M_PAD] };
    }
    if (dnnl_primitive_execute(pt->conv, s, na, a) != dnnl_success ||
        (pt->ry != NULL && sim_dnnl_exec2(pt->ry, s, m[M_BY], m[M_Y]) != 0))
        goto out;
    rc = dnnl_stream_wait(s) == dnnl_success ? 0 : -1;
    if (rc == 0 && r->act != NULL)     /* the piece's images, while they are in cache */
        sim_act_range(r->act, y, y, 0, pt->base.nb * d->m * d->oh * d->ow);
out:
    atomic_store(&set->busy, 0);
    return rc;
}

static void
pieces_fn(void *ctx, int64_t lo, int64_t hi)
{
    struct run *r = ctx;

    for (int64_t i = lo; i < hi; i++)
        if (piece_run(r, i) != 0)
            atomic_store(&r->failed, 1);
}

/* bw = w in the layout the convolution of e wants, on the calling thread (e->rw != NULL).
 * Returns 0 or -1. */
static int
weights_reorder(const struct sim_dnnl_entry *e, const float *w, void *bw)
{
    dnnl_stream_t s = sim_dnnl_stream();

    return s != NULL ? sim_dnnl_weights_reorder(e, s, w, bw) : -1;
}

int
sim_dnnl_conv_weights(int id, const float *w, float **bw, size_t *bytes)
{
    const struct sim_dnnl_entry *e = fwd.table[id];
    void *p;

    *bw = NULL;
    *bytes = 0;
    if (e->rw == NULL)
        return 0;
    p = sim_aligned_alloc(e->off_slices);
    if (p == NULL)
        return -1;
    if (weights_reorder(e, w, p) != 0) {
        free(p);
        return -1;
    }
    *bw = p;
    *bytes = e->off_slices;
    return 0;
}

int
sim_dnnl_conv_run(int id, const float *x, const float *w, bool w_blocked, const float *bias,
                  float *y, const struct sim_act *act, void *scratch)
{
    const struct sim_dnnl_entry *e = fwd.table[id];
    struct run r = { .e = e, .x = x, .bw = w, .bias = bias, .y = y, .act = act,
                     .scratch = scratch };

    atomic_init(&r.failed, 0);
    if (e->rw != NULL && !w_blocked) {
        if (weights_reorder(e, w, scratch) != 0)
            return -1;
        r.bw = scratch;
    }
    sim_pool_for(e->pieces, 1, pieces_fn, &r);
    return atomic_load(&r.failed) ? -1 : 0;
}

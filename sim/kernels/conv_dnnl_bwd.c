/*
 * conv_dnnl_bwd.c — 2-D convolution backward (data and weights) through oneDNN's C API (see
 * conv_dnnl.h; threads as in conv_dnnl.c: one-thread primitives, the batch cut into
 * SIM_DNNL_PIECES pieces whatever the pool's size, which the pool's threads take in turn).
 *
 * oneDNN's backward primitives overwrite their destinations, while a gradient rule adds
 * into its gradients (a tensor read by several nodes gets one contribution from each, and
 * the weights' accumulators sum over micro-batches). So both gradients are computed into
 * the plan scratch in the layouts oneDNN prefers and added by reorders with a sum post-op:
 * dX piece by piece into its images (disjoint, in parallel), dW piece after piece in a fixed
 * order once all pieces are done (each piece's dW covers its images only), so the result
 * does not depend on which thread ran what.
 *
 * Scratch of a run: [weights in the backward-data layout][one slice per piece: x, dY for
 * each primitive, dX, dW in blocked layouts; oneDNN's scratchpad].
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "conv_dnnl.h"
#include "conv_dnnl_int.h"
#include "pool.h"

#define NSETS SIM_DNNL_NSETS

/* memory objects of a piece's set */
enum { B_X, B_DY, B_DX, B_W, B_DW, B_BX, B_BDYD, B_BDYW, B_BDX, B_BW, B_BDW, B_PAD, B_PADW,
       B_COUNT };
_Static_assert(B_COUNT <= SIM_DNNL_SET_MAX, "a set holds every memory object of a piece");

/* The backward's primitives for one sub-batch size. */
struct bpart {
    struct sim_dnnl_part base;      /* nb, its slice's bytes, its sets */
    dnnl_primitive_t data, wts;     /* backward data, backward weights */
    dnnl_primitive_t rx, rdyd, rdyw;    /* plain x, dY to the layouts they want; NULL: plain */
    dnnl_primitive_t rdx, rdw;      /* blocked dX, dW added into plain ones (sum post-op) */
    bool dy_shared;                 /* both primitives want dY in the same layout */
    size_t off_bx, off_bdyd, off_bdyw, off_bdx, off_bdw, off_pad;
};

static int bpart_make(const struct sim_dnnl_conv *d, int64_t nb, struct sim_dnnl_part *base,
                      dnnl_memory_desc_t *bw_out);
static void bpart_free(struct sim_dnnl_part *base);

/* the entries' rw: the weights to the layout backward data wants */
static struct sim_dnnl_kind bwd = { sizeof(struct bpart), bpart_make, bpart_free, { NULL }, 0 };

/* The backward's primitives of a part. */
static void
bpart_free(struct sim_dnnl_part *base)
{
    struct bpart *pt = (struct bpart *)base;
    dnnl_primitive_t *ps[] = { &pt->data, &pt->wts, &pt->rx, &pt->rdyd, &pt->rdyw, &pt->rdx,
                               &pt->rdw };

    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        if (*ps[i] != NULL)
            dnnl_primitive_destroy(*ps[i]);
}

/* The three descriptors (forward hint, backward data, backward weights) of nb images of d
 * as primitive descriptors (caller-owned). Returns 0 or -1. */
static int
pds_make(const struct sim_dnnl_conv *d, int64_t nb, dnnl_primitive_attr_t attr,
         dnnl_primitive_desc_t *fpd, dnnl_primitive_desc_t *dpd, dnnl_primitive_desc_t *wpd)
{
    dnnl_convolution_desc_t fd, dd, wd;
    dnnl_memory_desc_t any_x, any_w, any_y, bias_md;
    dnnl_dims_t xd = { nb, d->c, d->h, d->w }, yd = { nb, d->m, d->oh, d->ow };
    dnnl_dims_t st = { d->sh, d->sw }, dil = { d->dh - 1, d->dw - 1 };
    dnnl_dims_t pl = { d->ph, d->pw }, pr;

    /* the end padding that gives exactly (oh, ow) */
    pr[0] = (d->oh - 1) * d->sh + (d->kh - 1) * d->dh + 1 - d->h - d->ph;
    pr[1] = (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1 - d->w - d->pw;
    if (pr[0] < 0 || pr[1] < 0)
        return -1;
    if (sim_dnnl_weight_mds(d, &any_w, &bias_md, dnnl_format_tag_any) != 0 ||
        dnnl_memory_desc_init_by_tag(&any_x, 4, xd, dnnl_f32, dnnl_format_tag_any) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_tag(&any_y, 4, yd, dnnl_f32, dnnl_format_tag_any) !=
            dnnl_success)
        return -1;
    if (dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                   dnnl_convolution_direct, &any_x, &any_w,
                                                   NULL, &any_y, st, dil, pl, pr) !=
            dnnl_success ||
        dnnl_dilated_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &any_x,
                                                         &any_w, &any_y, st, dil, pl, pr) !=
            dnnl_success ||
        dnnl_dilated_convolution_backward_weights_desc_init(&wd, dnnl_convolution_direct,
                                                            &any_x, &any_w, NULL, &any_y, st,
                                                            dil, pl, pr) != dnnl_success)
        return -1;
    if (dnnl_primitive_desc_create(fpd, &fd, attr, sim_dnnl_engine, NULL) != dnnl_success ||
        dnnl_primitive_desc_create(dpd, &dd, attr, sim_dnnl_engine, *fpd) != dnnl_success ||
        dnnl_primitive_desc_create(wpd, &wd, attr, sim_dnnl_engine, *fpd) != dnnl_success)
        return -1;
    return 0;
}

/* Memory objects of every set of pt: plain x, dy, dx (nb images) and weights, and the
 * blocked ones. Returns 0 or -1. */
static int
bpart_sets(struct bpart *pt, const dnnl_memory_desc_t *const md[B_COUNT])
{
    for (int s = 0; s < NSETS; s++)
        for (int i = 0; i < B_COUNT; i++)
            if (md[i] != NULL && dnnl_memory_desc_get_size(md[i]) > 0 &&
                dnnl_memory_create(&pt->base.sets[s].m[i], md[i], sim_dnnl_engine,
                                   DNNL_MEMORY_NONE) != dnnl_success)
                return -1;
    return 0;
}

/*
 * Makes the backward's primitives for nb images of d, on one thread (bwd.part_make).
 * *bw_out gets the weights' layout backward data wants (the caller checks both parts
 * agree). Returns 0 or -1.
 */
static int
bpart_make(const struct sim_dnnl_conv *d, int64_t nb, struct sim_dnnl_part *base,
           dnnl_memory_desc_t *bw_out)
{
    struct bpart *pt = (struct bpart *)base;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    dnnl_memory_desc_t x_md, y_md, w_md, b_md;
    const dnnl_memory_desc_t *bx, *bdyd, *bdyw, *bdx, *bw, *bdw, *padd, *padw;
    const dnnl_memory_desc_t *md[B_COUNT] = { NULL };
    dnnl_dims_t xd = { nb, d->c, d->h, d->w }, yd = { nb, d->m, d->oh, d->ow };
    size_t pad;
    int rc = -1;

    base->nb = nb;
    if (sim_dnnl_weight_mds(d, &w_md, &b_md, dnnl_oihw) != 0 ||
        dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success ||
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) !=
            dnnl_success ||
        pds_make(d, nb, attr, &fpd, &dpd, &wpd) != 0 ||
        dnnl_primitive_create(&pt->data, dpd) != dnnl_success ||
        dnnl_primitive_create(&pt->wts, wpd) != dnnl_success)
        goto out;
    bdx = dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_src_md, 0);
    bw = dnnl_primitive_desc_query_md(dpd, dnnl_query_weights_md, 0);
    bdyd = dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_dst_md, 0);
    padd = dnnl_primitive_desc_query_md(dpd, dnnl_query_scratchpad_md, 0);
    bx = dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0);
    bdw = dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_weights_md, 0);
    bdyw = dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0);
    padw = dnnl_primitive_desc_query_md(wpd, dnnl_query_scratchpad_md, 0);
    if (bdx == NULL || bw == NULL || bdyd == NULL || bx == NULL || bdw == NULL ||
        bdyw == NULL || sim_dnnl_reorder(&x_md, bx, false, &pt->rx) != 0 ||
        sim_dnnl_reorder(&y_md, bdyd, false, &pt->rdyd) != 0 ||
        sim_dnnl_reorder(&y_md, bdyw, false, &pt->rdyw) != 0 ||
        sim_dnnl_reorder(bdx, &x_md, true, &pt->rdx) != 0 ||
        sim_dnnl_reorder(bdw, &w_md, true, &pt->rdw) != 0)
        goto out;
    *bw_out = *bw;
    pt->dy_shared = dnnl_memory_desc_equal(bdyd, bdyw);
    pt->off_bx = 0;
    pt->off_bdyd = pt->rx != NULL ? sim_dnnl_md_bytes(bx) : 0;
    pt->off_bdyw = pt->off_bdyd + (pt->rdyd != NULL ? sim_dnnl_md_bytes(bdyd) : 0);
    pt->off_bdx = pt->off_bdyw +
                  (pt->rdyw != NULL && !pt->dy_shared ? sim_dnnl_md_bytes(bdyw) : 0);
    pt->off_bdw = pt->off_bdx + sim_dnnl_md_bytes(bdx);
    pt->off_pad = pt->off_bdw + sim_dnnl_md_bytes(bdw);
    pad = sim_dnnl_md_bytes(padd);
    if (sim_dnnl_md_bytes(padw) > pad)
        pad = sim_dnnl_md_bytes(padw);
    base->bytes = pt->off_pad + pad;
    md[B_X] = &x_md;
    md[B_DY] = &y_md;
    md[B_DX] = &x_md;
    md[B_W] = &w_md;
    md[B_DW] = &w_md;
    md[B_BX] = bx;
    md[B_BDYD] = bdyd;
    md[B_BDYW] = bdyw;
    md[B_BDX] = bdx;
    md[B_BW] = bw;
    md[B_BDW] = bdw;
    /* one scratchpad object per primitive (its own descriptor), both at off_pad */
    md[B_PAD] = padd;
    md[B_PADW] = padw;
    if (bpart_sets(pt, md) != 0)
        goto out;
    rc = 0;
out:
    if (fpd != NULL)
        dnnl_primitive_desc_destroy(fpd);
    if (dpd != NULL)
        dnnl_primitive_desc_destroy(dpd);
    if (wpd != NULL)
        dnnl_primitive_desc_destroy(wpd);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

int
sim_dnnl_conv_bwd_prepare(const struct sim_dnnl_conv *d, int cut, int *id, size_t *scratch)
{
    return sim_dnnl_prepare(&bwd, d, cut, id, scratch);
}

/* What the pieces of one run share. */
struct brun {
    const struct sim_dnnl_entry *e;
    const float *x, *bw, *dy;       /* bw: the weights in the layout backward data wants */
    float *dx;
    bool want_dw;
    char *scratch;
    atomic_int failed;
};

/* The part piece i uses. */
static struct bpart *
part_of(const struct sim_dnnl_entry *e, int64_t i)
{
    return (struct bpart *)sim_dnnl_part_of(e, i);
}

/* A primitive with its arguments, all of them bound. Returns 0 or -1. */
static int
run_prim(dnnl_primitive_t p, dnnl_stream_t s, int n, const dnnl_exec_arg_t *a)
{
    return dnnl_primitive_execute(p, s, n, a) == dnnl_success ? 0 : -1;
}

/* The gradients of piece i (images [i * nb, ...)) on the calling thread: dX added into its
 * images, dW left blocked in the piece's slice. Returns 0 or -1. */
static int
bpiece_run(const struct brun *r, int64_t i)
{
    const struct sim_dnnl_entry *e = r->e;
    struct bpart *pt = part_of(e, i);
    const struct sim_dnnl_conv *d = &e->key;
    dnnl_stream_t s = sim_dnnl_stream();
    char *sc = r->scratch + e->off_slices + e->slice * (size_t)i;
    const float *x = r->x + i * e->part[0]->nb * d->c * d->h * d->w;
    const float *dy = r->dy + i * e->part[0]->nb * d->m * d->oh * d->ow;
    struct sim_dnnl_set *set;
    dnnl_memory_t *m;
    int rc = -1;

    if (s == NULL)
        return -1;
    set = sim_dnnl_set_take(pt->base.sets);
    m = set->m;
    dnnl_memory_set_data_handle(m[B_DY], (void *)dy);
    if (m[B_PAD] != NULL)
        dnnl_memory_set_data_handle(m[B_PAD], sc + pt->off_pad);
    if (m[B_PADW] != NULL)
        dnnl_memory_set_data_handle(m[B_PADW], sc + pt->off_pad);
    if (r->want_dw) {
        dnnl_memory_t bdy = m[B_BDYW];
        dnnl_exec_arg_t a[4];
        int na = 0;
        dnnl_memory_set_data_handle(m[B_X], (void *)x);
        dnnl_memory_set_data_handle(m[B_BX], pt->rx != NULL ? sc + pt->off_bx : (void *)x);
        dnnl_memory_set_data_handle(bdy, pt->rdyw == NULL ? (void *)dy
                                         : sc + (pt->dy_shared ? pt->off_bdyd : pt->off_bdyw));
        dnnl_memory_set_data_handle(m[B_BDW], sc + pt->off_bdw);
        if ((pt->rx != NULL && sim_dnnl_exec2(pt->rx, s, m[B_X], m[B_BX]) != 0) ||
            (pt->rdyw != NULL && sim_dnnl_exec2(pt->rdyw, s, m[B_DY], bdy) != 0))
            goto out;
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, m[B_BX] };
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, bdy };
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_WEIGHTS, m[B_BDW] };
        if (m[B_PADW] != NULL)
            a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, m[B_PADW] };
        if (run_prim(pt->wts, s, na, a) != 0)
            goto out;
    }
    if (r->dx != NULL) {
        float *dx = r->dx + i * e->part[0]->nb * d->c * d->h * d->w;
        dnnl_exec_arg_t a[4];
        int na = 0;
        dnnl_memory_set_data_handle(m[B_BW], (void *)r->bw);
        dnnl_memory_set_data_handle(m[B_BDYD], pt->rdyd != NULL ? sc + pt->off_bdyd
                                                                : (void *)dy);
        dnnl_memory_set_data_handle(m[B_BDX], sc + pt->off_bdx);
        dnnl_memory_set_data_handle(m[B_DX], dx);
        /* dY in the data primitive's layout, unless the weights' pass already made it */
        if (pt->rdyd != NULL && !(r->want_dw && pt->dy_shared) &&
            sim_dnnl_exec2(pt->rdyd, s, m[B_DY], m[B_BDYD]) != 0)
            goto out;
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, m[B_BDYD] };
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, m[B_BW] };
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC, m[B_BDX] };
        if (m[B_PAD] != NULL)
            a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, m[B_PAD] };
        if (run_prim(pt->data, s, na, a) != 0 ||
            sim_dnnl_exec2(pt->rdx, s, m[B_BDX], m[B_DX]) != 0)
            goto out;
    }
    rc = dnnl_stream_wait(s) == dnnl_success ? 0 : -1;
out:
    atomic_store(&set->busy, 0);
    return rc;
}

static void
bpieces_fn(void *ctx, int64_t lo, int64_t hi)
{
    struct brun *r = ctx;

    for (int64_t i = lo; i < hi; i++)
        if (bpiece_run(r, i) != 0)
            atomic_store(&r->failed, 1);
}

/* dw += every piece's blocked dW, piece 0 first, on the calling thread. Returns 0 or -1. */
static int
dw_add(const struct brun *r, dnnl_stream_t s, float *dw)
{
    const struct sim_dnnl_entry *e = r->e;
    int rc = 0;

    for (int64_t i = 0; i < e->pieces && rc == 0; i++) {
        struct bpart *pt = part_of(e, i);
        struct sim_dnnl_set *set = sim_dnnl_set_take(pt->base.sets);
        char *sc = r->scratch + e->off_slices + e->slice * (size_t)i;
        dnnl_memory_set_data_handle(set->m[B_BDW], sc + pt->off_bdw);
        dnnl_memory_set_data_handle(set->m[B_DW], dw);
        rc = sim_dnnl_exec2(pt->rdw, s, set->m[B_BDW], set->m[B_DW]);
        if (rc == 0)
            rc = dnnl_stream_wait(s) == dnnl_success ? 0 : -1;
        atomic_store(&set->busy, 0);
    }
    return rc;
}

int
sim_dnnl_conv_bwd_run(int id, const float *x, const float *w, const float *dy, float *dx,
                      float *dw, void *scratch)
{
    const struct sim_dnnl_entry *e = bwd.table[id];
    struct brun r = { .e = e, .x = x, .bw = w, .dy = dy, .dx = dx, .want_dw = dw != NULL,
                      .scratch = scratch };
    dnnl_stream_t s = sim_dnnl_stream();

    if (s == NULL)
        return -1;
    atomic_init(&r.failed, 0);
    if (dx != NULL && e->rw != NULL) {
        if (sim_dnnl_weights_reorder(e, s, w, scratch) != 0)
            return -1;
        r.bw = scratch;
    }
    if (dx != NULL || dw != NULL)
        sim_pool_for(e->pieces, 1, bpieces_fn, &r);
    if (atomic_load(&r.failed))
        return -1;
    return dw != NULL ? dw_add(&r, s, dw) : 0;
}

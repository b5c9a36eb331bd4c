/*
 * op_conv.c — Conv on float NCHW tensors (1-D and 2-D, pads, strides, dilations, groups,
 * auto_pad, optional bias) as im2col + OpenBLAS sgemm, forward and backward.
 *
 * The batch is folded into the GEMM: images are processed in chunks whose im2col matrix
 * fits a fixed scratch budget, so one sgemm covers many images (N = chunk x OH x OW);
 * its (M, chunk, OH*OW) result is then scattered to NCHW with the bias added. A 1x1
 * convolution with stride 1 and no padding skips im2col and multiplies each image in place.
 * The backward uses the same chunks: dY is gathered to (M, chunk x OH x OW), the weight
 * gradient is one sgemm against the im2col matrices (kept from the forward when they fit
 * SAVE_BUDGET, else recomputed), the input gradient one sgemm
 * with the transposed weights into a column matrix that col2im adds back into NCHW.
 * The layer shapes where oneDNN measured faster run its primitives instead (conv_dnnl.c
 * forward, conv_dnnl_bwd.c backward; the rules use_dnnl and use_dnnl_bwd).
 * An activation fused into the Conv (fuse.c, inference; k->act) is applied by every forward
 * path to each piece of the output right after computing it (act.h).
 * 3-D convolution (a 5-D input) is op_conv3d.c's: infer, forward and backward hand it over.
 * Does not: ConvTranspose, integer convolution.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv3d.h"
#include "conv_dnnl.h"
#include "ops.h"
#include "hot.h"
#include "pool.h"
#include "vsum.h"

#define SCRATCH_BUDGET ((int64_t)256 << 10) /* fits L2: the unfolded images stay in cache */
#define SAVE_BUDGET ((int64_t)16 << 20)     /* most bytes of im2col matrices kept for the
                                             * backward (the tutorial's: 2.3 and 2.6 MB) */

#define BWD_DATA 1u       /* dnnl_bwd: the input gradient */
#define BWD_WEIGHTS 2u    /* dnnl_bwd: the weight gradient */

#define DW_MAX_TAPS 256  /* depthwise kernels up to this many taps run the direct kernel */

struct conv_params {
    int64_t n, c, h, w;             /* input (2-D view; 1-D has h = 1) */
    int64_t m, oh, ow;              /* output channels and spatial dims */
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;
    int64_t group, cg, mg;          /* channels per group in and out */
    int64_t kg;                     /* rows of the im2col matrix: cg * kh * kw */
    int64_t chunk;                  /* images per GEMM */
    bool save_cols;                 /* training, one group, not oneDNN, within SAVE_BUDGET:
                                     * the forward's im2col matrices (chunk after chunk) are
                                     * kept (saved) for the weight gradient */
    bool pointwise;                 /* 1x1, stride 1, no padding */
    bool depthwise;                 /* one input channel per group (group > 1): a direct
                                     * kernel, no im2col */
    bool dnnl;                      /* the forward runs oneDNN's primitive dnnl_id */
    int dnnl_id;
    bool bias;                      /* a bias input (the oneDNN key needs it) */
    const float *bw;                /* the weights reordered once for dnnl_id (layout.c:
                                     * constant weights of an inference executable, which
                                     * owns the buffer), or NULL: reordered every run */
    unsigned dnnl_bwd;              /* training: the gradients (BWD_DATA, BWD_WEIGHTS) oneDNN's
                                     * dnnl_bwd_id computes; the others are this file's */
    int dnnl_bwd_id;
};

/*
 * Whether the forward of p goes to oneDNN (conv_dnnl.c) rather than this file's kernels:
 * the rule measured per layer by bench/conv_shapes.py (CPU seconds on one thread, batch 8,
 * the convolutions of resnet18, mobilenet_v2, efficientnet_b0, convnext_tiny; oneDNN's time
 * includes its reorders from and to NCHW). oneDNN wins on 2-D kernels of 3x3 and more over
 * 8 or more channels (1.1-1.6x), on 7x7 stems (1.4-1.6x), and on depthwise kernels of 5x5
 * and more or with outputs 14 wide or less (1.5-14x); the rest stays here: pointwise (its
 * NCHW GEMM needs no reorder; 0.4-1.1x), 2x2 and 3-5-wide stems (0.6-0.9x), depthwise 3x3
 * over wide images (0.3-1.0x). IPUOF_SIM_CONV=own or =dnnl overrides it (for measuring).
 */
static bool
use_dnnl(const struct conv_params *p, bool training)
{
    const char *e = getenv("IPUOF_SIM_CONV");
    int64_t taps = p->kh * p->kw;

    if (e != NULL && strcmp(e, "own") == 0)
        return false;
    if (e != NULL && strcmp(e, "dnnl") == 0)
        return true;
    if (p->pointwise || (p->h == 1 && p->kh == 1))   /* pointwise and 1-D: measured or not */
        return false;
    /* training with the hand-written backward: the im2col matrices kept for the weight
     * gradient (save_cols) are made by the hand-written forward anyway */
    if (training && !(p->dnnl_bwd & BWD_WEIGHTS) && p->group == 1 && !p->depthwise &&
        p->kg * p->n * p->oh * p->ow * (int64_t)sizeof(float) <= SAVE_BUDGET)
        return false;
    if (p->depthwise)
        return taps >= 25 || p->ow <= 14;
    if (p->group != 1)
        return false;
    return (p->cg >= 8 && taps >= 9) || taps >= 49;
}

/*
 * Which gradients of p (training) oneDNN computes (conv_dnnl_bwd.c: BWD_DATA, BWD_WEIGHTS;
 * 0: none, this file's kernels do both): the rule measured per layer by
 * bench/conv_shapes.py --train (CPU seconds of a whole training step of the layer, forward,
 * backward and update, on 1 and 2 threads; batch 8, the convolutions of resnet18,
 * mobilenet_v2 and efficientnet_b0, and the tutorial's at batch 40), comparing the
 * hand-written backward, oneDNN's, and oneDNN's input gradient with the hand-written
 * weight gradient. oneDNN's whole backward wins on depthwise 3x3 (the class 1.3-1.4x) and
 * on 2-D kernels of 3x3 and more over 8 or more channels with at least 1 024 output
 * positions over the batch (0.97-1.3x; the tutorial's second layer 0.95-1.6x); its input
 * gradient alone wins on depthwise 5x5 (the class 1.2x, where its weight gradient loses,
 * 0.9x) and on the 3x3 layers with fewer positions (resnet18's 7x7 outputs: 1.0-1.1x,
 * where its whole backward loses, 0.9x). The rest stays here: 7x7 and 3x3 stems over 3
 * channels (0.6-0.9x), pointwise and strided 1x1 (0.8-1.2x, no clear winner), 1-D and
 * grouped convolutions. Where oneDNN computes the weight gradient the forward follows its
 * inference rule; where this file does, the forward keeps its im2col matrices for it when
 * they fit. IPUOF_SIM_CONV=own|dnnl forces both passes; IPUOF_SIM_CONV_BWD=own|dnnl|data
 * the backward only (data: oneDNN's input gradient, this file's weight gradient).
 */
static unsigned
use_dnnl_bwd(const struct conv_params *p)
{
    const char *e = getenv("IPUOF_SIM_CONV_BWD");
    int64_t taps = p->kh * p->kw;

    if (e == NULL)
        e = getenv("IPUOF_SIM_CONV");
    if (e != NULL && strcmp(e, "own") == 0)
        return 0;
    if (e != NULL && strcmp(e, "dnnl") == 0)
        return BWD_DATA | BWD_WEIGHTS;
    if (e != NULL && strcmp(e, "data") == 0)
        return BWD_DATA;
    if (p->pointwise || (p->h == 1 && p->kh == 1))
        return 0;
    if (p->depthwise)
        return taps <= 9 ? BWD_DATA | BWD_WEIGHTS : BWD_DATA;
    if (p->group != 1 || p->cg < 8 || taps < 9)
        return 0;
    return p->n * p->oh * p->ow >= 1024 ? BWD_DATA | BWD_WEIGHTS : BWD_DATA;
}

/* Checks a Conv's inputs and attributes (float input, weights and optional bias of matching
 * ranks, kernel_shape as the weights have it, group dividing both) and infers its window:
 * *group, *nsp spatial dims, in_sp and k_sp (the input's and kernel's spatial sizes) and
 * *win filled. 0, or the error set on c. */
static int
conv_check(struct sim_infer *c, int64_t *group, int *nsp, int64_t in_sp[3], int64_t k_sp[3],
           struct sim_window *win)
{
    const struct sim_tinfo *x = c->in[0], *wt = c->in[1];
    const int64_t *ks;
    int nks, rc = sim_in_dtype(c, 0, sim_dt_float);
    char s1[128], s2[128];

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_float);
    if (rc == 0)
        rc = sim_ia_int(c, "group", 1, group);
    if (rc == 0)
        rc = sim_ia_ints(c, "kernel_shape", &ks, &nks);
    if (rc != 0)
        return rc;
    if (x->shape.rank < 3 || x->shape.rank > 5 || wt->shape.rank != x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s and weights %s must both be (N, C, "
                              "%s)", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&wt->shape, s2, sizeof(s2)),
                              x->shape.rank == 5 ? "D, H, W" : "H, W) or (N, C, L");
    *nsp = x->shape.rank - 2;
    for (int i = 0; i < *nsp; i++) {
        in_sp[i] = x->shape.d[2 + i];
        k_sp[i] = wt->shape.d[2 + i];
        if (nks >= 0 && (nks != *nsp || ks[i] != k_sp[i]))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "kernel_shape does not match the weights "
                                  "%s", sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    }
    if (*group < 1 || x->shape.d[1] % *group != 0 || wt->shape.d[0] % *group != 0 ||
        wt->shape.d[1] * *group != x->shape.d[1])
        return sim_infer_fail(c, IPUOF_E_SHAPE, "group %lld does not divide input %s and "
                              "weights %s consistently", (long long)*group,
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    rc = sim_window_infer(c, *nsp, in_sp, k_sp, false, true, win);
    if (rc != 0)
        return rc;
    if (sim_has_in(c, 2)) {
        rc = sim_in_dtype(c, 2, sim_dt_float);
        if (rc != 0)
            return rc;
        if (c->in[2]->shape.rank != 1 || c->in[2]->shape.d[0] != wt->shape.d[0])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "bias %s must be (%lld)",
                                  sim_shape_fmt(&c->in[2]->shape, s1, sizeof(s1)),
                                  (long long)wt->shape.d[0]);
    }
    return 0;
}

/* The 1-D or 2-D Conv's sizes into p (a 1-D one as H = 1) and which kernel family fits it
 * (pointwise, depthwise), from the checked input x, weights wt and window win. */
static void
conv_params_fill(struct conv_params *p, const struct sim_tinfo *x, const struct sim_tinfo *wt,
                 int64_t group, int nsp, const int64_t in_sp[3], const int64_t k_sp[3],
                 const struct sim_window *win)
{
    p->n = x->shape.d[0];
    p->c = x->shape.d[1];
    p->m = wt->shape.d[0];
    p->group = group;
    p->cg = p->c / group;
    p->mg = p->m / group;
    p->h = nsp == 2 ? in_sp[0] : 1;
    p->w = in_sp[nsp - 1];
    p->kh = nsp == 2 ? k_sp[0] : 1;
    p->kw = k_sp[nsp - 1];
    p->oh = nsp == 2 ? win->out[0] : 1;
    p->ow = win->out[nsp - 1];
    p->sh = nsp == 2 ? win->s[0] : 1;
    p->sw = win->s[nsp - 1];
    p->dh = nsp == 2 ? win->d[0] : 1;
    p->dw = win->d[nsp - 1];
    p->ph = nsp == 2 ? win->pb[0] : 0;
    p->pw = win->pb[nsp - 1];
    p->kg = p->cg * p->kh * p->kw;
    p->pointwise = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 &&
                   p->pw == 0 && p->oh == p->h && p->ow == p->w;
    p->depthwise = !p->pointwise && p->cg == 1 && p->group > 1 &&
                   p->kh * p->kw <= DW_MAX_TAPS;
}

/* Prepares oneDNN's primitives where they serve p: the backward ones when training (their
 * scratch in c->bwd_scratch_bytes), the forward one (c->scratch_bytes). A primitive that
 * cannot be prepared leaves p on the hand-written kernels. */
static void
conv_pick_dnnl(struct sim_infer *c, struct conv_params *p)
{
    if (c->training && use_dnnl_bwd(p) != 0) {
        struct sim_dnnl_conv d = { p->n, p->c, p->h, p->w, p->m, p->oh, p->ow, p->kh, p->kw,
                                   p->sh, p->sw, p->dh, p->dw, p->ph, p->pw, p->group,
                                   false };
        size_t need;
        if (sim_dnnl_conv_bwd_prepare(&d, SIM_DNNL_PIECES, &p->dnnl_bwd_id, &need) == 0) {
            p->dnnl_bwd = use_dnnl_bwd(p);
            c->bwd_scratch_bytes = need;
        }
    }
    p->bias = sim_has_in(c, 2);
    if (use_dnnl(p, c->training)) {
        struct sim_dnnl_conv d = { p->n, p->c, p->h, p->w, p->m, p->oh, p->ow, p->kh, p->kw,
                                   p->sh, p->sw, p->dh, p->dw, p->ph, p->pw, p->group,
                                   p->bias };
        size_t need;
        if (sim_dnnl_conv_prepare(&d, SIM_DNNL_PIECES, &p->dnnl_id, &need) == 0) {
            p->dnnl = true;
            c->scratch_bytes = need;
        }
    }
}

/* The hand-written kernels' plan for p: images per GEMM (p->chunk), the im2col scratch
 * (c->scratch_bytes, c->bwd_scratch_bytes) and whether training keeps the im2col matrices
 * (p->save_cols, c->saved_bytes). 0, or the error set on c. */
static int
conv_plan_scratch(struct sim_infer *c, struct conv_params *p)
{
    if (p->kg > INT_MAX || p->mg > INT_MAX || p->oh * p->ow > INT_MAX)
        return sim_infer_unsupported(c, "GEMM dimensions over 2^31");
    /* images per GEMM: as many as fit the scratch budget, at least one */
    double per_image = (double)(p->kg + p->mg) * (double)(p->oh * p->ow) * sizeof(float);
    double chunk = per_image > 0 ? floor((double)SCRATCH_BUDGET / per_image) : (double)p->n;
    p->chunk = chunk < 1 ? 1 : chunk > (double)p->n ? p->n : (int64_t)chunk;
    if (p->chunk < 1)
        p->chunk = 1;
    if (p->chunk * p->oh * p->ow > INT_MAX)
        p->chunk = INT_MAX / (p->oh * p->ow > 0 ? p->oh * p->ow : 1);
    if (p->depthwise)
        return 0;
    /* training with the im2col matrices kept: the whole batch in one GEMM when its
     * scratch fits SAVE_BUDGET too (fewer, larger products, which the pool can split) */
    if (c->training && !p->dnnl && !(p->dnnl_bwd & BWD_WEIGHTS) && !p->pointwise &&
        p->group == 1 &&
        p->kg * p->n * p->oh * p->ow * (int64_t)sizeof(float) <= SAVE_BUDGET &&
        per_image * (double)p->n <= (double)SAVE_BUDGET && p->n * p->oh * p->ow <= INT_MAX)
        p->chunk = p->n;
    if (!p->pointwise && per_image * (double)p->chunk > (double)((int64_t)1 << 40))
        return sim_infer_unsupported(c, "an im2col matrix over 1 TiB");
    if (!p->pointwise) {
        /* the hand-written gradients' scratch; oneDNN's runs before them in the same */
        if (c->training && p->dnnl_bwd != (BWD_DATA | BWD_WEIGHTS) &&
            (size_t)(per_image * (double)p->chunk) > c->bwd_scratch_bytes)
            c->bwd_scratch_bytes = (size_t)(per_image * (double)p->chunk);
        if (!p->dnnl)
            c->scratch_bytes = (size_t)(per_image * (double)p->chunk);
    }
    if (c->training && !p->dnnl && !(p->dnnl_bwd & BWD_WEIGHTS) && !p->pointwise &&
        p->group == 1 &&
        p->kg * p->n * p->oh * p->ow * (int64_t)sizeof(float) <= SAVE_BUDGET) {
        p->save_cols = true;
        c->saved_bytes = (size_t)(p->kg * p->n * p->oh * p->ow) * sizeof(float);
    }
    return 0;
}

static int
infer_conv(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *wt = c->in[1];
    struct conv_params *p;
    struct sim_window win;
    int64_t group, in_sp[3], k_sp[3];
    struct sim_shape o;
    int nsp = 0, rc = conv_check(c, &group, &nsp, in_sp, k_sp, &win);

    if (rc != 0)
        return rc;
    if (nsp == 3)
        return sim_conv3d_infer(c, group, &win);     /* op_conv3d.c */
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    conv_params_fill(p, x, wt, group, nsp, in_sp, k_sp, &win);
    o.rank = x->shape.rank;
    o.d[0] = p->n;
    o.d[1] = p->m;
    for (int i = 0; i < nsp; i++)
        o.d[2 + i] = win.out[i];
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    if (rc != 0)
        return rc;
    conv_pick_dnnl(c, p);
    return conv_plan_scratch(c, p);
}

int
sim_conv_dnnl_id(const void *params)
{
    const struct conv_params *p = params;

    return p != NULL && p->dnnl ? p->dnnl_id : -1;
}

int
sim_conv_dnnl_relayout(void *params, bool x_blocked, bool y_blocked, size_t *scratch)
{
    struct conv_params *p = params;
    struct sim_dnnl_conv d = { p->n, p->c, p->h, p->w, p->m, p->oh, p->ow, p->kh, p->kw,
                               p->sh, p->sw, p->dh, p->dw, p->ph, p->pw, p->group, p->bias,
                               x_blocked, y_blocked };
    int id;

    if (!p->dnnl || sim_dnnl_conv_prepare(&d, SIM_DNNL_PIECES, &id, scratch) != 0)
        return -1;
    p->dnnl_id = id;
    p->bw = NULL;
    return 0;
}

bool
sim_conv_dnnl_promotable(const void *params)
{
    const struct conv_params *p = params;
    const char *e = getenv("IPUOF_SIM_CONV");

    return p != NULL && !p->dnnl && p->kh == 1 && p->kw == 1 && p->h > 1 && p->group == 1 &&
           !p->save_cols && !(e != NULL && strcmp(e, "own") == 0);
}

int
sim_conv_dnnl_set(void *params, bool on, size_t *scratch)
{
    struct conv_params *p = params;
    struct sim_dnnl_conv d = { p->n, p->c, p->h, p->w, p->m, p->oh, p->ow, p->kh, p->kw,
                               p->sh, p->sw, p->dh, p->dw, p->ph, p->pw, p->group, p->bias };
    int id = 0;

    if (on && sim_dnnl_conv_prepare(&d, SIM_DNNL_PIECES, &id, scratch) != 0)
        return -1;
    p->dnnl = on;
    p->dnnl_id = on ? id : 0;
    p->bw = NULL;
    return 0;
}

int
sim_conv_dnnl_weights(void *params, const float *w, float **owned, size_t *bytes)
{
    struct conv_params *p = params;

    *owned = NULL;
    *bytes = 0;
    if (!p->dnnl || sim_dnnl_conv_weights(p->dnnl_id, w, owned, bytes) != 0)
        return -1;
    p->bw = *owned;
    return 0;
}

/* What the pieces of one parallel step share. */
struct conv_run {
    const struct conv_params *p;
    const float *x, *w, *bias, *gy;  /* gy: dY (N, M, OH, OW) */
    float *y, *dx, *dw, *db;
    float *cols, *tmp;               /* the chunk's column matrix and GEMM result / dY copy */
    const float *dyc;                /* backward: the chunk's dY as (mg, nimg * P) */
    int64_t n0, nimg, grp;           /* the chunk's first image, its images, the group */
    const struct sim_act *act;       /* forward: the fused activation applied to y, or NULL */
    int64_t blk, mblk;               /* pointwise: output columns and rows per piece */
};

typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias)); /* unaligned */

/* Output columns ox in [*lo, *hi) whose input column for kernel column kj is inside the row. */
static inline void
ox_range(const struct conv_params *p, int64_t kj, int64_t *lo, int64_t *hi)
{
    int64_t off = kj * p->dw - p->pw, l = 0, h = p->ow;

    while (l < h && l * p->sw + off < 0)
        l++;
    while (h > l && (h - 1) * p->sw + off >= p->w)
        h--;
    *lo = l;
    *hi = h;
}

/* Columns of output rows [r0, r1) (r = image-in-chunk x OH + oy) of cols (kg, nimg * P),
 * from images x[n0 .. n0+nimg) of group g; P = oh * ow. */
SIM_HOT_FN(im2col,
           (const struct conv_params *p, const float *x, int64_t n0, int64_t nimg, int64_t g,
            float *cols, int64_t r0, int64_t r1),
           (p, x, n0, nimg, g, cols, r0, r1))
{
    int64_t ld = nimg * p->oh * p->ow;

    for (int64_t ci = 0; ci < p->cg; ci++)
        for (int64_t ki = 0; ki < p->kh; ki++)
            for (int64_t kj = 0; kj < p->kw; kj++) {
                float *row = cols + ((ci * p->kh + ki) * p->kw + kj) * ld;
                int64_t off = kj * p->dw - p->pw, lo, hi;
                ox_range(p, kj, &lo, &hi);
                for (int64_t r = r0; r < r1; r++) {
                    int64_t n = r / p->oh, oy = r % p->oh;
                    int64_t iy = oy * p->sh - p->ph + ki * p->dh;
                    const float *xr;
                    float *dst = row + r * p->ow;
                    if (iy < 0 || iy >= p->h) {
                        memset(dst, 0, (size_t)p->ow * sizeof(float));
                        continue;
                    }
                    xr = x + ((n0 + n) * p->c + g * p->cg + ci) * p->h * p->w + iy * p->w;
                    for (int64_t ox = 0; ox < lo; ox++)
                        dst[ox] = 0.0f;
                    if (p->sw == 1) {
                        /* rows are short (tens of floats): eight at a time, then one by
                         * one, beats a memcpy call and the vectorizer's checks per row */
                        int64_t ox = lo;
                        for (; ox + 8 <= hi; ox += 8)
                            *(v8f_u *)(dst + ox) = *(const v8f_u *)(xr + ox + off);
                        for (; ox < hi; ox++)
                            dst[ox] = xr[ox + off];
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++)
                            dst[ox] = xr[ox * p->sw + off];
                    }
                    for (int64_t ox = hi; ox < p->ow; ox++)
                        dst[ox] = 0.0f;
                }
            }
}

static void
im2col_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct conv_run *r = ctx;

    im2col(r->p, r->x, r->n0, r->nimg, r->grp, r->cols, lo, hi);
}

/* Output channels [lo, hi) of the group: y = tmp (mg, nimg * P) scattered to NCHW + bias,
 * then the fused activation; tmp may be y itself (one image): then only the bias and the
 * activation are applied, in place. */
SIM_HOT_FN(scatter_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct conv_run *r = ctx;
    const struct conv_params *p = r->p;
    int64_t P = p->oh * p->ow, cols_n = r->nimg * P;

    for (int64_t m = lo; m < hi; m++) {
        float b = r->bias != NULL ? r->bias[r->grp * p->mg + m] : 0.0f;
        for (int64_t n = 0; n < r->nimg; n++) {
            const float *src = r->tmp + m * cols_n + n * P;
            float *dst = r->y + ((r->n0 + n) * p->m + r->grp * p->mg + m) * P;
            if (src != dst || r->bias != NULL)
                for (int64_t i = 0; i < P; i++)
                    dst[i] = src[i] + b;
            if (r->act != NULL)     /* while the row is in cache */
                sim_act_range(r->act, dst, dst, 0, P);
        }
    }
}


/* Depthwise forward of output planes [lo, hi) (plane = n x M + m), direct: each output row
 * gathers its taps (the kernel rows inside the input, as row pointers and weights), then
 * sums them in registers eight columns at a time where every tap is inside the row, tap by
 * tap over the row for strided rows and the rest, and with bounds checks at the edges;
 * then the fused activation over the plane. */
SIM_HOT_FN(dw_fwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct conv_run *r = ctx;
    const struct conv_params *p = r->p;
    const int64_t kh = p->kh, kw = p->kw, sw = p->sw, dw = p->dw, pw = p->pw, w = p->w;
    const int64_t ow = p->ow, oh = p->oh;
    int64_t a = 0, e = ow;         /* columns whose every tap is inside the input row */
    int64_t tx[DW_MAX_TAPS];       /* a tap's input row start plus its column offset */
    int64_t tc[DW_MAX_TAPS];       /* a tap's column offset */
    float tw[DW_MAX_TAPS];

    for (int64_t kj = 0; kj < kw; kj++) {
        int64_t l, h;
        ox_range(p, kj, &l, &h);
        a = l > a ? l : a;
        e = h < e ? h : e;
    }
    if (e < a)
        e = a;
    for (int64_t pl = lo; pl < hi; pl++) {
        int64_t n = pl / p->m, m = pl % p->m;
        const float *xc = r->x + (n * p->c + m / p->mg) * p->h * w;
        const float *wm = r->w + m * kh * kw;
        float b = r->bias != NULL ? r->bias[m] : 0.0f;
        float *yr = r->y + pl * oh * ow;
        for (int64_t oy = 0; oy < oh; oy++, yr += ow) {
            int nt = 0;
            int64_t ox = 0;
            for (int64_t ki = 0; ki < kh; ki++) {
                int64_t iy = oy * p->sh - p->ph + ki * p->dh;
                if (iy < 0 || iy >= p->h)
                    continue;
                for (int64_t kj = 0; kj < kw; kj++) {
                    tc[nt] = kj * dw - pw;
                    tx[nt] = iy * w + tc[nt];
                    tw[nt++] = wm[ki * kw + kj];
                }
            }
            for (; ox < a; ox++) {
                float s = b;
                for (int t = 0; t < nt; t++) {
                    int64_t ix = ox * sw + tc[t];
                    if (ix >= 0 && ix < w)
                        s += tw[t] * xc[tx[t] + ox * sw];
                }
                yr[ox] = s;
            }
            /* four blocks at once: four independent chains of additions */
            if (sw == 1)
                for (; ox + 32 <= e; ox += 32) {
                    v8f a0 = { b, b, b, b, b, b, b, b }, a1 = a0, a2 = a0, a3 = a0;
                    for (int t = 0; t < nt; t++) {
                        const float *xp = xc + tx[t] + ox;
                        a0 += tw[t] * *(const v8f_u *)xp;
                        a1 += tw[t] * *(const v8f_u *)(xp + 8);
                        a2 += tw[t] * *(const v8f_u *)(xp + 16);
                        a3 += tw[t] * *(const v8f_u *)(xp + 24);
                    }
                    *(v8f_u *)(yr + ox) = a0;
                    *(v8f_u *)(yr + ox + 8) = a1;
                    *(v8f_u *)(yr + ox + 16) = a2;
                    *(v8f_u *)(yr + ox + 24) = a3;
                }
            if (sw == 1)
                for (; ox + 8 <= e; ox += 8) {
                    v8f acc = { b, b, b, b, b, b, b, b };
                    for (int t = 0; t < nt; t++)
                        acc += tw[t] * *(const v8f_u *)(xc + tx[t] + ox);
                    *(v8f_u *)(yr + ox) = acc;
                }
            if (ox < e) {
                int64_t ox0 = ox;
                for (ox = ox0; ox < e; ox++)
                    yr[ox] = b;
                for (int t = 0; t < nt; t++) {
                    const float *xr = xc + tx[t] + ox0 * sw;
                    float wv = tw[t];
                    if (sw == 1)
                        for (ox = ox0; ox < e; ox++)
                            yr[ox] += wv * xr[ox - ox0];
                    else
                        for (ox = ox0; ox < e; ox++)
                            yr[ox] += wv * xr[(ox - ox0) * sw];
                }
            }
            for (; ox < ow; ox++) {
                float s = b;
                for (int t = 0; t < nt; t++) {
                    int64_t ix = ox * sw + tc[t];
                    if (ix >= 0 && ix < w)
                        s += tw[t] * xc[tx[t] + ox * sw];
                }
                yr[ox] = s;
            }
        }
        if (r->act != NULL)         /* the plane is still in cache */
            sim_act_range(r->act, r->y + pl * oh * ow, r->y + pl * oh * ow, 0, oh * ow);
    }
}

/* Rows of work per parallel piece worth its hand-off (about 64 k multiply-adds). */
static int64_t
grain_for(int64_t work_per_index)
{
    int64_t g = work_per_index > 0 ? ((int64_t)1 << 16) / work_per_index : 1;

    return g < 1 ? 1 : g;
}

/* y[i] += b for i in [0, n). */
SIM_HOT_FN(add_scalar, (float *y, int64_t n, float b), (y, n, b))
{
    for (int64_t i = 0; i < n; i++)
        y[i] += b;
}

/*
 * Pointwise forward, pieces [lo, hi) of (image, group, column block, row block): each
 * block's GEMM (rows of mg, blk columns) of the output, then the bias and the fused
 * activation, if any, row by row while the block is in cache. Fused or not, the output is
 * made by the same GEMM calls: OpenBLAS's kernels for some CPUs (Haswell, Zen) round an
 * element differently with the shape of the call it is in, so a path cut another way would
 * differ from this one in the last bits on those CPUs only.
 */
static void
pw_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct conv_run *r = ctx;
    const struct conv_params *p = r->p;
    int64_t P = p->oh * p->ow, nblk = (P + r->blk - 1) / r->blk;
    int64_t nrow = (p->mg + r->mblk - 1) / r->mblk;

    for (int64_t i = lo; i < hi; i++) {
        int64_t rb = i % nrow, b = i / nrow % nblk, g = i / nrow / nblk % p->group;
        int64_t n = i / nrow / nblk / p->group;
        int64_t c0 = b * r->blk, c1 = c0 + r->blk < P ? c0 + r->blk : P;
        int64_t m0 = rb * r->mblk, m1 = m0 + r->mblk < p->mg ? m0 + r->mblk : p->mg;
        float *yg = r->y + (n * p->m + g * p->mg) * P;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(m1 - m0), (int)(c1 - c0),
                    (int)p->cg, 1.0f, r->w + (g * p->mg + m0) * p->cg, (int)p->cg,
                    r->x + (n * p->c + g * p->cg) * P + c0, (int)P, 0.0f, yg + m0 * P + c0,
                    (int)P);
        for (int64_t m = m0; m < m1; m++) {
            if (r->bias != NULL)
                add_scalar(yg + m * P + c0, c1 - c0, r->bias[g * p->mg + m]);
            if (r->act != NULL)
                sim_act_range(r->act, yg + m * P, yg + m * P, c0, c1);
        }
    }
}

/* The blocks of a pointwise convolution: *blk output columns per piece, the (mg, blk)
 * block about 64 KiB so it is still in L2 when the bias and activation read it (whole
 * 16-column register blocks, at least 64 columns); *mblk rows per piece: all mg, unless
 * that leaves fewer than two pieces per pool thread (one small image: batch 1 at 7x7),
 * then the rows split too (whole 4-row register blocks). Returns the count of pieces. */
static int64_t
pw_blocks(const struct conv_params *p, int64_t *blk, int64_t *mblk)
{
    int64_t P = p->oh * p->ow, want = 2 * (int64_t)sim_pool_threads(), pieces, split;

    *blk = ((int64_t)16384 / (p->mg > 0 ? p->mg : 1)) / 16 * 16;
    *blk = *blk < 64 ? 64 : *blk;
    pieces = p->n * p->group * ((P + *blk - 1) / *blk);
    split = pieces >= want ? 1 : (want + pieces - 1) / pieces;
    *mblk = (p->mg + split - 1) / split;
    *mblk = (*mblk + 3) / 4 * 4;
    *mblk = *mblk < 1 ? 1 : *mblk > p->mg ? p->mg : *mblk;
    return pieces * ((p->mg + *mblk - 1) / *mblk);
}

/* x: (N, C, H, W), w: (M, C/group, KH, KW), bias: (M) or absent, y: (N, M, OH, OW) */
static int
fwd_conv(const struct sim_kern *k, struct sim_err *err)
{
    if (k->in[0].shape.rank == 5)       /* 3-D: op_conv3d.c, whose params these are */
        return sim_conv3d_forward(k, err);
    const struct conv_params *p = k->params;
    struct conv_run r = { .p = p, .x = k->in[0].data, .w = k->in[1].data,
                          .bias = k->n_in > 2 ? k->in[2].data : NULL, .y = k->out[0].data };
    int64_t P = p->oh * p->ow;

    if (p->n == 0 || p->m == 0 || P == 0)
        return 0;
    r.act = k->act;
    if (p->dnnl)
        return sim_dnnl_conv_run(p->dnnl_id, r.x, p->bw != NULL ? p->bw : r.w, p->bw != NULL,
                                 r.bias, r.y, k->act, k->scratch) == 0
                   ? 0
                   : sim_err_set(err, IPUOF_E_INTERNAL, "oneDNN's convolution failed");
    if (p->depthwise) {
        sim_pool_for(p->n * p->m, grain_for(P * p->kh * p->kw), dw_fwd_piece, &r);
        return 0;
    }
    if (p->pointwise) {
        int64_t pieces = pw_blocks(p, &r.blk, &r.mblk);
        sim_pool_for(pieces, grain_for(r.mblk * p->cg * (r.blk < P ? r.blk : P)), pw_piece,
                     &r);
        return 0;
    }
    for (r.n0 = 0; r.n0 < p->n; r.n0 += p->chunk) {
        int64_t cols_n;
        r.nimg = p->n - r.n0 < p->chunk ? p->n - r.n0 : p->chunk;
        cols_n = r.nimg * P;
        r.cols = p->save_cols ? (float *)k->saved + p->kg * r.n0 * P : k->scratch;
        for (r.grp = 0; r.grp < p->group; r.grp++) {
            /* one image: the GEMM's (mg, P) result is already the output's layout */
            r.tmp = r.nimg == 1 ? r.y + (r.n0 * p->m + r.grp * p->mg) * P
                                : (float *)k->scratch + p->kg * cols_n;
            sim_pool_for(r.nimg * p->oh, grain_for(p->kg * p->ow), im2col_piece, &r);
            sim_pool_sgemm(false, false, p->mg, cols_n, p->kg, 1.0f,
                           r.w + r.grp * p->mg * p->kg, p->kg, r.cols, cols_n, 0.0f, r.tmp,
                           cols_n);
            /* in place when one image: adds the bias and applies the activation */
            if (r.nimg > 1 || r.bias != NULL || r.act != NULL)
                sim_pool_for(p->mg, grain_for(cols_n), scatter_piece, &r);
        }
    }
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/* Channels [ci0, ci1) of group g of dx[n0 .. n0+nimg) += col2im(cols); cols (kg, nimg * P)
 * as im2col lays it out. */
SIM_HOT_FN(col2im,
           (const struct conv_params *p, const float *cols, int64_t n0, int64_t nimg,
            int64_t g, float *dx, int64_t ci0, int64_t ci1),
           (p, cols, n0, nimg, g, dx, ci0, ci1))
{
    int64_t P = p->oh * p->ow, ld = nimg * P;

    for (int64_t ci = ci0; ci < ci1; ci++)
        for (int64_t ki = 0; ki < p->kh; ki++)
            for (int64_t kj = 0; kj < p->kw; kj++) {
                const float *row = cols + ((ci * p->kh + ki) * p->kw + kj) * ld;
                int64_t off = kj * p->dw - p->pw, lo, hi;
                ox_range(p, kj, &lo, &hi);
                for (int64_t n = 0; n < nimg; n++) {
                    float *xc = dx + ((n0 + n) * p->c + g * p->cg + ci) * p->h * p->w;
                    const float *src = row + n * P;
                    for (int64_t oy = 0; oy < p->oh; oy++, src += p->ow) {
                        int64_t iy = oy * p->sh - p->ph + ki * p->dh;
                        float *xr;
                        if (iy < 0 || iy >= p->h)
                            continue;
                        xr = xc + iy * p->w;
                        if (p->sw == 1)
                            for (int64_t ox = lo; ox < hi; ox++)
                                xr[ox + off] += src[ox];
                        else
                            for (int64_t ox = lo; ox < hi; ox++)
                                xr[ox * p->sw + off] += src[ox];
                    }
                }
            }
}

static void
col2im_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct conv_run *r = ctx;

    col2im(r->p, r->cols, r->n0, r->nimg, r->grp, r->dx, lo, hi);
}

/* Output channels [lo, hi) of the group: tmp (mg, nimg * P) = dY gathered from NCHW. */
SIM_HOT_FN(gather_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct conv_run *r = ctx;
    const struct conv_params *p = r->p;
    int64_t P = p->oh * p->ow, cols_n = r->nimg * P;

    for (int64_t m = lo; m < hi; m++)
        for (int64_t n = 0; n < r->nimg; n++)
            memcpy(r->tmp + m * cols_n + n * P,
                   r->gy + ((r->n0 + n) * p->m + r->grp * p->mg + m) * P,
                   (size_t)P * sizeof(float));
}

/* db[m] += sum of dY over images and positions, for channels [lo, hi); each image's plane
 * summed sixteen lanes at a time (vsum.h). */
SIM_HOT_FN(db_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct conv_run *r = ctx;
    const struct conv_params *p = r->p;
    int64_t P = p->oh * p->ow;

    for (int64_t m = lo; m < hi; m++)
        for (int64_t n = 0; n < p->n; n++)
            r->db[m] += sim_vsumf(r->gy + (n * p->m + m) * P, P);
}

/* Depthwise backward of input channels [lo, hi) (each one group): dX of the channel and dW
 * of the group's output channels, over every image. */
SIM_HOT_FN(dw_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct conv_run *r = ctx;
    const struct conv_params *p = r->p;
    int64_t P = p->oh * p->ow, HW = p->h * p->w, K = p->kh * p->kw;

    for (int64_t ci = lo; ci < hi; ci++)
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t mm = 0; mm < p->mg; mm++) {
                int64_t m = ci * p->mg + mm;
                const float *xc = r->x + (n * p->c + ci) * HW, *wm = r->w + m * K;
                const float *gr = r->gy + (n * p->m + m) * P;
                float *dxc = r->dx != NULL ? r->dx + (n * p->c + ci) * HW : NULL;
                float *dwm = r->dw != NULL ? r->dw + m * K : NULL;
                for (int64_t oy = 0; oy < p->oh; oy++, gr += p->ow)
                    for (int64_t ki = 0; ki < p->kh; ki++) {
                        int64_t iy = oy * p->sh - p->ph + ki * p->dh;
                        if (iy < 0 || iy >= p->h)
                            continue;
                        for (int64_t kj = 0; kj < p->kw; kj++) {
                            int64_t off = kj * p->dw - p->pw + iy * p->w, l, h;
                            ox_range(p, kj, &l, &h);
                            if (dwm != NULL) {
                                float s = 0.0f;
                                for (int64_t ox = l; ox < h; ox++)
                                    s += gr[ox] * xc[ox * p->sw + off];
                                dwm[ki * p->kw + kj] += s;
                            }
                            if (dxc != NULL) {
                                float wv = wm[ki * p->kw + kj];
                                for (int64_t ox = l; ox < h; ox++)
                                    dxc[ox * p->sw + off] += wv * gr[ox];
                            }
                        }
                    }
            }
}

/* Pointwise: per image and group, dW_g += dY_g X_g^T, dX_g += W_g^T dY_g. */
static void
bwd_pointwise(const struct conv_params *p, const float *x, const float *w, const float *g,
              float *dx, float *dw)
{
    int64_t P = p->oh * p->ow;

    for (int64_t n = 0; n < p->n; n++)
        for (int64_t gr = 0; gr < p->group; gr++) {
            const float *gy = g + (n * p->m + gr * p->mg) * P;
            int64_t xo = (n * p->c + gr * p->cg) * P;
            if (dw != NULL)
                sim_pool_sgemm(false, true, p->mg, p->cg, P, 1.0f, gy, P, x + xo, P, 1.0f,
                               dw + gr * p->mg * p->cg, p->cg);
            if (dx != NULL)
                sim_pool_sgemm(true, false, p->cg, P, p->mg, 1.0f, w + gr * p->mg * p->cg,
                               p->cg, gy, P, 1.0f, dx + xo, P);
        }
}

/* x, dx: (N, C, H, W); w, dw: (M, C/group, KH, KW); db: (M); dy: (N, M, OH, OW) */
static int
bwd_conv(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    if (k->in[0].shape.rank == 5)
        return sim_conv3d_backward(k, dout, din, err);
    const struct conv_params *p = k->params;
    struct conv_run r = { .p = p, .x = k->in[0].data, .w = k->in[1].data, .gy = dout[0].data,
                          .dx = din[0].data, .dw = din[1].data,
                          .db = k->n_in > 2 ? din[2].data : NULL };
    int64_t P = p->oh * p->ow;

    if (r.gy == NULL || p->n == 0 || p->m == 0 || P == 0)
        return 0;
    if (r.db != NULL)
        sim_pool_for(p->m, grain_for(p->n * P), db_piece, &r);
    if (r.dx == NULL && r.dw == NULL)
        return 0;
    if (p->dnnl_bwd != 0) {
        bool dw_here = p->dnnl_bwd & BWD_WEIGHTS;
        if (sim_dnnl_conv_bwd_run(p->dnnl_bwd_id, r.x, r.w, r.gy, r.dx, dw_here ? r.dw : NULL,
                                  k->scratch) != 0)
            return sim_err_set(err, IPUOF_E_INTERNAL, "%s: oneDNN's convolution backward "
                               "failed", k->label);
        r.dx = NULL;            /* done; what is left is the weight gradient, if wanted */
        if (dw_here || r.dw == NULL)
            return 0;
    }
    if (p->depthwise) {
        sim_pool_for(p->c, grain_for(p->n * p->mg * P * p->kh * p->kw), dw_bwd_piece, &r);
        return 0;
    }
    if (p->pointwise) {
        bwd_pointwise(p, r.x, r.w, r.gy, r.dx, r.dw);
        return 0;
    }
    for (r.n0 = 0; r.n0 < p->n; r.n0 += p->chunk) {
        int64_t cols_n;
        r.nimg = p->n - r.n0 < p->chunk ? p->n - r.n0 : p->chunk;
        cols_n = r.nimg * P;
        r.cols = k->scratch;
        r.tmp = r.cols + p->kg * cols_n;
        for (r.grp = 0; r.grp < p->group; r.grp++) {
            /* one image: dY's (mg, P) block is already the GEMM operand's layout */
            r.dyc = r.tmp;
            if (r.nimg == 1)
                r.dyc = r.gy + (r.n0 * p->m + r.grp * p->mg) * P;
            else
                sim_pool_for(p->mg, grain_for(cols_n), gather_piece, &r);
            if (r.dw != NULL) {
                const float *xcols = r.cols;
                if (p->save_cols)
                    xcols = (const float *)k->saved + p->kg * r.n0 * P;
                else
                    sim_pool_for(r.nimg * p->oh, grain_for(p->kg * p->ow), im2col_piece, &r);
                sim_pool_sgemm(false, true, p->mg, p->kg, cols_n, 1.0f, r.dyc, cols_n, xcols,
                               cols_n, 1.0f, r.dw + r.grp * p->mg * p->kg, p->kg);
            }
            if (r.dx != NULL) {
                sim_pool_sgemm(true, false, p->kg, cols_n, p->mg, 1.0f,
                               r.w + r.grp * p->mg * p->kg, p->kg, r.dyc, cols_n, 0.0f,
                               r.cols, cols_n);
                sim_pool_for(p->cg, grain_for(p->kh * p->kw * cols_n), col2im_piece, &r);
            }
        }
    }
    return 0;
}

const struct sim_op sim_ops_conv[] = {
    { "Conv", 1, 2, 3, 1, 1, 0, 0, 32768u, infer_conv, fwd_conv, bwd_conv, 7u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1) },
};

const int sim_ops_conv_count = (int)(sizeof(sim_ops_conv) / sizeof(sim_ops_conv[0]));

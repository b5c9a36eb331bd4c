/*
 * op_pool.c — pooling over 1 to 3 spatial dims of NC... tensors: MaxPool (float, uint8,
 * int8; pads, strides, dilations, ceil_mode, auto_pad, the optional Indices output with
 * row- or column-major storage_order), AveragePool (float; count_include_pad, ceil_mode,
 * auto_pad) and GlobalAveragePool, forward and backward (float).
 *
 * Every pool is computed as a 3-D pool with unit dims padded in front, so one loop nest
 * serves all ranks. Windows are clipped to the input; padding never contributes a value.
 * Three float cases have loops of their own, each giving what the general one gives: the
 * average of whole unpadded planes (a sixteen-lane sum, vsum.h), MaxPool over 1 or 2 dims
 * without Indices (interior columns one tap at a time across the row), MaxPool 2x2 stride
 * 2. Forward and backward are split over the pool by plane.
 * In a training executable MaxPool keeps the input index of each output's maximum (the
 * first one, as PyTorch) for its backward, except in the unrolled 2x2 case, whose backward
 * finds the maximum again by comparing the window with the output; AveragePool's backward
 * spreads each output's gradient evenly over the window it averaged.
 * Does not: LpPool, MaxUnpool, dilated average pooling (opset 19).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "ops.h"
#include "pool.h"
#include "vmath.h"
#include "vsum.h"

struct pool_params {
    int64_t planes;                 /* N * C */
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
    int nsp;
    bool avg, include_pad, col_major;
    bool save_argmax;               /* training MaxPool: saved holds int64 input indices */
    bool fast2x2;                   /* float MaxPool 2x2 stride 2 unpadded, no Indices */
    bool whole;                     /* an average of each whole plane, no padding */
    bool max2d;                     /* float MaxPool over at most 2 dims, no Indices */
};

static int
infer_pool(struct sim_infer *c, bool avg, bool global)
{
    const struct sim_tinfo *x = c->in[0];
    struct pool_params *p;
    struct sim_window win;
    int64_t kern[3], in[3], ceil_mode = 0, include_pad = 0, storage = 0;
    const int64_t *ks;
    struct sim_shape o;
    int nks, nsp, rc;
    static const int max_types[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_UINT8, SIM_DTYPE_INT8, 0 };
    char s1[128];

    rc = sim_in_dtype(c, 0, avg ? sim_dt_float : max_types);
    if (rc != 0)
        return rc;
    if (x->shape.rank < 3 || x->shape.rank > 5)
        return sim_infer_unsupported(c, "input %s: 1 to 3 spatial dims are supported",
                                     sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    nsp = x->shape.rank - 2;
    for (int i = 0; i < nsp; i++)
        in[i] = x->shape.d[2 + i];
    if (global) {
        memset(&win, 0, sizeof(win));
        win.nsp = nsp;
        for (int i = 0; i < nsp; i++) {
            win.in[i] = win.k[i] = in[i];
            win.s[i] = win.d[i] = 1;
            win.out[i] = 1;
        }
    } else {
        rc = sim_ia_ints(c, "kernel_shape", &ks, &nks);
        if (rc == 0)
            rc = sim_ia_int(c, "ceil_mode", 0, &ceil_mode);
        if (rc == 0)
            rc = sim_ia_int(c, "count_include_pad", 0, &include_pad);
        if (rc == 0)
            rc = sim_ia_int(c, "storage_order", 0, &storage);
        if (rc != 0)
            return rc;
        if (nks != nsp)
            return sim_infer_fail(c, IPUOF_E_INVAL, "kernel_shape must have %d values", nsp);
        for (int i = 0; i < nsp; i++)
            kern[i] = ks[i];
        rc = sim_window_infer(c, nsp, in, kern, ceil_mode != 0, !avg, &win);
        if (rc != 0)
            return rc;
    }
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->avg = avg;
    p->include_pad = include_pad != 0;
    p->col_major = storage != 0;
    p->planes = x->shape.d[0] * x->shape.d[1];
    p->nsp = nsp;
    p->fast2x2 = !avg && x->dtype == SIM_DTYPE_FLOAT && c->n_out == 1 && nsp == 2 &&
                 win.k[0] == 2 && win.k[1] == 2 && win.s[0] == 2 && win.s[1] == 2 &&
                 win.d[0] == 1 && win.d[1] == 1 && win.pb[0] == 0 && win.pb[1] == 0 &&
                 win.out[0] * 2 <= win.in[0] && win.out[1] * 2 <= win.in[1];
    /* the 2x2 backward finds each maximum again by comparing with the output */
    p->save_argmax = c->training && !avg && x->dtype == SIM_DTYPE_FLOAT && !p->fast2x2;
    /* spatial dim i of the model is dim 3 - nsp + i of the 3-D pool */
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nsp);
        p->in[i] = j >= 0 ? win.in[j] : 1;
        p->k[i] = j >= 0 ? win.k[j] : 1;
        p->s[i] = j >= 0 ? win.s[j] : 1;
        p->d[i] = j >= 0 ? win.d[j] : 1;
        p->pb[i] = j >= 0 ? win.pb[j] : 0;
        p->pe[i] = j >= 0 ? win.pe[j] : 0;
        p->out[i] = j >= 0 ? win.out[j] : 1;
    }
    p->max2d = !avg && x->dtype == SIM_DTYPE_FLOAT && c->n_out == 1 && nsp <= 2 && !p->fast2x2;
    p->whole = avg;
    for (int i = 0; i < 3; i++)
        p->whole = p->whole && p->out[i] == 1 && p->k[i] == p->in[i] && p->d[i] == 1 &&
                   p->pb[i] == 0 && p->pe[i] == 0;
    o = x->shape;
    for (int i = 0; i < nsp; i++)
        o.d[2 + i] = win.out[i];
    rc = sim_set_out(c, 0, x->dtype, &o);
    if (rc == 0 && c->n_out > 1)
        rc = sim_set_out(c, 1, SIM_DTYPE_INT64, &o);
    if (rc == 0 && p->save_argmax)
        c->saved_bytes = (size_t)c->out[0].numel * sizeof(int64_t);
    return rc;
}

static int infer_maxpool(struct sim_infer *c) { return infer_pool(c, false, false); }
static int infer_avgpool(struct sim_infer *c) { return infer_pool(c, true, false); }
static int infer_gavgpool(struct sim_infer *c) { return infer_pool(c, true, true); }

/* Valid kernel taps [*k0, *k1) of output position o along dim i. */
static void
taps(const struct pool_params *p, int i, int64_t o, int64_t *k0, int64_t *k1)
{
    int64_t start = o * p->s[i] - p->pb[i], d = p->d[i];
    int64_t lo = 0, hi = p->k[i];

    if (start < 0)
        lo = (-start + d - 1) / d;
    if (start + (hi - 1) * d >= p->in[i])
        hi = (p->in[i] - 1 - start) / d + 1;
    if (start >= p->in[i])
        hi = 0;
    if (hi < lo)
        hi = lo;
    *k0 = lo;
    *k1 = hi;
}

/* Window size used by count_include_pad: the window clipped to the padded input. */
static int64_t
padded_extent(const struct pool_params *p, int i, int64_t o)
{
    int64_t start = o * p->s[i] - p->pb[i];
    int64_t end = start + (p->k[i] - 1) * p->d[i] + 1;
    int64_t lim = p->in[i] + p->pe[i];

    return (end > lim ? lim : end) - start;
}

/* The windows of planes [lo, hi) (ctx: the kernel). */
static void
pool_planes(void *ctx, int64_t lo, int64_t hi)
{
    const struct sim_kern *k = ctx;
    const struct pool_params *p = k->params;
    const struct sim_tensor *xt = &k->in[0];
    int64_t *ind = k->n_out > 1 ? k->out[1].data : NULL;
    int64_t *arg = p->save_argmax ? k->saved : NULL;
    int64_t plane_in = p->in[0] * p->in[1] * p->in[2];
    int64_t plane_out = p->out[0] * p->out[1] * p->out[2];
    bool isf = xt->dtype == SIM_DTYPE_FLOAT;

    for (int64_t pl = lo; pl < hi; pl++) {
        int64_t oi = pl * plane_out;
        for (int64_t o0 = 0; o0 < p->out[0]; o0++) {
            int64_t a0, b0;
            taps(p, 0, o0, &a0, &b0);
            for (int64_t o1 = 0; o1 < p->out[1]; o1++) {
                int64_t a1, b1;
                taps(p, 1, o1, &a1, &b1);
                for (int64_t o2 = 0; o2 < p->out[2]; o2++, oi++) {
                    int64_t a2, b2, best_i = -1, best_row = -1, cnt = 0;
                    double acc = p->avg ? 0.0 : -INFINITY;
                    taps(p, 2, o2, &a2, &b2);
                    for (int64_t t0 = a0; t0 < b0; t0++) {
                        int64_t i0 = o0 * p->s[0] - p->pb[0] + t0 * p->d[0];
                        for (int64_t t1 = a1; t1 < b1; t1++) {
                            int64_t i1 = o1 * p->s[1] - p->pb[1] + t1 * p->d[1];
                            int64_t row = pl * plane_in + (i0 * p->in[1] + i1) * p->in[2];
                            for (int64_t t2 = a2; t2 < b2; t2++) {
                                int64_t i2 = o2 * p->s[2] - p->pb[2] + t2 * p->d[2];
                                double v = isf ? ((const float *)xt->data)[row + i2]
                                               : sim_get_f64(xt->dtype, xt->data, row + i2);
                                cnt++;
                                if (p->avg) {
                                    acc += v;
                                } else if (v > acc || v != v || best_i < 0) {
                                    acc = v;
                                    best_row = row + i2;
                                    best_i = p->col_major
                                                 ? pl * plane_in +
                                                       (i2 * p->in[1] + i1) * p->in[0] + i0
                                                 : row + i2;
                                }
                            }
                        }
                    }
                    if (p->avg) {
                        int64_t div = cnt;
                        if (p->include_pad)
                            div = padded_extent(p, 0, o0) * padded_extent(p, 1, o1) *
                                  padded_extent(p, 2, o2);
                        acc = div > 0 ? acc / (double)div : 0.0;
                    }
                    if (isf)
                        ((float *)k->out[0].data)[oi] = (float)acc;
                    else
                        sim_put_f64(xt->dtype, k->out[0].data, oi, cnt ? acc : 0.0);
                    if (ind != NULL)
                        ind[oi] = best_i < 0 ? 0 : best_i;
                    if (arg != NULL)
                        arg[oi] = best_row;
                }
            }
        }
    }
}

/* The averages of whole planes [lo, hi) (ctx: the kernel): y[pl] = sum of the plane / its
 * size, the sum sixteen lanes at a time. */
SIM_HOT_FN(mean_planes, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct sim_kern *k = ctx;
    const struct pool_params *p = k->params;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    int64_t plane = p->in[0] * p->in[1] * p->in[2];

    for (int64_t pl = lo; pl < hi; pl++)
        y[pl] = plane > 0 ? sim_vsumf(x + pl * plane, plane) / (float)plane : 0.0f;
}

/* Planes per parallel piece: about SIM_POOL_MAP_GRAIN element visits each. */
static int64_t
plane_grain(int64_t visits_per_plane)
{
    return SIM_POOL_MAP_GRAIN / (visits_per_plane + 1) + 1;
}

/* x: (N, C, spatial...), y and indices: (N, C, out spatial...) */
static int
fwd_pool(const struct sim_kern *k, struct sim_err *err)
{
    const struct pool_params *p = k->params;
    int64_t plane_in = p->in[0] * p->in[1] * p->in[2];
    int64_t plane_out = p->out[0] * p->out[1] * p->out[2];

    (void)err;
    if (p->whole) {
        sim_pool_for(p->planes, plane_grain(plane_in), mean_planes, (void *)k);
        return 0;
    }
    sim_pool_for(p->planes, plane_grain(plane_out * p->k[0] * p->k[1] * p->k[2]),
                 pool_planes, (void *)k);
    return 0;
}

/* The maximum so far m after tap v, PyTorch's rule: v replaces m when greater or NaN, so a
 * window with a NaN gives NaN (the index: its last NaN). */
#define MAX_TAP(m, v) ((v) > (m) || (v) != (v) ? (v) : (m))

/* The vector types of a block of L windows (L = 8 or 4): floats, unaligned floats, the
 * compares' masks (-1 or 0 per lane); the even and odd columns of two L-float halves of an
 * input row; the two halves of two L-lane vectors interleaved (lane i of one, then of the
 * other). */
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float mp2_v4f __attribute__((vector_size(16)));
typedef float mp2_v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
#define MP2_F8 sim_v8f
#define MP2_FU8 sim_v8f_u
#define MP2_I8 sim_v8i
#define MP2_F4 mp2_v4f
#define MP2_FU4 mp2_v4f_u
#define MP2_I4 v4i
#define MP2_EVEN8 0, 2, 4, 6, 8, 10, 12, 14
#define MP2_ODD8 1, 3, 5, 7, 9, 11, 13, 15
#define MP2_ZIPLO8 0, 8, 1, 9, 2, 10, 3, 11
#define MP2_ZIPHI8 4, 12, 5, 13, 6, 14, 7, 15
#define MP2_EVEN4 0, 2, 4, 6
#define MP2_ODD4 1, 3, 5, 7
#define MP2_ZIPLO4 0, 4, 1, 5
#define MP2_ZIPHI4 2, 6, 3, 7

/* MAX_TAP over L lanes: v where v > m or v is NaN, else m. */
#define MP2_VMAX(L, m, v)                                                                  \
    ((MP2_F##L)(((((v) > (m)) | ((v) != (v))) & (MP2_I##L)(v)) |                           \
                (~(((v) > (m)) | ((v) != (v))) & (MP2_I##L)(m))))

/* L windows of the 2x2 forward (L = 8 or 4) from output column ox of output row yr, the
 * input rows r0 and r1 read 2L wide as two halves and split into even and odd columns:
 * the taps in max2x2_planes' order. */
#define MP2_MAX_WINDOWS(L)                                                                 \
    do {                                                                                   \
        const float *a_ = r0 + 2 * ox, *b_ = r1 + 2 * ox;                                  \
        MP2_F##L a0_ = *(const MP2_FU##L *)a_, a1_ = *(const MP2_FU##L *)(a_ + L);         \
        MP2_F##L b0_ = *(const MP2_FU##L *)b_, b1_ = *(const MP2_FU##L *)(b_ + L);         \
        MP2_F##L x00_ = __builtin_shufflevector(a0_, a1_, MP2_EVEN##L);                    \
        MP2_F##L x01_ = __builtin_shufflevector(a0_, a1_, MP2_ODD##L);                     \
        MP2_F##L x10_ = __builtin_shufflevector(b0_, b1_, MP2_EVEN##L);                    \
        MP2_F##L x11_ = __builtin_shufflevector(b0_, b1_, MP2_ODD##L);                     \
        MP2_F##L u_ = MP2_VMAX(L, x00_, x01_), w_ = MP2_VMAX(L, x10_, x11_);               \
        *(MP2_FU##L *)(yr + ox) = MP2_VMAX(L, u_, w_);                                     \
    } while (0)

/* x: (N, C, H, W) float; 2x2 windows, stride 2, no padding: the CNN case, eight windows
 * at a time, then four, the row's last ones one by one; planes [lo, hi) (ctx: the kernel). */
SIM_HOT_FN(max2x2_planes, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct sim_kern *k = ctx;
    const struct pool_params *p = k->params;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    int64_t H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2];

    for (int64_t pl = lo; pl < hi; pl++) {
        const float *xp = x + pl * H * W;
        float *yp = y + pl * OH * OW;
        for (int64_t oy = 0; oy < OH; oy++) {
            const float *r0 = xp + 2 * oy * W, *r1 = r0 + W;
            float *yr = yp + oy * OW;
            int64_t ox = 0;
            for (; ox + 8 <= OW; ox += 8)
                MP2_MAX_WINDOWS(8);
            if (ox + 4 <= OW) {
                MP2_MAX_WINDOWS(4);
                ox += 4;
            }
            for (; ox < OW; ox++) {
                float a = MAX_TAP(r0[2 * ox], r0[2 * ox + 1]);
                float b = MAX_TAP(r1[2 * ox], r1[2 * ox + 1]);
                yr[ox] = MAX_TAP(a, b);
            }
        }
    }
}

typedef int64_t v4l __attribute__((vector_size(32)));
typedef int64_t v4l_u __attribute__((vector_size(32), aligned(8), may_alias)); /* unaligned */

/*
 * One tap of a row of windows, training: for output columns [c0, c1) (every tap inside the
 * row), the tap's input xt[ox sx] replaces yr[ox] when greater or NaN, and then ar[ox]
 * becomes its index idx0 + ox sx. Strides 1 and 2 take eight columns at a time (stride 2 reads one
 * element past the eighth column's tap, the next column's, so it stops a column early).
 */
static inline __attribute__((always_inline)) void
max_tap_argmax(const float *xt, float *yr, int64_t *ar, int64_t c0, int64_t c1, int64_t sx,
               int64_t idx0)
{
    int64_t ox = c0, lim = sx == 1 ? c1 - 8 : sx == 2 ? c1 - 9 : c0 - 1;

    for (; ox <= lim; ox += 8) {
        sim_v8f v, cur = *(const sim_v8f_u *)(yr + ox);
        sim_v8i m;
        v4i mlo, mhi;
        v4l wlo, whi, clo, chi;
        v4l_u *a = (v4l_u *)(ar + ox);
        int64_t b0 = idx0 + ox * sx;
        if (sx == 1)
            v = *(const sim_v8f_u *)(xt + ox);
        else
            v = __builtin_shufflevector(*(const sim_v8f_u *)(xt + 2 * ox),
                                        *(const sim_v8f_u *)(xt + 2 * ox + 8),
                                        0, 2, 4, 6, 8, 10, 12, 14);
        m = (v > cur) | (v != v);
        *(sim_v8f_u *)(yr + ox) = sim_v8sel(m, v, cur);
        mlo = (v4i){ m[0], m[1], m[2], m[3] };
        mhi = (v4i){ m[4], m[5], m[6], m[7] };
        wlo = __builtin_convertvector(mlo, v4l);
        whi = __builtin_convertvector(mhi, v4l);
        clo = b0 + (v4l){ 0, 1, 2, 3 } * sx;
        chi = b0 + (v4l){ 4, 5, 6, 7 } * sx;
        a[0] = (clo & wlo) | (a[0] & ~wlo);
        a[1] = (chi & whi) | (a[1] & ~whi);
    }
    for (; ox < c1; ox++) {
        float v = xt[ox * sx];
        bool m = v > yr[ox] || v != v;
        yr[ox] = m ? v : yr[ox];
        ar[ox] = m ? idx0 + ox * sx : ar[ox];
    }
}

/*
 * Float MaxPool over 1 or 2 dims without an Indices output, planes [lo, hi) (ctx: the
 * kernel); in training the input index of each maximum goes to saved. The same choice as
 * pool_planes' (the first valid tap, then a tap replaces the maximum when greater or NaN,
 * taps in row-major order), made for the columns whose whole window lies inside the row one tap at
 * a time across the row, with selects instead of branches; edge columns one by one.
 */
SIM_HOT_FN(max2d_planes, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct sim_kern *k = ctx;
    const struct pool_params *p = k->params;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    int64_t *arg = p->save_argmax ? k->saved : NULL;
    int64_t H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2];
    int64_t sx = p->s[2], dx = p->d[2], kw = p->k[2], px = p->pb[2];
    int64_t c0 = (px + sx - 1) / sx, c1 = OW;     /* columns with every tap inside */

    if (kw > 0 && W - 1 - (kw - 1) * dx + px < 0)
        c1 = 0;
    else if (kw > 0)
        c1 = (W - 1 - (kw - 1) * dx + px) / sx + 1;
    c1 = c1 > OW ? OW : c1;
    c0 = c0 > c1 ? c1 : c0;
    for (int64_t pl = lo; pl < hi; pl++) {
        const float *xp = x + pl * H * W;
        for (int64_t oy = 0; oy < OH; oy++) {
            int64_t a1, b1, o = (pl * OH + oy) * OW;
            float *yr = y + o;
            int64_t *ar = arg != NULL ? arg + o : NULL;
            taps(p, 1, oy, &a1, &b1);
            for (int64_t ox = 0; ox < OW; ox++) {
                int64_t a2, b2, best = -1;
                float acc = -INFINITY;
                if (ox == c0 && c1 > c0 && b1 > a1) {
                    ox = c1 - 1;    /* the interior is done below */
                    continue;
                }
                taps(p, 2, ox, &a2, &b2);
                for (int64_t t1 = a1; t1 < b1; t1++) {
                    int64_t row = pl * H * W + (oy * p->s[1] - p->pb[1] + t1 * p->d[1]) * W;
                    for (int64_t t2 = a2; t2 < b2; t2++) {
                        int64_t at = row + ox * sx - px + t2 * dx;
                        if (x[at] > acc || x[at] != x[at] || best < 0) {
                            acc = x[at];
                            best = at;
                        }
                    }
                }
                yr[ox] = acc;
                if (ar != NULL)
                    ar[ox] = best;
            }
            if (!(c1 > c0 && b1 > a1))
                continue;
            for (int64_t t1 = a1; t1 < b1; t1++) {
                int64_t iy = oy * p->s[1] - p->pb[1] + t1 * p->d[1];
                const float *xr = xp + iy * W - px;
                int64_t base = pl * H * W + iy * W - px;
                for (int64_t t2 = 0; t2 < kw; t2++) {
                    const float *xt = xr + t2 * dx;
                    if (t1 == a1 && t2 == 0) {
                        for (int64_t ox = c0; ox < c1; ox++)
                            yr[ox] = xt[ox * sx];
                        for (int64_t ox = c0; ar != NULL && ox < c1; ox++)
                            ar[ox] = base + ox * sx;
                        continue;
                    }
                    if (ar == NULL) {
                        for (int64_t ox = c0; ox < c1; ox++) {
                            float v = xt[ox * sx];
                            yr[ox] = MAX_TAP(yr[ox], v);
                        }
                    } else {
                        max_tap_argmax(xt, yr, ar, c0, c1, sx, base + t2 * dx);
                    }
                }
            }
        }
    }
}

/* x: (N, C, spatial...); y, indices: (N, C, out spatial...) */
static int
fwd_maxpool(const struct sim_kern *k, struct sim_err *err)
{
    const struct pool_params *p = k->params;
    int64_t plane_in = p->in[0] * p->in[1] * p->in[2];

    if (p->fast2x2) {
        sim_pool_for(p->planes, plane_grain(plane_in), max2x2_planes, (void *)k);
        return 0;
    }
    if (p->max2d) {
        sim_pool_for(p->planes, plane_grain(p->out[1] * p->out[2] * p->k[1] * p->k[2]),
                     max2d_planes, (void *)k);
        return 0;
    }
    return fwd_pool(k, err);
}

/* ---- backward ------------------------------------------------------------------------- */

/* 2x2 stride 2: dy[o] goes to the first of the four inputs equal to y[o], or to the last
 * NaN when y[o] is NaN (the one the forward picked); x, dx: (N, C, H, W), y, dy: (N, C, OH,
 * OW) */
struct mp2_run {
    const struct pool_params *p;
    const float *x, *y, *g;
    float *dx;
};

/* The masks of one window: which of its four inputs (x00 x01 / x10 x11) gets the gradient:
 * the first equal to the maximum v, or, when v is NaN, the last NaN (the forward's pick). */
#define MP2_MASKS(T, NOT, x00, x01, x10, x11, v, e0, m1, m2, m3)                            \
    do {                                                                                  \
        T e1_ = (x01) == (v), e2_ = (x10) == (v), nan_ = (v) != (v);                       \
        T n3_ = (x11) != (x11), n2_ = NOT(n3_) & ((x10) != (x10));                         \
        T n1_ = NOT(n3_) & NOT(n2_) & ((x01) != (x01));                                    \
        e0 = (x00) == (v);                                                                \
        m1 = e1_ & NOT(e0);                                                               \
        m2 = e2_ & NOT(e0) & NOT(e1_);                                                    \
        m3 = NOT(e0 | e1_ | e2_);                                                         \
        e0 = (nan_ & NOT(n3_) & NOT(n2_) & NOT(n1_)) | (NOT(nan_) & e0);                  \
        m1 = (nan_ & n1_) | (NOT(nan_) & m1);                                             \
        m2 = (nan_ & n2_) | (NOT(nan_) & m2);                                             \
        m3 = (nan_ & n3_) | (NOT(nan_) & m3);                                             \
    } while (0)
#define MP2_NOT_V(a) (~(a))
#define MP2_NOT_S(a) (!(a))

/*
 * L windows of the 2x2 backward (L = 8 or 4, the expansions of MP2_*L above), from output
 * column ox of the output row at o, the input rows at r0 and r0 + W: each row read 2L wide
 * as two halves and split into even and odd columns, the masks of MP2_MASKS, then every
 * input gets gv * 1.0f or gv * 0.0f added, written back interleaved, half by half. The
 * float operations are those of the scalar windows, lane by lane.
 */
#define MP2_WINDOWS(L)                                                                     \
    do {                                                                                   \
        const float *a_ = x + r0 + 2 * ox, *b_ = a_ + W;                                   \
        float *da_ = dx + r0 + 2 * ox, *db_ = da_ + W;                                     \
        MP2_F##L a0_ = *(const MP2_FU##L *)a_, a1_ = *(const MP2_FU##L *)(a_ + L);         \
        MP2_F##L b0_ = *(const MP2_FU##L *)b_, b1_ = *(const MP2_FU##L *)(b_ + L);         \
        MP2_F##L x00_ = __builtin_shufflevector(a0_, a1_, MP2_EVEN##L);                    \
        MP2_F##L x01_ = __builtin_shufflevector(a0_, a1_, MP2_ODD##L);                     \
        MP2_F##L x10_ = __builtin_shufflevector(b0_, b1_, MP2_EVEN##L);                    \
        MP2_F##L x11_ = __builtin_shufflevector(b0_, b1_, MP2_ODD##L);                     \
        MP2_F##L v_ = *(const MP2_FU##L *)(y + o + ox);                                    \
        MP2_F##L gv_ = *(const MP2_FU##L *)(g + o + ox), one_ = (MP2_F##L){ 0.0f } + 1.0f; \
        MP2_I##L e0_, m1_, m2_, m3_;                                                       \
        MP2_F##L c0_, c1_, c2_, c3_;                                                       \
        MP2_MASKS(MP2_I##L, MP2_NOT_V, x00_, x01_, x10_, x11_, v_, e0_, m1_, m2_, m3_);     \
        c0_ = gv_ * (MP2_F##L)(e0_ & (MP2_I##L)one_);                                      \
        c1_ = gv_ * (MP2_F##L)(m1_ & (MP2_I##L)one_);                                      \
        c2_ = gv_ * (MP2_F##L)(m2_ & (MP2_I##L)one_);                                      \
        c3_ = gv_ * (MP2_F##L)(m3_ & (MP2_I##L)one_);                                      \
        *(MP2_FU##L *)da_ += __builtin_shufflevector(c0_, c1_, MP2_ZIPLO##L);              \
        *(MP2_FU##L *)(da_ + L) += __builtin_shufflevector(c0_, c1_, MP2_ZIPHI##L);        \
        *(MP2_FU##L *)db_ += __builtin_shufflevector(c2_, c3_, MP2_ZIPLO##L);              \
        *(MP2_FU##L *)(db_ + L) += __builtin_shufflevector(c2_, c3_, MP2_ZIPHI##L);        \
    } while (0)

/*
 * The 2x2 stride-2 backward of planes [lo, hi): every input of a window gets gv * 1.0f or
 * gv * 0.0f added (masks, not branches: the position of a maximum is unpredictable), eight
 * windows at a time, then four (a 12-wide row's last ones, 4-wide rows), the row's last
 * windows one by one, the same float operations every way.
 */
SIM_HOT_FN(mp2_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct mp2_run *r = ctx;
    const float *x = r->x, *y = r->y, *g = r->g;
    float *dx = r->dx;
    int64_t H = r->p->in[1], W = r->p->in[2], OH = r->p->out[1], OW = r->p->out[2];

    for (int64_t pl = lo; pl < hi; pl++)
        for (int64_t oy = 0; oy < OH; oy++) {
            int64_t r0 = pl * H * W + 2 * oy * W, o = (pl * OH + oy) * OW, ox = 0;
            for (; ox + 8 <= OW; ox += 8)
                MP2_WINDOWS(8);
            if (ox + 4 <= OW) {
                MP2_WINDOWS(4);
                ox += 4;
            }
            for (; ox < OW; ox++) {
                int64_t c = r0 + 2 * ox;
                float v = y[o + ox], gv = g[o + ox];
                int e0, m1, m2, m3;
                MP2_MASKS(int, MP2_NOT_S, x[c], x[c + 1], x[c + W], x[c + W + 1], v, e0, m1,
                          m2, m3);
                dx[c] += gv * (float)e0;
                dx[c + 1] += gv * (float)m1;
                dx[c + W] += gv * (float)m2;
                dx[c + W + 1] += gv * (float)m3;
            }
        }
}

static void
bwd_maxpool_2x2(const struct sim_kern *k, const struct pool_params *p, const float *g, float *dx)
{
    struct mp2_run r = { p, k->in[0].data, k->out[0].data, g, dx };

    sim_pool_for(p->planes, SIM_POOL_MAP_GRAIN / (p->in[1] * p->in[2] + 1) + 1, mp2_bwd_piece,
                 &r);
}

/* What the pieces of a pooling backward share. */
struct pool_grad_run {
    const struct pool_params *p;
    const int64_t *arg;             /* MaxPool: the input index of each output's maximum */
    const float *g;                 /* dy: (N, C, out...) */
    float *dx;                      /* (N, C, in...), added to */
};

/* dx[argmax[o]] += dy[o] for the outputs of planes [lo, hi) (a maximum is in its own
 * plane, so planes never share an element of dx). */
static void
argmax_bwd_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct pool_grad_run *r = ctx;
    const struct pool_params *p = r->p;
    int64_t plane_out = p->out[0] * p->out[1] * p->out[2];

    for (int64_t o = lo * plane_out; o < hi * plane_out; o++)
        if (r->arg[o] >= 0)
            r->dx[r->arg[o]] += r->g[o];
}

/* dx[argmax[o]] += dy[o]; dy: (N, C, out...), dx: (N, C, in...) */
static int
bwd_maxpool(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
            struct sim_err *err)
{
    const struct pool_params *p = k->params;
    const int64_t *arg = k->saved;
    const float *g = dout[0].data;
    float *dx = din[0].data;
    int64_t plane_out = p->out[0] * p->out[1] * p->out[2];
    struct pool_grad_run r = { p, arg, g, dx };

    if (g == NULL || dx == NULL)
        return 0;
    if (p->fast2x2) {
        bwd_maxpool_2x2(k, p, g, dx);
        return 0;
    }
    if (arg == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: no argmax was kept", k->label);
    sim_pool_for(p->planes, plane_grain(plane_out), argmax_bwd_piece, &r);
    return 0;
}

/* Each output's gradient divided by the count it averaged over, added to every tap of
 * its window, for planes [lo, hi). */
static void
avg_bwd_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct pool_grad_run *r = ctx;
    const struct pool_params *p = r->p;
    const float *g = r->g;
    float *dx = r->dx;
    int64_t plane_in = p->in[0] * p->in[1] * p->in[2];
    int64_t plane_out = p->out[0] * p->out[1] * p->out[2];

    for (int64_t pl = lo; pl < hi; pl++) {
        int64_t oi = pl * plane_out;
        for (int64_t o0 = 0; o0 < p->out[0]; o0++) {
            int64_t a0, b0;
            taps(p, 0, o0, &a0, &b0);
            for (int64_t o1 = 0; o1 < p->out[1]; o1++) {
                int64_t a1, b1;
                taps(p, 1, o1, &a1, &b1);
                for (int64_t o2 = 0; o2 < p->out[2]; o2++, oi++) {
                    int64_t a2, b2, div;
                    float gv;
                    taps(p, 2, o2, &a2, &b2);
                    div = (b0 - a0) * (b1 - a1) * (b2 - a2);
                    if (p->include_pad)
                        div = padded_extent(p, 0, o0) * padded_extent(p, 1, o1) *
                              padded_extent(p, 2, o2);
                    if (div <= 0)
                        continue;
                    gv = g[oi] / (float)div;
                    for (int64_t t0 = a0; t0 < b0; t0++) {
                        int64_t i0 = o0 * p->s[0] - p->pb[0] + t0 * p->d[0];
                        for (int64_t t1 = a1; t1 < b1; t1++) {
                            int64_t i1 = o1 * p->s[1] - p->pb[1] + t1 * p->d[1];
                            float *row = dx + pl * plane_in + (i0 * p->in[1] + i1) * p->in[2];
                            for (int64_t t2 = a2; t2 < b2; t2++)
                                row[o2 * p->s[2] - p->pb[2] + t2 * p->d[2]] += gv;
                        }
                    }
                }
            }
        }
    }
}

/* The whole-plane average's backward for planes [lo, hi): dy[pl] / the plane's size added
 * to every element of the plane (the same operations as avg_bwd_piece's, in a flat loop). */
SIM_HOT_FN(mean_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct pool_grad_run *r = ctx;
    const struct pool_params *p = r->p;
    int64_t plane = p->in[0] * p->in[1] * p->in[2];

    for (int64_t pl = lo; pl < hi; pl++) {
        float gv = r->g[pl] / (float)plane, *row = r->dx + pl * plane;
        for (int64_t i = 0; i < plane; i++)
            row[i] += gv;
    }
}

/* Each output's gradient divided by the count it averaged over, added to every tap of
 * its window; dy: (N, C, out...), dx: (N, C, in...) */
static int
bwd_avgpool(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
            struct sim_err *err)
{
    const struct pool_params *p = k->params;
    struct pool_grad_run r = { p, NULL, dout[0].data, din[0].data };
    int64_t plane_in = p->in[0] * p->in[1] * p->in[2];

    (void)err;
    if (r.g == NULL || r.dx == NULL || plane_in == 0)
        return 0;
    sim_pool_for(p->planes, plane_grain(plane_in), p->whole ? mean_bwd_piece : avg_bwd_piece,
                 &r);
    return 0;
}

const struct sim_op sim_ops_pool[] = {
    { "MaxPool", 1, 1, 1, 1, 2, 0, 0, 8192u, infer_maxpool, fwd_maxpool, bwd_maxpool, 1u,
      NULL, SIM_BWD_ALL },
    { "AveragePool", 1, 1, 1, 1, 1, 0, 0, 8192u, infer_avgpool, fwd_pool, bwd_avgpool, 1u,
      NULL, SIM_BWD_NONE },
    { "GlobalAveragePool", 1, 1, 1, 1, 1, 0, 0, 4096u, infer_gavgpool, fwd_pool, bwd_avgpool,
      1u, NULL, SIM_BWD_NONE },
};

const int sim_ops_pool_count = (int)(sizeof(sim_ops_pool) / sizeof(sim_ops_pool[0]));

/*
 * op_conv.c — Conv on float NCHW tensors (1-D and 2-D, pads, strides, dilations, groups,
 * auto_pad, optional bias) as im2col + OpenBLAS sgemm, forward and backward.
 *
 * The batch is folded into the GEMM: images are processed in chunks whose im2col matrix
 * fits a fixed scratch budget, so one sgemm covers many images (N = chunk x OH x OW);
 * its (M, chunk, OH*OW) result is then scattered to NCHW with the bias added. A 1x1
 * convolution with stride 1 and no padding skips im2col and multiplies each image in place.
 * The backward uses the same chunks: dY is gathered to (M, chunk x OH x OW), the weight
 * gradient is one sgemm against the im2col matrix (kept from the forward when the batch is
 * one chunk, else recomputed), the input gradient one sgemm
 * with the transposed weights into a column matrix that col2im adds back into NCHW.
 * Does not: 3-D convolution, ConvTranspose, integer convolution.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define SCRATCH_BUDGET ((int64_t)256 << 10) /* fits L2: the unfolded images stay in cache */

struct conv_params {
    int64_t n, c, h, w;             /* input (2-D view; 1-D has h = 1) */
    int64_t m, oh, ow;              /* output channels and spatial dims */
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;
    int64_t group, cg, mg;          /* channels per group in and out */
    int64_t kg;                     /* rows of the im2col matrix: cg * kh * kw */
    int64_t chunk;                  /* images per GEMM */
    bool save_cols;                 /* training, one chunk, one group: the forward's im2col
                                     * matrix is kept (saved) for the weight gradient */
    bool pointwise;                 /* 1x1, stride 1, no padding */
};

static int
infer_conv(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *wt = c->in[1];
    struct conv_params *p;
    struct sim_window win;
    int64_t group, in_sp[2], k_sp[2];
    const int64_t *ks;
    struct sim_shape o;
    int nks, nsp, rc = sim_in_dtype(c, 0, sim_dt_float);
    char s1[128], s2[128];

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_float);
    if (rc == 0)
        rc = sim_ia_int(c, "group", 1, &group);
    if (rc == 0)
        rc = sim_ia_ints(c, "kernel_shape", &ks, &nks);
    if (rc != 0)
        return rc;
    if (x->shape.rank == 5)
        return sim_infer_unsupported(c, "3-D convolution (input %s); 1-D and 2-D are "
                                     "supported", sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    if (x->shape.rank < 3 || x->shape.rank > 4 || wt->shape.rank != x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s and weights %s must both be (N, C, "
                              "H, W) or (N, C, L)", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    nsp = x->shape.rank - 2;
    for (int i = 0; i < nsp; i++) {
        in_sp[i] = x->shape.d[2 + i];
        k_sp[i] = wt->shape.d[2 + i];
        if (nks >= 0 && (nks != nsp || ks[i] != k_sp[i]))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "kernel_shape does not match the weights "
                                  "%s", sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    }
    if (group < 1 || x->shape.d[1] % group != 0 || wt->shape.d[0] % group != 0 ||
        wt->shape.d[1] * group != x->shape.d[1])
        return sim_infer_fail(c, IPUOF_E_SHAPE, "group %lld does not divide input %s and "
                              "weights %s consistently", (long long)group,
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    rc = sim_window_infer(c, nsp, in_sp, k_sp, false, true, &win);
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
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
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
    p->oh = nsp == 2 ? win.out[0] : 1;
    p->ow = win.out[nsp - 1];
    p->sh = nsp == 2 ? win.s[0] : 1;
    p->sw = win.s[nsp - 1];
    p->dh = nsp == 2 ? win.d[0] : 1;
    p->dw = win.d[nsp - 1];
    p->ph = nsp == 2 ? win.pb[0] : 0;
    p->pw = win.pb[nsp - 1];
    p->kg = p->cg * p->kh * p->kw;
    p->pointwise = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 &&
                   p->pw == 0 && p->oh == p->h && p->ow == p->w;
    o.rank = x->shape.rank;
    o.d[0] = p->n;
    o.d[1] = p->m;
    for (int i = 0; i < nsp; i++)
        o.d[2 + i] = win.out[i];
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    if (rc != 0)
        return rc;
    if (p->kg > INT_MAX || p->mg > INT_MAX || p->oh * p->ow > INT_MAX)
        return sim_infer_unsupported(c, "GEMM dimensions over 2^31");
    {
        /* images per GEMM: as many as fit the scratch budget, at least one */
        double per_image = (double)(p->kg + p->mg) * (double)(p->oh * p->ow) * sizeof(float);
        double chunk = per_image > 0 ? floor((double)SCRATCH_BUDGET / per_image) : (double)p->n;
        p->chunk = chunk < 1 ? 1 : chunk > (double)p->n ? p->n : (int64_t)chunk;
        if (p->chunk < 1)
            p->chunk = 1;
        if (p->chunk * p->oh * p->ow > INT_MAX)
            p->chunk = INT_MAX / (p->oh * p->ow > 0 ? p->oh * p->ow : 1);
        if (!p->pointwise && per_image * (double)p->chunk > (double)((int64_t)1 << 40))
            return sim_infer_unsupported(c, "an im2col matrix over 1 TiB");
        if (!p->pointwise)
            c->scratch_bytes = (size_t)(per_image * (double)p->chunk);
        if (c->training)
            c->bwd_scratch_bytes = c->scratch_bytes;
        if (c->training && !p->pointwise && p->chunk == p->n && p->group == 1) {
            p->save_cols = true;
            c->saved_bytes = (size_t)(p->kg * p->n * p->oh * p->ow) * sizeof(float);
        }
    }
    return 0;
}

/* cols (kg, nimg * P) from images x[n0 .. n0+nimg) of group g; P = oh * ow. */
static void
im2col(const struct conv_params *p, const float *x, int64_t n0, int64_t nimg, int64_t g,
       float *cols)
{
    int64_t P = p->oh * p->ow, ld = nimg * P;

    for (int64_t ci = 0; ci < p->cg; ci++)
        for (int64_t ki = 0; ki < p->kh; ki++)
            for (int64_t kj = 0; kj < p->kw; kj++) {
                float *row = cols + ((ci * p->kh + ki) * p->kw + kj) * ld;
                /* output columns ow in [lo, hi) read inside the input row */
                int64_t off = kj * p->dw - p->pw, lo = 0, hi = p->ow;
                while (lo < hi && lo * p->sw + off < 0)
                    lo++;
                while (hi > lo && (hi - 1) * p->sw + off >= p->w)
                    hi--;
                for (int64_t n = 0; n < nimg; n++) {
                    const float *xc = x + ((n0 + n) * p->c + g * p->cg + ci) * p->h * p->w;
                    float *dst = row + n * P;
                    for (int64_t oy = 0; oy < p->oh; oy++, dst += p->ow) {
                        int64_t iy = oy * p->sh - p->ph + ki * p->dh;
                        const float *xr;
                        if (iy < 0 || iy >= p->h) {
                            memset(dst, 0, (size_t)p->ow * sizeof(float));
                            continue;
                        }
                        xr = xc + iy * p->w;
                        for (int64_t ox = 0; ox < lo; ox++)
                            dst[ox] = 0.0f;
                        if (p->sw == 1) {
                            if (hi > lo)
                                memcpy(dst + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(float));
                        } else {
                            for (int64_t ox = lo; ox < hi; ox++)
                                dst[ox] = xr[ox * p->sw + off];
                        }
                        for (int64_t ox = hi; ox < p->ow; ox++)
                            dst[ox] = 0.0f;
                    }
                }
            }
}

/* x: (N, C, H, W), w: (M, C/group, KH, KW), bias: (M) or absent, y: (N, M, OH, OW) */
static int
fwd_conv(const struct sim_kern *k, struct sim_err *err)
{
    const struct conv_params *p = k->params;
    const float *x = k->in[0].data, *w = k->in[1].data;
    const float *bias = k->n_in > 2 ? k->in[2].data : NULL;
    float *y = k->out[0].data;
    int64_t P = p->oh * p->ow;

    (void)err;
    if (p->n == 0 || p->m == 0 || P == 0)
        return 0;
    if (p->pointwise) {
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t g = 0; g < p->group; g++) {
                float *yg = y + (n * p->m + g * p->mg) * P;
                if (bias != NULL)
                    for (int64_t m = 0; m < p->mg; m++)
                        for (int64_t i = 0; i < P; i++)
                            yg[m * P + i] = bias[g * p->mg + m];
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->mg, (int)P,
                            (int)p->cg, 1.0f, w + g * p->mg * p->cg, (int)p->cg,
                            x + (n * p->c + g * p->cg) * P, (int)P, bias ? 1.0f : 0.0f, yg,
                            (int)P);
            }
        return 0;
    }
    for (int64_t n0 = 0; n0 < p->n; n0 += p->chunk) {
        int64_t nimg = p->n - n0 < p->chunk ? p->n - n0 : p->chunk, cols_n = nimg * P;
        float *cols = k->scratch, *tmp = cols + p->kg * cols_n;
        if (p->save_cols)
            cols = k->saved;
        for (int64_t g = 0; g < p->group; g++) {
            im2col(p, x, n0, nimg, g, cols);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->mg, (int)cols_n,
                        (int)p->kg, 1.0f, w + g * p->mg * p->kg, (int)p->kg, cols, (int)cols_n,
                        0.0f, tmp, (int)cols_n);
            for (int64_t m = 0; m < p->mg; m++) {
                float b = bias != NULL ? bias[g * p->mg + m] : 0.0f;
                for (int64_t n = 0; n < nimg; n++) {
                    const float *src = tmp + m * cols_n + n * P;
                    float *dst = y + ((n0 + n) * p->m + g * p->mg + m) * P;
                    for (int64_t i = 0; i < P; i++)
                        dst[i] = src[i] + b;
                }
            }
        }
    }
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/* dx[n0 .. n0+nimg) of group g += col2im(cols); cols (kg, nimg * P) as im2col lays it out. */
static void
col2im(const struct conv_params *p, const float *cols, int64_t n0, int64_t nimg, int64_t g,
       float *dx)
{
    int64_t P = p->oh * p->ow, ld = nimg * P;

    for (int64_t ci = 0; ci < p->cg; ci++)
        for (int64_t ki = 0; ki < p->kh; ki++)
            for (int64_t kj = 0; kj < p->kw; kj++) {
                const float *row = cols + ((ci * p->kh + ki) * p->kw + kj) * ld;
                int64_t off = kj * p->dw - p->pw, lo = 0, hi = p->ow;
                while (lo < hi && lo * p->sw + off < 0)
                    lo++;
                while (hi > lo && (hi - 1) * p->sw + off >= p->w)
                    hi--;
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
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->mg, (int)p->cg,
                            (int)P, 1.0f, gy, (int)P, x + xo, (int)P, 1.0f,
                            dw + gr * p->mg * p->cg, (int)p->cg);
            if (dx != NULL)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)p->cg, (int)P,
                            (int)p->mg, 1.0f, w + gr * p->mg * p->cg, (int)p->cg, gy, (int)P,
                            1.0f, dx + xo, (int)P);
        }
}

/* x, dx: (N, C, H, W); w, dw: (M, C/group, KH, KW); db: (M); dy: (N, M, OH, OW) */
static int
bwd_conv(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct conv_params *p = k->params;
    const float *x = k->in[0].data, *w = k->in[1].data, *g = dout[0].data;
    float *dx = din[0].data, *dw = din[1].data;
    float *db = k->n_in > 2 ? din[2].data : NULL;
    int64_t P = p->oh * p->ow;

    (void)err;
    if (g == NULL || p->n == 0 || p->m == 0 || P == 0)
        return 0;
    if (db != NULL)
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t m = 0; m < p->m; m++) {
                const float *gr = g + (n * p->m + m) * P;
                float s = 0.0f;
                for (int64_t i = 0; i < P; i++)
                    s += gr[i];
                db[m] += s;
            }
    if (dx == NULL && dw == NULL)
        return 0;
    if (p->pointwise) {
        bwd_pointwise(p, x, w, g, dx, dw);
        return 0;
    }
    for (int64_t n0 = 0; n0 < p->n; n0 += p->chunk) {
        int64_t nimg = p->n - n0 < p->chunk ? p->n - n0 : p->chunk, cols_n = nimg * P;
        float *cols = k->scratch, *gy = cols + p->kg * cols_n;
        for (int64_t gr = 0; gr < p->group; gr++) {
            for (int64_t m = 0; m < p->mg; m++)
                for (int64_t n = 0; n < nimg; n++)
                    memcpy(gy + m * cols_n + n * P, g + ((n0 + n) * p->m + gr * p->mg + m) * P,
                           (size_t)P * sizeof(float));
            if (dw != NULL) {
                const float *xcols = cols;
                if (p->save_cols)
                    xcols = k->saved;
                else
                    im2col(p, x, n0, nimg, gr, cols);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->mg, (int)p->kg,
                            (int)cols_n, 1.0f, gy, (int)cols_n, xcols, (int)cols_n, 1.0f,
                            dw + gr * p->mg * p->kg, (int)p->kg);
            }
            if (dx != NULL) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)p->kg, (int)cols_n,
                            (int)p->mg, 1.0f, w + gr * p->mg * p->kg, (int)p->kg, gy,
                            (int)cols_n, 0.0f, cols, (int)cols_n);
                col2im(p, cols, n0, nimg, gr, dx);
            }
        }
    }
    return 0;
}

const struct sim_op sim_ops_conv[] = {
    { "Conv", 1, 2, 3, 1, 1, 0, 0, 32768u, infer_conv, fwd_conv, bwd_conv, 7u, NULL },
};

const int sim_ops_conv_count = (int)(sizeof(sim_ops_conv) / sizeof(sim_ops_conv[0]));

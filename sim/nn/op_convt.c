/*
 * op_convt.c — ConvTranspose on float tensors (1-D, 2-D and 3-D; strides, pads, auto_pad,
 * output_padding, output_shape, dilations, groups, optional bias), forward and backward, as
 * PyTorch's nn.ConvTranspose1d/2d/3d export it.
 *
 * ConvTranspose is the adjoint of a convolution whose input is Y and whose output is X: per
 * image and group, one sgemm makes the column matrix cols = W_g^T X_g, (mg K, P) with K the
 * kernel's elements and P the input's positions, and a col2im adds every column into Y at
 * out = in x stride - pad_begin + k x dilation. The backward gathers dY with the matching
 * im2col and needs two sgemms: dX_g += W_g cols(dY) and dW_g += X_g cols(dY)^T.
 * The 3-D gather/scatter below covers 1-D and 2-D with unit dims; op_conv.c's helpers are
 * 2-D only, so they are not reused here.
 * Does not: integer ConvTranspose.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct convt_params {
    int64_t n, c, m;                /* images, input channels, output channels */
    int64_t group, cg, mg;          /* channels per group in and out */
    int64_t in[3], out[3], k[3];    /* spatial dims padded to 3 with 1s (leading) */
    int64_t s[3], d[3], pb[3];
    int64_t kn, pin, pout;          /* kernel elements, input and output positions */
};

/* Reads an ints attribute of nsp values (absent: def for each) into v. */
static int
sp_ints(struct sim_infer *c, const char *name, int nsp, int64_t def, int64_t *v)
{
    const int64_t *a;
    int n, rc = sim_ia_ints(c, name, &a, &n);

    if (rc != 0)
        return rc;
    if (n >= 0 && n != nsp)
        return sim_infer_fail(c, IPUOF_E_INVAL, "%s has %d values; the input has %d spatial "
                              "dims", name, n, nsp);
    for (int i = 0; i < nsp; i++)
        v[i] = n < 0 ? def : a[i];
    return 0;
}

/* A ConvTranspose's window per spatial dim: the attributes as given and the padding and
 * output size they make. */
struct convt_win {
    int nsp;                        /* spatial dims, 1 to 3 */
    int64_t k[3], s[3], d[3], op[3], pads[6];
    int64_t pb[3], pe[3], out[3];   /* padding at the begin and end, output size */
};

/* Checks the inputs' dtypes and ranks, group against the input and weights, kernel_shape
 * against the weights; *group, w->nsp and w->k filled. 0, or the error set on c. */
static int
convt_check_inputs(struct sim_infer *c, int64_t *group, struct convt_win *w)
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
                              "...) with 1 to 3 spatial dims",
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    w->nsp = x->shape.rank - 2;
    if (*group < 1 || x->shape.d[1] % *group != 0 || wt->shape.d[0] != x->shape.d[1])
        return sim_infer_fail(c, IPUOF_E_SHAPE, "group %lld and weights %s do not fit input %s "
                              "(weights are (C, M/group, k...))", (long long)*group,
                              sim_shape_fmt(&wt->shape, s2, sizeof(s2)),
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    for (int i = 0; i < w->nsp; i++) {
        w->k[i] = wt->shape.d[2 + i];
        if (nks >= 0 && (nks != w->nsp || ks[i] != w->k[i]))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "kernel_shape does not match the weights "
                                  "%s", sim_shape_fmt(&wt->shape, s2, sizeof(s2)));
    }
    return 0;
}

/* Spatial dim i's padding and output size (w->pb, w->pe, w->out) for an input of len
 * positions, from output_shape (os of nos values, nos < 0: absent) or auto_pad, else the
 * pads. 0, or the error set on c. */
static int
convt_dim(struct sim_infer *c, struct convt_win *w, int i, int64_t len, const int64_t *os,
          int nos, const char *auto_pad)
{
    const int64_t lim = (int64_t)1 << 20;
    int nsp = w->nsp;
    int64_t s = w->s[i], d = w->d[i], op = w->op[i], full;

    if (s > lim || d > lim || op > lim || w->pads[i] < -lim || w->pads[i] > lim ||
        w->pads[nsp + i] < -lim || w->pads[nsp + i] > lim)
        return sim_infer_fail(c, IPUOF_E_INVAL, "strides, dilations, pads and "
                              "output_padding must be below 2^20");
    full = s * (len - 1) + op + (w->k[i] - 1) * d + 1;
    if (s < 1 || d < 1 || op < 0 || (op >= s && op >= d))
        return sim_infer_fail(c, IPUOF_E_INVAL, "strides %lld, dilations %lld and "
                              "output_padding %lld: strides and dilations must be >= 1 "
                              "and output_padding smaller than one of them",
                              (long long)s, (long long)d, (long long)op);
    if (nos >= 0 || strcmp(auto_pad, "SAME_UPPER") == 0 ||
        strcmp(auto_pad, "SAME_LOWER") == 0) {
        int64_t want = nos >= 0 ? os[nos - nsp + i] : len * s;
        int64_t total;
        if (want < 1 || want > ((int64_t)1 << 40))
            return sim_infer_fail(c, IPUOF_E_INVAL, "output_shape %lld is not from 1 to "
                                  "2^40", (long long)want);
        total = full - want;
        if (total < 0)
            total = 0;   /* a larger output_shape: the extra end stays bias only */
        if (strcmp(auto_pad, "SAME_UPPER") == 0) {
            w->pb[i] = total / 2;
            w->pe[i] = total - total / 2;
        } else {
            w->pb[i] = total - total / 2;
            w->pe[i] = total / 2;
        }
        w->out[i] = nos >= 0 ? want : full - w->pb[i] - w->pe[i];
    } else if (strcmp(auto_pad, "NOTSET") == 0 || strcmp(auto_pad, "VALID") == 0) {
        bool valid = auto_pad[0] == 'V';
        w->pb[i] = valid ? 0 : w->pads[i];
        w->pe[i] = valid ? 0 : w->pads[nsp + i];
        w->out[i] = full - w->pb[i] - w->pe[i];
    } else {
        return sim_infer_fail(c, IPUOF_E_INVAL, "auto_pad '%s' is not one of NOTSET, "
                              "SAME_UPPER, SAME_LOWER, VALID", auto_pad);
    }
    if (w->pb[i] < 0 || w->pe[i] < 0 || w->out[i] < 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "pads %lld, %lld leave no output in "
                              "spatial dim %d", (long long)w->pb[i], (long long)w->pe[i], i);
    return 0;
}

/* Reads output_shape, auto_pad, strides, dilations, output_padding and pads, and makes
 * every spatial dim's padding and output size (convt_dim). 0, or the error set on c. */
static int
convt_window(struct sim_infer *c, struct convt_win *w)
{
    const struct sim_tinfo *x = c->in[0];
    const int64_t *os;
    const char *auto_pad;
    int nos, nsp = w->nsp, rc = sim_ia_ints(c, "output_shape", &os, &nos);

    if (rc == 0)
        rc = sim_ia_str(c, "auto_pad", "NOTSET", &auto_pad);
    if (rc == 0)
        rc = sp_ints(c, "strides", nsp, 1, w->s);
    if (rc == 0)
        rc = sp_ints(c, "dilations", nsp, 1, w->d);
    if (rc == 0)
        rc = sp_ints(c, "output_padding", nsp, 0, w->op);
    if (rc == 0)
        rc = sp_ints(c, "pads", 2 * nsp, 0, w->pads);
    if (rc != 0)
        return rc;
    if (nos >= 0 && nos != nsp && nos != nsp + 2)
        return sim_infer_fail(c, IPUOF_E_INVAL, "output_shape has %d values; give the %d "
                              "spatial dims", nos, nsp);
    for (int i = 0; i < nsp && rc == 0; i++)
        rc = convt_dim(c, w, i, x->shape.d[2 + i], os, nos, auto_pad);
    return rc;
}

/* Checks the optional bias B (M = weights' dim 1 x group). 0, or the error set on c. */
static int
convt_check_bias(struct sim_infer *c, int64_t group)
{
    const struct sim_tinfo *wt = c->in[1];
    char s1[128];
    int rc;

    if (!sim_has_in(c, 2))
        return 0;
    rc = sim_in_dtype(c, 2, sim_dt_float);
    if (rc != 0)
        return rc;
    if (c->in[2]->shape.rank != 1 || c->in[2]->shape.d[0] != wt->shape.d[1] * group)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "bias %s must be (%lld)",
                              sim_shape_fmt(&c->in[2]->shape, s1, sizeof(s1)),
                              (long long)(wt->shape.d[1] * group));
    return 0;
}

/* The sizes of p from input x, weights wt, group and window w, spatial dims padded to 3
 * with leading unit dims. */
static void
convt_params_fill(struct convt_params *p, const struct sim_tinfo *x,
                  const struct sim_tinfo *wt, int64_t group, const struct convt_win *w)
{
    p->n = x->shape.d[0];
    p->c = x->shape.d[1];
    p->group = group;
    p->cg = p->c / group;
    p->mg = wt->shape.d[1];
    p->m = p->mg * group;
    p->kn = p->pin = p->pout = 1;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - w->nsp);  /* spatial dim j, or a leading unit dim */
        p->in[i] = j >= 0 ? x->shape.d[2 + j] : 1;
        p->out[i] = j >= 0 ? w->out[j] : 1;
        p->k[i] = j >= 0 ? w->k[j] : 1;
        p->s[i] = j >= 0 ? w->s[j] : 1;
        p->d[i] = j >= 0 ? w->d[j] : 1;
        p->pb[i] = j >= 0 ? w->pb[j] : 0;
        p->kn *= p->k[i];
        p->pin *= p->in[i];
        p->pout *= p->out[i];
    }
}

/* X (N, C, in...), W (C, M/group, k...), B (M): the output (N, M, out...) from strides,
 * pads or auto_pad / output_shape, output_padding and dilations; the column scratch. */
static int
infer_convt(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *wt = c->in[1];
    struct convt_params *p;
    struct convt_win w;
    int64_t group;
    struct sim_shape o;
    int rc = convt_check_inputs(c, &group, &w);

    if (rc == 0)
        rc = convt_window(c, &w);
    if (rc == 0)
        rc = convt_check_bias(c, group);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    convt_params_fill(p, x, wt, group, &w);
    o.rank = x->shape.rank;
    o.d[0] = p->n;
    o.d[1] = p->m;
    for (int i = 0; i < w.nsp; i++)
        o.d[2 + i] = w.out[i];
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    if (rc != 0)
        return rc;
    if (p->mg * p->kn > INT_MAX || p->pin > INT_MAX || p->cg > INT_MAX ||
        (double)p->mg * (double)p->kn * (double)p->pin * sizeof(float) > (double)(1ull << 40))
        return sim_infer_unsupported(c, "a column matrix over 2^31 rows or columns or 1 TiB");
    c->scratch_bytes = (size_t)(p->mg * p->kn * p->pin) * sizeof(float);
    if (c->training)
        c->bwd_scratch_bytes = c->scratch_bytes;
    return 0;
}

/*
 * Scatter (add) or gather between cols (mg K, P) and the output-side tensor of one image
 * and group (mg, out...): cols row (m, kz, ky, kx), column (iz, iy, ix) pairs with
 * y[m][iz sz - pbz + kz dz][...] when inside. ydst not NULL: ydst += cols (scatter); else
 * cols = ysrc, 0 outside (gather).
 */
static void
cols_xfer(const struct convt_params *p, float *cols, const float *ysrc, float *ydst)
{
    bool add = ydst != NULL;
    const float *y = add ? ydst : ysrc;
    int64_t row = 0;

    for (int64_t m = 0; m < p->mg; m++)
        for (int64_t kz = 0; kz < p->k[0]; kz++)
            for (int64_t ky = 0; ky < p->k[1]; ky++)
                for (int64_t kx = 0; kx < p->k[2]; kx++, row++) {
                    float *cr = cols + row * p->pin;
                    const float *ym = y + m * p->pout;
                    for (int64_t iz = 0; iz < p->in[0]; iz++) {
                        int64_t oz = iz * p->s[0] - p->pb[0] + kz * p->d[0];
                        bool zin = oz >= 0 && oz < p->out[0];
                        for (int64_t iy = 0; iy < p->in[1]; iy++) {
                            int64_t oy = iy * p->s[1] - p->pb[1] + ky * p->d[1];
                            float *c = cr + (iz * p->in[1] + iy) * p->in[2];
                            int64_t yo;
                            const float *yr;
                            if (!zin || oy < 0 || oy >= p->out[1]) {
                                if (!add)
                                    memset(c, 0, (size_t)p->in[2] * sizeof(float));
                                continue;
                            }
                            yo = m * p->pout + (oz * p->out[1] + oy) * p->out[2];
                            yr = ym + (oz * p->out[1] + oy) * p->out[2];
                            for (int64_t ix = 0; ix < p->in[2]; ix++) {
                                int64_t ox = ix * p->s[2] - p->pb[2] + kx * p->d[2];
                                bool in = ox >= 0 && ox < p->out[2];
                                if (add) {
                                    if (in)
                                        ydst[yo + ox] += c[ix];
                                } else {
                                    c[ix] = in ? yr[ox] : 0.0f;
                                }
                            }
                        }
                    }
                }
}

/* x: (N, C, in...), w: (C, M/group, k...), bias: (M) or absent, y: (N, M, out...);
 * scratch: cols (M/group K, P) */
static int
fwd_convt(const struct sim_kern *k, struct sim_err *err)
{
    const struct convt_params *p = k->params;
    const float *x = k->in[0].data, *w = k->in[1].data;
    const float *bias = k->n_in > 2 ? k->in[2].data : NULL;
    float *y = k->out[0].data, *cols = k->scratch;
    int64_t rows = p->mg * p->kn;

    (void)err;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t m = 0; m < p->m; m++) {
            float b = bias != NULL ? bias[m] : 0.0f, *ym = y + (n * p->m + m) * p->pout;
            for (int64_t i = 0; i < p->pout; i++)
                ym[i] = b;
        }
    if (rows == 0 || p->pin == 0 || p->cg == 0)
        return 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t g = 0; g < p->group; g++) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)p->pin,
                        (int)p->cg, 1.0f, w + g * p->cg * rows, (int)rows,
                        x + (n * p->c + g * p->cg) * p->pin, (int)p->pin, 0.0f, cols,
                        (int)p->pin);
            cols_xfer(p, cols, NULL, y + (n * p->m + g * p->mg) * p->pout);
        }
    return 0;
}

/* dx: like x; dw: like w; db: (M); dy: like y; scratch: cols (M/group K, P) */
static int
bwd_convt(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct convt_params *p = k->params;
    const float *x = k->in[0].data, *w = k->in[1].data, *g = dout[0].data;
    float *dx = din[0].data, *dw = din[1].data;
    float *db = k->n_in > 2 ? din[2].data : NULL, *cols = k->scratch;
    int64_t rows = p->mg * p->kn;

    (void)err;
    if (g == NULL)
        return 0;
    if (db != NULL)
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t m = 0; m < p->m; m++) {
                const float *gm = g + (n * p->m + m) * p->pout;
                double s = 0.0;
                for (int64_t i = 0; i < p->pout; i++)
                    s += gm[i];
                db[m] += (float)s;
            }
    if ((dx == NULL && dw == NULL) || rows == 0 || p->pin == 0 || p->cg == 0)
        return 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t gr = 0; gr < p->group; gr++) {
            int64_t xo = (n * p->c + gr * p->cg) * p->pin;
            cols_xfer(p, cols, g + (n * p->m + gr * p->mg) * p->pout, NULL);
            if (dx != NULL)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->cg, (int)p->pin,
                            (int)rows, 1.0f, w + gr * p->cg * rows, (int)rows, cols,
                            (int)p->pin, 1.0f, dx + xo, (int)p->pin);
            if (dw != NULL)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->cg, (int)rows,
                            (int)p->pin, 1.0f, x + xo, (int)p->pin, cols, (int)p->pin, 1.0f,
                            dw + gr * p->cg * rows, (int)rows);
        }
    return 0;
}

const struct sim_op sim_ops_convt[] = {
    { "ConvTranspose", 1, 2, 3, 1, 1, 0, 0, 32768u, infer_convt, fwd_convt, bwd_convt, 7u,
      NULL, SIM_BWD_ALL },
};

const int sim_ops_convt_count = (int)(sizeof(sim_ops_convt) / sizeof(sim_ops_convt[0]));

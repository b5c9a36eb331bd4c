/*
 * op_resize.c — Resize (opsets 10 to 17) and Upsample (opsets 7 to 9) on float tensors,
 * forward and backward: modes nearest (round_prefer_floor, round_prefer_ceil, floor, ceil),
 * linear and cubic (cubic_coeff_a, exclude_outside) in any number of dims; coordinate
 * transformations half_pixel, pytorch_half_pixel, align_corners, asymmetric,
 * tf_half_pixel_for_nn and tf_crop_and_resize (roi, extrapolation_value). PyTorch exports
 * nn.Upsample(mode='nearest') as nearest/asymmetric/floor and bilinear as linear with
 * pytorch_half_pixel (align_corners=False) or align_corners.
 *
 * Every interpolation the ONNX definition allows is separable: at compile time each
 * resized dim gets a table of taps (1, 2 or 4 input indices and weights per output index,
 * edge indices clamped as the definition's edge padding does), and a run applies one
 * 1-D pass per resized dim, innermost first, through two scratch buffers. The backward
 * applies the transposed passes in the reverse order. The scales, sizes and roi inputs
 * must be known at compile time (they decide the output shape).
 * Does not: integer tensors, the opset-18 axes and keep_aspect_ratio_policy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

enum rz_mode { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };

/* The 1-D pass of one dim: out[j] = sum_t w[j][t] in[idx[j][t]], or the extrapolation
 * value where outside[j]. */
struct rz_dim {
    int axis;
    int64_t in, out;
    int taps;
    int64_t *idx;                   /* out * taps, into the params block */
    float *w;                       /* out * taps */
    unsigned char *outside;         /* out */
};

struct rz_params {
    int rank, n_dims;               /* n_dims resized dims, innermost first */
    int64_t in[SIM_MAX_RANK], out[SIM_MAX_RANK];
    int64_t buf_elems;              /* the largest intermediate tensor */
    float extrapolation;
    struct rz_dim dims[SIM_MAX_RANK];
};

struct rz_attrs {
    int mode;
    const char *coord, *nearest;
    float a, extrapolation;
    bool exclude_outside;
};

/* The input coordinate of output index x along a dim (ONNX's coordinate transformations;
 * scale is the given scale, out_w = scale x in as a real number). */
static double
rz_coord(const struct rz_attrs *at, double x, double scale, int64_t in, int64_t out,
         double start, double end)
{
    double out_w = scale * (double)in;

    if (strcmp(at->coord, "align_corners") == 0)
        return out_w == 1.0 ? 0.0 : x * (double)(in - 1) / (out_w - 1.0);
    if (strcmp(at->coord, "asymmetric") == 0)
        return x / scale;
    if (strcmp(at->coord, "tf_half_pixel_for_nn") == 0)
        return (x + 0.5) / scale;
    if (strcmp(at->coord, "pytorch_half_pixel") == 0)
        return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (strcmp(at->coord, "tf_crop_and_resize") == 0)
        return out > 1 ? start * (double)(in - 1) +
                         x * (end - start) * (double)(in - 1) / (double)(out - 1)
                       : 0.5 * (start + end) * (double)(in - 1);
    return (x + 0.5) / scale - 0.5;   /* half_pixel */
}

/* The taps of one output coordinate xo: weights w[taps] for indices first .. first+taps-1
 * (before clamping); returns first. */
static int64_t
rz_taps(const struct rz_attrs *at, double xo, float *w)
{
    double fl = floor(xo), r = xo - fl;
    bool integer = xo == fl;
    int64_t first;

    if (integer)
        r = 1.0;    /* the definition prefers the pixel on the left: ratio in (0, 1] */
    if (at->mode == RZ_CUBIC) {
        double A = at->a, s = 1.0 - r;
        w[0] = (float)(((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A);
        w[1] = (float)(((A + 2) * r - (A + 3)) * r * r + 1);
        w[2] = (float)(((A + 2) * s - (A + 3)) * s * s + 1);
        w[3] = (float)(((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A);
        first = (int64_t)fl - (integer ? 2 : 1);
    } else {
        first = (int64_t)fl - (integer ? 1 : 0);
        if (at->mode == RZ_LINEAR) {
            w[0] = (float)(1.0 - r);
            w[1] = (float)r;
        } else {
            bool right;
            if (integer)
                right = true;
            else if (strcmp(at->nearest, "round_prefer_ceil") == 0)
                right = r >= 0.5;
            else if (strcmp(at->nearest, "floor") == 0)
                right = false;
            else if (strcmp(at->nearest, "ceil") == 0)
                right = true;
            else
                right = r > 0.5;    /* round_prefer_floor */
            w[0] = right ? 0.0f : 1.0f;
            w[1] = right ? 1.0f : 0.0f;
        }
    }
    return first;
}

/* Fills the tap table of dim d (its idx, w and outside arrays are allocated). */
static void
rz_table(const struct rz_attrs *at, struct rz_dim *d, double scale, double start, double end)
{
    for (int64_t j = 0; j < d->out; j++) {
        double xo = rz_coord(at, (double)j, scale, d->in, d->out, start, end);
        float w[4] = { 0 };
        int64_t first = rz_taps(at, xo, w);
        double sum = 0.0;

        d->outside[j] = strcmp(at->coord, "tf_crop_and_resize") == 0 &&
                        (xo < 0.0 || xo > (double)(d->in - 1));
        for (int t = 0; t < d->taps; t++) {
            int64_t i = first + t;
            if (at->exclude_outside && (i < 0 || i >= d->in))
                w[t] = 0.0f;
            sum += w[t];
            d->idx[j * d->taps + t] = i < 0 ? 0 : i >= d->in ? d->in - 1 : i;
        }
        if (at->exclude_outside && sum != 0.0)
            for (int t = 0; t < d->taps; t++)
                w[t] = (float)(w[t] / sum);
        memcpy(d->w + j * d->taps, w, (size_t)d->taps * sizeof(float));
    }
}

/* Reads the attributes of Resize (upsample: Upsample's, whose coordinates are asymmetric
 * and whose nearest mode is floor). */
static int
rz_attrs(struct sim_infer *c, bool upsample, struct rz_attrs *at)
{
    const char *mode;
    int64_t excl = 0;
    int rc = sim_ia_str(c, "mode", "nearest", &mode);

    if (rc == 0 && !upsample) {
        rc = sim_ia_str(c, "coordinate_transformation_mode", "half_pixel", &at->coord);
        if (rc == 0)
            rc = sim_ia_str(c, "nearest_mode", "round_prefer_floor", &at->nearest);
        if (rc == 0)
            rc = sim_ia_float(c, "cubic_coeff_a", -0.75f, &at->a);
        if (rc == 0)
            rc = sim_ia_int(c, "exclude_outside", 0, &excl);
        if (rc == 0)
            rc = sim_ia_float(c, "extrapolation_value", 0.0f, &at->extrapolation);
    } else {
        at->coord = "asymmetric";
        at->nearest = "floor";
    }
    if (rc != 0)
        return rc;
    at->exclude_outside = excl != 0;
    if (strcmp(mode, "nearest") == 0)
        at->mode = RZ_NEAREST;
    else if (strcmp(mode, "linear") == 0 || (upsample && strcmp(mode, "bilinear") == 0))
        at->mode = RZ_LINEAR;
    else if (strcmp(mode, "cubic") == 0 && !upsample)
        at->mode = RZ_CUBIC;
    else
        return sim_infer_fail(c, IPUOF_E_INVAL, "mode '%s' is not one of nearest, linear%s",
                              mode, upsample ? "" : ", cubic");
    {
        static const char *const coords[] = { "half_pixel", "pytorch_half_pixel",
            "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize" };
        static const char *const nearest[] = { "round_prefer_floor", "round_prefer_ceil",
            "floor", "ceil" };
        bool ok = false;
        for (size_t i = 0; i < sizeof(coords) / sizeof(coords[0]); i++)
            ok = ok || strcmp(at->coord, coords[i]) == 0;
        if (!ok)
            return sim_infer_unsupported(c, "coordinate_transformation_mode '%s' (supported: "
                                         "half_pixel, pytorch_half_pixel, align_corners, "
                                         "asymmetric, tf_half_pixel_for_nn, "
                                         "tf_crop_and_resize)", at->coord);
        ok = false;
        for (size_t i = 0; i < sizeof(nearest) / sizeof(nearest[0]); i++)
            ok = ok || strcmp(at->nearest, nearest[i]) == 0;
        if (!ok)
            return sim_infer_fail(c, IPUOF_E_INVAL, "nearest_mode '%s' is not one of "
                                  "round_prefer_floor, round_prefer_ceil, floor, ceil",
                                  at->nearest);
    }
    return 0;
}

/* Reads a float input of rank values known at compile time into v; *n its count. */
static int
const_floats(struct sim_infer *c, int i, const char *what, int rank, double *v, int *n)
{
    const struct sim_tinfo *t = c->in[i];

    if (t->cdata == NULL)
        return sim_infer_fail(c, IPUOF_E_INVAL, "%s must be known at compile time (a "
                              "constant or initializer)", what);
    if (t->dtype != SIM_DTYPE_FLOAT)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "%s must be float", what);
    *n = (int)t->numel;
    if (*n != 0 && *n != rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "%s has %d values; the input has rank %d",
                              what, *n, rank);
    for (int k = 0; k < *n; k++)
        v[k] = ((const float *)t->cdata)[k];
    return 0;
}

/* Shared by Resize and Upsample: scales (input si, or -1) or sizes (input zi, or -1). */
static int
infer_resample(struct sim_infer *c, bool upsample, int si, int zi)
{
    const struct sim_tinfo *x = c->in[0];
    struct rz_attrs at = { 0 };
    struct rz_params *p;
    double scale[SIM_MAX_RANK], roi[2 * SIM_MAX_RANK];
    int64_t sizes[SIM_MAX_RANK], cur[SIM_MAX_RANK], cur_n, total_taps = 0;
    int r = x->shape.rank, ns = 0, nz = 0, nroi = 0, rc = sim_in_dtype(c, 0, sim_dt_float);
    struct sim_shape o = x->shape;
    char *blk;
    size_t bytes;

    if (rc == 0)
        rc = rz_attrs(c, upsample, &at);
    if (rc != 0)
        return rc;
    if (si >= 0 && sim_has_in(c, si)) {
        rc = const_floats(c, si, "scales", r, scale, &ns);
        if (rc != 0)
            return rc;
    }
    if (zi >= 0 && sim_has_in(c, zi)) {
        rc = sim_in_const_ints(c, zi, "sizes", sizes, SIM_MAX_RANK, &nz);
        if (rc != 0)
            return rc;
        if (nz != 0 && nz != r)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "sizes has %d values; the input has rank "
                                  "%d", nz, r);
    }
    if ((ns == 0) == (nz == 0))
        return sim_infer_fail(c, IPUOF_E_INVAL, "give exactly one of scales and sizes");
    if (!upsample && strcmp(at.coord, "tf_crop_and_resize") == 0) {
        if (!sim_has_in(c, 1))
            return sim_infer_fail(c, IPUOF_E_INVAL, "tf_crop_and_resize needs roi");
        rc = const_floats(c, 1, "roi", 2 * r, roi, &nroi);
        if (rc != 0)
            return rc;
        if (nroi != 2 * r)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "roi must have 2 x rank values");
    }
    for (int i = 0; i < r; i++) {
        if (ns != 0) {
            if (!(scale[i] > 0.0) || (double)x->shape.d[i] * scale[i] > (double)(1ll << 40))
                return sim_infer_fail(c, IPUOF_E_INVAL, "scales must be positive and give "
                                      "dims below 2^40");
            o.d[i] = (int64_t)floor((double)x->shape.d[i] * scale[i] + 1e-9);
        } else {
            if (sizes[i] < 0)
                return sim_infer_fail(c, IPUOF_E_INVAL, "sizes must not be negative");
            o.d[i] = sizes[i];
            scale[i] = x->shape.d[i] > 0 ? (double)sizes[i] / (double)x->shape.d[i] : 1.0;
        }
    }
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    if (rc != 0)
        return rc;
    /* resized dims, innermost first; with their tap tables in one block after params */
    p = NULL;
    {
        int taps = at.mode == RZ_CUBIC ? 4 : 2;
        int nd = 0;
        struct rz_dim dims[SIM_MAX_RANK];
        memset(dims, 0, sizeof(dims));
        for (int i = r - 1; i >= 0; i--) {
            bool identity = o.d[i] == x->shape.d[i] && scale[i] == 1.0 &&
                            strcmp(at.coord, "tf_crop_and_resize") != 0;
            if (identity || o.d[i] == 0 || x->shape.d[i] == 0)
                continue;
            dims[nd].axis = i;
            dims[nd].in = x->shape.d[i];
            dims[nd].out = o.d[i];
            dims[nd].taps = taps;
            total_taps += o.d[i] * taps;
            nd++;
        }
        bytes = sizeof(*p) + (size_t)total_taps * (sizeof(int64_t) + sizeof(float)) +
                (size_t)(total_taps / taps) + 16;
        blk = sim_params(c, bytes);
        if (blk == NULL)
            return IPUOF_E_NOMEM;
        p = (struct rz_params *)blk;
        p->rank = r;
        p->n_dims = nd;
        p->extrapolation = at.extrapolation;
        for (int i = 0; i < r; i++) {
            p->in[i] = x->shape.d[i];
            p->out[i] = o.d[i];
            cur[i] = x->shape.d[i];
        }
        {
            int64_t *ip = (int64_t *)(blk + sizeof(*p));
            float *wp = (float *)(ip + total_taps);
            unsigned char *op = (unsigned char *)(wp + total_taps);
            for (int k = 0; k < nd; k++) {
                p->dims[k] = dims[k];
                p->dims[k].idx = ip;
                p->dims[k].w = wp;
                p->dims[k].outside = op;
                ip += dims[k].out * taps;
                wp += dims[k].out * taps;
                op += dims[k].out;
                rz_table(&at, &p->dims[k], scale[dims[k].axis],
                         nroi ? roi[dims[k].axis] : 0.0, nroi ? roi[r + dims[k].axis] : 1.0);
            }
        }
    }
    /* the largest intermediate: after each pass but the last */
    p->buf_elems = 0;
    for (int k = 0; k < p->n_dims; k++) {
        cur[p->dims[k].axis] = p->dims[k].out;
        cur_n = 1;
        for (int i = 0; i < r; i++)
            cur_n *= cur[i];
        if (k + 1 < p->n_dims && cur_n > p->buf_elems)
            p->buf_elems = cur_n;
    }
    c->scratch_bytes = 2 * (size_t)p->buf_elems * sizeof(float);
    if (c->training)
        c->bwd_scratch_bytes = c->scratch_bytes;
    return 0;
}

/* Resize: X, roi, scales, sizes (opset 10: X, scales). */
static int
infer_resize(struct sim_infer *c)
{
    if (c->version < 11)
        return infer_resample(c, false, 1, -1);
    return infer_resample(c, false, 2, 3);
}

/* Upsample: X, scales (opset 9; opset 7's scales attribute is not supported). */
static int
infer_upsample(struct sim_infer *c)
{
    if (c->n_in < 2)
        return sim_infer_unsupported(c, "Upsample with a scales attribute (opset 7-8); "
                                     "re-export at opset 11 or later (Resize)");
    return infer_resample(c, true, 1, -1);
}

/* One pass of dim d: src has dims cur (cur[axis] = d->in), dst gets d->out there. */
static void
rz_pass(const struct rz_params *p, const struct rz_dim *d, const int64_t *cur,
        const float *src, float *dst)
{
    int64_t outer = 1, inner = 1;

    for (int i = 0; i < d->axis; i++)
        outer *= cur[i];
    for (int i = d->axis + 1; i < p->rank; i++)
        inner *= cur[i];
    for (int64_t o = 0; o < outer; o++) {
        const float *s = src + o * d->in * inner;
        float *t = dst + o * d->out * inner;
        for (int64_t j = 0; j < d->out; j++) {
            float *tr = t + j * inner;
            if (d->outside[j]) {
                for (int64_t i = 0; i < inner; i++)
                    tr[i] = p->extrapolation;
                continue;
            }
            memset(tr, 0, (size_t)inner * sizeof(float));
            for (int k = 0; k < d->taps; k++) {
                float w = d->w[j * d->taps + k];
                const float *sr = s + d->idx[j * d->taps + k] * inner;
                if (w == 0.0f)
                    continue;
                for (int64_t i = 0; i < inner; i++)
                    tr[i] += w * sr[i];
            }
        }
    }
}

/* The transposed pass: src (cur[axis] = d->out) is a gradient, dst (d->in there) gets
 * += its adjoint. */
static void
rz_pass_t(const struct rz_params *p, const struct rz_dim *d, const int64_t *cur,
          const float *src, float *dst)
{
    int64_t outer = 1, inner = 1;

    for (int i = 0; i < d->axis; i++)
        outer *= cur[i];
    for (int i = d->axis + 1; i < p->rank; i++)
        inner *= cur[i];
    for (int64_t o = 0; o < outer; o++) {
        const float *s = src + o * d->out * inner;
        float *t = dst + o * d->in * inner;
        for (int64_t j = 0; j < d->out; j++) {
            const float *sr = s + j * inner;
            if (d->outside[j])
                continue;
            for (int k = 0; k < d->taps; k++) {
                float w = d->w[j * d->taps + k], *tr = t + d->idx[j * d->taps + k] * inner;
                if (w == 0.0f)
                    continue;
                for (int64_t i = 0; i < inner; i++)
                    tr[i] += w * sr[i];
            }
        }
    }
}

/* x: in dims, y: out dims; scratch: two buffers of buf_elems floats */
static int
fwd_resize(const struct sim_kern *k, struct sim_err *err)
{
    const struct rz_params *p = k->params;
    const float *src = k->in[0].data;
    /* no scratch when buf_elems is 0 (an empty tensor): no NULL + 0 */
    float *bufs[2] = { k->scratch, k->scratch != NULL ? (float *)k->scratch + p->buf_elems
                                                      : NULL };
    int64_t cur[SIM_MAX_RANK];

    (void)err;
    memcpy(cur, p->in, sizeof(cur));
    if (p->n_dims == 0) {
        if (k->out[0].data != src)
            memcpy(k->out[0].data, src, (size_t)k->out[0].numel * sizeof(float));
        return 0;
    }
    for (int d = 0; d < p->n_dims; d++) {
        float *dst = d + 1 == p->n_dims ? k->out[0].data : bufs[d & 1];
        rz_pass(p, &p->dims[d], cur, src, dst);
        cur[p->dims[d].axis] = p->dims[d].out;
        src = dst;
    }
    return 0;
}

/* dx += the transposed passes of dy, outermost first */
static int
bwd_resize(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct rz_params *p = k->params;
    const float *src = dout[0].data;
    float *dx = din[0].data;
    /* no scratch when buf_elems is 0 (an empty tensor): no NULL + 0 */
    float *bufs[2] = { k->scratch, k->scratch != NULL ? (float *)k->scratch + p->buf_elems
                                                      : NULL };
    int64_t cur[SIM_MAX_RANK];

    (void)err;
    if (src == NULL || dx == NULL)
        return 0;
    if (p->n_dims == 0) {
        for (int64_t i = 0; i < din[0].numel; i++)
            dx[i] += src[i];
        return 0;
    }
    memcpy(cur, p->out, sizeof(cur));
    for (int d = p->n_dims - 1; d >= 0; d--) {
        const struct rz_dim *dm = &p->dims[d];
        float *dst = d == 0 ? dx : bufs[d & 1];
        int64_t n = 1;
        if (d != 0) {
            for (int i = 0; i < p->rank; i++)
                n *= i == dm->axis ? dm->in : cur[i];
            memset(dst, 0, (size_t)n * sizeof(float));
        }
        rz_pass_t(p, dm, cur, src, dst);
        cur[dm->axis] = dm->in;
        src = dst;
    }
    return 0;
}

const struct sim_op sim_ops_resize[] = {
    { "Resize", 10, 1, 4, 1, 1, 0xeu, 0, 8192u, infer_resize, fwd_resize, bwd_resize, 1u,
      NULL, SIM_BWD_ALL },
    { "Upsample", 7, 1, 2, 1, 1, 0x2u, 0, 8192u, infer_upsample, fwd_resize, bwd_resize, 1u,
      NULL, SIM_BWD_ALL },
};

const int sim_ops_resize_count = (int)(sizeof(sim_ops_resize) / sizeof(sim_ops_resize[0]));

/*
 * op_conv3d.c — Conv with three spatial dims on float tensors (torch.nn.Conv3d's export):
 * x (N, C, D, H, W), w (M, C/group, KD, KH, KW), optional bias (M); pads, auto_pad,
 * strides, dilations and groups as in 1-D and 2-D (sim_window_infer). Forward and backward
 * side by side, as direct loops summing in double: the sizes PyTorch programs use on it are
 * small, and op_conv.c's im2col + sgemm machinery is 2-D. An activation fused into the node
 * (fuse.c, k->act) is applied to the output after it is computed.
 * Reached through op_conv.c's Conv entry, which checks every input (the shapes, group,
 * kernel_shape, the window and the bias, for 1-D to 3-D alike) and hands it the 5-D ones
 * (conv3d.h).
 */
#include <stdlib.h>
#include <string.h>

#include "conv3d.h"

struct conv3d_params {
    int64_t n, c, m, group, cg, mg;     /* channels per group in (cg) and out (mg) */
    struct sim_window win;
};

int
sim_conv3d_infer(struct sim_infer *c, int64_t group, const struct sim_window *win)
{
    const struct sim_tinfo *x = c->in[0], *wt = c->in[1];
    struct conv3d_params *p;
    struct sim_shape o;

    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->n = x->shape.d[0];
    p->c = x->shape.d[1];
    p->m = wt->shape.d[0];
    p->group = group;
    p->cg = p->c / group;
    p->mg = p->m / group;
    p->win = *win;
    o.rank = 5;
    o.d[0] = p->n;
    o.d[1] = p->m;
    for (int i = 0; i < 3; i++)
        o.d[2 + i] = win->out[i];
    return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
}

/* The tensors of one forward (x, w) or backward (also g = dy, dx, dw; NULL: not wanted). */
struct c3_run {
    const float *x, *w, *g;
    float *dx, *dw;
    double acc;
};

/*
 * The taps of output element (n, m, op[0..2]) of y (N, M, OD, OH, OW): every product of an
 * element of x (N, C, D, H, W) and of w (M, Cg, KD, KH, KW), padding skipped. Forward:
 * r->acc += x w; backward with gy that element's gradient: dx += gy w, dw += gy x.
 */
static void
taps(const struct conv3d_params *p, int64_t n, int64_t m, const int64_t *op, bool fwd,
     struct c3_run *r, float gy)
{
    const struct sim_window *v = &p->win;
    int64_t g = m / p->mg;

    for (int64_t ci = 0; ci < p->cg; ci++) {
        int64_t xc = (n * p->c + g * p->cg + ci) * v->in[0];
        int64_t wc = (m * p->cg + ci) * v->k[0];
        for (int64_t kd = 0; kd < v->k[0]; kd++) {
            int64_t id = op[0] * v->s[0] - v->pb[0] + kd * v->d[0];
            if (id < 0 || id >= v->in[0])
                continue;
            for (int64_t kh = 0; kh < v->k[1]; kh++) {
                int64_t ih = op[1] * v->s[1] - v->pb[1] + kh * v->d[1];
                if (ih < 0 || ih >= v->in[1])
                    continue;
                int64_t xrow = ((xc + id) * v->in[1] + ih) * v->in[2];
                int64_t wrow = ((wc + kd) * v->k[1] + kh) * v->k[2];
                for (int64_t kw = 0; kw < v->k[2]; kw++) {
                    int64_t iw = op[2] * v->s[2] - v->pb[2] + kw * v->d[2];
                    if (iw < 0 || iw >= v->in[2])
                        continue;
                    if (fwd) {
                        r->acc += (double)r->x[xrow + iw] * r->w[wrow + kw];
                        continue;
                    }
                    if (r->dx != NULL)
                        r->dx[xrow + iw] += gy * r->w[wrow + kw];
                    if (r->dw != NULL)
                        r->dw[wrow + kw] += gy * r->x[xrow + iw];
                }
            }
        }
    }
}

/* x: (N, C, D, H, W), w: (M, C/group, KD, KH, KW), bias: (M) or absent,
 * y: (N, M, OD, OH, OW) */
int
sim_conv3d_forward(const struct sim_kern *k, struct sim_err *err)
{
    const struct conv3d_params *p = k->params;
    const float *bias = k->n_in > 2 ? k->in[2].data : NULL;
    struct c3_run r = { k->in[0].data, k->in[1].data, NULL, NULL, NULL, 0.0 };
    float *y = k->out[0].data;
    int64_t o = 0, op[3];

    (void)err;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t m = 0; m < p->m; m++)
            for (op[0] = 0; op[0] < p->win.out[0]; op[0]++)
                for (op[1] = 0; op[1] < p->win.out[1]; op[1]++)
                    for (op[2] = 0; op[2] < p->win.out[2]; op[2]++, o++) {
                        r.acc = bias != NULL ? bias[m] : 0.0;
                        taps(p, n, m, op, true, &r, 0.0f);
                        y[o] = (float)r.acc;
                    }
    if (k->act != NULL)
        sim_act_map(k->act, y, y, o);
    return 0;
}

/* x, dx: (N, C, D, H, W); w, dw: (M, C/group, KD, KH, KW); db: (M);
 * dy: (N, M, OD, OH, OW) */
int
sim_conv3d_backward(const struct sim_kern *k, const struct sim_tensor *dout,
                    struct sim_tensor *din, struct sim_err *err)
{
    const struct conv3d_params *p = k->params;
    const float *g = dout[0].data;
    float *db = k->n_in > 2 ? din[2].data : NULL;
    struct c3_run r = { k->in[0].data, k->in[1].data, g, din[0].data, din[1].data, 0.0 };
    int64_t o = 0, op[3];

    (void)err;
    if (g == NULL)
        return 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t m = 0; m < p->m; m++)
            for (op[0] = 0; op[0] < p->win.out[0]; op[0]++)
                for (op[1] = 0; op[1] < p->win.out[1]; op[1]++)
                    for (op[2] = 0; op[2] < p->win.out[2]; op[2]++, o++) {
                        if (db != NULL)
                            db[m] += g[o];
                        if (r.dx != NULL || r.dw != NULL)
                            taps(p, n, m, op, false, &r, g[o]);
                    }
    return 0;
}

/*
 * op_rnn.c — LSTM and GRU on float tensors (opsets 7 to 17), forward and backward through
 * time: directions forward, reverse and bidirectional; layout 0 (X (T, N, I)) and 1 (X
 * (N, T, I), torch's batch_first); optional bias, initial_h, initial_c and peepholes;
 * GRU's linear_before_reset (PyTorch exports 1). Gates as ONNX orders them: LSTM i, o, f, c;
 * GRU z, r, h.
 *
 * Per direction the input projection of every step is one sgemm (X W^T, (T N, G H)) with
 * the biases added; each step adds H_prev R^T (one sgemm) and applies the gates. In a
 * training executable the activated gates, the cell states (LSTM) or the recurrent
 * h-gate term (GRU with linear_before_reset) and the hidden states of every step are kept
 * in `saved`; the backward walks the steps in reverse, collects the gradient of every
 * gate's pre-activation, and finishes with two sgemms for dX and dW.
 * Does not: activations other than the defaults (Sigmoid, Tanh, Tanh), clip, input_forget,
 * sequence_lens shorter than the sequence (a run with one is refused).
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ, IN_H0, IN_C0, IN_P };

struct rnn_params {
    bool gru, lbr;                  /* GRU; linear_before_reset */
    int G, dirs;                    /* gates (4 or 3); directions */
    bool reverse;                   /* one direction, reverse */
    int layout;
    int64_t T, N, in_sz, H;         /* steps, batch, input size, hidden size */
    int64_t ts, ns;                 /* row of (t, n) in X, Y order: t ts + n ns */
    size_t dir_floats;              /* saved floats per direction */
};

/* Refuses the attributes that change the cell: activations (the ONNX loader keeps no
 * string lists, and only the defaults are implemented), activation_alpha / _beta. */
static int
check_activations(struct sim_infer *c, const struct rnn_params *p)
{
    static const char *const names[] = { "activations", "activation_alpha",
                                         "activation_beta" };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (sim_attr_find(c->mn, names[i]) != NULL)
            return sim_infer_unsupported(c, "attribute %s (only the default activations "
                                         "%s; leave it out)", names[i],
                                         p->gru ? "Sigmoid, Tanh" : "Sigmoid, Tanh, Tanh");
    return 0;
}

/* Requires input i, when present, to be float of shape d[0..rank). */
static int
want_shape(struct sim_infer *c, int i, const char *what, int rank, const int64_t *d)
{
    struct sim_shape s = { .rank = rank };
    char a[128], b[128];
    int rc;

    if (!sim_has_in(c, i))
        return 0;
    rc = sim_in_dtype(c, i, sim_dt_float);
    if (rc != 0)
        return rc;
    memcpy(s.d, d, (size_t)rank * sizeof(int64_t));
    if (!sim_shape_eq(&c->in[i]->shape, &s))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "%s is %s; expected %s", what,
                              sim_shape_fmt(&c->in[i]->shape, a, sizeof(a)),
                              sim_shape_fmt(&s, b, sizeof(b)));
    return 0;
}

/* Checks X, W, R and the optional inputs against hidden_size, direction and layout, sets
 * Y, Y_h (and LSTM's Y_c), and sizes the forward's scratch and, when training, the saved
 * states and the backward's scratch. */
static int
infer_rnn(struct sim_infer *c, bool gru)
{
    const struct sim_tinfo *x = c->in[IN_X];
    struct rnn_params *p;
    const char *dir;
    int64_t hidden = 0, layout = 0, lbr = 0, input_forget = 0, T, N, G = gru ? 3 : 4, dirs;
    float clip = 0.0f;
    const struct sim_attr *ca;
    struct sim_shape o;
    char s1[128];
    int rc = sim_in_dtype(c, IN_X, sim_dt_float);

    if (rc == 0)
        rc = sim_ia_int(c, "hidden_size", 0, &hidden);
    if (rc == 0)
        rc = sim_ia_int(c, "layout", 0, &layout);
    if (rc == 0)
        rc = sim_ia_str(c, "direction", "forward", &dir);
    if (rc == 0 && gru)
        rc = sim_ia_int(c, "linear_before_reset", 0, &lbr);
    if (rc == 0 && !gru)
        rc = sim_ia_int(c, "input_forget", 0, &input_forget);
    if (rc != 0)
        return rc;
    ca = sim_attr_find(c->mn, "clip");
    if (ca != NULL) {
        rc = sim_ia_float(c, "clip", 0.0f, &clip);
        if (rc != 0)
            return rc;
        return sim_infer_unsupported(c, "clip %g (cell clipping)", (double)clip);
    }
    if (input_forget != 0)
        return sim_infer_unsupported(c, "input_forget = 1 (coupled input and forget gates)");
    if (strcmp(dir, "forward") != 0 && strcmp(dir, "reverse") != 0 &&
        strcmp(dir, "bidirectional") != 0)
        return sim_infer_fail(c, IPUOF_E_INVAL, "direction '%s' is not one of forward, "
                              "reverse, bidirectional", dir);
    if (layout != 0 && layout != 1)
        return sim_infer_fail(c, IPUOF_E_INVAL, "layout %lld is not 0 or 1", (long long)layout);
    if (x->shape.rank != 3)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "X %s must be 3-D",
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    T = layout ? x->shape.d[1] : x->shape.d[0];
    N = layout ? x->shape.d[0] : x->shape.d[1];
    if (hidden < 1 || hidden > ((int64_t)1 << 24))
        return sim_infer_fail(c, IPUOF_E_INVAL, "hidden_size %lld: it must be given, from 1 "
                              "to 2^24", (long long)hidden);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->gru = gru;
    p->lbr = lbr != 0;
    p->G = (int)G;
    p->dirs = (int)dirs;
    p->reverse = strcmp(dir, "reverse") == 0;
    p->layout = (int)layout;
    p->T = T;
    p->N = N;
    p->in_sz = x->shape.d[2];
    p->H = hidden;
    p->ts = layout ? 1 : N;
    p->ns = layout ? T : 1;
    rc = check_activations(c, p);
    if (rc == 0)
        rc = want_shape(c, IN_W, "W", 3, (const int64_t[]){ dirs, G * hidden, p->in_sz });
    if (rc == 0)
        rc = want_shape(c, IN_R, "R", 3, (const int64_t[]){ dirs, G * hidden, hidden });
    if (rc == 0)
        rc = want_shape(c, IN_B, "B", 2, (const int64_t[]){ dirs, 2 * G * hidden });
    if (rc == 0 && layout == 0)
        rc = want_shape(c, IN_H0, "initial_h", 3, (const int64_t[]){ dirs, N, hidden });
    if (rc == 0 && layout == 1)
        rc = want_shape(c, IN_H0, "initial_h", 3, (const int64_t[]){ N, dirs, hidden });
    if (rc == 0 && !gru && layout == 0)
        rc = want_shape(c, IN_C0, "initial_c", 3, (const int64_t[]){ dirs, N, hidden });
    if (rc == 0 && !gru && layout == 1)
        rc = want_shape(c, IN_C0, "initial_c", 3, (const int64_t[]){ N, dirs, hidden });
    if (rc == 0 && !gru)
        rc = want_shape(c, IN_P, "P", 2, (const int64_t[]){ dirs, 3 * hidden });
    if (rc == 0 && sim_has_in(c, IN_SEQ)) {
        rc = sim_in_dtype(c, IN_SEQ, sim_dt_index);
        if (rc == 0 && (c->in[IN_SEQ]->shape.rank != 1 || c->in[IN_SEQ]->shape.d[0] != N))
            rc = sim_infer_fail(c, IPUOF_E_SHAPE, "sequence_lens must be (%lld)", (long long)N);
    }
    if (rc != 0)
        return rc;
    if (T * N * G * hidden > INT_MAX || p->in_sz > INT_MAX)
        return sim_infer_unsupported(c, "GEMM dimensions over 2^31");
    o.rank = 4;
    if (layout == 0) {
        o.d[0] = T; o.d[1] = dirs; o.d[2] = N; o.d[3] = hidden;
    } else {
        o.d[0] = N; o.d[1] = T; o.d[2] = dirs; o.d[3] = hidden;
    }
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    o.rank = 3;
    if (layout == 0) {
        o.d[0] = dirs; o.d[1] = N; o.d[2] = hidden;
    } else {
        o.d[0] = N; o.d[1] = dirs; o.d[2] = hidden;
    }
    for (int i = 1; rc == 0 && i < c->n_out; i++)
        rc = sim_set_out(c, i, SIM_DTYPE_FLOAT, &o);
    if (rc != 0)
        return rc;
    /* saved per direction: gates (T, N, G H), cell states or GRU's hr (T, N, H), hidden
     * states (T, N, H); the forward's scratch: X W^T + biases (T N, G H), H R^T (N, G H),
     * initial h and c and r * h (N, H each), and the saved block when there is none */
    p->dir_floats = (size_t)(T * N * (G + 2) * hidden);
    c->scratch_bytes = ((size_t)(T * N * G * hidden) + (size_t)(N * G * hidden) +
                        3 * (size_t)(N * hidden)) * sizeof(float);
    if (c->training) {
        c->saved_bytes = (size_t)dirs * p->dir_floats * sizeof(float);
        /* dG (T N, G H), dR-part (N, G H), dH, dH carry, dC carry, h0, c0, rh, drh (N, H) */
        c->bwd_scratch_bytes = ((size_t)(T * N * G * hidden) + (size_t)(N * G * hidden) +
                                7 * (size_t)(N * hidden)) * sizeof(float);
    } else {
        c->scratch_bytes += p->dir_floats * sizeof(float);
    }
    return 0;
}

/* The table's entry points. */
static int infer_lstm(struct sim_infer *c) { return infer_rnn(c, false); }
static int infer_gru(struct sim_infer *c) { return infer_rnn(c, true); }

/* The logistic function. */
static inline float
sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

/* Copies direction d of an initial state (layout 0: (dirs, N, H); 1: (N, dirs, H)) into
 * dst (N, H), or zeros when src is NULL. */
static void
load_state(const struct rnn_params *p, const float *src, int d, float *dst)
{
    for (int64_t n = 0; n < p->N; n++) {
        float *row = dst + n * p->H;
        if (src == NULL)
            memset(row, 0, (size_t)p->H * sizeof(float));
        else
            memcpy(row, src + (p->layout ? n * p->dirs + d : d * p->N + n) * p->H,
                   (size_t)p->H * sizeof(float));
    }
}

/* The offset of (n, d) in an (N, H) state output (Y_h, Y_c) or its gradient. */
static inline int64_t
state_off(const struct rnn_params *p, int64_t n, int d)
{
    return (p->layout ? n * p->dirs + d : d * p->N + n) * p->H;
}

/* The offset of (t, d, n) in Y or its gradient. */
static inline int64_t
y_off(const struct rnn_params *p, int64_t t, int d, int64_t n)
{
    return (p->layout ? (n * p->T + t) * p->dirs + d : (t * p->dirs + d) * p->N + n) * p->H;
}

/* The time index of processing step s of direction d. */
static inline int64_t
time_of(const struct rnn_params *p, int d, int64_t s)
{
    return (d == 1 || p->reverse) ? p->T - 1 - s : s;
}

/* One direction of the forward. sv: this direction's saved block; sc: scratch. */
static void
fwd_dir(const struct rnn_params *p, const struct sim_kern *k, int d, float *sv, float *sc)
{
    int64_t T = p->T, N = p->N, H = p->H, GH = p->G * H;
    const float *x = k->in[IN_X].data;
    const float *w = (const float *)k->in[IN_W].data + d * GH * p->in_sz;
    const float *r = (const float *)k->in[IN_R].data + d * GH * H;
    const float *b = k->n_in > IN_B && k->in[IN_B].data ? (const float *)k->in[IN_B].data +
                     d * 2 * GH : NULL;
    const float *pp = !p->gru && k->n_in > IN_P && k->in[IN_P].data ?
                      (const float *)k->in[IN_P].data + d * 3 * H : NULL;
    float *gates = sv, *st = sv + T * N * GH, *hs = st + T * N * H;
    float *xw = sc, *tmp = xw + T * N * GH, *h0 = tmp + N * GH, *c0 = h0 + N * H;
    float *rh = c0 + N * H;
    float *y = k->out[0].data;

    /* xw = X W^T + Wb + Rb (GRU with linear_before_reset: Rb of the h gate comes later) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(T * N), (int)GH, (int)p->in_sz,
                1.0f, x, (int)p->in_sz, w, (int)p->in_sz, 0.0f, xw, (int)GH);
    if (b != NULL)
        for (int64_t row = 0; row < T * N; row++)
            for (int64_t j = 0; j < GH; j++)
                xw[row * GH + j] += b[j] + (p->gru && p->lbr && j >= 2 * H ? 0.0f : b[GH + j]);
    load_state(p, k->n_in > IN_H0 ? k->in[IN_H0].data : NULL, d, h0);
    if (!p->gru)
        load_state(p, k->n_in > IN_C0 ? k->in[IN_C0].data : NULL, d, c0);
    for (int64_t s = 0; s < T; s++) {
        int64_t t = time_of(p, d, s);
        const float *hp = s > 0 ? hs + (s - 1) * N * H : h0;
        const float *cp = s > 0 ? st + (s - 1) * N * H : c0;
        float *g = gates + s * N * GH, *ht = hs + s * N * H, *ct = st + s * N * H;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)GH, (int)H, 1.0f,
                    hp, (int)H, r, (int)H, 0.0f, tmp, (int)GH);
        for (int64_t n = 0; n < N; n++) {
            const float *xr = xw + (t * p->ts + n * p->ns) * GH, *tr = tmp + n * GH;
            float *gr = g + n * GH;
            for (int64_t j = 0; j < H; j++) {
                if (!p->gru) {
                    float cprev = cp[n * H + j], ig, fg, cg, og, cn;
                    ig = sigm(xr[j] + tr[j] + (pp ? pp[j] * cprev : 0.0f));
                    fg = sigm(xr[2 * H + j] + tr[2 * H + j] + (pp ? pp[2 * H + j] * cprev : 0.0f));
                    cg = tanhf(xr[3 * H + j] + tr[3 * H + j]);
                    cn = fg * cprev + ig * cg;
                    og = sigm(xr[H + j] + tr[H + j] + (pp ? pp[H + j] * cn : 0.0f));
                    gr[j] = ig;
                    gr[H + j] = og;
                    gr[2 * H + j] = fg;
                    gr[3 * H + j] = cg;
                    ct[n * H + j] = cn;
                    ht[n * H + j] = og * tanhf(cn);
                } else {
                    gr[j] = sigm(xr[j] + tr[j]);
                    gr[H + j] = sigm(xr[H + j] + tr[H + j]);
                    if (p->lbr) {
                        float hr = tr[2 * H + j] + (b ? b[GH + 2 * H + j] : 0.0f);
                        ct[n * H + j] = hr;
                        gr[2 * H + j] = tanhf(xr[2 * H + j] + gr[H + j] * hr);
                    } else {
                        rh[n * H + j] = gr[H + j] * hp[n * H + j];
                    }
                }
            }
        }
        if (p->gru && !p->lbr)  /* tmp's h part = (r * H_prev) Rh^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)H, (int)H, 1.0f,
                        rh, (int)H, r + 2 * H * H, (int)H, 0.0f, tmp + 2 * H, (int)GH);
        for (int64_t n = 0; p->gru && n < N; n++) {
            const float *xr = xw + (t * p->ts + n * p->ns) * GH, *tr = tmp + n * GH;
            float *gr = g + n * GH;
            for (int64_t j = 0; j < H; j++) {
                float z = gr[j];
                if (!p->lbr)
                    gr[2 * H + j] = tanhf(xr[2 * H + j] + tr[2 * H + j]);
                ht[n * H + j] = (1.0f - z) * gr[2 * H + j] + z * hp[n * H + j];
            }
        }
        for (int64_t n = 0; y != NULL && n < N; n++)
            memcpy(y + y_off(p, t, d, n), ht + n * H, (size_t)H * sizeof(float));
    }
    for (int64_t n = 0; n < N; n++) {
        if (k->n_out > 1 && k->out[1].data != NULL)
            memcpy((float *)k->out[1].data + state_off(p, n, d), hs + ((T - 1) * N + n) * H,
                   (size_t)H * sizeof(float));
        if (!p->gru && k->n_out > 2 && k->out[2].data != NULL)
            memcpy((float *)k->out[2].data + state_off(p, n, d), st + ((T - 1) * N + n) * H,
                   (size_t)H * sizeof(float));
    }
}

/* sequence_lens (optional) must be the whole sequence for every batch entry. */
static int
check_seq(const struct rnn_params *p, const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_tensor *sl = k->n_in > IN_SEQ ? &k->in[IN_SEQ] : NULL;

    if (sl == NULL || sl->data == NULL)
        return 0;
    for (int64_t n = 0; n < p->N; n++) {
        int64_t v = sim_get_i64(sl->dtype, sl->data, n);
        if (v != p->T)
            return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: sequence_lens[%lld] = %lld; "
                               "only whole sequences (%lld steps) are supported: pad the "
                               "batch and leave sequence_lens out", k->label, (long long)n,
                               (long long)v, (long long)p->T);
    }
    return 0;
}

/* X: (T, N, I) or (N, T, I); Y: (T, dirs, N, H) or (N, T, dirs, H); Y_h, Y_c: (dirs, N, H)
 * or (N, dirs, H) */
static int
fwd_rnn(const struct sim_kern *k, struct sim_err *err)
{
    const struct rnn_params *p = k->params;
    int64_t GH = p->G * p->H;
    float *sc = k->scratch;
    int rc = check_seq(p, k, err);

    if (rc != 0)
        return rc;
    if (p->T == 0 || p->N == 0)
        return 0;
    for (int d = 0; d < p->dirs; d++) {
        float *sv = k->saved != NULL ? (float *)k->saved + (size_t)d * p->dir_floats :
                    sc + p->T * p->N * GH + p->N * GH + 3 * p->N * p->H;
        fwd_dir(p, k, d, sv, sc);
    }
    return 0;
}

/* GRU without linear_before_reset, step at time t: the reset gate's gradient through
 * d(r * H_prev) = dh_pre Rh (into dg, drp, and the H_prev carry dhc), and Rh's share of dR
 * (dr, NULL when not wanted). g and hp are the step's gates and previous state, rh the
 * saved r * H_prev; drh is scratch (N, H). */
static void
gru_reset_bwd(const struct rnn_params *p, const float *r, const float *g, const float *hp,
              const float *rh, int64_t t, float *dg, float *drp, float *drh, float *dhc,
              float *dr)
{
    int64_t N = p->N, H = p->H, GH = p->G * H;
    const float *dgt = dg + t * p->ts * GH;

    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)H, (int)H,
                1.0f, dgt + 2 * H, (int)(p->ns * GH), r + 2 * H * H, (int)H, 0.0f, drh,
                (int)H);
    for (int64_t n = 0; n < N; n++) {
        const float *gr = g + n * GH;
        float *dgr = dg + (t * p->ts + n * p->ns) * GH;
        for (int64_t j = 0; j < H; j++) {
            float rg = gr[H + j], hprev = hp[n * H + j];
            float drg = drh[n * H + j] * hprev * rg * (1.0f - rg);
            dgr[H + j] = drp[n * GH + H + j] = drg;
            dhc[n * H + j] += drh[n * H + j] * rg;
        }
    }
    if (dr != NULL)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)H, (int)H, (int)N,
                    1.0f, dgt + 2 * H, (int)(p->ns * GH), rh, (int)H, 1.0f,
                    dr + 2 * H * H, (int)H);
}

/* The input path of one direction, from the gates' gradients dg (T x N, GH): the bias
 * (db, Wb then Rb; NULL when not wanted), dX += dg W (dx) and dW += dg^T X (dw). */
static void
bwd_input_path(const struct rnn_params *p, const struct sim_kern *k, const float *dg,
               const float *w, float *db, float *dx, float *dw)
{
    int64_t T = p->T, N = p->N, H = p->H, GH = p->G * H;

    /* GRU without linear_before_reset: Rbh sits with the input projection */
    for (int64_t row = 0; db != NULL && row < T * N; row++)
        for (int64_t j = 0; j < GH; j++) {
            db[j] += dg[row * GH + j];
            if (p->gru && !p->lbr && j >= 2 * H)
                db[GH + j] += dg[row * GH + j];
        }
    if (dx != NULL)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(T * N), (int)p->in_sz, (int)GH,
                    1.0f, dg, (int)GH, w, (int)p->in_sz, 1.0f, dx, (int)p->in_sz);
    if (dw != NULL)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)GH, (int)p->in_sz, (int)(T * N),
                    1.0f, dg, (int)GH, k->in[IN_X].data, (int)p->in_sz, 1.0f, dw, (int)p->in_sz);
}

/* One direction of the backward; sc: backward scratch. */
static void
bwd_dir(const struct rnn_params *p, const struct sim_kern *k, const struct sim_tensor *dout,
        struct sim_tensor *din, int d, float *sc)
{
    int64_t T = p->T, N = p->N, H = p->H, GH = p->G * H;
    const float *sv = (const float *)k->saved + (size_t)d * p->dir_floats;
    const float *gates = sv, *st = sv + T * N * GH, *hs = st + T * N * H;
    const float *w = (const float *)k->in[IN_W].data + d * GH * p->in_sz;
    const float *r = (const float *)k->in[IN_R].data + d * GH * H;
    const float *pp = !p->gru && k->n_in > IN_P && k->in[IN_P].data ?
                      (const float *)k->in[IN_P].data + d * 3 * H : NULL;
    const float *gy = dout[0].data;
    const float *gyh = k->n_out > 1 ? dout[1].data : NULL;
    const float *gyc = !p->gru && k->n_out > 2 ? dout[2].data : NULL;
    float *dx = din[IN_X].data;
    float *dw = din[IN_W].data ? (float *)din[IN_W].data + d * GH * p->in_sz : NULL;
    float *dr = din[IN_R].data ? (float *)din[IN_R].data + d * GH * H : NULL;
    float *db = k->n_in > IN_B && din[IN_B].data ? (float *)din[IN_B].data + d * 2 * GH : NULL;
    float *dh0 = k->n_in > IN_H0 ? din[IN_H0].data : NULL;
    float *dc0 = !p->gru && k->n_in > IN_C0 ? din[IN_C0].data : NULL;
    float *dp = !p->gru && k->n_in > IN_P && din[IN_P].data ?
                (float *)din[IN_P].data + d * 3 * H : NULL;
    float *dg = sc, *drp = dg + T * N * GH, *dh = drp + N * GH, *dhc = dh + N * H;
    float *dcc = dhc + N * H, *h0 = dcc + N * H, *c0 = h0 + N * H, *rh = c0 + N * H;
    float *drh = rh + N * H;

    load_state(p, k->n_in > IN_H0 ? k->in[IN_H0].data : NULL, d, h0);
    if (!p->gru)
        load_state(p, k->n_in > IN_C0 ? k->in[IN_C0].data : NULL, d, c0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < H; j++) {
            dhc[n * H + j] = gyh ? gyh[state_off(p, n, d) + j] : 0.0f;
            dcc[n * H + j] = gyc ? gyc[state_off(p, n, d) + j] : 0.0f;
        }
    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t t = time_of(p, d, s);
        const float *hp = s > 0 ? hs + (s - 1) * N * H : h0;
        const float *cp = s > 0 ? st + (s - 1) * N * H : c0;
        const float *g = gates + s * N * GH, *ct = st + s * N * H;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++)
                dh[n * H + j] = dhc[n * H + j] + (gy ? gy[y_off(p, t, d, n) + j] : 0.0f);
        for (int64_t n = 0; n < N; n++) {
            const float *gr = g + n * GH;
            float *dgr = dg + (t * p->ts + n * p->ns) * GH, *rr = drp + n * GH;
            for (int64_t j = 0; j < H; j++) {
                float dH = dh[n * H + j];
                if (!p->gru) {
                    float ig = gr[j], og = gr[H + j], fg = gr[2 * H + j], cg = gr[3 * H + j];
                    float c = ct[n * H + j], cprev = cp[n * H + j], tc = tanhf(c);
                    float do_pre = dH * tc * og * (1.0f - og);
                    float dC = dcc[n * H + j] + dH * og * (1.0f - tc * tc) +
                               (pp ? do_pre * pp[H + j] : 0.0f);
                    float di = dC * cg * ig * (1.0f - ig), df = dC * cprev * fg * (1.0f - fg);
                    float dcg = dC * ig * (1.0f - cg * cg);
                    dgr[j] = rr[j] = di;
                    dgr[H + j] = rr[H + j] = do_pre;
                    dgr[2 * H + j] = rr[2 * H + j] = df;
                    dgr[3 * H + j] = rr[3 * H + j] = dcg;
                    dcc[n * H + j] = dC * fg + (pp ? di * pp[j] + df * pp[2 * H + j] : 0.0f);
                    if (dp != NULL) {
                        dp[j] += di * cprev;
                        dp[H + j] += do_pre * c;
                        dp[2 * H + j] += df * cprev;
                    }
                } else {
                    float z = gr[j], rg = gr[H + j], hh = gr[2 * H + j], hprev = hp[n * H + j];
                    float dz = dH * (hprev - hh) * z * (1.0f - z);
                    float dhp = dH * (1.0f - z) * (1.0f - hh * hh);
                    dgr[j] = rr[j] = dz;
                    dgr[2 * H + j] = dhp;
                    dhc[n * H + j] = dH * z;  /* the direct path; R's paths added below */
                    if (p->lbr) {
                        float hr = ct[n * H + j];
                        float drg = dhp * hr * rg * (1.0f - rg);
                        dgr[H + j] = rr[H + j] = drg;
                        rr[2 * H + j] = dhp * rg;
                    } else {
                        rr[2 * H + j] = 0.0f;
                        rh[n * H + j] = rg * hprev;
                    }
                }
            }
        }
        if (p->gru && !p->lbr)
            gru_reset_bwd(p, r, g, hp, rh, t, dg, drp, drh, dhc, dr);
        /* the recurrent path: H_prev carry (+)= drp R, dR += drp^T H_prev, dRb += sum drp */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)H, (int)GH, 1.0f,
                    drp, (int)GH, r, (int)H, p->gru ? 1.0f : 0.0f, dhc, (int)H);
        if (dr != NULL)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)GH, (int)H, (int)N, 1.0f,
                        drp, (int)GH, hp, (int)H, 1.0f, dr, (int)H);
        for (int64_t n = 0; db != NULL && n < N; n++)
            for (int64_t j = 0; j < GH; j++)
                db[GH + j] += drp[n * GH + j];
    }
    bwd_input_path(p, k, dg, w, db, dx, dw);
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < H; j++) {
            if (dh0 != NULL)
                dh0[state_off(p, n, d) + j] += dhc[n * H + j];
            if (dc0 != NULL)
                dc0[state_off(p, n, d) + j] += dcc[n * H + j];
        }
}

static int
bwd_rnn(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
        struct sim_err *err)
{
    const struct rnn_params *p = k->params;

    if (k->saved == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: no states were kept", k->label);
    if (p->T == 0 || p->N == 0)
        return 0;
    for (int d = 0; d < p->dirs; d++)
        bwd_dir(p, k, dout, din, d, k->scratch);
    return 0;
}

const struct sim_op sim_ops_rnn[] = {
    { "LSTM", 7, 3, 8, 0, 3, 0, 0, 16384u, infer_lstm, fwd_rnn, bwd_rnn, 0xefu, NULL, SIM_BWD_ALL },
    { "GRU", 7, 3, 6, 0, 2, 0, 0, 16384u, infer_gru, fwd_rnn, bwd_rnn, 0x2fu, NULL, SIM_BWD_ALL },
};

const int sim_ops_rnn_count = (int)(sizeof(sim_ops_rnn) / sizeof(sim_ops_rnn[0]));

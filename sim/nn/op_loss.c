/*
 * op_loss.c — loss ops, forward (usable in inference too) and backward:
 *   SoftmaxCrossEntropyLoss (ai.onnx 12+; PyTorch's CrossEntropyLoss exports to it) and
 *   NegativeLogLikelihoodLoss (ai.onnx 12+; NLLLoss): scores (N, C, d1..dk), labels
 *   (N, d1..dk) int32/int64, optional weights (C); reduction "mean" (default), "sum" or
 *   "none"; optional ignore_index; SoftmaxCrossEntropyLoss's optional log_prob output.
 *   "mean" divides by the sum of the weights of the labels not ignored (their count
 *   without weights), as ONNX and PyTorch define it (all ignored: NaN, as PyTorch).
 *   CtcLoss (domain ai.graphcore, PyTorch's CTCLoss as PopTorch lowers it): log_probs
 *   (T, N, C), targets (N, S) stacked and padded, input_lengths (N), target_lengths (N);
 *   attributes blank (0), reduction "mean" | "sum", zero_infinity (0). "mean" divides each
 *   sample's loss by its target length (at least 1), then averages over the batch.
 *   PopTorch's limits hold: reduction "none" and 1-D (concatenated) targets are refused at
 *   compile time.
 * Labels and lengths are checked at run time; a bad one is an error naming the node, the
 * value and the limit it broke. A target label equal to the blank is computed as PyTorch
 * does: the recursion may skip over an extended position s - 2 whenever its label differs
 * from position s's (even a target that is the blank, after a different label). The CTC
 * gradient is the true gradient w.r.t. log_probs (PyTorch's CTC backward returns the
 * gradient w.r.t. the logits of the log_softmax that usually precedes it; after a
 * LogSoftmax both give the same gradient of the logits).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

enum { RED_NONE, RED_SUM, RED_MEAN };

/* ---- cross entropy and negative log-likelihood ---------------------------------------- */

struct xent_params {
    int64_t n, c, d;                /* scores viewed as (n, c, d), labels as (n, d) */
    int reduction;
    bool has_ignore;
    int64_t ignore;
    bool softmax;                   /* SoftmaxCrossEntropyLoss; else scores are log-probs */
};

static int
reduction_attr(struct sim_infer *c, bool allow_none, int *out)
{
    const char *r;
    int rc = sim_ia_str(c, "reduction", "mean", &r);

    if (rc != 0)
        return rc;
    if (strcmp(r, "mean") == 0)
        *out = RED_MEAN;
    else if (strcmp(r, "sum") == 0)
        *out = RED_SUM;
    else if (strcmp(r, "none") == 0 && allow_none)
        *out = RED_NONE;
    else if (strcmp(r, "none") == 0)
        return sim_infer_unsupported(c, "CtcLoss with reduction \"none\" (PopTorch's CTCLoss "
                                     "limit: reduction must be \"sum\" or \"mean\")");
    else
        return sim_infer_fail(c, IPUOF_E_INVAL, "reduction '%s' is not \"mean\", \"sum\" or "
                              "\"none\"", r);
    return 0;
}

static int
infer_xent(struct sim_infer *c, bool softmax)
{
    const struct sim_tinfo *x = c->in[0], *lab = c->in[1];
    struct xent_params *p;
    struct sim_shape o = { 0 };
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, sim_dt_float);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_index);
    if (rc == 0 && sim_has_in(c, 2))
        rc = sim_in_dtype(c, 2, sim_dt_float);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->softmax = softmax;
    rc = reduction_attr(c, true, &p->reduction);
    if (rc == 0)
        rc = sim_ia_int(c, "ignore_index", 0, &p->ignore);
    if (rc != 0)
        return rc;
    p->has_ignore = sim_attr_find(c->mn, "ignore_index") != NULL;
    if (x->shape.rank < 2 || lab->shape.rank != x->shape.rank - 1 ||
        lab->shape.d[0] != x->shape.d[0])
        return sim_infer_fail(c, IPUOF_E_SHAPE, "scores %s and labels %s must be (N, C, d...) "
                              "and (N, d...)", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&lab->shape, s2, sizeof(s2)));
    for (int i = 2; i < x->shape.rank; i++)
        if (lab->shape.d[i - 1] != x->shape.d[i])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "scores %s and labels %s differ in the "
                                  "extra dims", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                                  sim_shape_fmt(&lab->shape, s2, sizeof(s2)));
    p->n = x->shape.d[0];
    p->c = x->shape.d[1];
    p->d = sim_shape_span(&x->shape, 2, x->shape.rank);
    if (sim_has_in(c, 2) && (c->in[2]->shape.rank != 1 || c->in[2]->shape.d[0] != p->c))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "weights %s must be (C) = (%lld)",
                              sim_shape_fmt(&c->in[2]->shape, s1, sizeof(s1)),
                              (long long)p->c);
    if (p->reduction == RED_NONE)
        o = lab->shape;
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    if (rc == 0 && c->n_out > 1) {
        if (!softmax)
            return sim_infer_fail(c, IPUOF_E_INVAL, "has one output");
        rc = sim_set_out(c, 1, SIM_DTYPE_FLOAT, &x->shape);
    }
    return rc;
}

static int infer_sce(struct sim_infer *c) { return infer_xent(c, true); }
static int infer_nll(struct sim_infer *c) { return infer_xent(c, false); }

/*
 * The label of element i (sample n, position dd) and its weight; *w = 0 for an ignored
 * label. An out-of-range label is an error naming the node, the value and the class count.
 */
static int
label_at(const struct sim_kern *k, const struct xent_params *p, int64_t i, int64_t *label,
         float *w, struct sim_err *err)
{
    const struct sim_tensor *lab = &k->in[1];
    const float *weights = k->n_in > 2 ? k->in[2].data : NULL;
    int64_t v = sim_get_i64(lab->dtype, lab->data, i);

    *label = v;
    if (p->has_ignore && v == p->ignore) {
        *w = 0.0f;
        return 0;
    }
    if (v < 0 || v >= p->c)
        return sim_err_set(err, IPUOF_E_INVAL, "%s: label %lld (element %lld of the labels) "
                           "is out of range for %lld classes (valid: 0 to %lld%s)", k->label,
                           (long long)v, (long long)i, (long long)p->c, (long long)p->c - 1,
                           p->has_ignore ? ", or ignore_index" : "");
    *w = weights != NULL ? weights[v] : 1.0f;
    return 0;
}

/* max and log(sum exp) of column (n, ., dd) of x viewed as (n, c, d) */
static void
log_norm(const struct xent_params *p, const float *x, int64_t n, int64_t dd, float *mx,
         double *lse)
{
    const float *col = x + n * p->c * p->d + dd;
    double sum = 0.0;
    float m = -INFINITY;

    for (int64_t j = 0; j < p->c; j++)
        if (col[j * p->d] > m)
            m = col[j * p->d];
    for (int64_t j = 0; j < p->c; j++)
        sum += exp((double)(col[j * p->d] - m));
    *mx = m;
    *lse = log(sum);
}

/* scores, log_prob: (n, c, d); labels: (n, d); weights: (c); loss: () or (n, d) */
static int
fwd_xent(const struct sim_kern *k, struct sim_err *err)
{
    const struct xent_params *p = k->params;
    const float *x = k->in[0].data;
    float *out = k->out[0].data;
    float *lp_out = k->n_out > 1 ? k->out[1].data : NULL;
    double total = 0.0, wsum = 0.0;

    for (int64_t n = 0; n < p->n; n++)
        for (int64_t dd = 0; dd < p->d; dd++) {
            int64_t i = n * p->d + dd, label;
            float w, mx = 0.0f;
            double lse = 0.0, l = 0.0;
            int rc = label_at(k, p, i, &label, &w, err);
            if (rc != 0)
                return rc;
            if (p->softmax)
                log_norm(p, x, n, dd, &mx, &lse);
            if (lp_out != NULL)
                for (int64_t j = 0; j < p->c; j++) {
                    int64_t at = (n * p->c + j) * p->d + dd;
                    lp_out[at] = (float)(x[at] - mx - lse);
                }
            if (w != 0.0f) {
                int64_t at = (n * p->c + label) * p->d + dd;
                l = -(p->softmax ? x[at] - mx - lse : (double)x[at]) * w;
            }
            wsum += w;
            total += l;
            if (p->reduction == RED_NONE)
                out[i] = (float)l;
        }
    if (p->reduction == RED_SUM)
        out[0] = (float)total;
    else if (p->reduction == RED_MEAN)
        out[0] = (float)(total / wsum);
    return 0;
}

/*
 * dscores (n, c, d) += gl * (softmax - onehot(label)) (cross entropy) or -gl at the label
 * (NLL), where gl = dloss (per element for "none") * weight / (sum of weights for "mean");
 * plus, for the log_prob output, dlp - softmax * sum(dlp).
 */
static int
bwd_xent(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct xent_params *p = k->params;
    const float *x = k->in[0].data, *g = dout[0].data;
    const float *glp = k->n_out > 1 ? dout[1].data : NULL;
    float *dx = din[0].data;
    double wsum = 0.0;

    if (dx == NULL || (g == NULL && glp == NULL))
        return 0;
    for (int64_t i = 0; p->reduction == RED_MEAN && i < p->n * p->d; i++) {
        int64_t label;
        float w;
        int rc = label_at(k, p, i, &label, &w, err);
        if (rc != 0)
            return rc;
        wsum += w;
    }
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t dd = 0; dd < p->d; dd++) {
            int64_t i = n * p->d + dd, label;
            float w, mx = 0.0f;
            double lse = 0.0, gl = 0.0, slp = 0.0;
            int rc = label_at(k, p, i, &label, &w, err);
            if (rc != 0)
                return rc;
            if (g != NULL && w != 0.0f)
                gl = (double)g[p->reduction == RED_NONE ? i : 0] * w /
                     (p->reduction == RED_MEAN ? wsum : 1.0);
            if (!p->softmax) {
                if (gl != 0.0)
                    dx[(n * p->c + label) * p->d + dd] -= (float)gl;
                continue;
            }
            log_norm(p, x, n, dd, &mx, &lse);
            for (int64_t j = 0; glp != NULL && j < p->c; j++)
                slp += glp[(n * p->c + j) * p->d + dd];
            for (int64_t j = 0; j < p->c; j++) {
                int64_t at = (n * p->c + j) * p->d + dd;
                double sm = exp((double)(x[at] - mx) - lse), v = gl * sm;
                if (j == label && w != 0.0f)
                    v -= gl;
                if (glp != NULL)
                    v += glp[at] - sm * slp;
                dx[at] += (float)v;
            }
        }
    return 0;
}

/* ---- CTC ------------------------------------------------------------------------------ */

struct ctc_params {
    int64_t T, N, C, S;
    int64_t blank;
    int reduction;
    bool zero_infinity;
};

static int
infer_ctc(struct sim_infer *c)
{
    const struct sim_tinfo *lp = c->in[0], *tg = c->in[1];
    struct ctc_params *p;
    struct sim_shape o = { 0 };
    int64_t zi;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, sim_dt_float);

    for (int i = 1; rc == 0 && i < 4; i++)
        rc = sim_in_dtype(c, i, sim_dt_index);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = reduction_attr(c, false, &p->reduction);
    if (rc == 0)
        rc = sim_ia_int(c, "blank", 0, &p->blank);
    if (rc == 0)
        rc = sim_ia_int(c, "zero_infinity", 0, &zi);
    if (rc != 0)
        return rc;
    p->zero_infinity = zi != 0;
    if (tg->shape.rank != 2)
        return sim_infer_unsupported(c, "CtcLoss targets of shape %s (PopTorch's CTCLoss "
                                     "limit: targets must be 2-D (N, S), stacked and padded; "
                                     "the 1-D concatenated layout is not supported)",
                                     sim_shape_fmt(&tg->shape, s1, sizeof(s1)));
    if (lp->shape.rank != 3)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "log_probs %s must be (T, N, C)",
                              sim_shape_fmt(&lp->shape, s1, sizeof(s1)));
    p->T = lp->shape.d[0];
    p->N = lp->shape.d[1];
    p->C = lp->shape.d[2];
    p->S = tg->shape.d[1];
    if (tg->shape.d[0] != p->N || c->in[2]->numel != p->N || c->in[3]->numel != p->N ||
        c->in[2]->shape.rank != 1 || c->in[3]->shape.rank != 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "targets %s and the lengths must have N = %lld "
                              "rows for log_probs %s", sim_shape_fmt(&tg->shape, s1, sizeof(s1)),
                              (long long)p->N, sim_shape_fmt(&lp->shape, s2, sizeof(s2)));
    if (p->blank < 0 || p->blank >= p->C)
        return sim_infer_fail(c, IPUOF_E_INVAL, "blank %lld is not a class (C = %lld)",
                              (long long)p->blank, (long long)p->C);
    if ((double)p->T * (double)(2 * p->S + 1) * 2.0 + (double)p->C > (double)((int64_t)1 << 31))
        return sim_infer_unsupported(c, "CtcLoss with T x (2S + 1) over 2^30");
    c->scratch_bytes = (size_t)(2 * (2 * p->S + 1)) * sizeof(double);
    if (c->training)
        c->bwd_scratch_bytes = ((size_t)(2 * p->T * (2 * p->S + 1)) + (size_t)p->C) *
                               sizeof(double);
    return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
}

static double
lse2(double a, double b)
{
    double m = a > b ? a : b;

    if (m == -INFINITY)
        return -INFINITY;
    return m + log(exp(a - m) + exp(b - m));
}

/* Reads and checks sample n's input length, target length and labels. */
static int
ctc_sample(const struct sim_kern *k, const struct ctc_params *p, int64_t n, int64_t *tn,
           int64_t *ln, struct sim_err *err)
{
    const struct sim_tensor *tg = &k->in[1];

    *tn = sim_get_i64(k->in[2].dtype, k->in[2].data, n);
    *ln = sim_get_i64(k->in[3].dtype, k->in[3].data, n);
    if (*tn < 0 || *tn > p->T)
        return sim_err_set(err, IPUOF_E_INVAL, "%s: input length %lld of sample %lld is out "
                           "of range [0, %lld]", k->label, (long long)*tn, (long long)n,
                           (long long)p->T);
    if (*ln < 0 || *ln > p->S)
        return sim_err_set(err, IPUOF_E_INVAL, "%s: target length %lld of sample %lld is out "
                           "of range [0, %lld]", k->label, (long long)*ln, (long long)n,
                           (long long)p->S);
    for (int64_t s = 0; s < *ln; s++) {
        int64_t v = sim_get_i64(tg->dtype, tg->data, n * p->S + s);
        if (v < 0 || v >= p->C)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: label %lld (sample %lld, position "
                               "%lld) is out of range for %lld classes (0 to %lld)",
                               k->label, (long long)v, (long long)n, (long long)s,
                               (long long)p->C, (long long)p->C - 1);
    }
    return 0;
}

/* Class of extended label position s (blanks between and around the targets). */
static int64_t
ext_label(const struct sim_kern *k, const struct ctc_params *p, int64_t n, int64_t s)
{
    if (s % 2 == 0)
        return p->blank;
    return sim_get_i64(k->in[1].dtype, k->in[1].data, n * p->S + s / 2);
}

/* log p(target | input) of sample n by the forward (alpha) recursion over tn steps;
 * alpha: tn x sp doubles when keep_all, else two rows. */
static double
ctc_alpha(const struct sim_kern *k, const struct ctc_params *p, int64_t n, int64_t tn,
          int64_t ln, double *alpha, bool keep_all)
{
    const float *lp = k->in[0].data;
    int64_t sp = 2 * ln + 1;
    double *prev, *cur;

    if (tn == 0)
        return ln == 0 ? 0.0 : -INFINITY;
    for (int64_t s = 0; s < sp; s++)
        alpha[s] = s < 2 ? lp[n * p->C + ext_label(k, p, n, s)] : -INFINITY;
    for (int64_t t = 1; t < tn; t++) {
        prev = alpha + (keep_all ? t - 1 : (t - 1) % 2) * sp;
        cur = alpha + (keep_all ? t : t % 2) * sp;
        for (int64_t s = 0; s < sp; s++) {
            int64_t l = ext_label(k, p, n, s);
            double a = prev[s];
            if (s > 0)
                a = lse2(a, prev[s - 1]);
            if (s > 1 && l != ext_label(k, p, n, s - 2))
                a = lse2(a, prev[s - 2]);
            cur[s] = a + lp[(t * p->N + n) * p->C + l];
        }
    }
    cur = alpha + (keep_all ? tn - 1 : (tn - 1) % 2) * sp;
    return sp > 1 ? lse2(cur[sp - 1], cur[sp - 2]) : cur[0];
}

/* log_probs: (T, N, C); targets: (N, S); lengths: (N); loss: () */
static int
fwd_ctc(const struct sim_kern *k, struct sim_err *err)
{
    const struct ctc_params *p = k->params;
    double total = 0.0;

    for (int64_t n = 0; n < p->N; n++) {
        int64_t tn, ln;
        double nll;
        int rc = ctc_sample(k, p, n, &tn, &ln, err);
        if (rc != 0)
            return rc;
        nll = -ctc_alpha(k, p, n, tn, ln, k->scratch, false);
        if (isinf(nll) && p->zero_infinity)
            nll = 0.0;
        total += p->reduction == RED_MEAN ? nll / (double)(ln > 1 ? ln : 1) : nll;
    }
    ((float *)k->out[0].data)[0] =
        (float)(p->reduction == RED_MEAN && p->N > 0 ? total / (double)p->N : total);
    return 0;
}

/* The backward (beta) recursion of sample n; beta: tn x sp doubles. */
static void
ctc_beta(const struct sim_kern *k, const struct ctc_params *p, int64_t n, int64_t tn,
         int64_t ln, double *beta)
{
    const float *lp = k->in[0].data;
    int64_t sp = 2 * ln + 1;

    for (int64_t s = 0; s < sp; s++)
        beta[(tn - 1) * sp + s] = s >= sp - 2
            ? lp[((tn - 1) * p->N + n) * p->C + ext_label(k, p, n, s)] : -INFINITY;
    for (int64_t t = tn - 2; t >= 0; t--)
        for (int64_t s = 0; s < sp; s++) {
            const double *next = beta + (t + 1) * sp;
            int64_t l = ext_label(k, p, n, s);
            double b = next[s];
            if (s + 1 < sp)
                b = lse2(b, next[s + 1]);
            if (s + 2 < sp && l != ext_label(k, p, n, s + 2))
                b = lse2(b, next[s + 2]);
            beta[t * sp + s] = b + lp[(t * p->N + n) * p->C + l];
        }
}

/*
 * dlog_probs[t, n, c] += -gl exp(lcab(t, c) - lp[t, n, c] + nll) for t < input length,
 * where lcab(t, c) = log sum over extended positions s labelled c of alpha_t(s) beta_t(s)
 * and gl the loss's gradient with the reduction's scale. Scratch: alpha and beta
 * (T x (2S+1) each) and C doubles.
 */
static int
bwd_ctc(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
        struct sim_err *err)
{
    const struct ctc_params *p = k->params;
    const float *lp = k->in[0].data, *g = dout[0].data;
    float *dx = din[0].data;
    double *alpha = k->scratch, *beta = alpha + p->T * (2 * p->S + 1);
    double *lcab = beta + p->T * (2 * p->S + 1);

    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t n = 0; n < p->N; n++) {
        int64_t tn, ln, sp;
        double logp, gl;
        int rc = ctc_sample(k, p, n, &tn, &ln, err);
        if (rc != 0)
            return rc;
        if (tn == 0)
            continue;
        sp = 2 * ln + 1;
        logp = ctc_alpha(k, p, n, tn, ln, alpha, true);
        if (isinf(logp) && p->zero_infinity)
            continue;
        gl = g[0];
        if (p->reduction == RED_MEAN)
            gl /= (double)(ln > 1 ? ln : 1) * (double)p->N;
        ctc_beta(k, p, n, tn, ln, beta);
        for (int64_t t = 0; t < tn; t++) {
            for (int64_t c = 0; c < p->C; c++)
                lcab[c] = -INFINITY;
            for (int64_t s = 0; s < sp; s++) {
                int64_t l = ext_label(k, p, n, s);
                lcab[l] = lse2(lcab[l], alpha[t * sp + s] + beta[t * sp + s]);
            }
            for (int64_t c = 0; c < p->C; c++) {
                int64_t at = (t * p->N + n) * p->C + c;
                if (lcab[c] == -INFINITY)
                    continue;
                dx[at] -= (float)(gl * exp(lcab[c] - lp[at] - logp));
            }
        }
    }
    return 0;
}

#define CODE_LOSS 8192u

const struct sim_op sim_ops_loss[] = {
    { "SoftmaxCrossEntropyLoss", 12, 2, 3, 1, 2, 0, 0, CODE_LOSS, infer_sce, fwd_xent,
      bwd_xent, 1u, NULL, SIM_BWD_ALL },
    { "NegativeLogLikelihoodLoss", 12, 2, 3, 1, 1, 0, 0, CODE_LOSS, infer_nll, fwd_xent,
      bwd_xent, 1u, NULL, SIM_BWD_ALL },
    { "CtcLoss", 1, 4, 4, 1, 1, 0, 0, CODE_LOSS, infer_ctc, fwd_ctc, bwd_ctc, 1u,
      "ai.graphcore", SIM_BWD_ALL },
};

const int sim_ops_loss_count = (int)(sizeof(sim_ops_loss) / sizeof(sim_ops_loss[0]));

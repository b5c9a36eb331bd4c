/*
 * op_matmul.c — matrix products on float tensors through OpenBLAS cblas_sgemm: MatMul
 * (numpy semantics: 1-D operands promoted and squeezed, batch dims broadcast) and Gemm
 * (transA, transB, alpha, beta, C broadcast to (M, N)), forward and backward.
 *
 * When B carries no batch dims the batch of A is folded into one GEMM (M' = batch x M), so
 * a fully connected layer over a micro-batch is a single sgemm call, and so is each of its
 * two gradients. Gradients accumulate (sgemm with beta = 1), so a broadcast operand's
 * gradient sums over the batch it was broadcast to.
 * Does not: support integer matrix products.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "pool.h"

/* C (m x n) = alpha op(A) (m x k) * op(B) (k x n) + beta C, row-major with the given
 * leading dims (of A and B as stored). */
static void
gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
     int64_t lda, const float *b, int64_t ldb, float beta, float *c)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        if (beta == 0.0f)
            memset(c, 0, (size_t)(m * n) * sizeof(float));
        else
            for (int64_t i = 0; i < m * n; i++)
                c[i] *= beta;
        return;
    }
    sim_pool_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

static bool
fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

/* ---- MatMul --------------------------------------------------------------------------- */

struct matmul_params {
    int64_t m, n, k;
    int64_t batch;                      /* output batch count */
    bool fold;                          /* B has no batch: one GEMM of (batch*m) rows */
    int nb;                             /* batch rank after broadcasting */
    int64_t bdims[SIM_MAX_RANK];
    int64_t sa[SIM_MAX_RANK], sb[SIM_MAX_RANK];  /* batch strides in matrices */
};

static int
infer_matmul(struct sim_infer *c)
{
    const struct sim_tinfo *a = c->in[0], *b = c->in[1];
    struct sim_shape as = a->shape, bs = b->shape, ab, bb, ob, o;
    struct matmul_params *p;
    bool a_vec = as.rank == 1, b_vec = bs.rank == 1;
    int64_t acc_a = 1, acc_b = 1;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, sim_dt_float);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_float);
    if (rc != 0)
        return rc;
    if (as.rank == 0 || bs.rank == 0)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "operands must have rank >= 1");
    if (a_vec) {
        as.rank = 2;
        as.d[1] = as.d[0];
        as.d[0] = 1;
    }
    if (b_vec) {
        bs.rank = 2;
        bs.d[1] = 1;
    }
    if (as.d[as.rank - 1] != bs.d[bs.rank - 2])
        return sim_infer_fail(c, IPUOF_E_SHAPE, "inner dimensions differ: %s x %s",
                              sim_shape_fmt(&a->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&b->shape, s2, sizeof(s2)));
    ab.rank = as.rank - 2;
    bb.rank = bs.rank - 2;
    memcpy(ab.d, as.d, sizeof(int64_t) * (size_t)ab.rank);
    memcpy(bb.d, bs.d, sizeof(int64_t) * (size_t)bb.rank);
    if (!sim_shape_broadcast(&ab, &bb, &ob))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "batch dimensions of %s and %s do not "
                              "broadcast", sim_shape_fmt(&a->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&b->shape, s2, sizeof(s2)));
    o = ob;
    if (!a_vec)
        o.d[o.rank++] = as.d[as.rank - 2];
    if (!b_vec)
        o.d[o.rank++] = bs.d[bs.rank - 1];
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->m = as.d[as.rank - 2];
    p->k = as.d[as.rank - 1];
    p->n = bs.d[bs.rank - 1];
    p->nb = ob.rank;
    p->batch = sim_shape_count(&ob);
    p->fold = bb.rank == 0 || sim_shape_count(&bb) == 1;
    if (sim_shape_count(&ab) != p->batch)
        p->fold = false;   /* A itself is broadcast: no contiguous fold */
    if (!fits_int(p->m) || !fits_int(p->n) || !fits_int(p->k) ||
        (p->fold && !fits_int(p->m * p->batch)))
        return sim_infer_unsupported(c, "matrix dimensions over 2^31");
    for (int i = ob.rank - 1; i >= 0; i--) {
        int ia = i - (ob.rank - ab.rank), ib = i - (ob.rank - bb.rank);
        int64_t da = ia >= 0 ? ab.d[ia] : 1, db = ib >= 0 ? bb.d[ib] : 1;
        p->bdims[i] = ob.d[i];
        p->sa[i] = da == 1 ? 0 : acc_a;
        p->sb[i] = db == 1 ? 0 : acc_b;
        acc_a *= da;
        acc_b *= db;
    }
    return 0;
}

/* a: (batchA..., m, k), b: (batchB..., k, n), y: (batch..., m, n) */
static int
fwd_matmul(const struct sim_kern *k, struct sim_err *err)
{
    const struct matmul_params *p = k->params;
    const float *a = k->in[0].data, *b = k->in[1].data;
    float *y = k->out[0].data;
    int64_t idx[SIM_MAX_RANK] = { 0 }, oa = 0, ob = 0;
    int64_t ma = p->m * p->k, mb = p->k * p->n, my = p->m * p->n;

    (void)err;
    if (p->fold) {
        gemm(false, false, p->batch * p->m, p->n, p->k, 1.0f, a, p->k, b, p->n, 0.0f, y);
        return 0;
    }
    for (int64_t i = 0; i < p->batch; i++) {
        gemm(false, false, p->m, p->n, p->k, 1.0f, a + oa * ma, p->k, b + ob * mb, p->n, 0.0f,
             y + i * my);
        for (int d = p->nb - 1; d >= 0; d--) {
            idx[d]++;
            oa += p->sa[d];
            ob += p->sb[d];
            if (idx[d] < p->bdims[d])
                break;
            oa -= p->sa[d] * p->bdims[d];
            ob -= p->sb[d] * p->bdims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* ---- Gemm ----------------------------------------------------------------------------- */

struct gemm_params {
    int64_t m, n, k;
    bool ta, tb;
    float alpha, beta;
    bool has_c;
    int64_t c_sm, c_sn;                 /* strides of C broadcast over (m, n) */
};

static int
infer_gemm(struct sim_infer *c)
{
    const struct sim_tinfo *a = c->in[0], *b = c->in[1];
    struct gemm_params *p;
    int64_t ta, tb;
    struct sim_shape o;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, sim_dt_float);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_float);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = sim_ia_int(c, "transA", 0, &ta);
    if (rc == 0)
        rc = sim_ia_int(c, "transB", 0, &tb);
    if (rc == 0)
        rc = sim_ia_float(c, "alpha", 1.0f, &p->alpha);
    if (rc == 0)
        rc = sim_ia_float(c, "beta", 1.0f, &p->beta);
    if (rc != 0)
        return rc;
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "A and B must be 2-D, not %s and %s",
                              sim_shape_fmt(&a->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&b->shape, s2, sizeof(s2)));
    p->ta = ta != 0;
    p->tb = tb != 0;
    p->m = a->shape.d[p->ta ? 1 : 0];
    p->k = a->shape.d[p->ta ? 0 : 1];
    p->n = b->shape.d[p->tb ? 0 : 1];
    if (b->shape.d[p->tb ? 1 : 0] != p->k)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "A %s and B %s (transA=%d, transB=%d) have "
                              "different inner dimensions",
                              sim_shape_fmt(&a->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&b->shape, s2, sizeof(s2)), (int)p->ta, (int)p->tb);
    if (!fits_int(p->m) || !fits_int(p->n) || !fits_int(p->k))
        return sim_infer_unsupported(c, "matrix dimensions over 2^31");
    o.rank = 2;
    o.d[0] = p->m;
    o.d[1] = p->n;
    p->has_c = sim_has_in(c, 2) && p->beta != 0.0f;
    if (sim_has_in(c, 2)) {
        const struct sim_tinfo *ct = c->in[2];
        struct sim_shape bo;
        int64_t cm, cn;
        rc = sim_in_dtype(c, 2, sim_dt_float);
        if (rc != 0)
            return rc;
        if (ct->shape.rank > 2 || !sim_shape_broadcast(&o, &ct->shape, &bo) ||
            !sim_shape_eq(&bo, &o))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "C %s does not broadcast to (%lld, %lld)",
                                  sim_shape_fmt(&ct->shape, s1, sizeof(s1)),
                                  (long long)p->m, (long long)p->n);
        cm = ct->shape.rank == 2 ? ct->shape.d[0] : 1;
        cn = ct->shape.rank >= 1 ? ct->shape.d[ct->shape.rank - 1] : 1;
        p->c_sm = cm == 1 ? 0 : cn;
        p->c_sn = cn == 1 ? 0 : 1;
    }
    return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
}

/* a: (m, k) or (k, m), b: (k, n) or (n, k), c: broadcast to (m, n), y: (m, n) */
static int
fwd_gemm(const struct sim_kern *k, struct sim_err *err)
{
    const struct gemm_params *p = k->params;
    float *y = k->out[0].data;
    float beta = 0.0f;

    (void)err;
    if (p->has_c) {
        const float *cv = k->in[2].data;
        for (int64_t i = 0; i < p->m; i++) {
            float *yr = y + i * p->n;
            const float *cr = cv + i * p->c_sm;
            if (p->c_sn == 0)
                for (int64_t j = 0; j < p->n; j++)
                    yr[j] = p->beta * cr[0];
            else
                for (int64_t j = 0; j < p->n; j++)
                    yr[j] = p->beta * cr[j];
        }
        beta = 1.0f;
    }
    gemm(p->ta, p->tb, p->m, p->n, p->k, p->alpha, k->in[0].data, p->ta ? p->m : p->k,
         k->in[1].data, p->tb ? p->k : p->n, beta, y);
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/* y = a b: da += dy b^T, db += a^T dy, per batch matrix (a, da: (m, k); b, db: (k, n);
 * dy: (m, n)), or as one GEMM each when the batch is folded. */
static int
bwd_matmul(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct matmul_params *p = k->params;
    const float *a = k->in[0].data, *b = k->in[1].data, *g = dout[0].data;
    float *da = din[0].data, *db = din[1].data;
    int64_t idx[SIM_MAX_RANK] = { 0 }, oa = 0, ob = 0;
    int64_t ma = p->m * p->k, mb = p->k * p->n, my = p->m * p->n;

    (void)err;
    if (g == NULL)
        return 0;
    if (p->fold) {
        if (da != NULL)
            gemm(false, true, p->batch * p->m, p->k, p->n, 1.0f, g, p->n, b, p->n, 1.0f, da);
        if (db != NULL)
            gemm(true, false, p->k, p->n, p->batch * p->m, 1.0f, a, p->k, g, p->n, 1.0f, db);
        return 0;
    }
    for (int64_t i = 0; i < p->batch; i++) {
        if (da != NULL)
            gemm(false, true, p->m, p->k, p->n, 1.0f, g + i * my, p->n, b + ob * mb, p->n, 1.0f,
                 da + oa * ma);
        if (db != NULL)
            gemm(true, false, p->k, p->n, p->m, 1.0f, a + oa * ma, p->k, g + i * my, p->n, 1.0f,
                 db + ob * mb);
        for (int d = p->nb - 1; d >= 0; d--) {
            idx[d]++;
            oa += p->sa[d];
            ob += p->sb[d];
            if (idx[d] < p->bdims[d])
                break;
            oa -= p->sa[d] * p->bdims[d];
            ob -= p->sb[d] * p->bdims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/*
 * y = alpha op(A) op(B) + beta C, dy: (m, n).
 *   dA (m, k) += alpha dy op(B)^T, stored transposed when transA: (k, m) += alpha op(B) dy^T
 *   dB (k, n) += alpha op(A)^T dy, stored transposed when transB: (n, k) += alpha dy^T op(A)
 *   dC += beta dy, summed over the dims C was broadcast along
 */
static int
bwd_gemm(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct gemm_params *p = k->params;
    const float *a = k->in[0].data, *b = k->in[1].data, *g = dout[0].data;
    float *da = din[0].data, *db = din[1].data;
    float *dc = k->n_in > 2 ? din[2].data : NULL;
    int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;

    (void)err;
    if (g == NULL)
        return 0;
    if (da != NULL && !p->ta)
        gemm(false, !p->tb, p->m, p->k, p->n, p->alpha, g, p->n, b, ldb, 1.0f, da);
    else if (da != NULL)
        gemm(p->tb, true, p->k, p->m, p->n, p->alpha, b, ldb, g, p->n, 1.0f, da);
    if (db != NULL && !p->tb)
        gemm(!p->ta, false, p->k, p->n, p->m, p->alpha, a, lda, g, p->n, 1.0f, db);
    else if (db != NULL)
        gemm(true, p->ta, p->n, p->k, p->m, p->alpha, g, p->n, a, lda, 1.0f, db);
    if (dc != NULL && k->in[2].data != NULL) {
        for (int64_t i = 0; i < p->m; i++) {
            const float *gr = g + i * p->n;
            float *cr = dc + i * p->c_sm;
            if (p->c_sn == 0) {
                float s = 0.0f;
                for (int64_t j = 0; j < p->n; j++)
                    s += gr[j];
                cr[0] += p->beta * s;
            } else {
                for (int64_t j = 0; j < p->n; j++)
                    cr[j] += p->beta * gr[j];
            }
        }
    }
    return 0;
}

/* MatMul's and Gemm's rules: dA reads B, dB reads A (Gemm's dC neither; its rule checks
 * whether C is there, so C counts as read). */
static uint32_t
reads_matmul(uint32_t wanted)
{
    return (wanted & 1u ? SIM_BWD_IN(1) : 0) | (wanted & 2u ? SIM_BWD_IN(0) : 0);
}

static uint32_t
reads_gemm(uint32_t wanted)
{
    return reads_matmul(wanted) | SIM_BWD_IN(2);
}

const struct sim_op sim_ops_matmul[] = {
    { "MatMul", 1, 2, 2, 1, 1, 0, 0, 16384u, infer_matmul, fwd_matmul, bwd_matmul, 3u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1), reads_matmul },
    { "Gemm", 1, 2, 3, 1, 1, 0, 0, 16384u, infer_gemm, fwd_gemm, bwd_gemm, 7u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1) | SIM_BWD_IN(2), reads_gemm },
};

const int sim_ops_matmul_count = (int)(sizeof(sim_ops_matmul) / sizeof(sim_ops_matmul[0]));

/*
 * half_partials.c — float16 partials (PopTorch's Precision.setPartialsType(torch.half)) for
 * MatMul and Gemm on float16 values: the IPU's AMP units then accumulate the dot products
 * in float16. Emulated by summing K in chunks of SIM_HALF_CHUNK products in float32 and
 * adding each chunk's sum to a float16 accumulator (rounded to float16 after every
 * addition). This approximates the AMP units' order (which depends on the plan Poplar
 * picks), it is not bit-exact to hardware; float32 partials (the default) are exact.
 *
 * Does: the forward of MatMul (A rank >= 2; B rank 2, or of A's rank with the same batch
 * dimensions) and Gemm (transA, transB, alpha, beta, C broadcast) on widened float views.
 * Other shapes, Conv and reductions keep float32 partials (sim_half_partials returns 1).
 */
#include <string.h>

#include "exe.h"
#include "half.h"
#include "hot.h"
#include "model.h"

#define SIM_HALF_CHUNK 16

static inline float
r16(float f)
{
    return sim_half_to_float(sim_half_from_float(f));
}

#define SIM_HALF_TILE 256     /* columns of one row tile (two float arrays on the stack) */

/* p[j] = sum over k of a[k] b[k ldb + j], j < n, k < kn, each sum from 0.0f in increasing
 * k: the order chunked's scalar loop adds in, so the bits are the same. */
SIM_HOT_WIDE_FN(chunk_row, (const float *a, const float *b, int64_t ldb, float *p, int64_t n,
                            int64_t kn), (a, b, ldb, p, n, kn))
{
    for (int64_t j = 0; j < n; j++)
        p[j] = 0.0f;
    for (int64_t k = 0; k < kn; k++) {
        float ak = a[k];
        for (int64_t j = 0; j < n; j++)
            p[j] += ak * b[k * ldb + j];
    }
}

/* acc[j] += p[j], j < n (the caller rounds to float16). */
SIM_HOT_WIDE_FN(add_row, (float *acc, const float *p, int64_t n), (acc, p, n))
{
    for (int64_t j = 0; j < n; j++)
        acc[j] += p[j];
}

/* chunked for row-major A (sak 1) and B (sbn 1): row by row, SIM_HALF_TILE columns at a
 * time, the inner loops along a row of B (contiguous, vectorised); each y[m, n] gets the
 * same additions in the same order as chunked's scalar loop. */
static void
chunked_rows(const float *a, int64_t sam, const float *b, int64_t sbk, float *y, int64_t M,
             int64_t N, int64_t K)
{
    float acc[SIM_HALF_TILE], p[SIM_HALF_TILE];

    for (int64_t m = 0; m < M; m++)
        for (int64_t n0 = 0; n0 < N; n0 += SIM_HALF_TILE) {
            int64_t nn = N - n0 < SIM_HALF_TILE ? N - n0 : SIM_HALF_TILE;
            memset(acc, 0, sizeof(acc));
            for (int64_t k0 = 0; k0 < K; k0 += SIM_HALF_CHUNK) {
                int64_t kn = K - k0 < SIM_HALF_CHUNK ? K - k0 : SIM_HALF_CHUNK;
                chunk_row(a + m * sam + k0, b + k0 * sbk + n0, sbk, p, nn, kn);
                add_row(acc, p, nn);
                sim_half_round_n(acc, nn);
            }
            memcpy(y + m * N + n0, acc, (size_t)nn * sizeof(float));
        }
}

/* y[m, n] for m < M, n < N: sum over k < K of a[m sam + k sak] b[k sbk + n sbn], in
 * chunks of SIM_HALF_CHUNK whose float sums are added to a float16 accumulator. */
static void
chunked(const float *a, int64_t sam, int64_t sak, const float *b, int64_t sbk, int64_t sbn,
        float *y, int64_t M, int64_t N, int64_t K)
{
    if (sak == 1 && sbn == 1) {
        chunked_rows(a, sam, b, sbk, y, M, N, K);
        return;
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += SIM_HALF_CHUNK) {
                int64_t k1 = k0 + SIM_HALF_CHUNK < K ? k0 + SIM_HALF_CHUNK : K;
                float p = 0.0f;
                for (int64_t k = k0; k < k1; k++)
                    p += a[m * sam + k * sak] * b[k * sbk + n * sbn];
                acc = r16(acc + p);
            }
            y[m * N + n] = acc;
        }
}

static int
matmul(const struct sim_kern *k)
{
    const struct sim_tensor *A = &k->in[0], *B = &k->in[1];
    int ra = A->shape.rank, rb = B->shape.rank;
    int64_t M, K, N, batch = 1;
    bool per_batch;

    if (ra < 2 || rb < 2)
        return 1;
    M = A->shape.d[ra - 2];
    K = A->shape.d[ra - 1];
    N = B->shape.d[rb - 1];
    if (B->shape.d[rb - 2] != K)
        return 1;
    per_batch = rb > 2;
    if (per_batch && rb != ra)
        return 1;
    for (int i = 0; i < ra - 2; i++) {
        if (per_batch && B->shape.d[i] != A->shape.d[i])
            return 1;
        batch *= A->shape.d[i];
    }
    for (int64_t t = 0; t < batch; t++)
        chunked((const float *)A->data + t * M * K, K, 1,
                (const float *)B->data + (per_batch ? t * K * N : 0), N, 1,
                (float *)k->out[0].data + t * M * N, M, N, K);
    return 0;
}

static int
gemm(const struct sim_mnode *mn, const struct sim_kern *k)
{
    const struct sim_attr *at;
    const struct sim_tensor *A = &k->in[0], *B = &k->in[1];
    const struct sim_tensor *C = k->n_in > 2 && k->in[2].data != NULL ? &k->in[2] : NULL;
    bool ta = (at = sim_attr_find(mn, "transA")) != NULL && at->i != 0;
    bool tb = (at = sim_attr_find(mn, "transB")) != NULL && at->i != 0;
    float alpha = (at = sim_attr_find(mn, "alpha")) != NULL ? at->f : 1.0f;
    float beta = (at = sim_attr_find(mn, "beta")) != NULL ? at->f : 1.0f;
    int64_t M = ta ? A->shape.d[1] : A->shape.d[0], K = ta ? A->shape.d[0] : A->shape.d[1];
    int64_t N = tb ? B->shape.d[0] : B->shape.d[1], scm = 0, scn = 0;
    float *y = k->out[0].data;

    if (A->shape.rank != 2 || B->shape.rank != 2)
        return 1;
    chunked(A->data, ta ? 1 : K, ta ? M : 1, B->data, tb ? 1 : N, tb ? K : 1, y, M, N, K);
    if (C != NULL && C->shape.rank == 1) {
        scn = C->shape.d[0] == 1 ? 0 : 1;
    } else if (C != NULL && C->shape.rank == 2) {
        scm = C->shape.d[0] == 1 ? 0 : C->shape.d[1];
        scn = C->shape.d[1] == 1 ? 0 : 1;
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float v = alpha * y[m * N + n];
            if (C != NULL)
                v += beta * ((const float *)C->data)[m * scm + n * scn];
            y[m * N + n] = v;
        }
    return 0;
}

int
sim_half_partials(const struct sim_mnode *mn, const struct sim_kern *k)
{
    if (mn->domain[0] != '\0' || k->in[0].dtype != SIM_DTYPE_FLOAT ||
        k->in[1].dtype != SIM_DTYPE_FLOAT || k->out[0].dtype != SIM_DTYPE_FLOAT)
        return 1;
    if (strcmp(mn->op_type, "MatMul") == 0)
        return matmul(k);
    if (strcmp(mn->op_type, "Gemm") == 0)
        return gemm(mn, k);
    return 1;
}

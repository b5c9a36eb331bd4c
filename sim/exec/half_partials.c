/*
 * half_partials.c — float16 partials (PopTorch's Precision.setPartialsType(torch.half)) for
 * MatMul and Gemm on float16 values: the IPU's AMP units then accumulate the dot products
 * in float16. Emulated by summing K in chunks of SIM_HALF_CHUNK products in float32 and
 * adding each chunk's sum to a float16 accumulator (rounded to float16 after every
 * addition). This approximates the AMP units' order (which depends on the plan Poplar
 * picks), it is not bit-exact to hardware; float32 partials (the default) are exact.
 *
 * Does: the forward of MatMul (A rank >= 2; B rank 2, or of A's rank with the same batch
 * dimensions) and Gemm (transA, transB, alpha, beta, C broadcast) on widened float views:
 * blocks of six rows by the fused multiply-add kernel when both operands hold float16
 * values and the level has FMA (avx2, avx512), the other rows (and every row at baseline,
 * or with a float operand) by the multiply-and-add kernel; the same bits either way.
 * Other shapes, Conv and reductions keep float32 partials (sim_half_partials returns 1).
 */
#include <string.h>

#include "exe.h"
#include "half.h"
#include "hot.h"
#include "model.h"
#include "vmath.h"

#if SIM_ISA_DISPATCH
#include <immintrin.h>
#endif

#define SIM_HALF_CHUNK 16
#define SIM_HALF_TILE 128     /* columns of one tile: a packed chunk of B, 16 x 128 floats */
#define SIM_HALF_ROWS 4       /* rows of A sharing each load of B */
#define SIM_HALF_FROWS 6      /* the same in the fused multiply-add kernel */

/*
 * The kernel: for the SIM_HALF_ROWS rows r of one block, y[r][j] += p[r][j] for j < n,
 * where p[r][j] is the sum over k < kn of a[r][k sak] b[k ldb + j] from 0.0f in increasing
 * k (a chunk's float sum), then y rounded to float16 by RND (vectors of type VF) and RNDS
 * (floats) where the copy has F16C, else by the caller (RND and RNDS return their
 * argument). Every y[r][j] gets the additions of chunked's definition in its order: the
 * blocking only shares the loads of B between the rows and keeps p in registers, W
 * floats a vector, two vectors of columns by four rows at a time, then one vector, then
 * scalar. Floating-point
 * contraction is off (ISO C mode), so each product is rounded before it is added at
 * every level and the bits are the same in every copy.
 */
#define HP_ACC(yp, VFU, p, RND)                                                            \
    (*(VFU *)(void *)(yp) = RND(*(const VFU *)(const void *)(yp) + (p)))
#define HP_BLOCK(W, VF, VFU, RND, RNDS)                                                    \
    do {                                                                                   \
        int64_t j = 0;                                                                     \
        for (; j + 2 * (W) <= n; j += 2 * (W)) {                                           \
            VF p00 = { 0 }, p01 = { 0 }, p10 = { 0 }, p11 = { 0 };                         \
            VF p20 = { 0 }, p21 = { 0 }, p30 = { 0 }, p31 = { 0 };                         \
            for (int64_t k = 0; k < kn; k++) {                                             \
                const float *bk = b + k * ldb + j;                                         \
                VF b0 = *(const VFU *)(const void *)bk;                                    \
                VF b1 = *(const VFU *)(const void *)(bk + (W));                            \
                float a0 = a[0][k * sak], a1 = a[1][k * sak];                              \
                float a2 = a[2][k * sak], a3 = a[3][k * sak];                              \
                p00 += a0 * b0;                                                            \
                p01 += a0 * b1;                                                            \
                p10 += a1 * b0;                                                            \
                p11 += a1 * b1;                                                            \
                p20 += a2 * b0;                                                            \
                p21 += a2 * b1;                                                            \
                p30 += a3 * b0;                                                            \
                p31 += a3 * b1;                                                            \
            }                                                                              \
            HP_ACC(y[0] + j, VFU, p00, RND);                                               \
            HP_ACC(y[0] + j + (W), VFU, p01, RND);                                         \
            HP_ACC(y[1] + j, VFU, p10, RND);                                               \
            HP_ACC(y[1] + j + (W), VFU, p11, RND);                                         \
            HP_ACC(y[2] + j, VFU, p20, RND);                                               \
            HP_ACC(y[2] + j + (W), VFU, p21, RND);                                         \
            HP_ACC(y[3] + j, VFU, p30, RND);                                               \
            HP_ACC(y[3] + j + (W), VFU, p31, RND);                                         \
        }                                                                                  \
        for (; j + (W) <= n; j += (W))                                                     \
            for (int r = 0; r < SIM_HALF_ROWS; r++) {                                      \
                VF p = { 0 };                                                              \
                for (int64_t k = 0; k < kn; k++)                                           \
                    p += a[r][k * sak] * *(const VFU *)(const void *)(b + k * ldb + j);    \
                HP_ACC(y[r] + j, VFU, p, RND);                                             \
            }                                                                              \
        for (; j < n; j++)                                                                 \
            for (int r = 0; r < SIM_HALF_ROWS; r++) {                                      \
                float p = 0.0f;                                                            \
                for (int64_t k = 0; k < kn; k++)                                           \
                    p += a[r][k * sak] * b[k * ldb + j];                                   \
                y[r][j] = RNDS(y[r][j] + p);                                               \
            }                                                                              \
    } while (0)

typedef float hp_v4f __attribute__((vector_size(16)));
typedef float hp_v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float hp_v16f __attribute__((vector_size(64)));
typedef float hp_v16f_u __attribute__((vector_size(64), aligned(4), may_alias));

#define HP_PARAMS                                                                          \
    (const float *const a[SIM_HALF_ROWS], int64_t sak, const float *b, int64_t ldb,        \
     float *const y[SIM_HALF_ROWS], int64_t n, int64_t kn)
#define HP_KEEP(v) (v)

#if SIM_ISA_DISPATCH
/* float16 rounding with F16C, nearest even: the conversions sim_half_round_n makes at
 * these levels (half.c), so the same bits */
#define HP_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define HP_RND8(v) ((sim_v8f)_mm256_cvtph_ps(_mm256_cvtps_ph((__m256)(v), HP_RNE)))
#define HP_RND16(v) ((hp_v16f)_mm512_cvtph_ps(_mm512_cvtps_ph((__m512)(v), HP_RNE)))
#define HP_RNDS(x) (_cvtsh_ss(_cvtss_sh((x), HP_RNE)))

/* Eight floats a vector, rounding in registers: the AVX2 copy. */
static __attribute__((noinline, SIM_HOT_OPT, target("avx2,f16c"))) void
block8 HP_PARAMS
{
    HP_BLOCK(8, sim_v8f, sim_v8f_u, HP_RND8, HP_RNDS);
}

/* Sixteen floats a vector, rounding in registers: the AVX-512 copy. */
static __attribute__((noinline, SIM_HOT_OPT, target("avx512f,f16c"))) void
block16 HP_PARAMS
{
    HP_BLOCK(16, hp_v16f, hp_v16f_u, HP_RND16, HP_RNDS);
}

/* Four floats a vector, the caller rounding: the baseline copy (SSE2's width, eight
 * accumulators in its sixteen registers). */
static __attribute__((noinline, SIM_HOT_OPT)) void
block4 HP_PARAMS
{
    HP_BLOCK(4, hp_v4f, hp_v4f_u, HP_KEEP, HP_KEEP);
}
#else
/* Eight floats a vector, the caller rounding: the one function of builds without copies. */
#if defined(__GNUC__) && !defined(__clang__)
static __attribute__((SIM_HOT_OPT)) void
#else
static void
#endif
block8 HP_PARAMS
{
    HP_BLOCK(8, sim_v8f, sim_v8f_u, HP_KEEP, HP_KEEP);
}
#endif

/* The copy of the level in use (hot.h): the same bits from each. Returns whether it
 * rounded y to float16 (else the caller rounds). */
static bool
block(const float *const a[SIM_HALF_ROWS], int64_t sak, const float *b, int64_t ldb,
      float *const y[SIM_HALF_ROWS], int64_t n, int64_t kn)
{
#if SIM_ISA_DISPATCH
    enum sim_isa l = sim_isa_level();

    if (l >= SIM_ISA_AVX512 && sim_half_uses_f16c()) {
        block16(a, sak, b, ldb, y, n, kn);
        return true;
    }
    if (l >= SIM_ISA_AVX2 && sim_half_uses_f16c()) {
        block8(a, sak, b, ldb, y, n, kn);
        return true;
    }
    block4(a, sak, b, ldb, y, n, kn);
    return false;
#else
    block8(a, sak, b, ldb, y, n, kn);
    return false;
#endif
}

#if SIM_ISA_DISPATCH
/*
 * The fused multiply-add kernel, for operands that are float16 values (widened): a product
 * of two float16 values is exact in float (11 + 11 significant bits, exponents from 2^-48
 * to 2^32), so fma(a, b, p) rounds once where p + a * b rounds the product (exactly) and
 * then the sum: the same bits, in the same order (k increasing from 0.0f within a chunk,
 * the chunk's sum added to the float16 accumulator y). SIM_HALF_FROWS rows x two vectors of
 * W columns of chunk sums stay in twelve registers through the chunk's k loop, each B row's
 * two vectors loaded once for the six rows and each A value broadcast once for its two
 * vectors, a whole chunk unrolled when A's rows are contiguous: about 0.27 instructions a
 * product at avx2 with the rounding after each chunk (the multiply-and-add kernel above
 * takes 0.48; docs/performance.md); then one vector, then scalar columns.
 */
#define HP_FROW(r, k, sk)                                                                  \
    do {                                                                                   \
        VF_ ar = BCAST_(a##r + (k) * (sk));                                                \
        p##r##0 = FMADD_(ar, b0, p##r##0);                                                 \
        p##r##1 = FMADD_(ar, b1, p##r##1);                                                 \
    } while (0)
#define HP_FSTEP(k, sk)                                                                    \
    do {                                                                                   \
        VF_ b0 = LOAD_(b + (k) * ldb + j), b1 = LOAD_(b + (k) * ldb + j + W_);             \
        HP_FROW(0, k, sk);                                                                 \
        HP_FROW(1, k, sk);                                                                 \
        HP_FROW(2, k, sk);                                                                 \
        HP_FROW(3, k, sk);                                                                 \
        HP_FROW(4, k, sk);                                                                 \
        HP_FROW(5, k, sk);                                                                 \
    } while (0)
#define HP_FACC(r, c) STORE_(y##r + j + (c) * W_, RND_(LOAD_(y##r + j + (c) * W_) + p##r##c))
/* A whole chunk with A's rows contiguous (MatMul) unrolled, A's offsets immediates. */
#define HP_FMA_BLOCK                                                                       \
    do {                                                                                   \
        const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4];            \
        const float *a5 = a[5];                                                            \
        float *y0 = y[0], *y1 = y[1], *y2 = y[2], *y3 = y[3], *y4 = y[4], *y5 = y[5];      \
        int64_t j = 0;                                                                     \
        for (; j + 2 * W_ <= n; j += 2 * W_) {                                             \
            VF_ p00 = { 0 }, p01 = { 0 }, p10 = { 0 }, p11 = { 0 }, p20 = { 0 };           \
            VF_ p21 = { 0 }, p30 = { 0 }, p31 = { 0 }, p40 = { 0 }, p41 = { 0 };           \
            VF_ p50 = { 0 }, p51 = { 0 };                                                  \
            if (kn == SIM_HALF_CHUNK && sak == 1) {                                        \
                _Pragma("GCC unroll 16")                                                   \
                for (int k = 0; k < SIM_HALF_CHUNK; k++)                                   \
                    HP_FSTEP(k, 1);                                                        \
            } else {                                                                       \
                for (int64_t k = 0; k < kn; k++)                                           \
                    HP_FSTEP(k, sak);                                                      \
            }                                                                              \
            HP_FACC(0, 0);                                                                 \
            HP_FACC(0, 1);                                                                 \
            HP_FACC(1, 0);                                                                 \
            HP_FACC(1, 1);                                                                 \
            HP_FACC(2, 0);                                                                 \
            HP_FACC(2, 1);                                                                 \
            HP_FACC(3, 0);                                                                 \
            HP_FACC(3, 1);                                                                 \
            HP_FACC(4, 0);                                                                 \
            HP_FACC(4, 1);                                                                 \
            HP_FACC(5, 0);                                                                 \
            HP_FACC(5, 1);                                                                 \
        }                                                                                  \
        for (; j + W_ <= n; j += W_)                                                       \
            for (int r = 0; r < SIM_HALF_FROWS; r++) {                                     \
                VF_ p = { 0 };                                                             \
                for (int64_t k = 0; k < kn; k++)                                           \
                    p = FMADD_(BCAST_(a[r] + k * sak), LOAD_(b + k * ldb + j), p);         \
                STORE_(y[r] + j, RND_(LOAD_(y[r] + j) + p));                               \
            }                                                                              \
        for (; j < n; j++)                                                                 \
            for (int r = 0; r < SIM_HALF_FROWS; r++) {                                     \
                float p = 0.0f;                                                            \
                for (int64_t k = 0; k < kn; k++)                                           \
                    p += a[r][k * sak] * b[k * ldb + j];    /* exact product */            \
                y[r][j] = HP_RNDS(y[r][j] + p);                                            \
            }                                                                              \
    } while (0)

#define HP_FPARAMS                                                                         \
    (const float *const a[SIM_HALF_FROWS], int64_t sak, const float *b, int64_t ldb,       \
     float *const y[SIM_HALF_FROWS], int64_t n, int64_t kn)

/* Eight floats a vector: the AVX2 copy (with FMA and F16C). */
static __attribute__((noinline, SIM_HOT_OPT, target("avx2,fma,f16c"))) void
fma8 HP_FPARAMS
{
#define VF_ __m256
#define W_ 8
#define BCAST_ _mm256_broadcast_ss
#define FMADD_ _mm256_fmadd_ps
#define LOAD_ _mm256_loadu_ps
#define STORE_ _mm256_storeu_ps
#define RND_ HP_RND8
    HP_FMA_BLOCK;
#undef VF_
#undef W_
#undef BCAST_
#undef FMADD_
#undef LOAD_
#undef STORE_
#undef RND_
}

/* Sixteen floats a vector: the AVX-512 copy. */
#define HP_BCAST16(p) _mm512_set1_ps(*(p))
static __attribute__((noinline, SIM_HOT_OPT, target("avx512f,fma,f16c"))) void
fma16 HP_FPARAMS
{
#define VF_ __m512
#define W_ 16
#define BCAST_ HP_BCAST16
#define FMADD_ _mm512_fmadd_ps
#define LOAD_ _mm512_loadu_ps
#define STORE_ _mm512_storeu_ps
#define RND_ HP_RND16
    HP_FMA_BLOCK;
#undef VF_
#undef W_
#undef BCAST_
#undef FMADD_
#undef LOAD_
#undef STORE_
#undef RND_
}

/* Whether the fused kernel runs at this level: AVX2 or AVX-512 with FMA and F16C (the
 * baseline level, and CPUs without FMA, take block() for every row: the same bits). */
static bool
fused_here(void)
{
    static _Atomic int fma = -1;
    int has = atomic_load_explicit(&fma, memory_order_relaxed);

    if (has < 0) {
        has = __builtin_cpu_supports("fma") != 0;
        atomic_store_explicit(&fma, has, memory_order_relaxed);
    }
    return has != 0 && sim_isa_level() >= SIM_ISA_AVX2 && sim_half_uses_f16c();
}

/* SIM_HALF_FROWS rows by the fused kernel of the level in use (fused_here() true). */
static void
fused(const float *const a[SIM_HALF_FROWS], int64_t sak, const float *b, int64_t ldb,
      float *const y[SIM_HALF_FROWS], int64_t n, int64_t kn)
{
    if (sim_isa_level() >= SIM_ISA_AVX512)
        fma16(a, sak, b, ldb, y, n, kn);
    else
        fma8(a, sak, b, ldb, y, n, kn);
}
#endif

/* b's chunk of rows k0 .. k0 + kn and columns n0 .. n0 + nn (b[k sbk + n sbn]) into bt,
 * row-major with rows of SIM_HALF_TILE floats. */
static void
pack_chunk(const float *b, int64_t sbk, int64_t sbn, int64_t k0, int64_t kn, int64_t n0,
           int64_t nn, float *bt)
{
    for (int64_t k = 0; k < kn; k++)
        for (int64_t j = 0; j < nn; j++)
            bt[k * SIM_HALF_TILE + j] = b[(k0 + k) * sbk + (n0 + j) * sbn];
}

/* y[m, n] for m < M, n < N: sum over k < K of a[m sam + k sak] b[k sbk + n sbn], in
 * chunks of SIM_HALF_CHUNK products summed in float from 0.0f in increasing k, each
 * chunk's sum added to a float16 accumulator (y, rounded after every addition).
 * Tiles of SIM_HALF_TILE columns; for each chunk of K, blocks of SIM_HALF_ROWS rows share
 * the chunk of B (read in place when sbn is 1, else packed into a stack tile first; the
 * rows past M of the last block read row 0 and add into a discarded row). Any strides of A
 * and B: the transposed operands of Gemm take the same kernel. */
static void
chunked(const float *a, int64_t sam, int64_t sak, const float *b, int64_t sbk, int64_t sbn,
        float *y, int64_t M, int64_t N, int64_t K, bool halves)
{
    float bt[SIM_HALF_CHUNK * SIM_HALF_TILE], spare[SIM_HALF_TILE] = { 0 };
#if SIM_ISA_DISPATCH
    bool fast = halves && fused_here();
#else
    (void)halves;
#endif

    memset(y, 0, (size_t)(M * N) * sizeof(float));
    for (int64_t n0 = 0; n0 < N; n0 += SIM_HALF_TILE) {
        int64_t nn = N - n0 < SIM_HALF_TILE ? N - n0 : SIM_HALF_TILE;
        for (int64_t k0 = 0; k0 < K; k0 += SIM_HALF_CHUNK) {
            int64_t kn = K - k0 < SIM_HALF_CHUNK ? K - k0 : SIM_HALF_CHUNK;
            const float *bc = b + k0 * sbk + n0;
            int64_t ldb = sbk;
            if (sbn != 1) {
                pack_chunk(b, sbk, sbn, k0, kn, n0, nn, bt);
                bc = bt;
                ldb = SIM_HALF_TILE;
            }
            int64_t m0 = 0;
#if SIM_ISA_DISPATCH
            for (; fast && m0 + SIM_HALF_FROWS <= M; m0 += SIM_HALF_FROWS) {
                const float *ar[SIM_HALF_FROWS];
                float *yr[SIM_HALF_FROWS];
                for (int r = 0; r < SIM_HALF_FROWS; r++) {
                    ar[r] = a + (m0 + r) * sam + k0 * sak;
                    yr[r] = y + (m0 + r) * N + n0;
                }
                fused(ar, sak, bc, ldb, yr, nn, kn);
            }
#endif
            for (; m0 < M; m0 += SIM_HALF_ROWS) {
                const float *ar[SIM_HALF_ROWS];
                float *yr[SIM_HALF_ROWS];
                for (int r = 0; r < SIM_HALF_ROWS; r++) {
                    bool in = m0 + r < M;
                    ar[r] = a + (in ? m0 + r : 0) * sam + k0 * sak;
                    yr[r] = in ? y + (m0 + r) * N + n0 : spare;
                }
                if (!block(ar, sak, bc, ldb, yr, nn, kn))
                    for (int r = 0; r < SIM_HALF_ROWS && m0 + r < M; r++)
                        sim_half_round_n(yr[r], nn);
            }
        }
    }
}

static int
matmul(const struct sim_kern *k, bool halves)
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
                (float *)k->out[0].data + t * M * N, M, N, K, halves);
    return 0;
}

static int
gemm(const struct sim_mnode *mn, const struct sim_kern *k, bool halves)
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
    chunked(A->data, ta ? 1 : K, ta ? M : 1, B->data, tb ? 1 : N, tb ? K : 1, y, M, N, K,
            halves);
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
sim_half_partials(const struct sim_mnode *mn, const struct sim_kern *k, bool halves)
{
    if (mn->domain[0] != '\0' || k->in[0].dtype != SIM_DTYPE_FLOAT ||
        k->in[1].dtype != SIM_DTYPE_FLOAT || k->out[0].dtype != SIM_DTYPE_FLOAT)
        return 1;
    if (strcmp(mn->op_type, "MatMul") == 0)
        return matmul(k, halves);
    if (strcmp(mn->op_type, "Gemm") == 0)
        return gemm(mn, k, halves);
    return 1;
}

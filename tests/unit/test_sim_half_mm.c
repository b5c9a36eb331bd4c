/*
 * test_sim_half_mm.c — float16 partials' MatMul and Gemm kernels (sim/exec/half_partials.c)
 * against the reference semantics, written here as a plain scalar loop: for each output,
 * chunks of 16 products summed in float from 0.0f in increasing k, each chunk's sum added
 * to a float16 accumulator rounded to nearest even after every addition. Bit for bit, on
 * awkward shapes (K not whole chunks; M not whole blocks of the six-row fused kernel or of
 * the four-row one; N with part tiles, part vector pairs, part vectors and scalar columns at
 * every width) and awkward values (float16 subnormals, signed zeros, magnitudes whose sums
 * pass 65504, infinities, NaN), and the same bits at every instruction-set level this
 * build and CPU have, switched in-process (the fused multiply-add kernels at avx512 and
 * avx2, the multiply-and-add one at baseline).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "hot.h"
#include "model.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F16 SIM_DTYPE_FLOAT16
#define DIMS(...) ((const int64_t[]){ __VA_ARGS__ })

enum { MAXM = 19, MAXK = 70, MAXN = 300 };

static float
h2f(uint16_t h)
{
    return sim_half_to_float(h);
}

static float
r16(float f)
{
    return h2f(sim_half_from_float(f));
}

/* y (halves) = MatMul(a, b), or Gemm(a, b, c) with transB ("Gemm"), or with transA and
 * transB ("GemmT"): a given as (M, K), or (K, M) for GemmT; b as (K, N) for MatMul, (N, K)
 * for the Gemms; float16 partials. */
static void
run_mm(const char *op, const uint16_t *a, const uint16_t *b, const uint16_t *c, int64_t M,
       int64_t K, int64_t N, uint16_t *y)
{
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_ob *bld = sim_ob_new(13);
    bool ta = strcmp(op, "GemmT") == 0, gemm = ta || strcmp(op, "Gemm") == 0;

    sim_ob_initializer(bld, "a", F16, 2, ta ? DIMS(K, M) : DIMS(M, K), a);
    sim_ob_initializer(bld, "b", F16, 2, gemm ? DIMS(N, K) : DIMS(K, N), b);
    if (gemm) {
        sim_ob_initializer(bld, "c", F16, 1, DIMS(N), c);
        sim_ob_node(bld, "Gemm", "g", "a,b,c", "y");
        sim_ob_attr_int(bld, "transB", 1);
        if (ta)
            sim_ob_attr_int(bld, "transA", 1);
    } else {
        sim_ob_node(bld, "MatMul", "mm", "a,b", "y");
    }
    sim_ob_output(bld, "y", F16);
    m = test_ob_load(bld);
    m->partials_half = true;
    sim_compile_opts_init(&o);
    if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
        fail_msg("%s: %s", op, err.msg);
    memcpy(y, sim_exe_output_buffer(e, 0), (size_t)(M * N) * sizeof(*y));
    sim_exe_free(e);
    sim_model_free(m);
}

/* The reference: a (M, K) and b (K, N) row-major halves, c (N) or NULL. */
static uint16_t
reference(const uint16_t *a, const uint16_t *b, const uint16_t *c, int64_t K, int64_t N,
          int64_t m, int64_t n)
{
    float acc = 0.0f;

    for (int64_t k0 = 0; k0 < K; k0 += 16) {
        float p = 0.0f;
        for (int64_t k = k0; k < k0 + 16 && k < K; k++)
            p += h2f(a[m * K + k]) * h2f(b[k * N + n]);
        acc = r16(acc + p);
    }
    return sim_half_from_float(c != NULL ? acc + h2f(c[n]) : acc);
}

/* Random halves: normal values in [-4, 4] and of magnitudes 2^-12 to 2^4 (so the order
 * of a chunk's additions shows in its float sum), some subnormals (k x 2^-24) and signed
 * zeros. */
static uint16_t
awkward(void)
{
    int r = rand() % 100;
    float s = rand() % 2 ? -1.0f : 1.0f;

    if (r < 8)
        return sim_half_from_float(s * (float)(1 + rand() % 1023) * 0x1.0p-24f);
    if (r < 12)
        return s < 0 ? 0x8000 : 0x0000;
    if (r < 50)     /* exponents 2^-12 to 2^3: sums of a chunk round in float */
        return sim_half_from_float(s * ldexpf(1.0f + (float)rand() / (float)RAND_MAX,
                                              rand() % 16 - 12));
    return sim_half_from_float((float)rand() / (float)RAND_MAX * 8.0f - 4.0f);
}

/* a, b and c of awkward() values, then: row 1 of a of magnitudes 1000 to 4000 (its sums
 * cross 65504 by chunk: some overflow to infinity, some not), 65504 in row 3, +inf in row
 * 0, NaN in row 2, -inf in column 3 of b (row 0 by it: NaN), column 5 of b subnormal;
 * row 5 of a 2048 and -2048 at k 0 and 8 of each chunk (b 1 there), small values between,
 * so that the order of a chunk's float additions shows in float16. */
static void
fill(uint16_t *a, uint16_t *b, uint16_t *c, int64_t M, int64_t K, int64_t N)
{
    for (int64_t i = 0; i < M * K; i++)
        a[i] = awkward();
    for (int64_t i = 0; i < K * N; i++)
        b[i] = awkward();
    for (int64_t i = 0; i < N; i++)
        c[i] = awkward();
    for (int64_t k = 0; M > 1 && k < K; k++)
        a[K + k] = sim_half_from_float((rand() % 2 ? -1.0f : 1.0f) *
                                       (1000.0f + (float)(rand() % 3000)));
    if (M > 3)
        a[3 * K + K / 4] = 0x7bff;
    for (int64_t k = 0; M > 5 && k < K; k++) {  /* row 5: cancellations, order shows */
        float small = (rand() % 2 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)rand() / (float)RAND_MAX,
                                                           -8 + rand() % 3);
        a[5 * K + k] = sim_half_from_float(k % 16 == 0 ? 2048.0f : k % 16 == 8 ? -2048.0f
                                                                                : small);
        for (int64_t n = 0; k % 8 == 0 && n < N; n++)
            b[k * N + n] = sim_half_from_float(1.0f);
    }
    a[0 * K + K - 1] = 0x7c00;
    if (M > 2)
        a[2 * K + K / 2] = 0x7e00;
    b[(K / 3) * N + (N > 3 ? 3 : 0)] = 0xfc00;
    for (int64_t k = 0; N > 5 && k < K; k++)
        b[k * N + 5] = (uint16_t)((k % 2 ? 0x8000 : 0) | (1 + k % 700));
}

/* Whether float16 bits x and y are the same value: the same bits, or both NaN. A NaN's
 * sign and payload are the hardware's and the compiler's choice (x86 makes inf - inf the
 * negative "indefinite" NaN; a constant folded by the compiler is positive), so they are
 * not compared: the sanitizer build's reference loop gave 0x7e00 where the kernel gave
 * 0xfe00. */
static bool
same_half(uint16_t x, uint16_t y)
{
    bool xnan = (x & 0x7c00) == 0x7c00 && (x & 0x3ff) != 0;
    bool ynan = (y & 0x7c00) == 0x7c00 && (y & 0x3ff) != 0;

    return x == y || (xnan && ynan);
}

/* The three forms of one case at the level in use, each checked against the reference;
 * the outputs in y[form]. */
static void
run_case(int64_t M, int64_t K, int64_t N, const uint16_t *a, const uint16_t *b,
         const uint16_t *c, uint16_t y[3][MAXM * MAXN])
{
    static uint16_t at[MAXK * MAXM], bt[MAXN * MAXK];
    static const char *const ops[3] = { "MatMul", "Gemm", "GemmT" };

    for (int64_t k = 0; k < K; k++) {
        for (int64_t n = 0; n < N; n++)
            bt[n * K + k] = b[k * N + n];
        for (int64_t m = 0; m < M; m++)
            at[k * M + m] = a[m * K + k];
    }
    for (int g = 0; g < 3; g++) {
        run_mm(ops[g], g == 2 ? at : a, g == 0 ? b : bt, c, M, K, N, y[g]);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                uint16_t want = reference(a, b, g == 0 ? NULL : c, K, N, m, n);
                if (!same_half(y[g][m * N + n], want))
                    fail_msg("%s M %d K %d N %d at [%d, %d]: 0x%04x (%g), reference 0x%04x "
                             "(%g), level %d", ops[g], (int)M, (int)K, (int)N, (int)m,
                             (int)n, y[g][m * N + n], h2f(y[g][m * N + n]), want, h2f(want),
                             (int)sim_isa_current());
            }
    }
}

/* Every shape at every level: equal to the reference at each, and so to each other. */
static void
test_partials_awkward(void **state)
{
    static const int64_t shapes[][3] = {
        { 1, 1, 1 }, { 5, 17, 7 }, { 6, 16, 16 }, { 7, 33, 17 }, { 13, 15, 33 },
        { 12, 47, 57 }, { 18, 64, 129 }, { 19, 70, 300 }, { 11, 31, 44 },
    };
    static uint16_t a[MAXM * MAXK], b[MAXK * MAXN], c[MAXN];
    static uint16_t y[3][MAXM * MAXN], first[3][MAXM * MAXN];
    enum sim_isa top = sim_isa_level(), l;
    int64_t cls[4] = { 0 };     /* infinity, NaN, zero or subnormal, normal */

    (void)state;
    srand(27);
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        fill(a, b, c, M, K, N);
        for (l = top; l >= SIM_ISA_BASELINE; l--) {
            atomic_store(&sim_isa_now, (int)l);
            run_case(M, K, N, a, b, c, l == top ? first : y);
            for (int g = 0; l != top && g < 3; g++)
                for (int64_t i = 0; i < M * N; i++)
                    if (!same_half(y[g][i], first[g][i]))
                        fail_msg("M %d K %d N %d, form %d: level %d differs from level %d "
                                 "at %d", (int)M, (int)K, (int)N, g, (int)l, (int)top, (int)i);
        }
        atomic_store(&sim_isa_now, (int)top);
        for (int g = 0; g < 3; g++)
            for (int64_t i = 0; i < M * N; i++) {
                uint16_t e = first[g][i] & 0x7c00, f = first[g][i] & 0x3ff;
                cls[e == 0x7c00 ? (f == 0 ? 0 : 1) : e == 0 ? 2 : 3]++;
            }
    }
    printf("  %d shapes x MatMul, Gemm (transB), Gemm (transA, transB) at levels %d down to "
           "1: every output the reference's bits; outputs: %lld infinite, %lld NaN, %lld "
           "zero or subnormal, %lld normal\n", (int)(sizeof(shapes) / sizeof(shapes[0])),
           (int)top, (long long)cls[0], (long long)cls[1], (long long)cls[2],
           (long long)cls[3]);
    for (int i = 0; i < 4; i++)
        assert_true(cls[i] > 10);
}

/* MatMul of float16 a by a float b of full float precision (24 significant bits): its
 * products are not exact in float, so the multiply-and-add kernel runs (a fused
 * multiply-add would round once and change the bits): each product rounded to float, then
 * added, as the reference does, at every level. Row 0 of a is pairs x, -x by equal rows of
 * b: 0 from rounded products, the products' rounding errors from fused ones. */
static void
test_partials_float_operand(void **state)
{
    enum { M = 13, K = 40, N = 45 };
    static uint16_t a[M * K], y[M * N];
    static float b[K * N];
    enum sim_isa top = sim_isa_level(), l;
    int64_t differ = 0;

    (void)state;
    srand(30);
    for (int i = 0; i < M * K; i++)
        a[i] = awkward();
    for (int i = 0; i < K * N; i++)
        b[i] = ((float)rand() / (float)RAND_MAX * 2.0f - 1.0f) * (1.0f + 0x1.0p-23f * (float)(i % 7));
    for (int k = 0; k + 1 < K; k += 2) {    /* row 0: x b - x b, 0 with rounded products */
        a[k] = sim_half_from_float(1000.0f + (float)(rand() % 1000));
        a[k + 1] = a[k] ^ 0x8000;
        memcpy(b + (k + 1) * N, b + k * N, N * sizeof(float));
    }
    for (l = top; l >= SIM_ISA_BASELINE; l--) {
        struct sim_compile_opts o;
        struct sim_err err = { 0 };
        struct sim_exe *e = NULL;
        struct sim_model *m;
        struct sim_ob *bld = sim_ob_new(13);

        atomic_store(&sim_isa_now, (int)l);
        sim_ob_initializer(bld, "a", F16, 2, DIMS(M, K), a);
        sim_ob_initializer(bld, "b", SIM_DTYPE_FLOAT, 2, DIMS(K, N), b);
        sim_ob_node(bld, "MatMul", "mm", "a,b", "y");
        sim_ob_output(bld, "y", F16);
        m = test_ob_load(bld);
        m->partials_half = true;
        sim_compile_opts_init(&o);
        if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
            fail_msg("MatMul (float16, float): %s", err.msg);
        memcpy(y, sim_exe_output_buffer(e, 0), sizeof(y));
        sim_exe_free(e);
        sim_model_free(m);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float acc = 0.0f, fused = 0.0f;
                for (int k0 = 0; k0 < K; k0 += 16) {
                    float p = 0.0f, q = 0.0f;
                    for (int k = k0; k < k0 + 16 && k < K; k++) {
                        p += h2f(a[i * K + k]) * b[k * N + j];
                        q = fmaf(h2f(a[i * K + k]), b[k * N + j], q);
                    }
                    acc = r16(acc + p);
                    fused = r16(fused + q);
                }
                differ += l == top && acc != fused;
                if (!same_half(y[i * N + j], sim_half_from_float(acc)))
                    fail_msg("[%d, %d] at level %d: %g, reference %g", i, j, (int)l,
                             h2f(y[i * N + j]), acc);
            }
    }
    atomic_store(&sim_isa_now, (int)top);
    printf("  MatMul (float16, float): the reference's bits at levels %d down to 1 (a fused "
           "multiply-add would differ at %lld of %d outputs)\n", (int)top, (long long)differ,
           M * N);
    assert_true(differ > 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partials_awkward),
        cmocka_unit_test(test_partials_float_operand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

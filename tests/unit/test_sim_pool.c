/*
 * test_sim_pool.c — the host thread pool: a parallel-for covers every index exactly once,
 * also when several threads (simulated IPUs) call it at the same time and when a piece
 * calls it again; the split sgemm equals an unsplit reference for every transpose pair and
 * leading dimension, with beta 0 and 1 (prints the max difference it saw); sim_pool_zero
 * clears exactly its bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct cover {
    atomic_int *hits;
    bool nested;
};

static void
nested_piece(void *ctx, int64_t lo, int64_t hi)
{
    atomic_int *hits = ctx;

    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&hits[i], 1);
}

static void
cover_piece(void *ctx, int64_t lo, int64_t hi)
{
    struct cover *c = ctx;

    if (c->nested) {
        /* a piece that spreads again runs its inner range serially, still all of it */
        sim_pool_for(hi - lo, 1, nested_piece, c->hits + lo);
        return;
    }
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

/* Runs parallel-fors of assorted sizes and grains; returns the number of indices not
 * covered exactly once. */
static long
cover_rounds(int rounds, unsigned seed)
{
    enum { N = 100003 };
    atomic_int *hits = malloc(N * sizeof(*hits));
    long bad = 0;

    if (hits == NULL)
        return -1;
    for (int r = 0; r < rounds; r++) {
        int64_t n = 1 + (int64_t)(rand_r(&seed) % N), grain = 1 + rand_r(&seed) % 5000;
        struct cover c = { hits, r % 3 == 0 };
        for (int64_t i = 0; i < n; i++)
            atomic_init(&hits[i], 0);
        sim_pool_for(n, grain, cover_piece, &c);
        for (int64_t i = 0; i < n; i++)
            bad += atomic_load(&hits[i]) != 1;
    }
    free(hits);
    return bad;
}

static void
test_cover(void **state)
{
    (void)state;
    assert_true(sim_pool_threads() >= 1);
    assert_int_equal(cover_rounds(60, 1), 0);
    sim_pool_for(0, 1, nested_piece, NULL);   /* an empty range calls nothing */
}

static void *
caller_main(void *arg)
{
    long *bad = arg;

    *bad = cover_rounds(40, (unsigned)(uintptr_t)arg);
    return NULL;
}

static void
test_concurrent_callers(void **state)
{
    enum { CALLERS = 4 };
    pthread_t t[CALLERS];
    long bad[CALLERS];

    (void)state;
    for (int i = 0; i < CALLERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller_main, &bad[i]), 0);
    for (int i = 0; i < CALLERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(bad[i], 0);
    }
}

/* C (m x n, ldc) = alpha op(A) op(B) + beta C, naive, in double. */
static void
sgemm_ref(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
          const float *b, int ldb, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = (float)(alpha * s + (beta != 0.0f ? beta * c[i * ldc + j] : 0.0));
        }
}

static void
test_sgemm(void **state)
{
    /* shapes that split along n (wide) and along m (tall), one too narrow for whole
     * register blocks (cut column by column: the tutorial's first weight gradient), and
     * one too small to split */
    static const int shapes[][3] = { { 37, 301, 129 }, { 290, 23, 200 }, { 10, 25, 4100 },
                                     { 5, 7, 3 } };
    double worst = 0.0;

    (void)state;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int t = 0; t < 8; t++) {
            bool ta = t & 1, tb = t & 2;
            float beta = (t & 4) ? 1.0f : 0.0f;
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
            float *a = malloc(sizeof(float) * (size_t)(ta ? k : m) * lda);
            float *b = malloc(sizeof(float) * (size_t)(tb ? n : k) * ldb);
            float *c = malloc(sizeof(float) * (size_t)m * ldc);
            float *want = malloc(sizeof(float) * (size_t)m * ldc);
            unsigned seed = 7;
            assert_non_null(a);
            assert_non_null(b);
            assert_non_null(c);
            assert_non_null(want);
            for (int i = 0; i < (ta ? k : m) * lda; i++)
                a[i] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
            for (int i = 0; i < (tb ? n : k) * ldb; i++)
                b[i] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
            for (int i = 0; i < m * ldc; i++)
                c[i] = want[i] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
            sim_pool_sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c, ldc);
            sgemm_ref(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, want, ldc);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < ldc; j++) {
                    double d = fabs((double)c[i * ldc + j] - want[i * ldc + j]);
                    if (j >= n)      /* padding columns are never written */
                        assert_true(d == 0.0);
                    /* the float sums' error grows with k: 1e-4 per 200 terms */
                    assert_true(d < 1e-4 * (k > 200 ? k / 200.0 : 1.0));
                    worst = d > worst ? d : worst;
                }
            free(a);
            free(b);
            free(c);
            free(want);
        }
    printf("  split sgemm vs naive: max |diff| = %.3g\n", worst);
}

/* sim_pool_zero clears exactly its bytes, whatever the size: below one piece, whole pieces,
 * whole pieces and a tail, from an odd address. */
static void
test_zero(void **state)
{
    static const size_t sizes[] = { 0, 1, 1000, (64u << 10) * 2, (64u << 10) * 5 + 123 };
    size_t cap = (64u << 10) * 6;
    unsigned char *buf = malloc(cap + 2);

    (void)state;
    assert_non_null(buf);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        memset(buf, 0xa5, cap + 2);
        sim_pool_zero(buf + 1, sizes[k]);
        assert_int_equal(buf[0], 0xa5);
        for (size_t i = 0; i < sizes[k]; i++)
            if (buf[1 + i] != 0)
                fail_msg("size %zu: byte %zu is %d, not 0", sizes[k], i, buf[1 + i]);
        assert_int_equal(buf[1 + sizes[k]], 0xa5);
    }
    free(buf);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_zero),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_dataloader.c — the host data loader and the IDX dataset reader of libipuof-client.
 *
 * A synthetic in-memory dataset (item i: "x" float [2, 3] holding 10 i + j, "y" int64 []
 * holding i, "u" uint8 [3] holding i + j mod 256) checks: the layout and count of combined
 * batches for combinations of micro-batch, device iterations, gradient accumulation and
 * replicas, and how the daemon's iteration-major split reads them; drop_last and keep_last;
 * epochs, set_epoch and reset; the shuffle (reproducible, a permutation every epoch,
 * golden orders from an independent implementation of the documented algorithm); async
 * mode giving exactly the batches sync mode gives, get() running on the loader's thread;
 * get() failures reported with their sentence and retried; freeing mid-epoch; the checks
 * of ipuof_dataloader_new(). IDX files written here, plain and gzip, are read back and
 * broken in the ways the reader must name; the Fashion-MNIST test files are read when
 * /usr/share/datasets/fashion-mnist holds them; and one test hands the loader's batches to
 * a model on a real ipuofd (IPUOFD_BIN, skipped when it cannot be started).
 *
 * Nothing here depends on timing: async mode is checked by content and by which thread
 * called get(), never by how long anything took.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ipuof/client.h"
#include "onnx_build.h"
#include "testd.h"

/* ---- a synthetic dataset ------------------------------------------------------------------ */

#define X_ELEMS 6
#define U_ELEMS 3

struct synth {
    size_t n;
    size_t fail_at;          /* get() of this item fails; (size_t)-1: none */
    int fail_code;           /* what it returns then */
    pthread_t caller;        /* the thread that created the loader */
    int x_only;              /* items have field "x" only */
    int calls;               /* get() calls (only read after the loader is idle or freed) */
    int off_thread;          /* get() calls from a thread other than caller */
};

static const struct ipuof_field synth_fields[3] = {
    {"x", IPUOF_DTYPE_FLOAT, 2, {2, 3}},
    {"y", IPUOF_DTYPE_INT64, 0, {0}},
    {"u", IPUOF_DTYPE_UINT8, 1, {U_ELEMS}},
};

static size_t
synth_length(void *ds)
{
    return ((struct synth *)ds)->n;
}

static int
synth_get(void *ds, size_t index, void *const *outs, void *user)
{
    struct synth *s = ds;
    float *x = outs[0];
    int64_t y = (int64_t)index;
    uint8_t *u;

    (void)user;
    s->calls++;
    if (!pthread_equal(pthread_self(), s->caller))
        s->off_thread++;
    if (index == s->fail_at)
        return s->fail_code;
    for (int j = 0; j < X_ELEMS; j++)
        x[j] = (float)(10 * index + (size_t)j);
    if (s->x_only)
        return IPUOF_OK;
    memcpy(outs[1], &y, sizeof y);
    u = outs[2];
    for (int j = 0; j < U_ELEMS; j++)
        u[j] = (uint8_t)((index + (size_t)j) % 256);
    return IPUOF_OK;
}

static const char *
synth_errmsg(void *ds, void *user)
{
    (void)ds;
    return user != NULL ? user : "synthetic failure";
}

static const struct ipuof_dataset_ops synth_ops = {synth_length, synth_get, synth_errmsg};

static void
synth_init(struct synth *s, size_t n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->fail_at = (size_t)-1;
    s->fail_code = IPUOF_E_IO;
    s->caller = pthread_self();
}

static struct ipuof_dataset
synth_dataset(struct synth *s)
{
    struct ipuof_dataset d = {&synth_ops, s, synth_fields, 3};

    return d;
}

/* A loader over s; fails the test when it cannot be made. */
static ipuof_dataloader *
synth_loader(struct synth *s, const struct ipuof_dataloader_opts *o)
{
    struct ipuof_dataset d = synth_dataset(s);
    char err[IPUOF_ERRBUF_SIZE];
    ipuof_dataloader *dl = NULL;
    int rc = ipuof_dataloader_new(&d, o, &dl, err, sizeof err);

    if (rc != IPUOF_OK)
        print_message("ipuof_dataloader_new: %s\n", err);
    assert_int_equal(rc, IPUOF_OK);
    assert_non_null(dl);
    assert_string_equal(err, "");
    return dl;
}

/* Item k of batch b: the y value, checked against x and u for consistency. */
static int64_t
item_of(const struct ipuof_batch *b, size_t k)
{
    const float *x = (const float *)b->tensors[0].data + k * X_ELEMS;
    const uint8_t *u = (const uint8_t *)b->tensors[2].data + k * U_ELEMS;
    int64_t y;

    memcpy(&y, (const int64_t *)b->tensors[1].data + k, sizeof y);
    for (int j = 0; j < X_ELEMS; j++)
        assert_true(x[j] == (float)(10 * y + j));
    for (int j = 0; j < U_ELEMS; j++)
        assert_int_equal(u[j], (uint8_t)((y + j) % 256));
    return y;
}

/* Checks b's tensors describe samples samples of the synthetic fields. */
static void
check_shapes(const struct ipuof_batch *b, size_t samples)
{
    assert_int_equal(b->samples, samples);
    assert_int_equal(b->n_tensors, 3);
    assert_string_equal(b->tensors[0].name, "x");
    assert_int_equal(b->tensors[0].dtype, IPUOF_DTYPE_FLOAT);
    assert_int_equal(b->tensors[0].rank, 3);
    assert_int_equal(b->tensors[0].dims[0], samples);
    assert_int_equal(b->tensors[0].dims[1], 2);
    assert_int_equal(b->tensors[0].dims[2], 3);
    assert_int_equal(b->tensors[0].bytes, samples * X_ELEMS * sizeof(float));
    assert_string_equal(b->tensors[1].name, "y");
    assert_int_equal(b->tensors[1].dtype, IPUOF_DTYPE_INT64);
    assert_int_equal(b->tensors[1].rank, 1);
    assert_int_equal(b->tensors[1].dims[0], samples);
    assert_int_equal(b->tensors[1].bytes, samples * sizeof(int64_t));
    assert_int_equal(b->tensors[2].dtype, IPUOF_DTYPE_UINT8);
    assert_int_equal(b->tensors[2].rank, 2);
    assert_int_equal(b->tensors[2].dims[1], U_ELEMS);
    assert_int_equal(b->tensors[2].bytes, samples * U_ELEMS);
}

/* ---- batching -------------------------------------------------------------------------- */

static void
run_layout(unsigned B, unsigned D, unsigned A, unsigned R, int async)
{
    struct ipuof_dataloader_opts o = {.batch_size = B, .device_iterations = D,
                                      .gradient_accumulation = A, .replicas = R,
                                      .mode = async ? IPUOF_DATALOADER_ASYNC : 0};
    struct synth s;
    ipuof_dataloader *dl;
    const struct ipuof_batch *b;
    size_t n = 101, combined = (size_t)B * D * A * R, got = 0;

    synth_init(&s, n);
    dl = synth_loader(&s, &o);
    assert_int_equal(ipuof_dataloader_combined_batch_size(dl), combined);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), n / combined);
    assert_int_equal(ipuof_dataloader_length(dl), n);
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        assert_int_equal(b->epoch, 0);
        assert_int_equal(b->index, got);
        check_shapes(b, combined);
        /* The daemon reads micro-batch (d, a, r) at sample ((d A + a) R + r) B: with the
         * dataset in order it holds items base + that, one after another. */
        for (unsigned d = 0; d < D; d++)
            for (unsigned a = 0; a < A; a++)
                for (unsigned r = 0; r < R; r++)
                    for (unsigned k = 0; k < B; k++) {
                        size_t at = (((size_t)d * A + a) * R + r) * B + k;

                        assert_int_equal(item_of(b, at), got * combined + at);
                    }
        got++;
    }
    assert_null(b);
    assert_int_equal(got, n / combined);
    ipuof_dataloader_free(dl);
}

static void
test_layout_and_counts(void **state)
{
    static const unsigned combos[][4] = {
        {1, 1, 1, 1}, {4, 1, 1, 1}, {2, 3, 1, 1}, {2, 1, 4, 1}, {3, 1, 1, 5},
        {2, 2, 2, 2}, {1, 5, 2, 3}, {5, 4, 1, 1}, {101, 1, 1, 1},
    };

    (void)state;
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++)
        for (int async = 0; async <= 1; async++)
            run_layout(combos[i][0], combos[i][1], combos[i][2], combos[i][3], async);
}

static void
test_drop_last_and_keep_last(void **state)
{
    struct ipuof_dataloader_opts o = {.batch_size = 2, .replicas = 2};
    struct ipuof_dataset d;
    struct synth s;
    ipuof_dataloader *dl;
    const struct ipuof_batch *b;
    char err[IPUOF_ERRBUF_SIZE];

    (void)state;
    synth_init(&s, 10);
    /* Default: 10 items in batches of 4 are two batches; items 8 and 9 are dropped. */
    dl = synth_loader(&s, &o);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_non_null(b);
        check_shapes(b, 4);
        assert_int_equal(item_of(b, 0), 4 * i);
    }
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_null(b);
    ipuof_dataloader_free(dl);

    /* keep_last: a third, short batch of the two items left. */
    o.keep_last = 1;
    dl = synth_loader(&s, &o);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), 3);
    assert_int_equal(ipuof_dataloader_combined_batch_size(dl), 4);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        check_shapes(b, 4);
    }
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_non_null(b);
    assert_int_equal(b->index, 2);
    check_shapes(b, 2);
    assert_int_equal(item_of(b, 0), 8);
    assert_int_equal(item_of(b, 1), 9);
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_null(b);
    ipuof_dataloader_free(dl);

    /* Fewer items than one combined batch: refused without keep_last, one short batch
     * with it. */
    synth_init(&s, 3);
    d = synth_dataset(&s);
    o.keep_last = 0;
    assert_int_equal(ipuof_dataloader_new(&d, &o, &dl, err, sizeof err), IPUOF_E_INVAL);
    assert_null(dl);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, "3 items, fewer than one combined batch of 4"));
    o.keep_last = 1;
    o.mode = IPUOF_DATALOADER_ASYNC;
    dl = synth_loader(&s, &o);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), 1);
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    check_shapes(b, 3);
    assert_int_equal(item_of(b, 2), 2);
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_null(b);
    ipuof_dataloader_free(dl);
}

static void
test_epochs(void **state)
{
    struct ipuof_dataloader_opts o = {.batch_size = 3};
    const struct ipuof_batch *b;
    struct synth s;
    ipuof_dataloader *dl;

    (void)state;
    for (int async = 0; async <= 1; async++) {
        o.mode = async ? IPUOF_DATALOADER_ASYNC : IPUOF_DATALOADER_SYNC;
        synth_init(&s, 7);
        dl = synth_loader(&s, &o);
        for (uint64_t e = 0; e < 3; e++) {
            assert_int_equal(ipuof_dataloader_epoch(dl), e);
            for (size_t i = 0; i < 2; i++) {
                assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
                assert_non_null(b);
                assert_int_equal(b->epoch, e);
                assert_int_equal(b->index, i);
                assert_int_equal(item_of(b, 0), 3 * i);
            }
            assert_int_equal(ipuof_dataloader_epoch(dl), e); /* its end not reported yet */
            assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
            assert_null(b);
            assert_int_equal(ipuof_dataloader_epoch(dl), e + 1);
        }
        /* set_epoch jumps, reset goes back to epoch 0; either restarts at batch 0. */
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_set_epoch(dl, 9), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_epoch(dl), 9);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(b->epoch, 9);
        assert_int_equal(b->index, 0);
        assert_int_equal(ipuof_dataloader_reset(dl), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_epoch(dl), 0);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(b->epoch, 0);
        assert_int_equal(b->index, 0);
        assert_int_equal(item_of(b, 0), 0);
        /* Setting the epoch that comes next anyway keeps the position. */
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_null(b);
        assert_int_equal(ipuof_dataloader_set_epoch(dl, 1), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(b->epoch, 1);
        assert_int_equal(b->index, 0);
        ipuof_dataloader_free(dl);
    }
}

/* ---- shuffling ------------------------------------------------------------------------- */

/* The items of epoch's batches in order, into order[0..n) (B = 1, so every item). */
static void
epoch_order(ipuof_dataloader *dl, uint64_t epoch, int64_t *order, size_t n)
{
    const struct ipuof_batch *b;
    size_t got = 0;

    assert_int_equal(ipuof_dataloader_set_epoch(dl, epoch), IPUOF_OK);
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        for (size_t k = 0; k < b->samples; k++) {
            assert_true(got < n);
            order[got++] = item_of(b, k);
        }
    }
    assert_null(b);
    assert_int_equal(got, n);
}

static void
assert_permutation(const int64_t *order, size_t n)
{
    unsigned char *seen = calloc(n, 1);

    assert_non_null(seen);
    for (size_t i = 0; i < n; i++) {
        assert_true(order[i] >= 0 && (size_t)order[i] < n);
        assert_int_equal(seen[order[i]], 0);
        seen[order[i]] = 1;
    }
    free(seen);
}

static void
test_shuffle(void **state)
{
    enum { N = 1000 };
    static int64_t a[N], b2[N], c[N], e1[N];
    struct ipuof_dataloader_opts o = {.batch_size = 1, .shuffle = 1, .seed = 1234,
                                      .keep_last = 1};
    struct synth s;
    ipuof_dataloader *dl, *dl2, *dl3;
    int differs = 0;

    (void)state;
    synth_init(&s, N);
    dl = synth_loader(&s, &o);
    dl2 = synth_loader(&s, &o);
    o.seed = 1235;
    dl3 = synth_loader(&s, &o);
    epoch_order(dl, 0, a, N);
    epoch_order(dl2, 0, b2, N);
    epoch_order(dl3, 0, c, N);
    assert_permutation(a, N);
    assert_permutation(c, N);
    assert_memory_equal(a, b2, sizeof a);           /* same seed, same order */
    assert_memory_not_equal(a, c, sizeof a);        /* another seed, another order */
    for (size_t i = 0; i < N; i++)
        differs += a[i] != (int64_t)i;
    assert_true(differs > N / 2);                   /* it did shuffle */
    epoch_order(dl, 1, e1, N);                      /* every epoch its own permutation */
    assert_permutation(e1, N);
    assert_memory_not_equal(a, e1, sizeof a);
    epoch_order(dl2, 0, b2, N);                     /* the same again */
    epoch_order(dl2, 1, c, N);
    assert_memory_equal(e1, c, sizeof e1);
    ipuof_dataloader_free(dl);
    ipuof_dataloader_free(dl2);
    ipuof_dataloader_free(dl3);
}

/* The orders client.h's algorithm gives, as an independent implementation of it (Python
 * integers, written from the header's description) computed them. */
static void
test_shuffle_golden(void **state)
{
    static const struct {
        uint64_t seed, epoch;
        size_t n;
        int64_t order[20];
    } golden[] = {
        {42, 0, 10, {9, 3, 6, 4, 0, 7, 5, 2, 8, 1}},
        {42, 1, 10, {5, 4, 3, 6, 8, 1, 9, 7, 2, 0}},
        {7, 0, 10, {5, 8, 6, 3, 4, 2, 9, 0, 1, 7}},
        {UINT64_C(12345678901234567890), 3, 20,
         {6, 15, 4, 17, 10, 1, 11, 16, 12, 19, 0, 14, 8, 7, 2, 18, 9, 3, 13, 5}},
    };
    int64_t got[20];

    (void)state;
    for (size_t g = 0; g < sizeof golden / sizeof golden[0]; g++) {
        for (int async = 0; async <= 1; async++) {
            struct ipuof_dataloader_opts o = {.batch_size = 1, .shuffle = 1,
                                              .seed = golden[g].seed,
                                              .mode = async ? IPUOF_DATALOADER_ASYNC : 0};
            struct synth s;
            ipuof_dataloader *dl;

            synth_init(&s, golden[g].n);
            dl = synth_loader(&s, &o);
            epoch_order(dl, golden[g].epoch, got, golden[g].n);
            assert_memory_equal(got, golden[g].order, golden[g].n * sizeof got[0]);
            ipuof_dataloader_free(dl);
        }
    }
}

/* With drop_last, a shuffled epoch uses floor(N / C) * C distinct items. */
static void
test_shuffle_drop_last(void **state)
{
    struct ipuof_dataloader_opts o = {.batch_size = 2, .device_iterations = 2, .shuffle = 1,
                                      .seed = 5};
    const struct ipuof_batch *b;
    unsigned char seen[10] = {0};
    struct synth s;
    ipuof_dataloader *dl;
    int used = 0;

    (void)state;
    synth_init(&s, 10);
    dl = synth_loader(&s, &o);
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        for (size_t k = 0; k < b->samples; k++) {
            int64_t y = item_of(b, k);

            assert_int_equal(seen[y], 0);
            seen[y] = 1;
            used++;
        }
    }
    assert_int_equal(used, 8);
    ipuof_dataloader_free(dl);
}

/* ---- async mode ------------------------------------------------------------------------ */

/* Reads three epochs (with a set_epoch back and a reset in the middle) from a sync and an
 * async loader of the same options and checks every batch is the same, byte for byte. */
static void
compare_modes(struct ipuof_dataloader_opts o)
{
    struct synth ss, sa;
    ipuof_dataloader *sync_dl, *async_dl;
    int batches = 0;

    synth_init(&ss, 103);
    synth_init(&sa, 103);
    o.mode = IPUOF_DATALOADER_SYNC;
    sync_dl = synth_loader(&ss, &o);
    o.mode = IPUOF_DATALOADER_ASYNC;
    async_dl = synth_loader(&sa, &o);
    for (int step = 0; step < 400; step++) {
        const struct ipuof_batch *bs, *ba;

        if (step == 57) {
            assert_int_equal(ipuof_dataloader_set_epoch(sync_dl, 1), IPUOF_OK);
            assert_int_equal(ipuof_dataloader_set_epoch(async_dl, 1), IPUOF_OK);
        }
        if (step == 91) {
            assert_int_equal(ipuof_dataloader_reset(sync_dl), IPUOF_OK);
            assert_int_equal(ipuof_dataloader_reset(async_dl), IPUOF_OK);
        }
        assert_int_equal(ipuof_dataloader_next(sync_dl, &bs), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_next(async_dl, &ba), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_epoch(sync_dl), ipuof_dataloader_epoch(async_dl));
        if (bs == NULL) {
            assert_null(ba);
            continue;
        }
        assert_non_null(ba);
        batches++;
        assert_int_equal(bs->epoch, ba->epoch);
        assert_int_equal(bs->index, ba->index);
        assert_int_equal(bs->samples, ba->samples);
        assert_int_equal(bs->n_tensors, ba->n_tensors);
        for (size_t t = 0; t < bs->n_tensors; t++) {
            assert_int_equal(bs->tensors[t].bytes, ba->tensors[t].bytes);
            assert_int_equal(bs->tensors[t].rank, ba->tensors[t].rank);
            assert_memory_equal(bs->tensors[t].dims, ba->tensors[t].dims,
                                sizeof bs->tensors[t].dims);
            assert_memory_equal(bs->tensors[t].data, ba->tensors[t].data,
                                bs->tensors[t].bytes);
        }
        for (size_t k = 0; k < ba->samples; k++)
            (void)item_of(ba, k);
    }
    assert_true(batches > 0);
    ipuof_dataloader_free(sync_dl);
    ipuof_dataloader_free(async_dl);
    /* The async loader called get() on its own thread only; the sync one on the caller's. */
    assert_int_equal(ss.off_thread, 0);
    assert_true(sa.calls > 0);
    assert_int_equal(sa.off_thread, sa.calls);
}

static void
test_async_matches_sync(void **state)
{
    struct ipuof_dataloader_opts o = {.batch_size = 2};

    (void)state;
    compare_modes(o);
    o.shuffle = 1;
    o.seed = 99;
    compare_modes(o);
    o.device_iterations = 3;
    o.replicas = 2;
    o.keep_last = 1;
    compare_modes(o);
    o.gradient_accumulation = 4;
    o.keep_last = 0;
    compare_modes(o);
    o.batch_size = 1;
    o.device_iterations = 1;
    o.replicas = 1;
    o.gradient_accumulation = 1;
    compare_modes(o);
}

/* ---- errors from get() ------------------------------------------------------------------ */

static void
test_get_error(void **state)
{
    static char why[] = "the disk is on fire";
    struct ipuof_dataloader_opts o = {.batch_size = 2, .user = why};
    const struct ipuof_batch *b;
    struct synth s;
    ipuof_dataloader *dl;

    (void)state;
    for (int async = 0; async <= 1; async++) {
        o.mode = async ? IPUOF_DATALOADER_ASYNC : IPUOF_DATALOADER_SYNC;
        synth_init(&s, 10);
        s.fail_at = 7;
        dl = synth_loader(&s, &o);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
            assert_non_null(b);
            assert_int_equal(b->index, i);
        }
        /* Batch 3 holds items 6 and 7: the failure, named, by the call that wanted it. */
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_E_IO);
        assert_null(b);
        print_message("  %s: %s\n", async ? "async" : "sync", ipuof_dataloader_errmsg(dl));
        assert_non_null(strstr(ipuof_dataloader_errmsg(dl), "item 7"));
        assert_non_null(strstr(ipuof_dataloader_errmsg(dl), "batch 3 of epoch 0"));
        assert_non_null(strstr(ipuof_dataloader_errmsg(dl), "the disk is on fire"));
        /* Still failing: the same batch fails again. The loader does not call get() while
         * it waits for the caller after a failure, so s may be changed now. */
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_E_IO);
        s.fail_at = (size_t)-1;
        /* Fixed: the same batch is tried again and the epoch goes on. */
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_string_equal(ipuof_dataloader_errmsg(dl), "");
        assert_non_null(b);
        assert_int_equal(b->index, 3);
        assert_int_equal(item_of(b, 1), 7);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(b->index, 4);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_null(b);
        ipuof_dataloader_free(dl);

        /* A code that is not a status is reported as IPUOF_E_IO, the raw value named. */
        synth_init(&s, 10);
        s.fail_at = 0;
        s.fail_code = 1000;
        dl = synth_loader(&s, &o);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_E_IO);
        assert_non_null(strstr(ipuof_dataloader_errmsg(dl), "(1000)"));
        ipuof_dataloader_free(dl);

        /* Another status passes through as it is. */
        synth_init(&s, 10);
        s.fail_at = 9;
        s.fail_code = IPUOF_E_NOMEM;
        o.keep_last = 1;
        o.batch_size = 3;
        dl = synth_loader(&s, &o);
        for (int i = 0; i < 3; i++)
            assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_E_NOMEM);
        assert_non_null(strstr(ipuof_dataloader_errmsg(dl), "item 9"));
        /* Moving elsewhere clears the failure. */
        assert_int_equal(ipuof_dataloader_set_epoch(dl, 0), IPUOF_OK);
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_int_equal(b->index, 0);
        ipuof_dataloader_free(dl);
        o.keep_last = 0;
        o.batch_size = 2;
    }
}

/* Freed in the middle of an epoch, right after creation, and with a batch held. */
static void
test_free_mid_epoch(void **state)
{
    struct ipuof_dataloader_opts o = {.batch_size = 4, .shuffle = 1,
                                      .mode = IPUOF_DATALOADER_ASYNC};
    const struct ipuof_batch *b;
    struct synth s;

    (void)state;
    synth_init(&s, 4096);
    for (int i = 0; i < 20; i++) {
        ipuof_dataloader *dl = synth_loader(&s, &o);

        for (int k = 0; k < i; k++)
            assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        ipuof_dataloader_free(dl);
    }
    ipuof_dataloader_free(NULL);
}

/* ---- the checks of ipuof_dataloader_new() ----------------------------------------------- */

static void
expect_new_error(const struct ipuof_dataset *d, const struct ipuof_dataloader_opts *o,
                 int code, const char *needle)
{
    char err[IPUOF_ERRBUF_SIZE];
    ipuof_dataloader *dl = (ipuof_dataloader *)(uintptr_t)1;

    assert_int_equal(ipuof_dataloader_new(d, o, &dl, err, sizeof err), code);
    assert_null(dl);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, needle));
}

static void
test_new_checks(void **state)
{
    struct ipuof_dataloader_opts o = {0};
    struct ipuof_field f[3];
    struct ipuof_dataset_ops no_get = {synth_length, NULL, NULL};
    const char *names[3] = {"input", NULL, "bytes"};
    const struct ipuof_batch *b;
    struct ipuof_dataset d;
    struct synth s;
    ipuof_dataloader *dl;

    (void)state;
    synth_init(&s, 10);
    d = synth_dataset(&s);
    expect_new_error(NULL, NULL, IPUOF_E_INVAL, "length() and get()");
    d.ops = &no_get;
    expect_new_error(&d, NULL, IPUOF_E_INVAL, "length() and get()");
    d = synth_dataset(&s);
    o.mode = 7;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "unknown data loader mode 7");
    o.mode = 0;
    d.n_fields = 0;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "1 to 16 fields");
    memcpy(f, synth_fields, sizeof f);
    d.fields = f;
    d.n_fields = 3;
    f[1].dtype = 42;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "field 'y' has dtype 42");
    f[1].dtype = IPUOF_DTYPE_INT64;
    f[0].rank = 8;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "rank 8");
    f[0].rank = 2;
    f[0].dims[1] = 0;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "dim 1 of 0");
    f[0].dims[1] = 3;
    f[2].name = "x";
    expect_new_error(&d, &o, IPUOF_E_INVAL, "fields 0 and 2 are both called 'x'");
    f[2].name = NULL;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "field 2 has no name");
    f[2].name = "u";
    synth_init(&s, 0);
    expect_new_error(&d, &o, IPUOF_E_INVAL, "empty");
    synth_init(&s, 10);
    o.batch_size = 1u << 31;
    o.device_iterations = 1u << 31;
    o.replicas = 1u << 31;
    expect_new_error(&d, &o, IPUOF_E_INVAL, "too large");
    assert_int_equal(ipuof_dataloader_new(&d, NULL, NULL, NULL, 0), IPUOF_E_INVAL);

    /* names: the batch's tensors carry them (NULL entries keep the field's). */
    memset(&o, 0, sizeof o);
    o.names = names;
    dl = synth_loader(&s, &o);
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_string_equal(b->tensors[0].name, "input");
    assert_string_equal(b->tensors[1].name, "y");
    assert_string_equal(b->tensors[2].name, "bytes");
    assert_int_equal(b->samples, 1); /* batch_size 0 means 1 */
    ipuof_dataloader_free(dl);

    /* NULL handles. */
    assert_int_equal(ipuof_dataloader_next(NULL, &b), IPUOF_E_INVAL);
    assert_null(b);
    assert_int_equal(ipuof_dataloader_set_epoch(NULL, 1), IPUOF_E_INVAL);
    assert_int_equal(ipuof_dataloader_combined_batch_size(NULL), 0);
    assert_non_null(ipuof_dataloader_errmsg(NULL));
}

/* ---- IDX files ---------------------------------------------------------------------------- */

static char tmpdir[64];

static int
make_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ipuof-idx-XXXXXX");
    return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int
remove_tmpdir(void **state)
{
    static const char *const files[] = {
        "img", "lab", "img.gz", "lab.gz", "bad", "cut", "extra", "lab9", "int", "cut.gz",
        "bad.gz", "empty", "img4",
    };
    char path[128];

    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
        unlink(path);
    }
    rmdir(tmpdir);
    return 0;
}

static const char *
tmp(const char *name)
{
    static char paths[4][128];
    static int next;
    char *p = paths[next++ % 4];

    snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
    return p;
}

#define IDX_N 5
#define IDX_ROWS 3
#define IDX_COLS 4

/* Writes an IDX file: magic, dims[0..ndims) big-endian, then data[0..len), plain or
 * gzip-compressed. */
static void
write_idx(const char *path, uint32_t magic, const uint32_t *dims, int ndims,
          const void *data, size_t len, int gzip)
{
    unsigned char head[16];
    size_t hl = 0;

    for (int i = -1; i < ndims; i++) {
        uint32_t v = i < 0 ? magic : dims[i];

        head[hl++] = (unsigned char)(v >> 24);
        head[hl++] = (unsigned char)(v >> 16);
        head[hl++] = (unsigned char)(v >> 8);
        head[hl++] = (unsigned char)v;
    }
    if (gzip) {
        gzFile g = gzopen(path, "wb");

        assert_non_null(g);
        assert_int_equal(gzwrite(g, head, (unsigned)hl), (int)hl);
        if (len > 0)
            assert_int_equal(gzwrite(g, data, (unsigned)len), (int)len);
        assert_int_equal(gzclose(g), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");

        assert_non_null(f);
        assert_int_equal(fwrite(head, 1, hl, f), hl);
        if (len > 0)
            assert_int_equal(fwrite(data, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
}

static uint8_t idx_pixels[IDX_N * IDX_ROWS * IDX_COLS];
static uint8_t idx_labels[IDX_N] = {3, 1, 4, 1, 5};

static void
write_small_set(void)
{
    uint32_t idims[3] = {IDX_N, IDX_ROWS, IDX_COLS}, ldims[1] = {IDX_N};

    for (size_t i = 0; i < sizeof idx_pixels; i++)
        idx_pixels[i] = (uint8_t)(i * 37 % 256);
    write_idx(tmp("img"), 0x803, idims, 3, idx_pixels, sizeof idx_pixels, 0);
    write_idx(tmp("lab"), 0x801, ldims, 1, idx_labels, sizeof idx_labels, 0);
    write_idx(tmp("img.gz"), 0x803, idims, 3, idx_pixels, sizeof idx_pixels, 1);
    write_idx(tmp("lab.gz"), 0x801, ldims, 1, idx_labels, sizeof idx_labels, 1);
}

/* Opens images and labels and checks every item against what write_small_set() wrote. */
static void
check_small_set(const char *images, const char *labels, float mean, float std, size_t limit)
{
    struct ipuof_idx_opts io = {.mean = mean, .std = std, .limit = limit};
    struct ipuof_dataloader_opts lo = {.batch_size = 1};
    size_t n = limit != 0 && limit < IDX_N ? limit : IDX_N;
    char err[IPUOF_ERRBUF_SIZE];
    const struct ipuof_batch *b;
    ipuof_idx_dataset *d = NULL;
    struct ipuof_dataset ds;
    ipuof_dataloader *dl = NULL;

    assert_int_equal(ipuof_idx_dataset_open(images, labels, &io, &d, err, sizeof err),
                     IPUOF_OK);
    assert_string_equal(err, "");
    assert_int_equal(ipuof_idx_dataset_length(d), n);
    ipuof_idx_dataset_describe(d, &ds);
    assert_int_equal(ds.n_fields, labels != NULL ? 2 : 1);
    assert_string_equal(ds.fields[0].name, "image");
    assert_int_equal(ds.fields[0].dtype, IPUOF_DTYPE_FLOAT);
    assert_int_equal(ds.fields[0].rank, 3);
    assert_int_equal(ds.fields[0].dims[0], 1);
    assert_int_equal(ds.fields[0].dims[1], IDX_ROWS);
    assert_int_equal(ds.fields[0].dims[2], IDX_COLS);
    if (labels != NULL) {
        assert_string_equal(ds.fields[1].name, "label");
        assert_int_equal(ds.fields[1].dtype, IPUOF_DTYPE_INT64);
        assert_int_equal(ds.fields[1].rank, 0);
    }
    assert_int_equal(ipuof_dataloader_new(&ds, &lo, &dl, err, sizeof err), IPUOF_OK);
    for (size_t i = 0; i < n; i++) {
        const float *px;

        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
        assert_non_null(b);
        px = b->tensors[0].data;
        for (size_t p = 0; p < IDX_ROWS * IDX_COLS; p++) {
            float want = ((float)idx_pixels[i * IDX_ROWS * IDX_COLS + p] / 255.0f - mean) /
                         (std != 0.0f ? std : 1.0f);

            assert_true(px[p] == want);
        }
        if (labels != NULL) {
            int64_t y;

            memcpy(&y, b->tensors[1].data, sizeof y);
            assert_int_equal(y, idx_labels[i]);
        }
    }
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_null(b);
    ipuof_dataloader_free(dl);
    ipuof_idx_dataset_free(d);
}

static void
test_idx_read(void **state)
{
    (void)state;
    write_small_set();
    check_small_set(tmp("img"), tmp("lab"), 0.0f, 0.0f, 0);
    check_small_set(tmp("img.gz"), tmp("lab.gz"), 0.0f, 1.0f, 0);
    check_small_set(tmp("img.gz"), tmp("lab"), 0.1307f, 0.3081f, 0);
    check_small_set(tmp("img"), tmp("lab.gz"), 0.5f, 2.0f, 3);
    check_small_set(tmp("img.gz"), NULL, 0.0f, 1.0f, 2);
    check_small_set(tmp("img"), NULL, 0.0f, 1.0f, 99);
    ipuof_idx_dataset_free(NULL);
    assert_int_equal(ipuof_idx_dataset_length(NULL), 0);
}

static void
expect_idx_error(const char *images, const char *labels, const struct ipuof_idx_opts *o,
                 int code, const char *needle, const char *needle2)
{
    char err[IPUOF_ERRBUF_SIZE];
    ipuof_idx_dataset *d = (ipuof_idx_dataset *)(uintptr_t)1;

    assert_int_equal(ipuof_idx_dataset_open(images, labels, o, &d, err, sizeof err), code);
    assert_null(d);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, needle));
    if (needle2 != NULL)
        assert_non_null(strstr(err, needle2));
}

/* Writes the first len bytes of file from into file to. */
static void
copy_prefix(const char *from, const char *to, long len)
{
    FILE *in = fopen(from, "rb");
    FILE *out = fopen(to, "wb");
    char buf[4096];
    size_t n;

    assert_non_null(in);
    assert_non_null(out);
    n = fread(buf, 1, sizeof buf, in);
    assert_true((long)n >= len);
    assert_int_equal(fwrite(buf, 1, (size_t)len, out), (size_t)len);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

static long
file_size(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return (long)st.st_size;
}

static void
test_idx_errors(void **state)
{
    uint32_t idims[3] = {IDX_N, IDX_ROWS, IDX_COLS}, nine[1] = {9};
    uint32_t four[3] = {4, IDX_ROWS, IDX_COLS}, huge[3] = {1u << 29, 1, 1};
    struct ipuof_idx_opts nan_opts = {.mean = NAN};
    uint8_t extra[sizeof idx_pixels + 3] = {0};
    FILE *f;

    (void)state;
    write_small_set();
    expect_idx_error(tmp("nothing"), NULL, NULL, IPUOF_E_NOTFOUND, "nothing", "cannot open");
    expect_idx_error(tmpdir, NULL, NULL, IPUOF_E_INVAL, "not a regular file", NULL);
    expect_idx_error(tmp("img"), tmp("nothing"), NULL, IPUOF_E_NOTFOUND,
                     "IDX label file", "nothing");
    /* Bad magic, and files swapped. */
    write_idx(tmp("bad"), 0x12345678, idims, 3, idx_pixels, sizeof idx_pixels, 0);
    expect_idx_error(tmp("bad"), NULL, NULL, IPUOF_E_INVAL, "is not an IDX image file",
                     "0x12345678, not 0x00000803");
    expect_idx_error(tmp("lab"), tmp("img"), NULL, IPUOF_E_INVAL, "lab' is an IDX file of 1 "
                     "dimension (magic 0x00000801)", "is it a label file?");
    expect_idx_error(tmp("img"), tmp("img"), NULL, IPUOF_E_INVAL, "is it an image file?",
                     NULL);
    /* Another element type. */
    write_idx(tmp("int"), 0x0C03, idims, 3, idx_pixels, sizeof idx_pixels, 0);
    expect_idx_error(tmp("int"), NULL, NULL, IPUOF_E_UNSUPPORTED, "32-bit integer", NULL);
    /* Truncated: inside the data, inside the header; extra bytes; empty. */
    copy_prefix(tmp("img"), tmp("cut"), file_size(tmp("img")) - 5);
    expect_idx_error(tmp("cut"), NULL, NULL, IPUOF_E_INVAL, "cut' is truncated",
                     "announces 5 images of 12 bytes (60 bytes of data) but only 55 bytes");
    copy_prefix(tmp("img"), tmp("cut"), 9);
    expect_idx_error(tmp("cut"), NULL, NULL, IPUOF_E_INVAL, "ends inside its 16-byte header",
                     NULL);
    write_idx(tmp("extra"), 0x803, idims, 3, extra, sizeof extra, 0);
    expect_idx_error(tmp("extra"), NULL, NULL, IPUOF_E_INVAL, "has bytes after the 5 images",
                     NULL);
    /* Even when a limit means the rest is not kept, it is checked. */
    {
        struct ipuof_idx_opts lim = {.limit = 2};

        copy_prefix(tmp("img"), tmp("cut"), file_size(tmp("img")) - 1);
        expect_idx_error(tmp("cut"), NULL, &lim, IPUOF_E_INVAL, "truncated", NULL);
    }
    f = fopen(tmp("empty"), "wb");
    assert_non_null(f);
    fclose(f);
    expect_idx_error(tmp("empty"), NULL, NULL, IPUOF_E_INVAL, "empty", NULL);
    /* Counts that differ, and caps. */
    write_idx(tmp("lab9"), 0x801, nine, 1, idx_labels, 5, 0);
    expect_idx_error(tmp("img"), tmp("lab9"), NULL, IPUOF_E_INVAL, "holds 5 images but label "
                     "file", "holds 9 labels");
    write_idx(tmp("img4"), 0x803, four, 3, idx_pixels, 4 * IDX_ROWS * IDX_COLS, 0);
    expect_idx_error(tmp("img4"), tmp("lab"), NULL, IPUOF_E_INVAL, "holds 4 images", NULL);
    write_idx(tmp("bad"), 0x803, huge, 3, NULL, 0, 0);
    expect_idx_error(tmp("bad"), NULL, NULL, IPUOF_E_INVAL, "announces 536870912 images",
                     NULL);
    /* Compressed files cut short or corrupt. */
    copy_prefix(tmp("img.gz"), tmp("cut.gz"), file_size(tmp("img.gz")) / 2);
    expect_idx_error(tmp("cut.gz"), NULL, NULL, IPUOF_E_INVAL, "cut.gz' is truncated", NULL);
    copy_prefix(tmp("img.gz"), tmp("cut.gz"), file_size(tmp("img.gz")) - 4);
    expect_idx_error(tmp("cut.gz"), NULL, NULL, IPUOF_E_INVAL, "truncated", NULL);
    {
        long n = file_size(tmp("img.gz"));
        unsigned char buf[4096];
        FILE *in = fopen(tmp("img.gz"), "rb");

        assert_non_null(in);
        assert_int_equal(fread(buf, 1, (size_t)n, in), (size_t)n);
        fclose(in);
        buf[n - 6] ^= 0xff; /* the CRC */
        in = fopen(tmp("bad.gz"), "wb");
        assert_non_null(in);
        assert_int_equal(fwrite(buf, 1, (size_t)n, in), (size_t)n);
        fclose(in);
        expect_idx_error(tmp("bad.gz"), NULL, NULL, IPUOF_E_IO, "corrupt compressed data",
                         NULL);
    }
    /* Arguments. */
    expect_idx_error(tmp("img"), NULL, &nan_opts, IPUOF_E_INVAL, "finite", NULL);
    expect_idx_error(NULL, NULL, NULL, IPUOF_E_INVAL, "images_path is NULL", NULL);
}

/* The Fashion-MNIST test set Debian's dataset-fashion-mnist installs, when it is there. */
static void
test_idx_fashion_mnist(void **state)
{
    static const char images[] = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
    static const char labels[] = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
    static const int64_t first_labels[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    struct ipuof_idx_opts io = {0};
    struct ipuof_dataloader_opts lo = {.batch_size = 100};
    char err[IPUOF_ERRBUF_SIZE];
    const struct ipuof_batch *b;
    ipuof_idx_dataset *d = NULL;
    struct ipuof_dataset ds;
    ipuof_dataloader *dl = NULL;
    size_t batches = 0, counts[10] = {0};
    double sum = 0;

    (void)state;
    if (access(images, R_OK) != 0 || access(labels, R_OK) != 0) {
        fail_msg("no %s: install dataset-fashion-mnist (make deps does)", images);
    }
    assert_int_equal(ipuof_idx_dataset_open(images, labels, &io, &d, err, sizeof err),
                     IPUOF_OK);
    assert_int_equal(ipuof_idx_dataset_length(d), 10000);
    ipuof_idx_dataset_describe(d, &ds);
    assert_int_equal(ds.fields[0].dims[1], 28);
    assert_int_equal(ds.fields[0].dims[2], 28);

    /* In order: the first labels and the first image's pixel sum (33456 / 255) are the
     * file's, and every class has its 1000 items. */
    assert_int_equal(ipuof_dataloader_new(&ds, &lo, &dl, err, sizeof err), IPUOF_OK);
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        const int64_t *y = b->tensors[1].data;

        if (batches == 0) {
            const float *px = b->tensors[0].data;

            assert_memory_equal(y, first_labels, sizeof first_labels);
            for (int p = 0; p < 28 * 28; p++)
                sum += px[p];
        }
        for (size_t k = 0; k < b->samples; k++) {
            assert_true(y[k] >= 0 && y[k] <= 9);
            counts[y[k]]++;
        }
        batches++;
    }
    assert_int_equal(batches, 100);
    assert_true(sum * 255.0 > 33455.9 && sum * 255.0 < 33456.1);
    for (int c = 0; c < 10; c++)
        assert_int_equal(counts[c], 1000);
    ipuof_dataloader_free(dl);

    /* Shuffled, async, 16 x 10 per call: 62 batches, the last 80 items dropped. */
    lo.batch_size = 16;
    lo.device_iterations = 10;
    lo.shuffle = 1;
    lo.mode = IPUOF_DATALOADER_ASYNC;
    assert_int_equal(ipuof_dataloader_new(&ds, &lo, &dl, err, sizeof err), IPUOF_OK);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), 62);
    batches = 0;
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        const int64_t *y = b->tensors[1].data;

        assert_int_equal(b->tensors[0].dims[0], 160);
        for (size_t k = 0; k < b->samples; k++)
            assert_true(y[k] >= 0 && y[k] <= 9);
        batches++;
    }
    assert_int_equal(batches, 62);
    ipuof_dataloader_free(dl);
    ipuof_idx_dataset_free(d);

    /* A limit for a quick run. */
    io.limit = 100;
    assert_int_equal(ipuof_idx_dataset_open(images, labels, &io, &d, err, sizeof err),
                     IPUOF_OK);
    assert_int_equal(ipuof_idx_dataset_length(d), 100);
    ipuof_idx_dataset_free(d);
}

/* ---- batches to a model on a real ipuofd ------------------------------------------------- */

#define RUN_B 2
#define RUN_D 3

/* "out" = x * 1 + 0.5 with x [RUN_B, 2, 3]: ONNX bytes (caller frees). */
static void
plus_half_model(void **out, size_t *len)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t dx[3] = {RUN_B, 2, 3}, dh[1] = {1};
    float half = 0.5f;

    assert_non_null(b);
    sim_ob_input(b, "x", IPUOF_DTYPE_FLOAT, 3, dx);
    sim_ob_initializer(b, "half", IPUOF_DTYPE_FLOAT, 1, dh, &half);
    sim_ob_node(b, "Add", "add", "x,half", "out");
    sim_ob_output(b, "out", IPUOF_DTYPE_FLOAT);
    assert_int_equal(sim_ob_serialize(b, out, len), 0);
    sim_ob_free(b);
}

/* The only-x view of the synthetic dataset, for a model with one input. */
static const struct ipuof_field x_field[1] = {{"x", IPUOF_DTYPE_FLOAT, 2, {2, 3}}};

static void
test_batches_run_on_daemon(void **state)
{
    static struct testd d;
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    struct ipuof_model_opts mo = {.name = "loader", .device_iterations = RUN_D};
    struct ipuof_dataloader_opts lo = {.batch_size = RUN_B, .device_iterations = RUN_D,
                                       .shuffle = 1, .seed = 3,
                                       .mode = IPUOF_DATALOADER_ASYNC};
    struct ipuof_dataset ds;
    const struct ipuof_batch *b;
    struct ipuof_tensor t;
    struct synth s;
    ipuof_client *c;
    ipuof_model *m = NULL;
    ipuof_dataloader *dl;
    void *onnx = NULL;
    size_t len = 0;
    int runs = 0;

    (void)state;
    if (testd_start(&d, NULL, NULL) != 0) {
        fail_msg("could not start ipuofd (IPUOFD_BIN, default build/bin/ipuofd): "
                 "a daemon that does not start is a failure");
    }
    testd_live = &d;
    plus_half_model(&onnx, &len);
    c = ipuof_client_new();
    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &ao, NULL, 0, NULL), IPUOF_OK);
    assert_int_equal(ipuof_model_compile(c, onnx, len, &mo, &m), IPUOF_OK);

    synth_init(&s, 40);
    s.x_only = 1;
    ds.ops = &synth_ops;
    ds.ds = &s;
    ds.fields = x_field;
    ds.n_fields = 1;
    {
        char err[IPUOF_ERRBUF_SIZE];

        assert_int_equal(ipuof_dataloader_new(&ds, &lo, &dl, err, sizeof err), IPUOF_OK);
    }
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        const float *x = b->tensors[0].data, *y;

        assert_int_equal(ipuof_model_run(m, b->tensors, b->n_tensors), IPUOF_OK);
        assert_int_equal(ipuof_model_output(m, 0, &t), IPUOF_OK);
        assert_int_equal(t.dims[0], RUN_B * RUN_D);
        y = t.data;
        for (size_t i = 0; i < b->samples * X_ELEMS; i++)
            assert_true(y[i] == x[i] + 0.5f);
        runs++;
    }
    assert_int_equal(runs, 40 / (RUN_B * RUN_D));
    ipuof_dataloader_free(dl);
    ipuof_model_free(m);
    ipuof_client_free(c);
    free(onnx);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_counts),
        cmocka_unit_test(test_drop_last_and_keep_last),
        cmocka_unit_test(test_epochs),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_shuffle_golden),
        cmocka_unit_test(test_shuffle_drop_last),
        cmocka_unit_test(test_async_matches_sync),
        cmocka_unit_test(test_get_error),
        cmocka_unit_test(test_free_mid_epoch),
        cmocka_unit_test(test_new_checks),
        cmocka_unit_test(test_idx_read),
        cmocka_unit_test(test_idx_errors),
        cmocka_unit_test(test_idx_fashion_mnist),
        cmocka_unit_test_teardown(test_batches_run_on_daemon, testd_stop_live),
    };

    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}

/*
 * test_dataloader_dist.c — the data loader in a job of several processes: every process
 * shuffles with the same seed and takes its replicas' rows of the job's combined batch, so
 * the processes together cover each epoch exactly once, in exactly the rows one process
 * with all the replicas would fill; the process id and count come from the options or from
 * the launchers' environment variables (IPUOF_*, Open MPI, PopRun), and bad values are
 * refused with the variable named. The rebatched mode (PopTorch's AsyncRebatched): the
 * reference's example of 100 samples, 7 workers and batch 4 uses all 100 samples (25
 * batches), in the order the synchronous mode gives, with get() on 7 threads; a failing
 * get() names its item.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipuof/client.h"

/* Item i is one int64 holding i. */
static size_t
ds_length(void *ds)
{
    return *(size_t *)ds;
}

static int
ds_get(void *ds, size_t index, void *const *outs, void *user)
{
    int64_t v = (int64_t)index;

    (void)ds;
    (void)user;
    memcpy(outs[0], &v, sizeof v);
    return IPUOF_OK;
}

static const struct ipuof_dataset_ops ops = {ds_length, ds_get, NULL};

/* The rebatched dataset: records the threads that call get(); item fail_at fails. */
static pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t threads[64];
static size_t n_threads;
static size_t fail_at = (size_t)-1;

static int
ds_get_mt(void *ds, size_t index, void *const *outs, void *user)
{
    size_t i;

    pthread_mutex_lock(&threads_mu);
    for (i = 0; i < n_threads && !pthread_equal(threads[i], pthread_self()); i++)
        ;
    if (i == n_threads && n_threads < 64)
        threads[n_threads++] = pthread_self();
    pthread_mutex_unlock(&threads_mu);
    if (index == fail_at)
        return IPUOF_E_IO;
    return ds_get(ds, index, outs, user);
}

static const struct ipuof_dataset_ops ops_mt = {ds_length, ds_get_mt, NULL};
static const struct ipuof_field field = {"y", IPUOF_DTYPE_INT64, 0, {0}};

static ipuof_dataloader *
loader(size_t *n, const struct ipuof_dataloader_opts *o, int expect)
{
    struct ipuof_dataset d = {&ops, n, &field, 1};
    ipuof_dataloader *dl = NULL;
    char err[IPUOF_ERRBUF_SIZE];
    int rc = ipuof_dataloader_new(&d, o, &dl, err, sizeof err);

    if (rc != expect)
        print_message("ipuof_dataloader_new: %s\n", err);
    assert_int_equal(rc, expect);
    return dl;
}

/* Reads every batch of epoch e into out (samples in order); returns their count. */
static size_t
read_epoch(ipuof_dataloader *dl, uint64_t e, int64_t *out, size_t cap)
{
    const struct ipuof_batch *b;
    size_t got = 0;

    assert_int_equal(ipuof_dataloader_set_epoch(dl, e), IPUOF_OK);
    while (ipuof_dataloader_next(dl, &b) == IPUOF_OK && b != NULL) {
        assert_true(got + b->samples <= cap);
        memcpy(out + got, b->tensors[0].data, b->samples * sizeof *out);
        got += b->samples;
    }
    return got;
}

/* Two processes x R replicas cover an epoch once, in the rows of one process x 2R. */
static void
test_epoch_coverage(void **state)
{
    enum { N = 1003, B = 3, D = 2, A = 2, R = 2, P = 2 };
    static int64_t one[N], part[P][N];
    static unsigned char seen[N];
    size_t n = N, per = (size_t)B * D * A * R, calls, got1, got[P];
    struct ipuof_dataloader_opts o = {.batch_size = B, .device_iterations = D,
                                      .gradient_accumulation = A, .replicas = R * P,
                                      .shuffle = 1, .seed = 77, .num_processes = 1};
    ipuof_dataloader *single = loader(&n, &o, IPUOF_OK), *dl[P];

    (void)state;
    o.replicas = R;
    o.num_processes = P;
    for (unsigned p = 0; p < P; p++) {
        o.process_id = p;
        dl[p] = loader(&n, &o, IPUOF_OK);
        assert_int_equal(ipuof_dataloader_combined_batch_size(dl[p]), per);
        assert_int_equal(ipuof_dataloader_batches_per_epoch(dl[p]), N / (per * P));
    }
    for (uint64_t e = 0; e < 2; e++) {
        got1 = read_epoch(single, e, one, N);
        for (unsigned p = 0; p < P; p++)
            got[p] = read_epoch(dl[p], e, part[p], N);
        calls = N / (per * P);
        assert_int_equal(got1, calls * per * P);
        memset(seen, 0, sizeof seen);
        for (unsigned p = 0; p < P; p++) {
            assert_int_equal(got[p], calls * per);
            for (size_t k = 0; k < got[p]; k++) {
                /* local sample k is step k / (R B) of call k / per, replica rows of p */
                size_t call = k / per, in = k % per, step = in / (R * B);
                size_t at = call * per * P + step * R * B * P + p * R * B + in % (R * B);
                assert_int_equal(part[p][k], one[at]);
                assert_true(part[p][k] >= 0 && part[p][k] < N);
                assert_int_equal(seen[part[p][k]], 0); /* exactly once */
                seen[part[p][k]] = 1;
            }
        }
    }
    print_message("epoch of %d items: %zu calls of %zu samples per process, %d processes\n",
                  N, calls, per, P);
    for (unsigned p = 0; p < P; p++)
        ipuof_dataloader_free(dl[p]);
    ipuof_dataloader_free(single);
}

static void
clear_env(void)
{
    static const char *const vars[] = {
        "IPUOF_PROCESS_ID", "IPUOF_NUM_PROCESSES", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "POPDIST_REPLICA_INDEX_OFFSET", "POPDIST_NUM_TOTAL_REPLICAS",
        "POPDIST_NUM_LOCAL_REPLICAS"};

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

/* IPUOF_* first, then Open MPI's, then PopRun's; bad values named. */
static void
test_process_env(void **state)
{
    unsigned id = 99, n = 99;
    char err[256];

    (void)state;
    clear_env();
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_OK);
    assert_int_equal(id, 0);
    assert_int_equal(n, 1);
    setenv("POPDIST_REPLICA_INDEX_OFFSET", "4", 1);
    setenv("POPDIST_NUM_TOTAL_REPLICAS", "8", 1);
    setenv("POPDIST_NUM_LOCAL_REPLICAS", "2", 1);
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_OK);
    assert_int_equal(id, 2);
    assert_int_equal(n, 4);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_OK);
    assert_int_equal(id, 1);
    assert_int_equal(n, 3);
    setenv("IPUOF_PROCESS_ID", "0", 1);
    setenv("IPUOF_NUM_PROCESSES", "2", 1);
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_OK);
    assert_int_equal(id, 0);
    assert_int_equal(n, 2);
    setenv("IPUOF_PROCESS_ID", "2", 1);
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "process id 2 is out of range for 2 processes"));
    setenv("IPUOF_PROCESS_ID", "x1", 1);
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "IPUOF_PROCESS_ID is 'x1'"));
    unsetenv("IPUOF_PROCESS_ID");
    assert_int_equal(ipuof_process_env(&id, &n, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "IPUOF_NUM_PROCESSES is set but IPUOF_PROCESS_ID is not"));
    clear_env();
}

/* A loader with num_processes 0 takes its share from the environment. */
static void
test_loader_from_env(void **state)
{
    size_t n = 64;
    struct ipuof_dataloader_opts o = {.batch_size = 4};
    ipuof_dataloader *dl;
    int64_t got[64];

    (void)state;
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    dl = loader(&n, &o, IPUOF_OK);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), 8);
    assert_int_equal(read_epoch(dl, 0, got, 64), 32);
    assert_int_equal(got[0], 4); /* rows 4..7 of the first combined batch of 8 */
    assert_int_equal(got[4], 12);
    ipuof_dataloader_free(dl);
    o.keep_last = 1;
    assert_null(loader(&n, &o, IPUOF_E_INVAL));
    setenv("OMPI_COMM_WORLD_RANK", "one", 1);
    o.keep_last = 0;
    assert_null(loader(&n, &o, IPUOF_E_INVAL));
    clear_env();
}

/* 100 samples, 7 workers, batch 4: 25 batches, every sample once, as in sync mode. */
static void
test_rebatched(void **state)
{
    size_t n = 100;
    struct ipuof_dataset d = {&ops_mt, &n, &field, 1};
    struct ipuof_dataloader_opts o = {.batch_size = 4, .shuffle = 1, .seed = 5,
                                      .num_processes = 1,
                                      .mode = IPUOF_DATALOADER_ASYNC_REBATCHED, .workers = 7};
    ipuof_dataloader *dl = NULL, *sync;
    int64_t got[100], want[100];
    unsigned char seen[100] = {0};
    const struct ipuof_batch *b;
    char err[IPUOF_ERRBUF_SIZE];

    (void)state;
    n_threads = 0;
    assert_int_equal(ipuof_dataloader_new(&d, &o, &dl, err, sizeof err), IPUOF_OK);
    assert_int_equal(ipuof_dataloader_batches_per_epoch(dl), 25);
    assert_int_equal(read_epoch(dl, 0, got, 100), 100);
    for (size_t k = 0; k < 100; k++) {
        assert_true(got[k] >= 0 && got[k] < 100);
        assert_int_equal(seen[got[k]]++, 0);
    }
    o.mode = IPUOF_DATALOADER_SYNC;
    sync = loader(&n, &o, IPUOF_OK);
    assert_int_equal(read_epoch(sync, 0, want, 100), 100);
    assert_memory_equal(got, want, sizeof got);
    print_message("rebatched: 100 samples in 25 batches of 4, get() on %zu threads\n",
                  n_threads);
    assert_int_equal(n_threads, 7);
    /* a failing get() names its item, and the loader goes on after it */
    fail_at = (size_t)want[42];
    assert_int_equal(ipuof_dataloader_set_epoch(dl, 0), IPUOF_OK);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_OK);
    assert_int_equal(ipuof_dataloader_next(dl, &b), IPUOF_E_IO);
    snprintf(err, sizeof err, "failed on item %zu (sample 2 of batch 10 of epoch 0)", fail_at);
    assert_non_null(strstr(ipuof_dataloader_errmsg(dl), err));
    fail_at = (size_t)-1;
    ipuof_dataloader_free(dl);
    ipuof_dataloader_free(sync);
    o.mode = IPUOF_DATALOADER_ASYNC_REBATCHED;
    o.workers = IPUOF_DATALOADER_MAX_WORKERS + 1;
    assert_null(loader(&n, &o, IPUOF_E_INVAL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_coverage),
        cmocka_unit_test(test_process_env),
        cmocka_unit_test(test_loader_from_env),
        cmocka_unit_test(test_rebatched),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * pool.c — the process-wide host thread pool (see pool.h).
 *
 * Workers out of work spin a while (SPIN_US_DEFAULT, yielding the CPU every few
 * microseconds) on the count of listed jobs, then sleep on a condition variable until a
 * caller lists a job. A job is a range cut into pieces; the caller and every worker that
 * joins take pieces with an atomic counter, so a busy or descheduled worker never holds
 * the caller up beyond the piece it took. The
 * job lives on the caller's stack: the caller unlists it and waits until every worker that
 * joined has left before returning. Several callers (IPU threads) may list jobs at once;
 * idle workers join the oldest job that still has pieces.
 */
#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

#define POOL_MAX_THREADS 256
#define PIECES_PER_THREAD 4        /* pieces per thread: evens out uneven or shared cores */
#define SGEMM_MIN_FLOPS 1000000.0  /* m * n * k below which a split gains nothing: measured
                                    * with the workers spinning, least of 300 calls on 2
                                    * threads, mobilenets' pointwise shapes: 0.8 M 0.99x,
                                    * 1.2-1.8 M 1.2-1.4x, 2.4-7 M 1.3-1.75x */
#define SPIN_US_DEFAULT 50         /* a worker out of work, or a caller waiting for its
                                    * helpers, spins this long before sleeping: a network's
                                    * ops follow each other within microseconds, and a
                                    * futex wake-up costs about as much as a small piece;
                                    * IPUOF_SIM_SPIN_US overrides (0: sleep at once) */

struct pool_job {
    sim_pool_fn fn;
    void *ctx;
    int64_t n, pieces;
    atomic_int_fast64_t next;      /* next piece to take */
    atomic_int helpers;            /* workers inside the job (changed under mu) */
    bool waiting;                  /* the caller sleeps on done (under mu) */
    bool listed;
    struct pool_job *next_job;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work;           /* a job was listed */
    pthread_cond_t done;           /* a worker left a job */
    struct pool_job *head, *tail;
    int threads;                   /* callers count as one: workers = threads - 1 */
    atomic_int listed;             /* jobs ever listed (wraps): spinning workers watch it */
    int64_t spin_ns;               /* how long a spin lasts (set at start) */
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
           NULL, NULL, 1, 0, SPIN_US_DEFAULT * 1000 };

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Thread_local bool in_pool;  /* inside a piece: nested parallel-fors run serially */

/* One pause of a spin loop. */
static inline void
spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t
mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Spins up to pool.spin_ns until (*v == value) is `equal`; returns whether it came true.
 * Every few microseconds it yields the CPU to any other thread waiting for it (a spin must
 * not slow a loaded machine: with nothing else runnable sched_yield returns at once).
 */
static bool
spin_until(atomic_int *v, int value, bool equal)
{
    int64_t t0 = mono_ns();

    for (unsigned i = 1;; i++) {
        if ((atomic_load_explicit(v, memory_order_acquire) == value) == equal)
            return true;
        if (pool.spin_ns == 0)
            return false;
        spin_pause();
        if ((i & 63) == 0) {
            sched_yield();
            if (mono_ns() - t0 > pool.spin_ns)
                return false;
        }
    }
}

/* Takes and runs pieces of job until none is left. */
static void
run_pieces(struct pool_job *job)
{
    for (;;) {
        int64_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->pieces)
            return;
        job->fn(job->ctx, i * job->n / job->pieces, (i + 1) * job->n / job->pieces);
    }
}

/* Removes job from the list; pool.mu held. */
static void
unlist_locked(struct pool_job *job)
{
    struct pool_job **pp = &pool.head, *prev = NULL;

    if (!job->listed)
        return;
    while (*pp != job) {
        prev = *pp;
        pp = &(*pp)->next_job;
    }
    *pp = job->next_job;
    if (pool.tail == job)
        pool.tail = prev;
    job->listed = false;
}

/* A worker: joins listed jobs forever; out of work, spins a while, then sleeps. */
static void *
worker_main(void *arg)
{
    (void)arg;
    in_pool = true;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        struct pool_job *job = pool.head;
        if (job == NULL) {
            int seen = atomic_load_explicit(&pool.listed, memory_order_relaxed);
            bool more;
            pthread_mutex_unlock(&pool.mu);
            more = spin_until(&pool.listed, seen, false);
            pthread_mutex_lock(&pool.mu);
            if (!more && pool.head == NULL)
                pthread_cond_wait(&pool.work, &pool.mu);
            continue;
        }
        if (atomic_load(&job->next) >= job->pieces) {
            unlist_locked(job);
            continue;
        }
        atomic_fetch_add(&job->helpers, 1);
        pthread_mutex_unlock(&pool.mu);
        run_pieces(job);
        pthread_mutex_lock(&pool.mu);
        unlist_locked(job);
        if (atomic_fetch_sub(&job->helpers, 1) == 1 && job->waiting)
            pthread_cond_broadcast(&pool.done);
    }
    return NULL;
}

/* The cores this process may run on, or IPUOF_SIM_THREADS when set (1 .. 256). */
static int
machine_threads(void)
{
    const char *env = getenv("IPUOF_SIM_THREADS");
    cpu_set_t set;
    long n = 0;

    if (env != NULL && *env != '\0') {
        char *end;
        n = strtol(env, &end, 10);
        if (*end != '\0' || n < 1)
            n = 0;
    }
    if (n == 0 && sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)n;
}

/* Starts the workers (once); a worker that cannot be created shrinks the pool. */
static void
pool_start(void)
{
    int want = machine_threads(), have = 1;
    const char *spin = getenv("IPUOF_SIM_SPIN_US");
    pthread_attr_t attr;

    if (spin != NULL && *spin != '\0') {
        char *end;
        long us = strtol(spin, &end, 10);
        if (*end == '\0' && us >= 0 && us <= 1000000)
            pool.spin_ns = (int64_t)us * 1000;
    }
    openblas_set_num_threads(1);
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (; have < want; have++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker_main, NULL) != 0)
            break;
    }
    pthread_attr_destroy(&attr);
    pool.threads = have;
}

int
sim_pool_threads(void)
{
    pthread_once(&pool_once, pool_start);
    return pool.threads;
}

void
sim_pool_for(int64_t n, int64_t grain, sim_pool_fn fn, void *ctx)
{
    struct pool_job job;
    int threads = sim_pool_threads();
    int64_t pieces;

    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (in_pool || threads == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    pieces = (n + grain - 1) / grain;
    if (pieces > (int64_t)threads * PIECES_PER_THREAD)
        pieces = (int64_t)threads * PIECES_PER_THREAD;
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.pieces = pieces;
    atomic_init(&job.next, 0);
    atomic_init(&job.helpers, 0);
    job.waiting = false;
    job.listed = true;
    job.next_job = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.tail != NULL)
        pool.tail->next_job = &job;
    else
        pool.head = &job;
    pool.tail = &job;
    atomic_fetch_add_explicit(&pool.listed, 1, memory_order_release);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);

    in_pool = true;
    run_pieces(&job);
    in_pool = false;

    pthread_mutex_lock(&pool.mu);
    unlist_locked(&job);
    if (atomic_load(&job.helpers) > 0) {
        /* a helper is finishing its last piece: usually a matter of microseconds */
        pthread_mutex_unlock(&pool.mu);
        spin_until(&job.helpers, 0, true);
        pthread_mutex_lock(&pool.mu);   /* the helper has let go of the job once we hold it */
        while (atomic_load(&job.helpers) > 0) {
            job.waiting = true;
            pthread_cond_wait(&pool.done, &pool.mu);
        }
    }
    pthread_mutex_unlock(&pool.mu);
}

/* ---- zeroing ------------------------------------------------------------------------------ */

#define ZERO_GRAIN ((int64_t)64 << 10)    /* bytes per piece: a hand-off costs about a
                                           * microsecond, a 64 KiB memset several */

static void
zero_piece(void *ctx, int64_t lo, int64_t hi)
{
    memset((char *)ctx + lo * ZERO_GRAIN, 0, (size_t)(hi - lo) * (size_t)ZERO_GRAIN);
}

void
sim_pool_zero(void *p, size_t bytes)
{
    int64_t whole = (int64_t)(bytes / (size_t)ZERO_GRAIN);
    size_t tail = bytes - (size_t)whole * (size_t)ZERO_GRAIN;

    if (whole < 2) {
        memset(p, 0, bytes);
        return;
    }
    sim_pool_for(whole, 1, zero_piece, p);
    if (tail > 0)
        memset((char *)p + (size_t)whole * (size_t)ZERO_GRAIN, 0, tail);
}

/* ---- split sgemm ------------------------------------------------------------------------ */

struct sgemm_job {
    bool ta, tb, split_n;
    int64_t m, n, k, lda, ldb, ldc, unit;
    float alpha, beta;
    const float *a, *b;
    float *c;
};

/* Rows (or columns) [lo, hi) of C, in units of j->unit. */
static void
sgemm_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct sgemm_job *j = ctx;
    int64_t s = lo * j->unit, e = hi * j->unit;
    const float *a = j->a, *b = j->b;
    float *c = j->c;

    if (j->split_n) {
        e = e > j->n ? j->n : e;
        b += j->tb ? s * j->ldb : s;
        c += s;
        cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
                    j->tb ? CblasTrans : CblasNoTrans, (int)j->m, (int)(e - s), (int)j->k,
                    j->alpha, a, (int)j->lda, b, (int)j->ldb, j->beta, c, (int)j->ldc);
    } else {
        e = e > j->m ? j->m : e;
        a += j->ta ? s : s * j->lda;
        c += s * j->ldc;
        cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
                    j->tb ? CblasTrans : CblasNoTrans, (int)(e - s), (int)j->n, (int)j->k,
                    j->alpha, a, (int)j->lda, b, (int)j->ldb, j->beta, c, (int)j->ldc);
    }
}

void
sim_pool_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
               float *c, int64_t ldc)
{
    struct sgemm_job j = { ta, tb, n >= m, m, n, k, lda, ldb, ldc, 0, alpha, beta, a, b, c };
    int threads = sim_pool_threads();
    int64_t len = j.split_n ? n : m, units;

    if (m <= 0 || n <= 0)
        return;
    j.unit = j.split_n ? 16 : 4;   /* whole register blocks per piece */
    units = (len + j.unit - 1) / j.unit;
    if (units < 4 * (int64_t)threads) {
        /* too few blocks to share evenly (the tutorial's first weight gradient, 25 columns:
         * 16 + 9 in whole blocks, 12 + 13 column by column); each element's sum over k is
         * the same whichever piece computes it */
        j.unit = 1;
        units = len;
    }
    if (threads == 1 || in_pool || (double)m * (double)n * (double)k < SGEMM_MIN_FLOPS ||
        units < 2) {
        sgemm_piece(&j, 0, units);
        return;
    }
    sim_pool_for(units, (units + threads - 1) / threads, sgemm_piece, &j);
}

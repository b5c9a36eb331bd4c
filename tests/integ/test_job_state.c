/*
 * test_job_state.c — what a job of several processes holds is accounted as the job's, on a
 * real ipuofd through the client library: the run buffers of the job's models count
 * against host_memory (a second model over the limit is refused to every process, naming
 * the limit), ipuctl's status shows the job's models loaded on its IPUs and their host
 * memory, and freeing a model in every process takes it off the IPUs. (Before jobs held
 * their models, a job's models counted for nothing: the second model compiled and the
 * status showed nothing loaded.)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipuof/client.h"
#include "testd.h"
#include "testmodels.h"

static struct testd d;
static pthread_barrier_t compiled, checked, freed;

/* One process of the two-process job and what it saw. */
struct proc {
    unsigned id;
    int rc_attach, rc_first, rc_second;
    char second_msg[1024];
};

static void *
job_process(void *arg)
{
    struct proc *p = arg;
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = 2, .partition_name = "acct",
                                   .process_id = p->id, .num_processes = 2};
    /* 5000 device iterations of a [1, 1000] Relu: 20 MB in and 20 MB out per process's
     * view; 40 MB of the job's run buffers for the 2 global replicas' 2 x 5000 steps. */
    struct ipuof_model_opts o = {.device_iterations = 5000};
    ipuof_model *m1 = NULL, *m2 = NULL;
    size_t len = 0;
    void *bytes = testmodel_relu(1, 1, 1000, -1, &len);

    p->rc_attach = c == NULL || bytes == NULL ? IPUOF_E_NOMEM : ipuof_client_connect(c, d.addr);
    if (p->rc_attach == IPUOF_OK)
        p->rc_attach = ipuof_attach(c, &ao, NULL, 0, NULL);
    if (p->rc_attach == IPUOF_OK)
        p->rc_first = ipuof_model_compile(c, bytes, len, &o, &m1);
    if (p->rc_attach == IPUOF_OK && p->rc_first == IPUOF_OK) {
        o.no_cache = 1; /* a second executable: another 80 MB, over the 128 MiB */
        p->rc_second = ipuof_model_compile(c, bytes, len, &o, &m2);
        snprintf(p->second_msg, sizeof p->second_msg, "%s", ipuof_client_errmsg(c));
    }
    pthread_barrier_wait(&compiled);
    pthread_barrier_wait(&checked); /* the test reads the status with the job still whole */
    ipuof_model_free(m1);
    ipuof_model_free(m2);
    pthread_barrier_wait(&freed);
    pthread_barrier_wait(&checked);
    ipuof_client_free(c);
    free(bytes);
    return NULL;
}

/* IPU i of a status report. */
static struct ipuof_ipu_info
ipu(unsigned i)
{
    ipuof_client *c = ipuof_client_new();
    ipuof_status_report *rep = NULL;
    struct ipuof_ipu_info in;
    static char loaded[2][256];

    assert_non_null(c);
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(ipuof_status(c, &rep), IPUOF_OK);
    assert_int_equal(ipuof_status_report_ipu(rep, i, &in), IPUOF_OK);
    snprintf(loaded[i % 2], sizeof loaded[0], "%s", in.loaded ? in.loaded : "");
    in.loaded = loaded[i % 2]; /* the report's strings go with it */
    ipuof_status_report_free(rep);
    ipuof_client_free(c);
    return in;
}

static void
test_job_models_are_the_jobs(void **state)
{
    struct proc p[2] = {{.id = 0}, {.id = 1}};
    pthread_t t[2];
    struct ipuof_ipu_info in0, in1;

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nhost_memory = 128MiB\n", NULL), 0);
    pthread_barrier_init(&compiled, NULL, 3);
    pthread_barrier_init(&checked, NULL, 3);
    pthread_barrier_init(&freed, NULL, 3);
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&t[k], NULL, job_process, &p[k]), 0);
    pthread_barrier_wait(&compiled);
    in0 = ipu(0);
    in1 = ipu(1);
    pthread_barrier_wait(&checked);
    pthread_barrier_wait(&freed);
    for (int k = 0; k < 2; k++) {
        print_message("process %d: attach %s, first model %s, second model %s: %s\n", k,
                      ipuof_status_name(p[k].rc_attach), ipuof_status_name(p[k].rc_first),
                      ipuof_status_name(p[k].rc_second), p[k].second_msg);
        assert_int_equal(p[k].rc_attach, IPUOF_OK);
        assert_int_equal(p[k].rc_first, IPUOF_OK);
        assert_int_equal(p[k].rc_second, IPUOF_E_TOO_LARGE);
        assert_non_null(strstr(p[k].second_msg, "host_memory"));
    }
    print_message("with the job's model: IPU 0 loaded '%s', host memory %llu; IPU 1 loaded "
                  "'%s'\n", in0.loaded, (unsigned long long)in0.host_memory_used_bytes,
                  in1.loaded);
    assert_string_equal(in0.loaded, "model"); /* the graph's name */
    assert_string_equal(in1.loaded, "model");
    assert_int_equal(in0.host_memory_used_bytes, 80000000);
    in0 = ipu(0);
    print_message("after every process freed it: IPU 0 loaded '%s', host memory %llu\n",
                  in0.loaded, (unsigned long long)in0.host_memory_used_bytes);
    assert_string_equal(in0.loaded, "");
    assert_int_equal(in0.host_memory_used_bytes, 0);
    pthread_barrier_wait(&checked);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    pthread_barrier_destroy(&compiled);
    pthread_barrier_destroy(&checked);
    pthread_barrier_destroy(&freed);
    assert_int_equal(testd_stop(&d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_models_are_the_jobs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

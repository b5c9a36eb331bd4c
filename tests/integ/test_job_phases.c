/*
 * test_job_phases.c — a job's phases (daemon/jobs/jobs_sm.c) on a real ipuofd through the client
 * library: two processes attach and compile one model; while process 0's run waits for
 * process 1's slice (the job gathers run inputs), process 1 sends a compile, which the job
 * cannot take in that phase: it is refused at once with IPUOF_E_STATE naming the phase,
 * and the job goes on: process 1 then runs, and both get Relu of their own inputs.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipuof/client.h"
#include "testd.h"
#include "testmodels.h"

static struct testd d;
static pthread_barrier_t compiled, gathering;

struct proc {
    unsigned id;
    int rc_attach, rc_compile, rc_refused, rc_run;
    char refused_msg[1024];
    float out[4];
};

static void *
job_process(void *arg)
{
    struct proc *p = arg;
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts ao = {.num_ipus = 2, .partition_name = "phases",
                                   .process_id = p->id, .num_processes = 2};
    struct ipuof_model_opts o = {0};
    ipuof_model *m = NULL, *m2 = NULL;
    size_t len = 0;
    void *bytes = testmodel_relu(1, 1, 4, -1, &len);
    float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
    struct ipuof_tensor in = {.name = "x0", .dtype = IPUOF_DTYPE_FLOAT, .rank = 2,
                              .dims = {1, 4}, .data = x, .bytes = sizeof x};
    struct ipuof_tensor out;

    for (int i = 0; i < 4; i++)
        x[i] *= (float)(p->id + 1);
    p->rc_attach = c == NULL || bytes == NULL ? IPUOF_E_NOMEM : ipuof_client_connect(c, d.addr);
    if (p->rc_attach == IPUOF_OK)
        p->rc_attach = ipuof_attach(c, &ao, NULL, 0, NULL);
    if (p->rc_attach == IPUOF_OK)
        p->rc_compile = ipuof_model_compile(c, bytes, len, &o, &m);
    pthread_barrier_wait(&compiled);
    if (p->id == 1) {
        pthread_barrier_wait(&gathering); /* process 0's slice is in: the job gathers */
        p->rc_refused = ipuof_model_compile(c, bytes, len, &o, &m2);
        snprintf(p->refused_msg, sizeof p->refused_msg, "%s", ipuof_client_errmsg(c));
        ipuof_model_free(m2);
    }
    if (m != NULL)
        p->rc_run = ipuof_model_run(m, &in, 1);
    if (p->rc_run == IPUOF_OK && ipuof_model_output(m, 0, &out) == IPUOF_OK &&
        out.bytes == sizeof p->out)
        memcpy(p->out, out.data, sizeof p->out);
    ipuof_model_free(m);
    ipuof_client_free(c);
    free(bytes);
    return NULL;
}

static void
test_compile_while_run_gathers(void **state)
{
    const char *extra[] = {"--log-level", "debug", NULL};
    struct proc p[2] = {{.id = 0}, {.id = 1}};
    pthread_t t[2];
    int seen = 0;

    (void)state;
    assert_int_equal(testd_start(&d, NULL, extra), 0);
    pthread_barrier_init(&compiled, NULL, 3);
    pthread_barrier_init(&gathering, NULL, 2);
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&t[k], NULL, job_process, &p[k]), 0);
    pthread_barrier_wait(&compiled);
    /* job_step logs each phase change at debug level: wait until process 0's run request
     * moved the job to gather-run (a wait for a condition, up to 20 s, not a timing). */
    for (int i = 0; i < 2000 && !seen; i++) {
        seen = testd_log_contains(&d, "ready -> gather-run (run)");
        if (!seen)
            usleep(10000);
    }
    pthread_barrier_wait(&gathering);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    print_message("process 1's compile while the run gathers: %s: %s\n",
                  ipuof_status_name(p[1].rc_refused), p[1].refused_msg);
    assert_true(seen);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(p[k].rc_attach, IPUOF_OK);
        assert_int_equal(p[k].rc_compile, IPUOF_OK);
        assert_int_equal(p[k].rc_run, IPUOF_OK);
        for (int i = 0; i < 4; i++) {
            float x = (i % 2 ? 1.0f : -1.0f) * (float)(i + 1) * (float)(k + 1);
            assert_true(p[k].out[i] == (x > 0 ? x : 0.0f));
        }
    }
    assert_int_equal(p[1].rc_refused, IPUOF_E_STATE);
    assert_non_null(strstr(p[1].refused_msg, "gather-run"));
    assert_true(testd_log_contains(&d, "gather-run -> running (run-start)"));
    pthread_barrier_destroy(&compiled);
    pthread_barrier_destroy(&gathering);
    assert_int_equal(testd_stop(&d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_while_run_gathers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

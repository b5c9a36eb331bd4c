/*
 * test_faults_more.c — injected faults (issue 22) beyond the kind x trigger table of
 * test_faults.c, each on a real ipuofd with 2 IPUs: a hung IPU holds its request (the
 * daemon serving others meanwhile) until a reset answers it; a host-sync-timeout waits
 * its --wait before it answers; a fault at attach or load reaches every process of a job
 * of two; --rearm-on-reset and --duration; faults from the config's [faults] inject
 * lines; and daemon-kill (the client gets an error of its connection, a daemon started
 * again on the same port serves, as systemd's Restart= would have it).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "faultcase.h"
#include "testd.h"

static struct testd d;

static const char two_ipus[] = "[devices]\nipus = 2\n";

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Arms kind at trigger at on IPU ipu (or partition part when ipu < 0) with the extras. */
static void
inject(ipuof_client *admin, const char *kind, const char *at, int ipu, const char *part,
       unsigned wait_ms, uint64_t duration_ms, int rearm)
{
    struct ipuof_fault f = {.wait_ms = wait_ms, .duration_ms = duration_ms,
                            .rearm_on_reset = rearm};

    if (ipu >= 0) {
        f.has_ipu = 1;
        f.ipu = (unsigned)ipu;
    } else {
        snprintf(f.partition, sizeof f.partition, "%s", part);
    }
    snprintf(f.kind, sizeof f.kind, "%s", kind);
    snprintf(f.at, sizeof f.at, "%s", at);
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_OK);
}

/* A victim in a thread: attaches IPU 0's partition "victim", compiles and runs once. */
struct victim {
    const char *addr;
    _Atomic int rc;              /* -1 until done; read by the main thread meanwhile */
    uint64_t ms;                 /* how long the run took */
    char msg[600];
};

static void *
victim_run(void *arg)
{
    struct victim *v = arg;
    ipuof_client *c = fc_connect(v->addr);
    size_t len = 0;
    void *bytes = fc_add_model(&len);
    ipuof_model *m = NULL;
    const float x[4] = {1, 1, 1, 1};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {1, 4}, x, sizeof x};
    uint64_t t0;
    int rc = fc_attach1(c, "victim", NULL);

    if (rc == IPUOF_OK)
        rc = ipuof_model_compile(c, bytes, len, NULL, &m);
    if (rc == IPUOF_OK) {
        t0 = now_ms();
        rc = ipuof_model_run(m, &in, 1);
        v->ms = now_ms() - t0;
    }
    snprintf(v->msg, sizeof v->msg, "%s", ipuof_client_errmsg(c));
    v->rc = rc;                  /* last: -1 until the run has its answer */
    ipuof_model_free(m);
    free(bytes);
    ipuof_client_free(c);
    return NULL;
}

/* Waits (up to 10 s) until IPU i is in error. */
static void
wait_error(unsigned i)
{
    int rec, unrec;
    char err[512];

    for (int k = 0; k < 1000; k++) {
        if (fc_ipu_state(d.addr, i, &rec, &unrec, err, sizeof err) == IPUOF_IPU_ERROR)
            return;
        usleep(10000);
    }
    fail_msg("IPU %u never went into error", i);
}

/* A hung IPU: the run is not answered; another client is served meanwhile; a reset of the
 * IPU (--force: the victim still holds it) answers the run with IPUOF_E_DEVICE_RESET. */
static void
test_hang_until_reset(void **state)
{
    ipuof_client *admin, *other;
    struct victim v = {0};
    pthread_t th;
    unsigned ipu = 9;
    int rec, unrec;
    char err[512];

    (void)state;
    assert_int_equal(testd_start(&d, two_ipus, NULL), 0);
    testd_live = &d;
    v.addr = d.addr;
    v.rc = -1;
    admin = fc_connect(d.admin_addr);
    inject(admin, "hang", "run", 0, NULL, 0, 0, 0);
    assert_int_equal(pthread_create(&th, NULL, victim_run, &v), 0);
    wait_error(0);
    assert_int_equal(fc_ipu_state(d.addr, 0, &rec, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
    assert_int_equal(rec, IPUOF_RECOVERY_IPU_RESET);
    assert_non_null(strstr(err, "does not answer (hung)"));
    other = fc_connect(d.addr);                      /* served while the victim waits */
    assert_int_equal(fc_attach1(other, NULL, &ipu), IPUOF_OK);
    assert_int_equal(ipu, 1);
    assert_int_equal(fc_compile_run(other, NULL), IPUOF_OK);
    ipuof_client_free(other);
    assert_int_equal(v.rc, -1);                      /* still waiting */
    assert_int_equal(ipuof_reset(admin, IPUOF_RESET_IPU, 0, NULL, 1, NULL), IPUOF_OK);
    pthread_join(th, NULL);
    assert_int_equal(v.rc, IPUOF_E_DEVICE_RESET);
    print_message("the hung run: %s\n", v.msg);
    assert_non_null(strstr(v.msg, "without an answer (hung)"));
    assert_int_equal(fc_ipu_state(d.addr, 0, &rec, &unrec, err, sizeof err), IPUOF_IPU_FREE);
    assert_true(testd_log_contains(&d, "recovered by a IPU_RESET"));
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* A host-sync-timeout with --wait answers after the wait, not before. */
static void
test_host_sync_waits(void **state)
{
    ipuof_client *admin;
    struct victim v = {0};
    int rec, unrec;
    char err[512];

    (void)state;
    assert_int_equal(testd_start(&d, two_ipus, NULL), 0);
    testd_live = &d;
    v.addr = d.addr;
    admin = fc_connect(d.admin_addr);
    inject(admin, "host-sync-timeout", "run", 0, NULL, 1500, 0, 0);
    victim_run(&v);
    print_message("the run waited %llu ms (--wait 1500): %s\n", (unsigned long long)v.ms, v.msg);
    assert_int_equal(v.rc, IPUOF_E_DEVICE_FAULT);
    assert_true(v.ms >= 1490); /* a timer does not fire early; the bound is not a speed */
    assert_non_null(strstr(v.msg, "still waiting for host sync after: 2 seconds"));
    assert_int_equal(fc_ipu_state(d.addr, 0, &rec, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
    assert_int_equal(rec, IPUOF_RECOVERY_IPU_RESET);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* One process of a job of two named "job": attaches (both IPUs), then compiles the add
 * model (both processes must: the job compiles once for all). */
struct proc {
    const char *addr;
    unsigned id;
    int compile;                 /* also compile */
    int attach_rc, compile_rc, cls, rec;
};

static void *
proc_run(void *arg)
{
    struct proc *p = arg;
    ipuof_client *c = fc_connect(p->addr);
    struct ipuof_attach_opts ao = {.num_ipus = 2, .partition_name = "job", .process_id = p->id,
                                   .num_processes = 2};
    const char *comp;

    assert_int_equal(ipuof_client_set_job_key(c, "faults-more"), IPUOF_OK);
    p->attach_rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    ipuof_client_last_error(c, &p->cls, &p->rec, &comp);
    if (p->attach_rc == IPUOF_OK && p->compile) {
        size_t len = 0;
        void *bytes = fc_add_model(&len);
        ipuof_model *m = NULL;
        p->compile_rc = ipuof_model_compile(c, bytes, len, NULL, &m);
        ipuof_client_last_error(c, &p->cls, &p->rec, &comp);
        ipuof_model_free(m);
        free(bytes);
    }
    ipuof_client_free(c);
    return NULL;
}

/* Runs both processes of the job to the end. */
static void
run_job(struct proc p[2], int compile)
{
    pthread_t th[2];

    for (unsigned i = 0; i < 2; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].addr = d.addr;
        p[i].id = i;
        p[i].compile = compile;
        assert_int_equal(pthread_create(&th[i], NULL, proc_run, &p[i]), 0);
    }
    for (unsigned i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
}

static void
test_job_of_two(void **state)
{
    ipuof_client *admin;
    struct proc p[2];
    int rec, unrec;
    char err[512];

    (void)state;
    assert_int_equal(testd_start(&d, two_ipus, NULL), 0);
    testd_live = &d;
    admin = fc_connect(d.admin_addr);
    /* at attach: both processes get the error; both IPUs of the job are in error */
    inject(admin, "recoverable:PARTITION_RESET", "attach", -1, "job", 0, 0, 0);
    run_job(p, 0);
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(p[i].attach_rc, IPUOF_E_DEVICE_FAULT);
        assert_int_equal(p[i].cls, IPUOF_ERROR_RECOVERABLE);
        assert_int_equal(p[i].rec, IPUOF_RECOVERY_PARTITION_RESET);
        assert_int_equal(fc_ipu_state(d.addr, i, &rec, &unrec, err, sizeof err),
                         IPUOF_IPU_ERROR);
    }
    assert_true(testd_log_contains(&d, "at attach) fired on job 'job' of 2 processes"));
    assert_int_equal(ipuof_reset(admin, IPUOF_RESET_PARTITION, 0, "job", 0, NULL), IPUOF_OK);
    /* at load: both processes' compiles get the error */
    inject(admin, "soc-error", "load", -1, "job", 0, 0, 0);
    run_job(p, 1);
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(p[i].attach_rc, IPUOF_OK);
        assert_int_equal(p[i].compile_rc, IPUOF_E_DEVICE_FAULT);
        assert_int_equal(p[i].rec, IPUOF_RECOVERY_IPU_RESET);
    }
    assert_true(testd_log_contains(&d, "(soc-error at load) fired on job 'job'"));
    assert_int_equal(ipuof_reset(admin, IPUOF_RESET_PARTITION, 0, "job", 0, NULL), IPUOF_OK);
    run_job(p, 1);                                   /* and then the job works */
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(p[i].compile_rc, IPUOF_OK);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* Runs the add model once on a fresh attach of IPU 0; returns the run's status. After a
 * failure the IPU is reset, as a program's recovery would. */
static int
one_run(ipuof_client *admin)
{
    ipuof_client *c = fc_connect(d.addr);
    int rc;

    assert_int_equal(fc_attach1(c, NULL, NULL), IPUOF_OK);
    rc = fc_compile_run(c, NULL);
    ipuof_client_free(c);
    if (rc != IPUOF_OK) {
        fc_wait_unheld(d.addr, 0);
        assert_int_equal(ipuof_reset(admin, IPUOF_RESET_IPU, 0, NULL, 0, NULL), IPUOF_OK);
    }
    return rc;
}

static void
test_rearm_and_duration(void **state)
{
    ipuof_client *admin;
    struct ipuof_fault listed[4];
    size_t n = 0;

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nipus = 1\n", NULL), 0);
    testd_live = &d;
    admin = fc_connect(d.admin_addr);
    /* --rearm-on-reset: every reset arms it again, so every run after one fails */
    inject(admin, "soc-error", "run", 0, NULL, 0, 0, 1);
    assert_int_equal(one_run(admin), IPUOF_E_DEVICE_FAULT);
    assert_int_equal(one_run(admin), IPUOF_E_DEVICE_FAULT);
    assert_int_equal(ipuof_fault_list(admin, listed, 4, &n), IPUOF_OK);
    assert_int_equal(n, 1);
    assert_int_equal(listed[0].rearmed, 2);
    assert_true(listed[0].rearm_on_reset);
    assert_int_equal(ipuof_fault_clear(admin, 0, NULL), IPUOF_OK);
    /* without it, fired once and spent */
    inject(admin, "soc-error", "run", 0, NULL, 0, 0, 0);
    assert_int_equal(one_run(admin), IPUOF_E_DEVICE_FAULT);
    assert_int_equal(one_run(admin), IPUOF_OK);
    assert_int_equal(ipuof_fault_clear(admin, 0, NULL), IPUOF_OK);
    /* --duration: past it the fault does not fire, and is listed as expired */
    inject(admin, "recoverable:IPU_RESET", "run", 0, NULL, 0, 1, 0);
    usleep(20000);
    assert_int_equal(one_run(admin), IPUOF_OK);
    assert_int_equal(ipuof_fault_list(admin, listed, 4, &n), IPUOF_OK);
    assert_true(listed[0].expired);
    assert_int_equal(listed[0].fired, 0);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* [faults] inject lines arm faults at start; a bad one stops the daemon, naming it. */
static void
test_config_faults(void **state)
{
    ipuof_client *admin;
    struct ipuof_fault listed[4];
    size_t n = 0;

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nipus = 2\n[faults]\n"
                                 "inject = {\"ipu\": 0, \"kind\": \"soc-error\", \"at\": \"run\"}\n"
                                 "inject = {\"ipu\": 1, \"kind\": \"hang\", \"at\": \"load\"}\n",
                                 NULL), 0);
    testd_live = &d;
    admin = fc_connect(d.admin_addr);
    assert_int_equal(ipuof_fault_list(admin, listed, 4, &n), IPUOF_OK);
    assert_int_equal(n, 2);
    assert_string_equal(listed[0].kind, "soc-error");
    assert_string_equal(listed[1].at, "load");
    assert_int_equal(one_run(admin), IPUOF_E_DEVICE_FAULT);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);

    assert_int_not_equal(testd_start(&d, "[faults]\ninject = {\"kind\": \"hung\"}\n", NULL), 0);
    assert_true(testd_log_contains(&d, "the config's [faults] inject number 1 entry 0: fault "
                                   "kind 'hung' is not known"));
    testd_stop(&d);
}

/* daemon-kill: the daemon dies as a SIGKILL kills it; the client's call fails with an
 * error of its connection (PopTorch's package makes it RecoverableError PARTITION_RESET);
 * a daemon started again on the port serves the client once it reconnects. */
static void
test_daemon_kill(void **state)
{
    ipuof_client *admin, *c;
    char listen[64];
    int cls, rec, rc;
    const char *comp;

    (void)state;
    assert_int_equal(testd_start(&d, two_ipus, NULL), 0);
    testd_live = &d;
    admin = fc_connect(d.admin_addr);
    inject(admin, "daemon-kill", "run", 0, NULL, 0, 0, 0);
    c = fc_connect(d.addr);
    assert_int_equal(fc_attach1(c, NULL, NULL), IPUOF_OK);
    rc = fc_compile_run(c, NULL);
    assert_true(rc == IPUOF_E_CLOSED || rc == IPUOF_E_IO);
    ipuof_client_last_error(c, &cls, &rec, &comp);
    assert_string_equal(comp, "connection");
    assert_true(testd_log_contains(&d, "ipuofd dies now as if killed (SIGKILL)"));
    snprintf(listen, sizeof listen, "127.0.0.1:%d", d.port);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 128 + 9);       /* killed by SIGKILL */
    assert_int_equal(testd_start_listen(&d, listen, two_ipus, NULL), 0);   /* restarted */
    testd_live = &d;
    assert_int_equal(ipuof_client_connect(c, d.addr), IPUOF_OK);
    assert_int_equal(fc_attach1(c, NULL, NULL), IPUOF_OK);
    assert_int_equal(fc_compile_run(c, NULL), IPUOF_OK);
    ipuof_client_free(c);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_hang_until_reset, testd_stop_live),
        cmocka_unit_test_teardown(test_host_sync_waits, testd_stop_live),
        cmocka_unit_test_teardown(test_job_of_two, testd_stop_live),
        cmocka_unit_test_teardown(test_rearm_and_duration, testd_stop_live),
        cmocka_unit_test_teardown(test_config_faults, testd_stop_live),
        cmocka_unit_test_teardown(test_daemon_kill, testd_stop_live),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

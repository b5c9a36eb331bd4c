/*
 * test_faults.c — injected faults (ipuctl fault, issue 22) on a real ipuofd with 2 IPUs,
 * table-driven over kind x trigger (11 kinds x attach, compile, load, weights, run; a kind
 * that cannot happen at attach is refused there): the faulted client gets the error class,
 * recovery action and Poplar's text of the kind (or its connection is cut, or, for a
 * hang, no answer until its own timeout), another client attached meanwhile keeps
 * being served (compiles and runs), the IPU shows the error and the reset it needs in the
 * status, an attach that only the faulted IPU blocks is refused with that recovery, a
 * reset below the fault's level is refused and leaves the error, the right one clears it,
 * and IPU 0 can be attached and run on again (kinds that leave the IPU fine: the victim
 * goes on at once). The daemon is stopped at the end and must
 * exit 0 (under SAN=1 LeakSanitizer makes a leak an exit status). Also IPUOF_FAULTS.
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
#include "faultcase.h"
#include "testd.h"

static struct testd d;

struct row {
    const char *kind;
    int rc;             /* what the victim's request returns; -1: the connection is cut */
    int cls;            /* expected error class (for IPUOF_E_DEVICE_FAULT) */
    int recovery;       /* expected recovery action (and the IPU's need) */
    int weak_scope;     /* a reset too weak to clear it: IPUOF_RESET_IPU/_PARTITION, -1 none */
    int scope;          /* the reset that clears it; -1: the IPU is not in error */
    const char *text;   /* in the victim's error sentence */
    int no_attach;      /* cannot be armed for attach */
};

static const char *const ats[] = {"attach", "compile", "load", "weights", "run"};

#define DF IPUOF_E_DEVICE_FAULT
#define REC IPUOF_ERROR_RECOVERABLE
static const struct row kinds[] = {
    {"recoverable:IPU_RESET", DF, REC, IPUOF_RECOVERY_IPU_RESET, -1, IPUOF_RESET_IPU,
     "[Recovery action: IPU_RESET] error on IPU 0", 0},
    {"recoverable:LINK_RESET", DF, REC, IPUOF_RECOVERY_LINK_RESET, IPUOF_RESET_IPU,
     IPUOF_RESET_PARTITION, "[Recovery action: LINK_RESET]", 0},
    {"recoverable:PARTITION_RESET", DF, REC, IPUOF_RECOVERY_PARTITION_RESET, IPUOF_RESET_IPU,
     IPUOF_RESET_PARTITION, "[Recovery action: PARTITION_RESET]", 0},
    {"recoverable:FULL_RESET", DF, REC, IPUOF_RECOVERY_FULL_RESET, IPUOF_RESET_PARTITION,
     IPUOF_RESET_ALL, "[Recovery action: FULL_RESET]", 0},
    {"unrecoverable", DF, IPUOF_ERROR_UNRECOVERABLE, IPUOF_RECOVERY_NONE,
     IPUOF_RESET_PARTITION, IPUOF_RESET_ALL, "unrecoverable_runtime_error", 0},
    {"host-sync-timeout", DF, REC, IPUOF_RECOVERY_IPU_RESET, -1, IPUOF_RESET_IPU,
     "IPUDevice: still waiting for host sync after: 0 seconds", 0},
    {"soc-error", DF, REC, IPUOF_RECOVERY_IPU_RESET, -1, IPUOF_RESET_IPU,
     "recoverable_runtime_error: [Recovery action: IPU_RESET] CIUERRVR.IPUSOFTERR error on "
     "IPU 0", 0},
    /* the request is not answered: the client's own timeout ends its wait */
    {"hang", IPUOF_E_TIMEOUT, 0, IPUOF_RECOVERY_IPU_RESET, -1, IPUOF_RESET_IPU, "did not answer",
     1},
    {"tile-oom", IPUOF_E_DEVICE_OOM, IPUOF_ERROR_PLAIN, IPUOF_RECOVERY_NONE, -1, -1,
     "poplar_graph_memory_allocation_error: Out of memory on tile 0: ", 1},
    {"stream-oom", IPUOF_E_DEVICE_OOM, IPUOF_ERROR_PLAIN, IPUOF_RECOVERY_NONE, -1, -1,
     "poplar_stream_memory_allocation_error: Out of memory. Single stream of length", 1},
    {"fabric-disconnect", -1, -1, IPUOF_RECOVERY_NONE, -1, -1, NULL, 0},
};
#undef DF
#undef REC

/* The victim's request at trigger at; returns its status. */
static int
victim_steps(ipuof_client *v, const char *at)
{
    size_t len = 0;
    void *bytes;
    ipuof_model *m = NULL;
    const float w[4] = {0};
    int rc = fc_attach1(v, "victim", NULL);

    if (strcmp(at, "attach") == 0 || rc != IPUOF_OK)
        return rc;
    bytes = fc_add_model(&len);
    rc = ipuof_model_compile(v, bytes, len, NULL, &m); /* compile, then load */
    free(bytes);
    if (strcmp(at, "compile") == 0 || strcmp(at, "load") == 0 || rc != IPUOF_OK)
        return rc;
    if (strcmp(at, "weights") == 0) {
        rc = ipuof_model_write_weight(m, "w", w, sizeof w);
    } else {
        const float x[4] = {1, 1, 1, 1};
        struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {1, 4}, x, sizeof x};
        rc = ipuof_model_run(m, &in, 1);
    }
    ipuof_model_free(m);
    return rc;
}

static void
one_case(const struct row *k, const char *at)
{
    ipuof_client *admin = fc_connect(d.admin_addr);
    ipuof_client *v = fc_connect(d.addr);
    ipuof_client *other, *again;
    struct ipuof_fault f = {.has_ipu = 1, .ipu = 0};
    struct ipuof_fault listed[8];
    int cls = -1, rec = -1, rec_need, unrec = 0;
    const char *comp = NULL;
    char err[512];
    size_t n = 0;
    unsigned ipu = 9;
    int rc;

    print_message("case %s at %s\n", k->kind, at);
    snprintf(f.kind, sizeof f.kind, "%s", k->kind);
    snprintf(f.at, sizeof f.at, "%s", at);
    assert_int_equal(ipuof_fault_clear(admin, 0, NULL), IPUOF_OK);
    if (k->no_attach && strcmp(at, "attach") == 0) { /* refused, saying why */
        assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_E_INVAL);
        assert_non_null(strstr(ipuof_client_errmsg(admin), "cannot happen at attach"));
        ipuof_client_free(v);
        ipuof_client_free(admin);
        return;
    }
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_OK);
    if (k->rc == IPUOF_E_TIMEOUT) /* its "host-sync timeout" ends the wait for a hung IPU */
        assert_int_equal(ipuof_client_set_timeouts(v, 5000, 3000), IPUOF_OK);

    rc = victim_steps(v, at);
    if (k->rc < 0) {
        assert_true(rc == IPUOF_E_CLOSED || rc == IPUOF_E_IO);
        ipuof_client_free(v);
        v = NULL;
    } else {
        assert_int_equal(rc, k->rc);
        if (k->text != NULL && strstr(ipuof_client_errmsg(v), k->text) == NULL)
            fail_msg("'%s' is not in '%s'", k->text, ipuof_client_errmsg(v));
        if (k->rc != IPUOF_E_TIMEOUT) {
            ipuof_client_last_error(v, &cls, &rec, &comp);
            assert_int_equal(cls, k->cls);
            assert_int_equal(rec, k->recovery);
            snprintf(err, sizeof err, "%s at %s)", k->kind, at); /* "(injected fault N, KIND at AT)" */
            if (strstr(ipuof_client_errmsg(v), err) == NULL)
                fail_msg("'%s' is not in '%s'", err, ipuof_client_errmsg(v));
        } else { /* gave up: its connection is closed, so the daemon frees its partition */
            ipuof_client_free(v);
            v = NULL;
            fc_wait_unheld(d.addr, 0);
        }
    }
    /* The fault is listed as fired. */
    assert_int_equal(ipuof_fault_list(admin, listed, 8, &n), IPUOF_OK);
    assert_int_equal(n, 1);
    assert_int_equal(listed[0].fired, 1);

    /* Another client is served meanwhile: it gets IPU 1 (or, after a cut, any: the cut
     * client's IPU went back to the pool) and compiles and runs. */
    other = fc_connect(d.addr);
    assert_int_equal(fc_attach1(other, NULL, &ipu), IPUOF_OK);
    if (k->rc >= 0)
        assert_int_equal(ipu, 1);
    assert_int_equal(fc_compile_run(other, NULL), IPUOF_OK);

    if (k->scope < 0) { /* no IPU went into error */
        assert_int_not_equal(fc_ipu_state(d.addr, 0, &rec_need, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
        assert_int_not_equal(fc_ipu_state(d.addr, 1, &rec_need, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
        if (v != NULL && strcmp(at, "attach") != 0) /* the victim goes on (fired once) */
            assert_int_equal(fc_compile_run(v, NULL), IPUOF_OK);
        ipuof_client_free(v);
        ipuof_client_free(other);
        ipuof_client_free(admin);
        return;
    }
    /* IPU 0 is in error with the reset it needs. */
    assert_int_equal(fc_ipu_state(d.addr, 0, &rec_need, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
    assert_int_equal(rec_need, k->recovery != IPUOF_RECOVERY_NONE ? k->recovery
                                                                 : IPUOF_RECOVERY_FULL_RESET);
    assert_int_equal(unrec, k->cls == IPUOF_ERROR_UNRECOVERABLE);
    assert_non_null(strstr(err, "injected fault"));

    /* The victim's next request on its partition is refused the same way. */
    if (v != NULL && strcmp(at, "attach") != 0) {
        assert_int_equal(fc_compile_run(v, NULL), IPUOF_E_DEVICE_FAULT);
        ipuof_client_last_error(v, &cls, &rec, &comp);
        assert_int_equal(cls, k->cls);
        assert_int_equal(rec, k->recovery);
        assert_int_equal(ipuof_detach(v), IPUOF_OK);
    }
    /* With IPU 1 held, only IPU 0's error stands in the way of an attach: refused with
     * the recovery it needs. */
    again = fc_connect(d.addr);
    assert_int_equal(fc_attach1(again, NULL, NULL), IPUOF_E_DEVICE_FAULT);
    ipuof_client_last_error(again, &cls, &rec, &comp);
    assert_int_equal(cls, k->rc == IPUOF_E_TIMEOUT ? IPUOF_ERROR_RECOVERABLE : k->cls);
    assert_int_equal(rec, k->recovery);
    ipuof_client_free(other); /* IPU 1 free again: a reset --all needs no --force */

    if (k->weak_scope >= 0) {
        rc = ipuof_reset(admin, k->weak_scope, 0, "victim", 0, NULL);
        assert_int_equal(rc, IPUOF_E_STATE);
        assert_non_null(strstr(ipuof_client_errmsg(admin), "stronger"));
        assert_int_equal(fc_ipu_state(d.addr, 0, &rec_need, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
    }
    assert_int_equal(ipuof_reset(admin, k->scope, 0, "victim", 0, NULL), IPUOF_OK);
    assert_int_equal(fc_ipu_state(d.addr, 0, &rec_need, &unrec, err, sizeof err), IPUOF_IPU_FREE);
    assert_int_equal(rec_need, IPUOF_RECOVERY_NONE);
    assert_string_equal(err, "");
    /* Attached and used again (the fault fired its one time). */
    assert_int_equal(fc_attach1(again, NULL, &ipu), IPUOF_OK);
    assert_int_equal(ipu, 0);
    assert_int_equal(fc_compile_run(again, NULL), IPUOF_OK);
    ipuof_client_free(again);
    ipuof_client_free(v);
    ipuof_client_free(admin);
}

static void
test_kind_x_trigger(void **state)
{
    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nipus = 2\n", NULL), 0);
    testd_live = &d;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t a = 0; a < sizeof ats / sizeof ats[0]; a++)
            one_case(&kinds[k], ats[a]);
    assert_true(testd_log_contains(&d, "fired on client"));
    assert_true(testd_log_contains(&d, "recovered by a"));
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* An attach that waited in the queue meets a fault at attach as one served at once. */
struct waiting {
    int rc, cls, rec;
};

static void *
wait_attach(void *arg)
{
    struct waiting *w = arg;
    ipuof_client *c = fc_connect(d.addr);
    struct ipuof_attach_opts ao = {.num_ipus = 1, .wait = 1, .wait_timeout_ms = 10000};
    const char *comp;

    w->rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    ipuof_client_last_error(c, &w->cls, &w->rec, &comp);
    ipuof_client_free(c);
    return NULL;
}

static void
test_attach_from_queue(void **state)
{
    ipuof_client *admin, *holder;
    struct ipuof_attach_opts all = {.num_ipus = 2};
    struct ipuof_fault f = {.has_ipu = 1, .ipu = 0};
    struct waiting w = {0};
    pthread_t th;
    int rec, unrec;
    char err[512];

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nipus = 2\n", NULL), 0);
    testd_live = &d;
    admin = fc_connect(d.admin_addr);
    holder = fc_connect(d.addr);
    assert_int_equal(ipuof_attach(holder, &all, NULL, 0, NULL), IPUOF_OK);
    snprintf(f.kind, sizeof f.kind, "recoverable:IPU_RESET");
    snprintf(f.at, sizeof f.at, "attach");
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_OK);
    assert_int_equal(pthread_create(&th, NULL, wait_attach, &w), 0);
    for (int i = 0; i < 500; i++) { /* until the attach waits in the queue */
        ipuof_status_report *r = NULL;
        unsigned waiting;
        assert_int_equal(ipuof_status(admin, &r), IPUOF_OK);
        waiting = ipuof_status_report_waiting(r);
        ipuof_status_report_free(r);
        if (waiting == 1)
            break;
        usleep(10000);
    }
    assert_int_equal(ipuof_detach(holder), IPUOF_OK); /* serves the queue: IPU 0 */
    pthread_join(th, NULL);
    assert_int_equal(w.rc, IPUOF_E_DEVICE_FAULT);
    assert_int_equal(w.cls, IPUOF_ERROR_RECOVERABLE);
    assert_int_equal(w.rec, IPUOF_RECOVERY_IPU_RESET);
    assert_int_equal(fc_ipu_state(d.addr, 0, &rec, &unrec, err, sizeof err), IPUOF_IPU_ERROR);
    assert_int_equal(rec, IPUOF_RECOVERY_IPU_RESET);
    ipuof_client_free(holder);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* A bad fault is refused with a sentence naming what is right; nothing is armed. */
static void
test_bad_faults(void **state)
{
    ipuof_client *admin, *plain;
    struct ipuof_fault f = {.has_ipu = 1, .ipu = 0};
    size_t n = 9;

    (void)state;
    assert_int_equal(testd_start(&d, "[devices]\nipus = 2\n", NULL), 0);
    testd_live = &d;
    admin = fc_connect(d.admin_addr);
    plain = fc_connect(d.addr);
    snprintf(f.kind, sizeof f.kind, "recoverable:IPU_RESET");
    assert_int_equal(ipuof_fault_inject(plain, &f, NULL), IPUOF_E_AUTH);
    snprintf(f.kind, sizeof f.kind, "recoverable:PARITION_RESET");
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_E_INVAL);
    assert_non_null(strstr(ipuof_client_errmsg(admin), "PARTITION_RESET"));
    snprintf(f.kind, sizeof f.kind, "unrecoverable");
    snprintf(f.at, sizeof f.at, "collective");
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_E_INVAL);
    assert_non_null(strstr(ipuof_client_errmsg(admin), "give --kind recoverable:PARTITION_RESET"));
    snprintf(f.at, sizeof f.at, "barrier");
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_E_INVAL);
    assert_non_null(strstr(ipuof_client_errmsg(admin), "weights, run or collective"));
    f.at[0] = '\0';
    f.ipu = 2;
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_E_INVAL);
    assert_non_null(strstr(ipuof_client_errmsg(admin), "IPUs 0 to 1"));
    f.ipu = 0;
    f.probability = 1.5;
    assert_int_equal(ipuof_fault_inject(admin, &f, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_fault_list(admin, NULL, 0, &n), IPUOF_OK);
    assert_int_equal(n, 0);
    assert_int_equal(ipuof_fault_clear(admin, 7, NULL), IPUOF_E_NOTFOUND);
    ipuof_client_free(plain);
    ipuof_client_free(admin);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
}

/* --after-runs K, --count N, --probability P --seed S: which runs fail is the same on
 * every daemon given the same seed. Returns a bit per run (1: failed). */
static unsigned
run_pattern(const char *faults_json)
{
    ipuof_client *c, *admin;
    ipuof_model *m = NULL;
    size_t len = 0;
    void *bytes = fc_add_model(&len);
    const float x[4] = {1, 1, 1, 1};
    struct ipuof_tensor in = {"x", IPUOF_DTYPE_FLOAT, 2, {1, 4}, x, sizeof x};
    unsigned bits = 0;
    char env[512];

    snprintf(env, sizeof env, "%s", faults_json);
    setenv("IPUOF_FAULTS", env, 1);
    assert_int_equal(testd_start(&d, "[devices]\nipus = 2\n", NULL), 0);
    unsetenv("IPUOF_FAULTS");
    testd_live = &d;
    c = fc_connect(d.addr);
    admin = fc_connect(d.admin_addr);
    for (int i = 0; i < 16; i++) {
        int rc;
        if (m == NULL) {
            assert_int_equal(fc_attach1(c, NULL, NULL), IPUOF_OK);
            assert_int_equal(ipuof_model_compile(c, bytes, len, NULL, &m), IPUOF_OK);
        }
        rc = ipuof_model_run(m, &in, 1);
        if (rc != IPUOF_OK) { /* recover as a program would: detach, reset, attach again */
            assert_int_equal(rc, IPUOF_E_DEVICE_FAULT);
            bits |= 1u << i;
            ipuof_model_free(m);
            m = NULL;
            assert_int_equal(ipuof_detach(c), IPUOF_OK);
            assert_int_equal(ipuof_reset(admin, IPUOF_RESET_IPU, 0, NULL, 0, NULL), IPUOF_OK);
        }
    }
    ipuof_model_free(m);
    ipuof_client_free(c);
    ipuof_client_free(admin);
    free(bytes);
    testd_live = NULL;
    assert_int_equal(testd_stop(&d), 0);
    return bits;
}

static void
test_env_triggers(void **state)
{
    unsigned a, b, c;

    (void)state;
    /* after 3 runs, twice: runs 3 and 4 fail (the fault counts runs reaching it). */
    a = run_pattern("[{\"ipu\": 0, \"kind\": \"recoverable:IPU_RESET\", \"at\": \"run\", "
                    "\"after_runs\": 3, \"count\": 2}]");
    assert_int_equal(a, (1u << 3) | (1u << 4));
    b = run_pattern("{\"kind\":\"host-sync-timeout\",\"probability\":0.3,\"seed\":42,"
                    "\"count\":16}");
    c = run_pattern("{\"kind\":\"host-sync-timeout\",\"probability\":0.3,\"seed\":42,"
                    "\"count\":16}");
    print_message("probability 0.3 seed 42 over 16 runs: failed 0x%04x\n", b);
    assert_int_equal(b, c);
    assert_true(b != 0 && b != 0xffff);
}

/* A bad IPUOF_FAULTS stops the daemon at start with a sentence. */
static void
test_env_bad(void **state)
{
    (void)state;
    setenv("IPUOF_FAULTS", "[{\"kind\":\"recoverable:IPU_RESET\",\"colour\":1}]", 1);
    assert_int_not_equal(testd_start(&d, "[devices]\nipus = 2\n", NULL), 0);
    unsetenv("IPUOF_FAULTS");
    assert_true(testd_log_contains(&d, "unknown key \"colour\""));
    testd_stop(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kind_x_trigger, testd_stop_live),
        cmocka_unit_test_teardown(test_attach_from_queue, testd_stop_live),
        cmocka_unit_test_teardown(test_bad_faults, testd_stop_live),
        cmocka_unit_test_teardown(test_env_triggers, testd_stop_live),
        cmocka_unit_test(test_env_bad),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_job_key.c — a job of several processes is joined by its name and a job key the
 * processes of one launch share, never by the default name alone, on a real ipuofd:
 *   - two unrelated programs that both think they are process 0/1 of 2 under the default
 *     name are refused, told how to give a key (on main they formed one job);
 *   - a stranger with another key cannot take the free slot of a pending job, is told
 *     nothing of it, and its leaving does not end the job (on main it joined, and its
 *     leaving ended the job for the real process);
 *   - through the client library: with neither key nor name the attach fails before the
 *     daemon is asked; with a key (ipuof_client_set_job_key) two processes form their job
 *     under a name made from the key.
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

#include "frame.h"
#include "ipuof/client.h"
#include "ipuof/status.h"
#include "testd.h"

static struct testd d;

static int
teardown(void **state)
{
    (void)state;
    if (d.pid > 0 || d.dir[0] != '\0')
        testd_stop(&d);
    memset(&d, 0, sizeof d);
    return 0;
}

/* Sends an attach of process id of n on 2 IPUs named name with key on fd (request 2). */
static void
send_attach(int fd, const char *name, const char *key, unsigned id, unsigned n)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;

    a.num_ipus = 2;
    a.partition_name = (char *)name;
    a.job_key = (char *)key;
    a.process_id = id;
    a.num_processes = n;
    h.request_id = 2;
    h.body_case = IPUOF__HEADER__BODY_ATTACH;
    h.attach = &a;
    assert_int_equal(raw_send(fd, &h), 0);
}

/* The next frame on fd within timeout_ms: its error code with the message copied to msg,
 * 0 for an attach reply, -1 for nothing. */
static int
recv_attach(int fd, int timeout_ms, char *msg, size_t len)
{
    int eof = 0, rc = -1;
    Ipuof__Header *h = raw_recv(fd, timeout_ms, &eof);

    msg[0] = '\0';
    if (h != NULL && h->body_case == IPUOF__HEADER__BODY_ERROR) {
        rc = (int)h->error->code;
        snprintf(msg, len, "%s", h->error->message);
    } else if (h != NULL && h->body_case == IPUOF__HEADER__BODY_ATTACH_REPLY) {
        rc = 0;
    }
    ipuof_frame_header_free(h);
    return rc;
}

/* Two programs started as process 0 and 1 of 2 under the default name, no key: each is
 * refused, told how to give a key. */
static void
test_default_name_without_key_is_refused(void **state)
{
    int a, b;
    char msg[1024];

    (void)state;
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    a = raw_session(d.port, 0);
    b = raw_session(d.port, 0);
    assert_true(a >= 0 && b >= 0);
    send_attach(a, "ipuof-job", "", 0, 2);
    send_attach(b, "ipuof-job", "", 1, 2);
    assert_int_equal(recv_attach(a, 5000, msg, sizeof msg), IPUOF_E_INVAL);
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "no job key"));
    assert_non_null(strstr(msg, "IPUOF_JOB_KEY"));
    assert_int_equal(recv_attach(b, 5000, msg, sizeof msg), IPUOF_E_INVAL);
    close(a);
    close(b);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

/* A stranger with another key: refused without the job's details; it cannot take the free
 * slot, and its leaving does not end the pending job, which the real process completes. */
static void
test_stranger_cannot_join_or_end_a_job(void **state)
{
    int p0, stranger, p1;
    char msg[1024];

    (void)state;
    assert_int_equal(testd_start(&d, "[server]\njob_timeout = 30\n", NULL), 0);
    p0 = raw_session(d.port, 0);
    stranger = raw_session(d.port, 0);
    p1 = raw_session(d.port, 0);
    assert_true(p0 >= 0 && stranger >= 0 && p1 >= 0);
    send_attach(p0, "train", "launch-1-secret", 0, 2);
    assert_int_equal(recv_attach(p0, 300, msg, sizeof msg), -1); /* waits for process 1 */
    send_attach(stranger, "train", "launch-2-secret", 1, 2);
    assert_int_equal(recv_attach(stranger, 5000, msg, sizeof msg), IPUOF_E_BUSY);
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, "taken by another job"));
    assert_null(strstr(msg, "pid"));       /* nothing of the job's processes */
    assert_null(strstr(msg, "of 2"));
    /* a stranger with a key too long is refused where the key enters */
    {
        char big[300];
        memset(big, 'k', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        send_attach(stranger, "train", big, 1, 2);
        assert_int_equal(recv_attach(stranger, 5000, msg, sizeof msg), IPUOF_E_INVAL);
        assert_non_null(strstr(msg, "at most 256"));
    }
    close(stranger); /* leaving: the job goes on */
    usleep(200000);
    assert_false(testd_log_contains(&d, "ended"));
    send_attach(p1, "train", "launch-1-secret", 1, 2);
    assert_int_equal(recv_attach(p1, 5000, msg, sizeof msg), 0);
    assert_int_equal(recv_attach(p0, 5000, msg, sizeof msg), 0);
    close(p0);
    close(p1);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

struct lib_proc {
    unsigned id;
    const char *key;
    int rc;
    char msg[1024];
    char partition[80];
};

/* One process of a job through the client library: attach 2 IPUs as process id of 2. */
static void *
lib_process(void *arg)
{
    struct lib_proc *p = arg;
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts o = {.num_ipus = 2, .process_id = p->id, .num_processes = 2};

    p->rc = ipuof_client_connect(c, d.addr);
    if (p->rc == IPUOF_OK && p->key != NULL)
        p->rc = ipuof_client_set_job_key(c, p->key);
    if (p->rc == IPUOF_OK)
        p->rc = ipuof_attach(c, &o, NULL, 0, NULL);
    snprintf(p->msg, sizeof p->msg, "%s", ipuof_client_errmsg(c));
    if (p->rc == IPUOF_OK)
        snprintf(p->partition, sizeof p->partition, "%s", ipuof_partition_name(c));
    ipuof_client_free(c);
    return NULL;
}

static void
test_client_library_key(void **state)
{
    static const char *const launcher[] = {"IPUOF_JOB_KEY", "IPUOF_PARTITION", "PMIX_NAMESPACE",
                                           "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid",
                                           "OMPI_MCA_orte_precondition_transports"};
    struct lib_proc p[2] = {{.id = 0}, {.id = 1}};
    pthread_t t[2];

    (void)state;
    for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++)
        unsetenv(launcher[i]);
    assert_int_equal(testd_start(&d, NULL, NULL), 0);
    lib_process(&p[0]); /* no key, no name: refused by the library itself */
    assert_int_equal(p[0].rc, IPUOF_E_INVAL);
    assert_non_null(strstr(p[0].msg, "IPUOF_JOB_KEY"));
    assert_false(testd_log_contains(&d, "job '"));
    for (int k = 0; k < 2; k++) {
        p[k].key = "a-launch";
        assert_int_equal(pthread_create(&t[k], NULL, lib_process, &p[k]), 0);
    }
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < 2; k++)
        if (p[k].rc != IPUOF_OK)
            fail_msg("process %d: %s: %s", k, ipuof_status_name(p[k].rc), p[k].msg);
    assert_string_equal(p[0].partition, p[1].partition);
    assert_int_equal(strncmp(p[0].partition, "ipuof-job-", 10), 0);
    assert_int_equal(testd_stop(&d), 0);
    memset(&d, 0, sizeof d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_default_name_without_key_is_refused, teardown),
        cmocka_unit_test_teardown(test_stranger_cannot_join_or_end_a_job, teardown),
        cmocka_unit_test_teardown(test_client_library_key, teardown),
    };
    return cmocka_run_group_tests_name("job_key", tests, NULL, NULL);
}

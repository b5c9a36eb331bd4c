/*
 * test_metrics.c — the exposition of daemon/metrics.c on a daemon state built here (no
 * listener): histogram buckets are cumulative with _count and _sum agreeing, per-IPU busy
 * time lands on the run's IPUs on both clocks, errors are counted by code name, requests by
 * the dispatch entry's name, and every sample line belongs to a family declared by TYPE.
 * (tests/integ/test_metrics.sh checks the same page through a real Prometheus.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipuof/status.h"
#include "metrics.h"
#include "sim.h"
#include "srv_state.h"

/* The value of the sample line that starts with "name " (labels included), or -1. */
static double
sample(const char *page, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = page; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static void
test_exposition(void **state)
{
    static struct srv s; /* zeroed, as main() has it */
    struct sim_cost_report cost = {.device_seconds = 0.5, .n_ipus = 2, .busy = {0.5, 0.25}};
    static const char run_name[] = "run";
    char err[256], *page = NULL;
    size_t len = 0;

    (void)state;
    s.inv = dev_inventory_new(4, 1 << 20, 16);
    cache_init(&s.cache, 4, 1 << 20, 1 << 20);
    assert_int_equal(metrics_start(&s, err, sizeof err), 0);
    metrics_run(s.metrics, 2, 2, 3000, &cost);     /* 3 ms on IPUs 2 and 3 */
    metrics_run(s.metrics, 2, 2, 2000000, NULL);   /* 2 s, no simulated clock */
    metrics_error(s.metrics, IPUOF_E_BUSY);
    metrics_error(s.metrics, IPUOF_E_BUSY);
    metrics_error(s.metrics, 1000);                /* beyond the table: counted apart */
    metrics_request(s.metrics, run_name);
    metrics_request(s.metrics, run_name);
    metrics_bytes(s.metrics, 100, 7);
    metrics_attach(s.metrics, 0);
    assert_int_equal(metrics_render(&s, &page, &len), 0);
    assert_int_equal(strlen(page), len);

    assert_true(sample(page, "ipuofd_runs_total") == 2);
    assert_true(sample(page, "ipuofd_run_duration_seconds_bucket{le=\"0.001\"}") == 0);
    assert_true(sample(page, "ipuofd_run_duration_seconds_bucket{le=\"0.005\"}") == 1);
    assert_true(sample(page, "ipuofd_run_duration_seconds_bucket{le=\"2.5\"}") == 2);
    assert_true(sample(page, "ipuofd_run_duration_seconds_bucket{le=\"+Inf\"}") == 2);
    assert_true(sample(page, "ipuofd_run_duration_seconds_count") == 2);
    assert_true(sample(page, "ipuofd_run_duration_seconds_sum") == 2.003);
    assert_true(sample(page, "ipuofd_ipu_busy_seconds_total{ipu=\"2\",clock=\"host\"}") == 2.003);
    assert_true(sample(page, "ipuofd_ipu_busy_seconds_total{ipu=\"3\",clock=\"simulated\"}") ==
                0.125);
    assert_true(sample(page, "ipuofd_ipu_busy_seconds_total{ipu=\"1\",clock=\"host\"}") == 0);
    assert_true(sample(page, "ipuofd_errors_total{code=\"IPUOF_E_BUSY\"}") == 2);
    assert_true(sample(page, "ipuofd_errors_total{code=\"IPUOF_E_INVAL\"}") == 0);
    assert_true(sample(page, "ipuofd_errors_total{code=\"beyond\"}") == 1);
    assert_true(sample(page, "ipuofd_requests_total{request=\"run\"}") == 2);
    assert_true(sample(page, "ipuofd_received_bytes_total") == 100);
    assert_true(sample(page, "ipuofd_sent_bytes_total") == 7);
    assert_true(sample(page, "ipuofd_attach_wait_seconds_count") == 1);
    assert_true(sample(page, "ipuofd_ipu_state{ipu=\"0\",state=\"free\"}") == 1);
    assert_true(sample(page, "ipuofd_ipu_memory_capacity_bytes{ipu=\"3\"}") == 1 << 20);

    /* Every sample's family has a TYPE line before it. */
    for (const char *p = page; *p; p = strchr(p, '\n') + 1) {
        char fam[128], type[160];
        if (*p == '#')
            continue;
        sscanf(p, "%127[a-z_]", fam);
        /* a histogram's _bucket, _sum and _count lines belong to the histogram */
        for (int k = 0; k < 3; k++) {
            static const char *const suf[3] = {"_bucket", "_sum", "_count"};
            size_t fl = strlen(fam), sl = strlen(suf[k]);
            char hist[200];
            if (fl <= sl || strcmp(fam + fl - sl, suf[k]) != 0)
                continue;
            snprintf(hist, sizeof hist, "# TYPE %.*s histogram", (int)(fl - sl), fam);
            if (strstr(page, hist) != NULL)
                fam[fl - sl] = '\0';
        }
        snprintf(type, sizeof type, "# TYPE %s ", fam);
        assert_non_null(strstr(page, type));
        assert_true(strstr(page, type) < p);
    }
    free(page);
    metrics_free(s.metrics);
    cache_destroy(&s.cache);
    dev_inventory_free(s.inv);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exposition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

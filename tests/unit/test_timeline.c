/*
 * test_timeline.c — the trace timeline renderer (tools/util/timeline.c, ipuof-trace): a
 * valid trace's SVG, and traces whose integers do not fit: a tid, a thread_name's tid or an
 * args member past any long is refused with a sentence naming it (it was converted to a
 * long, undefined behaviour, which the fuzzer found), and a micro-batch in a span's name
 * past any long is ignored (its label F<mb + 1> overflowed: the sanitizer build's
 * ipuof-trace died on it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "timeline.h"

/* Renders json with the default view; returns the renderer's code, the SVG in *svg
 * (caller frees) and its error sentence in err. */
static int
render(const char *json, char **svg, char *err, size_t errlen)
{
    struct timeline_view v = {.t0 = -1, .t1 = -1, .width = 800, .title = NULL,
                              .iteration = -1};
    size_t len = 0;
    FILE *f = open_memstream(svg, &len);
    int rc;

    assert_non_null(f);
    err[0] = '\0';
    rc = timeline_render(json, strlen(json), "t", &v, f, err, errlen);
    fclose(f);
    return rc;
}

static void
test_valid(void **state)
{
    char *svg = NULL, err[256];

    (void)state;
    assert_int_equal(render("{\"traceEvents\":[{\"name\":\"thread_name\",\"ph\":\"M\",\"tid\":3,"
                            "\"args\":{\"name\":\"IPU 3\"}},{\"name\":\"F0.1\",\"ph\":\"X\","
                            "\"tid\":3,\"ts\":0,\"dur\":10,\"args\":{\"stage\":0,\"mb\":1,"
                            "\"iter\":0,\"kind\":\"fwd\"}}]}",
                            &svg, err, sizeof err),
                     0);
    assert_non_null(strstr(svg, "data-tid=\"3\""));
    assert_non_null(strstr(svg, ">IPU 3</text>"));
    assert_non_null(strstr(svg, "data-mb=\"1\""));
    assert_non_null(strstr(svg, ">F2</text>")); /* micro-batches counted from 1 */
    free(svg);
}

/* A trace past the limits of config files (64 KiB, 4096 items in one array) is read whole:
 * the renderer gives the reader its own limits. */
static void
test_large_trace(void **state)
{
    enum { EVENTS = 5000 };
    size_t cap = 64 + EVENTS * 128, n = 0;
    char *json = malloc(cap), *svg = NULL, err[256];

    (void)state;
    assert_non_null(json);
    n += (size_t)snprintf(json + n, cap - n, "{\"traceEvents\":[");
    for (int i = 0; i < EVENTS; i++)
        n += (size_t)snprintf(json + n, cap - n,
                              "%s{\"name\":\"F0.%d\",\"ph\":\"X\",\"tid\":%d,\"ts\":%d,"
                              "\"dur\":1,\"args\":{\"kind\":\"fwd\"}}",
                              i ? "," : "", i, i % 4, i);
    n += (size_t)snprintf(json + n, cap - n, "]}");
    assert_true(n > 64 * 1024 && n < cap);
    assert_int_equal(render(json, &svg, err, sizeof err), 0);
    assert_non_null(strstr(svg, "5000 spans"));
    free(svg);
    free(json);
}

/* Each trace has one integer no long holds, or that is no integer; each is refused. */
static void
test_ids_out_of_range(void **state)
{
    static const struct {
        const char *json, *what;
    } bad[] = {
        {"[{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":1.22222e+59,\"ts\":0,\"dur\":1}]", "tid"},
        {"[{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":-1e19,\"ts\":0,\"dur\":1}]", "tid"},
        {"[{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":0.5,\"ts\":0,\"dur\":1}]", "tid"},
        {"[{\"name\":\"thread_name\",\"ph\":\"M\",\"tid\":1e300,\"args\":{\"name\":\"x\"}},"
         "{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":0,\"ts\":0,\"dur\":1}]", "tid"},
        {"[{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":0,\"ts\":0,\"dur\":1,\"args\":{\"mb\":1e20}}]",
         "mb"},
        {"[{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":0,\"ts\":0,\"dur\":1,"
         "\"args\":{\"stage\":-9.3e18}}]", "stage"},
        {"[{\"name\":\"F0.0\",\"ph\":\"X\",\"tid\":0,\"ts\":0,\"dur\":1,"
         "\"args\":{\"iter\":9223372036854775807}}]", "iter"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *svg = NULL, err[256], want[64];
        int rc = render(bad[i].json, &svg, err, sizeof err);
        snprintf(want, sizeof want, "has %s ", bad[i].what);
        printf("%s -> %d: %s\n", bad[i].json, rc, err);
        assert_int_equal(rc, TIMELINE_EBAD);
        assert_non_null(strstr(err, want));
        assert_non_null(strstr(err, "not an integer in -1000000000..1000000000"));
        free(svg);
    }
}

/* A micro-batch read from a span's name F<stage>.<mb> is a label: past the range it is
 * ignored (no data-mb, no label) and the span is drawn. */
static void
test_name_mb_out_of_range(void **state)
{
    char *svg = NULL, err[256];

    (void)state;
    assert_int_equal(render("[{\"name\":\"F0.99999999999999999999\",\"ph\":\"X\",\"tid\":0,"
                            "\"ts\":0,\"dur\":100},{\"name\":\"B99999999999999999999.2\","
                            "\"ph\":\"X\",\"tid\":0,\"ts\":100,\"dur\":100}]",
                            &svg, err, sizeof err),
                     0);
    assert_null(strstr(svg, "data-mb="));
    assert_null(strstr(svg, "data-stage="));
    assert_null(strstr(svg, "class=\"mb\""));
    assert_non_null(strstr(svg, "F0.99999999999999999999 100.000"));
    free(svg);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_large_trace),
        cmocka_unit_test(test_ids_out_of_range),
        cmocka_unit_test(test_name_mb_out_of_range),
    };
    return cmocka_run_group_tests_name("timeline", tests, NULL, NULL);
}

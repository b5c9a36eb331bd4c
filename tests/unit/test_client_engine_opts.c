/*
 * test_client_engine_opts.c — POPLAR_ENGINE_OPTIONS as the C library reads it
 * (client/model/engine_opts.c), case by case from tests/data/engine_options.tsv, the table the
 * Python package's test (python/tests/test_engine_options.py) reads too, so the two agree
 * (issue 17, defect 8: "True" and \u escapes were read differently by the two sides; on
 * main the library said off for "True", kept "\u0062" undecoded, ignored a key spelled
 * with an escape and let a first "true" win over a later "false"). It reads each value
 * where a compile does, in ipuof_placement_build.
 *
 * IPUOF_ENGINE_OPTIONS_TABLE names another table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/model/model_internal.h"

/* The library's reading of value as POPLAR_ENGINE_OPTIONS, at a compile's request building
 * (ipuof_placement_build): 0 with *profile and dir set, or -1 with the sentence in why. */
static int
read_env(const char *value, int *profile, char *dir, size_t dir_len, char *why, size_t why_len)
{
    static const struct ipuof_model_opts no_opts;
    Ipuof__CompileRequest cr = IPUOF__COMPILE_REQUEST__INIT;
    Ipuof__Block *blocks = NULL, **ptrs = NULL;
    char *trace_dir = NULL;
    ipuof_client *c = ipuof_client_new();
    int rc;

    assert_non_null(c);
    assert_int_equal(setenv("POPLAR_ENGINE_OPTIONS", value, 1), 0);
    rc = ipuof_placement_build(c, &no_opts, &cr, &blocks, &ptrs, &trace_dir);
    unsetenv("POPLAR_ENGINE_OPTIONS");
    *profile = cr.profile;
    snprintf(dir, dir_len, "%s", trace_dir != NULL ? trace_dir : "");
    snprintf(why, why_len, "%s", rc != IPUOF_OK ? ipuof_client_errmsg(c) : "");
    if (rc != IPUOF_OK && rc != IPUOF_E_INVAL)
        fail_msg("%s: code %d, not IPUOF_E_INVAL: %s", value, rc, why);
    free(blocks);
    free(ptrs);
    free(trace_dir);
    ipuof_client_free(c);
    return rc == IPUOF_OK ? 0 : -1;
}

/* Checks one case; 0 when the library's reading matches expect. */
static int
check_case(int line, const char *expect, const char *value)
{
    char dir[4096], why[1024];
    int profile = -1;
    int rc = read_env(value, &profile, dir, sizeof dir, why, sizeof why);

    if (strncmp(expect, "error ", 6) == 0) {
        if (rc == 0 || strstr(why, expect + 6) == NULL) {
            print_message("line %d: %s\n  want an error with \"%s\"\n  got %s\n", line, value,
                          expect + 6, rc == 0 ? "no error" : why);
            return -1;
        }
        return 0;
    }
    if (rc != 0) {
        print_message("line %d: %s\n  want %s\n  got: %s\n", line, value, expect, why);
        return -1;
    }
    if (strcmp(expect, "off") == 0 ? profile != 0
                                   : strncmp(expect, "on ", 3) != 0 || profile != 1 ||
                                         strcmp(dir, expect + 3) != 0) {
        print_message("line %d: %s\n  want %s\n  got %s %s\n", line, value, expect,
                      profile ? "on" : "off", dir);
        return -1;
    }
    return 0;
}

static void
test_table(void **state)
{
    const char *path = getenv("IPUOF_ENGINE_OPTIONS_TABLE");
    char buf[512], *text = NULL;
    size_t cap = 0;
    ssize_t n;
    int line = 0, cases = 0, bad = 0;
    FILE *f;

    (void)state;
    if (path == NULL) {
        /* tests/unit/test_client_engine_opts.c -> tests/data/engine_options.tsv */
        const char *slash = strrchr(__FILE__, '/');
        snprintf(buf, sizeof buf, "%.*s/../data/engine_options.tsv",
                 slash != NULL ? (int)(slash - __FILE__) : 1, slash != NULL ? __FILE__ : ".");
        path = buf;
    }
    f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    while ((n = getline(&text, &cap, f)) > 0) {
        char *tab;

        line++;
        if (text[n - 1] == '\n')
            text[--n] = '\0';
        if (text[0] == '#' || text[0] == '\0')
            continue;
        tab = strchr(text, '\t');
        if (tab == NULL)
            fail_msg("%s:%d: no tab between the expectation and the value", path, line);
        *tab = '\0';
        cases++;
        bad += check_case(line, text, tab + 1) != 0;
    }
    free(text);
    fclose(f);
    print_message("%d cases, %d read differently from the table\n", cases, bad);
    assert_true(cases >= 40);
    assert_int_equal(bad, 0);
}

/* The length limit, and a long key that only begins like a known one. */
static void
test_limits(void **state)
{
    char v[4096 + 64], dir[4096], why[1024];
    int profile = -1;
    size_t n;

    (void)state;
    n = (size_t)snprintf(v, sizeof v, "{\"autoReport.all\":\"true\",\"x\":\"");
    memset(v + n, 'a', 4096 - n - 2);
    snprintf(v + 4096 - 2, 3, "\"}");
    assert_int_equal(strlen(v), 4096);
    assert_int_equal(read_env(v, &profile, dir, sizeof dir, why, sizeof why), 0);
    assert_int_equal(profile, 1);
    snprintf(v + 4096 - 2, 4, "a\"}");
    assert_int_equal(read_env(v, &profile, dir, sizeof dir, why, sizeof why), -1);
    assert_non_null(strstr(why, "4096 bytes"));
    n = (size_t)snprintf(v, sizeof v, "{\"autoReport.all");
    memset(v + n, 'x', 300);
    snprintf(v + n + 300, 20, "\":\"true\"}");
    assert_int_equal(read_env(v, &profile, dir, sizeof dir, why, sizeof why), 0);
    assert_int_equal(profile, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

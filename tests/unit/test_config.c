/*
 * test_config.c — configuration: defaults, a valid file, unknown keys, bad values, byte
 * sizes, cross-field validation and the reload rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "log.h"

static char path[64];

static void
write_file(const char *text)
{
    FILE *f;
    int fd;

    snprintf(path, sizeof path, "/tmp/ipuofd-test-config-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

static int
teardown(void **state)
{
    (void)state;
    if (path[0])
        unlink(path);
    path[0] = '\0';
    return 0;
}

static void
test_defaults(void **state)
{
    struct cfg c;
    char err[256];

    (void)state;
    cfg_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:50052");
    assert_int_equal(c.ipus, 4);
    assert_int_equal(c.ipu_memory, 900ull << 20);
    assert_int_equal(c.max_connections, 1024);
    assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
}

static void
test_valid_file(void **state)
{
    struct cfg c;
    char err[256];

    (void)state;
    write_file("; sample\n[server]\nlisten = 0.0.0.0:7000\nmax_connections = 10\n"
               "idle_timeout = 30\nauth_token = s3cret\n[devices]\nipus = 8\n"
               "ipu_memory = 2GiB\ntiles = 1216\n[log]\nlevel = debug\n");
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, path, err, sizeof err), 0);
    assert_string_equal(c.listen, "0.0.0.0:7000");
    assert_int_equal(c.max_connections, 10);
    assert_int_equal(c.idle_timeout, 30);
    assert_string_equal(c.auth_token, "s3cret");
    assert_int_equal(c.ipus, 8);
    assert_int_equal(c.ipu_memory, 2ull << 30);
    assert_int_equal(c.tiles, 1216);
    assert_int_equal(c.log_level, LOG_LVL_DEBUG);
    assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
}

static void
test_unknown_key(void **state)
{
    struct cfg c;
    char err[256];

    (void)state;
    write_file("[server]\nlisten = 127.0.0.1:1\nmax_conections = 5\n");
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, path, err, sizeof err), -1);
    assert_non_null(strstr(err, ":3:"));
    assert_non_null(strstr(err, "max_conections"));
    assert_non_null(strstr(err, "[server]"));
}

static void
test_bad_values(void **state)
{
    static const char *const bad[] = {
        "[devices]\nipus = four\n",      "[devices]\nipus = 0\n",
        "[devices]\nipus = 65\n",        "[devices]\nipu_memory = 12 parsecs\n",
        "[log]\nlevel = loud\n",         "[server]\nmax_connections = -1\n",
        "[server]\nlisten\n",
    };
    struct cfg c;
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(bad[i]);
        cfg_defaults(&c);
        assert_int_equal(cfg_load_file(&c, path, err, sizeof err), -1);
        assert_non_null(strstr(err, path));
        print_message("rejected: %s\n", err);
        teardown(NULL);
    }
    cfg_defaults(&c);
    assert_int_equal(cfg_set(&c, "devices", "ipus", "1x", err, sizeof err), -1);
    assert_non_null(strstr(err, "1 to 64"));
}

static void
test_missing_file(void **state)
{
    struct cfg c;
    char err[256];

    (void)state;
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, "/nonexistent/ipuofd.conf", err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
}

/* What libinih would take silently is refused naming the file and line: a directory
 * (main: an empty config), a NUL byte (main: the rest of the line dropped, here the
 * level), a line longer than ipuofd reads. */
static void
test_directory_nul_and_long_lines(void **state)
{
    static const char text[] = "[log]\nlevel = debug\0 junk\n";
    struct cfg c;
    char err[512], longline[400];
    FILE *f;

    (void)state;
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, "/tmp", err, sizeof err), -1);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "/tmp is a directory"));

    write_file("");
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
    fclose(f);
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, path, err, sizeof err), -1);
    print_message("%s\n", err);
    assert_non_null(strstr(err, ":2: the line holds a NUL byte (column 14)"));
    assert_non_null(strstr(err, path));
    unlink(path);

    memset(longline, 'x', sizeof longline);
    memcpy(longline, "[server]\nauth_token = ", 22);
    longline[sizeof longline - 2] = '\n';
    longline[sizeof longline - 1] = '\0';
    write_file(longline);
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, path, err, sizeof err), -1);
    print_message("%s\n", err);
    assert_non_null(strstr(err, ":2: the line is longer than 199 characters"));
}

static void
test_bytes(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(cfg_parse_bytes("900MiB", &v), 0);
    assert_int_equal(v, 900ull << 20);
    assert_int_equal(cfg_parse_bytes("123", &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(cfg_parse_bytes("1 GiB", &v), 0);
    assert_int_equal(v, 1ull << 30);
    assert_int_equal(cfg_parse_bytes("2MB", &v), 0);
    assert_int_equal(v, 2000000);
    assert_int_equal(cfg_parse_bytes("-1", &v), -1);
    assert_int_equal(cfg_parse_bytes("5 apples", &v), -1);
    assert_int_equal(cfg_parse_bytes("99999999999999999999", &v), -1);
    assert_int_equal(cfg_parse_bytes("17179869184GiB", &v), -1);
}

static void
test_validate(void **state)
{
    struct cfg c;
    char err[256];

    (void)state;
    cfg_defaults(&c);
    c.prehello_max_bytes = c.max_header_bytes + 1;
    assert_int_equal(cfg_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "prehello_max_bytes"));
    cfg_defaults(&c);
    c.max_output_bytes = 1u << 20;
    assert_int_equal(cfg_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "max_output_bytes"));
}

static void
test_reload_rules(void **state)
{
    struct cfg cur, next;
    char ignored[256];

    (void)state;
    cfg_defaults(&cur);
    next = cur;
    next.idle_timeout = 5;
    next.ipus = 8;
    next.log_level = LOG_LVL_DEBUG;
    snprintf(next.listen, sizeof next.listen, "127.0.0.1:1");
    cfg_apply_reload(&cur, &next, ignored, sizeof ignored);
    assert_int_equal(cur.idle_timeout, 5);
    assert_int_equal(cur.log_level, LOG_LVL_DEBUG);
    assert_int_equal(cur.ipus, 4);
    assert_string_equal(cur.listen, "127.0.0.1:50052");
    assert_non_null(strstr(ignored, "ipus"));
    assert_non_null(strstr(ignored, "listen"));
    assert_null(strstr(ignored, "idle_timeout"));
}

/* The [cost] rates: GC200 defaults, the shipped file's values, exponents, bounds, reload. */
static void
test_cost_rates(void **state)
{
    struct cfg c, next;
    char err[256], ignored[256];

    (void)state;
    cfg_defaults(&c);
    assert_true(c.cost_flops_per_s == 0);       /* 0: the device type's (ipu_type) */
    assert_string_equal(c.cost_ipu_type, "gc200");
    assert_true(c.cost_link_bytes_per_s == 320e9);
    assert_true(c.cost_host_bytes_per_s == 12.5e9);
    assert_int_equal(cfg_set(&c, "cost", "ipu_type", "bow", err, sizeof err), 0);
    assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "cost", "ipu_type", "gc2", err, sizeof err), 0);
    assert_int_equal(cfg_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "gc200"));
    assert_int_equal(cfg_set(&c, "cost", "ipu_type", "gc200", err, sizeof err), 0);
    next = c;
    assert_int_equal(cfg_load_file(&next, "systemd/ipuofd.conf", err, sizeof err), 0);
    assert_memory_equal(&next.cost_flops_per_s, &c.cost_flops_per_s,
                        7 * sizeof c.cost_flops_per_s);
    write_file("[cost]\nflops_per_s = 250e12\nefficiency = 0.5\nsync_seconds = 0\n"
               "matmul_efficiency = 0.4\n");
    assert_int_equal(cfg_load_file(&next, path, err, sizeof err), 0);
    assert_true(next.cost_flops_per_s == 250e12);
    assert_true(next.cost_efficiency == 0.5);
    assert_true(next.cost_matmul_efficiency == 0.4);
    assert_true(next.cost_sync_seconds == 0.0);
    cfg_apply_reload(&c, &next, ignored, sizeof ignored);
    assert_string_equal(ignored, "");
    assert_true(c.cost_flops_per_s == 250e12);
    assert_int_equal(cfg_set(&c, "cost", "flops_per_s", "-1", err, sizeof err), -1);
    assert_non_null(strstr(err, "flops_per_s"));
    assert_int_equal(cfg_set(&c, "cost", "efficiency", "1.5", err, sizeof err), -1);
    assert_non_null(strstr(err, "at most 1"));
    assert_int_equal(cfg_set(&c, "cost", "matmul_efficiency", "0", err, sizeof err), -1);
    assert_non_null(strstr(err, "matmul_efficiency"));
    assert_int_equal(cfg_set(&c, "cost", "host_bytes_per_s", "nan", err, sizeof err), -1);
    assert_int_equal(cfg_set(&c, "cost", "host_bytes_per_s", "64e9x", err, sizeof err), -1);
    assert_int_equal(cfg_set(&c, "cost", "sync_seconds", "-1e-6", err, sizeof err), -1);
    assert_true(c.cost_host_bytes_per_s == 12.5e9);
}

/* [faults] inject: each line appended in order, a full buffer refused, not reloadable. */
static void
test_faults_lines(void **state)
{
    struct cfg c, next;
    char err[256], ignored[256], big[200];

    (void)state;
    cfg_defaults(&c);
    assert_string_equal(c.faults, "");
    write_file("[faults]\ninject = {\"kind\": \"hang\"}\ninject = {\"kind\": \"soc-error\"}\n");
    next = c;
    assert_int_equal(cfg_load_file(&next, path, err, sizeof err), 0);
    assert_string_equal(next.faults, "{\"kind\": \"hang\"}\n{\"kind\": \"soc-error\"}\n");
    cfg_apply_reload(&c, &next, ignored, sizeof ignored);
    assert_non_null(strstr(ignored, "inject"));
    assert_string_equal(c.faults, "");
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cfg_defaults(&c);
    for (int i = 0; i < 20; i++)
        assert_int_equal(cfg_set(&c, "faults", "inject", big, err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "faults", "inject", big, err, sizeof err), -1);
    assert_non_null(strstr(err, "[faults] inject lines add up to more than 4095 bytes"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_faults_lines, teardown),
        cmocka_unit_test_teardown(test_defaults, teardown),
        cmocka_unit_test_teardown(test_valid_file, teardown),
        cmocka_unit_test_teardown(test_unknown_key, teardown),
        cmocka_unit_test_teardown(test_bad_values, teardown),
        cmocka_unit_test_teardown(test_missing_file, teardown),
        cmocka_unit_test_teardown(test_directory_nul_and_long_lines, teardown),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_reload_rules),
        cmocka_unit_test_teardown(test_cost_rates, teardown),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

/*
 * test_client_conf.c — IPUoF config files and the order in which the client library looks
 * for its daemon and partition (client/wire/ipuof_conf.c, proto/jsonparse.c): IPUOF_CONFIG_PATH,
 * then PopRun's IPUOF_VIPU_API_*, then ~/.ipuof.conf.d/ files, then IPUOF_SERVER, then the
 * default; every broken file is refused with a sentence naming the file and the field.
 * Each test runs in a fresh temporary HOME with the variables it sets and no others.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../client/wire/client_internal.h"
#include "jsonparse.h"

static char home[256];
static const char *const vars[] = {"IPUOF_CONFIG_PATH", "IPUOF_VIPU_API_HOST",
                                   "IPUOF_VIPU_API_PORT", "IPUOF_VIPU_API_PARTITION_ID",
                                   "IPUOF_VIPU_API_GCD_ID", "IPUOF_SERVER", "IPUOF_PARTITION"};

static const char good[] =
    "{\"attributes\": {\"Partition Id\": \"pt\", \"GCD Id\": 0, \"Num GCDs\": 2, \"IPUs\": 2},\n"
    " \"servers\": [{\"address\": \"127.0.0.1:6001\", \"ipus\": [0, 1]}]}\n";

static int
setup(void **state)
{
    (void)state;
    snprintf(home, sizeof home, "/tmp/ipuof-conf-test-XXXXXX");
    assert_non_null(mkdtemp(home));
    setenv("HOME", home, 1);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

static int
teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* Writes text to HOME/rel (directories made), returns the full path in a static buffer. */
static const char *
put(const char *rel, const char *text)
{
    static char path[512];
    char dir[512];
    FILE *f;

    snprintf(dir, sizeof dir, "%s/.ipuof.conf.d", home);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/%s", home, rel);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* A config file's text for partition part, GCD gcd, server addr. */
static const char *
conf(const char *part, int gcd, const char *addr)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "{\"attributes\": {\"Partition Id\": \"%s\", \"GCD Id\": %d}, "
             "\"servers\": [{\"address\": \"%s\"}]}", part, gcd, addr);
    return buf;
}

/* The lookup must fail with a sentence holding every string of the NULL-ended list. */
static void
lookup_fails(const char *first, ...)
{
    struct ipuof_target t;
    char err[2048];
    va_list ap;

    assert_int_equal(ipuof_target_lookup(&t, err, sizeof err), IPUOF_E_INVAL);
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *)) {
        if (strstr(err, s) == NULL)
            fail_msg("'%s' not in: %s", s, err);
    }
    va_end(ap);
}

static void
lookup_is(const char *address, const char *partition, int gcd, const char *source)
{
    struct ipuof_target t;
    char err[2048];

    if (ipuof_target_lookup(&t, err, sizeof err) != IPUOF_OK)
        fail_msg("lookup failed: %s", err);
    assert_string_equal(t.address, address);
    assert_string_equal(t.partition, partition);
    assert_int_equal(t.gcd, gcd);
    if (strstr(t.source, source) == NULL)
        fail_msg("source '%s' is not '%s'", t.source, source);
}

static void
test_json_reader(void **state)
{
    struct ipuof_json *j;
    char err[512];
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"a\": 1,}", "line 1, column 9: expected a member name in double quotes, found '}'"},
        {"{\"a\": 1, \"a\": 2}", "the member \"a\" appears twice"},
        {"[1 2]", "expected ',' or ']' after an element"},
        {"{\"a\":\n  tru}", "line 2, column 3: expected a value"},
        {"\"\\ud800\"", "lone UTF-16 surrogate \\uD800"},
        {"\"a\tb\"", "control character (0x09) inside a string"},
        {"\"\\u0000\"", "\\u0000 (NUL)"},
        {"\"\\x\"", "unknown escape '\\x' in a string"},
        {"\"\xc3\x28\"", "malformed UTF-8"},
        {"01", "unexpected text after the value"},
        {"1.", "'.' must be followed by a digit"},
        {"1e999", "too large"},
        {"\"abc", "a string is not closed"},
        {"", "expected a value, found the end of the text"},
        {"{} {}", "unexpected text after the value"},
    };
    char deep[64];

    (void)state;
    assert_int_equal(ipuof_json_parse(good, strlen(good), &j, err, sizeof err), 0);
    assert_int_equal(j->type, IPUOF_JSON_OBJECT);
    assert_int_equal(ipuof_json_get(ipuof_json_get(j, "attributes"), "IPUs")->number, 2);
    assert_string_equal(ipuof_json_get(ipuof_json_get(j, "attributes"), "Partition Id")->string,
                        "pt");
    ipuof_json_free(j);
    assert_int_equal(ipuof_json_parse("\"\\u00e9\\ud83d\\ude00\"", 20, &j, err, sizeof err), 0);
    assert_string_equal(j->string, "\xc3\xa9\xf0\x9f\x98\x80");
    ipuof_json_free(j);
    assert_int_equal(ipuof_json_parse("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", 18, &j, err, sizeof err),
                     0);
    assert_string_equal(j->string, "\"\\/\b\f\n\r\t"); /* every one-letter escape */
    ipuof_json_free(j);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ipuof_json_parse(bad[i].text, strlen(bad[i].text), &j, err,
                                          sizeof err), -1);
        assert_null(j);
        if (strstr(err, bad[i].want) == NULL)
            fail_msg("case %zu (%s): '%s' not in '%s'", i, bad[i].text, bad[i].want, err);
    }
    memset(deep, '[', sizeof deep);
    assert_int_equal(ipuof_json_parse(deep, sizeof deep, &j, err, sizeof err), -1);
    assert_non_null(strstr(err, "nested more than 16 deep"));
}

/* ipuof_json_parse_limits applies the caller's limits, each at its edge: a string of
 * exactly max_string bytes (escapes decoded) is read, one more is refused; likewise items,
 * depth and bytes. */
static void
test_json_caller_limits(void **state)
{
    static const struct ipuof_json_limits lim = {32, 2, 3, 4};
    struct ipuof_json *j;
    char err[256];
    static const struct {
        const char *text, *want; /* want NULL: accepted */
    } cases[] = {
        {"\"abcd\"", NULL},
        {"\"\\u00e9\\u00e9\"", NULL},              /* 12 raw bytes, 4 decoded */
        {"\"abcde\"", "a string is longer than 4 bytes"},
        {"\"\\u00e9\\u00e9e\"", "a string is longer than 4 bytes"},
        {"[1,2,3]", NULL},
        {"[1,2,3,4]", "more than 3 items in one array"},
        {"[[1]]", NULL},
        {"[[[1]]]", "nested more than 2 deep"},
        {"[1,                            2]", "33 bytes of JSON; at most 32 are accepted"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = ipuof_json_parse_limits(cases[i].text, strlen(cases[i].text), &lim, &j, err,
                                         sizeof err);
        printf("%s -> %d %s\n", cases[i].text, rc, rc < 0 ? err : "");
        if (cases[i].want == NULL) {
            assert_int_equal(rc, 0);
            ipuof_json_free(j);
        } else {
            assert_int_equal(rc, -1);
            assert_null(j);
            if (strstr(err, cases[i].want) == NULL)
                fail_msg("case %zu: '%s' not in '%s'", i, cases[i].want, err);
        }
    }
}

static void
test_file_fields(void **state)
{
    struct ipuof_target t;
    char err[1024];
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[]", "f.conf: the file holds an array"},
        {"{\"servers\": []}", "f.conf: attributes is missing"},
        {"{\"attributes\": {\"GCD Id\": 0}, \"servers\": []}",
         "f.conf: attributes.\"Partition Id\" is missing"},
        {"{\"attributes\": {\"Partition Id\": \"a b\", \"GCD Id\": 0}}",
         "f.conf: attributes.\"Partition Id\" is \"a b\" (line 1); it must be 1 to 63 letters"},
        {"{\"attributes\": {\"Partition Id\": \"p\"}}",
         "f.conf: attributes.\"GCD Id\" is missing; it must be a whole number 0 to 1023"},
        {"{\"attributes\": {\"Partition Id\": \"p\",\n \"GCD Id\": \"0\"}}",
         "f.conf: attributes.\"GCD Id\" is the string \"0\" (line 2); it must be a whole number "
         "0 to 1023, without quotes"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 1.5}}",
         "attributes.\"GCD Id\" is 1.5"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 2, \"Num GCDs\": 2}}",
         "attributes.\"GCD Id\" is 2 but attributes.\"Num GCDs\" is 2; the GCD Id must be 0 to 1"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}}", "f.conf: servers is missing"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}, \"servers\": []}",
         "servers is an empty array"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}, \"servers\": [3]}",
         "f.conf: servers[0] is a number"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}, \"servers\": [{}]}",
         "f.conf: servers[0].address is missing"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}, \"servers\": "
         "[{\"address\": \"h:0\"}]}",
         "f.conf: servers[0].address (line 1): bad port 0"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0, \"IPUs\": 4}, \"servers\": "
         "[{\"address\": \"h:1\", \"ipus\": [0, 1]}]}",
         "servers[0].ipus lists 2 IPUs (line 1) but attributes.\"IPUs\" says 4"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}, \"servers\": "
         "[{\"address\": \"h:1\", \"ipus\": [0, -1]}]}",
         "servers[0].ipus[1] is -1"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0}, \"servers\": "
         "[{\"address\": \"h:1\"}, {\"address\": \"g:1\"}]}",
         "servers lists 2 ipuofd daemons"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0, \"Pod hosts\": []}}",
         "f.conf: attributes.\"Pod hosts\" is an empty array (line 1); it must be an array of 1 "
         "to 17 host names"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0, \"Pod hosts\": \"a,b\"}}",
         "attributes.\"Pod hosts\" is a string"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0, \"Pod hosts\": [\"a\", "
         "\"b c\"]}}", "attributes.\"Pod hosts\"[1] (line 1) must be a daemon's [pod] name"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0, \"Pod hosts\": [\"a\", "
         "\"a\"]}}", "attributes.\"Pod hosts\"[1] names \"a\" again"},
        {"{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 0},", "f.conf: not valid JSON: "
         "line 1, column 51: expected a member name in double quotes, found the end of the text"},
    };

    (void)state;
    assert_int_equal(ipuof_conf_parse("f.conf", good, strlen(good), &t, err, sizeof err), 0);
    assert_string_equal(t.partition, "pt");
    assert_int_equal(t.gcd, 0);
    assert_string_equal(t.address, "127.0.0.1:6001");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ipuof_conf_parse("f.conf", bad[i].text, strlen(bad[i].text), &t, err,
                                          sizeof err), -1);
        if (strstr(err, bad[i].want) == NULL)
            fail_msg("case %zu: '%s' not in '%s'", i, bad[i].want, err);
    }
    /* Unknown members are kept for later versions: ignored. */
    {
        const char *ext = "{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 3, \"Sync\": "
                          "{}}, \"servers\": [{\"address\": \"unix:/run/ipuofd.sock\", "
                          "\"x\": 1}], \"y\": null}";
        if (ipuof_conf_parse("f.conf", ext, strlen(ext), &t, err, sizeof err) != 0)
            fail_msg("%s", err);
    }
    assert_string_equal(t.address, "unix:/run/ipuofd.sock");
    assert_int_equal(t.gcd, 3);
    assert_int_equal(t.n_pod_hosts, 0);
    /* A GCD of a partition spanning a Pod: its daemon, and every daemon by name. */
    {
        const char *pod = "{\"attributes\": {\"Partition Id\": \"p\", \"GCD Id\": 1, "
                          "\"Num GCDs\": 2, \"Pod hosts\": [\"host-a\", \"host-b\"]}, "
                          "\"servers\": [{\"address\": \"10.0.0.2:50052\"}]}";
        if (ipuof_conf_parse("f.conf", pod, strlen(pod), &t, err, sizeof err) != 0)
            fail_msg("%s", err);
    }
    assert_int_equal(t.n_pod_hosts, 2);
    assert_string_equal(t.pod_hosts[0], "host-a");
    assert_string_equal(t.pod_hosts[1], "host-b");
    assert_string_equal(t.address, "10.0.0.2:50052");
}

static void
test_order(void **state)
{
    (void)state;
    /* 5: nothing set, no directory. */
    lookup_is("127.0.0.1:50052", "", -1, "the default");
    /* 4: IPUOF_SERVER; a partition from IPUOF_VIPU_API_PARTITION_ID. */
    setenv("IPUOF_SERVER", "127.0.0.1:7000", 1);
    lookup_is("127.0.0.1:7000", "", -1, "IPUOF_SERVER");
    setenv("IPUOF_VIPU_API_PARTITION_ID", "pp", 1);
    lookup_is("127.0.0.1:7000", "pp", -1, "IPUOF_SERVER");
    unsetenv("IPUOF_VIPU_API_PARTITION_ID");
    /* 3: a file in ~/.ipuof.conf.d comes before IPUOF_SERVER. */
    put(".ipuof.conf.d/pt_gcd0.conf", conf("pt", 0, "127.0.0.1:7001"));
    put(".ipuof.conf.d/README", "not a config file: not read");
    lookup_is("127.0.0.1:7001", "pt", 0, "/.ipuof.conf.d/pt_gcd0.conf");
    /* 2: PopRun's variables come before the directory. */
    setenv("IPUOF_VIPU_API_HOST", "localhost", 1);
    setenv("IPUOF_VIPU_API_PARTITION_ID", "vp", 1);
    lookup_is("localhost:50052", "vp", 0, "IPUOF_VIPU_API_HOST");
    setenv("IPUOF_VIPU_API_PORT", "7002", 1);
    setenv("IPUOF_VIPU_API_GCD_ID", "1", 1);
    lookup_is("localhost:7002", "vp", 1, "IPUOF_VIPU_API_HOST");
    setenv("IPUOF_VIPU_API_HOST", "::1", 1);
    lookup_is("[::1]:7002", "vp", 1, "IPUOF_VIPU_API_HOST");
    /* 1: IPUOF_CONFIG_PATH comes first. */
    setenv("IPUOF_CONFIG_PATH", put("mine.json", conf("cp", 2, "127.0.0.1:7003")), 1);
    lookup_is("127.0.0.1:7003", "cp", 2, "/mine.json");
}

static void
test_directory_choice(void **state)
{
    (void)state;
    put(".ipuof.conf.d/a_gcd0.conf", conf("a", 0, "127.0.0.1:7010"));
    put(".ipuof.conf.d/a_gcd1.conf", conf("a", 1, "127.0.0.1:7011"));
    lookup_is("127.0.0.1:7010", "a", 0, "a_gcd0.conf"); /* GCD 0 unless asked */
    setenv("IPUOF_VIPU_API_GCD_ID", "1", 1);
    lookup_is("127.0.0.1:7011", "a", 1, "a_gcd1.conf");
    setenv("IPUOF_VIPU_API_GCD_ID", "2", 1);
    lookup_fails("no config file in ", ".ipuof.conf.d handles GCD 2: it holds a_gcd0.conf "
                 "(partition 'a', GCD 0), a_gcd1.conf (partition 'a', GCD 1)", NULL);
    unsetenv("IPUOF_VIPU_API_GCD_ID");
    put(".ipuof.conf.d/b_gcd0.conf", conf("b", 0, "127.0.0.1:7020"));
    lookup_fails("holds config files of several partitions", "b_gcd0.conf (partition 'b', GCD 0)",
                 "IPUOF_VIPU_API_PARTITION_ID=NAME or IPUOF_CONFIG_PATH=FILE", NULL);
    setenv("IPUOF_VIPU_API_PARTITION_ID", "b", 1);
    lookup_is("127.0.0.1:7020", "b", 0, "b_gcd0.conf");
    setenv("IPUOF_VIPU_API_PARTITION_ID", "c", 1);
    lookup_fails("handles GCD 0 of partition 'c'", NULL);
    setenv("IPUOF_VIPU_API_PARTITION_ID", "a", 1);
    put(".ipuof.conf.d/copy.conf", conf("a", 0, "127.0.0.1:7030"));
    lookup_fails("Multiple config files are registered to handle GCD 0 of partition 'a': ",
                 "a_gcd0.conf, ", "copy.conf; remove all but one", NULL);
}

static void
test_broken_and_bad_variables(void **state)
{
    char path[600];
    (void)state;
    /* A broken file in the directory stops the lookup, naming it and the field. */
    put(".ipuof.conf.d/ok.conf", conf("a", 0, "127.0.0.1:7010"));
    put(".ipuof.conf.d/zz.conf", "{\"attributes\": {\"Partition Id\": \"a\", \"GCD Id\": -1}, "
        "\"servers\": [{\"address\": \"h:1\"}]}");
    snprintf(path, sizeof path, "%s/.ipuof.conf.d/zz.conf: attributes.\"GCD Id\" is -1", home);
    lookup_fails(path, "it must be a whole number 0 to 1023", NULL);
    /* IPUOF_CONFIG_PATH that cannot be read, a directory, or broken. */
    setenv("IPUOF_CONFIG_PATH", "/nonexistent/x.conf", 1);
    lookup_fails("IPUOF_CONFIG_PATH: /nonexistent/x.conf: cannot open it: No such file", NULL);
    setenv("IPUOF_CONFIG_PATH", home, 1);
    lookup_fails("not a regular file", NULL);
    setenv("IPUOF_CONFIG_PATH", put("bad.json", "{\"attributes\": 1}"), 1);
    lookup_fails("bad.json: attributes is a number; it must be an object", NULL);
    unsetenv("IPUOF_CONFIG_PATH");
    /* PopRun's variables, wrong. */
    setenv("IPUOF_VIPU_API_HOST", "h", 1);
    lookup_fails("IPUOF_VIPU_API_HOST is set (h) but IPUOF_VIPU_API_PARTITION_ID is not", NULL);
    setenv("IPUOF_VIPU_API_PARTITION_ID", "p q", 1);
    lookup_fails("IPUOF_VIPU_API_PARTITION_ID is \"p q\"; a partition name is 1 to 63", NULL);
    setenv("IPUOF_VIPU_API_PARTITION_ID", "p", 1);
    setenv("IPUOF_VIPU_API_PORT", "0", 1);
    lookup_fails("IPUOF_VIPU_API_PORT is \"0\"; it must be a whole number 1 to 65535", NULL);
    unsetenv("IPUOF_VIPU_API_PORT");
    setenv("IPUOF_VIPU_API_GCD_ID", "x", 1);
    lookup_fails("IPUOF_VIPU_API_GCD_ID is \"x\"", NULL);
}

/* A connect that finds its address in a config file says so when it cannot connect, and
 * the partition the file names is what the handle will attach. */
static void
test_connect_names_the_file(void **state)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    char addr[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ipuof_client *c;
    const char *path;

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd); /* nobody listens there now */
    snprintf(addr, sizeof addr, "127.0.0.1:%u", ntohs(sa.sin_port));
    path = put(".ipuof.conf.d/p.conf", conf("pp", 0, addr));
    c = ipuof_client_new();
    assert_int_equal(ipuof_client_connect(c, NULL), IPUOF_E_IO);
    assert_non_null(strstr(ipuof_client_errmsg(c), addr));
    if (strstr(ipuof_client_errmsg(c), path) == NULL)
        fail_msg("'%s' not in '%s'", path, ipuof_client_errmsg(c));
    assert_string_equal(c->target.partition, "pp");
    /* A broken file: the connect fails before any socket, naming it. */
    put(".ipuof.conf.d/p.conf", "{");
    assert_int_equal(ipuof_client_connect(c, NULL), IPUOF_E_INVAL);
    assert_non_null(strstr(ipuof_client_errmsg(c), "finding ipuofd: "));
    assert_non_null(strstr(ipuof_client_errmsg(c), "p.conf: not valid JSON"));
    /* An address the caller gives skips the lookup (the broken file is not read). */
    assert_int_equal(ipuof_client_connect(c, addr), IPUOF_E_IO);
    assert_null(strstr(ipuof_client_errmsg(c), "p.conf"));
    assert_string_equal(c->target.partition, "");
    ipuof_client_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_json_caller_limits),
        cmocka_unit_test(test_file_fields),
        cmocka_unit_test_setup_teardown(test_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_choice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_and_bad_variables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_names_the_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_faults.c — daemon/state/faults.c without a daemon: kinds and triggers parsed (and refused
 * with a sentence), targets matched, --after-runs, --count, a seeded --probability that
 * repeats, faults_match from a table of trigger points (test_match_table), IPUOF_FAULTS's JSON
 * byte by byte, reset levels; and devices.c's IPU error state (the strongest need kept, what
 * blocks an attach, cleared by dev_clear).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices.h"
#include "faults.h"
#include "ipuof/status.h"

static struct fault_table t;

static int
add(const char *kind, const char *at, int ipu, const char *part, char *err)
{
    struct fault_spec s = {.kind = kind, .at = at, .partition = part};

    if (ipu >= 0) {
        s.has_ipu = 1;
        s.ipu = (unsigned)ipu;
    }
    return faults_add(&t, &s, 4, 0, NULL, err, 512);
}

static void
test_parse(void **state)
{
    char err[512];
    char buf[48];

    (void)state;
    faults_init(&t);
    assert_int_equal(add("recoverable:IPU_RESET", NULL, 0, NULL, err), 0);
    assert_int_equal(t.f[0].at, FAULT_AT_RUN);
    assert_int_equal(t.f[0].recovery, IPUOF_RECOVERY_IPU_RESET);
    assert_int_equal(t.f[0].count, 1);
    assert_string_equal(faults_kind_name(&t.f[0], buf, sizeof buf), "recoverable:IPU_RESET");
    assert_int_equal(add("recoverable:LINK_RESET", "attach", -1, "p", err), 0);
    assert_int_equal(t.f[1].recovery, IPUOF_RECOVERY_LINK_RESET);
    assert_int_equal(add("unrecoverable", "weights", -1, NULL, err), 0);
    assert_int_equal(t.f[2].recovery, IPUOF_RECOVERY_FULL_RESET);
    assert_int_equal(add("fabric-disconnect", "compile", 3, NULL, err), 0);
    assert_int_equal(add("recoverable:PARTITION_RESET", "collective", -1, "p", err), 0);
    assert_int_equal(t.f[4].at, FAULT_AT_COLLECTIVE);
    assert_string_equal(faults_at_name(t.f[4].at), "collective");
    /* matched by a Pod job's run at its collective only */
    assert_null(faults_match(&t, FAULT_AT_RUN, 2, 1, "p", 0));
    assert_ptr_equal(faults_match(&t, FAULT_AT_COLLECTIVE, 2, 1, "p", 0), &t.f[4]);
    /* refused, nothing added */
    assert_int_equal(add("recoverable:PARITION_RESET", NULL, 0, NULL, err), -1);
    assert_non_null(strstr(err, "PARTITION_RESET"));
    assert_int_equal(add("oom", NULL, 0, NULL, err), -1);
    assert_non_null(strstr(err, "host-sync-timeout"));
    assert_int_equal(add("unrecoverable", "barrier", 0, NULL, err), -1);
    assert_non_null(strstr(err, "attach, compile, load, weights, run or collective"));
    /* at collective: a Pod job's failure, PARTITION_RESET alone, nothing to re-arm on */
    assert_int_equal(add("unrecoverable", "collective", 0, NULL, err), -1);
    assert_non_null(strstr(err, "give --kind recoverable:PARTITION_RESET"));
    assert_int_equal(add("recoverable:IPU_RESET", "collective", -1, "p", err), -1);
    assert_non_null(strstr(err, "cannot happen at collective"));
    {
        struct fault_spec s = {.kind = "recoverable:PARTITION_RESET", .at = "collective",
                               .rearm = 1};
        assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, 512), -1);
        assert_non_null(strstr(err, "a fault at collective puts none in error"));
    }
    assert_int_equal(add("unrecoverable", NULL, 4, NULL, err), -1);
    assert_non_null(strstr(err, "IPUs 0 to 3"));
    assert_int_equal(add("unrecoverable", NULL, 1, "p", err), -1);
    assert_non_null(strstr(err, "not both"));
    assert_int_equal(add(NULL, NULL, 1, NULL, err), -1);
    assert_int_equal(t.n, 5);
    assert_int_equal(faults_clear(&t, 2), 1);
    assert_int_equal(faults_clear(&t, 2), 0);
    assert_int_equal(t.n, 4);
    assert_int_equal(faults_clear(&t, 0), 4);
    assert_int_equal(t.n, 0);
    /* ids are not reused */
    assert_int_equal(add("unrecoverable", NULL, 1, NULL, err), 0);
    assert_int_equal(t.f[0].id, 6);
}

/* --host: this daemon's own Pod name only; another host's refused naming the daemon that
 * takes it; an unknown one or any in no Pod refused. */
static void
test_host(void **state)
{
    static const char *const peers[] = {"host-b", "host-c"};
    struct fault_spec s = {.kind = "recoverable:PARTITION_RESET", .at = "collective"};
    char err[512];

    (void)state;
    faults_init(&t);
    s.host = "host-a";
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "this daemon is in no Pod"));
    faults_set_pod(&t, "host-a", peers, 2);
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    assert_string_equal(t.f[0].host, "host-a");
    assert_non_null(faults_match(&t, FAULT_AT_COLLECTIVE, 2, 2, "p", 0)); /* any of its IPUs */
    s.host = "host-c";
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "give the fault to host 'host-c''s daemon"));
    s.host = "host-bb";
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "no Pod host 'host-bb': this daemon is host 'host-a', its "
                            "peers are host-b host-c"));
    assert_int_equal(t.n, 1);
    /* and from IPUOF_FAULTS */
    assert_int_equal(faults_parse_json(&t, "{\"host\": \"host-a\", \"ipu\": 1, \"kind\": "
                                       "\"unrecoverable\"}", "IPUOF_FAULTS", 4, 0, err,
                                       sizeof err), 0);
    assert_string_equal(t.f[1].host, "host-a");
    assert_int_equal(faults_parse_json(&t, "{\"host\": \"host-b\", \"kind\": \"hang\"}",
                                       "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "host 'host-b''s daemon"));
}

/* Every kind: its name back, its recovery, the triggers it may have. */
static void
test_kinds(void **state)
{
    static const struct {
        const char *kind;
        const char *name;    /* what faults_kind_name says */
        enum fault_kind k;
        int recovery;
        int at_attach;       /* may it be armed for attach */
    } rows[] = {
        {"recoverable:IPU_RESET", "recoverable:IPU_RESET", FAULT_RECOVERABLE,
         IPUOF_RECOVERY_IPU_RESET, 1},
        {"recoverable:FULL_RESET", "recoverable:FULL_RESET", FAULT_RECOVERABLE,
         IPUOF_RECOVERY_FULL_RESET, 1},
        {"unrecoverable", "unrecoverable", FAULT_UNRECOVERABLE, IPUOF_RECOVERY_FULL_RESET, 1},
        {"soc-error", "soc-error", FAULT_SOC_ERROR, IPUOF_RECOVERY_IPU_RESET, 1},
        {"soc-error:IPUSOFTERR", "soc-error", FAULT_SOC_ERROR, IPUOF_RECOVERY_IPU_RESET, 1},
        {"host-sync-timeout", "host-sync-timeout", FAULT_HOST_SYNC_TIMEOUT,
         IPUOF_RECOVERY_IPU_RESET, 1},
        {"hang", "hang", FAULT_HANG, IPUOF_RECOVERY_IPU_RESET, 0},
        {"tile-oom", "tile-oom", FAULT_TILE_OOM, IPUOF_RECOVERY_NONE, 0},
        {"stream-oom", "stream-oom", FAULT_STREAM_OOM, IPUOF_RECOVERY_NONE, 0},
        {"fabric-disconnect", "fabric-disconnect", FAULT_FABRIC_DISCONNECT,
         IPUOF_RECOVERY_NONE, 1},
        {"daemon-kill", "daemon-kill", FAULT_DAEMON_KILL, IPUOF_RECOVERY_NONE, 1},
    };
    static const char *const ats[] = {"attach", "compile", "load", "weights", "run"};
    char err[512], buf[48];

    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        for (size_t a = 0; a < sizeof ats / sizeof ats[0]; a++) {
            int ok = a > 0 || rows[i].at_attach;
            faults_init(&t);
            assert_int_equal(add(rows[i].kind, ats[a], 0, NULL, err), ok ? 0 : -1);
            if (!ok) {
                assert_non_null(strstr(err, "cannot happen at attach"));
                continue;
            }
            assert_int_equal(t.f[0].kind, rows[i].k);
            assert_int_equal(t.f[0].recovery, rows[i].recovery);
            memset(buf, 0, sizeof buf);
            assert_string_equal(faults_kind_name(&t.f[0], buf, sizeof buf), rows[i].name);
            assert_string_equal(buf, rows[i].name); /* the sentences print buf */
            assert_string_equal(faults_at_name(t.f[0].at), ats[a]);
        }
    }
    /* --wait belongs to host-sync-timeout alone */
    {
        struct fault_spec s = {.kind = "hang", .wait_ms = 100};
        faults_init(&t);
        assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
        assert_non_null(strstr(err, "does not wait"));
        s.kind = "host-sync-timeout";
        assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
        assert_int_equal(t.f[0].wait_ms, 100);
        s.wait_ms = 0;
        s.rearm = 1;
        s.kind = "tile-oom";       /* rearm needs IPUs in error to be reset */
        assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
        assert_non_null(strstr(err, "puts none in error"));
    }
}

/* Link faults (link:partition:PEER, link:latency=MS:PEER, link:reset-peer:PEER): a table
 * of kinds parsed or refused with their sentence; faults_link and faults_link_reset read
 * them per peer; faults_match never fires them; --duration and clear end them. */
static void
test_links(void **state)
{
    static const char *const peers[] = {"host-b", "host-c"};
    static const struct {
        const char *kind, *at;
        int ipu;               /* -1: none */
        unsigned count;
        const char *name;      /* faults_kind_name's, or NULL: refused */
        const char *why;       /* a part of the refusal */
    } rows[] = {
        {"link:partition:host-b", NULL, -1, 0, "link:partition:host-b", NULL},
        {"link:partition:host-c", "collective", -1, 0, "link:partition:host-c", NULL},
        {"link:latency=50:host-b", NULL, -1, 0, "link:latency=50:host-b", NULL},
        {"link:latency=60000:host-c", NULL, -1, 0, "link:latency=60000:host-c", NULL},
        {"link:reset-peer:host-b", NULL, -1, 2, "link:reset-peer:host-b", NULL},
        {"link:latency=60001:host-b", NULL, -1, 0, NULL, "from 1 to 60000"},
        {"link:latency=0:host-b", NULL, -1, 0, NULL, "from 1 to 60000"},
        {"link:latency=x:host-b", NULL, -1, 0, NULL, "whole number of milliseconds"},
        {"link:latency=5", NULL, -1, 0, NULL, "whole number of milliseconds"},
        {"link:bandwidth=100:host-b", NULL, -1, 0, NULL, "bandwidth=KB/s is not emulated"},
        {"link:partition", NULL, -1, 0, NULL, "'' is not a peer of this daemon"},
        {"link:partition:host-a", NULL, -1, 0, NULL, "its peers are host-b host-c;"},
        {"link:partition:host-d", NULL, -1, 0, NULL, "'host-d' is not a peer"},
        {"link:partition:host-b", "run", -1, 0, NULL, "leave --at out or give --at collective"},
        {"link:partition:host-b", NULL, 0, 0, NULL, "targets the link to a peer host"},
        {"link:partition:host-b", NULL, -1, 3, NULL, "it holds while armed"},
    };
    struct fault_spec s = {0};
    char err[512], buf[FAULTS_KIND_MAX];
    unsigned ms = 7;

    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        faults_init(&t);
        faults_set_pod(&t, "host-a", peers, 2);
        memset(&s, 0, sizeof s);
        s.kind = rows[i].kind;
        s.at = rows[i].at;
        s.count = rows[i].count;
        s.has_ipu = rows[i].ipu >= 0;
        s.ipu = rows[i].ipu >= 0 ? (unsigned)rows[i].ipu : 0;
        err[0] = '\0';
        if (rows[i].name == NULL) {
            assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
            if (strstr(err, rows[i].why) == NULL)
                fail_msg("row %zu (%s): '%s' lacks '%s'", i, rows[i].kind, err, rows[i].why);
            assert_int_equal(t.n, 0);
            continue;
        }
        assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
        assert_string_equal(faults_kind_name(&t.f[0], buf, sizeof buf), rows[i].name);
        assert_int_equal(t.f[0].at, FAULT_AT_COLLECTIVE);
        assert_int_equal(t.f[0].recovery, IPUOF_RECOVERY_PARTITION_RESET);
        /* never a plain fault at any trigger */
        for (unsigned a = 0; a < FAULT_AT_COUNT; a++)
            assert_null(faults_match(&t, (enum fault_at)a, 0, 4, "p", 0));
    }
    /* outside a Pod there is no link */
    faults_init(&t);
    memset(&s, 0, sizeof s);
    s.kind = "link:partition:host-b";
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "in no Pod"));

    /* per peer: partition, summed latencies, a reset that fires count times */
    faults_set_pod(&t, "host-a", peers, 2);
    assert_int_equal(faults_link(&t, "host-b", 0, &ms), 0);
    assert_int_equal(ms, 0);
    s.duration_ms = 1000;
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0); /* id 1 */
    s.duration_ms = 0;
    s.kind = "link:latency=30:host-c";
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    s.kind = "link:latency=20:host-c";
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    s.kind = "link:reset-peer:host-c";
    s.count = 2;
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0); /* id 4 */
    assert_int_equal(faults_link(&t, "host-b", 10, &ms), 1);
    assert_int_equal(ms, 0);
    assert_int_equal(faults_link(&t, "host-c", 10, &ms), 0);
    assert_int_equal(ms, 50);
    assert_int_equal(faults_link(&t, "host-b", 1000, &ms), 0); /* its duration is over */
    assert_null(faults_link_reset(&t, "host-b", 10));
    assert_int_equal(faults_link_reset(&t, "host-c", 10)->id, 4);
    assert_int_equal(faults_link_reset(&t, "host-c", 10)->id, 4);
    assert_null(faults_link_reset(&t, "host-c", 10)); /* spent after its count */
    assert_int_equal(t.f[3].fired, 2);
    assert_int_equal(faults_clear(&t, 2), 1);
    assert_int_equal(faults_link(&t, "host-c", 10, &ms), 0);
    assert_int_equal(ms, 20);
    /* and from IPUOF_FAULTS */
    assert_int_equal(faults_parse_json(&t, "{\"kind\": \"link:partition:host-c\"}",
                                       "IPUOF_FAULTS", 4, 0, err, sizeof err), 0);
    assert_int_equal(faults_link(&t, "host-c", 10, &ms), t.f[t.n - 1].id);
}

/* --duration: armed for so long after it was added; --rearm-on-reset: a reset of the IPUs
 * it hit arms it again (and only once every one of them was reset). */
static void
test_duration_rearm(void **state)
{
    struct fault_spec s = {.kind = "recoverable:IPU_RESET", .duration_ms = 1000};
    struct fault *f;
    char err[512];

    (void)state;
    faults_init(&t);
    assert_int_equal(faults_add(&t, &s, 4, 5000, NULL, err, sizeof err), 0);
    assert_false(faults_expired(&t.f[0], 5999));
    assert_true(faults_expired(&t.f[0], 6000));
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 6000));   /* expired */
    assert_int_equal(t.f[0].seen, 0);
    assert_non_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 5999));

    faults_init(&t);
    s.duration_ms = 0;
    s.rearm = 1;
    s.after = 1;
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 1));       /* after 1 */
    f = faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 1);
    assert_non_null(f);
    f->hit = (1u << 0) | (1u << 1);     /* as fault_fire marks the IPUs it put in error */
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 1));       /* spent */
    assert_int_equal(faults_rearm(&t, 2), 0);                        /* not one it hit */
    assert_int_equal(faults_rearm(&t, 0), 0);                        /* IPU 1 still in error */
    assert_int_equal(faults_rearm(&t, 1), 1);
    assert_int_equal(t.f[0].rearmed, 1);
    assert_int_equal(t.f[0].fired, 0);
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 1));       /* after 1 again */
    assert_non_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 1));
    /* without rearm a reset only forgets the IPU */
    t.f[0].rearm = 0;
    t.f[0].hit = 1;
    assert_int_equal(faults_rearm(&t, 0), 0);
    assert_int_equal(t.f[0].hit, 0);
    assert_int_equal(t.f[0].fired, 1);
}

/* [faults] inject lines, then IPUOF_FAULTS; a bad line is named. */
static void
test_load(void **state)
{
    char err[512];

    (void)state;
    faults_init(&t);
    assert_int_equal(faults_load(&t, "{\"kind\":\"hang\",\"at\":\"load\"}\n"
                                 "{\"kind\":\"soc-error\",\"rearm_on_reset\":true,"
                                 "\"duration_ms\":60000}\n",
                                 "[{\"kind\":\"host-sync-timeout\",\"wait_ms\":250}]", 4, 7,
                                 err, sizeof err), 0);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.f[0].at, FAULT_AT_LOAD);
    assert_true(t.f[1].rearm);
    assert_int_equal(t.f[1].duration_ms, 60000);
    assert_int_equal(t.f[1].armed_ms, 7);
    assert_int_equal(t.f[2].wait_ms, 250);
    faults_init(&t);
    assert_int_equal(faults_load(&t, "{\"kind\":\"hang\"}\n{\"kind\":\"hung\"}\n", NULL, 4,
                                 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "the config's [faults] inject number 2 entry 0"));
    assert_int_equal(faults_load(&t, "", "[{\"kind\":\"hang\",\"rearm_on_reset\":1}]", 4, 0,
                                 err, sizeof err), -1);
    assert_non_null(strstr(err, "give true or false"));
    assert_int_equal(faults_load(&t, NULL, "", 4, 0, err, sizeof err), 0);
}

static void
test_match(void **state)
{
    struct fault_spec s = {.kind = "recoverable:IPU_RESET", .has_ipu = 1, .ipu = 2,
                           .after = 2, .count = 2};
    char err[512];

    (void)state;
    faults_init(&t);
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 2, "p0", 0));   /* IPUs 0-1: not its IPU */
    assert_null(faults_match(&t, FAULT_AT_COMPILE, 2, 2, "p1", 0)); /* not its trigger */
    assert_int_equal(t.f[0].seen, 0);
    assert_null(faults_match(&t, FAULT_AT_RUN, 2, 2, "p1", 0));   /* after 2 */
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 4, "p2", 0));
    assert_non_null(faults_match(&t, FAULT_AT_RUN, 2, 1, "p3", 0));
    assert_non_null(faults_match(&t, FAULT_AT_RUN, 2, 1, "p3", 0));
    assert_null(faults_match(&t, FAULT_AT_RUN, 2, 1, "p3", 0));   /* count 2: spent */
    assert_true(faults_spent(&t.f[0]));
    assert_int_equal(t.f[0].fired, 2);

    faults_init(&t);
    s.has_ipu = 0;
    s.partition = "train";
    s.after = 0;
    s.count = 0;
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "other", 0));
    assert_null(faults_match(&t, FAULT_AT_RUN, 0, 1, NULL, 0));
    assert_non_null(faults_match(&t, FAULT_AT_RUN, 0, 1, "train", 0));
}

/* faults_match from a table, no sockets: each row arms up to two faults (oldest first) and
 * meets a sequence of trigger points (trigger, IPUs, partition, time); want[i] says what
 * point i gets: '.' nothing, '1' or '2' the fault of that row that fires. */
static void
test_match_table(void **state)
{
    struct ev {
        enum fault_at at;
        unsigned first, count;
        const char *part;
        uint64_t now;
    };
    static const struct {
        const char *what;
        struct fault_spec f[2];
        struct ev ev[6];
        const char *want;
    } rows[] = {
        {"any IPU, run, once", {{.kind = "soc-error"}},
         {{FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_RUN, 0, 1, "p", 0}}, "1."},
        {"IPU 2: only points that touch it", {{.kind = "hang", .has_ipu = 1, .ipu = 2}},
         {{FAULT_AT_RUN, 0, 2, "a", 0}, {FAULT_AT_RUN, 3, 1, "b", 0},
          {FAULT_AT_RUN, 0, 4, "c", 0}}, "..1"},
        {"partition p1 by name", {{.kind = "unrecoverable", .partition = "p1"}},
         {{FAULT_AT_RUN, 0, 2, "p0", 0}, {FAULT_AT_RUN, 0, 2, NULL, 0},
          {FAULT_AT_RUN, 2, 2, "p1", 0}}, "..1"},
        {"compile only", {{.kind = "tile-oom", .at = "compile"}},
         {{FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_WEIGHTS, 0, 1, "p", 0},
          {FAULT_AT_LOAD, 0, 1, "p", 0}, {FAULT_AT_COMPILE, 0, 1, "p", 0}}, "...1"},
        {"after 2, count 2", {{.kind = "recoverable:IPU_RESET", .after = 2, .count = 2}},
         {{FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_RUN, 0, 1, "p", 0},
          {FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_RUN, 0, 1, "p", 0},
          {FAULT_AT_RUN, 0, 1, "p", 0}}, "..11."},
        {"other triggers do not count towards after",
         {{.kind = "recoverable:IPU_RESET", .after = 1}},
         {{FAULT_AT_COMPILE, 0, 1, "p", 0}, {FAULT_AT_WEIGHTS, 0, 1, "p", 0},
          {FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_RUN, 0, 1, "p", 0}}, "...1"},
        {"duration 100 ms", {{.kind = "stream-oom", .count = 3, .duration_ms = 100}},
         {{FAULT_AT_RUN, 0, 1, "p", 99}, {FAULT_AT_RUN, 0, 1, "p", 100},
          {FAULT_AT_RUN, 0, 1, "p", 1000}}, "1.."},
        {"load on a partition holding IPU 3", {{.kind = "hang", .at = "load", .has_ipu = 1,
                                               .ipu = 3}},
         {{FAULT_AT_RUN, 0, 4, "p", 0}, {FAULT_AT_LOAD, 0, 2, "p", 0},
          {FAULT_AT_LOAD, 0, 4, "p", 0}}, "..1"},
        {"attach of a job by its name", {{.kind = "fabric-disconnect", .at = "attach",
                                          .partition = "job"}},
         {{FAULT_AT_ATTACH, 0, 2, "other", 0}, {FAULT_AT_ATTACH, 0, 2, "job", 0}}, ".1"},
        {"collective: not a plain run's",
         {{.kind = "recoverable:PARTITION_RESET", .at = "collective"}},
         {{FAULT_AT_RUN, 0, 4, "p", 0}, {FAULT_AT_COLLECTIVE, 0, 4, "p", 0}}, ".1"},
        {"oldest first; the second once the first is spent",
         {{.kind = "soc-error"}, {.kind = "unrecoverable"}},
         {{FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_RUN, 0, 1, "p", 0},
          {FAULT_AT_RUN, 0, 1, "p", 0}}, "12."},
        {"the first's target misses: the second fires",
         {{.kind = "soc-error", .has_ipu = 1, .ipu = 3}, {.kind = "hang", .at = "run"}},
         {{FAULT_AT_RUN, 0, 1, "p", 0}, {FAULT_AT_RUN, 3, 1, "q", 0}}, "21"},
    };

    (void)state;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char err[512], got[8] = {0};
        size_t n = strlen(rows[r].want);
        faults_init(&t);
        for (int k = 0; k < 2 && rows[r].f[k].kind != NULL; k++)
            if (faults_add(&t, &rows[r].f[k], 4, 0, NULL, err, sizeof err) != 0)
                fail_msg("row '%s': fault %d refused: %s", rows[r].what, k + 1, err);
        for (size_t i = 0; i < n; i++) {
            const struct ev *e = &rows[r].ev[i];
            struct fault *f = faults_match(&t, e->at, e->first, e->count, e->part, e->now);
            got[i] = f == NULL ? '.' : (char)('1' + (f - t.f));
        }
        if (strcmp(got, rows[r].want) != 0)
            fail_msg("row '%s': fired %s, want %s", rows[r].what, got, rows[r].want);
    }
}

/* The runs (bits) of 64 that fire with probability p and seed. */
static uint64_t
pattern(double p, uint64_t seed)
{
    struct fault_spec s = {.kind = "host-sync-timeout", .probability = p, .seed = seed,
                           .count = 64};
    char err[512];
    uint64_t bits = 0;

    faults_init(&t);
    assert_int_equal(faults_add(&t, &s, 4, 0, NULL, err, sizeof err), 0);
    for (int i = 0; i < 64; i++)
        if (faults_match(&t, FAULT_AT_RUN, 0, 1, "p", 0) != NULL)
            bits |= 1ull << i;
    return bits;
}

static void
test_probability(void **state)
{
    uint64_t a = pattern(0.25, 7), b = pattern(0.25, 7), c = pattern(0.25, 8);
    int n = __builtin_popcountll(a);

    (void)state;
    print_message("p 0.25 seed 7: %d of 64 fired\n", n);
    assert_true(a == b);
    assert_true(a != c);
    assert_in_range(n, 6, 26);
    assert_true(pattern(1.0, 1) == ~0ull);
}

static void
test_json(void **state)
{
    char err[512];

    (void)state;
    faults_init(&t);
    assert_int_equal(faults_parse_json(&t, " [ ] ", "IPUOF_FAULTS", 4, 0, err, sizeof err), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(faults_parse_json(&t, "[{\"ipu\": 1, \"kind\": \"recoverable:FULL_RESET\","
                                       " \"at\": \"weights\", \"after_runs\": 3, \"count\": 2},"
                                       " {\"partition\": \"p\\\"q\", \"kind\": \"unrecoverable\","
                                       " \"probability\": 0.5, \"seed\": 99}]", "IPUOF_FAULTS", 4, 0, err,
                                       sizeof err), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.f[0].ipu, 1);
    assert_int_equal(t.f[0].at, FAULT_AT_WEIGHTS);
    assert_int_equal(t.f[0].after, 3);
    assert_int_equal(t.f[0].count, 2);
    assert_string_equal(t.f[1].partition, "p\"q");
    assert_true(t.f[1].probability == 0.5);
    assert_int_equal(t.f[1].seed, 99);
    assert_int_equal(faults_parse_json(&t, "{\"kind\":\"fabric-disconnect\"}", "IPUOF_FAULTS", 4, 0, err,
                                       sizeof err), 0);
    assert_int_equal(t.n, 3);
    /* refused with a sentence */
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":\"x\"}]", "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "entry 0"));
    assert_int_equal(faults_parse_json(&t, "[{\"ipu\":-1,\"kind\":\"unrecoverable\"}]", "IPUOF_FAULTS", 4, 0, err,
                                       sizeof err), -1);
    assert_non_null(strstr(err, "\"ipu\" wants a whole number from 0"));
    assert_int_equal(faults_parse_json(&t, "[{\"count\":1.5}]", "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":\"unrecoverable\"} x", "IPUOF_FAULTS", 4, 0, err,
                                       sizeof err), -1);
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":\"unrecoverable\"}] x", "IPUOF_FAULTS", 4, 0, err,
                                       sizeof err), -1);
    assert_non_null(strstr(err, "IPUOF_FAULTS is not JSON: line 1, column"));
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":\"unrecoverable\"", "IPUOF_FAULTS", 4, 0, err, sizeof err),
                     -1);
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":\"unrecoverable", "IPUOF_FAULTS", 4, 0, err, sizeof err),
                     -1);
    assert_int_equal(faults_parse_json(&t, "", "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}]", "IPUOF_FAULTS", 4, 0,
                                       err, sizeof err), -1);
    assert_int_equal(faults_parse_json(&t, "[{\"colour\":1}]", "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown key"));
    /* the bounded reader's rules: a key given twice, a kind that is not a string, nesting */
    assert_int_equal(faults_parse_json(&t, "{\"kind\":\"unrecoverable\",\"kind\":\"hang\"}",
                                       "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_int_equal(faults_parse_json(&t, "[{\"kind\":7}]", "IPUOF_FAULTS", 4, 0, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "\"kind\" is a number; give a string"));
    assert_int_equal(faults_parse_json(&t, "[[{\"kind\":\"unrecoverable\"}]]", "cfg", 4, 0, err,
                                       sizeof err), -1);
    assert_non_null(strstr(err, "cfg entry 0 is an array"));
    assert_int_equal(faults_parse_json(&t, "7", "IPUOF_FAULTS", 4, 0, err, sizeof err), -1);
    assert_int_equal(t.n, 3);
}

static void
test_levels_and_errors(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(4, 1 << 20, 1472);
    struct dev_partition *p = NULL;
    struct dev_holder h = {.pid = 1};
    char err[512];
    unsigned ipu = 9;

    (void)state;
    assert_true(faults_level(IPUOF_RECOVERY_IPU_RESET) < faults_level(IPUOF_RECOVERY_LINK_RESET));
    assert_true(faults_level(IPUOF_RECOVERY_LINK_RESET) <
                faults_level(IPUOF_RECOVERY_PARTITION_RESET));
    assert_true(faults_level(IPUOF_RECOVERY_PARTITION_RESET) <
                faults_level(IPUOF_RECOVERY_FULL_RESET));
    assert_int_equal(faults_level(IPUOF_RECOVERY_RETRY), 0);
    assert_string_equal(ipuof_recovery_name(IPUOF_RECOVERY_LINK_RESET), "LINK_RESET");
    assert_string_equal(ipuof_recovery_name(IPUOF_RECOVERY_FULL_RESET), "FULL_RESET");

    assert_int_equal(dev_attach(inv, 2, "a", &h, NULL, &p, err, sizeof err), IPUOF_OK);
    dev_set_error(inv, 1, IPUOF_RECOVERY_PARTITION_RESET, 0, "a", "boom");
    dev_set_error(inv, 1, IPUOF_RECOVERY_IPU_RESET, 0, "a", "weaker"); /* keeps the stronger */
    assert_int_equal(inv->ipus[1].recovery, IPUOF_RECOVERY_PARTITION_RESET);
    assert_string_equal(inv->ipus[1].error, "boom");
    assert_int_equal(dev_error_need(inv, 0, 2, &ipu), IPUOF_RECOVERY_PARTITION_RESET);
    assert_int_equal(ipu, 1);
    assert_int_equal(dev_error_need(inv, 2, 2, NULL), IPUOF_RECOVERY_NONE);
    dev_release(inv, p);
    assert_int_equal(inv->ipus[1].state, DEV_ERROR);   /* a release leaves the error */
    assert_int_equal(inv->ipus[0].state, DEV_FREE);
    /* 2 IPUs: {2,3} free, no block. 4 IPUs: blocked by IPU 1 alone. */
    assert_int_equal(dev_error_blocks(inv, 2, NULL, NULL), IPUOF_RECOVERY_NONE);
    assert_int_equal(dev_error_blocks(inv, 4, NULL, &ipu), IPUOF_RECOVERY_PARTITION_RESET);
    assert_int_equal(dev_attach(inv, 4, NULL, &h, NULL, &p, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "IPU 1 is in error and needs PARTITION_RESET"));
    dev_clear(inv, 1);
    assert_int_equal(inv->ipus[1].state, DEV_FREE);
    assert_int_equal(inv->ipus[1].recovery, 0);
    assert_string_equal(inv->ipus[1].error_part, "");
    assert_int_equal(dev_error_blocks(inv, 4, NULL, NULL), IPUOF_RECOVERY_NONE);
    dev_inventory_free(inv);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_duration_rearm),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_match_table),
        cmocka_unit_test(test_probability),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_levels_and_errors),
    };

    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}

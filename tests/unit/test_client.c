/*
 * test_client.c — libipuof-client without a daemon.
 *
 * What needs no peer: status names, NULL handling, address parsing, calls on an unconnected
 * handle, a refused connect, and that the version script exports exactly the header's
 * functions. What needs a peer uses the fake server of fakesrv.h: a thread that accepts one
 * connection on 127.0.0.1:0, reads frames with the codec and answers with a script. The
 * thread never calls cmocka (its longjmp is only safe on the test's own thread); it records
 * what went wrong in struct fake and the test checks that after joining it.
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
#include <time.h>
#include <unistd.h>

#include "../../client/wire/client_internal.h"
#include "fakesrv.h"
#include "frame.h"
#include "ipuof/client.h"

/* ---- names, NULL, addresses --------------------------------------------------------- */

static void
test_status_names(void **state)
{
    char v[32];

    (void)state;
    assert_string_equal(ipuof_status_name(IPUOF_E_NOTFOUND), "IPUOF_E_NOTFOUND");
    assert_string_equal(ipuof_status_name(IPUOF_OK), "IPUOF_OK");
    assert_string_equal(ipuof_status_name(IPUOF_STATUS_COUNT), "IPUOF_E_UNKNOWN");
    assert_string_equal(ipuof_status_name(-1), "IPUOF_E_UNKNOWN");
    assert_string_equal(ipuof_strerror(IPUOF_E_NOTFOUND), "no such IPU, partition or object");
    assert_string_equal(ipuof_strerror(1000), "unknown status code");
    for (int i = 0; i < IPUOF_STATUS_COUNT; i++) {
        assert_non_null(ipuof_strerror(i));
        assert_string_not_equal(ipuof_strerror(i), "unknown status code");
    }
    assert_string_equal(ipuof_recovery_name(IPUOF_RECOVERY_IPU_RESET), "IPU_RESET");
    assert_string_equal(ipuof_recovery_name(99), "UNKNOWN");
    assert_string_equal(ipuof_ipu_state_name(IPUOF_IPU_ATTACHED), "attached");
    assert_string_equal(ipuof_ipu_state_name(7), "unknown");
    snprintf(v, sizeof v, "%d.%d.%d", IPUOF_VERSION_MAJOR, IPUOF_VERSION_MINOR,
             IPUOF_VERSION_PATCH);
    assert_string_equal(ipuof_version(), v);
}

static void
test_null_handles(void **state)
{
    struct ipuof_ipu_info info;
    int cls = -1, rec = -1;
    const char *comp = NULL;

    (void)state;
    ipuof_client_free(NULL);
    ipuof_status_report_free(NULL);
    assert_int_equal(ipuof_client_set_timeouts(NULL, 1, 1), IPUOF_E_INVAL);
    assert_int_equal(ipuof_client_set_name(NULL, "x"), IPUOF_E_INVAL);
    assert_int_equal(ipuof_client_connect(NULL, "127.0.0.1:1"), IPUOF_E_INVAL);
    assert_int_equal(ipuof_detach(NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_health(NULL, NULL), IPUOF_E_INVAL);
    assert_int_equal(ipuof_status(NULL, NULL), IPUOF_E_INVAL);
    assert_null(ipuof_partition_name(NULL));
    assert_int_equal(ipuof_client_is_admin(NULL), 0);
    assert_non_null(ipuof_client_errmsg(NULL));
    assert_int_equal(ipuof_client_last_error(NULL, &cls, &rec, &comp), IPUOF_E_INVAL);
    assert_string_equal(comp, "client");
    assert_int_equal(ipuof_status_report_ipu_count(NULL), 0);
    assert_int_equal(ipuof_status_report_ipu(NULL, 0, &info), IPUOF_E_INVAL);
    assert_string_equal(ipuof_status_report_server_version(NULL), "");
    assert_string_equal(ipuof_status_report_process_phase(NULL, 0), "");
}

struct addr_case {
    const char *in;
    int rc;
    int is_unix;
    const char *host_or_path;
    const char *port;
    const char *formatted;
};

static void
test_addr_parse(void **state)
{
    static const struct addr_case cases[] = {
        {"127.0.0.1:50052", IPUOF_OK, 0, "127.0.0.1", "50052", "127.0.0.1:50052"},
        {"localhost:1", IPUOF_OK, 0, "localhost", "1", "localhost:1"},
        {"ipu-host.example", IPUOF_OK, 0, "ipu-host.example", "50052", "ipu-host.example:50052"},
        {"[::1]:50053", IPUOF_OK, 0, "::1", "50053", "[::1]:50053"},
        {"[fe80::1%eth0]:7", IPUOF_OK, 0, "fe80::1%eth0", "7", "[fe80::1%eth0]:7"},
        {"[::1]", IPUOF_OK, 0, "::1", "50052", "[::1]:50052"},
        {"::1", IPUOF_OK, 0, "::1", "50052", "[::1]:50052"},
        {"10.0.0.2:065535", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"10.0.0.2:0065", IPUOF_OK, 0, "10.0.0.2", "65", "10.0.0.2:65"},
        {"unix:/run/ipuofd/admin.sock", IPUOF_OK, 1, "/run/ipuofd/admin.sock", NULL,
         "unix:/run/ipuofd/admin.sock"},
        {"unix:relative.sock", IPUOF_OK, 1, "relative.sock", NULL, "unix:relative.sock"},
        {"", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"unix:", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {":50052", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"host:", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"host:0", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"host:65536", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"host:12a", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"host:-1", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"[::1", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"[::1]50052", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"[]:50052", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"ho st:1", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
        {"a/b:1", IPUOF_E_INVAL, 0, NULL, NULL, NULL},
    };
    char longpath[300];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct addr_case *k = &cases[i];
        struct ipuof_addr a;
        char err[256] = "";
        char fmt[IPUOF_ADDRESS_MAX];
        int rc = ipuof_addr_parse(k->in, &a, err, sizeof err);

        print_message("address \"%s\" -> %s %s\n", k->in, ipuof_status_name(rc), err);
        assert_int_equal(rc, k->rc);
        if (rc != IPUOF_OK) {
            assert_true(strlen(err) > 10);
            continue;
        }
        assert_int_equal(a.is_unix, k->is_unix);
        assert_string_equal(k->is_unix ? a.path : a.host, k->host_or_path);
        if (k->port != NULL)
            assert_string_equal(a.port, k->port);
        ipuof_addr_format(&a, fmt, sizeof fmt);
        assert_string_equal(fmt, k->formatted);
    }
    memcpy(longpath, "unix:/", 6);
    memset(longpath + 6, 'x', sizeof longpath - 7);
    longpath[sizeof longpath - 1] = '\0';
    {
        struct ipuof_addr a;
        char err[256];
        assert_int_equal(ipuof_addr_parse(longpath, &a, err, sizeof err), IPUOF_E_INVAL);
        assert_non_null(strstr(err, "longer than"));
    }
}

/* Counts the IPUOF_API functions declared in one header, failing on any the version
 * script (syms, names between spaces) does not list. -1 when the file cannot be read. */
static int
header_exports_listed(const char *path, const char *syms)
{
    FILE *h = fopen(path, "r");
    char line[512];
    int nheader = 0;

    if (h == NULL)
        return -1;
    while (fgets(line, sizeof line, h) != NULL) {
        const char *p = strstr(line, "IPUOF_API ");
        const char *open;
        const char *start;
        char key[140];

        if (p == NULL || strstr(line, "#define") != NULL || strchr(line, '(') == NULL)
            continue;
        open = strchr(p, '(');
        start = open;
        while (start > p && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                             (start[-1] >= '0' && start[-1] <= '9')))
            start--;
        snprintf(key, sizeof key, " %.*s ", (int)(open - start), start);
        print_message("%s exports%s\n", path, key);
        assert_non_null(strstr(syms, key));
        nheader++;
    }
    fclose(h);
    return nheader;
}

/* The version script lists the public headers' functions (client.h and the status.h it
 * includes) one by one; both must agree. Runs from the source tree's top (as make check
 * does), and is skipped elsewhere. */
static void
test_symbol_list_matches_header(void **state)
{
    FILE *s = fopen("client/libipuof-client.sym", "r");
    char line[512];
    char syms[8192] = " ";
    int nclient, nstatus;
    int nsym = 0;

    (void)state;
    if (s == NULL)
        skip();
    while (fgets(line, sizeof line, s) != NULL) {
        char name[128];
        if (sscanf(line, " %127[a-z0-9_];", name) == 1 && strncmp(name, "ipuof_", 6) == 0) {
            strcat(syms, name);
            strcat(syms, " ");
            nsym++;
        }
    }
    fclose(s);
    nclient = header_exports_listed("client/include/ipuof/client.h", syms);
    nstatus = header_exports_listed("client/include/ipuof/status.h", syms);
    if (nclient < 0 || nstatus < 0)
        skip();
    assert_true(nstatus > 0);
    assert_int_equal(nclient + nstatus, nsym);
}

/* ---- calls without a daemon ----------------------------------------------------------- */

static void
test_unconnected_calls(void **state)
{
    ipuof_client *c = ipuof_client_new();
    struct ipuof_attach_opts opts = {.num_ipus = 1};
    ipuof_status_report *r = (ipuof_status_report *)&opts;
    int ready = 7;
    size_t n = 9;
    const char *comp;

    (void)state;
    assert_non_null(c);
    assert_string_equal(ipuof_client_errmsg(c), "");
    assert_int_equal(ipuof_client_last_error(c, NULL, NULL, NULL), IPUOF_OK);
    assert_error(c, ipuof_attach(c, &opts, NULL, 0, &n), IPUOF_E_CLOSED, "not connected");
    assert_int_equal(n, 0);
    assert_error(c, ipuof_detach(c), IPUOF_E_CLOSED, "ipuof_client_connect");
    assert_error(c, ipuof_health(c, &ready), IPUOF_E_CLOSED, "not connected");
    assert_int_equal(ready, 0);
    assert_error(c, ipuof_status(c, &r), IPUOF_E_CLOSED, "not connected");
    assert_null(r);
    assert_error(c, ipuof_reset(c, IPUOF_RESET_ALL, 0, NULL, 0, &n), IPUOF_E_CLOSED,
                 "not connected");
    ipuof_client_last_error(c, NULL, NULL, &comp);
    assert_string_equal(comp, "client");
    assert_error(c, ipuof_reset(c, 42, 0, NULL, 0, NULL), IPUOF_E_INVAL, "scope");
    assert_error(c, ipuof_reset(c, IPUOF_RESET_PARTITION, 0, "", 0, NULL), IPUOF_E_INVAL,
                 "name");
    assert_error(c, ipuof_attach(c, NULL, NULL, 0, NULL), IPUOF_E_INVAL, NULL);
    assert_error(c, ipuof_status(c, NULL), IPUOF_E_INVAL, NULL);
    assert_error(c, ipuof_client_set_timeouts(c, -1, 5), IPUOF_E_INVAL, "-1");
    assert_int_equal(ipuof_client_set_timeouts(c, 10, 0), IPUOF_OK);
    assert_string_equal(ipuof_client_errmsg(c), "");
    assert_int_equal(ipuof_client_set_name(c, "unit"), IPUOF_OK);
    assert_int_equal(ipuof_client_set_name(c, NULL), IPUOF_OK);
    assert_int_equal(ipuof_client_set_auth_token(c, "t"), IPUOF_OK);
    assert_int_equal(ipuof_client_set_admin_token(c, "a"), IPUOF_OK);
    assert_null(ipuof_partition_name(c));
    assert_int_equal(ipuof_client_is_admin(c), 0);
    assert_string_equal(ipuof_health_reason(c), "");
    assert_error(c, ipuof_client_connect(c, "host:99999"), IPUOF_E_INVAL, "host:99999");
    ipuof_client_free(c);
}

/* A port on 127.0.0.1 that nothing listens on (bound, then closed). */
static int
closed_port(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    close(fd);
    return ntohs(sin.sin_port);
}

static void
test_connect_refused(void **state)
{
    ipuof_client *c = ipuof_client_new();
    char addr[64];
    int port = closed_port();

    (void)state;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    assert_error(c, ipuof_client_connect(c, addr), IPUOF_E_IO, addr);
    assert_non_null(strstr(ipuof_client_errmsg(c), "refused"));
    /* NULL takes IPUOF_SERVER. */
    snprintf(addr, sizeof addr, "localhost:%d", port);
    setenv("IPUOF_SERVER", addr, 1);
    assert_error(c, ipuof_client_connect(c, NULL), IPUOF_E_IO, addr);
    unsetenv("IPUOF_SERVER");
    assert_error(c, ipuof_client_connect(c, "unix:/nonexistent/ipuofd.sock"), IPUOF_E_IO,
                 "unix:/nonexistent/ipuofd.sock");
    /* Still unconnected afterwards. */
    assert_error(c, ipuof_health(c, NULL), IPUOF_E_CLOSED, NULL);
    ipuof_client_free(c);
}

/* ---- the fake server ------------------------------------------------------------------ */

/* The fake of fakesrv.h, with the payload limit these tests announce. */
#define FAKE_MAX_PAYLOAD (1u << 20)

/* Fills e as a recoverable "device" error whose recovery is to attach again. */
static void
device_error(Ipuof__Error *e, int code, const char *msg)
{
    ipuof__error__init(e);
    e->code = (uint32_t)code;
    e->component = (char *)"device";
    e->message = (char *)msg;
    e->error_class = IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE;
    e->recovery = IPUOF__RECOVERY_ACTION__RECOVERY_REATTACH;
}

/* Sends a device_error() answering request id (0: not an answer). */
static void
fs_send_device_error(struct fake *f, int fd, uint64_t id, int code, const char *msg)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Error e;

    device_error(&e, code, msg);
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_ERROR;
    h.error = &e;
    fs_send(f, fd, &h, NULL, 0);
}

/* Sends a Notice carrying a device_error() for IPUs 0 and 1. */
static void
fs_send_notice(struct fake *f, int fd, int code, const char *msg)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Notice n = IPUOF__NOTICE__INIT;
    Ipuof__Error e;
    uint32_t ids[2] = {0, 1};

    device_error(&e, code, msg);
    n.error = &e;
    n.n_ipu_ids = 2;
    n.ipu_ids = ids;
    h.body_case = IPUOF__HEADER__BODY_NOTICE;
    h.notice = &n;
    fs_send(f, fd, &h, NULL, 0);
}

/* Reads the hello of a new_client() handle, checks its fields and answers granting admin
 * rights; 0 on success. */
static int
fs_hello_unit(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HELLO);

    if (req == NULL)
        return -1;
    if (req->hello->protocol_version != IPUOF_PROTOCOL_VERSION || req->hello->pid == 0 ||
        strcmp(req->hello->client_name, "unit") != 0 ||
        strcmp(req->hello->auth_token, "secret") != 0)
        fake_fail(f, "server: hello fields");
    fs_hello_reply(f, fd, req, 1);
    ipuof_frame_header_free(req);
    return 0;
}

/* A handle named "unit" with short timeouts, as fs_hello_unit() expects. */
static ipuof_client *
new_client(int request_ms)
{
    ipuof_client *c = ipuof_client_new();

    assert_non_null(c);
    assert_int_equal(ipuof_client_set_name(c, "unit"), IPUOF_OK);
    assert_int_equal(ipuof_client_set_auth_token(c, "secret"), IPUOF_OK);
    assert_int_equal(ipuof_client_set_timeouts(c, 3000, request_ms), IPUOF_OK);
    return c;
}

/* ---- hello: version error, foreign frame version, success ----------------------------- */

static void
script_version_error(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HELLO);

    if (req == NULL)
        return;
    fs_send_device_error(f, fd, req->request_id, IPUOF_E_VERSION,
                  "this ipuofd speaks protocol version 1 only; upgrade libipuof-client");
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_hello_version_error(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);
    int cls, rec;
    const char *comp;

    (void)state;
    fake_start(&f, script_version_error, FAKE_MAX_PAYLOAD, 0);
    assert_error(c, ipuof_client_connect(c, f.addr), IPUOF_E_VERSION,
                 "this ipuofd speaks protocol version 1 only; upgrade libipuof-client");
    ipuof_client_last_error(c, &cls, &rec, &comp);
    assert_int_equal(cls, IPUOF_ERROR_RECOVERABLE);
    assert_int_equal(rec, IPUOF_RECOVERY_REATTACH);
    assert_string_equal(comp, "device");
    assert_error(c, ipuof_health(c, NULL), IPUOF_E_CLOSED, "not connected");
    ipuof_client_free(c);
    fake_stop(&f);
}

static void
script_foreign_version(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HELLO);
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;

    if (req == NULL)
        return;
    e.code = IPUOF_E_VERSION;
    e.message = (char *)"version 99 here";
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_ERROR;
    h.error = &e;
    fs_send_version(f, fd, &h, NULL, 0, 99);
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_hello_foreign_frame_version(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);

    (void)state;
    fake_start(&f, script_foreign_version, FAKE_MAX_PAYLOAD, 0);
    assert_error(c, ipuof_client_connect(c, f.addr), IPUOF_E_VERSION,
                 "ipuofd speaks protocol version 99, this library speaks version 1");
    ipuof_client_free(c);
    fake_stop(&f);
}

/* HelloReply, then a status request answered with two IPUs and an unasked-for payload,
 * then a health request answered "not ready". */
static void
script_hello_status(struct fake *f, int fd)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__StatusReply sr = IPUOF__STATUS_REPLY__INIT;
    Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;
    Ipuof__IpuInfo a = IPUOF__IPU_INFO__INIT, b = IPUOF__IPU_INFO__INIT;
    Ipuof__Holder holder = IPUOF__HOLDER__INIT;
    Ipuof__IpuInfo *ipus[2] = {&a, &b};
    Ipuof__Header *req;
    static uint8_t junk[100000];

    if (fs_hello_unit(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_STATUS);
    if (req == NULL)
        return;
    a.id = 0;
    a.state = IPUOF__IPU_STATE__IPU_ATTACHED;
    a.tiles = 1472;
    a.memory_capacity_bytes = 943718400;
    a.memory_used_bytes = 13107200;
    a.partition = (char *)"train";
    holder.client_id = 3;
    holder.client_name = (char *)"train.py";
    holder.pid = 4242;
    holder.peer = (char *)"127.0.0.1:40212";
    a.holder = &holder;
    a.loaded = (char *)"mnist";
    a.steps_run = 100;
    b.id = 1;
    b.state = IPUOF__IPU_STATE__IPU_ERROR;
    b.error = (char *)"simulated fault";
    sr.server_version = (char *)"0.1.0";
    sr.uptime_ms = 12345;
    sr.clients = 2;
    sr.waiting = 1;
    sr.n_ipus = 2;
    sr.ipus = ipus;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_STATUS_REPLY;
    h.status_reply = &sr;
    memset(junk, 0xab, sizeof junk);
    fs_send(f, fd, &h, junk, sizeof junk);
    ipuof_frame_header_free(req);

    req = fs_expect(f, fd, IPUOF__HEADER__BODY_HEALTH);
    if (req == NULL)
        return;
    hr.live = 1;
    hr.ready = 0;
    hr.reason = (char *)"inventory still starting";
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
    h.health_reply = &hr;
    fs_send(f, fd, &h, NULL, 0);
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_hello_status_health(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);
    ipuof_status_report *r = NULL;
    struct ipuof_ipu_info in;
    int ready = 1;

    (void)state;
    fake_start(&f, script_hello_status, FAKE_MAX_PAYLOAD, 0);
    assert_int_equal(ipuof_client_connect(c, f.addr), IPUOF_OK);
    assert_string_equal(ipuof_client_errmsg(c), "");
    assert_int_equal(ipuof_client_is_admin(c), 1);
    assert_error(c, ipuof_client_connect(c, f.addr), IPUOF_E_STATE, "already connected");
    assert_error(c, ipuof_client_set_name(c, "x"), IPUOF_E_STATE, "before");

    assert_int_equal(ipuof_status(c, &r), IPUOF_OK);
    assert_non_null(r);
    assert_string_equal(ipuof_status_report_server_version(r), "0.1.0");
    assert_int_equal(ipuof_status_report_uptime_ms(r), 12345);
    assert_int_equal(ipuof_status_report_clients(r), 2);
    assert_int_equal(ipuof_status_report_waiting(r), 1);
    assert_int_equal(ipuof_status_report_ipu_count(r), 2);
    assert_int_equal(ipuof_status_report_ipu(r, 0, &in), IPUOF_OK);
    assert_int_equal(in.state, IPUOF_IPU_ATTACHED);
    assert_int_equal(in.tiles, 1472);
    assert_int_equal(in.memory_used_bytes, 13107200);
    assert_string_equal(in.partition, "train");
    assert_int_equal(in.held, 1);
    assert_string_equal(in.holder_name, "train.py");
    assert_int_equal(in.holder_pid, 4242);
    assert_string_equal(in.holder_peer, "127.0.0.1:40212");
    assert_int_equal(in.holder_client_id, 3);
    assert_string_equal(in.loaded, "mnist");
    assert_int_equal(in.steps_run, 100);
    assert_string_equal(in.error, "");
    assert_int_equal(ipuof_status_report_ipu(r, 1, &in), IPUOF_OK);
    assert_int_equal(in.state, IPUOF_IPU_ERROR);
    assert_int_equal(in.held, 0);
    assert_string_equal(in.holder_name, "");
    assert_string_equal(in.partition, "");
    assert_string_equal(in.error, "simulated fault");
    assert_int_equal(ipuof_status_report_ipu(r, 2, &in), IPUOF_E_INVAL);
    ipuof_status_report_free(r);

    /* The discarded payload left the stream in step: the next request works. */
    assert_int_equal(ipuof_health(c, &ready), IPUOF_OK);
    assert_int_equal(ready, 0);
    assert_string_equal(ipuof_health_reason(c), "inventory still starting");
    ipuof_client_free(c);
    fake_stop(&f);
}

static void
script_too_many(struct fake *f, int fd)
{
    /* The connection limit is announced before the hello is read: request id 0. */
    fs_send_device_error(f, fd, 0, IPUOF_E_TOO_MANY, "ipuofd serves at most 1 client; try later");
}

static void
test_hello_too_many(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);

    (void)state;
    fake_start(&f, script_too_many, FAKE_MAX_PAYLOAD, 0);
    assert_error(c, ipuof_client_connect(c, f.addr), IPUOF_E_TOO_MANY, "at most 1 client");
    ipuof_client_free(c);
    fake_stop(&f);
}

static void
script_close_at_once(struct fake *f, int fd)
{
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HELLO);
    ipuof_frame_header_free(req);
}

static void
test_hello_peer_closes(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);

    (void)state;
    fake_start(&f, script_close_at_once, FAKE_MAX_PAYLOAD, 0);
    assert_error(c, ipuof_client_connect(c, f.addr), IPUOF_E_CLOSED, "closed the connection");
    ipuof_client_free(c);
    fake_stop(&f);
}

static void
script_garbage(struct fake *f, int fd)
{
    static const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HELLO);

    ipuof_frame_header_free(req);
    if (fs_write_all(fd, junk, sizeof junk - 1) != 0)
        fake_fail(f, "server: send failed");
    fs_wait_eof(f, fd);
}

static void
test_hello_garbage(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);

    (void)state;
    fake_start(&f, script_garbage, FAKE_MAX_PAYLOAD, 0);
    assert_error(c, ipuof_client_connect(c, f.addr), IPUOF_E_PROTO, "magic");
    ipuof_client_free(c);
    fake_stop(&f);
}

/* ---- attach, notices, detach ------------------------------------------------------------ */

static void
send_attach_reply(struct fake *f, int fd, uint64_t id, const char *name)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__AttachReply ar = IPUOF__ATTACH_REPLY__INIT;
    uint32_t ids[2] = {0, 1};

    ar.partition_name = (char *)name;
    ar.n_ipu_ids = 2;
    ar.ipu_ids = ids;
    h.request_id = id;
    h.body_case = IPUOF__HEADER__BODY_ATTACH_REPLY;
    h.attach_reply = &ar;
    fs_send(f, fd, &h, NULL, 0);
}

/* Attach (checks the fields, answers after f->arg ms), then: a detach is answered with a
 * notice followed by the error the daemon gives a connection without a partition. */
static void
script_attach_notice_in_flight(struct fake *f, int fd)
{
    Ipuof__Header *req;

    if (fs_hello_unit(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_ATTACH);
    if (req == NULL)
        return;
    if (req->attach->num_ipus != 2 || strcmp(req->attach->partition_name, "p") != 0 ||
        !req->attach->wait || req->attach->wait_timeout_ms != 500)
        fake_fail(f, "server: attach fields");
    usleep((useconds_t)f->arg * 1000);
    send_attach_reply(f, fd, req->request_id, "p");
    ipuof_frame_header_free(req);
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_DETACH);
    if (req == NULL)
        return;
    fs_send_notice(f, fd, IPUOF_E_DEVICE_RESET,
                   "partition 'p' (IPUs 0-1) was reset by an administrator; attach again");
    fs_send_device_error(f, fd, req->request_id, IPUOF_E_NOT_ATTACHED, "not attached");
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_attach_wait_and_notice_in_flight(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(100);
    struct ipuof_attach_opts o = {.num_ipus = 2, .partition_name = "p", .wait = 1,
                                  .wait_timeout_ms = 500};
    unsigned ids[1] = {99};
    size_t n = 0;

    (void)state;
    fake_start(&f, script_attach_notice_in_flight, FAKE_MAX_PAYLOAD, 0);
    f.arg = 300; /* longer than the request timeout, shorter than the wait */
    assert_int_equal(ipuof_client_connect(c, f.addr), IPUOF_OK);
    assert_int_equal(ipuof_attach(c, &o, ids, 1, &n), IPUOF_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 0);
    assert_string_equal(ipuof_partition_name(c), "p");
    assert_error(c, ipuof_attach(c, &o, NULL, 0, NULL), IPUOF_E_ALREADY_ATTACHED, "'p'");
    assert_error(c, ipuof_detach(c), IPUOF_E_DEVICE_RESET, "was reset by an administrator");
    assert_null(ipuof_partition_name(c));
    assert_error(c, ipuof_detach(c), IPUOF_E_NOT_ATTACHED, NULL);
    ipuof_client_free(c);
    fake_stop(&f);
}

/* Attach, then a notice right away while the client is idle; then a health request. */
static void
script_notice_idle(struct fake *f, int fd)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;
    Ipuof__Header *req;

    if (fs_hello_unit(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_ATTACH);
    if (req == NULL)
        return;
    send_attach_reply(f, fd, req->request_id, "q");
    ipuof_frame_header_free(req);
    fs_send_notice(f, fd, IPUOF_E_SHUTDOWN, "ipuofd is shutting down");
    /* No detach may arrive: the client already knows. */
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_HEALTH);
    if (req == NULL)
        return;
    hr.live = 1;
    hr.ready = 1;
    h.request_id = req->request_id;
    h.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
    h.health_reply = &hr;
    fs_send(f, fd, &h, NULL, 0);
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_notice_while_idle(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);
    struct ipuof_attach_opts o = {.num_ipus = 2};
    int ready = 0;

    (void)state;
    fake_start(&f, script_notice_idle, FAKE_MAX_PAYLOAD, 0);
    /* Without a token set, IPUOF_AUTH_TOKEN is sent (fs_hello_unit checks it). */
    assert_int_equal(ipuof_client_set_auth_token(c, NULL), IPUOF_OK);
    setenv("IPUOF_AUTH_TOKEN", "secret", 1);
    assert_int_equal(ipuof_client_connect(c, f.addr), IPUOF_OK);
    unsetenv("IPUOF_AUTH_TOKEN");
    assert_int_equal(ipuof_attach(c, &o, NULL, 0, NULL), IPUOF_OK);
    usleep(100 * 1000);
    assert_error(c, ipuof_detach(c), IPUOF_E_SHUTDOWN, "ipuofd is shutting down");
    assert_null(ipuof_partition_name(c));
    assert_int_equal(ipuof_health(c, &ready), IPUOF_OK);
    assert_int_equal(ready, 1);
    assert_string_equal(ipuof_health_reason(c), "");
    ipuof_client_free(c);
    fake_stop(&f);
}

/* ---- broken exchanges ------------------------------------------------------------------ */

/* Hello, then reads requests and never answers them. */
static void
script_silent(struct fake *f, int fd)
{
    Ipuof__Header *req;

    if (fs_hello_unit(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_STATUS);
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_request_timeout_closes(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(150);
    ipuof_status_report *r = NULL;
    struct timespec t0, t1;
    long ms;

    (void)state;
    fake_start(&f, script_silent, FAKE_MAX_PAYLOAD, 0);
    assert_int_equal(ipuof_client_connect(c, f.addr), IPUOF_OK);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_error(c, ipuof_status(c, &r), IPUOF_E_TIMEOUT, "150 ms");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    print_message("  timed out after %ld ms\n", ms);
    assert_true(ms >= 140 && ms < 2000);
    assert_null(r);
    assert_error(c, ipuof_health(c, NULL), IPUOF_E_CLOSED, "not connected");
    ipuof_client_free(c);
    fake_stop(&f);
}

static void
script_wrong_id(struct fake *f, int fd)
{
    Ipuof__Header *req;

    if (fs_hello_unit(f, fd) != 0)
        return;
    req = fs_expect(f, fd, IPUOF__HEADER__BODY_DETACH);
    if (req == NULL)
        return;
    fs_send_device_error(f, fd, req->request_id + 5, IPUOF_E_NOT_ATTACHED, "not attached");
    ipuof_frame_header_free(req);
    fs_wait_eof(f, fd);
}

static void
test_reply_with_wrong_id(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);
    struct ipuof_attach_opts o = {.num_ipus = 1};

    (void)state;
    fake_start(&f, script_wrong_id, FAKE_MAX_PAYLOAD, 0);
    assert_int_equal(ipuof_client_connect(c, f.addr), IPUOF_OK);
    /* Pretend a partition is held so that the detach goes to the daemon. */
    c->attached = 1;
    c->partition = strdup("x");
    assert_error(c, ipuof_detach(c), IPUOF_E_PROTO, "while request");
    assert_error(c, ipuof_attach(c, &o, NULL, 0, NULL), IPUOF_E_CLOSED, "was closed");
    ipuof_client_free(c);
    fake_stop(&f);
}

/* ---- payloads through the internal call -------------------------------------------------- */

/* Answers two health requests: each reply echoes the request's payload. */
static void
script_echo(struct fake *f, int fd)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;

    if (fs_hello_unit(f, fd) != 0)
        return;
    for (int i = 0; i < 2; i++) {
        Ipuof__Header *req = fs_expect(f, fd, IPUOF__HEADER__BODY_HEALTH);
        if (req == NULL)
            return;
        hr.live = 1;
        hr.ready = 1;
        h.request_id = req->request_id;
        h.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
        h.health_reply = &hr;
        fs_send(f, fd, &h, f->payload, f->payload_len);
        ipuof_frame_header_free(req);
    }
    fs_wait_eof(f, fd);
}

static void
test_payload_roundtrip(void **state)
{
    struct fake f;
    ipuof_client *c = new_client(2000);
    size_t len = 300000;
    uint8_t *out = malloc(len);
    uint8_t *in = malloc(len);
    uint8_t small[16];
    struct ipuof_payload_out pout = {.buf = out, .len = (uint32_t)len};
    struct ipuof_payload_in pin = {.buf = in, .cap = len};
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__HealthRequest hq = IPUOF__HEALTH_REQUEST__INIT;
    Ipuof__Header *reply = NULL;

    (void)state;
    assert_non_null(out);
    assert_non_null(in);
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)(i * 7 + 3);
    fake_start(&f, script_echo, FAKE_MAX_PAYLOAD, 0);
    assert_int_equal(ipuof_client_connect(c, f.addr), IPUOF_OK);
    req.body_case = IPUOF__HEADER__BODY_HEALTH;
    req.health = &hq;
    assert_int_equal(ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_HEALTH_REPLY, 2000, &pout,
                                     &pin, &reply),
                     IPUOF_OK);
    assert_non_null(reply);
    assert_int_equal(pin.len, len);
    assert_memory_equal(in, out, len);
    ipuof_frame_header_free(reply);
    reply = NULL;

    /* A reply payload larger than the buffer: refused, and the stream stays in step. */
    pin.buf = small;
    pin.cap = sizeof small;
    assert_error(c, ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_HEALTH_REPLY, 2000, &pout,
                                    &pin, &reply),
                 IPUOF_E_TOO_LARGE, "payload");
    assert_null(reply);
    assert_int_equal(pin.len, len);
    assert_true(c->fd >= 0);

    /* Over the daemon's announced limit: refused before anything is sent. */
    pout.len = (1u << 20) + 1;
    assert_error(c, ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_HEALTH_REPLY, 2000, &pout,
                                    NULL, &reply),
                 IPUOF_E_TOO_LARGE, "chunks");
    ipuof_client_free(c);
    fake_stop(&f);
    free(out);
    free(in);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_null_handles),
        cmocka_unit_test(test_addr_parse),
        cmocka_unit_test(test_symbol_list_matches_header),
        cmocka_unit_test(test_unconnected_calls),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_hello_version_error),
        cmocka_unit_test(test_hello_foreign_frame_version),
        cmocka_unit_test(test_hello_status_health),
        cmocka_unit_test(test_hello_too_many),
        cmocka_unit_test(test_hello_peer_closes),
        cmocka_unit_test(test_hello_garbage),
        cmocka_unit_test(test_attach_wait_and_notice_in_flight),
        cmocka_unit_test(test_notice_while_idle),
        cmocka_unit_test(test_request_timeout_closes),
        cmocka_unit_test(test_reply_with_wrong_id),
        cmocka_unit_test(test_payload_roundtrip),
    };

    return cmocka_run_group_tests_name("client", tests, NULL, NULL);
}

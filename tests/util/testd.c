/*
 * testd.c — see testd.h.
 */
#include "testd.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "ipuof/client.h"

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int
testd_write_config(struct testd *d, const char *text)
{
    FILE *f = fopen(d->config, "w");

    if (f == NULL)
        return -1;
    fputs(text, f);
    return fclose(f);
}

int
testd_start(struct testd *d, const char *config_text, const char *const *extra)
{
    return testd_start_listen(d, "127.0.0.1:0", config_text, extra);
}

int
testd_start_listen(struct testd *d, const char *listen, const char *config_text,
                   const char *const *extra)
{
    const char *bin = getenv("IPUOFD_BIN");
    char port_file[128];
    const char *argv[40];
    int argc = 0;

    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/ipuofd-test-XXXXXX");
    if (mkdtemp(d->dir) == NULL)
        return -1;
    snprintf(port_file, sizeof port_file, "%s/port", d->dir);
    snprintf(d->admin_path, sizeof d->admin_path, "%s/admin.sock", d->dir);
    snprintf(d->admin_addr, sizeof d->admin_addr, "unix:%s", d->admin_path);
    snprintf(d->config, sizeof d->config, "%s/ipuofd.conf", d->dir);
    snprintf(d->log, sizeof d->log, "%s/log", d->dir);
    argv[argc++] = bin ? bin : "build/bin/ipuofd";
    if (listen != NULL) {
        argv[argc++] = "--listen";
        argv[argc++] = listen;
    }
    argv[argc++] = "--port-file";
    argv[argc++] = port_file;
    argv[argc++] = "--admin-socket";
    argv[argc++] = d->admin_path;
    argv[argc++] = "--foreground";
    if (config_text != NULL) {
        if (testd_write_config(d, config_text) < 0)
            return -1;
        argv[argc++] = "--config";
        argv[argc++] = d->config;
    }
    for (int i = 0; extra != NULL && extra[i] != NULL && argc < 38; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    d->pid = fork();
    if (d->pid < 0)
        return -1;
    if (d->pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { /* stdout too: a daemon left behind must not hold the caller's pipe */
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    for (int waited = 0; waited < 10000; waited += 10) {
        FILE *f = fopen(port_file, "r");
        int status;
        if (f != NULL) {
            int ok = fscanf(f, "%d", &d->port) == 1;
            fclose(f);
            if (ok && d->port > 0) {
                snprintf(d->addr, sizeof d->addr, "127.0.0.1:%d", d->port);
                return 0;
            }
        }
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

int
testd_signal_wait(struct testd *d, int sig, int timeout_ms)
{
    int status;

    if (d->pid <= 0)
        return -1;
    kill(d->pid, sig);
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            if (WIFEXITED(status))
                return WEXITSTATUS(status);
            return 128 + WTERMSIG(status);
        }
        sleep_ms(10);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

struct testd *testd_live;

int
testd_stop_live(void **state)
{
    (void)state;
    if (testd_live != NULL)
        testd_stop(testd_live);
    testd_live = NULL;
    return 0;
}

int
testd_stop(struct testd *d)
{
    char cmd[160];
    int rc = d->pid > 0 ? testd_signal_wait(d, SIGTERM, 10000) : -1;

    if (getenv("IPUOF_TEST_KEEP_LOGS") == NULL && d->dir[0] != '\0') {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", d->dir);
    }
    return rc;
}

int
testd_reset(struct testd *d)
{
    if (d->pid > 0 || d->dir[0] != '\0')
        testd_stop(d);
    memset(d, 0, sizeof *d);
    return 0;
}

int
testd_log_contains(const struct testd *d, const char *needle)
{
    char buf[65536];
    FILE *f = fopen(d->log, "r");
    size_t n;

    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

int
testd_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    if (fd < 0) {
        fprintf(stderr, "testd_free_port: socket: %s\n", strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        fprintf(stderr, "testd_free_port: bind/getsockname: %s\n", strerror(errno));
    else
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

int
raw_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int
raw_send_payload(int fd, const Ipuof__Header *h, const void *payload, size_t plen)
{
    uint8_t *buf;
    size_t len;
    int rc;

    if (ipuof_frame_pack(h, (uint32_t)plen, &buf, &len) != IPUOF_OK)
        return -1;
    rc = write_all(fd, buf, len);
    free(buf);
    if (rc == 0 && plen > 0)
        rc = write_all(fd, payload, plen);
    return rc;
}

int
raw_send(int fd, const Ipuof__Header *h)
{
    return raw_send_payload(fd, h, NULL, 0);
}

void *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        *len = (size_t)n;
    }
    fclose(f);
    return buf;
}

int
raw_hello(int fd, uint32_t version)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Hello hi = IPUOF__HELLO__INIT;

    hi.protocol_version = version;
    hi.client_name = (char *)"raw-test";
    hi.pid = (uint32_t)getpid();
    h.request_id = 1;
    h.body_case = IPUOF__HEADER__BODY_HELLO;
    h.hello = &hi;
    return raw_send(fd, &h);
}

/* Reads exactly len bytes within the deadline; 0, or -1 (with *eof on EOF/reset). */
static int
read_exact(int fd, uint8_t *buf, size_t len, int timeout_ms, int *eof)
{
    while (len > 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;
        if (poll(&p, 1, timeout_ms) <= 0)
            return -1;
        n = recv(fd, buf, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *eof = 1;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

Ipuof__Header *
raw_recv_payload(int fd, int timeout_ms, void **payload, size_t *plen)
{
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head head;
    uint8_t hb[IPUOF_FRAME_HEAD_LEN];
    Ipuof__Header *h = NULL;
    uint8_t *body;
    int eof = 0;

    *payload = NULL;
    *plen = 0;
    ipuof_frame_limits_default(&lim);
    if (read_exact(fd, hb, sizeof hb, timeout_ms, &eof) < 0 ||
        ipuof_frame_head_decode(hb, sizeof hb, &lim, &head, NULL, 0) != IPUOF_OK)
        return NULL;
    body = malloc((size_t)head.header_len + 1);
    if (body == NULL)
        return NULL;
    if (read_exact(fd, body, head.header_len, timeout_ms, &eof) == 0)
        h = ipuof_frame_header_unpack(body, head.header_len, &lim, NULL, 0);
    free(body);
    if (h != NULL && head.payload_len > 0) {
        *payload = malloc(head.payload_len);
        if (*payload == NULL || read_exact(fd, *payload, head.payload_len, timeout_ms, &eof) < 0) {
            free(*payload);
            *payload = NULL;
            ipuof_frame_header_free(h);
            return NULL;
        }
        *plen = head.payload_len;
    }
    return h;
}

Ipuof__Header *
raw_recv(int fd, int timeout_ms, int *eof)
{
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head head;
    uint8_t hb[IPUOF_FRAME_HEAD_LEN];
    Ipuof__Header *h = NULL;
    uint8_t *body;
    int dummy = 0;

    if (eof == NULL)
        eof = &dummy;
    *eof = 0;
    ipuof_frame_limits_default(&lim);
    if (read_exact(fd, hb, sizeof hb, timeout_ms, eof) < 0)
        return NULL;
    if (ipuof_frame_head_decode(hb, sizeof hb, &lim, &head, NULL, 0) != IPUOF_OK)
        return NULL;
    body = malloc((size_t)head.header_len + head.payload_len + 1);
    if (body == NULL)
        return NULL;
    if (read_exact(fd, body, (size_t)head.header_len + head.payload_len, timeout_ms, eof) == 0)
        h = ipuof_frame_header_unpack(body, head.header_len, &lim, NULL, 0);
    free(body);
    return h;
}

int
raw_wait_closed(int fd, int timeout_ms)
{
    uint8_t buf[4096];

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;
        if (poll(&p, 1, timeout_ms) <= 0)
            return 0;
        n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 1;
    }
}

int
raw_session(int port, unsigned nipus)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;
    int fd = raw_connect(port), ok, eof;

    if (fd < 0)
        return -1;
    r = raw_hello(fd, IPUOF_PROTOCOL_VERSION) == 0 ? raw_recv(fd, 5000, &eof) : NULL;
    ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_HELLO_REPLY;
    ipuof_frame_header_free(r);
    if (ok && nipus > 0) {
        a.num_ipus = nipus;
        h.request_id = 2;
        h.body_case = IPUOF__HEADER__BODY_ATTACH;
        h.attach = &a;
        r = raw_send(fd, &h) == 0 ? raw_recv(fd, 5000, &eof) : NULL;
        ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_ATTACH_REPLY;
        ipuof_frame_header_free(r);
    }
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

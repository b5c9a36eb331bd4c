/*
 * ipuof-bench — the C side of the inference benchmark (bench/bench.py drives it).
 *
 * Runs one model two ways: through ipuofd with libipuof-client, and in this process with
 * the simulated-IPU library (sim_compile + sim_exe_run on the same ONNX bytes and options,
 * no network). It reads one command per line on stdin and answers one line on stdout, so
 * the driver can interleave its timings with PyTorch's in another process:
 *
 *   info                          -> ok openblas_threads=N corename=K config=...
 *   data FILE N                   load N samples of 784 float32 (raw, native order)
 *   connect HOST:PORT             connect and attach one IPU
 *   load NAME FILE.onnx MB DI     compile on the daemon and in-process (micro-batch MB,
 *                                 device iterations DI) -> ok daemon_compile_us=.. ...
 *   time daemon|inproc NAME CALLS run CALLS calls, each on the next MB x DI samples
 *                                 -> ok seconds=S samples=N run_us=U (U: the daemon's
 *                                 own time in its simulated IPUs, summed; 0 in-process)
 *   for daemon|inproc NAME SECS   calls until SECS seconds have passed
 *                                 -> ok seconds=S calls=C samples=N run_us=U
 *   dump daemon|inproc NAME OFF FILE
 *                                 one call on samples OFF.., output 0 written raw to FILE
 *   quit
 *
 * Failures answer "error <sentence>". Exit status 0 after quit or end of input, 1 when a
 * command failed.
 */
#include <cblas.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipuof/client.h"
#include "sim.h"

#define SAMPLE_FLOATS 784
#define MAX_MODELS 8

struct bmodel {
    char name[64];
    unsigned mb, di;
    size_t per_call;            /* samples in one call: mb x di */
    ipuof_model *dm;            /* on the daemon */
    struct sim_model *sm;       /* in this process */
    struct sim_exe *se;
};

static ipuof_client *cli;
static float *data;
static size_t n_samples;
static struct bmodel models[MAX_MODELS];
static size_t n_models;
static size_t next_off;         /* samples of the next call start here */

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void reply_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
reply_err(const char *fmt, ...)
{
    va_list ap;

    printf("error ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static struct bmodel *
find_model(const char *name)
{
    for (size_t i = 0; i < n_models; i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

static int
read_file(const char *path, void **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    long n;

    if (f == NULL)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    *buf = malloc(n > 0 ? (size_t)n : 1);
    if (*buf == NULL || fread(*buf, 1, (size_t)n, f) != (size_t)n) {
        free(*buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    *len = (size_t)n;
    return 0;
}

/* The first sample of the next call of per_call samples (wraps around the data set). */
static size_t
take_offset(size_t per_call)
{
    size_t off = next_off;

    if (off + per_call > n_samples)
        off = 0;
    next_off = off + per_call;
    return off;
}

static int
cmd_data(const char *path, const char *count)
{
    void *buf;
    size_t len, n = strtoul(count, NULL, 10);

    if (read_file(path, &buf, &len) != 0 || len < n * SAMPLE_FLOATS * sizeof(float) || n == 0) {
        reply_err("cannot read %s samples from %s", count, path);
        return -1;
    }
    free(data);
    data = buf;
    n_samples = n;
    next_off = 0;
    printf("ok samples=%zu\n", n);
    return 0;
}

static int
cmd_connect(const char *addr)
{
    struct ipuof_attach_opts ao = {0};
    int rc;

    cli = ipuof_client_new();
    if (cli == NULL) {
        reply_err("out of memory");
        return -1;
    }
    ipuof_client_set_name(cli, "ipuof-bench");
    /* A call takes well under 1 s; under valgrind (bench/stream.py --callgrind) far longer:
     * IPUOF_BENCH_TIMEOUT_MS then sets both timeouts. */
    if (getenv("IPUOF_BENCH_TIMEOUT_MS") != NULL)
        ipuof_client_set_timeouts(cli, atoi(getenv("IPUOF_BENCH_TIMEOUT_MS")),
                                  atoi(getenv("IPUOF_BENCH_TIMEOUT_MS")));
    else
        ipuof_client_set_timeouts(cli, 5000, 20000);
    rc = ipuof_client_connect(cli, addr);
    if (rc == IPUOF_OK) {
        ao.num_ipus = 1;
        rc = ipuof_attach(cli, &ao, NULL, 0, NULL);
    }
    if (rc != IPUOF_OK) {
        reply_err("connect/attach: %s (%s)", ipuof_client_errmsg(cli), ipuof_status_name(rc));
        return -1;
    }
    printf("ok partition=%s\n", ipuof_partition_name(cli));
    return 0;
}

static int
cmd_load(const char *name, const char *path, const char *mb_s, const char *di_s)
{
    struct ipuof_model_opts mo = {0};
    struct sim_compile_opts so;
    struct sim_err err;
    struct bmodel *b;
    void *bytes;
    size_t len;
    double t0, t_daemon, t_sim;
    int rc;

    if (n_models == MAX_MODELS || cli == NULL || find_model(name) != NULL) {
        reply_err("cannot load model %s (not connected, duplicate or too many)", name);
        return -1;
    }
    if (read_file(path, &bytes, &len) != 0) {
        reply_err("cannot read %s", path);
        return -1;
    }
    b = &models[n_models];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->mb = (unsigned)strtoul(mb_s, NULL, 10);
    b->di = (unsigned)strtoul(di_s, NULL, 10);
    b->per_call = (size_t)b->mb * b->di;
    if (b->per_call == 0 || b->per_call > n_samples) {
        free(bytes);
        reply_err("model %s: a call of %zu samples does not fit the data set", name, b->per_call);
        return -1;
    }
    mo.name = b->name;
    mo.micro_batch = b->mb;
    mo.device_iterations = b->di;
    mo.no_cache = 1;
    t0 = now_s();
    rc = ipuof_model_compile(cli, bytes, len, &mo, &b->dm);
    t_daemon = now_s() - t0;
    if (rc != IPUOF_OK) {
        free(bytes);
        reply_err("daemon compile: %s (%s)", ipuof_client_errmsg(cli), ipuof_status_name(rc));
        return -1;
    }
    t0 = now_s();
    rc = sim_model_load(bytes, len, &b->sm, &err);
    if (rc == 0) {
        sim_compile_opts_init(&so);
        so.micro_batch = b->mb;
        so.device_iterations = b->di;
        rc = sim_compile(b->sm, &so, &b->se, &err);
    }
    t_sim = now_s() - t0;
    free(bytes);
    if (rc != 0) {
        reply_err("in-process compile: %s", err.msg);
        return -1;
    }
    n_models++;
    printf("ok daemon_compile_s=%.4f inproc_compile_s=%.4f nodes=%zu\n", t_daemon, t_sim,
           sim_exe_node_count(b->se));
    return 0;
}

/* One call of b on the samples from off; *run_us gets the daemon's run time. */
static int
call_daemon(struct bmodel *b, size_t off, uint64_t *run_us)
{
    struct ipuof_tensor in = {0};
    int rc;

    in.dtype = IPUOF_DTYPE_FLOAT;
    in.rank = 4;
    in.dims[0] = (int64_t)b->per_call;
    in.dims[1] = 1;
    in.dims[2] = 28;
    in.dims[3] = 28;
    in.data = data + off * SAMPLE_FLOATS;
    in.bytes = b->per_call * SAMPLE_FLOATS * sizeof(float);
    rc = ipuof_model_run(b->dm, &in, 1);
    if (rc != IPUOF_OK) {
        reply_err("daemon run: %s (%s)", ipuof_client_errmsg(cli), ipuof_status_name(rc));
        return -1;
    }
    *run_us += ipuof_model_run_us(b->dm);
    return 0;
}

/* One in-process call: the inputs are copied into the executable's run buffer (as the
 * daemon receives them there), then the plan runs. */
static int
call_inproc(struct bmodel *b, size_t off)
{
    struct sim_err err;

    memcpy(sim_exe_input_buffer(b->se, 0), data + off * SAMPLE_FLOATS,
           b->per_call * SAMPLE_FLOATS * sizeof(float));
    if (sim_exe_run(b->se, &err) != 0) {
        reply_err("in-process run: %s", err.msg);
        return -1;
    }
    return 0;
}

static int
cmd_time(const char *how, const char *name, const char *calls_s)
{
    struct bmodel *b = find_model(name);
    unsigned long calls = strtoul(calls_s, NULL, 10);
    int daemon = strcmp(how, "daemon") == 0;
    uint64_t run_us = 0;
    double t0, t;

    if (b == NULL || calls == 0 || (!daemon && strcmp(how, "inproc") != 0)) {
        reply_err("bad time command for %s %s", how, name);
        return -1;
    }
    t0 = now_s();
    for (unsigned long i = 0; i < calls; i++) {
        size_t off = take_offset(b->per_call);
        if ((daemon ? call_daemon(b, off, &run_us) : call_inproc(b, off)) != 0)
            return -1;
    }
    t = now_s() - t0;
    printf("ok seconds=%.6f samples=%zu run_us=%llu\n", t, b->per_call * calls,
           (unsigned long long)run_us);
    return 0;
}

/* Calls until at least min_s seconds have passed: "ok seconds=S calls=C samples=N run_us=U". */
static int
cmd_for(const char *how, const char *name, const char *secs_s)
{
    struct bmodel *b = find_model(name);
    double min_s = strtod(secs_s, NULL), t0, t;
    int daemon = strcmp(how, "daemon") == 0;
    unsigned long calls = 0;
    uint64_t run_us = 0;

    if (b == NULL || !(min_s > 0.0 && min_s < 3600.0) || (!daemon && strcmp(how, "inproc") != 0)) {
        reply_err("bad for command for %s %s", how, name);
        return -1;
    }
    t0 = now_s();
    do {
        size_t off = take_offset(b->per_call);
        if ((daemon ? call_daemon(b, off, &run_us) : call_inproc(b, off)) != 0)
            return -1;
        calls++;
        t = now_s() - t0;
    } while (t < min_s);
    printf("ok seconds=%.6f calls=%lu samples=%zu run_us=%llu\n", t, calls, b->per_call * calls,
           (unsigned long long)run_us);
    return 0;
}

static int
cmd_dump(const char *how, const char *name, const char *off_s, const char *path)
{
    struct bmodel *b = find_model(name);
    size_t off = strtoul(off_s, NULL, 10), bytes;
    int daemon = strcmp(how, "daemon") == 0;
    uint64_t run_us = 0;
    const void *out;
    struct ipuof_tensor t;
    struct sim_io_info io;
    FILE *f;

    if (b == NULL || off + b->per_call > n_samples) {
        reply_err("bad dump command for %s %s", how, name);
        return -1;
    }
    if (daemon) {
        if (call_daemon(b, off, &run_us) != 0)
            return -1;
        ipuof_model_output(b->dm, 0, &t);
        out = t.data;
        bytes = t.bytes;
    } else {
        if (call_inproc(b, off) != 0)
            return -1;
        sim_exe_output_info(b->se, 0, &io);
        out = sim_exe_output_buffer(b->se, 0);
        bytes = io.run_bytes;
    }
    f = fopen(path, "wb");
    if (f == NULL || fwrite(out, 1, bytes, f) != bytes) {
        if (f != NULL)
            fclose(f);
        reply_err("cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fclose(f);
    printf("ok bytes=%zu\n", bytes);
    return 0;
}

int
main(void)
{
    char line[4096];
    int status = 0;

    while (fgets(line, sizeof line, stdin) != NULL) {
        char *argv[8];
        int argc = 0, rc = 0;

        for (char *tok = strtok(line, " \t\r\n"); tok != NULL && argc < 8;
             tok = strtok(NULL, " \t\r\n"))
            argv[argc++] = tok;
        if (argc == 0)
            continue;
        if (strcmp(argv[0], "quit") == 0)
            break;
        if (strcmp(argv[0], "info") == 0)
            printf("ok openblas_threads=%d corename=%s config=%s\n", openblas_get_num_threads(),
                   openblas_get_corename(), openblas_get_config());
        else if (strcmp(argv[0], "data") == 0 && argc == 3)
            rc = cmd_data(argv[1], argv[2]);
        else if (strcmp(argv[0], "connect") == 0 && argc == 2)
            rc = cmd_connect(argv[1]);
        else if (strcmp(argv[0], "load") == 0 && argc == 5)
            rc = cmd_load(argv[1], argv[2], argv[3], argv[4]);
        else if (strcmp(argv[0], "time") == 0 && argc == 4)
            rc = cmd_time(argv[1], argv[2], argv[3]);
        else if (strcmp(argv[0], "for") == 0 && argc == 4)
            rc = cmd_for(argv[1], argv[2], argv[3]);
        else if (strcmp(argv[0], "dump") == 0 && argc == 5)
            rc = cmd_dump(argv[1], argv[2], argv[3], argv[4]);
        else {
            reply_err("unknown command or wrong argument count: %s", argv[0]);
            rc = -1;
        }
        if (rc != 0)
            status = 1;
        fflush(stdout);
    }
    for (size_t i = 0; i < n_models; i++) {
        ipuof_model_free(models[i].dm);
        sim_exe_free(models[i].se);
        sim_model_free(models[i].sm);
    }
    ipuof_client_free(cli);
    free(data);
    return status;
}

/*
 * allreduce.c — the driver of bench/allreduce.sh: one rank of a pod/coll.h all-reduce, or
 * one end of a plain TCP transfer (the link's rate, measured the same way the all-reduce
 * moves its bytes: one stream per direction).
 *
 *   allreduce rank R SIZE DIR BIND BYTES ITERS ORDER   ORDER: ring | rank
 *       forms a communicator of SIZE through a directory store DIR, listening on BIND;
 *       one warm-up all-reduce of BYTES of float32, then ITERS timed ones; prints
 *       "allreduce BYTES SECONDS" per timed iteration (rank 0 only) and checks the sums.
 *   allreduce tcp-recv BIND PORT        accepts one connection, reads to EOF, answers
 *                                        with the byte count (8 bytes), exits
 *   allreduce tcp-send HOST PORT BYTES  sends BYTES, shuts down its side, waits for the
 *                                        count; prints "tcp BYTES SECONDS"
 * Exit 0, or 1 with a sentence on stderr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

#define CHUNK (1u << 20)

static double
now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int
die(const char *what)
{
    fprintf(stderr, "allreduce: %s: %s\n", what, strerror(errno));
    return 1;
}

static int
tcp_recv(const char *bind_ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
    char *buf = malloc(CHUNK);
    uint64_t got = 0;

    if (ls < 0 || !buf || inet_pton(AF_INET, bind_ip, &a.sin_addr) != 1)
        return die("tcp-recv setup");
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1))
        return die("tcp-recv bind/listen");
    int s = accept(ls, NULL, NULL);
    if (s < 0)
        return die("tcp-recv accept");
    for (;;) {
        ssize_t r = read(s, buf, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return die("tcp-recv read");
        if (r == 0)
            break;
        got += (uint64_t)r;
    }
    if (write(s, &got, sizeof got) != (ssize_t)sizeof got)
        return die("tcp-recv answer");
    close(s);
    close(ls);
    free(buf);
    return 0;
}

static int
tcp_send(const char *host, int port, uint64_t bytes)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    char *buf = calloc(1, CHUNK);
    int s = -1;
    uint64_t got = 0;

    if (!buf || inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return die("tcp-send setup");
    /* the receiver may still be starting */
    for (int tries = 0; tries < 500; tries++) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
            break;
        close(s);
        s = -1;
        usleep(10000);
    }
    if (s < 0)
        return die("tcp-send connect");
    double t0 = now_s();
    for (uint64_t left = bytes; left;) {
        ssize_t w = write(s, buf, left < CHUNK ? (size_t)left : CHUNK);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return die("tcp-send write");
        left -= (uint64_t)w;
    }
    shutdown(s, SHUT_WR);
    if (read(s, &got, sizeof got) != (ssize_t)sizeof got || got != bytes) {
        fprintf(stderr, "allreduce: tcp-send: the receiver counted %llu of %llu bytes\n",
                (unsigned long long)got, (unsigned long long)bytes);
        return 1;
    }
    printf("tcp %llu %.6f\n", (unsigned long long)bytes, now_s() - t0);
    close(s);
    free(buf);
    return 0;
}

static int
rank_main(int rank, int size, const char *dir, const char *bind, uint64_t bytes, int iters,
          const char *order)
{
    struct pod_store_file f = {dir};
    struct pod_store st;
    struct pod_coll *c = NULL;
    char err[1024];
    size_t n = (size_t)(bytes / sizeof(float));
    float *b = malloc(n * sizeof(float) + 1);
    int rc = 1;

    pod_store_file_fill(&f, &st);
    if (!b) {
        fprintf(stderr, "allreduce: out of memory for %llu bytes\n", (unsigned long long)bytes);
        return 1;
    }
    if (pod_coll_open(&c, &st, "bench", rank, size, bind, 60000, err, sizeof err) ||
        pod_coll_set_sum_order(c, strcmp(order, "rank") == 0 ? POD_COLL_SUM_RANK_ORDER : POD_COLL_SUM_RING,
                               err, sizeof err)) {
        fprintf(stderr, "allreduce: rank %d: %s\n", rank, err);
        goto out;
    }
    for (int it = -1; it < iters; it++) {
        for (size_t i = 0; i < n; i++)
            b[i] = (float)((rank + 1) * (int)(i % 31));
        if (pod_coll_barrier(c, err, sizeof err)) {
            fprintf(stderr, "allreduce: rank %d barrier: %s\n", rank, err);
            goto out;
        }
        double t0 = now_s();
        if (pod_coll_allreduce_f32(c, b, n, err, sizeof err)) {
            fprintf(stderr, "allreduce: rank %d: %s\n", rank, err);
            goto out;
        }
        double dt = now_s() - t0;
        for (size_t i = 0; i < n; i += 4097)
            if (b[i] != (float)(size * (size + 1) / 2 * (int)(i % 31))) {
                fprintf(stderr, "allreduce: rank %d: element %zu is %g\n", rank, i, b[i]);
                goto out;
            }
        if (rank == 0 && it >= 0)
            printf("allreduce %llu %.6f\n", (unsigned long long)(n * sizeof(float)), dt);
    }
    rc = 0;
out:
    pod_coll_close(c);
    free(b);
    return rc;
}

int
main(int argc, char **argv)
{
    if (argc == 9 && strcmp(argv[1], "rank") == 0)
        return rank_main(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5], strtoull(argv[6], NULL, 10),
                         atoi(argv[7]), argv[8]);
    if (argc == 4 && strcmp(argv[1], "tcp-recv") == 0)
        return tcp_recv(argv[2], atoi(argv[3]));
    if (argc == 5 && strcmp(argv[1], "tcp-send") == 0)
        return tcp_send(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
    fprintf(stderr, "usage: allreduce rank R SIZE DIR BIND BYTES ITERS ring|rank\n"
                    "       allreduce tcp-recv BIND PORT\n"
                    "       allreduce tcp-send HOST PORT BYTES\n");
    return 1;
}

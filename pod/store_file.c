/*
 * store_file.c — a rendezvous store for pod/coll.h in a directory, for ranks that are
 * separate processes (tests, bench/allreduce.sh): one file per key, written under a
 * temporary name and renamed into place, read by polling.
 */
#include "coll.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* dir/key with '/' in key turned into '%'. 0, or -1 when it does not fit in len. */
static int
file_path(char *out, size_t len, const char *dir, const char *key, const char *suffix)
{
    int w = snprintf(out, len, "%s/%s%s", dir, key, suffix);
    if (w < 0 || (size_t)w >= len)
        return -1;
    for (char *p = out + strlen(dir) + 1; *p; p++)
        if (*p == '/')
            *p = '%';
    return 0;
}

static double
file_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* pod_store.set: writes dir/key.tmp.PID then renames it to dir/key. */
static int
file_set(void *ctx, const char *key, const void *v, size_t n, char *err, size_t errlen)
{
    const struct pod_store_file *f = ctx;
    char path[4096], tmp[4096], sfx[64];
    snprintf(sfx, sizeof(sfx), ".tmp.%ld", (long)getpid());
    if (file_path(path, sizeof(path), f->dir, key, "") || file_path(tmp, sizeof(tmp), f->dir, key, sfx)) {
        snprintf(err, errlen, "file store: the path for key '%s' in %s is too long", key, f->dir);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "file store: cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    const char *p = v;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "file store: cannot write %s: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "file store: cannot store %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* pod_store.get: polls for dir/key until timeout_ms, then reads it whole. */
static int
file_get(void *ctx, const char *key, void **v, size_t *n, int timeout_ms,
         char *err, size_t errlen)
{
    const struct pod_store_file *f = ctx;
    char path[4096];
    if (file_path(path, sizeof(path), f->dir, key, "")) {
        snprintf(err, errlen, "file store: the path for key '%s' in %s is too long", key, f->dir);
        return -1;
    }
    double deadline = file_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int fd;
    for (;;) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            break;
        if (errno != ENOENT) {
            snprintf(err, errlen, "file store: cannot open %s: %s", path, strerror(errno));
            return -1;
        }
        if (file_now_ms() >= deadline) {
            snprintf(err, errlen, "file store: %s did not appear within %d ms", path, timeout_ms);
            return 1;
        }
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    struct stat sb;
    char *buf = NULL;
    int rc = -1;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "file store: cannot stat %s: %s", path, strerror(errno));
        goto out;
    }
    if ((unsigned long long)sb.st_size > POD_STORE_VALUE_MAX) {
        snprintf(err, errlen, "file store: %s holds %lld bytes, more than the %u a value may have",
                 path, (long long)sb.st_size, POD_STORE_VALUE_MAX);
        goto out;
    }
    size_t len = (size_t)sb.st_size, got = 0;
    buf = malloc(len ? len : 1);
    if (!buf) {
        snprintf(err, errlen, "file store: out of memory reading %s", path);
        goto out;
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "file store: cannot read %s: %s", path,
                     r == 0 ? "file shorter than its size" : strerror(errno));
            goto out;
        }
        got += (size_t)r;
    }
    *v = buf;
    *n = len;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

void
pod_store_file_fill(struct pod_store_file *f, struct pod_store *st)
{
    st->ctx = f;
    st->set = file_set;
    st->get = file_get;
}
